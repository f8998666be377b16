# shellcheck shell=bash
# The configuration and the secrets in /etc/pdn (install.sh's 'config' step): pdn.toml and
# services.env when they do not exist; the scheduler's operator and enrolment tokens and the
# sensors' token when none is set, each printed once by the summary; every file 0640, root's
# and readable by the group of the role that reads it, whatever the umask. Sourced by
# install.sh; it only defines functions (the tokens they make go to install.sh's
# summary in OPERATOR_TOKEN_MADE, ENROLMENT_TOKEN_MADE and SENSOR_TOKEN_MADE; CONFIG_MADE is set
# when this run wrote pdn.toml).

# A file that may hold a secret, from the file $1 (- for stdin): 0640 whatever the umask,
# root's, readable by the group of the role that reads it ($3; root: systemd alone reads it, as
# an EnvironmentFile=). Made beside its target $2 and renamed over it: never there with another
# mode or half written.
install_private_file() {
    local source=$1 target=$2 group=${3:-root} tmp
    tmp=$(mktemp "$(dirname "$target")/.pdn-install.XXXXXX")
    cat "$source" >"$tmp"
    chmod 0640 "$tmp"
    if [ -z "$ROOT" ]; then chown "root:$group" "$tmp"; fi
    mv -f "$tmp" "$target"
}

# The group that may read a file of /etc/pdn: its role's.
private_group() {
    case "${1##*/}" in
        pdn.toml) echo "$PDN_USER" ;;
        scheduler.env) echo "$SCHEDULER_USER" ;;
        content.env) echo "$CONTENT_USER" ;;
        sensor.env | sensor-*.env) echo "$SENSOR_USER" ;;
        *) echo root ;;
    esac
}

# A new display serves HTTPS. A sensor or content server on this machine pairs with it like any
# controller (pdn ctl pair, as its own user: pdn-sensor, pdn-content) and pins its certificate.
tls_line() { echo "tls = true"; }

