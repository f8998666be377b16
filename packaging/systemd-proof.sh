#!/usr/bin/env bash
# Proves releases and unattended rollback under a real systemd: boots a bare Debian
# bookworm root (debootstrap) with systemd-nspawn, systemd as its PID 1, puts this repository's
# committed HEAD in it and installs the display as a user would (packaging/install.sh, platform
# offscreen: no screen needed), then:
#
#   first install   every role (--services display,scheduler,content,sensor): each unit's user
#                   reads its own secrets and data and not another's; pdn-display.service active
#                   (Type=notify: told systemd it is ready), /x/health "ok" with a painted
#                   screen, pdn-release-check.timer running, the scheduler and the content
#                   server active as their own users; systemd-analyze security of every unit
#   good upgrade    this checkout as a wheel of a higher version (install.sh --wheel): switched,
#                   its trial passed
#   broken release  the same at the next version, whose display exits at once (the recipe of
#                   tests/packaging/test_release.py): nobody touches it; systemd restarts it, its
#                   ExecStartPre counts the exits, and the 5th start runs the previous release
#   rollback        pdn-release rollback run in pdn-release-check.service's sandbox (its unit,
#                   another ExecStart): switches 'current' and restarts the display on it
#   --hang          also a broken release whose display never answers: pdn-release-check.timer
#                   rolls it back at the deadline (PDN_RELEASE_DEADLINE, 285 s unless --deadline)
#
# It prints the times (switch to trial passed; switch to rolled back; switch to "ok" again on
# the previous release), what /x/health says of the rollback and the journal's pdn-release
# lines, and exits non-zero when a step fails. The root stays in DIR for inspection (and is
# reused by the next run unless --fresh); the container is powered off at the end.
#
#   sudo bash packaging/systemd-proof.sh [options]
#
# Options:
#   --dir DIR        where the root and the logs go (default /var/tmp/pdn-systemd-proof)
#   --fresh          build the root anew (default: reuse one a previous run built)
#   --port N         the display's port, on 127.0.0.1 (default 18480): the container shares
#                    this machine's network, for pip and apt
#   --hang           also the release that never answers (takes the deadline, 285 s)
#   --deadline S     PDN_RELEASE_DEADLINE in the container (default: pdn-release's, 285)
#   --keep-running   leave the container running (stop it: kill the PID it prints)
#   -h, --help       this text
#
# Needs: root, systemd-container and debootstrap (installed with apt-get when missing), this
# checkout's .venv (bash packaging/dev.sh setup: it builds the wheels), Debian's package archive
# and PyPI reachable. About 3 GB in DIR. Works where systemd is not PID 1 and on a cgroup v1
# (hybrid) host (SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=0, no machined: --register=no; commands go in
# with nsenter). Of this machine, only its network settings go into the root (resolver, local CA
# certificates, /etc/pip.conf).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
dir=/var/tmp/pdn-systemd-proof
fresh=0 port=18480 hang=0 deadline="" keep=0

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
say() { printf 'systemd-proof: %s\n' "$*" >&2; }
die() {
    say "FAILED: $*"
    exit 1
}

while [ $# -gt 0 ]; do
    case "$1" in
        --dir) dir=${2:?--dir needs a directory}; shift ;;
        --fresh) fresh=1 ;;
        --port) port=${2:?--port needs a number}; shift ;;
        --hang) hang=1 ;;
        --deadline) deadline=${2:?--deadline needs seconds}; shift ;;
        --keep-running) keep=1 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || die "run as root (debootstrap, systemd-nspawn)"
[ -x "$repo/.venv/bin/python" ] || die "no $repo/.venv: bash packaging/dev.sh setup"

root=$dir/root
wheels=$dir/wheels
logs=$dir/logs
machine=pdn-proof
mkdir -p "$dir" "$logs"

# --- The root ---------------------------------------------------------------------------------

# host_install (lib/apt.sh) and carry_network_settings (lib/roots.sh): shared with fresh-root.sh.
source "$here/lib/apt.sh"
source "$here/lib/roots.sh"

for tool in systemd-nspawn:systemd-container debootstrap:debootstrap nsenter:util-linux; do
    command -v "${tool%%:*}" >/dev/null 2>&1 && continue
    say "installing ${tool#*:}"
    host_install "${tool#*:}"
