//! The plan against a simulated cluster: what it applies is stored (as a server-side apply would),
//! readiness is set by hand, and the status it writes is read back in the next pass.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::json;
use skiff_api::InferenceService;
use skiff_api::status::{PREDICTOR_READY, READY};

use super::*;

const IRIS: &str = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: iris\n  namespace: ml\nspec:\n  predictor:\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n";

struct Cluster {
    isvc: InferenceServiceResource,
    deployments: Vec<Deployment>,
    services: Vec<Service>,
    pods: Vec<k8s_openapi::api::core::v1::Pod>,
    platform: Platform,
    runtimes: Vec<ServingRuntime>,
    cluster_runtimes: Vec<ClusterServingRuntime>,
    writes: usize,
}

impl Cluster {
    fn new(yaml: &str) -> Cluster {
        let mut isvc = InferenceServiceResource::from(&InferenceService::from_yaml(yaml).unwrap());
        isvc.metadata.uid = Some("uid-1".into());
        isvc.metadata.generation = Some(1);
        Cluster {
            isvc,
            deployments: vec![],
            services: vec![],
            pods: vec![],
            platform: Platform::default(),
            runtimes: vec![],
            cluster_runtimes: vec![],
            writes: 0,
        }
    }

    fn plan(&self) -> Plan {
        plan(Inputs {
            isvc: &self.isvc,
            deployments: &self.deployments,
            services: &self.services,
            pods: &self.pods,
            platform: &self.platform,
            runtimes: Runtimes { namespaced: &self.runtimes, cluster: &self.cluster_runtimes },
            now: "2026-11-21T00:00:00Z",
        })
    }

    /// One reconcile, its writes stored; returns the plan.
    fn step(&mut self) -> Plan {
        let plan = self.plan();
        for d in &plan.deployments {
            self.writes += 1;
            match self.deployments.iter_mut().find(|e| e.metadata.name == d.metadata.name) {
                Some(existing) => {
                    let replicas = existing.spec.as_ref().unwrap().replicas;
                    let status = existing.status.clone();
                    *existing = d.clone();
                    let spec = existing.spec.as_mut().unwrap();
                    spec.replicas = spec.replicas.or(replicas);
                    existing.status = status;
                }
                None => self.deployments.push(d.clone()),
            }
        }
        for s in &plan.services {
            self.writes += 1;
            self.services.retain(|e| e.metadata.name != s.metadata.name);
            self.services.push(s.clone());
        }
        for (names, state) in [(&plan.reserve, "reserve"), (&plan.activate, "active")] {
            for name in names {
                self.writes += 1;
                let d = self.deployments.iter_mut().find(|d| d.metadata.name.as_deref() == Some(name)).unwrap();
                d.metadata.labels.get_or_insert_default().insert("skiff.dev/routing-state".into(), state.into());
                if state == "reserve" {
                    d.spec.as_mut().unwrap().replicas = Some(0);
                    d.status = None;
                }
            }
        }
        for name in &plan.delete {
            self.writes += 1;
            self.deployments.retain(|d| d.metadata.name.as_deref() != Some(name));
            self.services.retain(|s| s.metadata.name.as_deref() != Some(name));
        }
        if let Some(status) = &plan.status {
            self.writes += 1;
            self.isvc.status = Some(status.clone());
        }
        plan
    }

    /// Steps until nothing is written (at most 5 passes); returns the number of passes that wrote.
    fn settle(&mut self) -> usize {
        for pass in 0..5 {
            let before = self.writes;
            self.step();
            if self.writes == before {
                return pass;
            }
        }
        panic!("the plan does not settle");
    }

    fn set_available(&mut self, revision: &str, available: i32) {
        let d = self.deployments.iter_mut().find(|d| d.metadata.name.as_deref() == Some(revision)).unwrap();
        d.status = Some(serde_json::from_value(json!({"availableReplicas": available})).unwrap());
    }

    fn edit(&mut self, f: impl FnOnce(&mut InferenceServiceResource)) {
        f(&mut self.isvc);
        self.isvc.metadata.generation = Some(self.isvc.metadata.generation.unwrap() + 1);
    }

    /// Revisions kept without traffic: marked `reserve` and at zero replicas.
    fn reserved(&self) -> Vec<String> {
        let at_zero = |d: &&Deployment| d.spec.as_ref().unwrap().replicas == Some(0);
        let reserve = |d: &&Deployment| d.metadata.labels.as_ref().unwrap()["skiff.dev/routing-state"] == "reserve";
        let names = self
            .deployments
            .iter()
            .filter(|d| d.metadata.labels.as_ref().unwrap().contains_key("skiff.dev/routing-state"));
        names.filter(reserve).filter(at_zero).map(|d| d.metadata.name.clone().unwrap()).collect()
    }

    fn names(&self) -> Vec<String> {
        self.deployments.iter().map(|d| d.metadata.name.clone().unwrap()).collect()
    }

    fn traffic(&self) -> Vec<(String, u32, Option<String>, bool)> {
        let status = self.isvc.status.as_ref().unwrap();
        status
            .predictor()
            .unwrap()
            .traffic
            .iter()
            .map(|t| (t.revision_name.clone(), t.percent, t.tag.clone(), t.latest_revision))
            .collect()
    }

