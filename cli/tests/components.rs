//! KServe's InferenceService components in `skiff up`, end to end and from zero, with KServe's own
//! Python SDK (the `kserve` package from PyPI) on the other side:
//! - a transformer written with `kserve.Model` (its `preprocess` turns millimetres into the
//!   centimetres the iris predictor takes) in front of the ONNX predictor, reaching it through
//!   the address Skiff passes in `--predictor_host`;
//! - an explainer (`kserve.Model.explain`) that asks the predictor too;
//! - the predictor's request logger, whose sink is an HTTP server here that checks every
//!   CloudEvent's headers and body;
//! - KServe's gRPC and REST clients through the router (`tests/conformance/kserve_clients.py`),
//!   the first gRPC call scaling a revision from zero, then NVIDIA's Triton clients (HTTP and gRPC,
//!   sync, asyncio and streams: `tests/conformance/triton_clients.py`) by the same Host and authority.
//!
//! Every component scales from zero on its own and back to zero.

mod common;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// An explainer on KServe's SDK: it asks the predictor, then explains.
const EXPLAINER: &str = r#"
from kserve import Model, ModelServer, model_server

class Explainer(Model):
    def __init__(self, name):
        super().__init__(name)
        self.ready = True

    async def explain(self, payload, headers=None):
        answer = await self.predict(payload, headers)
        return {"explanations": [{"feature": "petal length", "weight": 0.9}] * len(answer["predictions"]),
                "predictions": answer["predictions"]}

if __name__ == "__main__":
    args, _ = model_server.parser.parse_known_args()
    ModelServer().start([Explainer(args.model_name)])
"#;

fn triton_python() -> String {
    let python = repo().join(".bench/triton-venv/bin/python");
    assert!(python.is_file(), "{} is missing: run `PEERS=triton bench/peers/setup.sh`", python.display());
    python.display().to_string()
}

/// The iris predictor (ONNX, logged to `sink`), a transformer and an explainer, each from zero.
fn flower(sink: &str) -> String {
    let python = kserve_python();
    let component = |script: &str| {
        format!(
            "    minReplicas: 0\n    containers:\n      - name: kserve-container\n        command: [{python}, -u, {script}]\n        \
             args: [--http_port, \"8080\", --enable_grpc, \"false\"]\n        \
             readinessProbe: {{httpGet: {{path: /v1/models/flower}}}}\n"
        )
    };
    format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: flower\nspec:\n  predictor:\n    \
         minReplicas: 0\n    logger: {{url: \"{sink}\", mode: all}}\n    model:\n      modelFormat: {{name: onnx}}\n      \
         storageUri: file://./models/iris\n  transformer:\n{}  explainer:\n{}",
        component("transformer.py"),
        component("explainer.py")
    )
}

/// A CloudEvents sink: every request's headers and body, answered 200.
async fn sink() -> (String, mpsc::UnboundedReceiver<(HeaderMap, Bytes)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/events", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let tx = tx.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                let tx = tx.clone();
                async move {
                    let (parts, body) = request.into_parts();
                    let _ = tx.send((parts.headers, body.collect().await.unwrap().to_bytes()));
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
                }
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    (url, rx)
}

/// `(revision, desired, ready)` of every revision of every service.
fn revisions(status: &Value) -> Vec<(String, u64, u64)> {
    let services = status["services"].as_array().cloned().unwrap_or_default();
    services
        .iter()
        .flat_map(|s| s["revisions"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["name"].as_str().unwrap_or("").to_owned(),
                r["desired"].as_u64().unwrap_or(99),
                r["ready"].as_u64().unwrap_or(99),
            )
        })
        .collect()
}

fn all_at_zero(status: &Value, count: usize) -> bool {
    let revisions = revisions(status);
    revisions.len() == count && revisions.iter().all(|(_, desired, ready)| *desired == 0 && *ready == 0)
}

/// The iris labels of a V1 answer (each prediction holds the model's two outputs).
fn labels(answer: &Value) -> Vec<i64> {
    let predictions = answer["predictions"].as_array().cloned().unwrap_or_default();
    predictions.iter().map(|p| p["label"].as_i64().unwrap_or(-1)).collect()
}

