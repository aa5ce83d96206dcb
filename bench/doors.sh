#!/usr/bin/env bash
# What the seccomp filter on every launch costs (b5045e8, "the doors beside the wall"),
# against its parent c21e6ce, which installed a filter only when a terminal was within reach
# (none at all without one), measured in the same run:
#
#   launch   the `claude` shim in front of /bin/true with no terminal (stdin /dev/null, stdout
#            and stderr /dev/null, a session without a controlling terminal): the baseline has
#            no filter, the new build has one. Then the same on a terminal (bench/cpu-runs.c's
#            "@tty" rows: a pseudo-terminal as controlling terminal), where both filter: the
#            old terminal-only filter against the new one. CPU and wall ms per launch from
#            wait4, every row in turn; hyperfine's wall clock too when it is installed.
#   loops    bench/doors-loop.c behind each shim and directly: getppid, ioctl (FIONREAD on a
#            pipe), 1-byte read of /dev/zero, stat, and AF_UNIX stream socketpair+close, 300k
#            calls or fewer a run, timed from inside (the thread's CPU clock, ns per call, the
#            fastest of 20 slices of the run); and
#            directly under a one-instruction allow-all filter it installs itself (`allow`:
#            what any seccomp filter costs). The kernel's verdict cache (Linux 5.11) lets the
#            calls landwall's filter does not look into pass without running it; ioctl and
#            socketpair run it every time.
#   jobs     `git status --porcelain` and `find . -type f` in a 20k-file repository behind
#            each shim and directly (CPU and wall ms per run, every row in turn); with strace
#            installed, the job's system calls are counted (strace -f -c, run directly) for a
#            figure per call.
#
# Both shims are dynamic release builds (`cargo build --release -p landwall`) of the two
# commits, made here from `git archive` (no worktree registered in the repository) in
# DOORS_DIR (default $CARGO_TARGET_DIR/bench-doors or target/bench-doors) with one shared
# target directory, and kept there: a later run reuses them (the first run builds each commit,
# ~1-5 min each on a busy 2-core machine). $LANDWALL (`make bench`'s static build) is not
# used: a static and a dynamic build do not launch at the same cost.
#
#   DOORS_BASE   the baseline commit (default c21e6ce, the parent of b5045e8)
#   DOORS_NEW    the commit measured (default HEAD; b5045e8 if HEAD does not build)
#   DOORS_ROUNDS rounds of the loops (default 15), DOORS_LAUNCHES launches per row (default
#                600), DOORS_JOBS runs per job and row (default 40)
#
# Needs root (the figures are root's), gcc, git, python3; hyperfine optional. Writes
# bench/doors-results.md. About 3-4 minutes once the builds are there.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
OUT_MD=$BENCH/doors-results.md
DIR=${DOORS_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench-doors}
ROUNDS=${DOORS_ROUNDS:-15}
LAUNCHES=${DOORS_LAUNCHES:-600}
JOBS=${DOORS_JOBS:-40}

die() { echo "bench/doors.sh: $*" >&2; exit 1; }
say() { echo "== doors: $*"; }

[ "$(id -u)" -eq 0 ] || die "run as root (the figures are root's)"
for t in gcc git python3 cargo; do command -v "$t" >/dev/null || die "$t is missing"; done
[ "$(head -c 4 /bin/true | tail -c 3)" = ELF ] || die "/bin/true is not an ELF executable"

BASE=$(git -C "$ROOT" rev-parse --short=7 "${DOORS_BASE:-c21e6ce}^{commit}")
NEW=$(git -C "$ROOT" rev-parse --short=7 "${DOORS_NEW:-HEAD}^{commit}")

# --- the two builds -----------------------------------------------------------------------
mkdir -p "$DIR/bin"
build() {
  local c=$1
  [ -x "$DIR/bin/landwall-$c" ] && return 0
  say "building $c (release) in $DIR"
  rm -rf "$DIR/src-$c"
  mkdir -p "$DIR/src-$c"
  git -C "$ROOT" archive "$c" | tar -x -C "$DIR/src-$c"
  (cd "$DIR/src-$c" && CARGO_TARGET_DIR="$DIR/target" cargo build --release -q -p landwall) || return 1
  cp "$DIR/target/release/landwall" "$DIR/bin/landwall-$c"
}
build "$BASE" || die "the baseline $BASE does not build"
if ! build "$NEW"; then
  [ "$NEW" != b5045e8 ] || die "b5045e8 does not build"
  echo "bench/doors.sh: $NEW does not build; measuring b5045e8" >&2
  NEW=b5045e8
  build "$NEW" || die "b5045e8 does not build"
