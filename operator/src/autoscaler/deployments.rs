//! Replicas on Kubernetes: a revision's Deployment, read from a watch and scaled through its
//! `scale` subresource under the `skiff-autoscaler` field manager (the operator then leaves
//! `spec.replicas` alone).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use skiff_api::labels::AUTOSCALER_FIELD_MANAGER;
use skiff_dataplane::{ReplicaBackend, RevisionKey};

/// Deployments as the autoscaler's replica backend. Writes of one revision's scale are made one
/// at a time, each with the latest count asked for, so a slow write never overtakes a newer one.
pub struct Deployments {
    client: Client,
    store: Store<Deployment>,
    writers: Mutex<HashMap<RevisionKey, Arc<Writer>>>,
}

/// One revision's latest asked count (and when), and its writes, in order.
#[derive(Default)]
struct Writer {
    asked: Mutex<Option<(u32, Instant)>>,
    written: tokio::sync::Mutex<Option<u32>>,
}

/// How long the same count is not asked for again while the watch has not shown it yet.
const REWRITE_AFTER: Duration = Duration::from_secs(2);

impl Deployments {
    /// Scales through `client`; reads the Deployments `store` holds.
    pub fn new(client: Client, store: Store<Deployment>) -> Arc<Deployments> {
        Arc::new(Deployments { client, store, writers: Mutex::new(HashMap::new()) })
    }

    fn get(&self, revision: &RevisionKey) -> Option<Arc<Deployment>> {
        self.store.get(&ObjectRef::new(&revision.name).within(&revision.namespace))
    }

    /// The writer of `revision`; making a new one forgets those of Deployments that are gone (only
    /// then, not on every call: `scale` runs for every revision at every tick).
    fn writer(&self, revision: &RevisionKey) -> Arc<Writer> {
        let mut writers = self.writers.lock().expect("writers lock");
        if let Some(writer) = writers.get(revision) {
            return writer.clone();
        }
        writers.retain(|key, writer| Arc::strong_count(writer) > 1 || self.get(key).is_some());
        writers.entry(revision.clone()).or_default().clone()
    }
}

impl Deployments {
    /// Scales `revision` from zero replicas to one, and only from zero: the write carries the
    /// resourceVersion its count was read at, so a count set meanwhile (by an HPA, KEDA or anyone)
    /// is never overwritten (the write fails with a conflict instead). Returns at once.
    pub fn wake(&self, revision: &RevisionKey) {
        let Some(deployment) = self.get(revision) else { return };
        if deployment.spec.as_ref().and_then(|s| s.replicas).map_or(1, count) != 0 {
            return;
        }
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &revision.namespace);
        let (revision, version) = (revision.clone(), deployment.resource_version());
        tokio::spawn(async move {
            let params = PatchParams { field_manager: Some(AUTOSCALER_FIELD_MANAGER.into()), ..PatchParams::default() };
            let patch = Patch::Merge(json!({"metadata": {"resourceVersion": version}, "spec": {"replicas": 1}}));
            match api.patch_scale(&revision.name, &params, &patch).await {
                Ok(_) => tracing::info!(%revision, "woken from zero for a held request; its own autoscaler decides on"),
                Err(kube::Error::Api(e)) if e.code == 409 => tracing::debug!(%revision, "scaled meanwhile; not woken"),
                Err(e) => tracing::warn!(%revision, error = %e, "cannot wake"),
            }
        });
    }
}

/// Whether the autoscaler has written `spec.replicas` of `deployment` (it took it over once).
pub fn scaled_by_autoscaler(deployment: &Deployment) -> bool {
    deployment.managed_fields().iter().any(|entry| {
        entry.manager.as_deref() == Some(AUTOSCALER_FIELD_MANAGER)
            && entry.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").and_then(|s| s.get("f:replicas")).is_some())
    })
}

