#!/usr/bin/env bash
# The wall's cost, every way of running a job side by side in one run:
#
#   direct    the command itself
#   shim      the landwall shim: a `claude` link to landwall (one per job for the file system
#             jobs: lw-find, lw-grep, lw-git, with `real` set in the configuration), the full
#             default policy, a configuration file present, in a linked git worktree
#   run       `landwall run -- CMD`
#   minimal   bench/minimal-sandboxer.c: one Landlock layer with equivalent paths and nothing
#             else (the kernel sample's interface: LL_FS_RO, LL_FS_RW), built with gcc -O2
#   minimal-sc  the same plus landwall's seccomp filter, which every system call then passes
#   minimal-same  the minimal sandboxer with landwall's own rules, path for path (from
#             `landwall policy --json` in the same place; read-only and list-only rules
#             read-only, the rest read-write): the kernel's cost of that policy, for the
#             launches
#   bwrap     bubblewrap with an equivalent policy: read-only binds of /usr /etc /opt /sys,
#             /proc and /dev, read-write binds of the worktree, /tmp and $HOME
#   shim-dyn  the shim again, from the dynamically linked release build (when LANDWALL_DYNAMIC
#             is set), to show what the static build saves
#
# Workloads: launch of /bin/true; `find /usr -type f`; `grep -r` over a 20k-file tree;
# `git status` in a 20k-file repository; the launch with 500 extra `read_only` rules. Each
# workload runs BENCH_ROUNDS rounds of hyperfine over all its commands (the order rotates
# each round), as root and as an unprivileged user (BENCH_USER, default landwall-test,
# created as a system user if missing); wall-clock medians are over all rounds. Then
# bench/cpu-runs.c runs the commands in turn again (BENCH_CPU_RUNS times for the launches,
# BENCH_ROUNDS x BENCH_FS_RUNS for the others) for the CPU time and page faults of each run
# (wait4's rusage: perf's task-clock), which load elsewhere on the machine disturbs much
# less than wall clock. Then: the peak RSS of the shim
# (GNU time's %M: the maximum over the process's life, before and after exec), and one
# launch under valgrind --tool=callgrind, whose instruction count is checked against
# bench/callgrind-baseline.txt (more than 25% above fails; BENCH_CALLGRIND_RECORD=1 records
# the current figures instead).
#
# Writes bench/results.md (with bench/drain-results.md folded in) and bench/launch-ratios.svg.
# Needs root, hyperfine, bwrap, gcc, python3, valgrind and GNU time (`make bench` installs
# them); generated data lives in BENCH_DATA (default /var/tmp/landwall-bench-data) and is
# reused by later runs.
#
#   LANDWALL=target/x86_64-unknown-linux-gnu/release/landwall bash bench/wall.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
ROUNDS=${BENCH_ROUNDS:-5}
LAUNCH_RUNS=${BENCH_LAUNCH_RUNS:-300}
FS_RUNS=${BENCH_FS_RUNS:-5}
CPU_RUNS=${BENCH_CPU_RUNS:-1000}
BENCH_USER=${BENCH_USER:-landwall-test}
DATA=${BENCH_DATA:-/var/tmp/landwall-bench-data}
LANDWALL=${LANDWALL:-}
LANDWALL_DYNAMIC=${LANDWALL_DYNAMIC:-}
CALLGRIND_LIMIT=1.25

die() { echo "bench/wall.sh: $*" >&2; exit 1; }
say() { echo "== $*"; }

[ "$(id -u)" -eq 0 ] || die "run as root: it runs every workload as root and as $BENCH_USER"
for t in hyperfine bwrap gcc python3 valgrind git; do
  command -v "$t" >/dev/null || die "$t is missing (make bench installs it)"
done
[ -x /usr/bin/time ] || die "GNU time (/usr/bin/time) is missing (make bench installs it)"
if [ -z "$LANDWALL" ] || [ ! -x "$LANDWALL" ]; then
  die "set LANDWALL to a release build of landwall (make bench does)"
