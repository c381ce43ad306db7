//! The revisions of an InferenceService as the cluster records them, so that no bookkeeping lives
//! in the controller's memory: each revision is a Deployment labelled with the InferenceService
//! (`serving.kserve.io/inferenceservice`), its component (`component`) and its number
//! (`skiff.dev/revision`, counted per component), annotated with the hash of the template it runs
//! and the scale it was created with, and controlled by the InferenceService (owner reference with
//! its UID). Its pods say why it does not serve when its model does not load
//! ([`load_failures`]: the storage initializer's or the model container's termination message,
//! KServe's `ModelLoadFailed`) or a replica cannot be started (a container's waiting reason such as
//! `ImagePullBackOff`, or the Deployment's `ReplicaFailure`, e.g. `FailedCreate`: [`CANNOT_START`](skiff_dataplane::failing::CANNOT_START)).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use kube::ResourceExt;
use skiff_api::labels::{INITIAL_SCALE, RESERVE, REVISION, REVISION_NAME, ROUTING_STATE, TEMPLATE_HASH};
use skiff_api::revision::Component;
use skiff_api::settings::{RevisionSettings, component_of};
use skiff_api::status::FailureInfo;
use skiff_dataplane::failing::{Cause, FAILED_CREATE, STORAGE_INITIALIZER, cannot_start};

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
    /// Why its ReplicaSet cannot create a pod (its `ReplicaFailure` condition's message), if it cannot.
    pub replica_failure: Option<String>,
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
                replica_failure: replica_failure(d),
            })
        })
        .collect();
    revisions.sort_by_key(|r| r.number);
    revisions
}

/// The message of a Deployment's `ReplicaFailure` condition while it holds: its ReplicaSet cannot
/// create a pod (refused by the namespace's Pod Security level or quota, say).
fn replica_failure(deployment: &Deployment) -> Option<String> {
    let conditions = deployment.status.as_ref()?.conditions.as_deref()?;
    let failure = conditions.iter().find(|c| c.type_ == "ReplicaFailure" && c.status == "True")?;
    Some(failure.message.clone().unwrap_or_else(|| failure.reason.clone().unwrap_or_default()))
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

/// Why a revision's replica failed to load its model, or could not be started, as its pod or its
/// Deployment shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadFailure {
    /// The container that failed: [`STORAGE_INITIALIZER`] or the model container (empty when no
    /// pod could be created).
    pub container: String,
    /// [`MODEL_LOAD_FAILED`], or one of the [`CANNOT_START`](skiff_dataplane::failing::CANNOT_START) reasons.
    pub reason: &'static str,
    /// Its run's termination message (what `skiff-fetch` or `skiff-server` wrote to
    /// `/dev/termination-log`, or the log's end under `FallbackToLogsOnError`), else its exit code
    /// and reason.
    pub message: String,
    /// Its run's exit code.
    pub exit_code: i32,
    /// When that run ended (RFC 3339).
    pub finished_at: Option<String>,
}

impl LoadFailure {
    /// What made it fail, as far as a retry is concerned ([`Cause::of_container`]).
    pub fn cause(&self) -> Cause {
        Cause::of_failure(&self.container, self.reason, self.exit_code)
    }

    /// KServe's `lastFailureInfo` for it, a failure of `revision`.
    pub fn info(&self, revision: &str) -> FailureInfo {
        FailureInfo {
            location: Some(self.container.clone()).filter(|c| !c.is_empty()),
            reason: self.reason.to_owned(),
            message: self.message.clone(),
            model_revision_name: revision.to_owned(),
            time: self.finished_at.clone(),
            exit_code: self.exit_code,
        }
    }
}

/// KServe's reason for a revision whose model does not load.
pub const MODEL_LOAD_FAILED: &str = "ModelLoadFailed";

/// Adds the status's last failure to `failures` while nothing newer replaces it: its revision is
/// still there, no pod of it shows a failure of its own and none is available (scaled to zero, or
/// a new pod still starting). Requests to it are then answered at once again, rather than held
/// until a new pod fails the same way; each still brings a pod that retries.
pub fn keep_last_failure(
    failures: &mut BTreeMap<String, LoadFailure>,
    last: Option<&FailureInfo>,
    revisions: &[ObservedRevision],
) {
    let Some(last) = last else { return };
    let revision = &last.model_revision_name;
    if revisions.iter().any(|r| r.name == *revision && !r.serving()) && !failures.contains_key(revision) {
        let failure = LoadFailure {
            container: last.location.clone().unwrap_or_default(),
            reason: cannot_start(&last.reason).unwrap_or(MODEL_LOAD_FAILED),
            message: last.message.clone(),
            exit_code: last.exit_code,
            finished_at: last.time.clone(),
        };
        failures.insert(revision.clone(), failure);
    }
}

