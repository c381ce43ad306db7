//! Readiness from route tables and replica states, the REST endpoints recognised, and the gRPC
//! answers decoded by prost (a real protobuf decoder) with the fields of KServe's messages.

use std::collections::HashSet;

use prost::Message;
use skiff_api::traffic::TrafficTarget;

use super::*;

fn target(revision: &str, percent: u32) -> TrafficTarget {
    TrafficTarget { revision_name: revision.to_owned(), percent, tag: None, latest_revision: false }
}

fn service(namespace: &str, name: &str, targets: Vec<TrafficTarget>) -> ServiceRoute {
    ServiceRoute { namespace: namespace.to_owned(), name: name.to_owned(), targets, ..ServiceRoute::default() }
}

/// Readiness reasons with these revisions (`namespace/name`) holding a ready replica.
fn reasons(routes: Vec<ServiceRoute>, draining: bool, activator: bool, ready: &[&str]) -> Vec<String> {
    let table = RouteTable::new("example.com", routes);
    let ready: HashSet<String> = ready.iter().map(|r| (*r).to_owned()).collect();
    not_ready(&table, draining, activator, |key| ready.contains(&key.to_string()))
}

#[test]
fn a_router_with_no_service_is_ready_unless_draining() {
    assert!(reasons(vec![], false, false, &[]).is_empty());
    assert_eq!(reasons(vec![], true, true, &[]), ["the router is draining: shutting down"]);
}

#[test]
fn a_service_is_ready_when_each_revision_with_weight_has_a_replica_or_an_activator_holds_its_requests() {
    let iris = || service("default", "iris", vec![target("iris-00002", 90), target("iris-00001", 10)]);
    let both = ["default/iris-00002", "default/iris-00001"];
    assert!(reasons(vec![iris()], false, false, &both).is_empty());
    let missing = reasons(vec![iris()], false, false, &["default/iris-00002"]);
    assert_eq!(missing, ["default/iris: revision iris-00001 has no ready replica and no activator is ready"]);
    assert!(reasons(vec![iris()], false, true, &[]).is_empty(), "at zero, the activator holds the requests");
}

#[test]
fn a_revision_without_weight_does_not_count_but_a_service_without_any_is_not_ready() {
    let canary = service("default", "iris", vec![target("iris-00002", 100), target("iris-00001", 0)]);
    assert!(reasons(vec![canary], false, false, &["default/iris-00002"]).is_empty());
    let none = service("ml", "iris", vec![target("iris-00001", 0)]);
    assert_eq!(reasons(vec![none], false, true, &[]), ["ml/iris: its predictor has no revision taking traffic"]);
    let empty = service("ml", "empty", vec![]);
    assert_eq!(reasons(vec![empty], false, true, &[]), ["ml/empty: its predictor has no revision taking traffic"]);
}

#[test]
fn a_transformer_and_an_explainer_must_be_ready_too() {
    let mut full = service("default", "iris", vec![target("iris-predictor-00001", 100)]);
    full.transformer = vec![target("iris-transformer-00001", 100)];
    full.explainer = vec![target("iris-explainer-00001", 100)];
    let got = reasons(vec![full], false, false, &["default/iris-predictor-00001", "default/iris-explainer-00001"]);
    assert_eq!(got, ["default/iris: revision iris-transformer-00001 has no ready replica and no activator is ready"]);
}

#[test]
fn reasons_name_each_service_that_is_not_ready_in_order() {
    let routes = vec![
        service("b", "two", vec![target("two-00001", 100)]),
        service("a", "one", vec![target("one-00001", 100)]),
        service("a", "ok", vec![target("ok-00001", 100)]),
    ];
    let got = reasons(routes, false, false, &["a/ok-00001"]);
    assert_eq!(got.len(), 2);
    assert!(got[0].starts_with("a/one:") && got[1].starts_with("b/two:"), "{got:?}");
}

#[test]
fn only_gets_of_the_three_server_level_paths_are_answered() {
    let get = http::Method::GET;
    assert_eq!(rest(&get, "/v2/health/live"), Some(Ask::Live));
    assert_eq!(rest(&get, "/v2/health/ready?verbose=1"), Some(Ask::Ready));
    assert_eq!(rest(&get, "/v2"), Some(Ask::Metadata));
    for path in ["/v2/", "/v2/models/iris", "/v2/health", "/v1/models", "/healthz"] {
        assert_eq!(rest(&get, path), None, "{path}");
    }
    assert_eq!(rest(&http::Method::POST, "/v2/health/ready"), None);
}

#[test]
fn rest_answers_say_live_ready_and_the_routers_metadata() {
    assert_eq!(json(Ask::Live, &[]), (200, serde_json::json!({ "live": true })));
    assert_eq!(json(Ask::Ready, &[]), (200, serde_json::json!({ "ready": true })));
    let (status, body) = json(Ask::Ready, &["a/one: no replica".to_owned(), "b/two: none".to_owned()]);
    assert_eq!(status, 503);
    assert_eq!(body["error"], "not ready: a/one: no replica; b/two: none");
    let (status, body) = json(Ask::Metadata, &[]);
    assert_eq!(status, 200);
    assert_eq!(body, serde_json::json!({ "name": "skiff-router", "version": VERSION, "extensions": [] }));
}

#[derive(Clone, PartialEq, prost::Message)]
struct ServerReadyResponse {
    #[prost(bool, tag = "1")]
    ready: bool,
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

#[test]
fn grpc_answers_decode_as_kserves_messages() {
    // ServerLiveResponse has the same shape as ServerReadyResponse (bool field 1).
    assert!(ServerReadyResponse::decode(protobuf(Ask::Live, &[]).as_slice()).unwrap().ready);
    assert!(ServerReadyResponse::decode(protobuf(Ask::Ready, &[]).as_slice()).unwrap().ready);
    assert!(!ServerReadyResponse::decode(protobuf(Ask::Ready, &["x".to_owned()]).as_slice()).unwrap().ready);
    let metadata = ServerMetadataResponse::decode(protobuf(Ask::Metadata, &[]).as_slice()).unwrap();
    assert_eq!(metadata, ServerMetadataResponse { name: NAME.into(), version: VERSION.into(), extensions: vec![] });
}

#[test]
fn a_grpc_frame_is_flag_length_and_message() {
    let message = protobuf(Ask::Metadata, &[]);
    let frame = grpc_frame(&message);
    assert_eq!(frame[0], 0);
    assert_eq!(u32::from_be_bytes(frame[1..5].try_into().unwrap()) as usize, message.len());
    assert_eq!(&frame[5..], message.as_slice());
}
