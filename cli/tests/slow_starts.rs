//! Replicas that take long to start, through `skiff up` (issue 25, kserve#1247: Knative's old fixed
//! activation timeout scaled GPU pods to zero while they still waited for a node). The autoscaler
//! keeps the replica of a revision that is starting although the request that woke it is gone, and
//! gives up only after the revision's progress deadline plus Knative's 30 s buffer, saying so.
//!
//! Two custom containers behind InferenceServices at zero (`initial-scale: 0`), with a stable window
//! of 6 s and a grace period of 1 s:
//! - `slow` loads for 12 s, longer than the stable window plus the grace period, with a progress
//!   deadline of 3 s: the request that wakes it gets the activator's 504 at 3 s, and nothing waits
//!   any more. The replica is kept while it loads, becomes ready, and stays to answer the next
//!   request.
//! - `stuck` never listens, with a progress deadline of 2 s. Its request gets the activator's 504 at
//!   2 s; the autoscaler gives up once its count has been 0 for 32 s (2 s + 30 s): zero replicas, and
//!   the reason, `ProgressDeadlineExceeded`, in the status, `skiff get` and the web app's events.
//!   The next request starts it again. The wait is bounded by Knative's 30 s buffer: about 45 s.

mod common;

use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use serde_json::Value;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n  \
                      allow-zero-initial-scale: \"true\"\n";

fn isvc(name: &str, load_secs: u32, annotations: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: {name}
  annotations: {{autoscaling.knative.dev/initial-scale: \"0\"{annotations}}}
spec:
  predictor:
    minReplicas: 0
    containers:
      - name: kserve-container
        image: registry.example.com/python-http:3
        args: [slow.py]
        env: [{{name: LOAD_SECS, value: \"{load_secs}\"}}]
        readinessProbe: {{httpGet: {{path: /ready, port: 8080}}}}
"
    )
}

/// (desired, ready, replica processes started) of `name`'s revision.
fn counts(status: &Value, name: &str) -> (Option<u64>, Option<u64>, Option<u64>) {
    let r = revision_of(status, name);
    (r["desired"].as_u64(), r["ready"].as_u64(), r["spawns"].as_u64())
}

fn get(up: &Up, name: &str) -> impl Future<Output = Result<Reply, String>> + use<> {
    let url = format!("http://{}/v1/models/x", up.addr);
    let host = format!("{name}.default.example.com");
    async move { send(Method::GET, &url, Bytes::new(), &[("host", host.as_str())]).await }
}

/// The web app's events of `name`: (reason, message).
async fn events(up: &Up, name: &str) -> Vec<(String, String)> {
    up.events(name).await.iter().map(reason_and_message).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_start_is_kept_once_nothing_waits_and_a_stuck_one_is_given_up_after_its_deadline() {
    let dir = folder(&[]);
    let path = dir.path();
    std::fs::copy(repo().join("tests/fixtures/slow_load.py"), path.join("slow.py")).unwrap();
    std::fs::write(path.join("slow.yaml"), isvc("slow", 12, ", serving.knative.dev/progress-deadline: 3s")).unwrap();
    let stuck = ", serving.knative.dev/progress-deadline: 2s";
    std::fs::write(path.join("stuck.yaml"), isvc("stuck", 100_000, stuck)).unwrap();
    let up = Up::with_python(path, CONFIG);
    for name in ["slow", "stuck"] {
        let zero = |s: &Value| counts(s, name) == (Some(0), Some(0), Some(0));
        up.wait_for(&format!("{name} at zero, never started"), Duration::from_secs(60), zero).await;
    }

    // Both woken; each request gets the activator's 504 at its revision's progress deadline.
    let (slow, stuck) = (tokio::spawn(get(&up, "slow")), tokio::spawn(get(&up, "stuck")));
    for held in [slow.await.unwrap().unwrap(), stuck.await.unwrap().unwrap()] {
        assert_eq!(held.status, StatusCode::GATEWAY_TIMEOUT, "{}", String::from_utf8_lossy(&held.body));
    }

    let waiting = |s: &Value| revision_of(s, "slow")["queued"].as_u64();
    let gone = |s: &Value| waiting(s) == Some(0) && counts(s, "slow") == (Some(1), Some(0), Some(1));
    up.wait_for("slow's request answered, nothing held, its replica starting", Duration::from_secs(5), gone).await;

    // slow: kept while it loads, past the stable window and grace period with nothing waiting; ready
    // once loaded, from the one replica process started; and kept to answer the next request.
    let status = up.wait_for("slow ready", Duration::from_secs(60), |s| counts(s, "slow").1 == Some(1)).await;
    assert_eq!(counts(&status, "slow"), (Some(1), Some(1), Some(1)), "{:#}", revision_of(&status, "slow"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = up.status().await;
    assert_eq!(counts(&status, "slow"), (Some(1), Some(1), Some(1)), "not dropped once ready");
    let answer = get(&up, "slow").await.unwrap();
    assert_eq!(answer.status, StatusCode::OK, "{}", String::from_utf8_lossy(&answer.body));
    assert_eq!(counts(&up.status().await, "slow").2, Some(1), "answered by the replica that loaded");

    // stuck: given up after its deadline plus 30 s, and told.
    let why = "no replica became ready within the progress deadline (2s, serving.knative.dev/progress-deadline) plus \
               30s while no request waited: scaled to zero; the next request starts it again";
    let status = up
        .wait_for("stuck given up", Duration::from_secs(80), |s| {
            revision_of(s, "stuck")["autoscaler"]["timedOut"] == why
        })
        .await;
    assert_eq!(counts(&status, "stuck").0, Some(0), "{:#}", revision_of(&status, "stuck"));
    assert!(
        events(&up, "stuck").await.contains(&("ProgressDeadlineExceeded".to_owned(), why.to_owned())),
        "{:?}",
        events(&up, "stuck").await
    );
    let get_output = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["get", "--admin-port", &up.admin.port().to_string()])
        .output()
        .unwrap();
    let table = String::from_utf8(get_output.stdout).unwrap();
    assert!(table.contains(&format!("stuck-predictor-00001: ProgressDeadlineExceeded: {why}")), "{table}");

    // The next request starts it again.
    let again = tokio::spawn(get(&up, "stuck"));
    let woken =
        |s: &Value| counts(s, "stuck").0 == Some(1) && revision_of(s, "stuck")["autoscaler"]["timedOut"].is_null();
    up.wait_for("stuck woken again", Duration::from_secs(10), woken).await;
    assert_eq!(again.await.unwrap().unwrap().status, StatusCode::GATEWAY_TIMEOUT);
    assert!(up.stop().success());
}
