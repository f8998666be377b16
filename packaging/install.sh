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
#                       template is installed, enable one per sensor); only display pulls Qt
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

PREFIX=/opt/pdn
CONFIG_DIR=/etc/pdn
STATE_DIR=/var/lib/pdn
UNIT_DIR=/etc/systemd/system
PDN_USER=pdn # the display's
SCHEDULER_USER=pdn-scheduler
CONTENT_USER=pdn-content
SENSOR_USER=pdn-sensor
RELEASE_STATE_DIR=/var/lib/pdn-release
SCREEN_GROUPS=(video render input tty audio)
# The PySide6 range of pyproject.toml's display extra; constraints.txt locks a version in it.
PYSIDE6_RANGE="PySide6>=6.8.0,<6.12"

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
DONE=()

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
    if [ -n "$WHEEL" ] && [ ! -f "$WHEEL" ]; then die "--wheel: no such file $WHEEL"; fi
    if [ -n "$WHEELHOUSE" ]; then
        [ -d "$WHEELHOUSE" ] || die "--wheelhouse: no such directory $WHEELHOUSE"
        WHEELHOUSE=$(cd "$WHEELHOUSE" && pwd)
    fi
}

# --- What machine is this -----------------------------------------------------------------

machine_arch() { echo "${PDN_ARCH:-$(uname -m)}"; }

# glibc version, e.g. 2.36 (PDN_GLIBC overrides, for tests).
glibc_version() {
    if [ -n "${PDN_GLIBC:-}" ]; then
        echo "$PDN_GLIBC"
        return
    fi
    local version
    version=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}') || true
    if [ -z "$version" ]; then
        version=$(ldd --version 2>/dev/null | head -n1 | grep -oE '[0-9]+\.[0-9]+$') || true
    fi
    echo "${version:-0}"
}

# True when version $1 >= version $2 (dotted numbers).
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# The PySide6 requirement this machine can run: pip picks the newest wheel the machine's glibc
# admits within the project's range (below 6.12: 6.12.0 loses a reference to True on every
# signal emission under Python 3.11), the lock file's where it can.
#
# On arm64, PyPI's wheels from 6.8.1 on need glibc 2.39: Raspberry Pi OS Trixie (2.41), not
# Bookworm (2.36). Bookworm is refused for a display, for what was measured in an emulated
# arm64 Bookworm (packaging/fresh-root.sh --arch arm64): the last wheel it admits, 6.8.0.2,
# links Debian 11's libtiff.so.5 and libwebp.so.6 (Qt WebEngine does not load without them) and
# FFmpeg 4 (its FFmpeg video plugin), none of which Bookworm has. Installing them from Debian 11
# would put image decoders that no longer get security fixes in front of every page shown.
pyside6_requirement() {
    local arch=$1 glibc=$2
    if ! version_at_least "$glibc" 2.28; then
        echo "glibc $glibc is too old for any PySide6 wheel on PyPI (2.28 or newer needed)" >&2
        return 1
    fi
    case "$arch" in
        aarch64 | arm64)
            if ! version_at_least "$glibc" 2.39; then
                echo "a display on 64-bit ARM needs glibc 2.39 or newer (PyPI's Qt for arm64," \
                    "PySide6 6.8.1 and later), and this system has $glibc ($(os_name)). The last Qt" \
                    "for older systems, PySide6 6.8.0.2, needs Debian 11's libtiff5, libwebp6 and" \
                    "FFmpeg 4, which Bookworm does not have and which get no security fixes any more." \
                    "The way forward: Raspberry Pi OS Lite (64-bit), Trixie, written to the card, then" \
                    "this again. This machine can still run the roles without a screen (--services" \
                    "scheduler, content or sensor)." >&2
                return 1
            fi
            echo "$PYSIDE6_RANGE"
            ;;
        x86_64 | amd64) echo "$PYSIDE6_RANGE" ;;
        *)
            echo "no PySide6 wheels on PyPI for $arch (64-bit ARM or x86 needed; on a Pi, install the 64-bit OS)" >&2
            return 1
            ;;
    esac
}

