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

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
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

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { s = b - a; printf "%dm%02ds (%.0f s)", s / 60, s % 60, s }'; }

mount_all() {
    local root=$1
    # A machine's / is a mount point (unshare --mount changes its propagation); a chroot's is not.
    mount --bind "$root" "$root" && mount --make-private "$root" && MOUNTED+=("$root")
    mount -t proc proc "$root/proc" && MOUNTED+=("$root/proc")
    mount -t sysfs sysfs "$root/sys" && MOUNTED+=("$root/sys")
    mount --bind /dev "$root/dev" && MOUNTED+=("$root/dev")
    mkdir -p "$root/dev/pts" "$root/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" && MOUNTED+=("$root/dev/pts")
    # A /dev/shm of the root's own (Chromium's shared memory), not the machine's.
    mount -t tmpfs -o mode=1777,size=1g shm "$root/dev/shm" && MOUNTED+=("$root/dev/shm")
}

# Every process whose root is $1 or inside it (what the commands left behind), by pid.
processes_in() {
    local root=$1 link pid seen
    for link in /proc/[0-9]*/root; do
        pid=${link#/proc/}
        pid=${pid%/root}
        seen=$(readlink "$link" 2>/dev/null) || continue
        case "$seen" in "$root" | "$root"/*) echo "$pid" ;; esac
    done
    return 0
}

# The pid of pdn itself (python .../bin/pdn display ...) in the root $1, not of a wrapper whose
# arguments name it too (xvfb-run, runuser); empty when none runs.
# Natively its command line is "python3 .../bin/pdn display ..."; an arm64 one run through
# binfmt_misc shows qemu's, with the interpreter, the file and (flag P) argv[0] in front:
# "qemu-aarch64 .../python3 .../python3 .../bin/pdn display ...". So ".../bin/pdn display"
# is looked for anywhere in it.
pdn_display_pid() {
    local candidate argv found="" i
    for candidate in $(processes_in "$1"); do
        mapfile -d '' -t argv <"/proc/$candidate/cmdline" 2>/dev/null || continue
        for ((i = 1; i + 1 < ${#argv[@]}; i++)); do
            if [[ ${argv[i]} == */bin/pdn ]] && [ "${argv[i + 1]}" = display ]; then
                found=$candidate
                break
            fi
        done
    done
    echo "$found"
}

# Waits up to $2 seconds for every process in the root $1 to end; says which are left.
nothing_left_in() {
    local root=$1 tries=0 left
    left=$(processes_in "$root" | tr '\n' ' ')
    while [ -n "$left" ] && [ $tries -lt "$2" ]; do
        sleep 1
        tries=$((tries + 1))
        left=$(processes_in "$root" | tr '\n' ' ')
    done
    [ -z "$left" ] || { say "left in $root: $(for pid in $left; do printf '%s(%s) ' "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null)"; done)"; return 1; }
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

