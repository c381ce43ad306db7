//! The cluster backend: the Kubernetes API with the app's ServiceAccount (users are authorised
//! before, by access reviews). API refusals (validation naming the field, 403) reach the user as
//! they are.

use std::time::SystemTime;

use async_trait::async_trait;
use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client, Resource};
use serde_json::Value;
use skiff_api::isvc::InferenceServiceResource;
use skiff_api::labels;
use skiff_api::runtime::{ClusterServingRuntime, ServingRuntime};
use skiff_api::traffic::canary_percent;

use crate::backend::{Backend, EventView, LogStream, PodView, RevisionView, RollbackView, ServiceView};
use crate::error::{Error, Result};
use crate::formats::{Offer, runnable_formats};
use crate::manifest::to_yaml;

/// The model container of a predictor pod.
const MODEL_CONTAINER: &str = "kserve-container";
/// Sidecar whose logs are not the model's.
const QUEUE_PROXY: &str = "queue-proxy";
/// The field manager of what the app writes.
const FIELD_MANAGER: &str = "skiff-web";
/// Events shown at most.
const MAX_EVENTS: usize = 200;

/// InferenceServices through the Kubernetes API.
pub struct KubeBackend {
    client: Client,
}

impl KubeBackend {
    /// A backend on `client`.
    pub fn new(client: Client) -> KubeBackend {
        KubeBackend { client }
    }

    fn typed(&self, namespace: &str) -> Api<InferenceServiceResource> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn dynamic(&self, namespace: &str) -> Api<DynamicObject> {
        let resource = ApiResource::erase::<InferenceServiceResource>(&());
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }
}

