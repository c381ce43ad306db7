//! The fields of an accepted manifest that `skiff up` does not act on, each named with why, so that
//! none is ignored silently: `skiff up` logs them once per file (a warning), and the corpus test
//! lists them. What is refused (a KServe feature Skiff lacks) is refused by validation instead
//! ([`skiff_api::validate`]); what is left here is either meaningful only on a cluster (a pod's
//! placement, resources, service account, rollout strategy, a sidecar's annotation) or a field
//! `skiff up` does not know.
//!
//! What `skiff up` acts on: the name and namespace, labels, the autoscaling annotations
//! (`autoscaling.knative.dev/*`, checked by validation, and KServe's own, [`AUTOSCALING`]), the
//! progress deadline (`serving.knative.dev/progress-deadline`, the activator's hold); of each
//! component the scaling, concurrency, timeout, canary, batcher and logger fields; of a model its
//! format, storage, runtime and protocol, and for a runtime's model (not the embedded server's) the
//! container fields a local process has ([`PROCESS`]); of a custom container the same.

use serde_json::Value;
use skiff_api::InferenceService;
use skiff_api::isvc::{DEPLOYMENT_FIELDS, POD_FIELDS};
use skiff_api::runtime::uses_embedded_server;
use skiff_api::validate::FRAMEWORKS;

/// KServe's annotations that `skiff up`'s scaling reads.
const AUTOSCALING: [&str; 4] = [
    "serving.kserve.io/autoscalerClass",
    "serving.kserve.io/deploymentMode",
    "serving.kserve.io/metrics",
    "serving.kserve.io/targetUtilizationPercentage",
];
/// A component's fields that `skiff up` acts on (besides `model`, `containers` and the shorthands).
const COMPONENT: [&str; 12] = [
    "minReplicas",
    "maxReplicas",
    "scaleTarget",
    "scaleMetric",
    "scaleMetricType",
    "autoScaling",
    "containerConcurrency",
    "timeout",
    "canaryTrafficPercent",
    "batcher",
    "logger",
    "name",
];
/// A model's own fields that `skiff up` acts on.
const MODEL: [&str; 5] = ["modelFormat", "storageUri", "runtime", "runtimeVersion", "protocolVersion"];
/// The container fields a local process has (`readinessProbe`: its `httpGet.path` only).
const PROCESS: [&str; 8] = ["name", "image", "command", "args", "env", "ports", "workingDir", "readinessProbe"];

/// `field: why` for each field of `isvc` that `skiff up` does not act on, by component and field name.
pub fn notices(isvc: &InferenceService) -> Vec<String> {
    let Ok(Value::Object(manifest)) = serde_json::to_value(isvc) else { return Vec::new() };
    let mut out = Vec::new();
    if let Some(Value::Object(metadata)) = manifest.get("metadata") {
        for key in metadata.keys().filter(|k| !["name", "namespace", "labels", "annotations"].contains(&k.as_str())) {
            out.push(format!("metadata.{key}: not used by skiff up"));
        }
    }
    for key in isvc.metadata.annotations.keys() {
        if !key.starts_with("autoscaling.knative.dev/")
            && !AUTOSCALING.contains(&key.as_str())
            && key != skiff_api::settings::PROGRESS_DEADLINE_ANNOTATION
        {
            out.push(format!("metadata.annotations[{key}]: not used by skiff up"));
        }
    }
    for key in isvc.metadata.labels.keys().filter(|k| k.starts_with("networking.knative.dev/")) {
        out.push(format!("metadata.labels[{key}]: a cluster's networking (skiff up serves on its own port)"));
    }
    let Some(Value::Object(spec)) = manifest.get("spec") else { return out };
    for (key, value) in spec {
        let at = format!("spec.{key}");
        match (key.as_str(), value) {
            ("predictor" | "transformer" | "explainer", Value::Object(component)) => {
                let embedded =
                    key == "predictor" && isvc.spec.predictor.model.as_ref().is_some_and(uses_embedded_server);
                component_notices(&at, component, embedded, &mut out);
            }
            _ => out.push(format!("{at}: not used by skiff up")),
        }
    }
    out
}

