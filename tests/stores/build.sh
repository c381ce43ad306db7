#!/usr/bin/env bash
# Builds the real object stores the fetcher's tests start: MinIO's server (S3)
# and fake-gcs-server (GCS), both from their Go modules at pinned versions, into
# ${SKIFF_STORES_CACHE:-$HOME/.cache/skiff-stores}/bin/<key>, where <key> hashes
# this script (which holds the versions) and the Go version.
# A rerun with the same inputs builds nothing. Prints the bin dir on stdout.
# See tests/stores/README.md for how to start each one.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SKIFF_STORES_CACHE:-$HOME/.cache/skiff-stores}"

# `go install github.com/minio/minio@latest` resolved to this pseudo-version
# (MinIO stopped tagging module releases; this is its master of 2026-02-12).
minio_version="v0.0.0-20260212201848-7aac2a2c5b7c"
fake_gcs_version="v1.56.1"

key="$(
  {
    go version
    sha256sum "$here/build.sh" | cut -d' ' -f1
  } | sha256sum | cut -c1-16
)"
bin="$cache/bin/$key"
if [[ -f "$bin/.complete" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache/bin"
tmp="$(mktemp -d "$cache/bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"

echo "build.sh: building minio@$minio_version and fake-gcs-server@$fake_gcs_version into $bin (with a cold Go cache this takes several minutes on 2 cores)" >&2
start=$SECONDS
(
  cd "$tmp"
  export CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-buildvcs=false
  # `go install pkg@version` takes one module per call.
  nice -n 10 go install -trimpath -ldflags "-s -w" "github.com/minio/minio@$minio_version"
  nice -n 10 go install -trimpath -ldflags "-s -w" "github.com/fsouza/fake-gcs-server@$fake_gcs_version"
)
"$tmp/minio" --version >/dev/null
"$tmp/fake-gcs-server" -help >/dev/null 2>&1 || [[ $? -eq 2 ]]
touch "$tmp/.complete"
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
# Keep the three most recent builds (other checkouts may share this cache), drop older ones.
# shellcheck disable=SC2012 # names are hex keys
ls -1dt "$cache"/bin/*/ 2>/dev/null | tail -n +4 | xargs -r rm -rf
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$bin"
