//! A request to a model that cannot be fetched is answered at once while a retry cannot help, and
//! held while one can (issue 33, finding 12). Under a real `skiff up` with a real store (the Hub's
//! layout over HTTP, `hf_hub.py`, cutting every transfer after 300 bytes): it answers 404 for
//! `org/nope`, so that revision fails with `ModelLoadFailed ... not found`, and a request to it gets
//! 503 naming that reason as soon as the failure is known, where it used to be held until the
//! activator's timeout (300 s) and then get 504. The cut transfer of `org/iris` fails too, but a
//! retry could pass: its request stays held meanwhile.

mod common;
#[path = "../../fetch/tests/common/stores.rs"]
mod stores;

use std::time::Duration;

use common::*;
use http::StatusCode;
use serde_json::Value;

/// A short back-off, so that the cut transfer is retried (and fails again) within the test.
const CONFIG: &str = "replicas:\n  restartBackoff: 500ms\n  maxRestartBackoff: 2s\n";

/// A liveness bound, far below the activator's 300 s: how long the test waits for the answer.
const BOUND: Duration = Duration::from_secs(30);

/// An iris manifest whose model is at `uri`.
fn at(name: &str, uri: &str) -> String {
    manifest(name, "unused", "minReplicas: 0").replace("file://./models/unused", uri)
}

fn failure(status: &Value, name: &str) -> Value {
    revision_of(status, name)["lastFailureInfo"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_cannot_be_fetched_is_refused_at_once_while_a_cut_transfer_is_held() {
    let model = std::fs::read(repo().join("examples/models/iris/model.onnx")).unwrap();
    let cutting = stores::hf_hub(&[("org/iris/model.onnx", &model)], &["--cut-after", "300"]);
    let dir = folder(&[]);
    let nope = format!("{}/org/nope/resolve/main/model.onnx", cutting.url);
    std::fs::write(dir.path().join("nope.yaml"), at("nope", &nope)).unwrap();
    let cut = format!("{}/org/iris/resolve/main/model.onnx", cutting.url);
    std::fs::write(dir.path().join("cut.yaml"), at("cut", &cut)).unwrap();
    let cache = dir.path().join("cache");
    let up = Up::start_with(dir.path(), CONFIG, &[], &["--model-cache", cache.to_str().unwrap()]);
    up.wait_for("both revisions", BOUND, |s| !revision_of(s, "nope").is_null() && !revision_of(s, "cut").is_null())
        .await;

    // Sent as soon as the revisions exist: held until the failure is known, then answered with it.
    let held = tokio::spawn({
        let url = format!("http://{}/v2/models/cut/infer", up.addr);
        async move { send(http::Method::POST, &url, IRIS_ROW.into(), &[]).await }
    });
    let reply = tokio::time::timeout(BOUND, up.infer("nope")).await.expect("the request was held").unwrap();
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{}", String::from_utf8_lossy(&reply.body));
    let error = reply.json()["error"].as_str().unwrap().to_owned();
    assert!(error.contains("nope-predictor-00001") && error.contains("ModelLoadFailed"), "{error}");
    assert!(error.contains(&format!("{nope}: not found")), "{error}");
    // The status says the same (`skiff get`'s view).
    let said = |s: &Value| failure(s, "nope")["reason"] == "ModelLoadFailed";
    let status = up.wait_for("the status's failure", BOUND, said).await;
    let message = failure(&status, "nope")["message"].as_str().unwrap().to_owned();
    assert!(error.contains(&message), "{message} in {error}");

    // The cut transfer has failed, more than once, and its request is still held: a retry may pass.
    up.wait_for("the cut transfer failed twice", BOUND, |s| {
        failure(s, "cut")["reason"] == "ModelLoadFailed" && revision_of(s, "cut")["backOffMs"].as_u64() >= Some(1000)
    })
    .await;
    assert!(!held.is_finished(), "a request to a revision a retry can fix was answered, not held");
    held.abort();
}
