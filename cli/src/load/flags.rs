//! Parsers for `skiff load`'s flag values: durations (`250ms`, `30s`, `1m30s`), concurrency stages
//! (`10:30s,50:1m`), the idle gap (`30s` or `zero`), the error budget (`10` or `1%`) and headers
//! (`Name: value`).

use std::time::Duration;

pub use crate::units::duration;

/// One stage of a closed-loop scenario: hold (or ramp to) `concurrency` for `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// Concurrent requests.
    pub concurrency: usize,
    /// How long.
    pub duration: Duration,
}

/// Stages as `C1:T1,C2:T2,…` (k6's stages, `target:duration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stages(pub Vec<Stage>);

/// Parses `10:30s,50:1m`.
pub fn stages(text: &str) -> Result<Stages, String> {
    let stages = text
        .split(',')
        .map(|part| {
            let (c, t) = part.split_once(':').ok_or_else(|| format!("{part:?} is not CONCURRENCY:DURATION"))?;
            let concurrency = c.trim().parse().map_err(|_| format!("{c:?} is not a concurrency (0 or more)"))?;
            Ok(Stage { concurrency, duration: duration(t)? })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if stages.iter().all(|s| s.duration.is_zero()) {
        return Err(format!("{text:?}: the stages last no time"));
    }
    Ok(Stages(stages))
}

/// The gap between cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Sleep this long between cycles.
    For(Duration),
    /// Before every cycle, wait until the service has no ready replica.
    UntilZero,
}

/// Parses `30s` or `zero`.
pub fn idle(text: &str) -> Result<Idle, String> {
    if text.trim() == "zero" { Ok(Idle::UntilZero) } else { duration(text).map(Idle::For) }
}

/// How many errors `--max-errors` allows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ErrorBudget {
    /// At most this many.
    Count(u64),
    /// At most this share of the requests, in percent.
    Percent(f64),
}

impl ErrorBudget {
    /// Whether `errors` out of `requests` stay within the budget.
    pub fn allows(self, errors: u64, requests: u64) -> bool {
        match self {
            ErrorBudget::Count(n) => errors <= n,
            ErrorBudget::Percent(p) => requests == 0 || errors as f64 * 100.0 <= p * requests as f64,
        }
    }
}

impl std::fmt::Display for ErrorBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorBudget::Count(n) => write!(f, "{n}"),
            ErrorBudget::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Parses `10` or `1.5%`.
pub fn error_budget(text: &str) -> Result<ErrorBudget, String> {
    let text = text.trim();
    match text.strip_suffix('%') {
        Some(p) => match p.trim().parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => Ok(ErrorBudget::Percent(p)),
            _ => Err(format!("{text:?}: a percentage from 0% to 100%")),
        },
        None => text.parse().map(ErrorBudget::Count).map_err(|_| format!("{text:?}: a count such as 10, or 1%")),
    }
}

/// Parses `Name: value` (curl's and hey's `-H`).
pub fn header(text: &str) -> Result<(http::HeaderName, http::HeaderValue), String> {
    let (name, value) = text.split_once(':').ok_or_else(|| format!("{text:?} is not \"Name: value\""))?;
    let name = http::HeaderName::try_from(name.trim()).map_err(|e| format!("header name {name:?}: {e}"))?;
    let value = http::HeaderValue::try_from(value.trim()).map_err(|e| format!("header {name}: {e}"))?;
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_go_and_k6() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("1us"), Ok(Duration::from_micros(1)));
        assert_eq!(duration("2"), Ok(Duration::from_secs(2)));
        assert!(duration("3 parsecs").is_err());
        assert!(duration("-1s").is_err());
        assert!(duration("").is_err());
    }

    #[test]
    fn stages_are_concurrency_and_duration_pairs() {
        let parsed = stages("10:30s, 50:1m").unwrap();
        assert_eq!(
            parsed.0,
            [
                Stage { concurrency: 10, duration: Duration::from_secs(30) },
                Stage { concurrency: 50, duration: Duration::from_secs(60) }
            ]
        );
        assert!(stages("10").is_err());
        assert!(stages("10:0s").is_err());
    }

    #[test]
    fn the_idle_gap_is_a_duration_or_zero() {
        assert_eq!(idle("zero"), Ok(Idle::UntilZero));
        assert_eq!(idle("45s"), Ok(Idle::For(Duration::from_secs(45))));
    }

    #[test]
    fn error_budgets_are_counts_or_shares() {
        assert_eq!(error_budget("0"), Ok(ErrorBudget::Count(0)));
        assert_eq!(error_budget("1%"), Ok(ErrorBudget::Percent(1.0)));
        assert!(error_budget("120%").is_err());
        assert!(ErrorBudget::Count(0).allows(0, 10) && !ErrorBudget::Count(0).allows(1, 10));
        assert!(ErrorBudget::Percent(1.0).allows(1, 100) && !ErrorBudget::Percent(1.0).allows(2, 100));
    }

    #[test]
    fn headers_are_name_colon_value() {
        let (name, value) = header("X-Trace: abc:1").unwrap();
        assert_eq!((name.as_str(), value.to_str().unwrap()), ("x-trace", "abc:1"));
        assert!(header("nocolon").is_err());
    }
}