# The newest Python from 3.11 to 3.13 on this machine; the distribution's own first, since the
# service user must be able to run it (a pyenv build under /root is not readable by pdn).
choose_python() {
    local candidate
    for candidate in ${PYTHON:-/usr/bin/python3.13 /usr/bin/python3.12 /usr/bin/python3.11 \
        python3.13 python3.12 python3.11 python3}; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        # (stderr hidden: a pyenv shim for a version that is not selected complains loudly)
        if "$candidate" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

is_raspberry_pi() { grep -qs 'Raspberry Pi' /proc/device-tree/model; }

# e.g. "Debian GNU/Linux 12 (bookworm)" (Raspberry Pi OS says Debian too).
os_name() {
    (
        # shellcheck disable=SC1091
        . /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}"
    ) || echo "unknown system"
}

# A display needs a Qt this machine can run: refused at once, before anything changes, when
# PyPI has none for it (see pyside6_requirement).
check_machine() {
    local reason
    wants_service display || return 0
    if ! reason=$(pyside6_requirement "$(machine_arch)" "$(glibc_version)" 2>&1 >/dev/null); then
        die "$reason"
    fi
}

# The platform a new config gets: what was asked, else eglfs on a Pi, else cage.
chosen_platform() {
    if [ -n "$PLATFORM" ]; then
        echo "$PLATFORM"
    elif is_raspberry_pi; then
        echo eglfs
    else
        echo cage
    fi
}

# The platform the display will actually use: the config's, when there is one.
configured_platform() {
    local config="$ROOT$CONFIG_DIR/pdn.toml" value=""
    if [ ! -f "$config" ]; then
        chosen_platform
        return
    fi
    value=$(sed -n 's/^[[:space:]]*platform[[:space:]]*=[[:space:]]*"\([a-z]*\)".*/\1/p' "$config" | head -n1)
    echo "${value:-auto}" # the start wrapper's default
}

# systemd as PID 1 (not a container, chroot or image build).
systemd_running() { [ -d /run/systemd/system ]; }

# --- Steps --------------------------------------------------------------------------------

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

# (Output is captured first: grep -q closing the pipe early would fail the pipeline.)
package_installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
    [ "$status" = "install ok installed" ]
}

