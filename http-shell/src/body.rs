//! Reading a request body whole, under a size limit, a deadline and memory budgets: the one way
//! every Skiff server buffers a body, so none of them can be made to hold unbounded bytes.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};

use crate::response::HttpError;

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Over the size limit (413).
    #[error("request body is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// It did not arrive in time (408).
    #[error("the request body did not arrive within {}s", .timeout.as_secs_f64())]
    Timeout {
        /// The time allowed.
        timeout: Duration,
    },
    /// Holding it would pass a memory budget (503, retry later).
    #[error("{budget} already holds {held} bytes of request bodies (budget {limit} bytes); retry later")]
    OverBudget {
        /// Whose budget.
        budget: String,
        /// Bytes held when it was refused.
        held: usize,
        /// The budget.
        limit: usize,
    },
    /// The connection failed while it was read (400).
    #[error("cannot read the request body: {0}")]
    Read(String),
}

impl HttpError for BodyError {
    fn status(&self) -> StatusCode {
        match self {
            BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::Timeout { .. } => StatusCode::REQUEST_TIMEOUT,
            BodyError::OverBudget { .. } => StatusCode::SERVICE_UNAVAILABLE,
            BodyError::Read(_) => StatusCode::BAD_REQUEST,
        }
    }

    fn retry_after(&self) -> bool {
        matches!(self, BodyError::OverBudget { .. })
    }
}

/// A bound on the request-body bytes held at once by a process or by one revision.
#[derive(Debug)]
pub struct Budget {
    name: String,
    limit: usize,
    held: AtomicUsize,
}

impl Budget {
    /// A budget of `limit` bytes; `name` says whose it is in errors.
    pub fn new(name: impl Into<String>, limit: usize) -> Arc<Budget> {
        Arc::new(Budget { name: name.into(), limit, held: AtomicUsize::new(0) })
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    fn take(self: &Arc<Self>, bytes: usize) -> Result<(), BodyError> {
        let mut held = self.held.load(Ordering::Acquire);
        loop {
            let wanted = held.saturating_add(bytes);
            if wanted > self.limit {
                return Err(BodyError::OverBudget { budget: self.name.clone(), held, limit: self.limit });
            }
            match self.held.compare_exchange_weak(held, wanted, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => held = now,
            }
        }
    }

    fn give(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Bytes taken from one or more budgets, given back when dropped: keep it as long as the body.
#[derive(Debug, Default)]
#[must_use = "the bytes are given back when this drops"]
pub struct Reservation {
    budgets: Vec<Arc<Budget>>,
    bytes: usize,
}

impl Reservation {
    /// Bytes reserved.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes `bytes` more from every budget, or from none: for what the body becomes (decoded
    /// tensors) while it is still held.
    pub fn add(&mut self, bytes: usize) -> Result<(), BodyError> {
        for (i, budget) in self.budgets.iter().enumerate() {
            if let Err(e) = budget.take(bytes) {
                self.budgets[..i].iter().for_each(|b| b.give(bytes));
                return Err(e);
            }
        }
        self.bytes += bytes;
        Ok(())
    }

    /// Gives back up to `bytes` of what is reserved (the body, once it is decoded and dropped).
    pub fn release(&mut self, bytes: usize) {
        let bytes = bytes.min(self.bytes);
        self.budgets.iter().for_each(|b| b.give(bytes));
        self.bytes -= bytes;
    }

    /// Counts `bytes` already spent (a request's outputs, its encoded answer) even past a budget:
    /// the work is done, and the requests that come next see the memory it takes.
    pub fn force(&mut self, bytes: usize) {
        self.budgets.iter().for_each(|b| {
            b.held.fetch_add(bytes, Ordering::AcqRel);
        });
        self.bytes += bytes;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budgets.iter().for_each(|b| b.give(self.bytes));
    }
}

/// A response body that keeps `guard` (a [`Reservation`], or a connection's in-flight count) until
/// its last frame is sent: what a request holds is held until the client has the answer.
#[derive(Debug)]
pub struct Held<B, G = Reservation> {
    body: B,
    guard: Option<G>,
}

impl<B, G> Held<B, G> {
    /// `body`, holding `guard` until it ends (or fails, or is dropped).
    pub fn new(body: B, guard: G) -> Held<B, G> {
        Held { body, guard: Some(guard) }
    }
}

impl<B, G> From<B> for Held<B, G> {
    /// `body`, holding nothing.
    fn from(body: B) -> Held<B, G> {
        Held { body, guard: None }
    }
}

impl<B: Body + Unpin, G: Unpin> Body for Held<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.guard = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The bounds one body is read under.
#[derive(Debug, Clone)]
pub struct BodyLimits {
    /// Largest body taken (413 past it).
    pub max_bytes: usize,
    /// Time allowed for the whole body (408 past it).
    pub timeout: Duration,
    /// Budgets it is counted against while held (503 past any of them).
    pub budgets: Vec<Arc<Budget>>,
}

/// Reads the whole body under `limits`: refused as early as its `Content-Length` says it is too
/// large or over a budget; a chunked body is counted as it arrives. The reservation holds its
/// bytes in the budgets until dropped.
pub async fn read_body<B>(headers: &HeaderMap, body: B, limits: &BodyLimits) -> Result<(Bytes, Reservation), BodyError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_bytes as u64) {
        return Err(BodyError::TooLarge { limit: limits.max_bytes });
    }
    let mut reservation = Reservation { budgets: limits.budgets.clone(), bytes: 0 };
    let declared = declared.map_or(0, |n| n as usize);
    let read = async {
        tokio::pin!(body);
        if let Err(over) = reservation.add(declared) {
            discard(body, limits.max_bytes).await;
            return Err(over);
        }
        let mut buffer = BytesMut::with_capacity(declared);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| BodyError::Read(e.into().to_string()))?;
            let Ok(data) = frame.into_data() else { continue };
            let len = buffer.len() + data.len();
            if len > limits.max_bytes {
                return Err(BodyError::TooLarge { limit: limits.max_bytes });
            }
            if len > reservation.bytes()
                && let Err(over) = reservation.add(len - reservation.bytes())
            {
                drop(buffer);
                discard(body, limits.max_bytes - len).await;
                return Err(over);
            }
            buffer.extend_from_slice(&data);
        }
        Ok(buffer.freeze())
    };
    let bytes = tokio::time::timeout(limits.timeout, read)
        .await
        .map_err(|_| BodyError::Timeout { timeout: limits.timeout })??;
    Ok((bytes, reservation))
}

