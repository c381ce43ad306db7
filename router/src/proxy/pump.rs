//! A request body that streams: chunks move from the client to the upstream one at a time, in
//! turn with the answer coming back (the proxy polls [`Pump::step`] beside the upstream), so
//! neither direction waits for the other to end. A step can be cancelled at any await and lose
//! nothing: a chunk read from the client is kept until the upstream's channel takes it. Once the
//! body has gone, the client is watched until the answer's head arrives ([`client_gone`]).

use bytes::Bytes;
use http_body_util::channel::Sender;
use pingora::protocols::http::ServerSession;

use crate::failure::Failure;

/// The client's body on its way upstream.
pub(crate) struct Pump {
    /// `None` once the body has ended or the upstream stopped taking it.
    sender: Option<Sender<Bytes>>,
    /// Read from the client (or routing's first bytes), not yet taken by the upstream.
    pending: Option<Bytes>,
}

impl Pump {
    /// Sends `first` (bytes already read from the body), then the rest of the client's body, to `sender`.
    pub(crate) fn new(sender: Sender<Bytes>, first: Option<Bytes>) -> Pump {
        Pump { sender: Some(sender), pending: first.filter(|first| !first.is_empty()) }
    }

    /// A pump with nothing left to move (the body went whole).
    pub(crate) fn done() -> Pump {
        Pump { sender: None, pending: None }
    }

    /// True while there is body left to move.
    pub(crate) fn active(&self) -> bool {
        self.sender.is_some()
    }

    /// While the answer's head is awaited: a [`Pump::step`] while body is left, then
    /// [`client_gone`], so that a client that leaves a request held for minutes takes it back.
    pub(crate) async fn step_or_watch(&mut self, session: &mut ServerSession) -> Result<(), Failure> {
        if self.active() { self.step(session).await } else { Err(client_gone(session).await) }
    }

    /// Moves one chunk (reading it first unless one waits), or ends the upstream's body when the
    /// client's has ended. An upstream that stops taking the body (it answered early or failed)
    /// ends the pump quietly: its answer decides the outcome.
    pub(crate) async fn step(&mut self, session: &mut ServerSession) -> Result<(), Failure> {
        if self.pending.is_none() {
            match session.read_request_body().await {
                Ok(Some(chunk)) => self.pending = Some(chunk),
                Ok(None) => {
                    self.sender = None;
                    return Ok(());
                }
                Err(e) => {
                    self.sender = None;
                    return Err(Failure::BadRequest(format!("reading the body: {e}")));
                }
            }
        }
        let (Some(sender), Some(chunk)) = (self.sender.as_mut(), self.pending.clone()) else { return Ok(()) };
        if sender.send_data(chunk).await.is_err() {
            self.sender = None;
        }
        self.pending = None;
        Ok(())
    }
}

/// Resolves, as [`Failure::ClientGone`], when the client closes its connection (or resets its
/// HTTP/2 stream) after its whole request: a request it no longer waits for. Call it only once the
/// body has been read; a client that sends more (a pipelined next request) counts as gone, as in
/// Pingora's own proxy.
pub(crate) async fn client_gone(session: &mut ServerSession) -> Failure {
    // With no body expected, this reads only to see the connection close; it never returns Ok.
    let _ = session.read_body_or_idle(true).await;
    Failure::ClientGone
}
