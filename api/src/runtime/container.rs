//! The containers a ServingRuntime runs for one model, as KServe builds them and as both modes run
//! them ([`runtime_containers`]): the operator puts them in a pod, `skiff up` runs the serving one
//! as a local process.
//!
//! - The container named `kserve-container` (else the first) serves, and comes first.
//! - KServe's placeholders are replaced in every container (`ReplacePlaceholders`): `{{.Name}}` (the
//!   InferenceService), `{{.Namespace}}`, and `{{.Labels.KEY}}` for the labels KServe's defaulting
//!   sets on the InferenceService, whatever it had ([`kserve_labels`]: `modelClass` for MLServer,
//!   `serviceEnvelope` for TorchServe; no shipped runtime reads another label).
//! - The model's container fields ([`RUNTIME_CONTAINER_FIELDS`]) are laid over the serving
//!   container (`MergeRuntimeContainers`), after the variables KServe's defaulting adds to the
//!   model for the server it runs on ([`kserve_env`]: MLServer's model name and folder, TorchServe's
//!   protocol), each unless the model sets it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Container;
use serde_json::Value;

use super::{ServingRuntimeSpec, model_protocol};
use crate::isvc::ModelSpec;

/// KServe's name for the container that serves.
pub const SERVING_CONTAINER: &str = "kserve-container";
/// Where a runtime's container finds the model (KServe's `DefaultModelLocalMountPath`; its runtimes
/// pass `--model_dir=/mnt/models`).
pub const RUNTIME_MODEL_DIR: &str = "/mnt/models";
/// Container fields of `spec.predictor.model` laid over a ServingRuntime's container (KServe's
/// `MergeRuntimeContainers`): lists of named things (`env`, `ports`) merged by name, `volumeMounts`
/// by path, `args` and `envFrom` appended, `resources` merged per key, the rest replaced.
pub const RUNTIME_CONTAINER_FIELDS: [&str; 12] = [
    "resources",
    "env",
    "envFrom",
    "securityContext",
    "imagePullPolicy",
    "volumeMounts",
    "args",
    "command",
    "image",
    "ports",
    "readinessProbe",
    "livenessProbe",
];

/// The InferenceService a runtime serves, as the placeholders read it.
#[derive(Debug, Clone, Copy)]
pub struct Served<'a> {
    /// Its name (`{{.Name}}`).
    pub name: &'a str,
    /// Its namespace (`{{.Namespace}}`).
    pub namespace: &'a str,
}

/// The labels KServe's defaulting gives an InferenceService whose model a runtime serves
/// (`SetMlServerDefaults`, `SetTorchServeDefaults`), which KServe's MLServer and TorchServe runtimes
/// read through `{{.Labels.modelClass}}` and `{{.Labels.serviceEnvelope}}`.
pub fn kserve_labels(model: &ModelSpec) -> BTreeMap<String, String> {
    let class = match model.model_format.name.to_ascii_lowercase().as_str() {
        "xgboost" => "mlserver_xgboost.XGBoostModel",
        "lightgbm" => "mlserver_lightgbm.LightGBMModel",
        "mlflow" => "mlserver_mlflow.MLflowRuntime",
        _ => "mlserver_sklearn.SKLearnModel",
    };
    let envelope = match model_protocol(model) {
        "v2" | "grpc-v2" => "kservev2",
        _ => "kserve",
    };
    BTreeMap::from([("modelClass".to_owned(), class.to_owned()), ("serviceEnvelope".to_owned(), envelope.to_owned())])
}

/// The variables KServe's defaulting (`SetRuntimeDefaults`) adds to a model's `env` on the runtime
/// named `runtime` (KServe's own runtime names): on `kserve-mlserver`, `MLSERVER_MODEL_NAME` (the
/// InferenceService) and `MLSERVER_MODEL_URI` (`/mnt/models`) when the model has a `storageUri`,
/// else `MLSERVER_LOAD_MODELS_AT_STARTUP=false`; on `kserve-torchserve`, `PROTOCOL_VERSION`.
pub fn kserve_env(runtime: &str, model: &ModelSpec, served: Served<'_>) -> Vec<(&'static str, String)> {
    match runtime {
        "kserve-mlserver" if model.storage_uri.is_some() => {
            vec![("MLSERVER_MODEL_NAME", served.name.to_owned()), ("MLSERVER_MODEL_URI", RUNTIME_MODEL_DIR.to_owned())]
        }
        "kserve-mlserver" => vec![("MLSERVER_LOAD_MODELS_AT_STARTUP", "false".to_owned())],
        "kserve-torchserve" => vec![("PROTOCOL_VERSION", model_protocol(model).to_owned())],
        _ => Vec::new(),
    }
}