/// What the pages show of a stored InferenceService.
pub fn view_of(isvc: &InferenceServiceResource) -> ServiceView {
    let meta = isvc.meta();
    let status = isvc.status.clone().unwrap_or_default();
    let predictor = status.components.get("predictor");
    let revisions = predictor
        .map(|p| {
            p.traffic
                .iter()
                .map(|t| {
                    let replicas = p.replicas.get(&t.revision_name);
                    RevisionView {
                        name: t.revision_name.clone(),
                        percent: t.percent,
                        tag: t.tag.clone(),
                        desired: replicas.map(|r| r.desired.max(0) as u32),
                        ready: replicas.map(|r| r.ready.max(0) as u32),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let model = isvc.spec.predictor.model.as_ref();
    // The operator records only a hash of each revision's spec: the app cannot restore one.
    let rollback = predictor.map_or_else(RollbackView::default, |p| RollbackView {
        rolled_out: p.latest_rolledout_revision.is_some() && p.latest_rolledout_revision == p.latest_created_revision,
        previous: p.previous_rolledout_revision.clone(),
        restorable: false,
    });
    ServiceView {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        ready: status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map_or_else(|| "Unknown".to_owned(), |c| c.status.clone()),
        url: status.url.clone(),
        conditions: status.conditions.clone(),
        revisions,
        canary_percent: canary_percent(&isvc.spec.predictor),
        model_format: model.map(|m| m.model_format.name.clone()),
        protocol: model.and_then(|m| m.protocol_version.clone()).unwrap_or_else(|| "v1".into()),
        rollback,
        created: meta.creation_timestamp.as_ref().map(|t| SystemTime::from(t.0)),
    }
}

fn not_found(error: kube::Error, what: String) -> Error {
    match error {
        kube::Error::Api(status) if status.code == 404 => Error::NotFound(what),
        other => other.into(),
    }
}

/// The container whose logs are the model's.
pub fn model_container(pod: &Pod) -> String {
    let names: Vec<&str> =
        pod.spec.as_ref().map(|s| s.containers.iter().map(|c| c.name.as_str()).collect()).unwrap_or_default();
    names
        .iter()
        .find(|n| **n == MODEL_CONTAINER)
        .or_else(|| names.iter().find(|n| **n != QUEUE_PROXY))
        .map_or_else(|| MODEL_CONTAINER.to_owned(), |n| (*n).to_owned())
}

#[async_trait]
impl Backend for KubeBackend {
    async fn namespaces(&self) -> Result<Vec<String>> {
        let list = Api::<Namespace>::all(self.client.clone()).list(&ListParams::default()).await?;
        Ok(list.items.into_iter().filter_map(|n| n.metadata.name).collect())
    }

    async fn list(&self, namespace: &str) -> Result<Vec<ServiceView>> {
        let list = self.typed(namespace).list(&ListParams::default()).await?;
        let mut views: Vec<ServiceView> = list.items.iter().map(view_of).collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(views)
    }

    async fn list_all(&self) -> Result<Vec<ServiceView>> {
        let all = Api::<InferenceServiceResource>::all(self.client.clone());
        Ok(all.list(&ListParams::default()).await?.items.iter().map(view_of).collect())
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<ServiceView> {
        let isvc = self
            .typed(namespace)
            .get(name)
            .await
            .map_err(|e| not_found(e, format!("InferenceService {namespace}/{name}")))?;
        Ok(view_of(&isvc))
    }

    async fn manifest(&self, namespace: &str, name: &str) -> Result<String> {
        let mut object = self
            .dynamic(namespace)
            .get(name)
            .await
            .map_err(|e| not_found(e, format!("InferenceService {namespace}/{name}")))?;
        object.metadata.managed_fields = None;
        let value = serde_json::to_value(&object).map_err(|e| Error::Unavailable(e.to_string()))?;
        Ok(to_yaml(&value))
    }

    async fn create(&self, namespace: &str, manifest: Value) -> Result<ServiceView> {
        let object: DynamicObject =
            serde_json::from_value(manifest).map_err(|e| Error::BadRequest(format!("metadata: {e}")))?;
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
        let created = self.dynamic(namespace).create(&params, &object).await?;
        let isvc: InferenceServiceResource = serde_json::from_value(serde_json::to_value(created).unwrap_or_default())
            .map_err(|e| Error::Unavailable(format!("the API server answered with an odd object: {e}")))?;
        Ok(view_of(&isvc))
    }

    async fn patch(&self, namespace: &str, name: &str, patch: Value) -> Result<()> {
        self.dynamic(namespace)
            .patch(
                name,
                &PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() },
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| not_found(e, format!("InferenceService {namespace}/{name}")))?;
        Ok(())
    }

    async fn rollback(&self, namespace: &str, name: &str) -> Result<()> {
        // `view_of` never marks a revision restorable here, so this is always a refusal saying why.
        let view = self.get(namespace, name).await?;
        Err(crate::rollback::refusal(&view.rollback)
            .unwrap_or_else(|| Error::Unavailable("the cluster cannot restore a revision's spec".into())))
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<()> {
        self.dynamic(namespace)
            .delete(name, &DeleteParams::foreground())
            .await
            .map_err(|e| not_found(e, format!("InferenceService {namespace}/{name}")))?;
        Ok(())
    }

    async fn events(&self, namespace: &str, name: &str) -> Result<Vec<EventView>> {
        let list = Api::<Event>::namespaced(self.client.clone(), namespace).list(&ListParams::default()).await?;
        let owned_prefix = format!("{name}-");
        let mut events: Vec<(Option<SystemTime>, EventView)> = list
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref().is_some_and(|n| n == name || n.starts_with(&owned_prefix)))
            .map(|e| {
                let last = e.last_timestamp.as_ref().or(e.first_timestamp.as_ref()).map(|t| t.0);
                let view = EventView {
                    kind: e.type_.unwrap_or_default(),
                    reason: e.reason.unwrap_or_default(),
                    object: format!(
                        "{}/{}",
                        e.involved_object.kind.unwrap_or_default(),
                        e.involved_object.name.unwrap_or_default()
                    ),
                    message: e.message.unwrap_or_default(),
                    count: e.count.unwrap_or(1).max(0) as u32,
                    last_seen: last.map(|t| t.to_string()),
                };
                (last.map(SystemTime::from), view)
            })
            .collect();
        events.sort_by_key(|e| std::cmp::Reverse(e.0));
        Ok(events.into_iter().take(MAX_EVENTS).map(|(_, e)| e).collect())
    }

    async fn offer(&self, namespace: &str) -> Result<Offer> {
        let all = ListParams::default();
        let namespaced = Api::<ServingRuntime>::namespaced(self.client.clone(), namespace).list(&all).await?;
        let cluster = Api::<ClusterServingRuntime>::all(self.client.clone()).list(&all).await?;
        let runtimes = namespaced.items.iter().map(|r| &r.spec).chain(cluster.items.iter().map(|r| &r.spec.spec));
        Ok(Offer { formats: runnable_formats(runtimes, |_| true), containers: true })
    }

    async fn pods(&self, namespace: &str, name: &str) -> Result<Vec<PodView>> {
        let selector = ListParams::default().labels(&format!("{}={name}", labels::INFERENCE_SERVICE));
        let list = Api::<Pod>::namespaced(self.client.clone(), namespace).list(&selector).await?;
        Ok(list
            .items
            .iter()
            .map(|pod| PodView {
                name: pod.metadata.name.clone().unwrap_or_default(),
                revision: pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(labels::REVISION_NAME))
                    .cloned()
                    .unwrap_or_default(),
                container: model_container(pod),
                phase: pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Unknown".into()),
            })
            .collect())
    }

    async fn logs(&self, namespace: &str, pod: &str, container: &str, tail: u32) -> Result<LogStream> {
        let params = LogParams {
            container: Some(container.to_owned()),
            follow: true,
            tail_lines: Some(i64::from(tail)),
            ..LogParams::default()
        };
        let reader = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .log_stream(pod, &params)
            .await
            .map_err(|e| not_found(e, format!("pod {namespace}/{pod}")))?;
        Ok(reader.lines().map_err(|e| Error::Unavailable(format!("reading the log: {e}"))).boxed())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn stored(latest_created: &str, latest_rolled_out: &str) -> InferenceServiceResource {
        serde_json::from_value(json!({
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "iris", "namespace": "team-a"},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "onnx"}, "storageUri": "s3://m/v2"}}},
            "status": {"components": {"predictor": {
                "latestCreatedRevision": latest_created,
                "latestRolledoutRevision": latest_rolled_out,
                "previousRolledoutRevision": "iris-predictor-00001",
                "traffic": [{"revisionName": latest_rolled_out, "percent": 100, "tag": "latest"}],
            }}},
        }))
        .unwrap()
    }

    #[test]
    fn the_operators_revisions_are_never_restorable_here() {
        let view = view_of(&stored("iris-predictor-00002", "iris-predictor-00002"));
        let expected =
            RollbackView { rolled_out: true, previous: Some("iris-predictor-00001".into()), restorable: false };
        assert_eq!(view.rollback, expected);
        let refusal = crate::rollback::refusal(&view.rollback).unwrap().to_string();
        assert!(refusal.starts_with("to roll back, restore the spec of iris-predictor-00001"), "{refusal}");
        // During a canary the latest revision is not the rolled-out one.
        let canary = view_of(&stored("iris-predictor-00003", "iris-predictor-00002"));
        assert!(!canary.rollback.rolled_out);
    }
}
