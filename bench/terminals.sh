#!/usr/bin/env bash
# What the private /dev/pts (issue 18: a mount namespace per launch, with a user namespace
# for a user, a new devpts instance and /dev/ptmx bound to it) costs a launch: the `claude`
# shim in front of /bin/true from a git worktree with `terminals = "all"` (the user's
# /dev/pts, no namespace: the baseline) and with the default `terminals = "own"`, as root and
# as the unprivileged user landwall-test, in one hyperfine run each. Same binary for both.
# Writes bench/terminals-results.md.
#
# Environment: LANDWALL (default target/release/landwall: `make release`), TERM_RUNS (default
# 400), TERM_DIR (scratch; default $CARGO_TARGET_DIR/bench-terminals or target/bench-terminals).
# Needs root and hyperfine (`make bench` installs it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_MD=$ROOT/bench/terminals-results.md
LW=${LANDWALL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/landwall}
RUNS=${TERM_RUNS:-400}
DIR=${TERM_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench-terminals}

die() { echo "bench/terminals.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (it measures root and landwall-test)"
[ -x "$LW" ] || die "$LW is missing: make release (or set LANDWALL)"
for t in git hyperfine setpriv; do command -v "$t" >/dev/null || die "$t is missing"; done
id landwall-test >/dev/null 2>&1 || useradd --system --no-create-home landwall-test

rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/agents" "$DIR/etc" "$DIR/home/src/app"
cp "$LW" "$DIR/bin/landwall"
ln -s landwall "$DIR/bin/claude"
printf '#!/bin/sh\nexit 0\n' >"$DIR/agents/claude-real"
chmod 755 "$DIR/agents/claude-real"
git -C "$DIR/home/src/app" init -q
printf 'terminals = "all"\n' >"$DIR/etc/all.toml"
printf '' >"$DIR/etc/own.toml"
chown -R landwall-test: "$DIR/home"
chmod 755 "$DIR" "$DIR/bin" "$DIR/agents" "$DIR/etc"

env_for() {
    echo "env -i HOME=$DIR/home PATH=$DIR/bin:$DIR/agents:/usr/bin:/bin LANDWALL_CONFIG=$DIR/etc/$1.toml"
}
as_user="setpriv --reuid=landwall-test --regid=landwall-test --init-groups"
cd "$DIR/home/src/app"
for who in root user; do
    pre=""
    [ "$who" = user ] && pre="$as_user"
    hyperfine -N --warmup 20 --runs "$RUNS" --export-markdown "$DIR/$who.md" \
        -n "$who, terminals = all (baseline)" "$pre $(env_for all) claude" \
        -n "$who, terminals = own (private /dev/pts)" "$pre $(env_for own) claude" >/dev/null
done

ratio() { # file: mean of row 2 over row 1
    awk -F'|' 'NR>2 && $3 ~ /[0-9]/ { gsub(/ /,"",$3); split($3,a,"±"); m[++n]=a[1] } END { printf "%.2f", m[2]/m[1] }' "$1"
}
{
    echo "# The private /dev/pts per launch (bench/terminals.sh)"
    echo
    echo "$(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs, binary ${LW#"$ROOT"/}; hyperfine -N, $RUNS runs each,"
    echo "the shim in front of /bin/true from a git worktree (wall clock, ms)."
    echo
    cat "$DIR/root.md"
    echo
    cat "$DIR/user.md"
    echo
    echo "Own over all: root $(ratio "$DIR/root.md")x, user $(ratio "$DIR/user.md")x (a mount namespace, a devpts"
    echo "mount and a bind mount; for a user also a user namespace and its maps)."
} >"$OUT_MD"
cat "$OUT_MD"