    fn ready(&self) -> (String, Option<String>) {
        let c = self.isvc.status.as_ref().unwrap().condition(READY).unwrap();
        (c.status.clone(), c.reason.clone())
    }
}

fn t(name: &str, percent: u32, tag: &str, latest: bool) -> (String, u32, Option<String>, bool) {
    (name.into(), percent, Some(tag.into()), latest)
}

#[test]
fn the_first_revision_is_created_then_ready_then_nothing_is_written() {
    let mut c = Cluster::new(IRIS);
    let first = c.step();
    assert_eq!(first.deployments.len(), 1);
    assert_eq!(first.deployments[0].spec.as_ref().unwrap().replicas, Some(1), "initial scale on create");
    assert_eq!(first.services.len(), 1);
    assert_eq!(c.traffic(), [t("iris-predictor-00001", 100, "latest", true)]);
    assert_eq!(c.ready(), ("False".into(), Some("RevisionNotReady".into())));
    let status = c.isvc.status.clone().unwrap();
    assert_eq!(status.url.as_deref(), Some("http://iris.ml.example.com"));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(c.settle(), 0, "an unchanged world writes nothing");

    c.set_available("iris-predictor-00001", 1);
    c.settle();
    assert_eq!(c.ready(), ("True".into(), None));
    let predictor = c.isvc.status.as_ref().unwrap().predictor().unwrap().clone();
    assert_eq!(predictor.latest_ready_revision.as_deref(), Some("iris-predictor-00001"));
    assert_eq!(predictor.latest_rolledout_revision.as_deref(), Some("iris-predictor-00001"));
    let plan = c.plan();
    assert_eq!(plan, Plan::default(), "idle: nothing to apply, delete or write");
}

#[test]
fn a_revision_whose_model_does_not_load_says_why_until_it_serves() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    let message = "cannot load model 'iris' from /mnt/models/model.onnx: not an ONNX model: the file is empty";
    c.pods.push(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "iris-predictor-00001-abc", "labels": {"skiff.dev/revision-name": "iris-predictor-00001"}},
            "status": {"containerStatuses": [{
                "name": "kserve-container", "ready": false, "restartCount": 2, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}},
            }]},
        }))
        .unwrap(),
    );
    c.settle();
    assert_eq!(predictor_ready(&c), ("False".into(), Some("ModelLoadFailed".into()), message.into()));
    assert_eq!(c.ready(), ("False".into(), Some("ModelLoadFailed".into())));

    c.pods.clear();
    c.set_available("iris-predictor-00001", 1);
    c.settle();
    assert_eq!(c.ready(), ("True".into(), None));
}

fn fetch_failed(revision: &str, exit_code: i32, message: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{revision}-abc"), "labels": {"skiff.dev/revision-name": revision}},
        "status": {
            "initContainerStatuses": [{
                "name": "storage-initializer", "ready": false, "restartCount": 1, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error", "message": message}},
            }],
            "containerStatuses": [{
                "name": "kserve-container", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                "state": {"waiting": {"reason": "PodInitializing"}},
            }],
        },
    }))
    .unwrap()
}

/// A failure as the status gives it: revision, location, exit code, message.
type Failure = (String, Option<String>, i32, String);

fn model_status(c: &Cluster) -> (String, Option<Failure>) {
    let model = c.isvc.status.as_ref().unwrap().model_status.clone().unwrap();
    let failure = model.last_failure_info.map(|f| (f.model_revision_name, f.location, f.exit_code, f.message));
    (model.transition_status, failure)
}

#[test]
fn a_model_that_cannot_be_fetched_blocks_its_revision_while_one_a_retry_may_fetch_does_not() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    assert_eq!(model_status(&c), ("InProgress".into(), None), "starting");
    let not_found = "fetching the model failed: s3://models/nope: not found";
    c.pods.push(fetch_failed("iris-predictor-00001", 3, not_found));
    c.settle();
    assert_eq!(predictor_ready(&c), ("False".into(), Some("ModelLoadFailed".into()), not_found.into()));
    let failure = Some(("iris-predictor-00001".into(), Some("storage-initializer".into()), 3, not_found.into()));
    assert_eq!(model_status(&c), ("BlockedByFailedLoad".into(), failure.clone()));
    assert_eq!(c.settle(), 0, "an unchanged world writes nothing");

    c.pods.clear();
    c.settle();
    assert_eq!(model_status(&c), ("BlockedByFailedLoad".into(), failure), "kept while no pod says otherwise");
    assert_eq!(c.ready(), ("False".into(), Some("ModelLoadFailed".into())));

    let cut = "fetching the model failed: s3://models/iris: the transfer was cut";
    c.pods.push(fetch_failed("iris-predictor-00001", 5, cut));
    c.settle();
    let retried = Some(("iris-predictor-00001".into(), Some("storage-initializer".into()), 5, cut.into()));
    assert_eq!(model_status(&c), ("InProgress".into(), retried), "a retry may fetch it");
    assert_eq!(predictor_ready(&c).2, cut);

    c.pods.clear();
    c.set_available("iris-predictor-00001", 1);
    c.settle();
    assert_eq!(model_status(&c), ("UpToDate".into(), None));
    assert_eq!(c.ready(), ("True".into(), None));

    // Rolled out and scaled to zero, it counts as ready; unless its model has gone from the store.
    c.set_available("iris-predictor-00001", 0);
    c.deployments[0].spec.as_mut().unwrap().replicas = Some(0);
    c.settle();
    assert_eq!(c.ready(), ("True".into(), None));
    c.pods.push(fetch_failed("iris-predictor-00001", 3, not_found));
    c.settle();
    c.pods.clear();
    c.settle();
    assert_eq!(c.ready(), ("False".into(), Some("ModelLoadFailed".into())), "at zero too: it cannot serve");
    assert_eq!(model_status(&c).0, "BlockedByFailedLoad");
}

