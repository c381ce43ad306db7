//! The real LLM server of the tests: llama.cpp's OpenAI-compatible server
//! (`llama-cpp-python[server]`, installed with a tiny random-weight Llama model by
//! `tests/llm/setup.sh` into `.bench/`) on the ServingRuntime of
//! `examples/runtimes/llama-cpp-server.yaml`, served by a real `skiff up` as the InferenceService
//! `llama`.

use std::path::PathBuf;

use serde_json::Value;

use super::{Up, folder, repo};

/// The venv and the model `tests/llm/setup.sh` installs.
pub fn installed() -> (PathBuf, PathBuf) {
    let venv = repo().join(".bench/llm-venv");
    let model = repo().join(".bench/llm/tiny-llama.gguf");
    assert!(
        venv.join("bin/python3").is_file() && model.is_file(),
        "the LLM server is not installed: run tests/llm/setup.sh (scripts/test.sh does), which puts \
         llama-cpp-python[server] in {} and the tiny model at {}",
        venv.display(),
        model.display()
    );
    (venv, model)
}

/// The InferenceService `llama` at zero on the GGUF runtime, with `predictor` lines added (such
/// as `containerConcurrency: 2`).
pub fn isvc(predictor: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama
  annotations:
    serving.knative.dev/progress-deadline: 5m
spec:
  predictor:
    minReplicas: 0
{predictor}
    model:
      modelFormat: {{name: gguf}}
      storageUri: file://models/llama
      args: [--n_threads=1, --n_ctx=512]
",
        predictor = predictor.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
    )
}

/// `skiff up` over a new folder holding the model and the manifest `isvc`, with the runtime and
/// the venv on its PATH; the folder is returned with it.
pub fn up(config: &str, isvc: &str) -> (tempfile::TempDir, Up) {
    let (venv, model) = installed();
    let dir = folder(&[]);
    let path = dir.path();
    std::fs::create_dir_all(path.join("models/llama")).unwrap();
    std::fs::copy(&model, path.join("models/llama/model.gguf")).unwrap();
    std::fs::write(path.join("llama.yaml"), isvc).unwrap();
    let runtime = repo().join("examples/runtimes/llama-cpp-server.yaml").display().to_string();
    let env_path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let up = Up::start_with(path, config, &[("PATH", env_path.as_str())], &["--runtime", runtime.as_str()]);
    (dir, up)
}

/// `(desired, ready)` replicas of `llama`'s revision in `skiff up`'s status.
pub fn replicas(status: &Value) -> (u64, u64) {
    let service = status["services"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "llama").cloned());
    let revision = service.map(|s| s["revisions"][0].clone()).unwrap_or(Value::Null);
    (revision["desired"].as_u64().unwrap_or(u64::MAX), revision["ready"].as_u64().unwrap_or(u64::MAX))
}
