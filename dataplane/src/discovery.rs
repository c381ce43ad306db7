//! Endpoints from the Kubernetes API, as Knative's activator takes them: a watch on EndpointSlices
//! keeps the ready pod addresses of each Service. The pods are reached at their IPs directly, with
//! no kube-proxy or ClusterIP in the path.
//!
//! A revision's Service carries the revision's name, `containerConcurrency` and timeout as labels
//! (the operator writes them; the EndpointSlice controller copies a Service's labels to its
//! slices), so the slices alone say what the router and the activator need.
//!
//! The pure part ([`ready_addresses`], [`revision_spec`]) reads slices; [`follow`] is the watch.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use skiff_api::labels::REVISION_NAME;
use skiff_api::settings::RevisionSettings;

use crate::endpoints::RevisionEndpoints;
use crate::key::RevisionKey;
use crate::plane::{Plane, RevisionSpec};
use crate::probe::Prober;

/// The label naming the Service an EndpointSlice belongs to.
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";

/// A Service, by namespace and name.
pub type ServiceKey = RevisionKey;

/// The Service `slice` belongs to.
pub fn service_of(slice: &EndpointSlice) -> Option<ServiceKey> {
    Some(RevisionKey::new(slice.namespace()?, slice.labels().get(SERVICE_NAME)?.as_str()))
}

/// The name of the port requests go to, on revision Services and the activator's alike (the
/// activator's Service also has an `admin` port).
pub const HTTP_PORT: &str = "http";

/// The ready addresses (IP and the slice's `http` port, else its first) that `slices` list, in a
/// stable order; endpoints without a ready condition count as ready, as the API defines it.
pub fn ready_addresses<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> Vec<SocketAddr> {
    addresses(slices, |ready, _| ready != Some(false))
}

/// The addresses of pods that are starting: not ready yet, and not terminating. The activator
/// probes them itself, so that it need not wait for the kubelet's next readiness probe.
pub fn starting_addresses<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> Vec<SocketAddr> {
    addresses(slices, |ready, terminating| ready == Some(false) && terminating != Some(true))
}

fn addresses<'a>(
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    wanted: impl Fn(Option<bool>, Option<bool>) -> bool,
) -> Vec<SocketAddr> {
    let mut addrs = BTreeSet::new();
    for slice in slices {
        let ports = slice.ports.as_deref().unwrap_or_default();
        let port = ports.iter().find(|p| p.name.as_deref() == Some(HTTP_PORT)).or(ports.first());
        let Some(port) = port.and_then(|p| p.port) else { continue };
        let Ok(port) = u16::try_from(port) else { continue };
        for endpoint in &slice.endpoints {
            let conditions = endpoint.conditions.as_ref();
            if !wanted(conditions.and_then(|c| c.ready), conditions.and_then(|c| c.terminating)) {
                continue;
            }
            let ips = endpoint.addresses.iter().filter_map(|a| a.parse::<IpAddr>().ok());
            addrs.extend(ips.map(|ip| SocketAddr::new(ip, port)));
        }
    }
    addrs.into_iter().collect()
}

/// What a revision Service's labels say: its key and its [`RevisionSettings`] (read as
/// [`RevisionSettings::from_labels`] states: the operator writes them from validated specs, and a
/// value edited past the spec's maxima is held to them, never trusted into a clock overflow).
/// `None` for a slice that is not a revision's.
pub fn revision_spec(namespace: &str, labels: &BTreeMap<String, String>) -> Option<RevisionSpec> {
    let name = labels.get(REVISION_NAME)?;
    Some(RevisionSpec::new(RevisionKey::new(namespace, name.as_str()), &RevisionSettings::from_labels(labels)))
}

/// What [`follow`] reports for one Service.
#[derive(Debug)]
pub enum Change<'a> {
    /// The Service's slices now: their labels and ready addresses.
    Listed {
        /// The labels of one of them (copied from the Service).
        labels: &'a BTreeMap<String, String>,
        /// Their ready addresses.
        addresses: Vec<SocketAddr>,
        /// The addresses of their pods that are starting.
        starting: Vec<SocketAddr>,
    },
    /// The Service has no slice any more.
    Gone,
}

/// Watches the EndpointSlices `api` lists under `selector` and calls `update` for each Service
/// whose slices changed (every Service once the first list is complete, and `Gone` for those
/// that disappeared while the watch was down). `synced` is called after the first complete list.
/// Runs until the watch stream ends (never, with its back-off).
pub async fn follow(
    api: Api<EndpointSlice>,
    selector: &str,
    mut synced: impl FnMut(),
    mut update: impl FnMut(&ServiceKey, Change<'_>),
) {
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default().labels(selector)).default_backoff().reflect(writer);
    let mut stream = std::pin::pin!(stream);
    let mut known: BTreeSet<ServiceKey> = BTreeSet::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(slice) | watcher::Event::Delete(slice)) => {
                if let Some(service) = service_of(&slice) {
                    report(&store, &service, &mut known, &mut update);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let listed: BTreeSet<ServiceKey> = store.state().iter().filter_map(|s| service_of(s)).collect();
                for service in known.union(&listed).cloned().collect::<Vec<_>>() {
                    report(&store, &service, &mut known, &mut update);
                }
                synced();
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Err(e) => tracing::warn!(error = %e, selector, "EndpointSlice watch failed; retrying"),
        }
    }
}