done

if [ "$fresh" = 1 ] || [ ! -x "$root/usr/lib/systemd/systemd" ]; then
    rm -rf "$root"
    say "debootstrap bookworm into $root (a few minutes)"
    nice -n 19 debootstrap --variant=minbase \
        --include=systemd,systemd-sysv,dbus,python3,python3-venv,ca-certificates,curl,procps,iproute2 \
        bookworm "$root" http://deb.debian.org/debian >"$logs/debootstrap.log" 2>&1 \
        || die "debootstrap (see $logs/debootstrap.log)"
    echo "$machine" >"$root/etc/hostname"
    echo "127.0.1.1 $machine" >>"$root/etc/hosts"
    chroot "$root" passwd -d root >/dev/null
fi
carry_network_settings "$root" >/dev/null || true
rm -rf "$root/root/pdn"
mkdir -p "$root/root/pdn"
git -C "$repo" archive HEAD | tar -x -C "$root/root/pdn"

# --- The wheels: a good upgrade and a broken release, at the next minor versions ---------------

rm -rf "$wheels"
mkdir -p "$wheels"
say "building the wheels of the good and the broken release"
(cd "$repo" && .venv/bin/python - "$wheels" <<'PY') >"$logs/wheels.log" 2>&1 || die "wheels (see $logs/wheels.log)"
import re
import sys
from pathlib import Path

sys.path.insert(0, ".")
from tests.packaging.test_release import BROKEN_MAIN, source_copy
from tests.support.release import build_venv, build_wheel, make_wheelhouse

out = Path(sys.argv[1])
major, minor = re.search(r'(?m)^version = "(\d+)\.(\d+)', Path("pyproject.toml").read_text()).groups()
good_version, broken_version = f"{major}.{int(minor) + 1}.0", f"{major}.{int(minor) + 1}.1"
builder = build_venv(out / "build-venv", make_wheelhouse(out / "house"))
good = build_wheel(source_copy(out / "good-src", good_version), out / "good", builder)
broken_source = source_copy(out / "broken-src", broken_version)
cli = broken_source / "server/cli.py"
cli.write_text(cli.read_text().replace(
    "def main(argv: Sequence[str] | None = None) -> int:\n", BROKEN_MAIN, 1))
broken = build_wheel(broken_source, out / "broken", builder)
for wheel in (good, broken):
    wheel.rename(out / wheel.name)
    print(wheel.name)
PY
good_wheel=$(basename "$(ls "$wheels"/pdn_display-*.0-py3-none-any.whl)")
broken_wheel=$(basename "$(ls "$wheels"/pdn_display-*.1-py3-none-any.whl)")
mkdir -p "$root/root/wheels"
cp "$wheels/$good_wheel" "$wheels/$broken_wheel" "$root/root/wheels/"

# --- The container ------------------------------------------------------------------------------

