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
#   sudo bash packaging/fresh-root.sh [options]
#
# Options:
#   --dir DIR        where the roots are built (default /var/tmp/pdn-fresh-root); emptied first
#   --keep           leave the roots in DIR afterwards (default: removed; the logs stay in
#                    DIR-logs either way)
#   --only JOB       run one command only: display or test
#   --port N         the display's port (default 8080; another free one if 8080 is taken here,
#                    since a chroot shares the machine's network)
#   --display-timeout S   how long the display may take to answer, set-up included (default 1200)
#   -h, --help       this text
#
# Needs: root, debootstrap (installed with apt-get when missing), Debian's package archive and
# PyPI reachable. Takes a few GB in DIR while it runs. Of this machine, only its network settings
# go into the roots (resolver, local CA certificates, /etc/pip.conf), as a fresh machine of the
# same kind has them.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=/var/tmp/pdn-fresh-root
KEEP=0
ONLY=""
PORT=""
DISPLAY_TIMEOUT=1200
SUITE=bookworm
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
        -h | --help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done
case "$ONLY" in "" | display | test) ;; *) die "--only must be display or test" ;; esac
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap and chroot need it)"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { s = b - a; printf "%dm%02ds (%.0f s)", s / 60, s % 60, s }'; }

mount_all() {
    local root=$1
    mount -t proc proc "$root/proc" && MOUNTED+=("$root/proc")
    mount -t sysfs sysfs "$root/sys" && MOUNTED+=("$root/sys")
    mount --bind /dev "$root/dev" && MOUNTED+=("$root/dev")
    mkdir -p "$root/dev/pts" "$root/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" && MOUNTED+=("$root/dev/pts")
    # A /dev/shm of the root's own (Chromium's shared memory), not the machine's.
    mount -t tmpfs -o mode=1777,size=1g shm "$root/dev/shm" && MOUNTED+=("$root/dev/shm")
}

