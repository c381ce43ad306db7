use serde_json::json;
use skiff_autoscaler::AutoscalerConfig;

use super::*;
use crate::InferenceService;
use crate::revision::Component;
use crate::scaling::ScalingInputs;
use crate::validate::validate;

/// A manifest with `annotations` (YAML lines under `annotations:`) and `predictor` (YAML lines
/// under `predictor:`, beside an ONNX model).
fn manifest(annotations: &str, predictor: &str) -> InferenceService {
    let indent = |text: &str, by: &str| text.lines().map(|l| format!("{by}{l}\n")).collect::<String>();
    let annotations =
        if annotations.is_empty() { String::new() } else { format!("  annotations:\n{}", indent(annotations, "    ")) };
    let yaml = format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: m\n{annotations}spec:\n  \
         predictor:\n{}    model:\n      modelFormat: {{name: onnx}}\n      storageUri: file:///m\n",
        indent(predictor, "    ")
    );
    InferenceService::from_yaml(&yaml).unwrap()
}

fn scaler_of(isvc: &InferenceService) -> Result<Scaler> {
    ScalingInputs::of(isvc).scaler(Component::Predictor)
}

fn refusal(isvc: &InferenceService) -> String {
    let message = validate(isvc, &AutoscalerConfig::default()).unwrap_err().to_string();
    assert_eq!(scaler_of(isvc).err().map(|e| e.to_string()).unwrap_or(message.clone()), message);
    message
}

fn hpa(isvc: &InferenceService) -> Hpa {
    match scaler_of(isvc).unwrap() {
        Scaler::Hpa(hpa) => hpa,
        other => panic!("not an HPA: {other:?}"),
    }
}

fn keda(isvc: &InferenceService) -> Keda {
    match scaler_of(isvc).unwrap() {
        Scaler::Keda(keda) => keda,
        other => panic!("not KEDA: {other:?}"),
    }
}

fn metric_json(hpa: &Hpa) -> serde_json::Value {
    serde_json::to_value(&hpa.metrics).unwrap()
}

#[test]
fn the_class_comes_from_the_annotation_or_the_deployment_mode() {
    let class = |annotations: &str| Class::of(&manifest(annotations, "").metadata.annotations);
    assert_eq!(class("").unwrap(), Class::Kpa, "Skiff's default: serverless");
    assert_eq!(class("serving.kserve.io/deploymentMode: Serverless").unwrap(), Class::Kpa);
    assert_eq!(class("serving.kserve.io/deploymentMode: Knative").unwrap(), Class::Kpa);
    assert_eq!(class("serving.kserve.io/deploymentMode: RawDeployment").unwrap(), Class::Hpa, "KServe's default");
    assert_eq!(class("serving.kserve.io/deploymentMode: Standard").unwrap(), Class::Hpa);
    let both = "serving.kserve.io/deploymentMode: Standard\nserving.kserve.io/autoscalerClass: kpa";
    assert_eq!(class(both).unwrap(), Class::Kpa, "the annotation wins");
    for c in Class::ALL {
        assert_eq!(class(&format!("serving.kserve.io/autoscalerClass: {}", c.name())).unwrap(), c);
    }
    let unknown = class("serving.kserve.io/autoscalerClass: vpa").unwrap_err().to_string();
    assert!(unknown.starts_with("metadata.annotations[serving.kserve.io/autoscalerClass]: "), "{unknown}");
    assert!(unknown.contains("\"vpa\""), "{unknown}");
    let mesh = class("serving.kserve.io/deploymentMode: ModelMesh").unwrap_err().to_string();
    assert!(mesh.starts_with("metadata.annotations[serving.kserve.io/deploymentMode]: ModelMesh"), "{mesh}");
    assert!(class("serving.kserve.io/deploymentMode: raw").is_err());
}

