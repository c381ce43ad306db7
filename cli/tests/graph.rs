//! KServe's InferenceGraph through `skiff up`, end to end: real `skiff up`, real `skiff-server`
//! replicas (the iris ONNX model under the names KServe's samples use), and KServe's e2e
//! `success_200_isvc` / `error_404_isvc` model servers as Python custom containers (stdlib only,
//! same answers). The graph manifests are KServe's own (`docs/samples/graph/*.yaml`, and the e2e
//! suite's `ig_test_*` rendered with the names below), one document per file. Each graph's answer
//! is checked against the models called one by one. Then a Sequence of three models at zero:
//! its first answer's time is printed beside one model's cold start (no timing assertion).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// KServe's `iris-input.json`.
const IRIS: &str = r#"{"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}"#;

/// KServe's `success_200_isvc` and `error_404_isvc` (`python/test_resources/graph/*/model.py`),
/// as a stdlib V1 server: `MODE=success` answers `{"predictions": [{"message": "SUCCESS"}]}`,
/// `MODE=error` 404 `{"detail": "Intentional 404 code"}`.
const NODE: &str = r#"
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
name = sys.argv[1]
port = int(os.environ["PORT"])
mode = os.environ["MODE"]
class Handler(BaseHTTPRequestHandler):
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.answer(200, {"status": "alive"})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != f"/v1/models/{name}:predict":
            return self.answer(404, {"error": f"no {self.path}"})
        if mode == "slow":
            time.sleep(3)
        if mode == "error":
            return self.answer(404, {"detail": "Intentional 404 code"})
        self.answer(200, {"predictions": [{"message": "SUCCESS"}]})
    def log_message(self, format, *args):
        pass
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

fn graph(name: &str, nodes: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1alpha1\nkind: InferenceGraph\nmetadata:\n  name: {name}\nspec:\n  nodes:\n{nodes}"
    )
}

/// The graphs of KServe's `docs/samples/graph/` (sequence, ensemble, splitter), as written there.
const SAMPLES: [(&str, &str); 3] = [
    (
        "sequence.yaml",
        "apiVersion: serving.kserve.io/v1alpha1
kind: InferenceGraph
metadata:
  name: model-chainer
spec:
  nodes:
    root:
      routerType: Sequence
      steps:
        - serviceName: sklearn-iris
        - serviceName: xgboost-iris
          data: $request
",
    ),
    (
        "ensemble.yaml",
        "apiVersion: serving.kserve.io/v1alpha1
kind: InferenceGraph
metadata:
  name: ensemble-model
spec:
  nodes:
    root:
      routerType: Ensemble
      steps:
        - serviceName: sklearn-iris
          name: sklearn-iris
        - serviceName: xgboost-iris
          name: xgboost-iris
",
    ),
    (
        "splitter.yaml",
        "apiVersion: serving.kserve.io/v1alpha1
kind: InferenceGraph
metadata:
  name: splitter-model
spec:
  nodes:
    root:
      routerType: Splitter
      steps:
        - serviceName: sklearn-iris
          weight: 20
        - serviceName: xgboost-iris
          weight: 80
",
    ),
];

