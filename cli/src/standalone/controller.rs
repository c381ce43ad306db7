//! The standalone controller: rereads the manifest folder and converges the data plane to it. Each
//! change of a predictor's spec makes a new revision (replicas, endpoints, activator queue and
//! autoscaler); the rollout decides the traffic split; routes are published to the router; revisions
//! that no longer take traffic are torn down after the new routes are out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use skiff_api::endpoints::{Endpoints, RevisionEndpoints};
use skiff_api::revision::RevisionTemplate;
use skiff_api::scaling::scaling_spec;
use skiff_api::traffic::{Rollout, TrafficTarget};
use skiff_autoscaler::runner::{ReplicaBackend, Runner};
use skiff_router::{Router, ServiceRoute};

use super::backend::{LocalProcesses, ServeSpec};
use super::config::UpConfig;
use super::manifests::{Manifest, read_folder};
use super::signal::Signal;
use super::status::{RevisionStatus, ServiceStatus, Status};
use skiff_activator::{Activator, RevisionConfig};

/// KServe's default request timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The parts of the data plane the controller drives.
pub struct DataPlane {
    /// Ready replicas per revision.
    pub endpoints: Arc<Endpoints>,
    /// Child processes.
    pub backend: Arc<LocalProcesses>,
    /// Deciders.
    pub autoscaler: Arc<Runner<LocalProcesses, Signal>>,
    /// Holds requests for revisions without capacity.
    pub activator: Arc<Activator>,
    /// The ingress.
    pub router: Arc<Router>,
}

struct Service {
    manifest: Manifest,
    rollout: Rollout,
    traffic: Vec<TrafficTarget>,
}

/// Converges the data plane to a folder of manifests.
pub struct Controller {
    dir: PathBuf,
    config: UpConfig,
    plane: DataPlane,
    services: BTreeMap<String, Service>,
    provisioned: BTreeSet<String>,
    errors: Vec<String>,
    routes: Vec<ServiceRoute>,
}

impl Controller {
    /// A controller with nothing provisioned yet.
    pub fn new(dir: PathBuf, config: UpConfig, plane: DataPlane) -> Controller {
        Controller {
            dir,
            config,
            plane,
            services: BTreeMap::new(),
            provisioned: BTreeSet::new(),
            errors: Vec::new(),
            routes: Vec::new(),
        }
    }

