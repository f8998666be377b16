# shellcheck shell=bash
# What an emulated Raspberry Pi needs around install.sh (fresh-root.sh --arch arm64): arm64
# programs run through qemu-user and binfmt_misc; what install.sh could change, to show that a
# refusal changed nothing; the display started as pdn-display.service starts it (no systemd
# runs in a chroot); its config edited for the emulator; an Xvfb in the root; the page and the
# H.264 video it is sent. Sourced by fresh-root.sh; it only defines functions.

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

# The directories the unit $2 asks for with KEY= ($3: StateDirectory or RuntimeDirectory,
# under $4) made in the root $1 as systemd makes them, the owner $5 (user:group) and KEY's Mode=;
# printed as the unit's process sees them, colon-separated.
unit_directories() {
    local root=$1 unit=$2 key=$3 base=$4 owner=$5 mode dir paths=""
    mode=$(unit_values "$unit" "${key}Mode" | tail -n1)
    for dir in $(unit_values "$unit" "$key"); do
        chroot "$root" install -d -m "${mode:-0755}" -o "${owner%%:*}" -g "${owner#*:}" "$base/$dir" \
            || return 1
        paths+="${paths:+:}$base/$dir"
    done
    echo "$paths"
}

# pdn-display.service's start, by hand as systemd does it (no systemd runs in a chroot): its
# ExecStart as its User and Group, in its WorkingDirectory with its UMask and Environment=
# lines, with the StateDirectory= and RuntimeDirectory= it asks for made and exported. The
# display's output goes to $2. Sets DISPLAY_PID (the process group to stop).
start_like_the_unit() {
    local root=$1 log=$2 unit=$1/etc/systemd/system/pdn-display.service
    local exec user group workdir umask state runtime environment=()
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
    state=$(unit_directories "$root" "$unit" StateDirectory /var/lib "$user:$group") \
        || die "cannot make the unit's StateDirectory= in $root"
    runtime=$(unit_directories "$root" "$unit" RuntimeDirectory /run "$user:$group") \
        || die "cannot make the unit's RuntimeDirectory= in $root"
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
# shellcheck disable=SC2034 # X_DISPLAY is for run_pi
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
