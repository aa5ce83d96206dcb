#!/usr/bin/env bash
# `make test-kernels`: boot real Debian kernels under qemu and run landwall's Landlock checks
# inside each, run the same checks on the host's kernel, print a table kernel x test x result,
# and exit 1 if any expectation in tests/kernels/expect fails.
#
# Columns:
#   host             the host's kernel, natively (6.18, Landlock ABI 7 on the project's machines)
#   6.1              the newest linux-image-6.1.0-*-amd64 apt offers (Landlock ABI 2)
#   6.12             the newest linux-image-6.12.*-amd64 apt offers (Landlock ABI 6)
#   7.x              the newest linux-image-7.N.*+debM-amd64, N >= 1 (Landlock ABI 9 or later:
#                    RESOLVE_UNIX), from trixie-backports: split packages, the image in
#                    linux-binary-*, the modules in linux-modules-*, config in linux-base-*
#   6.12-nolandlock  the same 6.12 kernel booted with an lsm= list that leaves Landlock out
#
# Each guest: qemu's software emulation (-accel tcg -smp 1; the host's KVM does not run stock
# kernels), the host's root shared read-only over 9p under a tmpfs overlay, the checkout and
# the target dir mounted at their host paths, and tests/kernels/guest.sh run by
# tests/kernels/pid1.pl (see tests/kernels/init). Guests boot in parallel, one per core.
# Kernels come from the system's apt sources where they carry them, else from a private apt
# configuration ($TARGET_DIR/kernels/apt/SUITE/) naming the configured Debian mirror's
# <codename>-backports (6.12) or trixie-backports (7.x); the system's configuration is left
# alone. Kernel packages and what is extracted from them are cached in $TARGET_DIR/kernels/
# (<series>/ and debs/); logs of the last run are in $TARGET_DIR/kernels/logs/.
#
# Environment:
#   CARGO         cargo (default: cargo)
#   TARGET_DIR    the cargo target dir (default: $CARGO_TARGET_DIR, else target/)
#   LWK_ONLY      columns to run, space-separated (default: all five)
#   LWK_TIMEOUT   seconds a guest may run (default: 1500: a TCG guest on a loaded 2-core
#                 machine takes about 12 minutes; the limit is for a hang)
#   LWK_REFRESH=1 pick the newest kernel packages again instead of the cached ones
# Needs root (apt-get), qemu-system-x86, busybox-static, kmod, xz-utils, zstd and cpio: `make
# test-kernels` installs them.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
export LC_ALL=C

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
cd "$ROOT"
CARGO=${CARGO:-cargo}
TARGET_DIR=${TARGET_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}}
mkdir -p "$TARGET_DIR"
TARGET_DIR=$(cd "$TARGET_DIR" && pwd -P)
KDIR=$TARGET_DIR/kernels
LOGS=$KDIR/logs
TIMEOUT=${LWK_TIMEOUT:-1500}
ALL_COLS=(host 6.1 6.12 7.x 6.12-nolandlock)
read -r -a COLS <<<"${LWK_ONLY:-${ALL_COLS[*]}}"
declare -A PROFILE=([host]=host [6.1]=abi2 [6.12]=abi6 [7.x]=abi9 [6.12-nolandlock]=nolandlock)
declare -A SERIES=([6.1]=6.1 [6.12]=6.12 [7.x]=7.x [6.12-nolandlock]=6.12)
# Debian package names: bookworm's 6.1.0-N-amd64; 6.12.N+debM-amd64 (bookworm-security or
# -backports) or 6.12.N-amd64; 7.N.M+debK-amd64 from 7.1 on (Landlock ABI 9; trixie-backports
# or sid). The newest match wins (sort -V).
declare -A PKG_RE=(
    [6.1]='^linux-image-6\.1\.0-[0-9]+-amd64$'
    [6.12]='^linux-image-6\.12\.[0-9]+(\+deb[0-9]+)?-amd64$'
    [7.x]='^linux-image-7\.([1-9]|[1-9][0-9])\.[0-9]+(\+deb[0-9]+)?-amd64$'
)
# Where a series is found when the system's sources do not carry it: a suite of the
# configured Debian mirror, in a private apt configuration (%s: this system's codename).
declare -A APT_SUITE=([6.12]=%s-backports [7.x]=trixie-backports)
# What the guest's init loads (with their dependencies; built-in ones are skipped).
MODULES=(virtio_pci 9pnet_virtio 9p overlay loop)
SUITES=(shim escape drain protect)
T0=$SECONDS

