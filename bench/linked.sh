#!/usr/bin/env bash
# The launch in a linked worktree (issue 13): the private mount namespace that shows the
# quarantine as the repository's object store, and the quarantine watcher, against the same
# shim in a plain directory and against running the agent directly, in the same run.
#
#   direct      /bin/true
#   plain       the `claude` shim in front of /bin/true, in a directory without git
#   linked      the same shim in a linked worktree (namespace + watcher)
#   baseline-*  the same two with $LANDWALL_BASELINE (an older landwall), when it is set
#
# CPU counts every process a launch leaves behind (the watcher too: bench/subreap-runs.c is
# their subreaper). Uses $LANDWALL (as `make bench` sets it) or builds a release binary.
# Writes bench/linked-results.md. BENCH_LINKED_RUNS (default 500) sets the runs per row.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${BENCH_LINKED_RUNS:-500}
OUT="$ROOT/bench/linked-results.md"
if [ -z "${LANDWALL:-}" ] || [ ! -x "${LANDWALL:-}" ]; then
  (cd "$ROOT" && cargo build --release -q -p landwall)
  LANDWALL="$ROOT/target/release/landwall"
fi

work=$(mktemp -d /var/tmp/landwall-bench-linked.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/subreap-runs" "$ROOT/bench/subreap-runs.c"
mkdir -p "$work/agents" "$work/plain" "$work/new" "$work/old"
ln -s /bin/true "$work/agents/claude-real"
ln -s "$LANDWALL" "$work/new/claude"
git -c init.defaultBranch=main init -q "$work/main"
git -C "$work/main" -c user.name=b -c user.email=b@x.invalid commit -q --allow-empty -m init
git -C "$work/main" worktree add -q "$work/linked" -b task
export PATH="$work/agents:/usr/bin:/bin" HOME="$work" LANDWALL_CONFIG="$work/none.toml"
rows=(direct "$work/plain" /bin/true
      plain "$work/plain" "$work/new/claude"
      linked "$work/linked" "$work/new/claude")
if [ -n "${LANDWALL_BASELINE:-}" ]; then
  ln -s "$LANDWALL_BASELINE" "$work/old/claude"
  rows+=(baseline-plain "$work/plain" "$work/old/claude"
         baseline-linked "$work/linked" "$work/old/claude")
fi
"$work/subreap-runs" 20 "$work/warm.tsv" "${rows[@]}"
"$work/subreap-runs" "$RUNS" "$work/runs.tsv" "${rows[@]}"

python3 - "$work/runs.tsv" "$OUT" "$RUNS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, cpu, exit_ms, all_ms = line.split("\t")
    rows.setdefault(name, []).append((float(cpu), float(exit_ms), float(all_ms)))
med = {n: [statistics.median(x[i] for x in v) for i in range(3)] for n, v in rows.items()}
d = med["direct"]
out = ["# Launch in a linked worktree (bench/linked.sh)", "",
       f"Medians of {sys.argv[3]} interleaved runs each; ratios against `direct` in the same run.",
       "CPU includes every process a launch leaves behind (the quarantine watcher).", "",
       "| row | CPU ms | × direct | until exit, ms | × direct | until all exited, ms |",
       "|---|---:|---:|---:|---:|---:|"]
for n in ["direct", "plain", "linked", "baseline-plain", "baseline-linked"]:
    if n in med:
        c, e, a = med[n]
        out.append(f"| {n} | {c:.3f} | {c/d[0]:.2f} | {e:.3f} | {e/d[1]:.2f} | {a:.3f} |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
