//! The router as a hostile client finds it: a request head trickled a byte at a time, Host labels
//! far past DNS's 63 characters, more connections than it takes.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use skiff_dataplane::endpoints::Endpoints;
use skiff_router::DownstreamLimits;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn limits(header_timeout: Duration, max_connections: usize) -> DownstreamLimits {
    DownstreamLimits { header_timeout, max_connections, ..DownstreamLimits::default() }
}

/// Reads what the router sends until it closes the connection.
async fn until_closed(client: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let _ = client.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Pingora bounds each read of a head, not the head: a client sending a byte every 300 ms would
/// never be cut. The router's head deadline cuts it; an idle keep-alive connection goes the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_request_head_is_cut_at_the_header_timeout() {
    let activator = upstream("activator").await;
    let (_router, handle) =
        router_with(Arc::new(Endpoints::default()), activator.addr, limits(Duration::from_secs(1), 100));
    let mut client = TcpStream::connect(handle.listen_addr()).await.unwrap();
    let started = Instant::now();
    for byte in b"GET /v1/models/iris HTTP/1.1\r\nhost: iris.default.example.com\r\nx-slow: aaaaaaaaaaaaaaaa" {
        if client.write_all(&[*byte]).await.is_err() {
            break;
        }
        let mut probe = [0u8; 1];
        if let Ok(read) = tokio::time::timeout(Duration::from_millis(300), client.read(&mut probe)).await {
            assert_eq!(read.unwrap_or(0), 0, "the router answered a partial head");
            break;
        }
    }
    let cut = started.elapsed();
    eprintln!("router: trickled head cut after {cut:?} (header timeout 1 s)");
    assert!(cut >= Duration::from_secs(1) && cut < Duration::from_secs(20), "cut after {cut:?}");

    let mut idle = TcpStream::connect(handle.listen_addr()).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let answer = until_closed(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A Host whose first label is 64 KiB of dashes used to cost seconds of CPU (a hash lookup per
/// dash); past 63 characters it is a plain 404, and the message does not echo it back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_label_past_63_characters_is_a_fast_404() {
    let activator = upstream("activator").await;
    let (router, handle) = router(Arc::new(Endpoints::default()), activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let c = Caller::new(handle.listen_addr());
    let host = format!("{}.default.example.com", "-".repeat(60_000));
    let started = Instant::now();
    let (status, body) = c.post(&host, "/v1/models/iris:predict").await;
    eprintln!("router: 60 000-dash host answered in {:?}", started.elapsed());
    assert_eq!(status, 404);
    let message = body["error"].as_str().unwrap();
    assert!(message.len() < 500 && message.contains("---…"), "{message}");
    assert!(activator.seen().is_empty());
}

/// Past the connection cap a new connection is closed at once; a held one still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_closed() {
    let activator = upstream("activator").await;
    let (_router, handle) =
        router_with(Arc::new(Endpoints::default()), activator.addr, limits(Duration::from_secs(20), 1));
    let mut held = TcpStream::connect(handle.listen_addr()).await.unwrap();
    held.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut answer = [0u8; 15];
    held.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200 OK");
    let mut refused = TcpStream::connect(handle.listen_addr()).await.unwrap();
    let _ = refused.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(until_closed(&mut refused).await, "", "closed without an answer");
}