say() { echo "test-kernels: $*"; }
die() {
    echo "test-kernels: $*" >&2
    exit 1
}
for c in "${COLS[@]}"; do [ -n "${PROFILE[$c]:-}" ] || die "unknown column '$c' in LWK_ONLY (known: ${ALL_COLS[*]})"; done
booting() { for c in "${COLS[@]}"; do [ "$c" = host ] || return 0; done; return 1; }

# The guest gets paths on the kernel command line and in comma/=-separated lists.
for p in "$ROOT" "$TARGET_DIR"; do
    [[ $p =~ ^[A-Za-z0-9._/+-]+$ ]] || die "the path '$p' has characters the guest's command line cannot carry; use a checkout path of letters, digits and ._/+-"
done

# ---- Tools.

if booting; then
    missing=()
    for t in qemu-system-x86_64:qemu-system-x86 modinfo:kmod xz:xz-utils zstd:zstd cpio:cpio \
        dpkg-deb:dpkg apt-get:apt perl:perl-base; do
        command -v "${t%%:*}" >/dev/null || missing+=("${t#*:}")
    done
    BUSYBOX=/bin/busybox
    if [ ! -x "$BUSYBOX" ] || ldd "$BUSYBOX" >/dev/null 2>&1; then missing+=(busybox-static); fi
    [ ${#missing[@]} = 0 ] || die "missing: ${missing[*]}; run \`make test-kernels\` (it installs them) or apt-get install ${missing[*]}"
fi

# ---- Build, and find the test binaries.

mkdir -p "$KDIR" "$LOGS"
rm -f "$LOGS"/*
RUN=$KDIR/run
rm -rf "$RUN"
mkdir -p "$RUN"
say "building (cargo build --workspace; cargo test --workspace --no-run)"
(cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR "$CARGO" build --workspace -q) || die "cargo build failed"
(cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR "$CARGO" test --workspace --no-run --message-format=json -q \
    >"$RUN/cargo.json" 2>"$LOGS/cargo-test-no-run.log") || {
    cat "$LOGS/cargo-test-no-run.log" >&2
    die "cargo test --no-run failed"
}
# A snapshot of the built binaries and test binaries in $RUN/debug (the test binaries find
# the binaries from their own path, deps/..), so that a rebuild while the guests run cannot
# swap a binary under them.
BINDIR=$RUN/debug
mkdir -p "$BINDIR/deps"
for b in "$TARGET_DIR"/debug/*; do
    [ ! -f "$b" ] || [ ! -x "$b" ] || cp "$b" "$BINDIR/"
done
for b in landwall landwall-drain lw-helper; do [ -x "$BINDIR/$b" ] || die "$TARGET_DIR/debug/$b was not built"; done
declare -A TESTBIN=()
while read -r name exe; do
    for s in "${SUITES[@]}"; do
        [ "$name" != "$s" ] || { cp "$exe" "$BINDIR/deps/" && TESTBIN[$name]=$BINDIR/deps/$(basename "$exe"); }
    done
done < <(sed -n 's/.*"target":{"kind":\["test"\][^}]*"name":"\([^"]*\)".*"executable":"\([^"]*\)".*/\1 \2/p' "$RUN/cargo.json")

# ---- The plan: tests/kernels/expect, with `*` expanded from the test binaries' lists.

declare -A EXPECT=() REASON=() LISTED=() CELL=() SEEN_ROW=() ABSENT_SUITE=()
ROWS=()
for s in "${SUITES[@]}"; do
    if [ ! -f "$ROOT/tests/tests/$s.rs" ]; then
        ABSENT_SUITE[$s]=1
    elif [ -n "${TESTBIN[$s]:-}" ]; then
        while read -r t; do LISTED[$s:$t]=1; done < <("${TESTBIN[$s]}" --list --format terse 2>/dev/null | sed -n 's/: test$//p')
    fi
done
add_row() {
    [ -n "${SEEN_ROW[$1]:-}" ] || { ROWS+=("$1"); SEEN_ROW[$1]=1; }
}
while read -r cols suite test expect reason; do
    case $cols in '' | \#*) continue ;; esac
    [ -z "${ABSENT_SUITE[$suite]:-}" ] || continue
    [ "$suite" = guest ] || [ -n "${TESTBIN[$suite]:-}" ] || die "no test binary for tests/tests/$suite.rs"
    IFS=, read -r -a profiles <<<"$cols"
    if [ "$test" = '*' ]; then
        names=$("${TESTBIN[$suite]}" --list --format terse | sed -n 's/: test$//p')
    else
        names=${test#!}
    fi
    for n in $names; do
        for p in "${profiles[@]}"; do
            key="$p|$suite:$n"
            if [ "${test:0:1}" = '!' ]; then
                EXPECT[$key]=skip
            elif [ "${EXPECT[$key]:-}" != skip ]; then
                EXPECT[$key]=${expect:-pass}
            fi
            REASON[$key]=${reason:-}
        done
        add_row "$suite:$n"
    done
done <"$HERE/expect"
for s in "${!ABSENT_SUITE[@]}"; do say "note: tests/tests/$s.rs is not in this checkout; its rows are left out"; done

# Writes the plan of column $1 (the runnable rows: "suite test" lines) to $RUN/$1.plan.
write_plan() {
    local col=$1 p=${PROFILE[$1]} row key
    : >"$RUN/$col.plan"
    for row in "${ROWS[@]}"; do
        key="$p|$row"
        case ${EXPECT[$key]:-} in '' | skip) continue ;; esac
        if [ "${row%%:*}" != guest ] && [ -z "${LISTED[$row]:-}" ]; then
            CELL[$col|$row]=stale
            continue
        fi
        echo "${row%%:*} ${row#*:}" >>"$RUN/$col.plan"
    done
}
# guest.sh's arguments for column $1, one a line.
guest_args() {
    local s
    echo "${PROFILE[$1]}"
    echo "$RUN/$1.plan"
    echo "bindir=$BINDIR"
    for s in "${SUITES[@]}"; do [ -z "${TESTBIN[$s]:-}" ] || echo "$s=${TESTBIN[$s]}"; done
}
for c in "${COLS[@]}"; do
    write_plan "$c"
    guest_args "$c" >"$RUN/$c.argv"
done

# ---- Kernels: pick, download, extract (cached).

# apt's options: none for the system's sources (system_apt), or those of a private
# configuration (private_apt). APT_NAME names which, for apt_update.
APT_OPTS=()
APT_NAME=system
declare -A APT_UPDATED=()
apt_update() {
    [ -z "${APT_UPDATED[$APT_NAME]:-}" ] || return 0
    say "apt-get update ($APT_NAME)"
    apt-get "${APT_OPTS[@]}" update -qq >/dev/null || say "warning: apt-get update ($APT_NAME) failed"
    APT_UPDATED[$APT_NAME]=1
}
system_apt() {
    APT_OPTS=()
    APT_NAME=system
}
# private_apt SERIES: a private apt configuration in $KDIR/apt/SUITE/ with the configured
# Debian mirror's suite for SERIES (APT_SUITE: <codename>-backports for 6.12, trixie-backports
# for 7.x), for a system whose sources do not carry that series. The system's own
# configuration is left alone; the mirror is read from /etc/apt/sources.list*, and the
# suite's signatures are checked against the system's trusted keys.
private_apt() {
    local s=$1 mirror codename suite dir
    suite=${APT_SUITE[$s]:-}
    [ -n "$suite" ] || return 1
    mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }')
    [ -n "$mirror" ] || mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($i !~ /security/) { print $i; exit } else break } }')
    if [[ $suite == *%s* ]]; then
        codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
        [ -n "$codename" ] || return 1
        suite=${suite/\%s/$codename}
    fi
    [ -n "$mirror" ] || return 1
    dir=$KDIR/apt/$suite
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    echo "deb $mirror $suite main" >"$dir/sources.list"
    say "$s: not in the configured sources; trying $suite from the configured mirror ($mirror)"
    APT_OPTS=(-o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/none"
        -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache")
    APT_NAME=$suite
    apt_update
}
# pick SERIES: the newest package named like PKG_RE[SERIES] in the current apt sources.
pick() {
    local re=${PKG_RE[$1]}
    apt-cache "${APT_OPTS[@]}" search --names-only "$re" 2>/dev/null |
        awk '{ print $1 }' | { grep -E "$re" || true; } | sort -V | tail -n 1
}
# parts PKG: the packages that hold kernel package PKG's files, one a line: PKG, and the
# packages of the same kernel version it depends on. From Linux 7 (trixie-backports, sid),
# linux-image-V is an empty package depending on linux-binary-V (vmlinuz), linux-modules-V
# (the modules) and linux-base-V (config, modules.order, modules.builtin); 6.1's and 6.12's
# linux-image-V holds everything itself.
parts() {
    echo "$1"
    apt-cache "${APT_OPTS[@]}" show "$1" 2>/dev/null | sed -n '/^$/q; s/^Depends: //p' |
        tr ',|' '\n\n' | awk -v pkg="$1" -v v="${1#linux-image-}" '{
            n = $1; sub(/^linux-[a-z]+-/, "", n)
            if (n == v && $1 != pkg && !seen[$1]++) print $1 }'
}
# download SERIES PKG: the .deb files of PKG's parts in $KDIR/debs (fetched unless there
# already), one path a line.
download() {
    local p deb
    for p in $(parts "$2"); do
        deb=$(ls "$KDIR/debs/${p}"_*.deb 2>/dev/null | tail -n 1 || true)
        if [ -z "$deb" ]; then
            say "$1: downloading $p" >&2
            (cd "$KDIR/debs" && apt-get "${APT_OPTS[@]}" -o APT::Sandbox::User=root download -q "$p" >/dev/null) || return 1
            deb=$(ls "$KDIR/debs/${p}"_*.deb | tail -n 1)
        fi
        echo "$deb"
    done
}
# Decompresses module file $1 to $2.
unpack_module() {
    case $1 in
    *.xz) xz -dc "$1" >"$2" ;;
    *.zst) zstd -qdc "$1" >"$2" ;;
    *.gz) gzip -dc "$1" >"$2" ;;
    *) cp "$1" "$2" ;;
    esac
}
prepare_series() {
    local s=$1 dir=$KDIR/$1 pkg debs deb tmp ver moddir d f
    if [ -s "$dir/ready" ] && [ -z "${LWK_REFRESH:-}" ]; then
        say "$s: cached $(cat "$dir/ready")"
        return
    fi
    system_apt
    pkg=$(pick "$s")
    [ -n "$pkg" ] || { apt_update; pkg=$(pick "$s"); }
    [ -n "$pkg" ] || { private_apt "$s" && pkg=$(pick "$s"); } || true
    [ -n "$pkg" ] || die "$s: no package matching ${PKG_RE[$s]} in apt's sources${APT_SUITE[$s]:+ nor in ${APT_SUITE[$s]//%s/<codename>}}"
    mkdir -p "$KDIR/debs"
    debs=$(download "$s" "$pkg") || {
        # The archive keeps a window of builds: the lists may name one that is gone.
        APT_UPDATED[$APT_NAME]=
        apt_update
        pkg=$(pick "$s")
        debs=$(download "$s" "$pkg")
    } || die "$s: apt-get download $pkg (or a part of it) failed"
    tmp=$KDIR/tmp-$s
    rm -rf "$tmp" "$dir"
    mkdir -p "$tmp" "$dir/modules"
    for deb in $debs; do
        say "$s: extracting $(basename "$deb")"
        dpkg-deb -x "$deb" "$tmp"
    done
    moddir=
    for d in "$tmp"/lib/modules/* "$tmp"/usr/lib/modules/*; do
        [ ! -d "$d" ] || { moddir=$d; break; }
    done
    [ -n "$moddir" ] || die "$s: no lib/modules/VERSION in $debs"
    ver=$(basename "$moddir")
    # vmlinuz and config: in /boot (6.1, 6.12), or in the modules directory (7.x's split
    # packages).
    for f in vmlinuz config; do
        for d in "$tmp/boot/$f-$ver" "$moddir/$f" ""; do [ -z "$d" ] || [ ! -f "$d" ] || break; done
        [ -n "$d" ] || die "$s: no /boot/$f-$ver or $f in lib/modules/$ver in $pkg's packages"
        cp "$d" "$dir/$f"
    done
    # The modules and their dependencies (modinfo's `depends`), dependencies first.
    declare -A modpath=() builtin=() seen=()
    local rel b order=()
    while read -r rel; do b=${rel##*/}; b=${b%%.ko*}; modpath[${b//-/_}]=$rel; done <"$moddir/modules.order"
    while read -r rel; do b=${rel##*/}; b=${b%%.ko*}; builtin[${b//-/_}]=1; done <"$moddir/modules.builtin"
    resolve() {
        local m=${1//-/_} f d
        [ -z "${seen[$m]:-}" ] || return 0
        seen[$m]=1
        [ -z "${builtin[$m]:-}" ] || return 0
        [ -n "${modpath[$m]:-}" ] || die "$s: module $m is neither built in nor in modules.order"
        f=
        for d in "$moddir/${modpath[$m]%%.ko*}".ko*; do [ ! -f "$d" ] || f=$d; done
        [ -n "$f" ] || die "$s: no file for module $m (${modpath[$m]})"
        for d in $(modinfo -F depends "$f" | tr , ' '); do resolve "$d"; done
        unpack_module "$f" "$dir/modules/$m.ko"
        order+=("$m.ko")
    }
    for b in "${MODULES[@]}"; do resolve "$b"; done
    printf '%s\n' "${order[@]}" >"$dir/modules/order"
    rm -rf "$tmp"
    echo "$pkg ($ver)" >"$dir/ready"
    say "$s: $pkg, modules: ${order[*]:-none}"
}
build_initramfs() {
    local s=$1 stage=$KDIR/$1/initramfs
    rm -rf "$stage"
    mkdir -p "$stage"/{bin,dev,proc,sys,modules}
    cp "$BUSYBOX" "$stage/bin/busybox"
    cp "$HERE/init" "$stage/init"
    chmod 755 "$stage/init"
    cp "$KDIR/$s/modules/"* "$stage/modules/"
    (cd "$stage" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1 >"$KDIR/$s/initramfs.cpio.gz")
}

if booting; then
    declare -A NEED=()
    for c in "${COLS[@]}"; do [ "$c" = host ] || NEED[${SERIES[$c]}]=1; done
    for s in 6.1 6.12 7.x; do
        [ -z "${NEED[$s]:-}" ] || { prepare_series "$s"; build_initramfs "$s"; }
    done
fi

# ---- Run: the host natively, each guest under qemu; one per core, longest first.

# Interrupted: stop the guests this run started (their pid files, checked to be qemu).
stop_guests() {
    local f pid
    for f in "$RUN"/*.qemu.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        if grep -qa qemu-system "/proc/$pid/cmdline" 2>/dev/null; then kill "$pid"; fi
    done
    exit 130
}
trap stop_guests INT TERM

# The lsm= list of the kernel's default (CONFIG_LSM) without landlock.
lsm_without_landlock() {
    sed -n 's/^CONFIG_LSM="\(.*\)"$/\1/p' "$1" | tr , '\n' | grep -vx landlock | paste -sd, -
}

run_col() {
    local col=$1 start=$SECONDS
    if [ "$col" = host ]; then
        mapfile -t args <"$RUN/host.argv"
        local rc=0
        LWK_RESULTS=$LOGS/host.results bash "$HERE/guest.sh" "${args[@]}" >"$LOGS/host.console" 2>&1 </dev/null || rc=$?
        echo "LWK-STATUS $rc" >>"$LOGS/host.results"
    else
        local s=${SERIES[$col]} shares="project=$ROOT" virtfs
        virtfs=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
            -virtfs "local,path=$ROOT,mount_tag=project,security_model=none,readonly=on,multidevs=remap")
        case $TARGET_DIR/ in
        "$ROOT"/*) ;;
        *)
            shares+=",target=$TARGET_DIR"
            virtfs+=(-virtfs "local,path=$TARGET_DIR,mount_tag=target,security_model=none,readonly=on,multidevs=remap")
            ;;
        esac
        local append="console=ttyS0 panic=-1 quiet LWK_PROJECT=$ROOT LWK_SHARES=$shares LWK_ARGV=$RUN/$col.argv"
        [ "$col" != 6.12-nolandlock ] || append+=" lsm=$(lsm_without_landlock "$KDIR/$s/config")"
        : >"$LOGS/$col.results"
        timeout -k 10 "$TIMEOUT" qemu-system-x86_64 -accel tcg -smp 1 -m 2048 \
            -nodefaults -no-user-config -display none -no-reboot \
            -pidfile "$RUN/$col.qemu.pid" \
            -serial "file:$LOGS/$col.console" -serial "file:$LOGS/$col.results" \
            -kernel "$KDIR/$s/vmlinuz" -initrd "$KDIR/$s/initramfs.cpio.gz" -append "$append" \
            "${virtfs[@]}" >"$LOGS/$col.qemu.log" 2>&1 </dev/null ||
            echo "qemu: status $? (124: killed after ${TIMEOUT}s)" >>"$LOGS/$col.qemu.log"
        rm -f "$RUN/$col.qemu.pid"
    fi
    echo $((SECONDS - start)) >"$RUN/$col.seconds"
}

ORDER=()
for c in 6.12 7.x 6.1 host 6.12-nolandlock; do
    for x in "${COLS[@]}"; do [ "$x" != "$c" ] || ORDER+=("$c"); done
done
SLOTS=$(nproc)
say "running ${ORDER[*]} ($SLOTS at a time; guests: qemu TCG, -smp 1)"
running=0
for c in "${ORDER[@]}"; do
    if [ "$running" -ge "$SLOTS" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    run_col "$c" &
    running=$((running + 1))
done
wait || true

# ---- Results.

declare -A STATUS=() ABI=()
for c in "${COLS[@]}"; do
    f=$LOGS/$c.results
    [ -f "$f" ] || continue
    while read -r tag a b; do
        case $tag in
        LWK-RESULT) [ -n "${CELL[$c|$a]:-}" ] || CELL[$c|$a]=$b ;;
        LWK-STATUS) STATUS[$c]=$a ;;
        LWK-INFO) [ "${a%%=*}" != abi ] || ABI[$c]=${a#abi=} ;;
        esac
    done < <(tr -d '\r' <"$f")
done

passed=0 failed=0 skipped=0
declare -a BAD=()
cell() { # column row -> what the table shows; counts
    local col=$1 row=$2 want got
    want=${EXPECT[${PROFILE[$col]}|$row]:-}
    got=${CELL[$col|$row]:-}
    case $want in
    '') echo "." ;;
    skip)
        skipped=$((skipped + 1))
        echo skip
        ;;
    *)
        case $want/$got in
        pass/pass | xfail/fail)
            passed=$((passed + 1))
            [ "$want" = pass ] && echo pass || echo xfail
            ;;
        */stale) echo STALE ;;
        */) echo MISSING ;;
        xfail/pass) echo XPASS ;;
        *) echo FAIL ;;
        esac
        ;;
    esac
}