#[test]
fn scale_metric_cpu_makes_an_hpa_as_kserve_does() {
    // KServe's sample (website: hpa-autoscaler.md).
    let isvc = manifest(
        "serving.kserve.io/deploymentMode: Standard\nserving.kserve.io/autoscalerClass: hpa",
        "scaleTarget: 80\nscaleMetric: cpu",
    );
    validate(&isvc, &AutoscalerConfig::default()).unwrap();
    let hpa = hpa(&isvc);
    assert_eq!((hpa.min_replicas, hpa.max_replicas), (1, 1), "KServe: maxReplicas unset is minReplicas");
    assert_eq!(
        metric_json(&hpa),
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
    // Defaults: cpu at 80%; minReplicas 0 becomes the HPA's 1; max at least min.
    let hpa = self::hpa(&manifest("serving.kserve.io/autoscalerClass: hpa", "minReplicas: 0\nmaxReplicas: 4"));
    assert_eq!((hpa.min_replicas, hpa.max_replicas), (1, 4));
    assert_eq!(hpa.metrics[0].resource.as_ref().unwrap().target.average_utilization, Some(80));
    let hpa = self::hpa(&manifest("serving.kserve.io/autoscalerClass: hpa", "minReplicas: 3"));
    assert_eq!((hpa.min_replicas, hpa.max_replicas), (3, 3));
    let memory = self::hpa(&manifest("serving.kserve.io/autoscalerClass: hpa", "scaleMetric: memory\nscaleTarget: 60"));
    assert_eq!(memory.metrics[0].resource.as_ref().unwrap().name, "memory");
    // KServe's older annotations, which the fields override.
    let legacy = manifest(
        "serving.kserve.io/autoscalerClass: hpa\nserving.kserve.io/metrics: memory\nserving.kserve.io/targetUtilizationPercentage: \"70\"",
        "",
    );
    let target = &self::hpa(&legacy).metrics[0].resource.clone().unwrap();
    assert_eq!((target.name.as_str(), target.target.average_utilization), ("memory", Some(70)));
}

#[test]
fn the_auto_scaling_block_makes_the_hpa_metrics_and_behavior() {
    let isvc = manifest(
        "serving.kserve.io/deploymentMode: Standard",
        "maxReplicas: 5\nautoScaling:\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}\n  - type: Resource\n    resource: {name: memory, target: {type: AverageValue, averageValue: 512Mi}}\n  behavior:\n    scaleDown: {stabilizationWindowSeconds: 30}",
    );
    let hpa = hpa(&isvc);
    assert_eq!(
        metric_json(&hpa),
        json!([
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "512Mi"}}},
        ])
    );
    assert_eq!(hpa.behavior.unwrap().scale_down.unwrap().stabilization_window_seconds, Some(30));
    assert_eq!(hpa.max_replicas, 5);
}

#[test]
fn keda_gets_kserves_triggers() {
    // KServe's samples (website: keda-autoscaler.md): a Resource, an External and a PodMetric.
    let isvc = manifest(
        "serving.kserve.io/deploymentMode: \"Standard\"\nserving.kserve.io/autoscalerClass: \"keda\"",
        "minReplicas: 0\nmaxReplicas: 5\nautoScaling:\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}\n  - type: External\n    external:\n      metric: {backend: prometheus, serverAddress: \"http://prom:9090\", query: vllm:num_requests_running, authModes: bearer}\n      authenticationRef: {name: keda-prom-creds}\n      target: {type: Value, value: \"2\"}\n  - type: PodMetric\n    podmetric:\n      metric: {backend: opentelemetry, metricNames: [vllm:num_requests_running], query: vllm:num_requests_running}\n      target: {type: Value, value: \"4\"}",
    );
    validate(&isvc, &AutoscalerConfig::default()).unwrap();
    let keda = keda(&isvc);
    assert_eq!((keda.min_replicas, keda.max_replicas), (0, 5), "KEDA scales to zero itself");
    assert_eq!(
        serde_json::to_value(keda.triggers_for("ml", "m-predictor-00001")).unwrap(),
        json!([
            {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "50"}},
            {"type": "prometheus", "metadata": {"serverAddress": "http://prom:9090", "query": "vllm:num_requests_running",
                "threshold": "2", "authModes": "bearer"}, "authenticationRef": {"name": "keda-prom-creds"}},
            {"type": "external", "metadata": {
                "metricQuery": "sum(vllm:num_requests_running{namespace=\"ml\", deployment=\"m-predictor-00001\"})",
                "targetValue": "4", "scalerAddress": metrics::OTEL_SCALER_ENDPOINT}},
        ])
    );
    let unset = self::keda(&manifest(
        "serving.kserve.io/autoscalerClass: keda",
        "autoScaling:\n  metrics:\n  - type: Resource\n    resource: {name: memory, target: {type: AverageValue, averageValue: 1Gi}}",
    ));
    assert_eq!((unset.min_replicas, unset.max_replicas), (1, 1), "KServe's defaults");
}

