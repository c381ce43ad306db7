//! The route table: which InferenceService (and which tagged revision) a request is for, found from
//! its Host or its path, and the path to send upstream. Pure data: built once per published route
//! set, then only read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use skiff_api::revision::Component;
use skiff_api::traffic::TrafficTarget;

/// The namespace model-name routes prefer when several services carry the same name.
const DEFAULT_NAMESPACE: &str = "default";

/// One InferenceService as the router sees it: where it lives and how each component's traffic is
/// split.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceRoute {
    /// Kubernetes namespace (a DNS label).
    pub namespace: String,
    /// InferenceService name (a DNS label).
    pub name: String,
    /// The predictor's split across revisions (`status.components.predictor.traffic`).
    pub targets: Vec<TrafficTarget>,
    /// The transformer's split; when it has one, requests for the service go to it (the predictor
    /// stays reachable at its own address, [`PREDICTOR_SUFFIX`]).
    pub transformer: Vec<TrafficTarget>,
    /// The explainer's split; when it has one, explain requests go to it.
    pub explainer: Vec<TrafficTarget>,
    /// Upstream read timeout (`predictor.timeout`); the router's default when `None`.
    pub timeout: Option<Duration>,
    /// The host of the service's URL (`status.url`), when it is known; it routes to the service
    /// (and `<tag>-<host>` to a tagged revision) whatever the router's domain.
    pub host: Option<String>,
}

impl ServiceRoute {
    /// `namespace/name`, as used in logs and metric labels.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn has_tag(&self, tag: &str) -> bool {
        self.targets.iter().any(|t| t.tag.as_deref() == Some(tag))
    }
}

/// The suffix of a service's name that addresses its predictor alone, past any transformer: the
/// host `<name>-predictor.<namespace>.<domain>` (KServe's predictor host) or the path
/// `/serving/<namespace>/<name>-predictor/...`. A transformer is given that address as its
/// `--predictor_host`, so its calls reach the predictor through the data plane, not itself.
pub const PREDICTOR_SUFFIX: &str = "-predictor";

/// Where a request goes: the service, the component, the tag that pins one revision (if any), and
/// the upstream path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The matched service.
    pub service: Arc<ServiceRoute>,
    /// The component that serves it: the explainer for explain requests when there is one, else
    /// the transformer when there is one, else the predictor (always, when the predictor's own
    /// address was used).
    pub component: Component,
    /// Set for tag hosts (`<tag>-<name>.<namespace>.<domain>`): only that target may serve.
    pub tag: Option<String>,
    /// Path and query to send upstream (rewritten for `/serving/...` paths, otherwise unchanged).
    pub path: String,
}

/// Every routable service, indexed by namespace and name, under one domain.
#[derive(Debug, Default)]
pub struct RouteTable {
    domain: String,
    by_namespace: HashMap<String, HashMap<String, Arc<ServiceRoute>>>,
    by_name: HashMap<String, Vec<Arc<ServiceRoute>>>,
    /// URL hosts and their tag hosts.
    by_url_host: HashMap<String, (Arc<ServiceRoute>, Option<String>)>,
    len: usize,
}

impl Resolved {
    /// The split of the component that serves the request.
    pub fn targets(&self) -> &[TrafficTarget] {
        match self.component {
            Component::Predictor => &self.service.targets,
            Component::Transformer => &self.service.transformer,
            Component::Explainer => &self.service.explainer,
        }
    }
}

/// What the Host header says: the service, the tag, and whether the predictor's own host was used.
enum HostMatch {
    Found(Arc<ServiceRoute>, Option<String>, bool),
    /// A service host under our domain that names nothing we serve.
    Unknown,
    /// Not a service host: routing falls back to the path.
    NotOurs,
}

