//! Which stores the node cache reaches for a caller. It runs on the node's network, so a model
//! pod could otherwise point it at what only the node reaches: its loopback services, or a
//! link-local address (a cloud's metadata service, with the node's identity). Those are refused
//! (the caller then fetches directly, from its own network). A name that resolves to such an
//! address is not caught here: that is left to the network's own rules.

use std::net::IpAddr;

use crate::env::StoreEnv;
use crate::uri::{self, Location};

/// Every host the fetch of `uri` with `env` would connect to that the node must not reach for a
/// caller; empty when none.
pub fn refused_hosts(uri: &str, env: &StoreEnv) -> Vec<String> {
    let mut urls: Vec<&str> = Vec::new();
    match uri::parse(uri) {
        Ok(Location::S3 { .. }) => urls.extend(env.s3.endpoint.as_deref()),
        Ok(Location::Gcs { .. }) => urls.extend(env.gcs.emulator.as_deref()),
        Ok(Location::Hf { .. }) => urls.push(&env.hf.endpoint),
        Ok(Location::Http { .. }) => urls.push(uri),
        Err(_) => {}
    }
    urls.into_iter()
        .filter_map(|u| url::Url::parse(u).ok())
        .filter_map(|u| u.host_str().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned()))
        .filter(|host| node_only(host))
        .collect()
}

/// Whether `host` names the node itself or its link-local neighbours.
fn node_only(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_link_local() || ip.is_unspecified(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.is_unspecified() || (ip.segments()[0] & 0xffc0) == 0xfe80 || {
                ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback() || v4.is_link_local())
            }
        }
        Err(_) => false,
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
}
