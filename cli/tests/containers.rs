//! Custom containers in `skiff up`, end to end: a KServe V1 model server written in Python (stdlib
//! only) as a predictor's `containers`, its image mapped to `python3` through `--image-map`,
//! behind a queue-proxy. From zero, a request through the router is answered by the Python
//! process, `skiff get` and the web app's logs show the replica, and it goes back to zero.
//! Invalid `containers` are refused naming the field.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// A KServe V1 model server: `GET /v1/models/<m>` (readiness) and `POST /v1/models/<m>:predict`
/// answering the sum of each instance, with its pid and environment; one stdout line per prediction.
const SERVER: &str = r#"
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = sys.argv[1:]
name = args[args.index("--model_name") + 1]
port = int(args[args.index("--http_port") + 1])
assert port == int(os.environ["PORT"]), (port, os.environ["PORT"])

class Handler(BaseHTTPRequestHandler):
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == f"/v1/models/{name}":
            self.answer(200, {"name": name, "ready": True})
        else:
            self.answer(404, {"error": f"no {self.path}"})

    def do_POST(self):
        if self.path != f"/v1/models/{name}:predict":
            return self.answer(404, {"error": f"no {self.path}"})
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        predictions = [sum(row) for row in request["instances"]]
        print(f"predicted {predictions}", flush=True)
        self.answer(200, {"predictions": predictions, "pid": os.getpid(),
                          "greeting": os.environ.get("GREETING"), "revision": os.environ.get("K_REVISION")})

    def log_message(self, format, *args):
        pass

print(f"serving {name} on port {port}", flush=True)
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

fn isvc(name: &str, containers: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: {name}\nspec:\n  predictor:\n    \
         minReplicas: 0\n    maxReplicas: 2\n    containerConcurrency: 4\n    containers:\n{containers}"
    )
}

const ECHO: &str = "      - name: kserve-container
        image: registry.example.com/python-http:3
        args: [model.py, --model_name, echo, --http_port, \"8080\"]
        env: [{name: GREETING, value: hello}]
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /v1/models/echo, port: 8080}}
";

fn replicas(status: &Value) -> (u64, u64) {
    let service = status["services"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "echo").cloned());
    let revision = service.map(|s| s["revisions"][0].clone()).unwrap_or(Value::Null);
    (revision["desired"].as_u64().unwrap_or(u64::MAX), revision["ready"].as_u64().unwrap_or(u64::MAX))
}

/// Reads the server-sent events of `url` until one holds `needle`; returns what was read.
async fn read_events_until(url: &str, needle: &str) -> String {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut body = client.get(url.parse().unwrap()).await.unwrap().into_body();
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !text.contains(needle) {
        let frame = tokio::time::timeout_at(deadline.into(), body.frame()).await;
        let Ok(Some(Ok(frame))) = frame else { panic!("no {needle:?} in the log stream: {text}") };
        if let Some(data) = frame.data_ref() {
            text.push_str(&String::from_utf8_lossy(data));
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_container_scales_from_zero_and_back() {
    let queue_proxy = std::path::PathBuf::from(env!("CARGO_BIN_EXE_skiff")).with_file_name("skiff-activator");
    assert!(queue_proxy.exists(), "{} is missing: build the workspace", queue_proxy.display());
    let dir = folder(&[]);
    let path = dir.path();
    std::fs::write(path.join("model.py"), SERVER).unwrap();
    std::fs::write(path.join("images.json"), r#"{"python-http": ["python3", "-u"]}"#).unwrap();
    std::fs::write(path.join("echo.yaml"), isvc("echo", ECHO)).unwrap();
    let two = "      - command: [python3]\n      - command: [python3]\n";
    std::fs::write(path.join("bad-two.yaml"), isvc("two", two)).unwrap();
    std::fs::write(path.join("bad-image.yaml"), isvc("image", "      - image: nginx:1.27\n")).unwrap();
    let port = "      - command: [python3]\n        ports: [{containerPort: 0}]\n";
    std::fs::write(path.join("bad-port.yaml"), isvc("port", port)).unwrap();
    let map = path.join("images.json").display().to_string();
    let up = Up::start_with_env(path, CONFIG, &[("SKIFF_IMAGE_MAP", map.as_str())]);

    // Invalid containers are refused, naming the file and the field.
    let status = up
        .wait_for("the refusals", Duration::from_secs(30), |s| s["errors"].as_array().is_some_and(|e| e.len() == 3))
        .await;
    let errors = status["errors"].to_string();
    for expected in [
        "bad-image.yaml: spec.predictor.containers[0].command: image \\\"nginx:1.27\\\" is not in the image map",
        "bad-port.yaml: spec.predictor.containers[0].ports[0].containerPort: 0 is not a port (1 to 65535)",
        "bad-two.yaml: spec.predictor.containers: skiff up runs exactly one container (kserve-container); found 2",
    ] {
        assert!(errors.contains(expected), "{expected} not in {errors}");
    }

    // Ready at zero (its first replica started, then went idle).
    up.wait_for("echo at zero", Duration::from_secs(60), |s| replicas(s) == (0, 0)).await;

    // From zero: the router's request is held by the activator and answered by the Python process.
    let url = format!("http://{}/v1/models/echo:predict", up.addr);
    let reply = send(Method::POST, &url, Bytes::from_static(br#"{"instances": [[1, 2], [3, 4.5]]}"#), &[]).await;
    let reply = reply.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply.body));
    let answer = reply.json();
    assert_eq!(answer["predictions"], json!([3, 7.5]));
    assert_eq!(
        (answer["greeting"].as_str(), answer["revision"].as_str()),
        (Some("hello"), Some("echo-predictor-00001"))
    );
    assert_eq!(reply.revision.as_deref(), Some("echo-predictor-00001"));
    let pid = answer["pid"].as_u64().unwrap();

    // `skiff get` lists it with its replica.
    let get = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["get", "--admin-port", &up.admin.port().to_string()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&get.stdout);
    assert!(get.status.success() && table.contains("echo-predictor-00001"), "{table}");

    // The web app's logs tab streams the container's stdout.
    let pods = format!("http://{}/models/api/namespaces/default/inferenceservices/echo/pods", up.admin);
    let pods = send(Method::GET, &pods, Bytes::new(), &[]).await.unwrap().json();
    let pod = pods.as_array().and_then(|p| p.first()).map(|p| p["name"].as_str().unwrap().to_owned());
    let pod = pod.unwrap_or_else(|| panic!("no replica in {pods}"));
    let logs = format!("http://{}/models/api/namespaces/default/pods/{pod}/logs?container=kserve-container", up.admin);
    let events = read_events_until(&logs, "predicted [3, 7.5]").await;
    assert!(events.contains("serving echo on port"), "{events}");

    // Idle: back to zero, and the Python process is gone.
    up.wait_for("echo back at zero", Duration::from_secs(60), |s| replicas(s) == (0, 0)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "the container process {pid} outlived its replica");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up.stop().success());
}
