//! Manifests the app writes: pasted or uploaded YAML checked for its kind, the create form turned
//! into YAML, the selected namespace forced into `metadata.namespace`, the canary patch, and which
//! components ask for custom containers (which `skiff up` runs as local commands).

use serde::Deserialize;
use serde_json::{Map, Value, json};
use skiff_api::isvc::{API_VERSION, KIND};

use crate::error::{Error, Result};

/// Reads a manifest (YAML or JSON) and checks it is an InferenceService.
pub fn parse(text: &str) -> Result<Value> {
    if text.trim().is_empty() {
        return Err(Error::BadRequest("the manifest is empty".into()));
    }
    let value: Value =
        serde_saphyr::from_str(text).map_err(|e| Error::BadRequest(format!("the manifest is not YAML: {e}")))?;
    let Value::Object(object) = &value else {
        return Err(Error::BadRequest("the manifest must be one YAML mapping (one InferenceService)".into()));
    };
    let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or("");
    if field("apiVersion") != API_VERSION {
        return Err(Error::BadRequest(format!("apiVersion: must be {API_VERSION}, not {:?}", field("apiVersion"))));
    }
    if field("kind") != KIND {
        return Err(Error::BadRequest(format!("kind: must be {KIND}, not {:?}", field("kind"))));
    }
    Ok(value)
}

/// The fields of `manifest` that ask for custom containers (`spec.<component>.containers`, for the
/// predictor, transformer and explainer): `skiff up` runs each as a command on its machine.
pub fn custom_containers(manifest: &Value) -> Vec<String> {
    ["predictor", "transformer", "explainer"]
        .into_iter()
        .filter(|component| !manifest["spec"][component]["containers"].is_null())
        .map(|component| format!("spec.{component}.containers"))
        .collect()
}

/// Sets `metadata.namespace` to the namespace the user selected, whatever the manifest said.
pub fn force_namespace(mut manifest: Value, namespace: &str) -> Result<Value> {
    let metadata = manifest
        .as_object_mut()
        .ok_or_else(|| Error::BadRequest("the manifest must be a mapping".into()))?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let metadata = metadata.as_object_mut().ok_or_else(|| Error::BadRequest("metadata: must be a mapping".into()))?;
    metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
    Ok(manifest)
}

/// The create form's model format that stands for a custom container (`spec.predictor.containers`).
pub const CUSTOM_CONTAINER: &str = "custom-container";

/// The create form: the common case of one model from a storage URI, or one custom container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Form {
    /// InferenceService name.
    pub name: String,
    /// Model format, e.g. `onnx`, or [`CUSTOM_CONTAINER`].
    pub model_format: String,
    /// The custom container's image.
    #[serde(default)]
    pub image: String,
    /// Where the model is, e.g. `file://models/iris` or `gs://…`.
    pub storage_uri: String,
    /// `v1` or `v2`.
    #[serde(default)]
    pub protocol: String,
    /// `minReplicas` (0 scales to zero).
    #[serde(default)]
    pub min_replicas: String,
    /// `maxReplicas` (0: no limit).
    #[serde(default)]
    pub max_replicas: String,
    /// `canaryTrafficPercent` (empty: none).
    #[serde(default)]
    pub canary_percent: String,
}

fn number(field: &str, value: &str, max: u64) -> Result<Option<u64>> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    match value.parse::<u64>() {
        Ok(n) if n <= max => Ok(Some(n)),
        _ => Err(Error::BadRequest(format!("{field}: {value:?} is not a whole number from 0 to {max}"))),
    }
}

impl Form {
    /// The manifest the form stands for (the API server or `skiff up` validates the rest).
    pub fn manifest(&self, namespace: &str) -> Result<Value> {
        let name = self.name.trim();
        if name.is_empty() {
            return Err(Error::BadRequest("metadata.name: a name is required".into()));
        }
        let format = self.model_format.trim();
        if format.is_empty() {
            return Err(Error::BadRequest("spec.predictor.model.modelFormat.name: a model format is required".into()));
        }
        let mut predictor = if format == CUSTOM_CONTAINER { self.container()? } else { self.model(format) };
        if let Some(min) = number("spec.predictor.minReplicas", &self.min_replicas, 1000)? {
            predictor["minReplicas"] = json!(min);
        }
        if let Some(max) = number("spec.predictor.maxReplicas", &self.max_replicas, 1000)? {
            predictor["maxReplicas"] = json!(max);
        }
        if let Some(percent) = number("spec.predictor.canaryTrafficPercent", &self.canary_percent, 100)? {
            predictor["canaryTrafficPercent"] = json!(percent);
        }
        Ok(json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": { "name": name, "namespace": namespace },
            "spec": { "predictor": predictor },
        }))
    }

    /// `{model: …}` for a model of `format`.
    fn model(&self, format: &str) -> Value {
        let mut model = json!({ "modelFormat": { "name": format } });
        if !self.storage_uri.trim().is_empty() {
            model["storageUri"] = json!(self.storage_uri.trim());
        }
        if !self.protocol.trim().is_empty() {
            model["protocolVersion"] = json!(self.protocol.trim());
        }
        json!({ "model": model })
    }

    /// `{containers: [kserve-container]}` for a custom container, with `STORAGE_URI` when a storage
    /// URI is given (KServe's storage initializer reads it).
    fn container(&self) -> Result<Value> {
        let image = self.image.trim();
        if image.is_empty() {
            return Err(Error::BadRequest(
                "spec.predictor.containers[0].image: a custom container needs an image".into(),
            ));
        }
        let mut container = json!({ "name": "kserve-container", "image": image });
        if !self.storage_uri.trim().is_empty() {
            container["env"] = json!([{ "name": "STORAGE_URI", "value": self.storage_uri.trim() }]);
        }
        Ok(json!({ "containers": [container] }))
    }
}

