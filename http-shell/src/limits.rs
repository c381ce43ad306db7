//! The bounds every Skiff HTTP server keeps (Envoy's and nginx's: bounded connections, streams and
//! every client phase), and the drain on shutdown.

use std::time::Duration;

/// Longest duration, in seconds, any Skiff flag or setting takes (a day): longer ones overflow
/// clocks and help no one.
pub const MAX_SECS: u64 = 86_400;

/// Most requests any Skiff server lets through at once (`containerConcurrency`): well past any
/// real setting, and far inside what its semaphores and queue arithmetic take.
pub const MAX_CONCURRENCY: usize = 1 << 24;

/// Bounds on one server's connections and the client's phases, and how it drains.
#[derive(Debug, Clone)]
pub struct ServeLimits {
    /// Connections held at once; past it the listener stops accepting (the kernel's backlog waits).
    pub max_connections: usize,
    /// Time an HTTP/1.1 connection may take from waiting for a request to having its whole head
    /// (hyper starts the timer when it waits, so it also bounds the idle time between requests).
    pub header_timeout: Duration,
    /// Time a connection with no request in flight stays open (HTTP/1.1 and HTTP/2).
    pub idle_timeout: Duration,
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
            idle_timeout: Duration::from_secs(20),
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