fi

# --- the 20k-file repository, kept in DIR --------------------------------------------------
if [ ! -e "$DIR/data/.complete" ]; then
  say "generating a 20k-file git repository in $DIR/data"
  rm -rf "$DIR/data"
  mkdir -p "$DIR/data/repo"
  python3 - "$DIR/data/repo" <<'EOF'
import os, random, sys
rnd = random.Random(42)
words = ["wall", "door", "kernel", "rule", "path", "filter", "shim", "exec", "socket"]
for i in range(20):
    for j in range(25):
        d = os.path.join(sys.argv[1], f"d{i:02}", f"s{j:02}")
        os.makedirs(d)
        for k in range(40):
            with open(os.path.join(d, f"f{k:02}.txt"), "w") as f:
                f.write(" ".join(rnd.choice(words) for _ in range(40)) + "\n")
EOF
  git -C "$DIR/data/repo" init -q
  git -C "$DIR/data/repo" add -A
  git -C "$DIR/data/repo" -c user.name=bench -c user.email=bench@landwall.invalid commit -q -m data
  git -C "$DIR/data/repo" update-index --refresh >/dev/null
  touch "$DIR/data/.complete"
fi
REPO=$DIR/data/repo

# --- the bench's installation --------------------------------------------------------------
W=$(mktemp -d /var/tmp/landwall-bench-doors.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/bin" "$W/agents" "$W/home" "$W/cwd" "$W/out" "$W/base" "$W/new"
install -d -m 700 "$W/run"
gcc -O2 -o "$W/bin/cpu-runs" "$BENCH/cpu-runs.c"
gcc -O2 -o "$W/bin/doors-loop" "$BENCH/doors-loop.c"
printf '[safe]\n\tdirectory = *\n' >"$W/home/.gitconfig"
ln -s /bin/true "$W/agents/claude-real"
cat >"$W/landwall.toml" <<EOF
# bench/doors.sh: the default policy, and the agents the jobs run.
[agents.lw-loop]
real = "$W/bin/doors-loop"

[agents.lw-git]
real = "/usr/bin/git"

[agents.lw-find]
real = "/usr/bin/find"
EOF
for v in base new; do
  c=$BASE
  [ "$v" = new ] && c=$NEW
  install -m 0755 "$DIR/bin/landwall-$c" "$W/$v/landwall"
  for a in claude lw-loop lw-git lw-find; do ln -s landwall "$W/$v/$a"; done
done
ABI=$("$W/new/landwall" doctor 2>/dev/null | sed -n 's/.*with Landlock ABI \([0-9]*\).*/\1/p' || true)

# Every run: a clean environment, stdin /dev/null, and a session of its own without a
# controlling terminal (setsid), whatever terminal `make bench` was started from.
ENV=(env -i PATH="$W/agents:/usr/bin:/bin" HOME="$W/home" LANG=C.UTF-8 USER=root LOGNAME=root
     XDG_RUNTIME_DIR="$W/run" LANDWALL_CONFIG="$W/landwall.toml")
quiet() { setsid -w "${ENV[@]}" "$@" </dev/null; }

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)

# --- launches ------------------------------------------------------------------------------
say "launch of /bin/true: $LAUNCHES runs per row, in turn"
quiet "$W/bin/cpu-runs" 30 "$W/out/warm.tsv" direct /bin/true base "$W/base/claude" new "$W/new/claude"
quiet "$W/bin/cpu-runs" "$LAUNCHES" "$W/out/launch.tsv" \
  direct /bin/true base "$W/base/claude" new "$W/new/claude" \
  base@tty "$W/base/claude" new@tty "$W/new/claude"
HF=
if command -v hyperfine >/dev/null; then
  HF=$(hyperfine --version | cut -d' ' -f2)
  say "launch of /bin/true: hyperfine, 6 rounds of 100 runs per row"
  for r in 1 2 3 4 5 6; do
    args=(-n direct /bin/true -n base "$W/base/claude" -n new "$W/new/claude")
    [ $((r % 2)) -eq 0 ] && args=(-n new "$W/new/claude" -n base "$W/base/claude" -n direct /bin/true)
    (cd "$W/cwd" && quiet hyperfine -N --style none --warmup 10 --runs 100 \
      --export-json "$W/out/hf-$r.json" "${args[@]}" >/dev/null 2>&1) || die "hyperfine failed"
  done
