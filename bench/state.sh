#!/usr/bin/env bash
# What judging the agents' own state (issue 25) costs a launch: the `claude`, `codex` and
# `opencode` shims launching /bin/true from a project in a home holding each agent's state
# as a signed-in user has it (Claude Code's `.claude.json` with forty projects, Codex's
# configuration, a profile layer and its sessions, OpenCode's `auth.json` with three
# sign-ins, its configuration and cache), at STATE_BASE, STATE_PREV (the main before the
# last change) and STATE_NEW (default HEAD), as root and as the unprivileged user
# landwall-test. The launches run interleaved, round-robin, one of each build in turn:
# hyperfine runs each build's launches in a block, and on a small VM the blocks met
# different load (0.94x to 1.64x for the same builds). Writes bench/state-results.md.
#
# Why it costs: per private copy (`.claude.json`, `auth.json`) a tmpfs, a bind and a detach
# in the launch's namespace, and a read and judgement of the file before the wall goes up;
# OpenCode's cache, held, is a bind per directory of it that exists; `~/.cache`'s layer of
# the project's own is an overlay (its work directory made anew on the home's file system
# at the mount, the upper file system synced when the namespace ends); Claude Code's
# per-session directories of the project's own are a bind each.
#
# Environment: STATE_BASE (default 89cc64c), STATE_PREV (default f6aa795), STATE_NEW
# (default HEAD), STATE_RUNS (rounds, default 200), STATE_DIR (builds and the scratch home;
# default $CARGO_TARGET_DIR/bench-state or target/bench-state). Needs root, git, cargo,
# setpriv and python3.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_MD=$ROOT/bench/state-results.md
DIR=${STATE_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench-state}
RUNS=${STATE_RUNS:-200}

