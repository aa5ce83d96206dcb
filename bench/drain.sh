#!/usr/bin/env bash
# landwall-drain against task-spooler (tsp), the same jobs in the same run.
#
#   latency     submit -> the job's first instruction, one job at a time on an idle queue:
#               the job is `date +%s%N`, whose output is the moment it started; the clock
#               starts just before the `landwall submit` / `tsp` client is run.
#   drain       throughput of N trivial jobs (`true`) already queued: landwall-drain --once
#               on a full queue; tsp with its queue held behind a blocking first job.
#   end-to-end  throughput of N `true` jobs submitted one after another while the daemon
#               (or the tsp server) runs them, until the last one is done.
#
# landwall-drain runs walled in (LANDWALL_DRAIN_SANDBOX=1) with one job slot, like tsp's
# default of one; every landwall job gets its own Landlock wall and self-check (no terminal,
# so no terminal filter), and every submit and result is fsynced. tsp does neither.
#
# Uses $LANDWALL and $LANDWALL_DRAIN (as `make bench` sets them) or builds release binaries.
# Installs task-spooler with apt-get if `tsp` is missing. Writes bench/drain-results.md.
# BENCH_JOBS (default 500) sets N.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${BENCH_JOBS:-500}
OUT="$ROOT/bench/drain-results.md"

if ! command -v tsp >/dev/null 2>&1; then
  echo "installing task-spooler (tsp) with apt-get"
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench/drain.sh: tsp is missing and installing it needs root: apt-get install task-spooler" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq task-spooler >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq task-spooler
  }
fi

if [ -z "${LANDWALL:-}" ] || [ -z "${LANDWALL_DRAIN:-}" ] || [ ! -x "${LANDWALL:-}" ] || [ ! -x "${LANDWALL_DRAIN:-}" ]; then
  echo "building release binaries"
  (cd "$ROOT" && cargo build --release -q -p landwall -p landwall-drain)
  target=${CARGO_TARGET_DIR:-$ROOT/target}
  LANDWALL=$target/release/landwall
  LANDWALL_DRAIN=$target/release/landwall-drain
fi

# Not under /tmp: every job may write /tmp; the spool and the worktrees must be apart.
S=$(mktemp -d /var/tmp/landwall-bench.XXXXXX)
DAEMON_PID=
cleanup() {
  if [ -n "$DAEMON_PID" ]; then kill -KILL "$DAEMON_PID" 2>/dev/null || true; fi
  TS_SOCKET=$S/tsp.socket tsp -K >/dev/null 2>&1 || true
  rm -rf "$S"
}
trap cleanup EXIT

mkdir -p "$S/jobs/job" "$S/tsp-out"
WT=$S/jobs/job
CFG=$S/landwall.toml
printf '[drain]\nworktree_roots = ["%s/jobs"]\ngrace = "5s"\n' "$S" >"$CFG"
chmod 644 "$CFG"
export LANDWALL_CONFIG=$CFG LANDWALL_DRAIN_SANDBOX=1 LANDWALL_LOG=warn
export TS_SOCKET=$S/tsp.socket TMPDIR=$S/tsp-out TS_MAXFINISHED=$((3 * N + 10)) TS_SLOTS=1
cd "$WT"

now_us() { local t=$EPOCHREALTIME; echo "${t/./}"; }

start_daemon() { # SPOOL
  mkdir -p "$1"
  "$LANDWALL_DRAIN" --spool "$1" --config "$CFG" 2>>"$S/daemon.log" &
  DAEMON_PID=$!
  # Ready once the lock is taken and the queue is watched: poll for its pid in the lock.
  until [ "$(cat "$1/lock" 2>/dev/null)" = "$DAEMON_PID" ]; do sleep 0.01; done
  sleep 0.1
}
stop_daemon() {
  kill -TERM "$DAEMON_PID"
  wait "$DAEMON_PID" || true
  DAEMON_PID=
}
wait_result() { # SPOOL ID
  until [ -e "$1/done/$2.result.toml" ] || [ -e "$1/failed/$2.result.toml" ]; do sleep 0.001; done
}
stats() { # FILE of microsecond values -> "median p99" in ms
  sort -n "$1" | awk '{ v[NR] = $1 } END {
    m = int((NR + 1) / 2); p = int(NR * 0.99 + 0.999); if (p > NR) p = NR; if (p < 1) p = 1
    printf "%.2f %.2f\n", v[m] / 1000, v[p] / 1000 }'
}
rate() { awk -v n="$1" -v us="$2" 'BEGIN { printf "%.0f", n / (us / 1e6) }'; }

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "landwall-drain vs tsp, $N jobs each, kernel $(uname -r), $(nproc) cores, load $LOAD0"