/// KServe's e2e graph cases (`test/e2e/graph/test-resources/ig_test_*.yaml`) rendered with
/// `error_404_isvc_id: error-404-isvc` and `success_200_isvc_id: success-200-isvc`.
fn e2e_cases() -> Vec<(String, String)> {
    let switch_step = |dep: &str| {
        format!(
            "        - name: \"node1Step1\"\n          serviceName: error-404-isvc\n          condition: \"[@this].#(decision_picker==ERROR)\"\n{dep}"
        )
    };
    vec![
        (
            "scenario-3".into(),
            graph(
                "scenario-3",
                "    root:\n      routerType: Sequence\n      steps:\n      - serviceName: error-404-isvc\n        name: \"rootStep1\"\n        dependency: Hard\n      - serviceName: success-200-isvc\n        name: \"rootStep2\"\n        dependency: Soft\n",
            ),
        ),
        (
            "scenario-4".into(),
            graph(
                "scenario-4",
                "    root:\n      routerType: Switch\n      steps:\n      - name: \"rootStep1\"\n        serviceName: error-404-isvc\n        condition: \"[@this].#(decision_picker==ERROR)\"\n        dependency: Soft\n      - name: \"rootStep2\"\n        serviceName: success-200-isvc\n        condition: \"[@this].#(decision_picker==SUCCESS)\"\n        dependency: Soft\n",
            ),
        ),
        (
            "scenario-5".into(),
            graph(
                "scenario-5",
                &format!(
                    "    root:\n      routerType: Sequence\n      steps:\n      - name: \"rootStep1\"\n        nodeName: node1\n        dependency: Soft\n      - name: \"rootStep2\"\n        serviceName: success-200-isvc\n    node1:\n      routerType: Switch\n      steps:\n{}",
                    switch_step("")
                ),
            ),
        ),
        (
            "scenario-6".into(),
            graph(
                "scenario-6",
                &format!(
                    "    root:\n      routerType: Sequence\n      steps:\n      - name: \"rootStep1\"\n        nodeName: node1\n        dependency: Hard\n      - name: \"rootStep2\"\n        serviceName: success-200-isvc\n    node1:\n      routerType: Switch\n      steps:\n{}",
                    switch_step("          dependency: Hard\n")
                ),
            ),
        ),
        (
            "scenario-7".into(),
            graph(
                "scenario-7",
                "    root:\n      routerType: Ensemble\n      steps:\n      - name: \"rootStep1\"\n        serviceName: success-200-isvc\n      - name: \"rootStep2\"\n        serviceName: error-404-isvc\n",
            ),
        ),
        (
            "scenario-8".into(),
            graph(
                "scenario-8",
                "    root:\n      routerType: Ensemble\n      steps:\n      - name: \"rootStep1\"\n        serviceName: error-404-isvc\n        dependency: Hard\n      - name: \"rootStep2\"\n        serviceName: success-200-isvc\n      - name: \"rootStep3\"\n        serviceName: success-200-isvc\n",
            ),
        ),
        (
            "scenario-10".into(),
            graph(
                "scenario-10",
                "    root:\n      routerType: Sequence\n      steps:\n      - name: \"rootStep1\"\n        nodeName: node1\n        dependency: Hard\n      - name: \"rootStep2\"\n        serviceName: success-200-isvc\n    node1:\n      routerType: Splitter\n      steps:\n        - name: \"node1Step1\"\n          weight: 100\n          serviceName: error-404-isvc\n          condition: \"[@this].#(decision_picker==ERROR)\"\n          dependency: Hard\n",
            ),
        ),
    ]
}

struct Answer {
    status: StatusCode,
    steps: String,
    cold: Option<String>,
    body: Value,
}

async fn post(up: &Up, path: &str, host: Option<&str>, body: &str) -> Answer {
    let mut request = Request::post(format!("http://{}{path}", up.addr)).header("content-type", "application/json");
    if let Some(host) = host {
        request = request.header("host", host);
    }
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client.request(request.body(Full::new(Bytes::from(body.to_owned()))).unwrap()).await.unwrap();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (steps, cold) = (header("x-skiff-graph-steps").unwrap_or_default(), header("x-skiff-cold-start"));
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    Answer { status, steps, cold, body }
}

/// A model called directly, as a graph step calls it: `/v1/models/<name>:predict`.
async fn direct(up: &Up, service: &str, body: &str) -> Value {
    let answer = post(up, &format!("/serving/default/{service}/v1/models/{service}:predict"), None, body).await;
    assert_eq!(answer.status, StatusCode::OK, "{service}: {}", answer.body);
    answer.body
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
}

