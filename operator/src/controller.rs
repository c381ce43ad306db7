//! The I/O shell around [`crate::plan`], after kube-rs' `controller-rs`: [`reconcile`] reads the
//! children of one InferenceService (a consistent list by label, not a cache), plans, and writes
//! by server-side apply under one field manager; a spec that cannot be realised (refused by the
//! plan, or by the API server when its children are applied) is written to the status and fails
//! the reconcile; [`error_policy`] requeues with a per-object back-off ([`crate::backoff`]);
//! [`run`] wires the watches (InferenceServices, their Deployments and Services, the platform
//! ConfigMap, and KServe's ServingRuntimes and ClusterServingRuntimes, whose changes, as the
//! ConfigMap's, re-check every InferenceService) and, with leader election, reconciles only while this
//! replica holds the Lease. An InferenceService served by a runtime has the ServingRuntimes of its
//! namespace and the ClusterServingRuntimes listed at each reconcile (none where the CRDs are not
//! installed); the others never read them. An InferenceService whose revisions have the `hpa` or
//! `keda` autoscaler class has their HPAs or KEDA ScaledObjects listed, applied after the
//! Deployments they are owned by, and deleted with them ([`crate::scalers`]).

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use skiff_api::isvc::{API_VERSION, KIND};
use skiff_api::labels::{ACTIVE, FIELD_MANAGER, INFERENCE_SERVICE, RESERVE, ROUTING_FIELD_MANAGER, ROUTING_STATE};
use skiff_api::runtime::{ClusterServingRuntime, ServingRuntime};
use skiff_api::status::READY;
use skiff_api::{InferenceServiceResource, InferenceServiceStatus};

use crate::backoff::Backoff;
use crate::credentials;
use crate::error::{Error, Result};
use crate::freshness::Replaced;
use crate::metrics::Metrics;
use crate::plan::{Inputs, Plan, Runtimes, needs_runtime, plan, refused, refused_because};
use crate::platform::Platform;
use crate::scalers::{self, SCALED_OBJECT_CRD, ScalerPlan};

/// Periodic re-check of an InferenceService that nothing changed (writes nothing when all is right).
const RESYNC: Duration = Duration::from_secs(300);

/// How soon an InferenceService that is not Ready is reconciled again.
const NOT_READY_RECHECK: Duration = Duration::from_secs(5);
/// When to look again after a write conflict.
const CONFLICT_RETRY: Duration = Duration::from_millis(500);

/// What every reconcile shares.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The `inferenceservice-config` ConfigMap (zero or one object).
    pub config: Store<ConfigMap>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Versions our status writes replaced, to skip reconciling stale cached copies.
    pub replaced: Replaced,
    /// Revisions that lost their traffic, kept for the retention period.
    pub retiring: Retiring,
    /// How long a revision without traffic is kept before it is collected.
    pub retention: Duration,
    /// Failures in a row per InferenceService, for the retry back-off.
    pub backoff: Backoff,
}

/// Revisions that lost their traffic and since when. One is collected only after the retention
/// period, so that every router and activator has seen the new routes before its pods go (a
/// request routed by a router that has not yet seen them still finds the revision). Kept in memory:
/// a restarted controller only waits one period more.
#[derive(Debug, Default)]
pub struct Retiring(std::sync::Mutex<std::collections::HashMap<(String, String), std::time::Instant>>);

impl Retiring {
    /// Of `candidates` (revisions of the InferenceService `uid` without traffic), those retired for
    /// `retention` already, and how long until the next one is; forgets revisions that are no
    /// longer candidates (they took traffic again).
    pub fn due(&self, uid: &str, candidates: &[String], retention: Duration) -> (Vec<String>, Option<Duration>) {
        let now = std::time::Instant::now();
        let mut since = self.0.lock().expect("retiring lock");
        since.retain(|(owner, revision), _| owner != uid || candidates.contains(revision));
        let mut due = Vec::new();
        let mut next: Option<Duration> = None;
        for revision in candidates {
            let at = *since.entry((uid.to_owned(), revision.clone())).or_insert(now);
            match retention.checked_sub(now.duration_since(at)) {
                Some(left) if !left.is_zero() => next = Some(next.map_or(left, |n| n.min(left))),
                _ => due.push(revision.clone()),
            }
        }
        since.retain(|(owner, revision), _| owner != uid || !due.contains(revision));
        (due, next)
    }
}

