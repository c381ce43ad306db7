//! The revisions of an InferenceService as the cluster records them, so that no bookkeeping lives
//! in the controller's memory: each revision is a Deployment labelled with the InferenceService
//! (`serving.kserve.io/inferenceservice`), its component (`component`) and its number
//! (`skiff.dev/revision`, counted per component), annotated with the hash of the template it runs
//! and the scale it was created with, and controlled by the InferenceService (owner reference with
//! its UID).

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use skiff_api::labels::{COMPONENT, INITIAL_SCALE, REVISION, TEMPLATE_HASH};
use skiff_api::revision::Component;

/// One revision, read back from its Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRevision {
    /// `<name>-<component>-NNNNN`.
    pub name: String,
    /// The component it runs (a Deployment without the label is the predictor's).
    pub component: Component,
    /// Its number (`NNNNN`).
    pub number: u32,
    /// Hash of the template it runs.
    pub template_hash: String,
    /// Replicas it was created with; 0 means it counts as ready without a pod (the activator starts it).
    pub initial_scale: Option<u32>,
    /// `spec.replicas` now.
    pub replicas: i32,
    /// `status.availableReplicas` now.
    pub available: i32,
    /// The container port its Service targets.
    pub port: i32,
    /// Its concurrency and timeout, from its labels.
    pub serving: crate::desired::Serving,
}

/// The revisions among `deployments` that `owner_uid` controls, oldest first (numbers are per
/// component: filter by [`ObservedRevision::component`] before comparing them); others are ignored
/// (a previous InferenceService of the same name whose children the garbage collector has not
/// removed yet, or objects someone else labelled).
pub fn observe(deployments: &[Deployment], owner_uid: &str) -> Vec<ObservedRevision> {
    let mut revisions: Vec<ObservedRevision> = deployments
        .iter()
        .filter(|d| d.owner_references().iter().any(|o| o.controller == Some(true) && o.uid == owner_uid))
        .filter_map(|d| {
            let number = d.labels().get(REVISION)?.parse().ok()?;
            let spec = d.spec.as_ref();
            let status = d.status.as_ref();
            let component = match d.labels().get(COMPONENT) {
                None => Component::Predictor,
                Some(label) => Component::ALL.into_iter().find(|c| c.name() == label)?,
            };
            Some(ObservedRevision {
                name: d.name_any(),
                component,
                number,
                template_hash: d.annotations().get(TEMPLATE_HASH).cloned().unwrap_or_default(),
                initial_scale: d.annotations().get(INITIAL_SCALE).and_then(|s| s.parse().ok()),
                replicas: spec.and_then(|s| s.replicas).unwrap_or(1),
                available: status.and_then(|s| s.available_replicas).unwrap_or(0),
                port: spec.and_then(|s| container_port(&s.template.spec)).unwrap_or(crate::desired::SERVER_PORT),
                serving: crate::desired::Serving::from_labels(d.labels()),
            })
        })
        .collect();
    revisions.sort_by_key(|r| r.number);
    revisions
}

/// The port requests enter the pod on: the queue-proxy's when it has one, else the first container's.
fn container_port(pod: &Option<k8s_openapi::api::core::v1::PodSpec>) -> Option<i32> {
    let containers = &pod.as_ref()?.containers;
    let container = containers.iter().find(|c| c.name == crate::desired::QUEUE_PROXY).or_else(|| containers.first())?;
    Some(container.ports.as_ref()?.first()?.container_port)
}

impl ObservedRevision {
    /// Whether it can serve now: a replica is available.
    pub fn serving(&self) -> bool {
        self.available > 0
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use serde_json::json;

    use super::*;

    fn deployment(name: &str, revision: &str, owner: &str, available: i32) -> Deployment {
        let mut d: Deployment = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "labels": {"skiff.dev/revision": revision},
                "annotations": {"skiff.dev/template-hash": format!("h{revision}"), "skiff.dev/initial-scale": "1"},
            },
            "spec": {
                "replicas": 2,
                "selector": {},
                "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 9000}]}]}},
            },
            "status": {"availableReplicas": available},
        }))
        .unwrap();
        d.metadata.owner_references =
            Some(vec![OwnerReference { controller: Some(true), uid: owner.into(), ..OwnerReference::default() }]);
        d
    }

    #[test]
    fn reads_revisions_from_labels_and_annotations_in_number_order() {
        let all = [
            deployment("m-predictor-00010", "10", "u1", 0),
            deployment("m-predictor-00002", "2", "u1", 1),
            deployment("m-predictor-00001", "1", "old-uid", 1),
            deployment("unlabelled", "x", "u1", 1),
        ];
        let revisions = observe(&all, "u1");
        let names: Vec<&str> = revisions.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["m-predictor-00002", "m-predictor-00010"]);
        let r = &revisions[0];
        assert_eq!(
            (r.number, r.template_hash.as_str(), r.initial_scale, r.replicas, r.port),
            (2, "h2", Some(1), 2, 9000)
        );
        assert!(r.serving() && !revisions[1].serving());
    }
}
