//! gRPC-shaped calls (HTTP/2 prior knowledge, `application/grpc`, status in trailers) through the
//! activator and the queue-proxy: held at zero, forwarded over HTTP/2 once a replica is ready, the
//! answer's trailers relayed; held too long, a gRPC UNAVAILABLE instead of a JSON 504.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::wait_until;
use http::{HeaderMap, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use skiff_activator::{Activator, Limits, Poker, QueueProxy, QueueProxyConfig, RevisionConfig};
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::{Endpoints, RevisionEndpoints};
use skiff_http::args::AdmissionArgs;
use tokio::net::{TcpListener, TcpStream};

const PATH: &str = "/inference.GRPCInferenceService/ModelInfer";

/// An HTTP/2-only replica: answers `reply from <id>: <body>`, whether it saw `te: trailers`, and
/// `grpc-status: 0` in trailers.
async fn h2_replica(id: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let service = service_fn(move |request: Request<Incoming>| async move {
                let te = request.headers().get("te").cloned().unwrap_or_else(|| "-".parse().unwrap());
                let body = request.into_body().collect().await.unwrap().to_bytes();
                let trailers = HeaderMap::from_iter([("grpc-status".parse().unwrap(), "0".parse().unwrap())]);
                let text = format!("reply from {id}: {}", String::from_utf8_lossy(&body));
                let body = Full::new(Bytes::from(text)).with_trailers(async move { Some(Ok(trailers)) });
                let mut response = Response::new(body);
                response.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
                response.headers_mut().insert("x-seen-te", te);
                Ok::<_, std::convert::Infallible>(response)
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// What came back to the client.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
    trailers: HeaderMap,
}

/// A gRPC-shaped unary call over HTTP/2 prior knowledge to `addr`, for `revision` when given.
async fn grpc_call(addr: SocketAddr, revision: Option<&str>, body: &'static str) -> Answer {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let mut request = Request::post(format!("http://{addr}{PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(revision) = revision {
        request = request.header("x-skiff-revision", revision);
    }
    let response = sender.send_request(request.body(Full::new(Bytes::from_static(body.as_bytes()))).unwrap()).await;
    let response = response.unwrap();
    assert_eq!(response.version(), Version::HTTP_2);
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let body = String::from_utf8_lossy(&collected.to_bytes()).into_owned();
    Answer { status: parts.status, headers: parts.headers, body, trailers }
}

struct NoPoker;

impl Poker for NoPoker {
    fn poke(&self, _: &RevisionKey, _: usize) {}
}

/// An activator serving revision `ns/r` (no replica ready) on a free port.
async fn activator(timeout: Duration) -> (Arc<Activator>, Arc<RevisionEndpoints>, SocketAddr) {
    let key = RevisionKey::new("ns", "r");
    let endpoints = Arc::new(Endpoints::default());
    let revision = RevisionEndpoints::new(key.clone(), 0);
    endpoints.insert(revision.clone());
    let activator = Activator::new(endpoints, Arc::new(NoPoker), Limits::default());
    activator.upsert_revision(RevisionConfig { timeout, ..RevisionConfig::new(key) }).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(activator.clone().serve(listener, std::future::pending()));
    (activator, revision, addr)
}

#[tokio::test]
async fn a_held_grpc_call_is_forwarded_over_http2_once_a_replica_is_ready() {
    let (activator, revision, addr) = activator(Duration::from_secs(60)).await;
    let call = tokio::spawn(grpc_call(addr, Some("ns/r"), "cold"));
    wait_until("the call to be held", || activator.stats(&RevisionKey::new("ns", "r")).queued == 1).await;

    let replica = h2_replica("replica").await;
    revision.set_ready(vec![revision.replica(replica)]);
    let answer = call.await.unwrap();
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "reply from replica: cold");
    assert_eq!(answer.trailers["grpc-status"], "0", "the replica's status trailer reaches the client");
    assert_eq!(answer.headers["x-seen-te"], "trailers");
}

#[tokio::test]
async fn a_grpc_call_held_too_long_is_unavailable() {
    let (activator, _revision, addr) = activator(Duration::from_millis(200)).await;
    let answer = grpc_call(addr, Some("ns/r"), "never").await;
    assert_eq!(answer.status, StatusCode::OK, "gRPC errors travel in trailers");
    assert_eq!(answer.headers["content-type"], "application/grpc");
    assert_eq!(answer.trailers["grpc-status"], "14", "UNAVAILABLE");
    let message = answer.trailers["grpc-message"].to_str().unwrap();
    assert!(message.contains("had no ready replica"), "{message}");
    let metrics = activator.metrics_text();
    assert!(metrics.contains(r#"skiff_activator_requests_total{revision="ns/r",status="504"} 1"#), "{metrics}");
}

#[tokio::test]
async fn the_queue_proxy_carries_grpc_over_http2() {
    let container = h2_replica("container").await;
    let admission = AdmissionArgs { container_concurrency: 1, max_queued: None };
    let config = QueueProxyConfig { upstream: container, admission, ..QueueProxyConfig::default() };
    let proxy = QueueProxy::new(config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(proxy.serve(listener, std::future::pending()));

    let answer = grpc_call(addr, None, "sidecar").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "reply from container: sidecar");
    assert_eq!(answer.trailers["grpc-status"], "0");
}
