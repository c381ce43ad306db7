//! OpenAI requests to the router itself are routed by the `"model"` their body names, so the
//! router reads each body until it finds it (1 MiB at most). Many clients that each send most of
//! a MiB and then stall, with no `"model"` yet, must not grow the router's memory without bound:
//! past the router's budget for such bodies (shared by every connection) each gets 503 at once,
//! the process's memory stays near the budget, and requests addressed by Host still pass, as do
//! those routed by their body once the stalled clients are gone.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skiff_dataplane::endpoints::Endpoints;
use skiff_router::DownstreamLimits;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// A liveness bound, not a timing check: how long the test waits for the answers.
const BOUND: Duration = Duration::from_secs(30);
/// Clients that stall, as in the finding (150 connections at about 1 MiB each).
const STALLED: usize = 150;
/// The router's budget for bodies read to find their model, in this test.
const BUDGET: usize = 8 * 1024 * 1024;

/// The process's resident memory (`VmRSS`), in bytes: the router runs in this test's process.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS in /proc/self/status");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Sends `head` and `body` on a new connection and keeps it open, stalled, until the task
/// returned is aborted; what the router answers before it closes the connection goes to `answers`.
async fn stall(
    router: std::net::SocketAddr,
    head: Bytes,
    body: Bytes,
    answers: mpsc::UnboundedSender<String>,
) -> tokio::task::JoinHandle<()> {
    let stream = TcpStream::connect(router).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    tokio::spawn(async move {
        let reading = async move {
            let mut answer = Vec::new();
            let _ = reader.read_to_end(&mut answer).await;
            let _ = answers.send(String::from_utf8_lossy(&answer).into_owned());
        };
        // The router may stop reading and close: the rest of the body then has nowhere to go.
        let writing = async move {
            if writer.write_all(&head).await.is_ok() && writer.write_all(&body).await.is_ok() {
                std::future::pending::<()>().await;
            }
        };
        tokio::join!(reading, writing);
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_past_the_budget_get_503_and_memory_stays_bounded() {
    let (replica, activator) = (upstream("llama-replica").await, upstream("activator").await);
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/llama-predictor-00001", 0, &[replica.addr]);
    let limits =
        DownstreamLimits { header_timeout: Duration::from_secs(120), peek_budget: BUDGET, ..Default::default() };
    let (router, handle) = router_with(endpoints, activator.addr, limits);
    router.publish(vec![service("default", "llama", vec![target("llama-predictor-00001", 100, None)])]);
    let addr = handle.listen_addr();

    // About a MiB of a chat completion whose "model" would come after the prompt, never sent.
    let prompt = "a".repeat(1_000_000);
    let body = Bytes::from(format!(r#"{{"messages":[{{"role":"user","content":"{prompt}"#));
    let head = Bytes::from(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: router\r\ncontent-type: application/json\r\n\
         content-length: 2000000\r\n\r\n",
    );
    let before = rss();
    let (answers, mut answered) = mpsc::unbounded_channel();
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        stalled.push(stall(addr, head.clone(), body.clone(), answers.clone()).await);
    }
    // Each body held to the end holds at least its 1,000,000 bytes of the budget: the rest are refused.
    let most_held = BUDGET / 1_000_000;
    let mut refused = 0;
    while refused + most_held < STALLED {
        let answer = tokio::time::timeout(BOUND, answered.recv()).await;
        let answer = answer.unwrap_or_else(|_| panic!("only {refused} of {STALLED} stalled bodies were refused"));
        let answer = answer.unwrap();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("too many request bodies") && answer.contains("8 MiB"), "{answer}");
        refused += 1;
    }
    let after = rss();
    eprintln!(
        "router: {refused} of {STALLED} stalled bodies refused with 503 (budget {} MiB); resident memory {} MiB \
         before, {} MiB with the rest stalled",
        BUDGET >> 20,
        before >> 20,
        after >> 20
    );
    // Before the budget this grew by 150 MiB or more; the budget and each connection's buffers bound it now.
    assert!(after.saturating_sub(before) < 96 << 20, "memory grew from {before} to {after} bytes");

    // A request addressed by Host does not read its body to route: it passes while the budget is full.
    let caller = Caller::new(addr);
    let (status, answer) = caller.post("llama.default.example.com", "/v1/chat/completions").await;
    assert_eq!(status, 200, "{answer}");
    // Once the stalled clients are gone, a request routed by its body passes too.
    for client in stalled {
        client.abort();
    }
    let chat = r#"{"model":"llama","messages":[{"role":"user","content":"hi"}]}"#;
    let mut last = String::new();
    for _ in 0..300 {
        let mut client = TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: router\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{chat}",
            chat.len()
        );
        client.write_all(request.as_bytes()).await.unwrap();
        last.clear();
        let _ = client.read_to_string(&mut last).await;
        if last.starts_with("HTTP/1.1 200") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(last.starts_with("HTTP/1.1 200"), "{last}");
    assert!(replica.seen().iter().any(|seen| seen.path == "/v1/chat/completions"));
}