impl Context {
    fn platform(&self) -> Result<Platform> {
        let config = self.config.state();
        Platform::from_data(config.first().and_then(|c| c.data.as_ref()))
    }
}

/// Converges one InferenceService: revisions, their Deployments and Services, traffic and status.
pub async fn reconcile(isvc: Arc<InferenceServiceResource>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile();
    let (uid, version) = (isvc.uid().unwrap_or_default(), isvc.resource_version().unwrap_or_default());
    if isvc.meta().deletion_timestamp.is_some() {
        // Children go with the owner references.
        ctx.replaced.forget(&uid);
        ctx.backoff.succeed(&uid);
        return Ok(Action::await_change());
    }
    if ctx.replaced.is_stale(&uid, &version) {
        // Older than our own last status write, whose watch event triggers the next reconcile.
        ctx.metrics.stale_skips.inc();
        return Ok(Action::requeue(RESYNC));
    }
    let (name, namespace) = (isvc.name_any(), isvc.namespace().unwrap_or_default());
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
    let children = ListParams::default().labels(&format!("{INFERENCE_SERVICE}={name}"));
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let (observed_deployments, observed_services, observed_pods) =
        futures::try_join!(deployments.list(&children), services.list(&children), pods.list(&children))?;
    let (namespaced_runtimes, cluster_runtimes) = if needs_runtime(&isvc) {
        let namespaced: Api<ServingRuntime> = Api::namespaced(ctx.client.clone(), &namespace);
        let cluster: Api<ClusterServingRuntime> = Api::all(ctx.client.clone());
        futures::try_join!(list_or_none(&namespaced), list_or_none(&cluster))?
    } else {
        (Vec::new(), Vec::new())
    };
    // The autoscaler objects of the hpa and keda classes, read only where a revision has one of them.
    let needs = scalers::needs(&isvc.to_manifest(), &observed_deployments.items);
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), &namespace);
    let scaled: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &scalers::scaled_object_resource());
    let (observed_hpas, observed_scaled) =
        futures::try_join!(list_if(needs.hpa, &hpas, &children), list_scaled(needs.keda, &scaled, &children))?;
    let platform = ctx.platform()?;
    let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let inputs = Inputs {
        isvc: &isvc,
        deployments: &observed_deployments.items,
        services: &observed_services.items,
        pods: &observed_pods.items,
        platform: &platform,
        runtimes: Runtimes { namespaced: &namespaced_runtimes, cluster: &cluster_runtimes },
        now: &now,
    };
    let mut plan = plan(inputs);
    if needs.keda_wanted && observed_scaled.is_none() && plan.refused.is_none() {
        plan = refused_because(inputs, KEDA_NOT_INSTALLED, keda_missing());
    }
    with_credentials(&ctx.client, &namespace, &mut plan.deployments).await?;

    // New children first (with the autoscaler objects of their revisions), then the status that
    // routes to them, and only then (after the retention period) the revisions that lost their
    // traffic. Children the API server refuses make the spec unrealisable, as the plan's own
    // refusals do.
    match apply_children(&plan, &deployments, &services, &ctx.metrics).await {
        Err(Error::Kube(kube::Error::Api(e))) if invalid_child(e.code) => {
            plan = refused(inputs, format!("the API server refused a child of this InferenceService: {}", e.message));
        }
        Ok(applied) if plan.refused.is_none() && (needs.hpa || needs.keda) => {
            let revisions = owned_revisions(&observed_deployments.items, applied, &uid);
            let keda = observed_scaled.is_some();
            let writes = scalers::plan(&revisions, &observed_hpas, observed_scaled.as_deref().unwrap_or(&[]), keda);
            apply_scalers(&writes, &hpas, &scaled, &ctx.metrics).await?;
        }
        other => {
            other?;
        }
    }
    // A kept revision routed to again is marked active (the autoscaler takes it up) before the
    // status routes to it.
    futures::future::try_join_all(plan.activate.iter().map(|r| route(&deployments, r, ACTIVE))).await?;
    if let Some(status) = &plan.status
        && !write_status(&ctx, &isvc, status).await?
    {
        return Ok(Action::requeue(CONFLICT_RETRY));
    }
    if let Some(why) = plan.refused {
        return Err(Error::Spec(why));
    }
    ctx.backoff.succeed(&uid);
    // Revisions without traffic, after the retention period: kept ones scaled to zero, others collected.
    let retiring: Vec<String> = plan.delete.iter().chain(&plan.reserve).cloned().collect();
    let (retired, next) = ctx.retiring.due(&uid, &retiring, ctx.retention);
    let (reserve, due): (Vec<String>, Vec<String>) = retired.into_iter().partition(|r| plan.reserve.contains(r));
    futures::future::try_join_all(reserve.iter().map(|r| route(&deployments, r, RESERVE))).await?;
    let collections = due.iter().map(|revision| collect(&deployments, &services, revision, &ctx.metrics));
    futures::future::try_join_all(collections).await?;
    // A collected revision's HPA or ScaledObject goes with it at once (its owner reference would
    // have the garbage collector remove it a moment later).
    let scaler_deletes = due.iter().flat_map(|revision| {
        let hpa = needs.hpa.then(|| delete_ignoring_absent(&hpas, revision).boxed());
        let keda = (needs.keda && observed_scaled.is_some()).then(|| delete_ignoring_absent(&scaled, revision).boxed());
        hpa.into_iter().chain(keda)
    });
    futures::future::try_join_all(scaler_deletes).await?;
    // Pods are not watched: one that is not Ready is looked at again soon, so that a model that
    // does not load is reported (ModelLoadFailed) without waiting for the resync.
    let written = plan.status.as_ref().or(isvc.status.as_ref());
    let ready = written.and_then(|s| s.condition(READY)).is_some_and(|c| c.is_true());
    let resync = if ready { RESYNC } else { NOT_READY_RECHECK };
    Ok(Action::requeue(next.map_or(resync, |n| n.min(resync))))
}

