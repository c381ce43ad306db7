//! The summary as text: the table printed at the end of a run, and the duration formats the
//! progress line and the report share (`850µs`, `3.10ms`, `1.23s`; `30s`).

use std::fmt::Write;
use std::time::Duration;

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

fn percentiles(l: &Latency) -> String {
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
            "{} sent, {} ok, {} errors over {} of cycles ({:.1} ok/s)",
            s.requests,
            s.ok,
            s.errors,
            secs(Duration::from_secs_f64(s.duration_s)),
            s.throughput
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
        row("  latency at zero", percentiles(&cold.at_zero));
    }
    for c in s.cycle_results.iter().filter(|c| c.needed_replicas.is_some()) {
        let needed = c.needed_replicas.unwrap_or(0);
        let reached = match c.time_to_needed_s {
            Some(t) => format!("{needed} ready {} after its first request", latency(Duration::from_secs_f64(t))),
            None => format!("{needed} asked for, never all ready in the cycle"),
        };
        row(&format!("Cycle {} replicas", c.cycle), reached);
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
    }
}
