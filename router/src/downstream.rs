//! What Pingora leaves open on the client side: it bounds each *read* of a request head (60 s),
//! not the head as a whole, so a client trickling a byte at a time holds a connection for hours,
//! and it accepts every connection. This app wraps Pingora's HTTP/1.1 connection loop (the same
//! loop as Pingora's own `ServerApp` for HTTP apps) with a deadline on each request head, counted
//! from when the connection starts waiting for it (so it also bounds idle keep-alive, as hyper's
//! header timeout does), and with a cap on connections held at once (past it, new ones are
//! closed at once). The proxy marks the head read in its first hook ([`head_read`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::apps::{HttpServerApp, ReusedHttpStream, ServerApp};
use pingora::protocols::Stream;
use pingora::protocols::http::ServerSession;
use pingora::proxy::HttpProxy;
use pingora::server::ShutdownWatch;
use tokio::sync::{Notify, Semaphore};

use crate::proxy::Proxy;

tokio::task_local! {
    /// The head deadline of the request being read on this connection's task.
    static HEAD: Arc<Notify>;
}

/// Tells the connection's head deadline that the request head has been read (a no-op outside a
/// guarded connection).
pub(crate) fn head_read() {
    let _ = HEAD.try_with(|head| head.notify_one());
}

/// Bounds on the client side of the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownstreamLimits {
    /// Time from waiting for a request to having its whole head.
    pub header_timeout: Duration,
    /// Connections held at once.
    pub max_connections: usize,
    /// After SIGTERM, how long to keep accepting and serving, readiness off
    /// ([`crate::RouterHandle::draining`]), before Pingora closes the listener and drains: time for
    /// load balancers and endpoint lists to stop sending (Knative's drain sleep).
    pub drain_delay: Duration,
}

impl Default for DownstreamLimits {
    fn default() -> DownstreamLimits {
        DownstreamLimits {
            header_timeout: Duration::from_secs(20),
            max_connections: 10_000,
            drain_delay: Duration::ZERO,
        }
    }
}

/// Pingora's proxy app behind the head deadline and the connection cap.
pub(crate) struct Guarded {
    proxy: Arc<HttpProxy<Proxy>>,
    limits: DownstreamLimits,
    connections: Arc<Semaphore>,
}

impl Guarded {
    pub(crate) fn new(proxy: HttpProxy<Proxy>, limits: DownstreamLimits) -> Guarded {
        Guarded { proxy: Arc::new(proxy), connections: Arc::new(Semaphore::new(limits.max_connections)), limits }
    }

    /// Serves one request; `None` when the connection ends (or its head was too slow).
    async fn one(&self, session: ServerSession, shutdown: &ShutdownWatch) -> Option<ReusedHttpStream> {
        let head = Arc::new(Notify::new());
        let served = HEAD.scope(head.clone(), self.proxy.process_new_http(session, shutdown));
        tokio::pin!(served);
        tokio::select! {
            biased;
            reused = &mut served => return reused,
            () = head.notified() => {}
            () = tokio::time::sleep(self.limits.header_timeout) => {
                tracing::debug!(timeout = ?self.limits.header_timeout, "closing a connection whose request head did not arrive in time");
                return None;
            }
        }
        served.await
    }
}

#[async_trait]
impl ServerApp for Guarded {
    async fn process_new(self: &Arc<Self>, stream: Stream, shutdown: &ShutdownWatch) -> Option<Stream> {
        let Ok(_permit) = self.connections.clone().try_acquire_owned() else {
            tracing::warn!(max = self.limits.max_connections, "connection cap reached; closing a new connection");
            return None;
        };
        let mut session = ServerSession::new_http1(stream);
        loop {
            session.set_keepalive(if *shutdown.borrow() { None } else { Some(self.limits.header_timeout.as_secs()) });
            let (stream, persisted) = self.one(session, shutdown).await?.consume();
            session = ServerSession::new_http1(stream);
            if let Some(persisted) = persisted {
                persisted.apply_to_session(&mut session);
            }
        }
    }

    async fn cleanup(&self) {
        self.proxy.http_cleanup().await;
    }
}
