//! The standalone controller: rereads the manifest folder and converges the data plane to it. Each
//! change of a predictor's spec makes a new revision (replicas, endpoints, activator queue and
//! autoscaler); the rollout decides the traffic split; routes are published to the router; revisions
//! that no longer take traffic are torn down after the new routes are out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use skiff_activator::Activator;
use skiff_api::revision::{Component, RevisionTemplate};
use skiff_api::scaling::scaling_spec;
use skiff_api::serving::{request_timeout, revision_ready, server_args};
use skiff_api::traffic::{Rollout, TrafficTarget};
use skiff_dataplane::{Plane, ReplicaBackend, RevisionKey, RevisionSpec};
use skiff_router::{Router, ServiceRoute};

use super::backend::LocalProcesses;
use super::config::UpConfig;
use super::container::knative_env;
use super::manifests::{Manifest, Predictor, read_folder};
use super::replica::{ContainerReplica, ReplicaSpec};
use super::status::{RevisionStatus, ServiceStatus, Status};

/// The parts of the data plane the controller drives.
pub struct DataPlane {
    /// The endpoint registry, the activator's queues and the autoscaler, set up per revision.
    pub plane: Plane,
    /// Child processes.
    pub backend: Arc<LocalProcesses>,
    /// Holds requests for revisions without capacity (read for `skiff get`).
    pub activator: Arc<Activator>,
    /// The ingress.
    pub router: Arc<Router>,
}

struct Service {
    manifest: Manifest,
    rollout: Rollout,
    traffic: Vec<TrafficTarget>,
    /// Every revision number is taken: changes are refused (and said once).
    exhausted: bool,
}

/// Converges the data plane to a folder of manifests.
pub struct Controller {
    dir: PathBuf,
    config: UpConfig,
    plane: DataPlane,
    services: BTreeMap<String, Service>,
    provisioned: BTreeSet<RevisionKey>,
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
        let folder = match read_folder(&self.dir, &self.config) {
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
        self.services.retain(|key, _| folder.manifests.contains_key(key));
        for (key, manifest) in folder.manifests {
            let service = self.services.entry(key).or_insert_with(|| Service {
                manifest: manifest.clone(),
                rollout: Rollout::default(),
                traffic: Vec::new(),
                exhausted: false,
            });
            service.manifest = manifest;
            let (name, namespace) =
                (service.manifest.isvc.name().to_owned(), service.manifest.isvc.namespace().to_owned());
            let applied =
                service.rollout.apply(&name, Component::Predictor, RevisionTemplate::of(&service.manifest.isvc));
            let new_revision = match applied {
                Ok(revision) => {
                    service.exhausted = false;
                    revision
                }
                Err(e) => {
                    // The current revisions keep serving; say so once, not at every pass.
                    if !std::mem::replace(&mut service.exhausted, true) {
                        tracing::warn!(%namespace, error = %e, "no new revision");
                    }
                    None
                }
            };
            if let Some(revision) = new_revision {
                tracing::info!(%namespace, service = %name, %revision, "new revision");
                let key = RevisionKey::new(namespace.as_str(), revision.as_str());
                let initial_pods = provision(&self.plane, &self.config, &key, &service.manifest);
                if revision_ready(false, initial_pods) {
                    service.rollout.mark_ready(&revision);
                }
                self.provisioned.insert(key);
            }
            let ready: Vec<String> = service
                .rollout
                .revisions()
                .iter()
                .filter(|r| {
                    !r.ready
                        && self.plane.backend.ready_replicas(&RevisionKey::new(namespace.as_str(), r.name.as_str())) > 0
                })
                .map(|r| r.name.clone())
                .collect();
            for revision in ready {
                service.rollout.mark_ready(&revision);
            }
            // Validation keeps it within 0..=100 (`read_folder`); the clamp makes the conversion total.
            let canary = service.manifest.isvc.spec.predictor.canary_traffic_percent.map(percent);
            service.traffic = service.rollout.traffic(canary);
        }
        self.publish_routes();
        let live: BTreeSet<RevisionKey> = self
            .services
            .values()
            .flat_map(|s| {
                s.rollout.revisions().iter().map(|r| RevisionKey::new(s.manifest.isvc.namespace(), r.name.as_str()))
            })
            .collect();
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
                ..ServiceRoute::default()
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
                        let key = RevisionKey::new(isvc.namespace(), t.revision_name.as_str());
                        let counts = self.plane.backend.counts(&key).unwrap_or_default();
                        let cold_starts = self.plane.activator.cold_starts(&key);
                        let millis = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
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
                                .plane
                                .endpoints()
                                .get(&key)
                                .map(|e| e.ready().iter().map(|r| r.addr.to_string()).collect())
                                .unwrap_or_default(),
                            queued: u64::try_from(self.plane.activator.stats(&key).queued).unwrap_or(u64::MAX),
                            cold_start_last_ms: cold_starts.map(|c| millis(c.last)),
                            cold_start_p50_ms: cold_starts.map(|c| millis(c.p50)),
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

/// `canaryTrafficPercent` as the rollout takes it.
fn percent(p: i64) -> u32 {
    u32::try_from(p.clamp(0, 100)).unwrap_or(100)
}

fn timeout_of(manifest: &Manifest) -> Duration {
    request_timeout(&manifest.isvc.spec.predictor)
}

/// Sets a revision up: its replicas' supervisor, then (through the shared [`Plane`]) its
/// endpoints, activator queue and decider; returns the pods it starts with.
fn provision(plane: &DataPlane, config: &UpConfig, key: &RevisionKey, manifest: &Manifest) -> u32 {
    let predictor = &manifest.isvc.spec.predictor;
    let spec = RevisionSpec {
        key: key.clone(),
        container_concurrency: predictor.container_concurrency.and_then(|n| usize::try_from(n).ok()).unwrap_or(0),
        timeout: timeout_of(manifest),
    };
    let replica = match &manifest.predictor {
        Predictor::Model(dir) => {
            ReplicaSpec::Server { args: server_args(manifest.isvc.name(), &dir.to_string_lossy(), 0, predictor) }
        }
        Predictor::Container(container) => ReplicaSpec::Container(ContainerReplica {
            container: container.clone(),
            env: knative_env(&format!("{}-predictor", manifest.isvc.name()), &key.name),
            container_concurrency: spec.container_concurrency,
            timeout_secs: spec.timeout.as_secs(),
        }),
    };
    let endpoints = plane.plane.endpoints().get_or_insert(key, spec.container_concurrency);
    plane.backend.add(key, replica, endpoints);
    let scaling = scaling_spec(&manifest.isvc, &config.autoscaler).expect("manifests are validated when read");
    let initial_pods = scaling.initial_pods();
    plane.plane.provision(&spec, Some(scaling));
    initial_pods
}

fn teardown(plane: &DataPlane, key: &RevisionKey) {
    plane.plane.teardown(key);
    plane.backend.remove(key);
}
