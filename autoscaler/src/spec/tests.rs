use super::*;
use crate::annotations as ann;

/// Annotations written in a test table.
type Pairs = &'static [(&'static str, &'static str)];

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn fields(
    min: Option<u32>,
    max: Option<u32>,
    target: Option<u32>,
    metric: Option<&str>,
    cc: Option<u32>,
) -> PredictorScaling {
    PredictorScaling {
        min_replicas: min,
        max_replicas: max,
        scale_target: target,
        scale_metric: metric.map(str::to_owned),
        container_concurrency: cc,
    }
}

fn resolve(f: &PredictorScaling, annotations: &[(&str, &str)]) -> Result<ScalingSpec> {
    ScalingSpec::resolve(f, &map(annotations), &AutoscalerConfig::default())
}

#[test]
fn an_inference_service_with_no_settings_gets_kserve_and_knative_defaults() {
    let spec = resolve(&PredictorScaling::default(), &[]).unwrap();
    let want = ScalingSpec { min_scale: KSERVE_DEFAULT_MIN_REPLICAS, ..ScalingSpec::default() };
    assert_eq!(spec, want);
    assert_eq!(spec.metric, Metric::Concurrency);
    assert_eq!(spec.target, 100.0);
    assert_eq!(spec.per_pod_target(), 70.0);
    assert_eq!(spec.panic_window(), Duration::from_secs(6));
    assert_eq!(spec.panic_threshold(), 2.0);
    assert_eq!((spec.min_scale, spec.max_scale, spec.initial_scale), (1, 0, 1));
}

#[test]
fn target_follows_knatives_resolution() {
    // (case, fields, annotations, metric, target, utilisation %, per-pod target)
    let cases: &[(&str, PredictorScaling, Pairs, Metric, f64, f64, f64)] = &[
        ("metric default", fields(None, None, None, None, None), &[], Metric::Concurrency, 100.0, 70.0, 70.0),
        ("containerConcurrency", fields(None, None, None, None, Some(8)), &[], Metric::Concurrency, 8.0, 70.0, 5.6),
        ("scaleTarget", fields(None, None, Some(10), None, None), &[], Metric::Concurrency, 10.0, 70.0, 7.0),
        ("target above cc", fields(None, None, Some(20), None, Some(8)), &[], Metric::Concurrency, 8.0, 70.0, 5.6),
        ("target below cc", fields(None, None, Some(5), None, Some(8)), &[], Metric::Concurrency, 5.0, 70.0, 3.5),
        (
            "annotation",
            fields(None, None, None, None, None),
            &[(ann::TARGET, "50")],
            Metric::Concurrency,
            50.0,
            70.0,
            35.0,
        ),
        (
            "fractional",
            fields(None, None, None, None, None),
            &[(ann::TARGET, "0.5")],
            Metric::Concurrency,
            0.5,
            70.0,
            0.35,
        ),
        (
            "utilisation",
            fields(None, None, Some(10), None, None),
            &[(ann::TARGET_UTILIZATION_PERCENTAGE, "50")],
            Metric::Concurrency,
            10.0,
            50.0,
            5.0,
        ),
        (
            "legacy utilisation spelling",
            fields(None, None, Some(10), None, None),
            &[("autoscaling.knative.dev/targetUtilizationPercentage", "100")],
            Metric::Concurrency,
            10.0,
            100.0,
            10.0,
        ),
        (
            "per-pod floor",
            fields(None, None, None, None, None),
            &[(ann::TARGET, "0.01")],
            Metric::Concurrency,
            0.01,
            70.0,
            0.01,
        ),
        ("rps default", fields(None, None, None, Some("rps"), None), &[], Metric::Rps, 200.0, 70.0, 140.0),
        ("rps ignores cc", fields(None, None, Some(30), Some("rps"), Some(4)), &[], Metric::Rps, 30.0, 70.0, 21.0),
        (
            "rps by annotation",
            fields(None, None, None, None, None),
            &[(ann::METRIC, "rps")],
            Metric::Rps,
            200.0,
            70.0,
            140.0,
        ),
    ];
    for (case, f, annotations, metric, target, utilisation, per_pod) in cases {
        let spec = resolve(f, annotations).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(spec.metric, *metric, "{case}");
        assert_eq!(spec.target, *target, "{case}");
        assert_eq!(spec.target_utilization_percentage, *utilisation, "{case}");
        assert!((spec.per_pod_target() - per_pod).abs() < 1e-9, "{case}: {}", spec.per_pod_target());
    }
}

