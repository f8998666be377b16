# shellcheck shell=bash
# What machine install.sh is on, asked before anything changes: its architecture, glibc and
# Python; whether PyPI has a Qt it can run (a display is refused at once when not, with the
# reason and the way forward); whether it is a Raspberry Pi; the screen platform a new config
# gets and the one an existing config names; whether systemd runs. Sourced by install.sh; it
# only defines functions and PYSIDE6_RANGE.

# The PySide6 range of pyproject.toml's display extra; constraints.txt locks a version in it.
PYSIDE6_RANGE="PySide6>=6.8.0,<6.12"

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
