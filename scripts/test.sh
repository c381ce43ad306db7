#!/usr/bin/env bash
# The project's test command: installs what the tests need (scripts/setup.sh without the release
# build), checks formatting and lints, runs every unit and integration test, then the end-to-end
# tests on a real local Kubernetes control plane (tests/cluster; its Go build, with the real node's
# kubelet, kube-proxy, CoreDNS and kube-router, is cached in ~/.cache/skiff-cluster, about 30 minutes
# the first time), all on the real node of scripts/local-cluster.sh (the kubelet, containerd and
# runc, kube-proxy, CoreDNS, kube-router enforcing NetworkPolicies; Skiff's images built from
# deploy/docker/ with buildah on a Debian base made by mmdebstrap, cached in ~/.cache/skiff-images):
# the operator's (its controllers on the host, the model pods on the node), models from real stores
# through the node cache (e2e-storage), the burst at zero that must hold its peak in panic mode for
# a stable window (e2e-burst), the serverless one (scale from and to zero, scale out, canary, custom
# containers, transformer by DNS, no loss through kills, deletion), KServe's autoscaler classes
# (e2e-classes), KServe's runtimes and an LLM's OpenAI streams with their model servers as images
# (e2e-runtimes), the web app's (headless Chromium as a non-admin user: listing, 403s, CSRF,
# create, logs) and e2e-node (Pod Security restricted, NetworkPolicies from another namespace, the
# transformer by DNS, uid 65532).
#
# SKIFF_SKIP_CLUSTER=1 stops after the Rust tests (for quick local iterations; CI never sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
# Everything is built once here: incremental caches would only take disk (9 GB of a fresh clone's
# target/ at 0a0fbb5; with full debug info, 31 GB in all filled CI's disk at stop 29).
export CARGO_INCREMENTAL=0
# Where the time goes: each step's wall time, printed at the end (on a failure, up to it).
times=()
step() {
  local start=$SECONDS
  "$@"
  times+=("$(printf '%6d s  %s' $((SECONDS - start)) "$*")")
}
print_times() {
  printf '\nscripts/test.sh: where the time went\n'
  printf '%s\n' "${times[@]}"
  printf '%6d s  in all\n' "$SECONDS"
}
trap print_times EXIT
SKIFF_SKIP_BUILD=1 step ./scripts/setup.sh
# KServe's Python SDK (and ONNX Runtime for Python), for the conformance tests of its clients;
# KServe's storage package and huggingface_hub, whose real client checks tests/stores/hf_hub.py;
# NVIDIA's tritonclient (tests/conformance/triton_clients.py); and stand-ins for KServe's
# sklearnserver, xgbserver and lgbserver on the kserve package, which skiff up's built-in image
# map runs (cli/tests/kserve_runtimes.rs, tests/cluster/e2e-runtimes.sh).
PEERS="kserve kserve-storage triton kserve-runtimes" step bench/peers/setup.sh
# NVIDIA's perf_analyzer (PyPI wheel; on a glibc older than 2.38 it runs through Debian 13's libc,
# downloaded into .bench/glibc): cli/tests/perf_analyzer.rs runs it over HTTP and gRPC.
step scripts/perf-analyzer.sh --install
# The real LLM server cli/tests/llm.rs and tests/cluster/e2e-runtimes.sh run on CPU: llama.cpp's
# OpenAI-compatible server (llama-cpp-python[server] from PyPI, built from source once per machine
# and cached as a wheel in ~/.cache/skiff-llm, 11 minutes of CPU the first time) and a tiny
# random-weight GGUF model it writes, in .bench/.
step tests/llm/setup.sh
# The real stores the model fetcher's tests start: MinIO and fake-gcs-server built from their Go
# modules (cached in ~/.cache/skiff-stores; about 7 minutes on 2 cores the first time).
step tests/stores/build.sh >/dev/null
# shellcheck source=/dev/null
source .ort/env
step cargo fmt --all -- --check
step cargo clippy --workspace --all-targets -- -D warnings
step cargo test --workspace
# tests/stores/hf_hub.py (the fetcher's Hub in the tests) has the Hub's layout: the real
# huggingface_hub client downloads from it.
step .bench/kserve-storage-venv/bin/python tests/stores/test_hf_hub.py
# replay.py (which the burst tests use) against journals the cluster recorded; its oracle was built
# by the differential test above.
step python3 tests/knative-kpa/test_replay.py
# No two modules of any crate import each other in a circle (test-only modules excepted; issue 21
# broke the server's and the router's, issue 35 those of api, cli and operator), nor
# the modules of `skiff up` (cli/src/standalone).
step python3 tests/arch/module_cycles.py */src cli/src/standalone
# The release workflow, which runs only on GitHub: actionlint built from its Go module (cached in
# ~/.cache/skiff-tools; about 30 s the first time), with shellcheck on its run: blocks.
step scripts/actionlint.sh

if [[ "${SKIFF_SKIP_CLUSTER:-0}" == 1 ]]; then
  echo "SKIFF_SKIP_CLUSTER=1: the cluster end-to-end tests did not run"
  exit 0
fi
for tool in go kubectl; do
  command -v "$tool" >/dev/null || { echo "the cluster end-to-end tests need $tool on PATH"; exit 1; }
done
# One build of every binary the e2e scripts run (building one package alone would resolve features
# differently and rebuild shared dependencies).
step cargo build --workspace --quiet
export SKIFF_E2E_NO_BUILD=1
if [[ "$(id -u)" == 0 ]]; then
  step tests/cluster/e2e-operator.sh
  step tests/cluster/e2e-serverless.sh
  step tests/cluster/e2e-burst.sh
  step tests/cluster/e2e-classes.sh
  step tests/cluster/e2e-runtimes.sh
  step tests/cluster/e2e-storage.sh
  step tests/cluster/e2e-web.sh
  step tests/cluster/e2e-node.sh
else
  # A node needs root (containerd, iptables); without it the operator is tested without a node.
  echo "not root: no node can run pods here; the operator e2e runs without a node, the other e2e scripts do not run"
  SKIFF_E2E_NODE=0 step tests/cluster/e2e-operator.sh
fi
