//! `--max-errors` and `--max-p99` for CI: each threshold checked against the summary, and the
//! exit code when one is crossed (99, as k6 exits when a threshold fails).

use std::time::Duration;

use serde::Serialize;

use super::flags::ErrorBudget;
use super::summary::Summary;
use super::table::{latency, ms};

/// The exit code when a threshold is crossed.
pub const CROSSED: i32 = 99;

/// The thresholds asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// Errors allowed.
    pub max_errors: Option<ErrorBudget>,
    /// Highest p99 allowed.
    pub max_p99: Option<Duration>,
}

/// One threshold's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Threshold {
    /// `errors` or `p99`.
    pub name: String,
    /// The limit, as given.
    pub limit: String,
    /// The run's value.
    pub actual: String,
    /// Whether the run went past the limit.
    pub crossed: bool,
}

/// The verdicts on `summary`.
pub fn check(summary: &Summary, limits: Limits) -> Vec<Threshold> {
    let mut verdicts = Vec::new();
    if let Some(budget) = limits.max_errors {
        verdicts.push(Threshold {
            name: "errors".into(),
            limit: budget.to_string(),
            actual: format!("{} of {}", summary.errors, summary.requests),
            crossed: !budget.allows(summary.errors, summary.requests),
        });
    }
    if let Some(max) = limits.max_p99 {
        let p99 = Duration::from_secs_f64(summary.latency.p99_ms / 1000.0);
        verdicts.push(Threshold {
            name: "p99".into(),
            limit: latency(max),
            actual: ms(summary.latency.p99_ms),
            crossed: summary.latency.count > 0 && p99 > max,
        });
    }
    verdicts
}

/// 0, or [`CROSSED`] when any threshold was crossed.
pub fn exit_code(verdicts: &[Threshold]) -> i32 {
    if verdicts.iter().any(|t| t.crossed) { CROSSED } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::record::Record;
    use crate::load::summary::{About, summarize};

    fn summary(latency_ms: u64, errors: usize, requests: usize) -> Summary {
        let mut record = Record::default();
        for i in 0..requests {
            let error = (i < errors).then(|| "HTTP 404".to_owned());
            record.add(Duration::ZERO, None, Duration::from_millis(latency_ms), error, None);
        }
        let about = About { target: "t".into(), scenario: "s".into(), cycles: 1, rate: None, replica_source: None };
        summarize(&record, &about)
    }

    #[test]
    fn a_crossed_threshold_exits_99() {
        let limits = Limits { max_errors: Some(ErrorBudget::Count(0)), max_p99: Some(Duration::from_millis(50)) };
        let clean = check(&summary(10, 0, 100), limits);
        assert_eq!(clean.len(), 2);
        assert_eq!(exit_code(&clean), 0);
        let slow = check(&summary(80, 0, 100), limits);
        assert_eq!(slow.iter().filter(|t| t.crossed).map(|t| t.name.as_str()).collect::<Vec<_>>(), ["p99"]);
        assert_eq!(exit_code(&slow), CROSSED);
        let failing = check(&summary(10, 1, 100), limits);
        assert_eq!(failing[0].actual, "1 of 100");
        assert_eq!(exit_code(&failing), CROSSED);
        let share = Limits { max_errors: Some(ErrorBudget::Percent(1.0)), max_p99: None };
        assert_eq!(exit_code(&check(&summary(10, 1, 100), share)), 0);
        assert_eq!(exit_code(&check(&summary(10, 0, 100), Limits::default())), 0);
    }
}
