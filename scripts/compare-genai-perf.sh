#!/bin/bash
# `skiff load --openai` beside NVIDIA's genai-perf (issue 25 item 6): both clients stream chat
# completions from the same warm llama.cpp server (the InferenceService `llama`, one replica kept,
# examples/runtimes/llama-cpp-server.yaml with the tiny model of tests/llm/setup.sh) through
# `skiff up`, with the same prompts (those genai-perf generated), CONCURRENCY streams and MAX_TOKENS
# per answer; prints one table: TTFT, inter-token latency, output tokens per answer, total tokens/s.
# ROUNDS rounds (1), alternating the order: genai-perf first in odd rounds, `skiff load` first in even.
#
#   tests/llm/setup.sh                          # once: the LLM server and the tiny model
#   scripts/compare-genai-perf.sh               # binaries from target/release (cargo build --release)
#   ROUNDS=2 BIN=target/debug scripts/compare-genai-perf.sh
#
# genai-perf (PyPI, pinned below) is installed into .bench/genai-perf-venv on first use, and
# perf_analyzer, which it runs, by scripts/perf-analyzer.sh. Nothing is downloaded at run time: the
# tokenizer genai-perf counts tokens with is written into the temporary directory from the model's own
# vocabulary (tests/llm/tiny_gguf.py: three control tokens and the 256 bytes), with the `tokenizers`
# package of genai-perf's venv.
#
# Ports 38181 (skiff up) and 38191 (its admin) unless HTTP_PORT and ADMIN_PORT say otherwise.
# Env: CONCURRENCY (4) streams, REQUESTS (200) for genai-perf, DURATION (10s) for `skiff load`,
# MAX_TOKENS (32) per answer, INPUT_TOKENS (32) per synthetic prompt, ROUNDS (1).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$repo/${BIN:-target/release}
http_port=${HTTP_PORT:-38181} admin_port=${ADMIN_PORT:-38191}
concurrency=${CONCURRENCY:-4} requests=${REQUESTS:-200} duration=${DURATION:-10s}
max_tokens=${MAX_TOKENS:-32} input_tokens=${INPUT_TOKENS:-32} rounds=${ROUNDS:-1}
genai_perf_version=0.0.16
venv=$repo/.bench/llm-venv model=$repo/.bench/llm/tiny-llama.gguf gp_venv=$repo/.bench/genai-perf-venv
say() { echo "compare-genai-perf.sh: $*" >&2; }
[ -x "$venv/bin/python3" ] && [ -f "$model" ] || { say "run tests/llm/setup.sh first"; exit 1; }
[ -x "$bin/skiff" ] || { say "no $bin/skiff: build it first"; exit 1; }

if ! "$gp_venv/bin/python3" -c "import importlib.metadata as m, sys
sys.exit(m.version('genai-perf') != '$genai_perf_version')" 2>/dev/null; then
  say "installing genai-perf $genai_perf_version into $gp_venv"
  rm -rf "$gp_venv"
  python3 -m venv "$gp_venv"
  "$gp_venv/bin/python3" -m pip install --disable-pip-version-check -q "genai-perf==$genai_perf_version"
fi
"$repo/scripts/perf-analyzer.sh" --install

dir=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT

# perf_analyzer under the name genai-perf runs, first on its PATH.
mkdir -p "$dir/bin"
mapfile -t launcher < <("$repo/scripts/perf-analyzer.sh" --path)
printf '#!/bin/sh\nexec %s "$@"\n' "$(printf '%q ' "${launcher[@]}")" >"$dir/bin/perf_analyzer"
chmod +x "$dir/bin/perf_analyzer"

# The model's vocabulary (from tiny_gguf.py, with the gguf package of the LLM venv) as a Hugging Face
# tokenizer: byte-level BPE without merges, so each UTF-8 byte is one token, as in llama.cpp.
"$venv/bin/python3" -c "
import json, sys
sys.path.insert(0, '$repo/tests/llm')
import tiny_gguf
tokens, _, types = tiny_gguf.vocab()
print(json.dumps([[t, int(k) == int(tiny_gguf.gguf.TokenType.BYTE)] for t, k in zip(tokens, types)]))
" >"$dir/vocab.json"
HF_HUB_OFFLINE=1 "$gp_venv/bin/python3" - "$dir/vocab.json" "$dir/tokenizer" <<'PY'
import json, sys
from tokenizers import Tokenizer, decoders, models
from transformers import PreTrainedTokenizerFast
entries = json.load(open(sys.argv[1]))
vocab = {token: i for i, (token, _) in enumerate(entries)}
tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
tokenizer.decoder = decoders.ByteFallback()
tokenizer.add_special_tokens([token for token, is_byte in entries if not is_byte])
PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>") \
    .save_pretrained(sys.argv[2])