/// Gives the storage initializer of each Deployment to apply the store credentials of its pod's
/// ServiceAccount ([`credentials`]). Read only for a Deployment that downloads its model and names
/// a ServiceAccount; one that does not exist, or a secret it lists that does not, gives nothing
/// (KServe skips them too; the pod itself then waits for its ServiceAccount).
async fn with_credentials(client: &Client, namespace: &str, deployments: &mut [Deployment]) -> Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for deployment in deployments {
        let Some(pod) = deployment.spec.as_mut().and_then(|s| s.template.spec.as_mut()) else { continue };
        let downloads = pod.init_containers.iter().flatten().any(|c| c.name == crate::desired::STORAGE_INITIALIZER);
        let Some(account) = pod.service_account_name.clone().filter(|_| downloads) else { continue };
        let Some(account) = accounts.get_opt(&account).await? else { continue };
        let mut listed = Vec::new();
        for name in credentials::secret_names(&account) {
            listed.extend(secrets.get_opt(&name).await?);
        }
        credentials::from_secrets(&listed).apply(pod);
    }
    Ok(())
}

/// The reason of the conditions of a `keda` InferenceService on a cluster without KEDA.
pub const KEDA_NOT_INSTALLED: &str = "KedaNotInstalled";

/// The message of those conditions, naming the missing CRD.
fn keda_missing() -> String {
    format!(
        "metadata.annotations[{}]: keda needs KEDA's ScaledObject CRD ({SCALED_OBJECT_CRD}, keda.sh/v1alpha1), which \
         this cluster does not have: install KEDA, or choose another autoscaler class",
        skiff_api::autoscaling::AUTOSCALER_CLASS
    )
}

