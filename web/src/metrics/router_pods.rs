//! On a cluster without Prometheus: the router pods' own `/metrics`, each ready endpoint of the
//! router's Service (from its EndpointSlices, port `admin`) scraped and the texts put together (the
//! sampler sums a revision's series across pods).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::ListParams;

use super::sampler::Scrape;
use crate::error::{Error, Result};

/// How long one pod's scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
/// The port of the router's Service that serves `/metrics`.
const METRICS_PORT: &str = "admin";

/// The router's pods, found through its Service's EndpointSlices.
pub struct RouterPods {
    slices: Api<EndpointSlice>,
    service: String,
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl RouterPods {
    /// The pods behind `service` (`namespace/name`, e.g. `skiff-system/skiff-router`).
    pub fn new(kube: kube::Client, service: &str) -> Result<RouterPods> {
        let (namespace, name) = service
            .split_once('/')
            .ok_or_else(|| Error::BadRequest(format!("SKIFF_ROUTER_SERVICE: {service:?} is not namespace/name")))?;
        Ok(RouterPods {
            slices: Api::namespaced(kube, namespace),
            service: name.to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        })
    }

    async fn scrape_one(&self, url: String) -> Option<String> {
        let uri = url.parse().ok()?;
        let response = tokio::time::timeout(SCRAPE_TIMEOUT, self.client.get(uri)).await.ok()?.ok()?;
        let body = tokio::time::timeout(SCRAPE_TIMEOUT, response.into_body().collect()).await.ok()?.ok()?;
        String::from_utf8(body.to_bytes().to_vec()).ok()
    }
}

/// `http://address:port/metrics` of every ready endpoint in `slices`.
pub fn metrics_urls(slices: &[EndpointSlice]) -> Vec<String> {
    let mut urls = Vec::new();
    for slice in slices {
        let Some(port) =
            slice.ports.iter().flatten().find(|p| p.name.as_deref() == Some(METRICS_PORT)).and_then(|p| p.port)
        else {
            continue;
        };
        for endpoint in &slice.endpoints {
            if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                continue;
            }
            for address in &endpoint.addresses {
                let host = if address.contains(':') { format!("[{address}]") } else { address.clone() };
                urls.push(format!("http://{host}:{port}/metrics"));
            }
        }
    }
    urls
}

#[async_trait]
impl Scrape for RouterPods {
    async fn scrape(&self) -> Result<String> {
        let selector = ListParams::default().labels(&format!("kubernetes.io/service-name={}", self.service));
        let slices = self.slices.list(&selector).await?;
        let urls = metrics_urls(&slices.items);
        let texts = futures::future::join_all(urls.into_iter().map(|url| self.scrape_one(url))).await;
        Ok(texts.into_iter().flatten().collect::<Vec<_>>().join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

    use super::*;

    #[test]
    fn every_ready_router_pod_is_scraped_on_its_admin_port() {
        let endpoint = |address: &str, ready| Endpoint {
            addresses: vec![address.into()],
            conditions: Some(EndpointConditions { ready: Some(ready), ..Default::default() }),
            ..Default::default()
        };
        let slice = EndpointSlice {
            address_type: "IPv4".into(),
            endpoints: vec![endpoint("10.244.0.5", true), endpoint("10.244.0.6", false), endpoint("10.244.0.7", true)],
            ports: Some(vec![
                EndpointPort { name: Some("http".into()), port: Some(8080), ..Default::default() },
                EndpointPort { name: Some("admin".into()), port: Some(9090), ..Default::default() },
            ]),
            ..Default::default()
        };
        assert_eq!(
            metrics_urls(&[slice]),
            ["http://10.244.0.5:9090/metrics", "http://10.244.0.7:9090/metrics"],
            "a pod that is not ready is left out"
        );
    }
}
