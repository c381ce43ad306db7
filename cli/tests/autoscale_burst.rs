//! A burst at zero through the real data plane of `skiff up` (router, activator, autoscaler, real
//! `skiff-server` replicas), the way issue 26 found Skiff losing Knative's panic mode: sixteen
//! clients at a revision with containerConcurrency 2 and maxReplicas 8 that sits at zero.
//!
//! Knative's KPA sees the activator's held requests as its first stat, panics
//! (ceil(16 / (2 × 0.7)) = 12 pods wanted, capped at 8) and never scales down while panicking:
//! the peak holds until a whole stable window has passed since the last tick over the panic
//! threshold. The test samples the autoscaler's own decisions from `skiff up`'s admin status and
//! checks that series, not timings: the peak is reached, holds with panic on through the burst and
//! well into the stable window, and panic ends once the window has passed. Then what the decider
//! was fed (the runner's journal) is replayed through Knative's own KPA, whose decisions must match
//! Skiff's within a tick.

mod common;

use std::time::{Duration, Instant};

use common::{Load, Up, folder, manifest};
use serde_json::Value;

/// Revisions start at zero; a 20 s stable window (2 s panic window) and Knative's 2 s tick.
const CONFIG: &str = "autoscaler:\n  allow-zero-initial-scale: \"true\"\n  initial-scale: \"0\"\n  stable-window: 20s\n  scale-to-zero-grace-period: 1s\nactivator:\n  maxPending: 1000\n";
const STABLE_WINDOW: Duration = Duration::from_secs(20);
const CLIENTS: usize = 16;
const BURST: Duration = Duration::from_secs(4);

/// One sample of the revision: seconds since the burst began, desired replicas (the autoscaler's
/// decision), ready replicas, panic.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: f64,
    desired: u64,
    ready: u64,
    panic: bool,
}

impl Sample {
    fn state(&self) -> (u64, u64, bool) {
        (self.desired, self.ready, self.panic)
    }
}

fn sample(status: &Value, at: Duration) -> Option<Sample> {
    let revision = &status["services"][0]["revisions"][0];
    let decision = &revision["autoscaler"];
    Some(Sample {
        at: at.as_secs_f64(),
        desired: decision["desiredPods"].as_u64()?,
        ready: revision["ready"].as_u64()?,
        panic: decision["panic"].as_bool()?,
    })
}

/// Samples every 100 ms until `until` after `start`.
async fn record(up: &Up, start: Instant, until: Duration, series: &mut Vec<Sample>) {
    while start.elapsed() < until {
        if let Some(s) = sample(&up.status().await, start.elapsed()) {
            series.push(s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_at_zero_panics_and_holds_its_peak_for_the_stable_window() {
    let dir = folder(&["iris"]);
    let spec = "minReplicas: 0\nmaxReplicas: 8\ncontainerConcurrency: 2";
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "iris", spec)).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("iris at zero", Duration::from_secs(60), |s| {
        s["services"][0]["ready"] == true && s["services"][0]["revisions"][0]["desired"] == 0
    })
    .await;

    let start = Instant::now();
    let load = Load::start(&up, "iris", CLIENTS);
    let mut series = Vec::new();
    record(&up, start, BURST, &mut series).await;
    let outcomes = load.finish().await;
    let hold_until = STABLE_WINDOW - Duration::from_secs(6);
    record(&up, start, hold_until, &mut series).await;
    let after = STABLE_WINDOW + Duration::from_secs(10);
    up.wait_for("panic to end after the stable window", after, |s| {
        sample(s, start.elapsed()).is_some_and(|s| !s.panic && s.desired < 8)
    })
    .await;
    let ended = start.elapsed();

    let changes = series.iter().enumerate().filter(|(i, s)| *i == 0 || s.state() != series[i - 1].state());
    let line: Vec<String> = changes
        .map(|(_, s)| format!("{:.1}s {}/{}{}", s.at, s.desired, s.ready, if s.panic { " P" } else { "" }))
        .collect();
    eprintln!("desired/ready (P = panic), at each change, after a burst of {CLIENTS} at zero: {}", line.join(", "));
    eprintln!("panic over and below the peak at {:.1}s", ended.as_secs_f64());

    let failed = outcomes.iter().filter(|o| o.is_err()).count();
    assert_eq!(failed, 0, "every request of the burst is answered: {:?}", outcomes.iter().find(|o| o.is_err()));
    let peak = series.iter().position(|s| s.desired == 8).unwrap_or_else(|| panic!("never asked for 8: {line:?}"));
    let held = &series[peak..];
    assert!(
        held.iter().all(|s| s.desired == 8 && s.panic),
        "from the peak until {}s into the stable window the autoscaler keeps 8 and stays in panic: {line:?}",
        hold_until.as_secs()
    );
    assert!(held.iter().any(|s| s.ready == 8), "the 8 replicas became ready: {line:?}");
    assert!(ended >= STABLE_WINDOW, "panic cannot end before a stable window has passed ({ended:?})");

    let url = format!("http://{}/autoscaler/journal/default/iris-predictor-00001", up.admin);
    let journal = common::send(http::Method::GET, &url, bytes::Bytes::new(), &[]).await.unwrap().json();
    up.stop();
    agrees_with_knative(journal.as_array().expect("the journal is a list"));
}

/// Replays what Skiff's decider was fed during the run (its journal) through Knative's own KPA with
/// `tests/knative-kpa/replay.py`: every Knative tick's replicas and panic must match one of Skiff's
/// decisions within a tick of it.
fn agrees_with_knative(journal: &[Value]) {
    let dir = tempfile::tempdir().unwrap();
    let (journal_path, settings_path) = (dir.path().join("journal.json"), dir.path().join("settings.json"));
    std::fs::write(&journal_path, serde_json::to_string(journal).unwrap()).unwrap();
    let settings = serde_json::json!({
        "config": {"stable-window": "20s", "scale-to-zero-grace-period": "1s", "allow-zero-initial-scale": "true", "initial-scale": "0"},
        "annotations": {"autoscaling.knative.dev/min-scale": "0", "autoscaling.knative.dev/max-scale": "8"},
        "containerConcurrency": 2,
    });
    std::fs::write(&settings_path, settings.to_string()).unwrap();
    let out = std::process::Command::new(common::repo().join("tests/knative-kpa/replay.py"))
        .arg(&journal_path)
        .arg(&settings_path)
        .output()
        .expect("run tests/knative-kpa/replay.py");
    eprint!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "Knative's KPA decides otherwise: {}", String::from_utf8_lossy(&out.stderr));
}
