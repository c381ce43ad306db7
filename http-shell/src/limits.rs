//! The bounds every Skiff HTTP server keeps (Envoy's and nginx's: bounded connections, streams and
//! every client phase), and the drain on shutdown.

use std::time::Duration;

/// Longest duration, in seconds, any Skiff flag or setting takes (a day): longer ones overflow
/// clocks and help no one.
pub const MAX_SECS: u64 = 86_400;

/// Most requests any Skiff server lets through at once (`containerConcurrency`): well past any
/// real setting, and far inside what its semaphores and queue arithmetic take.
pub const MAX_CONCURRENCY: usize = 1 << 24;

/// Refuses a `--flag` duration past [`MAX_SECS`], naming the flag.
pub fn check_secs(flag: &str, secs: u64) -> Result<(), String> {
    if secs > MAX_SECS { Err(format!("--{flag} {secs} is more than {MAX_SECS} (a day)")) } else { Ok(()) }
}

/// Refuses a `--container-concurrency` past [`MAX_CONCURRENCY`].
pub fn check_concurrency(value: usize) -> Result<(), String> {
    if value > MAX_CONCURRENCY {
        Err(format!("--container-concurrency {value} is more than {MAX_CONCURRENCY}"))
    } else {
        Ok(())
    }
}

/// Bounds on one server's connections and the client's phases, and how it drains.
#[derive(Debug, Clone)]
pub struct ServeLimits {
    /// Connections held at once; past it the listener stops accepting (the kernel's backlog waits).
    pub max_connections: usize,
    /// Time a connection may spend with nothing in flight (just accepted, or its last response
    /// sent) before its next request's head is complete: it bounds a client dribbling its head (or
    /// the first bytes that say which HTTP version it speaks) and idle keep-alive alike. Past it the
    /// connection is closed.
    pub header_timeout: Duration,
    /// Time a request body may take to arrive, from its head (see [`crate::body::read_body`]).
    pub body_timeout: Duration,
    /// HTTP/2 streams open at once on one connection.
    pub max_h2_streams: u32,
    /// After shutdown is asked, how long to keep accepting and serving before the listener closes,
    /// so that load balancers and endpoint lists stop sending first (Knative's drain sleep).
    pub drain_delay: Duration,
    /// Then, how long in-flight requests may take before busy connections are abandoned.
    pub drain_timeout: Duration,
}

impl Default for ServeLimits {
    fn default() -> ServeLimits {
        ServeLimits {
            max_connections: 10_000,
            header_timeout: Duration::from_secs(20),
            body_timeout: Duration::from_secs(60),
            max_h2_streams: 256,
            drain_delay: Duration::ZERO,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

impl ServeLimits {
    /// The longest a shutdown can take: the drain delay, then the drain timeout.
    pub fn shutdown_bound(&self) -> Duration {
        self.drain_delay.saturating_add(self.drain_timeout)
    }
}