fi

# --- loops ---------------------------------------------------------------------------------
LOOPS=(getppid:300000 ioctl:300000 read:300000 stat:100000 socketpair:60000)
say "loops: $ROUNDS rounds of ${LOOPS[*]}, directly (with and without an allow-all filter) and behind each shim"
variants=(direct allow base new)
for r in $(seq 1 "$ROUNDS"); do
  for l in "${LOOPS[@]}"; do
    m=${l%%:*} n=${l#*:}
    for i in 0 1 2 3; do
      v=${variants[$(((i + r) % 4))]}
      case $v in
        direct) cmd=("$W/bin/doors-loop" "$m" "$n") ;;
        allow) cmd=("$W/bin/doors-loop" "$m" "$n" allow) ;;
        *) cmd=("$W/$v/lw-loop" "$m" "$n") ;;
      esac
      line=$(cd "$W/cwd" && quiet "${cmd[@]}")
      printf '%s\t%s\t%s\n' "$v" "$r" "$line" >>"$W/out/loops.tsv"
    done
  done
done

# --- jobs ----------------------------------------------------------------------------------
say "jobs: git status and find in a 20k-file repository, $JOBS runs per row, in turn"
(cd "$REPO" && quiet "$W/bin/cpu-runs" 3 "$W/out/warm.tsv" direct "git status --porcelain" \
  base "$W/base/lw-git status --porcelain" new "$W/new/lw-git status --porcelain")
(cd "$REPO" && quiet "$W/bin/cpu-runs" "$JOBS" "$W/out/git.tsv" direct "git status --porcelain" \
  base "$W/base/lw-git status --porcelain" new "$W/new/lw-git status --porcelain")
(cd "$REPO" && quiet "$W/bin/cpu-runs" "$JOBS" "$W/out/find.tsv" direct "find . -type f" \
  base "$W/base/lw-find . -type f" new "$W/new/lw-find . -type f")

for job in git find; do
  cmd=(git status --porcelain)
  [ "$job" = find ] && cmd=(find . -type f)
  if command -v strace >/dev/null; then
    (cd "$REPO" && quiet strace -f -c -o "$W/out/$job.strace" "${cmd[@]}" >/dev/null) || true
  fi
done
git -C "$ROOT" log --format='%h %s' "$BASE..$NEW" -- common/src/seccomp.rs | cut -c1-110 >"$W/out/commits.txt" || true

cat >"$W/out/meta.txt" <<EOF
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
kernel=$(uname -r)
abi=$ABI
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
cores=$(nproc)
base=$BASE
new=$NEW
rounds=$ROUNDS
launches=$LAUNCHES
jobs=$JOBS
hyperfine=$HF
load_start=$LOAD_START
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
seconds=$(($(date +%s) - T0))
EOF

# --- report --------------------------------------------------------------------------------
python3 - "$W/out" "$OUT_MD" <<'PY'
import glob, json, os, statistics as st, sys
out, md_path = sys.argv[1], sys.argv[2]
meta = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(out, "meta.txt")))
med = st.median

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]

def rows(path):
    """cpu-runs TSV: name -> list of (cpu ms, wall ms), in run order."""
    r = {}
    for line in open(path):
        name, cpu, wall, _ = line.split("\t")
        r.setdefault(name, []).append((float(cpu), float(wall)))
    return r

def paired(a, b):
    """Median and interquartile range of b - a, run by run (the runs are interleaved)."""
    d = [y - x for x, y in zip(a, b)]
    return med(d), q(d, 0.25), q(d, 0.75)

L = []
w = L.append
summary = []
per_call = []
w("# The doors' cost: the seccomp filter on every launch (bench/doors.sh)")
w("")
w(f"`base` is the shim at {meta['base']} (a filter only with a terminal within reach), `new` the "
  f"shim at {meta['new']} (the filter of common/src/seccomp.rs on every launch), `direct` the "
  "program without a shim; dynamic release builds of both commits, root, the default policy, "
  f"in the same run. Kernel {meta['kernel']}, Landlock ABI {meta['abi']} (below 9: the filter "
  f"also refuses Unix sockets), {meta['cores']} cores ({meta['cpu']}). Load average "
  f"{meta['load_start']} at the start, {meta['load_end']} at the end (other work on the machine): "
  "medians throughout, CPU time as the main figure (time spent waiting for a core does not "
  f"count in it). {meta['seconds']} s of measurement.")
