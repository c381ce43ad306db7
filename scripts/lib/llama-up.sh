# Sourced by scripts/bench-llm.sh and scripts/compare-genai-perf.sh. `llama_up N` starts `skiff up`
# over $dir with the tiny GGUF ($model) as the InferenceService `llama` (one replica kept,
# containerConcurrency N) on examples/runtimes/llama-cpp-server.yaml, its server from $venv, and adds
# its pid to `pids`. Uses repo, bin, venv, model, dir, http_port and admin_port; writes its log to
# $dir/up.log.
llama_up() {
  mkdir -p "$dir/models/llama"
  cp "$model" "$dir/models/llama/model.gguf"
  cat >"$dir/llama.yaml" <<YAML
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama
spec:
  predictor:
    minReplicas: 1
    maxReplicas: 1
    containerConcurrency: $1
    model:
      modelFormat: {name: gguf}
      storageUri: file://models/llama
      args: [--n_threads=1, --n_ctx=512]
YAML
  printf 'autoscaler:\n  tick-interval: 1s\n' >"$dir/config.yml.txt"
  PATH=$venv/bin:$PATH ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$repo/.ort/onnxruntime/capi/libonnxruntime.so.1.31.1} \
    "$bin/skiff" up "$dir" --http-port "$http_port" --admin "127.0.0.1:$admin_port" --config "$dir/config.yml.txt" \
    --server-bin "$bin/skiff-server" --runtime "$repo/examples/runtimes/llama-cpp-server.yaml" >"$dir/up.log" 2>&1 &
  pids+=($!)
}
