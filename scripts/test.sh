#!/usr/bin/env bash
# The project's test command: installs what the tests need (scripts/setup.sh without the release
# build), then checks formatting and lints and runs every unit and integration test.
set -euo pipefail
cd "$(dirname "$0")/.."
SKIFF_SKIP_BUILD=1 ./scripts/setup.sh
# shellcheck source=/dev/null
source .ort/env
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