fi
# Someone's experiment once replaced /bin/true with a script on this machine: refuse to
# measure anything but the real one.
[ "$(head -c 4 /bin/true | tail -c 3)" = ELF ] || die "/bin/true is not an ELF executable; reinstall coreutils"
id "$BENCH_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$BENCH_USER"

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
S=$(mktemp -d /var/tmp/landwall-bench.XXXXXX)
chmod 755 "$S"
cleanup() { rm -rf "$S"; }
trap cleanup EXIT
OUT=$S/out
mkdir -p "$OUT"

# --- generated data, reused between runs -------------------------------------------------
if [ ! -e "$DATA/.complete-v1" ]; then
  say "generating $DATA (20k-file tree, 20k-file git repository, 500 directories)"
  rm -rf "$DATA"
  mkdir -p "$DATA"
  python3 - "$DATA" <<'EOF'
import os, random, sys
data = sys.argv[1]
rnd = random.Random(42)
words = ["wall", "agent", "kernel", "rule", "path", "policy", "shim", "exec", "read",
         "write", "tree", "grep", "status", "commit", "layer", "launch", "rights", "deny"]
def text(n):
    return "\n".join(" ".join(rnd.choice(words) for _ in range(12)) for _ in range(n)) + "\n"
for top, lines in (("tree", 30), ("repo", 4)):
    for i in range(20):
        for j in range(25):
            d = os.path.join(data, top, f"d{i:02}", f"s{j:02}")
            os.makedirs(d)
            for k in range(40):
                with open(os.path.join(d, f"f{k:02}.txt"), "w") as f:
                    f.write(text(lines))
# A few files hold the needle, so that grep exits 0.
for i in range(0, 20, 5):
    with open(os.path.join(data, "tree", f"d{i:02}", "s00", "f00.txt"), "a") as f:
        f.write("needle-4242\n")
for i in range(500):
    os.makedirs(os.path.join(data, "rules", f"d{i:03}"))
EOF
  git -C "$DATA/repo" init -q
  git -C "$DATA/repo" add -A
  git -C "$DATA/repo" -c user.name=bench -c user.email=bench@landwall.invalid commit -q -m data
  git -C "$DATA/repo" update-index --refresh >/dev/null
  chmod -R a+rX "$DATA"
  touch "$DATA/.complete-v1"
fi

# --- the bench's own installation ------------------------------------------------------
mkdir -p "$S/bin" "$S/shims" "$S/shims-dyn" "$S/agents" "$S/etc" "$S/etc500"
install -m 0755 "$LANDWALL" "$S/bin/landwall"
for a in claude lw-find lw-grep lw-git; do ln -s ../bin/landwall "$S/shims/$a"; done
DYN=
if [ -n "$LANDWALL_DYNAMIC" ] && [ -x "$LANDWALL_DYNAMIC" ]; then
  install -m 0755 "$LANDWALL_DYNAMIC" "$S/bin/landwall-dyn"
  ln -s ../bin/landwall-dyn "$S/shims-dyn/claude"
  DYN=1
fi
ln -s /bin/true "$S/agents/claude-real"
gcc -O2 -o "$S/bin/minimal-sandboxer" "$BENCH/minimal-sandboxer.c"
ln "$S/bin/minimal-sandboxer" "$S/bin/minimal-sandboxer-seccomp"
ln "$S/bin/minimal-sandboxer" "$S/bin/minimal-sandboxer-same"
gcc -O2 -o "$S/bin/cpu-runs" "$BENCH/cpu-runs.c"
ABI=$("$S/bin/minimal-sandboxer" --abi)

cat >"$S/etc/landwall.toml" <<'EOF'
# The benchmark's configuration: read and validated on every launch.
env_allow = ["BENCH_*"]

[agents.lw-find]
real = "/usr/bin/find"

[agents.lw-grep]
real = "/usr/bin/grep"

[agents.lw-git]
real = "/usr/bin/git"
EOF
{
  echo "# The benchmark's configuration with 500 extra read-only rules."
  echo "read_only = ["
  for i in $(seq -f %03g 0 499); do echo "  \"$DATA/rules/d$i\","; done
  echo "]"
} >"$S/etc500/landwall.toml"
chmod 644 "$S/etc/landwall.toml" "$S/etc500/landwall.toml"

