//! Differential test: every trace under `tests/knative-kpa/traces/` runs through Skiff's [`Decider`] and through
//! Knative Serving's own autoscaler code (the Go program in `tests/knative-kpa/`, built and cached by its
//! `build.sh`, run as a child process), and the two must decide the same at every tick: desired pods, panic mode
//! and excess burst capacity. A trace may name a difference Skiff makes on purpose (`differences`: the field, the
//! ticks and why); the test prints those, and fails on any other difference, and on a named one that no longer
//! occurs. `tests/knative-kpa/README.md` describes the traces and explains each difference.
//!
//! Needs Go on PATH (the Go module proxy on a first build): without it the test fails, saying so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::Deserialize;
use skiff_autoscaler::{AutoscalerConfig, Decider, Decision, PredictorScaling, ScalingSpec, annotations};

/// Knative's decider tick (its `multiscaler.go` hard-codes 2 s).
const TICK_SECS: u64 = 2;

/// A trace file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Trace {
    /// What the trace exercises.
    description: String,
    /// `config-autoscaler` data.
    #[serde(default)]
    config: BTreeMap<String, String>,
    /// The revision's `autoscaling.knative.dev/*` annotations.
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default, rename = "containerConcurrency")]
    container_concurrency: u32,
    /// Whether a route sends traffic to the revision (default true).
    #[serde(default)]
    reachable: Option<bool>,
    /// Pods already ready when the decider starts (an autoscaler restart); 0 = a new revision.
    #[serde(default)]
    start_ready: u32,
    segments: Vec<Segment>,
    /// Differences Skiff makes on purpose.
    #[serde(default)]
    differences: Vec<Difference>,
}

/// `for` seconds on `ready` pods, each second with `value`, a `ramp` [from, to], or no sample at all. With `poke`,
/// the first sample is the activator's report of a request waiting at zero pods, and pokes the decider.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Segment {
    #[serde(default)]
    poke: bool,
    #[serde(rename = "for")]
    seconds: u64,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    ramp: Option<[f64; 2]>,
    ready: u32,
}

impl Segment {
    /// The sample at the segment's `i`-th second (the oracle's `Segment.sample`, same arithmetic).
    fn sample(&self, i: u64) -> Option<f64> {
        match (self.ramp, self.value) {
            (Some([from, to]), _) if self.seconds > 1 => {
                Some(from + (to - from) * i as f64 / (self.seconds - 1) as f64)
            }
            (Some([from, _]), _) => Some(from),
            (None, value) => value,
        }
    }
}

/// A difference Skiff makes on purpose: `field` differs at the ticks in [`from`, `to`] seconds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Difference {
    field: Field,
    from: u64,
    to: u64,
    reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Field {
    DesiredPods,
    Panic,
    ExcessBurstCapacity,
}

/// One line of the oracle's output.
#[derive(Debug, Deserialize)]
struct OracleTick {
    t: u64,
    ready: u32,
    /// Knative's `Scale` result (the latest valid one).
    desired_scale: i32,
    excess_burst_capacity: i64,
    panic: bool,
    /// The Knative reconciler's bounded scale, before its scale-to-zero rules.
    bounded: i32,
    /// The Deployment's replicas after the Knative reconciler.
    replicas: i32,
    observed_stable: f64,
    observed_panic: f64,
}

/// One tick's comparison.
#[derive(Debug)]
struct Mismatch {
    t: u64,
    field: Field,
    skiff: String,
    knative: String,
}

fn knative_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/knative-kpa")
}

/// Builds the oracle once (cached across runs by `build.sh`) and returns its path.
fn oracle() -> &'static Path {
    static ORACLE: OnceLock<PathBuf> = OnceLock::new();
    ORACLE.get_or_init(|| {
        let go = Command::new("go").arg("version").output();
        assert!(
            go.as_ref().is_ok_and(|out| out.status.success()),
            "the Knative differential test needs Go on PATH to build Knative's autoscaler (tests/knative-kpa); \
             install Go 1.26+ (https://go.dev/dl/): {go:?}"
        );
        let out = Command::new(knative_dir().join("build.sh")).output().expect("run tests/knative-kpa/build.sh");
        assert!(out.status.success(), "tests/knative-kpa/build.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
        PathBuf::from(String::from_utf8(out.stdout).expect("utf-8 path").trim())
    })
}

fn run_oracle(trace: &Path) -> Vec<OracleTick> {
    let out = Command::new(oracle()).arg(trace).output().expect("run kpa-oracle");
    assert!(out.status.success(), "kpa-oracle {}: {}", trace.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("utf-8 output")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("oracle line {line:?}: {e}")))
        .collect()
}

/// The revision's settings through Skiff's own parsing. The trace's `min-scale` annotation (or the config's
/// `min-scale`) becomes KServe's `minReplicas`, which KServe writes back as the same annotation.
fn skiff_spec(trace: &Trace) -> ScalingSpec {
    let config = AutoscalerConfig::from_map(&trace.config).expect("config-autoscaler data");
    let min_replicas = match trace.annotations.get(annotations::MIN_SCALE) {
        Some(raw) => raw.parse().expect("min-scale annotation"),
        None => config.min_scale,
    };
    let fields = PredictorScaling {
        min_replicas: Some(min_replicas),
        container_concurrency: Some(trace.container_concurrency),
        ..Default::default()
    };
    let mut spec = ScalingSpec::resolve(&fields, &trace.annotations, &config).expect("annotations");
    spec.reachable = trace.reachable.unwrap_or(true);
    spec
}

