# shellcheck shell=bash
# The emulated Raspberry Pi's proof (fresh-root.sh --arch arm64): install.sh as on a Pi, which
# on Bookworm must refuse a display at once and change nothing, and on Trixie installs it; then
# the locked PySide6, the video backend, the display started as its unit starts it, answering,
# paired, showing its idle page, a page and an H.264 video in screenshots, and stopping on
# SIGTERM with nothing left in the root. Each step timed (step_done). Sourced by fresh-root.sh;
# it only defines functions.

# shellcheck disable=SC2153 # PORT is fresh-root.sh's --port
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
    stop_display "$root" "$DISPLAY_PID" 120
    grep -q 'pdn.app: stopped' "$log" || die "the display ended without 'stopped' in its log ($log)"
    kill -TERM "$XVFB_PID" 2>/dev/null || true
    nothing_left_in "$(readlink -f "$root")" 30 || die "processes left in the root after the display and Xvfb stopped"
    step_done "the display stops on SIGTERM, nothing left in the root" "$start" "stopped ${STOPPED_AFTER} s after SIGTERM"
}
