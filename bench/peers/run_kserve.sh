#!/usr/bin/env bash
# Start the KServe peer: bench/peers/run_kserve.sh PORT MODEL_DIR
# Serves MODEL_DIR/model.onnx as model "iris" on 127.0.0.1:PORT (V1 + V2 REST).
# gRPC (V2, on loopback too: kserve_onnx.py re-points it) is off by default; set
# KSERVE_GRPC_PORT to serve it there, or KSERVE_GRPC=1 for PORT+1. Extra
# arguments go to kserve.
# Needs bench/peers/setup.sh to have been run. Execs, so the PID is the server's.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 PORT MODEL_DIR [extra kserve args...]" >&2
  exit 2
fi
port=$1
model_dir=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${KSERVE_VENV:-$root/.bench/kserve-venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "run_kserve.sh: no venv at $venv; run bench/peers/setup.sh first" >&2
  exit 1
fi
if [ -n "${KSERVE_GRPC_PORT:-}" ]; then
  grpc_args=(--grpc_port "$KSERVE_GRPC_PORT")
elif [ "${KSERVE_GRPC:-0}" = "1" ]; then
  grpc_args=(--grpc_port "$((port + 1))")
else
  grpc_args=(--enable_grpc false)
fi
export SKIFF_PEER_HOST=${SKIFF_PEER_HOST:-127.0.0.1}
exec "$venv/bin/python" "$here/kserve_onnx.py" \
  --model_name "${MODEL_NAME:-iris}" --model_dir "$model_dir" \
  --http_port "$port" "${grpc_args[@]}" "$@"
