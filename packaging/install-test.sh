#!/usr/bin/env bash
# `make test-packages`, part 2: the deb (and the rpm) installed in a throwaway Debian root.
#
#   bash packaging/install-test.sh TARGET_DIR
#
# A `debootstrap --variant=minbase bookworm` root, built once from the Debian mirror this
# machine's apt uses and cached as TARGET_DIR/pkgtest/bookworm-minbase.tar, is unpacked
# afresh for each run; the test chroots into it with /proc mounted (Landlock works there:
# same kernel) and checks, with `apt install ./landwall_*.deb`:
#   - a login shell's `command -v claude` is the shim, for root and for a user;
#   - the shim execs a stand-in real `claude` later on PATH, walled in (no_new_privs, /etc
#     not writable even for root);
#   - a user whose ~/.profile puts ~/.local/bin first (the native installer's case) gets
#     the shim back with `landwall shim enable --user`, and the shim runs ~/.local/bin/claude;
#   - the configuration is valid, the service's user and spool exist;
#   - the conffile keeps a local edit across a reinstall;
#   - remove keeps only the conffiles, purge leaves nothing but the system user (Debian
#     policy keeps users);
# then the rpm the same way with the host's rpm (--root, --nodeps: the root's rpm database
# is empty): its %post links, a login shell's `claude`, and `rpm -e`.
# Needs root (debootstrap, chroot, mount).
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

TARGET_DIR=$(realpath "$1")
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PKG=$TARGET_DIR/packages
WORK=$TARGET_DIR/pkgtest
SUITE=bookworm
CACHE=$WORK/$SUITE-minbase.tar
R=$WORK/root
SHIMDIR=/usr/lib/landwall/bin

