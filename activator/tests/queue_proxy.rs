//! Queue-proxy mode over real sockets: the concurrency limit, 503 when the queue is full, the
//! in-flight gauge, readiness from the container's, and a SIGTERM drain of the real binary with a
//! request in flight.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Upstream, dead_addr, get, wait_until};
use http::StatusCode;
use serde_json::Value;
use skiff_activator::{QueueProxy, QueueProxyConfig};
use tokio::net::TcpListener;

async fn start(config: QueueProxyConfig) -> (Arc<QueueProxy>, SocketAddr) {
    let proxy = QueueProxy::new(config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(proxy.clone().serve(listener, std::future::pending()));
    (proxy, addr)
}

fn config(upstream: SocketAddr, container_concurrency: usize, max_queued: usize) -> QueueProxyConfig {
    QueueProxyConfig { upstream, container_concurrency, max_queued: Some(max_queued), ..QueueProxyConfig::default() }
}

/// The value of an unlabelled sample in a metrics exposition.
fn sample(metrics: &str, name: &str) -> Option<i64> {
    metrics.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn concurrency_is_limited_and_a_full_queue_answers_503() {
    let upstream = Upstream::start("container").await;
    let (proxy, addr) = start(config(upstream.addr, 1, 1)).await;
    let url = format!("http://{addr}/hold");
    let held: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { get(&url, None).await })
        })
        .collect();
    wait_until("one at the container and one queued", || {
        let metrics = proxy.metrics_text();
        sample(&metrics, "skiff_inflight_requests") == Some(2) && sample(&metrics, "skiff_queued_requests") == Some(1)
    })
    .await;
    assert_eq!(upstream.in_flight(), 1);

    let refused = get(&format!("http://{addr}/"), None).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers["retry-after"], "1");
    let message = refused.json()["error"].as_str().unwrap().to_owned();
    assert!(message.contains("1 requests are already queued"), "{message}");

    let scraped = get(&format!("http://{addr}/metrics"), None).await;
    assert_eq!(scraped.status, StatusCode::OK);
    assert_eq!(sample(&scraped.text(), "skiff_inflight_requests"), Some(2), "{}", scraped.text());

    upstream.release(2);
    for request in held {
        let reply = request.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(reply.json()["id"], "container");
    }
    assert_eq!(upstream.max_in_flight(), 1, "containerConcurrency 1 is honoured");
    let metrics = proxy.metrics_text();
    assert_eq!(sample(&metrics, "skiff_inflight_requests"), Some(0), "{metrics}");
    assert_eq!(sample(&metrics, "skiff_queued_requests"), Some(0), "{metrics}");
    assert!(metrics.contains(r#"skiff_queue_proxy_requests_total{status="503"} 1"#), "{metrics}");
}

#[tokio::test]
async fn readiness_follows_the_container() {
    let upstream = Upstream::start("container").await;
    let (_, addr) = start(config(upstream.addr, 0, 0)).await;
    let reply = get(&format!("http://{addr}/healthz"), None).await;
    assert_eq!((reply.status, reply.json()["ready"].clone()), (StatusCode::OK, Value::Bool(true)));
    assert_eq!(upstream.received(), 0, "without a readiness path, a connection is enough");

    let with_path = QueueProxyConfig { readiness_path: Some("/v2/health/ready".into()), ..config(upstream.addr, 0, 0) };
    let (_, addr) = start(with_path).await;
    assert_eq!(get(&format!("http://{addr}/healthz"), None).await.status, StatusCode::OK);
    assert_eq!(upstream.received(), 1, "the container's readiness path was asked");

    let (_, addr) = start(config(dead_addr().await, 0, 0)).await;
    let reply = get(&format!("http://{addr}/healthz"), None).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(reply.json()["error"].as_str().unwrap().contains("refuses connections"), "{}", reply.text());
}

#[tokio::test]
async fn unlimited_concurrency_sends_everything_through() {
    let upstream = Upstream::start("container").await;
    let (_, addr) = start(config(upstream.addr, 0, 0)).await;
    let held: Vec<_> = (0..5)
        .map(|_| {
            let url = format!("http://{addr}/hold");
            tokio::spawn(async move { get(&url, None).await })
        })
        .collect();
    wait_until("all five at the container", || upstream.in_flight() == 5).await;
    upstream.release(5);
    for request in held {
        assert_eq!(request.await.unwrap().status, StatusCode::OK);
    }
}

/// The real binary, its stderr forwarded to the test's output.
struct Binary {
    child: Child,
    addr: SocketAddr,
}

impl Binary {
    fn start(upstream: SocketAddr) -> Binary {
        let child = Command::new(env!("CARGO_BIN_EXE_skiff-activator"))
            .args(["--log-format", "json", "queue-proxy", "--bind", "127.0.0.1", "--port", "0"])
            .args(["--upstream", &upstream.to_string(), "--container-concurrency", "2", "--drain-timeout-secs", "30"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skiff-activator");
        // Owned by `Binary` at once, so that its drop kills and reaps the process on every path.
        let mut binary = Binary { child, addr: SocketAddr::from(([0, 0, 0, 0], 0)) };
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = binary.child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[skiff-activator] {line}");
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("skiff-activator exited or did not log 'listening' within 20 s");
            let Ok(log) = serde_json::from_str::<Value>(&line) else { continue };
            if log["fields"]["message"] == "listening" {
                binary.addr = log["fields"]["address"].as_str().unwrap().parse().unwrap();
                return binary;
            }
        }
    }

    fn terminate(&self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn sigterm_stops_accepting_and_drains_the_request_in_flight() {
    let upstream = Upstream::start("container").await;
    let mut binary = Binary::start(upstream.addr);
    let url = format!("http://{}/hold", binary.addr);
    let in_flight = tokio::spawn(async move { get(&url, None).await });
    wait_until("the request at the container", || upstream.in_flight() == 1).await;

    binary.terminate();
    let addr = binary.addr;
    let mut refused = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !refused {
        assert!(Instant::now() < deadline, "still accepting 20 s after SIGTERM");
        refused = tokio::net::TcpStream::connect(addr).await.is_err();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(binary.child.try_wait().unwrap().is_none(), "still draining while a request is in flight");

    upstream.release(1);
    let reply = in_flight.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = binary.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "skiff-activator still running 20 s after draining");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(status.success(), "exit status {status}");
}

/// Queue-proxy mode budgets held body bytes too: with a 32 MiB budget, a second 20 MiB body while
/// the first is held at the container is refused with 503 and Retry-After, and goes through later.
#[tokio::test]
async fn held_bodies_past_the_byte_budget_are_refused() {
    let upstream = Upstream::start("container").await;
    let budget = 32 * 1024 * 1024;
    let (_proxy, addr) = start(QueueProxyConfig { max_held_bytes: budget, ..config(upstream.addr, 1, 10) }).await;
    let body = "x".repeat(20 * 1024 * 1024);
    let url = format!("http://{addr}/hold");
    let held = {
        let (url, body) = (url.clone(), body.clone());
        tokio::spawn(async move { common::post(&url, None, &body).await })
    };
    wait_until("the first body at the container", || upstream.in_flight() == 1).await;
    let refused = common::post(&format!("http://{addr}/"), None, &body).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.text());
    assert_eq!(refused.headers["retry-after"], "1");
    assert!(refused.json()["error"].as_str().unwrap().starts_with("the queue-proxy already holds 20971520 bytes"));
    upstream.release(1);
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
    assert_eq!(common::post(&format!("http://{addr}/"), None, &body).await.status, StatusCode::OK);
}
