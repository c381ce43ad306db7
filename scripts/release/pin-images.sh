#!/usr/bin/env bash
# Pins Skiff's released images by digest in deploy/ and the Helm chart (the release workflow,
# .github/workflows/release.yml, runs it after it pushed them): every reference to
# ghcr.io/skiff-serving/<image> in deploy/'s manifests becomes <image>:VERSION@sha256:…, and the
# chart gets version and appVersion VERSION and the digests in values.yaml's imageDigests.
#
#   scripts/release/pin-images.sh VERSION DIR   # DIR holds one file per image, named after it
#                                               # (skiff-router, ...), holding its index digest
set -euo pipefail
cd "$(dirname "$0")/../.."
version="${1:?usage: pin-images.sh VERSION DIR}"
dir="${2:?usage: pin-images.sh VERSION DIR}"
registry=ghcr.io/skiff-serving
chart=deploy/helm/skiff
die() { echo "pin-images.sh: error: $*" >&2; exit 1; }

[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "VERSION $version is not X.Y.Z[-pre]"
mapfile -t manifests < <(grep -rlF "$registry/" deploy --include='*.yaml' --exclude-dir=helm | sort)
[[ ${#manifests[@]} -gt 0 ]] || die "no manifest in deploy/ names $registry"

digests=()
for file in "$dir"/*; do
  image="${file##*/}"
  digest="$(<"$file")"
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "$file: not a sha256 digest: $digest"
  # NAME[:TAG][@DIGEST] up to a quote, a comma, a bracket, a space or the end of the line.
  sed -E -i "s#(${registry//./\\.}/$image)(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?([]\"'}, ]|\$)#\\1:$version@$digest\\4#g" \
    "${manifests[@]}"
  digests+=("  $image: $digest")
done
[[ ${#digests[@]} -gt 0 ]] || die "no digest in $dir"

# Every Skiff image deploy/ names must now be one this release pushed.
if unpinned="$(grep -rnoE "${registry//./\\.}/[a-z0-9-]+(:[A-Za-z0-9._-]+)?([]\"'}, ]|\$)" "${manifests[@]}")"; then
  die "deploy/ names images this release did not push:"$'\n'"$unpinned"
fi

# The chart: its version, the image tag it defaults to, and the digests (values.yaml's imageDigests
# block, from its line to the next line that is not indented, is replaced).
sed -E -i "s/^version: .*/version: $version/; s/^appVersion: .*/appVersion: \"$version\"/" "$chart/Chart.yaml"
block="$(printf 'imageDigests:\n'; printf '%s\n' "${digests[@]}")"
awk -v block="$block" '
  skip && /^ / { next }
  { skip = 0 }
  /^imageDigests:/ { print block; skip = 1; next }
  { print }
' "$chart/values.yaml" >"$chart/values.yaml.new"
grep -q '^imageDigests:' "$chart/values.yaml.new" || die "$chart/values.yaml has no imageDigests key"
mv "$chart/values.yaml.new" "$chart/values.yaml"
