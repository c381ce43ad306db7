#!/usr/bin/env bash
# Install the Python peers the benchmark compares Skiff with, each in its own
# venv (their dependency sets conflict):
#   .bench/kserve-venv    kserve (its own ModelServer) + onnxruntime + numpy
#   .bench/mlserver-venv  mlserver + onnxruntime + numpy
#   .bench/kserve-storage-venv  kserve-storage (KServe's storage initializer, for
#                         bench/peers/kserve_storage_fetch.py) + huggingface_hub + boto3,
#                         and onnx + onnxruntime + numpy for bench/models/gen_models.py
#                         (not in the default set: PEERS=kserve-storage)
#   .bench/kserve-runtimes-venv  kserve + scikit-learn, xgboost-cpu, lightgbm, and on its path
#                         bench/peers/kserve-runtimes: stand-ins for KServe's sklearnserver, xgbserver
#                         and lgbserver (not on PyPI), which skiff up's built-in image map runs as
#                         `python3 -m <module>` (not in the default set: PEERS=kserve-runtimes)
#   .bench/triton-venv    tritonclient[http,grpc] (NVIDIA's Triton clients) + numpy, for
#                         tests/conformance/triton_clients.py (not in the default set: PEERS=triton)
# Run from anywhere; paths are relative to the repository root. Idempotent: a
# venv whose stamp matches the pinned requirements is left alone.
# Dependencies are held to constraints-*.txt (a verified pip freeze) so a new
# release upstream cannot break the peers (uvloop>=0.22 breaks mlserver 1.7.1's
# inference workers, SeldonIO/MLServer#2286).
# Env: PYTHON (default python3; needs 3.10-3.12), PEERS (default "kserve mlserver").
# A peer that fails to install is reported and skipped; the script fails only
# if every requested peer failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
peers=${PEERS:-kserve mlserver}

KSERVE_REQS=(kserve==0.21.0 onnxruntime==1.31.1 numpy==2.4.6)
MLSERVER_REQS=(mlserver==1.7.1 onnxruntime==1.31.1 numpy==2.4.6 uvloop==0.21.0)
KSERVE_STORAGE_REQS=(kserve-storage==0.21.0 huggingface_hub==2.4.0 boto3==1.44.8
  onnx==1.23.2 onnxruntime==1.31.1 numpy==2.4.6)

KSERVE_RUNTIMES_REQS=(kserve==0.21.0 numpy==2.4.6 scikit-learn==1.9.1 xgboost-cpu==3.2.0 lightgbm==4.7.0
  joblib==1.6.0)

TRITON_REQS=("tritonclient[http,grpc]==2.73.0" numpy==2.4.6)

pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# install_peer NAME MIN_MINOR MAX_MINOR REQ...
install_peer() {
  local name=$1 min=$2 max=$3
  shift 3
  local venv=$root/.bench/$name-venv
  local constraints=$here/constraints-$name.txt
  local stamp_want
  stamp_want="python=$pyver $* $(sha256sum "$constraints" | cut -c1-16)"
  local minor=${pyver#3.}
  if [ "${pyver%%.*}" != 3 ] || [ "$minor" -lt "$min" ] || [ "$minor" -gt "$max" ]; then
    echo "setup.sh: skipping $name: it needs Python 3.$min-3.$max, $python is $pyver" >&2
    return 1
  fi
  if [ -f "$venv/.skiff-stamp" ] && [ "$(cat "$venv/.skiff-stamp")" = "$stamp_want" ] \
    && [ -x "$venv/bin/python" ]; then
    echo "setup.sh: $name already installed in $venv"
    return 0
  fi
  echo "setup.sh: installing $name into $venv ($*)"
  mkdir -p "$root/.bench"
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  rm -f "$venv/.skiff-stamp"
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q \
      -c "$constraints" "$@"; then
    echo "setup.sh: pip could not install $name; skipping it" >&2
    return 1
  fi
  "$venv/bin/python" -m pip check >/dev/null || {
    echo "setup.sh: $name venv has broken requirements:" >&2
    "$venv/bin/python" -m pip check >&2 || true
    return 1
  }
  echo "$stamp_want" > "$venv/.skiff-stamp"
  echo "setup.sh: $name ready"
}

# Puts bench/peers/kserve-runtimes on the kserve-runtimes venv's module path (every run: the
# checkout may have moved).
runtimes_path() {
  local site
  site=$("$root/.bench/kserve-runtimes-venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$here/kserve-runtimes" > "$site/skiff-kserve-runtimes.pth"
}

ok=0
failed=0
for peer in $peers; do
  case $peer in
    kserve) install_peer kserve 10 13 "${KSERVE_REQS[@]}" && ok=$((ok + 1)) || failed=$((failed + 1)) ;;
    mlserver) install_peer mlserver 9 12 "${MLSERVER_REQS[@]}" && ok=$((ok + 1)) || failed=$((failed + 1)) ;;
    kserve-storage) install_peer kserve-storage 10 13 "${KSERVE_STORAGE_REQS[@]}" && ok=$((ok + 1)) || failed=$((failed + 1)) ;;
    kserve-runtimes) install_peer kserve-runtimes 10 13 "${KSERVE_RUNTIMES_REQS[@]}" && runtimes_path && ok=$((ok + 1)) || failed=$((failed + 1)) ;;
    triton) install_peer triton 10 13 "${TRITON_REQS[@]}" && ok=$((ok + 1)) || failed=$((failed + 1)) ;;
    *) echo "setup.sh: unknown peer '$peer' (known: kserve mlserver kserve-storage triton kserve-runtimes)" >&2; failed=$((failed + 1)) ;;
  esac
done

if [ "$ok" -eq 0 ] && [ "$failed" -gt 0 ]; then
  echo "setup.sh: no peer could be installed" >&2
  exit 1
fi
echo "setup.sh: $ok peer(s) ready, $failed skipped"
