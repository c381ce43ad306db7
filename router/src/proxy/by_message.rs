//! Routing a request to the router itself (its Host or `:authority` names no service) by the model
//! its body names: a gRPC call by its first message ([`crate::peek`]), an OpenAI request by the
//! `"model"` of its JSON body ([`crate::openai`]). Which requests qualify, and reading the body
//! until the name is known: bounded in bytes by each reader, in time here, and in the sum held by
//! every connection at once by a [`PeekBudget`] (past it, 503 and the connection closes, so that
//! many stalled bodies cannot grow the router's memory). The bytes read are handed back to be sent
//! upstream first; the rest of the body streams after them.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use pingora::protocols::http::ServerSession;
use skiff_http::grpc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{continue_100, expects_continue};
use crate::failure::Failure;
use crate::openai::{self, Endpoint, ModelField};
use crate::peek::{self, Method, Peek};
use crate::table::RouteTable;

/// The bytes that bodies being read to find their model may hold at once, across connections.
pub(crate) struct PeekBudget {
    bytes: Arc<Semaphore>,
    total: usize,
}

impl PeekBudget {
    /// A budget of `total` bytes (at most `u32::MAX`, as the configuration checks).
    pub(crate) fn new(total: usize) -> PeekBudget {
        PeekBudget { bytes: Arc::new(Semaphore::new(total)), total }
    }

    /// Grows what `held` holds to `bytes`; a failure when the budget has no room for the rest.
    fn hold(&self, held: &mut Option<OwnedSemaphorePermit>, bytes: usize) -> Result<(), Failure> {
        let more = bytes.saturating_sub(held.as_ref().map_or(0, OwnedSemaphorePermit::num_permits));
        if more == 0 {
            return Ok(());
        }
        let full = || Failure::PeekBudget { budget: self.total };
        let permit = self.bytes.clone().try_acquire_many_owned(u32::try_from(more).map_err(|_| full())?);
        let permit = permit.map_err(|_| full())?;
        match held {
            Some(held) => held.merge(permit),
            None => *held = Some(permit),
        }
        Ok(())
    }
}

/// How a request to the router itself names its model in its body.
pub(super) enum ByBody {
    /// A gRPC method whose request names the model in this protobuf field.
    Grpc { method: String, field: u32 },
    /// An OpenAI request: its JSON body's `"model"`.
    OpenAi,
}

/// How the request, to the router itself (`host` names no service), names its model in its body;
/// `None` for a request that does not; an error for a method of the inference service that names
/// no model.
pub(super) fn by_body(session: &ServerSession, table: &RouteTable, host: &str) -> Result<Option<ByBody>, Failure> {
    let req = session.req_header();
    if table.is_service_host(host) {
        return Ok(None);
    }
    if session.is_http2() && grpc::is_grpc(&req.headers) {
        return match peek::method(req.uri.path()) {
            Some((name, Method::Model(field))) => Ok(Some(ByBody::Grpc { method: name.to_owned(), field })),
            Some((name, _)) => Err(Failure::NotRoutable { method: name.to_owned() }),
            None => Ok(None),
        };
    }
    Ok((openai::endpoint(&req.method, req.uri.path()) == Some(Endpoint::ByModel)).then_some(ByBody::OpenAi))
}

impl ByBody {
    /// Where the name was read, for an unknown model's message.
    pub(super) fn named_in(&self) -> &'static str {
        match self {
            ByBody::Grpc { .. } => "the gRPC request",
            ByBody::OpenAi => "the body's \"model\"",
        }
    }

    /// Reads the request body until the model it names is known, within `limit` and `budget`: the
    /// name and every byte read. A client waiting for `100 Continue` is told to send its body first.
    pub(super) async fn model_name(
        &self,
        session: &mut ServerSession,
        limit: Duration,
        budget: &PeekBudget,
    ) -> Result<(String, Bytes), Failure> {
        match self {
            ByBody::Grpc { method, field } => {
                let no_name = |why: String| Failure::NoModelName { method: method.clone(), why };
                read_name(session, (limit, budget), no_name, "its first message", |read, ended| {
                    peek::peek(read, *field, ended)
                })
                .await
            }
            ByBody::OpenAi => {
                if expects_continue(session.req_header()) {
                    continue_100(session).await?;
                }
                let path = session.req_header().uri.path().to_owned();
                let no_name = |why: String| Failure::NoJsonModel { path: path.clone(), why };
                let mut field = ModelField::default();
                read_name(session, (limit, budget), no_name, "its JSON object", |read, ended| field.peek(read, ended))
                    .await
            }
        }
    }
}

/// Reads the body until `peek` (given every byte read so far, and whether the body has ended)
/// finds the name, within `limit` and holding its bytes in `budget` meanwhile; `what` holds the
/// name, for the messages of `no_name`.
async fn read_name<E: Display>(
    session: &mut ServerSession,
    (limit, budget): (Duration, &PeekBudget),
    no_name: impl Fn(String) -> Failure,
    what: &str,
    mut peek: impl FnMut(&[u8], bool) -> Peek<E>,
) -> Result<(String, Bytes), Failure> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut read = BytesMut::new();
    let mut held = None;
    let mut ended = session.is_body_done();
    loop {
        match peek(&read, ended) {
            Peek::Found(name) if name.is_empty() => return Err(no_name("its model name is empty".to_owned())),
            Peek::Found(name) => return Ok((name, read.freeze())),
            Peek::Absent => return Err(no_name(format!("{what} names no model"))),
            Peek::Invalid(error) => return Err(no_name(error.to_string())),
            Peek::NeedMore => {}
        }
        match tokio::time::timeout_at(deadline, session.read_request_body()).await {
            Err(_) => return Err(no_name(format!("{what} did not arrive within {limit:?}"))),
            Ok(Err(e)) => return Err(Failure::BadRequest(format!("reading the body: {e}"))),
            Ok(Ok(Some(chunk))) => {
                read.extend_from_slice(&chunk);
                // What the buffer holds counts, its spare room included.
                budget.hold(&mut held, read.capacity())?;
                ended = session.is_body_done();
            }
            Ok(Ok(None)) => ended = true,
        }
    }
}