# A linked worktree, as landwall recommends running agents in.
git init -q "$S/repo"
echo bench >"$S/repo/README"
git -C "$S/repo" add README
git -C "$S/repo" -c user.name=bench -c user.email=bench@landwall.invalid commit -q -m init
git -C "$S/repo" worktree add -q "$S/wt" 2>/dev/null
WT=$S/wt
chmod -R a+rX "$S"

for m in root user; do
  mkdir -p "$S/home-$m"
  printf '[safe]\n\tdirectory = *\n' >"$S/home-$m/.gitconfig"
done
chown -R "$BENCH_USER:" "$S/home-user"
# Each mode's $XDG_RUNTIME_DIR, private as logind makes it: a login session has one, and the
# shim keeps the names of /etc's links there between launches.
install -d -m 700 "$S/run-root"
install -d -m 700 -o "$BENCH_USER" -g "$BENCH_USER" "$S/run-user"
mkdir -p "$OUT/user"
chown "$BENCH_USER:" "$OUT/user"

# Real directories for the minimal sandboxer and bwrap: what landwall grants read-only and
# exists here; merged-/usr links are links in bwrap too.
RO_DIRS=()
BWRAP_RO=()
for d in /usr /etc /opt /sys /bin /sbin /lib /lib32 /lib64 /libx32; do
  if [ -L "$d" ]; then
    BWRAP_RO+=(--symlink "$(readlink "$d")" "$d")
  elif [ -d "$d" ]; then
    RO_DIRS+=("$d")
    [ "$d" = /sys ] || BWRAP_RO+=(--ro-bind "$d" "$d")
  fi
done
RO_DIRS+=(/proc)
BWRAP_RO+=(--ro-bind /sys /sys --proc /proc --dev /dev)
EXTRA_RULES=()
for i in $(seq -f %03g 0 499); do EXTRA_RULES+=("$DATA/rules/d$i"); done

join() { local IFS=:; echo "$*"; }

