# shellcheck shell=bash
# The roots fresh-root.sh proves things in: one bare Debian (debootstrap, minbase; or the
# cached tarball of one) with this machine's network settings and nothing else of it, copied
# into a root a job with a clean clone of the committed HEAD, and the file systems a chroot
# needs mounted in each (every mount recorded in MOUNTED, for the cleanup). Sourced by
# fresh-root.sh; it only defines functions.

build_base() {
    local base=$DIR/base
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "installing debootstrap"
        host_install debootstrap
    fi
    local start includes=ca-certificates tarball=""
    # ca-certificates: to carry this machine's own certificate authorities (below). systemd
    # (arm64): a Pi's OS has it, and install.sh enables its units with systemctl (no systemd
    # runs in the root, so nothing starts by itself).
    local arch_option=()  # amd64: this machine's own architecture, whatever it is
    if [ "$ARCH" = arm64 ]; then
        includes+=,systemd
        arch_option=(--arch=arm64)
    fi
    [ -z "$CACHE" ] || tarball=$CACHE/debootstrap-$SUITE-$ARCH-minbase-$includes.tar
    start=$(now)
    if [ -n "$tarball" ] && [ -f "$tarball" ]; then
        # The bare debootstrap of an earlier run, as it left it: nothing of this machine or of
        # this project is in it (both are added below, every run).
        say "unpacking the cached debootstrap $tarball (made $(date -u -r "$tarball" '+%F %H:%M UTC')) into $base"
        mkdir -p "$base"
        tar -C "$base" --numeric-owner -xpf "$tarball" || die "cannot unpack $tarball"
        BASE_HOW="unpacked from --cache (debootstrapped $(date -u -r "$tarball" '+%F %H:%M UTC'))"
    else
        say "debootstrap $SUITE $ARCH (minbase, with $includes) into $base"
        debootstrap "${arch_option[@]}" --variant=minbase --include="$includes" "$SUITE" "$base" \
            "$MIRROR" >"$LOGS/debootstrap.log" 2>&1 \
            || { tail -20 "$LOGS/debootstrap.log" >&2; die "debootstrap failed (log: $LOGS/debootstrap.log)"; }
        BASE_HOW="debootstrap"
        if [ -n "$tarball" ]; then
            mkdir -p "$CACHE"
            tar -C "$base" --numeric-owner -cpf "$tarball.part" . || die "cannot write the cache $tarball"
            mv "$tarball.part" "$tarball"
            say "cached the bare debootstrap in $tarball"
        fi
    fi
    if [ "$ARCH" = arm64 ]; then
        # As on an installed system: the release's updates and security updates too.
        printf 'deb %s %s-updates main\ndeb %s-security %s-security main\n' \
            "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" >>"$base/etc/apt/sources.list"
    fi
    # What an installed Debian has and debootstrap leaves out.
    printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$base/etc/hosts"
    echo pdn-fresh-root >"$base/etc/hostname"
    # The network settings of the machine this runs on, which a fresh machine of its kind has
    # and which are none of the project's business (lib/roots.sh). Nothing else of the machine
    # goes in.
    local carried
    carried=$(carry_network_settings "$base") || die "cannot carry this machine's network settings into $base"
    [ -z "$carried" ] || say "carried this machine's CA certificates: $carried"
    BASE_TIME=$(elapsed "$start" "$(now)")
    say "base root built in $BASE_TIME ($BASE_HOW)"
}

# A root of its own for $1 (display or test), with a clean clone of the committed HEAD.
# shellcheck disable=SC2154 # fresh-root.sh sets repo
make_root() {
    local job=$1 root=$DIR/$1
    cp -a "$DIR/base" "$root"
    git clone --quiet --no-hardlinks "$repo" "$root/root/pdn-display"
    say "$job root: clone of $(git -C "$root/root/pdn-display" log -1 --format='%h %s' | cut -c1-72)"
    mount_all "$root"
}

mount_all() {
    local root=$1
    # A machine's / is a mount point (unshare --mount changes its propagation); a chroot's is not.
    mount --bind "$root" "$root" && mount --make-private "$root" && MOUNTED+=("$root")
    mount -t proc proc "$root/proc" && MOUNTED+=("$root/proc")
    mount -t sysfs sysfs "$root/sys" && MOUNTED+=("$root/sys")
    mount --bind /dev "$root/dev" && MOUNTED+=("$root/dev")
    mkdir -p "$root/dev/pts" "$root/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" && MOUNTED+=("$root/dev/pts")
    # A /dev/shm of the root's own (Chromium's shared memory), not the machine's.
    mount -t tmpfs -o mode=1777,size=1g shm "$root/dev/shm" && MOUNTED+=("$root/dev/shm")
}
