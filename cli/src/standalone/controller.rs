//! The standalone controller: refreshes the manifest folder and converges the data plane to it. Each
//! change of a component's spec (the predictor's, a transformer's, an explainer's) makes a new
//! revision of that component (replicas, endpoints, activator queue and autoscaler); its rollout
//! decides its traffic split; routes are published to the router; revisions that no longer take
//! traffic are torn down (scaled to zero) after the new routes are out. Their rollout keeps the
//! newest of them as known revisions, and a spec equal to one's routes to it again, provisioned
//! anew (a cold start from zero) rather than as a new revision.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use skiff_activator::Activator;
use skiff_api::revision::{Component, RevisionTemplate};
use skiff_api::scaling::component_scaling_spec;
use skiff_api::serving::{
    Served, batcher_args, behind_transformer, component_contract, logger_args, predictor_host, revision_ready,
    server_args,
};
use skiff_api::settings::RevisionSettings;
use skiff_api::traffic::{Change, Rollout, TrafficTarget, canary_percent};
use skiff_api::validate::SinkPolicy;
use skiff_dataplane::{Plane, ReplicaBackend, RevisionKey, RevisionSpec};
use skiff_router::{Router, ServiceRoute};

use super::backend::LocalProcesses;
use super::config::UpConfig;
use super::container::knative_env;
use super::folder::ManifestFolder;
use super::graphs::{self, GraphManifest, GraphStatus};
use super::manifests::{Manifest, Predictor};
use super::replica::{ContainerReplica, ReplicaSpec};
use super::status::{AutoscalerStatus, RevisionStatus, ServiceStatus, Status};

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
    /// Where the router listens, as transformers and explainers reach it (loopback when it
    /// listens on every address).
    pub router_addr: SocketAddr,
}

struct Service {
    manifest: Manifest,
    /// Each component's revisions, by component (the predictor always; a transformer and an
    /// explainer when the manifest has them).
    components: BTreeMap<Component, Revisions>,
}

/// One component's revisions and traffic.
#[derive(Default)]
struct Revisions {
    rollout: Rollout,
    traffic: Vec<TrafficTarget>,
    /// Every revision number is taken: changes are refused (and said once).
    exhausted: bool,
}

impl Service {
    fn traffic(&self, component: Component) -> Vec<TrafficTarget> {
        self.components.get(&component).map(|c| c.traffic.clone()).unwrap_or_default()
    }

    /// Every known revision of every component, with traffic or kept at zero.
    fn revision_keys(&self) -> impl Iterator<Item = RevisionKey> + '_ {
        let namespace = self.manifest.isvc.namespace();
        self.components
            .values()
            .flat_map(|c| c.rollout.revisions())
            .map(move |r| RevisionKey::new(namespace, r.name.as_str()))
    }

    /// The revisions that take traffic (the latest always does, even at 0 %): these run.
    fn active_keys(&self) -> impl Iterator<Item = RevisionKey> + '_ {
        let namespace = self.manifest.isvc.namespace();
        self.components
            .values()
            .flat_map(|c| &c.traffic)
            .map(move |t| RevisionKey::new(namespace, t.revision_name.as_str()))
    }
}

/// Converges the data plane to a folder of manifests.
pub struct Controller {
    manifests: Arc<ManifestFolder>,
    config: UpConfig,
    plane: DataPlane,
    services: BTreeMap<String, Service>,
    provisioned: BTreeSet<RevisionKey>,
    errors: Vec<String>,
    warnings: Vec<String>,
    routes: Vec<ServiceRoute>,
    /// The folder's valid InferenceGraphs, and what the router was given of them.
    graphs: Vec<GraphManifest>,
    graph_routes: Vec<skiff_router::graph::GraphRoute>,
    /// Graph refusals already logged.
    graph_errors: Vec<String>,
    /// KServe's `PROPAGATE_HEADERS`: the request headers a graph passes on to its steps.
    propagate: Vec<String>,
}

impl Controller {
    /// A controller over the folder `manifests`, with nothing provisioned yet.
    pub fn new(manifests: Arc<ManifestFolder>, config: UpConfig, plane: DataPlane) -> Controller {
        Controller {
            manifests,
            config,
            plane,
            services: BTreeMap::new(),
            provisioned: BTreeSet::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
            routes: Vec::new(),
            graphs: Vec::new(),
            graph_routes: Vec::new(),
            graph_errors: Vec::new(),
            propagate: std::env::var("PROPAGATE_HEADERS")
                .map(|v| v.split(',').map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect())
                .unwrap_or_default(),
        }
    }