/// Why revisions' replicas failed to load their model, by revision name (the pods'
/// `skiff.dev/revision-name`), as KServe reads a pod for `ModelLoadFailed`: the storage initializer
/// (an init container) whose current or last run ended with a non-zero exit code, else the model
/// container (`kserve-container`), when it is not ready and its current or last run did; else a
/// container of either kind that the kubelet cannot start ([`CANNOT_START`](skiff_dataplane::failing::CANNOT_START)); else, for a revision
/// with no such pod, its Deployment's `ReplicaFailure` (`FailedCreate`).
pub fn load_failures(pods: &[Pod], revisions: &[ObservedRevision]) -> BTreeMap<String, LoadFailure> {
    let mut failures = BTreeMap::new();
    for pod in pods {
        let Some(revision) = pod.labels().get(REVISION_NAME) else { continue };
        let status = pod.status.as_ref();
        let init = status.and_then(|s| s.init_container_statuses.as_deref()).unwrap_or_default();
        let main = status.and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
        let fetch = init.iter().find(|c| c.name == STORAGE_INITIALIZER).and_then(failed_run);
        let model = || main.iter().find(|c| c.name == crate::desired::CONTAINER_NAME && !c.ready).and_then(failed_run);
        let waiting = || init.iter().chain(main).find_map(unstartable);
        if let Some(failure) = fetch.or_else(model).or_else(waiting) {
            failures.entry(revision.clone()).or_insert(failure);
        }
    }
    for revision in revisions {
        if let Some(message) = &revision.replica_failure {
            failures.entry(revision.name.clone()).or_insert_with(|| LoadFailure {
                container: String::new(),
                reason: FAILED_CREATE,
                message: message.clone(),
                exit_code: 0,
                finished_at: None,
            });
        }
    }
    failures
}

/// The container, if the kubelet cannot start it for one of the [`CANNOT_START`](skiff_dataplane::failing::CANNOT_START) reasons.
fn unstartable(status: &ContainerStatus) -> Option<LoadFailure> {
    let waiting = status.state.as_ref()?.waiting.as_ref()?;
    let reason = cannot_start(waiting.reason.as_deref()?)?;
    Some(LoadFailure {
        container: status.name.clone(),
        reason,
        message: waiting.message.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| reason.to_owned()),
        exit_code: 0,
        finished_at: None,
    })
}