#[test]
fn kserve_writes_fields_over_annotations() {
    // (case, fields, annotations, min, max, metric, target)
    let cases: &[(&str, PredictorScaling, Pairs, u32, u32, Metric, f64)] = &[
        (
            "min-scale annotation loses to the default minReplicas",
            fields(None, None, None, None, None),
            &[(ann::MIN_SCALE, "0")],
            1,
            0,
            Metric::Concurrency,
            100.0,
        ),
        (
            "minReplicas wins",
            fields(Some(0), None, None, None, None),
            &[(ann::MIN_SCALE, "3")],
            0,
            0,
            Metric::Concurrency,
            100.0,
        ),
        (
            "maxReplicas 0 leaves max-scale",
            fields(None, Some(0), None, None, None),
            &[(ann::MAX_SCALE, "4")],
            1,
            4,
            Metric::Concurrency,
            100.0,
        ),
        (
            "maxReplicas wins",
            fields(None, Some(6), None, None, None),
            &[(ann::MAX_SCALE, "4")],
            1,
            6,
            Metric::Concurrency,
            100.0,
        ),
        (
            "scaleTarget wins",
            fields(None, None, Some(10), None, None),
            &[(ann::TARGET, "50")],
            1,
            0,
            Metric::Concurrency,
            10.0,
        ),
        (
            "scaleMetric wins",
            fields(None, None, None, Some("concurrency"), None),
            &[(ann::METRIC, "rps")],
            1,
            0,
            Metric::Concurrency,
            100.0,
        ),
        (
            "annotations fill the gaps",
            fields(Some(2), None, None, None, None),
            &[(ann::METRIC, "rps"), (ann::TARGET, "40"), (ann::MAX_SCALE, "9")],
            2,
            9,
            Metric::Rps,
            40.0,
        ),
        (
            "legacy maxScale",
            fields(None, None, None, None, None),
            &[("autoscaling.knative.dev/maxScale", "7")],
            1,
            7,
            Metric::Concurrency,
            100.0,
        ),
        (
            "kebab-case beats camelCase",
            fields(None, None, None, None, None),
            &[(ann::MAX_SCALE, "5"), ("autoscaling.knative.dev/maxScale", "7")],
            1,
            5,
            Metric::Concurrency,
            100.0,
        ),
    ];
    for (case, f, annotations, min, max, metric, target) in cases {
        let spec = resolve(f, annotations).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(
            (spec.min_scale, spec.max_scale, spec.metric, spec.target),
            (*min, *max, *metric, *target),
            "{case}"
        );
    }
}