/// The containers of the runtime named `name` for `model` of `served`, the serving one first (see
/// the module documentation). The error says which container or field is wrong.
pub fn runtime_containers(
    name: &str,
    runtime: &ServingRuntimeSpec,
    model: &ModelSpec,
    served: Served<'_>,
) -> Result<Vec<Container>, String> {
    let mut containers = runtime.containers.clone();
    if containers.is_empty() {
        return Err("has no containers".into());
    }
    let serving = containers.iter().position(|c| c.name == SERVING_CONTAINER).unwrap_or(0);
    let first = containers.remove(serving);
    containers.insert(0, first);
    let labels = kserve_labels(model);
    for container in &mut containers {
        *container = replace_placeholders(container, served, &labels)
            .map_err(|e| format!("containers[{:?}]: {e}", container.name))?;
    }
    let serving = &mut containers[0];
    let mut value = serde_json::to_value(&*serving).map_err(|e| e.to_string())?;
    let mut given = model.other.clone();
    let defaults = kserve_env(name, model, served);
    if !defaults.is_empty() {
        let env = given.entry("env".to_owned()).or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(env) = env {
            for (key, value) in defaults {
                if !env.iter().any(|e| e.get("name").and_then(Value::as_str) == Some(key)) {
                    env.push(serde_json::json!({"name": key, "value": value}));
                }
            }
        }
    }
    for field in RUNTIME_CONTAINER_FIELDS {
        if let Some(given) = given.get(field) {
            merge_container_field(&mut value, field, given);
        }
    }
    *serving = serde_json::from_value(value).map_err(|e| format!("spec.predictor.model: {e}"))?;
    Ok(containers)
}

