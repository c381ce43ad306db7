use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn defaults_are_knatives() {
    let c = AutoscalerConfig::default();
    assert!(c.enable_scale_to_zero);
    assert_eq!(c.container_concurrency_target_percentage, 70.0);
    assert_eq!(c.container_concurrency_target_default, 100.0);
    assert_eq!(c.requests_per_second_target_default, 200.0);
    assert_eq!(c.target_burst_capacity, 211.0);
    assert_eq!(c.stable_window, Duration::from_secs(60));
    assert_eq!(c.panic_window_percentage, 10.0);
    assert_eq!(c.panic_threshold_percentage, 200.0);
    assert_eq!(c.max_scale_up_rate, 1000.0);
    assert_eq!(c.max_scale_down_rate, 2.0);
    assert_eq!(c.scale_to_zero_grace_period, Duration::from_secs(30));
    assert_eq!(c.scale_to_zero_pod_retention_period, Duration::ZERO);
    assert_eq!(c.scale_down_delay, Duration::ZERO);
    assert_eq!(c.initial_scale, 1);
    assert!(!c.allow_zero_initial_scale);
    assert_eq!((c.min_scale, c.max_scale, c.max_scale_limit), (0, 0, 0));
    assert_eq!(c.activator_capacity, 100.0);
    assert_eq!(c.tick_interval, Duration::from_secs(2));
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(AutoscalerConfig::from_map(&BTreeMap::new()), Ok(c));
}

#[test]
fn reads_every_key() {
    let data = map(&[
        ("enable-scale-to-zero", "false"),
        ("container-concurrency-target-percentage", "80"),
        ("container-concurrency-target-default", "10"),
        ("requests-per-second-target-default", "50.5"),
        ("target-burst-capacity", "-1"),
        ("stable-window", "1m30s"),
        ("panic-window-percentage", "20"),
        ("panic-threshold-percentage", "300"),
        ("max-scale-up-rate", "10"),
        ("max-scale-down-rate", "4"),
        ("scale-to-zero-grace-period", "500ms"),
        ("scale-to-zero-pod-retention-period", "2m"),
        ("scale-down-delay", "15s"),
        ("initial-scale", "0"),
        ("allow-zero-initial-scale", "true"),
        ("min-scale", "1"),
        ("max-scale", "8"),
        ("max-scale-limit", "10"),
        ("activator-capacity", "250"),
        ("tick-interval", "1s"),
        ("_example", "ignored"),
        ("pod-autoscaler-class", "kpa.autoscaling.knative.dev"),
    ]);
    let c = AutoscalerConfig::from_map(&data).unwrap();
    let want = AutoscalerConfig {
        enable_scale_to_zero: false,
        container_concurrency_target_percentage: 80.0,
        container_concurrency_target_default: 10.0,
        requests_per_second_target_default: 50.5,
        target_burst_capacity: -1.0,
        stable_window: Duration::from_secs(90),
        panic_window_percentage: 20.0,
        panic_threshold_percentage: 300.0,
        max_scale_up_rate: 10.0,
        max_scale_down_rate: 4.0,
        scale_to_zero_grace_period: Duration::from_millis(500),
        scale_to_zero_pod_retention_period: Duration::from_secs(120),
        scale_down_delay: Duration::from_secs(15),
        initial_scale: 0,
        allow_zero_initial_scale: true,
        min_scale: 1,
        max_scale: 8,
        max_scale_limit: 10,
        activator_capacity: 250.0,
        tick_interval: Duration::from_secs(1),
    };
    assert_eq!(c, want);
}