#[test]
fn a_changed_template_rolls_a_new_revision_that_takes_over_once_ready() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    c.set_available("iris-predictor-00001", 1);
    c.settle();
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file:///models/iris-2".into()));
    c.settle();
    assert_eq!(c.names(), ["iris-predictor-00001", "iris-predictor-00002"]);
    assert_eq!(
        c.traffic(),
        [t("iris-predictor-00002", 0, "latest", true), t("iris-predictor-00001", 100, "prev", false)],
        "no weight before the new revision is ready"
    );
    assert_eq!(c.ready(), ("True".into(), None), "the rolled-out revision still serves");

    c.set_available("iris-predictor-00002", 1);
    c.settle();
    assert_eq!(c.traffic(), [t("iris-predictor-00002", 100, "latest", true)]);
    assert_eq!(c.names(), ["iris-predictor-00001", "iris-predictor-00002"], "the old revision is kept");
    assert_eq!(c.reserved(), ["iris-predictor-00001"], "at zero, marked reserve");
    assert_eq!(c.services.len(), 2);
    let predictor = c.isvc.status.as_ref().unwrap().predictor().unwrap().clone();
    assert_eq!(predictor.previous_rolledout_revision.as_deref(), Some("iris-predictor-00001"));
    assert_eq!(predictor.latest_rolledout_revision.as_deref(), Some("iris-predictor-00002"));

    // A traffic-only or unrelated change makes no revision.
    c.edit(|i| {
        i.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
    });
    c.settle();
    assert_eq!(c.names(), ["iris-predictor-00001", "iris-predictor-00002"]);
}

#[test]
fn canary_split_keeps_the_previous_revision_then_promotes() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    c.set_available("iris-predictor-00001", 1);
    c.settle();
    c.edit(|i| {
        let p = &mut i.spec.predictor;
        p.canary_traffic_percent = Some(30);
        p.model.as_mut().unwrap().storage_uri = Some("file:///models/iris-2".into());
    });
    c.settle();
    c.set_available("iris-predictor-00002", 1);
    c.settle();
    assert_eq!(
        c.traffic(),
        [t("iris-predictor-00002", 30, "latest", true), t("iris-predictor-00001", 70, "prev", false)]
    );
    assert_eq!(c.names(), ["iris-predictor-00001", "iris-predictor-00002"]);
    let predictor = c.isvc.status.as_ref().unwrap().predictor().unwrap().clone();
    assert_eq!(
        predictor.latest_rolledout_revision.as_deref(),
        Some("iris-predictor-00001"),
        "a canary is not rolled out"
    );

    c.edit(|i| i.spec.predictor.canary_traffic_percent = None);
    c.settle();
    assert_eq!(c.traffic(), [t("iris-predictor-00002", 100, "latest", true)]);
    assert_eq!(c.names(), ["iris-predictor-00001", "iris-predictor-00002"]);
    assert_eq!(c.reserved(), ["iris-predictor-00001"]);
}

#[test]
fn bookkeeping_survives_a_restart_because_it_is_read_back_from_the_cluster() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    c.set_available("iris-predictor-00001", 1);
    c.settle();
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file:///models/b".into()));
    c.settle();
    // A "new controller" sees the same cluster: same plan, nothing to do.
    assert_eq!(c.plan(), Plan::default());
    // Even a scaled-to-zero revision that was ready stays rolled out.
    c.set_available("iris-predictor-00001", 0);
    c.deployments[0].spec.as_mut().unwrap().replicas = Some(0);
    c.settle();
    assert_eq!(c.ready(), ("True".into(), None), "scaled to zero after having been ready");
    assert_eq!(c.traffic()[1], t("iris-predictor-00001", 100, "prev", false));
}

#[test]
fn numbers_never_repeat_even_when_the_latest_deployment_was_removed() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file:///models/b".into()));
    c.settle();
    c.deployments.retain(|d| d.metadata.name.as_deref() != Some("iris-predictor-00002"));
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file:///models/c".into()));
    c.settle();
    assert!(c.names().contains(&"iris-predictor-00003".to_owned()), "{:?}", c.names());
}

#[test]
fn initial_scale_zero_is_ready_without_pods() {
    let yaml = IRIS.replace(
        "  namespace: ml\n",
        "  namespace: ml\n  annotations:\n    autoscaling.knative.dev/initial-scale: \"0\"\n",
    );
    let mut c = Cluster::new(&yaml);
    c.platform.autoscaler.allow_zero_initial_scale = true;
    c.edit(|i| i.spec.predictor.min_replicas = Some(0));
    let first = c.step();
    assert_eq!(first.deployments[0].spec.as_ref().unwrap().replicas, Some(0));
    c.settle();
    assert_eq!(c.ready(), ("True".into(), None));
    assert_eq!(c.traffic(), [t("iris-predictor-00001", 100, "latest", true)]);
}