package_available() {
    local policy
    policy=$(apt-cache policy "$1" 2>/dev/null) || return 1
    [[ "$policy" =~ Candidate:\ [^\(] ]]
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
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    did "installed system packages: ${missing[*]}"
}

# Each role's user and its home (where 'pdn ctl pair', run as that user, keeps its pairings).
role_users() {
    printf '%s %s %s\n' "$PDN_USER" "$STATE_DIR/display" "PDN display" \
        "$SCHEDULER_USER" "$STATE_DIR/scheduler" "PDN scheduler" \
        "$CONTENT_USER" "$STATE_DIR/content" "PDN content server" \
        "$SENSOR_USER" "$STATE_DIR/sensor" "PDN sensors"
}

create_user() {
    local group user home comment
    if [ -n "$ROOT" ]; then
        say "would create the system users $PDN_USER (the display's), $SCHEDULER_USER, $CONTENT_USER and $SENSOR_USER, and add $PDN_USER to: ${SCREEN_GROUPS[*]} (those that exist)"
        return 0
    fi
    while read -r user home comment; do
        if ! getent passwd "$user" >/dev/null; then
            useradd --system --user-group --home-dir "$home" --no-create-home \
                --shell /usr/sbin/nologin --comment "$comment" "$user"
            did "created the system user $user"
        elif [ "$(getent passwd "$user" | cut -d: -f6)" != "$home" ]; then
            # pdn's home was /var/lib/pdn, which is root's now (the unit sets HOME anyway).
            usermod --home "$home" "$user" >/dev/null 2>&1 \
                || warn "could not set $user's home to $home"
        fi
    done < <(role_users)
    # seatd (platform cage) hands the screen to members of its group.
    local wanted=("${SCREEN_GROUPS[@]}" _seatd seat)
    for group in "${wanted[@]}"; do
        getent group "$group" >/dev/null || continue
        if ! id -nG "$PDN_USER" | tr ' ' '\n' | grep -qx "$group"; then
            usermod -aG "$group" "$PDN_USER"
            did "added $PDN_USER to the group $group"
        fi
    done
}

# The lock file: constraints.txt, the same versions on every machine.
constraints_for() {
    local lock="$source_dir/constraints.txt"
    [ -f "$lock" ] || die "no $lock: the lock file belongs next to pyproject.toml"
    echo "$lock"
}

# --- Releases (issue 25) -------------------------------------------------------------------
# Each version goes into a directory of its own, /opt/pdn/releases/<version>-<hash>, with its own
# venv and start wrapper; the units run /opt/pdn/current, a link switched in one rename
# (packaging/pdn-release). <hash>: the first 12 hex digits of a SHA-256 over what decides the
# venv's content: the wheel file (--wheel) or the package's source files of the checkout
# (pyproject.toml and every file under player/, server/ and cds/, by path and content), the lock
# file, the PySide6 requirement and the extra. The same install run twice reuses its release.

RELEASE_NAME=""    # made by install_release, switched to by switch_release
RELEASE_VERSION="" # its version

# The package's version: from the wheel's file name, or the checkout's pyproject.toml.
source_version() {
    if [ -n "$WHEEL" ]; then
        basename "$WHEEL" | awk -F- '{print $2}'
    else
        sed -n 's/^version[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$source_dir/pyproject.toml" | head -n1
    fi
}

# What the release's hash is taken over (see above), on stdout.
release_inputs() {
    local constraints=$1 requirement=$2 extra=$3
    if [ -n "$WHEEL" ]; then
        sha256sum <"$WHEEL"
    else
        (cd "$source_dir" && find pyproject.toml player server cds -type f \
            ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z \
            | xargs -0 sha256sum)
    fi
    sha256sum <"$constraints"
    printf '%s\n' "$requirement" "$extra"
}

# Moves an install from before releases (the project in /opt/pdn/venv, installed in place) into
# releases/<version>-legacy, with the start wrapper it ran with, and makes it current: it is the
# release to go back to. /opt/pdn/venv stays as a link to it, since its scripts name that path.
migrate_legacy_venv() {
    local venv="$ROOT$PREFIX/venv" version name dir
    [ -d "$venv" ] && [ ! -L "$venv" ] || return 0
    version=$("$venv/bin/pdn" --version 2>/dev/null | awk '{print $NF}') || true
    name="${version:-unknown}-legacy"
    dir="$ROOT$PREFIX/releases/$name"
    rm -rf "$dir"
    install -d -m 0755 "$dir/libexec"
    mv "$venv" "$dir/venv"
    ln -s "releases/$name/venv" "$venv"
    # Its units name /opt/pdn/libexec/pdn-display-start until this run replaces them.
    if [ -f "$ROOT$PREFIX/libexec/pdn-display-start" ] && [ ! -L "$ROOT$PREFIX/libexec/pdn-display-start" ]; then
        mv "$ROOT$PREFIX/libexec/pdn-display-start" "$dir/libexec/pdn-display-start"
        ln -s ../current/libexec/pdn-display-start "$ROOT$PREFIX/libexec/pdn-display-start"
    fi
    printf 'version=%s\nsource=%s\n' "${version:-unknown}" "the in-place venv of an older install.sh" >"$dir/RELEASE"
    touch "$dir/.complete"
    link_release "$name"
    did "moved the install in $PREFIX/venv (pdn ${version:-unknown}) to the release $name"
}

# The command of the current release: /opt/pdn/bin/pdn (the units') and /usr/local/bin/pdn.
stable_links() {
    mkdir -p "$ROOT$PREFIX/bin" "$ROOT/usr/local/bin"
    ln -sfn ../current/venv/bin/pdn "$ROOT$PREFIX/bin/pdn"
    ln -sfn "$PREFIX/bin/pdn" "$ROOT/usr/local/bin/pdn"
}

# 'current' set for the first time (no trial: there is nothing to go back to).
link_release() {
    PDN_ROOT=$ROOT bash "$script_dir/pdn-release" switch "$1" || die "cannot switch to $1"
    stable_links
}

# A release's venv with the lock's pip. From a wheelhouse, pip comes straight from the lock's
# pip wheel there (a venv without pip, then that wheel's pip puts itself in): ensurepip's own
# pip would only be replaced, and it takes as long to install as the lock's.
create_venv() {
    local python=$1 venv=$2 constraints=$3 locked wheel
    if [ -z "$WHEELHOUSE" ]; then
        "$python" -m venv "$venv" || die "cannot create $venv (apt-get install python3-venv)"
        "$venv/bin/python" -m pip install -q -c "$constraints" "pip" \
            || die "pip could not install the locked pip"
        return 0
    fi
    locked=$(sed -n 's/^pip==\([^[:space:]]*\).*/\1/p' "$constraints" | head -n1)
    wheel="$WHEELHOUSE/pip-$locked-py3-none-any.whl"
    if [ -z "$locked" ] || [ ! -f "$wheel" ]; then
        die "--wheelhouse: $WHEELHOUSE has no pip-${locked:-?}-py3-none-any.whl, the lock's pip"
    fi
    "$python" -m venv --without-pip "$venv" || die "cannot create $venv (apt-get install python3-venv)"
    "$venv/bin/python" "$wheel/pip" install -q --no-index --find-links "$WHEELHOUSE" \
        -c "$constraints" "pip" || die "pip could not install the locked pip from $wheel"
}

install_release() {
    local python requirement="" glibc arch source constraints target extra="" hash dir venv
    local from_index=()
    local display=0
    wants_service display && display=1
    migrate_legacy_venv
    arch=$(machine_arch)
    glibc=$(glibc_version)
    if [ "$display" = 1 ]; then
        requirement=$(pyside6_requirement "$arch" "$glibc") || die "cannot install PySide6 here"
        extra=display
    fi
    python=$(choose_python) || die "no Python 3.11 to 3.13 found (on Debian: apt-get install python3)"
    source=${WHEEL:-$source_dir}
    constraints=$(constraints_for)
    # The display role takes the 'display' extra (PySide6); the other roles need no Qt.
    target=$source
    if [ "$display" = 1 ]; then target="${source}[display]"; fi
    RELEASE_VERSION=$(source_version)
    [ -n "$RELEASE_VERSION" ] || die "cannot tell the version of $source"
    hash=$(release_inputs "$constraints" "$requirement" "$extra" | sha256sum | cut -c1-12)
    RELEASE_NAME="$RELEASE_VERSION-$hash"
    dir="$ROOT$PREFIX/releases/$RELEASE_NAME"
    venv="$dir/venv"
    if [ -f "$dir/.complete" ]; then
        say "release $RELEASE_NAME is installed already (the same source, lock file and extra)"
        if [ "$constraints" != "$source_dir/constraints.txt" ]; then rm -f "$constraints"; fi
        return 0
    fi
    say "machine: $arch, glibc $glibc, $("$python" --version 2>&1); ${requirement:+PySide6: $requirement; }installing $target with $(basename "$constraints")${WHEELHOUSE:+ from the wheels in $WHEELHOUSE} into $PREFIX/releases/$RELEASE_NAME"
    # A half-made release (an earlier run stopped, or this one fails) is removed: 'current' is
    # switched only to a release whose every check passed.
    rm -rf "$dir"
    # shellcheck disable=SC2064 # the path now: the trap outlives this function's variables
    trap "rm -rf $(printf %q "$dir")" EXIT
    install -d -m 0755 "$dir"
    # Every version comes from the lock file: a box installed today gets what one installed last
    # month got (no --upgrade to whatever is newest). pip itself is locked too.
    create_venv "$python" "$venv" "$constraints"
    # Tests: a site-packages whose packages the new venv reuses instead of downloading them.
    if [ -n "${PDN_INSTALL_SITE_PACKAGES:-}" ]; then
        echo "$PDN_INSTALL_SITE_PACKAGES" \
            >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/pdn-reuse.pth"
    fi
    if [ -n "$WHEELHOUSE" ]; then from_index=(--no-index --find-links "$WHEELHOUSE"); fi
    "$venv/bin/python" -m pip install -q "${from_index[@]}" -c "$constraints" "$target" ${requirement:+"$requirement"} \
        || die "pip could not install $target${requirement:+ with $requirement} (constraints: $constraints); the current release is unchanged"
    if [ "$constraints" != "$source_dir/constraints.txt" ]; then rm -f "$constraints"; fi
    check_release "$venv"
    if [ "$display" = 1 ]; then check_webengine "$venv"; fi
    install -d -m 0755 "$dir/libexec"
    install -m 0755 "$script_dir/pdn-display-start" "$dir/libexec/pdn-display-start"
    printf 'version=%s\nhash=%s\nsource=%s\nextra=%s\ninstalled=%s\n' "$RELEASE_VERSION" "$hash" \
        "$(basename "$source")" "$extra" "$(date -u +%FT%TZ)" >"$dir/RELEASE"
    sync -f "$dir/RELEASE" 2>/dev/null || sync
    touch "$dir/.complete"
    trap - EXIT
    if [ "$display" = 1 ]; then
        did "installed pdn $RELEASE_VERSION with $("$venv/bin/python" -c 'import PySide6; print("PySide6", PySide6.__version__)') into $PREFIX/releases/$RELEASE_NAME"
    else
        did "installed pdn $RELEASE_VERSION (no Qt: not a display) into $PREFIX/releases/$RELEASE_NAME"
    fi
}

# The new release must run before it is switched to: its packages import, and pdn --version
# names the version that was meant.
check_release() {
    local venv=$1 output
    if ! output=$(cd / && "$venv/bin/python" -c 'import server.cli, player.config, cds' 2>&1); then
        die "the new release does not import: ${output##*$'\n'}; the current release is unchanged"
    fi
    if ! output=$(cd / && "$venv/bin/pdn" --version 2>&1) || [ "$output" != "pdn $RELEASE_VERSION" ]; then
        die "the new release's 'pdn --version' said '${output##*$'\n'}', not 'pdn $RELEASE_VERSION'; the current release is unchanged"
    fi
}

# Switches 'current' to the release just installed, and prunes old ones. A display on an
# upgrade is on trial: pdn-release rolls it back unless it reports healthy in time.
switch_release() {
    local trial=()
    [ -n "$RELEASE_NAME" ] || return 0
    if wants_service display && [ -e "$ROOT$PREFIX/current" ]; then trial=(--trial); fi
    PDN_ROOT=$ROOT bash "$ROOT$PREFIX/libexec/pdn-release" switch "$RELEASE_NAME" "${trial[@]}" \
        || die "cannot switch to $RELEASE_NAME"
    stable_links
    PDN_ROOT=$ROOT bash "$ROOT$PREFIX/libexec/pdn-release" prune || warn "could not remove old releases"
    did "current release: $RELEASE_NAME${trial:+ (on trial: rolled back unless the display reports healthy within 5 minutes)}"
}

# The chosen wheels must carry Qt WebEngine, and its libraries must load on this machine, for
# the user the service runs as.
check_webengine() {
    local venv=$1 output as_user=()
    if [ -z "$ROOT" ] && getent passwd "$PDN_USER" >/dev/null; then
        as_user=(runuser -u "$PDN_USER" --)
    fi
    if ! output=$(cd / && "${as_user[@]}" env QT_QPA_PLATFORM=offscreen "$venv/bin/python" -c \
        'import PySide6.QtWebEngineCore, PySide6.QtWebEngineQuick, PySide6.QtQuick' 2>&1); then
        die "PySide6 in $venv lacks Qt WebEngine or a library it needs${as_user:+ (as $PDN_USER)}: ${output##*$'\n'}"
    fi
    did "checked: PySide6.QtWebEngineQuick imports${as_user:+ as $PDN_USER}"
}

# What lives beside the releases: pdn-release (the switch and the rollback; not in a release,
# so a broken one cannot break its way back), the docs and the units.
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

# A file that may hold a secret: 0640 whatever the umask, root's, readable by the group of
# the role that reads it ($3; root: systemd alone reads it, as an EnvironmentFile=). Made
# beside its target and renamed over it: never there with another mode or half written.
install_private_file() {
    local source=$1 target=$2 group=${3:-root} tmp
    tmp=$(mktemp "$(dirname "$target")/.pdn-install.XXXXXX")
    cat "$source" >"$tmp"
    chmod 0640 "$tmp"
    if [ -z "$ROOT" ]; then chown "root:$group" "$tmp"; fi
    mv -f "$tmp" "$target"
}

# The group that may read a file of /etc/pdn: its role's.
private_group() {
    case "${1##*/}" in
        pdn.toml) echo "$PDN_USER" ;;
        scheduler.env) echo "$SCHEDULER_USER" ;;
        content.env) echo "$CONTENT_USER" ;;
        sensor.env | sensor-*.env) echo "$SENSOR_USER" ;;
        *) echo root ;;
    esac
}

