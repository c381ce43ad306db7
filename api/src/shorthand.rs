//! KServe's framework shorthands (`spec.predictor.sklearn: {storageUri: ...}`, `xgboost:`,
//! `onnx:`, ...) turned into the `model` they stand for, as KServe's defaulting webhook turns them
//! (`setPredictorModelDefaults` in `inference_service_defaults.go`): the shorthand's fields become
//! `spec.predictor.model`'s, with `modelFormat.name` the framework's format, and the shorthand goes.
//! `triton:`, `onnx:` and `huggingface:` get `protocolVersion: v2` when they name none, as KServe
//! gives them. Both modes expand a manifest after validating it ([`expand`]), so that a shorthand
//! selects a runtime (or, for `onnx:`, the embedded server) exactly as the `model:` it stands for.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::isvc::{InferenceService, ModelSpec, PredictorSpec};
use crate::limits::FRAMEWORKS;

/// The shorthands KServe gives protocol `v2` when they name none (`assignTritonRuntime`,
/// `assignONNXRuntime`, `assignHuggingFaceRuntime`).
const V2_BY_DEFAULT: [&str; 3] = ["triton", "onnx", "huggingface"];

/// The framework shorthand `predictor` uses, if any (the first of [`FRAMEWORKS`] it sets).
pub fn framework(predictor: &PredictorSpec) -> Option<&'static str> {
    FRAMEWORKS.iter().copied().find(|f| predictor.other.contains_key(*f))
}

/// The `model` that `predictor` serves: its own `model`, else the one its framework shorthand stands
/// for. `None` for a custom container. The error names the shorthand's field when its value is not
/// a model's fields.
pub fn model_of(predictor: &PredictorSpec) -> Result<Option<ModelSpec>> {
    if let Some(model) = &predictor.model {
        return Ok(Some(model.clone()));
    }
    let Some(framework) = framework(predictor) else { return Ok(None) };
    let at = format!("spec.predictor.{framework}");
    let Some(Value::Object(fields)) = predictor.other.get(framework) else {
        return Err(Error::invalid(at, "must be an object of the model's fields (storageUri, protocolVersion, ...)"));
    };
    let mut fields = fields.clone();
    fields.insert("modelFormat".into(), serde_json::json!({ "name": framework }));
    if V2_BY_DEFAULT.contains(&framework) {
        fields.entry("protocolVersion").or_insert_with(|| "v2".into());
    }
    serde_json::from_value(Value::Object(fields)).map(Some).map_err(|e| Error::invalid(at, e.to_string()))
}

/// `isvc` with its predictor's framework shorthand, if it has one, replaced by the `model` it
/// stands for ([`model_of`]); unchanged otherwise (a predictor with `model` or `containers` keeps
/// any shorthand beside them, which validation refuses).
pub fn expand(mut isvc: InferenceService) -> Result<InferenceService> {
    let predictor = &mut isvc.spec.predictor;
    if predictor.model.is_some() || predictor.containers.is_some() {
        return Ok(isvc);
    }
    if let Some(framework) = framework(predictor) {
        let model = model_of(predictor)?;
        predictor.other.remove(framework);
        predictor.model = model;
    }
    Ok(isvc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn isvc(predictor: &str) -> InferenceService {
        let text = format!(
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {{name: m}}\nspec:\n  predictor:\n{predictor}"
        );
        serde_saphyr::from_str(&text).unwrap()
    }

    #[test]
    fn a_shorthand_becomes_the_model_kserve_makes_of_it() {
        let expanded = expand(isvc(
            "    minReplicas: 0\n    sklearn:\n      storageUri: gs://kfserving-examples/models/sklearn/1.0/model\n      \
             resources: {limits: {cpu: '1'}}\n",
        ))
        .unwrap();
        let p = &expanded.spec.predictor;
        assert!(p.other.is_empty(), "the shorthand is gone: {:?}", p.other);
        assert_eq!(p.min_replicas, Some(0), "the predictor's own fields stay");
        let model = p.model.as_ref().unwrap();
        assert_eq!(model.model_format.name, "sklearn");
        assert_eq!(model.model_format.version, None);
        assert_eq!(model.storage_uri.as_deref(), Some("gs://kfserving-examples/models/sklearn/1.0/model"));
        assert_eq!(model.protocol_version, None, "sklearn keeps the default protocol (v1)");
        assert_eq!(model.other["resources"], serde_json::json!({"limits": {"cpu": "1"}}), "container fields kept");
    }

    #[test]
    fn every_framework_names_its_format_and_some_default_to_v2() {
        for framework in FRAMEWORKS {
            let model = model_of(&isvc(&format!("    {framework}: {{storageUri: 'gs://b/m'}}\n")).spec.predictor)
                .unwrap()
                .unwrap();
            assert_eq!(model.model_format.name, framework);
            let want = V2_BY_DEFAULT.contains(&framework).then_some("v2");
            assert_eq!(model.protocol_version.as_deref(), want, "{framework}");
        }
        let given = model_of(&isvc("    triton: {storageUri: 'gs://b/m', protocolVersion: grpc-v2}\n").spec.predictor);
        assert_eq!(given.unwrap().unwrap().protocol_version.as_deref(), Some("grpc-v2"), "a given protocol stays");
        let v2 = model_of(&isvc("    sklearn: {storageUri: 'gs://b/m', protocolVersion: v2}\n").spec.predictor);
        assert_eq!(v2.unwrap().unwrap().protocol_version.as_deref(), Some("v2"));
    }

    #[test]
    fn a_model_or_a_container_is_left_alone_and_a_bad_shorthand_is_named() {
        let model = isvc("    model: {modelFormat: {name: onnx}, storageUri: 'file:///m'}\n");
        assert_eq!(expand(model.clone()).unwrap(), model);
        assert_eq!(model_of(&model.spec.predictor).unwrap().unwrap().model_format.name, "onnx");
        let both = isvc("    containers: [{image: x}]\n    sklearn: {storageUri: 'gs://b/m'}\n");
        assert_eq!(expand(both.clone()).unwrap(), both, "validation refuses it; expansion does not hide it");
        assert_eq!(model_of(&isvc("    containers: [{image: x}]\n").spec.predictor).unwrap(), None);
        let bad = expand(isvc("    xgboost: gs://b/m\n")).unwrap_err().to_string();
        assert!(bad.starts_with("spec.predictor.xgboost: must be an object"), "{bad}");
        let typed = expand(isvc("    lightgbm: {storageUri: 5}\n")).unwrap_err().to_string();
        assert!(typed.starts_with("spec.predictor.lightgbm: "), "{typed}");
    }
}
