//! HTTP/2 (prior knowledge) connections to replicas and activators, for requests that came in over
//! HTTP/2: gRPC needs HTTP/2 end to end for its trailers. One multiplexed connection per address is
//! shared by every request to it and driven by its own task; it is dialled again once it has
//! closed, or when it has gone [`POOL_IDLE_TIMEOUT`] without a new request (well before the
//! upstream's own idle cut, so a request never lands on a connection being closed).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::{POOL_IDLE_TIMEOUT, UpstreamBody, UpstreamError, connect};

/// A stream on an address's shared HTTP/2 connection.
pub(crate) struct Http2 {
    sender: http2::SendRequest<UpstreamBody>,
    /// The connection carried requests before this one.
    pub(super) reused: bool,
}

/// The shared HTTP/2 connections, by address.
#[derive(Default)]
pub(crate) struct Http2Pool {
    shared: Mutex<HashMap<SocketAddr, Shared>>,
}

struct Shared {
    sender: http2::SendRequest<UpstreamBody>,
    /// When it was last handed to a request.
    used: Instant,
}

impl Http2Pool {
    /// A stream on the shared connection to `addr`, dialling one when there is none still open.
    pub(super) async fn get(&self, addr: SocketAddr, connect_timeout: Duration) -> Result<Http2, UpstreamError> {
        if let Some(sender) = self.take(addr) {
            return Ok(Http2 { sender, reused: true });
        }
        let stream = connect(addr, connect_timeout).await?;
        let handshake = http2::Builder::new(TokioExecutor::new()).handshake(TokioIo::new(stream));
        let (sender, connection) = tokio::time::timeout(connect_timeout, handshake)
            .await
            .map_err(|_| UpstreamError::ConnectTimeout)?
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%addr, error = %e, "upstream HTTP/2 connection ended");
            }
        });
        let mut shared = self.lock();
        // Connections that closed since are forgotten here, so addresses gone for good do not pile up.
        shared.retain(|_, conn| !conn.sender.is_closed());
        shared.insert(addr, Shared { sender: sender.clone(), used: Instant::now() });
        Ok(Http2 { sender, reused: false })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Shared>> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The open shared connection to `addr`, if it was used recently enough.
    fn take(&self, addr: SocketAddr) -> Option<http2::SendRequest<UpstreamBody>> {
        let mut shared = self.lock();
        let conn = shared.get_mut(&addr)?;
        let now = Instant::now();
        if conn.sender.is_closed() || now.duration_since(conn.used) >= POOL_IDLE_TIMEOUT {
            // Requests still in flight on it finish; the connection closes after them.
            shared.remove(&addr);
            return None;
        }
        conn.used = now;
        Some(conn.sender.clone())
    }
}

impl Http2 {
    /// Sends the request once the connection has room for another stream, and waits for the
    /// response head; its body (and trailers) arrive through the connection's own task.
    pub(super) async fn send(
        &mut self,
        request: http::Request<UpstreamBody>,
    ) -> Result<http::Response<hyper::body::Incoming>, UpstreamError> {
        let failed = |e: hyper::Error| UpstreamError::Failed(e.to_string());
        self.sender.ready().await.map_err(failed)?;
        self.sender.send_request(request).await.map_err(failed)
    }
}
