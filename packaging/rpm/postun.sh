# landwall %postun: on erase, the shim links made by %post; on upgrade, restart a running
# service. The spool, /var/lib/landwall and the user stay (rpm has no purge).
if [ "$1" -eq 0 ]; then
    for a in claude opencode codex; do
        rm -f "/usr/lib/landwall/bin/$a"
    done
    # Directories cargo-generate-rpm does not record as the package's.
    rmdir /usr/lib/landwall/bin /usr/lib/landwall /etc/landwall /usr/share/doc/landwall \
        2>/dev/null || :
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ]; then
        systemctl try-restart landwall-drain.service >/dev/null 2>&1 || :
    fi
fi
exit 0
