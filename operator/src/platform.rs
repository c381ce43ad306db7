//! Cluster-wide settings from the `inferenceservice-config` ConfigMap in the controller's namespace,
//! in KServe's layout: each key holds a JSON document. Skiff reads
//!
//! - `ingress`: `{"ingressDomain": "example.com", "urlScheme": "http"}` (the URL in the status),
//! - `storageInitializer`: `{"image": "..."}`: when it names an image, that image (KServe's
//!   storage initializer, `kserve/storage-initializer:v0.15.2`) downloads models that are not
//!   `file://` or `pvc://`, with KServe's arguments and no node cache; absent or without an image,
//!   Skiff's fetcher (`fetchImage`) does,
//! - `skiff`: `{"serverImage": "...", "queueProxyImage": "...", "fetchImage": "...",
//!   "nodeCacheService": "skiff-node/skiff-model-cache", "nodeCachePort": 8095, "modelDir":
//!   "/mnt/models", "allowHostPath": true, "routerService": "skiff-system/skiff-router",
//!   "routerAddress": ""}` (the model server, the queue-proxy sidecar of custom containers, the init
//!   container that fetches models (`skiff-fetch`) and the node cache it asks first: the Service
//!   `<namespace>/<name>` of `skiff-model-cache`, whose `internalTrafficPolicy: Local` sends each
//!   pod to its own node's cache, and its port (0: none), whether
//!   `storageUri: file://` may mount a directory of the node, and where transformers and explainers
//!   reach the router: its Service `<namespace>/<name>`, or an address `host[:port]` that replaces
//!   the Service's DNS name),
//! - `autoscaler`: Knative's `config-autoscaler` keys as a JSON object of strings (read live by
//!   the autoscaler, and for the initial scale of a new revision),
//! - `logger`: `{"allowedHosts": ["10.0.0.5", "*.monitoring.svc", "169.254.10.0/24"]}`: request
//!   logger sinks allowed although the rule refuses them (loopback, link-local and cloud
//!   metadata addresses, and the platform's own Services: names in the router Service's namespace,
//!   `routerAddress`, the API server). KServe's other `logger` keys (`image`, `defaultUrl`, ...)
//!   are ignored.
//!
//! A missing ConfigMap or key means the defaults below.

use std::collections::BTreeMap;

use serde::Deserialize;
use skiff_api::validate::SinkPolicy;
use skiff_autoscaler::AutoscalerConfig;

use crate::error::{Error, Result};

/// The ConfigMap's name, as in KServe.
pub const CONFIG_MAP: &str = "inferenceservice-config";
/// The model server image when the ConfigMap names none.
pub const DEFAULT_SERVER_IMAGE: &str = "ghcr.io/skiff-serving/skiff-server:0.1.0";
/// The queue-proxy image when the ConfigMap names none.
pub const DEFAULT_QUEUE_PROXY_IMAGE: &str = "ghcr.io/skiff-serving/skiff-activator:0.1.0";
/// Skiff's fetcher, the model pods' init container when `storageInitializer` names no image.
pub const DEFAULT_FETCH_IMAGE: &str = "ghcr.io/skiff-serving/skiff-fetch:0.1.0";
/// The node cache's Service, `<namespace>/<name>` (`skiff-model-cache`, deploy/node-cache).
pub const DEFAULT_NODE_CACHE_SERVICE: &str = "skiff-node/skiff-model-cache";
/// The node cache's port.
pub const DEFAULT_NODE_CACHE_PORT: u16 = 8095;
/// KServe's default domain.
pub const DEFAULT_DOMAIN: &str = "example.com";
/// Where the model is mounted in the server's container (KServe's path).
pub const DEFAULT_MODEL_DIR: &str = "/mnt/models";
/// The router's Service, `<namespace>/<name>`, as `deploy/` installs it.
pub const DEFAULT_ROUTER_SERVICE: &str = "skiff-system/skiff-router";