echo
say "kernels"
for c in "${COLS[@]}"; do
    if [ "$c" = host ]; then
        what="$(uname -r), natively"
    else
        what="$(cat "$KDIR/${SERIES[$c]}/ready") under qemu TCG"
        [ "$c" != 6.12-nolandlock ] || what+=", lsm=$(lsm_without_landlock "$KDIR/${SERIES[$c]}/config")"
    fi
    printf '  %-16s %s; Landlock ABI %s; %ss; guest.sh status %s\n' "$c" "$what" \
        "${ABI[$c]:-?}" "$(cat "$RUN/$c.seconds" 2>/dev/null || echo '?')" "${STATUS[$c]:-MISSING (see logs/$c.console)}"
done
echo
w=0
for row in "${ROWS[@]}"; do [ ${#row} -le "$w" ] || w=${#row}; done
printf "%-${w}s" "test"
for c in "${COLS[@]}"; do printf '  %-15s' "$c"; done
echo
for row in "${ROWS[@]}"; do
    line=$(printf "%-${w}s" "$row")
    any=
    for c in "${COLS[@]}"; do
        v=$(cell "$c" "$row")
        [ "$v" = . ] || any=1
        case $v in FAIL | XPASS | MISSING | STALE) BAD+=("$c|$row|$v") ;; esac
        line+=$(printf '  %-15s' "$v")
    done
    [ -z "$any" ] || echo "$line"
done
# Counts again, outside the subshells of $(cell ...).
passed=0 failed=0 skipped=0
for row in "${ROWS[@]}"; do
    for c in "${COLS[@]}"; do cell "$c" "$row" >/dev/null; done
done
failed=${#BAD[@]}
echo
for c in "${COLS[@]}"; do
    [ -n "${STATUS[$c]:-}" ] || say "$c: guest.sh did not finish (no status marker); console: $LOGS/$c.console"
done
if [ "$failed" -gt 0 ]; then
    say "failed:"
    for b in "${BAD[@]}"; do
        IFS='|' read -r c row v <<<"$b"
        echo "  [$c] $row: $v${REASON[${PROFILE[$c]}|$row]:+ (${REASON[${PROFILE[$c]}|$row]})}"
        name=${row#*:}
        if [ "${row%%:*}" = guest ]; then
            tr -d '\r' <"$LOGS/$c.console" 2>/dev/null | awk -v h="== $row" '$0 == h { p = 1; next } /^== / { p = 0 } p' | head -n 40 | sed 's/^/      /'
        else
            tr -d '\r' <"$LOGS/$c.console" 2>/dev/null | awk -v h="---- $name stdout ----" '$0 == h { p = 1; next } /^---- |^failures:$/ { p = 0 } p' | head -n 40 | sed 's/^/      /'
        fi
    done
    say "logs: $LOGS"
fi
say "$((SECONDS - T0))s in all"
echo "test-kernels: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