# One workload: mode, name, cwd, config, extra read-only dirs ("rules" or ""), hyperfine runs
# per round, CPU-time runs, the shim to use, then the command. Runs ROUNDS hyperfine
# invocations and one cpu-runs as the mode's user and leaves JSON and TSV in $OUT/<mode>/.
run_workload() {
  local mode=$1 job=$2 cwd=$3 config=$4 extra=$5 runs=$6 cpu_runs=$7
  shift 7
  local home=$S/home-$mode who=root
  [ "$mode" = user ] && who=$BENCH_USER
  local rw=("$cwd" /tmp "$home" /dev)
  [ "$cwd" = "$WT" ] && rw+=("$S/repo/.git")
  local ro=("${RO_DIRS[@]}")
  local bw=(bwrap "${BWRAP_RO[@]}" --bind /tmp /tmp --bind "$home" "$home" --bind "$cwd" "$cwd")
  [ "$cwd" = "$WT" ] && bw+=(--bind "$S/repo/.git" "$S/repo/.git")
  if [ "$extra" = rules ]; then
    ro+=("${EXTRA_RULES[@]}")
    for d in "${EXTRA_RULES[@]}"; do bw+=(--ro-bind "$d" "$d"); done
  fi
  bw+=(--chdir "$cwd")
  local shim=$1 cmd=("${@:2}")
  local names=(direct shim run minimal bwrap minimal-sc)
  local cmds=(
    "${cmd[*]}"
    "$shim ${cmd[*]:1}"
    "$S/bin/landwall run -- ${cmd[*]}"
    "$S/bin/minimal-sandboxer ${cmd[*]}"
    "${bw[*]} ${cmd[*]}"
    "$S/bin/minimal-sandboxer-seccomp ${cmd[*]}"
  )
  if [ -n "$DYN" ] && [ "$job" = launch ]; then
    names+=(shim-dyn)
    cmds+=("$S/shims-dyn/claude")
  fi
  local env=(
    PATH="$S/shims:$S/agents:/usr/local/bin:/usr/bin:/bin"
    HOME="$home" TERM=xterm LANG=C.UTF-8 USER="$who" LOGNAME="$who"
    XDG_RUNTIME_DIR="$S/run-$mode"
    LANDWALL_CONFIG="$config"
    LL_FS_RO="$(join "${ro[@]}")" LL_FS_RW="$(join "${rw[@]}")"
  )
  local as=()
  [ "$mode" = user ] && as=(setpriv --reuid="$BENCH_USER" --regid="$BENCH_USER" --clear-groups --inh-caps=-all)
  if [ "$job" = launch ] || [ "$job" = rules500 ]; then
    # landwall's rules for this launch, as the minimal sandboxer's two lists.
    local lists same_ro same_rw
    lists=$(cd "$cwd" && "${as[@]}" env -i "${env[@]}" "$S/bin/landwall" policy --json | python3 -c '
import json, sys
rules = json.load(sys.stdin)["rules"]
for kind in ("ro", "rw"):
    print(":".join(r["path"] for r in rules
                   if (r["access"] in ("read-only", "list-only")) == (kind == "ro")))')
    { read -r same_ro; read -r same_rw; } <<<"$lists"
    env+=(LL_SAME_RO="$same_ro" LL_SAME_RW="$same_rw")
    names+=(minimal-same)
    cmds+=("$S/bin/minimal-sandboxer-same ${cmd[*]}")
  fi
  local n=${#names[@]} warmup=$((runs > 20 ? 20 : 1))
  # Every way must do the job: the same output, give or take what root without capabilities
  # cannot read (find under the shim skips /usr's mode-700 directories).
  local max_status=0
  [ "$job" = find ] && max_status=1
  if [ "$job" != launch ] && [ "$job" != rules500 ]; then
    local want=
    for i in $(seq 0 $((n - 1))); do
      read -r -a argv <<<"${cmds[$i]}"
      local got status=0
      got=$(cd "$cwd" && "${as[@]}" env -i "${env[@]}" "${argv[@]}" 2>/dev/null | wc -l) || status=$?
      [ -n "$want" ] || want=$got
      [ "$status" -le "$max_status" ] && [ "$got" -ge $((want * 99 / 100)) ] ||
        die "$mode $job: ${names[$i]} exited $status with $got lines of output, direct $want"
    done
  fi
  # bwrap with 500 bind mounts takes half a second a run: it gets its own, shorter hyperfine
  # call in each round.
  local slow=
  [ "$extra" = rules ] && slow=bwrap
  for r in $(seq 1 "$ROUNDS"); do
    local args=()
    for i in $(seq 0 $((n - 1))); do
      local k=$(((i + r) % n))
      [ "${names[$k]}" = "$slow" ] && continue
      args+=(-n "${names[$k]}" "${cmds[$k]}")
    done
    if [ -n "$slow" ]; then
      (cd "$cwd" && "${as[@]}" env -i "${env[@]}" hyperfine -N --style none --warmup 1 \
        --runs 5 --export-json "$OUT/$mode/$job-$r-$slow.json" -n "$slow" "${cmds[4]}" \
        2> >(grep -v -e '^ *Warning' -e '^ *$' >&2) >/dev/null)
    fi
    # find exits 1 under the shim as root: capabilities are dropped, so root cannot read the
    # mode-700 directories in /usr (e.g. /usr/share/polkit-1/rules.d) that it reads directly.
    local ignore=()
    [ "$job" = find ] && ignore=(--ignore-failure)
    (cd "$cwd" && "${as[@]}" env -i "${env[@]}" hyperfine -N --style none --warmup "$warmup" \
      --runs "$runs" "${ignore[@]}" --export-json "$OUT/$mode/$job-$r.json" "${args[@]}" \
      2> >(grep -v -e '^ *Warning' -e '^ *$' >&2) >/dev/null)
  done
  # CPU time (and page faults) of each run, every command in turn: robust where wall clock
  # is not, on a machine that runs other work.
  local cpu_args=() cruns=$cpu_runs
  for i in $(seq 0 $((n - 1))); do
    [ "${names[$i]}" = "$slow" ] && continue
    cpu_args+=("${names[$i]}" "${cmds[$i]}")
  done
  # The shim on a terminal (cpu-runs gives the run a pty as controlling terminal), where it
  # installs its terminal filter; every other run here has no terminal, like a CI job.
  if [ "$job" = launch ]; then
    cpu_args+=("shim@tty" "${cmds[1]}")
    # And without $XDG_RUNTIME_DIR (a CI job), where the shim lists /etc on every launch.
    cpu_args+=("shim@cold" "${cmds[1]}")
  fi
  (cd "$cwd" && "${as[@]}" env -i "${env[@]}" CPU_RUNS_MAX_STATUS=$max_status \
    "$S/bin/cpu-runs" "$cruns" "$OUT/$mode/$job.cpu.tsv" "${cpu_args[@]}")
}

for mode in root user; do
  mkdir -p "$OUT/$mode"
  [ "$mode" = user ] && chown "$BENCH_USER:" "$OUT/$mode"
  fs_cpu=$((ROUNDS * FS_RUNS))
  say "$mode: launch of /bin/true ($ROUNDS x $LAUNCH_RUNS runs per command, $CPU_RUNS for CPU time)"
  run_workload "$mode" launch "$WT" "$S/etc/landwall.toml" "" "$LAUNCH_RUNS" "$CPU_RUNS" "$S/shims/claude" /bin/true
  say "$mode: launch with 500 extra read-only rules"
  run_workload "$mode" rules500 "$WT" "$S/etc500/landwall.toml" rules "$LAUNCH_RUNS" "$CPU_RUNS" "$S/shims/claude" /bin/true
  say "$mode: find /usr -type f ($ROUNDS x $FS_RUNS runs per command, $fs_cpu for CPU time)"
  run_workload "$mode" find "$WT" "$S/etc/landwall.toml" "" "$FS_RUNS" "$fs_cpu" "$S/shims/lw-find" find /usr -type f
  say "$mode: grep -r over 20k files"
  run_workload "$mode" grep "$DATA/tree" "$S/etc/landwall.toml" "" "$FS_RUNS" "$fs_cpu" "$S/shims/lw-grep" grep -r needle-4242 .
  say "$mode: git status in a 20k-file repository"
  run_workload "$mode" git "$DATA/repo" "$S/etc/landwall.toml" "" "$FS_RUNS" "$fs_cpu" "$S/shims/lw-git" git status --porcelain
done

# --- peak RSS --------------------------------------------------------------------------
say "peak RSS (GNU time %M, the maximum of 20 runs)"
maxrss() {
  local mode=$1 label=$2
  shift 2
  local as=() home=$S/home-$mode best=0
  [ "$mode" = user ] && as=(setpriv --reuid="$BENCH_USER" --regid="$BENCH_USER" --clear-groups --inh-caps=-all)
  for _ in $(seq 1 20); do
    local kb
    kb=$(cd "$WT" && "${as[@]}" env -i PATH="$S/shims:$S/agents:/usr/bin:/bin" HOME="$home" \
      LANDWALL_CONFIG="$S/etc/landwall.toml" LL_FS_RO="$(join "${RO_DIRS[@]}")" \
      LL_FS_RW="$WT:/tmp:$home:/dev" /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1)
    [ "$kb" -gt "$best" ] && best=$kb
  done
  echo "$mode $label $best" >>"$OUT/rss.txt"
}
for mode in root user; do
  maxrss "$mode" direct /bin/true
  maxrss "$mode" shim "$S/shims/claude"
  maxrss "$mode" run "$S/bin/landwall" run -- /bin/true
  maxrss "$mode" minimal "$S/bin/minimal-sandboxer" /bin/true
done

# --- callgrind: instructions of one shim launch, up to its exec ---------------------------
say "callgrind: instructions of one shim launch"
for mode in root user; do
  as=()
  [ "$mode" = user ] && as=(setpriv --reuid="$BENCH_USER" --regid="$BENCH_USER" --clear-groups --inh-caps=-all)
  # Valgrind before 3.22 does not know the Landlock system calls: it answers ENOSYS, the
  # shim stops there with status 100 ("no Landlock"), and the count covers everything up to
  # the wall (start-up, configuration, agent, worktree, policy, environment, capabilities,
  # no_new_privs, the thread check), not the rules, seccomp and the self-check.
  # The count is the launch as measured above (the mode's $XDG_RUNTIME_DIR, whose link cache
  # the launches filled); a second run without it (a CI job's launch) only adds its
  # functions to the list of those a launch runs (shim/hot-functions.txt).
  for cache in warm cold; do
    xdg=(XDG_RUNTIME_DIR="$S/run-$mode")
    [ "$cache" = cold ] && xdg=()
    log=$(cd "$WT" && "${as[@]}" env -i PATH="$S/shims:$S/agents:/usr/bin:/bin" HOME="$S/home-$mode" \
      TERM=xterm LANG=C.UTF-8 LANDWALL_CONFIG="$S/etc/landwall.toml" "${xdg[@]}" \
      valgrind --tool=callgrind --demangle=no --callgrind-out-file="$OUT/$mode/callgrind-$cache.out" \
      "$S/shims/claude" 2>&1) || true
    [ "$cache" = warm ] || continue
    n=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$log")
    [ -n "$n" ] || die "callgrind gave no instruction count ($mode): $log"
    if grep -q 'unhandled amd64-linux syscall: 444' <<<"$log"; then
      echo "$mode $n to-landlock" >>"$OUT/callgrind.txt"
    else
      echo "$mode $n full" >>"$OUT/callgrind.txt"
    fi
  done
done
echo "valgrind=$(valgrind --version)" >>"$OUT/meta-extra.txt"
# The functions a launch ran, against the list the release build is laid out by.
sh "$ROOT/scripts/hot-functions.sh" list "$OUT"/root/callgrind-*.out "$OUT"/user/callgrind-*.out >"$OUT/hot-functions.txt"
hot_total=$(wc -l <"$OUT/hot-functions.txt")
hot_missing=$(grep -v "^#" "$ROOT/shim/hot-functions.txt" | LC_ALL=C sort -u | LC_ALL=C comm -13 - <(LC_ALL=C sort -u "$OUT/hot-functions.txt") | wc -l)
echo "hot_total=$hot_total" >>"$OUT/meta-extra.txt"
echo "hot_missing=$hot_missing" >>"$OUT/meta-extra.txt"
if [ "${BENCH_CALLGRIND_RECORD:-}" = 1 ]; then
  {
    echo "# Instructions of one shim launch (claude -> /bin/true, bench configuration, linked"
    echo "# worktree, the link cache in \$XDG_RUNTIME_DIR filled) under valgrind --tool=callgrind, up"
    echo "# to the exec. Recorded by BENCH_CALLGRIND_RECORD=1 bash bench/wall.sh on $(uname -r),"
    echo "# $(date -u +%Y-%m-%d), landwall $(git -C "$ROOT" rev-parse --short HEAD). The count depends on"
    echo "# the machine (root's /etc carve-out has an entry per file in /etc): record it where you compare."
    cut -d' ' -f1-2 "$OUT/callgrind.txt"
  } >"$BENCH/callgrind-baseline.txt"
  {
    echo "# The functions one shim launch runs (root and unprivileged, with and without the link"
    echo "# cache), first seen first, without build-specific hashes: make release-static lays the"
    echo "# shim out in this order (scripts/hot-functions.sh, shim/build.rs)."
    echo "# BENCH_CALLGRIND_RECORD=1 make bench rewrites it."
    cat "$OUT/hot-functions.txt"
  } >"$ROOT/shim/hot-functions.txt"
  say "recorded bench/callgrind-baseline.txt and shim/hot-functions.txt"
fi

# --- report ------------------------------------------------------------------------------
cat >"$OUT/meta.txt" <<EOF
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
kernel=$(uname -r)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
cores=$(nproc)
abi=$ABI
commit=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- common shim 2>/dev/null || echo "+changes")
hyperfine=$(hyperfine --version | cut -d' ' -f2)
bwrap=$(bwrap --version | cut -d' ' -f2)
rounds=$ROUNDS
launch_runs=$LAUNCH_RUNS
fs_runs=$FS_RUNS
cpu_runs=$CPU_RUNS
load_start=$LOAD_START
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
etc_entries=$(find /etc -mindepth 1 -maxdepth 1 | wc -l)
user=$BENCH_USER
callgrind_limit=$CALLGRIND_LIMIT
EOF
cat "$OUT/meta-extra.txt" >>"$OUT/meta.txt"
python3 "$BENCH/report.py" "$OUT" "$BENCH" 
