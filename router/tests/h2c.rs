//! HTTP/2 cleartext through the router: a gRPC-shaped call (prior knowledge, `application/grpc`,
//! status in trailers) reaches a warm replica over HTTP/2 and comes back with its body and
//! trailers; a revision with no ready replica goes to the activator over HTTP/2 with the revision
//! header, and through the real activator to the replica once it is ready; nothing to reach is a
//! gRPC UNAVAILABLE; HTTP/1 clients share the listener; an idle HTTP/2 connection is closed.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use skiff_activator::{Activator, Limits, Poker, RevisionConfig};
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::Endpoints;
use skiff_router::DownstreamLimits;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const HOST: &str = "iris.default.example.com";
const PATH: &str = "/inference.GRPCInferenceService/ModelInfer";

/// An HTTP/2-only server (as a gRPC replica or the activator is to an HTTP/2 client): answers
/// `reply from <id>: <request body>`, what it saw in headers, and `grpc-status: 0` in trailers.
async fn h2_upstream(id: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let service = service_fn(move |request: Request<Incoming>| async move {
                let seen = |name: &str| request.headers().get(name).cloned().unwrap_or_else(|| "-".parse().unwrap());
                let (revision, te) = (seen("x-skiff-revision"), seen("te"));
                let authority = request.uri().authority().map_or("-".to_owned(), |a| a.to_string());
                let body = request.into_body().collect().await.unwrap().to_bytes();
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", "0".parse().unwrap());
                trailers.insert("grpc-message", "ok".parse().unwrap());
                let text = format!("reply from {id}: {}", String::from_utf8_lossy(&body));
                let body = Full::new(Bytes::from(text)).with_trailers(async move { Some(Ok(trailers)) });
                let mut response = Response::new(body);
                response.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
                response.headers_mut().insert("x-seen-revision", revision);
                response.headers_mut().insert("x-seen-te", te);
                response.headers_mut().insert("x-seen-authority", authority.parse().unwrap());
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

/// A gRPC-shaped unary call over HTTP/2 prior knowledge to `router`.
async fn grpc_call(router: SocketAddr, body: &'static str) -> Answer {
    let stream = TcpStream::connect(router).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let request = Request::post(format!("http://{HOST}{PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.version(), Version::HTTP_2);
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let body = String::from_utf8_lossy(&collected.to_bytes()).into_owned();
    Answer { status: parts.status, headers: parts.headers, body, trailers }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_reaches_a_warm_replica_over_http2_with_its_trailers() {
    let (replica, activator) = (h2_upstream("replica").await, upstream("activator").await);
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[replica]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);

    for call in ["first", "second"] {
        let answer = grpc_call(handle.listen_addr(), call).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.body, format!("reply from replica: {call}"));
        assert_eq!(answer.trailers["grpc-status"], "0", "the status trailer reaches the client");
        assert_eq!(answer.trailers["grpc-message"], "ok");
        assert_eq!(answer.headers["content-type"], "application/grpc");
        assert_eq!(answer.headers["x-skiff-revision"], "iris-predictor-00001");
        assert_eq!(answer.headers["x-seen-te"], "trailers", "gRPC's te: trailers passes");
        assert_eq!(answer.headers["x-seen-authority"], HOST, "the client's authority is kept");
        assert_eq!(answer.headers["x-seen-revision"], "-", "replicas are not told the revision");
    }
    assert!(activator.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_at_zero_sends_http2_to_the_activator() {
    let activator = h2_upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[]);
    let (router, handle) = router(endpoints, activator);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);

    let answer = grpc_call(handle.listen_addr(), "cold").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "reply from activator: cold");
    assert_eq!(answer.trailers["grpc-status"], "0");
    assert_eq!(answer.headers["x-seen-revision"], "default/iris-predictor-00001");
}

/// Counts pokes: the activator asking the autoscaler for a replica.
#[derive(Default)]
struct Pokes(AtomicUsize);

impl Poker for Pokes {
    fn poke(&self, _: &RevisionKey, _: usize) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_scales_a_revision_from_zero_through_the_activator() {
    let key = RevisionKey::new("default", "iris-predictor-00001");
    let endpoints = Arc::new(Endpoints::default());
    let revision = revision(&endpoints, "default/iris-predictor-00001", 1, &[]);
    let pokes = Arc::new(Pokes::default());
    let activator = Activator::new(endpoints.clone(), pokes.clone(), Limits::default());
    activator.upsert_revision(RevisionConfig::new(key.clone())).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let activator_addr = listener.local_addr().unwrap();
    tokio::spawn(activator.clone().serve(listener, std::future::pending()));
    let (router, handle) = router(endpoints, activator_addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);

    let call = tokio::spawn(grpc_call(handle.listen_addr(), "from zero"));
    let held = || activator.stats(&key).queued == 1 && pokes.0.load(Ordering::Acquire) >= 1;
    for _ in 0..2000 {
        if held() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(held(), "the activator holds the call and asked for a replica");

    let replica = h2_upstream("replica").await;
    revision.set_ready(vec![revision.replica(replica)]);
    let answer = call.await.unwrap();
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "reply from replica: from zero");
    assert_eq!(answer.trailers["grpc-status"], "0", "the status trailer crosses router and activator");
    assert_eq!(answer.headers["x-skiff-revision"], "iris-predictor-00001");
    assert_eq!(answer.headers["x-seen-te"], "trailers");

    let warm = grpc_call(handle.listen_addr(), "warm").await;
    assert_eq!(warm.body, "reply from replica: warm");
    assert_eq!(warm.trailers["grpc-status"], "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_with_nothing_to_reach_is_unavailable() {
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[dead_addr()]);
    let (router, handle) = router(endpoints, dead_addr());
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);

    let answer = grpc_call(handle.listen_addr(), "lost").await;
    assert_eq!(answer.status, StatusCode::OK, "gRPC errors travel in trailers");
    assert_eq!(answer.headers["content-type"], "application/grpc");
    assert_eq!(answer.trailers["grpc-status"], "14", "UNAVAILABLE");
    let message = answer.trailers["grpc-message"].to_str().unwrap();
    assert!(message.contains("connecting to"), "{message}");
    assert!(answer.body.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_clients_share_the_listener_even_with_a_head_shorter_than_the_preface() {
    let activator = upstream("activator").await;
    let (_router, handle) = router(Arc::new(Endpoints::default()), activator.addr);
    let mut client = TcpStream::connect(handle.listen_addr()).await.unwrap();
    client.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok\n"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http2_connection_is_closed_after_the_head_deadline() {
    let activator = upstream("activator").await;
    let limits = DownstreamLimits { header_timeout: Duration::from_secs(1), ..DownstreamLimits::default() };
    let (_router, handle) = router_with(Arc::new(Endpoints::default()), activator.addr, limits);
    let stream = TcpStream::connect(handle.listen_addr()).await.unwrap();
    let (_sender, connection) =
        hyper::client::conn::http2::handshake::<_, _, Full<Bytes>>(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    // A liveness bound, not a timing check: the router must end the connection by itself.
    let ended = tokio::time::timeout(Duration::from_secs(60), connection).await;
    assert!(ended.is_ok(), "the router kept an idle HTTP/2 connection open");
}

/// A loopback address nothing listens on.
fn dead_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}
