#!/usr/bin/env bash
# Installs pdn-display as an appliance: a Raspberry Pi (64-bit Raspberry Pi OS Trixie) or a
# Debian/Ubuntu kiosk PC that boots straight into the fullscreen player.
#
#   sudo packaging/install.sh [options]
#
# What it does (each step is a function below; it is safe to run again, e.g. to upgrade):
#   packages  for a display: the system libraries Qt WebEngine needs, plus cage, xwayland, seatd
#             and grim for platform cage, and v4l-utils (cec-ctl) for HDMI-CEC screen power;
#             other roles need only Python's venv and CA certificates
#   user      system users, one a role: 'pdn' the display's (home /var/lib/pdn/display), in the
#             groups a screen needs; 'pdn-scheduler', 'pdn-content' and 'pdn-sensor' the other
#             roles' (homes /var/lib/pdn/scheduler, content, sensor): none reads another's
#             secrets or data
#   venv      a release: the project in /opt/pdn/releases/<version>-<hash>, a venv of its own at
#             the versions of constraints.txt (the lock file); for a display with its 'display'
#             extra and a PySide6 this machine can run; the scheduler, content and sensor roles
#             need no Qt and get none. Checked (imports, pdn --version) before anything else
#             changes; a failure removes it and leaves the running release as it was. Then
#             /opt/pdn/current is switched to it in one rename; a display is on trial and rolls
#             back by itself unless it reports healthy within 5 minutes (packaging/pdn-release);
#             the two releases before it are kept, older ones removed. An install from before
#             releases (/opt/pdn/venv) becomes the release <version>-legacy first.
#   files     pdn-release, the README and docs/ and the systemd units
#   config    /etc/pdn/pdn.toml and /etc/pdn/services.env, only if they do not exist yet; for a
#             scheduler, its operator and enrolment tokens in /etc/pdn/scheduler.env when it
#             has none; for sensors, their token in /etc/pdn/sensor.env when it has none
#             (printed once). Each file 0640, root and the group of the role that reads it
#   dirs      /var/lib/pdn (root's) and a directory a role in it, each its user's (0750); the
#             release state in /var/lib/pdn-release (root's). An upgrade hands each role's data
#             to its user and the pairings of 'pdn ctl pair' to the sensor's and the content
#             server's users
#   enable    enables the units (display by default; see --services)
#   start     (re)starts them, unless --no-start
#
# Options:
#   --root DIR          install into DIR as a throwaway root: nothing on this machine changes
#                       (user, packages and start are described, units enabled with
#                       systemctl --root)
#   --no-start          install and enable, but do not start anything now
#   --platform NAME     eglfs, cage, xcb, wayland, offscreen or auto, written into a new config
#   --services LIST     comma-separated roles of this machine: display,scheduler,content,sensor
#                       (default display); each enables its unit (sensor: the pdn-sensor@NAME
#                       template is installed, enable one per sensor); only display pulls Qt.
#                       display,scheduler is one screen with its own console: the display
#                       registers with this scheduler (approved at once) and shows a first
#                       playlist saying where the console is
#   --location LAT,LON  where the screen stands, for a one-box display's registration
#                       (e.g. "N54.0104,W2.7883"; default N0,E0: edit [location] in pdn.toml)
#   --wheel FILE        install this wheel instead of the checkout the script is in
#   --wheelhouse DIR    take every package from the wheels in DIR, with no package index (a
#                       kiosk without internet): the lock's pip and what the release needs at
#                       the lock's versions (setuptools too, to install a checkout rather than
#                       a --wheel); on a machine of the same architecture and Python, e.g.
#                       pip download -d DIR -c constraints.txt pip 'pdn_display-VERSION-py3-none-any.whl[display]'
#   --python PATH       the Python to build the venv with (3.11 to 3.13; default: the newest found)
#   --skip STEPS        comma-separated steps to leave out (e.g. packages,venv)
#   --disable-desktop   make the machine boot to the console (multi-user.target), so a desktop
#                       does not hold the screen (needed for eglfs and cage)
#   -h, --help          this text
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$script_dir/.." && pwd)