/// The merge patch that sets `canaryTrafficPercent`; `None` removes it (promote: the latest takes all).
pub fn canary_patch(percent: Option<u32>) -> Result<Value> {
    if let Some(percent) = percent
        && percent > 100
    {
        return Err(Error::BadRequest(format!("spec.predictor.canaryTrafficPercent: {percent} is more than 100")));
    }
    Ok(json!({ "spec": { "predictor": { "canaryTrafficPercent": percent } } }))
}

/// A manifest as YAML.
pub fn to_yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|e| format!("# cannot write YAML: {e}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_containers_are_found_in_every_component() {
        let model = json!({"spec": {"predictor": {"model": {"modelFormat": {"name": "onnx"}}}}});
        assert!(custom_containers(&model).is_empty());
        let custom = json!({"spec": {
            "predictor": {"containers": [{"name": "c", "command": ["sh", "-c", "touch /tmp/pwned"]}]},
            "explainer": {"containers": []},
        }});
        assert_eq!(custom_containers(&custom), ["spec.predictor.containers", "spec.explainer.containers"]);
        let transformer = json!({"spec": {"predictor": {}, "transformer": {"containers": [{"image": "x"}]}}});
        assert_eq!(custom_containers(&transformer), ["spec.transformer.containers"]);
    }

    #[test]
    fn the_selected_namespace_wins_over_the_manifests() {
        let manifest = parse(
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: iris\n  namespace: \
             kube-system\nspec: {predictor: {model: {modelFormat: {name: onnx}}}}\n",
        )
        .unwrap();
        let forced = force_namespace(manifest, "team-a").unwrap();
        assert_eq!(forced["metadata"]["namespace"], "team-a");
        assert_eq!(forced["metadata"]["name"], "iris");
        let bare = force_namespace(json!({"apiVersion": API_VERSION, "kind": KIND}), "team-a").unwrap();
        assert_eq!(bare["metadata"]["namespace"], "team-a");
    }

    #[test]
    fn other_kinds_and_non_yaml_are_refused_naming_the_field() {
        let error = parse("apiVersion: v1\nkind: Pod\n").unwrap_err().to_string();
        assert!(error.starts_with("apiVersion:"), "{error}");
        let error = parse("apiVersion: serving.kserve.io/v1beta1\nkind: Pod\n").unwrap_err().to_string();
        assert!(error.starts_with("kind:"), "{error}");
        assert!(parse("a: [").is_err());
        assert!(parse("- 1\n- 2\n").is_err());
        assert!(parse("  ").is_err());
    }

    #[test]
    fn the_form_makes_the_manifest_it_shows() {
        let form = Form {
            name: "iris".into(),
            model_format: "onnx".into(),
            image: String::new(),
            storage_uri: "file://models/iris".into(),
            protocol: "v2".into(),
            min_replicas: "0".into(),
            max_replicas: "3".into(),
            canary_percent: String::new(),
        };
        let manifest = form.manifest("default").unwrap();
        assert_eq!(manifest["spec"]["predictor"]["minReplicas"], 0);
        assert_eq!(manifest["spec"]["predictor"]["maxReplicas"], 3);
        assert_eq!(manifest["spec"]["predictor"]["model"]["protocolVersion"], "v2");
        assert!(manifest["spec"]["predictor"].get("canaryTrafficPercent").is_none());
        let round_trip = parse(&to_yaml(&manifest)).unwrap();
        assert_eq!(round_trip, manifest);
        let bad = Form { canary_percent: "120".into(), ..form.clone() }.manifest("default").unwrap_err();
        assert!(bad.to_string().starts_with("spec.predictor.canaryTrafficPercent"), "{bad}");
        let unnamed = Form { name: " ".into(), ..form.clone() }.manifest("default").unwrap_err();
        assert!(unnamed.to_string().starts_with("metadata.name"), "{unnamed}");

        let custom = Form { model_format: CUSTOM_CONTAINER.into(), image: "kserve/custom:1".into(), ..form.clone() };
        let manifest = custom.manifest("default").unwrap();
        let predictor = &manifest["spec"]["predictor"];
        assert!(predictor.get("model").is_none(), "{predictor}");
        assert_eq!(custom_containers(&manifest), ["spec.predictor.containers"]);
        assert_eq!(
            predictor["containers"],
            json!([{"name": "kserve-container", "image": "kserve/custom:1",
                    "env": [{"name": "STORAGE_URI", "value": "file://models/iris"}]}])
        );
        let imageless = Form { model_format: CUSTOM_CONTAINER.into(), ..form }.manifest("default").unwrap_err();
        assert!(imageless.to_string().starts_with("spec.predictor.containers[0].image"), "{imageless}");
    }

    #[test]
    fn promote_removes_the_canary_and_a_percentage_sets_it() {
        let mut manifest = json!({"spec": {"predictor": {"canaryTrafficPercent": 10, "minReplicas": 0}}});
        json_patch::merge(&mut manifest, &canary_patch(Some(30)).unwrap());
        assert_eq!(manifest["spec"]["predictor"]["canaryTrafficPercent"], 30);
        json_patch::merge(&mut manifest, &canary_patch(None).unwrap());
        assert_eq!(manifest, json!({"spec": {"predictor": {"minReplicas": 0}}}));
        assert!(canary_patch(Some(101)).is_err());
    }
}