    /// One pass: read the folder, roll revisions, split traffic, publish routes, collect.
    pub fn reconcile(&mut self) {
        // Only changed files are read again; refusals are logged there, once per change.
        let folder = self.manifests.refresh();
        self.errors.clone_from(&folder.errors);
        self.warnings.clone_from(&folder.warnings);
        let mut warnings = Vec::new();
        let removed: BTreeSet<RevisionKey> = self
            .services
            .iter()
            .filter(|(key, _)| !folder.manifests.contains_key(*key))
            .flat_map(|(_, s)| s.revision_keys())
            .collect();
        self.services.retain(|key, _| folder.manifests.contains_key(key));
        for (key, manifest) in &folder.manifests {
            let service = self
                .services
                .entry(key.clone())
                .or_insert_with(|| Service { manifest: manifest.clone(), components: BTreeMap::new() });
            service.manifest.clone_from(manifest);
            let present: Vec<Component> = Component::of(&service.manifest.isvc).collect();
            service.components.retain(|c, _| present.contains(c));
            for component in present {
                let revisions = service.components.entry(component).or_default();
                roll(&self.plane, &self.config, &mut self.provisioned, &service.manifest, component, revisions);
                let spec = component.spec(&service.manifest.isvc).expect("the component is in the manifest");
                if let Some(note) = revisions.rollout.idle_canary(canary_percent(spec)) {
                    warnings.push(format!("{}: spec.{}.{note}", service.manifest.path.display(), component.name()));
                }
            }
        }
        self.warnings.extend(warnings);
        self.publish_routes();
        self.publish_graphs(&folder.graph_files);
        let live: BTreeSet<RevisionKey> = self.services.values().flat_map(Service::active_keys).collect();
        let known: BTreeSet<RevisionKey> = self.services.values().flat_map(Service::revision_keys).collect();
        // `skiff up` tells these as events (a removed service, a new traffic split).
        for revision in self.provisioned.difference(&live).cloned().collect::<Vec<_>>() {
            if removed.contains(&revision) {
                tracing::debug!(%revision, "its service is removed; removing the revision");
            } else if known.contains(&revision) {
                tracing::debug!(%revision, "revision has no traffic any more; scaled to zero, kept for a rollback");
            } else {
                tracing::debug!(%revision, "revision has no traffic any more; removing it");
            }
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
                targets: s.traffic(Component::Predictor),
                transformer: s.traffic(Component::Transformer),
                explainer: s.traffic(Component::Explainer),
                timeout: Some(timeout_of(&s.manifest)),
                ..ServiceRoute::default()
            })
            .collect();
        if routes != self.routes {
            self.plane.router.publish(routes.clone());
            self.routes = routes;
        }
    }

    /// Reads the folder's InferenceGraphs and gives them to the router.
    fn publish_graphs(&mut self, files: &[std::path::PathBuf]) {
        let isvcs: BTreeMap<String, skiff_api::InferenceService> =
            self.services.iter().map(|(key, s)| (key.clone(), s.manifest.isvc.clone())).collect();
        let (graphs, errors) = graphs::read(files, &isvcs);
        if errors != self.graph_errors {
            for error in errors.iter().filter(|e| !self.graph_errors.contains(e)) {
                tracing::warn!("refused {error}");
            }
            self.graph_errors.clone_from(&errors);
        }
        self.errors.extend(errors);
        let routes: Vec<_> = graphs.iter().map(|g| graphs::route(g, &isvcs)).collect();
        if routes != self.graph_routes {
            self.plane.router.publish_graphs(routes.clone(), &self.propagate);
            self.graph_routes = routes;
        }
        self.graphs = graphs;
    }

    fn graph_status(&self) -> Vec<GraphStatus> {
        let isvcs: BTreeMap<String, skiff_api::InferenceService> =
            self.services.iter().map(|(key, s)| (key.clone(), s.manifest.isvc.clone())).collect();
        self.graphs
            .iter()
            .map(|g| {
                let missing = graphs::missing(g, &isvcs);
                let not_ready: Vec<&str> = skiff_api::graph::reachable_services(&g.graph.spec)
                    .into_iter()
                    .filter(|s| {
                        self.services
                            .get(&format!("{}/{s}", g.namespace()))
                            .is_some_and(|svc| !svc.components.values().all(|c| c.rollout.latest_ready().is_some()))
                    })
                    .collect();
                let reason = if !missing.is_empty() {
                    Some(format!("no InferenceService {} in namespace {}", missing.join(", "), g.namespace()))
                } else if !not_ready.is_empty() {
                    Some(format!("InferenceService {} not ready", not_ready.join(", ")))
                } else {
                    None
                };
                GraphStatus {
                    name: g.name().to_owned(),
                    namespace: g.namespace().to_owned(),
                    url: format!("http://{}.{}.{}", g.name(), g.namespace(), self.config.domain),
                    ready: reason.is_none(),
                    reason,
                    file: g.path.display().to_string(),
                    nodes: graphs::nodes(g),
                }
            })
            .collect()
    }

    /// A snapshot for `skiff get`.
    pub fn status(&self) -> Status {
        let services = self
            .services
            .values()
            .map(|s| {
                let isvc = &s.manifest.isvc;
                let progress_deadline =
                    skiff_api::settings::progress_deadline(&isvc.metadata.annotations).ok().flatten();
                let predictor = &s.components[&Component::Predictor].rollout;
                let revisions = s
                    .components
                    .values()
                    .flat_map(|c| &c.traffic)
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
                            fetched: counts.fetched,
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
                            autoscaler: self
                                .plane
                                .plane
                                .decision(&key)
                                .map(|d| AutoscalerStatus::of(d, progress_deadline)),
                            health: counts.health.clone(),
                        }
                    })
                    .collect();
                ServiceStatus {
                    name: isvc.name().to_owned(),
                    namespace: isvc.namespace().to_owned(),
                    url: format!("http://{}.{}.{}", isvc.name(), isvc.namespace(), self.config.domain),
                    ready: s.components.values().all(|c| c.rollout.latest_ready().is_some()),
                    file: s.manifest.path.display().to_string(),
                    latest_created_revision: predictor.latest().map(|r| r.name.clone()),
                    latest_ready_revision: predictor.latest_ready().map(str::to_owned),
                    latest_rolledout_revision: predictor.latest_rolled_out().map(str::to_owned),
                    previous_rolledout_revision: predictor.previous_rolled_out().map(str::to_owned),
                    revisions,
                    kept_revisions: s
                        .components
                        .values()
                        .flat_map(|c| c.rollout.inactive(&c.traffic))
                        .map(|r| r.name.clone())
                        .collect(),
                    previous_template: predictor.previous_rolled_out().and_then(|previous| {
                        predictor.revisions().iter().find(|r| r.name == previous).map(|r| r.template.clone())
                    }),
                }
            })
            .collect();
        Status { services, errors: self.errors.clone(), warnings: self.warnings.clone(), graphs: self.graph_status() }
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

