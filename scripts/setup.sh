#!/usr/bin/env bash
# Installs what Skiff needs on a fresh Debian machine with Rust and Python: system packages
# (cmake, procps, curl, iproute2 for the real node's network, chromium, chromium-driver
# and prometheus for the web app's tests, and the real node's: mmdebstrap, buildah, containerd,
# runc, containernetworking-plugins, iptables, conntrack, ipset; shellcheck, which
# scripts/actionlint.sh has check the workflows' run: blocks),
# ONNX Runtime's shared library (from the onnxruntime wheel on PyPI, into .ort/; pip checks the
# wheel against the SHA-256 hashes in scripts/onnxruntime-requirements.txt), and the release
# binaries. Idempotent. The binaries find the library in .ort/ themselves; `source .ort/env` sets
# ORT_DYLIB_PATH for tools that need it named (the cluster scripts pass it to pods).
set -euo pipefail
cd "$(dirname "$0")/.."

ORT_VERSION=1.31.1
ORT_REQUIREMENTS=scripts/onnxruntime-requirements.txt
ORT_LIB="$PWD/.ort/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION"

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v pgrep >/dev/null || missing+=(procps)
command -v curl >/dev/null || missing+=(curl)
command -v ip >/dev/null || missing+=(iproute2)
# The models web app's tests: a real headless browser and a real Prometheus.
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v prometheus >/dev/null || missing+=(prometheus)
# The real node of tests/cluster/e2e-node.sh: its images (mmdebstrap for the base, buildah for the
# Dockerfiles), containerd with runc, the CNI plugins, what kube-proxy runs (iptables, conntrack)
# and what kube-router's firewall runs (ipset).
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v buildah >/dev/null || missing+=(buildah)
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v conntrack >/dev/null || missing+=(conntrack)
command -v ipset >/dev/null || missing+=(ipset)
# scripts/actionlint.sh: actionlint runs shellcheck on each `run:` block of .github/workflows/.
command -v shellcheck >/dev/null || missing+=(shellcheck)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -f "$ORT_LIB" ]; then
  # The requirements file pins the version and the hash of every Linux wheel of it.
  if ! grep -q "^onnxruntime==$ORT_VERSION " "$ORT_REQUIREMENTS"; then
    echo "setup.sh: $ORT_REQUIREMENTS does not pin onnxruntime==$ORT_VERSION" >&2
    exit 1
  fi
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --require-hashes --target .ort -r "$ORT_REQUIREMENTS"
fi
echo "export ORT_DYLIB_PATH=$ORT_LIB" > .ort/env
if [ "${SKIFF_SKIP_BUILD:-}" != 1 ]; then
  cargo build --release --bins
fi
echo "setup done: ONNX Runtime $ORT_VERSION at $ORT_LIB"
