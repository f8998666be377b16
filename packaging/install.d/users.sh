# shellcheck shell=bash
# The roles' system users and their directories (install.sh's 'user' and 'dirs' steps): a user
# a role, the display's in the groups a screen needs; /var/lib/pdn root's with one directory a
# role, 0750 and its user's, handed over without following a link a service user planted; the
# pairings the display's user made for the others carried to them; the release state in
# /var/lib/pdn-release, root's. Sourced by install.sh; it only defines functions and SCREEN_GROUPS.

SCREEN_GROUPS=(video render input tty audio)

# Each role's user and its home (where 'pdn ctl pair', run as that user, keeps its pairings).
role_users() {
    printf '%s %s %s\n' "$PDN_USER" "$STATE_DIR/display" "PDN display" \
        "$SCHEDULER_USER" "$STATE_DIR/scheduler" "PDN scheduler" \
        "$CONTENT_USER" "$STATE_DIR/content" "PDN content server" \
        "$SENSOR_USER" "$STATE_DIR/sensor" "PDN sensors"
}

create_user() {
    local group user home comment
    if [ -n "$ROOT" ]; then
        say "would create the system users $PDN_USER (the display's), $SCHEDULER_USER, $CONTENT_USER and $SENSOR_USER, and add $PDN_USER to: ${SCREEN_GROUPS[*]} (those that exist)"
        return 0
    fi
    while read -r user home comment; do
        if ! getent passwd "$user" >/dev/null; then
            useradd --system --user-group --home-dir "$home" --no-create-home \
                --shell /usr/sbin/nologin --comment "$comment" "$user"
            did "created the system user $user"
        elif [ "$(getent passwd "$user" | cut -d: -f6)" != "$home" ]; then
            # pdn's home was /var/lib/pdn, which is root's now (the unit sets HOME anyway).
            usermod --home "$home" "$user" >/dev/null 2>&1 \
                || warn "could not set $user's home to $home"
        fi
    done < <(role_users)
    # seatd (platform cage) hands the screen to members of its group.
    local wanted=("${SCREEN_GROUPS[@]}" _seatd seat)
    for group in "${wanted[@]}"; do
        getent group "$group" >/dev/null || continue
        if ! id -nG "$PDN_USER" | tr ' ' '\n' | grep -qx "$group"; then
            usermod -aG "$group" "$PDN_USER"
            did "added $PDN_USER to the group $group"
        fi
    done
}

# /var/lib/pdn: each role's directory (and home) belongs to its user.
role_dirs() {
    printf '%s\n' display "$PDN_USER" scheduler "$SCHEDULER_USER" schedules "$SCHEDULER_USER" \
        apps "$CONTENT_USER" content "$CONTENT_USER" sensor "$SENSOR_USER"
    local dir
    for dir in "$ROOT$STATE_DIR"/sensor-*; do
        if [ -d "$dir" ] && [ ! -L "$dir" ]; then printf '%s\n' "${dir##*/}" "$SENSOR_USER"; fi
    done
    return 0
}

# Makes each role's directory in /var/lib/pdn (0750) and, on a real install, hands it with what
# is in it to its user: through descriptors opened O_NOFOLLOW (os.fwalk, lchown), so a link a
# service user planted is changed itself, never followed, even while /var/lib/pdn is still
# pdn's. Prints a line for each directory that changed hands.
own_role_dirs() {
    local python pairs=()
    python=$(choose_python) || python=python3
    mapfile -t pairs < <(role_dirs)
    "$python" -I - "$ROOT$STATE_DIR" "${ROOT:+skip}${ROOT:-own}" "${pairs[@]}" <<'PY'
import os, pwd, sys

base, own, *pairs = sys.argv[1:]
flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
parent = os.open(base, flags)
for name, user in zip(pairs[::2], pairs[1::2]):
    try:
        os.mkdir(name, 0o750, dir_fd=parent)
    except FileExistsError:
        pass
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except OSError as error:
        print(f"{base}/{name} left alone: {error.strerror} (a link?)", file=sys.stderr)
        continue
    if own == "own":
        account = pwd.getpwnam(user)
        ids = (account.pw_uid, account.pw_gid)
        info = os.fstat(fd)
        if (info.st_uid, info.st_gid) != ids:
            for _top, dirs, files, top_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                for entry in dirs + files:
                    os.chown(entry, *ids, dir_fd=top_fd, follow_symlinks=False)
            os.fchown(fd, *ids)
            print(f"{base}/{name} (and what is in it) is now {user}'s")
    os.fchmod(fd, 0o750)
    os.close(fd)
PY
}

# /var/lib/pdn is root's (0755) and holds one directory a role, 0750 and its user's: no
# service user can rename another's directory or plant a link where root or another role
# works. An upgrade hands each role's data, which was pdn's, to its user. Only while the
# display's data from pdn 0.1.0 still lies in /var/lib/pdn itself does it stay pdn's: the
# display's next start moves that data as pdn, then makes /var/lib/pdn root's (pdn-release
# started). The release state is root's own directory, /var/lib/pdn-release, outside it.
create_state_dirs() {
    local line legacy=0
    if [ -z "$ROOT" ] && [ -f "$STATE_DIR/display.db" ] && [ ! -L "$STATE_DIR/display.db" ] \
        && [ "$(stat -c %U "$STATE_DIR")" = "$PDN_USER" ]; then
        legacy=1
    fi
    install -d -m 0755 "$ROOT$STATE_DIR"
    if [ -z "$ROOT" ] && [ "$legacy" = 0 ]; then chown -h root:root "$STATE_DIR"; fi
    while IFS= read -r line; do did "$line"; done < <(own_role_dirs)
    carry_pairings
    install -d -m 0755 "$ROOT$RELEASE_STATE_DIR"
    if [ -z "$ROOT" ]; then chown -h root:root "$RELEASE_STATE_DIR"; fi
    did "created $STATE_DIR (root's; display, scheduler, schedules, apps, content, sensor: each its role's user's) and $RELEASE_STATE_DIR (root's)${ROOT:+; owners are set on a real install}"
    if [ "$legacy" = 1 ]; then
        say "$STATE_DIR stays $PDN_USER's until the display's next start has moved its data into $STATE_DIR/display"
    fi
}

# Before the roles had users of their own, a sensor or content server on this machine paired
# with displays as pdn ('pdn ctl pair' keeps the tokens in ~/.config/pdn/ctl.toml, pdn's home
# being /var/lib/pdn): each of those users gets a copy, read as pdn and written as itself, so
# root opens neither file.
carry_pairings() {
    local from="$STATE_DIR/.config/pdn/ctl.toml" user home
    [ -z "$ROOT" ] || return 0
    runuser -u "$PDN_USER" -- test -f "$from" 2>/dev/null || return 0
    for user in "$CONTENT_USER" "$SENSOR_USER"; do
        home=$(getent passwd "$user" | cut -d: -f6)
        [ -n "$home" ] || continue
        runuser -u "$user" -- test -e "$home/.config/pdn/ctl.toml" && continue
        # shellcheck disable=SC2016 # expanded by the user's shell
        runuser -u "$PDN_USER" -- cat "$from" | runuser -u "$user" -- sh -c \
            'umask 077 && mkdir -p "$1/.config/pdn" && cat >"$1/.config/pdn/ctl.toml"' sh "$home" \
            && did "copied pdn's pairings (pdn ctl pair) to $user ($home/.config/pdn/ctl.toml)"
    done
}
