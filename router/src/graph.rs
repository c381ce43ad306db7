//! KServe's InferenceGraph, run inside the router: no graph router service, no extra hop. A
//! request whose Host is `<graph>.<namespace>.<domain>` (or whose path is
//! `/serving/<namespace>/<graph>[/...]`) is read whole, its graph executed, and the answer written.
//!
//! - [`GraphTable`] (pure): which graph a request is for.
//! - [`exec`] (pure, generic over the [`exec::Caller`] that makes a step's call): KServe's
//!   `routeStep` rule by rule — Sequence, Switch (GJSON conditions, via the `gjson` crate, tidwall's
//!   own port of the Go library KServe uses), Ensemble, Splitter, Hard and Soft dependencies, the
//!   error answers — plus each step's time and cold start.
//! - the proxy's `graph` module (I/O): reads the request, wakes every InferenceService the graph can reach that is at
//!   zero at once, calls each step through the same route table, canary split, replicas and
//!   activator a direct request uses, and writes the answer with `x-skiff-graph-steps`.

pub mod exec;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use skiff_api::graph::InferenceGraphSpec;

/// One InferenceGraph as the router runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphRoute {
    /// Namespace.
    pub namespace: String,
    /// Graph name.
    pub name: String,
    /// The graph, validated ([`skiff_api::graph::validate_graph`]).
    pub spec: Arc<InferenceGraphSpec>,
    /// For each `serviceName` step's InferenceService, the path its requests are POSTed to
    /// (KServe's `GetPredictorEndpoint`: `/v1/models/<model>:predict`, or `/v2/models/<model>/infer`
    /// for a V2 predictor). A service missing here fails its steps, naming it.
    pub service_paths: BTreeMap<String, String>,
}

impl GraphRoute {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The bound on one call of the graph: `spec.timeout`, else the router's default.
    pub fn timeout(&self) -> Duration {
        self.spec.timeout.and_then(|s| u64::try_from(s).ok()).map_or(crate::DEFAULT_TIMEOUT, Duration::from_secs)
    }

    /// The bound on one step's call, when `spec.routerTimeouts.serviceClient` sets one.
    pub fn step_timeout(&self) -> Option<Duration> {
        let secs = self.spec.router_timeouts.as_ref()?.service_client?;
        u64::try_from(secs).ok().map(Duration::from_secs)
    }
}

/// Every graph, by namespace and name, under the router's domain; and the headers passed on to
/// steps (KServe's `PROPAGATE_HEADERS` patterns).
#[derive(Debug, Default)]
pub struct GraphTable {
    domain: String,
    graphs: HashMap<String, HashMap<String, Arc<GraphRoute>>>,
    propagate: Vec<regex::Regex>,
}

impl GraphTable {
    /// The table of `graphs` under `domain`, passing headers whose names match one of `propagate`
    /// (regular expressions, unanchored as Go's `MatchString`; one that does not compile is skipped
    /// with a warning, as KServe's router does).
    pub fn new(domain: &str, graphs: Vec<GraphRoute>, propagate: &[String]) -> GraphTable {
        let mut by_ns: HashMap<String, HashMap<String, Arc<GraphRoute>>> = HashMap::new();
        for graph in graphs {
            by_ns.entry(graph.namespace.clone()).or_default().insert(graph.name.clone(), Arc::new(graph));
        }
        let propagate = propagate
            .iter()
            .filter(|p| !p.is_empty())
            .filter_map(|p| match regex::Regex::new(p) {
                Ok(re) => Some(re),
                Err(e) => {
                    tracing::warn!(pattern = %p, error = %e, "a header pattern to propagate does not compile");
                    None
                }
            })
            .collect();
        GraphTable { domain: domain.trim_matches('.').to_ascii_lowercase(), graphs: by_ns, propagate }
    }

    /// True when there is no graph.
    pub fn is_empty(&self) -> bool {
        self.graphs.is_empty()
    }

    /// The graph `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<&Arc<GraphRoute>> {
        self.graphs.get(namespace)?.get(name)
    }

    /// The graph a request is for: Host `<graph>.<namespace>.<domain>` (port ignored), else the
    /// path `/serving/<namespace>/<graph>` or `/serving/<namespace>/<graph>/...`.
    pub fn resolve(&self, host: &str, path: &str) -> Option<Arc<GraphRoute>> {
        if self.graphs.is_empty() {
            return None;
        }
        let host = host.rsplit_once(':').filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit())).map_or(host, |h| h.0);
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let prefix = if self.domain.is_empty() {
            Some(host.as_str())
        } else {
            host.strip_suffix(self.domain.as_str()).and_then(|p| p.strip_suffix('.'))
        };
        if let Some((name, namespace)) = prefix.and_then(|p| p.split_once('.'))
            && let Some(graph) = self.get(namespace, name)
        {
            return Some(graph.clone());
        }
        let path = path.split('?').next().unwrap_or_default();
        let mut parts = path.strip_prefix("/serving/")?.splitn(3, '/');
        let (namespace, name) = (parts.next()?, parts.next()?);
        self.get(namespace, name).cloned()
    }

    /// Whether the request header `name` is passed on to every step.
    pub fn propagates(&self, name: &str) -> bool {
        self.propagate.iter().any(|re| re.is_match(name))
    }
}

#[cfg(test)]
mod tests;
