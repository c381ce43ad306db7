use super::*;
use crate::isvc::{LoggerSpec, ModelFormat};

const IRIS: &str = r#"
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: iris
  annotations:
    autoscaling.knative.dev/window: "30s"
spec:
  predictor:
    minReplicas: 0
    maxReplicas: 3
    serviceAccountName: reader
    model:
      modelFormat:
        name: onnx
      storageUri: file://./models/iris
"#;

fn check(edit: impl Fn(&mut InferenceService)) -> String {
    let mut isvc = InferenceService::from_yaml(IRIS).unwrap();
    edit(&mut isvc);
    validate(&isvc, &AutoscalerConfig::default()).map(|()| "ok".to_owned()).unwrap_or_else(|e| e.to_string())
}

#[test]
fn a_plain_manifest_is_valid_and_keeps_unknown_fields() {
    assert_eq!(check(|_| {}), "ok");
    let isvc = InferenceService::from_yaml(IRIS).unwrap();
    assert_eq!(isvc.spec.predictor.other["serviceAccountName"], "reader");
    let again = InferenceService::from_yaml(&serde_saphyr::to_string(&isvc).unwrap()).unwrap();
    assert_eq!(again, isvc);
}

/// A change to the valid manifest.
type Edit = Box<dyn Fn(&mut InferenceService)>;

#[test]
fn every_rule_names_its_field() {
    let cases: Vec<(Edit, &str)> = vec![
        (Box::new(|i| i.api_version = "v1".into()), "apiVersion: must be serving.kserve.io/v1beta1"),
        (Box::new(|i| i.metadata.name = "Iris".into()), "metadata.name: \"Iris\" is not a DNS-1035 label"),
        (
            Box::new(|i| i.spec.predictor.min_replicas = Some(4)),
            "spec.predictor.minReplicas: 4 is more than maxReplicas 3",
        ),
        (Box::new(|i| i.spec.predictor.max_replicas = Some(-1)), "spec.predictor.maxReplicas: -1 is less than 0"),
        (
            Box::new(|i| i.spec.predictor.container_concurrency = Some(-2)),
            "spec.predictor.containerConcurrency: -2 is less than 0",
        ),
        (
            Box::new(|i| i.spec.predictor.canary_traffic_percent = Some(101)),
            "spec.predictor.canaryTrafficPercent: 101 is outside 0..100",
        ),
        (Box::new(|i| i.spec.predictor.timeout = Some(0)), "spec.predictor.timeout: 0 is less than 1"),
        (
            Box::new(|i| i.spec.predictor.model = None),
            "spec.predictor: exactly one of model, containers or a framework",
        ),
        (
            Box::new(|i| {
                i.spec.predictor.other.insert("sklearn".into(), serde_json::json!({"storageUri": "gs://x"}));
            }),
            "found model, sklearn",
        ),
        (
            Box::new(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = None),
            "spec.predictor.model.storageUri: is required",
        ),
        (
            Box::new(|i| i.spec.predictor.model.as_mut().unwrap().protocol_version = Some("v3".into())),
            "spec.predictor.model.protocolVersion: must be v1, v2 or grpc-v2",
        ),
        (Box::new(|i| i.spec.predictor.scale_metric = Some("cpu".into())), "spec.predictor.scaleMetric"),
        (
            Box::new(|i| i.spec.transformer = Some(PredictorSpec::default())),
            "spec.transformer: must set containers (Skiff runs the transformer as a custom container); found none",
        ),
        (
            Box::new(|i| i.spec.explainer = Some(i.spec.predictor.clone())),
            "spec.explainer: must set containers (Skiff runs the explainer as a custom container); found model",
        ),
        (
            Box::new(|i| {
                i.spec.transformer = Some(PredictorSpec {
                    containers: Some(vec![serde_json::json!({"name": "kserve-container", "image": "t"})]),
                    min_replicas: Some(-1),
                    ..PredictorSpec::default()
                })
            }),
            "spec.transformer.minReplicas: -1 is less than 0",
        ),
        (
            Box::new(|i| {
                i.metadata.name = "a".repeat(46);
                i.spec.transformer = Some(PredictorSpec {
                    containers: Some(vec![serde_json::json!({"name": "kserve-container", "image": "t"})]),
                    ..PredictorSpec::default()
                })
            }),
            "metadata.name: 46 characters is too long for a transformer",
        ),
        (
            Box::new(|i| i.spec.predictor.logger = Some(LoggerSpec::default())),
            "spec.predictor.logger.url: must be an http:// URL with a host (https sinks are not supported yet), not \"\"",
        ),
        (
            Box::new(|i| {
                i.spec.predictor.logger = Some(LoggerSpec { url: Some("ftp://sink".into()), ..LoggerSpec::default() })
            }),
            "spec.predictor.logger.url: must be an http:// URL",
        ),
        (
            Box::new(|i| {
                i.spec.predictor.logger = Some(LoggerSpec {
                    url: Some("http://sink.default/events".into()),
                    mode: Some("both".into()),
                    ..LoggerSpec::default()
                })
            }),
            "spec.predictor.logger.mode: must be all, request or response, not \"both\"",
        ),
        (
            Box::new(|i| {
                i.metadata.annotations.insert("autoscaling.knative.dev/window".into(), "1s".into());
            }),
            "metadata.annotations[autoscaling.knative.dev/window]",
        ),
        (
            Box::new(|i| {
                i.metadata.annotations.insert("serving.knative.dev/progress-deadline".into(), "3h".into());
            }),
            "metadata.annotations[serving.knative.dev/progress-deadline]: must be between 1s and 7200s, got \"3h\"",
        ),
    ];
    for (edit, want) in cases {
        let got = check(edit);
        assert!(got.contains(want), "got {got:?}, want {want:?}");
    }
}