# Every process whose root is inside $1 (what the commands left behind), by pid.
processes_in() {
    local root=$1 link pid
    for link in /proc/[0-9]*/root; do
        pid=${link#/proc/}
        pid=${pid%/root}
        [ "$(readlink "$link" 2>/dev/null)" = "$root" ] && echo "$pid"
    done
    return 0
}

stop_processes_in() {
    local root=$1 pids
    mapfile -t pids < <(processes_in "$root")
    [ ${#pids[@]} -eq 0 ] && return 0
    say "stopping what is left in $root: ${pids[*]}"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    sleep 3
    mapfile -t pids < <(processes_in "$root")
    if [ ${#pids[@]} -gt 0 ]; then kill -KILL "${pids[@]}" 2>/dev/null || true; fi
    sleep 1
}

cleanup() {
    local status=$? index root
    for pid in "${STARTED[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    for root in "$DIR/display" "$DIR/test"; do
        [ -d "$root" ] && stop_processes_in "$(readlink -f "$root")"
    done
    for ((index = ${#MOUNTED[@]} - 1; index >= 0; index--)); do
        umount "${MOUNTED[index]}" 2>/dev/null || umount -l "${MOUNTED[index]}" || true
    done
    if [ "$KEEP" = 0 ] && [ -d "$DIR" ]; then
        if grep -qs " $DIR/" /proc/mounts; then
            say "something is still mounted under $DIR: left in place"
        else
            rm -rf "$DIR"
        fi
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A clean environment: what a root login on a fresh machine has, plus CI=true.
CLEAN_ENV=(/usr/bin/env -i HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 TERM=dumb
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CI=true)

build_base() {
    local base=$DIR/base
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "installing debootstrap"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    fi
    say "debootstrap $SUITE (minbase) into $base"
    local start
    start=$(now)
    # ca-certificates: to carry this machine's own certificate authorities (below).
    debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$base" \
        >"$LOGS/debootstrap.log" 2>&1 \
        || { tail -20 "$LOGS/debootstrap.log" >&2; die "debootstrap failed (log: $LOGS/debootstrap.log)"; }
    # What an installed Debian has and debootstrap leaves out.
    printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$base/etc/hosts"
    echo pdn-fresh-root >"$base/etc/hostname"
    # The network settings of the machine this runs on, which a fresh machine of its kind has
    # and which are none of the project's business: its resolver, the certificate authorities
    # its HTTPS egress needs (/usr/local/share/ca-certificates) and pip's setting to trust them
    # (/etc/pip.conf). Nothing else of the machine goes in.
    cp /etc/resolv.conf "$base/etc/resolv.conf"
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$base/usr/local/share/ca-certificates/"
        chroot "$base" update-ca-certificates >/dev/null 2>&1 \
            || die "update-ca-certificates failed in $base"
        say "carried this machine's CA certificates: $(cd /usr/local/share/ca-certificates && echo ./*.crt)"
    fi
    if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$base/etc/pip.conf"; fi
    say "base root built in $(elapsed "$start" "$(now)")"
}

# A root of its own for $1 (display or test), with a clean clone of the committed HEAD.
make_root() {
    local job=$1 root=$DIR/$1
    cp -a "$DIR/base" "$root"
    git clone --quiet --no-hardlinks "$repo" "$root/root/pdn-display"
    say "$job root: clone of $(git -C "$root/root/pdn-display" log -1 --format='%h %s' | cut -c1-72)"
    mount_all "$root"
}

port_free() {
    python3 -c 'import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$1"
}

# GET URL; prints the body, fails when it does not answer 200.
http_get() {
    python3 -c 'import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as response:
    sys.stdout.write(response.read().decode("utf-8", "replace"))' "$1" 2>/dev/null
}

run_display() {
    local root=$DIR/display port=$PORT name start pid body health deadline log=$LOGS/display.log
    make_root display
    if [ -z "$port" ]; then
        port=8080
        if ! port_free 8080; then
            port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
            say "port 8080 is taken on this machine (a chroot shares its network): using $port"
        fi
    fi
    name="fresh-root-$$"
    say "display: bash packaging/dev.sh display --port $port --name $name (log: $log)"
    start=$(now)
    setsid chroot "$root" "${CLEAN_ENV[@]}" bash -c \
        "cd /root/pdn-display && exec bash packaging/dev.sh display --port $port --name $name" \
        >"$log" 2>&1 </dev/null &
    pid=$!
    STARTED+=("$pid")
    deadline=$(($(date +%s) + DISPLAY_TIMEOUT))
    body=""
    while [ "$(date +%s)" -lt "$deadline" ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -30 "$log" >&2
            die "the display stopped before it answered (log: $log)"
        fi
        if body=$(http_get "http://127.0.0.1:$port/") && [[ "$body" == *"$name"* ]]; then break; fi
        body=""
        sleep 2
    done
    [ -n "$body" ] || { tail -30 "$log" >&2; die "the display did not answer in ${DISPLAY_TIMEOUT}s"; }
    DISPLAY_UP=$(elapsed "$start" "$(now)")
    say "display answers GET / after $DISPLAY_UP: $body"
    health=""
    for _ in $(seq 1 30); do
        health=$(http_get "http://127.0.0.1:$port/x/health") && break
        sleep 2
    done
    [ -n "$health" ] || die "GET /x/health did not answer"
    say "GET /x/health: ${health:0:400}"
    # Issue 21's done-when, as a user would try it: an H.264 MP4, an HEVC MP4 and a VP9 WebM
    # sent by POST /schedule and in a CDS, the screen read back all along (no black frame).
    say "display: python -m tests.smoke.play_videos (log: $LOGS/play_videos.log)"
    if ! chroot "$root" "${CLEAN_ENV[@]}" bash -c \
        "cd /root/pdn-display && .venv/bin/python -m tests.smoke.play_videos --display http://127.0.0.1:$port" \
        >"$LOGS/play_videos.log" 2>&1; then
        cat "$LOGS/play_videos.log" >&2
        die "videos did not play on the fresh display"
    fi
    sed 's/^/  /' "$LOGS/play_videos.log"
    VIDEOS_PLAYED=yes
    # SIGTERM to pdn itself, as systemd or Ctrl-C would stop it; xvfb-run then ends Xvfb.
    # pdn itself (python .../bin/pdn display ...), not xvfb-run, whose arguments name it too.
    local pdn_pid="" candidate argv
    for candidate in $(processes_in "$(readlink -f "$root")"); do
        mapfile -d '' -t argv <"/proc/$candidate/cmdline" 2>/dev/null || continue
        if [ "${#argv[@]}" -ge 3 ] && [[ ${argv[1]} == */bin/pdn ]] && [ "${argv[2]}" = display ]; then
            pdn_pid=$candidate
        fi
    done
    [ -n "$pdn_pid" ] || die "no 'pdn display' process found in $root"
    kill -TERM "$pdn_pid"
    local waited=0
    while kill -0 "$pid" 2>/dev/null && [ $waited -lt 30 ]; do
        sleep 1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        die "the display did not stop within 30 s of SIGTERM"
    fi
    wait "$pid" 2>/dev/null || true
    STARTED=()
    local left tries=0
    left=$(processes_in "$(readlink -f "$root")" | tr '\n' ' ')
    while [ -n "$left" ] && [ $tries -lt 10 ]; do  # Xvfb and the web engine's helpers end too
        sleep 1
        tries=$((tries + 1))
        left=$(processes_in "$(readlink -f "$root")" | tr '\n' ' ')
    done
    [ -z "$left" ] || die "processes left in the display root 10 s after it stopped: $left"
    say "display stopped $waited s after SIGTERM"
}

run_test() {
    local root=$DIR/test start status=0 log=$LOGS/test.log
    make_root test
    say "test: bash packaging/dev.sh test (log: $log)"
    start=$(now)
    chroot "$root" "${CLEAN_ENV[@]}" bash -c 'cd /root/pdn-display && bash packaging/dev.sh test' \
        >"$log" 2>&1 </dev/null || status=$?
    TEST_TIME=$(elapsed "$start" "$(now)")
    tail -5 "$log" >&2
    [ "$status" -eq 0 ] || die "bash packaging/dev.sh test failed (exit $status) after $TEST_TIME (log: $log)"
    say "test passed in $TEST_TIME"
}

if [ -d "$DIR" ]; then
    grep -qs " $DIR/" /proc/mounts && die "something is mounted under $DIR: unmount it first"
    rm -rf "$DIR"
fi
mkdir -p "$DIR"
LOGS=$DIR-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
DISPLAY_UP=""
VIDEOS_PLAYED=""
TEST_TIME=""
build_base
[ "$ONLY" = test ] || run_display
[ "$ONLY" = display ] || run_test
say "summary (fresh $SUITE roots, as root, no screen):"
[ -z "$DISPLAY_UP" ] || say "  bash packaging/dev.sh display: answering (GET /, /x/health) after $DISPLAY_UP, set-up included"
[ -z "$VIDEOS_PLAYED" ] || say "  videos: H.264, HEVC and VP9 played by POST /schedule and in a CDS, no black screenshot"
[ -z "$TEST_TIME" ] || say "  bash packaging/dev.sh test:    passed in $TEST_TIME, set-up included"
say "logs in $LOGS"; if [ "$KEEP" = 1 ]; then say "roots kept in $DIR"; fi