#[test]
fn reads_every_annotation() {
    let config = AutoscalerConfig { allow_zero_initial_scale: true, ..AutoscalerConfig::default() };
    let annotations = map(&[
        (ann::CLASS, "kpa.autoscaling.knative.dev"),
        (ann::INITIAL_SCALE, "0"),
        (ann::ACTIVATION_SCALE, "3"),
        (ann::MAX_SCALE, "10"),
        (ann::WINDOW, "2m"),
        (ann::PANIC_WINDOW_PERCENTAGE, "20"),
        (ann::PANIC_THRESHOLD_PERCENTAGE, "300"),
        (ann::SCALE_DOWN_DELAY, "30s"),
        (ann::TARGET_BURST_CAPACITY, "-1"),
        (ann::SCALE_TO_ZERO_POD_RETENTION_PERIOD, "1m"),
        (ann::METRIC_AGGREGATION_ALGORITHM, "weighted-exponential"),
    ]);
    let spec = ScalingSpec::resolve(&fields(Some(0), None, None, None, Some(4)), &annotations, &config).unwrap();
    let want = ScalingSpec {
        metric: Metric::Concurrency,
        target: 4.0,
        target_utilization_percentage: 70.0,
        container_concurrency: 4,
        min_scale: 0,
        max_scale: 10,
        initial_scale: 0,
        activation_scale: 3,
        stable_window: Duration::from_secs(120),
        panic_window_percentage: 20.0,
        panic_threshold_percentage: 300.0,
        scale_down_delay: Duration::from_secs(30),
        target_burst_capacity: -1.0,
        scale_to_zero_pod_retention_period: Duration::from_secs(60),
        aggregation: Aggregation::WeightedExponential,
        ..ScalingSpec::from_config(&config)
    };
    assert_eq!(spec, want);
    assert_eq!(spec.panic_window(), Duration::from_secs(24));
    assert_eq!(spec.panic_threshold(), 3.0);
    let legacy = map(&[(&format!("{}/metricAggregationAlgorithm", "autoscaling.knative.dev"), "weightedExponential")]);
    let spec = ScalingSpec::resolve(&PredictorScaling::default(), &legacy, &config).unwrap();
    assert_eq!(spec.aggregation, Aggregation::WeightedExponential);
}

#[test]
fn global_settings_come_from_the_config() {
    let config = AutoscalerConfig {
        max_scale_up_rate: 3.0,
        max_scale_down_rate: 1.5,
        enable_scale_to_zero: false,
        scale_to_zero_grace_period: Duration::from_secs(10),
        tick_interval: Duration::from_secs(1),
        stable_window: Duration::from_secs(30),
        container_concurrency_target_percentage: 90.0,
        max_scale: 20,
        initial_scale: 2,
        ..AutoscalerConfig::default()
    };
    let spec = ScalingSpec::resolve(&PredictorScaling::default(), &BTreeMap::new(), &config).unwrap();
    assert_eq!((spec.max_scale_up_rate, spec.max_scale_down_rate), (3.0, 1.5));
    assert!(!spec.enable_scale_to_zero);
    assert_eq!(spec.scale_to_zero_grace_period, Duration::from_secs(10));
    assert_eq!(spec.tick_interval, Duration::from_secs(1));
    assert_eq!(spec.stable_window, Duration::from_secs(30));
    assert_eq!(spec.panic_window(), Duration::from_secs(3));
    assert_eq!(spec.per_pod_target(), 90.0);
    assert_eq!((spec.max_scale, spec.initial_scale), (20, 2));
}

#[test]
fn panic_window_rounds_to_seconds_and_is_at_least_one() {
    let cases = [(60, 10.0, 6), (6, 10.0, 1), (7, 10.0, 1), (15, 10.0, 2), (100, 1.0, 1), (3600, 100.0, 3600)];
    for (stable, percentage, want) in cases {
        let spec = ScalingSpec {
            stable_window: Duration::from_secs(stable),
            panic_window_percentage: percentage,
            ..ScalingSpec::default()
        };
        assert_eq!(spec.panic_window(), Duration::from_secs(want), "{stable}s × {percentage}%");
    }
}

