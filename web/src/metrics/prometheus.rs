//! Traffic panels from a Prometheus server that scrapes Skiff's router (`query_range`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

use super::text::{DURATION_BUCKETS, IN_FLIGHT, REQUESTS};
use super::{Panel, Series, panel};
use crate::error::{Error, Result};

/// How long a query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// A Prometheus server.
#[derive(Clone)]
pub struct Prometheus {
    url: String,
    client: Client<HttpConnector, Empty<Bytes>>,
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<Data>,
}

#[derive(Deserialize)]
struct Data {
    result: Vec<Matrix>,
}

#[derive(Deserialize)]
struct Matrix {
    metric: std::collections::BTreeMap<String, String>,
    values: Vec<(f64, String)>,
}

/// The PromQL of each traffic panel for the service `namespace/name`.
pub fn queries(service: &str) -> [(&'static str, String); 5] {
    let selector = format!("service=\"{}\"", service.replace('\\', "\\\\").replace('"', "\\\""));
    let rate = |extra: &str| format!("sum by (revision) (rate({REQUESTS}{{{selector}{extra}}}[30s]))");
    let quantile = |q: f64| {
        format!("histogram_quantile({q}, sum by (revision, le) (rate({DURATION_BUCKETS}{{{selector}}}[30s]))) * 1000")
    };
    [
        ("rate", rate("")),
        ("errors", rate(",status=~\"5..\"")),
        ("p50", quantile(0.5)),
        ("p99", quantile(0.99)),
        ("inflight", format!("sum by (revision) ({IN_FLIGHT}{{{selector}}})")),
    ]
}

/// Query-string escaping (RFC 3986 unreserved characters pass).
fn escape(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Prometheus {
    /// The server at `url` (`http://host:port`).
    pub fn new(url: &str) -> Prometheus {
        Prometheus {
            url: url.trim_end_matches('/').to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// The five traffic panels of `namespace/name` over the last `window`.
    pub async fn traffic(&self, namespace: &str, name: &str, window: Duration) -> Result<Vec<Panel>> {
        let end = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let start = end.saturating_sub(window.as_secs());
        let step = (window.as_secs() / 150).max(2);
        let mut panels = Vec::new();
        for (id, query) in queries(&format!("{namespace}/{name}")) {
            let url =
                format!("{}/api/v1/query_range?query={}&start={start}&end={end}&step={step}", self.url, escape(&query));
            let mut panel = panel(id);
            panel.series = self.matrix(&url).await?;
            panels.push(panel);
        }
        Ok(panels)
    }

    async fn matrix(&self, url: &str) -> Result<Vec<Series>> {
        let unavailable = |e: String| Error::Unavailable(format!("Prometheus at {}: {e}", self.url));
        let uri = url.parse().map_err(|e| unavailable(format!("{e}")))?;
        let response = tokio::time::timeout(QUERY_TIMEOUT, self.client.get(uri))
            .await
            .map_err(|_| unavailable("no answer in 10 s".into()))?
            .map_err(|e| unavailable(e.to_string()))?;
        let body = response.into_body().collect().await.map_err(|e| unavailable(e.to_string()))?.to_bytes();
        let answer: Answer = serde_json::from_slice(&body).map_err(|e| unavailable(format!("not its API: {e}")))?;
        if answer.status != "success" {
            return Err(unavailable(answer.error.unwrap_or(answer.status)));
        }
        Ok(answer
            .data
            .map(|d| d.result)
            .unwrap_or_default()
            .into_iter()
            .map(|m| Series {
                label: m.metric.get("revision").cloned().unwrap_or_default(),
                points: m
                    .values
                    .into_iter()
                    .filter_map(|(t, v)| v.parse::<f64>().ok().filter(|v| v.is_finite()).map(|v| [t, v]))
                    .collect(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_select_the_service_and_escape_it() {
        let [(_, rate), (_, errors), (_, p50), _, (_, inflight)] = queries("default/iris");
        assert_eq!(rate, r#"sum by (revision) (rate(skiff_router_requests_total{service="default/iris"}[30s]))"#);
        assert!(errors.contains(r#"status=~"5..""#));
        assert!(p50.starts_with("histogram_quantile(0.5, sum by (revision, le)"));
        assert!(inflight.contains("skiff_router_inflight_requests"));
        assert!(queries("a\"b")[0].1.contains(r#"service="a\"b""#));
        assert_eq!(escape("a b{c}"), "a%20b%7Bc%7D");
    }
}
