//! The response body type (a replica's streamed answer, or bytes built here), and the shared
//! `skiff-http` builders with their bodies boxed into it: the one place where an [`Error`] becomes
//! an HTTP answer.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

use crate::error::Error;

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

/// `{"error": "..."}` with the error's status; overload answers carry `Retry-After: 1`.
pub fn error(err: &Error) -> HttpResponse {
    boxed(skiff_http::response::error(err))
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
        let response = error(&Error::Overloaded("revision r already holds 2 requests".into()));
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(body_text(response).await, r#"{"error":"revision r already holds 2 requests"}"#);
    }

    #[tokio::test]
    async fn other_errors_carry_only_the_message() {
        let response = error(&Error::UnknownRevision("r".into()));
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert!(response.headers().get(header::RETRY_AFTER).is_none());
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(body_text(response).await, r#"{"error":"unknown revision 'r'"}"#);
    }
}
