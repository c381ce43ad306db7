//! The part of the Prometheus text format the sampler reads: the router's request counters,
//! latency buckets and in-flight gauge, summed per service and revision.

use std::collections::BTreeMap;

/// Counter of answered requests, labelled by service, revision and status.
pub const REQUESTS: &str = "skiff_router_requests_total";
/// Latency histogram buckets, labelled by service, revision and `le`.
pub const DURATION_BUCKETS: &str = "skiff_router_request_duration_seconds_bucket";
/// Requests in flight, labelled by service and revision.
pub const IN_FLIGHT: &str = "skiff_router_inflight_requests";

/// One revision's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RevisionCounters {
    /// Requests answered.
    pub requests: f64,
    /// Of those, 5xx.
    pub errors: f64,
    /// Cumulative latency buckets `(le seconds, count)`, by ascending `le`.
    pub buckets: Vec<(f64, f64)>,
    /// Requests in flight now.
    pub in_flight: f64,
}

/// The labels of a sample line, and its value.
fn sample(line: &str) -> Option<(&str, BTreeMap<&str, &str>, f64)> {
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let (name, labels) = match head.split_once('{') {
        Some((name, rest)) => (name, rest.strip_suffix('}')?),
        None => (head, ""),
    };
    let mut map = BTreeMap::new();
    for pair in labels.split("\",").filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once("=\"")?;
        map.insert(key.trim_start_matches(','), value.trim_end_matches('"'));
    }
    Some((name, map, value))
}

/// The counters of every service and revision in a scrape, by `(service, revision)` (service as
/// `namespace/name`), summed across the lines (and pods) that carry them.
pub fn all_counters(text: &str) -> BTreeMap<(String, String), RevisionCounters> {
    let mut revisions: BTreeMap<(String, String), RevisionCounters> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("skiff_router_")) {
        let Some((name, labels, value)) = sample(line) else { continue };
        let Some(service) = labels.get("service") else { continue };
        let Some(revision) = labels.get("revision").filter(|r| !r.is_empty()) else { continue };
        let counters = revisions.entry(((*service).to_owned(), (*revision).to_owned())).or_default();
        match name {
            REQUESTS => {
                counters.requests += value;
                if labels.get("status").is_some_and(|s| s.starts_with('5')) {
                    counters.errors += value;
                }
            }
            DURATION_BUCKETS => {
                let le = labels.get("le").map_or(f64::INFINITY, |le| le.parse().unwrap_or(f64::INFINITY));
                match counters.buckets.iter_mut().find(|(l, _)| *l == le) {
                    Some(bucket) => bucket.1 += value,
                    None => counters.buckets.push((le, value)),
                }
            }
            IN_FLIGHT => counters.in_flight += value,
            _ => {}
        }
    }
    for counters in revisions.values_mut() {
        counters.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    revisions
}

/// The `q` quantile of a cumulative histogram, interpolated within its bucket as Prometheus's
/// `histogram_quantile` does; `None` without observations.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let within = count - lower.1;
            let fraction = if within > 0.0 { (rank - lower.1) / within } else { 1.0 };
            return Some(lower.0 + (le - lower.0) * fraction);
        }
        lower = (le, count);
    }
    Some(lower.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = r#"# HELP skiff_router_requests Requests answered
skiff_router_requests_total{service="default/iris",revision="iris-predictor-00001",status="200"} 90
skiff_router_requests_total{service="default/iris",revision="iris-predictor-00001",status="503"} 10
skiff_router_requests_total{service="default/other",revision="other-predictor-00001",status="200"} 7
skiff_router_request_duration_seconds_bucket{le="0.002",service="default/iris",revision="iris-predictor-00001"} 50
skiff_router_request_duration_seconds_bucket{le="0.001",service="default/iris",revision="iris-predictor-00001"} 0
skiff_router_request_duration_seconds_bucket{le="+Inf",service="default/iris",revision="iris-predictor-00001"} 100
skiff_router_inflight_requests{service="default/iris",revision="iris-predictor-00001"} 3
"#;

    #[test]
    fn counters_are_summed_per_service_and_revision() {
        let counters = all_counters(SCRAPE);
        assert_eq!(counters.len(), 2);
        let revision = &counters[&("default/iris".to_owned(), "iris-predictor-00001".to_owned())];
        assert_eq!((revision.requests, revision.errors, revision.in_flight), (100.0, 10.0, 3.0));
        assert_eq!(revision.buckets, vec![(0.001, 0.0), (0.002, 50.0), (f64::INFINITY, 100.0)]);
        assert_eq!(counters[&("default/other".to_owned(), "other-predictor-00001".to_owned())].requests, 7.0);
        let two_pods = format!("{SCRAPE}{SCRAPE}");
        let summed = &all_counters(&two_pods)[&("default/iris".to_owned(), "iris-predictor-00001".to_owned())];
        assert_eq!((summed.requests, summed.buckets[2]), (200.0, (f64::INFINITY, 200.0)), "pods are summed");
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket_like_prometheus() {
        let buckets = [(0.001, 0.0), (0.002, 50.0), (0.004, 100.0), (f64::INFINITY, 100.0)];
        assert_eq!(quantile(0.5, &buckets), Some(0.002));
        assert!((quantile(0.25, &buckets).unwrap() - 0.0015).abs() < 1e-12);
        assert!((quantile(0.99, &buckets).unwrap() - 0.00396).abs() < 1e-12);
        assert_eq!(quantile(0.5, &[(0.001, 0.0), (f64::INFINITY, 0.0)]), None);
        assert_eq!(quantile(0.99, &[(0.001, 0.0), (f64::INFINITY, 4.0)]), Some(0.001), "past the last bound");
    }
}