/// Everything the controller takes from the ConfigMap.
#[derive(Debug, Clone, PartialEq)]
pub struct Platform {
    /// Domain of `status.url`: `http://<name>.<namespace>.<domain>`.
    pub domain: String,
    /// `http` or `https`.
    pub url_scheme: String,
    /// The `skiff-server` image.
    pub server_image: String,
    /// What downloads models that are not `file://` or `pvc://` into the pod.
    pub initializer: Initializer,
    /// The queue-proxy sidecar's image (`skiff-activator`).
    pub queue_proxy_image: String,
    /// Mount path of the model in the server's container.
    pub model_dir: String,
    /// Knative autoscaler defaults, for the initial scale of a revision.
    pub autoscaler: AutoscalerConfig,
    /// Whether `storageUri: file://` (a hostPath volume on the node) is served; `false` refuses it.
    pub allow_host_path: bool,
    /// The router's Service, `<namespace>/<name>`: transformers and explainers reach their
    /// predictor through it (see [`Platform::router_host`]).
    pub router_service: String,
    /// An address (`host[:port]`) pods reach the router at, instead of its Service's DNS name: for
    /// clusters without cluster DNS (the local test cluster gives a router pod's IP and port).
    pub router_address: Option<String>,
    /// Which request logger sinks InferenceServices may name (`logger.allowedHosts` and the
    /// platform's own components, built from the config map by `sink_policy`).
    pub logger_sinks: SinkPolicy,
}

impl Default for Platform {
    fn default() -> Self {
        Platform {
            domain: DEFAULT_DOMAIN.to_owned(),
            url_scheme: "http".to_owned(),
            server_image: DEFAULT_SERVER_IMAGE.to_owned(),
            initializer: Initializer::Skiff {
                image: DEFAULT_FETCH_IMAGE.to_owned(),
                node_cache: Some(node_cache_url(DEFAULT_NODE_CACHE_SERVICE, DEFAULT_NODE_CACHE_PORT)),
            },
            queue_proxy_image: DEFAULT_QUEUE_PROXY_IMAGE.to_owned(),
            model_dir: DEFAULT_MODEL_DIR.to_owned(),
            autoscaler: AutoscalerConfig::default(),
            allow_host_path: true,
            router_service: DEFAULT_ROUTER_SERVICE.to_owned(),
            router_address: None,
            logger_sinks: sink_policy(DEFAULT_ROUTER_SERVICE, None, &[]).expect("the defaults are valid"),
        }
    }
}

