//! The request logger in the queue-proxy (KServe `predictor.logger` for custom containers), through
//! `skiff_http::logger` as `skiff-server` logs.
//!
//! Which requests: every `POST` that is not a gRPC call ([`logged`]) is inference (KServe's V1
//! `:predict` and `:explain`, V2 `/infer`, or a custom container's own routes); `GET`s are health
//! and metadata, and gRPC bodies are not JSON a sink can read. The request's id, the `ce-id` of
//! both events, is its `X-Request-Id`, or a new one set on the request passed on, as KServe's
//! agent does ([`request_id`]).
//!
//! The request is logged once its body is read (it is buffered anyway). The response is logged
//! whatever it is, the queue-proxy's own error answers included, once its last frame has passed:
//! [`Tee`] copies the frames it passes on, up to [`MAX_KEPT_BYTES`], without holding any back; a
//! longer response is not logged and counts as dropped, and one that fails or is cut short is not
//! logged.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::Method;
use http::header::{self, HeaderMap, HeaderValue};
use hyper::body::{Body, Frame, SizeHint};
use skiff_http::grpc;
use skiff_http::logger::{Half, Logger};

use crate::response::{BoxError, HttpResponse};

/// The most response bytes kept for the logger per response.
pub const MAX_KEPT_BYTES: usize = 4 * 1024 * 1024;

/// The header that names a request, KServe's agent's id for its events.
pub const REQUEST_ID: &str = "x-request-id";

const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Whether a request is logged: a `POST` that is not a gRPC call.
pub fn logged(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::POST && !grpc::is_grpc(headers)
}

/// The request's `X-Request-Id`, or a new one (a UUID) set on `headers` so the container sees it.
pub fn request_id(headers: &mut HeaderMap) -> String {
    if let Some(id) = headers.get(REQUEST_ID).and_then(|v| v.to_str().ok()).filter(|id| !id.is_empty()) {
        return id.to_owned();
    }
    let id = uuid::Uuid::new_v4().to_string();
    headers.insert(REQUEST_ID, HeaderValue::from_str(&id).expect("a UUID is a valid header value"));
    id
}

/// The `Content-Type` a body is logged with: its own, else JSON.
pub fn content_type(headers: &HeaderMap) -> HeaderValue {
    headers.get(header::CONTENT_TYPE).cloned().unwrap_or(APPLICATION_JSON)
}

/// `response`, its body logged as the response of `id` once it has been sent, when the logger
/// logs responses.
pub fn tee(response: HttpResponse, logger: &Logger, id: String) -> HttpResponse {
    if !logger.logs(Half::Response) {
        return response;
    }
    let content_type = content_type(response.headers());
    response.map(|body| {
        let tee = Tee { inner: body, logger: Some(logger.clone()), id, content_type, kept: Kept::default() };
        http_body_util::BodyExt::boxed_unsync(tee)
    })
}

/// What a [`Tee`] has kept of a body: its frames, while they are within [`MAX_KEPT_BYTES`].
#[derive(Debug, Default)]
pub struct Kept {
    chunks: Vec<Bytes>,
    bytes: usize,
    over: bool,
}

impl Kept {
    /// Keeps `data` unless the body is now past the limit (then nothing is kept any more).
    pub fn push(&mut self, data: &Bytes) {
        if self.over {
            return;
        }
        self.bytes += data.len();
        if self.bytes > MAX_KEPT_BYTES {
            self.over = true;
            self.chunks = Vec::new();
        } else if !data.is_empty() {
            self.chunks.push(data.clone());
        }
    }

    /// The whole body, or `None` when it went past the limit. One frame is passed on as it is.
    pub fn finish(self) -> Option<Bytes> {
        if self.over {
            return None;
        }
        match <[Bytes; 1]>::try_from(self.chunks) {
            Ok([only]) => Some(only),
            Err(chunks) => {
                let mut whole = BytesMut::with_capacity(self.bytes);
                chunks.iter().for_each(|chunk| whole.extend_from_slice(chunk));
                Some(whole.freeze())
            }
        }
    }
}

/// A response body passed on frame by frame, as it comes, and logged at its end.
pub struct Tee<B> {
    inner: B,
    /// Taken when the event is logged (or given up), so it happens once.
    logger: Option<Logger>,
    id: String,
    content_type: HeaderValue,
    kept: Kept,
}

impl<B> Tee<B> {
    fn finish(&mut self) {
        let Some(logger) = self.logger.take() else { return };
        match std::mem::take(&mut self.kept).finish() {
            Some(body) => logger.log(Half::Response, &self.id, self.content_type.clone(), body),
            None => logger.count_dropped(),
        }
    }
}

impl<B> Body for Tee<B>
where
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref()
                    && this.logger.is_some()
                {
                    this.kept.push(data);
                }
                if this.inner.is_end_stream() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                // A broken response is not logged.
                this.logger = None;
                this.kept = Kept::default();
                Poll::Ready(Some(Err(e)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_are_logged_but_not_reads_or_grpc_calls() {
        let json = HeaderMap::from_iter([(header::CONTENT_TYPE, APPLICATION_JSON)]);
        assert!(logged(&Method::POST, &json));
        assert!(logged(&Method::POST, &HeaderMap::new()));
        assert!(!logged(&Method::GET, &json));
        let grpc = HeaderMap::from_iter([(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"))]);
        assert!(!logged(&Method::POST, &grpc));
    }

    #[test]
    fn the_request_id_is_kept_or_made_and_set() {
        let mut headers = HeaderMap::from_iter([(header::HeaderName::from_static(REQUEST_ID), "abc".parse().unwrap())]);
        assert_eq!(request_id(&mut headers), "abc");
        let mut headers = HeaderMap::new();
        let id = request_id(&mut headers);
        assert_eq!(id.len(), 36, "a UUID: {id}");
        assert_eq!(headers[REQUEST_ID], id.as_str(), "the container sees the same id");
        assert_ne!(request_id(&mut HeaderMap::new()), id);
    }

    #[test]
    fn frames_are_kept_up_to_the_limit() {
        let mut kept = Kept::default();
        let one = Bytes::from_static(b"{\"predictions\":");
        kept.push(&one);
        assert_eq!(kept.finish().unwrap().as_ptr(), one.as_ptr(), "one frame is not copied");
        let mut kept = Kept::default();
        kept.push(&Bytes::from_static(b"ab"));
        kept.push(&Bytes::new());
        kept.push(&Bytes::from_static(b"cd"));
        assert_eq!(kept.finish().unwrap(), "abcd");
        let mut kept = Kept::default();
        kept.push(&Bytes::from(vec![0; MAX_KEPT_BYTES]));
        kept.push(&Bytes::from_static(b"x"));
        assert!(kept.over && kept.chunks.is_empty(), "nothing is held past the limit");
        kept.push(&Bytes::from_static(b"y"));
        assert!(kept.finish().is_none());
        assert_eq!(Kept::default().finish().unwrap(), "", "an empty body is logged empty");
    }
}