#[test]
fn an_unservable_spec_changes_nothing_and_says_why() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    c.set_available("iris-predictor-00001", 1);
    c.settle();
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file://./iris".into()));
    let plan = c.step();
    assert!(plan.deployments.is_empty() && plan.services.is_empty() && plan.delete.is_empty());
    assert_eq!(c.ready(), ("False".into(), Some("InvalidSpec".into())));
    let message = c.isvc.status.as_ref().unwrap().condition(READY).unwrap().message.clone().unwrap();
    assert!(message.starts_with("spec.predictor.model.storageUri"), "{message}");
    assert_eq!(plan.refused.as_ref(), Some(&message), "the reconcile fails with the same reason, for the back-off");
    assert_eq!(c.traffic(), [t("iris-predictor-00001", 100, "latest", true)], "traffic as it was");
    assert_eq!(c.settle(), 0);
}

/// The message of the `Ready` condition.
fn ready_message(c: &Cluster) -> String {
    c.isvc.status.as_ref().unwrap().condition(READY).unwrap().message.clone().unwrap_or_default()
}

#[test]
fn what_validation_refuses_is_refused_here_too_with_the_same_message() {
    let long = "a".repeat(48);
    let mut c = Cluster::new(&IRIS.replace("name: iris", &format!("name: {long}")));
    let plan = c.step();
    assert!(plan.deployments.is_empty(), "no revision {long}-predictor-00001 (64 characters)");
    assert_eq!(c.ready(), ("False".into(), Some("InvalidSpec".into())));
    let want = "metadata.name: 48 characters is too long; the limit is 47 characters, so that revision names \
                (<name>-predictor-00001) fit in 63";
    assert_eq!(ready_message(&c), want);
    assert_eq!(plan.refused.as_deref(), Some(want));

    let mut c = Cluster::new(IRIS);
    c.edit(|i| i.spec.predictor.timeout = Some(0));
    c.step();
    assert_eq!(ready_message(&c), "spec.predictor.timeout: 0 is less than 1");
}

#[test]
fn a_platform_setting_can_make_a_spec_unservable_and_says_which() {
    let mut c = Cluster::new(IRIS);
    c.platform.allow_host_path = false;
    let plan = c.step();
    assert!(plan.deployments.is_empty());
    assert_eq!(c.ready(), ("False".into(), Some("InvalidSpec".into())));
    let message = ready_message(&c);
    assert!(message.starts_with("spec.predictor.model.storageUri: file:///models/iris:"), "{message}");
    assert!(message.contains("allowHostPath"), "{message}");
    c.platform.allow_host_path = true;
    c.settle();
    assert_eq!(c.names(), ["iris-predictor-00001"], "served once the admin allows it");
}

#[test]
fn the_revision_number_never_overflows() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    let mut status = c.isvc.status.clone().unwrap();
    status.components.get_mut("predictor").unwrap().latest_created_revision = Some("iris-predictor-99999".into());
    c.isvc.status = Some(status);
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file:///models/b".into()));
    let plan = c.step();
    assert!(plan.deployments.is_empty(), "no revision 100000");
    assert_eq!(c.ready(), ("False".into(), Some("InvalidSpec".into())));
    assert!(ready_message(&c).starts_with("iris: every revision number up to 99999 is taken"), "{}", ready_message(&c));
    assert_eq!(c.names(), ["iris-predictor-00001"], "the revision there stays");
}

#[test]
fn replicas_are_left_to_another_manager_once_it_wrote_them() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    let mut d = c.deployments[0].clone();
    d.spec.as_mut().unwrap().replicas = Some(3);
    assert_eq!(replicas_to_apply(&d), Some(3), "still ours: keep the current value");
    d.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("skiff-autoscaler".into()),
        fields_v1: Some(FieldsV1(json!({"f:spec": {"f:replicas": {}}}))),
        ..ManagedFieldsEntry::default()
    }]);
    assert_eq!(replicas_to_apply(&d), None);
    // A changed platform re-applies the Deployment without replicas.
    c.deployments[0] = d;
    c.platform.server_image = "skiff-server:2".into();
    let plan = c.plan();
    assert_eq!(plan.deployments.len(), 1);
    assert_eq!(plan.deployments[0].spec.as_ref().unwrap().replicas, None);
}

#[test]
fn children_of_another_owner_are_ignored() {
    let mut c = Cluster::new(IRIS);
    c.settle();
    c.isvc.metadata.uid = Some("uid-2".into());
    let plan = c.plan();
    assert!(plan.delete.is_empty(), "not ours to delete");
    assert_eq!(plan.deployments[0].metadata.name.as_deref(), Some("iris-predictor-00002"));
}

/// IRIS with a transformer (and the explainer when `explainer`).
fn with_components(explainer: bool) -> String {
    let mut yaml = format!("{IRIS}  transformer:\n    containers:\n    - image: my/transformer\n");
    if explainer {
        yaml.push_str("  explainer:\n    containers:\n    - image: my/explainer\n");
    }
    yaml
}