ROOT=""
START=1
PLATFORM=""
SERVICES="display"
WHEEL=""
WHEELHOUSE=""
PYTHON=""
SKIP=""
DISABLE_DESKTOP=0
LOCATION="N0,E0"
CONFIG_MADE=""
DONE=()
# The tokens this run made (install.d/config.sh), printed once by the summary.
OPERATOR_TOKEN_MADE=""
ENROLMENT_TOKEN_MADE=""
SENSOR_TOKEN_MADE=""

say() { printf 'pdn-install: %s\n' "$*"; }
warn() { printf 'pdn-install: warning: %s\n' "$*" >&2; }
die() {
    printf 'pdn-install: error: %s\n' "$*" >&2
    exit 1
}
did() {
    DONE+=("$*")
    say "$*"
}
skipped() { [[ ",$SKIP," == *",$1,"* ]]; }
wants_service() { [[ ",$SERVICES," == *",$1,"* ]]; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --root) ROOT=${2:?--root needs a directory}; shift ;;
            --no-start) START=0 ;;
            --platform) PLATFORM=${2:?--platform needs a name}; shift ;;
            --services) SERVICES=${2:?--services needs a list}; shift ;;
            --location) LOCATION=${2:?--location needs LAT,LON}; shift ;;
            --wheel) WHEEL=${2:?--wheel needs a file}; shift ;;
            --wheelhouse) WHEELHOUSE=${2:?--wheelhouse needs a directory}; shift ;;
            --python) PYTHON=${2:?--python needs a path}; shift ;;
            --skip) SKIP=${2:?--skip needs a list}; shift ;;
            --disable-desktop) DISABLE_DESKTOP=1 ;;
            -h | --help) usage; exit 0 ;;
            *) die "unknown option '$1' (see --help)" ;;
        esac
        shift
    done
    if [ -n "$ROOT" ]; then
        mkdir -p "$ROOT"
        ROOT=$(cd "$ROOT" && pwd)
        START=0
    elif [ "$(id -u)" -ne 0 ]; then
        die "run as root (sudo $0), or with --root DIR to try it in a throwaway directory"
    fi
    case "${PLATFORM:-auto}" in
        eglfs | cage | xcb | wayland | offscreen | auto) ;;
        *) die "--platform must be eglfs, cage, xcb, wayland, offscreen or auto" ;;
    esac
    local service
    for service in ${SERVICES//,/ }; do
        case "$service" in
            display | scheduler | content | sensor) ;;
            *) die "--services: unknown service '$service' (display, scheduler, content, sensor)" ;;
        esac
    done
    if [[ ! $LOCATION =~ ^[NSns0-9+.\ -]+,[EWew0-9+.\ -]+$ ]]; then
        die "--location must be LAT,LON, e.g. \"N54.0104,W2.7883\""
    fi
    if [ -n "$WHEEL" ] && [ ! -f "$WHEEL" ]; then die "--wheel: no such file $WHEEL"; fi
    if [ -n "$WHEELHOUSE" ]; then
        [ -d "$WHEELHOUSE" ] || die "--wheelhouse: no such directory $WHEELHOUSE"
        WHEELHOUSE=$(cd "$WHEELHOUSE" && pwd)
    fi
}

# The steps, one file a job (install.d/ beside this script), and what they share with
# uninstall.sh, dev.sh and the proofs (lib/). install.sh runs from a checkout of the project
# (or its source tarball), whose packaging/ it takes whole; it is never copied alone.
if [ ! -d "$script_dir/install.d" ] || [ ! -d "$script_dir/lib" ]; then
    die "no install.d/ and lib/ beside $script_dir/install.sh: run it from a checkout of pdn-display"
fi
source "$script_dir/lib/layout.sh"
source "$script_dir/lib/apt.sh"
source "$script_dir/install.d/machine.sh"
source "$script_dir/install.d/packages.sh"
source "$script_dir/install.d/users.sh"
source "$script_dir/install.d/release.sh"
source "$script_dir/install.d/config.sh"
source "$script_dir/install.d/units.sh"