/// The router's bound on a request to the service, whichever component answers it: its
/// predictor's timeout, plus its progress deadline when set.
fn timeout_of(manifest: &Manifest) -> Duration {
    skiff_api::serving::route_timeout(&manifest.isvc.spec.predictor, &manifest.isvc.metadata.annotations)
}

/// One pass over one component: a new revision for a changed spec (or the kept revision that ran
/// it), the latest revision provisioned when it does not run, revisions marked ready once they have
/// had a ready replica, and the traffic split under the component's canary.
fn roll(
    plane: &DataPlane,
    config: &UpConfig,
    provisioned: &mut BTreeSet<RevisionKey>,
    manifest: &Manifest,
    component: Component,
    revisions: &mut Revisions,
) {
    let isvc = &manifest.isvc;
    let (name, namespace) = (isvc.name(), isvc.namespace());
    let template = RevisionTemplate::of_component(isvc, component).expect("the component is in the manifest");
    let new_revision = match revisions.rollout.apply(name, component, template) {
        Ok(revision) => {
            revisions.exhausted = false;
            revision
        }
        Err(e) => {
            // The current revisions keep serving; say so once, not at every pass.
            if !std::mem::replace(&mut revisions.exhausted, true) {
                tracing::warn!(%namespace, error = %e, "no new revision");
            }
            None
        }
    };
    match &new_revision {
        Some(Change::Created(revision)) => tracing::debug!(%namespace, service = %name, %revision, "new revision"),
        Some(Change::Restored(revision)) => {
            tracing::debug!(%namespace, service = %name, %revision, "the spec is a kept revision's; routing to it")
        }
        None => {}
    }
    // The latest revision runs the manifest's spec: a new one, or a kept one routed to again.
    if let Some(latest) = revisions.rollout.latest().map(|r| r.name.clone()) {
        let key = RevisionKey::new(namespace, latest.as_str());
        if !provisioned.contains(&key) {
            let initial_pods = provision(plane, config, &key, manifest, component);
            if revision_ready(false, initial_pods) {
                revisions.rollout.mark_ready(&latest);
            }
            provisioned.insert(key);
        }
    }
    let ready: Vec<String> = revisions
        .rollout
        .revisions()
        .iter()
        .filter(|r| !r.ready && plane.backend.ready_replicas(&RevisionKey::new(namespace, r.name.as_str())) > 0)
        .map(|r| r.name.clone())
        .collect();
    for revision in ready {
        revisions.rollout.mark_ready(&revision);
    }
    let spec = component.spec(isvc).expect("the component is in the manifest");
    revisions.traffic = revisions.rollout.traffic(canary_percent(spec));
}

