#!/usr/bin/env bash
# The warm-path regression check: after a change to a hot path, run the benchmark that measures
# it, in release, beside its peers in the same run, and compare the ratios with the last entry in
# docs/benchmarks.md (figures, machine, command, date and load average go into a new entry there).
#
#   scripts/bench-check.sh [BASE]        # BASE: the revision to compare against (default HEAD~1)
#   scripts/bench-check.sh --list [BASE] # only print the benchmarks the change calls for
#
# Which benchmark a change calls for, by the paths it touches:
#   server/, http-shell/                     bench-server (skiff-server ÷ the bare hyper server)
#   router/, activator/, dataplane/,
#   autoscaler/, http-shell/                 bench-dataplane (the router ÷ nginx and pingora-minimal)
# http-shell/ is the HTTP stack of both. Nothing to run when the change touches neither.
set -euo pipefail
cd "$(dirname "$0")/.."

list=0
if [ "${1:-}" = --list ]; then
  list=1
  shift
fi
base=${1:-HEAD~1}
changed=$(git diff --name-only "$base" --)

benches=()
if grep -qE '^(server|http-shell)/' <<<"$changed"; then
  benches+=(bench-server)
fi
if grep -qE '^(router|activator|dataplane|autoscaler|http-shell)/' <<<"$changed"; then
  benches+=(bench-dataplane)
fi
if [ ${#benches[@]} -eq 0 ]; then
  echo "bench-check: no hot path changed since $base"
  exit 0
fi
if [ "$list" = 1 ]; then
  printf '%s\n' "${benches[@]}"
  exit 0
fi

SKIFF_SKIP_BUILD=1 ./scripts/setup.sh
cargo build --release --bins
echo "bench-check: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for bench in "${benches[@]}"; do
  case "$bench" in
    bench-server)
      target/release/bench-server --peers skiff-server,hyper-baseline --rounds 3 --duration 3 --perf-analyzer ''
      ;;
    bench-dataplane)
      command -v nginx >/dev/null || { echo "bench-check: bench-dataplane needs nginx (apt-get install nginx)" >&2; exit 1; }
      target/release/bench-dataplane --rounds 2 --duration 3 --cold-starts 3 --step-seconds 10
      ;;
  esac
done
echo "bench-check: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench-check: compare with the last entries in docs/benchmarks.md; a drop beyond the noise is a defect."