#[test]
fn reads_values_in_their_accepted_spellings() {
    type Case = (&'static str, &'static str, fn(&AutoscalerConfig) -> bool);
    let cases: &[Case] = &[
        ("container-concurrency-target-percentage", "0.8", |c| c.container_concurrency_target_percentage == 80.0),
        ("container-concurrency-target-percentage", "1", |c| c.container_concurrency_target_percentage == 100.0),
        ("container-concurrency-target-percentage", "100", |c| c.container_concurrency_target_percentage == 100.0),
        ("enable-scale-to-zero", "F", |c| !c.enable_scale_to_zero),
        ("enable-scale-to-zero", "0", |c| !c.enable_scale_to_zero),
        ("enable-scale-to-zero", " TRUE ", |c| c.enable_scale_to_zero),
        ("stable-window", "1h", |c| c.stable_window == Duration::from_secs(3600)),
        ("stable-window", "6s", |c| c.stable_window == Duration::from_secs(6)),
        ("scale-down-delay", "0", |c| c.scale_down_delay.is_zero()),
        ("target-burst-capacity", "0", |c| c.target_burst_capacity == 0.0),
        ("max-scale-up-rate", "1.5e3", |c| c.max_scale_up_rate == 1500.0),
    ];
    for (key, value, check) in cases {
        let c = AutoscalerConfig::from_map(&map(&[(key, value)])).unwrap_or_else(|e| panic!("{key}={value}: {e}"));
        assert!(check(&c), "{key}={value}: {c:?}");
    }
}