/// Sets a revision of `component` up: its replicas' supervisor, then (through the shared
/// [`Plane`]) its endpoints, activator queue and decider; returns the pods it starts with.
fn provision(
    plane: &DataPlane,
    config: &UpConfig,
    key: &RevisionKey,
    manifest: &Manifest,
    component: Component,
) -> u32 {
    let isvc = &manifest.isvc;
    let spec = component.spec(isvc).expect("the component is in the manifest");
    let settings = RevisionSettings::of(spec).with_progress_deadline(&isvc.metadata.annotations);
    let revision = RevisionSpec::new(key.clone(), &settings);
    let served = Served {
        inference_service: isvc.name(),
        namespace: isvc.namespace(),
        component: component.name(),
        revision: &key.name,
    };
    let replica = match manifest.runs(component).expect("the component is in the manifest") {
        Predictor::Model(source) => {
            let (dir, fetch) = source.into_parts();
            let mut args = server_args(isvc.name(), &dir, 0, spec);
            args.extend(logger_args(spec, served, &SinkPolicy::standalone()));
            ReplicaSpec::Server { args, fetch }
        }
        Predictor::Container(mut container) => {
            let mut env = knative_env(&format!("{}-{}", isvc.name(), component.name()), &key.name);
            if component != Component::Predictor {
                let host = predictor_host(&plane.router_addr.to_string(), isvc.namespace(), isvc.name());
                let (args, contract_env) = component_contract(isvc.name(), &host);
                container.argv.extend(args);
                env.extend(contract_env);
            }
            ReplicaSpec::Container(ContainerReplica {
                container,
                env,
                container_concurrency: revision.container_concurrency,
                timeout_secs: revision.timeout.as_secs(),
                agent_args: [batcher_args(spec), logger_args(spec, served, &SinkPolicy::standalone())].concat(),
                fetch: None,
            })
        }
        Predictor::Collocated(source, container) => {
            let (dir, fetch) = source.into_parts();
            let server = server_args(isvc.name(), &dir, 0, &behind_transformer(spec));
            let transformer = ContainerReplica {
                container,
                env: knative_env(&format!("{}-{}", isvc.name(), component.name()), &key.name),
                container_concurrency: revision.container_concurrency,
                timeout_secs: revision.timeout.as_secs(),
                agent_args: [batcher_args(spec), logger_args(spec, served, &SinkPolicy::standalone())].concat(),
                fetch: None,
            };
            ReplicaSpec::Collocated { server, fetch, transformer }
        }
        Predictor::Runtime(runtime) => ReplicaSpec::Container(ContainerReplica {
            container: runtime.container,
            env: knative_env(&format!("{}-{}", isvc.name(), component.name()), &key.name),
            container_concurrency: revision.container_concurrency,
            timeout_secs: revision.timeout.as_secs(),
            agent_args: [batcher_args(spec), logger_args(spec, served, &SinkPolicy::standalone())].concat(),
            fetch: runtime.source.into_parts().1,
        }),
    };
    let endpoints = plane.plane.endpoints().get_or_insert(key, revision.container_concurrency);
    plane.backend.add(key, replica, endpoints);
    let scaling = component_scaling_spec(isvc, component, &config.autoscaler)
        .expect("the component is in the manifest")
        .expect("manifests are validated when read");
    let initial_pods = scaling.initial_pods();
    plane.plane.provision(&revision, Some(scaling));
    initial_pods
}

fn teardown(plane: &DataPlane, key: &RevisionKey) {
    plane.plane.teardown(key);
    plane.backend.remove(key);
}
