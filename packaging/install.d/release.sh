# shellcheck shell=bash
# A release (install.sh's 'venv' step): the project with a venv of its own in
# /opt/pdn/releases/<version>-<hash>, at the lock file's versions, checked before anything
# else changes, then switched to through packaging/pdn-release (a display on trial), the old
# ones pruned; an install from before releases moved into one first. Sourced by install.sh; it
# only defines functions and the RELEASE_NAME and RELEASE_VERSION it fills in.

# The lock file: constraints.txt, the same versions on every machine.
constraints_for() {
    # shellcheck disable=SC2154 # install.sh sets script_dir and source_dir
    local lock="$source_dir/constraints.txt"
    [ -f "$lock" ] || die "no $lock: the lock file belongs next to pyproject.toml"
    echo "$lock"
}

# Each version goes into a directory of its own, /opt/pdn/releases/<version>-<hash>, with its own
# venv and start wrapper; the units run /opt/pdn/current, a link switched in one rename
# (packaging/pdn-release). <hash>: the first 12 hex digits of a SHA-256 over what decides the
# venv's content: the wheel file (--wheel) or the package's source files of the checkout
# (pyproject.toml and every file under player/, server/ and cds/, by path and content), the lock
# file, the PySide6 requirement and the extra. The same install run twice reuses its release.

RELEASE_NAME=""    # made by install_release, switched to by switch_release
RELEASE_VERSION="" # its version

# The package's version: from the wheel's file name, or the checkout's pyproject.toml.
source_version() {
    if [ -n "$WHEEL" ]; then
        basename "$WHEEL" | awk -F- '{print $2}'
    else
        sed -n 's/^version[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$source_dir/pyproject.toml" | head -n1
    fi
}

# What the release's hash is taken over (see above), on stdout.
release_inputs() {
    local constraints=$1 requirement=$2 extra=$3
    if [ -n "$WHEEL" ]; then
        sha256sum <"$WHEEL"
    else
        (cd "$source_dir" && find pyproject.toml player server cds -type f \
            ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z \
            | xargs -0 sha256sum)
    fi
    sha256sum <"$constraints"
    printf '%s\n' "$requirement" "$extra"
}

# Moves an install from before releases (the project in /opt/pdn/venv, installed in place) into
# releases/<version>-legacy, with the start wrapper it ran with, and makes it current: it is the
# release to go back to. /opt/pdn/venv stays as a link to it, since its scripts name that path.
migrate_legacy_venv() {
    local venv="$ROOT$PREFIX/venv" version name dir
    [ -d "$venv" ] && [ ! -L "$venv" ] || return 0
    version=$("$venv/bin/pdn" --version 2>/dev/null | awk '{print $NF}') || true
    name="${version:-unknown}-legacy"
    dir="$ROOT$PREFIX/releases/$name"
    rm -rf "$dir"
    install -d -m 0755 "$dir/libexec"
    mv "$venv" "$dir/venv"
    ln -s "releases/$name/venv" "$venv"
    # Its units name /opt/pdn/libexec/pdn-display-start until this run replaces them.
    if [ -f "$ROOT$PREFIX/libexec/pdn-display-start" ] && [ ! -L "$ROOT$PREFIX/libexec/pdn-display-start" ]; then
        mv "$ROOT$PREFIX/libexec/pdn-display-start" "$dir/libexec/pdn-display-start"
        ln -s ../current/libexec/pdn-display-start "$ROOT$PREFIX/libexec/pdn-display-start"
    fi
    printf 'version=%s\nsource=%s\n' "${version:-unknown}" "the in-place venv of an older install.sh" >"$dir/RELEASE"
    touch "$dir/.complete"
    link_release "$name"
    did "moved the install in $PREFIX/venv (pdn ${version:-unknown}) to the release $name"
}

# The command of the current release: /opt/pdn/bin/pdn (the units') and /usr/local/bin/pdn.
stable_links() {
    mkdir -p "$ROOT$PREFIX/bin" "$ROOT/usr/local/bin"
    ln -sfn ../current/venv/bin/pdn "$ROOT$PREFIX/bin/pdn"
    ln -sfn "$PREFIX/bin/pdn" "$ROOT/usr/local/bin/pdn"
}