nspawn_pid=""
leader=""
poweroff() {
    [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null || return 0
    if [ "$keep" = 1 ]; then
        say "the container runs on: systemd-nspawn PID $nspawn_pid (kill $nspawn_pid stops it)"
        return 0
    fi
    in_root systemctl poweroff >/dev/null 2>&1 || true
    for _ in $(seq 1 40); do
        kill -0 "$nspawn_pid" 2>/dev/null || return 0
        sleep 0.5
    done
    kill "$nspawn_pid" 2>/dev/null || true
}
trap poweroff EXIT

in_root() {
    nsenter -t "$leader" -m -u -i -n -p -C -r -w -- /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

say "booting $root with systemd-nspawn"
SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=0 setsid systemd-nspawn -b -D "$root" -M "$machine" \
    --register=no --keep-unit --console=read-only >"$logs/boot.log" 2>&1 </dev/null &
nspawn_pid=$!
for _ in $(seq 1 120); do
    leader=$(pgrep -P "$nspawn_pid" -x systemd || true)
    if [ -n "$leader" ]; then
        case "$(in_root systemctl is-system-running 2>/dev/null || true)" in
            running | degraded) break ;;
        esac
    fi
    sleep 0.5
done
[ -n "$leader" ] || die "the container did not boot (see $logs/boot.log)"
say "booted: $(in_root systemctl --version | head -n1)"

# --- Helpers inside -----------------------------------------------------------------------------

# One line on the display: the release 'current' names, what /x/health says, the unit's state.
cat >"$root/root/proof-state" <<PY
#!/usr/bin/python3
import json, os, ssl, subprocess, urllib.request
current = os.path.basename(os.readlink("/opt/pdn/current")) if os.path.islink("/opt/pdn/current") else "-"
try:
    context = ssl._create_unverified_context()
    with urllib.request.urlopen("https://127.0.0.1:$port/x/health", timeout=2, context=context) as answer:
        body = json.load(answer)
    release = body.get("release") or {}
    renderer = body.get("renderer") or {}
    painted = "painted" if renderer.get("alive") and renderer.get("last-frame") else "unpainted"
    health = f"{body.get('status')} {release.get('name') or body.get('version')} {painted} rolled-back-from={release.get('rolled-back-from')}"
except Exception:
    health = "no-answer"
unit = subprocess.run(["systemctl", "is-active", "pdn-display"], capture_output=True, text=True).stdout.strip()
print(f"{current} | {health} | {unit}")
PY
chmod 0755 "$root/root/proof-state"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Polls the display until its line matches the regular expression $1 (timeout $2 s); logs
# each change with the time.
wait_for() {
    local pattern=$1 timeout=$2 start line last=""
    start=$(now)
    while :; do
        line=$(in_root /root/proof-state)
        if [ "$line" != "$last" ]; then
            printf '%s %s\n' "$(date +%T.%N | cut -c1-12)" "$line" >>"$logs/display.log"
            last=$line
        fi
        [[ "$line" =~ $pattern ]] && return 0
        if [ "$(awk -v s="$(since "$start")" -v t="$timeout" 'BEGIN { print (s > t) }')" = 1 ]; then
            say "after ${timeout} s: $line"
            return 1
        fi
        sleep 0.5
    done
}

# Waits (up to $1 s) for the display to run $good again after the switch to $broken ($2: what
# failed when it does not), then (up to 120 s) for it to be ok there, the rollback noted. Sets
# rolled_back and ok_after: the seconds since the switch.
await_rollback() {
    wait_for "^$good \| " "$1" || die "$2"
    rolled_back=$(since "$switched")
    wait_for "^$good \| ok $good painted rolled-back-from=$broken \| active$" 120 \
        || die "the display did not come back ok on $good"
    ok_after=$(since "$switched")
}

# install.sh in the container, each line with the time; prints the time of the switch.
install_release() {
    local log=$1
    shift
    # shellcheck disable=SC2016 # expanded in the container
    in_root bash -c 'cd /root/pdn && nice -n 19 bash packaging/install.sh "$@" 2>&1 | while IFS= read -r line; do printf "%s %s\n" "$(date +%s.%N)" "$line"; done' \
        install "$@" >"$logs/$log" || true
    grep -q 'pdn-install: done' "$logs/$log" || die "install.sh $* (see $logs/$log)"
    awk '/pdn-release: switched from/ { print $1; exit }' "$logs/$log"
}

# The release install.sh switched to, from its log.
release_of() { sed -n 's/.*pdn-release: switched from [^ ]* to \([^ ]*\).*/\1/p' "$logs/$1" | head -n1; }

# --- 1. The first install -----------------------------------------------------------------------

say "1. first install: bash packaging/install.sh --platform offscreen --no-start --services display,scheduler,content,sensor, then [listen] on 127.0.0.1:$port"
install_release install-1.log --platform offscreen --no-start --services display,scheduler,content,sensor >/dev/null
in_root sed -i -e "/^\[listen\]/,/^\[/{s/^host = .*/host = \"127.0.0.1\"/;s/^port = .*/port = $port/}" /etc/pdn/pdn.toml
in_root sed -i -e 's/^PDN_SCHEDULER_HOST=.*/PDN_SCHEDULER_HOST=127.0.0.1/' \
    -e "s/^PDN_SCHEDULER_PORT=.*/PDN_SCHEDULER_PORT=$((port + 10))/" \
    -e 's/^PDN_CONTENT_HOST=.*/PDN_CONTENT_HOST=127.0.0.1/' \
    -e "s/^PDN_CONTENT_PORT=.*/PDN_CONTENT_PORT=$((port + 11))/" /etc/pdn/services.env
if [ -n "$deadline" ]; then in_root sh -c "echo PDN_RELEASE_DEADLINE=$deadline >/etc/pdn/release.env"; fi
in_root systemctl start pdn-display.service pdn-display-retry.timer pdn-release-check.timer \
    pdn-scheduler.service pdn-content.service
# Each role's user reads its own secrets and data, and not another's.
can() { if in_root runuser -u "$1" -- "${@:2}" >/dev/null 2>&1; then echo yes; else echo no; fi; }
users="pdn:scheduler.env=$(can pdn cat /etc/pdn/scheduler.env)"
users+=" pdn:sensor.env=$(can pdn cat /etc/pdn/sensor.env)"
users+=" pdn:scheduler/=$(can pdn ls /var/lib/pdn/scheduler)"
users+=" pdn:release-state=$(can pdn touch /var/lib/pdn-release/state)"
users+=" pdn-scheduler:pdn.toml=$(can pdn-scheduler cat /etc/pdn/pdn.toml)"
users+=" pdn-scheduler:display/=$(can pdn-scheduler ls /var/lib/pdn/display)"
users+=" pdn-sensor:scheduler.env=$(can pdn-sensor cat /etc/pdn/scheduler.env)"
[[ "$users" != *=yes* ]] || die "a role's user reads another's: $users"
own="pdn:pdn.toml=$(can pdn cat /etc/pdn/pdn.toml) pdn-scheduler:scheduler.env=$(can pdn-scheduler cat /etc/pdn/scheduler.env)"
[[ "$own" != *=no* ]] || die "a role's user cannot read its own: $own"
say "   users: $users; $own"
for unit in pdn-scheduler.service pdn-content.service; do
    for _ in $(seq 1 60); do
        in_root systemctl is-active --quiet "$unit" && break
        sleep 0.5
    done
    in_root systemctl is-active --quiet "$unit" || die "$unit is not active (journalctl -u $unit in the root)"
    say "   $unit active as $(in_root systemctl show -p User --value "$unit")"
done
in_root sh -c 'printf "PDN_SENSOR_TYPE=door\nPDN_SENSOR_SOURCE_KIND=--file\nPDN_SENSOR_SOURCE=/etc/hostname\n" >/etc/pdn/sensor-door.env'
for unit in pdn-display.service pdn-scheduler.service pdn-content.service pdn-sensor@door.service \
    pdn-release-check.service; do
    in_root systemd-analyze security "$unit" 2>/dev/null | sed -n 's/^→ Overall exposure level for //p'
done >"$logs/security.txt"
sed 's/^/   systemd-analyze security: /' "$logs/security.txt" >&2
wait_for '^[^ ]+ \| ok [^ ]+ painted .*\| active$' 180 || die "the first install's display never answered ok"
first=$(in_root readlink /opt/pdn/current)
first=${first##*/}
in_root systemctl show -p Type -p NotifyAccess -p WatchdogUSec pdn-display.service | tr '\n' ' ' >"$logs/unit.txt"
[[ "$(in_root journalctl -u pdn-display -o cat)" == *"told systemd the display is ready"* ]] \
    || die "the display never told systemd it was ready"
in_root systemctl is-active --quiet pdn-release-check.timer || die "pdn-release-check.timer is not running"
say "   $first: active ($(cat "$logs/unit.txt")), ok with a painted screen, the check's timer running"

# --- 2. A good upgrade --------------------------------------------------------------------------

say "2. good upgrade: install.sh --wheel $good_wheel"
switched=$(install_release install-good.log --wheel "/root/wheels/$good_wheel")
good=$(release_of install-good.log)
[ -n "$good" ] || die "install.sh did not switch (see $logs/install-good.log)"
on_trial() { [[ "$(in_root /opt/pdn/libexec/pdn-release status)" == *$'\non trial'* ]]; }
for _ in $(seq 1 240); do
    on_trial || break
    sleep 0.5
done
if on_trial; then die "$good still on trial after 2 minutes"; fi
good_trial=$(since "$switched")
wait_for "^$good \| ok $good painted .*\| active$" 30 || die "$good is not the release that answers"
say "   switched to $good; its trial passed ${good_trial} s after the switch"

# --- 3. A broken release: it exits at once ------------------------------------------------------

say "3. broken release: install.sh --wheel $broken_wheel (its display exits at once); nobody touches it"
switched=$(install_release install-broken.log --wheel "/root/wheels/$broken_wheel")
broken=$(release_of install-broken.log)
await_rollback 330 "not rolled back from $broken"
back=$rolled_back ok_again=$ok_after
say "   rolled back to $good ${back} s after the switch; ok with a painted screen again after ${ok_again} s"

say "4. rollback in pdn-release-check.service's sandbox: back to $first by hand, then pdn-release rollback there"
in_root /opt/pdn/libexec/pdn-release switch "$first" >/dev/null 2>&1 || die "could not switch to $first"
before=$(in_root systemctl show -p InvocationID --value pdn-display.service)
in_root sh -c 'sed -e "s|^ExecStart=.*|ExecStart=/opt/pdn/libexec/pdn-release rollback \"the proof, from the sandbox\"|" /etc/systemd/system/pdn-release-check.service >/etc/systemd/system/pdn-proof-rollback.service && systemctl daemon-reload'
in_root systemctl start pdn-proof-rollback.service || die "pdn-release rollback failed in the sandbox (journalctl -u pdn-proof-rollback)"
[ "$(in_root readlink /opt/pdn/current)" = "releases/$good" ] || die "the sandboxed rollback did not switch back to $good"
wait_for "^$good \| ok $good painted .*\| active$" 120 || die "the display did not come back on $good"
[ "$(in_root systemctl show -p InvocationID --value pdn-display.service)" != "$before" ] \
    || die "the sandboxed rollback did not restart the display"
in_root sh -c 'rm -f /etc/systemd/system/pdn-proof-rollback.service && systemctl daemon-reload'
say "   switched back to $good and restarted the display from the sandbox"

hang_back="" hang_ok=""
if [ "$hang" = 1 ]; then
    say "5. a release that never answers (PDN_TEST_BROKEN=hang): the timer rolls it back at the deadline"
    in_root sh -c 'mkdir -p /etc/systemd/system/pdn-display.service.d && printf "[Service]\nEnvironment=PDN_TEST_BROKEN=hang\n" >/etc/systemd/system/pdn-display.service.d/proof-hang.conf && systemctl daemon-reload'
    switched=$(install_release install-hang.log --wheel "/root/wheels/$broken_wheel")
    await_rollback "$((${deadline:-285} + 90))" "not rolled back at the deadline"
    hang_back=$rolled_back hang_ok=$ok_after
    in_root sh -c 'rm -f /etc/systemd/system/pdn-display.service.d/proof-hang.conf && systemctl daemon-reload'
    say "   rolled back ${hang_back} s after the switch; ok again after ${hang_ok} s"
fi

# --- What it shows ------------------------------------------------------------------------------

in_root /opt/pdn/libexec/pdn-release status >"$logs/status.txt"
in_root journalctl -u pdn-release-check -u pdn-display -o short-precise --no-pager \
    | grep pdn-release >"$logs/journal.txt" || true
echo
echo "systemd-proof: $(in_root systemctl --version | head -n1), in $root (logs: $logs)"
echo "  first install $first: active, ok with a painted screen"
echo "  good upgrade $good: trial passed ${good_trial} s after the switch"
echo "  broken $broken (exits): rolled back after ${back} s, ok again after ${ok_again} s"
if [ -n "$hang_back" ]; then
    echo "  broken $broken (never answers): rolled back after ${hang_back} s, ok again after ${hang_ok} s"
fi
echo "  pdn-release status:"
sed 's/^/    /' "$logs/status.txt"
echo "  /x/health release: $(in_root /root/proof-state)"
echo "  each role's user reads only its own: $users; $own"
echo "  systemd-analyze security:"
sed 's/^/    /' "$logs/security.txt"
echo "  journalctl -u pdn-release-check -u pdn-display | grep pdn-release:"
sed 's/^/    /' "$logs/journal.txt"
