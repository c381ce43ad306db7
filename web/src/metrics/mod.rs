//! The metrics tab: request rate, errors, p50 and p99 latency, in-flight requests, replicas over
//! time and cold starts, per revision, drawn as charts in the page without Grafana.
//!
//! The app keeps an hour of every revision's history from the moment it starts, whoever is
//! looking: [`sampler`] (one background task, the I/O) records into [`history`] (the pure ring of
//! points), and [`downsample`] thins a line for a chart. Rates and latencies come from Prometheus
//! when `METRICS_SOURCE` is `prometheus` ([`prometheus`]), otherwise from Skiff's own `/metrics`
//! sampled by the app ([`text`]; on a cluster the router pods', [`router_pods`]). Replicas and
//! cold starts (a revision going from zero ready replicas to one or more) always come from the
//! history, sampled from the backend, which knows them in both modes.

pub mod downsample;
pub mod history;
pub mod prometheus;
pub mod router_pods;
pub mod sampler;
pub mod text;

use serde::Serialize;

/// One chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Panel {
    /// Stable id (`rate`, `errors`, `p50`, `p99`, `inflight`, `replicas`, `coldstarts`).
    pub id: &'static str,
    /// Title shown above it.
    pub title: &'static str,
    /// Unit of the values.
    pub unit: &'static str,
    /// One line per revision that has points in the window.
    pub series: Vec<Series>,
    /// The window shown, unix seconds: the time axis runs from `start` to `end`.
    pub start: f64,
    /// Its end (now, when asked).
    pub end: f64,
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    /// The revision (or what the line stands for).
    pub label: String,
    /// `[unix seconds, value]`.
    pub points: Vec<[f64; 2]>,
}

/// The panels of the tab, in order: `(id, title, unit)`.
pub const PANELS: [(&str, &str, &str); 7] = [
    ("rate", "Requests", "req/s"),
    ("errors", "Errors (5xx)", "req/s"),
    ("p50", "Latency p50", "ms"),
    ("p99", "Latency p99", "ms"),
    ("inflight", "In-flight requests", "requests"),
    ("replicas", "Ready replicas", "replicas"),
    ("coldstarts", "Cold starts", "starts"),
];

/// An empty panel of the given id.
pub fn panel(id: &str) -> Panel {
    let (id, title, unit) = PANELS.iter().copied().find(|(i, _, _)| *i == id).unwrap_or(PANELS[0]);
    Panel { id, title, unit, series: Vec::new(), start: 0.0, end: 0.0 }
}