# A new display serves HTTPS. A sensor or content server on this machine pairs with it like any
# controller (pdn ctl pair, as its own user: pdn-sensor, pdn-content) and pins its certificate.
tls_line() { echo "tls = true"; }

# A random token: 32 bytes, URL-safe base64 (43 characters).
new_token() { head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'; }

# The scheduler's operator token (PDN_API_TOKEN) and enrolment token (PDN_ENROLMENT_TOKEN), in
# /etc/pdn/scheduler.env (0640), made when none is set and printed this once (issue 22).
OPERATOR_TOKEN_MADE=""
ENROLMENT_TOKEN_MADE=""
write_scheduler_tokens() {
    local env="$ROOT$CONFIG_DIR/scheduler.env" tmp operator enrolment
    wants_service scheduler || return 0
    if [ -e "$env" ] && grep -q '^PDN_API_TOKEN=.' "$env"; then
        say "kept the scheduler's operator token in $CONFIG_DIR/scheduler.env"
        return 0
    fi
    operator=$(new_token)
    enrolment=$(new_token)
    tmp=$(mktemp)
    {
        if [ -e "$env" ]; then grep -v '^PDN_API_TOKEN=\|^PDN_ENROLMENT_TOKEN=' "$env" || true; fi
        echo "# The scheduler's secrets (pdn-scheduler.service). Keep this file 0640."
        echo "# Operator token: schedules, assignments, groups, broadcasts, the console."
        echo "PDN_API_TOKEN=$operator"
        echo "# Enrolment token: a display with scheduler_token = this is approved at once."
        echo "PDN_ENROLMENT_TOKEN=$enrolment"
    } >"$tmp"
    install_private_file "$tmp" "$env" "$SCHEDULER_USER"
    rm -f "$tmp"
    did "made the scheduler's operator and enrolment tokens in $CONFIG_DIR/scheduler.env"
    OPERATOR_TOKEN_MADE=$operator
    ENROLMENT_TOKEN_MADE=$enrolment
}

# The sensors' token (PDN_API_TOKEN of every pdn-sensor@ unit) in /etc/pdn/sensor.env (0640),
# made when none is set and printed this once: a sensor takes subscriptions and readings from
# beyond this machine only with it.
SENSOR_TOKEN_MADE=""
write_sensor_token() {
    local env="$ROOT$CONFIG_DIR/sensor.env" tmp token
    wants_service sensor || return 0
    if [ -e "$env" ] && grep -q '^PDN_API_TOKEN=.' "$env"; then
        say "kept the sensors' token in $CONFIG_DIR/sensor.env"
        return 0
    fi
    token=$(new_token)
    tmp=$(mktemp)
    {
        if [ -e "$env" ]; then grep -v '^PDN_API_TOKEN=' "$env" || true; fi
        echo "# The sensors' secret (every pdn-sensor@ unit; a sensor's own file may set another)."
        echo "# Keep this file 0640. Subscriptions and readings from beyond loopback need it."
        echo "PDN_API_TOKEN=$token"
    } >"$tmp"
    install_private_file "$tmp" "$env" "$SENSOR_USER"
    rm -f "$tmp"
    did "made the sensors' token in $CONFIG_DIR/sensor.env"
    SENSOR_TOKEN_MADE=$token
}

write_config() {
    local config="$ROOT$CONFIG_DIR/pdn.toml" services="$ROOT$CONFIG_DIR/services.env" platform tmp
    install -d -m 0755 "$ROOT$CONFIG_DIR"
    if [ -e "$config" ]; then
        say "kept the existing $CONFIG_DIR/pdn.toml (the new defaults are in $PREFIX/share/pdn.toml.example)"
        if [ -n "$PLATFORM" ] && [ "$(configured_platform)" != "$PLATFORM" ]; then
            warn "--platform $PLATFORM ignored: $CONFIG_DIR/pdn.toml says platform = \"$(configured_platform)\""
        fi
    else
        platform=$(chosen_platform)
        tmp=$(mktemp)
        sed -e "s/^platform = \"auto\"/platform = \"$platform\"/" \
            -e "s/^#tls = false$/$(tls_line)/" "$script_dir/pdn.toml.example" >"$tmp"
        install_private_file "$tmp" "$config" "$PDN_USER"
        rm -f "$tmp"
        did "wrote $CONFIG_DIR/pdn.toml (platform = \"$platform\", $(tls_line))"
    fi
    if [ ! -e "$services" ]; then
        tmp=$(mktemp)
        cat >"$tmp" <<'EOF'
# Addresses of the optional PDN services on this machine (pdn-scheduler, pdn-content).
# Sensors have one file each: /etc/pdn/sensor-<name>.env (see pdn-sensor@.service).
PDN_SCHEDULER_HOST=0.0.0.0
PDN_SCHEDULER_PORT=8090
PDN_CONTENT_HOST=0.0.0.0
PDN_CONTENT_PORT=8091
# Extra options, e.g. PDN_CONTENT_OPTIONS="--public-url http://content.example:8091"
PDN_SCHEDULER_OPTIONS=
PDN_CONTENT_OPTIONS=
EOF
        install_private_file "$tmp" "$services"
        rm -f "$tmp"
        did "wrote $CONFIG_DIR/services.env"
    fi
}

# Secrets at rest (ETSI EN 303 645 5.4): the config files may hold tokens, so no one but root
# and the group of the role that reads the file may read it (an upgrade moves each from the
# pdn group to its role's); a file someone loosened is tightened again, and said so.
check_private_files() {
    local file mode group
    for file in "$ROOT$CONFIG_DIR"/pdn.toml "$ROOT$CONFIG_DIR"/*.env; do
        if [ ! -f "$file" ] || [ -L "$file" ]; then continue; fi
        mode=$(stat -c %a "$file")
        if [ $((8#$mode & 8#007)) -ne 0 ] || [ $((8#$mode & 8#020)) -ne 0 ]; then
            chmod o-rwx,g-w "$file"
            warn "$file was mode $mode, readable by others: now $(stat -c %a "$file")"
        fi
        [ -z "$ROOT" ] || continue
        group=$(private_group "$file")
        if [ "$(stat -c %U:%G "$file")" != "root:$group" ]; then
            chown "root:$group" "$file"
            did "$CONFIG_DIR/${file##*/} is readable by root and the group $group only"
        fi
    done
}