#[test]
fn a_name_too_long_for_its_revision_names_is_refused_with_the_limit() {
    assert_eq!(check(|i| i.metadata.name = "a".repeat(47)), "ok");
    assert_eq!(
        check(|i| i.metadata.name = "a".repeat(48)),
        "metadata.name: 48 characters is too long; the limit is 47 characters, so that revision names \
         (<name>-predictor-00001) fit in 63"
    );
    let sixty = check(|i| i.metadata.name = "a".repeat(60));
    assert!(sixty.starts_with("metadata.name: 60 characters is too long; the limit is 47"), "{sixty}");
    for bad in ["1iris", "iris-", "ir.is", "ir_is", ""] {
        let got = check(|i| i.metadata.name = bad.into());
        assert!(got.starts_with("metadata.name: ") && got.contains("is not a DNS-1035 label"), "{bad:?}: {got}");
    }
}

/// A change to the predictor of the valid manifest.
type PredictorEdit = fn(&mut PredictorSpec);

#[test]
fn every_bound_names_its_field_and_its_limit() {
    let p = |edit: PredictorEdit| check(|i| edit(&mut i.spec.predictor));
    let cases: [(PredictorEdit, &str); 10] = [
        (|p| p.container_concurrency = Some(1000), "ok"),
        (|p| p.container_concurrency = Some(1001), "spec.predictor.containerConcurrency: 1001 is more than 1000"),
        (|p| p.timeout = Some(3600), "ok"),
        (|p| p.timeout = Some(3601), "spec.predictor.timeout: 3601 is more than 3600"),
        (|p| p.timeout = Some(i64::MAX), "spec.predictor.timeout: 9223372036854775807 is more than 3600"),
        (|p| p.max_replicas = Some(1001), "spec.predictor.maxReplicas: 1001 is more than 1000"),
        (
            |p| (p.min_replicas, p.max_replicas) = (Some(1001), Some(0)),
            "spec.predictor.minReplicas: 1001 is more than 1000",
        ),
        (|p| p.scale_target = Some(100_000), "ok"),
        (|p| p.scale_target = Some(100_001), "spec.predictor.scaleTarget: 100001 is more than 100000"),
        (|p| p.scale_target = Some(0), "spec.predictor.scaleTarget: 0 is less than 1"),
    ];
    for (edit, want) in cases {
        assert_eq!(p(edit), want);
    }
}

#[test]
fn yaml_that_is_not_an_inference_service_is_a_parse_error() {
    let err = InferenceService::from_yaml("kind: Pod\nmetadata: {name: x}\n").unwrap_err().to_string();
    assert!(err.starts_with("not a valid InferenceService manifest"), "{err}");
}

