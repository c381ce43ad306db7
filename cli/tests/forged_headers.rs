//! A replica cannot forge the data plane's own headers: a custom container
//! (`tests/fixtures/forging_replica.py`) writes `x-skiff-cold-start: 424242`, its own
//! `x-skiff-revision` and `x-skiff-forged` on every answer. Warm, through the router straight to
//! the replica, the client sees none of them but the router's revision; cold, through the
//! activator, it sees the activator's cold start, not the replica's.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// POSTs `{}` to the service `forger` through the router: the status and the answer's headers.
async fn call(up: &Up) -> (StatusCode, HeaderMap) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let request = Request::post(format!("http://{}/v1/models/forger:predict", up.addr))
        .header("host", "forger.default.example.com")
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    assert_eq!(body, Bytes::from_static(br#"{"forged": true}"#));
    (parts.status, parts.headers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cannot_forge_the_data_planes_headers() {
    let dir = folder(&[]);
    let script = repo().join("tests/fixtures/forging_replica.py");
    std::fs::write(dir.path().join("forger.yaml"), python_isvc("forger", &script, "")).unwrap();
    let up = Up::with_python(dir.path(), CONFIG);

    // Warm: its first replica is ready, and the router sends straight to it.
    up.wait_for("a ready replica", Duration::from_secs(60), |s| replicas_of(s, "forger").1 == 1).await;
    let (status, headers) = call(&up).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("x-skiff-cold-start"), None, "a warm answer met no cold start: {headers:?}");
    assert_eq!(headers.get("x-skiff-forged"), None, "{headers:?}");
    assert_eq!(headers["x-skiff-revision"], "forger-predictor-00001");

    // Cold: the activator holds the request and writes the cold start itself.
    up.wait_for("forger at zero", Duration::from_secs(60), |s| replicas_of(s, "forger") == (0, 0)).await;
    let (status, headers) = call(&up).await;
    assert_eq!(status, StatusCode::OK);
    let held = headers.get("x-skiff-cold-start").expect("a cold answer says so").to_str().unwrap();
    assert_ne!(held, "424242", "the replica's value reached the client");
    assert_eq!(headers.get("x-skiff-forged"), None, "{headers:?}");
    assert_eq!(headers["x-skiff-revision"], "forger-predictor-00001");
}