#[test]
fn what_a_class_does_not_read_is_refused_naming_it() {
    let cases = [
        ("", "scaleMetric: cpu", "spec.predictor.scaleMetric: cpu needs the hpa class"),
        ("", "scaleMetric: memory", "spec.predictor.scaleMetric: memory needs the hpa class"),
        ("", "autoScaling: {metrics: []}", "spec.predictor.autoScaling: is read by the hpa and keda classes"),
        (
            "serving.kserve.io/autoscalerClass: hpa",
            "scaleMetric: concurrency",
            "spec.predictor.scaleMetric: \"concurrency\" is not an HPA metric",
        ),
        (
            "serving.kserve.io/autoscalerClass: hpa",
            "scaleMetric: memory",
            "spec.predictor.scaleTarget: is required with scaleMetric: memory",
        ),
        (
            "serving.kserve.io/autoscalerClass: hpa",
            "scaleTarget: 150",
            "spec.predictor.scaleTarget: 150 is outside 1..100",
        ),
        (
            "serving.kserve.io/autoscalerClass: hpa",
            "autoScaling:\n  metrics:\n  - type: External\n    external: {metric: {query: q}, target: {value: 1}}",
            "spec.predictor.autoScaling.metrics[0].type: \"External\" is not an HPA metric",
        ),
        (
            "serving.kserve.io/autoscalerClass: hpa",
            "autoScaling: {metrics: []}",
            "spec.predictor.autoScaling.metrics: names no metric",
        ),
        (
            "serving.kserve.io/autoscalerClass: hpa\nautoscaling.knative.dev/target: \"5\"",
            "",
            "metadata.annotations[autoscaling.knative.dev/target]: is a setting of the kpa class",
        ),
        (
            "serving.kserve.io/autoscalerClass: keda",
            "scaleMetric: cpu",
            "spec.predictor.scaleMetric: is not supported for KEDA",
        ),
        ("serving.kserve.io/autoscalerClass: keda", "", "spec.predictor.autoScaling: is required with the keda class"),
        (
            "serving.kserve.io/autoscalerClass: keda",
            "autoScaling:\n  metrics:\n  - type: External\n    external: {metric: {backend: prometheus, query: \"\"}, target: {value: 1}}",
            "spec.predictor.autoScaling.metrics[0].external.metric.query: the query must not be empty",
        ),
        (
            "serving.kserve.io/autoscalerClass: keda",
            "autoScaling:\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: AverageValue}}",
            "spec.predictor.autoScaling.metrics[0].resource.target.type: the cpu target value type must be Utilization",
        ),
        (
            "serving.kserve.io/autoscalerClass: external",
            "scaleTarget: 3",
            "spec.predictor.scaleTarget: is read by the kpa, hpa and keda classes",
        ),
        (
            "serving.kserve.io/autoscalerClass: none",
            "scaleMetric: rps",
            "spec.predictor.scaleMetric: is read by the kpa, hpa and keda classes",
        ),
        (
            "serving.kserve.io/targetUtilizationPercentage: \"80\"",
            "",
            "metadata.annotations[serving.kserve.io/targetUtilizationPercentage]: is read by the hpa class",
        ),
        (
            "serving.kserve.io/autoscalerClass: hpa",
            "scaleMetricType: AverageValue",
            "spec.predictor.scaleMetricType: \"AverageValue\" is not acted on",
        ),
    ];
    for (annotations, predictor, expected) in cases {
        let message = refusal(&manifest(annotations, predictor));
        assert!(message.starts_with(expected), "{annotations} / {predictor}:\n  {message}\n  expected {expected}");
    }
}