/// The manifest with `predictor.logger.url: url`, checked under `sinks`.
fn logger_to(url: &str, sinks: &SinkPolicy) -> String {
    let mut isvc = InferenceService::from_yaml(IRIS).unwrap();
    isvc.spec.predictor.logger = Some(LoggerSpec { url: Some(url.into()), ..LoggerSpec::default() });
    validate_for(&isvc, &AutoscalerConfig::default(), sinks).map(|()| "ok".to_owned()).unwrap_or_else(|e| e.to_string())
}

#[test]
fn logger_sinks_on_loopback_metadata_or_the_platform_are_refused_on_a_cluster() {
    let cluster = SinkPolicy::cluster("skiff-system", &[], &[]).unwrap();
    for (url, why) in [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is link-local"),
        ("http://127.0.0.1:8081/metrics", "127.0.0.1 is loopback"),
        ("http://localhost:9090/", "localhost is loopback"),
        ("http://[::1]/", "::1 is loopback"),
        ("http://skiff-controller.skiff-system.svc:8081/", "one of the platform's own components"),
    ] {
        let refused = logger_to(url, &cluster);
        assert!(refused.contains("spec.predictor.logger.url: ") && refused.contains(why), "{url}: {refused}");
        assert!(refused.contains("logger.allowedHosts"), "{refused}");
    }
    assert_eq!(logger_to("http://message-dumper.default.svc.cluster.local/", &cluster), "ok");
    let allowed = SinkPolicy::cluster("skiff-system", &[], &["127.0.0.1".to_owned()]).unwrap();
    assert_eq!(logger_to("http://127.0.0.1:8081/", &allowed), "ok");
}

#[test]
fn in_skiff_up_a_loopback_sink_stays_allowed_but_metadata_does_not() {
    assert_eq!(
        check(|i| i.spec.predictor.logger =
            Some(LoggerSpec { url: Some("http://127.0.0.1:9/e".into()), ..LoggerSpec::default() })),
        "ok"
    );
    assert_eq!(logger_to("http://localhost:8080/events", &SinkPolicy::standalone()), "ok");
    let refused = logger_to("http://169.254.169.254/", &SinkPolicy::standalone());
    assert!(refused.contains("spec.predictor.logger.url: 169.254.169.254 is link-local"), "{refused}");
}

#[test]
fn storage_uri_and_model_format_are_optional_where_kserve_lets_them_be() {
    let hugging_face = |i: &mut InferenceService| {
        let model = i.spec.predictor.model.as_mut().unwrap();
        model.model_format.name = "huggingface".into();
        model.storage_uri = None;
        model.other.insert("args".into(), serde_json::json!(["--model_id=bert-base-uncased"]));
    };
    assert_eq!(check(hugging_face), "ok", "a runtime's model may be named by its args");
    let onnx = check(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = Some(String::new()));
    assert!(onnx.starts_with("spec.predictor.model.storageUri: is required: Skiff's embedded server"), "{onnx}");
    let unset =
        |i: &mut InferenceService| i.spec.predictor.model.as_mut().unwrap().model_format = ModelFormat::default();
    assert_eq!(
        check(unset),
        "spec.predictor.model.modelFormat: is required unless model.runtime names a ServingRuntime (a runtime is \
         chosen by the model's format)"
    );
    assert_eq!(
        check(|i| {
            unset(i);
            i.spec.predictor.model.as_mut().unwrap().runtime = Some("kserve-huggingfaceserver".into());
        }),
        "ok"
    );
    // An absent format is not written back as an empty one.
    let mut isvc = InferenceService::from_yaml(IRIS).unwrap();
    unset(&mut isvc);
    let yaml = serde_saphyr::to_string(&isvc).unwrap();
    assert!(!yaml.contains("modelFormat"), "{yaml}");
    assert_eq!(InferenceService::from_yaml(&yaml).unwrap(), isvc);
}

