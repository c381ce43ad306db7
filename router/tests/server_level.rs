//! The Open Inference Protocol's server-level endpoints on the router itself: `/v2/health/live`,
//! `/v2/health/ready` and `/v2` over HTTP/1.1 with a Host that names no service, and `ServerLive`,
//! `ServerReady` and `ServerMetadata` over gRPC with such an authority, are answered by the router
//! (ready while every service can serve, with the reasons when not); with a service's Host they
//! still reach that service.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use serde_json::json;
use skiff_dataplane::endpoints::Endpoints;
use skiff_router::{DownstreamLimits, Router, RouterConfig, RouterHandle};
use support::*;
use tokio::net::TcpStream;

/// A router with no activator, so a revision without replicas cannot be served.
fn router_without_activator(endpoints: Arc<Endpoints>) -> (Router, RouterHandle) {
    let config = RouterConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        domain: "example.com".to_owned(),
        activator: None,
        threads: 1,
        grace_period: Duration::ZERO,
        downstream: DownstreamLimits::default(),
    };
    let router = Router::new(config, endpoints).unwrap();
    let handle = router.start().unwrap();
    (router, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_answers_live_ready_and_metadata_to_a_host_that_names_no_service() {
    let replica = upstream("replica").await;
    let endpoints = Arc::new(Endpoints::default());
    let revision = revision(&endpoints, "default/iris-predictor-00001", 0, &[replica.addr]);
    let (router, handle) = router_without_activator(endpoints);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let caller = Caller::new(handle.listen_addr());
    let own_host = handle.listen_addr().to_string();

    for host in [own_host.as_str(), "localhost", "10.0.0.7:8080"] {
        assert_eq!(caller.get(host, "/v2/health/live").await, (200, json!({ "live": true })), "{host}");
        assert_eq!(caller.get(host, "/v2/health/ready").await, (200, json!({ "ready": true })), "{host}");
        let (status, metadata) = caller.get(host, "/v2").await;
        assert_eq!(status, 200);
        assert_eq!(metadata["name"], "skiff-router");
        assert_eq!(metadata["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(metadata["extensions"], json!([]));
    }
    assert!(replica.seen().is_empty(), "answered by the router itself");

    revision.set_ready(vec![]);
    let (status, body) = caller.get(&own_host, "/v2/health/ready").await;
    assert_eq!(status, 503);
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("default/iris: revision iris-predictor-00001 has no ready replica"), "{error}");
    assert_eq!(caller.get(&own_host, "/v2/health/live").await.0, 200, "live while not ready");

    router.publish(vec![]);
    assert_eq!(caller.get(&own_host, "/v2/health/ready").await.0, 200, "nothing to serve: ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_at_zero_is_ready_while_an_activator_can_hold_its_requests() {
    let activator = upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let caller = Caller::new(handle.listen_addr());
    assert_eq!(caller.get("localhost", "/v2/health/ready").await, (200, json!({ "ready": true })));
    assert!(activator.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_naming_a_service_still_reaches_the_service() {
    let TwoRevisions { new, caller, handle: _handle, .. } =
        two_revisions("default", vec![target("iris-predictor-00002", 100, None)]).await;
    for path in ["/v2/health/ready", "/v2/health/live", "/v2"] {
        let (status, body) = caller.get("iris.default.example.com", path).await;
        assert_eq!(status, 200);
        assert_eq!(body["id"], "new", "{path} went to the service");
        assert_eq!(body["path"], path);
    }
    assert_eq!(new.seen().len(), 3);
    let (status, _) = caller.get("gone.default.example.com", "/v2/health/ready").await;
    assert_eq!(status, 404, "a service host naming nothing is still unknown");
    let (status, body) = caller.post("localhost", "/v2/health/ready").await;
    assert_eq!(status, 404, "only GET is the router's own: {body}");
}

#[derive(Clone, PartialEq, prost::Message)]
struct BoolResponse {
    #[prost(bool, tag = "1")]
    value: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ServerMetadataResponse {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    version: String,
    #[prost(string, repeated, tag = "3")]
    extensions: Vec<String>,
}

/// A unary gRPC call with an empty request message to `router`, authority `authority`: the
/// response message (prefix removed) and the grpc-status.
async fn grpc_empty_call(router: SocketAddr, authority: &str, method: &str) -> (Vec<u8>, String) {
    let stream = TcpStream::connect(router).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let request = Request::post(format!("http://{authority}/inference.GRPCInferenceService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let collected = response.into_body().collect().await.unwrap();
    let status =
        collected.trailers().and_then(|t| t.get("grpc-status")).map_or("-".into(), |s| s.to_str().unwrap().into());
    let body = collected.to_bytes();
    let message = if body.len() >= 5 {
        assert_eq!(u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize, body.len() - 5);
        body[5..].to_vec()
    } else {
        body.to_vec()
    };
    (message, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_server_live_ready_and_metadata_are_answered_by_the_router() {
    let replica = upstream("replica").await;
    let endpoints = Arc::new(Endpoints::default());
    let revision = revision(&endpoints, "default/iris-predictor-00001", 0, &[replica.addr]);
    let (router, handle) = router_without_activator(endpoints);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let addr = handle.listen_addr();
    let authority = addr.to_string();

    let (live, status) = grpc_empty_call(addr, &authority, "ServerLive").await;
    assert_eq!(status, "0");
    assert!(BoolResponse::decode(live.as_slice()).unwrap().value);
    let (ready, status) = grpc_empty_call(addr, &authority, "ServerReady").await;
    assert_eq!(status, "0");
    assert!(BoolResponse::decode(ready.as_slice()).unwrap().value);
    let (metadata, status) = grpc_empty_call(addr, &authority, "ServerMetadata").await;
    assert_eq!(status, "0");
    let metadata = ServerMetadataResponse::decode(metadata.as_slice()).unwrap();
    assert_eq!(metadata.name, "skiff-router");
    assert_eq!(metadata.version, env!("CARGO_PKG_VERSION"));
    assert!(metadata.extensions.is_empty());

    revision.set_ready(vec![]);
    let (ready, status) = grpc_empty_call(addr, &authority, "ServerReady").await;
    assert_eq!(status, "0", "not ready is an answer, not an error");
    assert!(!BoolResponse::decode(ready.as_slice()).unwrap().value);
    assert!(replica.seen().is_empty());
}
