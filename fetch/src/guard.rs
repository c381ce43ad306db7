//! Which stores the node cache reaches for a caller. It runs on the node, so a model
//! pod could otherwise point it at what only the node reaches: its loopback services, or a
//! link-local address (a cloud's metadata service, with the node's identity). Those are refused
//! at every hop: the URI's own host before anything is asked ([`refused_hosts`]), then, on every
//! connection the node cache makes for a caller ([`Reach::NotTheNode`]), each redirect's target
//! and every address a name resolves to. The caller then fetches directly, from its own network.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use object_store::ClientOptions;
use object_store::client::{HttpClient, HttpConnector};

use crate::env::StoreEnv;
use crate::uri::{Location, ToStore};

/// How long connecting to a store may take.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The most redirects one request follows (reqwest's own default).
const MAX_REDIRECTS: usize = 10;

/// The addresses a fetch's connections may reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Reach {
    /// Any: a fetch for the process itself (`skiff-fetch` in the model pod's own network,
    /// `skiff up`), which may reach whatever that process reaches anyway.
    #[default]
    Anywhere,
    /// None of the node's own or link-local addresses, at any hop (the node cache, for a caller).
    NotTheNode,
}

/// A connection refused for a caller: the host, and the address a name resolved to.
#[derive(Debug)]
pub struct Refused {
    /// The host (with the address it resolved to, for a name).
    pub host: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the node cache does not reach {} for a caller", self.host)
    }
}

impl std::error::Error for Refused {}

/// The [`Refused`] among `error`'s causes, if any.
pub fn refused_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(refused) = error.downcast_ref::<Refused>() {
            return Some(refused);
        }
        cause = error.source();
    }
    None
}

/// `builder` with its connections held to `reach`: for [`Reach::NotTheNode`], each redirect's
/// target is checked before it is followed and every name's addresses before a connection.
pub fn hold(builder: reqwest::ClientBuilder, reach: Reach) -> reqwest::ClientBuilder {
    match reach {
        Reach::Anywhere => builder,
        Reach::NotTheNode => builder.redirect(redirects()).dns_resolver(Arc::new(Resolver)),
    }
}

/// Follows up to [`MAX_REDIRECTS`] redirects, none to a host the node cache does not reach.
fn redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        let host = attempt.url().host_str().map(unbracket).unwrap_or_default().to_owned();
        if node_only(&host) {
            let port = attempt.url().port_or_known_default().map_or(String::new(), |p| format!(":{p}"));
            return attempt.error(Refused { host: format!("{host}{port} (a redirect's target)") });
        }
        attempt.follow()
    })
}

/// Resolves names with the system's resolver and refuses a name with any address the node
/// cache does not reach (a name that resolves to the node's loopback or a metadata address).
struct Resolver;

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(resolve(name.as_str().to_owned()))
    }
}

async fn resolve(host: String) -> Result<reqwest::dns::Addrs, Box<dyn std::error::Error + Send + Sync>> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
    if let Some(address) = addresses.iter().find(|a| node_only_ip(a.ip())) {
        return Err(Box::new(Refused { host: format!("{host} (it resolves to {})", address.ip()) }));
    }
    Ok(Box::new(addresses.into_iter()))
}

/// `object_store`'s HTTP client for the node cache: Skiff's connect timeout, no overall one (as
/// [`crate::remote::store`] sets), and the checks of [`hold`].
#[derive(Debug)]
pub struct Connector {
    /// Whether certificates go unchecked (`S3_VERIFY_SSL=0`).
    pub insecure: bool,
}

impl HttpConnector for Connector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .danger_accept_invalid_certs(self.insecure)
            .no_gzip()
            .no_brotli()
            .no_zstd()
            .no_deflate();
        let client = hold(builder, Reach::NotTheNode)
            .build()
            .map_err(|e| object_store::Error::Generic { store: "node cache", source: Box::new(e) })?;
        Ok(HttpClient::new(client))
    }
}

fn unbracket(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Every host the fetch of `uri` with `env` would connect to that the node must not reach for a
/// caller; empty when none.
pub fn refused_hosts(uri: &(impl ToStore + ?Sized), env: &StoreEnv) -> Vec<String> {
    let Ok(uri) = uri.to_store() else { return Vec::new() };
    let mut urls: Vec<&str> = Vec::new();
    match uri.location() {
        Location::S3 { .. } => urls.extend(env.s3.endpoint.as_deref()),
        Location::Gcs { .. } => urls.extend(env.gcs.emulator.as_deref()),
        Location::Hf { .. } => urls.push(&env.hf.endpoint),
        Location::Http { .. } => urls.push(uri.as_str()),
    }
    urls.into_iter()
        .filter_map(|u| url::Url::parse(u).ok())
        .filter_map(|u| u.host_str().map(|h| unbracket(h).to_owned()))
        .filter(|host| node_only(host))
        .collect()
}

/// Whether `host` names the node itself or its link-local neighbours.
fn node_only(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(node_only_ip)
}

/// Whether `ip` is the node itself or one of its link-local neighbours.
fn node_only_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => ip.is_loopback() || ip.is_link_local() || ip.is_unspecified(),
        IpAddr::V6(ip) => {
            ip.is_loopback() || ip.is_unspecified() || (ip.segments()[0] & 0xffc0) == 0xfe80 || {
                ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback() || v4.is_link_local() || v4.is_unspecified())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> StoreEnv {
        StoreEnv::from_lookup(|name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())).unwrap()
    }

    #[test]
    fn the_nodes_own_and_link_local_addresses_are_refused() {
        let s3 = |endpoint: &str| refused_hosts("s3://models/iris", &env(&[("AWS_ENDPOINT_URL", endpoint)]));
        assert_eq!(s3("http://127.0.0.1:9000"), ["127.0.0.1"]);
        assert_eq!(s3("http://localhost:9000"), ["localhost"]);
        assert_eq!(s3("http://169.254.169.254"), ["169.254.169.254"]);
        assert_eq!(s3("http://[::1]:9000"), ["::1"]);
        assert_eq!(s3("http://[::ffff:127.0.0.1]:9000"), ["::ffff:7f00:1"]);
        assert!(s3("http://10.244.0.1:9000").is_empty());
        assert!(s3("https://minio.storage.svc:9000").is_empty());
        assert!(refused_hosts("s3://models/iris", &env(&[])).is_empty(), "AWS itself");
        assert_eq!(refused_hosts("https://127.0.0.1:8/m.onnx", &env(&[])), ["127.0.0.1"]);
        assert_eq!(refused_hosts("hf://org/m", &env(&[("HF_ENDPOINT", "http://0.0.0.0:1")])), ["0.0.0.0"]);
        assert_eq!(refused_hosts("gs://b/m", &env(&[("STORAGE_EMULATOR_HOST", "127.0.0.1:4443")])), ["127.0.0.1"]);
        assert!(refused_hosts("hf://org/m", &env(&[])).is_empty());
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_the_node_is_refused() {
        use reqwest::dns::Resolve;
        let refused = match Resolver.resolve("localhost".parse().unwrap()).await {
            Ok(addresses) => panic!("localhost resolved to {:?}", addresses.collect::<Vec<_>>()),
            Err(error) => error,
        };
        let refused = refused_in(refused.as_ref()).expect("a refusal");
        assert!(refused.host.starts_with("localhost (it resolves to "), "{}", refused.host);
    }
}
