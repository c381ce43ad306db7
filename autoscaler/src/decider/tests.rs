use super::*;
use crate::{AutoscalerConfig, Metric, PredictorScaling};

/// A step of a scenario, at whole seconds after the decider was created.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Record `value` at every second in `from..to`.
    Feed { from: u64, to: u64, value: f64 },
    /// Decide at `at` with `ready` pods; expect `pods` and `panic`.
    Decide { at: u64, ready: u32, pods: u32, panic: bool },
    /// Poke at `at` with `ready` pods; expect `pods`.
    Poke { at: u64, ready: u32, pods: u32 },
}
use Step::*;

fn at(t0: Instant, secs: u64) -> Instant {
    t0 + Duration::from_secs(secs)
}

/// Runs the steps and checks each decision; returns the last one.
fn run(case: &str, spec: ScalingSpec, steps: &[Step]) -> Decision {
    let t0 = Instant::now();
    let mut decider = Decider::new(spec, t0);
    let mut last = None;
    for (i, step) in steps.iter().enumerate() {
        match *step {
            Feed { from, to, value } => (from..to).for_each(|s| decider.record(at(t0, s), value)),
            Decide { at: t, ready, pods, panic } => {
                let d = decider.decide(at(t0, t), ready);
                assert_eq!((d.desired_pods, d.panic), (pods, panic), "{case}, step {i} {step:?}: {d:?}");
                last = Some(d);
            }
            Poke { at: t, ready, pods } => {
                let d = decider.poke(at(t0, t), ready);
                assert_eq!(d.desired_pods, pods, "{case}, step {i} {step:?}: {d:?}");
                last = Some(d);
            }
        }
    }
    last.expect("a scenario ends with a decision")
}

/// Knative's defaults with scale to zero allowed (min 0), as a plain Knative revision has them.
fn knative() -> ScalingSpec {
    ScalingSpec::default()
}

/// A spec through KServe's fields: minReplicas 0 and the given target, metric and containerConcurrency.
fn kserve(target: Option<u32>, metric: Option<&str>, cc: Option<u32>) -> ScalingSpec {
    let fields = PredictorScaling {
        min_replicas: Some(0),
        max_replicas: None,
        scale_target: target,
        scale_metric: metric.map(str::to_owned),
        container_concurrency: cc,
    };
    ScalingSpec::resolve(&fields, &Default::default(), &AutoscalerConfig::default()).unwrap()
}

#[test]
fn steady_load_gives_ceil_of_observed_over_target_times_utilisation() {
    // (case, spec, steady value, ready pods, desired)
    let cases: &[(&str, ScalingSpec, f64, u32, u32)] = &[
        ("140 in flight / 70", kserve(None, None, None), 140.0, 2, 2),
        ("141 in flight / 70", kserve(None, None, None), 141.0, 3, 3),
        ("70 in flight / 70", kserve(None, None, None), 70.0, 1, 1),
        ("a trickle", kserve(None, None, None), 0.5, 1, 1),
        ("containerConcurrency 10 → 7 per pod", kserve(None, None, Some(10)), 21.0, 3, 3),
        ("containerConcurrency 10, 22 in flight", kserve(None, None, Some(10)), 22.0, 4, 4),
        ("scaleTarget 5 → 3.5 per pod", kserve(Some(5), None, None), 35.0, 10, 10),
        ("scaleTarget above containerConcurrency", kserve(Some(50), None, Some(10)), 70.0, 10, 10),
        ("rps default 200 → 140 per pod", kserve(None, Some("rps"), None), 280.0, 2, 2),
        ("rps 281", kserve(None, Some("rps"), None), 281.0, 3, 3),
        ("rps scaleTarget 10 → 7 per pod", kserve(Some(10), Some("rps"), Some(1)), 70.0, 10, 10),
    ];
    for (case, spec, value, ready, want) in cases {
        let d = run(
            case,
            spec.clone(),
            &[Feed { from: 0, to: 60, value: *value }, Decide { at: 59, ready: *ready, pods: *want, panic: false }],
        );
        assert_eq!(d.observed_stable, *value, "{case}");
        assert_eq!(d.observed_panic, *value, "{case}");
    }
    assert_eq!(kserve(None, Some("rps"), None).metric, Metric::Rps);
}

