#!/usr/bin/env bash
# Removes what packaging/install.sh installed: stops and disables the units, removes them,
# /opt/pdn (every release in /opt/pdn/releases), the release state (/var/lib/pdn-release) and
# the /usr/local/bin/pdn link. Keeps the config (/etc/pdn), the data
# (/var/lib/pdn: schedules, cache, state) and the users (pdn, pdn-scheduler, pdn-content,
# pdn-sensor), unless --purge.
#
#   sudo packaging/uninstall.sh [--purge] [--root DIR]
#
#   --purge      also delete /etc/pdn, /var/lib/pdn and the users
#   --root DIR   act on a throwaway root made with install.sh --root DIR
#   -h, --help   this text
set -euo pipefail

# What install.sh installs where, and its users (PREFIX, CONFIG_DIR, STATE_DIR, ...).
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/layout.sh"
USERS=("$PDN_USER" "$SCHEDULER_USER" "$CONTENT_USER" "$SENSOR_USER")
UNITS=(pdn-display.service pdn-display-retry.timer pdn-release-check.timer pdn-release-check.service
    pdn-scheduler.service pdn-content.service)

ROOT=""
PURGE=0

say() { printf 'pdn-uninstall: %s\n' "$*"; }
die() {
    printf 'pdn-uninstall: error: %s\n' "$*" >&2
    exit 1
}

parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --purge) PURGE=1 ;;
            --root) ROOT=${2:?--root needs a directory}; shift ;;
            -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
            *) die "unknown option '$1' (see --help)" ;;
        esac
        shift
    done
    if [ -n "$ROOT" ]; then
        [ -d "$ROOT" ] || die "--root: no such directory $ROOT"
        ROOT=$(cd "$ROOT" && pwd)
    elif [ "$(id -u)" -ne 0 ]; then
        die "run as root (sudo $0)"
    fi
}

# Every unit that is installed, sensor instances included.
installed_units() {
    local unit
    for unit in "${UNITS[@]}"; do
        [ -e "$ROOT$UNIT_DIR/$unit" ] && echo "$unit"
    done
    for unit in "$ROOT$UNIT_DIR"/*.wants/pdn-sensor@*.service; do
        [ -e "$unit" ] || [ -L "$unit" ] || continue
        basename "$unit"
    done | sort -u
    return 0
}

stop_and_disable() {
    local units=()
    mapfile -t units < <(installed_units)
    [ ${#units[@]} -gt 0 ] || return 0
    if [ -n "$ROOT" ]; then
        systemctl --root="$ROOT" disable "${units[@]}" >/dev/null 2>&1 || true
    elif [ ! -d /run/systemd/system ]; then
        systemctl disable "${units[@]}" >/dev/null 2>&1 || true
    else
        systemctl disable --now "${units[@]}" >/dev/null 2>&1 || true
    fi
    say "stopped and disabled: ${units[*]}"
}

remove_files() {
    local unit
    for unit in "${UNITS[@]}" pdn-sensor@.service; do
        rm -f "$ROOT$UNIT_DIR/$unit"
    done
    # Every release (/opt/pdn/releases), the current link, and the releases' state.
    rm -rf "$ROOT$PREFIX" "$ROOT$RELEASE_STATE_DIR"
    if [ -L "$ROOT/usr/local/bin/pdn" ]; then rm -f "$ROOT/usr/local/bin/pdn"; fi
    if [ -z "$ROOT" ] && [ -d /run/systemd/system ]; then
        systemctl daemon-reload
        systemctl reset-failed 'pdn-*' >/dev/null 2>&1 || true
    fi
    say "removed $PREFIX and the units"
}

purge() {
    if [ "$PURGE" = 0 ]; then
        say "kept $CONFIG_DIR (config) and $STATE_DIR (schedules, cache, state); --purge removes them"
        return 0
    fi
    rm -rf "$ROOT$CONFIG_DIR" "$ROOT$STATE_DIR"
    say "removed $CONFIG_DIR and $STATE_DIR"
    local user
    for user in "${USERS[@]}"; do
        if [ -z "$ROOT" ] && getent passwd "$user" >/dev/null; then
            userdel "$user"
            say "removed the user $user"
        fi
    done
}

main() {
    parse_args "$@"
    stop_and_disable
    remove_files
    purge
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