impl RouteTable {
    /// Builds the table; a later route with the same namespace and name replaces an earlier one.
    pub fn new(domain: impl Into<String>, routes: Vec<ServiceRoute>) -> RouteTable {
        let domain = domain.into().trim_matches('.').to_ascii_lowercase();
        let mut by_namespace: HashMap<String, HashMap<String, Arc<ServiceRoute>>> = HashMap::new();
        for route in routes {
            let ns = by_namespace.entry(route.namespace.clone()).or_default();
            ns.insert(route.name.clone(), Arc::new(route));
        }
        let mut by_name: HashMap<String, Vec<Arc<ServiceRoute>>> = HashMap::new();
        let mut by_url_host = HashMap::new();
        let mut len = 0;
        for route in by_namespace.values().flat_map(HashMap::values) {
            by_name.entry(route.name.clone()).or_default().push(route.clone());
            if let Some(host) = &route.host {
                let host = host.trim_end_matches('.').to_ascii_lowercase();
                for tag in route.targets.iter().filter_map(|t| t.tag.as_deref()) {
                    by_url_host.insert(format!("{tag}-{host}"), (route.clone(), Some(tag.to_owned())));
                }
                by_url_host.insert(host, (route.clone(), None));
            }
            len += 1;
        }
        RouteTable { domain, by_namespace, by_name, by_url_host, len }
    }

    /// The domain service hosts live under.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// Number of services.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no service is routable.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The service `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<&Arc<ServiceRoute>> {
        self.by_namespace.get(namespace)?.get(name)
    }

    /// Finds the service for a request from its Host (port ignored) and its path and query.
    ///
    /// A Host under the domain decides alone; otherwise `/serving/<namespace>/<name>/<rest>` (sent
    /// upstream as `/<rest>`) and then the model name in V1/V2 paths (namespace `default` first,
    /// else the only service of that name).
    pub fn resolve(&self, host: &str, path_and_query: &str) -> Option<Resolved> {
        let resolved = |service: &Arc<ServiceRoute>, tag: Option<String>, path: String, predictor: bool| {
            let component = component_for(service, &path, predictor);
            Some(Resolved { service: service.clone(), component, tag, path })
        };
        match self.by_host(host) {
            HostMatch::Found(service, tag, predictor) => {
                return resolved(&service, tag, path_and_query.to_owned(), predictor);
            }
            HostMatch::Unknown => return None,
            HostMatch::NotOurs => {}
        }
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        if let Some(rest) = path.strip_prefix("/serving/") {
            let mut parts = rest.splitn(3, '/');
            let (namespace, name) = (parts.next()?, parts.next()?);
            let (service, predictor) = match self.get(namespace, name) {
                Some(service) => (service, false),
                None => (self.get(namespace, name.strip_suffix(PREDICTOR_SUFFIX)?)?, true),
            };
            let mut upstream = format!("/{}", parts.next().unwrap_or(""));
            if let Some(query) = query {
                upstream.push('?');
                upstream.push_str(query);
            }
            return resolved(service, None, upstream, predictor);
        }
        let service = self.by_model_name(model_name(path)?)?;
        resolved(service, None, path_and_query.to_owned(), false)
    }

    /// Whether `host` addresses a service, one that exists or not (a host under the domain, or a
    /// service's URL host), rather than the router itself (an IP address, `localhost`, any other
    /// name): only requests to the router itself are answered by the router or routed by the
    /// model named in a gRPC message.
    pub fn is_service_host(&self, host: &str) -> bool {
        !matches!(self.by_host(host), HostMatch::NotOurs)
    }

    /// The service for a request that names model `name` in its body rather than its path (a gRPC
    /// call), by the rule of V1/V2 model paths; the path is sent upstream unchanged.
    pub fn resolve_model(&self, name: &str, path_and_query: &str) -> Option<Resolved> {
        let service = self.by_model_name(name)?;
        let component = component_for(service, path_and_query, false);
        Some(Resolved { service: service.clone(), component, tag: None, path: path_and_query.to_owned() })
    }

    /// Every service, in no particular order.
    pub fn services(&self) -> impl Iterator<Item = &Arc<ServiceRoute>> {
        self.by_namespace.values().flat_map(HashMap::values)
    }

    fn by_host(&self, host: &str) -> HostMatch {
        let host = strip_port(host).trim_end_matches('.');
        if host.len() > MAX_HOST {
            return if self.domain.is_empty() { HostMatch::NotOurs } else { HostMatch::Unknown };
        }
        let host = host.to_ascii_lowercase();
        if let Some((service, tag)) = self.by_url_host.get(&host) {
            return HostMatch::Found(service.clone(), tag.clone(), false);
        }
        let prefix = if self.domain.is_empty() {
            host.as_str()
        } else {
            match host.strip_suffix(self.domain.as_str()).and_then(|p| p.strip_suffix('.')) {
                Some(prefix) => prefix,
                None => return HostMatch::NotOurs,
            }
        };
        let Some((label, namespace)) = prefix.split_once('.').filter(|(l, ns)| !l.is_empty() && !ns.contains('.'))
        else {
            return if self.domain.is_empty() { HostMatch::NotOurs } else { HostMatch::Unknown };
        };
        if label.len() > MAX_LABEL {
            return HostMatch::Unknown;
        }
        let Some(services) = self.by_namespace.get(namespace) else { return HostMatch::Unknown };
        if let Some(service) = services.get(label) {
            return HostMatch::Found(service.clone(), None, false);
        }
        if let Some(service) = label.strip_suffix(PREDICTOR_SUFFIX).and_then(|name| services.get(name)) {
            return HostMatch::Found(service.clone(), None, true);
        }
        for (i, _) in label.match_indices('-') {
            let (tag, name) = (&label[..i], &label[i + 1..]);
            if let Some(service) = services.get(name).filter(|s| s.has_tag(tag)) {
                return HostMatch::Found(service.clone(), Some(tag.to_owned()), false);
            }
        }
        HostMatch::Unknown
    }

    fn by_model_name(&self, name: &str) -> Option<&Arc<ServiceRoute>> {
        let candidates = self.by_name.get(name)?;
        candidates.iter().find(|s| s.namespace == DEFAULT_NAMESPACE).or(match candidates.as_slice() {
            [only] => Some(only),
            _ => None,
        })
    }
}