#[test]
fn a_burst_panics_and_calms_down_a_stable_window_after_the_last_crossing() {
    run(
        "burst",
        knative(),
        &[
            Feed { from: 0, to: 60, value: 70.0 },
            Decide { at: 59, ready: 1, pods: 1, panic: false },
            // Six seconds at 700: the panic window wants 10 pods against 1 ready, past the 200% threshold.
            Feed { from: 60, to: 66, value: 700.0 },
            Decide { at: 65, ready: 1, pods: 10, panic: true },
            // Load is back to 70; the panic window wants 4 of 10 ready, under the threshold, but in panic the
            // decider never scales down.
            Feed { from: 66, to: 70, value: 70.0 },
            Decide { at: 69, ready: 10, pods: 10, panic: true },
            Feed { from: 70, to: 125, value: 70.0 },
            Decide { at: 125, ready: 10, pods: 10, panic: true },
            // A whole stable window (60 s) after the last crossing at 65: stable mode, and the stable window
            // wants 1 pod, limited by the scale-down rate to 10 / 2.
            Feed { from: 125, to: 127, value: 70.0 },
            Decide { at: 126, ready: 10, pods: 5, panic: false },
            Decide { at: 128, ready: 5, pods: 2, panic: false },
            Decide { at: 130, ready: 2, pods: 1, panic: false },
        ],
    );
}

#[test]
fn panic_extends_while_the_threshold_is_crossed_and_takes_the_larger_estimate() {
    run(
        "extended panic",
        knative(),
        &[
            Feed { from: 0, to: 6, value: 700.0 },
            Decide { at: 5, ready: 1, pods: 10, panic: true },
            // Still over the threshold at 60 (14 wanted vs 5 ready): panic is extended from 60.
            Feed { from: 6, to: 61, value: 980.0 },
            Decide { at: 60, ready: 5, pods: 14, panic: true },
            // Below the threshold from 61, but not yet 60 s past the last crossing.
            Feed { from: 61, to: 122, value: 0.0 },
            Decide { at: 120, ready: 14, pods: 14, panic: true },
            Decide { at: 121, ready: 14, pods: 7, panic: false },
        ],
    );
}

#[test]
fn a_panic_threshold_annotation_moves_the_trigger() {
    let spec = ScalingSpec { panic_threshold_percentage: 500.0, ..knative() };
    run(
        "threshold 500%",
        spec,
        &[
            Feed { from: 0, to: 60, value: 70.0 },
            Feed { from: 60, to: 66, value: 280.0 },
            // 4 wanted vs 1 ready: 400% < 500%, so the stable estimate (2) rules.
            Decide { at: 65, ready: 1, pods: 2, panic: false },
            Feed { from: 66, to: 72, value: 350.0 },
            Decide { at: 71, ready: 1, pods: 5, panic: true },
        ],
    );
}

#[test]
fn rate_limits_bound_each_step_relative_to_ready_pods() {
    // (case, max up rate, max down rate, steady value, ready, desired)
    let cases: &[(&str, f64, f64, f64, u32, u32)] = &[
        ("down by at most half", 1000.0, 2.0, 70.0, 4, 2),
        ("down rate 4", 1000.0, 4.0, 70.0, 8, 2),
        ("down rate 4, rounds down", 1000.0, 4.0, 70.0, 7, 1),
        ("one pod may go to zero's door", 1000.0, 2.0, 7.0, 1, 1),
        ("up by at most double", 2.0, 2.0, 700.0, 2, 4),
        ("up rate 1.1 still adds a pod", 1.1, 2.0, 210.0, 2, 3),
        ("no ready pods counts as one", 2.0, 2.0, 700.0, 0, 2),
        ("no ready pods, default rate", 1000.0, 2.0, 700.0, 0, 10),
    ];
    for (case, up, down, value, ready, want) in cases {
        let spec = ScalingSpec { max_scale_up_rate: *up, max_scale_down_rate: *down, ..knative() };
        let panic = (value / 70.0).ceil() / f64::from((*ready).max(1)) >= 2.0;
        run(
            case,
            spec,
            &[Feed { from: 0, to: 60, value: *value }, Decide { at: 59, ready: *ready, pods: *want, panic }],
        );
    }
}

