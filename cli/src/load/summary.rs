//! A finished run's results, as a pure function of what was recorded: counts, rates over the time
//! under load (never the idle waits or a burst's settling), HDR latency percentiles overall and
//! per phase, cold starts (the requests whose answers say they met one), each cycle's time to the
//! needed replicas and errors by kind; serialised as the `--json` document (and printed by `table`).

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::coldstart::ColdStart;
use super::openai::{self, summary::LlmSummary};
use super::phase::{self, Phase};
use super::record::{Cycle, Record};
use super::threshold::Threshold;

/// What the summary says about the run besides the record.
#[derive(Debug, Clone)]
pub struct About {
    /// URL and Host.
    pub target: String,
    /// The scenario in words.
    pub scenario: String,
    /// Cycles asked for.
    pub cycles: u32,
    /// Open-loop rate asked for.
    pub rate: Option<f64>,
    /// Where replicas were read.
    pub replica_source: Option<String>,
}

/// The whole result (`--json`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// URL and Host.
    pub target: String,
    /// The scenario in words.
    pub scenario: String,
    /// Cycles.
    pub cycles: u32,
    /// Where replicas were read, if anywhere.
    pub replica_source: Option<String>,
    /// Requests due (sent, or refused at `--max-inflight`).
    pub requests: u64,
    /// 2xx and 3xx answers.
    pub ok: u64,
    /// Everything else.
    pub errors: u64,
    /// Seconds under load: each cycle's first request to its last answer (not the idle waits,
    /// nor a burst's wait for its replicas to settle).
    pub under_load_s: f64,
    /// Successful requests per second under load.
    pub throughput: f64,
    /// Open loop: the rate asked for and the rate the requests were sent at.
    pub rate: Option<Rate>,
    /// Every request's latency.
    pub latency: Latency,
    /// Latency by the phase the request was sent in (only with replica samples).
    pub phases: Vec<PhaseLatency>,
    /// Cold starts (only with replica samples).
    pub cold_starts: Option<ColdStarts>,
    /// Per cycle.
    pub cycle_results: Vec<CycleResult>,
    /// Errors by kind.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// `--max-errors` and `--max-p99`.
    pub thresholds: Vec<Threshold>,
    /// Per second of send time.
    pub series: Vec<SecondView>,
    /// Replica samples.
    pub samples: Vec<SampleView>,
    /// Requests in flight over time.
    pub in_flight: Vec<InFlightView>,
    /// `--openai`: TTFT, inter-token latency, tokens (absent when no stream was answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSummary>,
}

/// Asked and measured open-loop rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rate {
    /// Requests per second asked for.
    pub asked: f64,
    /// Requests per second sent: (sent − 1) over the time from the first send to the last.
    pub sent: f64,
}

/// Percentiles of a latency histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    /// Requests.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

impl Latency {
    /// From a histogram of microseconds.
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Latency {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p90_ms: ms(h.value_at_quantile(0.9)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1000.0,
        }
    }
}

/// Latency of the requests sent in one phase.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseLatency {
    /// The phase.
    pub phase: Phase,
    /// Its latency.
    #[serde(flatten)]
    pub latency: Latency,
}

/// What scale from zero cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ColdStarts {
    /// Replicas that became ready during the run (from the samples).
    pub replica_starts: u32,
    /// Times the service went from no ready replica to some (from the samples).
    pub from_zero: u32,
    /// Latency of the requests whose answers say they met a cold start (Skiff's activator held
    /// them for a ready replica), never guessed from the samples.
    pub met_zero: Latency,
    /// How long those requests were held for a ready replica.
    pub held: Latency,
    /// Each revision's start from zero, with its phases where the source tells them (the model's
    /// fetch, the spawn, the load).
    pub starts: Vec<ColdStartView>,
}

/// One revision's start from zero.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ColdStartView {
    /// Seconds since the run began, at the sample that saw it ready.
    pub t: f64,
    /// Its phases.
    #[serde(flatten)]
    pub start: ColdStart,
}

/// One cycle.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleResult {
    /// 1-based.
    pub cycle: usize,
    /// Its first request, seconds since the run began.
    pub start_s: f64,
    /// Its last answer: the end of its time under load.
    pub loaded_s: f64,
    /// Its end (after a burst, once its replicas settled).
    pub end_s: f64,
    /// Its answers that were not errors.
    pub ok: u64,
    /// Those per second under load.
    pub ok_per_s: f64,
    /// The most replicas asked for during it.
    pub needed_replicas: Option<u32>,
    /// From its first request until that many were ready.
    pub time_to_needed_s: Option<f64>,
}

/// One second of send time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecondView {
    /// Seconds since the run began.
    pub t: u64,
    /// Requests sent in it.
    pub requests: u64,
    /// Of those, errors.
    pub errors: u64,
    /// Their median latency.
    pub p50_ms: f64,
    /// Their 99th percentile.
    pub p99_ms: f64,
}

