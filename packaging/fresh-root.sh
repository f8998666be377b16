#!/usr/bin/env bash
# Proves the README's Quick start from nothing: builds bare Debian roots (debootstrap, bookworm,
# minbase: no Python, no X, nothing of this project), puts a clean clone of this repository's
# committed HEAD in each, and runs the README's two commands in them, as root, with no screen,
# in a clean environment (CI=true, as CI runs them: a missing tool fails a test, not skips it):
#
#   display root:  bash packaging/dev.sh display   started, then checked until GET / and
#                                                  GET /x/health answer on 127.0.0.1; videos sent
#                                                  to it (tests/smoke/play_videos.py); stopped
#   test root:     bash packaging/dev.sh test      ruff, mypy and the whole test suite
#
# Each command runs in a root of its own, so each one proves it sets up everything it needs.
# Prints how long each took, and exits non-zero when either fails.
#
# With --arch arm64 it builds an emulated Raspberry Pi instead (arm64 Debian run by
# qemu-user-static through binfmt_misc; not part of CI: it takes an hour or more): one root in
# which packaging/install.sh runs as on a Pi (display role), then the display is started as
# pdn-display.service would start it (the installed unit's ExecStart, as its User, with its
# environment; no systemd runs in a chroot), on platform xcb with an Xvfb in the root: Mesa's
# llvmpipe gives Qt Quick the OpenGL a Pi's GPU gives it under eglfs. (Not offscreen: with no
# OpenGL there, Qt Quick falls back to its software renderer, which draws no video at all.) Checked
# from outside, each step timed (tests/smoke/pi_checks.py): GET / answers; the idle page is on
# /x/screenshot (after pdn ctl pair); a page and an H.264 MP4 served from this machine on
# loopback, each sent with pdn ctl schedule, show in screenshots; the PySide6 this suite must
# get was installed; the video backend install.sh chose loads. Screenshots are kept with the
# logs. On Bookworm the pass is install.sh's refusal, at once (docs/install.md says why).
#
#   sudo bash packaging/fresh-root.sh [options]
#   sudo bash packaging/fresh-root.sh --arch arm64 --suite trixie
#
# Options:
#   --dir DIR        where the roots are built (default /var/tmp/pdn-fresh-root); emptied first
#   --keep           leave the roots in DIR afterwards (default: removed; the logs stay in
#                    DIR-logs either way)
#   --only JOB       run one command only: display or test
#   --port N         the display's port (default 8080; another free one if 8080 is taken here,
#                    since a chroot shares the machine's network)
#   --display-timeout S   how long the display may take to answer, set-up included (default 1200;
#                    with --arch arm64: how long each check may take, default 2400)
#   --arch A         amd64 (default: the two commands above, on this machine's architecture) or
#                    arm64 (an emulated Raspberry Pi and install.sh; --dir's default then is
#                    /var/tmp/pdn-fresh-root-arm64-SUITE)
#   --suite S        the Debian release: bookworm (default) or trixie
#   --cache DIR      keep the bare debootstrap (nothing of this machine or project in it) as a
#                    tarball in DIR, and unpack it instead of running debootstrap when it is
#                    there (the summary says which); everything after it runs from nothing
#   --shots DIR      (arm64) where the screenshots go (default: the logs directory)
#   -h, --help       this text
#
# Needs: root, debootstrap (installed with apt-get when missing), Debian's package archive and
# PyPI reachable; for arm64 also qemu-user-static, binfmt-support and ffmpeg (installed when
# missing) and binfmt_misc (mounted, and qemu-aarch64 registered with the F flag, when it is
# not: that registration is the kernel's, so it stays, for the whole machine). Takes a few GB in DIR while it runs. Of this machine, only its network settings
# go into the roots (resolver, local CA certificates, /etc/pip.conf), as a fresh machine of the
# same kind has them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
DIR=""
KEEP=0
ONLY=""
PORT=""
DISPLAY_TIMEOUT=""
SUITE=bookworm
ARCH=amd64
MIRROR=http://deb.debian.org/debian
CACHE=""
SHOTS=""
XVFB_PID=""
RUN_START=""
BASE_HOW=""
MOUNTED=()
STARTED=()

