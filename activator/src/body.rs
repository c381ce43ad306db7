//! Response bodies that hold the request's slot, counters and body bytes until their last frame is
//! sent, bounded by the request's deadline. (Request bodies are read by `skiff_http::body`.)

use std::any::Any;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::response::BoxError;

/// Largest request body forwarded (KServe's default for its model servers).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Whatever must live as long as a response body: a slot, counter guards.
pub type Hold = Box<dyn Any + Send>;

/// A replica's response body that keeps `hold` until its end (or an error, or the body being
/// dropped) and fails once the request's deadline passes.
pub struct Guarded<B> {
    inner: B,
    hold: Option<Hold>,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<B> Guarded<B> {
    /// Wraps `inner`; `hold` is dropped when the body ends, `deadline` cuts it short.
    pub fn new(inner: B, hold: Hold, deadline: Option<Instant>) -> Guarded<B> {
        Guarded { inner, hold: Some(hold), deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d))) }
    }

    fn finish(&mut self) {
        self.hold = None;
        self.deadline = None;
    }
}

impl<B> Body for Guarded<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.hold.is_none() {
            return Poll::Ready(None);
        }
        if let Some(deadline) = this.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            this.finish();
            return Poll::Ready(Some(Err("the request's timeout passed while its response was streaming".into())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.finish();
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.hold.is_none() || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use http_body_util::{BodyExt, Full};

    use super::*;

    #[tokio::test]
    async fn the_hold_lives_until_the_last_frame() {
        let hold = Arc::new(());
        let inner = Full::new(Bytes::from_static(b"answer"));
        let mut body = Guarded::new(inner, Box::new(hold.clone()), None);
        assert_eq!(Arc::strong_count(&hold), 2);
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "answer");
        assert!(body.frame().await.is_none());
        assert_eq!(Arc::strong_count(&hold), 1, "released at the end of the body");
    }

    /// A body that never yields a frame.
    struct Silent;

    impl Body for Silent {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Pending
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_still_streaming_at_the_deadline_fails_and_lets_go() {
        let hold = Arc::new(());
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut body = Guarded::new(Silent, Box::new(hold.clone()), Some(deadline));
        let err = body.frame().await.unwrap().unwrap_err();
        assert!(err.to_string().contains("timeout"), "{err}");
        assert_eq!(Arc::strong_count(&hold), 1);
        assert!(body.frame().await.is_none());
    }
}