# /var/lib/pdn: each role's directory (and home) belongs to its user.
role_dirs() {
    printf '%s\n' display "$PDN_USER" scheduler "$SCHEDULER_USER" schedules "$SCHEDULER_USER" \
        apps "$CONTENT_USER" content "$CONTENT_USER" sensor "$SENSOR_USER"
    local dir
    for dir in "$ROOT$STATE_DIR"/sensor-*; do
        if [ -d "$dir" ] && [ ! -L "$dir" ]; then printf '%s\n' "${dir##*/}" "$SENSOR_USER"; fi
    done
    return 0
}

# Makes each role's directory in /var/lib/pdn (0750) and, on a real install, hands it with what
# is in it to its user: through descriptors opened O_NOFOLLOW (os.fwalk, lchown), so a link a
# service user planted is changed itself, never followed, even while /var/lib/pdn is still
# pdn's. Prints a line for each directory that changed hands.
own_role_dirs() {
    local python pairs=()
    python=$(choose_python) || python=python3
    mapfile -t pairs < <(role_dirs)
    "$python" -I - "$ROOT$STATE_DIR" "${ROOT:+skip}${ROOT:-own}" "${pairs[@]}" <<'PY'
import os, pwd, sys

base, own, *pairs = sys.argv[1:]
flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
parent = os.open(base, flags)
for name, user in zip(pairs[::2], pairs[1::2]):
    try:
        os.mkdir(name, 0o750, dir_fd=parent)
    except FileExistsError:
        pass
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except OSError as error:
        print(f"{base}/{name} left alone: {error.strerror} (a link?)", file=sys.stderr)
        continue
    if own == "own":
        account = pwd.getpwnam(user)
        ids = (account.pw_uid, account.pw_gid)
        info = os.fstat(fd)
        if (info.st_uid, info.st_gid) != ids:
            for _top, dirs, files, top_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                for entry in dirs + files:
                    os.chown(entry, *ids, dir_fd=top_fd, follow_symlinks=False)
            os.fchown(fd, *ids)
            print(f"{base}/{name} (and what is in it) is now {user}'s")
    os.fchmod(fd, 0o750)
    os.close(fd)
PY
}

