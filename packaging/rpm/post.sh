# landwall %post: the shim links (cargo-generate-rpm cannot package symbolic links, so they
# are made here and removed by %postun), the spool, the daemon's home, and the (disabled)
# unit.
mkdir -p /usr/lib/landwall/bin
for a in claude opencode codex; do
    ln -sfn ../../../bin/landwall "/usr/lib/landwall/bin/$a"
done
# The spool and the daemon's home (tmpfiles.d/landwall.conf): neither useradd nor
# systemd-sysusers makes the home, and a daemon started without systemd gets no
# StateDirectory=.
systemd-tmpfiles --create landwall.conf >/dev/null 2>&1 || {
    install -d -m 0750 -o landwall -g landwall /var/spool/landwall
    install -d -m 0700 -o landwall -g landwall /var/lib/landwall
}
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
exit 0
