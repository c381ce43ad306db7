//! OpenAI's API through a cluster's data plane: a router pod, the activator, the queue-proxy and
//! the server, with no InferenceService Host (routed by the `"model"` of the body), from zero.
//!
//! Run by `tests/cluster/e2e-runtimes.sh` (each test by name, at the right moment), which brings
//! up the local cluster, creates the InferenceServices at zero and tells this test where things are:
//!   SKIFF_OPENAI_ROUTER      a router pod, ip:port (the host reaches pod IPs through the bridge)
//!   SKIFF_OPENAI_EVENTS_DIR  the handshake folder of `lockstep`, the InferenceService that runs
//!                            `tests/fixtures/lockstep_sse.py` as a custom container (a hostPath
//!                            of this machine, the real node, given to uid 65532)
//! The services: `llama`, llama.cpp's server on `examples/runtimes/llama-cpp-server.yaml` with the
//! tiny GGUF of `tests/llm/setup.sh`, and `lockstep`.

mod common;

use std::path::PathBuf;

use bytes::Bytes;
use common::llm::{MAX_TOKENS, chat, streams_sent_at_once_all_complete};
use common::{lockstep, send};
use http::{Method, StatusCode};
use serde_json::Value;

/// Chunks `lockstep` streams before `[DONE]` (its `TOKENS`, which the script sets).
const LOCKSTEP_TOKENS: usize = 4;
/// Streams sent at once to `llama` at zero.
const STREAMS: usize = 10;

fn env(name: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| panic!("{name} is not set (tests/cluster/e2e-runtimes.sh sets it)"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the cluster of tests/cluster/e2e-runtimes.sh, which runs it"]
async fn llama_at_zero_is_listed_and_streams_from_zero_through_a_router_pod() {
    let router = env("SKIFF_OPENAI_ROUTER");
    let models = send(Method::GET, &format!("http://{router}/openai/v1/models"), Bytes::new(), &[]).await.unwrap();
    let text = String::from_utf8_lossy(&models.body).into_owned();
    assert_eq!(models.status, StatusCode::OK, "{text}");
    let ids: Vec<Value> = models.json()["data"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect();
    assert!(ids.contains(&Value::from("llama")), "GET /openai/v1/models: {text}");

    // From zero: held while the pod starts and llama.cpp loads the model, then streamed.
    let (status, first) = chat(&router, true, "Say something").await;
    assert_eq!(status, StatusCode::OK, "{:?}", first.events);
    assert_eq!(first.events.last().map(String::as_str), Some("[DONE]"), "{:?}", first.events);
    let contents = first.contents();
    assert!(contents.len() >= 2, "tokens come as several events: {:?}", first.events);
    assert!(first.reads >= 2, "the events came in {} read(s) of the body: buffered somewhere", first.reads);
    if let Some(usage) = first.usage() {
        let tokens = usage["completion_tokens"].as_u64().unwrap_or_default();
        assert!(tokens as usize >= contents.len() && tokens <= MAX_TOKENS + 1, "{usage} for {contents:?}");
    }
    println!(
        "llama: {} content events in {} reads, usage {}",
        contents.len(),
        first.reads,
        first.usage().map_or("not sent".to_owned(), |u| u.to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the cluster of tests/cluster/e2e-runtimes.sh, which runs it"]
async fn each_event_reaches_the_client_before_the_server_writes_the_next_through_router_activator_and_queue_proxy() {
    let router = env("SKIFF_OPENAI_ROUTER");
    let events = PathBuf::from(env("SKIFF_OPENAI_EVENTS_DIR"));
    let streamed = lockstep::stream(&format!("http://{router}"), "lockstep", &events).await;
    print!("{}", streamed.report());
    assert_eq!(streamed.head.status, StatusCode::OK, "{:?}", streamed.head);
    assert_eq!(streamed.head.headers["content-type"], "text/event-stream");
    let expected: Vec<String> = (1..=LOCKSTEP_TOKENS).map(|n| format!("token-{n}")).collect();
    assert_eq!(streamed.contents(), expected);
    assert_eq!(streamed.events.len(), LOCKSTEP_TOKENS + 1);
    assert_eq!(streamed.events[LOCKSTEP_TOKENS].data, "[DONE]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the cluster of tests/cluster/e2e-runtimes.sh, which runs it"]
async fn ten_llama_streams_sent_at_zero_all_complete() {
    let router = env("SKIFF_OPENAI_ROUTER");
    streams_sent_at_once_all_complete(&router, STREAMS).await;
    println!("{STREAMS} streams sent at zero: all answered to [DONE]");
}
