//! A revision's activator settings and the counts the autoscaler reads.

use std::time::Duration;

use skiff_dataplane::RevisionKey;

use crate::error::{Error, Result};

pub use skiff_api::serving::DEFAULT_TIMEOUT;

/// The longest a request is held for a ready replica: `skiff-api`'s bound on the progress deadline.
pub const MAX_PROGRESS_DEADLINE: Duration = Duration::from_secs(skiff_api::settings::MAX_PROGRESS_DEADLINE_SECS);

/// Requests held per revision before 503, so a burst at zero cannot exhaust memory.
pub const DEFAULT_MAX_PENDING: usize = 1000;

/// How the activator treats one revision's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionConfig {
    /// The revision's namespace and name, as the router sends them in `x-skiff-revision`.
    pub key: RevisionKey,
    /// Bound on a whole request: waiting for a replica, forwarding and the answer; with a
    /// `progress_deadline`, bound on the answer from the request's slot on a replica.
    pub timeout: Duration,
    /// How long a request is held for a ready replica, when the InferenceService sets it
    /// (`serving.knative.dev/progress-deadline`, at most [`MAX_PROGRESS_DEADLINE`]).
    pub progress_deadline: Option<Duration>,
    /// Requests held at once, waiting or forwarded; more get 503 with `Retry-After`.
    pub max_pending: usize,
}

impl RevisionConfig {
    /// `key` with the defaults: 300 s timeout, [`DEFAULT_MAX_PENDING`] pending requests.
    pub fn new(key: RevisionKey) -> RevisionConfig {
        RevisionConfig { key, timeout: DEFAULT_TIMEOUT, progress_deadline: None, max_pending: DEFAULT_MAX_PENDING }
    }

    /// The timeout from an InferenceService's `spec.predictor.timeout` (seconds); unset keeps 300 s.
    pub fn with_timeout_secs(mut self, timeout: Option<i64>) -> RevisionConfig {
        if let Some(secs) = timeout.and_then(|s| u64::try_from(s).ok()).filter(|&s| s > 0) {
            self.timeout = Duration::from_secs(secs);
        }
        self
    }

    /// Checks the values; each message states the allowed range.
    pub fn validate(&self) -> Result<()> {
        let problem = if self.key.name.is_empty() || self.key.namespace.is_empty() {
            "the revision's namespace and name must not be empty".to_owned()
        } else if self.timeout.is_zero() {
            format!("revision {}: timeout must be more than 0", self.key)
        } else if self.timeout.as_secs() > skiff_http::MAX_SECS {
            format!("revision {}: timeout {:?} is more than {} s", self.key, self.timeout, skiff_http::MAX_SECS)
        } else if self.progress_deadline.is_some_and(|d| d.is_zero() || d > MAX_PROGRESS_DEADLINE) {
            format!(
                "revision {}: progress deadline {:?} is not between 1 s and {} s",
                self.key,
                self.progress_deadline.unwrap_or_default(),
                MAX_PROGRESS_DEADLINE.as_secs()
            )
        } else if self.max_pending == 0 {
            format!("revision {}: max_pending must be at least 1", self.key)
        } else {
            return Ok(());
        };
        Err(Error::Config(problem))
    }
}

/// What the activator holds for a revision now, for the autoscaler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RevisionStats {
    /// Requests waiting for a slot on a ready replica.
    pub queued: usize,
    /// Requests forwarded to a replica and not yet answered.
    pub in_flight: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_kserve() {
        let c = RevisionConfig::new(RevisionKey::new("default", "iris-predictor-00001"));
        assert_eq!(c.timeout, Duration::from_secs(300));
        assert_eq!(c.clone().with_timeout_secs(Some(60)).timeout, Duration::from_secs(60));
        assert_eq!(c.clone().with_timeout_secs(None).timeout, Duration::from_secs(300));
        assert_eq!(c.with_timeout_secs(Some(-1)).timeout, Duration::from_secs(300));
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mut c = RevisionConfig::new(RevisionKey::new("ns", "r"));
        assert!(c.validate().is_ok());
        c.max_pending = 0;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "invalid configuration: revision ns/r: max_pending must be at least 1"
        );
        c.max_pending = 1;
        c.timeout = Duration::ZERO;
        assert!(c.validate().is_err());
        c.timeout = Duration::from_secs(1 << 63);
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "invalid configuration: revision ns/r: timeout 9223372036854775808s is more than 86400 s"
        );
        assert!(RevisionConfig::new(RevisionKey::new("ns", "")).validate().is_err());
        c.timeout = Duration::from_secs(60);
        c.progress_deadline = Some(Duration::from_secs(7201));
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "invalid configuration: revision ns/r: progress deadline 7201s is not between 1 s and 7200 s"
        );
        c.progress_deadline = Some(Duration::from_secs(7200));
        assert!(c.validate().is_ok());
    }
}
