//! Every way a request can fail in the router, and the one place each becomes an HTTP answer:
//! `{"error": message}` with its status, or, to a gRPC call over HTTP/2, HTTP 200 with the gRPC
//! status and message in trailers. A method the router never forwards gets 405 with `Allow`; an
//! HTTP/1 head Pingora cannot parse gets 400 before the close ([`answer_unparseable`]).

use std::net::SocketAddr;

use bytes::Bytes;
use http::{Method, header};
use pingora::http::ResponseHeader;
use pingora::protocols::http::ServerSession;
use skiff_http::grpc::{self, Code};
use skiff_http::response::brief_str;

use crate::upstream::UpstreamError;

/// The methods the router forwards, as its 405 answers list them in `Allow`. `CONNECT` (a tunnel
/// to anywhere) and `TRACE` (which echoes the request, credentials included) are refused before
/// routing, as nginx and Knative's ingresses do: never forwarded, never retried.
pub(crate) const ALLOWED_METHODS: &str = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/// Whether the router refuses `method` outright (405).
pub(crate) fn refused_method(method: &Method) -> bool {
    *method == Method::CONNECT || *method == Method::TRACE
}

/// Why the router answered a request itself.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A method the router never forwards, `CONNECT` or `TRACE` (405).
    MethodNotAllowed(Method),
    /// No InferenceService matches (404).
    UnknownService { host: String, path: String },
    /// A request routed by the model its body names (`named_in`: where), and no InferenceService
    /// serves that model (404, gRPC NOT_FOUND).
    UnknownModel { model: String, named_in: &'static str },
    /// A gRPC call to the router itself whose model name cannot be read (400, INVALID_ARGUMENT).
    NoModelName { method: String, why: String },
    /// An OpenAI request to the router itself whose JSON body's `"model"` cannot be read (400).
    NoJsonModel { path: String, why: String },
    /// A gRPC method that names no model, called on the router itself (404, UNIMPLEMENTED).
    NotRoutable { method: String },
    /// The service has no revision taking traffic (503).
    NoRevision { service: String },
    /// No replica has room and no activator is ready (503).
    NoActivator { revision: String },
    /// The bodies read to find their model already hold the router's whole budget for them
    /// (503; the connection closes).
    PeekBudget { budget: usize },
    /// The client's request body could not be read (400).
    BadRequest(String),
    /// The upstream could not be reached or failed (502).
    Upstream(String),
    /// The upstream did not answer within the timeout (504).
    Timeout(String),
    /// An answer under way had nothing flowing either way for this long (the stream idle timeout;
    /// logged as 408, Envoy's status for it; gRPC DEADLINE_EXCEEDED).
    StreamIdle(std::time::Duration),
    /// The client is gone: nothing can be written (logged as 499).
    ClientGone,
}

impl Failure {
    /// What an exchange with the upstream at `addr` failing means for the client.
    pub(crate) fn upstream(error: UpstreamError, addr: SocketAddr) -> Failure {
        match error {
            UpstreamError::ConnectTimeout => Failure::Timeout(format!("connecting to {addr}")),
            UpstreamError::Connect(why) => Failure::Upstream(format!("connecting to {addr}: {why}")),
            UpstreamError::Failed(why) => Failure::Upstream(format!("{why} (peer {addr})")),
        }
    }

    /// The status answered (499, nginx's "client closed", when nothing can be).
    pub(crate) fn status(&self) -> u16 {
        match self {
            Failure::MethodNotAllowed(_) => 405,
            Failure::UnknownService { .. } | Failure::UnknownModel { .. } | Failure::NotRoutable { .. } => 404,
            Failure::NoModelName { .. } | Failure::NoJsonModel { .. } => 400,
            Failure::NoRevision { .. } | Failure::NoActivator { .. } | Failure::PeekBudget { .. } => 503,
            Failure::BadRequest(_) => 400,
            Failure::Upstream(_) => 502,
            Failure::Timeout(_) => 504,
            Failure::StreamIdle(_) => 408,
            Failure::ClientGone => 499,
        }
    }