# At the end, --keep or not: nothing of the run keeps running and nothing stays mounted (a
# kept root is left as files only). Checked, and a failure if not so.
cleanup() {
    local status=$? index root real mount cleanup_start
    cleanup_start=$(now)
    trap - EXIT
    trap "" INT TERM # a second Ctrl-C or TERM does not cut the cleanup short
    for pid in "${STARTED[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    for root in "$DIR/display" "$DIR/test" "$DIR/pi"; do
        [ -d "$root" ] || continue
        real=$(readlink -f "$root")
        stop_processes_in "$real"
        nothing_left_in "$real" 10 || { say "error: processes still run in $real"; status=1; }
    done
    for ((index = ${#MOUNTED[@]} - 1; index >= 0; index--)); do
        umount "${MOUNTED[index]}" 2>/dev/null || umount -l "${MOUNTED[index]}" || true
    done
    # Anything mounted under the roots by what ran in them (deepest first), lazily.
    while read -r mount; do
        umount -l "$mount" 2>/dev/null || true
    done < <(awk -v dir="$DIR/" 'index($2, dir) == 1 { print $2 }' /proc/mounts | sort -r)
    if grep -qs " $DIR/" /proc/mounts; then
        say "error: still mounted under $DIR: $(grep " $DIR/" /proc/mounts | awk '{print $2}' | tr '\n' ' ')"
        status=1
    fi
    if [ "$KEEP" = 0 ] && [ -d "$DIR" ]; then
        if grep -qs " $DIR/" /proc/mounts; then
            say "something is still mounted under $DIR: left in place"
        else
            rm -rf --one-file-system "$DIR"
        fi
    fi
    if [ "$ARCH" = arm64 ]; then
        if [ "$status" -eq 0 ]; then
            step_done "cleanup: nothing running in the root, nothing mounted" "$cleanup_start"
            if [ "$SUITE" = bookworm ]; then
                say "PASSED (arm64 bookworm): install.sh refused a display at once, with the reason and the way forward, and changed nothing"
            else
                say "PASSED (arm64 $SUITE): installed by install.sh, started as pdn-display.service starts it, idle page, page and H.264 video on screen"
            fi
        else
            say "FAILED (arm64 $SUITE): exit $status; the steps that passed:"
        fi
        say "an emulated Raspberry Pi: arm64 Debian $SUITE under qemu-user on $(nproc) cores of $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
        print_steps
        if [ "$SUITE" = bookworm ]; then say "logs in $LOGS"; else say "logs in $LOGS, screenshots in $SHOTS"; fi
        if [ "$KEEP" = 1 ]; then say "root kept in $DIR (files only: nothing runs in it, nothing is mounted)"; fi
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A command that fails and stops the script (set -e) says where, rather than ending it silently.
set -E
trap 'say "error: line $LINENO: $BASH_COMMAND (exit $?)"' ERR

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
    local start includes=ca-certificates tarball=""
    # ca-certificates: to carry this machine's own certificate authorities (below). systemd
    # (arm64): a Pi's OS has it, and install.sh enables its units with systemctl (no systemd
    # runs in the root, so nothing starts by itself).
    local arch_option=()  # amd64: this machine's own architecture, whatever it is
    if [ "$ARCH" = arm64 ]; then
        includes+=,systemd
        arch_option=(--arch=arm64)
    fi
    [ -z "$CACHE" ] || tarball=$CACHE/debootstrap-$SUITE-$ARCH-minbase-$includes.tar
    start=$(now)
    if [ -n "$tarball" ] && [ -f "$tarball" ]; then
        # The bare debootstrap of an earlier run, as it left it: nothing of this machine or of
        # this project is in it (both are added below, every run).
        say "unpacking the cached debootstrap $tarball (made $(date -u -r "$tarball" '+%F %H:%M UTC')) into $base"
        mkdir -p "$base"
        tar -C "$base" --numeric-owner -xpf "$tarball" || die "cannot unpack $tarball"
        BASE_HOW="unpacked from --cache (debootstrapped $(date -u -r "$tarball" '+%F %H:%M UTC'))"
    else
        say "debootstrap $SUITE $ARCH (minbase, with $includes) into $base"
        debootstrap "${arch_option[@]}" --variant=minbase --include="$includes" "$SUITE" "$base" \
            "$MIRROR" >"$LOGS/debootstrap.log" 2>&1 \
            || { tail -20 "$LOGS/debootstrap.log" >&2; die "debootstrap failed (log: $LOGS/debootstrap.log)"; }
        BASE_HOW="debootstrap"
        if [ -n "$tarball" ]; then
            mkdir -p "$CACHE"
            tar -C "$base" --numeric-owner -cpf "$tarball.part" . || die "cannot write the cache $tarball"
            mv "$tarball.part" "$tarball"
            say "cached the bare debootstrap in $tarball"
        fi
    fi
    if [ "$ARCH" = arm64 ]; then
        # As on an installed system: the release's updates and security updates too.
        printf 'deb %s %s-updates main\ndeb %s-security %s-security main\n' \
            "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" >>"$base/etc/apt/sources.list"
    fi
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
    BASE_TIME=$(elapsed "$start" "$(now)")
    say "base root built in $BASE_TIME ($BASE_HOW)"
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

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The display's port: 8080, or another free one when 8080 is taken here (a chroot shares this
# machine's network).
display_port() {
    if port_free 8080; then
        echo 8080
        return 0
    fi
    local port
    port=$(free_port)
    say "port 8080 is taken on this machine (a chroot shares its network): using $port"
    echo "$port"
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
    [ -n "$port" ] || port=$(display_port)
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
    local pdn_pid
    pdn_pid=$(pdn_display_pid "$(readlink -f "$root")")
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
    # Xvfb and the web engine's helpers end too.
    nothing_left_in "$(readlink -f "$root")" 10 \
        || die "processes left in the display root 10 s after it stopped"
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

# --- arm64: an emulated Raspberry Pi ----------------------------------------------------------

host_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "$@" >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; } \
        || die "cannot install $* on this machine"
}

# Debian's qemu-aarch64 entry (ELF, 64-bit, little-endian, machine 183: aarch64), in the
# escapes binfmt_misc reads.
AARCH64_MAGIC='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
AARCH64_MASK='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'

# arm64 programs run here, inside a chroot too, through qemu-aarch64 registered with the F flag
# (the kernel opens the interpreter once, at registration: the root need not contain it).
setup_emulation() {
    local missing=() entry=/proc/sys/fs/binfmt_misc/qemu-aarch64 qemu
    command -v qemu-aarch64-static >/dev/null 2>&1 || missing+=(qemu-user-static)
    command -v update-binfmts >/dev/null 2>&1 || missing+=(binfmt-support)
    command -v ffmpeg >/dev/null 2>&1 || missing+=(ffmpeg) # the test video, reading screenshots
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing on this machine: ${missing[*]}"
        host_install "${missing[@]}"
    fi
    if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc"
        say "mounted binfmt_misc on /proc/sys/fs/binfmt_misc"
    fi
    if [ ! -e "$entry" ]; then update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true; fi
    if [ ! -e "$entry" ]; then
        qemu=$(command -v qemu-aarch64-static)
        printf ':qemu-aarch64:M::%s:%s:%s:F' "$AARCH64_MAGIC" "$AARCH64_MASK" "$qemu" \
            >/proc/sys/fs/binfmt_misc/register || die "cannot register qemu-aarch64 with binfmt_misc"
        say "registered qemu-aarch64 ($qemu) with binfmt_misc, flag F"
    fi
    grep -qx enabled "$entry" || die "qemu-aarch64 is registered but disabled: echo 1 > $entry"
    grep -q '^flags:.*F' "$entry" \
        || die "qemu-aarch64 is registered without the F flag, so a chroot cannot use it: echo -1 > $entry, then run this again"
    say "arm64 programs run by $(sed -n 's/^interpreter //p' "$entry") (flags $(sed -n 's/^flags: //p' "$entry"))"
}

# Records a step that passed, with its time, for the table at the end, and says it.
STEPS=()
step_done() {
    local what=$1 since=$2 note=${3:-}
    STEPS+=("$what"$'\t'"$(elapsed "$since" "$(now)")")
    say "step passed: $what: $(elapsed "$since" "$(now)")${note:+; $note}"
}

# The steps' times as a table (what passed; a failed run ends at the step that failed).
print_steps() {
    local line
    [ ${#STEPS[@]} -gt 0 ] || return 0
    {
        printf '%s\t%s\n' step time
        for line in "${STEPS[@]}"; do printf '%s\n' "$line"; done
        printf '%s\t%s\n' "total" "$(elapsed "$RUN_START" "$(now)")"
    } | awk -F '\t' '{ printf "fresh-root:   %-64s %s\n", $1, $2 }' >&2
}

# What install.sh could change in the root $1, as text: packages, users and groups, and what
# is under its paths.
machine_state() {
    local root=$1
    # shellcheck disable=SC2016 # dpkg-query's fields, not the shell's
    chroot "$root" dpkg-query -W -f '${Package} ${Version} ${Status}\n'
    cat "$root/etc/passwd" "$root/etc/group"
    find "$root/opt/pdn" "$root/etc/pdn" "$root/var/lib/pdn" "$root/usr/local/bin" \
        "$root/etc/systemd/system" 2>/dev/null | sort || true # (a path that is not there: none)
}

# All values of KEY= in a unit file.
unit_values() { sed -n "s/^$2=//p" "$1"; }

# pdn-display.service's start, by hand as systemd does it (no systemd runs in a chroot): its
# ExecStart as its User and Group, in its WorkingDirectory with its UMask and Environment=
# lines, with the StateDirectory= and RuntimeDirectory= it asks for made and exported. The
# display's output goes to $2. Sets DISPLAY_PID (the process group to stop).
start_like_the_unit() {
    local root=$1 log=$2 unit=$1/etc/systemd/system/pdn-display.service
    local exec user group workdir umask mode dir state="" runtime="" environment=()
    [ -f "$unit" ] || die "install.sh installed no /etc/systemd/system/pdn-display.service"
    exec=$(unit_values "$unit" ExecStart | tail -n1)
    user=$(unit_values "$unit" User | tail -n1)
    group=$(unit_values "$unit" Group | tail -n1)
    workdir=$(unit_values "$unit" WorkingDirectory | tail -n1)
    umask=$(unit_values "$unit" UMask | tail -n1)
    mapfile -t environment < <(unit_values "$unit" Environment)
    # (What this unit has: a plain path and plain KEY=value lines; anything else is not done
    # by hand here.)
    [[ "$exec" =~ ^/[^[:space:]\"\']+$ ]] || die "ExecStart=$exec: not a plain path, not started by hand"
    if printf '%s\n' "${environment[@]}" | grep -q "[[:space:]\"']"; then
        die "an Environment= line with quotes or spaces, not started by hand: ${environment[*]}"
    fi
    mode=$(unit_values "$unit" StateDirectoryMode | tail -n1)
    for dir in $(unit_values "$unit" StateDirectory); do
        chroot "$root" install -d -m "${mode:-0755}" -o "$user" -g "$group" "/var/lib/$dir"
        state+="${state:+:}/var/lib/$dir"
    done
    mode=$(unit_values "$unit" RuntimeDirectoryMode | tail -n1)
    for dir in $(unit_values "$unit" RuntimeDirectory); do
        chroot "$root" install -d -m "${mode:-0755}" -o "$user" -g "$group" "/run/$dir"
        runtime+="${runtime:+:}/run/$dir"
    done
    say "starting the display as pdn-display.service does: $exec as $user, ${environment[*]} (log: $log)"
    # shellcheck disable=SC2016 # $1.. are the inner shell's
    setsid chroot "$root" /bin/sh -c 'umask "$1" && cd "$2" && shift 2 && exec "$@"' sh \
        "${umask:-0022}" "${workdir:-/}" runuser -u "$user" -g "$group" -- /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin LANG=C.UTF-8 USER="$user" \
        LOGNAME="$user" SHELL=/usr/sbin/nologin "${environment[@]}" \
        ${state:+STATE_DIRECTORY="$state"} ${runtime:+RUNTIME_DIRECTORY="$runtime"} "$exec" \
        >"$log" 2>&1 </dev/null &
    DISPLAY_PID=$!
    STARTED+=("$DISPLAY_PID")
}

# What an emulated Pi needs in /etc/pdn/pdn.toml beyond install.sh's new config, edited as an
# operator would (each one said, and checked):
#   name                   to know it in GET /
#   port                   8080, unless taken on this machine (the chroot shares its network)
#   x-display              the root's Xvfb (platform xcb)
#   chromium-sandbox       false: qemu-user runs a thread of its own in every process, and
#                          Chromium's sandbox refuses a renderer that is not single-threaded
#                          ("Current process is not mono-threaded!", the page never renders)
#   timeout-factor         20: under emulation a page takes minutes to paint, not seconds
configure_for_emulation() {
    local config=$1/etc/pdn/pdn.toml name=$2 port=$3 x_display=$4 line lines=()
    sed -i -e "s/^#name = .*/name = \"$name\"/" -e "s/^port = 8080$/port = $port/" \
        -e "s/^#x-display = .*/x-display = \"$x_display\"/" \
        -e 's/^#chromium-sandbox = true$/chromium-sandbox = false/' \
        -e 's/^\[screen\]$/&\ntimeout-factor = 20/' "$config"
    lines=("name = \"$name\"" "port = $port" "platform = \"xcb\"" "x-display = \"$x_display\""
        "chromium-sandbox = false" "timeout-factor = 20")
    for line in "${lines[@]}"; do
        grep -qx "$line" "$config" || die "could not set '$line' in /etc/pdn/pdn.toml"
    done
    say "/etc/pdn/pdn.toml for the emulator: $(printf '%s; ' "${lines[@]}")"
}

# An X server in the root, as a desktop session would run one: Xvfb on a display number that
# is free on this machine too (the chroot shares its network, so its abstract X sockets).
start_xvfb() {
    local root=$1 number
    chroot "$root" "${CLEAN_ENV[@]}" bash -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends xvfb xauth' >"$LOGS/xvfb-install.log" 2>&1 \
        || { tail -20 "$LOGS/xvfb-install.log" >&2; die "cannot install Xvfb in the root"; }
    for number in $(seq 150 199); do
        if [ -e "/tmp/.X11-unix/X$number" ] || [ -e "$root/tmp/.X11-unix/X$number" ] \
            || grep -q "@/tmp/.X11-unix/X$number\$" /proc/net/unix; then
            continue
        fi
        break
    done
    setsid chroot "$root" /usr/bin/Xvfb ":$number" -screen 0 1920x1080x24 -nolisten tcp \
        >"$LOGS/xvfb.log" 2>&1 </dev/null &
    XVFB_PID=$!
    STARTED+=("$XVFB_PID")
    for _ in $(seq 1 120); do
        [ -S "$root/tmp/.X11-unix/X$number" ] && break
        sleep 1
    done
    [ -S "$root/tmp/.X11-unix/X$number" ] || { cat "$LOGS/xvfb.log" >&2; die "Xvfb :$number did not start"; }
    X_DISPLAY=":$number"
}

# The page and the H.264 video the display is sent, served from this machine on loopback.
make_content() {
    local www=$1
    mkdir -p "$www"
    cat >"$www/page.html" <<'EOF'
<!doctype html><html><head><meta charset="utf-8"><title>A scheduled page</title>
<style>html,body{margin:0;height:100%;background:rgb(40,160,80);color:#fff;
font:64px sans-serif;display:flex;align-items:center;justify-content:center}</style>
</head><body>Scheduled page</body></html>
EOF
    # Red, 640x360 at 15 frames a second with a tone, for two minutes (decoded in software
    # under emulation), its frame number in a corner where a font is at hand.
    local font=/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf label=null
    if [ -f "$font" ]; then
        label="drawtext=fontfile=$font:text='H.264 frame %{n}':x=24:y=24:fontsize=32:fontcolor=white"
    fi
    ffmpeg -v error -y -f lavfi -i color=c=0xd22828:size=640x360:rate=15:duration=120 \
        -f lavfi -i sine=frequency=440:duration=120 -vf "$label" -c:v libx264 -pix_fmt yuv420p \
        -c:a aac -shortest -movflags +faststart "$www/h264.mp4" \
        || die "ffmpeg could not make the test video"
}

run_pi() {
    local root=$DIR/pi start status=0 port name www_port log=$LOGS/display.log url ctl
    local expected installed backend found
    local checks=(env PYTHONPATH="$repo" python3 -m tests.smoke.pi_checks --timeout "$DISPLAY_TIMEOUT")
    make_root pi

    # What install.sh could change, before it runs: on Bookworm nothing of it may change.
    local before after elapsed_s
    before=$(machine_state "$root")
    say "pi: bash packaging/install.sh --platform xcb, as root (log: $LOGS/install.log)"
    start=$(now)
    chroot "$root" "${CLEAN_ENV[@]}" bash -c \
        'cd /root/pdn-display && bash packaging/install.sh --platform xcb' \
        >"$LOGS/install.log" 2>&1 </dev/null || status=$?
    if [ "$SUITE" = bookworm ]; then
        # The pass on Bookworm: install.sh refuses a display at once (within a minute, before
        # any package is fetched), saying why and what to install instead, and changes nothing.
        elapsed_s=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%d", b - a }')
        [ "$status" -ne 0 ] || die "install.sh did not refuse a display on arm64 Bookworm (log: $LOGS/install.log)"
        if ! grep -q 'glibc 2.39' "$LOGS/install.log" || ! grep -q 'Trixie' "$LOGS/install.log" \
            || ! grep -q '64-bit' "$LOGS/install.log"; then
            cat "$LOGS/install.log" >&2
            die "install.sh failed on Bookworm without the reason (glibc 2.39) and the way forward (Trixie, 64-bit)"
        fi
        [ "$elapsed_s" -lt 60 ] || die "install.sh took ${elapsed_s} s to refuse Bookworm: not at once"
        after=$(machine_state "$root")
        if [ "$before" != "$after" ]; then
            diff <(echo "$before") <(echo "$after") >&2 || true
            die "install.sh refused Bookworm only after changing the machine (above)"
        fi
        sed 's/^/  /' "$LOGS/install.log" >&2
        step_done "install.sh refuses a display (Bookworm)" "$start" \
            "exit $status; nothing changed: packages, users, /opt/pdn, /etc/pdn, /var/lib/pdn, units"
        return 0
    fi
    [ "$status" -eq 0 ] || { tail -30 "$LOGS/install.log" >&2; die "install.sh failed (exit $status; log: $LOGS/install.log)"; }
    step_done "install.sh (display, xcb)" "$start" "$(grep -o 'installed pdn .* into /opt/pdn/venv' "$LOGS/install.log" | head -n1)"

    # The PySide6 the lock file gives a glibc 2.39 system, as Python in the venv imports it.
    start=$(now)
    expected=$(sed -n 's/^pyside6==//p' "$root/root/pdn-display/constraints.txt")
    installed=$(chroot "$root" "${CLEAN_ENV[@]}" runuser -u pdn -- /opt/pdn/venv/bin/python -c \
        'import PySide6, PySide6.QtWebEngineQuick; print(PySide6.__version__)' 2>>"$LOGS/pyside6.log") \
        || { cat "$LOGS/pyside6.log" >&2; die "PySide6.QtWebEngineQuick does not import in the root's venv"; }
    if [ -z "$expected" ] || [ "$installed" != "$expected" ]; then
        die "PySide6 '$installed' imports in /opt/pdn/venv; $SUITE (glibc 2.39 or newer) must get the locked '$expected'"
    fi
    step_done "PySide6 in /opt/pdn/venv" "$start" "PySide6 $installed imports with QtWebEngineQuick (constraints.txt: $expected)"

    start=$(now)
    backend=$(chroot "$root" "${CLEAN_ENV[@]}" runuser -u pdn -- /opt/pdn/venv/bin/pdn display \
        --config /etc/pdn/pdn.toml --check-config 2>&1 | sed -n 's/^ *video: *//p') \
        || die "pdn display --check-config failed"
    [ -n "$backend" ] || die "pdn display --check-config says no video backend"
    step_done "pdn display --check-config" "$start" "video: $backend"
    backend=${backend%%,*}

    start=$(now)
    start_xvfb "$root"
    step_done "Xvfb in the root" "$start" "display $X_DISPLAY, 1920x1080"

    port=$PORT
    [ -n "$port" ] || port=$(display_port)
    name="fresh-root-pi-$$"
    configure_for_emulation "$root" "$name" "$port" "$X_DISPLAY"
    make_content "$LOGS/www"
    www_port=$(free_port)
    setsid python3 -m http.server "$www_port" --bind 127.0.0.1 --directory "$LOGS/www" \
        >"$LOGS/www.log" 2>&1 </dev/null &
    STARTED+=("$!")
    url=https://127.0.0.1:$port
    ctl=$root/root/.config/pdn/ctl.toml

    start=$(now)
    start_like_the_unit "$root" "$log"
    found=$("${checks[@]}" answers "$url" "$name") \
        || { tail -30 "$log" >&2; die "GET / did not answer (log: $log)"; }
    step_done "the display answers GET /" "$start" "${found:0:200}"

    start=$(now)
    say "pairing: pdn display --pairing-code as pdn, then pdn ctl pair $url CODE, in the root"
    chroot "$root" "${CLEAN_ENV[@]}" bash -c "cd / && code=\$(runuser -u pdn -- pdn display \
        --pairing-code --data-dir /var/lib/pdn/display) && pdn ctl pair $url \"\$code\"" \
        >>"$LOGS/ctl.log" 2>&1 || { cat "$LOGS/ctl.log" >&2; die "pdn ctl pair failed"; }
    found=$("${checks[@]}" idle "$url" --ctl "$ctl" --save "$SHOTS/idle.png") \
        || { tail -30 "$log" >&2; die "the idle page did not reach /x/screenshot (log: $log)"; }
    step_done "the idle page on /x/screenshot (pairing included)" "$start" "$found"

    start=$(now)
    chroot "$root" "${CLEAN_ENV[@]}" pdn ctl schedule "$url" \
        "http://127.0.0.1:$www_port/page.html" --for 1m >>"$LOGS/ctl.log" 2>&1 \
        || { cat "$LOGS/ctl.log" >&2; die "pdn ctl schedule (the page) failed"; }
    found=$("${checks[@]}" shows "$url" "http://127.0.0.1:$www_port/page.html" --colour 40,160,80 \
        --ctl "$ctl" --save "$SHOTS/page.png") \
        || { tail -30 "$log" >&2; die "the scheduled page did not show (log: $log)"; }
    step_done "a scheduled page in screenshots" "$start" "$found"

    start=$(now)
    # A video request plays the clip once (its own length); under emulation a screenshot takes
    # long enough to miss all of that play now and then (Trixie run B): then it is sent again,
    # once, and the run says so.
    local attempt
    for attempt in 1 2; do
        chroot "$root" "${CLEAN_ENV[@]}" pdn ctl schedule "$url" \
            "http://127.0.0.1:$www_port/h264.mp4" --for 10m >>"$LOGS/ctl.log" 2>&1 \
            || { cat "$LOGS/ctl.log" >&2; die "pdn ctl schedule (the video) failed"; }
        if found=$("${checks[@]}" shows "$url" "http://127.0.0.1:$www_port/h264.mp4" \
            --colour 210,40,40 --codec H264 --ctl "$ctl" --save "$SHOTS/video.png"); then
            break
        fi
        [ "$attempt" = 1 ] || { tail -30 "$log" >&2; die "the H.264 video did not show (log: $log)"; }
        say "the H.264 video's play was not caught in a screenshot: sent again (once)"
    done
    [ "$attempt" = 1 ] || found+=" (sent a second time)"
    step_done "an H.264 MP4 in screenshots" "$start" "$found"

    # The backend install.sh's wheel has and --check-config chose is the one that played it.
    [[ "$found" == *"by $backend,"* ]] \
        || die "the video played by another backend than the chosen $backend: $found"
    grep -q "video: $backend" "$log" || die "the display's log has no 'video: $backend' line"
    if [ "$backend" = ffmpeg ]; then
        grep -q 'Using Qt multimedia with FFmpeg' "$log" || die "the display's log does not say Qt loaded its FFmpeg"
        backend+=" ($(grep -o 'FFmpeg version [^ ]*' "$log" | head -n1), the wheel's)"
    fi
    say "video backend: $backend: chosen (check-config, the log's 'video:' line), loaded and playing (/x/health)"
    # What the display's own log says of its screen and its API under emulation (reported,
    # not failed on: the screenshots above are the proof): a visual watchdog that called a
    # fine screen wrong, or a connection closed for its deadline (pdn.wsgi), shows here.
    local wrong closed
    wrong=$(grep -c 'the screen is wrong' "$log" || true)
    closed=$(grep -c 'pdn.wsgi: \(closed the connection\|answered 408\)' "$log" || true)
    say "the display's log: $wrong 'the screen is wrong' line(s), $closed connection(s) closed for a deadline"
    [ "$wrong" = 0 ] || grep 'the screen is \(still \)\?wrong\|the screen is right again' "$log" | head -n 5 >&2

    # SIGTERM to pdn itself, as systemctl stop sends it (and as the amd64 run does); then the
    # root's X server; then nothing of the run may be left in the root.
    start=$(now)
    local pdn_pid waited=0
    pdn_pid=$(pdn_display_pid "$(readlink -f "$root")")
    [ -n "$pdn_pid" ] || die "no 'pdn display' process found in $root"
    kill -TERM "$pdn_pid"
    while kill -0 "$DISPLAY_PID" 2>/dev/null && [ $waited -lt 120 ]; do
        sleep 1
        waited=$((waited + 1))
    done
    if kill -0 "$DISPLAY_PID" 2>/dev/null; then die "the display did not stop within 120 s of SIGTERM"; fi
    grep -q 'pdn.app: stopped' "$log" || die "the display ended without 'stopped' in its log ($log)"
    kill -TERM "$XVFB_PID" 2>/dev/null || true
    nothing_left_in "$(readlink -f "$root")" 30 || die "processes left in the root after the display and Xvfb stopped"
    step_done "the display stops on SIGTERM, nothing left in the root" "$start" "stopped ${waited} s after SIGTERM"
}

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
say "summary (fresh $SUITE roots, as root, no screen):"
[ -z "$DISPLAY_UP" ] || say "  bash packaging/dev.sh display: answering (GET /, /x/health) after $DISPLAY_UP, set-up included"
[ -z "$VIDEOS_PLAYED" ] || say "  videos: H.264, HEVC and VP9 played by POST /schedule and in a CDS, no black screenshot"
[ -z "$TEST_TIME" ] || say "  bash packaging/dev.sh test:    passed in $TEST_TIME, set-up included"
say "logs in $LOGS"; if [ "$KEEP" = 1 ]; then say "roots kept in $DIR"; fi
