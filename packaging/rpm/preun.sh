# landwall %preun: on erase (not upgrade), stop and disable the drain service.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl --no-reload disable --now landwall-drain.service >/dev/null 2>&1 || :
fi
exit 0
