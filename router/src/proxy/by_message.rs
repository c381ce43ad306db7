//! Routing a gRPC call by the model its first message names, when its `:authority` names no
//! service: which calls qualify and which field names the model ([`crate::peek::method`]), and
//! reading the body until [`crate::peek::peek`] finds the name (bounded in bytes and in time). The
//! bytes read are handed back to be sent upstream first; the rest of the body streams after them.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use pingora::protocols::http::ServerSession;
use skiff_http::grpc;

use crate::failure::Failure;
use crate::peek::{self, Method, Peek};
use crate::table::RouteTable;

/// For a gRPC call over HTTP/2 to the router itself (its authority, `host`, names no service):
/// the method and the protobuf field its request names the model in. `None` for any other
/// request; an error for a method of the inference service that names no model.
pub(super) fn method(
    session: &ServerSession,
    table: &RouteTable,
    host: &str,
) -> Result<Option<(String, u32)>, Failure> {
    let req = session.req_header();
    if !session.is_http2() || !grpc::is_grpc(&req.headers) || table.is_service_host(host) {
        return Ok(None);
    }
    match peek::method(req.uri.path()) {
        Some((name, Method::Model(field))) => Ok(Some((name.to_owned(), field))),
        Some((name, _)) => Err(Failure::NotRoutable { method: name.to_owned() }),
        None => Ok(None),
    }
}

/// Reads the request body until its first message's model name is known, within `limit`: the
/// name and every byte read.
pub(super) async fn model_name(
    session: &mut ServerSession,
    method: &str,
    field: u32,
    limit: Duration,
) -> Result<(String, Bytes), Failure> {
    let no_name = |why: String| Failure::NoModelName { method: method.to_owned(), why };
    let deadline = tokio::time::Instant::now() + limit;
    let mut read = BytesMut::new();
    let mut ended = session.is_body_done();
    loop {
        match peek::peek(&read, field, ended) {
            Peek::Found(name) if name.is_empty() => return Err(no_name("its model name is empty".to_owned())),
            Peek::Found(name) => return Ok((name, read.freeze())),
            Peek::Absent => return Err(no_name("its first message names no model".to_owned())),
            Peek::Invalid(error) => return Err(no_name(error.to_string())),
            Peek::NeedMore => {}
        }
        match tokio::time::timeout_at(deadline, session.read_request_body()).await {
            Err(_) => return Err(no_name(format!("its first message did not arrive within {limit:?}"))),
            Ok(Err(e)) => return Err(Failure::BadRequest(format!("reading the body: {e}"))),
            Ok(Ok(Some(chunk))) => {
                read.extend_from_slice(&chunk);
                ended = session.is_body_done();
            }
            Ok(Ok(None)) => ended = true,
        }
    }
}
