//! JSON responses, and the one place where an error becomes an HTTP answer.

use std::fmt::{self, Write};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

/// An error a client can be told about: its message (`Display`) goes into `{"error": ...}`.
pub trait HttpError: std::fmt::Display {
    /// The HTTP status a client sees for this error.
    fn status(&self) -> StatusCode;

    /// Whether the answer says when to retry (`Retry-After: 1`): overload, not a broken request.
    fn retry_after(&self) -> bool {
        false
    }

    /// Whether the answer reports a failure of this server, logged at WARN: by default any 5xx.
    /// A state the client is told about (a model still loading: 503 to every readiness probe
    /// until it is ready) is not one, and is logged at DEBUG as refusals are.
    fn is_failure(&self) -> bool {
        self.status().is_server_error()
    }
}

/// Longest piece of a client's input an error message repeats back.
pub const ECHO_LIMIT: usize = 200;

/// Longest error message sent; anything longer is cut with an ellipsis.
pub(crate) const MESSAGE_LIMIT: usize = 1024;

/// `value`'s `Debug` text cut after [`ECHO_LIMIT`] bytes with an ellipsis; formatting stops
/// there, so a huge value costs no more than a small one.
pub fn brief(value: &(impl fmt::Debug + ?Sized)) -> String {
    let mut bounded = Bounded { text: String::new(), limit: ECHO_LIMIT };
    if write!(bounded, "{value:?}").is_err() {
        bounded.text.push('…');
    }
    bounded.text
}

/// `text` as is, cut after [`ECHO_LIMIT`] bytes with an ellipsis.
pub fn brief_str(text: &str) -> String {
    let kept = prefix(text, ECHO_LIMIT);
    if kept.len() == text.len() { text.to_owned() } else { format!("{kept}…") }
}

/// The longest prefix of `text` of at most `limit` bytes that ends on a character boundary.
fn prefix(text: &str, limit: usize) -> &str {
    let mut end = limit.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A `fmt::Write` that fails once it holds `limit` bytes.
struct Bounded {
    text: String,
    limit: usize,
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let kept = prefix(s, self.limit - self.text.len());
        self.text.push_str(kept);
        if kept.len() == s.len() { Ok(()) } else { Err(fmt::Error) }
    }
}

/// `message`, cut with an ellipsis past `limit` bytes.
pub(crate) fn cut(mut message: String, limit: usize) -> String {
    let kept = prefix(&message, limit).len();
    if kept < message.len() {
        message.truncate(kept);
        message.push('…');
    }
    message
}

/// A response with `content_type` and `body`.
pub fn bytes(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A JSON response from already-encoded bytes.
pub fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    bytes(status, "application/json", body)
}

/// A JSON response from a value.
pub fn json_value(status: StatusCode, value: &serde_json::Value) -> Response<Full<Bytes>> {
    json(status, serde_json::to_vec(value).expect("JSON values serialise"))
}

/// `{"error": "..."}` with the error's status (and `Retry-After` where it asks for one); failures
/// ([`HttpError::is_failure`]) are logged at WARN, refusals (4xx) and states at DEBUG, with the
/// status and the reason.
pub fn error(err: &impl HttpError) -> Response<Full<Bytes>> {
    let status = log(err);
    let message = cut(err.to_string(), MESSAGE_LIMIT);
    let mut response = json_value(status, &serde_json::json!({ "error": message }));
    if err.retry_after() {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// Logs `err` as failed or refused; its status.
pub(crate) fn log(err: &impl HttpError) -> StatusCode {
    let status = err.status();
    if err.is_failure() {
        tracing::warn!(status = status.as_u16(), error = %err, "request failed");
    } else {
        tracing::debug!(status = status.as_u16(), error = %err, "request refused");
    }
    status
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    struct Busy;
    impl std::fmt::Display for Busy {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("queue \"q\" is full")
        }
    }
    impl HttpError for Busy {
        fn status(&self) -> StatusCode {
            StatusCode::SERVICE_UNAVAILABLE
        }
        fn retry_after(&self) -> bool {
            true
        }
    }

    struct Missing;
    impl std::fmt::Display for Missing {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("no model 'm'")
        }
    }
    impl HttpError for Missing {
        fn status(&self) -> StatusCode {
            StatusCode::NOT_FOUND
        }
    }

    struct Loading;
    impl std::fmt::Display for Loading {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("model 'm' is not ready")
        }
    }
    impl HttpError for Loading {
        fn status(&self) -> StatusCode {
            StatusCode::SERVICE_UNAVAILABLE
        }
        fn is_failure(&self) -> bool {
            false
        }
    }

    /// A writer into a shared buffer, for a subscriber in a test.
    struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Capture {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What answering `err` logs, at every level down to DEBUG.
    fn logged(err: &impl HttpError) -> String {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let writer = {
            let buffer = buffer.clone();
            move || Capture(buffer.clone())
        };
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .without_time()
            .with_writer(writer)
            .finish();
        tracing::subscriber::with_default(subscriber, || drop(error(err)));
        String::from_utf8(buffer.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn failures_are_warnings_and_refusals_and_states_are_debug_with_their_reason() {
        let failed = logged(&Busy);
        assert!(failed.starts_with(" WARN") && failed.contains("request failed status=503"), "{failed}");
        let refused = logged(&Missing);
        assert!(refused.starts_with("DEBUG"), "{refused}");
        assert!(refused.contains("request refused status=404 error=no model 'm'"), "{refused}");
        let loading = logged(&Loading);
        assert!(
            loading.starts_with("DEBUG") && loading.contains("status=503 error=model 'm' is not ready"),
            "{loading}"
        );
    }

    async fn body_text(response: Response<Full<Bytes>>) -> String {
        String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn overload_says_when_to_retry_and_escapes_the_message() {
        let response = error(&Busy);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(body_text(response).await, r#"{"error":"queue \"q\" is full"}"#);
    }

    #[tokio::test]
    async fn other_errors_carry_only_the_message() {
        let response = error(&Missing);
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert!(response.headers().get(header::RETRY_AFTER).is_none());
        assert_eq!(body_text(response).await, r#"{"error":"no model 'm'"}"#);
    }

    #[test]
    fn brief_cuts_a_huge_value_without_formatting_all_of_it() {
        let shape = vec![4_611_686_018_427_387_904_i64; 16 << 20];
        let text = brief(&shape);
        assert!(text.len() <= ECHO_LIMIT + '…'.len_utf8() && text.ends_with('…'), "{text}");
        assert!(text.starts_with("[4611686018427387904, 4611686018427387904,"), "{text}");
        assert_eq!(brief(&[2, 3]), "[2, 3]");
        assert_eq!(brief("ü".repeat(300).as_str()).chars().filter(|c| *c == 'ü').count(), 99);
    }

    #[test]
    fn a_long_message_is_cut_with_an_ellipsis() {
        let message = cut("x".repeat(5000), MESSAGE_LIMIT);
        assert_eq!((message.len(), message.ends_with('…')), (MESSAGE_LIMIT + '…'.len_utf8(), true));
        assert_eq!(cut("short".into(), MESSAGE_LIMIT), "short");
        assert_eq!(brief_str("host"), "host");
        assert_eq!(brief_str(&"é".repeat(200)), format!("{}…", "é".repeat(ECHO_LIMIT / 2)));
    }
}