#[test]
fn rejects_bad_values_naming_the_key_and_range() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("enable-scale-to-zero", "yes")],
            r#"enable-scale-to-zero: cannot parse "yes" as a boolean (true or false)"#,
        ),
        (
            &[("allow-zero-initial-scale", "")],
            r#"allow-zero-initial-scale: cannot parse "" as a boolean (true or false)"#,
        ),
        (
            &[("container-concurrency-target-percentage", "0")],
            "container-concurrency-target-percentage = 0: must be greater than 0 and at most 100",
        ),
        (
            &[("container-concurrency-target-percentage", "150")],
            "container-concurrency-target-percentage = 150: must be greater than 0 and at most 100",
        ),
        (
            &[("container-concurrency-target-percentage", "seventy")],
            r#"container-concurrency-target-percentage: cannot parse "seventy" as a number"#,
        ),
        (
            &[("container-concurrency-target-default", "0.01")],
            "container-concurrency-target-default = 0.01: with container-concurrency-target-percentage 70 the \
             per-pod target is 0.007; it must be at least 0.01",
        ),
        (
            &[("requests-per-second-target-default", "0")],
            "requests-per-second-target-default = 0: must be at least 0.01",
        ),
        (
            &[("requests-per-second-target-default", "inf")],
            r#"requests-per-second-target-default: cannot parse "inf" as a number"#,
        ),
        (&[("target-burst-capacity", "-2")], "target-burst-capacity = -2: must be -1 (unlimited) or at least 0"),
        (&[("target-burst-capacity", "NaN")], r#"target-burst-capacity: cannot parse "NaN" as a number"#),
        (&[("stable-window", "5s")], "stable-window = 5s: must be between 6s and 1h, in whole seconds"),
        (&[("stable-window", "2h")], "stable-window = 2h: must be between 6s and 1h, in whole seconds"),
        (&[("stable-window", "6.5s")], "stable-window = 6.5s: must be between 6s and 1h, in whole seconds"),
        (&[("stable-window", "-1m")], "stable-window = -1m: must be between 6s and 1h, in whole seconds"),
        (&[("stable-window", "60")], r#"stable-window: cannot parse "60" as a duration such as 60s, 1m30s or 500ms"#),
        (&[("panic-window-percentage", "0.5")], "panic-window-percentage = 0.5: must be between 1 and 100"),
        (&[("panic-window-percentage", "101")], "panic-window-percentage = 101: must be between 1 and 100"),
        (&[("panic-threshold-percentage", "100")], "panic-threshold-percentage = 100: must be between 110 and 1000"),
        (&[("panic-threshold-percentage", "1001")], "panic-threshold-percentage = 1001: must be between 110 and 1000"),
        (&[("max-scale-up-rate", "1")], "max-scale-up-rate = 1: must be greater than 1"),
        (&[("max-scale-down-rate", "0.5")], "max-scale-down-rate = 0.5: must be greater than 1"),
        (&[("scale-to-zero-grace-period", "0s")], "scale-to-zero-grace-period = 0s: must be greater than 0s"),
        (&[("scale-to-zero-grace-period", "-30s")], "scale-to-zero-grace-period = -30s: must be greater than 0s"),
        (
            &[("scale-to-zero-pod-retention-period", "2h")],
            "scale-to-zero-pod-retention-period = 2h: must be between 0s and 1h",
        ),
        (
            &[("scale-to-zero-pod-retention-period", "-1s")],
            "scale-to-zero-pod-retention-period = -1s: must be between 0s and 1h",
        ),
        (&[("scale-down-delay", "1.5s")], "scale-down-delay = 1.5s: must be between 0s and 1h, in whole seconds"),
        (&[("scale-down-delay", "61m")], "scale-down-delay = 1h1m: must be between 0s and 1h, in whole seconds"),
        (&[("scale-down-delay", "-1s")], "scale-down-delay = -1s: must be between 0s and 1h, in whole seconds"),
        (&[("initial-scale", "0")], "initial-scale = 0: must be at least 1 (0 needs allow-zero-initial-scale: true)"),
        (&[("initial-scale", "-1")], "initial-scale = -1: must be a whole number between 0 and 4294967295"),
        (&[("initial-scale", "1.5")], r#"initial-scale: cannot parse "1.5" as a whole number"#),
        (&[("max-scale", "4294967296")], "max-scale = 4294967296: must be a whole number between 0 and 4294967295"),
        (&[("max-scale-limit", "10")], "max-scale = 0: must be between 1 and max-scale-limit (10)"),
        (
            &[("max-scale-limit", "10"), ("max-scale", "20")],
            "max-scale = 20: must be between 1 and max-scale-limit (10)",
        ),
        (&[("min-scale", "5"), ("max-scale", "3")], "min-scale: 5 is more than max-scale (3)"),
        (&[("activator-capacity", "0.5")], "activator-capacity = 0.5: must be at least 1"),
        (&[("tick-interval", "500ms")], "tick-interval = 500ms: must be between 1s and 1m, in whole seconds"),
        (&[("tick-interval", "2m")], "tick-interval = 2m: must be between 1s and 1m, in whole seconds"),
    ];
    for (pairs, want) in cases {
        let err = AutoscalerConfig::from_map(&map(pairs)).expect_err(want);
        assert_eq!(err.to_string(), *want);
        assert!(want.starts_with(err.key()), "{want}");
        assert!(pairs.iter().any(|(key, _)| *key == err.key()) || err.key() == "max-scale", "{want}");
    }
}

#[test]
fn validate_checks_structs_built_in_code() {
    type Case = (fn(&mut AutoscalerConfig), &'static str);
    let cases: &[Case] = &[
        (
            |c| c.stable_window = Duration::from_secs(3),
            "stable-window = 3s: must be between 6s and 1h, in whole seconds",
        ),
        (|c| c.scale_to_zero_grace_period = Duration::ZERO, "scale-to-zero-grace-period = 0s: must be greater than 0s"),
        (|c| c.max_scale_down_rate = 1.0, "max-scale-down-rate = 1: must be greater than 1"),
        (|c| c.panic_window_percentage = f64::NAN, "panic-window-percentage = NaN: must be between 1 and 100"),
        (|c| c.activator_capacity = f64::NAN, "activator-capacity = NaN: must be at least 1"),
        (|c| c.tick_interval = Duration::ZERO, "tick-interval = 0s: must be between 1s and 1m, in whole seconds"),
    ];
    for (change, want) in cases {
        let mut c = AutoscalerConfig::default();
        change(&mut c);
        assert_eq!(c.validate().unwrap_err().to_string(), *want);
    }
}