#[test]
fn scale_down_delay_holds_the_highest_recent_count() {
    // A 6 s stable window (1 s panic window) so that the load change shows at once.
    let base = ScalingSpec { stable_window: Duration::from_secs(6), ..knative() };
    let steps = |later: u32| {
        [
            Feed { from: 0, to: 6, value: 700.0 },
            Decide { at: 5, ready: 10, pods: 10, panic: false },
            Feed { from: 6, to: 30, value: 70.0 },
            Decide { at: 11, ready: 10, pods: later, panic: false },
            Decide { at: 23, ready: 10, pods: later, panic: false },
            Decide { at: 25, ready: 10, pods: 5, panic: false },
        ]
    };
    run("no delay", base.clone(), &steps(5));
    // 20 s in 2 s ticks: the 10 decided at tick 2 holds until tick 12 (second 24).
    let delayed = ScalingSpec { scale_down_delay: Duration::from_secs(20), ..base.clone() };
    run("20 s delay", delayed.clone(), &steps(10));
    // The delay never holds back a scale up, and does not apply to an unreachable revision.
    run(
        "delay and scale up",
        delayed.clone(),
        &[
            Feed { from: 0, to: 6, value: 70.0 },
            Decide { at: 5, ready: 1, pods: 1, panic: false },
            Feed { from: 6, to: 12, value: 140.0 },
            Decide { at: 11, ready: 1, pods: 2, panic: true },
        ],
    );
    run(
        "unreachable ignores the delay",
        ScalingSpec { reachable: false, ..delayed },
        &[
            Feed { from: 0, to: 6, value: 700.0 },
            Decide { at: 5, ready: 10, pods: 10, panic: false },
            Feed { from: 6, to: 12, value: 70.0 },
            Decide { at: 11, ready: 10, pods: 1, panic: false },
        ],
    );
}

#[test]
fn min_and_max_scale_clamp_the_decision() {
    // (case, min, max, steady value, ready, desired)
    let cases: &[(&str, u32, u32, f64, u32, u32)] = &[
        ("min lifts", 3, 0, 70.0, 3, 3),
        ("min holds with no traffic", 2, 0, 0.0, 2, 2),
        ("max caps", 0, 4, 700.0, 10, 4),
        ("max 0 is unlimited", 0, 0, 7000.0, 100, 100),
        ("between the bounds", 1, 20, 700.0, 10, 10),
        ("max caps a panic", 0, 4, 7000.0, 1, 4),
    ];
    for (case, min, max, value, ready, want) in cases {
        let spec = ScalingSpec { min_scale: *min, max_scale: *max, ..knative() };
        let d = run(
            case,
            spec,
            &[
                Feed { from: 0, to: 60, value: *value },
                Decide { at: 59, ready: *ready, pods: *want, panic: *case == "max caps a panic" },
            ],
        );
        assert!(!d.idle, "{case}");
    }
}