/// The objects of a kind labelled as `params` selects, when `wanted` (none otherwise).
async fn list_if<K>(wanted: bool, api: &Api<K>, params: &ListParams) -> Result<Vec<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if !wanted {
        return Ok(Vec::new());
    }
    Ok(api.list(params).await?.items)
}

/// The ScaledObjects `params` selects when `wanted` (none otherwise); `None` when the cluster has
/// no ScaledObject CRD (404: KEDA is not installed).
async fn list_scaled(
    wanted: bool,
    api: &Api<DynamicObject>,
    params: &ListParams,
) -> Result<Option<Vec<DynamicObject>>> {
    if !wanted {
        return Ok(Some(Vec::new()));
    }
    match api.list(params).await {
        Ok(list) => Ok(Some(list.items)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The revision Deployments of the InferenceService `uid` as they stand after `applied` (which
/// carry the uids of new ones, for their autoscaler objects' owner references).
fn owned_revisions(observed: &[Deployment], applied: Vec<Deployment>, uid: &str) -> Vec<Deployment> {
    let names: Vec<String> = applied.iter().map(ResourceExt::name_any).collect();
    observed
        .iter()
        .filter(|d| !names.contains(&d.name_any()))
        .cloned()
        .chain(applied)
        .filter(|d| d.owner_references().iter().any(|o| o.uid == uid))
        .collect()
}

/// Applies and deletes the revisions' HPAs and ScaledObjects, all at once.
async fn apply_scalers(
    plan: &ScalerPlan,
    hpas: &Api<HorizontalPodAutoscaler>,
    scaled: &Api<DynamicObject>,
    metrics: &Metrics,
) -> Result<()> {
    let apply = &PatchParams::apply(FIELD_MANAGER).force();
    let applies = futures::future::try_join_all(plan.hpas.iter().map(|h| apply_child(hpas, h, apply, metrics)));
    let scaled_applies = futures::future::try_join_all(plan.scaled_objects.iter().map(|object| async move {
        scaled.patch(&object.name_any(), apply, &Patch::Apply(object)).await?;
        metrics.applied("ScaledObject");
        Ok::<_, Error>(())
    }));
    let deletes = futures::future::try_join_all(
        plan.delete_hpas
            .iter()
            .map(|name| delete_ignoring_absent(hpas, name).boxed())
            .chain(plan.delete_scaled_objects.iter().map(|name| delete_ignoring_absent(scaled, name).boxed())),
    );
    futures::try_join!(applies, scaled_applies, deletes)?;
    Ok(())
}

/// Every object of a kind, none when the kind is not installed (404: the runtime CRDs are not).
async fn list_or_none<K>(api: &Api<K>) -> Result<Vec<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Writes the status by server-side apply on the status subresource, on the condition that the
/// InferenceService is still the version read; false when it is not (a fresher copy is on its way).
async fn write_status(ctx: &Context, isvc: &InferenceServiceResource, status: &InferenceServiceStatus) -> Result<bool> {
    let (name, namespace) = (isvc.name_any(), isvc.namespace().unwrap_or_default());
    let isvcs: Api<InferenceServiceResource> = Api::namespaced(ctx.client.clone(), &namespace);
    let body = json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": { "name": name, "resourceVersion": isvc.resource_version() },
        "status": status,
    });
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    match isvcs.patch_status(&name, &apply, &Patch::Apply(body)).await {
        Ok(_) => {
            ctx.metrics.status_writes.inc();
            ctx.replaced.record(&isvc.uid().unwrap_or_default(), &isvc.resource_version().unwrap_or_default());
            Ok(true)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {
            ctx.metrics.status_conflicts.inc();
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// Applies the children the plan names, all at once: they do not depend on each other. Returns
/// the Deployments as the API server stored them.
async fn apply_children(
    plan: &Plan,
    deployments: &Api<Deployment>,
    services: &Api<Service>,
    metrics: &Metrics,
) -> Result<Vec<Deployment>> {
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    let deployment_writes =
        futures::future::try_join_all(plan.deployments.iter().map(|d| apply_child(deployments, d, &apply, metrics)));
    let service_writes =
        futures::future::try_join_all(plan.services.iter().map(|s| apply_child(services, s, &apply, metrics)));
    let (applied, _) = futures::try_join!(deployment_writes, service_writes)?;
    Ok(applied)
}

async fn apply_child<K>(api: &Api<K>, child: &K, apply: &PatchParams, metrics: &Metrics) -> Result<K>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let stored = api.patch(&child.name_any(), apply, &Patch::Apply(child)).await?;
    metrics.applied(&K::kind(&()));
    tracing::debug!(kind = %K::kind(&()), name = %child.name_any(), "applied");
    Ok(stored)
}

/// Marks a revision's Deployment [`ACTIVE`] or [`RESERVE`] ([`ROUTING_STATE`]); `reserve` also
/// scales it to zero. A server-side apply of these fields only, under a field manager of their own,
/// so that the controller's applies of the whole Deployment and the autoscaler's scale writes keep
/// theirs. Marked active again, it gives `spec.replicas` up (the Deployment's default, one) and
/// the autoscaler takes it from there.
async fn route(deployments: &Api<Deployment>, revision: &str, state: &str) -> Result<()> {
    let mut body = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": revision, "labels": {ROUTING_STATE: state}},
    });
    if state == RESERVE {
        body["spec"] = json!({"replicas": 0});
    }
    let apply = PatchParams::apply(ROUTING_FIELD_MANAGER).force();
    deployments.patch(revision, &apply, &Patch::Apply(&body)).await?;
    tracing::info!(%revision, state, "revision routing state");
    Ok(())
}

/// Deletes a revision that no longer takes traffic.
async fn collect(
    deployments: &Api<Deployment>,
    services: &Api<Service>,
    revision: &str,
    metrics: &Metrics,
) -> Result<()> {
    futures::try_join!(delete_ignoring_absent(deployments, revision), delete_ignoring_absent(services, revision))?;
    metrics.deletes.inc();
    tracing::info!(%revision, "collected revision");
    Ok(())
}

async fn delete_ignoring_absent<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether an API status code from applying a child means that the child itself is invalid (422:
/// the spec cannot be realised as written), not that the API server is unwell.
fn invalid_child(code: u16) -> bool {
    code == 422
}

/// Requeues a failed reconcile: soon after a write conflict (a fresher copy is on its way), else
/// after the InferenceService's back-off, which grows with each failure in a row (a change of the
/// object or of the platform ConfigMap reconciles it at once anyway).
pub fn error_policy(isvc: Arc<InferenceServiceResource>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failure(error);
    if error.kind() == "conflict" {
        tracing::debug!(isvc = %isvc.name_any(), %error, "conflict; retrying");
        return Action::requeue(CONFLICT_RETRY);
    }
    let retry = ctx.backoff.fail(&isvc.uid().unwrap_or_default(), std::time::Instant::now());
    let (namespace, name) = (isvc.namespace().unwrap_or_default(), isvc.name_any());
    match error {
        Error::Spec(_) => tracing::info!(%namespace, isvc = %name, %error, ?retry, "spec cannot be realised"),
        _ => tracing::warn!(%namespace, isvc = %name, %error, ?retry, "reconcile failed"),
    }
    Action::requeue(retry)
}

mod run;
pub use run::run;

#[cfg(test)]
mod class_tests;

#[cfg(test)]
mod tests;
