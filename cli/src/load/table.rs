//! The summary as text: the table printed at the end of a run, and the duration formats the
//! progress line and the report share (`850µs`, `3.10ms`, `1.23s`; `30s`).

use std::fmt::Write;
use std::time::Duration;

use super::coldstart::ColdStart;
use super::openai;
use super::summary::{Latency, Summary};

/// A latency to three significant digits: `850µs`, `3.10ms`, `120ms`, `1.23s`.
pub fn latency(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    let three = |v: f64, unit: &str| match v {
        v if v < 10.0 => format!("{v:.2}{unit}"),
        v if v < 100.0 => format!("{v:.1}{unit}"),
        v => format!("{v:.0}{unit}"),
    };
    if micros < 1000.0 {
        format!("{micros:.0}µs")
    } else if micros < 1e6 {
        three(micros / 1000.0, "ms")
    } else {
        three(micros / 1e6, "s")
    }
}

/// Milliseconds as a [`latency`].
pub fn ms(v: f64) -> String {
    latency(Duration::from_secs_f64(v.max(0.0) / 1000.0))
}

/// A duration in seconds as typed: `30s`, `1.5s`, `0.25s`, `14.5s` (to the millisecond below 10 s).
pub fn secs(d: Duration) -> String {
    let seconds = d.as_secs_f64();
    let text = if seconds < 10.0 { format!("{seconds:.3}") } else { format!("{seconds:.1}") };
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}

/// Bytes in binary units: `512 B`, `1.0 MiB`, `1.00 GiB`.
pub fn size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KIB {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else if b < KIB * KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else {
        format!("{:.2} GiB", b / (KIB * KIB * KIB))
    }
}

/// A cold start's phases in one line: `r: fetch 1.20s (100.0 MiB downloaded, s3://m) + spawn
/// 20.0ms + load 400ms = 1.62s`; a model on local disk has no fetch.
pub fn cold_start(c: &ColdStart) -> String {
    let phase = |name: &str, value: Option<u64>| value.map(|v| format!("{name} {}", ms(v as f64)));
    let fetch = c.fetch.as_ref().map(|f| {
        let how = if f.cached {
            format!("{} from the cache", size(f.bytes))
        } else if f.downloaded == f.bytes {
            format!("{} downloaded", size(f.downloaded))
        } else {
            format!("{} downloaded of {}", size(f.downloaded), size(f.bytes))
        };
        format!("fetch {} ({how}, {})", ms(f.ms as f64), f.uri)
    });
    let phases: Vec<String> =
        fetch.into_iter().chain(phase("spawn", c.spawn_ms)).chain(phase("load", c.load_ms)).collect();
    match (phases.is_empty(), c.total_ms()) {
        (true, _) => format!("{}: phases not reported by the source", c.revision),
        (false, Some(total)) => format!("{}: {} = {}", c.revision, phases.join(" + "), ms(total as f64)),
        (false, None) => format!("{}: {}", c.revision, phases.join(" + ")),
    }
}

/// A rate to three significant digits at most: `0.52`, `12.5`, `476`, `12031`.
pub fn rate(v: f64) -> String {
    match v {
        v if v < 10.0 => format!("{v:.2}"),
        v if v < 100.0 => format!("{v:.1}"),
        v => format!("{v:.0}"),
    }
}

pub fn percentiles(l: &Latency) -> String {
    if l.count == 0 {
        return "-".to_owned();
    }
    format!("p50 {}  p90 {}  p99 {}  max {}", ms(l.p50_ms), ms(l.p90_ms), ms(l.p99_ms), ms(l.max_ms))
}

