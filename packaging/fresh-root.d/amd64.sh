# shellcheck shell=bash
# The README's two commands, each proved in a root of its own (fresh-root.sh on amd64):
# 'bash packaging/dev.sh display', started, checked until GET / and /x/health answer, sent
# videos (tests/smoke/play_videos.py) and stopped with nothing left; 'bash packaging/dev.sh
# test', run to its end. They fill in DISPLAY_UP, VIDEOS_PLAYED and TEST_TIME for the summary.
# Sourced by fresh-root.sh; it only defines functions.

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

# shellcheck disable=SC2153,SC2034 # PORT is fresh-root.sh's --port; VIDEOS_PLAYED its summary's
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
    # Videos as a user would try them: an H.264 MP4, an HEVC MP4 and a VP9 WebM
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
    # SIGTERM to pdn itself, as systemd or Ctrl-C would stop it; dev.sh then ends its Xvfb.
    stop_display "$root" "$pid" 30
    wait "$pid" 2>/dev/null || true
    STARTED=()
    # Xvfb and the web engine's helpers end too.
    nothing_left_in "$(readlink -f "$root")" 10 \
        || die "processes left in the display root 10 s after it stopped"
    say "display stopped $STOPPED_AFTER s after SIGTERM"
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
