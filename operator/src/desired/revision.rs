//! A revision's identity and bookkeeping: which component of which InferenceService it runs
//! ([`RevisionRef`]), the serving settings the router and the activator read from its labels
//! ([`Serving`]), what its Deployment records for later passes ([`Record`]), and the labels,
//! selector and metadata of its objects.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use skiff_api::isvc::PredictorSpec;
use skiff_api::labels::{
    COMPONENT, CONTAINER_CONCURRENCY, FIELD_MANAGER, INFERENCE_SERVICE, QUEUE_PROXY as QUEUE_PROXY_LABEL, REVISION,
    REVISION_NAME, TIMEOUT_SECONDS,
};
use skiff_api::revision::Component;
use skiff_api::runtime::uses_embedded_server;
use skiff_api::scaling::ScalingInputs;
use skiff_api::serving::Served;

/// What the router and the activator read of a revision, from its Service's labels (copied to
/// its EndpointSlices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Serving {
    /// `containerConcurrency` (0 = unlimited).
    pub container_concurrency: u32,
    /// The request timeout in seconds.
    pub timeout_secs: u64,
    /// Whether requests enter through the queue-proxy sidecar (a custom container).
    pub queue_proxy: bool,
}

impl Default for Serving {
    fn default() -> Self {
        Serving {
            container_concurrency: 0,
            timeout_secs: skiff_api::serving::DEFAULT_TIMEOUT.as_secs(),
            queue_proxy: false,
        }
    }
}

impl Serving {
    /// A component's settings (`spec.predictor`, `spec.transformer`, ...). Requests go through the
    /// queue-proxy for a custom container and for a model a ServingRuntime serves (any model but
    /// ONNX without `runtime:`).
    pub fn of(predictor: &PredictorSpec) -> Serving {
        let queue_proxy = match &predictor.model {
            Some(model) => !uses_embedded_server(model),
            None => predictor.containers.is_some(),
        };
        Serving {
            container_concurrency: predictor.container_concurrency.and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
            timeout_secs: skiff_api::serving::request_timeout(predictor).as_secs(),
            queue_proxy,
        }
    }

    /// Read back from a revision object's labels (absent: the defaults).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Serving {
        let defaults = Serving::default();
        Serving {
            container_concurrency: labels
                .get(CONTAINER_CONCURRENCY)
                .and_then(|v| v.parse().ok())
                .unwrap_or(defaults.container_concurrency),
            timeout_secs: labels.get(TIMEOUT_SECONDS).and_then(|v| v.parse().ok()).unwrap_or(defaults.timeout_secs),
            queue_proxy: labels.get(QUEUE_PROXY_LABEL).is_some_and(|v| v == "true"),
        }
    }
}

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
    /// Its concurrency and timeout.
    pub serving: Serving,
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
        labels.insert(CONTAINER_CONCURRENCY.into(), self.serving.container_concurrency.to_string());
        labels.insert(TIMEOUT_SECONDS.into(), self.serving.timeout_secs.to_string());
        if self.serving.queue_proxy {
            labels.insert(QUEUE_PROXY_LABEL.into(), "true".into());
        }
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
        assert!(!Serving::of(&predictor(MODEL)).queue_proxy);
        assert!(Serving::of(&predictor(SKLEARN)).queue_proxy);
        let named = MODEL.replace("modelFormat: {name: onnx}", "modelFormat: {name: onnx}\n      runtime: triton");
        assert!(Serving::of(&predictor(&named)).queue_proxy, "ONNX with runtime: goes to that runtime");
    }
}
