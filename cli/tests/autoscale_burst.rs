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

/// Replays what Skiff's decider was fed during the run (its journal: each second's recorded value,
/// the ready pods at each decision) through Knative's own KPA (`tests/knative-kpa`, the oracle of
/// the autoscaler's differential test) and checks that every Knative tick's replicas and panic
/// match one of Skiff's decisions within a tick of it (Skiff's ticks are not aligned with the
/// oracle's, and a poke decides between ticks).
fn agrees_with_knative(journal: &[Value]) {
    let ms = |step: &Value| step["atMs"].as_u64().unwrap();
    let decided: Vec<&Value> = journal.iter().filter(|s| s["kind"] == "decided").collect();
    let last = decided.last().map_or(0, |s| ms(s) / 1000);
    let mut segments = Vec::new();
    let mut ready = 0;
    for second in 0..=last {
        let in_second = |s: &&Value| ms(s) / 1000 == second;
        let recorded: Vec<f64> = journal
            .iter()
            .filter(|s| s["kind"] == "recorded")
            .filter(in_second)
            .map(|s| s["value"].as_f64().unwrap())
            .collect();
        if let Some(step) = decided.iter().filter(|s| ms(s) / 1000 <= second).last() {
            ready = step["ready"].as_u64().unwrap();
        }
        let value = (!recorded.is_empty()).then(|| recorded.iter().sum::<f64>());
        segments.push(serde_json::json!({"for": 1, "value": value, "ready": ready}));
    }
    let trace = serde_json::json!({
        "description": "the journal of a burst at zero in skiff up",
        "config": {"stable-window": "20s", "scale-to-zero-grace-period": "1s", "allow-zero-initial-scale": "true", "initial-scale": "0"},
        "annotations": {"autoscaling.knative.dev/min-scale": "0", "autoscaling.knative.dev/max-scale": "8"},
        "containerConcurrency": 2,
        "segments": segments,
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    std::fs::write(&path, trace.to_string()).unwrap();
    let knative = common::repo().join("tests/knative-kpa");
    let build = std::process::Command::new(knative.join("build.sh")).output().expect("run tests/knative-kpa/build.sh");
    assert!(build.status.success(), "tests/knative-kpa/build.sh:\n{}", String::from_utf8_lossy(&build.stderr));
    let oracle = String::from_utf8(build.stdout).unwrap();
    let out = std::process::Command::new(oracle.trim()).arg(&path).output().expect("run kpa-oracle");
    assert!(out.status.success(), "kpa-oracle:\n{}", String::from_utf8_lossy(&out.stderr));
    let ticks: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut compared = 0;
    for tick in &ticks {
        let t = tick["t"].as_u64().unwrap() * 1000;
        let (replicas, panic) = (tick["replicas"].as_u64().unwrap(), tick["panic"].as_bool().unwrap());
        let near: Vec<(u64, u64, bool)> = decided
            .iter()
            .filter(|s| ms(s) + 2000 > t && ms(s) < t + 2000)
            .map(|s| (ms(s), s["desired"].as_u64().unwrap(), s["panic"].as_bool().unwrap()))
            .collect();
        if near.is_empty() {
            continue;
        }
        compared += 1;
        assert!(
            near.iter().any(|&(_, desired, p)| desired == replicas && p == panic),
            "at {t} ms Knative decides {replicas} pods (panic {panic}); Skiff's decisions within a tick: {near:?}"
        );
    }
    eprintln!("Knative's KPA and Skiff's agree within a tick at {compared} of Knative's ticks");
    assert!(compared >= 8, "the replay compared only {compared} ticks (the run lasts over ten)");
}
