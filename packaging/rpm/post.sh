# landwall %post: the shim links (cargo-generate-rpm cannot package symbolic links, so they
# are made here and removed by %postun), the spool, and the (disabled) unit.
mkdir -p /usr/lib/landwall/bin
for a in claude opencode codex; do
    ln -sfn ../../../bin/landwall "/usr/lib/landwall/bin/$a"
done
systemd-tmpfiles --create landwall.conf >/dev/null 2>&1 ||
    install -d -m 0750 -o landwall -g landwall /var/spool/landwall
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
exit 0