#[test]
fn external_and_none_make_nothing_and_the_kpa_stays_the_default() {
    assert_eq!(
        scaler_of(&manifest("serving.kserve.io/autoscalerClass: external", "minReplicas: 2")).unwrap(),
        Scaler::External
    );
    assert_eq!(scaler_of(&manifest("serving.kserve.io/autoscalerClass: none", "")).unwrap(), Scaler::None);
    assert_eq!(scaler_of(&manifest("", "scaleMetric: rps\nscaleTarget: 5")).unwrap(), Scaler::Kpa);
    // The recorded inputs round-trip, class and block included, and a KPA service records nothing new.
    let isvc = manifest(
        "serving.kserve.io/autoscalerClass: keda",
        "autoScaling:\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization}}",
    );
    let inputs = ScalingInputs::of(&isvc);
    let (_, text) = inputs.annotation();
    assert_eq!(ScalingInputs::from_annotations(&[(crate::labels::SCALING.to_owned(), text)].into()), inputs);
    assert_eq!(inputs.class(), Class::Keda);
    let (_, kpa) = ScalingInputs::of(&manifest("", "minReplicas: 0")).annotation();
    assert_eq!(kpa, r#"{"minReplicas":0}"#, "a KPA revision's annotation is as before");
    // The replicas a new revision starts with: min replicas, at least the initial scale.
    let spec = ScalingInputs::of(&manifest("serving.kserve.io/autoscalerClass: none", "minReplicas: 3"))
        .resolve(&AutoscalerConfig::default())
        .unwrap();
    assert_eq!(spec.initial_pods(), 3);
    let at_zero = ScalingInputs::of(&manifest("serving.kserve.io/autoscalerClass: none", "minReplicas: 0"))
        .resolve(&AutoscalerConfig::default())
        .unwrap();
    assert_eq!(at_zero.initial_pods(), 0, "none with minReplicas 0 starts at zero, as KServe's Deployment");
    let hpa = ScalingInputs::of(&manifest("serving.kserve.io/autoscalerClass: hpa", "minReplicas: 0"))
        .resolve(&AutoscalerConfig::default())
        .unwrap();
    assert_eq!(hpa.initial_pods(), 1, "the other classes start at the initial scale");
}

#[test]
fn skiff_up_runs_the_kpa_only_and_says_so() {
    let refused =
        |annotations: &str| runs_locally(&manifest(annotations, "").metadata.annotations).unwrap_err().to_string();
    runs_locally(&manifest("", "").metadata.annotations).unwrap();
    runs_locally(
        &manifest("serving.kserve.io/deploymentMode: Standard\nserving.kserve.io/autoscalerClass: kpa", "")
            .metadata
            .annotations,
    )
    .unwrap();
    let hpa = refused("serving.kserve.io/autoscalerClass: hpa");
    assert!(
        hpa.starts_with("metadata.annotations[serving.kserve.io/autoscalerClass]: hpa is not run by skiff up"),
        "{hpa}"
    );
    let standard = refused("serving.kserve.io/deploymentMode: Standard");
    assert!(
        standard
            .starts_with("metadata.annotations[serving.kserve.io/deploymentMode]: \"Standard\" means the hpa class"),
        "{standard}"
    );
    assert!(refused("serving.kserve.io/autoscalerClass: keda").contains("Set serving.kserve.io/autoscalerClass: kpa"));
}
