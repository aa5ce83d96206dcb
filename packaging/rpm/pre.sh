# landwall %pre: the user of landwall-drain.service, as usr/lib/sysusers.d/landwall.conf says.
getent group landwall >/dev/null || groupadd -r landwall
getent passwd landwall >/dev/null || useradd -r -g landwall -d /var/lib/landwall -M \
    -s /sbin/nologin -c "landwall-drain daemon" landwall
exit 0
