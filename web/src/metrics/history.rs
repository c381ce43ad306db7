//! The history the app keeps of every revision, whoever is looking: one point every
//! [`INTERVAL`] in a ring of [`POINTS_PER_REVISION`] (one hour) per revision, for at most
//! [`MAX_REVISIONS`] revisions. A point holds what the charts draw, computed when it is recorded
//! (rates and interpolated quantiles from the change of the router's counters since the last
//! sample, ready replicas, whether the revision just left zero), so memory does not depend on
//! the counters: [`Point`] is 48 bytes, a full ring about 35 KB, all rings at most about 35 MB.
//! A revision that is gone is forgotten once its newest point is older than the ring is long:
//! then it can no longer be in any window the page asks for.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::downsample::{Fold, MAX_POINTS, downsample};
use super::text::{RevisionCounters, quantile};
use super::{Panel, Series, panel};

/// How often every revision is sampled.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// How long a revision's history reaches back.
pub const KEPT: Duration = Duration::from_secs(3600);
/// Points per revision: [`KEPT`] at one every [`INTERVAL`].
pub const POINTS_PER_REVISION: usize = (KEPT.as_secs() / INTERVAL.as_secs()) as usize;
/// Revisions with a history at most; past it a new revision takes the place of the one seen
/// longest ago, if that one was not seen in the same pass (else the new one waits).
pub const MAX_REVISIONS: usize = 1000;

/// A revision of a service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RevisionKey {
    /// Namespace.
    pub namespace: String,
    /// The InferenceService.
    pub service: String,
    /// The revision, `<service>-predictor-NNNNN`.
    pub revision: String,
}

/// What a pass saw of one revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Which.
    pub key: RevisionKey,
    /// Its ready replicas.
    pub ready: u32,
    /// The router's counters of it (zero when the router has none yet); `None` when traffic is
    /// not sampled (Prometheus has it) or the scrape failed.
    pub counters: Option<RevisionCounters>,
}

/// Traffic between two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// Requests per second.
    pub rate: f32,
    /// 5xx answers per second.
    pub errors: f32,
    /// Requests in flight at the sample.
    pub in_flight: f32,
    /// Median latency in ms (none without requests).
    pub p50: Option<f32>,
    /// 99th percentile latency in ms.
    pub p99: Option<f32>,
}

/// One revision at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Unix seconds.
    pub at: f64,
    /// Ready replicas.
    pub ready: u32,
    /// It went from no ready replica to one or more since the point before.
    pub cold_start: bool,
    /// Traffic since the sample before; `None` when not sampled.
    pub traffic: Option<Traffic>,
}

/// The ring of one revision and the counters its next point is computed from.
#[derive(Debug, Clone)]
struct Ring {
    points: VecDeque<Point>,
    last: Option<(f64, RevisionCounters)>,
}

impl Ring {
    fn new() -> Ring {
        Ring { points: VecDeque::with_capacity(POINTS_PER_REVISION), last: None }
    }

    fn newest(&self) -> f64 {
        self.points.back().map_or(f64::NEG_INFINITY, |p| p.at)
    }

    fn record(&mut self, at: f64, ready: u32, counters: Option<RevisionCounters>) {
        let cold_start = self.points.back().is_some_and(|p| p.ready == 0) && ready > 0;
        let traffic = match (&counters, &self.last) {
            (Some(now), Some((then_at, then))) if at > *then_at => Some(traffic(now, then, at - then_at)),
            _ => None,
        };
        if let Some(now) = counters {
            self.last = Some((at, now));
        }
        if self.points.len() == POINTS_PER_REVISION {
            self.points.pop_front();
        }
        self.points.push_back(Point { at, ready, cold_start, traffic });
    }
}

/// The traffic of `seconds` between the counters `then` and `now`; a counter that went down was
/// reset (a restart) and counts from zero.
fn traffic(now: &RevisionCounters, then: &RevisionCounters, seconds: f64) -> Traffic {
    let delta = |now: f64, then: f64| if now >= then { now - then } else { now };
    let buckets: Vec<(f64, f64)> = now
        .buckets
        .iter()
        .map(|&(le, count)| {
            let old = then.buckets.iter().find(|(l, _)| *l == le).map_or(0.0, |b| b.1);
            (le, delta(count, old))
        })
        .collect();
    let ms = |q| quantile(q, &buckets).map(|s| (s * 1000.0) as f32);
    Traffic {
        rate: (delta(now.requests, then.requests) / seconds) as f32,
        errors: (delta(now.errors, then.errors) / seconds) as f32,
        in_flight: now.in_flight as f32,
        p50: ms(0.5),
        p99: ms(0.99),
    }
}

/// Every revision's ring.
#[derive(Debug, Clone, Default)]
pub struct History {
    rings: BTreeMap<RevisionKey, Ring>,
    first: Option<f64>,
}

/// What a line draws of a point, if anything.
type Value = fn(&Point) -> Option<f64>;

