#!/usr/bin/env bash
# Pins the base images of deploy/docker/*.Dockerfile (the rust, python and distroless tags each
# `FROM` and `ARG BASE=` name) to the digest of each tag's multi-arch index as the registry serves
# it now, and rewrites the comment above each digest to say so. The release workflow
# (.github/workflows/release.yml) runs it before it builds, so the images it pushes are built from
# exactly the bases its pull request pins. Needs `docker buildx` and jq; no login (the bases are public).
#
#   scripts/release/pin-bases.sh VERSION     # VERSION: the release the comment names
#
# SKIFF_INSPECT: a command printing `docker buildx imagetools inspect --format '{{json .Manifest}}'`'s
# output for the reference it is given (a stand-in for tests without a registry).
set -euo pipefail
cd "$(dirname "$0")/../.."
version="${1:?usage: pin-bases.sh VERSION}"
die() { echo "pin-bases.sh: error: $*" >&2; exit 1; }

inspect() {
  if [[ -n "${SKIFF_INSPECT:-}" ]]; then
    "$SKIFF_INSPECT" "$1"
  else
    docker buildx imagetools inspect --format '{{json .Manifest}}' "$1"
  fi
}

files=(deploy/docker/*.Dockerfile)
# Every pinned reference: NAME:TAG@sha256:DIGEST after `FROM ` or `ARG BASE=`.
mapfile -t tagged < <(grep -hoE '^(FROM|ARG BASE=) *[^ ]+:[^ @]+@sha256:[0-9a-f]{64}' "${files[@]}" \
  | sed -E 's/^(FROM|ARG BASE=) *//; s/@sha256:.*//' | sort -u)
[[ ${#tagged[@]} -gt 0 ]] || die "no pinned base image in ${files[*]}"

for ref in "${tagged[@]}"; do
  manifest="$(inspect "$ref")" || die "cannot read $ref from its registry"
  digest="$(jq -r .digest <<<"$manifest")"
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "$ref: no digest in: $manifest"
  # The same line must build for both platforms: the digest must be an index that lists them.
  jq -e '[.manifests[]?.platform | "\(.os)/\(.architecture)"] | (index("linux/amd64") != null and index("linux/arm64") != null)' \
    <<<"$manifest" >/dev/null || die "$ref ($digest) is not a multi-arch index with linux/amd64 and linux/arm64"
  sed -E -i "s#([ =])${ref//./\\.}@sha256:[0-9a-f]{64}#\\1$ref@$digest#g" "${files[@]}"
  echo "$ref@$digest"
done

# The comment above each pinned reference says where its digest came from.
sed -E -i "s|^# Digest \\(multi-arch.*|# Digest of the tag's multi-arch index, pinned by .github/workflows/release.yml for $version ($(date -u +%F)).|" \
  "${files[@]}"
