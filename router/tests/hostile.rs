//! The router as a hostile client finds it: a request head trickled a byte at a time, Host labels
//! far past DNS's 63 characters, more connections than it takes, `CONNECT` and `TRACE`, heads that
//! are not HTTP.

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
    // `start`'s own check that the router listens is a connection too: until the router has seen it
    // close, it holds the one place, and a connection may be refused. Then one is held.
    let mut held = None;
    for _ in 0..100 {
        let mut client = TcpStream::connect(handle.listen_addr()).await.unwrap();
        client.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let mut answer = [0u8; 15];
        if client.read_exact(&mut answer).await.is_ok() {
            assert_eq!(&answer, b"HTTP/1.1 200 OK");
            held = Some(client);
            break;
        }
    }
    let _held = held.expect("a connection is served once the start-up check has closed");
    let mut refused = TcpStream::connect(handle.listen_addr()).await.unwrap();
    let _ = refused.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(until_closed(&mut refused).await, "", "closed without an answer");
}

/// Sends `raw` on a new connection and reads until the router closes it (or `limit` passes).
async fn exchange(router: std::net::SocketAddr, raw: &[u8]) -> String {
    let mut client = TcpStream::connect(router).await.unwrap();
    client.write_all(raw).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), until_closed(&mut client)).await.expect("the router closes")
}

/// A replica of `default/iris` and an activator, both recording what reaches them.
async fn iris_with_a_replica() -> (Upstream, Upstream, skiff_router::Router, skiff_router::RouterHandle) {
    let (replica, activator) = (upstream("replica").await, upstream("activator").await);
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[replica.addr]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    (replica, activator, router, handle)
}

/// `CONNECT` used to be forwarded to the replica (and, refused there, retried on activators three
/// times). It and `TRACE` get 405 with `Allow` and the project's JSON error, and reach nobody;
/// after `CONNECT` the connection closes (a tunnel's bytes may follow), after `TRACE` it is reused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_trace_get_405_and_reach_no_upstream() {
    let (replica, activator, _router, handle) = iris_with_a_replica().await;
    let host = "iris.default.example.com";
    let connect =
        exchange(handle.listen_addr(), format!("CONNECT {host}:80 HTTP/1.1\r\nhost: {host}:80\r\n\r\n").as_bytes())
            .await;
    // TRACE, then (once answered) a GET on the same connection.
    let mut kept = TcpStream::connect(handle.listen_addr()).await.unwrap();
    kept.write_all(format!("TRACE /v1/models/iris HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes()).await.unwrap();
    let mut trace = Vec::new();
    while !trace.ends_with(b"}") {
        let mut chunk = [0u8; 1024];
        let n = kept.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed after TRACE: {}", String::from_utf8_lossy(&trace));
        trace.extend_from_slice(&chunk[..n]);
    }
    let trace = String::from_utf8(trace).unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
    let after = until_closed(&mut kept).await;
    for (method, answer) in [("CONNECT", &connect), ("TRACE", &trace)] {
        let lower = answer.to_ascii_lowercase();
        assert!(answer.starts_with("HTTP/1.1 405"), "{method}: {answer}");
        assert!(lower.contains("\r\nallow: get, head, post, put, patch, delete, options\r\n"), "{method}: {answer}");
        assert!(lower.contains("content-type: application/json"), "{method}: {answer}");
        assert!(answer.contains(&format!(r#"{{"error":"method {method} is not allowed"#)), "{method}: {answer}");
    }
    assert!(
        connect.to_ascii_lowercase().contains("connection: close") && connect.matches("HTTP/1.1").count() == 1,
        "{connect}"
    );
    assert!(
        after.starts_with("HTTP/1.1 200") && after.ends_with("ok\n"),
        "the connection serves on after TRACE: {after}"
    );
    // The same router still forwards the other methods to the replica.
    let (status, body) = Caller::new(handle.listen_addr()).post(host, "/v1/models/iris:predict").await;
    assert_eq!((status, body["id"].as_str()), (200, Some("replica")));
    assert_eq!(replica.seen().len(), 1, "only the POST reached the replica: {:?}", replica.seen());
    assert!(activator.seen().is_empty(), "{:?}", activator.seen());
}

/// A head Pingora cannot parse used to end in a silent close. Now it gets 400 and a short JSON
/// body that does not echo the head, then the close, as nginx answers; nothing reaches an upstream.
/// A client that closes its side mid-head still gets nothing: Pingora reports that as
/// `ConnectionClosed` ("while reading request headers"), not a parse error, and there is no
/// request to answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparseable_head_gets_400_with_a_short_body_then_the_close() {
    let (replica, activator, _router, handle) = iris_with_a_replica().await;
    let heads: [&[u8]; 6] = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03SECRET-TLS-HELLO\r\n\r\n",
        b"GET /v1/models/iris HTTP/1.1\r\nhost: iris.default.example.com\r\nno colon SECRET\r\n\r\n",
        b"GET /v1/models/iris HTTP/9.9\r\nhost: iris.default.example.com\r\nx-secret: SECRET\r\n\r\n",
        b"POST /v1/models/iris:predict HTTP/1.1\r\nhost: iris.default.example.com\r\ncontent-length: 1\r\ncontent-length: 2\r\nx: SECRET\r\n\r\nab",
        b"POST /v1/models/iris:predict HTTP/1.1\r\nhost: iris.default.example.com\r\ntransfer-encoding: gzip\r\nx: SECRET\r\n\r\n",
        b"GET /v1/models/iris HTTP/1.1\r\nhost: iris.default.example.com\r\nhost: other.default.example.com\r\nx: SECRET\r\n\r\n",
    ];
    for head in heads {
        let answer = exchange(handle.listen_addr(), head).await;
        let shown = String::from_utf8_lossy(head);
        assert!(answer.starts_with("HTTP/1.1 400"), "{shown:?} -> {answer:?}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{shown:?} -> {answer:?}");
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        let error: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{shown:?} -> {answer:?}: {e}"));
        assert!(error["error"].as_str().unwrap().starts_with("bad request:"), "{shown:?} -> {answer:?}");
        assert!(body.len() < 200 && !answer.contains("SECRET"), "short, and the head is not echoed: {answer:?}");
    }

    let mut half = TcpStream::connect(handle.listen_addr()).await.unwrap();
    half.write_all(b"GET /v1/models/iris HTTP/1.1\r\nhost: iris.default.e").await.unwrap();
    half.shutdown().await.unwrap();
    assert_eq!(until_closed(&mut half).await, "", "a head cut short by the client gets no answer");
    assert!(replica.seen().is_empty() && activator.seen().is_empty(), "{:?} {:?}", replica.seen(), activator.seen());
}