impl Cluster {
    fn component(&self, name: &str) -> skiff_api::status::ComponentStatus {
        self.isvc.status.as_ref().unwrap().component(name).unwrap().clone()
    }

    fn condition(&self, type_: &str) -> Option<(String, Option<String>)> {
        let c = self.isvc.status.as_ref().unwrap().condition(type_)?;
        Some((c.status.clone(), c.reason.clone()))
    }

    fn label(&self, revision: &str, key: &str) -> String {
        let d = self.deployments.iter().find(|d| d.metadata.name.as_deref() == Some(revision)).unwrap();
        d.metadata.labels.as_ref().unwrap()[key].clone()
    }
}

fn split_of(c: &skiff_api::status::ComponentStatus) -> Vec<(String, u32, Option<String>, bool)> {
    c.traffic.iter().map(|t| (t.revision_name.clone(), t.percent, t.tag.clone(), t.latest_revision)).collect()
}

#[test]
fn each_component_has_revisions_of_its_own_and_ready_needs_them_all() {
    let mut c = Cluster::new(&with_components(true));
    let first = c.step();
    let names: Vec<_> = first.deployments.iter().map(|d| d.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["iris-predictor-00001", "iris-transformer-00001", "iris-explainer-00001"]);
    assert_eq!(first.services.len(), 3);
    assert_eq!(c.label("iris-transformer-00001", "component"), "transformer");
    assert_eq!(c.label("iris-explainer-00001", "component"), "explainer");
    assert_eq!(c.label("iris-predictor-00001", "component"), "predictor");
    let scaling = &first.deployments[1].metadata.annotations.as_ref().unwrap()["skiff.dev/scaling"];
    assert!(!scaling.is_empty(), "each revision carries its component's scaling inputs");
    assert_eq!(split_of(&c.component("transformer")), [t("iris-transformer-00001", 100, "latest", true)]);
    assert_eq!(c.condition("TransformerReady"), Some(("False".into(), Some("RevisionNotReady".into()))));

    c.set_available("iris-predictor-00001", 1);
    c.set_available("iris-explainer-00001", 1);
    c.settle();
    assert_eq!(c.condition("PredictorReady"), Some(("True".into(), None)));
    assert_eq!(c.condition("ExplainerReady"), Some(("True".into(), None)));
    assert_eq!(c.ready(), ("False".into(), Some("RevisionNotReady".into())), "the transformer is not ready yet");
    let message = ready_message(&c);
    assert!(message.contains("iris-transformer-00001"), "{message}");

    c.set_available("iris-transformer-00001", 1);
    c.settle();
    assert_eq!(c.ready(), ("True".into(), None));
    assert_eq!(c.condition("TransformerReady"), Some(("True".into(), None)));
    let transformer = c.component("transformer");
    assert_eq!(transformer.latest_ready_revision.as_deref(), Some("iris-transformer-00001"));
    assert_eq!(transformer.latest_rolledout_revision.as_deref(), Some("iris-transformer-00001"));
    assert_eq!(c.isvc.status.as_ref().unwrap().url.as_deref(), Some("http://iris.ml.example.com"));
    assert_eq!(c.plan(), Plan::default(), "idle: nothing to apply, delete or write");

    // A change of the transformer rolls the transformer alone.
    c.edit(|i| i.spec.transformer.as_mut().unwrap().container_concurrency = Some(2));
    c.settle();
    assert_eq!(
        c.names(),
        ["iris-predictor-00001", "iris-transformer-00001", "iris-explainer-00001", "iris-transformer-00002"]
    );
    assert_eq!(c.traffic(), [t("iris-predictor-00001", 100, "latest", true)], "the predictor is untouched");
}

#[test]
fn the_canary_split_is_per_component() {
    let mut c = Cluster::new(&with_components(false));
    c.settle();
    c.set_available("iris-predictor-00001", 1);
    c.set_available("iris-transformer-00001", 1);
    c.settle();
    // A new transformer as a 20 % canary; the predictor changes too, without a canary.
    c.edit(|i| {
        let transformer = i.spec.transformer.as_mut().unwrap();
        transformer.canary_traffic_percent = Some(20);
        transformer.timeout = Some(30);
        i.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file:///models/iris-2".into());
    });
    c.settle();
    c.set_available("iris-transformer-00002", 1);
    c.set_available("iris-predictor-00002", 1);
    c.settle();
    assert_eq!(
        split_of(&c.component("transformer")),
        [t("iris-transformer-00002", 20, "latest", true), t("iris-transformer-00001", 80, "prev", false)]
    );
    assert_eq!(c.traffic(), [t("iris-predictor-00002", 100, "latest", true)], "no canary on the predictor");
    let mut names = c.names();
    names.sort();
    assert_eq!(
        names,
        ["iris-predictor-00001", "iris-predictor-00002", "iris-transformer-00001", "iris-transformer-00002"],
        "the old predictor is kept at zero, both transformers take traffic"
    );
    assert_eq!(c.reserved(), ["iris-predictor-00001"]);
    assert_eq!(c.ready(), ("True".into(), None));

    c.edit(|i| i.spec.transformer.as_mut().unwrap().canary_traffic_percent = None);
    c.settle();
    assert_eq!(split_of(&c.component("transformer")), [t("iris-transformer-00002", 100, "latest", true)]);
    let mut reserved = c.reserved();
    reserved.sort();
    assert_eq!(reserved, ["iris-predictor-00001", "iris-transformer-00001"]);
}

