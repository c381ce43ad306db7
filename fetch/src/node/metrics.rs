//! The node cache's metrics, served at `GET /metrics` (Prometheus' text format): the model
//! requests by outcome, the bytes downloaded from stores and the bytes of files sent to pods.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::error::Error;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// The node cache's counters and the registry that exposes them.
pub struct Metrics {
    registry: Registry,
    requests: Family<OutcomeLabels, Counter>,
    downloaded: Counter,
    sent: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<OutcomeLabels, Counter>::default();
        let (downloaded, sent) = (Counter::default(), Counter::default());
        registry.register(
            "skiff_model_cache_requests",
            "Model requests by outcome: hit (in the cache), download, refused (by the node cache), \
             denied or not_found (the store's answer to the caller's credentials), error",
            requests.clone(),
        );
        registry.register(
            "skiff_model_cache_downloaded_bytes",
            "Bytes downloaded from stores into the cache",
            downloaded.clone(),
        );
        registry.register("skiff_model_cache_sent_bytes", "Bytes of model files sent to pods", sent.clone());
        Metrics { registry, requests, downloaded, sent }
    }
}

impl Metrics {
    /// A model request answered from the cache (`downloaded` 0) or after a download.
    pub fn answered(&self, downloaded: u64) {
        let outcome = if downloaded == 0 { "hit" } else { "download" };
        self.requests.get_or_create(&OutcomeLabels { outcome }).inc();
        self.downloaded.inc_by(downloaded);
    }

    /// A model request that failed with the fetcher's `error`.
    pub fn failed(&self, error: &Error) {
        let outcome = match error {
            Error::Denied { .. } => "denied",
            Error::NotFound { .. } => "not_found",
            Error::Unreachable { .. } => "refused",
            _ => "error",
        };
        self.requests.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// A model request the node cache refused itself (a bad request, an endpoint it will not reach).
    pub fn refused(&self) {
        self.requests.get_or_create(&OutcomeLabels { outcome: "refused" }).inc();
    }

    /// A file of `bytes` sent to a pod.
    pub fn sent(&self, bytes: u64) {
        self.sent.inc_by(bytes);
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_bytes_are_counted() {
        let metrics = Metrics::default();
        metrics.answered(600);
        metrics.answered(0);
        metrics.answered(0);
        metrics.failed(&Error::Denied { uri: "s3://b/m".into(), cause: "no".into() });
        metrics.refused();
        metrics.sent(600);
        let text = metrics.encode();
        for line in [
            "skiff_model_cache_requests_total{outcome=\"download\"} 1",
            "skiff_model_cache_requests_total{outcome=\"hit\"} 2",
            "skiff_model_cache_requests_total{outcome=\"denied\"} 1",
            "skiff_model_cache_requests_total{outcome=\"refused\"} 1",
            "skiff_model_cache_downloaded_bytes_total 600",
            "skiff_model_cache_sent_bytes_total 600",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
