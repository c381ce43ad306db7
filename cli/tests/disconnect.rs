//! A client that leaves mid-stream cancels the replica's generation, in `skiff up`: an OpenAI-style
//! Python server (`tests/fixtures/endless_sse.py`, a custom container) streams an event every 20 ms
//! for a minute and records when a write fails because its client is gone. A client reads three
//! events and drops the connection, once from zero (the request held, then streamed) and once warm;
//! each time the server must see the cancel long before its stream would have ended. And a client
//! that leaves while its request is held at zero (the server loading for 20 s) takes the request
//! back at once: the activator holds nothing more, and the replica, once up, never gets it.

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

/// `service`'s first revision in `skiff up`'s status: requests its activator holds, and ready replicas.
fn queued_and_ready(status: &serde_json::Value, service: &str) -> (u64, u64) {
    let revision = revision_of(status, service);
    (revision["queued"].as_u64().unwrap_or(u64::MAX), revision["ready"].as_u64().unwrap_or(u64::MAX))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_while_held_at_zero_takes_its_request_back() {
    let dir = folder(&[]);
    let path = dir.path();
    let events = path.join("events");
    std::fs::create_dir(&events).unwrap();
    let env = format!("{{name: EVENTS_DIR, value: {}}}, {{name: STARTUP_SECONDS, value: \"20\"}}", events.display());
    let server = repo().join("tests/fixtures/endless_sse.py");
    std::fs::write(path.join("slow.yaml"), python_isvc("slow", &server, &env)).unwrap();
    let up = Up::with_python(path, CONFIG);
    up.wait_for("slow at zero", Duration::from_secs(60), |s| replicas_of(s, "slow") == (0, 0)).await;

    let body =
        json!({"model": "slow", "user": "held", "stream": true, "messages": [{"role": "user", "content": "Go on"}]});
    let url = format!("http://{}/openai/v1/chat/completions", up.addr);
    let client = tokio::spawn(async move { post_json(&url, &body).await });
    up.wait_for("the request held", Duration::from_secs(10), |s| queued_and_ready(s, "slow") == (1, 0)).await;
    client.abort();
    let _ = client.await;
    let left = Instant::now();
    // Well within the server's 20 s start: the activator lets the request go while no replica is ready.
    up.wait_for("the request let go", Duration::from_secs(10), |s| queued_and_ready(s, "slow") == (0, 0)).await;
    eprintln!("the activator let the request go {:?} after its client left", left.elapsed());
    // The replica is not stopped for it, and once up it never gets the request.
    up.wait_for("slow ready", Duration::from_secs(60), |s| queued_and_ready(s, "slow").1 == 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!events.join("held.written").exists(), "the replica got a request whose client had left");
    assert!(up.stop().success());
}
