//! A real LLM server through `skiff up`, on CPU: llama.cpp's OpenAI-compatible server
//! (`llama-cpp-python[server]`, installed with a tiny random-weight Llama model by
//! `tests/llm/setup.sh` into `.bench/`) on the ServingRuntime of
//! `examples/runtimes/llama-cpp-server.yaml`. An InferenceService at zero scales from zero on its
//! first chat completion, routed by the `"model"` of the body; the tokens stream back through the
//! router as the server writes them (in more than one read, not one buffered answer); it goes back
//! to zero; and ten streams sent at zero all complete.

mod common;

use std::time::Duration;

use common::llm::{self, MAX_TOKENS, chat, replicas, streams_sent_at_once_all_complete};
use http::StatusCode;
use serde_json::Value;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_scales_from_zero_on_a_chat_completion_streams_through_the_router_and_serves_ten_at_zero() {
    let (_dir, up) = llm::up(CONFIG, &llm::isvc("containerConcurrency: 2"));
    up.wait_for("llama at zero", Duration::from_secs(60), |s| replicas(s) == (0, 0)).await;

    // From zero: held while llama.cpp loads the model, then streamed token by token.
    let (status, first) = chat(&up.addr.to_string(), true, "Say something").await;
    assert_eq!(status, StatusCode::OK, "{:?}", first.events);
    assert_eq!(first.events.last().map(String::as_str), Some("[DONE]"), "{:?}", first.events);
    let contents = first.contents();
    assert!(contents.len() >= 2, "tokens come as several events: {:?}", first.events);
    assert!(first.reads >= 2, "the events came in {} read(s) of the body: buffered somewhere", first.reads);

    // Answered whole, with the server's token counts.
    let (status, whole) = chat(&up.addr.to_string(), false, "Again").await;
    assert_eq!(status, StatusCode::OK, "{:?}", whole.events);
    let answer: Value = serde_json::from_str(&whole.events[0]).unwrap();
    assert_eq!(answer["model"], "llama", "{answer}");
    // Random weights whose end-of-sequence row is zero: every answer runs to `max_tokens` (the
    // server's count may include the last token sampled, one more).
    assert_eq!(answer["choices"][0]["finish_reason"], "length", "{answer}");
    assert!(answer["usage"]["completion_tokens"].as_u64().unwrap() >= MAX_TOKENS, "{answer}");

    up.wait_for("llama back at zero", Duration::from_secs(90), |s| replicas(s) == (0, 0)).await;

    // Ten streams sent at zero: all held, all answered in full.
    streams_sent_at_once_all_complete(&up.addr.to_string(), 10).await;
    assert!(up.stop().success());
}