die() { echo "bench/state.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (it measures root and landwall-test)"
for t in git cargo setpriv python3; do command -v "$t" >/dev/null || die "$t is missing"; done
id landwall-test >/dev/null 2>&1 || useradd --system --no-create-home landwall-test

BASE=$(git -C "$ROOT" rev-parse --short=7 "${STATE_BASE:-89cc64c}^{commit}")
PREV=$(git -C "$ROOT" rev-parse --short=7 "${STATE_PREV:-f6aa795}^{commit}")
NEW=$(git -C "$ROOT" rev-parse --short=7 "${STATE_NEW:-HEAD}^{commit}")

mkdir -p "$DIR/bin"
build() {
    local c=$1
    [ -x "$DIR/bin/$c/landwall" ] && return 0
    echo "== state: building $c (release) in $DIR"
    rm -rf "$DIR/src-$c"
    mkdir -p "$DIR/src-$c" "$DIR/bin/$c"
    git -C "$ROOT" archive "$c" | tar -x -C "$DIR/src-$c"
    # A target directory each: one shared target directory was seen to keep the first
    # build for both (bench/home.sh).
    (cd "$DIR/src-$c" && CARGO_TARGET_DIR="$DIR/target-$c" cargo build --release -q -p landwall)
    cp "$DIR/target-$c/release/landwall" "$DIR/bin/$c/landwall"
    ln -sf landwall "$DIR/bin/$c/claude"
    ln -sf landwall "$DIR/bin/$c/codex"
    ln -sf landwall "$DIR/bin/$c/opencode"
}
build "$BASE"
build "$PREV"
# A build of HEAD is made again each run: a commit amended keeps no name of its own.
[ "${STATE_NEW:-HEAD}" != HEAD ] || rm -rf "$DIR/bin/$NEW"
build "$NEW"

# A signed-in user's home: each agent's state as it is after some weeks of use.
H=$DIR/home
rm -rf "$H" "$DIR/agents"
mkdir -p "$H/src/app" "$H/.claude/projects" "$H/.config/opencode" \
    "$H/.local/share/opencode/snapshot" "$H/.local/state/opencode" "$DIR/agents" \
    "$H/.codex/sessions/2026/12/04" "$H/.codex/shell_snapshots" "$H/.codex/tmp" "$H/.cache"
for d in packages bin node_modules models skills; do mkdir -p "$H/.cache/opencode/$d"; done
git -C "$H/src/app" init -q
python3 - "$H" <<'PY'
import json, sys
h = sys.argv[1]
projects = {f"{h}/src/p{i}": {"allowedTools": [], "lastCost": i * 0.1,
            "history": [{"display": "x" * 200} for _ in range(5)]} for i in range(40)}
c = {"numStartups": 40, "mcpServers": {}, "tipsHistory": {f"tip{i}": i for i in range(30)}, "projects": projects}
open(f"{h}/.claude/.claude.json", "w").write(json.dumps(c, indent=2))
open(f"{h}/.claude.json", "w").write(json.dumps({"mcpServers": {}}))
auth = {"anthropic": {"type": "oauth", "access": "a" * 100, "refresh": "r" * 100, "expires": 1},
        "openai": {"type": "api", "key": "k" * 50},
        "https://example.org": {"type": "wellknown", "key": "K", "token": "t" * 40}}
open(f"{h}/.local/share/opencode/auth.json", "w").write(json.dumps(auth, indent=2))
open(f"{h}/.config/opencode/opencode.jsonc", "w").write("{}\n")
open(f"{h}/.local/state/opencode/model.json", "w").write('{"recent": []}\n')
open(f"{h}/.codex/config.toml", "w").write('model = "gpt-5.5"\n[mcp_servers.docs]\ncommand = "docs-mcp"\n')
open(f"{h}/.codex/work.config.toml", "w").write('model = "gpt-5.5"\n')
open(f"{h}/.codex/auth.json", "w").write(json.dumps({"OPENAI_API_KEY": "k" * 50}))
for i in range(20):
    open(f"{h}/.codex/sessions/2026/12/04/rollout-{i}.jsonl", "w").write("{}\n" * 50)
PY
chmod 600 "$H/.claude/.claude.json" "$H/.local/share/opencode/auth.json"
for a in claude codex opencode; do
    printf '#!/bin/sh\nexit 0\n' >"$DIR/agents/$a-real"
    chmod 755 "$DIR/agents/$a-real"
done
: >"$DIR/none.toml"
chown -R landwall-test: "$H"
chmod 755 "$DIR" "$DIR/bin" "$DIR/agents"
chmod -R go+rX "$DIR/bin"

run() { # who, build, agent
    local as=()
    [ "$1" = root ] || as=(setpriv --reuid=landwall-test --regid=landwall-test --init-groups --)
    printf '%s ' "${as[@]}" env -i HOME="$H" LANG=C.UTF-8 LANDWALL_CONFIG="$DIR/none.toml" \
        PATH="$DIR/bin/$2:$DIR/agents:/usr/bin:/bin" "$DIR/bin/$2/$3"
}
# Each launch must succeed, and leave nothing of the user's state set aside or put back.
cd "$H/src/app"
for c in "$BASE" "$PREV" "$NEW"; do
    for a in claude codex opencode; do
        for who in root user; do
            out=$(eval "$(run "$who" "$c" "$a")" 2>&1) || die "$c $a as $who failed: $out"
            [ -z "$out" ] || die "$c $a as $who said: $out"
        done
    done
done

md() { echo "$*" >>"$OUT_MD.tmp"; }
: >"$OUT_MD.tmp"
md "# Judging the agents' own state at launch (bench/state.sh)"
md ""
md "\`base\` is $BASE, \`prev\` $PREV, \`new\` $NEW. Release builds, the shim launching /bin/true from a git repository in a home with each agent's state as a signed-in user has it; interleaved, one launch of each build in turn, $RUNS rounds after 20 warm-up launches each, medians. Kernel $(uname -r), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
md ""
md "| agent | who | base ms | prev ms | new ms | new × base | new × prev |"
md "|---|---|---:|---:|---:|---:|---:|"
for a in claude codex opencode; do
    for who in root user; do
        python3 - "$RUNS" "$a" "$who" "$(run "$who" "$BASE" "$a")" "$(run "$who" "$PREV" "$a")" "$(run "$who" "$NEW" "$a")" >>"$OUT_MD.tmp" <<'PY'
import shlex, statistics, subprocess, sys, time
runs, agent, who = int(sys.argv[1]), sys.argv[2], sys.argv[3]
cmds = [shlex.split(c) for c in sys.argv[4:7]]
for c in cmds:
    for _ in range(20):
        subprocess.run(c, check=True)
times = [[] for _ in cmds]
for _ in range(runs):
    for c, t in zip(cmds, times):
        start = time.perf_counter_ns()
        subprocess.run(c, check=True)
        t.append((time.perf_counter_ns() - start) / 1e6)
b, p, n = (statistics.median(t) for t in times)
print(f"| {agent} | {who} | {b:.3f} | {p:.3f} | {n:.3f} | {n / b:.3f} | {n / p:.3f} |", flush=True)
PY
    done
done
md ""
md "Load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
mv "$OUT_MD.tmp" "$OUT_MD"
cat "$OUT_MD"
