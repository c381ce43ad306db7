//! KServe's collocation in `skiff up`, end to end: an ONNX predictor with a `transformer-container`
//! beside its `model`, as in KServe's collocation samples (`--predictor_host=localhost:8085`). Each
//! replica runs `skiff-server` on a free port and the transformer (KServe's Python SDK: millimetres
//! in, centimetres to the model) pointed at that port, behind a queue-proxy that takes the
//! traffic. The answer through the router is checked against the plain model's.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use serde_json::{Value, json};

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// The iris model with the transformer collocated, the way KServe's samples write it.
fn collocated() -> String {
    let python = kserve_python();
    format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: flower\nspec:\n  predictor:\n    \
         model:\n      modelFormat: {{name: onnx}}\n      storageUri: file://./models/iris\n    containers:\n      \
         - name: transformer-container\n        command: [{python}, -u, transformer.py]\n        \
         args: [--model_name=flower, --http_port=8080, --enable_grpc, \"false\", \"--predictor_host=localhost:8085\"]\n        \
         ports: [{{containerPort: 8080, protocol: TCP}}]\n        readinessProbe: {{httpGet: {{path: /v1/models/flower, port: 8080}}}}\n"
    )
}

async fn predict(up: &Up, host: &str, model: &str, body: &Value) -> (StatusCode, Value) {
    let url = format!("http://{}/v1/models/{model}:predict", up.addr);
    let reply = send(Method::POST, &url, Bytes::from(body.to_string()), &[("host", host)]).await.unwrap();
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    (reply.status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn ready(status: &Value, revision: &str) -> bool {
    let services = status["services"].as_array().cloned().unwrap_or_default();
    services
        .iter()
        .flat_map(|s| s["revisions"].as_array().cloned().unwrap_or_default())
        .any(|r| r["name"] == revision && r["ready"].as_u64().is_some_and(|ready| ready >= 1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collocated_transformer_answers_through_the_model_server_beside_it() {
    let dir = folder(&["iris"]);
    let path = dir.path();
    std::fs::write(path.join("transformer.py"), TRANSFORMER).unwrap();
    std::fs::write(path.join("flower.yaml"), collocated()).unwrap();
    std::fs::write(path.join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let up = Up::start(path, CONFIG);

    let status = up
        .wait_for("both predictors ready", Duration::from_secs(120), |s| {
            ready(s, "flower-predictor-00001") && ready(s, "iris-predictor-00001")
        })
        .await;
    let names: Vec<String> = status["services"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["revisions"].as_array().cloned().unwrap_or_default())
        .map(|r| r["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("transformer")), "collocation is no component of its own: {names:?}");

    let millimetres = json!({"instances": [[68.0, 28.0, 48.0, 14.0], [51.0, 35.0, 14.0, 2.0]]});
    let centimetres = json!({"instances": [[6.8, 2.8, 4.8, 1.4], [5.1, 3.5, 1.4, 0.2]]});
    // Through the transformer (millimetres to centimetres), then skiff-server on the iris model.
    let (code, through) = predict(&up, "flower.default.example.com", "flower", &millimetres).await;
    assert_eq!(code, StatusCode::OK, "{through}");
    // The same model served alone: centimetres give that answer, millimetres another.
    let (code, plain) = predict(&up, "iris.default.example.com", "iris", &centimetres).await;
    assert_eq!(code, StatusCode::OK, "{plain}");
    assert_eq!(through["predictions"], plain["predictions"], "{through} vs {plain}");
    let labels: Vec<i64> =
        plain["predictions"].as_array().unwrap().iter().map(|p| p["label"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(labels, [1, 0], "{plain}");
    let (code, raw) = predict(&up, "iris.default.example.com", "iris", &millimetres).await;
    assert_eq!(code, StatusCode::OK, "{raw}");
    assert_ne!(raw["predictions"], through["predictions"], "the transformer's change is in the answer");
}