w("")

# Launches.
r = rows(os.path.join(out, "launch.tsv"))
cpu = {n: [x[0] for x in v] for n, v in r.items()}
wall = {n: [x[1] for x in v] for n, v in r.items()}
w(f"## Launch of /bin/true ({meta['launches']} runs per row, every row in turn)")
w("")
w("No terminal: stdin, stdout, stderr /dev/null, no controlling terminal (`base` installs no "
  "filter). `@tty`: a pseudo-terminal as controlling terminal (`base` installs its "
  "terminal-only filter, `new` the same filter as without one).")
w("")
w("| row | CPU ms | wall ms | CPU × base | CPU new − base, µs (IQR) | wall new − base, µs |")
w("|---|---:|---:|---:|---:|---:|")
for n in ["direct", "base", "new", "base@tty", "new@tty"]:
    c, wl = med(cpu[n]), med(wall[n])
    ref = "base@tty" if n.endswith("@tty") else "base"
    ratio = f"{c / med(cpu[ref]):.3f}" if n != "direct" else ""
    delta = dw = ""
    if n.startswith("new"):
        m, lo, hi = paired(cpu[ref], cpu[n])
        delta = f"{m * 1e3:+.0f} ({lo * 1e3:+.0f} … {hi * 1e3:+.0f})"
        dw = f"{paired(wall[ref], wall[n])[0] * 1e3:+.0f}"
    w(f"| {n} | {c:.3f} | {wl:.3f} | {ratio} | {delta} | {dw} |")
    if n.startswith("new"):
        summary.append(f"launch{'' if n == 'new' else ' on a terminal'} {c / med(cpu[ref]):.3f}x "
                       f"({paired(cpu[ref], cpu[n])[0] * 1e3:+.0f} µs CPU)")
w("")
hf = sorted(glob.glob(os.path.join(out, "hf-*.json")))
if hf:
    times = {}
    for f in hf:
        for res in json.load(open(f))["results"]:
            times.setdefault(res["command"], []).extend(res["times"])
    b = med(times["base"])
    w(f"hyperfine {meta['hyperfine']} (-N, {len(hf)} rounds of 100 runs per row, the order reversed every other round, no terminal), "
      "wall-clock medians: " + ", ".join(
        f"{n} {med(times[n]) * 1e3:.3f} ms" for n in ["direct", "base", "new"]) +
      f"; new × base {med(times['new']) / b:.3f} ({(med(times['new']) - b) * 1e6:+.0f} µs).")
    w("")

# Loops.
loops = {}
for line in open(os.path.join(out, "loops.tsv")):
    v, rnd, mode, n, c, wl, best, sc, nf = line.rstrip("\n").split("\t")
    loops.setdefault(mode, {}).setdefault(v, {})[int(rnd)] = (
        float(best), float(c), int(sc), int(nf))
# The filters each run had: the new shim's one on top of what `direct` has (none, unless
# the bench itself runs under seccomp), the old shim's none.
own = {x[3] for vs in loops.values() for x in vs["direct"].values()}
bad = [(m, v) for m, vs in loops.items() for v, runs in vs.items() for x in runs.values()
       if {x[3] - (v in ("new", "allow"))} != own or (v in ("new", "allow") and x[2] != 2)]
if bad:
    sys.exit(f"bench/doors.sh: a run had the wrong seccomp mode: {sorted(set(bad))}")
calls = {"getppid": "getppid()", "ioctl": "ioctl(pipe, FIONREAD)", "read": "read(/dev/zero, 1)",
         "stat": "stat(file in cwd)", "socketpair": "socketpair(AF_UNIX, STREAM) + 2 close"}
