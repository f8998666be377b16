# shellcheck shell=bash
# What lives beside the releases and how the roles start (install.sh's 'files', 'enable' and
# 'start' steps): pdn-release, the docs and the systemd units installed; the units of the
# chosen roles enabled (with --root, in that root) and started or restarted; a desktop that
# would hold the display's screen turned off when asked, warned of when not. Sourced by
# install.sh; it only defines functions.

# What lives beside the releases: pdn-release (the switch and the rollback; not in a release,
# so a broken one cannot break its way back), the docs and the units.
# shellcheck disable=SC2154 # install.sh sets script_dir and source_dir
install_files() {
    local unit
    install -d -m 0755 "$ROOT$PREFIX/libexec" "$ROOT$PREFIX/share" "$ROOT$UNIT_DIR"
    install -m 0755 "$script_dir/pdn-release" "$ROOT$PREFIX/libexec/pdn-release"
    install -m 0644 "$source_dir/README.md" "$ROOT$PREFIX/share/README.md" 2>/dev/null || true
    if [ -d "$source_dir/docs" ]; then # what the README links to, beside it
        install -m 0644 "$source_dir/SECURITY.md" "$ROOT$PREFIX/share/SECURITY.md"
        install -d -m 0755 "$ROOT$PREFIX/share/docs/images"
        install -m 0644 "$source_dir"/docs/*.md "$ROOT$PREFIX/share/docs/"
        install -m 0644 "$source_dir"/docs/images/*.png "$ROOT$PREFIX/share/docs/images/"
    fi
    install -m 0644 "$script_dir/pdn.toml.example" "$ROOT$PREFIX/share/pdn.toml.example"
    for unit in "$source_dir"/systemd/*.service "$source_dir"/systemd/*.timer; do
        [ -e "$unit" ] || continue
        install -m 0644 "$unit" "$ROOT$UNIT_DIR/$(basename "$unit")"
    done
    did "installed pdn-release ($PREFIX/libexec), the docs ($PREFIX/share) and the systemd units ($UNIT_DIR)"
}

units_to_enable() {
    wants_service display && printf '%s\n' pdn-display.service pdn-display-retry.timer \
        pdn-release-check.timer
    wants_service scheduler && echo pdn-scheduler.service
    wants_service content && echo pdn-content.service
    return 0
}

enable_units() {
    local units=() platform
    mapfile -t units < <(units_to_enable)
    platform=$(configured_platform)
    if wants_service sensor; then
        say "sensors: one unit per sensor, e.g. systemctl enable --now pdn-sensor@door (its settings in $CONFIG_DIR/sensor-door.env)"
    fi
    if [ ${#units[@]} -eq 0 ]; then return 0; fi
    if [ -n "$ROOT" ]; then
        systemctl --root="$ROOT" enable "${units[@]}" >/dev/null 2>&1 \
            || die "systemctl --root=$ROOT enable ${units[*]} failed"
        did "enabled in $ROOT: ${units[*]}"
        return 0
    fi
    if systemd_running; then systemctl daemon-reload; fi
    if [ "$platform" = cage ] || [ "$platform" = auto ]; then
        if systemctl cat seatd.service >/dev/null 2>&1; then
            systemctl enable seatd.service >/dev/null 2>&1 && did "enabled seatd.service (cage's seat)"
        fi
    fi
    systemctl enable "${units[@]}" >/dev/null 2>&1 || die "systemctl enable ${units[*]} failed"
    did "enabled ${units[*]}: they start at every boot"
    check_desktop "$platform"
}

# A desktop's display manager holds the screen; eglfs and cage need it to themselves.
check_desktop() {
    local platform=$1
    case "$platform" in xcb | wayland | offscreen) return 0 ;; esac
    systemctl is-enabled display-manager.service >/dev/null 2>&1 || return 0
    if [ "$DISABLE_DESKTOP" = 1 ]; then
        systemctl set-default multi-user.target >/dev/null
        systemctl disable display-manager.service >/dev/null 2>&1 || true
        did "the machine now boots to the console (multi-user.target): the kiosk owns the screen"
    else
        warn "a desktop (display-manager.service) will hold the screen at boot; rerun with --disable-desktop, or set platform = \"xcb\" and run inside the desktop's session"
    fi
}

start_units() {
    local units=() unit
    mapfile -t units < <(units_to_enable)
    if [ ${#units[@]} -eq 0 ]; then return 0; fi
    if [ "$START" = 0 ]; then
        say "not started (--no-start); they start at the next boot, or: systemctl start ${units[*]}"
        return 0
    fi
    if ! systemd_running; then
        say "systemd is not running here (a container or chroot): nothing started; the units start at the next boot"
        return 0
    fi
    for unit in "${units[@]}"; do
        [[ "$unit" == *.timer ]] && { systemctl start "$unit"; continue; }
        systemctl reset-failed "$unit" >/dev/null 2>&1 || true
        # restart: an upgrade must replace the running version.
        systemctl restart --no-block "$unit"
    done
    did "started ${units[*]}"
}