# 'current' set for the first time (no trial: there is nothing to go back to).
link_release() {
    # shellcheck disable=SC2154 # install.sh sets script_dir and source_dir
    PDN_ROOT=$ROOT bash "$script_dir/pdn-release" switch "$1" || die "cannot switch to $1"
    stable_links
}

# A release's venv with the lock's pip. From a wheelhouse, pip comes straight from the lock's
# pip wheel there (a venv without pip, then that wheel's pip puts itself in): ensurepip's own
# pip would only be replaced, and it takes as long to install as the lock's.
create_venv() {
    local python=$1 venv=$2 constraints=$3 locked wheel
    if [ -z "$WHEELHOUSE" ]; then
        "$python" -m venv "$venv" || die "cannot create $venv (apt-get install python3-venv)"
        "$venv/bin/python" -m pip install -q -c "$constraints" "pip" \
            || die "pip could not install the locked pip"
        return 0
    fi
    locked=$(sed -n 's/^pip==\([^[:space:]]*\).*/\1/p' "$constraints" | head -n1)
    wheel="$WHEELHOUSE/pip-$locked-py3-none-any.whl"
    if [ -z "$locked" ] || [ ! -f "$wheel" ]; then
        die "--wheelhouse: $WHEELHOUSE has no pip-${locked:-?}-py3-none-any.whl, the lock's pip"
    fi
    "$python" -m venv --without-pip "$venv" || die "cannot create $venv (apt-get install python3-venv)"
    "$venv/bin/python" "$wheel/pip" install -q --no-index --find-links "$WHEELHOUSE" \
        -c "$constraints" "pip" || die "pip could not install the locked pip from $wheel"
}

install_release() {
    local python requirement="" glibc arch source constraints target extra="" hash dir venv
    local from_index=()
    local display=0
    wants_service display && display=1
    migrate_legacy_venv
    arch=$(machine_arch)
    glibc=$(glibc_version)
    if [ "$display" = 1 ]; then
        requirement=$(pyside6_requirement "$arch" "$glibc") || die "cannot install PySide6 here"
        extra=display
    fi
    python=$(choose_python) || die "no Python 3.11 to 3.13 found (on Debian: apt-get install python3)"
    source=${WHEEL:-$source_dir}
    constraints=$(constraints_for)
    # The display role takes the 'display' extra (PySide6); the other roles need no Qt.
    target=$source
    if [ "$display" = 1 ]; then target="${source}[display]"; fi
    RELEASE_VERSION=$(source_version)
    [ -n "$RELEASE_VERSION" ] || die "cannot tell the version of $source"
    hash=$(release_inputs "$constraints" "$requirement" "$extra" | sha256sum | cut -c1-12)
    RELEASE_NAME="$RELEASE_VERSION-$hash"
    dir="$ROOT$PREFIX/releases/$RELEASE_NAME"
    venv="$dir/venv"
    if [ -f "$dir/.complete" ]; then
        say "release $RELEASE_NAME is installed already (the same source, lock file and extra)"
        if [ "$constraints" != "$source_dir/constraints.txt" ]; then rm -f "$constraints"; fi
        return 0
    fi
    say "machine: $arch, glibc $glibc, $("$python" --version 2>&1); ${requirement:+PySide6: $requirement; }installing $target with $(basename "$constraints")${WHEELHOUSE:+ from the wheels in $WHEELHOUSE} into $PREFIX/releases/$RELEASE_NAME"
    # A half-made release (an earlier run stopped, or this one fails) is removed: 'current' is
    # switched only to a release whose every check passed.
    rm -rf "$dir"
    # shellcheck disable=SC2064 # the path now: the trap outlives this function's variables
    trap "rm -rf $(printf %q "$dir")" EXIT
    install -d -m 0755 "$dir"
    # Every version comes from the lock file: a box installed today gets what one installed last
    # month got (no --upgrade to whatever is newest). pip itself is locked too.
    create_venv "$python" "$venv" "$constraints"
    # Tests: a site-packages whose packages the new venv reuses instead of downloading them.
    if [ -n "${PDN_INSTALL_SITE_PACKAGES:-}" ]; then
        echo "$PDN_INSTALL_SITE_PACKAGES" \
            >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/pdn-reuse.pth"
    fi
    if [ -n "$WHEELHOUSE" ]; then from_index=(--no-index --find-links "$WHEELHOUSE"); fi
    "$venv/bin/python" -m pip install -q "${from_index[@]}" -c "$constraints" "$target" ${requirement:+"$requirement"} \
        || die "pip could not install $target${requirement:+ with $requirement} (constraints: $constraints); the current release is unchanged"
    if [ "$constraints" != "$source_dir/constraints.txt" ]; then rm -f "$constraints"; fi
    check_release "$venv"
    if [ "$display" = 1 ]; then check_webengine "$venv"; fi
    install -d -m 0755 "$dir/libexec"
    install -m 0755 "$script_dir/pdn-display-start" "$dir/libexec/pdn-display-start"
    printf 'version=%s\nhash=%s\nsource=%s\nextra=%s\ninstalled=%s\n' "$RELEASE_VERSION" "$hash" \
        "$(basename "$source")" "$extra" "$(date -u +%FT%TZ)" >"$dir/RELEASE"
    sync -f "$dir/RELEASE" 2>/dev/null || sync
    touch "$dir/.complete"
    trap - EXIT
    if [ "$display" = 1 ]; then
        did "installed pdn $RELEASE_VERSION with $("$venv/bin/python" -c 'import PySide6; print("PySide6", PySide6.__version__)') into $PREFIX/releases/$RELEASE_NAME"
    else
        did "installed pdn $RELEASE_VERSION (no Qt: not a display) into $PREFIX/releases/$RELEASE_NAME"
    fi
}

