#!/bin/sh
# hot-functions.sh list CALLGRIND.OUT...    (to stdout)
# hot-functions.sh order BINARY LIST OUT
#
# The shim's function layout. `list` names the functions that callgrind runs of the shim
# executed (valgrind --tool=callgrind --demangle=no), first seen first: bench/wall.sh keeps
# them in shim/hot-functions.txt. `order` writes to OUT the symbols of BINARY that LIST
# names, in LIST's order: the file lld lays the shim out by (shim/build.rs; make
# release-static), so that what a launch runs sits together in a few pages.
#
# Names are kept without what changes from one build to the next: a legacy Rust symbol's
# hash (17h<16 hex digits>E), a v0 symbol's crate disambiguators (Cs<base 62>_) and LTO's
# .llvm.<n> suffix. A listed name that matches nothing is skipped: a stale list only makes
# the layout less good, never the build fail.
set -eu
normalize='
  function normalize(s) {
    sub(/\.llvm\.[0-9]+$/, "", s)
    sub(/17h[0-9a-f]+E$/, "", s)
    gsub(/Cs[0-9A-Za-z]+_/, "C", s)
    return s
  }'
case "${1:-}" in
list)
  shift
  for f in "$@"; do sed -n 's/^c\{0,1\}fn=([0-9]*) //p' "$f"; done |
    awk "$normalize"'
      !/^0x/ { n = normalize($0); if (!(n in seen)) { seen[n] = 1; print n } }'
  ;;
order)
  [ $# -eq 4 ] || { echo "usage: hot-functions.sh order BINARY LIST OUT" >&2; exit 2; }
  bin=$2 list=$3 out=$4
  nm --defined-only "$bin" | awk "$normalize"'
    NR == FNR { if ($0 !~ /^#/ && $0 != "" && !($0 in rank)) rank[$0] = NR; next }
    { n = normalize($NF); if (n in rank) print rank[n], $NF }' "$list" - |
    sort -s -n -k1,1 | cut -d' ' -f2- >"$out.tmp"
  mv "$out.tmp" "$out"
  ;;
*)
  echo "usage: hot-functions.sh list CALLGRIND.OUT... | order BINARY LIST OUT" >&2
  exit 2
  ;;
esac
