# shellcheck shell=bash
# The Debian packages a role needs (install.sh's 'packages' step): for a display, the
# libraries PyPI's Qt WebEngine loads, fonts, what its screen platform and video decoding need;
# for the other roles only Python's venv and CA certificates. Installed when missing, each
# "a|b" entry as the first this release has; with --root only said. Sourced by install.sh; it
# only defines functions.

# Libraries Qt WebEngine (PyPI's PySide6) loads, fonts, and what the platform needs; for a
# machine without the display role, only what a venv and HTTPS need.
# "a|b": the first that this release has (Trixie renamed some for 64-bit time).
system_packages() {
    local platform=$1
    if ! wants_service display; then
        printf '%s\n' python3-venv ca-certificates
        return 0
    fi
    local packages=(
        python3-venv ca-certificates fonts-dejavu-core fontconfig
        libnss3 libnspr4 libxkbcommon0 libegl1 libgl1 libgbm1 libdrm2 libfontconfig1
        libfreetype6 libdbus-1-3 "libasound2t64|libasound2" libpulse0 libxshmfence1
        libxcomposite1 libxdamage1 libxrandr2 libxtst6 libxkbfile1 libxcb-cursor0
        libxkbcommon-x11-0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
        libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1
        libwayland-client0 libwayland-cursor0 libwayland-egl1
        libinput10 "libmtdev1t64|libmtdev1" "libudev1"
        v4l-utils x11-xserver-utils
    )
    # PyPI's aarch64 wheels of Qt WebEngine link these from the system (the x86_64 ones carry
    # their own): measured by ldd in an emulated arm64 Debian 13 root (packaging/fresh-root.sh
    # --arch arm64); without them PySide6.QtWebEngineQuick does not import.
    case "$(machine_arch)" in
        aarch64 | arm64)
            packages+=(libsnappy1v5 libopus0 libwebp7 libwebpdemux2 libwebpmux3
                "libminizip1t64|libminizip1" liblcms2-2)
            ;;
    esac
    case "$platform" in
        # xwayland: Debian's cage exits at start without it ("Cannot create XWayland server"),
        # though it does not depend on it. grim: the watchdog reads back what cage shows
        # (player/renderer/compositor.py).
        cage | auto) packages+=(cage xwayland seatd grim) ;;
    esac
    # Video decoding in hardware (player/videodecode.py picks the backend): a Pi's V4L2
    # decoders through the system's GStreamer (the wheel's Qt plugin links it); VA-API for an
    # Intel or AMD GPU (the wheel's FFmpeg loads libva). vainfo shows what a GPU decodes.
    if is_raspberry_pi; then
        packages+=(gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
            gstreamer1.0-libav gstreamer1.0-gl)
    elif [ "$(uname -m)" = x86_64 ]; then
        packages+=(libva2 libva-drm2 mesa-va-drivers "intel-media-va-driver|i965-va-driver" vainfo)
    fi
    printf '%s\n' "${packages[@]}"
}

install_system_packages() {
    local platform=$1 entry choice alternative missing=()
    if ! command -v apt-get >/dev/null 2>&1; then
        warn "no apt-get: install Qt WebEngine's libraries (nss, xkbcommon, gbm, egl, fontconfig) yourself"
        return 0
    fi
    while read -r entry; do
        choice=""
        for alternative in ${entry//|/ }; do
            if package_installed "$alternative"; then
                choice=installed
                break
            fi
            if [ -z "$choice" ] && package_available "$alternative"; then choice=$alternative; fi
        done
        if [ -z "$choice" ]; then
            warn "package ${entry//|/ or } is not available here; skipping it"
        elif [ "$choice" != installed ]; then
            missing+=("$choice")
        fi
    done < <(system_packages "$platform")
    if [ ${#missing[@]} -eq 0 ]; then
        say "system packages: all present"
        return 0
    fi
    if [ -n "$ROOT" ]; then
        say "would install system packages: ${missing[*]}"
        return 0
    fi
    say "installing system packages: ${missing[*]}"
    apt_install "${missing[@]}"
    did "installed system packages: ${missing[*]}"
}
