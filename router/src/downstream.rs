//! The client side of the router: Pingora's HTTP/1.1 sessions on each accepted connection, or its
//! HTTP/2 sessions when the client opens with HTTP/2's preface (h2c prior knowledge, [`h2c`]), with
//! what Pingora leaves open closed here. Pingora bounds each *read* of a request head (60 s), not
//! the head as a whole, so a client trickling a byte at a time could hold a connection for hours,
//! and it accepts every connection. Each request head gets a deadline counted from when the
//! connection starts waiting for it (so it also bounds idle keep-alive, as hyper's header timeout
//! does), and connections past a cap are closed at once. An HTTP/2 connection counts once against
//! the cap however many streams it carries (at most 256).

mod h2c;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::ErrorType;
use pingora::apps::{HttpPersistentSettings, ReusedHttpStream, ServerApp};
use pingora::protocols::Stream;
use pingora::protocols::http::ServerSession;
use pingora::server::ShutdownWatch;
use tokio::sync::Semaphore;

use crate::failure;
use crate::proxy::Proxy;

/// Bounds on the client side of the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownstreamLimits {
    /// Time from waiting for a request to having its whole head.
    pub header_timeout: Duration,
    /// Connections held at once.
    pub max_connections: usize,
    /// Bytes held at once, across every connection, by request bodies read to find the model they
    /// name (OpenAI requests and gRPC calls to the router itself): past it such a request gets 503
    /// and its connection closes. Each body is bounded on its own as well (1 MiB, 8 KiB), and in
    /// time by `header_timeout`.
    pub peek_budget: usize,
    /// How long an exchange whose answer has begun may go with no bytes flowing either way before
    /// the router ends it (Envoy's stream idle timeout): an idle gRPC stream or a stalled answer
    /// holds a slot on its replica. A gRPC call hears `DEADLINE_EXCEEDED` naming it.
    pub stream_idle_timeout: Duration,
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
            peek_budget: 64 * 1024 * 1024,
            stream_idle_timeout: Duration::from_secs(60),
            drain_delay: Duration::ZERO,
        }
    }
}

/// The router's Pingora app: the connection loop around [`Proxy::serve`].
pub(crate) struct Guarded {
    proxy: Proxy,
    limits: DownstreamLimits,
    connections: Arc<Semaphore>,
}

impl Guarded {
    pub(crate) fn new(proxy: Proxy, limits: DownstreamLimits) -> Guarded {
        Guarded { proxy, connections: Arc::new(Semaphore::new(limits.max_connections)), limits }
    }

    /// Serves one request; the connection to read the next one from, `None` when it ends (closed by
    /// the client, a head too slow or unreadable, or an answer that leaves it unusable).
    async fn one(&self, mut session: ServerSession, shutdown: &ShutdownWatch) -> Option<ReusedHttpStream> {
        session.set_keepalive(if *shutdown.borrow() { None } else { Some(self.limits.header_timeout.as_secs()) });
        match tokio::time::timeout(self.limits.header_timeout, session.read_request()).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return None,
            Ok(Err(e)) if e.etype() == &ErrorType::InvalidHTTPHeader => {
                tracing::debug!(error = %e, "answering 400 to a request head that could not be parsed");
                failure::answer_unparseable(&mut session).await;
                return None;
            }
            // The client closed or reset mid-head: nobody is left to answer.
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "closing a connection whose request head could not be read");
                return None;
            }
            Err(_) => {
                tracing::debug!(timeout = ?self.limits.header_timeout, "closing a connection whose request head did not arrive in time");
                return None;
            }
        }
        if !self.proxy.serve(&mut session).await {
            return None;
        }
        let settings = HttpPersistentSettings::for_session(&session);
        let reusable = session.finish().await.ok()??;
        Some(ReusedHttpStream::from_reusable_stream(reusable, settings))
    }
}

#[async_trait]
impl ServerApp for Guarded {
    async fn process_new(self: &Arc<Self>, stream: Stream, shutdown: &ShutdownWatch) -> Option<Stream> {
        let Ok(_permit) = self.connections.clone().try_acquire_owned() else {
            tracing::warn!(max = self.limits.max_connections, "connection cap reached; closing a new connection");
            return None;
        };
        let detected = tokio::time::timeout(self.limits.header_timeout, h2c::detect(stream)).await;
        let stream = match detected {
            Ok(Ok((stream, Some(false)))) => stream,
            Ok(Ok((stream, Some(true)))) => {
                h2c::serve(self, stream, shutdown).await;
                return None;
            }
            Ok(Ok((_, None))) => return None,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "closing a connection whose first bytes could not be read");
                return None;
            }
            Err(_) => {
                tracing::debug!(timeout = ?self.limits.header_timeout, "closing a connection that sent nothing in time");
                return None;
            }
        };
        let mut session = ServerSession::new_http1(stream);
        loop {
            let (stream, persisted) = self.one(session, shutdown).await?.consume();
            session = ServerSession::new_http1(stream);
            if let Some(persisted) = persisted {
                persisted.apply_to_session(&mut session);
            }
        }
    }
}
