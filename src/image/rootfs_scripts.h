// Shell script run during the rootfs build. It is data: its text is part of the build cache
// key, so editing it invalidates cached rootfs builds automatically.
#pragma once

namespace abox::image {

// mmdebstrap --customize-hook. Runs on the host side with the finished chroot in $1, as root
// or, when unprivileged, as root of mmdebstrap's user namespace (a subuid that cannot reach
// the user's files). It therefore takes no paths from the user's home: it writes
//  - rootfs.ext4 through the inherited, already open descriptor $ABOX_ROOTFS_FD, and
//  - everything else to /tmp/abox-out inside the chroot, which a `copy-out` special hook
//    (run by mmdebstrap outside the namespace) copies back: vmlinuz, config, modules/ (copy of
//    /lib/modules/<ver>), kernel_version, kernel_package, packages.txt.
// Steps: fetch the Debian cloud kernel with the image's own apt sources (never the host's),
// unpack it (no maintainer scripts), install its modules + depmod, create the `agent` user and
// /workspace, set hostname/hosts, record the package list, clean apt state, then build the
// ext4 with `mke2fs -d` (no loop mounts) from a non-recursive bind mount of the chroot in a
// private mount namespace, so mmdebstrap's /proc, /sys, /dev mounts and /tmp stay out.
// Size: content * 1.5 + 1 GiB, at least 2 GiB, sparse.
inline constexpr char kCustomizeHook[] = R"sh(set -eu
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
root="$1"
out="$root/tmp/abox-out"
fd="${ABOX_ROOTFS_FD:?abox: error: ABOX_ROOTFS_FD is not set}"
kpkg=linux-image-cloud-amd64
rm -rf "$out"
mkdir -p "$out"

echo "abox: downloading $kpkg"
chroot "$root" apt-get install --download-only --no-install-recommends -y -q "$kpkg"
set -- "$root"/var/cache/apt/archives/linux-image-[0-9]*-cloud-amd64_*.deb
if [ "$#" -ne 1 ] || [ ! -f "$1" ]; then
  echo "abox: error: expected exactly one kernel package, found: $*" >&2
  exit 1
fi
deb="/var/cache/apt/archives/$(basename "$1")"
kname=$(chroot "$root" dpkg-deb --field "$deb" Package)
kver=${kname#linux-image-}
chroot "$root" dpkg-deb --field "$deb" Version > "$out/kernel_package"
printf '%s\n' "$kver" > "$out/kernel_version"

echo "abox: unpacking kernel $kver"
rm -rf "$root/tmp/abox-kernel"
chroot "$root" dpkg-deb --extract "$deb" /tmp/abox-kernel
cp "$root/tmp/abox-kernel/boot/vmlinuz-$kver" "$out/vmlinuz"
cp "$root/tmp/abox-kernel/boot/config-$kver" "$out/config"
mkdir -p "$root/lib/modules"
rm -rf "$root/lib/modules/$kver"
mv "$root/tmp/abox-kernel/lib/modules/$kver" "$root/lib/modules/$kver"
rm -rf "$root/tmp/abox-kernel"
chroot "$root" depmod -a "$kver"
cp -R "$root/lib/modules/$kver" "$out/modules"

echo "abox: creating user agent"
chroot "$root" groupadd --gid 1000 agent
chroot "$root" useradd --uid 1000 --gid 1000 --home-dir /home/agent --create-home \
  --shell /bin/bash --comment "abox agent" agent
mkdir -p "$root/workspace"
chown 1000:1000 "$root/workspace"
chmod 0755 "$root/workspace"
echo abox > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tabox\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
  > "$root/etc/hosts"
# The host's resolver config must not leak into the image; abox-guest provides DNS at run time.
rm -f "$root/etc/resolv.conf"
chroot "$root" dpkg-query --show --showformat '${Package}=${Version}\n' | LC_ALL=C sort \
  > "$out/packages.txt"

# What mmdebstrap's own cleanup would do after this hook, done now because the image is
# taken now: apt caches and lists, logs, machine-id. Its temporary apt config is moved aside
# for the snapshot and put back for mmdebstrap to delete.
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root/var/cache/ldconfig/aux-cache" \
  "$root/var/log/dpkg.log" "$root/var/log/alternatives.log" "$root"/var/log/apt/*
if [ -e "$root/etc/machine-id" ]; then : > "$root/etc/machine-id"; fi
mv "$root/etc/apt/apt.conf.d/00mmdebstrap" "$root/tmp/abox-00mmdebstrap"

echo "abox: writing rootfs.ext4"
mnt=$(mktemp -d)
unshare --mount --propagation private sh -euc '
  mount --bind "$1" "$2"
  mount -t tmpfs -o mode=1777 tmpfs "$2/tmp"
  used_kib=$(du -skx "$2" | cut -f1)
  size_kib=$((used_kib * 3 / 2 + 1048576))
  if [ "$size_kib" -lt 2097152 ]; then size_kib=2097152; fi
  echo "abox: rootfs content ${used_kib} KiB, image ${size_kib} KiB"
  mke2fs -q -F -t ext4 -L abox-root -m 0 -E root_owner=0:0 -d "$2" "/proc/self/fd/$3" \
    "${size_kib}k"
' sh "$root" "$mnt" "$fd"
rmdir "$mnt"
mv "$root/tmp/abox-00mmdebstrap" "$root/etc/apt/apt.conf.d/00mmdebstrap"
echo "abox: customize hook done"
)sh";

}  // namespace abox::image
