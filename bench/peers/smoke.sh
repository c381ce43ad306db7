#!/usr/bin/env bash
# Smoke-test one peer: bench/peers/smoke.sh kserve|mlserver [PORT] [MODEL_DIR]
# Starts it on 127.0.0.1:PORT, waits for GET /v2/models/iris/ready == 200,
# POSTs the benchmark's V2 request, checks the iris label is 1, stops the
# server (its whole process group) and checks that nothing is left listening.
# Prints the time to ready. Exit 0 on success.
set -euo pipefail
peer=${1:?usage: $0 kserve|mlserver [PORT] [MODEL_DIR]}
port=${2:-18500}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
model_dir=${3:-$root/examples/models/iris}
case $peer in
  kserve | mlserver) ;;
  *) echo "smoke.sh: unknown peer '$peer'" >&2; exit 2 ;;
esac
log=$(mktemp "${TMPDIR:-/tmp}/skiff-peer-$peer.XXXXXX.log")
base=http://127.0.0.1:$port

start=$(date +%s.%N)
# New session, so the server and its workers share one process group whose id
# is the pid written here (setsid may fork, so $! is not reliably that pid).
pidfile=$log.pid
setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidfile" \
  "$here/run_$peer.sh" "$port" "$model_dir" >"$log" 2>&1 &
for _ in $(seq 1 50); do [ -s "$pidfile" ] && break; sleep 0.1; done
pid=$(cat "$pidfile")
stop() {
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 -- "-$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "smoke.sh: $peer ignored SIGTERM for 10 s; killing" >&2
  kill -KILL -- "-$pid" 2>/dev/null || true
}
trap stop EXIT

code=000
for _ in $(seq 1 1200); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$base/v2/models/iris/ready" || true)
  [ "$code" = 200 ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
ready=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
if [ "$code" != 200 ]; then
  echo "smoke.sh: $peer not ready (last status $code); log $log:" >&2
  tail -30 "$log" >&2
  exit 1
fi
echo "$peer ready in ${ready}s"

body='{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}'
resp=$(curl -s -w '\n%{http_code}' -H 'content-type: application/json' -d "$body" "$base/v2/models/iris/infer")
status=${resp##*$'\n'}
resp=${resp%$'\n'*}
echo "$resp"
python3 - "$status" "$resp" <<'PY'
import json, sys
status, body = sys.argv[1], json.loads(sys.argv[2])
assert status == "200", f"HTTP {status}"
assert body["model_name"] == "iris", body
outs = {o["name"]: o for o in body["outputs"]}
assert outs["label"]["datatype"] == "INT64" and outs["label"]["data"] == [1], outs["label"]
p = outs["probabilities"]
assert p["datatype"] == "FP32" and p["shape"] == [1, 3] and abs(sum(p["data"]) - 1) < 1e-4, p
PY

stop
trap - EXIT
for p in "$port" "$((port + 1))" "$((port + 2))"; do
  if ss -ltn "sport = :$p" | grep -q LISTEN; then
    echo "smoke.sh: something still listens on $p" >&2
    exit 1
  fi
done
if pgrep -g "$pid" >/dev/null 2>&1; then
  echo "smoke.sh: processes of $peer remain" >&2
  exit 1
fi
rm -f "$log" "$pidfile"
echo "$peer OK"
