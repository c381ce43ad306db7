//! Cold starts longer than the request timeout, through `skiff up`: a server that loads for 4 s
//! before it listens (as an LLM server downloads and loads its weights), behind an
//! InferenceService whose `timeout` is 1 s. With `serving.knative.dev/progress-deadline` the
//! request sent at zero is held until the server is ready and answered; with a progress deadline
//! the load outlasts, the answer is a 504 that names the deadline.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use serde_json::Value;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

fn isvc(name: &str, progress_deadline: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: {name}
  annotations: {{serving.knative.dev/progress-deadline: {progress_deadline}}}
spec:
  predictor:
    minReplicas: 0
    timeout: 1
    containers:
      - name: kserve-container
        image: registry.example.com/python-http:3
        args: [slow.py]
        env: [{{name: LOAD_SECS, value: \"4\"}}]
        readinessProbe: {{httpGet: {{path: /ready, port: 8080}}}}
"
    )
}

fn at_zero(status: &Value, name: &str) -> bool {
    let service = status["services"].as_array().and_then(|s| s.iter().find(|s| s["name"] == name).cloned());
    let revision = service.map(|s| s["revisions"][0].clone()).unwrap_or(Value::Null);
    (revision["desired"].as_u64(), revision["ready"].as_u64()) == (Some(0), Some(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_past_the_timeout_is_held_for_the_progress_deadline_and_a_504_names_it() {
    let dir = folder(&[]);
    let path = dir.path();
    std::fs::copy(repo().join("tests/fixtures/slow_load.py"), path.join("slow.py")).unwrap();
    std::fs::write(path.join("patient.yaml"), isvc("patient", "2m")).unwrap();
    std::fs::write(path.join("hasty.yaml"), isvc("hasty", "2s")).unwrap();
    let up = Up::with_python(path, CONFIG);
    for name in ["patient", "hasty"] {
        up.wait_for(&format!("{name} at zero"), Duration::from_secs(60), |s| at_zero(s, name)).await;
    }

    let get = |name: &str| {
        let url = format!("http://{}/v1/models/x", up.addr);
        let host = format!("{name}.default.example.com");
        async move { send(Method::GET, &url, Bytes::new(), &[("host", host.as_str())]).await.unwrap() }
    };
    let patient = get("patient").await;
    assert_eq!(patient.status, StatusCode::OK, "held past its 1 s timeout: {}", String::from_utf8_lossy(&patient.body));
    assert_eq!(patient.json()["loaded"], true);

    let hasty = get("hasty").await;
    assert_eq!(hasty.status, StatusCode::GATEWAY_TIMEOUT, "{}", String::from_utf8_lossy(&hasty.body));
    assert_eq!(
        hasty.json()["error"],
        "revision default/hasty-predictor-00001 had no ready replica within 2s, its progress deadline \
         (serving.knative.dev/progress-deadline)"
    );
    assert!(up.stop().success());
}
