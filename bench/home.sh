#!/usr/bin/env bash
# What the private home (issue 15) costs a launch: the shim launching /bin/true from a
# project in a home laid out like a developer's, at HOME_BASE (before the private home: the
# home granted whole, writable) and at HOME_NEW (default HEAD: the private home, and the same
# build with `home = "open"`), as root and as the unprivileged user landwall-test, with
# hyperfine in one run. Writes bench/home-results.md.
#
# Why it could cost: the private home looks up each of profile.rs's read-only entries and
# credential stores (about fifty `lstat`s and a listing of ~/.ssh) where the open home had
# one rule for $HOME. Why it could save: fewer, narrower rules.
#
# Environment: HOME_BASE (default b2e5cc1), HOME_NEW (default HEAD), HOME_RUNS (default
# 400), HOME_DIR (builds and the scratch home; default $CARGO_TARGET_DIR/bench-home or
# target/bench-home). Needs root, git, cargo and hyperfine (`make bench` installs it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_MD=$ROOT/bench/home-results.md
DIR=${HOME_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench-home}
RUNS=${HOME_RUNS:-400}

die() { echo "bench/home.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (it measures root and landwall-test)"
for t in git cargo hyperfine setpriv python3; do command -v "$t" >/dev/null || die "$t is missing"; done
id landwall-test >/dev/null 2>&1 || useradd --system --no-create-home landwall-test

BASE=$(git -C "$ROOT" rev-parse --short=7 "${HOME_BASE:-b2e5cc1}^{commit}")
NEW=$(git -C "$ROOT" rev-parse --short=7 "${HOME_NEW:-HEAD}^{commit}")

mkdir -p "$DIR/bin"
build() {
    local c=$1
    [ -x "$DIR/bin/$c/claude" ] && return 0
    echo "== home: building $c (release) in $DIR"
    rm -rf "$DIR/src-$c"
    mkdir -p "$DIR/src-$c" "$DIR/bin/$c"
    git -C "$ROOT" archive "$c" | tar -x -C "$DIR/src-$c"
    # A target directory each: the two trees are the same workspace at the same path depth,
    # and one shared target directory was seen to keep the first build for both.
    (cd "$DIR/src-$c" && CARGO_TARGET_DIR="$DIR/target-$c" cargo build --release -q -p landwall)
    cp "$DIR/target-$c/release/landwall" "$DIR/bin/$c/landwall"
    ln -sf landwall "$DIR/bin/$c/claude"
}
build "$BASE"
build "$NEW"

# A home as a developer has one: projects, keys, cloud credentials, rc files, toolchains.
H=$DIR/home
rm -rf "$H" "$DIR/agents"
mkdir -p "$H/src/app" "$H/src/other" "$H/.ssh" "$H/.aws" "$H/.config/gh" "$H/.cargo/bin" \
    "$H/.local/bin" "$H/.claude" "$H/.cache" "$DIR/agents"
git -C "$H/src/app" init -q
git -C "$H/src/other" init -q
for f in .ssh/id_ed25519 .ssh/id_ed25519.pub .ssh/config .ssh/known_hosts .aws/credentials \
    .config/gh/hosts.yml .bashrc .profile .gitconfig src/other/.env; do
    echo "x" >"$H/$f"
done
printf '#!/bin/sh\nexit 0\n' >"$DIR/agents/claude-real"
chmod 755 "$DIR/agents/claude-real"
printf 'home = "open"\n' >"$DIR/open.toml"
chmod -R go-w "$DIR/open.toml"
chown -R landwall-test: "$H"

run() { # who, build, config
    local as=()
    [ "$1" = root ] || as=(setpriv --reuid=landwall-test --regid=landwall-test --init-groups --)
    printf '%s ' "${as[@]}" env -i HOME="$H" LANG=C.UTF-8 LANDWALL_CONFIG="$3" \
        PATH="$DIR/bin/$2:$DIR/agents:/usr/bin:/bin" "$DIR/bin/$2/claude"
}
md() { echo "$*" >>"$OUT_MD.tmp"; }
: >"$OUT_MD.tmp"
md "# The private home's cost at launch (bench/home.sh)"
md ""
md "\`base\` is $BASE (\$HOME granted whole and writable, the default then), \`private\` and \`open\` are $NEW with the default (\`home = \"private\"\`) and with \`home = \"open\"\`. Release builds, the shim launching /bin/true from a git repository in a home with projects, keys, credentials, rc files and toolchains; hyperfine -N, $RUNS runs each, medians. Kernel $(uname -r), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
md ""
md "| who | base ms | private ms | open ms | private × base | open × base |"
md "|---|---:|---:|---:|---:|---:|"
cd "$H/src/app"
for who in root user; do
    json=$DIR/hyperfine-$who.json
    hyperfine -N -w 30 -r "$RUNS" --export-json "$json" \
        -n base "$(run "$who" "$BASE" "$DIR/none.toml")" \
        -n private "$(run "$who" "$NEW" "$DIR/none.toml")" \
        -n open "$(run "$who" "$NEW" "$DIR/open.toml")" >/dev/null
    python3 - "$json" "$who" >>"$OUT_MD.tmp" <<'PY'
import json, sys
r = {x["command"]: x["median"] * 1000 for x in json.load(open(sys.argv[1]))["results"]}
b, p, o = r["base"], r["private"], r["open"]
print(f"| {sys.argv[2]} | {b:.3f} | {p:.3f} | {o:.3f} | {p / b:.3f} | {o / b:.3f} |")
PY
done
md ""
md "Load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
mv "$OUT_MD.tmp" "$OUT_MD"
cat "$OUT_MD"