#[test]
fn a_removed_component_is_collected_and_leaves_the_status() {
    let mut c = Cluster::new(&with_components(false));
    c.settle();
    c.set_available("iris-predictor-00001", 1);
    c.set_available("iris-transformer-00001", 1);
    c.settle();
    c.edit(|i| i.spec.transformer = None);
    c.settle();
    assert_eq!(c.names(), ["iris-predictor-00001"]);
    assert_eq!(c.services.len(), 1);
    let status = c.isvc.status.clone().unwrap();
    assert!(status.component("transformer").is_none());
    assert!(status.condition("TransformerReady").is_none());
    assert_eq!(c.ready(), ("True".into(), None));

    // Added again, it numbers on from nothing left: its revisions are gone with its status.
    c.edit(|i| i.spec.transformer = InferenceService::from_yaml(&with_components(false)).unwrap().spec.transformer);
    c.settle();
    assert!(c.names().contains(&"iris-transformer-00001".to_owned()), "{:?}", c.names());
}

#[test]
fn a_transformer_the_platform_cannot_run_refuses_the_whole_spec() {
    let mut c = Cluster::new(&with_components(false));
    c.settle();
    c.set_available("iris-predictor-00001", 1);
    c.set_available("iris-transformer-00001", 1);
    c.settle();
    c.edit(|i| {
        i.spec.transformer.as_mut().unwrap().containers = Some(vec![json!({"image": "x", "ports": "oops"})]);
    });
    let plan = c.step();
    assert!(plan.deployments.is_empty() && plan.delete.is_empty());
    assert_eq!(c.ready(), ("False".into(), Some("InvalidSpec".into())));
    assert!(ready_message(&c).starts_with("spec.transformer.containers[0]:"), "{}", ready_message(&c));
    assert_eq!(split_of(&c.component("transformer")), [t("iris-transformer-00001", 100, "latest", true)]);
}

const SUM: &str = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: sum\n  namespace: ml\nspec:\n  predictor:\n    model:\n      modelFormat: {name: sklearn}\n      protocolVersion: v2\n      storageUri: file:///models/sum\n";

fn runtime_spec(formats: serde_json::Value, image: &str) -> serde_json::Value {
    json!({
        "supportedModelFormats": formats,
        "protocolVersions": ["v2"],
        "containers": [{"name": "kserve-container", "image": image, "args": ["--model_name={{.Name}}"]}],
    })
}

fn cluster_runtime(name: &str, spec: serde_json::Value) -> ClusterServingRuntime {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn namespaced_runtime(name: &str, spec: serde_json::Value) -> ServingRuntime {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml"}, "spec": spec})).unwrap()
}

fn auto(format: &str) -> serde_json::Value {
    json!([{"name": format, "autoSelect": true}])
}

/// The images of the containers of a revision's pod.
fn images(c: &Cluster, revision: &str) -> Vec<String> {
    let d = c.deployments.iter().find(|d| d.metadata.name.as_deref() == Some(revision)).unwrap();
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    pod.containers.iter().map(|c| c.image.clone().unwrap_or_default()).collect()
}

fn runtime_of(c: &Cluster, revision: &str) -> Option<String> {
    let d = c.deployments.iter().find(|d| d.metadata.name.as_deref() == Some(revision)).unwrap();
    d.metadata.annotations.as_ref().unwrap().get("skiff.dev/runtime").cloned()
}

fn predictor_ready(c: &Cluster) -> (String, Option<String>, String) {
    let cond = c.isvc.status.as_ref().unwrap().condition(PREDICTOR_READY).unwrap();
    (cond.status.clone(), cond.reason.clone(), cond.message.clone().unwrap_or_default())
}

#[test]
fn a_sklearn_model_runs_the_auto_selected_runtime_behind_the_queue_proxy() {
    let mut c = Cluster::new(SUM);
    c.cluster_runtimes.push(cluster_runtime("sk", runtime_spec(auto("sklearn"), "sk:1")));
    c.cluster_runtimes.push(cluster_runtime("onnx-too", runtime_spec(auto("onnx"), "other:1")));
    c.settle();
    let rev = "sum-predictor-00001";
    assert_eq!(images(&c, rev), ["sk:1", crate::platform::DEFAULT_QUEUE_PROXY_IMAGE]);
    assert_eq!(runtime_of(&c, rev).as_deref(), Some("ClusterServingRuntime/sk"));
    let service = c.services.iter().find(|s| s.metadata.name.as_deref() == Some(rev)).unwrap();
    let port = &service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
    assert_eq!(port.target_port, Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8012)));
    assert_eq!(service.metadata.labels.as_ref().unwrap()["skiff.dev/queue-proxy"], "true");
    c.set_available(rev, 1);
    c.settle();
    assert_eq!(c.ready(), ("True".into(), None));

    // A namespace's runtime comes before the cluster's: a new revision on it, the old one kept
    // until the new one is ready.
    c.runtimes.push(namespaced_runtime("mine", runtime_spec(auto("sklearn"), "mine:1")));
    c.settle();
    let rev2 = "sum-predictor-00002";
    assert_eq!(images(&c, rev2)[0], "mine:1");
    assert_eq!(runtime_of(&c, rev2).as_deref(), Some("ServingRuntime/mine"));
    assert!(
        c.traffic().iter().any(|x| x.0 == rev && x.1 == 100),
        "{:?}: the old revision serves meanwhile",
        c.traffic()
    );
    c.set_available(rev2, 1);
    c.settle();
    assert_eq!(c.traffic(), [t(rev2, 100, "latest", true)]);

    // A changed runtime rolls a revision too (its container is part of the pod).
    c.runtimes[0] = namespaced_runtime("mine", runtime_spec(auto("sklearn"), "mine:2"));
    c.settle();
    assert_eq!(images(&c, "sum-predictor-00003")[0], "mine:2");
}