/// The panels' values of a point, with how runs of them fold when downsampled.
const LINES: [(&str, Fold, Value); 6] = [
    ("rate", Fold::Mean, |p| p.traffic.map(|t| f64::from(t.rate))),
    ("errors", Fold::Mean, |p| p.traffic.map(|t| f64::from(t.errors))),
    ("p50", Fold::Mean, |p| p.traffic.and_then(|t| t.p50).map(f64::from)),
    ("p99", Fold::Max, |p| p.traffic.and_then(|t| t.p99).map(f64::from)),
    ("inflight", Fold::Max, |p| p.traffic.map(|t| f64::from(t.in_flight))),
    ("replicas", Fold::Max, |p| Some(f64::from(p.ready))),
];

impl History {
    /// Records what one pass at `at` saw; returns how many new revisions found no room. Then
    /// forgets the revisions whose newest point is older than [`KEPT`].
    pub fn record(&mut self, at: f64, seen: Vec<Observation>) -> usize {
        self.first.get_or_insert(at);
        let mut no_room = 0;
        for observation in seen {
            if !self.rings.contains_key(&observation.key) && !self.make_room(at) {
                no_room += 1;
                continue;
            }
            self.rings.entry(observation.key).or_insert_with(Ring::new).record(
                at,
                observation.ready,
                observation.counters,
            );
        }
        let oldest = at - KEPT.as_secs_f64();
        self.rings.retain(|_, ring| ring.newest() >= oldest);
        no_room
    }

    /// Makes room for one more revision: forgets the one seen longest ago unless it was seen at `at`.
    fn make_room(&mut self, at: f64) -> bool {
        if self.rings.len() < MAX_REVISIONS {
            return true;
        }
        let Some((key, newest)) = self.rings.iter().map(|(k, r)| (k, r.newest())).min_by(|a, b| a.1.total_cmp(&b.1))
        else {
            return true;
        };
        if newest >= at {
            return false;
        }
        let key = key.clone();
        self.rings.remove(&key);
        true
    }

    /// When the first pass was recorded (unix seconds): nothing before it is known.
    pub fn first(&self) -> Option<f64> {
        self.first
    }

    /// How many revisions have a history.
    pub fn revisions(&self) -> usize {
        self.rings.len()
    }

