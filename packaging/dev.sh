#!/usr/bin/env bash
# Developer entry point: sets up everything this checkout needs, then runs one job.
#
#   bash packaging/dev.sh display [pdn display options]   set up, then start the display
#   bash packaging/dev.sh test [pytest options]           set up, then ruff + mypy + the test suite
#   bash packaging/dev.sh setup                           set up only
#
# Safe to run again: system packages are installed only when missing, the virtual
# environment (.venv) is rebuilt only when pyproject.toml or constraints.txt changed. Python
# packages come at the exact versions of constraints.txt (the lock file; packaging/lock.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
python=${PYTHON:-python3}

# Libraries Qt WebEngine loads at run time, Xvfb for a virtual screen when none is
# attached, and the tools the tests use (systemd-analyze, shellcheck, imagemagick, xset, curl
# for the documentation's commands; sway, cage, grim and wlr-randr: real Wayland compositors,
# read back, in tests/player/test_wayland.py and test_cage.py; xwayland, without which cage
# does not start; GStreamer's RTSP server with python3-gi: an RTSP camera on loopback for the
# live-stream tests, tests/support/rtsp_serve.py).
# packaging/fresh-root.sh proves this list complete: both jobs, in a bare Debian root.
system_packages=(
    libnss3 libxkbcommon0 libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-image0
    libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xinerama0
    libxcb-xkb1 libxcomposite1 libxdamage1 libxrandr2 libxtst6 libxshmfence1 libxkbfile1
    libasound2 libpulse0 libdbus-1-3 libegl1 libgl1 libgbm1 libdrm2 libfontconfig1
    fonts-dejavu-core xvfb x11-utils x11-xserver-utils xauth imagemagick shellcheck systemd
    procps python3-venv ca-certificates postgresql chromium chromium-driver ffmpeg curl
    sway cage xwayland grim wlr-randr
    python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good
    gstreamer1.0-plugins-ugly
)

log() { printf 'pdn-dev: %s\n' "$*" >&2; }
# package_installed, apt_install: shared with install.sh.
# shellcheck source=SCRIPTDIR/lib/apt.sh
source "$root/packaging/lib/apt.sh"

install_system_packages() {
    local missing=() pkg
    for pkg in "${system_packages[@]}"; do
        package_installed "$pkg" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        log "missing system packages (run as root or install them): ${missing[*]}"
        return 1
    fi
    log "installing system packages: ${missing[*]}"
    apt_install "${missing[@]}"
}

install_venv() {
    local stamp="$venv/.pdn-stamp" want constraints="$root/constraints.txt"
    want=$(cat "$root/pyproject.toml" "$constraints" | sha256sum | cut -d' ' -f1)
    if [ -x "$venv/bin/pdn" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    log "creating the virtual environment in $venv"
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q -c "$constraints" --upgrade pip
    "$venv/bin/python" -m pip install -q -c "$constraints" -e "${root}[display,test,postgres]"
    echo "$want" >"$stamp"
}

setup() {
    install_system_packages
    install_venv
    # Chromium refuses to run its sandbox as root; a kiosk under systemd runs as 'pdn'.
    if [ "$(id -u)" -eq 0 ]; then export QTWEBENGINE_DISABLE_SANDBOX=1; fi
}

# test_clocksync runs a real chronyd following a local one (both with -x: this machine's clock is
# left alone). Its binaries come from Debian's package, unpacked into the venv, not installed:
# installing chrony would start a time service on the machine running the tests.
chrony_for_tests() {
    if [ -n "${PDN_CHRONY_ROOT:-}" ] || command -v chronyd >/dev/null; then return 0; fi
    local dir="$venv/chrony" download
    if [ ! -x "$dir/usr/sbin/chronyd" ]; then
        download=$(mktemp -d)
        # Package lists cleared since the last install (Debian's images do): read them again.
        (cd "$download" && apt-get download -q chrony >/dev/null 2>&1) \
            || { apt-get update -qq && (cd "$download" && apt-get download -q chrony >/dev/null); } \
            || { rm -rf "$download"; log "cannot download Debian's chrony for test_clocksync"; return 1; }
        dpkg-deb -x "$download"/chrony_*.deb "$dir"
        rm -rf "$download"
    fi
    export PDN_CHRONY_ROOT="$dir"
}

has_screen() { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }

# Runs a command on an Xvfb of its own (a free display number), waits for it, then stops the X
# server; the command's exit status. Not xvfb-run: that is a dash script, which a terminal's
# Ctrl-C ends at once, before the command it waits for has stopped (the prompt comes back with
# the display still running). bash waits for its foreground command to stop and goes on when
# that command handled the signal, so the status is the display's own.
on_xvfb() {
    local dir number="" xvfb status=0 tries=100
    dir=$(mktemp -d -t pdn-xvfb.XXXXXX)
    Xvfb -displayfd 3 -screen 0 1920x1080x24 -nolisten tcp 3>"$dir/display" \
        >"$dir/xvfb.log" 2>&1 </dev/null &
    xvfb=$!
    # shellcheck disable=SC2064  # expanded now: the values of this call
    trap "kill $xvfb 2>/dev/null || :; rm -rf '$dir'" EXIT
    while [ -z "$number" ] && [ $tries -gt 0 ]; do
        kill -0 "$xvfb" 2>/dev/null || { log "Xvfb did not start: $(cat "$dir/xvfb.log")"; return 1; }
        sleep 0.1
        number=$(head -n1 "$dir/display")
        tries=$((tries - 1))
    done
    [ -n "$number" ] || { log "Xvfb did not start within 10 s"; return 1; }
    DISPLAY=":$number" "$@" || status=$?
    return "$status"
}

job=${1:-display}
[ $# -gt 0 ] && shift
case "$job" in
    setup)
        setup
        ;;
    display)
        setup
        data=${PDN_DATA_DIR:-$root/data}
        if has_screen; then
            exec "$venv/bin/pdn" display --data-dir "$data" "$@"
        fi
        log "no screen attached: running on a virtual 1920x1080 screen (Xvfb)"
        on_xvfb "$venv/bin/pdn" display --data-dir "$data" "$@"
        ;;
    test)
        setup
        chrony_for_tests
        cd "$root"
        export PATH="$venv/bin:$PATH"
        log "ruff"
        ruff check .
        ruff format --check . >/dev/null || { ruff format --diff . | head -40; exit 1; }
        log "mypy"
        mypy
        # One worker a core, at most four (each runs its own Xvfb, Chromium and PostgreSQL);
        # a test file stays on one worker, so its module fixtures start once. PDN_TEST_WORKERS
        # sets the count (0: no workers, everything in this process).
        workers=${PDN_TEST_WORKERS:-$(nproc)}
        [ "$workers" -gt 4 ] && workers=4
        log "pytest ($workers workers)"
        exec pytest -n "$workers" --dist loadfile --durations=20 "$@"
        ;;
    *)
        log "unknown job '$job' (display, test or setup)"
        exit 2
        ;;
esac
