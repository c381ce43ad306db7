//! The real LLM server of the tests: llama.cpp's OpenAI-compatible server
//! (`llama-cpp-python[server]`, installed with a tiny random-weight Llama model by
//! `tests/llm/setup.sh` into `.bench/`) on the ServingRuntime of
//! `examples/runtimes/llama-cpp-server.yaml`, served by a real `skiff up` as the InferenceService
//! `llama`, and a client of its chat completions ([`chat`]), which the cluster's test
//! (`openai_cluster.rs`) sends through a router pod too.

use std::path::PathBuf;
use std::time::Duration;

use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::{Value, json};

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
    super::replicas_of(status, "llama")
}

/// Tokens each request asks for.
pub const MAX_TOKENS: u64 = 24;

/// One streamed chat completion: its events, and how many reads of the body brought them.
pub struct Streamed {
    /// The `data:` of each event, or the whole body of an answer not streamed.
    pub events: Vec<String>,
    /// How many reads of the body brought them.
    pub reads: usize,
}

impl Streamed {
    /// The `content` of each chunk before `[DONE]`.
    pub fn contents(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| *e != "[DONE]")
            .map(|e| serde_json::from_str::<Value>(e).unwrap_or_else(|err| panic!("{err}: {e}")))
            .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
            .collect()
    }

    /// The `usage` of the last chunk that has one (servers that count tokens in a stream send it
    /// in the last chunk before `[DONE]`).
    pub fn usage(&self) -> Option<Value> {
        self.events
            .iter()
            .rev()
            .filter_map(|e| serde_json::from_str::<Value>(e).ok())
            .find_map(|chunk| chunk.get("usage").filter(|u| !u.is_null()).cloned())
    }
}

/// A chat completion naming `llama` sent to the router at `addr` (`host:port`), `stream`ed or not,
/// read to its end (a stall of two minutes fails).
pub async fn chat(addr: &str, stream: bool, user: &str) -> (StatusCode, Streamed) {
    let body = json!({
        "messages": [{"role": "user", "content": user}],
        "model": "llama",
        "stream": stream,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
    });
    let response = super::post_json(&format!("http://{addr}/openai/v1/chat/completions"), &body).await;
    let status = response.status();
    let mut answer = response.into_body();
    let (mut buffer, mut events, mut reads) = (String::new(), Vec::new(), 0);
    // A liveness bound, not a timing check.
    while let Some(frame) = tokio::time::timeout(Duration::from_secs(120), answer.frame()).await.expect("stalled") {
        let Ok(data) = frame.unwrap().into_data() else { continue };
        reads += 1;
        buffer.push_str(std::str::from_utf8(&data).unwrap());
        if !stream {
            continue;
        }
        while let Some(end) = buffer.find("\n\n").or_else(|| buffer.find("\r\n\r\n")) {
            let event: String = buffer.drain(..end).collect();
            buffer = buffer.trim_start_matches(['\r', '\n']).to_owned();
            if let Some(data) = event.trim().strip_prefix("data: ") {
                events.push(data.to_owned());
            }
        }
    }
    if !stream {
        events.push(buffer);
    }
    (status, Streamed { events, reads })
}

/// `count` streamed chat completions sent at once to the router at `addr` (`host:port`): each
/// answers 200 and streams content to `[DONE]`.
pub async fn streams_sent_at_once_all_complete(addr: &str, count: usize) {
    let streams: Vec<_> = (0..count)
        .map(|i| {
            let addr = addr.to_owned();
            tokio::spawn(async move { chat(&addr, true, &format!("Stream {i}")).await })
        })
        .collect();
    for (i, stream) in streams.into_iter().enumerate() {
        let (status, streamed) = stream.await.unwrap();
        assert_eq!(status, StatusCode::OK, "stream {i}: {:?}", streamed.events);
        assert_eq!(streamed.events.last().map(String::as_str), Some("[DONE]"), "stream {i}: {:?}", streamed.events);
        assert!(!streamed.contents().is_empty(), "stream {i}: {:?}", streamed.events);
    }
}
