use proptest::prelude::*;

use super::*;
use crate::isvc::{ModelFormat, ModelSpec};
use crate::labels::{PROGRESS_DEADLINE_SECONDS, REVISION_NAME, SCALING};
use crate::scaling::ScalingInputs;

const MAX_CC: u32 = 1000;
const MAX_TIMEOUT: u64 = 3600;

fn settings() -> impl Strategy<Value = RevisionSettings> {
    (0..=MAX_CC, 1..=MAX_TIMEOUT, prop::option::of(1..=MAX_PROGRESS_DEADLINE_SECS), any::<bool>()).prop_map(
        |(container_concurrency, timeout_secs, progress_deadline_secs, queue_proxy)| RevisionSettings {
            container_concurrency,
            timeout_secs,
            progress_deadline_secs,
            queue_proxy,
        },
    )
}

/// Labels someone else put on the object (the revision's name, KServe's, a user's).
fn other_labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map("[a-z]{1,8}(\\.io/[a-z]{1,8})?", "[a-z0-9-]{0,12}", 0..4)
}

/// A label value that is not a whole number: text, a negative or a fraction.
fn not_a_count() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z _.][ -~]{0,10}", "-[0-9]{1,20}", "[0-9]{1,4}\\.[0-9]{1,3}", Just(String::new())]
}

fn spec(container_concurrency: Option<i64>, timeout: Option<i64>, shape: u8) -> PredictorSpec {
    let model = |format: &str| ModelSpec {
        model_format: ModelFormat { name: format.to_owned(), version: None },
        storage_uri: Some("file:///m".to_owned()),
        runtime: None,
        protocol_version: None,
        other: BTreeMap::new(),
    };
    let (model, containers) = match shape {
        0 => (Some(model("onnx")), None),
        1 => (Some(model("sklearn")), None),
        _ => (None, Some(vec![serde_json::json!({"name": "c", "image": "c:1"})])),
    };
    PredictorSpec { container_concurrency, timeout, model, containers, ..PredictorSpec::default() }
}

proptest! {
    #[test]
    fn settings_within_the_spec_round_trip_through_their_labels(
        settings in settings(),
        others in other_labels(),
    ) {
        let mut labels = others.clone();
        settings.write_labels(&mut labels);
        prop_assert_eq!(RevisionSettings::from_labels(&labels), settings);
        prop_assert_eq!(RevisionSettings::from_labels(&settings.labels()), settings);
        let written: Vec<&String> = labels.keys().filter(|k| !others.contains_key(*k)).collect();
        prop_assert!(written.iter().all(|k| k.starts_with("skiff.dev/")), "{:?}", written);
    }

    #[test]
    fn a_valid_spec_reads_back_from_its_labels_as_it_was_written(
        container_concurrency in prop::option::of(0..=i64::from(MAX_CC)),
        timeout in prop::option::of(1..=3600i64),
        shape in 0u8..3,
    ) {
        let spec = spec(container_concurrency, timeout, shape);
        let settings = RevisionSettings::of(&spec);
        prop_assert_eq!(i64::from(settings.container_concurrency), container_concurrency.unwrap_or(0));
        prop_assert_eq!(settings.timeout(), request_timeout(&spec));
        prop_assert_eq!(settings.queue_proxy, shape != 0, "only ONNX without a runtime is served directly");
        prop_assert_eq!(RevisionSettings::from_labels(&settings.labels()), settings);
    }

    #[test]
    fn labels_past_the_maxima_read_as_the_maxima(
        container_concurrency in u64::from(MAX_CC) + 1..,
        timeout in MAX_TIMEOUT + 1..,
    ) {
        let labels = BTreeMap::from([
            (CONTAINER_CONCURRENCY.to_owned(), container_concurrency.to_string()),
            (TIMEOUT_SECONDS.to_owned(), timeout.to_string()),
        ]);
        let read = RevisionSettings::from_labels(&labels);
        prop_assert_eq!((read.container_concurrency, read.timeout_secs), (MAX_CC, MAX_TIMEOUT));
    }

    #[test]
    fn labels_that_are_not_counts_read_as_the_defaults(
        container_concurrency in not_a_count(),
        timeout in not_a_count(),
        queue_proxy in "[ -~]{0,6}",
    ) {
        prop_assume!(queue_proxy != "true");
        let labels = BTreeMap::from([
            (CONTAINER_CONCURRENCY.to_owned(), container_concurrency),
            (TIMEOUT_SECONDS.to_owned(), timeout),
            (QUEUE_PROXY.to_owned(), queue_proxy),
        ]);
        prop_assert_eq!(RevisionSettings::from_labels(&labels), RevisionSettings::default());
    }

    #[test]
    fn scaling_inputs_round_trip_through_their_annotation(
        min_replicas in prop::option::of(any::<u32>()),
        max_replicas in prop::option::of(any::<u32>()),
        scale_target in prop::option::of(any::<u32>()),
        scale_metric in prop::option::of("[a-z\"\\\\ ]{0,8}"),
        container_concurrency in prop::option::of(any::<u32>()),
        annotations in prop::collection::btree_map("autoscaling\\.knative\\.dev/[a-z-]{1,12}", "[ -~]{0,8}", 0..4),
        scale_metric_type in prop::option::of("[A-Za-z\"]{0,8}"),
        target in prop::option::of(0..1000u32),
        kserve in prop::collection::btree_map("serving\\.kserve\\.io/[a-zA-Z]{1,12}", "[ -~]{0,8}", 0..3),
    ) {
        let auto_scaling = target.map(|t| serde_json::json!({"metrics": [{"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": t}}}]}));
        let inputs = ScalingInputs {
            min_replicas, max_replicas, scale_target, scale_metric, container_concurrency, annotations,
            scale_metric_type, auto_scaling, kserve,
        };
        let (key, value) = inputs.annotation();
        prop_assert_eq!(key.as_str(), SCALING);
        let on_deployment = BTreeMap::from([(key, value), ("owner".to_owned(), "team-a".to_owned())]);
        prop_assert_eq!(ScalingInputs::from_annotations(&on_deployment), inputs);
    }
}

