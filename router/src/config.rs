//! The router's configuration, with defaults and range checks.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::downstream::DownstreamLimits;
use crate::{Error, Result};

/// Longest grace period accepted.
const MAX_GRACE_PERIOD: Duration = Duration::from_secs(3600);
/// Largest budget accepted for bodies read to find their model (a semaphore takes 32-bit counts).
const MAX_PEEK_BUDGET: usize = u32::MAX as usize;
/// Most worker threads accepted.
const MAX_THREADS: usize = 256;

/// How the router listens, which domain its service hosts live under, where the activator is,
/// and how it shuts down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterConfig {
    /// Where the proxy listens (port 0 picks a free port, see `RouterHandle::listen_addr`).
    pub listen: SocketAddr,
    /// Domain of service hosts: `<name>.<namespace>.<domain>`; empty for `<name>.<namespace>`.
    pub domain: String,
    /// The activator's HTTP address, for revisions without a replica that has room; `None` when
    /// the activators are discovered (see [`crate::Router::activators`]).
    pub activator: Option<SocketAddr>,
    /// Worker threads of the proxy runtime.
    pub threads: usize,
    /// On a graceful stop (or SIGTERM): how long in-flight requests may still finish after the
    /// listener closes. Pingora counts whole seconds, so this is rounded up.
    pub grace_period: Duration,
    /// The client side's bounds: the request head's deadline and the connection cap.
    pub downstream: DownstreamLimits,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            listen: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 8080)),
            domain: "example.com".to_owned(),
            activator: Some(SocketAddr::from((Ipv4Addr::LOCALHOST, 8012))),
            threads: 2,
            grace_period: Duration::from_secs(5),
            downstream: DownstreamLimits::default(),
        }
    }
}

impl RouterConfig {
    /// Checks every field against its allowed range.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(Error::Config(format!("threads must be between 1 and {MAX_THREADS}, got {}", self.threads)));
        }
        if self.grace_period > MAX_GRACE_PERIOD {
            return Err(Error::Config(format!(
                "grace_period must be at most {} s, got {:?}",
                MAX_GRACE_PERIOD.as_secs(),
                self.grace_period
            )));
        }
        let timeout = self.downstream.header_timeout;
        if timeout < Duration::from_secs(1) || timeout.as_secs() > skiff_http::MAX_SECS {
            return Err(Error::Config(format!(
                "downstream.header_timeout must be between 1 s and {} s, got {timeout:?}",
                skiff_http::MAX_SECS
            )));
        }
        let idle = self.downstream.stream_idle_timeout;
        if idle < Duration::from_secs(1) || idle.as_secs() > skiff_http::MAX_SECS {
            return Err(Error::Config(format!(
                "downstream.stream_idle_timeout must be between 1 s and {} s, got {idle:?}",
                skiff_http::MAX_SECS
            )));
        }
        if self.downstream.max_connections == 0 {
            return Err(Error::Config("downstream.max_connections must be at least 1".into()));
        }
        let budget = self.downstream.peek_budget;
        if !(crate::openai::PEEK_LIMIT..=MAX_PEEK_BUDGET).contains(&budget) {
            return Err(Error::Config(format!(
                "downstream.peek_budget must be between {} and {MAX_PEEK_BUDGET} bytes (1 MiB to 4 GiB), got {budget}",
                crate::openai::PEEK_LIMIT
            )));
        }
        if let Some(activator) = self.activator
            && (activator.port() == 0 || activator.ip().is_unspecified())
        {
            return Err(Error::Config(format!("activator must be a concrete address and port, got {activator}")));
        }
        let label_ok = |l: &str| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        if !self.domain.is_empty() && !self.domain.split('.').all(label_ok) {
            return Err(Error::Config(format!(
                "domain must be empty or dot-separated labels of letters, digits and inner hyphens, got {:?}",
                self.domain
            )));
        }
        Ok(())
    }

    /// The grace period in whole seconds, rounded up, as Pingora takes it.
    pub(crate) fn grace_period_secs(&self) -> u64 {
        self.grace_period.as_secs() + u64::from(self.grace_period.subsec_nanos() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid() {
        RouterConfig::default().validate().unwrap();
        let empty_domain = RouterConfig { domain: String::new(), ..RouterConfig::default() };
        empty_domain.validate().unwrap();
    }

    #[test]
    fn out_of_range_values_are_refused_with_the_range() {
        let bad = [
            (RouterConfig { threads: 0, ..RouterConfig::default() }, "between 1 and 256"),
            (RouterConfig { grace_period: Duration::from_secs(7200), ..RouterConfig::default() }, "at most 3600 s"),
            (RouterConfig { activator: Some("127.0.0.1:0".parse().unwrap()), ..RouterConfig::default() }, "activator"),
            (RouterConfig { activator: Some("0.0.0.0:80".parse().unwrap()), ..RouterConfig::default() }, "activator"),
            (RouterConfig { domain: ".example.com".to_owned(), ..RouterConfig::default() }, "domain"),
            (
                RouterConfig {
                    downstream: DownstreamLimits { peek_budget: 1000, ..DownstreamLimits::default() },
                    ..RouterConfig::default()
                },
                "peek_budget must be between 1048576",
            ),
            (RouterConfig { domain: "ex ample.com".to_owned(), ..RouterConfig::default() }, "domain"),
        ];
        for (config, expected) in bad {
            let message = config.validate().unwrap_err().to_string();
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn the_grace_period_rounds_up_to_whole_seconds() {
        let secs = |ms| {
            RouterConfig { grace_period: Duration::from_millis(ms), ..RouterConfig::default() }.grace_period_secs()
        };
        assert_eq!((secs(0), secs(1), secs(1000), secs(1500)), (0, 1, 1, 2));
    }
}