fn graphs_of(status: &Value) -> Vec<Value> {
    status["graphs"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kserves_graph_samples_run_unchanged_through_skiff_up() {
    let tmp = folder(&["sklearn-iris", "xgboost-iris"]);
    let dir = tmp.path();
    for name in ["sklearn-iris", "xgboost-iris"] {
        write(dir, &format!("{name}-isvc.yaml"), &manifest(name, name, ""));
    }
    let script = dir.join("graph_node.py");
    std::fs::write(&script, NODE).unwrap();
    write(dir, "success.yaml", &python_isvc("success-200-isvc", &script, "{name: MODE, value: success}"));
    write(dir, "error.yaml", &python_isvc("error-404-isvc", &script, "{name: MODE, value: error}"));
    write(dir, "slow.yaml", &python_isvc("slow-isvc", &script, "{name: MODE, value: slow}"));
    write(
        dir,
        "slow-graph.yaml",
        &format!(
            "{}  timeout: 1\n",
            graph("slow", "    root:\n      routerType: Sequence\n      steps: [{serviceName: slow-isvc}]\n")
        ),
    );
    for (file, text) in SAMPLES {
        write(dir, file, text);
    }
    for (name, text) in e2e_cases() {
        write(dir, &format!("{name}.yaml"), &text);
    }
    // Refused, each naming the field; and one naming an InferenceService that is not there.
    write(
        dir,
        "z-cycle.yaml",
        &graph(
            "cycle",
            "    root:\n      routerType: Sequence\n      steps: [{nodeName: a}]\n    a:\n      routerType: Sequence\n      steps: [{nodeName: root}]\n",
        ),
    );
    write(
        dir,
        "z-condition.yaml",
        &graph(
            "bad-condition",
            "    root:\n      routerType: Switch\n      steps: [{serviceName: sklearn-iris, condition: \"instances.#(x>1\"}]\n",
        ),
    );
    write(
        dir,
        "z-missing.yaml",
        &graph("missing", "    root:\n      routerType: Sequence\n      steps: [{serviceName: nowhere}]\n"),
    );
    let up = Up::with_python(dir, CONFIG);
    let status = up
        .wait_for("every graph listed", Duration::from_secs(120), |s| {
            let graphs = graphs_of(s);
            graphs.len() == 12 && graphs.iter().filter(|g| g["ready"] == true).count() == 11
        })
        .await;
    let errors = status["errors"].to_string();
    assert!(
        errors.contains("z-cycle.yaml: spec.nodes.a.steps[0].nodeName: the nodes form a cycle: root -> a -> root"),
        "{errors}"
    );
    assert!(errors.contains("z-condition.yaml: spec.nodes.root.steps[0].condition"), "{errors}");
    let missing = graphs_of(&status).into_iter().find(|g| g["name"] == "missing").unwrap();
    assert_eq!(missing["reason"], "no InferenceService nowhere in namespace default");
    assert_eq!(
        graphs_of(&status).iter().find(|g| g["name"] == "model-chainer").unwrap()["url"],
        "http://model-chainer.default.example.com"
    );

    // sequence.yaml: the answer is xgboost-iris's on the graph's request ($request).
    let xgb = direct(&up, "xgboost-iris", IRIS).await;
    let sk = direct(&up, "sklearn-iris", IRIS).await;
    let chain = post(&up, "/", Some("model-chainer.default.example.com"), IRIS).await;
    assert_eq!((chain.status, &chain.body), (StatusCode::OK, &xgb));
    assert_eq!(chain.steps.matches("status=200").count(), 2, "{}", chain.steps);
    eprintln!("model-chainer: {} x-skiff-graph-steps: {}", chain.body, chain.steps);
    // ensemble.yaml: both answers under the step names.
    let ensemble = post(&up, "/serving/default/ensemble-model", None, IRIS).await;
    assert_eq!(ensemble.body, json!({"sklearn-iris": sk, "xgboost-iris": xgb}));
    // splitter.yaml: both steps taken, about 20/80.
    let mut to_sklearn = 0;
    for _ in 0..40 {
        let split = post(&up, "/serving/default/splitter-model", None, IRIS).await;
        assert_eq!(split.body, xgb, "both models are iris");
        to_sklearn += usize::from(split.steps.contains("target=sklearn-iris"));
    }
    eprintln!("splitter-model: {to_sklearn}/40 to sklearn-iris (weight 20)");
    assert!((1..40).contains(&to_sklearn), "{to_sklearn}/40");

    // KServe's e2e cases and the answers its test expects.
    let error_picker = r#"{"decision_picker": "ERROR", "key1": {"name": "abc"}}"#;
    let success_picker = r#"{"decision_picker": "SUCCESS", "key1": {"name": "abc"}}"#;
    let no_match = r#"{"decision_picker": "NO_MATCH", "key1": {"name": "abc"}}"#;
    let success = json!({"predictions": [{"message": "SUCCESS"}]});
    let intentional = json!({"detail": "Intentional 404 code"});
    let path = |name: &str| format!("/serving/default/{name}");
    let a = post(&up, &path("scenario-3"), None, IRIS).await;
    assert_eq!((a.status, &a.body), (StatusCode::NOT_FOUND, &intentional), "scenario 3");
    assert_eq!(a.steps.matches("target=").count(), 1, "rootStep2 was not called: {}", a.steps);
    let a = post(&up, &path("scenario-4"), None, error_picker).await;
    assert_eq!((a.status, &a.body), (StatusCode::NOT_FOUND, &intentional), "scenario 4, error");
    let a = post(&up, &path("scenario-4"), None, success_picker).await;
    assert_eq!((a.status, &a.body), (StatusCode::OK, &success), "scenario 4, success");
    let a = post(&up, &path("scenario-4"), None, no_match).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "scenario 4, no match");
    assert_eq!(
        a.body,
        json!({"error": "Failed to process request", "cause": "None of the routes matched with the switch condition"})
    );
    let a = post(&up, &path("scenario-5"), None, error_picker).await;
    assert_eq!((a.status, &a.body), (StatusCode::OK, &success), "scenario 5");
    let a = post(&up, &path("scenario-6"), None, error_picker).await;
    assert_eq!((a.status, &a.body), (StatusCode::NOT_FOUND, &intentional), "scenario 6");
    let a = post(&up, &path("scenario-7"), None, success_picker).await;
    assert_eq!(a.body, json!({"rootStep1": success, "rootStep2": intentional}), "scenario 7");
    let a = post(&up, &path("scenario-8"), None, success_picker).await;
    assert_eq!((a.status, &a.body), (StatusCode::NOT_FOUND, &intentional), "scenario 8");
    let a = post(&up, &path("scenario-10"), None, IRIS).await;
    assert_eq!((a.status, &a.body), (StatusCode::NOT_FOUND, &intentional), "scenario 10");
    // The graph naming an InferenceService that is not there answers 500 naming the step.
    let a = post(&up, &path("missing"), None, IRIS).await;
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        a.body["cause"].as_str().unwrap().starts_with("step root[0]: InferenceService default/nowhere"),
        "{}",
        a.body
    );

    // A step that outlasts the graph's `timeout` ends the call with 504 naming it.
    let a = post(&up, &path("slow"), None, IRIS).await;
    assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT, "{}", a.body);
    assert_eq!(a.body["cause"], "the graph did not answer within its timeout (1s)");

    // `skiff get` lists the graphs.
    let get = std::process::Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["get", "--admin-port", &up.admin.port().to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&get.stdout);
    assert!(text.contains("INFERENCEGRAPHS"), "{text}");
    assert!(text.contains("default   model-chainer   http://model-chainer.default.example.com   True"), "{text}");
    assert!(text.contains("root (Sequence): sklearn-iris, xgboost-iris"), "{text}");
    up.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequence_of_three_models_at_zero_waits_for_about_one_cold_start() {
    let names = ["iris-a", "iris-b", "iris-c"];
    let tmp = folder(&names);
    let dir = tmp.path();
    for name in names {
        write(dir, &format!("{name}.yaml"), &manifest(name, name, "minReplicas: 0"));
    }
    write(
        dir,
        "chain.yaml",
        &graph(
            "chain",
            "    root:\n      routerType: Sequence\n      steps:\n      - {serviceName: iris-a, dependency: Hard}\n      - {serviceName: iris-b, data: $request, dependency: Hard}\n      - {serviceName: iris-c, data: $request, dependency: Hard}\n",
        ),
    );
    let up = Up::start(dir, CONFIG);
    let at_zero = |s: &Value| names.iter().all(|n| replicas_of(s, n) == (0, 0));
    up.wait_for("all three at zero", Duration::from_secs(120), at_zero).await;

    let started = Instant::now();
    let chain = post(&up, "/serving/default/chain", None, IRIS).await;
    let graph_cold = started.elapsed();
    assert_eq!(chain.status, StatusCode::OK, "{}", chain.body);
    let want = direct(&up, "iris-c", IRIS).await;
    assert_eq!(chain.body, want);
    assert!(chain.cold.is_some(), "the graph's answer says it met a cold start: {}", chain.steps);

    up.wait_for("all three at zero again", Duration::from_secs(120), at_zero).await;
    let started = Instant::now();
    let single = post(&up, "/serving/default/iris-a/v1/models/iris-a:predict", None, IRIS).await;
    let one_cold = started.elapsed();
    assert_eq!(single.status, StatusCode::OK);
    println!(
        "graph cold start: a Sequence of 3 models at zero answered in {:.0} ms; one model from zero in {:.0} ms \
         (ratio {:.2}; three cold starts in turn would be about 3.00)\nx-skiff-graph-steps: {}",
        graph_cold.as_secs_f64() * 1e3,
        one_cold.as_secs_f64() * 1e3,
        graph_cold.as_secs_f64() / one_cold.as_secs_f64(),
        chain.steps
    );
    up.stop();
}
