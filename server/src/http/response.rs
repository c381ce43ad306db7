//! Building responses, and the one place where an [`Error`] becomes an HTTP answer.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

use crate::error::Error;

/// The response type of every handler.
pub type HttpResponse = Response<Full<Bytes>>;

/// A JSON response from already-encoded bytes.
pub fn json(status: StatusCode, body: impl Into<Bytes>) -> HttpResponse {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A JSON response from a value.
pub fn json_value(status: StatusCode, value: &serde_json::Value) -> HttpResponse {
    json(status, serde_json::to_vec(value).expect("JSON values serialise"))
}

/// `{"error": "..."}` with the error's status; overload answers carry `Retry-After`.
pub fn error(err: &Error) -> HttpResponse {
    let status = err.status();
    if status.is_server_error() {
        tracing::warn!(status = status.as_u16(), error = %err, "request failed");
    } else {
        tracing::debug!(status = status.as_u16(), error = %err, "request refused");
    }
    let mut response = json_value(status, &serde_json::json!({ "error": err.to_string() }));
    if matches!(err, Error::Overloaded(_)) {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}