async fn post(up: &Up, host: &str, path: &str, body: &Value) -> (StatusCode, Value) {
    let url = format!("http://{}{path}", up.addr);
    let headers = [("host", host), ("content-type", "application/json")];
    let reply = send(Method::POST, &url, Bytes::from(body.to_string()), &headers).await.unwrap();
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    (reply.status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transformer_explainer_logger_and_grpc_each_from_zero() {
    let (sink_url, mut events) = sink().await;
    let dir = folder(&["iris"]);
    let path = dir.path();
    std::fs::write(path.join("transformer.py"), TRANSFORMER).unwrap();
    std::fs::write(path.join("explainer.py"), EXPLAINER).unwrap();
    std::fs::write(path.join("flower.yaml"), flower(&sink_url)).unwrap();
    std::fs::write(path.join("iris.yaml"), manifest("iris", "iris", "minReplicas: 0")).unwrap();
    let up = Up::start(path, CONFIG);

    up.wait_for("every component of both services at zero", Duration::from_secs(90), |s| all_at_zero(s, 4)).await;
    let status = up.status().await;
    let names: Vec<String> = revisions(&status).into_iter().map(|(name, ..)| name).collect();
    for revision in
        ["flower-predictor-00001", "flower-transformer-00001", "flower-explainer-00001", "iris-predictor-00001"]
    {
        assert!(names.contains(&revision.to_owned()), "{revision} in {names:?}");
    }

    // The transformer, from zero, turns millimetres into centimetres before the predictor.
    let host = "flower.default.example.com";
    let millimetres = json!({"instances": [[68.0, 28.0, 48.0, 14.0], [51.0, 35.0, 14.0, 2.0]]});
    let centimetres = json!({"instances": [[6.8, 2.8, 4.8, 1.4], [5.1, 3.5, 1.4, 0.2]]});
    let (status, transformed) = post(&up, host, "/v1/models/flower:predict", &millimetres).await;
    assert_eq!(status, StatusCode::OK, "{transformed}");
    assert_eq!(labels(&transformed), [1, 0], "{transformed}");
    // The predictor alone, at its own host: the same answer for centimetres, another for millimetres.
    let predictor = "flower-predictor.default.example.com";
    let (status, direct) = post(&up, predictor, "/v1/models/flower:predict", &centimetres).await;
    assert_eq!((status, &direct["predictions"]), (StatusCode::OK, &transformed["predictions"]), "{direct}");
    let (status, raw) = post(&up, predictor, "/v1/models/flower:predict", &millimetres).await;
    assert_eq!(status, StatusCode::OK, "{raw}");
    assert_ne!(raw["predictions"], transformed["predictions"], "millimetres reached the predictor untransformed");

    // The explainer, from zero, answers `:explain` and asks the predictor.
    let (status, explained) = post(&up, host, "/v1/models/flower:explain", &centimetres).await;
    assert_eq!(status, StatusCode::OK, "{explained}");
    assert_eq!(labels(&explained), [1, 0], "{explained}");
    assert_eq!(explained["explanations"].as_array().map(Vec::len), Some(2), "{explained}");

    // Four inferences reached the predictor (through the transformer, the explainer and twice
    // directly): a request and a response CloudEvent each, paired by ce-id.
    let mut received = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while received.len() < 8 {
        let next = tokio::time::timeout_at(deadline.into(), events.recv()).await;
        received.push(next.expect("8 CloudEvents within 20 s").expect("the sink runs"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(events.try_recv().is_err(), "more than 8 CloudEvents");
    let mut by_id: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
    for (headers, body) in &received {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        assert_eq!(header("ce-specversion"), "1.0");
        assert_eq!(header("ce-source"), "http://flower-predictor.default");
        assert_eq!(header("ce-inferenceservicename"), "flower");
        assert_eq!(header("ce-namespace"), "default");
        assert_eq!(header("ce-component"), "predictor");
        assert_eq!(header("ce-revision"), "flower-predictor-00001");
        assert_eq!(header("content-type"), "application/json");
        let body: Value = serde_json::from_slice(body).unwrap();
        let kind = header("ce-type");
        match kind.as_str() {
            "org.kubeflow.serving.inference.request" => assert!(body["instances"].is_array(), "{body}"),
            "org.kubeflow.serving.inference.response" => assert!(body["predictions"].is_array(), "{body}"),
            other => panic!("unexpected ce-type {other}"),
        }
        by_id.entry(header("ce-id")).or_default().push((kind, body));
    }
    assert_eq!(by_id.len(), 4, "ids: {:?}", by_id.keys());
    let logged_requests: Vec<&Value> =
        by_id.values().flatten().filter(|(k, _)| k.ends_with("request")).map(|(_, b)| b).collect();
    assert_eq!(logged_requests.iter().filter(|b| **b == &centimetres).count(), 3, "{logged_requests:?}");
    assert_eq!(logged_requests.iter().filter(|b| **b == &millimetres).count(), 1, "{logged_requests:?}");

    // KServe's gRPC and REST clients through the router; the first gRPC call wakes `iris` from zero.
    let iris_at_zero = |s: &Value| {
        revisions(s).iter().any(|(name, desired, ready)| name == "iris-predictor-00001" && *desired == 0 && *ready == 0)
    };
    assert!(iris_at_zero(&up.status().await), "iris is not at zero before the gRPC client calls");
    let (router, models) = (up.addr.to_string(), path.join("models"));
    let output = tokio::task::spawn_blocking(move || {
        Command::new(kserve_python())
            .arg(repo().join("tests/conformance/kserve_clients.py"))
            .args(["--rest", &format!("http://{router}"), "--grpc", &router, "--host", "iris.default.example.com"])
            .args(["--only", "iris", "--models"])
            .arg(&models)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "KServe's clients through the router failed (see above)");
    assert!(stdout.contains("ok   gRPC ModelInfer iris (raw contents): probabilities matches ONNX Runtime"));
    assert!(stdout.contains("ok   REST iris (binary_data=True): answered in binary"));

    // NVIDIA's Triton clients by the same Host and authority (the router's Host routing; server-level
    // paths and calls without an authority are the router's own).
    let router = up.addr.to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(triton_python())
            .arg(repo().join("tests/conformance/triton_clients.py"))
            .args(["--http", &router, "--grpc", &router, "--host", "iris.default.example.com"])
            .args(["--models", "iris", "--error-model", ""])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "Triton's clients through the router failed (see above)");
    assert!(stdout.contains("ok   gRPC stream iris/five-rows in order: matches ONNX Runtime"));
    assert!(stdout.contains("ok   HTTP model config iris follows the graph"));

    // Idle, every component goes back to zero on its own.
    up.wait_for("every component back at zero", Duration::from_secs(90), |s| all_at_zero(s, 4)).await;
    assert!(up.stop().success());
}
