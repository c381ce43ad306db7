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

/// How long a write of the same count is not repeated while the watch has not shown it yet.
const REWRITE_AFTER: Duration = Duration::from_secs(2);

/// Deployments as the autoscaler's replica backend.
pub struct Deployments {
    client: Client,
    store: Store<Deployment>,
    asked: Mutex<HashMap<RevisionKey, (u32, Instant)>>,
}

impl Deployments {
    /// Scales through `client`; reads the Deployments `store` holds.
    pub fn new(client: Client, store: Store<Deployment>) -> Arc<Deployments> {
        Arc::new(Deployments { client, store, asked: Mutex::new(HashMap::new()) })
    }

    fn get(&self, revision: &RevisionKey) -> Option<Arc<Deployment>> {
        self.store.get(&ObjectRef::new(&revision.name).within(&revision.namespace))
    }
}

/// Whether the autoscaler has written `spec.replicas` of `deployment` (it took it over once).
pub fn scaled_by_autoscaler(deployment: &Deployment) -> bool {
    deployment.managed_fields().iter().any(|entry| {
        entry.manager.as_deref() == Some(AUTOSCALER_FIELD_MANAGER)
            && entry.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").and_then(|s| s.get("f:replicas")).is_some())
    })
}

impl ReplicaBackend for Deployments {
    fn scale(&self, revision: &RevisionKey, replicas: u32) {
        let Some(deployment) = self.get(revision) else { return };
        let current = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        if i64::from(current) == i64::from(replicas) {
            return;
        }
        {
            let mut asked = self.asked.lock().expect("scale lock");
            if asked.get(revision).is_some_and(|(n, at)| *n == replicas && at.elapsed() < REWRITE_AFTER) {
                return;
            }
            asked.insert(revision.clone(), (replicas, Instant::now()));
        }
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &revision.namespace);
        let revision = revision.clone();
        tokio::spawn(async move {
            let params = PatchParams { field_manager: Some(AUTOSCALER_FIELD_MANAGER.into()), ..PatchParams::default() };
            let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
            match api.patch_scale(&revision.name, &params, &patch).await {
                Ok(_) => tracing::info!(%revision, from = current, to = replicas, "scaled"),
                Err(e) => tracing::warn!(%revision, error = %e, "cannot scale"),
            }
        });
    }

    fn ready_replicas(&self, revision: &RevisionKey) -> u32 {
        self.get(revision).and_then(|d| d.status.as_ref()?.ready_replicas).map_or(0, |n| n.max(0) as u32)
    }
}
