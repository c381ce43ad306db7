#!/usr/bin/env bash
# Builds the local stand-in for gcr.io/distroless/cc-debian12:nonroot, the base of Skiff's runtime
# images, from Debian's packages the way a distro does: a bookworm root file system made by
# mmdebstrap from libc6, libstdc++6 and ca-certificates (and what they depend on), with the
# non-root user 65532 (nonroot) and distroless's layout (/home/nonroot, /tmp 1777).
#
#   images/base.sh            # the base of Skiff's images
#   images/base.sh python     # the same plus Debian's python3: the test pods that KServe users run
#                             # as custom containers (the transformer, the explainer, a web server)
#
# Cached as a tar under ${SKIFF_IMAGES_CACHE:-$HOME/.cache/skiff-images}/<flavour>-<key>.tar, <key>
# hashing this script; a rerun with the same script builds nothing. Prints the tar's path on
# stdout. Needs root.
set -euo pipefail

cache="${SKIFF_IMAGES_CACHE:-$HOME/.cache/skiff-images}"
suite=bookworm
mirror="${SKIFF_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
flavour="${1:-base}"
case "$flavour" in
  base) packages=libc6,libstdc++6,ca-certificates ;;
  python) packages=libc6,libstdc++6,ca-certificates,python3 ;;
  *) echo "base.sh: unknown flavour '$flavour' (base or python)" >&2; exit 2 ;;
esac
key="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
out="$cache/$flavour-$key.tar"
if [[ -f "$out" ]]; then
  echo "$out"
  exit 0
fi
command -v mmdebstrap >/dev/null || { echo "base.sh: mmdebstrap not found (scripts/setup.sh --node installs it)" >&2; exit 1; }
mkdir -p "$cache"
tmp="$(mktemp "$cache/.$flavour.XXXXXX")"
root="$(mktemp -d)"
trap 'rm -rf "$tmp" "$root"' EXIT
start=$SECONDS
# extract: unpack the packages without running their maintainer scripts (there is no shell in the
# image to run them with); the lines below do on the host what those scripts and distroless's
# build do.
nice -n 10 mmdebstrap --quiet --variant=extract --include="$packages" --format=directory \
  "$suite" "$root" "$mirror"
mkdir -p "$root/etc/ssl/certs" "$root/home/nonroot" "$root/root" "$root/tmp"
find "$root/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | xargs cat >"$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$root/etc/group"
chown 65532:65532 "$root/home/nonroot"
chmod 700 "$root/root"
chmod 1777 "$root/tmp"
rm -rf "$root"/usr/share/{doc,man,locale,info} "$root"/var/cache/apt "$root"/var/lib/apt/lists "$root"/etc/apt
tar --numeric-owner --sort=name -C "$root" -cf "$tmp" .
mv "$tmp" "$out"
rm -rf "$root"
trap - EXIT
# Keep the newest two of this flavour (other checkouts may share this cache).
# shellcheck disable=SC2012 # names are hex keys
ls -1t "$cache/$flavour"-*.tar 2>/dev/null | tail -n +3 | xargs -r rm -f
echo "base.sh: built $out in $((SECONDS - start))s" >&2
echo "$out"