fn report(
    store: &Store<EndpointSlice>,
    service: &ServiceKey,
    known: &mut BTreeSet<ServiceKey>,
    update: &mut impl FnMut(&ServiceKey, Change<'_>),
) {
    let slices: Vec<Arc<EndpointSlice>> =
        store.state().into_iter().filter(|s| service_of(s).as_ref() == Some(service)).collect();
    match slices.first() {
        None => {
            if known.remove(service) {
                update(service, Change::Gone);
            }
        }
        Some(first) => {
            known.insert(service.clone());
            let addresses = ready_addresses(slices.iter().map(|s| s.as_ref()));
            let starting = starting_addresses(slices.iter().map(|s| s.as_ref()));
            update(service, Change::Listed { labels: first.labels(), addresses, starting });
        }
    }
}

/// Keeps `plane` in step with every revision's EndpointSlices, cluster-wide: a revision is
/// provisioned (registry, activator queue) when its slices appear, its ready addresses follow
/// them, and it is torn down when they go. With a `prober` (the activator's), starting pods are
/// probed and published as soon as they answer.
pub async fn sync_revisions(
    slices: Api<EndpointSlice>,
    plane: Arc<Plane>,
    prober: Option<Arc<Prober>>,
    synced: impl FnMut(),
) {
    follow(slices, REVISION_NAME, synced, |service, change| match change {
        Change::Listed { labels, addresses, starting } => match revision_spec(&service.namespace, labels) {
            Some(spec) => {
                let endpoints = plane.provision(&spec, None);
                match &prober {
                    Some(prober) => prober.update(endpoints, probe_path(labels), addresses, starting),
                    None => drop(endpoints.set_addresses(addresses)),
                }
            }
            None => tracing::warn!(%service, "EndpointSlice without a revision label"),
        },
        // A revision's Service is named after the revision.
        Change::Gone => {
            if let Some(prober) = &prober {
                prober.forget(service);
            }
            plane.teardown(service);
        }
    })
    .await
}

/// The path that says a revision's pod can serve: the queue-proxy's `/healthz` (which checks the
/// custom container) or `skiff-server`'s `/v2/health/ready` (every model loaded).
pub fn probe_path(labels: &BTreeMap<String, String>) -> &'static str {
    if RevisionSettings::from_labels(labels).queue_proxy { "/healthz" } else { "/v2/health/ready" }
}

/// Keeps `endpoints` in step with the ready pods of one Service (the activator's, for the router).
pub async fn sync_service(
    slices: Api<EndpointSlice>,
    service: &str,
    endpoints: Arc<RevisionEndpoints>,
    synced: impl FnMut(),
) {
    let selector = format!("{SERVICE_NAME}={service}");
    follow(slices, &selector, synced, |_, change| {
        let addresses = match change {
            Change::Listed { addresses, .. } => addresses,
            Change::Gone => Vec::new(),
        };
        endpoints.set_addresses(addresses);
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use skiff_api::labels::{CONTAINER_CONCURRENCY, QUEUE_PROXY, TIMEOUT_SECONDS};

    use super::*;

    fn slice(service: &str, port: i32, endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{service}-x"), "namespace": "ns", "labels": {
                SERVICE_NAME: service, REVISION_NAME: service, CONTAINER_CONCURRENCY: "4", TIMEOUT_SECONDS: "60"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    #[test]
    fn ready_addresses_skip_endpoints_that_are_not_ready() {
        let a = slice(
            "r",
            8080,
            json!([
                {"addresses": ["10.0.0.2"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": false, "terminating": true}},
                {"addresses": ["10.0.0.4"]},
            ]),
        );
        let mut b = slice("r", 8080, json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": true}}]));
        b.ports =
            serde_json::from_value(json!([{"name": "admin", "port": 9090}, {"name": "http", "port": 8080}])).unwrap();
        let addrs: Vec<String> = ready_addresses([&a, &b]).iter().map(ToString::to_string).collect();
        assert_eq!(addrs, ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.4:8080"]);
        assert!(ready_addresses([&slice("r", 8080, json!([]))]).is_empty(), "a placeholder slice lists none");
        let starting = slice("r", 8080, json!([{"addresses": ["10.0.0.9"], "conditions": {"ready": false}}]));
        let starting: Vec<String> = starting_addresses([&a, &starting]).iter().map(ToString::to_string).collect();
        assert_eq!(starting, ["10.0.0.9:8080"], "not ready and not terminating");
        assert_eq!(service_of(&a), Some(RevisionKey::new("ns", "r")));
    }

    #[test]
    fn the_service_labels_give_the_revision_settings() {
        let s = slice("iris-predictor-00001", 8012, json!([]));
        let spec = revision_spec("ns", s.labels()).unwrap();
        assert_eq!(spec.key, RevisionKey::new("ns", "iris-predictor-00001"));
        assert_eq!((spec.container_concurrency, spec.timeout), (4, Duration::from_secs(60)));
        let bare = BTreeMap::from([(REVISION_NAME.to_owned(), "r".to_owned())]);
        let spec = revision_spec("ns", &bare).unwrap();
        assert_eq!((spec.container_concurrency, spec.timeout), (0, Duration::from_secs(300)));
        let edited = BTreeMap::from([
            (REVISION_NAME.to_owned(), "r".to_owned()),
            (CONTAINER_CONCURRENCY.to_owned(), u64::MAX.to_string()),
            (TIMEOUT_SECONDS.to_owned(), (1u64 << 63).to_string()),
        ]);
        let spec = revision_spec("ns", &edited).unwrap();
        assert_eq!(
            (spec.container_concurrency, spec.timeout),
            (1000, Duration::from_secs(3600)),
            "held to the spec's maxima"
        );
        assert!(revision_spec("ns", &BTreeMap::new()).is_none());
        assert_eq!(probe_path(&bare), "/v2/health/ready");
        let sidecar = BTreeMap::from([(QUEUE_PROXY.to_owned(), "true".to_owned())]);
        assert_eq!(probe_path(&sidecar), "/healthz");
    }
}