    /// One pass: read the folder, roll revisions, split traffic, publish routes, collect.
    pub fn reconcile(&mut self) {
        let folder = match read_folder(&self.dir, &self.config.autoscaler) {
            Ok(folder) => folder,
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot read the manifest folder");
                return;
            }
        };
        if folder.errors != self.errors {
            for error in folder.errors.iter().filter(|e| !self.errors.contains(e)) {
                tracing::warn!("refused {error}");
            }
            self.errors = folder.errors;
        }
        self.services.retain(|name, _| folder.manifests.contains_key(name));
        for (name, manifest) in folder.manifests {
            let service = self.services.entry(name.clone()).or_insert_with(|| Service {
                manifest: manifest.clone(),
                rollout: Rollout::default(),
                traffic: Vec::new(),
            });
            service.manifest = manifest;
            if let Some(revision) = service.rollout.apply(&name, RevisionTemplate::of(&service.manifest.isvc)) {
                tracing::info!(service = %name, %revision, "new revision");
                let initial_scale = provision(&self.plane, &self.config, &revision, &service.manifest);
                if initial_scale == 0 {
                    service.rollout.mark_ready(&revision);
                }
                self.provisioned.insert(revision);
            }
            let ready: Vec<String> = service
                .rollout
                .revisions()
                .iter()
                .filter(|r| !r.ready && self.plane.backend.ready_replicas(&r.name) > 0)
                .map(|r| r.name.clone())
                .collect();
            for revision in ready {
                service.rollout.mark_ready(&revision);
            }
            let canary = service.manifest.isvc.spec.predictor.canary_traffic_percent.map(|p| p as u32);
            service.traffic = service.rollout.traffic(canary);
        }
        self.publish_routes();
        let live: BTreeSet<String> =
            self.services.values().flat_map(|s| s.rollout.revisions().iter().map(|r| r.name.clone())).collect();
        for revision in self.provisioned.difference(&live).cloned().collect::<Vec<_>>() {
            tracing::info!(%revision, "revision has no traffic any more; removing it");
            teardown(&self.plane, &revision);
            self.provisioned.remove(&revision);
        }
    }

    fn publish_routes(&mut self) {
        let routes: Vec<ServiceRoute> = self
            .services
            .values()
            .map(|s| ServiceRoute {
                namespace: s.manifest.isvc.namespace().to_owned(),
                name: s.manifest.isvc.name().to_owned(),
                targets: s.traffic.clone(),
                timeout: Some(timeout_of(&s.manifest)),
            })
            .collect();
        if routes != self.routes {
            self.plane.router.publish(routes.clone());
            self.routes = routes;
        }
    }

    /// A snapshot for `skiff get`.
    pub fn status(&self) -> Status {
        let services = self
            .services
            .values()
            .map(|s| {
                let isvc = &s.manifest.isvc;
                let revisions = s
                    .traffic
                    .iter()
                    .map(|t| {
                        let counts = self.plane.backend.counts(&t.revision_name).unwrap_or_default();
                        RevisionStatus {
                            name: t.revision_name.clone(),
                            percent: t.percent,
                            tag: t.tag.clone(),
                            desired: counts.desired,
                            ready: counts.ready,
                            restarts: counts.restarts,
                            last_start_ms: counts.last_start_ms,
                            last_spawn_ms: counts.last_spawn_ms,
                            replicas: self
                                .plane
                                .endpoints
                                .get(&t.revision_name)
                                .map(|e| e.ready().iter().map(|r| r.addr.to_string()).collect())
                                .unwrap_or_default(),
                            queued: self.plane.activator.stats(&t.revision_name).queued as u64,
                        }
                    })
                    .collect();
                ServiceStatus {
                    name: isvc.name().to_owned(),
                    namespace: isvc.namespace().to_owned(),
                    url: format!("http://{}.{}.{}", isvc.name(), isvc.namespace(), self.config.domain),
                    ready: s.rollout.latest_ready().is_some(),
                    file: s.manifest.path.display().to_string(),
                    latest_created_revision: s.rollout.latest().map(|r| r.name.clone()),
                    latest_ready_revision: s.rollout.latest_ready().map(str::to_owned),
                    latest_rolledout_revision: s.rollout.latest_rolled_out().map(str::to_owned),
                    previous_rolledout_revision: s.rollout.previous_rolled_out().map(str::to_owned),
                    revisions,
                }
            })
            .collect();
        Status { services, errors: self.errors.clone() }
    }

    /// Tears every revision down (on shutdown); replicas drain in the background.
    pub fn shutdown(&mut self) {
        self.services.clear();
        self.publish_routes();
        for revision in std::mem::take(&mut self.provisioned) {
            teardown(&self.plane, &revision);
        }
    }
}

fn timeout_of(manifest: &Manifest) -> Duration {
    manifest.isvc.spec.predictor.timeout.map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs(s.max(1) as u64))
}

/// Creates a revision's endpoints, activator queue, replicas and autoscaler; returns its initial
/// scale. A revision created at zero is reachable through the activator, so (as in Knative) it
/// counts as ready at once; others count as ready once a replica is.
fn provision(plane: &DataPlane, config: &UpConfig, revision: &str, manifest: &Manifest) -> u32 {
    let predictor = &manifest.isvc.spec.predictor;
    let container_concurrency = predictor.container_concurrency.unwrap_or(0).max(0) as u32;
    let spec = ServeSpec {
        model_dir: manifest.model_dir.clone(),
        model_name: manifest.isvc.name().to_owned(),
        container_concurrency,
        batcher: predictor
            .batcher
            .as_ref()
            .map(|b| (b.max_batch_size.unwrap_or(32).max(1) as u32, b.max_latency.unwrap_or(500).max(1) as u32)),
    };
    let endpoints = RevisionEndpoints::new(revision, container_concurrency as usize);
    plane.endpoints.insert(endpoints.clone());
    let queue =
        RevisionConfig { name: revision.to_owned(), timeout: timeout_of(manifest), max_pending: config.max_pending };
    if let Err(e) = plane.activator.upsert_revision(queue) {
        tracing::error!(%revision, error = %e, "activator refused the revision's settings");
    }
    plane.backend.add(revision, spec, endpoints);
    let scaling = scaling_spec(&manifest.isvc, &config.autoscaler).expect("manifests are validated when read");
    let initial_scale = scaling.initial_scale;
    plane.autoscaler.add(revision, scaling);
    initial_scale
}

fn teardown(plane: &DataPlane, revision: &str) {
    plane.autoscaler.remove(revision);
    plane.activator.remove_revision(revision);
    plane.backend.remove(revision);
    plane.endpoints.remove(revision);
}