# The display's API URL from the config ([listen]), with this machine's address.
api_url() {
    local config="$ROOT$CONFIG_DIR/pdn.toml" host port address scheme
    host=$(sed -n '/^\[listen\]/,/^\[/s/^[[:space:]]*host[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$config" 2>/dev/null | head -n1)
    port=$(sed -n '/^\[listen\]/,/^\[/s/^[[:space:]]*port[[:space:]]*=[[:space:]]*\([0-9]*\).*/\1/p' "$config" 2>/dev/null | head -n1)
    host=${host:-127.0.0.1}
    port=${port:-8080}
    scheme=http
    if sed -n '/^\[listen\]/,/^\[/p' "$config" 2>/dev/null | grep -q '^[[:space:]]*tls[[:space:]]*=[[:space:]]*true'; then
        scheme=https
    fi
    if [ "$host" = 0.0.0.0 ] || [ "$host" = "::" ]; then
        address=$(hostname -I 2>/dev/null | awk '{print $1}')
        host=${address:-$(hostname)}
    fi
    echo "$scheme://$host:$port/"
}

# The scheduler's console, with this machine's address (services.env's port).
console_url() {
    local port address
    port=$(sed -n 's/^PDN_SCHEDULER_PORT=\([0-9]*\).*/\1/p' "$ROOT$CONFIG_DIR/services.env" 2>/dev/null | tail -n1)
    address=$(hostname -I 2>/dev/null | awk '{print $1}')
    echo "http://${address:-$(hostname)}:${port:-8090}/console/"
}

summary() {
    local line
    echo
    say "done. What changed${ROOT:+ (in $ROOT)}:"
    for line in "${DONE[@]}"; do printf '  - %s\n' "$line"; done
    echo
    say "display API: $(api_url)  (try: curl $(api_url)playback/)"
    say "to schedule it from another machine, pair with the code on its screen (or from"
    say "  sudo -u $PDN_USER $PREFIX/bin/pdn display --pairing-code --data-dir $STATE_DIR/display):"
    say "  pdn ctl pair $(api_url) CODE"
    if [[ $(api_url) == https:* ]]; then
        say "(pdn ctl pins the display's certificate; its fingerprint is on the idle page and in"
        say "  $PREFIX/bin/pdn display --config $CONFIG_DIR/pdn.toml --check-config)"
    fi
    say "config: $CONFIG_DIR/pdn.toml   logs: journalctl -u pdn-display -f   status: systemctl status pdn-display"
    say "releases, the trial and any rollback: $PREFIX/libexec/pdn-release status"
    if one_box; then
        say "this screen's console: $(console_url)  (open it on a phone or a laptop; the"
        say "  screen shows this address too, and a first playlist until you make your own)"
    fi
    if [ -n "$OPERATOR_TOKEN_MADE" ]; then
        say "the scheduler's operator token (shown this once; it is in $CONFIG_DIR/scheduler.env):"
        say "  $OPERATOR_TOKEN_MADE"
        say "  (the console's sign-in; for pdn ctl assign/approve/add-display, export it as"
        say "  PDN_API_TOKEN with PDN_API_URL set to the scheduler's URL: it is sent there alone)"
        say "its enrolment token, for displays' scheduler_token (others wait for approval):"
        say "  $ENROLMENT_TOKEN_MADE"
    fi
    if [ -n "$SENSOR_TOKEN_MADE" ]; then
        say "the sensors' token (shown this once; it is in $CONFIG_DIR/sensor.env): subscriptions"
        say "  and readings from other machines need it (Authorization: Bearer ...):"
        say "  $SENSOR_TOKEN_MADE"
        say "a sensor on this machine pairs with a display as its user:"
        say "  sudo -u $SENSOR_USER $PREFIX/bin/pdn ctl pair $(api_url) CODE"
    fi
}

main() {
    parse_args "$@"
    skipped venv || check_machine
    local platform
    # An upgrade keeps the config, so its platform is the one to install for (an offscreen or
    # xcb display gets no cage and no seatd).
    platform=$(configured_platform)
    skipped packages || install_system_packages "$platform"
    skipped user || create_user
    skipped venv || install_release
    skipped files || install_files
    skipped config || {
        write_config
        write_scheduler_tokens
        write_one_box
        write_sensor_token
        check_private_files
    }
    skipped dirs || create_state_dirs
    skipped venv || switch_release
    skipped enable || enable_units
    skipped start || start_units
    summary
}

# Sourcing the script (tests) defines the functions without running anything.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    main "$@"
fi