w(f"## Loops of system calls ({meta['rounds']} rounds; the four rows of a round one after the other)")
w("")
w("bench/doors-loop.c behind the shim (no terminal) and directly, timed inside in 20 slices: "
  "CPU ns per call of a run's fastest slice (the one other work on the machine disturbed "
  "least), medians over the rounds; `allow` is the program run directly under a "
  "one-instruction allow-all filter it installs itself (what having any filter costs). Every "
  "`new` and `allow` run had one seccomp filter more than `direct`, every `base` run none more. "
  "Differences are medians of the per-round differences (IQR in brackets); the last column is "
  "(new − base) − (allow − direct), landwall's filter beyond any filter. landwall's filter "
  "runs on ioctl and socketpair; the verdict cache lets getppid, read, stat and close through "
  "without running it. socketpair's row is per call of the three (socketpair and two "
  "close). `new × base` is 1 + (new − base) / base, from the paired difference (on a busy "
  "machine a ratio of the two medians can even fall below 1); `mean` is the ratio of the "
  "medians of the runs' mean CPU per call (all slices).")
w("")
w("| loop | direct ns | allow ns | base ns | new ns | new × base | new − base, ns/call (IQR) | "
  "allow − direct, ns | beyond any filter, ns | mean new × base |")
w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for m in ["getppid", "ioctl", "read", "stat", "socketpair"]:
    d = {v: [loops[m][v][k][0] for k in sorted(loops[m][v])] for v in loops[m]}
    mean = {v: med(x[1] for x in loops[m][v].values()) for v in loops[m]}
    md, ma, mb, mn = (med(d[v]) for v in ("direct", "allow", "base", "new"))
    dm, lo, hi = paired(d["base"], d["new"])
    da = paired(d["direct"], d["allow"])[0]
    beyond = med([(n - b) - (a - x) for x, a, b, n in zip(d["direct"], d["allow"], d["base"], d["new"])])
    w(f"| {calls[m]} | {md:.0f} | {ma:.0f} | {mb:.0f} | {mn:.0f} | {1 + dm / mb:.3f} | "
      f"{dm:+.1f} ({lo:+.1f} … {hi:+.1f}) | {da:+.1f} | {beyond:+.1f} | "
      f"{mean['new'] / mean['base']:.3f} |")
    summary.append(f"{m} loop {1 + dm / mb:.2f}x ({dm:+.0f} ns/call)")
w("")

# Jobs.
w(f"## Jobs in a 20k-file repository ({meta['jobs']} runs per row, every row in turn)")
w("")
w("| job | direct CPU ms | base CPU ms | new CPU ms | new × base (CPU) | new − base, ms (IQR) | "
  "direct / base / new wall ms |")
w("|---|---:|---:|---:|---:|---:|---|")
for job, label in [("git", "`git status --porcelain`"), ("find", "`find . -type f`")]:
    r = rows(os.path.join(out, f"{job}.tsv"))
    c = {n: [x[0] for x in v] for n, v in r.items()}
    wl = {n: med([x[1] for x in v]) for n, v in r.items()}
    dm, lo, hi = paired(c["base"], c["new"])
    w(f"| {label} | {med(c['direct']):.1f} | {med(c['base']):.1f} | {med(c['new']):.1f} | "
      f"{med(c['new']) / med(c['base']):.3f} | {dm:+.2f} ({lo:+.2f} … {hi:+.2f}) | "
      f"{wl['direct']:.1f} / {wl['base']:.1f} / {wl['new']:.1f} |")
    summary.append(f"{job} {med(c['new']) / med(c['base']):.3f}x ({dm:+.2f} ms CPU)")
    st_path = os.path.join(out, f"{job}.strace")
    if os.path.exists(st_path):
        total = [l.split() for l in open(st_path) if l.rstrip().endswith(" total")]
        if total:
            n = int(total[-1][3])
            per_call.append(f"{label}: {n} system calls a run (strace -f -c), so "
                            f"{dm * 1e6 / n:+.0f} ns per call (IQR {lo * 1e6 / n:+.0f} … {hi * 1e6 / n:+.0f})")
w("")
if per_call:
    w("new − base per system call of the job: " + "; ".join(per_call) + ".")
    w("")
commits = open(os.path.join(out, "commits.txt")).read().splitlines()
if commits:
    w(f"Commits to common/src/seccomp.rs in {meta['base']}..{meta['new']}:")
    w("")
    for c in commits:
        w(f"- {c}")
    w("")
L[2:2] = ["Summary, new against base (CPU medians): " + "; ".join(summary) + ".", ""]
open(md_path, "w").write("\n".join(L))
print("\n".join(L))
PY
