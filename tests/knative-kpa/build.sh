#!/usr/bin/env bash
# Builds kpa-oracle (the .go files here, against Knative Serving's own autoscaler packages, at the version in go.mod) into
# ${SKIFF_KNATIVE_KPA_CACHE:-$HOME/.cache/skiff-knative-kpa}/bin/<key>/kpa-oracle, where <key> hashes go.mod,
# go.sum, the .go sources, this script and the Go version. A rerun with the same inputs builds nothing.
# Prints the binary's path on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SKIFF_KNATIVE_KPA_CACHE:-$HOME/.cache/skiff-knative-kpa}"

command -v go >/dev/null || { echo "build.sh: go is not on PATH; the Knative differential test needs Go (https://go.dev/dl/)" >&2; exit 1; }

key="$(
  cd "$here"
  { go version; sha256sum go.mod go.sum build.sh *.go; } | sha256sum | cut -c1-16
)"
bin="$cache/bin/$key"
if [[ -f "$bin/.complete" ]]; then
  echo "$bin/kpa-oracle"
  exit 0
fi

mkdir -p "$cache/bin"
tmp="$(mktemp -d "$cache/bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "build.sh: building kpa-oracle against $(awk '$1 == "knative.dev/serving" {print $1, $2; exit}' "$here/go.mod") into $bin" >&2
start=$SECONDS
(
  cd "$here"
  export CGO_ENABLED=0
  # reconciler_test.go checks the ported reconciler rules against Knative's own scaler_test.go table.
  nice -n 10 go test -count=1 . >&2
  nice -n 10 go build -trimpath -buildvcs=false -o "$tmp/kpa-oracle" .
)
touch "$tmp/.complete"
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
# Keep the three most recent builds, drop older ones.
# shellcheck disable=SC2012 # names are hex keys
ls -1dt "$cache"/bin/*/ 2>/dev/null | tail -n +4 | xargs -r rm -rf
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$bin/kpa-oracle"