PY

# shellcheck source=lib/llama-up.sh
source "$repo/scripts/lib/llama-up.sh"
llama_up $((concurrency * 2))
url=http://127.0.0.1:$http_port/openai/v1/chat/completions
for i in $(seq 121); do
  ((i < 121)) || { say "nothing answers on port $http_port"; tail -20 "$dir/up.log" >&2; exit 1; }
  curl -sf -o /dev/null -H 'content-type: application/json' \
    -d '{"model":"llama","messages":[{"role":"user","content":"hi"}],"max_tokens":4}' "$url" && break
  sleep 1
done

genai_perf() { # genai_perf ROUND: the run's artifacts in $dir/genai-perf-ROUND, one line in runs.jsonl
  local out=$dir/genai-perf-$1
  PATH=$dir/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$gp_venv/bin/python3" -m genai_perf.main profile \
    -m llama --endpoint-type chat --endpoint openai/v1/chat/completions --streaming -u "127.0.0.1:$http_port" \
    --tokenizer "$dir/tokenizer" --concurrency "$concurrency" --request-count "$requests" \
    --warmup-request-count "$concurrency" --synthetic-input-tokens-mean "$input_tokens" \
    --output-tokens-mean "$max_tokens" --extra-inputs "max_tokens:$max_tokens" --artifact-dir "$out" \
    >"$out.log" 2>&1 || { say "genai-perf failed:"; tail -20 "$out.log" >&2; exit 1; }
  # The user messages it sent (its generator's seed is fixed), as `skiff load --prompts` JSON lines.
  [ -f "$dir/prompts.jsonl" ] || python3 - "$out"/*/inputs.json >"$dir/prompts.jsonl" <<'PY2'
import json, sys
for entry in json.load(open(sys.argv[1]))["data"]:
    print(json.dumps({"prompt": entry["payload"][0]["messages"][0]["content"]}))
PY2
  python3 - "$out" "$1" >>"$dir/runs.jsonl" <<'PY'
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/*/profile_export_genai_perf.json")[0]))
t, i = d["time_to_first_token"], d["inter_token_latency"]
print(json.dumps({"client": "genai-perf", "round": int(sys.argv[2]), "requests": int(d["request_count"]["avg"]),
    "ttft": [t["avg"], t["p50"], t["p90"], t["p99"]], "itl": [i["avg"], i["p50"], i["p99"]],
    "tokens": d["output_sequence_length"]["avg"], "total": d["output_token_throughput"]["avg"]}))
PY
}
skiff_load() { # skiff_load ROUND: with the prompts of genai-perf (round 1 runs it first), a line in runs.jsonl
  "$bin/skiff" load "$url" --openai --model llama --max-tokens "$max_tokens" --prompts "$dir/prompts.jsonl" \
    -c "$concurrency" -d "$duration" -t 1m --admin "$admin_port" --json >"$dir/load-$1.json" 2>"$dir/load-$1.log" ||
    { say "skiff load failed:"; tail -20 "$dir/load-$1.log" >&2; exit 1; }
  python3 - "$dir/load-$1.json" "$1" >>"$dir/runs.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); l = s["llm"]; t, i = l["all"]["ttft"], l["all"]["itl"]
print(json.dumps({"client": "skiff load", "round": int(sys.argv[2]), "requests": l["all"]["streams"],
    "ttft": [t["meanMs"], t["p50Ms"], t["p90Ms"], t["p99Ms"]], "itl": [i["meanMs"], i["p50Ms"], i["p99Ms"]],
    "tokens": l["all"]["outputTokens"] / l["all"]["streams"], "total": l["totalTokensPerS"]}))
PY
}
for round in $(seq "$rounds"); do
  if ((round % 2)); then genai_perf "$round"; skiff_load "$round"; else skiff_load "$round"; genai_perf "$round"; fi
done

python3 - "$dir/runs.jsonl" "$concurrency" "$max_tokens" <<'PY'
import json, sys
runs = list(map(json.loads, open(sys.argv[1])))
print(f"\n{sys.argv[2]} streams, max_tokens {sys.argv[3]}; latencies in ms\n")
print("| client (round, requests) | TTFT mean / p50 / p90 / p99 | ITL mean / p50 / p99 | tokens per answer | total tokens/s |")
print("|---|---|---|---|---|")
for r in sorted(runs, key=lambda r: (r["client"], r["round"])):
    print(f"| {r['client']} ({r['round']}, {r['requests']}) | {' / '.join(f'{v:.1f}' for v in r['ttft'])} "
          f"| {' / '.join(f'{v:.2f}' for v in r['itl'])} | {r['tokens']:.2f} | {r['total']:.0f} |")
PY