#[test]
fn scale_to_zero_waits_for_the_stable_window_and_the_grace_period() {
    // Traffic until second 9, then zeros recorded by the one ready pod.
    // (case, spec, decide at, desired, idle)
    let traffic = [Feed { from: 0, to: 10, value: 7.0 }, Feed { from: 10, to: 400, value: 0.0 }];
    let cases: &[(&str, ScalingSpec, u64, u32, bool)] = &[
        ("traffic", knative(), 9, 1, false),
        ("the stable window still sees traffic", knative(), 68, 1, false),
        ("idle after a stable window: activator first", knative(), 69, 1, true),
        ("inside the grace period", knative(), 98, 1, true),
        ("after stable window + grace", knative(), 99, 0, true),
        ("scale to zero disabled", ScalingSpec { enable_scale_to_zero: false, ..knative() }, 99, 1, false),
        ("min-scale 1", ScalingSpec { min_scale: 1, ..knative() }, 99, 1, false),
        ("longer grace", ScalingSpec { scale_to_zero_grace_period: Duration::from_secs(60), ..knative() }, 99, 1, true),
        (
            "longer grace, later",
            ScalingSpec { scale_to_zero_grace_period: Duration::from_secs(60), ..knative() },
            129,
            0,
            true,
        ),
        (
            "pod retention",
            ScalingSpec { scale_to_zero_pod_retention_period: Duration::from_secs(90), ..knative() },
            158,
            1,
            true,
        ),
        (
            "pod retention, later",
            ScalingSpec { scale_to_zero_pod_retention_period: Duration::from_secs(90), ..knative() },
            159,
            0,
            true,
        ),
        ("shorter stable window", ScalingSpec { stable_window: Duration::from_secs(10), ..knative() }, 49, 0, true),
    ];
    for (case, spec, t, pods, idle) in cases {
        let mut steps = traffic.to_vec();
        steps.push(Decide { at: *t, ready: 1, pods: *pods, panic: false });
        let d = run(case, spec.clone(), &steps);
        assert_eq!(d.idle, *idle, "{case}");
        assert_eq!(d.activator_in_path(), *pods == 0 || *idle || d.excess_burst_capacity < 0, "{case}");
    }
}

#[test]
fn an_unreachable_revision_drops_min_scale_and_the_scale_down_rate() {
    let spec = ScalingSpec { min_scale: 2, ..knative() };
    let steps = |pods| [Feed { from: 0, to: 100, value: 0.0 }, Decide { at: 99, ready: 4, pods, panic: false }];
    run("reachable", spec.clone(), &steps(2));
    run("unreachable", ScalingSpec { reachable: false, ..spec.clone() }, &steps(0));
    let t0 = Instant::now();
    let mut decider = Decider::new(spec, t0);
    decider.record(t0, 0.0);
    decider.set_reachable(false);
    assert!(!decider.spec().reachable);
    assert_eq!(decider.decide(at(t0, 90), 4).desired_pods, 0);
}

#[test]
fn initial_scale_holds_until_reached_once() {
    let three = ScalingSpec { initial_scale: 3, ..knative() };
    run(
        "initial 3",
        three.clone(),
        &[
            Decide { at: 0, ready: 0, pods: 3, panic: false },
            Feed { from: 0, to: 10, value: 7.0 },
            Decide { at: 9, ready: 1, pods: 3, panic: false },
            // Three pods ready once: from now on the metric decides (1 pod, at most halving: 3 / 2 → 1).
            Decide { at: 10, ready: 3, pods: 1, panic: false },
            Decide { at: 12, ready: 1, pods: 1, panic: false },
        ],
    );
    run(
        "initial 1 holds while the first pod starts, even with zeros recorded",
        knative(),
        &[
            Decide { at: 0, ready: 0, pods: 1, panic: false },
            Feed { from: 0, to: 200, value: 0.0 },
            Decide { at: 199, ready: 0, pods: 1, panic: false },
        ],
    );
    let zero = ScalingSpec { initial_scale: 0, ..knative() };
    let d = run("initial 0", zero, &[Decide { at: 0, ready: 0, pods: 0, panic: false }]);
    assert!(d.activator_in_path());
    run(
        "min above initial",
        ScalingSpec { initial_scale: 2, min_scale: 4, ..knative() },
        &[Decide { at: 0, ready: 0, pods: 4, panic: false }],
    );
    run(
        "unreachable ignores initial",
        ScalingSpec { initial_scale: 3, reachable: false, ..knative() },
        &[Feed { from: 0, to: 100, value: 0.0 }, Decide { at: 99, ready: 0, pods: 0, panic: false }],
    );
}