# /var/lib/pdn is root's (0755) and holds one directory a role, 0750 and its user's: no
# service user can rename another's directory or plant a link where root or another role
# works. An upgrade hands each role's data, which was pdn's, to its user. Only while the
# display's data from pdn 0.1.0 still lies in /var/lib/pdn itself does it stay pdn's: the
# display's next start moves that data as pdn, then makes /var/lib/pdn root's (pdn-release
# started). The release state is root's own directory, /var/lib/pdn-release, outside it.
create_state_dirs() {
    local line legacy=0
    if [ -z "$ROOT" ] && [ -f "$STATE_DIR/display.db" ] && [ ! -L "$STATE_DIR/display.db" ] \
        && [ "$(stat -c %U "$STATE_DIR")" = "$PDN_USER" ]; then
        legacy=1
    fi
    install -d -m 0755 "$ROOT$STATE_DIR"
    if [ -z "$ROOT" ] && [ "$legacy" = 0 ]; then chown -h root:root "$STATE_DIR"; fi
    while IFS= read -r line; do did "$line"; done < <(own_role_dirs)
    carry_pairings
    install -d -m 0755 "$ROOT$RELEASE_STATE_DIR"
    if [ -z "$ROOT" ]; then chown -h root:root "$RELEASE_STATE_DIR"; fi
    did "created $STATE_DIR (root's; display, scheduler, schedules, apps, content, sensor: each its role's user's) and $RELEASE_STATE_DIR (root's)${ROOT:+; owners are set on a real install}"
    if [ "$legacy" = 1 ]; then
        say "$STATE_DIR stays $PDN_USER's until the display's next start has moved its data into $STATE_DIR/display"
    fi
}

