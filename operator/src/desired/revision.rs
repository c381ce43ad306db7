//! A revision's identity and bookkeeping: which component of which InferenceService it runs
//! ([`RevisionRef`]), with the settings the router and the activator read from its labels
//! ([`RevisionSettings`], written and read by `skiff-api`), what its Deployment records for later
//! passes ([`Record`]), and the labels, selector and metadata of its objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use skiff_api::labels::{COMPONENT, FIELD_MANAGER, INFERENCE_SERVICE, REVISION, REVISION_NAME};
use skiff_api::revision::Component;
use skiff_api::scaling::ScalingInputs;
use skiff_api::serving::Served;
use skiff_api::settings::RevisionSettings;

/// What a revision's Deployment records for later passes and for the autoscaler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Hash of the template it runs.
    pub template_hash: String,
    /// Replicas it was created with.
    pub initial_scale: u32,
    /// Its autoscaling inputs.
    pub scaling: ScalingInputs,
}

/// Which revision of which component of which InferenceService an object belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRef {
    /// The InferenceService.
    pub service: String,
    /// Its namespace.
    pub namespace: String,
    /// The component the revision runs.
    pub component: Component,
    /// `<service>-<component>-NNNNN`.
    pub name: String,
    /// `NNNNN` (numbered per component).
    pub number: u32,
    /// Its concurrency, timeout and queue-proxy, as its labels carry them.
    pub serving: RevisionSettings,
}

impl RevisionRef {
    /// Who the revision's pods are, for what they report.
    pub fn served(&self) -> Served<'_> {
        Served {
            inference_service: &self.service,
            namespace: &self.namespace,
            component: self.component.name(),
            revision: &self.name,
        }
    }

    /// Labels of the revision's Deployment and Service: the InferenceService, the component
    /// (KServe's `component` label), the revision's number and name, its serving settings.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.selector();
        labels.insert(REVISION.into(), self.number.to_string());
        labels.insert(COMPONENT.into(), self.component.name().into());
        labels.insert(REVISION_NAME.into(), self.name.clone());
        labels.insert("app.kubernetes.io/managed-by".into(), FIELD_MANAGER.into());
        self.serving.write_labels(&mut labels);
        labels
    }

    /// Labels of the revision's pods: [`RevisionRef::labels`], less the revision's number for a
    /// transformer or explainer (see [`RevisionRef::selector`]).
    pub fn pod_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels();
        if self.component != Component::Predictor {
            labels.remove(REVISION);
        }
        labels
    }

    /// The labels that select the revision's pods. A predictor's are the InferenceService and the
    /// revision's number, as they always were (a Deployment's selector cannot change). Numbers
    /// repeat across components (`iris-predictor-00001`, `iris-transformer-00001`), so the pods of
    /// a transformer or explainer carry no number, which keeps them out of the predictor's
    /// selector, and are selected by the revision's name instead.
    pub fn selector(&self) -> BTreeMap<String, String> {
        let isvc = (INFERENCE_SERVICE.to_owned(), self.service.clone());
        match self.component {
            Component::Predictor => [isvc, (REVISION.to_owned(), self.number.to_string())].into(),
            Component::Transformer | Component::Explainer => {
                [isvc, (REVISION_NAME.to_owned(), self.name.clone())].into()
            }
        }
    }

    pub(super) fn metadata(&self, owner: &OwnerReference, annotations: BTreeMap<String, String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::testing::*;

    #[test]
    fn only_onnx_without_a_runtime_stays_on_skiff_server_and_uses_no_queue_proxy() {
        assert!(!RevisionSettings::of(&predictor(MODEL)).queue_proxy);
        assert!(RevisionSettings::of(&predictor(SKLEARN)).queue_proxy);
        let named = MODEL.replace("modelFormat: {name: onnx}", "modelFormat: {name: onnx}\n      runtime: triton");
        assert!(RevisionSettings::of(&predictor(&named)).queue_proxy, "ONNX with runtime: goes to that runtime");
    }
}