/// KServe's `ReplacePlaceholders`: `{{.Name}}`, `{{.Namespace}}` and `{{.Labels.KEY}}` (spaces
/// inside the braces allowed) anywhere in the container.
fn replace_placeholders(
    container: &Container,
    served: Served<'_>,
    labels: &BTreeMap<String, String>,
) -> Result<Container, String> {
    let mut text = serde_json::to_string(container).map_err(|e| e.to_string())?;
    let keys = [("Name".to_owned(), served.name), ("Namespace".to_owned(), served.namespace)];
    let labels = labels.iter().map(|(k, v)| (format!("Labels.{k}"), v.as_str()));
    for (key, value) in keys.into_iter().chain(labels) {
        for pattern in [format!("{{{{.{key}}}}}"), format!("{{{{ .{key} }}}}")] {
            text = text.replace(&pattern, value);
        }
    }
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// Lays the model's value of one container field over the runtime container's (as JSON), as
/// [`RUNTIME_CONTAINER_FIELDS`] says.
fn merge_container_field(container: &mut Value, field: &str, given: &Value) {
    let Some(object) = container.as_object_mut() else { return };
    let current = object.remove(field);
    let merged = match (field, current, given) {
        ("env" | "ports", Some(Value::Array(mut own)), Value::Array(theirs)) => {
            merge_by_key(&mut own, theirs, "name");
            Value::Array(own)
        }
        ("volumeMounts", Some(Value::Array(mut own)), Value::Array(theirs)) => {
            merge_by_key(&mut own, theirs, "mountPath");
            Value::Array(own)
        }
        ("args" | "envFrom", Some(Value::Array(mut own)), Value::Array(theirs)) => {
            own.extend(theirs.iter().cloned());
            Value::Array(own)
        }
        ("resources", Some(Value::Object(mut own)), Value::Object(theirs)) => {
            for (kind, amounts) in theirs {
                match (own.get_mut(kind), amounts) {
                    (Some(Value::Object(mine)), Value::Object(amounts)) => {
                        mine.extend(amounts.iter().map(|(k, v)| (k.clone(), v.clone())));
                    }
                    _ => {
                        own.insert(kind.clone(), amounts.clone());
                    }
                }
            }
            Value::Object(own)
        }
        _ => given.clone(),
    };
    object.insert(field.to_owned(), merged);
}

/// `theirs` over `own`: an entry with the same `key` replaced in place, the others appended.
fn merge_by_key(own: &mut Vec<Value>, theirs: &[Value], key: &str) {
    for entry in theirs {
        match own.iter_mut().find(|e| e.get(key).is_some() && e.get(key) == entry.get(key)) {
            Some(existing) => *existing = entry.clone(),
            None => own.push(entry.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runtime::defaults::kserve_runtimes;

    fn model(value: Value) -> ModelSpec {
        serde_json::from_value(value).unwrap()
    }

    fn runtime(name: &str) -> ServingRuntimeSpec {
        kserve_runtimes().unwrap().into_iter().find(|r| r.metadata.name.as_deref() == Some(name)).unwrap().spec.spec
    }

    #[test]
    fn kserves_label_placeholders_get_what_its_defaulting_gives() {
        let served = Served { name: "iris", namespace: "ml" };
        let xgb = model(json!({"modelFormat": {"name": "xgboost"}, "protocolVersion": "v2"}));
        let mlserver = runtime_containers("kserve-mlserver", &runtime("kserve-mlserver"), &xgb, served).unwrap();
        let env = serde_json::to_value(&mlserver[0].env).unwrap();
        assert_eq!(env[0], json!({"name": "MLSERVER_MODEL_IMPLEMENTATION", "value": "mlserver_xgboost.XGBoostModel"}));
        let torch = runtime_containers("kserve-torchserve", &runtime("kserve-torchserve"), &xgb, served).unwrap();
        assert_eq!(serde_json::to_value(&torch[0].env).unwrap()[0]["value"], "kservev2");
        let v1 = model(json!({"modelFormat": {"name": "pytorch"}}));
        let torch = runtime_containers("kserve-torchserve", &runtime("kserve-torchserve"), &v1, served).unwrap();
        assert_eq!(serde_json::to_value(&torch[0].env).unwrap()[0]["value"], "kserve");
        let mlserver = runtime_containers("kserve-mlserver", &runtime("kserve-mlserver"), &v1, served).unwrap();
        let class = &serde_json::to_value(&mlserver[0].env).unwrap()[0]["value"];
        assert_eq!(class, "mlserver_sklearn.SKLearnModel", "KServe's default class");
        let sk = runtime_containers("kserve-sklearnserver", &runtime("kserve-sklearnserver"), &xgb, served).unwrap();
        assert_eq!(sk[0].args.as_ref().unwrap()[0], "--model_name=iris");
        let empty = ServingRuntimeSpec::default();
        assert_eq!(runtime_containers("empty", &empty, &xgb, served).unwrap_err(), "has no containers");
    }

    fn env(container: &Container) -> Vec<(String, String)> {
        container.env.iter().flatten().map(|e| (e.name.clone(), e.value.clone().unwrap_or_default())).collect()
    }

    #[test]
    fn kserves_defaulting_gives_mlserver_the_model_and_torchserve_the_protocol_unless_set() {
        let served = Served { name: "sklearn-irisv2", namespace: "ml" };
        let v2 = model(json!({"modelFormat": {"name": "sklearn"}, "protocolVersion": "v2", "storageUri": "gs://b/m"}));
        let mlserver = runtime_containers("kserve-mlserver", &runtime("kserve-mlserver"), &v2, served).unwrap();
        let got = env(&mlserver[0]);
        let want = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert!(got.contains(&want("MLSERVER_MODEL_NAME", "sklearn-irisv2")), "{got:?}");
        assert!(got.contains(&want("MLSERVER_MODEL_URI", "/mnt/models")), "{got:?}");
        assert!(got.contains(&want("MLSERVER_HTTP_PORT", "8080")), "the runtime's own variables stay: {got:?}");

        let mut named = v2.clone();
        named.other.insert("env".into(), json!([{"name": "MLSERVER_MODEL_NAME", "value": "mine"}]));
        let mlserver = runtime_containers("kserve-mlserver", &runtime("kserve-mlserver"), &named, served).unwrap();
        let names: Vec<(String, String)> =
            env(&mlserver[0]).into_iter().filter(|(k, _)| k == "MLSERVER_MODEL_NAME").collect();
        assert_eq!(names, [want("MLSERVER_MODEL_NAME", "mine")], "the model's own value wins");

        let mut none = v2.clone();
        none.storage_uri = None;
        let mlserver = runtime_containers("kserve-mlserver", &runtime("kserve-mlserver"), &none, served).unwrap();
        assert!(env(&mlserver[0]).contains(&want("MLSERVER_LOAD_MODELS_AT_STARTUP", "false")));

        let torch = runtime_containers("kserve-torchserve", &runtime("kserve-torchserve"), &v2, served).unwrap();
        assert!(env(&torch[0]).contains(&want("PROTOCOL_VERSION", "v2")));
        let sk = runtime_containers("kserve-sklearnserver", &runtime("kserve-sklearnserver"), &v2, served).unwrap();
        assert!(env(&sk[0]).is_empty(), "KServe's defaulting adds nothing for other servers");
    }
}
