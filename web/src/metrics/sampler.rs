//! The app's own sampling: while someone looks at a service's metrics (and ten minutes after),
//! every two seconds it records the service's ready replicas from the backend and, without
//! Prometheus, the router's counters from a [`Scrape`] of Skiff's `/metrics`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::history::{History, Sample};
use super::prometheus::Prometheus;
use super::text::service_counters;
use super::{Panel, panel};
use crate::backend::Backend;
use crate::error::Result;

/// How often a watched service is sampled.
pub const INTERVAL: Duration = Duration::from_secs(2);
/// How long a service stays watched after its metrics were last asked for.
const WATCH_FOR: Duration = Duration::from_secs(600);
/// Services watched at most; past it the one asked for longest ago is forgotten.
const MAX_WATCHED: usize = 500;

/// Reads Skiff's metrics text (the router's and the activator's).
#[async_trait]
pub trait Scrape: Send + Sync + 'static {
    /// The current text exposition.
    async fn scrape(&self) -> Result<String>;
}

struct Watched {
    asked: Instant,
    history: History,
}

/// Forgets the services asked for longest ago until fewer than `max` are watched.
fn make_room<K: Clone + Eq + std::hash::Hash>(watched: &mut HashMap<K, Watched>, max: usize) {
    while watched.len() >= max.max(1) {
        let Some(oldest) = watched.iter().min_by_key(|(_, w)| w.asked).map(|(k, _)| k.clone()) else { return };
        watched.remove(&oldest);
    }
}

/// The metrics of the services being looked at.
pub struct Sampler {
    backend: Arc<dyn Backend>,
    scrape: Option<Arc<dyn Scrape>>,
    prometheus: Option<Prometheus>,
    watched: Mutex<HashMap<(String, String), Watched>>,
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

impl Sampler {
    /// Samples replicas from `backend`; traffic from `prometheus` when set, else from `scrape`.
    pub fn new(
        backend: Arc<dyn Backend>,
        scrape: Option<Arc<dyn Scrape>>,
        prometheus: Option<Prometheus>,
    ) -> Arc<Sampler> {
        Arc::new(Sampler { backend, scrape, prometheus, watched: Mutex::new(HashMap::new()) })
    }

    /// Where traffic figures come from, for the page.
    pub fn source(&self) -> &'static str {
        match (&self.prometheus, &self.scrape) {
            (Some(_), _) => "Prometheus",
            (None, Some(_)) => "the router's /metrics, sampled every 2 s",
            (None, None) => "nothing (set PROMETHEUS_URL)",
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Watched>> {
        self.watched.lock().expect("sampler lock")
    }

    /// The panels of a service over the last `window`; starts watching it.
    pub async fn panels(&self, namespace: &str, name: &str, window: Duration) -> Result<Vec<Panel>> {
        let since = unix_now() - window.as_secs_f64();
        let (history_panels, replicas, cold) = {
            let mut watched = self.lock();
            let key = (namespace.to_owned(), name.to_owned());
            if !watched.contains_key(&key) {
                make_room(&mut watched, MAX_WATCHED);
            }
            let entry =
                watched.entry(key).or_insert_with(|| Watched { asked: Instant::now(), history: History::default() });
            entry.asked = Instant::now();
            (entry.history.traffic(since), entry.history.replicas(since), entry.history.cold_starts(since))
        };
        let traffic = match &self.prometheus {
            Some(prometheus) => prometheus.traffic(namespace, name, window).await?,
            None if self.scrape.is_some() => history_panels,
            None => ["rate", "errors", "p50", "p99", "inflight"].into_iter().map(panel).collect(),
        };
        Ok(traffic.into_iter().chain([replicas, cold]).collect())
    }

    /// Samples every watched service every [`INTERVAL`], until the task is dropped.
    pub async fn run(self: Arc<Self>) {
        let mut interval = tokio::time::interval(INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            self.sample_once().await;
        }
    }

    async fn sample_once(&self) {
        let services: Vec<(String, String)> = {
            let mut watched = self.lock();
            watched.retain(|_, w| w.asked.elapsed() < WATCH_FOR);
            watched.keys().cloned().collect()
        };
        if services.is_empty() {
            return;
        }
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
        for (namespace, name) in services {
            let Ok(view) = self.backend.get(&namespace, &name).await else { continue };
            let sample = Sample {
                at: unix_now(),
                ready: view.revisions.iter().map(|r| (r.name.clone(), r.ready.unwrap_or(0))).collect(),
                counters: text
                    .as_deref()
                    .map(|t| service_counters(t, &format!("{namespace}/{name}")))
                    .unwrap_or_default(),
            };
            if let Some(watched) = self.lock().get_mut(&(namespace, name)) {
                watched.history.push(sample);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_asked_for_longest_ago_makes_room() {
        let start = Instant::now();
        let mut watched: HashMap<u32, Watched> = (0..3)
            .map(|i| {
                (i, Watched { asked: start + Duration::from_secs(u64::from(10 - i)), history: History::default() })
            })
            .collect();
        make_room(&mut watched, 3);
        assert_eq!(watched.len(), 2);
        assert!(!watched.contains_key(&2), "2 was asked for first");
    }
}
