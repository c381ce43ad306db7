//! HTTP/2 cleartext (prior knowledge) on the router's listener, beside HTTP/1.1: a connection that
//! opens with HTTP/2's preface gets Pingora's HTTP/2 server, and each of its streams becomes a
//! [`ServerSession`] served by the same [`crate::proxy::Proxy::serve`] as an HTTP/1.1 request, so
//! routing stays one code path. The accept loop is the router's own (Pingora's is private): it
//! bounds streams per connection, closes a connection idle for the head deadline, and on shutdown
//! sends GOAWAY and lets the streams in flight finish.

use std::sync::Arc;
use std::time::Duration;

use pingora::protocols::http::ServerSession;
use pingora::protocols::http::v2::server::{self, H2Accept, HttpSession};
use pingora::protocols::l4::stream::Stream as TcpStream;
use pingora::protocols::{Digest, Stream};
use pingora::server::ShutdownWatch;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use super::Guarded;

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Streams open at once on one connection (as `skiff_http::serve` allows).
const MAX_STREAMS: u32 = 256;

/// Reads until the first bytes are HTTP/2's preface or cannot be, and puts them back for the
/// session that will read them: `Some(true)` for HTTP/2, `Some(false)` for HTTP/1.1, `None` when the
/// client closed first. An HTTP/1.1 request differs at its first or second byte, so this is one
/// read from the connection's buffer. (Pingora's own check reads 24 bytes, which a short HTTP/1.0
/// request never sends.)
pub(super) async fn detect(stream: Stream) -> std::io::Result<(Stream, Option<bool>)> {
    if !stream.as_any().is::<TcpStream>() {
        return Ok((stream, Some(false)));
    }
    let mut tcp = stream.into_any().downcast::<TcpStream>().expect("checked above");
    let mut first = [0u8; PREFACE.len()];
    let mut read = 0;
    while read < PREFACE.len() && PREFACE.starts_with(&first[..read]) {
        match tcp.read(&mut first[read..]).await? {
            0 if read == 0 => return Ok((tcp, None)),
            0 => break,
            n => read += n,
        }
    }
    tcp.rewind(&first[..read]);
    Ok((tcp, Some(first[..read] == *PREFACE)))
}

/// Serves an HTTP/2 connection until the client closes it, it idles for the head deadline with no
/// stream open, or, after a shutdown signal and GOAWAY, its last stream ends.
pub(super) async fn serve(app: &Arc<Guarded>, stream: Stream, shutdown: &ShutdownWatch) {
    let limit = app.limits.header_timeout;
    let digest = Arc::new(Digest {
        ssl_digest: None,
        timing_digest: stream.get_timing_digest(),
        proxy_digest: stream.get_proxy_digest(),
        socket_digest: stream.get_socket_digest(),
    });
    let mut options = server::default_h2_options();
    options.max_concurrent_streams(MAX_STREAMS);
    let mut conn = match tokio::time::timeout(limit, server::handshake(stream, Some(options))).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return tracing::debug!(error = %e, "closing an HTTP/2 connection whose handshake failed"),
        Err(_) => {
            return tracing::debug!(timeout = ?limit, "closing an HTTP/2 connection whose handshake did not end in time");
        }
    };
    let open = Arc::new(watch::Sender::new(0usize));
    let mut shutdown = shutdown.clone();
    let mut draining = false;
    loop {
        if !draining && *shutdown.borrow() {
            conn.graceful_shutdown();
            draining = true;
        }
        let accepted = tokio::select! {
            biased;
            _ = shutdown.changed(), if !draining => {
                conn.graceful_shutdown();
                draining = true;
                continue;
            }
            // Accepting also drives the connection: every open stream's frames move through it.
            accepted = HttpSession::from_h2_conn(&mut conn, digest.clone()) => accepted,
            () = idle(&open, limit) => {
                return tracing::debug!(timeout = ?limit, "closing an idle HTTP/2 connection");
            }
        };
        let session = match accepted {
            Ok(Some(H2Accept::Session(session))) => session,
            // Refused by Pingora (a malformed head), already answered or reset; the others go on.
            Ok(Some(H2Accept::Rejected)) => continue,
            Ok(None) => return,
            Err(e) => return tracing::debug!(error = %e, "HTTP/2 connection ended"),
        };
        let stream = Open::new(&open);
        let app = app.clone();
        tokio::spawn(async move {
            let _open = stream;
            let mut session = ServerSession::new_http2(session);
            // A client that stops reading holds its stream (and the connection) no longer than this per write.
            session.set_write_timeout(Some(limit));
            app.proxy.serve(&mut session).await;
            if let Err(e) = session.finish().await {
                tracing::debug!(error = %e, "could not end an HTTP/2 stream");
            }
        });
    }
}

/// Counts a stream as open until dropped.
struct Open(Arc<watch::Sender<usize>>);

impl Open {
    fn new(open: &Arc<watch::Sender<usize>>) -> Open {
        open.send_modify(|n| *n += 1);
        Open(open.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// Completes once no stream has been open for `limit`.
async fn idle(open: &watch::Sender<usize>, limit: Duration) {
    let mut streams = open.subscribe();
    loop {
        // The sender lives as long as `open`: waiting cannot fail.
        let _ = streams.wait_for(|n| *n == 0).await;
        if tokio::time::timeout(limit, streams.wait_for(|n| *n > 0)).await.is_err() {
            return;
        }
    }
}