#[test]
fn absent_labels_and_edge_values_read_as_stated() {
    let bare = BTreeMap::from([(REVISION_NAME.to_owned(), "r".to_owned())]);
    assert_eq!(RevisionSettings::from_labels(&bare), RevisionSettings::default());
    assert_eq!(
        RevisionSettings::default(),
        RevisionSettings {
            container_concurrency: 0,
            timeout_secs: 300,
            progress_deadline_secs: None,
            queue_proxy: false
        }
    );
    let zero = BTreeMap::from([(TIMEOUT_SECONDS.to_owned(), "0".to_owned())]);
    assert_eq!(RevisionSettings::from_labels(&zero).timeout(), DEFAULT_TIMEOUT, "a timeout of 0 is the default");
    let edited = BTreeMap::from([
        (CONTAINER_CONCURRENCY.to_owned(), u64::MAX.to_string()),
        (TIMEOUT_SECONDS.to_owned(), (1u64 << 63).to_string()),
        (QUEUE_PROXY.to_owned(), "True".to_owned()),
    ]);
    let read = RevisionSettings::from_labels(&edited);
    assert_eq!(
        (read.container_concurrency, read.timeout(), read.queue_proxy),
        (1000, Duration::from_secs(3600), false)
    );
}

#[test]
fn the_progress_deadline_holds_requests_and_adds_to_the_whole_request() {
    let annotations = |value: &str| BTreeMap::from([(PROGRESS_DEADLINE_ANNOTATION.to_owned(), value.to_owned())]);
    assert_eq!(progress_deadline(&BTreeMap::new()), Ok(None));
    assert_eq!(progress_deadline(&annotations("15m")), Ok(Some(Duration::from_secs(900))));
    assert_eq!(progress_deadline(&annotations("1h30m")), Ok(Some(Duration::from_secs(5400))));
    assert_eq!(progress_deadline(&annotations("10m")).unwrap(), Some(Duration::from_secs(600)));
    assert_eq!(progress_deadline(&annotations("3h")), Err("must be between 1s and 7200s, got \"3h\"".to_owned()));
    assert_eq!(progress_deadline(&annotations("500ms")), Err("must be between 1s and 7200s, got \"500ms\"".to_owned()));
    assert_eq!(
        progress_deadline(&annotations("ten minutes")),
        Err("must be a duration such as 600s or 15m, got \"ten minutes\"".to_owned())
    );

    let spec = PredictorSpec { timeout: Some(60), ..PredictorSpec::default() };
    let plain = RevisionSettings::of(&spec);
    assert_eq!((plain.progress_deadline_secs, plain.whole_request()), (None, Duration::from_secs(60)));
    let slow = RevisionSettings::of(&spec).with_progress_deadline(&annotations("20m"));
    assert_eq!((slow.progress_deadline_secs, slow.whole_request()), (Some(1200), Duration::from_secs(1260)));
    assert_eq!(RevisionSettings::from_labels(&slow.labels()), slow);
    let invalid = RevisionSettings::of(&spec).with_progress_deadline(&annotations("soon"));
    assert_eq!(invalid, plain, "an invalid annotation (which validation refuses) is ignored");
    let past = BTreeMap::from([(PROGRESS_DEADLINE_SECONDS.to_owned(), u64::MAX.to_string())]);
    assert_eq!(RevisionSettings::from_labels(&past).progress_deadline_secs, Some(MAX_PROGRESS_DEADLINE_SECS));
}

#[test]
fn container_concurrency_is_a_count_within_the_spec() {
    let cases = [(None, 0), (Some(-1), 0), (Some(i64::MIN), 0), (Some(0), 0), (Some(4), 4), (Some(1000), 1000)];
    for (spec, count) in cases.into_iter().chain([(Some(1001), 1000), (Some(i64::MAX), 1000)]) {
        assert_eq!(container_concurrency(spec), count, "{spec:?}");
    }
    let settings = RevisionSettings { container_concurrency: 7, ..RevisionSettings::default() };
    assert_eq!(settings.per_replica_limit(), 7);
}

#[test]
fn the_component_label_names_the_component_or_none() {
    assert_eq!(component_of(&BTreeMap::new()), Some(Component::Predictor), "revisions before the label");
    for component in Component::ALL {
        let labels = BTreeMap::from([(COMPONENT.to_owned(), component.name().to_owned())]);
        assert_eq!(component_of(&labels), Some(component));
    }
    let unknown = BTreeMap::from([(COMPONENT.to_owned(), "router".to_owned())]);
    assert_eq!(component_of(&unknown), None);
}

#[test]
fn a_missing_or_unreadable_scaling_annotation_reads_as_no_inputs() {
    assert_eq!(ScalingInputs::from_annotations(&BTreeMap::new()), ScalingInputs::default());
    let garbage = BTreeMap::from([(SCALING.to_owned(), "{not json".to_owned())]);
    assert_eq!(ScalingInputs::from_annotations(&garbage), ScalingInputs::default());
}