/// One replica sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SampleView {
    /// Seconds since the run began.
    pub t: f64,
    /// Ready replicas.
    pub ready: u32,
    /// Asked for.
    pub desired: u32,
    /// Replicas that became ready since the previous sample.
    pub starts: u32,
    /// The autoscaler was in panic mode.
    pub panic: bool,
}

/// Requests in flight at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InFlightView {
    /// Seconds since the run began.
    pub t: f64,
    /// This run's requests waiting for an answer.
    pub requests: usize,
}

/// The summary of `record`.
pub fn summarize(record: &Record, about: &About) -> Summary {
    let errors = record.error_count();
    let ok = record.ok();
    let under_load: Duration = record.cycles.iter().map(Cycle::under_load).sum();
    let sampled = !record.samples.is_empty();
    let phases = if sampled {
        Phase::ALL
            .iter()
            .map(|&phase| PhaseLatency { phase, latency: Latency::of(&record.phases[phase.index()]) })
            .collect()
    } else {
        Vec::new()
    };
    // Starts before the first request (a replica woken by --model's metadata request) are not the load's.
    let first_request = record.cycles.first().map_or(Duration::ZERO, |c| c.began);
    let cold_starts = (sampled || !record.met_zero.is_empty()).then(|| ColdStarts {
        replica_starts: record.samples.iter().filter(|s| s.at >= first_request).map(|s| s.starts).sum(),
        from_zero: record
            .samples
            .windows(2)
            .filter(|w| w[1].at >= first_request && w[0].ready == 0 && w[1].ready > 0)
            .count() as u32,
        met_zero: Latency::of(&record.met_zero),
        held: Latency::of(&record.held),
        starts: record
            .cold_starts
            .iter()
            .filter(|(at, _)| *at >= first_request)
            .map(|(at, start)| ColdStartView { t: at.as_secs_f64(), start: start.clone() })
            .collect(),
    });
    let rate = about.rate.map(|asked| {
        let sent: u64 = record.dispatches.iter().map(|d| d.sent.saturating_sub(1)).sum();
        let span: f64 = record.dispatches.iter().map(|d| d.span.as_secs_f64()).sum();
        Rate { asked, sent: if span > 0.0 { sent as f64 / span } else { 0.0 } }
    });
    Summary {
        target: about.target.clone(),
        scenario: about.scenario.clone(),
        cycles: about.cycles,
        replica_source: about.replica_source.clone(),
        requests: record.requests(),
        ok,
        errors,
        under_load_s: under_load.as_secs_f64(),
        throughput: per_second(ok, under_load),
        rate,
        latency: Latency::of(&record.latency),
        phases,
        cold_starts,
        cycle_results: cycles(record, sampled),
        errors_by_kind: record.errors.clone(),
        thresholds: Vec::new(),
        series: record
            .seconds
            .iter()
            .enumerate()
            .map(|(t, s)| {
                let l = Latency::of(&s.latency);
                SecondView { t: t as u64, requests: s.done, errors: s.errors, p50_ms: l.p50_ms, p99_ms: l.p99_ms }
            })
            .collect(),
        samples: record
            .samples
            .iter()
            .map(|s| SampleView {
                t: s.at.as_secs_f64(),
                ready: s.ready,
                desired: s.desired,
                starts: s.starts,
                panic: s.panic,
            })
            .collect(),
        in_flight: record
            .in_flight
            .iter()
            .map(|(at, requests)| InFlightView { t: at.as_secs_f64(), requests: *requests })
            .collect(),
        llm: (!record.streams.is_empty()).then(|| openai::summary::summarize(&record.streams, under_load, sampled)),
    }
}

/// `count` per second of `time`; 0 without time.
fn per_second(count: u64, time: Duration) -> f64 {
    if time.is_zero() { 0.0 } else { count as f64 / time.as_secs_f64() }
}

