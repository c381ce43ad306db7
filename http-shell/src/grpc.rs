//! What a proxy needs to know about gRPC to answer a gRPC client itself: whether a request is one,
//! and the trailers (`grpc-status`, `grpc-message`) that carry its status. A gRPC answer is HTTP 200
//! with `content-type: application/grpc`, no message, and the status in the trailers; the router
//! and the activator map their own errors to a [`Code`] ([`error`] builds the answer for hyper).

use std::convert::Infallible;
use std::future::{Ready, ready};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::combinators::WithTrailers;
use http_body_util::{BodyExt, Empty};

use crate::HttpError;
use crate::response::{MESSAGE_LIMIT, cut, log};

/// The body of a gRPC error answer: no message, then the status trailers.
pub type StatusBody = WithTrailers<Empty<Bytes>, Ready<Option<Result<HeaderMap, Infallible>>>>;

/// The content type of gRPC answers.
pub const CONTENT_TYPE: &str = "application/grpc";

/// The gRPC status codes a proxy answers with (the numbers are gRPC's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// The client went away.
    Cancelled = 1,
    /// The request was malformed.
    InvalidArgument = 3,
    /// No answer came within the deadline.
    DeadlineExceeded = 4,
    /// The target does not exist.
    NotFound = 5,
    /// Out of room: too many requests held, a message over the size or memory limit.
    ResourceExhausted = 8,
    /// Nothing serves this method or route.
    Unimplemented = 12,
    /// Something broke that the client cannot fix.
    Internal = 13,
    /// Try again: nothing ready, unreachable or failed upstream.
    Unavailable = 14,
}

/// True when the request is a gRPC call: `content-type: application/grpc`, `application/grpc+proto`,
/// `application/grpc;...`.
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        value.len() >= CONTENT_TYPE.len()
            && value[..CONTENT_TYPE.len()].eq_ignore_ascii_case(CONTENT_TYPE.as_bytes())
            && matches!(value.get(CONTENT_TYPE.len()), None | Some(b'+' | b';'))
    })
}

/// The trailers that end a gRPC answer with `code` and `message` (percent-encoded as gRPC asks).
pub fn trailers(code: Code, message: &str) -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(2);
    trailers.insert("grpc-status", HeaderValue::from(code as u16));
    let message = HeaderValue::try_from(percent_encode(message)).expect("percent-encoded text is a valid header value");
    trailers.insert("grpc-message", message);
    trailers
}

/// The answer to a gRPC call that failed with `err`: 200, `application/grpc`, and `code` with the
/// error's message (cut at 1 KiB) in trailers. Logged as [`crate::response::error`] logs.
pub fn error(err: &impl HttpError, code: Code) -> Response<StatusBody> {
    log(err);
    let trailers = trailers(code, &cut(err.to_string(), MESSAGE_LIMIT));
    let mut response = Response::new(Empty::new().with_trailers(ready(Some(Ok(trailers)))));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// `text` with every byte outside printable ASCII, and `%`, written as `%XX` (gRPC's grpc-message encoding).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content_type(value: &'static str) -> HeaderMap {
        HeaderMap::from_iter([(header::CONTENT_TYPE, HeaderValue::from_static(value))])
    }

    #[test]
    fn grpc_content_types_and_only_those_are_grpc() {
        for value in
            ["application/grpc", "application/grpc+proto", "application/grpc; charset=utf-8", "Application/GRPC"]
        {
            assert!(is_grpc(&content_type(value)), "{value}");
        }
        for value in ["application/json", "application/grpc-web", "application/grpcx", "text/plain"] {
            assert!(!is_grpc(&content_type(value)), "{value}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn an_error_answer_is_200_with_the_status_in_trailers() {
        #[derive(Debug, thiserror::Error)]
        #[error("held too long")]
        struct Held;
        impl HttpError for Held {
            fn status(&self) -> StatusCode {
                StatusCode::GATEWAY_TIMEOUT
            }
        }
        let response = error(&Held, Code::Unavailable);
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_TYPE], CONTENT_TYPE);
        let body = response.into_body().collect().await.unwrap();
        assert_eq!(body.trailers().unwrap()["grpc-status"], "14");
        assert_eq!(body.trailers().unwrap()["grpc-message"], "held too long");
        assert!(body.to_bytes().is_empty());
    }

    #[test]
    fn trailers_carry_the_code_and_the_encoded_message() {
        let trailers = trailers(Code::Unavailable, "refused: 100% é\n");
        assert_eq!(trailers["grpc-status"], "14");
        assert_eq!(trailers["grpc-message"], "refused: 100%25 %C3%A9%0A");
    }
}
