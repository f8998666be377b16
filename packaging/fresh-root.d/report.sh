# shellcheck shell=bash
# What fresh-root.sh says of a run: the time of each step that passed, the table of them, the
# amd64 summary, and the cleanup at the exit, which, whatever happened, stops what the run left
# running in its roots, unmounts what it mounted, removes the roots unless --keep, and fails the
# run when something stays; for arm64 it ends with PASSED or FAILED and the steps' table.
# Sourced by fresh-root.sh; it only defines functions and STEPS.

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { s = b - a; printf "%dm%02ds (%.0f s)", s / 60, s % 60, s }'; }

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

# What the amd64 run proved, at its end.
summary() {
    say "summary (fresh $SUITE roots, as root, no screen):"
    [ -z "$DISPLAY_UP" ] || say "  bash packaging/dev.sh display: answering (GET /, /x/health) after $DISPLAY_UP, set-up included"
    [ -z "$VIDEOS_PLAYED" ] || say "  videos: H.264, HEVC and VP9 played by POST /schedule and in a CDS, no black screenshot"
    [ -z "$TEST_TIME" ] || say "  bash packaging/dev.sh test:    passed in $TEST_TIME, set-up included"
    say "logs in $LOGS"
    if [ "$KEEP" = 1 ]; then say "roots kept in $DIR"; fi
}