fn component_notices(at: &str, component: &serde_json::Map<String, Value>, embedded: bool, out: &mut Vec<String>) {
    for (key, value) in component {
        let field = format!("{at}.{key}");
        if COMPONENT.contains(&key.as_str()) {
            continue;
        }
        match (key.as_str(), value) {
            ("model", Value::Object(model)) => model_notices(&field, model, embedded, out),
            (framework, Value::Object(model)) if FRAMEWORKS.contains(&framework) => {
                model_notices(&field, model, framework == "onnx", out);
            }
            ("containers", Value::Array(containers)) => {
                for (i, container) in containers.iter().enumerate() {
                    if let Value::Object(container) = container {
                        container_notices(&format!("{field}[{i}]"), container, out);
                    }
                }
            }
            _ if POD_FIELDS.contains(&key.as_str()) || DEPLOYMENT_FIELDS.contains(&key.as_str()) => {
                out.push(format!("{field}: {ON_A_CLUSTER}"))
            }
            _ => out.push(format!("{field}: not used by skiff up")),
        }
    }
}

fn model_notices(at: &str, model: &serde_json::Map<String, Value>, embedded: bool, out: &mut Vec<String>) {
    let rest: serde_json::Map<String, Value> =
        model.iter().filter(|(k, _)| !MODEL.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    if embedded {
        for key in rest.keys() {
            out.push(format!("{at}.{key}: not used by the embedded server (a runtime's container would take it)"));
        }
    } else {
        container_notices(at, &rest, out);
    }
}

fn container_notices(at: &str, container: &serde_json::Map<String, Value>, out: &mut Vec<String>) {
    for (key, value) in container {
        let field = format!("{at}.{key}");
        if key == "readinessProbe" {
            if let Value::Object(probe) = value {
                for probe_key in probe.keys().filter(|k| *k != "httpGet") {
                    out.push(format!(
                        "{field}.{probe_key}: skiff up probes readiness every tick, with no delay or period"
                    ));
                }
            }
        } else if !PROCESS.contains(&key.as_str()) {
            out.push(format!("{field}: {ON_A_CLUSTER}"));
        }
    }
}

/// Why a cluster-only field is not acted on.
const ON_A_CLUSTER: &str = "meaningful only on a cluster (skiff up runs a local process)";

#[cfg(test)]
mod tests {
    use super::*;

    fn of(spec: &str, annotations: &str) -> Vec<String> {
        let yaml = format!(
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: m\n  labels: {{team: a}}\n  \
             annotations: {{{annotations}}}\nspec:\n{spec}"
        );
        notices(&InferenceService::from_yaml(&yaml).unwrap())
    }

    #[test]
    fn what_skiff_up_acts_on_is_not_named() {
        let spec = "  predictor:\n    minReplicas: 0\n    containerConcurrency: 4\n    model:\n      modelFormat: {name: onnx}\n      \
                    storageUri: gs://b/m\n  transformer:\n    containers:\n    - name: t\n      image: t\n      args: [a]\n      \
                    env: [{name: A, value: '1'}]\n      readinessProbe: {httpGet: {path: /ready}}\n";
        assert_eq!(
            of(spec, "autoscaling.knative.dev/target: '3', serving.kserve.io/deploymentMode: Serverless"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_other_field_is_named_with_why() {
        let spec = "  predictor:\n    nodeSelector: {pool: gpu}\n    model:\n      modelFormat: {name: onnx}\n      storageUri: gs://b/m\n      \
                    args: [--x]\n  transformer:\n    containers:\n    - name: t\n      image: t\n      resources: {limits: {cpu: '1'}}\n      \
                    readinessProbe: {httpGet: {path: /ready}, periodSeconds: 10}\n  explainer:\n    containers: [{name: e, image: e}]\n    \
                    sidecar: {x: 1}\n";
        assert_eq!(
            of(spec, "prometheus.io/scrape: 'true'"),
            [
                "metadata.annotations[prometheus.io/scrape]: not used by skiff up",
                "spec.explainer.sidecar: not used by skiff up",
                "spec.predictor.model.args: not used by the embedded server (a runtime's container would take it)",
                "spec.predictor.nodeSelector: meaningful only on a cluster (skiff up runs a local process)",
                "spec.transformer.containers[0].readinessProbe.periodSeconds: skiff up probes readiness every tick, with no \
                 delay or period",
                "spec.transformer.containers[0].resources: meaningful only on a cluster (skiff up runs a local process)",
            ]
        );
    }

    #[test]
    fn a_runtime_model_takes_the_container_fields_of_a_process() {
        let spec = "  predictor:\n    sklearn:\n      storageUri: gs://b/m\n      args: [--workers=2]\n      env: [{name: A, value: '1'}]\n      \
                    resources: {limits: {cpu: '1'}}\n";
        assert_eq!(
            of(spec, ""),
            ["spec.predictor.sklearn.resources: meaningful only on a cluster (skiff up runs a local process)"]
        );
    }
}