    /// The gRPC status answered to gRPC calls: gRPC's mapping of the HTTP status, except that a
    /// timeout says so (`DEADLINE_EXCEEDED`).
    pub(crate) fn grpc_code(&self) -> Code {
        match self {
            Failure::UnknownService { .. } | Failure::NotRoutable { .. } | Failure::MethodNotAllowed(_) => {
                Code::Unimplemented
            }
            Failure::UnknownModel { .. } => Code::NotFound,
            Failure::NoModelName { .. } | Failure::NoJsonModel { .. } => Code::InvalidArgument,
            Failure::NoRevision { .. }
            | Failure::NoActivator { .. }
            | Failure::PeekBudget { .. }
            | Failure::Upstream(_) => Code::Unavailable,
            Failure::BadRequest(_) => Code::Internal,
            Failure::Timeout(_) | Failure::StreamIdle(_) => Code::DeadlineExceeded,
            Failure::ClientGone => Code::Cancelled,
        }
    }

    /// The message answered.
    pub(crate) fn message(&self) -> String {
        match self {
            Failure::MethodNotAllowed(method) => {
                format!("method {method} is not allowed: the router forwards {ALLOWED_METHODS}")
            }
            Failure::UnknownService { host, path } => {
                format!("no InferenceService matches host {} and path {}", brief_str(host), brief_str(path))
            }
            Failure::UnknownModel { model, named_in } => {
                format!("no InferenceService serves model {} (named in {named_in})", brief_str(model))
            }
            Failure::NoModelName { method, why } => format!(
                "cannot route gRPC {} by the model it names: {why}; or address a service by its authority",
                brief_str(method)
            ),
            Failure::NoJsonModel { path, why } => format!(
                "cannot route POST {} by the \"model\" its JSON body names: {why}; name the InferenceService \
                 in \"model\" within the first {} KiB, or address it by its Host",
                brief_str(path),
                crate::openai::PEEK_LIMIT / 1024
            ),
            Failure::NotRoutable { method } => format!(
                "gRPC {} names no model, so only a service's own authority routes it (<name>.<namespace>.<domain>)",
                brief_str(method)
            ),
            Failure::NoRevision { service } => format!("InferenceService {service} has no revision taking traffic"),
            Failure::NoActivator { revision } => {
                format!("revision {revision} has no ready replica with room and no activator is ready")
            }
            Failure::PeekBudget { budget } => format!(
                "the router is reading too many request bodies to find the model they name ({} MiB at once); \
                 retry later, or address the InferenceService by its Host",
                budget / (1024 * 1024)
            ),
            Failure::BadRequest(why) => format!("bad request: {why}"),
            Failure::Upstream(why) => format!("the upstream failed: {why}"),
            Failure::Timeout(why) => format!("the upstream did not answer in time: {why}"),
            Failure::StreamIdle(idle) => {
                format!("nothing flowed either way for {idle:?} (the router's stream idle timeout): the stream ends")
            }
            Failure::ClientGone => "the client went away".to_owned(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

/// Answers `failure` as JSON, or as a gRPC status to a gRPC call over HTTP/2; false when the
/// connection cannot be used any more.
pub(crate) async fn answer(session: &mut ServerSession, failure: &Failure) -> bool {
    if matches!(failure, Failure::ClientGone) {
        return false;
    }
    if session.is_http2() && grpc::is_grpc(&session.req_header().headers) {
        return answer_grpc(session, failure).await;
    }
    let body = Bytes::from(serde_json::json!({ "error": failure.message() }).to_string());
    if let Failure::PeekBudget { .. } = failure {
        // The rest of the body is not read: the connection ends after the answer, as nginx does with a 413.
        session.set_keepalive(None);
        respond_with(session, 503, "application/json", &[(header::RETRY_AFTER, "1")], body).await;
        return false;
    }
    if let Failure::MethodNotAllowed(method) = failure {
        // A CONNECT client may already be sending its tunnel's bytes: they are not a next request.
        if *method == Method::CONNECT {
            session.set_keepalive(None);
        }
        return respond_with(session, 405, "application/json", &[(header::ALLOW, ALLOWED_METHODS)], body).await;
    }
    respond(session, failure.status(), "application/json", body).await
}

/// Answers an HTTP/1 request head that Pingora could not parse (`read_request` failed with
/// `InvalidHTTPHeader`: not HTTP, a bad header line, conflicting `Content-Length`s, an ambiguous
/// authority, a head over Pingora's 1 MiB, ...) with 400 and a short JSON body, then the connection
/// closes. The head is not echoed back. Pingora's own proxy does the same
/// (`pingora_proxy::HttpProxy::process_new_http`, `respond_error(400)`); the session can still
/// write because nothing was answered on it yet. False when the client is already gone.
pub(crate) async fn answer_unparseable(session: &mut ServerSession) -> bool {
    session.set_keepalive(None);
    let body = serde_json::json!({ "error": "bad request: the request head could not be parsed as HTTP/1.1" });
    respond(session, 400, "application/json", Bytes::from(body.to_string())).await
}

/// A gRPC answer without messages: 200, then the status in trailers (which end the stream).
async fn answer_grpc(session: &mut ServerSession, failure: &Failure) -> bool {
    let Ok(mut header) = ResponseHeader::build(200, Some(1)) else { return false };
    if header.insert_header(header::CONTENT_TYPE, grpc::CONTENT_TYPE).is_err() {
        return false;
    }
    let trailers = grpc::trailers(failure.grpc_code(), &failure.message());
    session.write_response_header(Box::new(header)).await.is_ok()
        && session.write_response_trailers(trailers).await.is_ok()
}

/// Answers with a whole body; false when the connection cannot be used any more.
pub(crate) async fn respond(session: &mut ServerSession, status: u16, content_type: &str, body: Bytes) -> bool {
    respond_with(session, status, content_type, &[], body).await
}

/// Answers with a whole body and `extra` headers; false when the connection cannot be used any more.
pub(crate) async fn respond_with(
    session: &mut ServerSession,
    status: u16,
    content_type: &str,
    extra: &[(header::HeaderName, &str)],
    body: Bytes,
) -> bool {
    let Ok(mut header) = ResponseHeader::build(status, Some(2 + extra.len())) else { return false };
    if header.insert_header(header::CONTENT_TYPE, content_type).is_err()
        || header.insert_header(header::CONTENT_LENGTH, body.len()).is_err()
        || extra.iter().any(|(name, value)| header.insert_header(name.clone(), *value).is_err())
    {
        return false;
    }
    session.write_response_header(Box::new(header)).await.is_ok()
        && session.write_response_body(body, true).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_its_status_and_a_message_naming_the_cause() {
        let cases = [
            (Failure::MethodNotAllowed(Method::CONNECT), 405, "method CONNECT is not allowed"),
            (Failure::UnknownService { host: "a.example.com".into(), path: "/x".into() }, 404, "host a.example.com"),
            (Failure::UnknownModel { model: "mnist".into(), named_in: "the gRPC request" }, 404, "model mnist"),
            (Failure::NoModelName { method: "ModelInfer".into(), why: "compressed".into() }, 400, "ModelInfer"),
            (
                Failure::NoJsonModel { path: "/v1/completions".into(), why: "the body is empty".into() },
                400,
                "\"model\" its JSON body names: the body is empty",
            ),
            (Failure::NotRoutable { method: "RepositoryIndex".into() }, 404, "RepositoryIndex names no model"),
            (Failure::NoRevision { service: "default/iris".into() }, 503, "default/iris"),
            (Failure::NoActivator { revision: "default/iris-predictor-00001".into() }, 503, "no activator"),
            (Failure::BadRequest("body ended early".into()), 400, "body ended early"),
            (Failure::Upstream("connection refused".into()), 502, "the upstream failed"),
            (Failure::Timeout("after 5 s".into()), 504, "in time"),
            (Failure::ClientGone, 499, "went away"),
        ];
        for (failure, status, text) in cases {
            assert_eq!(failure.status(), status, "{failure}");
            assert!(failure.message().contains(text), "{failure}");
        }
    }

    #[test]
    fn grpc_calls_hear_unavailable_when_nothing_can_serve_them() {
        assert_eq!(Failure::Upstream("connection refused".into()).grpc_code(), Code::Unavailable);
        assert_eq!(Failure::NoActivator { revision: "r".into() }.grpc_code(), Code::Unavailable);
        assert_eq!(Failure::Timeout("after 5 s".into()).grpc_code(), Code::DeadlineExceeded);
        assert_eq!(Failure::UnknownService { host: "h".into(), path: "/p".into() }.grpc_code(), Code::Unimplemented);
        assert_eq!(
            Failure::UnknownModel { model: "m".into(), named_in: "the gRPC request" }.grpc_code(),
            Code::NotFound
        );
        assert_eq!(Failure::NoModelName { method: "m".into(), why: "w".into() }.grpc_code(), Code::InvalidArgument);
    }

    #[test]
    fn connect_and_trace_are_refused_and_every_other_method_is_forwarded() {
        assert!(refused_method(&Method::CONNECT) && refused_method(&Method::TRACE));
        for method in ALLOWED_METHODS.split(", ") {
            assert!(!refused_method(&method.parse().unwrap()), "{method}");
        }
        assert!(!refused_method(&"PROPFIND".parse().unwrap()), "extension methods are the upstream's to judge");
    }
}
