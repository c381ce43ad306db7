//! OpenAI's API through `skiff up`, without a service's Host: an OpenAI-style server written in
//! Python (stdlib only) as a custom container, at zero, is listed by `GET /openai/v1/models`, and a
//! `POST /openai/v1/chat/completions` naming it in `"model"` scales it from zero and streams its
//! server-sent events back one by one: the server writes each event only once the client has read
//! the one before (real files between the two processes: an ordering check, not a timing one).

mod common;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// Events the server streams before `[DONE]`.
const TOKENS: usize = 4;

/// An OpenAI-style chat server: `GET /health`, and `POST /openai/v1/chat/completions` streaming
/// `TOKENS` chunks then `[DONE]` as server-sent events (chunked, as uvicorn writes them). Before
/// each event it writes the event's number to `$EVENTS_DIR/written`, and after it waits (at most
/// 30 s) for the client's `$EVENTS_DIR/read-<n>` before the next.
const SERVER: &str = r#"
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

name, port, events = sys.argv[1], int(os.environ["PORT"]), os.environ["EVENTS_DIR"]
TOKENS = int(os.environ["TOKENS"])

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self.answer(200, {})
        self.answer(404, {"error": f"no {self.path}"})

    def event(self, data):
        chunk = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.flush()

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/openai/v1/chat/completions" or request.get("model") != name:
            return self.answer(404, {"error": f"no {self.path} for {request.get('model')}"})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for n in range(1, TOKENS + 2):
            last = n == TOKENS + 1
            delta = {"choices": [{"index": 0, "delta": {"content": f"token-{n}"}}], "model": name}
            with open(os.path.join(events, "written.tmp"), "w") as f:
                f.write(str(n))
            os.replace(os.path.join(events, "written.tmp"), os.path.join(events, "written"))
            self.event("[DONE]" if last else json.dumps(delta))
            deadline = time.time() + 30
            while not last and not os.path.exists(os.path.join(events, f"read-{n}")) and time.time() < deadline:
                time.sleep(0.01)
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"#;

fn isvc(events: &Path) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: tiny-llm
spec:
  predictor:
    minReplicas: 0
    containers:
      - name: kserve-container
        image: registry.example.com/python-http:3
        args: [chat.py, tiny-llm]
        env: [{{name: EVENTS_DIR, value: {}}}, {{name: TOKENS, value: \"{TOKENS}\"}}]
        ports: [{{containerPort: 8080}}]
        readinessProbe: {{httpGet: {{path: /health, port: 8080}}}}
",
        events.display()
    )
}

fn replicas(status: &Value) -> (u64, u64) {
    let service = status["services"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "tiny-llm").cloned());
    let revision = service.map(|s| s["revisions"][0].clone()).unwrap_or(Value::Null);
    (revision["desired"].as_u64().unwrap_or(u64::MAX), revision["ready"].as_u64().unwrap_or(u64::MAX))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_completion_naming_a_python_server_at_zero_streams_its_events_one_by_one() {
    let dir = folder(&[]);
    let path = dir.path();
    let events = path.join("events");
    std::fs::create_dir(&events).unwrap();
    std::fs::write(path.join("chat.py"), SERVER).unwrap();
    std::fs::write(path.join("images.json"), r#"{"python-http": ["python3", "-u"]}"#).unwrap();
    std::fs::write(path.join("tiny-llm.yaml"), isvc(&events)).unwrap();
    let map = path.join("images.json").display().to_string();
    let up = Up::start_with_env(path, CONFIG, &[("SKIFF_IMAGE_MAP", map.as_str())]);
    up.wait_for("tiny-llm at zero", Duration::from_secs(60), |s| replicas(s) == (0, 0)).await;

    // The router's own model list, without a service's Host.
    let models = send(Method::GET, &format!("http://{}/openai/v1/models", up.addr), Bytes::new(), &[]).await.unwrap();
    assert_eq!(models.status, StatusCode::OK);
    let ids: Vec<Value> = models.json()["data"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect();
    assert_eq!(ids, [json!("tiny-llm")]);

    // From zero, routed by the body's "model": held while the Python server starts, then streamed.
    let body = json!({"messages": [{"role": "user", "content": "Count"}], "model": "tiny-llm", "stream": true});
    let request = Request::post(format!("http://{}/openai/v1/chat/completions", up.addr))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-skiff-revision"], "tiny-llm-predictor-00001");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut answer = response.into_body();
    let (mut buffer, mut received) = (String::new(), Vec::new());
    // A liveness bound, not a timing check.
    let bound = Duration::from_secs(60);
    while let Some(frame) = tokio::time::timeout(bound, answer.frame()).await.expect("the stream stalled") {
        let Ok(data) = frame.unwrap().into_data() else { continue };
        buffer.push_str(std::str::from_utf8(&data).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            received.push(event);
            let n = received.len();
            // The server is at this event, not the next: it waits for the file written below.
            let written = std::fs::read_to_string(events.join("written")).unwrap_or_default();
            assert_eq!(written, n.to_string(), "event {n} arrived only after the server wrote more");
            std::fs::write(events.join(format!("read-{n}")), "").unwrap();
        }
    }
    let tokens: Vec<Value> = received[..TOKENS]
        .iter()
        .map(|event| serde_json::from_str::<Value>(event.strip_prefix("data: ").unwrap().trim()).unwrap())
        .map(|chunk| chunk["choices"][0]["delta"]["content"].clone())
        .collect();
    let expected: Vec<Value> = (1..=TOKENS).map(|n| json!(format!("token-{n}"))).collect();
    assert_eq!(tokens, expected);
    assert_eq!(received[TOKENS..], ["data: [DONE]\n\n".to_owned()]);
    assert!(up.stop().success());
}
