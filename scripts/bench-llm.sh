#!/bin/bash
# Added latency of Skiff's data plane on a streamed answer (issue 25 item 7): `skiff load --openai`
# against llama.cpp's OpenAI server (installed by tests/llm/setup.sh) direct, and against the same
# server as the InferenceService `llama` (one replica kept) through `skiff up`, at 1 and 8 concurrent
# streams, ROUNDS rounds each (2), alternating; prints TTFT and inter-token latency of each run, then
# the medians over the rounds and what the data plane adds to them.
#
#   scripts/bench-llm.sh                  # binaries from target/release (cargo build --release first)
#   BIN=target/debug scripts/bench-llm.sh
#
# Ports 38181 (skiff up), 38191 (its admin) and 38201 (the direct server) unless HTTP_PORT,
# ADMIN_PORT and DIRECT_PORT say otherwise; DURATION (10s) per run, MAX_TOKENS (32) per answer.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$repo/${BIN:-target/release}
http_port=${HTTP_PORT:-38181} admin_port=${ADMIN_PORT:-38191} direct_port=${DIRECT_PORT:-38201}
duration=${DURATION:-10s} max_tokens=${MAX_TOKENS:-32} rounds=${ROUNDS:-2}
venv=$repo/.bench/llm-venv model=$repo/.bench/llm/tiny-llama.gguf
[ -x "$venv/bin/python3" ] && [ -f "$model" ] || { echo "bench-llm.sh: run tests/llm/setup.sh first" >&2; exit 1; }
[ -x "$bin/skiff" ] || { echo "bench-llm.sh: no $bin/skiff: build it first" >&2; exit 1; }

dir=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
# shellcheck source=lib/llama-up.sh
source "$repo/scripts/lib/llama-up.sh"
llama_up 8
# The same server and arguments as the runtime's, with the test's.
"$venv/bin/python3" -m llama_cpp.server --model="$dir/models/llama/model.gguf" --model_alias=llama \
  --host=127.0.0.1 --port="$direct_port" --root_path=/openai --interrupt_requests=False --n_threads=1 --n_ctx=512 \
  >"$dir/direct.log" 2>&1 &
pids+=($!)

body='{"model":"llama","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
for port in "$http_port" "$direct_port"; do
  for _ in $(seq 120); do
    curl -sf -o /dev/null -H 'content-type: application/json' -d "$body" \
      "http://127.0.0.1:$port/openai/v1/chat/completions" && continue 2
    sleep 1
  done
  echo "bench-llm.sh: nothing answers on port $port" >&2
  exit 1
done

run() { # run NAME PORT CONCURRENCY [skiff load flags]: one line, kept in $dir/runs.jsonl too
  local name=$1 port=$2 c=$3
  shift 3
  "$bin/skiff" load "http://127.0.0.1:$port/openai/v1/chat/completions" --model llama --max-tokens "$max_tokens" \
    -c "$c" -d "$duration" --json "$@" 2>/dev/null |
    python3 -c "
import json, sys
s = json.load(sys.stdin); l = s['llm']['all']
print(json.dumps({'name': '$name', 'c': $c, 'ttft': l['ttft'], 'itl': l['itl']}), file=open('$dir/runs.jsonl', 'a'))
print('%-9s c=%s  %4d streams, %d errors  TTFT mean %7.2f p50 %7.2f p99 %7.2f ms  ITL mean %6.3f p50 %6.3f p99 %6.3f ms' % (
    '$name', $c, l['streams'], s['errors'], l['ttft']['meanMs'], l['ttft']['p50Ms'], l['ttft']['p99Ms'],
    l['itl']['meanMs'], l['itl']['p50Ms'], l['itl']['p99Ms']))"
}
for c in 1 8; do
  for round in $(seq "$rounds"); do
    if ((round % 2)); then
      run direct "$direct_port" "$c" --service llama
      run "skiff up" "$http_port" "$c" --admin "$admin_port"
    else
      run "skiff up" "$http_port" "$c" --admin "$admin_port"
      run direct "$direct_port" "$c" --service llama
    fi
  done
done
python3 - "$dir/runs.jsonl" "$rounds" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print(f"\nmedians of {sys.argv[2]} rounds (ms)  | direct | skiff up | added")
for c in (1, 8):
    for metric, key in (("TTFT p50", ("ttft", "p50Ms")), ("TTFT mean", ("ttft", "meanMs")),
                        ("ITL p50", ("itl", "p50Ms")), ("ITL mean", ("itl", "meanMs"))):
        value = lambda name: statistics.median(r[key[0]][key[1]] for r in runs if r["name"] == name and r["c"] == c)
        direct, skiff = value("direct"), value("skiff up")
        print(f"c={c} {metric:<10}            | {direct:6.3f} | {skiff:8.3f} | {skiff - direct:+6.3f}")
PY