# A random token: 32 bytes, URL-safe base64 (43 characters).
new_token() { head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'; }

# True, and said, when the secrets file $1 sets PDN_API_TOKEN already ($2: whose token, for
# the message): a role's tokens are made once and kept, upgrade after upgrade.
keeps_token() {
    local env=$1 whose=$2
    { [ -e "$env" ] && grep -q '^PDN_API_TOKEN=.' "$env"; } || return 1
    say "kept $whose in $CONFIG_DIR/${env##*/}"
}

# Rewrites the secrets file $1 for the group $2: its lines but those the pattern $3 matches
# (the keys made anew), then the lines on stdin.
rewrite_secrets() {
    local env=$1 group=$2 made=$3
    {
        if [ -e "$env" ]; then grep -v "$made" "$env" || true; fi
        cat
    } | install_private_file - "$env" "$group"
}

# The scheduler's operator token (PDN_API_TOKEN) and enrolment token (PDN_ENROLMENT_TOKEN), in
# /etc/pdn/scheduler.env (0640), made when none is set and printed this once.
# shellcheck disable=SC2034 # install.sh's summary prints the tokens it made
write_scheduler_tokens() {
    local env="$ROOT$CONFIG_DIR/scheduler.env" operator enrolment
    wants_service scheduler || return 0
    keeps_token "$env" "the scheduler's operator token" && return 0
    operator=$(new_token)
    enrolment=$(new_token)
    rewrite_secrets "$env" "$SCHEDULER_USER" '^PDN_API_TOKEN=\|^PDN_ENROLMENT_TOKEN=' <<EOF
# The scheduler's secrets (pdn-scheduler.service). Keep this file 0640.
# Operator token: schedules, assignments, groups, broadcasts, the console.
PDN_API_TOKEN=$operator
# Enrolment token: a display with scheduler_token = this is approved at once.
PDN_ENROLMENT_TOKEN=$enrolment
EOF
    did "made the scheduler's operator and enrolment tokens in $CONFIG_DIR/scheduler.env"
    OPERATOR_TOKEN_MADE=$operator
    ENROLMENT_TOKEN_MADE=$enrolment
}

# The sensors' token (PDN_API_TOKEN of every pdn-sensor@ unit) in /etc/pdn/sensor.env (0640),
# made when none is set and printed this once: a sensor takes subscriptions and readings from
# beyond this machine only with it.
# shellcheck disable=SC2034 # install.sh's summary prints the tokens it made
write_sensor_token() {
    local env="$ROOT$CONFIG_DIR/sensor.env" token
    wants_service sensor || return 0
    keeps_token "$env" "the sensors' token" && return 0
    token=$(new_token)
    rewrite_secrets "$env" "$SENSOR_USER" '^PDN_API_TOKEN=' <<EOF
# The sensors' secret (every pdn-sensor@ unit; a sensor's own file may set another).
# Keep this file 0640. Subscriptions and readings from beyond loopback need it.
PDN_API_TOKEN=$token
EOF
    did "made the sensors' token in $CONFIG_DIR/sensor.env"
    SENSOR_TOKEN_MADE=$token
}

write_config() {
    local config="$ROOT$CONFIG_DIR/pdn.toml" services="$ROOT$CONFIG_DIR/services.env" platform
    install -d -m 0755 "$ROOT$CONFIG_DIR"
    if [ -e "$config" ]; then
        say "kept the existing $CONFIG_DIR/pdn.toml (the new defaults are in $PREFIX/share/pdn.toml.example)"
        if [ -n "$PLATFORM" ] && [ "$(configured_platform)" != "$PLATFORM" ]; then
            warn "--platform $PLATFORM ignored: $CONFIG_DIR/pdn.toml says platform = \"$(configured_platform)\""
        fi
    else
        platform=$(chosen_platform)
        # shellcheck disable=SC2154 # install.sh sets script_dir and source_dir
        sed -e "s/^platform = \"auto\"/platform = \"$platform\"/" \
            -e "s/^#tls = false$/$(tls_line)/" "$script_dir/pdn.toml.example" \
            | install_private_file - "$config" "$PDN_USER"
        CONFIG_MADE=1
        did "wrote $CONFIG_DIR/pdn.toml (platform = \"$platform\", $(tls_line))"
    fi
    if [ ! -e "$services" ]; then
        local scheduler_options=""
        if one_box; then scheduler_options="\"--welcome $ONE_BOX_GROUP\""; fi
        install_private_file - "$services" <<EOF
# Addresses of the optional PDN services on this machine (pdn-scheduler, pdn-content).
# Sensors have one file each: /etc/pdn/sensor-<name>.env (see pdn-sensor@.service).
PDN_SCHEDULER_HOST=0.0.0.0
PDN_SCHEDULER_PORT=8090
PDN_CONTENT_HOST=0.0.0.0
PDN_CONTENT_PORT=8091
# Extra options, e.g. PDN_CONTENT_OPTIONS="--public-url http://content.example:8091"
PDN_SCHEDULER_OPTIONS=$scheduler_options
PDN_CONTENT_OPTIONS=
EOF
        did "wrote $CONFIG_DIR/services.env"
    fi
}

# One screen, one box (--services display,scheduler): the screen gets its own console.
one_box() { wants_service display && wants_service scheduler; }
# The group the one-box display declares, to which the scheduler assigns its first playlist
# (pdn scheduler --welcome: a picture saying where the console is).
ONE_BOX_GROUP=this-screen

# The one-box display registers with the scheduler on this machine, with the scheduler's
# enrolment token (so it is approved at once), in ONE_BOX_GROUP, at its --location (registering
# needs one; N0,E0 until the owner says). Only in a pdn.toml this run wrote: one the owner
# keeps is left as it is.
write_one_box() {
    local config="$ROOT$CONFIG_DIR/pdn.toml" env="$ROOT$CONFIG_DIR/scheduler.env"
    local services="$ROOT$CONFIG_DIR/services.env" enrolment port latitude longitude
    one_box && [ -n "$CONFIG_MADE" ] || return 0
    enrolment=$(sed -n 's/^PDN_ENROLMENT_TOKEN=//p' "$env" 2>/dev/null | tail -n1)
    port=$(sed -n 's/^PDN_SCHEDULER_PORT=\([0-9]*\).*/\1/p' "$services" 2>/dev/null | tail -n1)
    latitude=${LOCATION%%,*}
    longitude=${LOCATION#*,}
    sed -e "s|^#register = .*|register = \"http://127.0.0.1:${port:-8090}\"\ngroups = [\"$ONE_BOX_GROUP\"]|" \
        -e "s|^#scheduler_token = .*|${enrolment:+scheduler_token = \"$enrolment\"}|" \
        -e 's|^#\[location\]$|[location]|' \
        -e "s|^#latitude = .*|latitude = \"$latitude\"|" \
        -e "s|^#longitude = .*|longitude = \"$longitude\"|" "$config" \
        | install_private_file - "$config" "$PDN_USER"
    if [ -z "$enrolment" ]; then
        warn "$CONFIG_DIR/scheduler.env has no PDN_ENROLMENT_TOKEN: approve the display in the console"
    fi
    did "the display registers with the scheduler on this machine (group $ONE_BOX_GROUP, location $latitude $longitude)"
}

# Secrets at rest (ETSI EN 303 645 5.4): the config files may hold tokens, so no one but root
# and the group of the role that reads the file may read it (an upgrade moves each from the
# pdn group to its role's); a file someone loosened is tightened again, and said so.
check_private_files() {
    local file mode group
    for file in "$ROOT$CONFIG_DIR"/pdn.toml "$ROOT$CONFIG_DIR"/*.env; do
        if [ ! -f "$file" ] || [ -L "$file" ]; then continue; fi
        mode=$(stat -c %a "$file")
        if [ $((8#$mode & 8#007)) -ne 0 ] || [ $((8#$mode & 8#020)) -ne 0 ]; then
            chmod o-rwx,g-w "$file"
            warn "$file was mode $mode, readable by others: now $(stat -c %a "$file")"
        fi
        [ -z "$ROOT" ] || continue
        group=$(private_group "$file")
        if [ "$(stat -c %U:%G "$file")" != "root:$group" ]; then
            chown "root:$group" "$file"
            did "$CONFIG_DIR/${file##*/} is readable by root and the group $group only"
        fi
    done
}
