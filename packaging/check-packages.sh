#!/usr/bin/env bash
# `make test-packages`, part 1: static checks of the built packages.
#
#   bash packaging/check-packages.sh TARGET_DIR
#
# 1. lintian on the deb: no errors (--fail-on error);
# 2. rpmlint on the rpm: no errors (packaging/rpm/rpmlint.toml filters what does not
#    apply, each with its reason), and `rpm -qlp`;
# 3. the deb, the rpm and `make install PREFIX=/usr` ship the same files (up to the
#    distributions' own paths), and `make uninstall` removes all of them;
# 4. `systemd-analyze verify` on the unit as shipped: nothing on stderr;
# 5. `systemd-analyze security --offline=yes`: exposure 2.0 or better.
set -euo pipefail

TARGET_DIR=$(realpath "$1")
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PKG=$TARGET_DIR/packages
WORK=$TARGET_DIR/pkgtest/check
UNIT=landwall-drain.service
THRESHOLD=2.0

shopt -s nullglob
debs=("$PKG"/landwall_*.deb)
rpms=("$PKG"/landwall-*.rpm)
shopt -u nullglob
[ ${#debs[@]} -eq 1 ] || { echo "check-packages: expected one deb in $PKG (make deb)" >&2; exit 1; }
[ ${#rpms[@]} -eq 1 ] || { echo "check-packages: expected one rpm in $PKG (make rpm)" >&2; exit 1; }
deb=${debs[0]}
rpm=${rpms[0]}

t0=$SECONDS
step() { echo "== check-packages [$((SECONDS - t0))s]: $*"; }
fail() { echo "check-packages: FAILED: $*" >&2; exit 1; }

rm -rf "$WORK"
mkdir -p "$WORK"

step "lintian $(basename "$deb")"
# lintian warns when run as root; that is all it does.
lintian --fail-on error --tag-display-limit 0 "$deb" 2> >(grep -v 'root privileges is not recommended' >&2) ||
    fail "lintian reported errors"

step "rpmlint $(basename "$rpm")"
rpmlint -c "$ROOT/packaging/rpm/rpmlint.toml" "$rpm" || fail "rpmlint reported errors"

step "rpm -qlp $(basename "$rpm")"
rpm -qlp "$rpm" | tee "$WORK/rpm.list"
rpm -qp --scripts "$rpm" >/dev/null
configs=$(rpm -qpc "$rpm")
for c in /etc/landwall/landwall.toml /etc/landwall/drain.env /etc/profile.d/landwall.sh; do
    grep -qx "$c" <<<"$configs" || fail "the rpm does not mark $c as a configuration file"
done

step "the deb, the rpm and make install ship the same files"
# File lists, with the distributions' differences mapped to one name: Debian's zsh reads
# vendor-completions, Fedora's and /usr/local's site-functions. Debian-only: the changelog
# and lintian overrides. The rpm's shim links are made by %post.
normalise() { sed -e 's|^\./|/|' -e 's|/zsh/vendor-completions/|/zsh/site-functions/|' | sort; }
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | normalise |
    grep -v -e '^/usr/share/doc/landwall/changelog.Debian.gz$' -e '^/usr/share/lintian/' >"$WORK/deb.list"
normalise <"$WORK/rpm.list" >"$WORK/rpm.sorted"
grep -v -e '^/usr/lib/landwall/bin/' "$WORK/deb.list" | diff -u - "$WORK/rpm.sorted" ||
    fail "the rpm and the deb differ (beyond the shim links the rpm's %post makes)"
grep -qx /usr/lib/landwall/bin/claude "$WORK/deb.list" || fail "the deb has no /usr/lib/landwall/bin/claude"
dest=$WORK/destdir
make -s -C "$ROOT" install DESTDIR="$dest" PREFIX=/usr >/dev/null
(cd "$dest" && find . ! -type d) | normalise >"$WORK/install.list"
grep -v -e '^/usr/share/doc/landwall/copyright$' "$WORK/deb.list" | diff -u - "$WORK/install.list" ||
    fail "make install PREFIX=/usr and the deb differ"
cmp "$dest/usr/lib/systemd/system/$UNIT" "$ROOT/packaging/systemd/$UNIT" ||
    fail "make install PREFIX=/usr changed the unit"
make -s -C "$ROOT" uninstall DESTDIR="$dest" PREFIX=/usr >/dev/null
left=$(cd "$dest" && find . ! -type d)
[ -z "$left" ] || fail "make uninstall left: $left"

step "systemd-analyze verify $UNIT"
# The unit as shipped, with the package's files (ExecStart, man pages) in a root that also
# holds this machine's units (the targets it is ordered against) and /bin/kill.
vroot=$WORK/verify-root
mkdir -p "$vroot"
dpkg-deb -x "$deb" "$vroot"
mkdir -p "$vroot/usr/bin"
ln -s usr/bin "$vroot/bin"
cp /usr/bin/kill "$vroot/usr/bin/kill"
cp -an /usr/lib/systemd/system/. "$vroot/usr/lib/systemd/system/"
cmp "$vroot/usr/lib/systemd/system/$UNIT" "$ROOT/packaging/systemd/$UNIT" ||
    fail "the deb's unit is not packaging/systemd/$UNIT"
MANPATH=$vroot/usr/share/man systemd-analyze verify --root="$vroot" "$UNIT" 2>"$WORK/verify.err" ||
    { cat "$WORK/verify.err" >&2; fail "systemd-analyze verify failed"; }
if [ -s "$WORK/verify.err" ]; then
    cat "$WORK/verify.err" >&2
    fail "systemd-analyze verify wrote to stderr"
fi

step "systemd-analyze security --offline=yes $UNIT"
systemd-analyze security --offline=yes "$ROOT/packaging/systemd/$UNIT" >"$WORK/security.txt" 2>&1 || true
grep -E '✗|Overall' "$WORK/security.txt"
score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$WORK/security.txt")
[ -n "$score" ] || { cat "$WORK/security.txt" >&2; fail "no exposure level in the output"; }
awk -v s="$score" -v t="$THRESHOLD" 'BEGIN { exit !(s <= t) }' ||
    fail "exposure level $score is above $THRESHOLD"
echo "exposure level $score (threshold $THRESHOLD)"

step "done"
