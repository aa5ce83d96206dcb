#!/usr/bin/env bash
# Root launches while /etc changes beside them (issue 16): as root the policy lists /etc to
# carve the credential files out of it, and `useradd`, an editor or a package manager creates,
# renames and deletes files there at any moment. An entry that vanishes between the listing
# and the wall must be skipped, one that appears later is simply not granted: no launch may
# fail. CHURN_LAUNCHES (default 1000) root launches of the `claude` shim in front of /bin/true
# from a git worktree, first with /etc quiet, then with a loop creating, renaming and deleting
# files in /etc throughout (the way useradd writes /etc/passwd.PID and renames it). Counts the
# launches that failed (the run fails if any did) and the wall-clock ms per launch of each
# phase, so the ratio shows what the churn costs a launch. Writes bench/churn-results.md.
#
# Environment: LANDWALL (the binary to measure; default target/release/landwall, which
# `make release` builds), CHURN_LAUNCHES, CHURN_DIR (scratch; default
# $CARGO_TARGET_DIR/bench-churn or target/bench-churn). Needs root and git. Under a minute.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_MD=$ROOT/bench/churn-results.md
LW=${LANDWALL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/landwall}
N=${CHURN_LAUNCHES:-1000}
DIR=${CHURN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench-churn}

die() { echo "bench/churn.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (the launches measured are root's, which list /etc)"
[ -x "$LW" ] || die "$LW is missing: make release (or set LANDWALL)"
command -v git >/dev/null || die "git is missing"

rm -rf "$DIR"
mkdir -p "$DIR/shims" "$DIR/agents" "$DIR/wt"
ln -s "$LW" "$DIR/shims/claude"
printf '#!/bin/sh\nexit 0\n' >"$DIR/agents/claude"
chmod 755 "$DIR/agents/claude"
git -C "$DIR/wt" init -q

# The churn: a file in /etc created, renamed and deleted as fast as the shell can, under a
# name of its own so nothing else in /etc is touched; removed on exit whatever happens.
tag="landwall-churn.$$"
churn_pid=
stop_churn() {
    if [ -n "$churn_pid" ]; then
        kill "$churn_pid" 2>/dev/null || true
        wait "$churn_pid" 2>/dev/null || true
        churn_pid=
    fi
    rm -f /etc/"$tag".*
}
trap stop_churn EXIT
churn() {
    local n=0
    while :; do
        echo x >"/etc/$tag.$n"
        mv "/etc/$tag.$n" "/etc/$tag.$n.new"
        rm "/etc/$tag.$n.new"
        n=$((n + 1))
        [ $((n % 100)) -ne 0 ] || echo "$n" >"$DIR/churned"
    done
}

# Runs $N launches; prints "failures ms_per_launch"; the first failure's stderr goes to
# $DIR/first-failure.
launches() {
    local fails=0 i start end
    rm -f "$DIR/first-failure"
    start=$(date +%s%N)
    for ((i = 0; i < N; i++)); do
        if ! (cd "$DIR/wt" && env -i HOME=/root PATH="$DIR/shims:$DIR/agents:/usr/bin:/bin" \
            claude </dev/null >/dev/null 2>"$DIR/err"); then
            fails=$((fails + 1))
            [ -e "$DIR/first-failure" ] || cp "$DIR/err" "$DIR/first-failure"
        fi
    done
    end=$(date +%s%N)
    echo "$fails $(awk -v ns=$((end - start)) -v n="$N" 'BEGIN { printf "%.2f", ns / n / 1e6 }')"
}

echo "== churn: $N root launches with /etc quiet"
read -r quiet_fails quiet_ms < <(launches)
echo "== churn: $N root launches with /etc churning"
churn 2>/dev/null &
churn_pid=$!
read -r churn_fails churn_ms < <(launches)
stop_churn
churned=$(cat "$DIR/churned" 2>/dev/null || echo 0)
ratio=$(awk -v a="$churn_ms" -v b="$quiet_ms" 'BEGIN { printf "%.2f", a / b }')

{
    echo "# Root launches while /etc changes (bench/churn.sh)"
    echo
    echo "$(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs, binary ${LW#"$ROOT"/}."
    echo "$N root launches of the \`claude\` shim in front of /bin/true from a git worktree, each"
    echo "phase in turn; ms per launch is wall clock including the shell's fork, averaged."
    echo
    echo "| /etc | launches | failed | ms per launch |"
    echo "|---|---:|---:|---:|"
    echo "| quiet | $N | $quiet_fails | $quiet_ms |"
    echo "| a file created, renamed and deleted in a loop ($churned times) | $N | $churn_fails | $churn_ms |"
    echo
    echo "Churning over quiet: ${ratio}x (the churn loop shares the machine's CPUs with the launches)."
} >"$OUT_MD"
cat "$OUT_MD"
[ "$churned" -ge "$N" ] || die "/etc hardly changed ($churned files during $N launches)"
if [ "$quiet_fails" -ne 0 ] || [ "$churn_fails" -ne 0 ]; then
    echo "bench/churn.sh: launches failed; the first one said:" >&2
    cat "$DIR/first-failure" >&2
    exit 1
fi
