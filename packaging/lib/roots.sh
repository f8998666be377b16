# shellcheck shell=bash
# A bare Debian root that a proof builds on this machine (fresh-root.sh, systemd-proof.sh) gets
# this machine's network settings, as a fresh machine of its kind has them, and nothing else of
# it: its resolver, the certificate authorities its HTTPS egress needs
# (/usr/local/share/ca-certificates) and pip's setting to trust them (/etc/pip.conf). Sourced; it
# only defines functions.

# Carries the settings into the root $1; prints the certificate authorities carried (nothing
# when there are none), and fails when the root cannot take them.
carry_network_settings() {
    local root=$1
    cp /etc/resolv.conf "$root/etc/resolv.conf" || return 1
    if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$root/etc/pip.conf" || return 1; fi
    compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null || return 0
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" || return 1
    (cd /usr/local/share/ca-certificates && echo ./*.crt)
    chroot "$root" update-ca-certificates >/dev/null 2>&1
}