/// Reads and drops up to `most` more bytes of a body refused for the budget, so that the client,
/// still sending, reads the 503 instead of a reset connection (nginx's lingering close). It costs
/// bandwidth, not memory, and the caller's timeout bounds it.
async fn discard<B>(mut body: std::pin::Pin<&mut B>, most: usize)
where
    B: Body<Data = Bytes>,
{
    let mut left = most;
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else { continue };
        match left.checked_sub(data.len()) {
            Some(rest) => left = rest,
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;

    fn limits(max_bytes: usize, budgets: Vec<Arc<Budget>>) -> BodyLimits {
        BodyLimits { max_bytes, timeout: Duration::from_secs(5), budgets }
    }

    fn declared(n: usize) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, n.into());
        headers
    }

    #[tokio::test]
    async fn a_body_within_its_limits_is_read_and_held_until_dropped() {
        let budget = Budget::new("process", 100);
        let (bytes, held) =
            read_body(&declared(5), Full::new(Bytes::from_static(b"hello")), &limits(10, vec![budget.clone()]))
                .await
                .unwrap();
        assert_eq!((&bytes[..], budget.held()), (&b"hello"[..], 5));
        let mut held = held;
        held.release(2);
        assert_eq!((budget.held(), held.bytes()), (3, 3));
        drop(held);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn a_held_response_gives_its_bytes_back_after_its_last_frame() {
        let budget = Budget::new("process", 100);
        let (_, reservation) =
            read_body(&declared(5), Full::new(Bytes::from_static(b"hello")), &limits(10, vec![budget.clone()]))
                .await
                .unwrap();
        let mut response = Held::new(Full::new(Bytes::from_static(b"answer")), reservation);
        assert_eq!(budget.held(), 5);
        assert!(response.frame().await.is_some());
        assert!(response.frame().await.is_none());
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn a_declared_or_streamed_body_over_the_limit_is_413() {
        let body = Full::new(Bytes::from_static(b"hello"));
        let err = read_body(&declared(5), body.clone(), &limits(4, vec![])).await.unwrap_err();
        assert_eq!((err.status(), err), (StatusCode::PAYLOAD_TOO_LARGE, BodyError::TooLarge { limit: 4 }));
        let err = read_body(&HeaderMap::new(), body, &limits(4, vec![])).await.unwrap_err();
        assert_eq!(err, BodyError::TooLarge { limit: 4 });
    }

    /// A second body that would pass either budget is refused with 503 and nothing stays taken.
    #[tokio::test]
    async fn a_body_over_any_budget_is_503_and_takes_nothing() {
        let (process, revision) = (Budget::new("process", 100), Budget::new("revision r", 8));
        let budgets = vec![process.clone(), revision.clone()];
        let (_first, _held) =
            read_body(&declared(5), Full::new(Bytes::from_static(b"hello")), &limits(10, budgets.clone()))
                .await
                .unwrap();
        let err = read_body(&HeaderMap::new(), Full::new(Bytes::from_static(b"world")), &limits(10, budgets))
            .await
            .unwrap_err();
        assert_eq!((err.status(), err.retry_after()), (StatusCode::SERVICE_UNAVAILABLE, true));
        assert!(err.to_string().contains("revision r already holds 5 bytes"), "{err}");
        assert_eq!((process.held(), revision.held()), (5, 5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stalls_is_408() {
        let stalled = StreamBody::new(futures_stream());
        let limits = BodyLimits { max_bytes: 10, timeout: Duration::from_secs(3), budgets: vec![] };
        let err = read_body(&HeaderMap::new(), stalled, &limits).await.unwrap_err();
        assert_eq!(
            (err.status(), err.to_string().as_str()),
            (StatusCode::REQUEST_TIMEOUT, "the request body did not arrive within 3s")
        );
    }

    /// One byte, then nothing ever again.
    fn futures_stream() -> impl futures::Stream<Item = Result<Frame<Bytes>, std::convert::Infallible>> {
        use futures::StreamExt;
        futures::stream::iter([Ok(Frame::data(Bytes::from_static(b"x")))]).chain(futures::stream::pending())
    }
}
