# shellcheck shell=bash
# What runs in a root: every process whose root is in it, the pid of pdn itself among them
# (natively or under qemu-user), waiting for them all to end and stopping what is left. The
# proofs check with these that a stopped display leaves nothing behind; the cleanup, that
# nothing of the run goes on running. Sourced by fresh-root.sh; it only defines functions.

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
# arguments name it too (runuser); empty when none runs.
# Natively its command line is "python3 .../bin/pdn display ..."; an arm64 one run through
# binfmt_misc shows qemu's, with the interpreter, the file and (flag P) argv[0] in front:
# "qemu-aarch64 .../python3 .../python3 .../bin/pdn display ...". So ".../bin/pdn display"
# is looked for anywhere in it, and of the processes that name it, the one started last is
# pdn: a wrapper starts before what it runs (pids say nothing of that order: they wrap).
pdn_display_pid() {
    local candidate argv found="" latest=-1 started stat i
    for candidate in $(processes_in "$1"); do
        mapfile -d '' -t argv <"/proc/$candidate/cmdline" 2>/dev/null || continue
        for ((i = 1; i + 1 < ${#argv[@]}; i++)); do
            if [[ ${argv[i]} == */bin/pdn ]] && [ "${argv[i + 1]}" = display ]; then
                # Its start time: field 22 of /proc/PID/stat, the 20th after the name's ')'.
                stat=$(cat "/proc/$candidate/stat" 2>/dev/null) || break
                started=$(awk '{ print $20 }' <<<"${stat##*) }")
                if [ "$started" -gt "$latest" ]; then
                    latest=$started
                    found=$candidate
                fi
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

# Stops the display in the root $1 as systemctl stop or Ctrl-C does, SIGTERM to pdn itself (not
# to a wrapper), and waits up to $3 seconds for the process $2 that started it to end. Sets
# STOPPED_AFTER, the seconds it took.
# shellcheck disable=SC2034 # STOPPED_AFTER is for the proof that called it
stop_display() {
    local root=$1 pid=$2 limit=$3 pdn_pid waited=0
    pdn_pid=$(pdn_display_pid "$(readlink -f "$root")")
    [ -n "$pdn_pid" ] || die "no 'pdn display' process found in $root"
    kill -TERM "$pdn_pid"
    while kill -0 "$pid" 2>/dev/null && [ $waited -lt "$limit" ]; do
        sleep 1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then die "the display did not stop within $limit s of SIGTERM"; fi
    STOPPED_AFTER=$waited
}