#[test]
fn runtime_names_the_runtime_even_for_onnx_and_onnx_without_one_stays_on_skiff_server() {
    let mut c = Cluster::new(IRIS);
    c.cluster_runtimes.push(cluster_runtime("onnx-auto", runtime_spec(auto("onnx"), "auto:1")));
    c.cluster_runtimes.push(cluster_runtime("triton", runtime_spec(json!([{"name": "onnx"}]), "triton:1")));
    c.settle();
    assert_eq!(images(&c, "iris-predictor-00001"), [crate::platform::DEFAULT_SERVER_IMAGE], "no runtime is consulted");
    assert_eq!(runtime_of(&c, "iris-predictor-00001"), None);

    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().runtime = Some("triton".into()));
    c.settle();
    assert_eq!(images(&c, "iris-predictor-00002"), ["triton:1", crate::platform::DEFAULT_QUEUE_PROXY_IMAGE]);
    assert_eq!(runtime_of(&c, "iris-predictor-00002").as_deref(), Some("ClusterServingRuntime/triton"));

    let mut c = Cluster::new(SUM);
    c.cluster_runtimes.push(cluster_runtime("sk", runtime_spec(auto("sklearn"), "sk:1")));
    c.cluster_runtimes.push(cluster_runtime("sk-manual", runtime_spec(json!([{"name": "sklearn"}]), "manual:1")));
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().runtime = Some("sk-manual".into()));
    c.settle();
    assert_eq!(images(&c, "sum-predictor-00001")[0], "manual:1", "named: autoSelect not needed");
}

#[test]
fn no_runtime_for_the_format_is_a_condition_naming_it_and_no_children_until_one_appears() {
    let mut c = Cluster::new(&SUM.replace("name: sklearn", "name: nosuchformat"));
    c.cluster_runtimes.push(cluster_runtime("sk", runtime_spec(auto("sklearn"), "sk:1")));
    let plan = c.step();
    assert!(plan.deployments.is_empty() && plan.services.is_empty());
    let (status, reason, message) = predictor_ready(&c);
    assert_eq!((status.as_str(), reason.as_deref()), ("False", Some("NoSupportingRuntime")));
    assert!(message.contains("nosuchformat"), "{message}");
    assert_eq!(c.ready(), ("False".into(), Some("NoSupportingRuntime".into())));
    assert_eq!(plan.refused.as_deref(), Some(message.as_str()));
    assert_eq!(c.settle(), 0, "nothing more to write");

    c.cluster_runtimes.push(cluster_runtime("any", runtime_spec(auto("nosuchformat"), "any:1")));
    c.settle();
    assert_eq!(images(&c, "sum-predictor-00001")[0], "any:1", "a runtime that appears is used");

    let mut c = Cluster::new(SUM);
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().runtime = Some("missing".into()));
    c.step();
    let (_, reason, message) = predictor_ready(&c);
    assert_eq!(reason.as_deref(), Some("RuntimeNotRecognized"));
    assert!(message.contains("\"missing\""), "{message}");
}

#[test]
fn a_framework_shorthand_selects_the_runtime_its_model_would_among_kserves_defaults() {
    let sample = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: sklearn-iris\n  namespace: ml\nspec:\n  predictor:\n    sklearn:\n      storageUri: gs://kfserving-examples/models/sklearn/1.0/model\n";
    let mut c = Cluster::new(sample);
    assert!(crate::plan::needs_runtime(&c.isvc), "the shorthand's model needs a runtime");
    c.cluster_runtimes = skiff_api::runtime::defaults::kserve_runtimes().unwrap();
    c.settle();
    let rev = "sklearn-iris-predictor-00001";
    assert_eq!(runtime_of(&c, rev).as_deref(), Some("ClusterServingRuntime/kserve-sklearnserver"));
    assert_eq!(images(&c, rev), ["kserve/sklearnserver:v0.21.0", crate::platform::DEFAULT_QUEUE_PROXY_IMAGE]);

    let onnx = sample
        .replace("sklearn-iris", "iris")
        .replace("sklearn:", "onnx:")
        .replace("gs://kfserving-examples/models/sklearn/1.0/model", "file:///models/iris");
    let mut c = Cluster::new(&onnx);
    assert!(!crate::plan::needs_runtime(&c.isvc), "onnx: stays on skiff-server");
    c.cluster_runtimes = skiff_api::runtime::defaults::kserve_runtimes().unwrap();
    c.settle();
    assert_eq!(images(&c, "iris-predictor-00001"), [crate::platform::DEFAULT_SERVER_IMAGE]);
}