# --- latency -----------------------------------------------------------------------------
echo "latency: landwall-drain"
SP=$S/spool-latency
start_daemon "$SP"
: >"$S/lat-lw"
for _ in $(seq "$N"); do
  t0=$(now_us)
  id=$("$LANDWALL" submit --spool "$SP" --worktree "$WT" -- date +%s%N)
  wait_result "$SP" "$id"
  t1=$(head -n1 "$SP/logs/$id.log")
  echo $((t1 / 1000 - t0)) >>"$S/lat-lw"
done
stop_daemon
failed=$(find "$SP/failed" -name '*.result.toml' | wc -l)
[ "$failed" -eq 0 ] || { echo "bench: $failed landwall jobs failed; see $SP" >&2; exit 1; }

echo "latency: tsp"
: >"$S/lat-tsp"
for _ in $(seq "$N"); do
  t0=$(now_us)
  id=$(tsp date +%s%N)
  tsp -w "$id" >/dev/null || true
  t1=$(head -n1 "$(tsp -o "$id")")
  echo $((t1 / 1000 - t0)) >>"$S/lat-tsp"
done
tsp -C >/dev/null

# --- drain throughput: a full queue ----------------------------------------------------
echo "drain: landwall-drain --once on $N queued jobs"
SP=$S/spool-drain
mkdir -p "$SP"
for _ in $(seq "$N"); do "$LANDWALL" submit --spool "$SP" --worktree "$WT" -- true >/dev/null; done
sync # the queueing's writeback is not the drain's cost
t0=$(now_us)
"$LANDWALL_DRAIN" --spool "$SP" --config "$CFG" --once 2>>"$S/daemon.log"
t1=$(now_us)
done_n=$(find "$SP/done" -name '*.result.toml' | wc -l)
[ "$done_n" -eq "$N" ] || { echo "bench: only $done_n of $N landwall jobs done" >&2; exit 1; }
drain_lw=$(rate "$N" $((t1 - t0)))

echo "drain: tsp on $N queued jobs"
mkfifo "$S/gate"
tsp sh -c "read x < '$S/gate'" >/dev/null
for _ in $(seq "$N"); do last=$(tsp true); done
sync
t0=$(now_us)
echo go >"$S/gate"
tsp -w "$last" >/dev/null || true
t1=$(now_us)
drain_tsp=$(rate "$N" $((t1 - t0)))
tsp -C >/dev/null

# --- end-to-end throughput: submit while running ----------------------------------------
echo "end-to-end: landwall-drain"
SP=$S/spool-e2e
start_daemon "$SP"
sync
t0=$(now_us)
for _ in $(seq "$N"); do last=$("$LANDWALL" submit --spool "$SP" --worktree "$WT" -- true); done
until [ "$(find "$SP/done" -name '*.result.toml' | wc -l)" -eq "$N" ]; do sleep 0.005; done
t1=$(now_us)
stop_daemon
e2e_lw=$(rate "$N" $((t1 - t0)))

echo "end-to-end: tsp"
sync
t0=$(now_us)
for _ in $(seq "$N"); do last=$(tsp true); done
tsp -w "$last" >/dev/null || true
t1=$(now_us)
e2e_tsp=$(rate "$N" $((t1 - t0)))

read -r lw_med lw_p99 < <(stats "$S/lat-lw")
read -r ts_med ts_p99 < <(stats "$S/lat-tsp")

report=$(cat <<EOF
# landwall-drain vs task-spooler

$(date -u +%Y-%m-%dT%H:%M:%SZ), kernel $(uname -r), $(nproc) cores, $(tsp -V 2>&1 | head -n1 | sed "s/ - .*//"),
landwall $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "?"), $N jobs per figure, one job slot each,
load average $LOAD0 at the start and $(cut -d' ' -f1-3 /proc/loadavg) at the end (other work on the machine skews both columns alike).
landwall-drain walled in (LANDWALL_DRAIN_SANDBOX=1); each of its jobs behind its own Landlock
wall and self-check (no terminal, so no seccomp filter); submits and results fsynced. tsp: no wall, no fsync.

| figure | landwall-drain | tsp |
|---|---:|---:|
| latency submit → first instruction, median | $lw_med ms | $ts_med ms |
| latency submit → first instruction, p99 | $lw_p99 ms | $ts_p99 ms |
| throughput, $N queued \`true\` jobs drained | $drain_lw jobs/s | $drain_tsp jobs/s |
| throughput, $N \`true\` jobs submitted and run | $e2e_lw jobs/s | $e2e_tsp jobs/s |

Latency: one job at a time on an idle queue, from just before the client runs to the
job's own \`date +%s%N\`. Drained: landwall-drain --once on a full spool; tsp with its queue
held behind a blocking first job, then released. Submitted and run: a loop of client calls
while the daemon runs them, until the last is done. Produced by bench/drain.sh.
EOF
)
echo
echo "$report"
echo "$report" >"$OUT"
echo
echo "written to $OUT"
