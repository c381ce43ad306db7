//! OpenAI's API through `skiff up`, without a service's Host: an OpenAI-style server written in
//! Python (stdlib only) as a custom container, at zero, is listed by `GET /openai/v1/models`, and a
//! `POST /openai/v1/chat/completions` naming it in `"model"` scales it from zero and streams its
//! server-sent events back one by one: the server (`tests/fixtures/lockstep_sse.py`) writes each
//! event only once the client has read the one before (real files between the two processes: an
//! ordering check, not a timing one), and the client prints when each was written and arrived.

mod common;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use serde_json::{Value, json};

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// Events the server streams before `[DONE]`.
const TOKENS: usize = 4;

fn isvc(events: &Path) -> String {
    let env = format!("{{name: EVENTS_DIR, value: {}}}, {{name: TOKENS, value: \"{TOKENS}\"}}", events.display());
    python_isvc("tiny-llm", &lockstep::server(), &env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_completion_naming_a_python_server_at_zero_streams_its_events_one_by_one() {
    let dir = folder(&[]);
    let path = dir.path();
    let events = path.join("events");
    std::fs::create_dir(&events).unwrap();
    std::fs::write(path.join("tiny-llm.yaml"), isvc(&events)).unwrap();
    let up = Up::with_python(path, CONFIG);
    up.wait_for("tiny-llm at zero", Duration::from_secs(60), |s| replicas_of(s, "tiny-llm") == (0, 0)).await;

    // The router's own model list, without a service's Host.
    let models = send(Method::GET, &format!("http://{}/openai/v1/models", up.addr), Bytes::new(), &[]).await.unwrap();
    assert_eq!(models.status, StatusCode::OK);
    let ids: Vec<Value> = models.json()["data"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect();
    assert_eq!(ids, [json!("tiny-llm")]);

    // From zero, routed by the body's "model": held while the Python server starts, then streamed.
    let streamed = lockstep::stream(&format!("http://{}", up.addr), "tiny-llm", &events).await;
    println!("{}", streamed.report());
    assert_eq!(streamed.head.status, StatusCode::OK);
    assert_eq!(streamed.head.headers["x-skiff-revision"], "tiny-llm-predictor-00001");
    assert_eq!(streamed.head.headers["content-type"], "text/event-stream");
    let expected: Vec<String> = (1..=TOKENS).map(|n| format!("token-{n}")).collect();
    assert_eq!(streamed.contents(), expected);
    assert_eq!(streamed.events.len(), TOKENS + 1);
    assert_eq!(streamed.events[TOKENS].data, "[DONE]");
    assert!(up.stop().success());
}