say() { printf 'fresh-root: %s\n' "$*" >&2; }
die() {
    say "error: $*"
    exit 1
}
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --dir) DIR=${2:?--dir needs a directory}; shift ;;
        --keep) KEEP=1 ;;
        --only) ONLY=${2:?--only needs display or test}; shift ;;
        --port) PORT=${2:?--port needs a number}; shift ;;
        --display-timeout) DISPLAY_TIMEOUT=${2:?--display-timeout needs seconds}; shift ;;
        --arch) ARCH=${2:?--arch needs amd64 or arm64}; shift ;;
        --suite) SUITE=${2:?--suite needs bookworm or trixie}; shift ;;
        --cache) CACHE=${2:?--cache needs a directory}; shift ;;
        --shots) SHOTS=${2:?--shots needs a directory}; shift ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done
case "$ONLY" in "" | display | test) ;; *) die "--only must be display or test" ;; esac
case "$ARCH" in amd64 | arm64) ;; *) die "--arch must be amd64 or arm64" ;; esac
case "$SUITE" in bookworm | trixie) ;; *) die "--suite must be bookworm or trixie" ;; esac
if [ "$ARCH" = arm64 ]; then
    [ -z "$ONLY" ] || die "--only is for amd64: --arch arm64 runs install.sh in one root"
    DIR=${DIR:-/var/tmp/pdn-fresh-root-arm64-$SUITE}
    DISPLAY_TIMEOUT=${DISPLAY_TIMEOUT:-2400}
else
    DIR=${DIR:-/var/tmp/pdn-fresh-root}
    DISPLAY_TIMEOUT=${DISPLAY_TIMEOUT:-1200}
fi
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap and chroot need it)"
DIR=$(realpath -m "$DIR")
if [ -n "$CACHE" ]; then
    CACHE=$(realpath -m "$CACHE")
    case "$CACHE/" in "$DIR"/*) die "--cache must be outside --dir (which is emptied)" ;; esac
fi

# A clean environment: what a root login on a fresh machine has, plus CI=true.
CLEAN_ENV=(/usr/bin/env -i HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 TERM=dumb
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CI=true)

# The jobs, one file each beside this script (fresh-root.d/), and what they share with the other
# scripts (lib/).
source "$here/lib/apt.sh"
source "$here/lib/roots.sh"
source "$here/fresh-root.d/report.sh"
source "$here/fresh-root.d/processes.sh"
source "$here/fresh-root.d/roots.sh"
source "$here/fresh-root.d/amd64.sh"
source "$here/fresh-root.d/pi-emulation.sh"
source "$here/fresh-root.d/pi.sh"

trap cleanup EXIT
trap 'exit 130' INT TERM
# A command that fails and stops the script (set -e) says where, rather than ending it silently.
set -E
trap 'say "error: line $LINENO: $BASH_COMMAND (exit $?)"' ERR

if [ -d "$DIR" ]; then
    grep -qs " $DIR/" /proc/mounts && die "something is mounted under $DIR: unmount it first"
    rm -rf --one-file-system "$DIR"
fi
mkdir -p "$DIR"
LOGS=$DIR-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
SHOTS=${SHOTS:-$LOGS}
if [ "$ARCH" = arm64 ] && [ "$SUITE" != bookworm ]; then
    rm -f "$SHOTS"/{idle,page,video}.png
    mkdir -p "$SHOTS"
fi
DISPLAY_UP=""
VIDEOS_PLAYED=""
TEST_TIME=""
BASE_TIME=""
RUN_START=$(now)
if [ "$ARCH" = arm64 ]; then
    setup_emulation
    start=$(now)
    build_base
    step_done "base root: $BASE_HOW" "$start"
    run_pi
    exit 0
fi
build_base
[ "$ONLY" = test ] || run_display
[ "$ONLY" = display ] || run_test
summary
