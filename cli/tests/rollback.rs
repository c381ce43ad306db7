//! Rollback on `skiff up`, with real replicas and manifest edits: a rollout keeps the previous
//! revision known at zero replicas; restoring its spec routes to it with no new revision (answers
//! come from it); `canaryTrafficPercent: 0` after a full rollout changes nothing and says so; and
//! revisions beyond the bound of kept ones are collected, so restoring theirs makes a new one.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

fn service(status: &Value) -> &Value {
    status["services"].as_array().and_then(|s| s.iter().find(|s| s["name"] == "iris")).unwrap_or(&Value::Null)
}

fn rev(n: u32) -> String {
    format!("iris-predictor-{n:05}")
}

/// Traffic (name, percent), the kept revisions, and the rolled-out pair, as `skiff get -o json` has them.
fn rollout(status: &Value) -> (Vec<(String, u64)>, Vec<String>, Value, Value) {
    let svc = service(status);
    let traffic = svc["revisions"]
        .as_array()
        .map(|r| {
            r.iter()
                .map(|r| (r["name"].as_str().unwrap_or("").to_owned(), r["percent"].as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    let kept = svc["keptRevisions"]
        .as_array()
        .map(|k| k.iter().map(|n| n.as_str().unwrap_or("").to_owned()).collect())
        .unwrap_or_default();
    (traffic, kept, svc["latestRolledoutRevision"].clone(), svc["previousRolledoutRevision"].clone())
}

fn rolled_out_to(status: &Value, latest: u32, previous: u32, kept: &[u32]) -> bool {
    let (traffic, kept_now, l, p) = rollout(status);
    traffic == [(rev(latest), 100)]
        && kept_now == kept.iter().map(|n| rev(*n)).collect::<Vec<_>>()
        && l == rev(latest).as_str()
        && p == rev(previous).as_str()
        && service(status)["revisions"][0]["ready"].as_u64() >= Some(1)
}

/// Waits until no replica serves the model folder `models/<model>` any more (scaled to zero).
fn wait_no_replica_of(path: &Path, model: &str) {
    let pattern = format!("{}/./models/{model}", path.display());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = std::process::Command::new("pgrep").args(["-f", &pattern]).output().unwrap();
        if found.stdout.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "a replica of models/{model} still runs: {:?}", found.stdout);
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn answered_by(up: &Up, revision: &str) {
    for _ in 0..5 {
        let reply = up.infer("iris").await.unwrap();
        assert_eq!((reply.status.as_u16(), reply.revision.as_deref()), (200, Some(revision)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_a_kept_revisions_spec_routes_to_it_and_old_ones_are_collected() {
    let dir = folder(&["a", "b", "c", "d"]);
    let path = dir.path();
    let write = |model: &str, extra: &str| {
        std::fs::write(path.join("iris.yaml"), manifest("iris", model, &format!("minReplicas: 1\n{extra}"))).unwrap();
    };
    write("a", "");
    let up = Up::start(path, CONFIG);
    up.wait_for("revision 1 rolled out", Duration::from_secs(60), |s| {
        service(s)["latestRolledoutRevision"] == rev(1).as_str()
            && service(s)["revisions"][0]["ready"].as_u64() >= Some(1)
    })
    .await;

    // v1 -> v2: v1 is kept, known but at zero replicas.
    write("b", "");
    up.wait_for("v2 rolled out, v1 kept", Duration::from_secs(60), |s| rolled_out_to(s, 2, 1, &[1])).await;
    wait_no_replica_of(path, "a");
    answered_by(&up, &rev(2)).await;

    // canaryTrafficPercent: 0 after the full rollout changes nothing, and the status says so.
    write("b", "canaryTrafficPercent: 0");
    let status = up
        .wait_for("the idle canary told", Duration::from_secs(30), |s| {
            s["warnings"]
                .as_array()
                .is_some_and(|w| w.iter().any(|w| w.as_str().is_some_and(|w| w.contains("changes nothing"))))
        })
        .await;
    let warning = status["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|w| w.as_str().filter(|w| w.contains("changes nothing")));
    assert!(
        warning.is_some_and(|w| w.ends_with(&format!(
            "iris.yaml: spec.predictor.canaryTrafficPercent: 0 changes nothing: {} is rolled out and takes all \
             traffic, as in KServe; to roll back, restore the spec of {}",
            rev(2),
            rev(1)
        ))),
        "{warning:?}"
    );
    assert!(rolled_out_to(&status, 2, 1, &[1]), "{status:#}");
    answered_by(&up, &rev(2)).await;
    let get = std::process::Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["get", "--admin-port", &up.admin.port().to_string()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&get.stdout);
    assert!(
        get.status.success() && table.lines().any(|l| l.starts_with("warning: ") && l.contains("changes nothing")),
        "skiff get says so: {table}"
    );

    // Restoring v1's spec routes to v1: no third revision, answers from v1, v2 kept.
    write("a", "");
    let status =
        up.wait_for("v1 rolled out again, v2 kept", Duration::from_secs(60), |s| rolled_out_to(s, 1, 2, &[2])).await;
    assert_eq!(service(&status)["latestCreatedRevision"], rev(1).as_str(), "{status:#}");
    assert!(status["warnings"].as_array().is_none_or(|w| w.is_empty()), "{status:#}");
    answered_by(&up, &rev(1)).await;
    wait_no_replica_of(path, "b");

    // v3, then v4: the kept revisions are bounded (two); v2, the oldest beyond them, is collected.
    write("c", "");
    up.wait_for("v3 rolled out", Duration::from_secs(60), |s| rolled_out_to(s, 3, 1, &[2, 1])).await;
    write("d", "");
    up.wait_for("v4 rolled out, v2 collected", Duration::from_secs(60), |s| rolled_out_to(s, 4, 3, &[1, 3])).await;
    // So v2's spec is a new revision now.
    write("b", "");
    up.wait_for("v5 for v2's spec", Duration::from_secs(60), |s| rolled_out_to(s, 5, 4, &[3, 4])).await;
    answered_by(&up, &rev(5)).await;
    for model in ["a", "c", "d"] {
        wait_no_replica_of(path, model);
    }

    let exit = up.stop();
    assert!(exit.success(), "skiff up exit {exit}");
}
