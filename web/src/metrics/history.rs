//! A service's sampled history (bounded) and the panels computed from it: rates and latency
//! quantiles from the change of counters between samples, replicas and cold starts from the
//! backend's view.

use std::collections::{BTreeMap, VecDeque};

use super::text::{RevisionCounters, quantile};
use super::{Panel, Series, panel};

/// Samples kept per service (30 minutes at one every 2 s).
pub const MAX_SAMPLES: usize = 900;

/// What was seen of one service at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Unix seconds.
    pub at: f64,
    /// Ready replicas by revision.
    pub ready: BTreeMap<String, u32>,
    /// Router counters by revision (absent when the app reads Prometheus instead).
    pub counters: BTreeMap<String, RevisionCounters>,
}

/// A bounded run of samples.
#[derive(Debug, Clone, Default)]
pub struct History {
    samples: VecDeque<Sample>,
}

impl History {
    /// Adds a sample, forgetting the oldest past [`MAX_SAMPLES`].
    pub fn push(&mut self, sample: Sample) {
        if self.samples.len() == MAX_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// Samples at or after `since` (unix seconds).
    fn since(&self, since: f64) -> impl Iterator<Item = &Sample> {
        self.samples.iter().filter(move |s| s.at >= since)
    }

    /// Ready replicas per revision over time.
    pub fn replicas(&self, since: f64) -> Panel {
        let mut lines: BTreeMap<&str, Vec<[f64; 2]>> = BTreeMap::new();
        for sample in self.since(since) {
            for (revision, ready) in &sample.ready {
                lines.entry(revision).or_default().push([sample.at, f64::from(*ready)]);
            }
        }
        with_series(panel("replicas"), lines)
    }

    /// Cold starts so far: each time a revision went from no ready replica to one or more.
    pub fn cold_starts(&self, since: f64) -> Panel {
        let mut lines: BTreeMap<&str, Vec<[f64; 2]>> = BTreeMap::new();
        let mut before: BTreeMap<&str, u32> = BTreeMap::new();
        let mut total: BTreeMap<&str, f64> = BTreeMap::new();
        for sample in self.since(since) {
            for (revision, ready) in &sample.ready {
                let count = total.entry(revision).or_default();
                if before.get(revision.as_str()) == Some(&0) && *ready > 0 {
                    *count += 1.0;
                }
                before.insert(revision, *ready);
                lines.entry(revision).or_default().push([sample.at, *count]);
            }
        }
        with_series(panel("coldstarts"), lines)
    }

    /// Rates, errors, p50, p99 and in-flight from the sampled router counters.
    pub fn traffic(&self, since: f64) -> Vec<Panel> {
        let mut lines: BTreeMap<&str, BTreeMap<&str, Vec<[f64; 2]>>> = BTreeMap::new();
        let samples: Vec<&Sample> = self.since(since).collect();
        for pair in samples.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            let seconds = after.at - before.at;
            if seconds <= 0.0 {
                continue;
            }
            for (revision, now) in &after.counters {
                let then = before.counters.get(revision).cloned().unwrap_or_default();
                let mut point = |id, value: f64| {
                    lines.entry(id).or_default().entry(revision.as_str()).or_default().push([after.at, value]);
                };
                // A counter that went down was reset (restart): count from zero.
                let delta = |now: f64, then: f64| if now >= then { now - then } else { now };
                point("rate", delta(now.requests, then.requests) / seconds);
                point("errors", delta(now.errors, then.errors) / seconds);
                point("inflight", now.in_flight);
                let buckets: Vec<(f64, f64)> = now
                    .buckets
                    .iter()
                    .map(|&(le, count)| {
                        let old = then.buckets.iter().find(|(l, _)| *l == le).map_or(0.0, |b| b.1);
                        (le, delta(count, old))
                    })
                    .collect();
                for (id, q) in [("p50", 0.5), ("p99", 0.99)] {
                    if let Some(seconds) = quantile(q, &buckets) {
                        point(id, seconds * 1000.0);
                    }
                }
            }
        }
        ["rate", "errors", "p50", "p99", "inflight"]
            .into_iter()
            .map(|id| with_series(panel(id), lines.remove(id).unwrap_or_default()))
            .collect()
    }
}

fn with_series(mut panel: Panel, lines: BTreeMap<&str, Vec<[f64; 2]>>) -> Panel {
    panel.series = lines.into_iter().map(|(label, points)| Series { label: label.to_owned(), points }).collect();
    panel
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: f64, ready: u32, requests: f64, errors: f64, fast: f64) -> Sample {
        let counters = RevisionCounters {
            requests,
            errors,
            buckets: vec![(0.001, fast), (0.1, requests), (f64::INFINITY, requests)],
            in_flight: 2.0,
        };
        Sample {
            at,
            ready: BTreeMap::from([("r1".to_owned(), ready)]),
            counters: BTreeMap::from([("r1".to_owned(), counters)]),
        }
    }

    #[test]
    fn rates_and_quantiles_come_from_the_change_between_samples() {
        let mut history = History::default();
        history.push(sample(100.0, 1, 100.0, 0.0, 100.0));
        history.push(sample(102.0, 1, 120.0, 4.0, 100.0));
        let panels = history.traffic(0.0);
        let value = |id: &str| panels.iter().find(|p| p.id == id).unwrap().series[0].points[0];
        assert_eq!(value("rate"), [102.0, 10.0]);
        assert_eq!(value("errors"), [102.0, 2.0]);
        assert_eq!(value("inflight"), [102.0, 2.0]);
        // All 20 new requests fell in (1 ms, 100 ms]: the median is half way.
        assert!((value("p50")[1] - 50.5).abs() < 1e-9, "{:?}", value("p50"));
    }

    #[test]
    fn a_restarted_counter_counts_from_zero() {
        let mut history = History::default();
        history.push(sample(0.0, 1, 500.0, 0.0, 500.0));
        history.push(sample(1.0, 1, 5.0, 0.0, 5.0));
        let rate = &history.traffic(0.0)[0].series[0].points[0];
        assert_eq!(rate[1], 5.0);
    }

    #[test]
    fn a_cold_start_is_a_revision_leaving_zero() {
        let mut history = History::default();
        for (at, ready) in [(0.0, 1), (1.0, 0), (2.0, 0), (3.0, 2), (4.0, 0), (5.0, 1)] {
            history.push(sample(at, ready, 0.0, 0.0, 0.0));
        }
        let cold = history.cold_starts(0.0);
        let last = cold.series[0].points.last().unwrap();
        assert_eq!(*last, [5.0, 2.0], "the first sample is not a start: nothing was seen before it");
        assert_eq!(history.replicas(3.0).series[0].points, vec![[3.0, 2.0], [4.0, 0.0], [5.0, 1.0]]);
    }

    #[test]
    fn the_history_is_bounded() {
        let mut history = History::default();
        for i in 0..(MAX_SAMPLES + 10) {
            history.push(Sample { at: i as f64, ..Sample::default() });
        }
        assert_eq!(history.samples.len(), MAX_SAMPLES);
        assert_eq!(history.samples.front().unwrap().at, 10.0);
    }
}
