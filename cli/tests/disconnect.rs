//! A client that leaves mid-stream cancels the replica's generation, in `skiff up`: an OpenAI-style
//! Python server (`tests/fixtures/endless_sse.py`, a custom container) streams an event every 20 ms
//! for a minute and records when a write fails because its client is gone. A client reads three
//! events and drops the connection, once from zero (the request held, then streamed) and once warm;
//! each time the server must see the cancel long before its stream would have ended.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::json;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// Events the server writes when nobody leaves (`MAX_EVENTS` in the fixture).
const MAX_EVENTS: u64 = 3000;

/// Streams a chat completion as `user`, reads three events, then drops the connection; returns when
/// the server recorded the cancel, with the events it had written and the time since the drop.
/// `cold` says whether the answer must be one held for a cold start (`x-skiff-cold-start`).
async fn leave_after_three_events(up: &Up, events: &Path, user: &str, cold: bool) -> (u64, Duration) {
    let body =
        json!({"model": "endless", "user": user, "stream": true, "messages": [{"role": "user", "content": "Go on"}]});
    let response = post_json(&format!("http://{}/openai/v1/chat/completions", up.addr), &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers().contains_key("x-skiff-cold-start"), cold, "{user}: {:?}", response.headers());
    let mut answer = response.into_body();
    let mut text = String::new();
    // A liveness bound, not a timing check.
    let bound = Duration::from_secs(60);
    while text.matches("\n\n").count() < 3 {
        let frame = tokio::time::timeout(bound, answer.frame()).await.expect("the stream stalled");
        let frame = frame.expect("the stream ended early").unwrap();
        if let Ok(data) = frame.into_data() {
            text.push_str(std::str::from_utf8(&data).unwrap());
        }
    }
    assert!(text.starts_with("data: {"), "{text}");
    drop(answer);
    let left = Instant::now();
    let cancelled = events.join(format!("{user}.cancelled"));
    // Bounded well below the minute the stream would take by itself.
    while !cancelled.exists() {
        assert!(left.elapsed() < Duration::from_secs(30), "the server still streams to {user} after the client left");
        assert!(!events.join(format!("{user}.completed")).exists(), "{user}'s stream ran to its end");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let since = left.elapsed();
    let written: u64 = std::fs::read_to_string(&cancelled).unwrap().trim().parse().unwrap();
    (written, since)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_cancels_the_replicas_generation_from_zero_and_warm() {
    let dir = folder(&[]);
    let path = dir.path();
    let events = path.join("events");
    std::fs::create_dir(&events).unwrap();
    let env = format!("{{name: EVENTS_DIR, value: {}}}", events.display());
    let server = repo().join("tests/fixtures/endless_sse.py");
    std::fs::write(path.join("endless.yaml"), python_isvc("endless", &server, &env)).unwrap();
    let up = Up::with_python(path, CONFIG);
    up.wait_for("endless at zero", Duration::from_secs(60), |s| replicas_of(s, "endless") == (0, 0)).await;

    for (user, cold) in [("from-zero", true), ("warm", false)] {
        let (written, since) = leave_after_three_events(&up, &events, user, cold).await;
        eprintln!("{user}: the server saw the cancel {since:?} after the client left, at event {written}");
        assert!((3..MAX_EVENTS).contains(&written), "{user}: {written} events written");
    }
    assert!(up.stop().success());
}