fn uri(c: &mut Cluster, uri: &str) {
    c.edit(|i| i.spec.predictor.model.as_mut().unwrap().storage_uri = Some(uri.into()));
}

fn rolled_out(c: &Cluster) -> (Option<String>, Option<String>, Option<String>) {
    let p = c.isvc.status.as_ref().unwrap().predictor().unwrap();
    (p.latest_created_revision.clone(), p.latest_rolledout_revision.clone(), p.previous_rolledout_revision.clone())
}

fn some(a: &str, b: &str, c: &str) -> (Option<String>, Option<String>, Option<String>) {
    (Some(a.into()), Some(b.into()), Some(c.into()))
}

/// A cluster where `count` templates (`/models/1`, `/models/2`, ...) were rolled out in turn.
fn rolled_out_cluster(count: u32) -> Cluster {
    let mut c = Cluster::new(IRIS);
    for n in 1..=count {
        uri(&mut c, &format!("file:///models/{n}"));
        c.settle();
        c.set_available(&format!("iris-predictor-{n:05}"), 1);
        c.settle();
    }
    c
}

#[test]
fn restoring_the_previous_spec_routes_to_the_kept_revision_and_creates_nothing() {
    let mut c = rolled_out_cluster(2);
    assert_eq!(rolled_out(&c), some("iris-predictor-00002", "iris-predictor-00002", "iris-predictor-00001"));
    assert_eq!(c.reserved(), ["iris-predictor-00001"]);

    uri(&mut c, "file:///models/1");
    let plan = c.step();
    assert!(plan.deployments.iter().all(|d| d.metadata.name.as_deref() != Some("iris-predictor-00003")), "{plan:?}");
    assert_eq!(plan.activate, ["iris-predictor-00001"], "marked active before traffic moves");
    c.settle();
    assert_eq!(c.names(), ["iris-predictor-00001", "iris-predictor-00002"], "no new revision");
    assert_eq!(c.traffic(), [t("iris-predictor-00001", 100, "latest", true)], "at once: it has been ready");
    assert_eq!(rolled_out(&c), some("iris-predictor-00001", "iris-predictor-00001", "iris-predictor-00002"));
    assert_eq!(c.reserved(), ["iris-predictor-00002"], "the one rolled back from is kept in turn");
    assert_eq!(c.ready(), ("True".into(), None), "at zero after having been ready");

    uri(&mut c, "file:///models/3");
    c.settle();
    assert!(c.names().contains(&"iris-predictor-00003".to_owned()), "numbers go on: {:?}", c.names());
}

#[test]
fn restoring_the_stable_spec_during_a_canary_ends_it_on_the_stable_revision() {
    let mut c = rolled_out_cluster(1);
    c.edit(|i| {
        i.spec.predictor.canary_traffic_percent = Some(30);
        i.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file:///models/2".into());
    });
    c.settle();
    c.set_available("iris-predictor-00002", 1);
    c.settle();
    assert_eq!(
        c.traffic(),
        [t("iris-predictor-00002", 30, "latest", true), t("iris-predictor-00001", 70, "prev", false)]
    );
    uri(&mut c, "file:///models/1");
    c.settle();
    assert_eq!(c.traffic(), [t("iris-predictor-00001", 100, "latest", true)]);
    assert_eq!(c.names(), ["iris-predictor-00001", "iris-predictor-00002"]);
    assert_eq!(c.reserved(), ["iris-predictor-00002"], "the canary is kept at zero");
}

#[test]
fn revisions_beyond_the_bound_are_collected_oldest_first() {
    assert_eq!(skiff_api::revision::KEPT_INACTIVE_REVISIONS, 2);
    let mut c = rolled_out_cluster(4);
    assert_eq!(c.names(), ["iris-predictor-00002", "iris-predictor-00003", "iris-predictor-00004"]);
    assert_eq!(c.reserved(), ["iris-predictor-00002", "iris-predictor-00003"]);
    assert_eq!(c.services.len(), 3, "a collected revision's Service goes with it");
    // Its spec is a new revision now.
    uri(&mut c, "file:///models/1");
    c.settle();
    assert!(c.names().contains(&"iris-predictor-00005".to_owned()), "{:?}", c.names());
}

#[test]
fn a_canary_share_after_a_full_rollout_changes_nothing_and_the_condition_says_so() {
    let mut c = rolled_out_cluster(2);
    c.edit(|i| i.spec.predictor.canary_traffic_percent = Some(0));
    c.settle();
    assert_eq!(c.traffic(), [t("iris-predictor-00002", 100, "latest", true)], "as in KServe");
    let condition = c.isvc.status.as_ref().unwrap().condition(PREDICTOR_READY).unwrap().clone();
    assert!(condition.is_true());
    assert_eq!(
        condition.message.as_deref(),
        Some(
            "canaryTrafficPercent: 0 changes nothing: iris-predictor-00002 is rolled out and takes all traffic, as \
             in KServe; to roll back, restore the spec of iris-predictor-00001"
        )
    );
    c.edit(|i| i.spec.predictor.canary_traffic_percent = None);
    c.settle();
    let condition = c.isvc.status.as_ref().unwrap().condition(PREDICTOR_READY).unwrap().clone();
    assert_eq!((condition.is_true(), condition.message), (true, None));
}