#[test]
fn rejects_bad_fields_and_annotations_by_name() {
    let none = PredictorScaling::default;
    let limited = AutoscalerConfig { max_scale_limit: 10, max_scale: 10, ..AutoscalerConfig::default() };
    let default = AutoscalerConfig::default();
    let cases: &[(PredictorScaling, Pairs, &AutoscalerConfig, &str)] = &[
        (fields(Some(3), Some(2), None, None, None), &[], &default, "minReplicas: 3 is more than maxReplicas (2)"),
        (
            fields(None, None, None, Some("cpu"), None),
            &[],
            &default,
            r#"scaleMetric: cannot parse "cpu" as concurrency or rps"#,
        ),
        (
            fields(None, None, Some(0), Some("rps"), None),
            &[],
            &default,
            "scaleTarget = 0: must be at least 1 for the rps metric",
        ),
        (
            none(),
            &[(ann::CLASS, "hpa.autoscaling.knative.dev")],
            &default,
            "autoscaling.knative.dev/class = hpa.autoscaling.knative.dev: \
             must be kpa.autoscaling.knative.dev, the only class Skiff serves",
        ),
        (
            none(),
            &[(ann::METRIC, "memory")],
            &default,
            r#"autoscaling.knative.dev/metric: cannot parse "memory" as concurrency or rps"#,
        ),
        (
            none(),
            &[(ann::METRIC_AGGREGATION_ALGORITHM, "median")],
            &default,
            concat!(
                "autoscaling.knative.dev/metric-aggregation-algorithm: ",
                r#"cannot parse "median" as linear or weighted-exponential"#
            ),
        ),
        (
            none(),
            &[(ann::MAX_SCALE, "-1")],
            &default,
            "autoscaling.knative.dev/max-scale = -1: must be a whole number between 0 and 4294967295",
        ),
        (
            none(),
            &[(ann::MAX_SCALE, "many")],
            &default,
            r#"autoscaling.knative.dev/max-scale: cannot parse "many" as a whole number"#,
        ),
        (
            fields(Some(3), None, None, None, None),
            &[(ann::MAX_SCALE, "2")],
            &default,
            "autoscaling.knative.dev/max-scale: 2 is less than min-scale (3)",
        ),
        (
            fields(Some(3), None, None, None, None),
            &[("autoscaling.knative.dev/maxScale", "2")],
            &default,
            "autoscaling.knative.dev/maxScale: 2 is less than min-scale (3)",
        ),
        (
            none(),
            &[(ann::MAX_SCALE, "20")],
            &limited,
            "autoscaling.knative.dev/max-scale = 20: must be between 1 and max-scale-limit (10)",
        ),
        (
            fields(None, Some(20), None, None, None),
            &[],
            &limited,
            "maxReplicas = 20: must be between 1 and max-scale-limit (10)",
        ),
        (
            none(),
            &[(ann::MAX_SCALE, "0")],
            &limited,
            "autoscaling.knative.dev/max-scale = 0: 0 (unlimited) is not allowed: max-scale-limit is 10",
        ),
        (
            none(),
            &[(ann::ACTIVATION_SCALE, "1")],
            &default,
            "autoscaling.knative.dev/activation-scale = 1: must be at least 2",
        ),
        (
            none(),
            &[(ann::ACTIVATION_SCALE, "two")],
            &default,
            r#"autoscaling.knative.dev/activation-scale: cannot parse "two" as a whole number"#,
        ),
        (
            fields(Some(3), None, None, None, None),
            &[(ann::ACTIVATION_SCALE, "2")],
            &default,
            "autoscaling.knative.dev/activation-scale: 2 is less than min-scale (3)",
        ),
        (
            fields(None, Some(2), None, None, None),
            &[(ann::ACTIVATION_SCALE, "3")],
            &default,
            "autoscaling.knative.dev/activation-scale: 3 is more than max-scale (2)",
        ),
        (
            none(),
            &[(ann::INITIAL_SCALE, "0")],
            &default,
            "autoscaling.knative.dev/initial-scale = 0: must be at least 1: allow-zero-initial-scale is false",
        ),
        (
            none(),
            &[("autoscaling.knative.dev/initialScale", "-1")],
            &default,
            "autoscaling.knative.dev/initialScale = -1: must be a whole number between 0 and 4294967295",
        ),
        (none(), &[(ann::TARGET, "0")], &default, "autoscaling.knative.dev/target = 0: must be at least 0.01"),
        (
            none(),
            &[(ann::TARGET, "lots")],
            &default,
            r#"autoscaling.knative.dev/target: cannot parse "lots" as a number"#,
        ),
        (
            none(),
            &[(ann::TARGET_UTILIZATION_PERCENTAGE, "0.5")],
            &default,
            "autoscaling.knative.dev/target-utilization-percentage = 0.5: must be between 1 and 100",
        ),
        (
            none(),
            &[(ann::TARGET_UTILIZATION_PERCENTAGE, "101")],
            &default,
            "autoscaling.knative.dev/target-utilization-percentage = 101: must be between 1 and 100",
        ),
        (
            none(),
            &[(ann::WINDOW, "5s")],
            &default,
            "autoscaling.knative.dev/window = 5s: must be between 6s and 1h, in whole seconds",
        ),
        (
            none(),
            &[(ann::WINDOW, "61.5s")],
            &default,
            "autoscaling.knative.dev/window = 61.5s: must be between 6s and 1h, in whole seconds",
        ),
        (
            none(),
            &[(ann::WINDOW, "2h")],
            &default,
            "autoscaling.knative.dev/window = 2h: must be between 6s and 1h, in whole seconds",
        ),
        (
            none(),
            &[(ann::WINDOW, "sixty")],
            &default,
            r#"autoscaling.knative.dev/window: cannot parse "sixty" as a duration such as 60s, 1m30s or 500ms"#,
        ),
        (
            none(),
            &[(ann::PANIC_WINDOW_PERCENTAGE, "0")],
            &default,
            "autoscaling.knative.dev/panic-window-percentage = 0: must be between 1 and 100",
        ),
        (
            none(),
            &[(ann::PANIC_THRESHOLD_PERCENTAGE, "100")],
            &default,
            "autoscaling.knative.dev/panic-threshold-percentage = 100: must be between 110 and 1000",
        ),
        (
            none(),
            &[(ann::SCALE_DOWN_DELAY, "-1s")],
            &default,
            "autoscaling.knative.dev/scale-down-delay = -1s: must be between 0s and 1h, in whole seconds",
        ),
        (
            none(),
            &[(ann::SCALE_DOWN_DELAY, "2h")],
            &default,
            "autoscaling.knative.dev/scale-down-delay = 2h: must be between 0s and 1h, in whole seconds",
        ),
        (
            none(),
            &[(ann::SCALE_DOWN_DELAY, "1.5s")],
            &default,
            "autoscaling.knative.dev/scale-down-delay = 1.5s: must be between 0s and 1h, in whole seconds",
        ),
        (
            none(),
            &[(ann::TARGET_BURST_CAPACITY, "-2")],
            &default,
            "autoscaling.knative.dev/target-burst-capacity = -2: must be -1 (unlimited) or at least 0",
        ),
        (
            none(),
            &[(ann::TARGET_BURST_CAPACITY, "x")],
            &default,
            r#"autoscaling.knative.dev/target-burst-capacity: cannot parse "x" as a number"#,
        ),
        (
            none(),
            &[(ann::SCALE_TO_ZERO_POD_RETENTION_PERIOD, "2h")],
            &default,
            "autoscaling.knative.dev/scale-to-zero-pod-retention-period = 2h: must be between 0s and 1h",
        ),
        (
            none(),
            &[(ann::SCALE_TO_ZERO_POD_RETENTION_PERIOD, "-1s")],
            &default,
            "autoscaling.knative.dev/scale-to-zero-pod-retention-period = -1s: must be between 0s and 1h",
        ),
    ];
    for (f, annotations, config, want) in cases {
        let err = ScalingSpec::resolve(f, &map(annotations), config).expect_err(want);
        assert_eq!(err.to_string(), *want);
        assert!(want.starts_with(err.key()), "{want}");
    }
}