# Before the roles had users of their own, a sensor or content server on this machine paired
# with displays as pdn ('pdn ctl pair' keeps the tokens in ~/.config/pdn/ctl.toml, pdn's home
# being /var/lib/pdn): each of those users gets a copy, read as pdn and written as itself, so
# root opens neither file.
carry_pairings() {
    local from="$STATE_DIR/.config/pdn/ctl.toml" user home
    [ -z "$ROOT" ] || return 0
    runuser -u "$PDN_USER" -- test -f "$from" 2>/dev/null || return 0
    for user in "$CONTENT_USER" "$SENSOR_USER"; do
        home=$(getent passwd "$user" | cut -d: -f6)
        [ -n "$home" ] || continue
        runuser -u "$user" -- test -e "$home/.config/pdn/ctl.toml" && continue
        # shellcheck disable=SC2016 # expanded by the user's shell
        runuser -u "$PDN_USER" -- cat "$from" | runuser -u "$user" -- sh -c \
            'umask 077 && mkdir -p "$1/.config/pdn" && cat >"$1/.config/pdn/ctl.toml"' sh "$home" \
            && did "copied pdn's pairings (pdn ctl pair) to $user ($home/.config/pdn/ctl.toml)"
    done
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
    skipped config || { write_config; write_scheduler_tokens; write_sensor_token; check_private_files; }
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