#[test]
fn a_poke_at_zero_wants_a_pod_at_once() {
    let to_zero = [
        Feed { from: 0, to: 100, value: 0.0 },
        Decide { at: 99, ready: 1, pods: 0, panic: false },
        // The pod is gone and nothing is recorded any more: the decision holds at zero.
        Decide { at: 200, ready: 0, pods: 0, panic: false },
    ];
    let then = |steps: &[Step]| [to_zero.as_slice(), steps].concat();
    run(
        "poke",
        knative(),
        &then(&[
            Poke { at: 201, ready: 0, pods: 1 },
            // Still starting: keep wanting the pod.
            Decide { at: 230, ready: 0, pods: 1, panic: false },
            // Ready, no metric yet: the activation counts as traffic, so the pod stays a stable window + grace.
            Decide { at: 231, ready: 1, pods: 1, panic: false },
            Feed { from: 231, to: 300, value: 0.0 },
            Decide { at: 290, ready: 1, pods: 1, panic: false },
            Decide { at: 291, ready: 1, pods: 0, panic: false },
        ]),
    );
    run(
        "activation scale",
        ScalingSpec { activation_scale: 3, ..knative() },
        &then(&[Poke { at: 201, ready: 0, pods: 3 }, Decide { at: 202, ready: 0, pods: 3, panic: false }]),
    );
    run(
        "max caps activation",
        ScalingSpec { max_scale: 1, ..knative() },
        &then(&[Poke { at: 201, ready: 0, pods: 1 }]),
    );
    // The activator also reports what it holds: 350 waiting requests want 5 pods at once.
    run(
        "held requests recorded",
        knative(),
        &then(&[Feed { from: 201, to: 202, value: 350.0 }, Poke { at: 201, ready: 0, pods: 5 }]),
    );
    // A poke with pods ready changes nothing but the activity time.
    run("poke with pods", knative(), &[Feed { from: 0, to: 60, value: 140.0 }, Poke { at: 59, ready: 2, pods: 2 }]);
}

#[test]
fn activation_scale_is_a_floor_only_when_there_is_traffic() {
    let spec = ScalingSpec { activation_scale: 3, ..knative() };
    run(
        "traffic",
        spec.clone(),
        &[Feed { from: 0, to: 60, value: 7.0 }, Decide { at: 59, ready: 3, pods: 3, panic: false }],
    );
    run("none", spec, &[Feed { from: 0, to: 100, value: 0.0 }, Decide { at: 99, ready: 1, pods: 0, panic: false }]);
}