#[test]
fn collocation_is_a_transformer_container_beside_the_model() {
    let with = |containers: serde_json::Value| {
        let mut isvc = InferenceService::from_yaml(IRIS).unwrap();
        isvc.spec.predictor.containers = Some(containers.as_array().unwrap().clone());
        validate(&isvc, &AutoscalerConfig::default()).map_err(|e| e.to_string())
    };
    with(serde_json::json!([{"name": "transformer-container", "image": "kserve/image-transformer"}])).unwrap();
    with(serde_json::json!([{"name": "transformer-container", "image": "t"}, {"name": "sidecar", "image": "s"}]))
        .unwrap();
    let no_transformer = with(serde_json::json!([{"name": "sidecar", "image": "s"}])).unwrap_err();
    assert!(
        no_transformer.contains("spec.predictor.containers: containers beside model must include"),
        "{no_transformer}"
    );
    let server = with(serde_json::json!([{"name": "kserve-container", "image": "s"}, {"name": "transformer-container", "image": "t"}]))
        .unwrap_err();
    assert!(
        server.contains("kserve-container beside model: the model server's container fields go in model"),
        "{server}"
    );
    let storage = with(serde_json::json!([{"name": "transformer-container", "image": "t", "env": [{"name": "STORAGE_URI", "value": "gs://b"}]}]))
        .unwrap_err();
    assert!(storage.contains("transformer-container must not set STORAGE_URI"), "{storage}");
}

#[test]
fn kserve_features_skiff_lacks_are_refused_by_name() {
    let other = |at: &'static str, key: &'static str| -> Edit {
        Box::new(move |i| {
            let value = serde_json::json!({"x": 1});
            match at {
                "model" => i.spec.predictor.model.as_mut().unwrap().other.insert(key.into(), value),
                _ => i.spec.predictor.other.insert(key.into(), value),
            };
        })
    };
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(move |i| {
                i.spec.predictor.containers = Some(
                    serde_json::json!([{"name": "kserve-container", "image": "ray", "env": [{"name": "RAY_NODE_COUNT", "value": "4"}]}])
                        .as_array()
                        .unwrap()
                        .clone(),
                )
            }),
            "spec.predictor.containers: Skiff does not have KServe's multi-node serving",
        ),
        (other("predictor", "workerSpec"), "spec.predictor.workerSpec: Skiff does not have KServe's multi-node"),
        (other("predictor", "storageUris"), "spec.predictor.storageUris: Skiff does not have KServe's several"),
        (other("model", "storage"), "spec.predictor.model.storage: Skiff does not have KServe's storage spec"),
        (
            Box::new(|i| {
                let mut art = PredictorSpec::default();
                art.other.insert("art".into(), serde_json::json!({"type": "SquareAttack"}));
                i.spec.explainer = Some(art);
            }),
            "spec.explainer.art: Skiff does not have KServe's ART adversarial explainer",
        ),
        (
            Box::new(|i| {
                let mut custom = PredictorSpec::default();
                custom.other.insert("custom".into(), serde_json::json!({"container": {"image": "t"}}));
                i.spec.transformer = Some(custom);
            }),
            "spec.transformer.custom: Skiff does not have KServe's v1alpha2 `custom` component",
        ),
        (
            Box::new(|i| {
                let mut logger = LoggerSpec { url: Some("http://sink.default/".into()), ..LoggerSpec::default() };
                logger.other.insert("metadataHeaders".into(), serde_json::json!(["x-request-id"]));
                i.spec.predictor.logger = Some(logger);
            }),
            "spec.predictor.logger.metadataHeaders: Skiff does not have KServe's copying of request headers",
        ),
    ];
    for (edit, want) in cases {
        let got = check(edit);
        assert!(got.starts_with(want), "got {got:?}, want {want:?}");
    }
}

#[test]
fn a_parse_error_names_the_field_being_read() {
    let cases = [
        ("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n", "metadata: "),
        (
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: x}\nspec:\n  predictor:\n    model: {modelFormat: {version: '1'}}\n",
            "spec.predictor.model.modelFormat.name: ",
        ),
        (
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: x}\nspec:\npredictor: {}\n",
            "spec: ",
        ),
        (
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: x}\nspec:\n  predictor:\n    minReplicas: many\n",
            "spec.predictor.minReplicas: ",
        ),
    ];
    for (text, want) in cases {
        let error = InferenceService::read_yaml(text).unwrap_err();
        assert_eq!(format!("{}: ", error.path), want, "{text}");
        let message = InferenceService::from_yaml(text).unwrap_err().to_string();
        assert!(message.starts_with(&format!("not a valid InferenceService manifest: {want}")), "{message}");
    }
}