/// The table printed at the end of a run.
pub fn table(s: &Summary) -> String {
    let mut out = String::new();
    let mut row = |label: &str, value: String| {
        let _ = writeln!(out, "{label:<24}{value}");
    };
    row("Target", s.target.clone());
    let cycles = if s.cycles > 1 { format!(", {} cycles", s.cycles) } else { String::new() };
    row("Scenario", format!("{}{cycles}", s.scenario));
    row("Replicas from", s.replica_source.clone().unwrap_or_else(|| "nowhere (not sampled)".into()));
    row(
        "Requests",
        format!(
            "{} sent, {} ok, {} errors in {} under load ({} ok/s)",
            s.requests,
            s.ok,
            s.errors,
            secs(Duration::from_secs_f64(s.under_load_s)),
            rate(s.throughput)
        ),
    );
    if let Some(rate) = s.rate {
        row("Rate", format!("asked {}/s, sent at {:.1}/s", rate.asked, rate.sent));
    }
    row("Latency", percentiles(&s.latency));
    for p in &s.phases {
        row(
            &format!("  sent {}", p.phase.label()),
            format!("{:>6} requests  {}", p.latency.count, percentiles(&p.latency)),
        );
    }
    if let Some(cold) = &s.cold_starts {
        row("Cold starts", format!("{} from zero, {} replica starts in all", cold.from_zero, cold.replica_starts));
        row("  met a cold start", format!("{:>6} requests  {}", cold.met_zero.count, percentiles(&cold.met_zero)));
        if cold.held.count > 0 {
            row("  held for a replica", format!("{:>6} requests  {}", cold.held.count, percentiles(&cold.held)));
        }
        for start in &cold.starts {
            row(&format!("  from zero at {}", secs(Duration::from_secs_f64(start.t))), cold_start(&start.start));
        }
    }
    for (label, value) in s.llm.as_ref().map(openai::table::rows).unwrap_or_default() {
        row(&label, value);
    }
    for c in &s.cycle_results {
        let under_load = secs(Duration::from_secs_f64(c.loaded_s - c.start_s));
        let load = format!("{} ok in {under_load} under load ({} ok/s)", c.ok, rate(c.ok_per_s));
        let reached = c.needed_replicas.map(|needed| match c.time_to_needed_s {
            Some(t) => format!("; {needed} ready {} after its first request", latency(Duration::from_secs_f64(t))),
            None => format!("; {needed} asked for, never all ready in the cycle"),
        });
        row(&format!("Cycle {}", c.cycle), format!("{load}{}", reached.unwrap_or_default()));
    }
    if s.errors_by_kind.is_empty() {
        row("Errors", "none".into());
    }
    for (i, (kind, n)) in s.errors_by_kind.iter().enumerate() {
        row(if i == 0 { "Errors" } else { "" }, format!("{n:>6}  {kind}"));
    }
    for t in &s.thresholds {
        let verdict = if t.crossed { "CROSSED" } else { "ok" };
        row("Threshold", format!("{} ≤ {}: {verdict} ({})", t.name, t.limit, t.actual));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_read_to_three_digits() {
        assert_eq!(latency(Duration::from_micros(850)), "850µs");
        assert_eq!(latency(Duration::from_micros(3100)), "3.10ms");
        assert_eq!(latency(Duration::from_micros(31_050)), "31.1ms");
        assert_eq!(latency(Duration::from_millis(1234)), "1.23s");
        assert_eq!(secs(Duration::from_millis(1500)), "1.5s");
        assert_eq!(secs(Duration::from_secs(30)), "30s");
        assert_eq!(secs(Duration::from_millis(14_501)), "14.5s");
        assert_eq!((rate(0.5), rate(12.52), rate(476.2)), ("0.50".into(), "12.5".into(), "476".into()));
    }

    #[test]
    fn a_cold_start_reads_as_its_fetch_spawn_and_load() {
        use crate::load::coldstart::Fetch;
        let fetch = |downloaded: u64, cached: bool| Fetch {
            uri: "s3://models/100M".into(),
            bytes: 100 << 20,
            downloaded,
            cached,
            ms: 1234,
        };
        let start = |fetch: Option<Fetch>| ColdStart {
            revision: "m-predictor-00001".into(),
            fetch,
            spawn_ms: Some(20),
            load_ms: Some(400),
        };
        assert_eq!(
            cold_start(&start(Some(fetch(100 << 20, false)))),
            "m-predictor-00001: fetch 1.23s (100.0 MiB downloaded, s3://models/100M) + spawn 20.0ms + load 400ms = 1.65s"
        );
        assert_eq!(
            cold_start(&start(Some(fetch(0, true)))),
            "m-predictor-00001: fetch 1.23s (100.0 MiB from the cache, s3://models/100M) + spawn 20.0ms + load 400ms = 1.65s"
        );
        assert!(cold_start(&start(Some(fetch(1 << 20, false)))).contains("(1.0 MiB downloaded of 100.0 MiB,"));
        assert_eq!(cold_start(&start(None)), "m-predictor-00001: spawn 20.0ms + load 400ms = 420ms");
        let unknown = ColdStart { revision: "r".into(), fetch: None, spawn_ms: None, load_ms: None };
        assert_eq!(cold_start(&unknown), "r: phases not reported by the source");
        assert_eq!((size(512), size(1536), size(3 << 30)), ("512 B".into(), "1.5 KiB".into(), "3.00 GiB".into()));
    }
}
