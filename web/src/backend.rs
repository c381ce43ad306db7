//! What the app shows and changes, behind one trait with two real implementations: the Kubernetes
//! API ([`crate::kube_backend::KubeBackend`]) and `skiff up`'s folder of manifests (in the `skiff`
//! crate). Handlers only see these view types, so both modes render through the same pages.

use std::time::SystemTime;

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::Value;
use skiff_api::status::Condition;

use crate::error::Result;
use crate::formats::{Offer, runnable_formats};

/// One InferenceService as the pages show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceView {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// `True`, `False` or `Unknown`, from the `Ready` condition.
    pub ready: String,
    /// Where it answers.
    pub url: Option<String>,
    /// Conditions with reasons and messages.
    pub conditions: Vec<Condition>,
    /// Revisions with traffic, newest first.
    pub revisions: Vec<RevisionView>,
    /// `spec.predictor.canaryTrafficPercent`.
    pub canary_percent: Option<u32>,
    /// The model format, e.g. `onnx`.
    pub model_format: Option<String>,
    /// `v1` or `v2`.
    pub protocol: String,
    /// What "Roll back" can do.
    pub rollback: RollbackView,
    /// When it was created.
    #[serde(skip)]
    pub created: Option<SystemTime>,
}

/// What "Roll back" can do for a service: during a canary, send all traffic to the rolled-out
/// revision (`canaryTrafficPercent: 0`); after a full rollout, where that changes nothing, restore
/// the previous rolled-out revision's spec ([`Backend::rollback`]) where the backend knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollbackView {
    /// The latest revision is the rolled-out one: no canary is in progress.
    pub rolled_out: bool,
    /// `previousRolledoutRevision`.
    pub previous: Option<String>,
    /// The backend can restore the previous revision's spec (`skiff up` keeps each kept
    /// revision's spec; the operator records only a hash of it).
    pub restorable: bool,
}

/// One revision of a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RevisionView {
    /// `<name>-predictor-NNNNN`.
    pub name: String,
    /// Traffic share in percent.
    pub percent: u32,
    /// `latest` / `prev`.
    pub tag: Option<String>,
    /// Replicas asked for.
    pub desired: Option<u32>,
    /// Replicas ready.
    pub ready: Option<u32>,
}

/// One event about a service or its objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventView {
    /// `Normal` or `Warning`.
    pub kind: String,
    /// Short reason.
    pub reason: String,
    /// The object it is about, `Kind/name`.
    pub object: String,
    /// What happened.
    pub message: String,
    /// How many times.
    pub count: u32,
    /// Last seen, RFC 3339.
    pub last_seen: Option<String>,
}

/// A replica whose model container's logs can be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodView {
    /// Pod (or replica) name.
    pub name: String,
    /// Its revision.
    pub revision: String,
    /// The container holding the model: `kserve-container` or the custom container.
    pub container: String,
    /// Running, Pending, …
    pub phase: String,
}

/// Where the app reads and writes InferenceServices.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Namespaces the app may show.
    async fn namespaces(&self) -> Result<Vec<String>>;
    /// The InferenceServices of `namespace`, by name.
    async fn list(&self, namespace: &str) -> Result<Vec<ServiceView>>;
    /// Every InferenceService in every namespace it lists (the metrics sampler's pass); a
    /// cluster lists them in one call.
    async fn list_all(&self) -> Result<Vec<ServiceView>> {
        let mut all = Vec::new();
        for namespace in self.namespaces().await? {
            all.extend(self.list(&namespace).await?);
        }
        Ok(all)
    }
    /// One InferenceService.
    async fn get(&self, namespace: &str, name: &str) -> Result<ServiceView>;
    /// Its stored manifest, as YAML.
    async fn manifest(&self, namespace: &str, name: &str) -> Result<String>;
    /// Creates `manifest` (its namespace is already forced to `namespace`).
    async fn create(&self, namespace: &str, manifest: Value) -> Result<ServiceView>;
    /// Applies a JSON merge patch (RFC 7386) to the InferenceService.
    async fn patch(&self, namespace: &str, name: &str, patch: Value) -> Result<()>;
    /// After a full rollout, restores the spec of the previous rolled-out revision (editing only
    /// the fields that differ), so that traffic goes back to that kept revision and no revision is
    /// created; refused (4xx naming why) where it cannot be done.
    async fn rollback(&self, namespace: &str, name: &str) -> Result<()>;
    /// Deletes it and everything it owns (foreground cascading on a cluster).
    async fn delete(&self, namespace: &str, name: &str) -> Result<()>;
    /// Events about it and its objects, newest first.
    async fn events(&self, namespace: &str, name: &str) -> Result<Vec<EventView>>;
    /// Its replicas.
    async fn pods(&self, namespace: &str, name: &str) -> Result<Vec<PodView>>;
    /// The last `tail` lines of a replica's model container, then new lines as they come.
    async fn logs(&self, namespace: &str, pod: &str, container: &str, tail: u32) -> Result<LogStream>;
    /// Manifests that were refused and so are not on the list (`skiff up`'s `file: field: message`);
    /// on a cluster the API server refuses them at once, so there are none.
    async fn refused(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    /// Manifests served with fields KServe does not have (`skiff up`'s `file: unknown field
    /// "path"`); on a cluster the API server drops or refuses them at once, so there are none.
    async fn warnings(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    /// What the create form offers in `namespace`: the formats that can run here
    /// ([`runnable_formats`] over the installed runtimes) and whether custom containers may be
    /// created. A backend that knows no runtimes offers ONNX alone.
    async fn offer(&self, _namespace: &str) -> Result<Offer> {
        Ok(Offer { formats: runnable_formats([], |_| true), containers: false })
    }
}

/// Log lines as they come; ends when the replica goes.
pub type LogStream = BoxStream<'static, Result<String>>;

/// `t` as RFC 3339, as event times are shown.
pub fn rfc3339(t: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(t).map(|t| t.to_string()).unwrap_or_default()
}
