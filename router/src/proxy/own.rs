//! The router's own answers to the Open Inference Protocol's server-level requests ([`crate::v2`])
//! and to OpenAI's `GET .../v1/models` ([`crate::openai`]) when their Host or `:authority` names no
//! service: JSON over REST, a protobuf message over gRPC. A request whose host names a service goes
//! to that service as any other.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use pingora::http::ResponseHeader;
use pingora::protocols::http::ServerSession;
use skiff_http::grpc;

use super::{Proxy, host_of};
use crate::failure;
use crate::openai::{self, Endpoint};
use crate::peek::{self, Method};
use crate::v2::{self, Ask};

impl Proxy {
    /// Answers a server-level request to the router itself; `None` when the request is not one
    /// (it is routed), else whether the connection can be used again.
    pub(super) async fn answer_own(&self, session: &mut ServerSession) -> Option<bool> {
        let req = session.req_header();
        let grpc_call = session.is_http2() && grpc::is_grpc(&req.headers);
        let ask = if grpc_call {
            match peek::method(req.uri.path())?.1 {
                Method::ServerLive => Ask::Live,
                Method::ServerReady => Ask::Ready,
                Method::ServerMetadata => Ask::Metadata,
                Method::Model(_) | Method::Unroutable => return None,
            }
        } else if openai::endpoint(&req.method, req.uri.path()) == Some(Endpoint::Models) {
            let table = self.table.load();
            if table.is_service_host(host_of(req)) {
                return None;
            }
            let body = openai::models(&table, self.started);
            return Some(failure::respond(session, 200, "application/json", Bytes::from(body.to_string())).await);
        } else {
            v2::rest(&req.method, req.uri.path())?
        };
        let table = self.table.load();
        if table.is_service_host(host_of(req)) {
            return None;
        }
        let not_ready = match ask {
            Ask::Ready => v2::not_ready(
                &table,
                self.draining.load(Ordering::Acquire),
                !self.activators.ready().is_empty(),
                |key| self.endpoints.get(key).is_some_and(|revision| !revision.ready().is_empty()),
            ),
            Ask::Live | Ask::Metadata => Vec::new(),
        };
        if grpc_call {
            return Some(respond_grpc(session, v2::grpc_frame(&v2::protobuf(ask, &not_ready))).await);
        }
        let (status, body) = v2::json(ask, &not_ready);
        Some(failure::respond(session, status, "application/json", Bytes::from(body.to_string())).await)
    }
}

/// Answers a gRPC call with one message (`frame`, prefix included) and status OK.
async fn respond_grpc(session: &mut ServerSession, frame: Vec<u8>) -> bool {
    let Ok(mut head) = ResponseHeader::build(200, Some(1)) else { return false };
    if head.insert_header(header::CONTENT_TYPE, grpc::CONTENT_TYPE).is_err() {
        return false;
    }
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    session.write_response_header(Box::new(head)).await.is_ok()
        && session.write_response_body(Bytes::from(frame), false).await.is_ok()
        && session.write_response_trailers(trailers).await.is_ok()
}
