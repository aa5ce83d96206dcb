#!/usr/bin/env bash
# What the protected paths (issue 19) cost a launch: the `claude` shim in front of /bin/true
# from a main checkout (with .vscode/tasks.json), with every protected path trimmed from the
# list (`protect = ["!…", …]`: no bind mounts; the watcher still starts, for the submodule
# check) and with the default list (a bind mount per protected path that exists and per
# directory on the way), as root and as the unprivileged user landwall-test, in one hyperfine
# run each. Same binary, both with the private /dev/pts. With LANDWALL_BEFORE (a landwall
# built before protected paths), that binary is a third row: the whole cost, the watcher's
# double fork included. Writes bench/protect-results.md.
#
# Environment: LANDWALL (default target/release/landwall: `make release`), LANDWALL_BEFORE
# (optional), PROTECT_RUNS (default 400), PROTECT_DIR (scratch; default
# $CARGO_TARGET_DIR/bench-protect or target/bench-protect). Needs root, git, python3 and
# hyperfine (`make bench` installs it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_MD=$ROOT/bench/protect-results.md
LW=${LANDWALL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/landwall}
BEFORE=${LANDWALL_BEFORE:-}
RUNS=${PROTECT_RUNS:-400}
DIR=${PROTECT_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench-protect}

die() { echo "bench/protect.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (it measures root and landwall-test)"
[ -x "$LW" ] || die "$LW is missing: make release (or set LANDWALL)"
for t in git hyperfine setpriv python3; do command -v "$t" >/dev/null || die "$t is missing"; done
id landwall-test >/dev/null 2>&1 || useradd --system --no-create-home landwall-test

rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/bin-before" "$DIR/agents" "$DIR/etc" "$DIR/home/src/app/.vscode"
cp "$LW" "$DIR/bin/landwall"
ln -s landwall "$DIR/bin/claude"
if [ -n "$BEFORE" ]; then
    cp "$BEFORE" "$DIR/bin-before/landwall"
    ln -s landwall "$DIR/bin-before/claude"
fi
printf '#!/bin/sh\nexit 0\n' >"$DIR/agents/claude-real"
chmod 755 "$DIR/agents/claude-real"
git -C "$DIR/home/src/app" init -q
printf '{}\n' >"$DIR/home/src/app/.vscode/tasks.json"
# The build before keeps its record of what is the user's in another layout: it runs in a
# worktree of its own, so that neither reads the other's.
cp -a "$DIR/home/src/app" "$DIR/home/src/app-before"
# Root's records are in root's home whatever HOME says: a scratch worktree made again at the
# same path starts with none.
for wt in app app-before; do
    key=$(printf '%s' "$(cd "$DIR/home/src/$wt" && pwd -P)" | sha256sum | cut -d' ' -f1)
    rm -rf ~root/.local/state/landwall/record/"$key" ~root/.local/state/landwall/record/"$key".*
done
printf '' >"$DIR/etc/default.toml"
chown -R landwall-test: "$DIR/home"
chmod 755 "$DIR" "$DIR/bin" "$DIR/bin-before" "$DIR/agents" "$DIR/etc"
cd "$DIR/home/src/app"
# The list as this binary has it, every entry trimmed: the baseline protects nothing.
LANDWALL_CONFIG=$DIR/etc/default.toml HOME=$DIR/home "$DIR/bin/landwall" policy --json |
    python3 -c '
import json, sys
p = json.load(sys.stdin)
root = p["worktree"].rstrip("/") + "/"
names = sorted({e["path"][len(root):] for e in p["protected"] if e["path"].startswith(root)})
print("protect = [" + ", ".join(json.dumps("!" + n) for n in names) + "]")
' >"$DIR/etc/none.toml"
HELD=$(LANDWALL_CONFIG=$DIR/etc/default.toml HOME=$DIR/home "$DIR/bin/landwall" policy --json |
    python3 -c 'import json,sys; p=json.load(sys.stdin); print(sum(1 for e in p["protected"] if e["hold"] != "swept if created"))')

env_for() { # config [bin dir] [worktree]
    echo "env -i -C $DIR/home/src/${3:-app} HOME=$DIR/home PATH=$DIR/${2:-bin}:$DIR/agents:/usr/bin:/bin LANDWALL_CONFIG=$DIR/etc/$1.toml"
}
as_user="setpriv --reuid=landwall-test --regid=landwall-test --init-groups"
for who in root user; do
    pre=""
    [ "$who" = user ] && pre="$as_user"
    before=()
    [ -z "$BEFORE" ] || before=(-n "$who, the build before protected paths" "$pre $(env_for default bin-before app-before) claude")
    hyperfine -N --warmup 20 --runs "$RUNS" --export-markdown "$DIR/$who.md" \
        -n "$who, nothing protected (baseline)" "$pre $(env_for none) claude" \
        -n "$who, default protected paths" "$pre $(env_for default) claude" \
        "${before[@]}" >/dev/null
done

ratio3() { # file: mean of row 2 over row 3
    awk -F'|' 'NR>2 && $3 ~ /[0-9]/ { gsub(/ /,"",$3); split($3,a,"±"); m[++n]=a[1] } END { printf "%.2f", m[2]/m[3] }' "$1"
}
ratio() { # file: mean of row 2 over row 1
    awk -F'|' 'NR>2 && $3 ~ /[0-9]/ { gsub(/ /,"",$3); split($3,a,"±"); m[++n]=a[1] } END { printf "%.2f", m[2]/m[1] }' "$1"
}
{
    echo "# Protected paths per launch (bench/protect.sh)"
    echo
    echo "$(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs, binary ${LW#"$ROOT"/}; hyperfine -N, $RUNS runs each,"
    echo "the shim in front of /bin/true from a main checkout with .vscode/tasks.json (wall clock, ms)."
    echo
    cat "$DIR/root.md"
    echo
    cat "$DIR/user.md"
    echo
    echo "Default over none: root $(ratio "$DIR/root.md")x, user $(ratio "$DIR/user.md")x ($HELD bind mounts"
    echo "here, and the list resolved: the mounts' share)."
    if [ -n "$BEFORE" ]; then
        echo "Default over the build before: root $(ratio3 "$DIR/root.md")x, user $(ratio3 "$DIR/user.md")x (the whole"
        echo "cost: the mounts, and the watcher's double fork, which every launch in a repository now has)."
    fi
} >"$OUT_MD"
cat "$OUT_MD"