# The new release must run before it is switched to: its packages import, and pdn --version
# names the version that was meant.
check_release() {
    local venv=$1 output
    if ! output=$(cd / && "$venv/bin/python" -c 'import server.cli, player.config, cds' 2>&1); then
        die "the new release does not import: ${output##*$'\n'}; the current release is unchanged"
    fi
    if ! output=$(cd / && "$venv/bin/pdn" --version 2>&1) || [ "$output" != "pdn $RELEASE_VERSION" ]; then
        die "the new release's 'pdn --version' said '${output##*$'\n'}', not 'pdn $RELEASE_VERSION'; the current release is unchanged"
    fi
}

# Switches 'current' to the release just installed, and prunes old ones. A display on an
# upgrade is on trial: pdn-release rolls it back unless it reports healthy in time.
switch_release() {
    local trial=()
    [ -n "$RELEASE_NAME" ] || return 0
    if wants_service display && [ -e "$ROOT$PREFIX/current" ]; then trial=(--trial); fi
    PDN_ROOT=$ROOT bash "$ROOT$PREFIX/libexec/pdn-release" switch "$RELEASE_NAME" "${trial[@]}" \
        || die "cannot switch to $RELEASE_NAME"
    stable_links
    PDN_ROOT=$ROOT bash "$ROOT$PREFIX/libexec/pdn-release" prune || warn "could not remove old releases"
    did "current release: $RELEASE_NAME${trial:+ (on trial: rolled back unless the display reports healthy within 5 minutes)}"
}

# The chosen wheels must carry Qt WebEngine, and its libraries must load on this machine, for
# the user the service runs as.
check_webengine() {
    local venv=$1 output as_user=()
    if [ -z "$ROOT" ] && getent passwd "$PDN_USER" >/dev/null; then
        as_user=(runuser -u "$PDN_USER" --)
    fi
    if ! output=$(cd / && "${as_user[@]}" env QT_QPA_PLATFORM=offscreen "$venv/bin/python" -c \
        'import PySide6.QtWebEngineCore, PySide6.QtWebEngineQuick, PySide6.QtQuick' 2>&1); then
        die "PySide6 in $venv lacks Qt WebEngine or a library it needs${as_user:+ (as $PDN_USER)}: ${output##*$'\n'}"
    fi
    did "checked: PySide6.QtWebEngineQuick imports${as_user:+ as $PDN_USER}"
}