#[test]
fn excess_burst_capacity_is_spare_capacity_minus_the_target_burst() {
    // (case, target burst capacity, containerConcurrency, steady value, ready, EBC, activator in path)
    type Case = (&'static str, f64, Option<u32>, f64, u32, i64, bool);
    let cases: &[Case] = &[
        ("default 211, 3 pods of 100, 70 in flight", 211.0, None, 70.0, 3, 19, false),
        ("default 211, 1 pod", 211.0, None, 70.0, 1, -181, true),
        ("cc 10, tbc 5, 2 pods, 7 in flight", 5.0, Some(10), 7.0, 2, 8, false),
        ("rounds down", 5.0, Some(10), 7.5, 2, 7, false),
        ("0: never through the activator", 0.0, None, 70.0, 1, 0, false),
        ("-1: always through the activator", -1.0, None, 70.0, 100, -1, true),
    ];
    for (case, tbc, cc, value, ready, ebc, in_path) in cases {
        let spec = ScalingSpec { target_burst_capacity: *tbc, ..kserve(None, None, *cc) };
        let t0 = Instant::now();
        let mut decider = Decider::new(spec, t0);
        (0..60).for_each(|s| decider.record(at(t0, s), *value));
        let d = decider.decide(at(t0, 59), *ready);
        assert_eq!(d.excess_burst_capacity, *ebc, "{case}");
        assert_eq!(d.activator_in_path(), *in_path, "{case}");
    }
}

#[test]
fn before_any_data_the_burst_capacity_assumes_the_initial_scale() {
    // (target burst capacity, initial scale, EBC): Knative's initial value.
    // A fraction truncates toward zero, as Knative's int32 conversion does: 1 × 1.5 − 2.2 = −0.7 → 0, not −1.
    let cases =
        [(211.0, 1, 100.0, -111), (211.0, 3, 100.0, 89), (0.0, 1, 100.0, 0), (-1.0, 5, 100.0, -1), (2.2, 1, 1.5, 0)];
    for (tbc, initial, target, ebc) in cases {
        let spec = ScalingSpec { target_burst_capacity: tbc, initial_scale: initial, target, ..knative() };
        let t0 = Instant::now();
        let d = Decider::new(spec, t0).decide(t0, 0);
        assert_eq!((d.desired_pods, d.excess_burst_capacity), (initial, ebc), "tbc {tbc}, initial {initial}");
    }
}

#[test]
fn without_data_for_a_stable_window_the_decision_holds() {
    run(
        "metrics stop",
        knative(),
        &[
            Feed { from: 0, to: 60, value: 700.0 },
            Decide { at: 59, ready: 10, pods: 10, panic: false },
            // Nothing recorded for over a stable window: keep 10 rather than read silence as no load.
            Decide { at: 200, ready: 10, pods: 10, panic: false },
        ],
    ); // With a target burst capacity of -1 Knative does not scrape the pods and reads silence as zeros: the same
    // silence halves the pods (the scale-down rate's limit).
    run(
        "metrics stop, burst capacity -1",
        ScalingSpec { target_burst_capacity: -1.0, ..knative() },
        &[
            Feed { from: 0, to: 60, value: 700.0 },
            Decide { at: 59, ready: 10, pods: 10, panic: false },
            Decide { at: 200, ready: 10, pods: 5, panic: false },
        ],
    );
}

#[test]
fn a_resumed_decider_starts_in_panic_to_keep_its_pods() {
    let t0 = Instant::now();
    let mut decider = Decider::resume(knative(), t0, 5);
    decider.record(t0, 7.0);
    let d = decider.decide(at(t0, 1), 5);
    assert_eq!((d.desired_pods, d.panic), (5, true));
    let mut calm = Decider::resume(knative(), t0, 1);
    calm.record(t0, 7.0);
    assert!(!calm.decide(at(t0, 1), 1).panic);
    // Without metrics yet, a resumed decider keeps what is there, zero included.
    let mut held = Decider::resume(knative(), t0, 3);
    assert_eq!(held.decide(at(t0, 1), 3).desired_pods, 3);
    let mut at_zero = Decider::resume(knative(), t0, 0);
    assert_eq!(at_zero.decide(at(t0, 1), 0).desired_pods, 0);
    assert_eq!(at_zero.poke(at(t0, 2), 0).desired_pods, 1);
}

#[test]
fn odd_observations_count_as_zero() {
    let t0 = Instant::now();
    let mut decider = Decider::new(knative(), t0);
    for (s, value) in [(0, f64::NAN), (1, -5.0), (2, f64::INFINITY)] {
        decider.record(at(t0, s), value);
    }
    let d = decider.decide(at(t0, 2), 1);
    assert_eq!((d.observed_stable, d.desired_pods), (0.0, 1));
}

#[test]
fn weighted_aggregation_reacts_faster_to_a_drop() {
    let weighted = ScalingSpec { aggregation: crate::Aggregation::WeightedExponential, ..knative() };
    let steps = |pods| {
        [
            Feed { from: 0, to: 50, value: 700.0 },
            Feed { from: 50, to: 60, value: 70.0 },
            Decide { at: 59, ready: 10, pods, panic: false },
        ]
    };
    // Linear: (50 × 700 + 10 × 70) / 60 = 595, 9 pods. Weighted: the last 10 s dominate, and only the
    // scale-down rate (10 / 2) keeps 5.
    assert_eq!(run("linear", knative(), &steps(9)).observed_stable, 595.0);
    // Weights 0.2 × 0.8^age: the last 10 s carry 89%, so about 0.89 × 70 + 0.11 × 700 ≈ 138.
    let observed = run("weighted", weighted, &steps(5)).observed_stable;
    assert!((130.0..145.0).contains(&observed), "{observed}");
}

#[test]
fn the_per_pod_target_rounds_as_knative_computes_it() {
    // Knative's target is 1.5 × 0.7 = 1.0499999999999998, so an observed 1.05 wants 2 pods there, not 1.
    let spec = ScalingSpec { target: 1.5, min_scale: 1, ..knative() };
    assert_eq!(spec.per_pod_target(), 1.5 * 0.7);
    run(
        "1.05 on 1.5 × 70%",
        spec,
        &[Feed { from: 0, to: 60, value: 1.05 }, Decide { at: 60, ready: 3, pods: 2, panic: false }],
    );
}

#[test]
fn with_the_activator_long_in_the_path_the_last_pod_goes_soon_after_idle() {
    // Ticks every 2 s; traffic until second 9, then zeros. Idle from the tick at 70 (a stable window after 9).
    let decide_every_tick = |spec: ScalingSpec| {
        let t0 = Instant::now();
        let mut decider = Decider::new(spec, t0);
        let mut zero_at = None;
        for s in 0..200 {
            decider.record(at(t0, s), if s < 10 { 7.0 } else { 0.0 });
            if s % 2 == 0 && zero_at.is_none() && decider.decide(at(t0, s), 1).desired_pods == 0 {
                zero_at = Some(s);
            }
        }
        zero_at
    };
    // Default burst capacity (211) on one pod: the activator has been in the path all along, so Knative's
    // handleScaleToZero scales to zero when it looks again 3 s after marking the revision inactive.
    assert_eq!(decide_every_tick(knative()), Some(74));
    // Target burst capacity 0 takes the activator out of the path while a pod serves: it enters at idle, and the
    // last pod waits the whole grace period (30 s).
    assert_eq!(decide_every_tick(ScalingSpec { target_burst_capacity: 0.0, ..knative() }), Some(100));
    // A retention period longer than the grace keeps the pod that long after idle.
    let retention = ScalingSpec { scale_to_zero_pod_retention_period: Duration::from_secs(90), ..knative() };
    assert_eq!(decide_every_tick(retention), Some(160));
}

/// Knative's defaults with a progress deadline of `secs` (`serving.knative.dev/progress-deadline`).
fn deadline(secs: u64) -> ScalingSpec {
    ScalingSpec { progress_deadline: Some(Duration::from_secs(secs)), ..knative() }
}

/// Decides every tick in `from..to` with no pod ready, expecting `pods` and no timeout each time.
fn starting(decider: &mut Decider, t0: Instant, from: u64, to: u64, pods: u32) {
    for t in (from..to).step_by(2) {
        let d = decider.decide(at(t0, t), 0);
        assert_eq!((d.desired_pods, d.activation_timed_out, d.idle), (pods, false, false), "starting, {t}s: {d:?}");
    }
}

#[test]
fn a_new_revision_that_never_becomes_ready_gives_up_at_the_progress_deadline_plus_knatives_buffer() {
    for (case, spec, timeout) in [("20s deadline", deadline(20), 50), ("Knative's default 600s", knative(), 630)] {
        let t0 = Instant::now();
        let mut decider = Decider::new(spec, t0);
        starting(&mut decider, t0, 0, timeout, 1);
        let d = decider.decide(at(t0, timeout), 0);
        assert_eq!((d.desired_pods, d.activation_timed_out, d.idle), (0, true, true), "{case}: {d:?}");
        assert!(d.activator_in_path(), "{case}");
        let d = decider.decide(at(t0, timeout + 600), 0);
        assert_eq!((d.desired_pods, d.activation_timed_out), (0, true), "{case}: it stays given up");
    }
}

#[test]
fn a_revision_still_starting_keeps_its_pod_when_the_waiting_client_leaves() {
    // At zero, a request wakes the revision; its client leaves after 4 s (the activator reports 0 once).
    // No pod is ready for 5 minutes: more than the stable window plus the grace period (90 s).
    let t0 = Instant::now();
    let mut decider = Decider::resume(knative(), t0, 0);
    decider.record(at(t0, 10), 1.0);
    let d = decider.poke(at(t0, 10), 0);
    assert_eq!(d.desired_pods, 1);
    (11..14).for_each(|s| decider.record(at(t0, s), 1.0));
    decider.record(at(t0, 14), 0.0);
    starting(&mut decider, t0, 12, 310, 1);
    // Ready at last: kept a stable window, then idle, then gone after the grace period.
    let d = decider.decide(at(t0, 310), 1);
    assert_eq!((d.desired_pods, d.idle), (1, false), "ready: {d:?}");
    decider.record(at(t0, 311), 0.0);
    assert_eq!(decider.decide(at(t0, 368), 1).desired_pods, 1);
    let d = decider.decide(at(t0, 400), 1);
    assert_eq!((d.desired_pods, d.activation_timed_out), (0, false), "idle after it served nothing: {d:?}");
}

#[test]
fn knative_counts_the_timeout_from_the_first_decision_that_wants_no_pod() {
    // Poked at 10 with a 120 s deadline (timeout 150 s); the client leaves at 14 and the stable window (60 s)
    // brings the decider's count to 0 at 74: Knative asks to look again 150 s later, and gives up at 224,
    // not at 10 + 150.
    let t0 = Instant::now();
    let mut decider = Decider::resume(deadline(120), t0, 0);
    decider.record(at(t0, 10), 1.0);
    decider.poke(at(t0, 10), 0);
    (11..14).for_each(|s| decider.record(at(t0, s), 1.0));
    decider.record(at(t0, 14), 0.0);
    starting(&mut decider, t0, 12, 224, 1);
    let d = decider.decide(at(t0, 224), 0);
    assert_eq!((d.desired_pods, d.activation_timed_out), (0, true), "{d:?}");

    // With a timeout (40 s) shorter than the stable window, the first decision that wants no pod (at 70) is
    // already past it.
    let mut decider = Decider::resume(deadline(10), t0, 0);
    decider.record(at(t0, 10), 1.0);
    decider.poke(at(t0, 10), 0);
    decider.record(at(t0, 11), 0.0);
    starting(&mut decider, t0, 12, 70, 1);
    let d = decider.decide(at(t0, 70), 0);
    assert_eq!((d.desired_pods, d.activation_timed_out), (0, true), "{d:?}");
}

#[test]
fn a_request_after_giving_up_starts_the_revision_again() {
    let t0 = Instant::now();
    let mut decider = Decider::new(deadline(60), t0);
    starting(&mut decider, t0, 0, 90, 1);
    assert!(decider.decide(at(t0, 90), 0).activation_timed_out);
    decider.record(at(t0, 101), 3.0);
    let d = decider.poke(at(t0, 101), 0);
    assert_eq!((d.desired_pods, d.activation_timed_out), (1, false), "{d:?}");
    // A new activation with a new timeout: the client leaves at once; the count drops to 0 a stable window
    // later (162), and the revision gives up 90 s after that.
    decider.record(at(t0, 102), 0.0);
    starting(&mut decider, t0, 102, 252, 1);
    assert!(decider.decide(at(t0, 252), 0).activation_timed_out);
}

#[test]
fn pods_lost_while_serving_make_the_revision_activating_again() {
    // Served from one pod until 100; the pod dies at 100 while requests still come (held by the activator),
    // and its replacement takes minutes. The requests end at 110 and the count drops to 0 a stable window
    // later (170): the pod is kept while it starts, as Knative keeps an activating revision's pods, past the
    // stable window and grace period, and given up 150 s after 170.
    let t0 = Instant::now();
    let mut decider = Decider::new(deadline(120), t0);
    (0..110).for_each(|s| decider.record(at(t0, s), 7.0));
    for t in (0..100).step_by(2) {
        assert_eq!(decider.decide(at(t0, t), 1).desired_pods, 1, "{t}s");
    }
    decider.record(at(t0, 110), 0.0);
    starting(&mut decider, t0, 100, 320, 1);
    let d = decider.decide(at(t0, 320), 0);
    assert_eq!((d.desired_pods, d.activation_timed_out), (0, true), "{d:?}");
}
