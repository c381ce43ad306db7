//! The app's own sampling, the thin shell around [`History`]: one task, started with the app,
//! every [`INTERVAL`] lists every InferenceService from the backend (ready replicas per revision)
//! and, unless Prometheus has the traffic, reads Skiff's `/metrics` once through a [`Scrape`]
//! (the router's counters of every service), and records one point per revision, whoever is
//! looking.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::Panel;
use super::history::{History, INTERVAL, Observation, RevisionKey};
use super::prometheus::Prometheus;
use super::text::all_counters;
use crate::backend::Backend;
use crate::error::Result;

/// Reads Skiff's metrics text (the router's and the activator's).
#[async_trait]
pub trait Scrape: Send + Sync + 'static {
    /// The current text exposition.
    async fn scrape(&self) -> Result<String>;
}

/// Every revision's history, and where traffic figures come from.
pub struct Sampler {
    backend: Arc<dyn Backend>,
    scrape: Option<Arc<dyn Scrape>>,
    prometheus: Option<Prometheus>,
    history: Mutex<History>,
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The panels whose figures come from the router's traffic.
const TRAFFIC: [&str; 5] = ["rate", "errors", "p50", "p99", "inflight"];

impl Sampler {
    /// Samples replicas from `backend`; traffic from `prometheus` when set, else from `scrape`.
    pub fn new(
        backend: Arc<dyn Backend>,
        scrape: Option<Arc<dyn Scrape>>,
        prometheus: Option<Prometheus>,
    ) -> Arc<Sampler> {
        Arc::new(Sampler { backend, scrape, prometheus, history: Mutex::new(History::default()) })
    }

    /// Where traffic figures come from, for the page.
    pub fn source(&self) -> &'static str {
        match (&self.prometheus, &self.scrape) {
            (Some(_), _) => "Prometheus (METRICS_SOURCE=prometheus); replicas and cold starts from this app's history",
            (None, Some(_)) => "the router's /metrics, sampled by this app every 5 s for every revision, kept an hour",
            (None, None) => "nothing (set PROMETHEUS_URL)",
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().expect("history lock")
    }

    /// The panels of a service over the last `window`.
    pub async fn panels(&self, namespace: &str, name: &str, window: Duration) -> Result<Vec<Panel>> {
        let end = unix_now();
        let mut start = end - window.as_secs_f64();
        let (mut panels, first) = {
            let history = self.lock();
            (history.panels(namespace, name, start), history.first())
        };
        if self.prometheus.is_none() {
            // The time axis begins where the app's knowledge does.
            start = start.max(first.unwrap_or(end));
        }
        match &self.prometheus {
            Some(prometheus) => {
                let traffic = prometheus.traffic(namespace, name, window).await?;
                panels.retain(|p| !TRAFFIC.contains(&p.id));
                panels.splice(0..0, traffic);
            }
            None if self.scrape.is_none() => {
                for panel in panels.iter_mut().filter(|p| TRAFFIC.contains(&p.id)) {
                    panel.series.clear();
                }
            }
            None => {}
        }
        for panel in &mut panels {
            (panel.start, panel.end) = (start, end);
        }
        Ok(panels)
    }

    /// Samples every revision every [`INTERVAL`], until the task is dropped.
    pub async fn run(self: Arc<Self>) {
        let mut interval = tokio::time::interval(INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            self.sample_once().await;
        }
    }

    async fn sample_once(&self) {
        let services = match self.backend.list_all().await {
            Ok(services) => services,
            Err(error) => {
                tracing::debug!(%error, "cannot list InferenceServices to sample");
                return;
            }
        };
        let text = match (&self.prometheus, &self.scrape) {
            (None, Some(scrape)) => match scrape.scrape().await {
                Ok(text) => Some(text),
                Err(error) => {
                    tracing::debug!(%error, "cannot scrape Skiff's metrics");
                    None
                }
            },
            _ => None,
        };
        let mut counters = text.as_deref().map(all_counters);
        let mut seen = Vec::new();
        for service in services {
            let qualified = format!("{}/{}", service.namespace, service.name);
            for revision in service.revisions {
                let counters = counters
                    .as_mut()
                    .map(|c| c.remove(&(qualified.clone(), revision.name.clone())).unwrap_or_default());
                let key = RevisionKey {
                    namespace: service.namespace.clone(),
                    service: service.name.clone(),
                    revision: revision.name,
                };
                seen.push(Observation { key, ready: revision.ready.unwrap_or(0), counters });
            }
        }
        let no_room = self.lock().record(unix_now(), seen);
        if no_room > 0 {
            tracing::warn!(no_room, "metrics history full: revisions past the bound are not sampled");
        }
    }
}
