#!/usr/bin/env bash
# Lints the GitHub Actions workflows in .github/workflows/ with actionlint, built from its Go module
# (the release workflow cannot run here: this is what checks it). The binary is cached in
# ${SKIFF_TOOLS_CACHE:-$HOME/.cache/skiff-tools}/actionlint-<version>/; a rerun builds nothing.
# actionlint checks the workflows' syntax, expressions, `needs:` and `${{ }}` contexts, action inputs
# and runner labels, and runs shellcheck on every `run:` block when shellcheck is installed
# (scripts/setup.sh installs Debian's).
#
#   scripts/actionlint.sh [FILE...]     # default: .github/workflows/*.yml
set -euo pipefail
cd "$(dirname "$0")/.."

version=v1.7.12
cache="${SKIFF_TOOLS_CACHE:-$HOME/.cache/skiff-tools}"
bin="$cache/actionlint-$version/actionlint"

if [[ ! -x "$bin" ]]; then
  echo "actionlint.sh: building actionlint $version from its Go module into ${bin%/*}" >&2
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.actionlint.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  start=$SECONDS
  # `go install MODULE@VERSION` builds with the module's own go.mod and go.sum, outside any module.
  GOBIN="$tmp/bin" GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod \
    nice -n 10 go install -trimpath -ldflags "-s -w" "github.com/rhysd/actionlint/cmd/actionlint@$version"
  rm -rf "${bin%/*}"
  mv "$tmp/bin" "${bin%/*}"
  echo "actionlint.sh: built in $((SECONDS - start))s" >&2
fi

if [[ $# -eq 0 ]]; then
  set -- .github/workflows/*.yml
fi
command -v shellcheck >/dev/null || echo "actionlint.sh: shellcheck not found: run: blocks are not shell-checked" >&2
"$bin" -version | head -n 1 >&2
"$bin" "$@"
echo "actionlint.sh: $# workflow file(s) clean" >&2