/// Skiff's decision at each tick: the trace recorded each second, decided every 2 s with the trace's ready pods.
fn run_skiff(trace: &Trace) -> Vec<(u64, u32, Decision)> {
    let t0 = Instant::now();
    let spec = skiff_spec(trace);
    let mut decider =
        if trace.start_ready > 0 { Decider::resume(spec, t0, trace.start_ready) } else { Decider::new(spec, t0) };
    let mut ticks = Vec::new();
    let mut t = 0;
    for segment in &trace.segments {
        for i in 0..segment.seconds {
            let now = t0 + Duration::from_secs(t);
            if let Some(value) = segment.sample(i) {
                decider.record(now, value);
                if segment.poke && i == 0 {
                    decider.poke(now, segment.ready);
                }
            }
            if t % TICK_SECS == 0 {
                ticks.push((t, segment.ready, decider.decide(now, segment.ready)));
            }
            t += 1;
        }
    }
    ticks
}

fn compare(knative: &[OracleTick], skiff: &[(u64, u32, Decision)]) -> Vec<Mismatch> {
    assert_eq!(knative.len(), skiff.len(), "oracle and Skiff tick counts");
    let mut mismatches = Vec::new();
    for (k, (t, ready, d)) in knative.iter().zip(skiff) {
        assert_eq!((k.t, k.ready), (*t, *ready), "the oracle expanded the trace differently");
        let mut check = |field, skiff: String, knative: String| {
            if skiff != knative {
                mismatches.push(Mismatch { t: *t, field, skiff, knative });
            }
        };
        check(Field::DesiredPods, d.desired_pods.to_string(), k.replicas.to_string());
        check(Field::Panic, d.panic.to_string(), k.panic.to_string());
        check(Field::ExcessBurstCapacity, d.excess_burst_capacity.to_string(), k.excess_burst_capacity.to_string());
    }
    mismatches
}

/// Groups mismatches into runs of consecutive ticks with the same field and the same two values.
fn runs<'a>(mismatches: &[&'a Mismatch]) -> Vec<Vec<&'a Mismatch>> {
    let mut sorted = mismatches.to_vec();
    sorted.sort_by_key(|m| (m.field as u8, m.t));
    let mut runs: Vec<Vec<&Mismatch>> = Vec::new();
    for m in sorted {
        match runs.last_mut() {
            Some(run)
                if run.last().is_some_and(|prev| {
                    prev.field == m.field
                        && prev.t + TICK_SECS == m.t
                        && prev.skiff == m.skiff
                        && prev.knative == m.knative
                }) =>
            {
                run.push(m)
            }
            _ => runs.push(vec![m]),
        }
    }
    runs
}

fn describe(m: &Mismatch, k: &OracleTick, d: &Decision) -> String {
    format!(
        "t={}s {:?}: skiff {} knative {} (ready {}, stable skiff/knative {}/{}, panic {}/{}, knative scale {} bounded {})",
        m.t,
        m.field,
        m.skiff,
        m.knative,
        k.ready,
        d.observed_stable,
        k.observed_stable,
        d.observed_panic,
        k.observed_panic,
        k.desired_scale,
        k.bounded
    )
}

#[test]
fn skiff_decides_as_knative_on_every_trace() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(knative_dir().join("traces"))
        .expect("tests/knative-kpa/traces")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no traces under tests/knative-kpa/traces");

    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().expect("file name").to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).expect("read trace");
        let trace: Trace = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let knative = run_oracle(path);
        let skiff = run_skiff(&trace);
        let mismatches = compare(&knative, &skiff);
        let mut used = vec![false; trace.differences.len()];
        let mut unexplained = Vec::new();
        for m in &mismatches {
            let known =
                trace.differences.iter().position(|diff| diff.field == m.field && (diff.from..=diff.to).contains(&m.t));
            match known {
                Some(i) => used[i] = true,
                None => unexplained.push(m),
            }
        }
        for run in runs(&unexplained) {
            let (k, (_, _, d)) = knative.iter().zip(&skiff).find(|(k, _)| k.t == run[0].t).expect("tick");
            let last = run.last().expect("a run is not empty").t;
            failures.push(format!("{name}: {} (through t={last}s, {} ticks)", describe(run[0], k, d), run.len()));
        }
        for (diff, used) in trace.differences.iter().zip(&used) {
            if *used {
                println!(
                    "{name}: intended difference in {:?} at {}..={}s: {}",
                    diff.field, diff.from, diff.to, diff.reason
                );
            } else {
                failures.push(format!(
                    "{name}: the named difference in {:?} at {}..={}s no longer occurs",
                    diff.field, diff.from, diff.to
                ));
            }
        }
        println!(
            "{name}: {} ticks, {} unexplained differences — {}",
            knative.len(),
            unexplained.len(),
            trace.description
        );
    }
    assert!(failures.is_empty(), "Skiff and Knative decide differently:\n{}", failures.join("\n"));
}