fn cycles(record: &Record, sampled: bool) -> Vec<CycleResult> {
    record
        .cycles
        .iter()
        .enumerate()
        .map(|(i, cycle)| {
            let (start, end) = (cycle.began, cycle.ended);
            // The replicas as the cycle began (the last sample before it), then those during it.
            let before = record.samples.iter().rev().find(|s| s.at < start).map(|s| (start, s.ready, s.desired));
            let during = record.samples.iter().filter(|s| s.at >= start && s.at <= end);
            let within: Vec<(Duration, u32, u32)> =
                before.into_iter().chain(during.map(|s| (s.at, s.ready, s.desired))).collect();
            let needed = within.iter().map(|s| s.2).max().filter(|_| sampled);
            CycleResult {
                cycle: i + 1,
                start_s: start.as_secs_f64(),
                loaded_s: cycle.loaded.as_secs_f64(),
                end_s: end.as_secs_f64(),
                ok: cycle.ok,
                ok_per_s: per_second(cycle.ok, cycle.under_load()),
                needed_replicas: needed,
                time_to_needed_s: phase::time_to_needed(&within, start).map(|d| d.as_secs_f64()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::coldstart::Fetch;
    use crate::load::record::{Cycle, Dispatch, Sample};

    fn cycle(began_ms: u64, loaded_ms: u64, ended_ms: u64, ok: u64) -> Cycle {
        let ms = Duration::from_millis;
        Cycle { began: ms(began_ms), loaded: ms(loaded_ms), ended: ms(ended_ms), ok }
    }

    fn about(rate: Option<f64>) -> About {
        About { target: "http://x/".into(), scenario: "burst of 3".into(), cycles: 1, rate, replica_source: None }
    }

    fn sample(at_ms: u64, ready: u32, desired: u32, starts: u32) -> Sample {
        Sample { at: Duration::from_millis(at_ms), ready, desired, starts, panic: false }
    }

    #[test]
    fn a_burst_at_zero_summarises_its_cold_start() {
        let ms = Duration::from_millis;
        let mut record = Record {
            samples: vec![
                sample(0, 0, 1, 0),
                sample(50, 1, 1, 1),
                sample(80, 0, 0, 0),
                sample(250, 0, 1, 0),
                sample(500, 1, 4, 1),
                sample(1000, 4, 4, 3),
            ],
            cycles: vec![cycle(100, 500, 1200, 3)],
            ..Record::default()
        };
        let fetch = Fetch { uri: "s3://m/1G".into(), bytes: 1 << 30, downloaded: 1 << 30, cached: false, ms: 300 };
        let start =
            |fetch: Option<Fetch>| ColdStart { revision: "r1".into(), fetch, spawn_ms: Some(10), load_ms: Some(80) };
        record.cold_starts = vec![(ms(50), start(None)), (ms(500), start(Some(fetch.clone())))];
        for _ in 0..3 {
            record.add(ms(100), Some(Phase::AtZero), ms(400), None, Some(ms(350)));
        }
        record.add(ms(600), Some(Phase::Scaling), ms(5), Some("HTTP 503".into()), None);
        let s = summarize(&record, &about(None));
        assert_eq!((s.requests, s.ok, s.errors), (4, 3, 1));
        let cold = s.cold_starts.clone().unwrap();
        assert_eq!((cold.replica_starts, cold.from_zero, cold.met_zero.count), (4, 1, 3));
        assert!((cold.met_zero.p50_ms - 400.0).abs() < 1.0, "{cold:?}");
        assert!((cold.held.p50_ms - 350.0).abs() < 1.0, "{cold:?}");
        assert!((s.under_load_s - 0.4).abs() < 1e-9, "the burst's settling is not under load");
        assert!((s.throughput - 7.5).abs() < 1e-9, "3 ok in 0.4 s under load: {}", s.throughput);
        assert!((s.cycle_results[0].ok_per_s - 7.5).abs() < 1e-9);
        assert_eq!(
            cold.starts,
            [ColdStartView { t: 0.5, start: start(Some(fetch)) }],
            "the start before the first request is not the load's"
        );
        let json = serde_json::to_value(&cold.starts).unwrap();
        assert_eq!(json[0]["fetch"]["downloaded"], 1 << 30);
        assert_eq!((json[0]["revision"].as_str(), json[0]["loadMs"].as_u64()), (Some("r1"), Some(80)));
        assert_eq!(s.cycle_results[0].needed_replicas, Some(4));
        assert!((s.cycle_results[0].time_to_needed_s.unwrap() - 0.9).abs() < 1e-9);
        assert_eq!(s.phases.len(), 3);
        assert_eq!((s.series[0].requests, s.series[0].errors), (4, 1));
        let text = crate::load::table::table(&s);
        assert!(text.contains("1 from zero, 4 replica starts in all"), "{text}");
        assert!(text.contains("4 sent, 3 ok, 1 errors in 0.4s under load (7.50 ok/s)"), "{text}");
        assert!(text.contains("Cycle 1                 3 ok in 0.4s under load (7.50 ok/s); 4 ready"), "{text}");
        assert!(text.contains("HTTP 503"), "{text}");
        assert!(
            text.contains("from zero at 0.5s     r1: fetch 300ms (1.00 GiB downloaded, s3://m/1G) + spawn 10.0ms + load 80.0ms = 390ms"),
            "{text}"
        );
    }

    #[test]
    fn a_cycle_that_begins_with_its_replicas_ready_needs_no_time() {
        let record = Record {
            samples: vec![sample(0, 2, 2, 0), sample(250, 2, 2, 0)],
            cycles: vec![cycle(100, 300, 300, 0)],
            ..Record::default()
        };
        let cycle = summarize(&record, &about(None)).cycle_results[0];
        assert_eq!((cycle.needed_replicas, cycle.time_to_needed_s), (Some(2), Some(0.0)));
    }

    #[test]
    fn the_open_loop_rate_is_measured_between_first_and_last_send() {
        let record = Record {
            dispatches: vec![Dispatch { sent: 1001, span: Duration::from_secs(5) }],
            cycles: vec![cycle(0, 5000, 5000, 0)],
            ..Record::default()
        };
        let s = summarize(&record, &about(Some(200.0)));
        assert_eq!(s.rate, Some(Rate { asked: 200.0, sent: 200.0 }));
        assert!(s.cold_starts.is_none() && s.phases.is_empty(), "no samples, no phases");
    }
}