    /// The seven panels of the service `namespace/service` from `since` (unix seconds), one line
    /// per revision that has points since then, each at most [`MAX_POINTS`] points.
    pub fn panels(&self, namespace: &str, service: &str, since: f64) -> Vec<Panel> {
        let mut lines: BTreeMap<&str, Vec<Series>> = BTreeMap::new();
        let of_service = self.rings.iter().filter(|(k, _)| k.namespace == namespace && k.service == service);
        for (key, ring) in of_service {
            let points: Vec<&Point> = ring.points.iter().filter(|p| p.at >= since).collect();
            if points.is_empty() {
                continue;
            }
            for (id, fold, value) in LINES {
                let line: Vec<[f64; 2]> = points.iter().filter_map(|p| value(p).map(|v| [p.at, v])).collect();
                if !line.is_empty() {
                    let points = downsample(&line, MAX_POINTS, fold);
                    lines.entry(id).or_default().push(Series { label: key.revision.clone(), points });
                }
            }
            let mut starts = 0.0;
            let total: Vec<[f64; 2]> = points
                .iter()
                .map(|p| {
                    // The first point in view is not a start: what came before it is out of view.
                    if p.cold_start && p.at > points[0].at {
                        starts += 1.0;
                    }
                    [p.at, starts]
                })
                .collect();
            let points = downsample(&total, MAX_POINTS, Fold::Last);
            lines.entry("coldstarts").or_default().push(Series { label: key.revision.clone(), points });
        }
        super::PANELS
            .iter()
            .map(|(id, _, _)| {
                let mut panel = panel(id);
                panel.series = lines.remove(id).unwrap_or_default();
                panel
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(revision: &str) -> RevisionKey {
        RevisionKey { namespace: "default".into(), service: "iris".into(), revision: revision.into() }
    }

    fn counters(requests: f64, errors: f64, fast: f64) -> RevisionCounters {
        RevisionCounters {
            requests,
            errors,
            buckets: vec![(0.001, fast), (0.1, requests), (f64::INFINITY, requests)],
            in_flight: 2.0,
        }
    }

    fn seen(revision: &str, ready: u32, counters: Option<RevisionCounters>) -> Observation {
        Observation { key: key(revision), ready, counters }
    }

    fn series<'a>(panels: &'a [Panel], id: &str) -> &'a [Series] {
        &panels.iter().find(|p| p.id == id).unwrap().series
    }

    #[test]
    fn rates_and_quantiles_come_from_the_change_between_samples() {
        let mut history = History::default();
        history.record(100.0, vec![seen("r1", 1, Some(counters(100.0, 0.0, 100.0)))]);
        history.record(102.0, vec![seen("r1", 1, Some(counters(120.0, 4.0, 100.0)))]);
        let panels = history.panels("default", "iris", 0.0);
        let value = |id: &str| series(&panels, id)[0].points[0];
        assert_eq!(value("rate"), [102.0, 10.0]);
        assert_eq!(value("errors"), [102.0, 2.0]);
        assert_eq!(value("inflight"), [102.0, 2.0]);
        // All 20 new requests fell in (1 ms, 100 ms]: the median is half way.
        assert!((value("p50")[1] - 50.5).abs() < 1e-3, "{:?}", value("p50"));
        assert_eq!(series(&panels, "replicas")[0].points, vec![[100.0, 1.0], [102.0, 1.0]]);
    }

    #[test]
    fn a_restarted_counter_counts_from_zero() {
        let mut history = History::default();
        history.record(0.0, vec![seen("r1", 1, Some(counters(500.0, 0.0, 500.0)))]);
        history.record(1.0, vec![seen("r1", 1, Some(counters(5.0, 0.0, 5.0)))]);
        assert_eq!(series(&history.panels("default", "iris", 0.0), "rate")[0].points, vec![[1.0, 5.0]]);
    }

    #[test]
    fn without_counters_only_replicas_and_cold_starts_are_kept() {
        let mut history = History::default();
        for at in [0.0, 5.0] {
            history.record(at, vec![seen("r1", 1, None)]);
        }
        let panels = history.panels("default", "iris", 0.0);
        assert!(series(&panels, "rate").is_empty());
        assert_eq!(series(&panels, "replicas")[0].points.len(), 2);
    }

    #[test]
    fn a_cold_start_is_a_revision_leaving_zero() {
        let mut history = History::default();
        for (at, ready) in [(0.0, 1), (1.0, 0), (2.0, 0), (3.0, 2), (4.0, 0), (5.0, 1)] {
            history.record(at, vec![seen("r1", ready, None)]);
        }
        let panels = history.panels("default", "iris", 0.0);
        let last = *series(&panels, "coldstarts")[0].points.last().unwrap();
        assert_eq!(last, [5.0, 2.0], "the first sample is not a start: nothing was seen before it");
        let since_3 = history.panels("default", "iris", 3.0);
        assert_eq!(series(&since_3, "replicas")[0].points, vec![[3.0, 2.0], [4.0, 0.0], [5.0, 1.0]]);
        assert_eq!(
            series(&since_3, "coldstarts")[0].points.last().unwrap(),
            &[5.0, 1.0],
            "the start at 3 is out of view"
        );
    }

    #[test]
    fn the_legend_holds_the_revisions_in_view_and_gone_ones_are_forgotten() {
        let mut history = History::default();
        history.record(0.0, vec![seen("r1", 1, None), seen("r2", 1, None)]);
        history.record(600.0, vec![seen("r2", 1, None)]);
        let labels = |since| {
            history.panels("default", "iris", since)[5].series.iter().map(|s| s.label.clone()).collect::<Vec<_>>()
        };
        assert_eq!(history.first(), Some(0.0));
        assert_eq!(labels(0.0), ["r1", "r2"]);
        assert_eq!(labels(300.0), ["r2"], "r1 left before the window");
        assert!(history.panels("default", "other", 0.0).iter().all(|p| p.series.is_empty()));
        history.record(KEPT.as_secs_f64() + 1.0, vec![seen("r2", 1, None)]);
        assert_eq!(history.revisions(), 1, "r1 is forgotten an hour after it was last seen");
    }

    #[test]
    fn a_point_is_48_bytes_as_the_docs_say() {
        assert_eq!(std::mem::size_of::<Point>(), 48);
        assert_eq!(POINTS_PER_REVISION, 720);
    }

    #[test]
    fn a_new_revision_takes_the_place_of_one_seen_longest_ago_never_of_a_live_one() {
        let mut history = History::default();
        let many = |prefix: &str, n: usize| (0..n).map(|i| seen(&format!("{prefix}{i}"), 1, None)).collect();
        assert_eq!(history.record(0.0, many("old", MAX_REVISIONS)), 0);
        assert_eq!(history.record(5.0, many("new", 10)), 0, "ten old ones make room");
        assert_eq!(history.revisions(), MAX_REVISIONS);
        assert_eq!(history.record(10.0, many("live", MAX_REVISIONS + 5)), 5, "all seen now: five wait");
        assert_eq!(history.revisions(), MAX_REVISIONS);
    }

    proptest! {
        #[test]
        fn rings_stay_bounded_and_in_time_order(
            passes in proptest::collection::vec((1.0f64..40.0, proptest::collection::vec(0u8..6, 0..6)), 1..400),
        ) {
            let mut history = History::default();
            let mut at = 0.0;
            for (step, revisions) in passes {
                at += step;
                let seen_now = revisions.iter().map(|r| seen(&format!("r{r}"), u32::from(*r), None)).collect();
                history.record(at, seen_now);
            }
            for ring in history.rings.values() {
                prop_assert!(ring.points.len() <= POINTS_PER_REVISION);
                prop_assert!(ring.points.iter().zip(ring.points.iter().skip(1)).all(|(a, b)| a.at <= b.at));
                prop_assert!(ring.newest() >= at - KEPT.as_secs_f64());
            }
            for panel in history.panels("default", "iris", 0.0) {
                for line in panel.series {
                    prop_assert!(line.points.len() <= MAX_POINTS);
                }
            }
        }
    }
}
