# shellcheck shell=bash
# Debian packages on this machine: whether one is installed or can be, and installing what is
# missing. install.sh and dev.sh install what a display or the tests need; fresh-root.sh and
# systemd-proof.sh the tools they build roots with. Sourced; it only defines functions (a
# failure in host_install calls the sourcing script's die).

# (Output is captured first: grep -q closing the pipe early would fail the pipeline.)
package_installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
    [ "$status" = "install ok installed" ]
}

package_available() {
    local policy
    policy=$(apt-cache policy "$1" 2>/dev/null) || return 1
    [[ "$policy" =~ Candidate:\ [^\(] ]]
}

# The packages $@, without the ones they only recommend, from package lists read just now.
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Tools $@ a proof needs on this machine; the package lists are read again only when the
# install fails with the ones at hand (Debian's images ship without them).
host_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "$@" >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; } \
        || die "cannot install $* on this machine"
}
