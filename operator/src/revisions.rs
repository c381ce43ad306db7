//! The revisions of an InferenceService as the cluster records them, so that no bookkeeping lives
//! in the controller's memory: each revision is a Deployment labelled with the InferenceService
//! (`serving.kserve.io/inferenceservice`), its component (`component`) and its number
//! (`skiff.dev/revision`, counted per component), annotated with the hash of the template it runs
//! and the scale it was created with, and controlled by the InferenceService (owner reference with
//! its UID). Its pods say why it does not serve when its model does not load
//! ([`load_failures`]: the model container's termination message, KServe's `ModelLoadFailed`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kube::ResourceExt;
use skiff_api::labels::{INITIAL_SCALE, RESERVE, REVISION, REVISION_NAME, ROUTING_STATE, TEMPLATE_HASH};
use skiff_api::revision::Component;
use skiff_api::settings::{RevisionSettings, component_of};

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
    pub serving: RevisionSettings,
    /// Kept without traffic, scaled to zero ([`ROUTING_STATE`] `reserve`).
    pub reserved: bool,
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
            let component = component_of(d.labels())?;
            Some(ObservedRevision {
                name: d.name_any(),
                component,
                number,
                template_hash: d.annotations().get(TEMPLATE_HASH).cloned().unwrap_or_default(),
                initial_scale: d.annotations().get(INITIAL_SCALE).and_then(|s| s.parse().ok()),
                replicas: spec.and_then(|s| s.replicas).unwrap_or(1),
                available: status.and_then(|s| s.available_replicas).unwrap_or(0),
                port: spec.and_then(|s| container_port(&s.template.spec)).unwrap_or(crate::desired::SERVER_PORT),
                serving: RevisionSettings::from_labels(d.labels()),
                reserved: reserved(d),
            })
        })
        .collect();
    revisions.sort_by_key(|r| r.number);
    revisions
}

/// Whether a revision's Deployment is kept without traffic for a rollback ([`ROUTING_STATE`]
/// `reserve`): scaled to zero, with no autoscaler of any class.
pub fn reserved(deployment: &Deployment) -> bool {
    deployment.labels().get(ROUTING_STATE).is_some_and(|s| s == RESERVE)
}

/// The port requests enter the pod on: the queue-proxy's when it has one, else the first container's.
fn container_port(pod: &Option<k8s_openapi::api::core::v1::PodSpec>) -> Option<i32> {
    let containers = &pod.as_ref()?.containers;
    let container = containers.iter().find(|c| c.name == crate::desired::QUEUE_PROXY).or_else(|| containers.first())?;
    Some(container.ports.as_ref()?.first()?.container_port)
}

/// Why revisions' model containers (`kserve-container`) failed, by revision name (the pods'
/// `skiff.dev/revision-name`): a container that is not ready and whose current or last run ended
/// with a non-zero exit code, as KServe reads a pod for `ModelLoadFailed`. The message is the
/// run's termination message (what `skiff-server` wrote to `/dev/termination-log`, or the log's end
/// under `FallbackToLogsOnError`), else its exit code and reason.
pub fn load_failures(pods: &[Pod]) -> BTreeMap<String, String> {
    let mut failures = BTreeMap::new();
    for pod in pods {
        let Some(revision) = pod.labels().get(REVISION_NAME) else { continue };
        let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
        let Some(status) = statuses.iter().find(|c| c.name == crate::desired::CONTAINER_NAME && !c.ready) else {
            continue;
        };
        let failed = |t: &&ContainerStateTerminated| t.exit_code != 0;
        let current = status.state.as_ref().and_then(|s| s.terminated.as_ref()).filter(failed);
        let last = status.last_state.as_ref().and_then(|s| s.terminated.as_ref()).filter(failed);
        if let Some(run) = current.or(last) {
            let message = run.message.as_deref().map(str::trim).filter(|m| !m.is_empty()).map_or_else(
                || format!("exit code {} ({})", run.exit_code, run.reason.as_deref().unwrap_or("Error")),
                str::to_owned,
            );
            failures.entry(revision.clone()).or_insert(message);
        }
    }
    failures
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

    fn pod(revision: &str, container: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{revision}-abc"), "labels": {"skiff.dev/revision-name": revision}},
            "status": {"containerStatuses": [container]},
        }))
        .unwrap()
    }

    #[test]
    fn a_model_container_that_failed_gives_its_revision_its_termination_message() {
        let crash_looping = pod(
            "iris-predictor-00002",
            json!({
                "name": "kserve-container", "ready": false, "restartCount": 3, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                    "message": "cannot load model 'iris' from /mnt/models/model.onnx: not an ONNX model: the file is empty\n"}},
            }),
        );
        let no_message = pod(
            "iris-predictor-00003",
            json!({"name": "kserve-container", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}),
        );
        let serving = pod(
            "iris-predictor-00001",
            json!({"name": "kserve-container", "ready": true, "restartCount": 1, "image": "i", "imageID": "",
                   "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1, "message": "old"}}}),
        );
        let completed = pod(
            "iris-predictor-00004",
            json!({"name": "kserve-container", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"terminated": {"exitCode": 0, "message": "bye"}}}),
        );
        let sidecar = pod(
            "iris-predictor-00005",
            json!({"name": "queue-proxy", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"terminated": {"exitCode": 1, "message": "not the model"}}}),
        );
        let failures = load_failures(&[crash_looping, no_message, serving, completed, sidecar]);
        assert_eq!(
            failures.into_iter().collect::<Vec<_>>(),
            [
                (
                    "iris-predictor-00002".to_owned(),
                    "cannot load model 'iris' from /mnt/models/model.onnx: not an ONNX model: the file is empty"
                        .to_owned()
                ),
                ("iris-predictor-00003".to_owned(), "exit code 137 (OOMKilled)".to_owned()),
            ]
        );
    }
}
