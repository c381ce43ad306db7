//! The run loop around [`super::reconcile`]: with leader election, the watches (InferenceServices,
//! their Deployments and Services, the platform ConfigMap, KServe's ServingRuntimes and
//! ClusterServingRuntimes) and kube-runtime's `Controller`, and the autoscaler beside it, while this
//! replica holds the Lease. The reconcile itself stays in `controller.rs`, as in kube-rs'
//! `controller-rs`.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use skiff_api::InferenceServiceResource;
use skiff_api::labels::INFERENCE_SERVICE;
use skiff_api::runtime::{ClusterServingRuntime, ServingRuntime};
use tokio_util::sync::CancellationToken;

use super::{Context, Retiring, error_policy, reconcile};
use crate::admin::AutoscalerGate;
use crate::backoff::Backoff;
use crate::config::Settings;
use crate::error::Result;
use crate::freshness::Replaced;
use crate::leader::Elector;
use crate::metrics::Metrics;
use crate::platform::CONFIG_MAP;

/// Runs the controller, and the autoscaler beside it (its API published through `autoscaler`),
/// until `stop` is cancelled, or until leadership is lost (an error).
pub async fn run(
    client: Client,
    settings: &Settings,
    metrics: Arc<Metrics>,
    autoscaler: AutoscalerGate,
    stop: CancellationToken,
) -> Result<()> {
    let elector = settings.leader_elect.then(|| {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &settings.namespace);
        Elector::new(leases, &settings.namespace, &settings.lease_name, settings.identity(), settings.lease_timing())
    });
    let mut term = None;
    if let Some(elector) = &elector {
        tracing::info!(lease = %settings.lease_name, namespace = %settings.namespace, "waiting for the leader lease");
        term = elector.acquire(&stop).await;
        if term.is_none() {
            return Ok(());
        }
    }
    metrics.leader.set(1);
    let activator = format!("system:serviceaccount:{}:{}", settings.namespace, settings.activator_service_account);
    let scaling = crate::autoscaler::run(client.clone(), &settings.namespace, autoscaler, activator);
    let result = tokio::select! {
        () = reconcile_all(client, settings, metrics.clone(), stop.clone()) => Ok(()),
        () = scaling => Ok(()),
        lost = async {
            match (&elector, term) {
                (Some(e), Some(started)) => e.keep(started).await,
                _ => std::future::pending().await,
            }
        } => Err(lost),
    };
    metrics.leader.set(0);
    if let Some(elector) = &elector
        && result.is_ok()
    {
        elector.release().await;
    }
    result
}

/// The kube-runtime controller proper.
async fn reconcile_all(client: Client, settings: &Settings, metrics: Arc<Metrics>, stop: CancellationToken) {
    // The platform ConfigMap: a store the reconciles read, and a trigger to re-check everything when it changes.
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &settings.namespace);
    let (store, writer) = reflector::store();
    let config_watch = watcher(config_maps, watcher::Config::default().fields(&format!("metadata.name={CONFIG_MAP}")))
        .default_backoff()
        .reflect(writer)
        .touched_objects();
    let (changed, config_changes) = futures::channel::mpsc::channel::<()>(1);
    // A runtime that appears, changes or goes may concern the InferenceServices served by one
    // (one waiting for a runtime among them): the same trigger re-checks everything (an
    // InferenceService on skiff-server reads no runtime and writes nothing unless it must).
    signal_changes(Api::<ServingRuntime>::all(client.clone()), changed.clone());
    signal_changes(Api::<ClusterServingRuntime>::all(client.clone()), changed.clone());
    tokio::spawn(config_watch.for_each(move |_| {
        let _ = changed.clone().try_send(());
        std::future::ready(())
    }));
    if store.wait_until_ready().await.is_err() {
        return;
    }

    let children = watcher::Config::default().labels(INFERENCE_SERVICE);
    let context = Arc::new(Context {
        client: client.clone(),
        config: store,
        metrics,
        replaced: Replaced::default(),
        retiring: Retiring::default(),
        retention: settings.revision_retention(),
        backoff: Backoff::default(),
    });
    tracing::info!(concurrency = settings.concurrency, "controller started");
    Controller::new(Api::<InferenceServiceResource>::all(client.clone()), watcher::Config::default())
        .owns(Api::<Deployment>::all(client.clone()), children.clone())
        .owns(Api::<Service>::all(client), children)
        .reconcile_all_on(config_changes)
        .with_config(controller::Config::default().concurrency(settings.concurrency).debounce(settings.debounce()))
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(reconcile, error_policy, context)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
            std::future::ready(())
        })
        .await;
    tracing::info!("controller stopped");
}

/// Sends on `changed` each time an object of a kind changes. Its errors (the kind not installed, no
/// RBAC for it yet) are logged and retried with the watcher's back-off here, rather than passed to
/// the controller, whose trigger back-off would hold every other trigger too.
fn signal_changes<K>(api: Api<K>, changed: futures::channel::mpsc::Sender<()>)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    tokio::spawn(watcher(api, watcher::Config::default()).default_backoff().touched_objects().for_each(move |event| {
        match event {
            Ok(_) => {
                let _ = changed.clone().try_send(());
            }
            Err(e) => tracing::debug!(%kind, error = %e, "watch failed; retrying"),
        }
        std::future::ready(())
    }));
}