/// The container's current run if it ended with a non-zero exit code, else its last run if that did.
fn failed_run(status: &ContainerStatus) -> Option<LoadFailure> {
    let failed = |t: &&ContainerStateTerminated| t.exit_code != 0;
    let current = status.state.as_ref().and_then(|s| s.terminated.as_ref()).filter(failed);
    let last = status.last_state.as_ref().and_then(|s| s.terminated.as_ref()).filter(failed);
    let run = current.or(last)?;
    let message = run.message.as_deref().map(str::trim).filter(|m| !m.is_empty()).map_or_else(
        || format!("exit code {} ({})", run.exit_code, run.reason.as_deref().unwrap_or("Error")),
        str::to_owned,
    );
    Some(LoadFailure {
        container: status.name.clone(),
        reason: MODEL_LOAD_FAILED,
        message,
        exit_code: run.exit_code,
        finished_at: run.finished_at.as_ref().map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
    })
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
        let failures = load_failures(&[crash_looping, no_message, serving, completed, sidecar], &[]);
        let read: Vec<(&str, &str, i32, Cause)> =
            failures.iter().map(|(r, f)| (r.as_str(), f.message.as_str(), f.exit_code, f.cause())).collect();
        assert_eq!(
            read,
            [
                (
                    "iris-predictor-00002",
                    "cannot load model 'iris' from /mnt/models/model.onnx: not an ONNX model: the file is empty",
                    1,
                    Cause::Exited
                ),
                ("iris-predictor-00003", "exit code 137 (OOMKilled)", 137, Cause::Exited),
            ]
        );
    }

    fn fetching(revision: &str, init: serde_json::Value) -> Pod {
        let mut pod = pod(
            revision,
            json!({"name": "kserve-container", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"waiting": {"reason": "PodInitializing"}}}),
        );
        pod.status.as_mut().unwrap().init_container_statuses = Some(vec![serde_json::from_value(init).unwrap()]);
        pod
    }

    #[test]
    fn a_storage_initializer_that_failed_gives_its_revision_its_message_and_fetch_exit_code() {
        let not_found = "fetching the model failed: s3://models/nope: not found (NoSuchKey)";
        let backing_off = fetching(
            "nope-predictor-00001",
            json!({"name": "storage-initializer", "ready": false, "restartCount": 2, "image": "i", "imageID": "",
                   "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                   "lastState": {"terminated": {"exitCode": 3, "reason": "Error", "message": not_found,
                                                "finishedAt": "2026-11-30T10:00:02Z"}}}),
        );
        let failed_now = fetching(
            "cut-predictor-00001",
            json!({"name": "storage-initializer", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"terminated": {"exitCode": 5, "reason": "Error"}}}),
        );
        let running = fetching(
            "slow-predictor-00001",
            json!({"name": "storage-initializer", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"running": {}}}),
        );
        let failures = load_failures(&[backing_off, failed_now, running], &[]);
        let nope = &failures["nope-predictor-00001"];
        assert_eq!(
            (nope.container.as_str(), nope.message.as_str(), nope.finished_at.as_deref()),
            ("storage-initializer", not_found, Some("2026-11-30T10:00:02Z"))
        );
        assert_eq!(nope.cause(), Cause::Fetch { exit_code: 3 });
        assert!(!nope.cause().retry_helps(), "a missing model stays missing");
        let cut = &failures["cut-predictor-00001"];
        assert_eq!((cut.message.as_str(), cut.cause().retry_helps()), ("exit code 5 (Error)", true));
        assert!(!failures.contains_key("slow-predictor-00001"), "still fetching");
        let info = nope.info("nope-predictor-00001");
        assert_eq!(
            (info.reason.as_str(), info.location.as_deref(), info.exit_code, info.model_revision_name.as_str()),
            ("ModelLoadFailed", Some("storage-initializer"), 3, "nope-predictor-00001")
        );
    }

    #[test]
    fn the_last_failure_is_kept_while_its_revision_has_no_replica_and_no_pod_says_otherwise() {
        let last = LoadFailure {
            container: "storage-initializer".into(),
            reason: MODEL_LOAD_FAILED,
            message: "not found".into(),
            exit_code: 3,
            finished_at: None,
        }
        .info("m-predictor-00002");
        let revisions = observe(&[deployment("m-predictor-00002", "2", "u1", 0)], "u1");
        let mut failures = BTreeMap::new();
        keep_last_failure(&mut failures, Some(&last), &revisions);
        assert_eq!(failures["m-predictor-00002"].cause(), Cause::Fetch { exit_code: 3 });

        let newer =
            LoadFailure { message: "access denied".into(), exit_code: 4, ..failures["m-predictor-00002"].clone() };
        let mut failures = BTreeMap::from([("m-predictor-00002".to_owned(), newer.clone())]);
        keep_last_failure(&mut failures, Some(&last), &revisions);
        assert_eq!(failures["m-predictor-00002"], newer, "a pod's own failure is newer");

        let serving = observe(&[deployment("m-predictor-00002", "2", "u1", 1)], "u1");
        let mut failures = BTreeMap::new();
        keep_last_failure(&mut failures, Some(&last), &serving);
        keep_last_failure(&mut failures, Some(&last), &[]);
        assert!(failures.is_empty(), "a replica was ready, or the revision went");
    }

    #[test]
    fn an_image_that_cannot_be_pulled_or_a_pod_that_cannot_be_created_fails_its_revision() {
        let no_image = pod(
            "iris-predictor-00001",
            json!({"name": "kserve-container", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"waiting": {"reason": "ImagePullBackOff",
                                         "message": "Back-off pulling image \"example.com/nope:1\""}}}),
        );
        let starting = pod(
            "iris-predictor-00002",
            json!({"name": "kserve-container", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                   "state": {"waiting": {"reason": "ContainerCreating"}}}),
        );
        let mut refused = deployment("iris-predictor-00003", "3", "u1", 0);
        refused.status.as_mut().unwrap().conditions =
            Some(vec![serde_json::from_value(json!({
            "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
            "message": "pods \"iris-predictor-00003-x\" is forbidden: violates PodSecurity \"restricted:latest\""
        }))
        .unwrap()]);
        let revisions = observe(&[refused], "u1");
        let failures = load_failures(&[no_image, starting], &revisions);
        let read: Vec<(&str, &str, &str, Cause)> =
            failures.iter().map(|(r, f)| (r.as_str(), f.reason, f.message.as_str(), f.cause())).collect();
        assert_eq!(
            read,
            [
                (
                    "iris-predictor-00001",
                    "ImagePullBackOff",
                    "Back-off pulling image \"example.com/nope:1\"",
                    Cause::Unstartable
                ),
                (
                    "iris-predictor-00003",
                    "FailedCreate",
                    "pods \"iris-predictor-00003-x\" is forbidden: violates PodSecurity \"restricted:latest\"",
                    Cause::Unstartable
                ),
            ]
        );
        let info = failures["iris-predictor-00003"].info("iris-predictor-00003");
        assert_eq!((info.reason.as_str(), info.location), ("FailedCreate", None));
    }
}
