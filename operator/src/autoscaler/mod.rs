//! The autoscaler on Kubernetes. It runs in the controller's leader: the controller already elects
//! one leader with a Lease, so one process holds every revision's decider (Knative's autoscaler
//! with a single bucket), and the activator finds it through that Lease. See
//! `docs/architecture.md` for how it would shard on a large cluster.
//!
//! Per revision Deployment (label `skiff.dev/revision`), of any component (predictor, transformer,
//! explainer: each scales on its own, to zero too), one KPA decider runs in the data plane's
//! [`Runner`], with the settings recorded on the Deployment (`skiff.dev/scaling`) resolved against
//! the live `autoscaler` key of `inferenceservice-config` (a change applies without a restart).
//! Inputs: the pods' in-flight gauge or request counters ([`pods`]), and the activator's held
//! requests ([`api`]). Output: `deployments/scale` ([`deployments`]). A restarted autoscaler
//! resumes a running revision from its ready replicas instead of its initial scale. A revision
//! whose autoscaler class is not the KPA (`hpa`, `keda`, `external`, `none`) gets no decider: its
//! replicas are left alone, except that a request held at zero wakes it to one ([`wake`]). A
//! revision kept without traffic (`skiff.dev/routing-state: reserve`) gets no decider and stays at zero.

pub mod api;
pub mod decisions;
pub mod deployments;
pub mod pods;
pub mod wake;

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use skiff_api::labels::REVISION;
use skiff_api::revision::Component;
use skiff_api::scaling::ScalingInputs;
use skiff_api::settings::component_of;
use skiff_autoscaler::AutoscalerConfig;
use skiff_dataplane::discovery::sync_revisions;
use skiff_dataplane::endpoints::Endpoints;
use skiff_dataplane::{Plane, RevisionKey, Runner};

use crate::platform::{CONFIG_MAP, Platform};
use api::AutoscalerApi;
use deployments::{Deployments, scaled_by_autoscaler};
use pods::PodMetrics;
use wake::Wakes;

/// The autoscaler's runner on Kubernetes.
pub type Scaler = Runner<Deployments, PodMetrics>;

/// How often the `config-autoscaler` settings are compared with the ones in use.
const CONFIG_CHECK: Duration = Duration::from_secs(1);

/// Runs the autoscaler until dropped; `gate` gets its API for the admin listener once it runs.
/// `namespace` holds `inferenceservice-config`; `activator_user` may call the API.
pub async fn run(client: Client, namespace: &str, gate: Arc<OnceLock<Arc<AutoscalerApi>>>, activator_user: String) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let (config, writer) = reflector::store();
    let config_watch = watcher(config_maps, watcher::Config::default().fields(&format!("metadata.name={CONFIG_MAP}")))
        .default_backoff()
        .reflect(writer)
        .for_each(|_| std::future::ready(()));
    tokio::spawn(config_watch);
    if config.wait_until_ready().await.is_err() {
        return;
    }
    let mut settings = autoscaler_config(&config);

    let endpoints = Arc::new(Endpoints::default());
    tokio::spawn(sync_revisions(
        Api::<EndpointSlice>::all(client.clone()),
        Arc::new(Plane::new(endpoints.clone())),
        None,
        || {},
    ));
    let (deployments, writer) = reflector::store();
    let backend = Deployments::new(client.clone(), deployments.clone());
    let runner = Runner::new(backend.clone(), Arc::new(PodMetrics::new(endpoints)), settings.tick_interval);
    let wakes = Arc::new(Wakes::new(backend));
    let api = AutoscalerApi::new(runner.clone(), wakes.clone(), Api::all(client.clone()), activator_user);
    let _ = gate.set(Arc::new(api));
    let ticking = tokio::spawn(runner.clone().run());
    tracing::info!("autoscaler started");

    let stream = watcher(Api::<Deployment>::all(client), watcher::Config::default().labels(REVISION))
        .default_backoff()
        .reflect(writer);
    let mut stream = std::pin::pin!(stream);
    let mut check = tokio::time::interval(CONFIG_CHECK);
    loop {
        tokio::select! {
            event = stream.next() => match event {
                Some(Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d))) => track(&runner, &wakes, &d, &settings),
                Some(Ok(watcher::Event::Delete(d))) => {
                    if let Some(key) = key_of(&d) {
                        runner.remove(&key);
                        wakes.set(&key, false);
                    }
                }
                Some(Ok(watcher::Event::InitDone)) => forget_gone(&runner, &wakes, &deployments),
                Some(Ok(watcher::Event::Init)) => {}
                Some(Err(e)) => tracing::warn!(error = %e, "Deployment watch failed; retrying"),
                None => break,
            },
            _ = check.tick() => {
                let now = autoscaler_config(&config);
                if now != settings {
                    tracing::info!("config-autoscaler changed; applying it to every revision");
                    settings = now;
                    for d in deployments.state() {
                        track(&runner, &wakes, &d, &settings);
                    }
                }
            }
        }
    }
    ticking.abort();
}