/// A Deployment's replica count (an `int32`) as the autoscaler counts: a negative one is none.
fn count(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

impl ReplicaBackend for Deployments {
    fn scale(&self, revision: &RevisionKey, replicas: u32) {
        let Some(deployment) = self.get(revision) else { return };
        let current = deployment.spec.as_ref().and_then(|s| s.replicas).map_or(1, count);
        let writer = self.writer(revision);
        {
            let mut asked = writer.asked.lock().expect("asked lock");
            let recently = asked.is_some_and(|(n, at)| n == replicas && at.elapsed() < REWRITE_AFTER);
            let settled = current == replicas;
            *asked =
                Some((replicas, if recently { asked.map_or_else(Instant::now, |(_, at)| at) } else { Instant::now() }));
            if settled || recently {
                return;
            }
        }
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &revision.namespace);
        let (revision, store) = (revision.clone(), self.store.clone());
        tokio::spawn(async move {
            let mut written = writer.written.lock().await;
            let Some((wanted, _)) = *writer.asked.lock().expect("asked lock") else { return };
            let shown = store
                .get(&ObjectRef::new(&revision.name).within(&revision.namespace))
                .and_then(|d| d.spec.as_ref()?.replicas)
                .map(count);
            if shown == Some(wanted) {
                return;
            }
            let params = PatchParams { field_manager: Some(AUTOSCALER_FIELD_MANAGER.into()), ..PatchParams::default() };
            // `spec.replicas` is an int32: a larger answer asks for the most it can hold.
            let patch = Patch::Merge(json!({"spec": {"replicas": i32::try_from(wanted).unwrap_or(i32::MAX)}}));
            match api.patch_scale(&revision.name, &params, &patch).await {
                Ok(_) => {
                    tracing::info!(%revision, from = written.or(shown).unwrap_or(current), to = wanted, "scaled");
                    *written = Some(wanted);
                }
                Err(e) => tracing::warn!(%revision, error = %e, "cannot scale"),
            }
        });
    }

    fn ready_replicas(&self, revision: &RevisionKey) -> u32 {
        self.get(revision).and_then(|d| d.status.as_ref()?.ready_replicas).map_or(0, count)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(manager: &str) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "r", "managedFields": [
                {"manager": "skiff-controller", "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {}}}},
                {"manager": manager, "operation": "Update", "fieldsType": "FieldsV1", "subresource": "scale",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            ]},
            "spec": {"selector": {}, "template": {}},
        }))
        .unwrap()
    }

    #[test]
    fn a_deployment_the_autoscaler_scaled_is_resumed_not_restarted() {
        assert!(scaled_by_autoscaler(&deployment(AUTOSCALER_FIELD_MANAGER)));
        assert!(!scaled_by_autoscaler(&deployment("kubectl")), "someone else's replicas");
        assert!(!scaled_by_autoscaler(&Deployment::default()));
    }

    /// A revision Deployment at `replicas`, read at resourceVersion 7.
    fn at(replicas: i32) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "r", "namespace": "ml", "resourceVersion": "7"},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
        }))
        .unwrap()
    }

    /// `Deployments` over a mocked API server, its store holding `deployment`.
    fn backend(
        deployment: Deployment,
    ) -> (
        Arc<Deployments>,
        tower_test::mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>,
    ) {
        let (service, handle) = tower_test::mock::pair();
        let (store, mut writer) = kube::runtime::reflector::store();
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(deployment));
        (Deployments::new(Client::new(service, "ml"), store), handle)
    }

    #[tokio::test]
    async fn a_revision_at_zero_is_woken_to_one_replica_only_from_the_count_read() {
        use http_body_util::BodyExt;

        let (deployments, mut handle) = backend(at(0));
        deployments.wake(&RevisionKey::new("ml", "r"));
        let (request, respond) = handle.next_request().await.expect("a scale write");
        assert_eq!(request.method(), http::Method::PATCH);
        assert_eq!(request.uri().path(), "/apis/apps/v1/namespaces/ml/deployments/r/scale");
        assert!(request.uri().query().unwrap().contains("fieldManager=skiff-autoscaler"));
        let body = request.into_body().collect().await.unwrap().to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"replicas": 1}}),
            "only from the count read"
        );
        let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "r"}, "spec": {"replicas": 1}});
        respond.send_response(http::Response::new(kube::client::Body::from(scale.to_string().into_bytes())));

        // A revision with replicas (its HPA's, or pods still starting) is never touched.
        let (deployments, mut handle) = backend(at(2));
        deployments.wake(&RevisionKey::new("ml", "r"));
        deployments.wake(&RevisionKey::new("ml", "unknown"));
        drop(deployments);
        assert!(handle.next_request().await.is_none(), "no write");
    }

    #[test]
    fn replica_counts_convert_without_wrapping() {
        assert_eq!((count(3), count(0), count(-1), count(i32::MAX)), (3, 0, 0, 2_147_483_647));
    }
}
