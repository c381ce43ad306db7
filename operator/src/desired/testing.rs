//! What the tests of the pod shapes share: an InferenceService's component from YAML, a revision
//! of it, its owner, and the pod of the Deployment built from them.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use skiff_api::InferenceService;
use skiff_api::isvc::PredictorSpec;
use skiff_api::revision::Component;
use skiff_api::settings::RevisionSettings;

use super::{Record, RevisionRef, deployment};
use crate::platform::Platform;

pub(super) fn predictor(yaml: &str) -> PredictorSpec {
    let manifest = format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: iris\nspec:\n  predictor:\n{yaml}"
    );
    InferenceService::from_yaml(&manifest).unwrap().spec.predictor
}

pub(super) fn revision() -> RevisionRef {
    RevisionRef {
        service: "iris".into(),
        namespace: "ml".into(),
        component: Component::Predictor,
        name: "iris-predictor-00002".into(),
        number: 2,
        serving: RevisionSettings::default(),
    }
}

pub(super) fn record() -> Record {
    Record { template_hash: "hash".into(), initial_scale: 1, scaling: Default::default() }
}

pub(super) fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "serving.kserve.io/v1beta1".into(),
        kind: "InferenceService".into(),
        name: "iris".into(),
        uid: "uid-1".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

pub(super) fn build(yaml: &str) -> Result<Deployment, String> {
    deployment(&revision(), &owner(), &predictor(yaml), &record(), Some(1), &Platform::default(), None)
}

pub(super) fn pod_of(d: &Deployment) -> serde_json::Value {
    serde_json::to_value(&d.spec.as_ref().unwrap().template).unwrap()["spec"].clone()
}

pub(super) const MODEL: &str = "    containerConcurrency: 4\n    serviceAccountName: reader\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n      resources: {limits: {cpu: '1'}}\n";

pub(super) fn transformer_revision() -> RevisionRef {
    RevisionRef {
        component: Component::Transformer,
        name: "iris-transformer-00001".into(),
        number: 1,
        serving: RevisionSettings {
            container_concurrency: 0,
            timeout_secs: 300,
            progress_deadline_secs: None,
            queue_proxy: true,
        },
        ..revision()
    }
}

pub(super) fn strings(value: &serde_json::Value) -> Vec<String> {
    value.as_array().map_or_else(Vec::new, |a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
}

pub(super) const SKLEARN: &str = "    containerConcurrency: 2\n    nodeSelector: {pool: gpu}\n    model:\n      modelFormat: {name: sklearn}\n      storageUri: file:///models/sum\n      args: [--workers=2]\n      env: [{name: B, value: model}, {name: C, value: model}]\n      resources: {limits: {memory: 4Gi}}\n";