/// Longest DNS name (RFC 1035): a longer Host names no service, whatever it holds.
const MAX_HOST: usize = 253;

/// Longest DNS label: a longer first label names no service or tag host, and is not searched.
const MAX_LABEL: usize = 63;

/// `host` without a trailing `:port` (bracketed IPv6 hosts keep their brackets).
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The component that serves `path` for `service`; `predictor`: the predictor's own address was used.
fn component_for(service: &ServiceRoute, path: &str, predictor: bool) -> Component {
    if predictor {
        Component::Predictor
    } else if !service.explainer.is_empty() && is_explain(path) {
        Component::Explainer
    } else if !service.transformer.is_empty() {
        Component::Transformer
    } else {
        Component::Predictor
    }
}

/// KServe's explain paths: `/v1/models/<name>:explain` and `/v2/models/<name>[/versions/<v>]/explain`.
fn is_explain(path_and_query: &str) -> bool {
    let path = path_and_query.split('?').next().unwrap_or_default();
    (path.starts_with("/v1/models/") && path.ends_with(":explain"))
        || (path.starts_with("/v2/models/") && path.ends_with("/explain"))
}

/// The model name in `/v1/models/<name>[:verb]` and `/v2/models/<name>[/...]`.
fn model_name(path: &str) -> Option<&str> {
    let name = if let Some(rest) = path.strip_prefix("/v1/models/") {
        rest.split('/').next()?.split(':').next()?
    } else {
        path.strip_prefix("/v2/models/")?.split('/').next()?
    };
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests;