t0=$SECONDS
step() { echo "== install-test [$((SECONDS - t0))s]: $*"; }
fail() { echo "install-test: FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root (debootstrap, chroot and mount need it)"
shopt -s nullglob
debs=("$PKG"/landwall_*.deb)
rpms=("$PKG"/landwall-*.rpm)
shopt -u nullglob
[ ${#debs[@]} -eq 1 ] || fail "expected one deb in $PKG (make deb)"
[ ${#rpms[@]} -eq 1 ] || fail "expected one rpm in $PKG (make rpm)"
deb=${debs[0]}
rpm=${rpms[0]}

# The first Debian mirror serving $SUITE in this machine's apt sources (one-line and
# deb822 formats); never written down anywhere.
mirror() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v s="$SUITE" '$1 == "deb" {
                i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == s) { print $i; exit }
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v s="$SUITE" '
            function flush() { if (deb && suite && uri) { print uri; exit } deb = suite = 0; uri = "" }
            /^[ \t]*$/ { flush(); next }
            /^#/ { next }
            tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) suite = 1 }
            tolower($1) == "uris:" { uri = $2 }
            END { flush() }' "$f"
    done
}

cleanup() {
    if mountpoint -q "$R/proc" 2>/dev/null; then umount "$R/proc"; fi
}
trap cleanup EXIT

# Runs a command in the root with a clean environment.
in_root() {
    chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root TERM=dumb LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}
# A login shell of root, or of USER with `as USER`.
login() { in_root bash -lc "$1"; }
as() { in_root runuser -l "$1" -c "$2"; }
expect() { # expect WHAT GOT WANTED
    [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
    echo "ok: $1 = $3"
}
# Every path of the root outside the package manager's own state, logs and caches, with
# type, mode and owner, and a checksum of each file in /etc and /usr.
snapshot() {
    (
        cd "$R"
        find . -xdev \( -path ./proc -o -path ./dev -o -path ./tmp -o -path ./var/lib/dpkg \
            -o -path ./var/lib/apt -o -path ./var/cache -o -path ./var/log -o -path ./var/lib/rpm \) -prune \
            -o -printf '%p %y %m %u:%g\n'
        find ./etc ./usr -xdev -type f ! -name 'passwd*' ! -name 'group*' ! -name 'shadow*' \
            ! -name 'gshadow*' ! -name 'ld.so.cache' -print0 | sort -z | xargs -0 sha256sum
    ) | sort
}

step "the $SUITE minbase root"
if [ ! -s "$CACHE" ]; then
    m=$(mirror | sed -n 1p)
    [ -n "$m" ] || fail "no Debian mirror for $SUITE in /etc/apt/sources.list*"
    echo "debootstrap --variant=minbase $SUITE from $m (cached in $CACHE)"
    build=$WORK/debootstrap
    rm -rf "$build"
    mkdir -p "$WORK"
    debootstrap --variant=minbase "$SUITE" "$build" "$m" >"$WORK/debootstrap.log" 2>&1 ||
        { tail -n 30 "$WORK/debootstrap.log" >&2; fail "debootstrap failed (log: $WORK/debootstrap.log)"; }
    tar -C "$build" -cf "$CACHE.tmp" . && mv "$CACHE.tmp" "$CACHE"
    rm -rf "$build"
fi
cleanup
rm -rf "$R"
mkdir -p "$R"
tar -C "$R" -xf "$CACHE"
mount -t proc proc "$R/proc"
for d in null zero full random urandom tty; do
    [ -c "$R/dev/$d" ] || fail "the root has no /dev/$d"
done

step "stand-ins and users"
# The real agent the shim must find: later on PATH than the shim. It reports whether it
# runs walled in: no_new_privs set, and /etc not writable even for root.
cat >"$R/usr/local/bin/claude" <<'EOF'
#!/bin/sh
echo "real claude: $*"
grep '^NoNewPrivs:' /proc/self/status
if touch /etc/landwall-probe 2>/dev/null; then echo "etc: writable"; else echo "etc: denied"; fi
EOF
chmod 755 "$R/usr/local/bin/claude"
in_root useradd -m -s /bin/bash alice
in_root useradd -m -s /bin/bash bob
# bob installed Claude Code with the native installer: ~/.local/bin/claude, which
# Debian's ~/.profile puts first on PATH.
in_root runuser -u bob -- sh -c 'mkdir -p ~/.local/bin ~/proj && printf "#!/bin/sh\necho \"bob native claude: \$*\"\ngrep ^NoNewPrivs: /proc/self/status\n" > ~/.local/bin/claude && chmod 755 ~/.local/bin/claude'
in_root runuser -u alice -- mkdir -p /home/alice/proj
mkdir -p "$R/root/proj"
before_native=$(sha256sum "$R/home/bob/.local/bin/claude")
snapshot >"$WORK/before.txt"

step "apt install ./$(basename "$deb")"
cp "$deb" "$R/tmp/"
in_root apt-get install -y -q "/tmp/$(basename "$deb")" </dev/null >"$WORK/apt-install.log" 2>&1 ||
    { cat "$WORK/apt-install.log" >&2; fail "apt install"; }
grep -q '^Status: install ok installed' <<<"$(in_root dpkg -s landwall)" || fail "not installed"

step "login shells find the shim"
expect "root: command -v claude" "$(login 'command -v claude')" "$SHIMDIR/claude"
expect "alice: command -v claude" "$(as alice 'command -v claude')" "$SHIMDIR/claude"
expect "alice: PATH starts with" "$(as alice 'echo "${PATH%%:*}"')" "$SHIMDIR"
expect "alice: profile.d does not add it twice" \
    "$(as alice '. /etc/profile.d/landwall.sh; echo "$PATH" | tr : "\n" | grep -c landwall')" 1

step "the shim execs the real claude, walled"
out=$(login 'cd /root/proj && claude hello world') || fail "root: claude: $out"
expect "root: stand-in ran" "$(sed -n 1p <<<"$out")" "real claude: hello world"
expect "root: no_new_privs" "$(sed -n 2p <<<"$out" | tr -d ' \t')" "NoNewPrivs:1"
expect "root: /etc from inside the wall" "$(sed -n 3p <<<"$out")" "etc: denied"
[ ! -e "$R/etc/landwall-probe" ] || fail "the agent wrote /etc"
out=$(as alice 'cd ~/proj && claude -p hi') || fail "alice: claude: $out"
expect "alice: stand-in ran" "$(sed -n 1p <<<"$out")" "real claude: -p hi"
expect "alice: no_new_privs" "$(sed -n 2p <<<"$out" | tr -d ' \t')" "NoNewPrivs:1"

step "~/.local/bin first: landwall shim enable --user"
expect "bob: command -v claude before" "$(as bob 'command -v claude')" /home/bob/.local/bin/claude
as bob 'landwall shim enable --user'
grep -q 'already has the line' <<<"$(as bob 'landwall shim enable --user')" || fail "enable is not idempotent"
expect "bob: command -v claude after" "$(as bob 'command -v claude')" "$SHIMDIR/claude"
expect "bob: interactive bash" "$(in_root runuser -u bob -- env -i HOME=/home/bob TERM=dumb \
    PATH=/home/bob/.local/bin:/usr/bin:/bin bash -ic 'command -v claude' 2>/dev/null)" "$SHIMDIR/claude"
out=$(as bob 'cd ~/proj && claude go') || fail "bob: claude: $out"
expect "bob: the shim runs ~/.local/bin/claude" "$(sed -n 1p <<<"$out")" "bob native claude: go"
expect "bob: walled" "$(sed -n 2p <<<"$out" | tr -d ' \t')" "NoNewPrivs:1"
as bob 'landwall shim disable --user' >/dev/null
expect "bob: command -v claude after disable" "$(as bob 'command -v claude')" /home/bob/.local/bin/claude
expect "bob: ~/.local/bin/claude untouched" "$(sha256sum "$R/home/bob/.local/bin/claude")" "$before_native"
grep -rq landwall-shim-path "$R/home/bob/" && fail "disable left a line in bob's startup files"

step "configuration, user, spool, man pages"
login 'landwall doctor' >"$WORK/doctor.txt" || { cat "$WORK/doctor.txt" >&2; fail "landwall doctor"; }
grep -q '^config .*/etc/landwall/landwall.toml: valid' "$WORK/doctor.txt" || fail "the conffile is not valid"
in_root getent passwd landwall >/dev/null || fail "no user landwall"
expect "spool" "$(in_root stat -c '%U:%G %a' /var/spool/landwall)" "landwall:landwall 750"
expect "daemon's home" "$(in_root stat -c '%U:%G %a' /var/lib/landwall)" "landwall:landwall 700"
expect "drain.env" "$(grep -v '^#' "$R/etc/landwall/drain.env" | grep .)" "LANDWALL_DRAIN_SANDBOX=1"
for f in /usr/share/man/man1/landwall.1.gz /usr/share/man/man8/landwall-drain.8.gz \
    /usr/share/bash-completion/completions/landwall /usr/lib/systemd/system/landwall-drain.service; do
    [ -s "$R$f" ] || fail "$f is missing"
done

step "the conffile survives a reinstall with local edits"
sed -i 's/^# min_abi = 3$/min_abi = 3/' "$R/etc/landwall/landwall.toml"
grep -qx 'min_abi = 3' "$R/etc/landwall/landwall.toml" || fail "could not edit the conffile"
in_root apt-get install -y -q --reinstall "/tmp/$(basename "$deb")" </dev/null >"$WORK/apt-reinstall.log" 2>&1 ||
    { cat "$WORK/apt-reinstall.log" >&2; fail "apt reinstall"; }
grep -qx 'min_abi = 3' "$R/etc/landwall/landwall.toml" || fail "the reinstall lost the local edit"
grep -q '^config .*/etc/landwall/landwall.toml: valid' <<<"$(login 'landwall doctor')" || fail "edited conffile invalid"

step "apt remove: the conffiles stay, nothing else"
in_root apt-get remove -y -q landwall </dev/null >"$WORK/apt-remove.log" 2>&1 ||
    { cat "$WORK/apt-remove.log" >&2; fail "apt remove"; }
grep -q '^Status: deinstall ok config-files' <<<"$(in_root dpkg -s landwall)" || fail "not in config-files state"
[ ! -e "$R/usr/bin/landwall" ] && [ ! -e "$R$SHIMDIR" ] || fail "remove left the binaries or the shims"
[ -f "$R/etc/landwall/landwall.toml" ] && [ -f "$R/etc/profile.d/landwall.sh" ] || fail "remove took conffiles"
expect "root: command -v claude after remove" "$(login 'command -v claude')" /usr/local/bin/claude

step "apt purge: nothing left but the system user"
in_root apt-get purge -y -q landwall </dev/null >"$WORK/apt-purge.log" 2>&1 ||
    { cat "$WORK/apt-purge.log" >&2; fail "apt purge"; }
in_root dpkg -s landwall >/dev/null 2>&1 && fail "still known to dpkg after purge"
in_root getent passwd landwall >/dev/null || fail "purge removed the system user (Debian keeps it)"
snapshot >"$WORK/after.txt"
# The agents' state directories that the launches above made in the users' homes (the
# private home creates ~/.claude and ~/.cache before the wall goes up), the empty files and
# directories of Claude Code's configuration and shared state a launch makes there so that it can hold them
# read-only (common/src/profile.rs), or cover with a directory of the project's own (its per-session
# directories), the agent's own .claude.json a first launch makes ({}) so that it has a private copy, and each user's record of what is theirs
# (~/.local/state/landwall) are the users' data, as the agent's own files there would be: a
# purge leaves homes alone. Nothing else may differ.
state='^\./(root|home/[^/]+)/(\.claude|\.claude/(\.claude\.json|CLAUDE\.md|settings\.json|agents|commands|output-styles|rules|skills|projects(/[^/ ]+)?|session-env|shell-snapshots|backups|file-history|ide|jobs|paste-cache|plans|sessions|tasks|teams|todos)|\.cache|\.local|\.local/state|\.local/state/landwall(/[^ ]*)?) [df] '
grep -Ev "$state" "$WORK/after.txt" >"$WORK/after-homes.txt"
grep -Ev "$state" "$WORK/before.txt" >"$WORK/before-homes.txt"
diff -u "$WORK/before-homes.txt" "$WORK/after-homes.txt" || fail "the root differs after purge"
echo "ok: the root is as before the install (but for the user landwall in /etc/passwd and /etc/group)"

step "rpm -i --root (the host's rpm; %pre, %post) and rpm -e"
rpm --root "$R" --initdb
# Debian's rpm warns that it is not Debian's package manager; that is the point here.
rpm --root "$R" -i --nodeps "$rpm" 2>&1 | grep -v -e 'use Alien instead' -e 'know what you are doing' || true
rpm --root "$R" -q landwall >/dev/null || fail "the rpm is not installed"
# The purge above removed the home; the user stayed, so %post alone makes it again.
expect "rpm: daemon's home" "$(in_root stat -c '%U:%G %a' /var/lib/landwall)" "landwall:landwall 700"
expect "rpm: command -v claude" "$(as alice 'command -v claude')" "$SHIMDIR/claude"
out=$(as alice 'cd ~/proj && claude rpm') || fail "rpm: claude: $out"
expect "rpm: stand-in ran" "$(sed -n 1p <<<"$out")" "real claude: rpm"
rpm --root "$R" -e landwall 2>&1 | grep -v -e "use Alien instead" -e "know what you are doing" || true
for p in /usr/bin/landwall "$SHIMDIR" /usr/lib/landwall /etc/landwall /usr/share/doc/landwall; do
    [ ! -e "$R$p" ] || fail "rpm -e left $p"
done

step "done"