/// The init container that downloads a model into the pod (KServe's `storage-initializer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Initializer {
    /// Skiff's fetcher (`skiff-fetch URI DIR`), asking the node cache first when there is one.
    Skiff {
        /// Its image (`skiff.fetchImage`).
        image: String,
        /// The node cache's URL, its Service's DNS name and port (`skiff.nodeCacheService`,
        /// `skiff.nodeCachePort`); `None`: no node cache.
        node_cache: Option<String>,
    },
    /// The image `storageInitializer.image` names (KServe's), run with KServe's arguments only.
    Kserve {
        /// Its image.
        image: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Logger {
    #[serde(default)]
    allowed_hosts: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ingress {
    ingress_domain: Option<String>,
    url_scheme: Option<String>,
}

#[derive(Deserialize)]
struct Image {
    image: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Skiff {
    server_image: Option<String>,
    queue_proxy_image: Option<String>,
    fetch_image: Option<String>,
    node_cache_service: Option<String>,
    node_cache_port: Option<u16>,
    model_dir: Option<String>,
    allow_host_path: Option<bool>,
    router_service: Option<String>,
    router_address: Option<String>,
}

impl Platform {
    /// Reads the ConfigMap's `data` (absent: the defaults); errors name the key.
    pub fn from_data(data: Option<&BTreeMap<String, String>>) -> Result<Platform> {
        let mut platform = Platform::default();
        let Some(data) = data else { return Ok(platform) };
        if let Some(ingress) = key::<Ingress>(data, "ingress")? {
            set(&mut platform.domain, ingress.ingress_domain);
            set(&mut platform.url_scheme, ingress.url_scheme);
        }
        let kserve = key::<Image>(data, "storageInitializer")?.and_then(|init| init.image).filter(|i| !i.is_empty());
        let skiff = key::<Skiff>(data, "skiff")?;
        if let Some(skiff) = &skiff
            && let Initializer::Skiff { image, node_cache } = &mut platform.initializer
        {
            set(image, skiff.fetch_image.clone());
            let service = skiff.node_cache_service.as_deref().unwrap_or(DEFAULT_NODE_CACHE_SERVICE);
            if !is_service(service) {
                return Err(invalid("skiff", format!("nodeCacheService must be <namespace>/<name>, not {service:?}")));
            }
            *node_cache = match skiff.node_cache_port.unwrap_or(DEFAULT_NODE_CACHE_PORT) {
                0 => None,
                port => Some(node_cache_url(service, port)),
            };
        }
        if let Some(image) = kserve {
            platform.initializer = Initializer::Kserve { image };
        }
        if let Some(skiff) = skiff {
            set(&mut platform.server_image, skiff.server_image);
            set(&mut platform.queue_proxy_image, skiff.queue_proxy_image);
            set(&mut platform.model_dir, skiff.model_dir);
            platform.allow_host_path = skiff.allow_host_path.unwrap_or(platform.allow_host_path);
            set(&mut platform.router_service, skiff.router_service);
            platform.router_address = skiff.router_address.filter(|a| !a.is_empty());
        }
        if let Some(autoscaler) = key::<BTreeMap<String, String>>(data, "autoscaler")? {
            platform.autoscaler =
                AutoscalerConfig::from_map(&autoscaler).map_err(|e| invalid("autoscaler", e.to_string()))?;
        }
        if !["http", "https"].contains(&platform.url_scheme.as_str()) {
            return Err(invalid("ingress", format!("urlScheme must be http or https, not {:?}", platform.url_scheme)));
        }
        if !platform.model_dir.starts_with('/') {
            return Err(invalid("skiff", format!("modelDir must be an absolute path, not {:?}", platform.model_dir)));
        }
        if !is_service(&platform.router_service) {
            return Err(invalid(
                "skiff",
                format!("routerService must be <namespace>/<name>, not {:?}", platform.router_service),
            ));
        }
        if let Some(address) = &platform.router_address
            && (address.contains('/') || address.contains("://"))
        {
            return Err(invalid("skiff", format!("routerAddress must be host[:port], not {address:?}")));
        }
        let allowed = key::<Logger>(data, "logger")?.map(|l| l.allowed_hosts).unwrap_or_default();
        platform.logger_sinks = sink_policy(&platform.router_service, platform.router_address.as_deref(), &allowed)
            .map_err(|e| invalid("logger", format!("allowedHosts: {e}")))?;
        Ok(platform)
    }

    /// The authority (`host[:port]`) pods reach the router at: `routerAddress` when set, else the
    /// router Service's cluster DNS name, `<name>.<namespace>.svc.cluster.local` (port 80).
    pub fn router_host(&self) -> String {
        if let Some(address) = &self.router_address {
            return address.clone();
        }
        let (namespace, name) = self.router_service.split_once('/').unwrap_or(("skiff-system", "skiff-router"));
        format!("{name}.{namespace}.svc.cluster.local")
    }
}

/// The cluster's logger sink rule: the platform's namespace is the router Service's (`deploy/`
/// installs every component there), its `routerAddress` host is protected too, and `allowed`
/// (`logger.allowedHosts`) passes anyway.
fn sink_policy(router_service: &str, router_address: Option<&str>, allowed: &[String]) -> Result<SinkPolicy, String> {
    let namespace = router_service.split_once('/').map_or("skiff-system", |(namespace, _)| namespace);
    let address = router_address
        .map(|a| a.rsplit_once(':').filter(|(_, port)| port.parse::<u16>().is_ok()).map_or(a, |(h, _)| h));
    SinkPolicy::cluster(namespace, &address.map(str::to_owned).into_iter().collect::<Vec<_>>(), allowed)
}

fn key<T: for<'de> Deserialize<'de>>(data: &BTreeMap<String, String>, name: &str) -> Result<Option<T>> {
    data.get(name).map(|text| serde_json::from_str(text).map_err(|e| invalid(name, e.to_string()))).transpose()
}

fn set(field: &mut String, value: Option<String>) {
    if let Some(value) = value.filter(|v| !v.is_empty()) {
        *field = value;
    }
}

fn invalid(key: &str, message: String) -> Error {
    Error::Platform { name: CONFIG_MAP.to_owned(), key: key.to_owned(), message }
}

/// Whether `service` reads `<namespace>/<name>`.
fn is_service(service: &str) -> bool {
    service.split_once('/').is_some_and(|(namespace, name)| !namespace.is_empty() && !name.is_empty())
}

/// The node cache's URL: its Service's cluster DNS name and `port`.
fn node_cache_url(service: &str, port: u16) -> String {
    let (namespace, name) = service.split_once('/').unwrap_or(("", service));
    format!("http://{name}.{namespace}.svc.cluster.local:{port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn absent_means_defaults() {
        assert_eq!(Platform::from_data(None).unwrap(), Platform::default());
        assert_eq!(Platform::from_data(Some(&data(&[]))).unwrap(), Platform::default());
    }

    #[test]
    fn reads_kserve_keys_and_skiffs_own() {
        let p = Platform::from_data(Some(&data(&[
            ("ingress", r#"{"ingressDomain": "models.local", "ingressGateway": "ignored"}"#),
            ("storageInitializer", r#"{"image": "init:1", "memoryLimit": "1Gi"}"#),
            ("skiff", r#"{"serverImage": "skiff-server"}"#),
            ("autoscaler", r#"{"initial-scale": "0", "allow-zero-initial-scale": "true"}"#),
        ])))
        .unwrap();
        assert_eq!(p.domain, "models.local");
        assert_eq!(p.initializer, Initializer::Kserve { image: "init:1".into() });
        assert_eq!(p.server_image, "skiff-server");
        assert_eq!(p.autoscaler.initial_scale, 0);
        assert_eq!(p.model_dir, DEFAULT_MODEL_DIR);
        assert!(p.allow_host_path, "hostPath storage is allowed unless the admin says otherwise");
        let closed = Platform::from_data(Some(&data(&[("skiff", r#"{"allowHostPath": false}"#)]))).unwrap();
        assert!(!closed.allow_host_path);
        assert_eq!(closed.server_image, DEFAULT_SERVER_IMAGE);
    }

    #[test]
    fn skiffs_fetcher_is_the_initializer_unless_storage_initializer_names_an_image() {
        let skiff = |image: &str, url: Option<&str>| Initializer::Skiff {
            image: image.into(),
            node_cache: url.map(Into::into),
        };
        assert_eq!(
            Platform::default().initializer,
            skiff(DEFAULT_FETCH_IMAGE, Some("http://skiff-model-cache.skiff-node.svc.cluster.local:8095")),
            "each pod asks its own node's cache through the node-local Service"
        );
        let parse = |pairs: &[(&str, &str)]| Platform::from_data(Some(&data(pairs))).unwrap().initializer;
        assert_eq!(
            parse(&[("skiff", r#"{"fetchImage": "fetch:2", "nodeCachePort": 9000}"#)]),
            skiff("fetch:2", Some("http://skiff-model-cache.skiff-node.svc.cluster.local:9000"))
        );
        assert_eq!(
            parse(&[("skiff", r#"{"nodeCacheService": "cache/models"}"#)]),
            skiff(DEFAULT_FETCH_IMAGE, Some("http://models.cache.svc.cluster.local:8095"))
        );
        assert_eq!(
            parse(&[("skiff", r#"{"nodeCachePort": 0}"#)]),
            skiff(DEFAULT_FETCH_IMAGE, None),
            "0: no node cache"
        );
        assert_eq!(parse(&[("storageInitializer", r#"{"memoryLimit": "1Gi"}"#)]), Platform::default().initializer);
        assert_eq!(parse(&[("storageInitializer", r#"{"image": ""}"#)]), Platform::default().initializer);
        assert_eq!(
            parse(&[
                ("storageInitializer", r#"{"image": "kserve/storage-initializer:v0.15.2"}"#),
                ("skiff", r#"{"fetchImage": "fetch:2"}"#)
            ]),
            Initializer::Kserve { image: "kserve/storage-initializer:v0.15.2".into() }
        );
        let err = Platform::from_data(Some(&data(&[("skiff", r#"{"nodeCachePort": 70000}"#)]))).unwrap_err();
        assert!(err.to_string().starts_with("config map inferenceservice-config, key skiff:"), "{err}");
        let err = Platform::from_data(Some(&data(&[("skiff", r#"{"nodeCacheService": "models"}"#)]))).unwrap_err();
        assert!(err.to_string().contains("nodeCacheService must be <namespace>/<name>"), "{err}");
    }

    #[test]
    fn the_router_is_its_services_dns_name_unless_an_address_is_given() {
        assert_eq!(Platform::default().router_host(), "skiff-router.skiff-system.svc.cluster.local");
        let other = Platform::from_data(Some(&data(&[("skiff", r#"{"routerService": "ingress/edge"}"#)]))).unwrap();
        assert_eq!(other.router_host(), "edge.ingress.svc.cluster.local");
        let direct = Platform::from_data(Some(&data(&[("skiff", r#"{"routerAddress": "10.244.0.7:8080"}"#)]))).unwrap();
        assert_eq!(direct.router_host(), "10.244.0.7:8080");
        for bad in [r#"{"routerService": "skiff-router"}"#, r#"{"routerAddress": "http://10.0.0.1"}"#] {
            let err = Platform::from_data(Some(&data(&[("skiff", bad)]))).unwrap_err().to_string();
            assert!(err.starts_with("config map inferenceservice-config, key skiff:"), "{err}");
        }
    }

    #[test]
    fn logger_allowed_hosts_open_the_sink_rule_and_the_routers_namespace_and_address_are_protected() {
        let default = Platform::default().logger_sinks;
        assert!(default.check_url("http://127.0.0.1:8081/").unwrap_err().contains("loopback"));
        assert!(default.check_url("http://skiff-activator.skiff-system.svc/").unwrap_err().contains("own components"));
        default.check_url("http://sink.monitoring.svc/").unwrap();
        let p = Platform::from_data(Some(&data(&[
            ("logger", r#"{"image": "kserve/agent", "allowedHosts": ["127.0.0.1", "*.skiff-system.svc"]}"#),
            ("skiff", r#"{"routerService": "edge/router", "routerAddress": "10.244.0.7:8080"}"#),
        ])))
        .unwrap();
        p.logger_sinks.check_url("http://127.0.0.1:9/").unwrap();
        p.logger_sinks.check_url("http://skiff-web.skiff-system.svc/").unwrap();
        assert!(
            p.logger_sinks.check_url("http://router.edge.svc.cluster.local/").unwrap_err().contains("own components")
        );
        assert!(p.logger_sinks.check_url("http://10.244.0.7:8080/").unwrap_err().contains("own components"));
        let err = Platform::from_data(Some(&data(&[("logger", r#"{"allowedHosts": ["10.0.0.0/40"]}"#)]))).unwrap_err();
        assert!(err.to_string().starts_with("config map inferenceservice-config, key logger: allowedHosts:"), "{err}");
    }

    #[test]
    fn errors_name_the_key() {
        let err = Platform::from_data(Some(&data(&[("ingress", "{not json")]))).unwrap_err().to_string();
        assert!(err.starts_with("config map inferenceservice-config, key ingress:"), "{err}");
        let err = Platform::from_data(Some(&data(&[("autoscaler", r#"{"initial-scale": "0"}"#)]))).unwrap_err();
        assert!(err.to_string().contains("key autoscaler"), "{err}");
        let err = Platform::from_data(Some(&data(&[("skiff", r#"{"allowHostPath": "no"}"#)]))).unwrap_err();
        assert!(err.to_string().starts_with("config map inferenceservice-config, key skiff:"), "{err}");
    }
}