/// The `autoscaler` settings of `inferenceservice-config` (the defaults when it is absent or
/// invalid; the operator reports an invalid ConfigMap).
fn autoscaler_config(store: &Store<ConfigMap>) -> AutoscalerConfig {
    let state = store.state();
    match Platform::from_data(state.first().and_then(|c| c.data.as_ref())) {
        Ok(platform) => platform.autoscaler,
        Err(e) => {
            tracing::warn!(error = %e, "using the default autoscaler settings");
            AutoscalerConfig::default()
        }
    }
}

fn key_of(deployment: &Deployment) -> Option<RevisionKey> {
    Some(RevisionKey::new(deployment.namespace()?, deployment.name_any()))
}

/// Starts (or updates) the decider of a revision Deployment; for one of another autoscaler's
/// class, stops any decider and leaves its replicas alone (it is only woken from zero).
fn track(runner: &Scaler, wakes: &Wakes, deployment: &Deployment, config: &AutoscalerConfig) {
    let Some(key) = key_of(deployment) else { return };
    // Kept without traffic for a rollback: it stays at zero (no minimum scale applies to it).
    if crate::revisions::reserved(deployment) {
        wakes.set(&key, false);
        if runner.contains(&key) {
            runner.remove(&key);
        }
        tracing::debug!(revision = %key, "kept without traffic; left at zero");
        return;
    }
    let inputs = ScalingInputs::from_annotations(deployment.annotations());
    let class = inputs.class();
    wakes.set(&key, !class.scaled_by_skiff());
    if !class.scaled_by_skiff() {
        if runner.contains(&key) {
            runner.remove(&key);
        }
        tracing::debug!(revision = %key, class = class.name(), "left to its own autoscaler");
        return;
    }
    // Errors name the field of the revision's component (`spec.transformer.minReplicas`).
    let component = component_of(deployment.labels());
    let spec = match inputs.resolve_for(config, component.unwrap_or(Component::Predictor)) {
        Ok(spec) => spec,
        Err(e) => {
            tracing::warn!(revision = %key, error = %e, "cannot autoscale the revision");
            return;
        }
    };
    let ready = deployment.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
    if runner.contains(&key) {
        runner.update(&key, spec);
    } else if scaled_by_autoscaler(deployment) || ready > 0 {
        tracing::info!(revision = %key, ready, "resuming a running revision");
        runner.resume(&key, spec);
    } else {
        tracing::info!(revision = %key, "autoscaling a new revision");
        runner.add(&key, spec);
    }
}

/// After a (re)list: stops the deciders of revisions whose Deployment is gone.
fn forget_gone(runner: &Scaler, wakes: &Wakes, deployments: &Store<Deployment>) {
    let live: BTreeSet<RevisionKey> = deployments.state().iter().filter_map(|d| key_of(d)).collect();
    wakes.retain(|key| live.contains(key));
    for key in runner.revisions() {
        if !live.contains(&key) {
            runner.remove(&key);
        }
    }
}
