//! The live progress line on stderr, once a second: elapsed, requests per second, p50 and p99,
//! errors and replicas over the last second. Rewritten in place on a terminal, one line each
//! otherwise.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::record::Recorder;
use super::table::{latency, secs};

/// What one progress line shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    /// Since the run began.
    pub elapsed: Duration,
    /// Requests done in the last second.
    pub done: u64,
    /// Of those, errors.
    pub errors: u64,
    /// p50 and p99 of the last second, if any request finished.
    pub p50_p99: Option<(Duration, Duration)>,
    /// Ready and asked-for replicas at the latest sample.
    pub replicas: Option<(u32, u32)>,
    /// Requests in flight now.
    pub in_flight: usize,
}

/// The line for `tick` over `window`.
pub fn line(tick: &Tick, window: Duration) -> String {
    let rate = tick.done as f64 / window.as_secs_f64().max(1e-3);
    let percentiles = match tick.p50_p99 {
        Some((p50, p99)) => format!("p50 {}  p99 {}", latency(p50), latency(p99)),
        None => "p50 -  p99 -".to_owned(),
    };
    let replicas = match tick.replicas {
        Some((ready, desired)) => format!("{ready}/{desired}"),
        None => "?".to_owned(),
    };
    format!(
        "{:>6}  {rate:>8.1} req/s  {percentiles}  errors {}  replicas {replicas}  in flight {}",
        secs(tick.elapsed),
        tick.errors,
        tick.in_flight
    )
}

/// Prints a line every second until dropped (`\r`-rewritten when `terminal`).
pub async fn run(recorder: Arc<Recorder>, terminal: bool) {
    let period = Duration::from_secs(1);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        ticker.tick().await;
        let tick = recorder.with(|r| {
            let p50_p99 = (!r.window.is_empty()).then(|| {
                let micros = |q| Duration::from_micros(r.window.value_at_quantile(q));
                (micros(0.5), micros(0.99))
            });
            let tick = Tick {
                elapsed: Duration::from_secs(recorder.start.elapsed().as_secs()),
                done: r.window_done.0,
                errors: r.window_done.1,
                p50_p99,
                replicas: r.samples.last().map(|s| (s.ready, s.desired)),
                in_flight: recorder.in_flight.load(Ordering::Relaxed),
            };
            r.window.reset();
            r.window_done = (0, 0);
            tick
        });
        let text = line(&tick, period);
        let mut stderr = std::io::stderr().lock();
        let _ = if terminal { write!(stderr, "\r{text}\x1b[K") } else { writeln!(stderr, "{text}") };
        let _ = stderr.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_shows_rate_percentiles_errors_and_replicas() {
        let tick = Tick {
            elapsed: Duration::from_secs(12),
            done: 198,
            errors: 2,
            p50_p99: Some((Duration::from_micros(3100), Duration::from_millis(120))),
            replicas: Some((2, 4)),
            in_flight: 5,
        };
        assert_eq!(
            line(&tick, Duration::from_secs(1)),
            "   12s     198.0 req/s  p50 3.10ms  p99 120ms  errors 2  replicas 2/4  in flight 5"
        );
        let quiet = Tick { p50_p99: None, replicas: None, ..tick };
        assert!(line(&quiet, Duration::from_secs(1)).contains("p50 -  p99 -  errors 2  replicas ?"));
    }
}
