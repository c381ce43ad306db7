//! The response body type (a replica's streamed answer, or bytes built here), and the shared
//! `skiff-http` builders with their bodies boxed into it: the one place where an [`Error`] becomes
//! an HTTP answer (`{"error": ...}`, or a gRPC status in trailers to a gRPC call).

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use skiff_http::HttpError;
use skiff_http::grpc;

use crate::error::{Error, Result};

/// Any error a body can fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response: a replica's streamed answer or bytes built here.
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

/// The response type of every handler.
pub type HttpResponse = Response<Body>;

fn boxed(response: Response<Full<Bytes>>) -> HttpResponse {
    response.map(|body| body.map_err(|never| match never {}).boxed_unsync())
}

/// A response with `content_type` and `body`.
pub fn bytes(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> HttpResponse {
    boxed(skiff_http::response::bytes(status, content_type, body))
}

/// A JSON response from a value.
pub fn json(status: StatusCode, value: &serde_json::Value) -> HttpResponse {
    boxed(skiff_http::response::json_value(status, value))
}

/// How a client is answered when its request fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `{"error": ...}` with the error's HTTP status.
    Json,
    /// A gRPC call: 200 with `grpc-status` and `grpc-message` trailers.
    Grpc,
}

impl Dialect {
    /// The dialect of a request with `headers`.
    pub fn of(headers: &HeaderMap) -> Dialect {
        if grpc::is_grpc(headers) { Dialect::Grpc } else { Dialect::Json }
    }
}

/// `{"error": "..."}` with the error's status (overload answers carry `Retry-After: 1`), or, to a
/// gRPC call, the error's gRPC status ([`Error::grpc_code`]) in trailers.
pub fn error(err: &Error, dialect: Dialect) -> HttpResponse {
    match dialect {
        Dialect::Json => boxed(skiff_http::response::error(err)),
        Dialect::Grpc => {
            grpc::error(err, err.grpc_code()).map(|body| body.map_err(|never| match never {}).boxed_unsync())
        }
    }
}

/// The answer to `result`, and the status it counts as: the error's HTTP status also when a gRPC
/// answer carries it in trailers.
pub fn answer(result: Result<HttpResponse>, dialect: Dialect) -> (StatusCode, HttpResponse) {
    match result {
        Ok(response) => (response.status(), response),
        Err(e) => (e.status(), error(&e, dialect)),
    }
}

#[cfg(test)]
mod tests {
    use http::header;

    use super::*;

    async fn body_text(response: HttpResponse) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn overload_says_when_to_retry() {
        let response = error(&Error::Overloaded("revision r already holds 2 requests".into()), Dialect::Json);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(body_text(response).await, r#"{"error":"revision r already holds 2 requests"}"#);
    }

    #[tokio::test]
    async fn other_errors_carry_only_the_message() {
        let response = error(&Error::UnknownRevision("r".into()), Dialect::Json);
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert!(response.headers().get(header::RETRY_AFTER).is_none());
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(body_text(response).await, r#"{"error":"unknown revision 'r'"}"#);
    }

    #[tokio::test]
    async fn grpc_calls_hear_a_grpc_status_and_count_as_the_http_one() {
        let headers = HeaderMap::from_iter([(header::CONTENT_TYPE, "application/grpc".parse().unwrap())]);
        let held = Error::NoReadyReplica {
            revision: "ns/r".into(),
            timeout: std::time::Duration::from_secs(1),
            progress_deadline: false,
        };
        let (status, response) = answer(Err(held), Dialect::of(&headers));
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap();
        assert_eq!(body.trailers().unwrap()["grpc-status"], "14", "UNAVAILABLE");
        let (_, response) = answer(Err(Error::Overloaded("full".into())), Dialect::Grpc);
        let body = response.into_body().collect().await.unwrap();
        assert_eq!(body.trailers().unwrap()["grpc-status"], "8", "RESOURCE_EXHAUSTED");
    }
}
