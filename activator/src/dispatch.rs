//! One request's way to a replica, shared by the activator and the queue-proxy: admit (bounded),
//! poke the autoscaler when nothing is ready, read the body, wait for a slot (bounded queue),
//! forward, and retry on another replica when the connection failed before the request was sent
//! (and, in the activator, once when the replica failed before answering). Everything is bounded
//! by the target's timeout, unless it has a progress deadline: then the wait for a slot is bounded
//! by that, and the answer by the timeout from the slot. The slot and the counts are kept until the
//! response body has been sent. The activator also times cold starts ([`ColdStartTimer`]) and marks
//! the answers of requests it held at zero ([`COLD_START_HEADER`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request};
use http_body_util::BodyExt;
use hyper::body::Body;
use prometheus_client::metrics::histogram::Histogram;
use skiff_api::serving::{COLD_START_HEADER, is_own_header};
use skiff_dataplane::endpoints::{RevisionEndpoints, Slot};
use skiff_dataplane::failing::Failing;
use skiff_dataplane::{Poker, RevisionKey};
use tokio::time::{Instant, sleep_until, timeout_at};

use skiff_http::body::{BodyError, BodyLimits, Reservation, read_body};

use crate::body::Guarded;
use crate::cold_start::{ColdStartHistograms, ColdStartTimer};
use crate::error::{Error, Result};
use crate::forward::{Forwarder, Outgoing};
use crate::load::{Counted, Load};
use crate::response::{BoxError, HttpResponse};

/// Where one request goes, with its limits.
pub struct Target<'a> {
    /// The revision's name, as errors give it.
    pub name: &'a str,
    /// How errors name it: `revision R` or `upstream A`.
    pub label: &'a str,
    /// Its replicas and their slots.
    pub endpoints: &'a RevisionEndpoints,
    /// Its counts.
    pub load: &'a Arc<Load>,
    /// Requests admitted at once (queued or forwarded) before 503.
    pub max_pending: Option<usize>,
    /// Requests waiting for a slot before 503.
    pub max_queued: Option<usize>,
    /// Bound on the whole request: wait, forwarding and the response body; with a
    /// `progress_deadline`, bound on forwarding and the response body from the slot.
    pub timeout: Duration,
    /// How long a request waits for a slot, when set (a revision's progress deadline: replicas
    /// may take minutes to start); else the timeout bounds the wait too.
    pub progress_deadline: Option<Duration>,
    /// Told, with the revision's key, when a request arrives while no replica is ready.
    pub poker: Option<(&'a dyn Poker, &'a RevisionKey)>,
    /// Retry on another replica (or the same one, after a pause) when a connection is refused, and
    /// once when a replica fails before answering: the activator's requests are inference, without
    /// side effects; never the queue-proxy's, whose container may not be idempotent.
    pub retry: bool,
    /// How the request body is read: size, time, byte budgets.
    pub body: &'a BodyLimits,
    /// Time from arrival to a slot.
    pub wait_seconds: &'a Histogram,
    /// Where cold starts are timed; `None` leaves them untimed (the queue-proxy).
    pub cold_starts: Option<&'a ColdStartHistograms>,
}

/// Sends `request` to a replica of `target` and returns its answer, streaming: [`admit`], [`read`]
/// and [`forward`] in turn.
pub async fn dispatch<B>(forwarder: &Forwarder, target: &Target<'_>, request: Request<B>) -> Result<HttpResponse>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let admitted = admit(target)?;
    let (parts, body) = request.into_parts();
    let (body, held_bytes) = read(target, &admitted, &parts.headers, body).await?;
    forward(forwarder, target, admitted, &Outgoing::new(&parts, body), held_bytes).await
}

/// A request admitted to a target: counted as pending until its answer's last byte, with its
/// deadline (the target's timeout from arrival) and how long it may wait for a slot.
pub struct Admitted {
    arrived: Instant,
    deadline: Instant,
    hold: Hold,
    pending: Option<Counted>,
    cold_start: Option<ColdStartTimer>,
    /// It arrived while no replica was ready, and is held for a cold start (the activator only).
    at_zero: bool,
}

impl Admitted {
    /// A request sent on behalf of requests admitted already (the batcher's combined request):
    /// not counted again, bounded by `target`'s timeout from now.
    pub fn on_behalf(target: &Target<'_>) -> Admitted {
        let arrived = Instant::now();
        let hold = Hold::of(target, arrived);
        Admitted { arrived, deadline: arrived + target.timeout, hold, pending: None, cold_start: None, at_zero: false }
    }

    /// When the whole request must be done.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// Admits a request to `target` (bounded by its `max_pending`), poking the autoscaler when nothing
/// is ready.
pub fn admit(target: &Target<'_>) -> Result<Admitted> {
    let arrived = Instant::now();
    let pending = target.load.admit(target.max_pending).ok_or_else(|| {
        Error::Overloaded(format!(
            "{} already holds {} pending requests",
            target.label,
            target.max_pending.unwrap_or_default()
        ))
    })?;
    let mut cold_start = None;
    let at_zero = target.endpoints.ready().is_empty();
    if at_zero {
        if let Some((poker, key)) = target.poker {
            poker.poke(key, target.load.pending());
        }
        cold_start = target.cold_starts.and_then(|histograms| ColdStartTimer::begin(target.load, histograms));
    }
    let at_zero = at_zero && target.cold_starts.is_some();
    let hold = Hold::of(target, arrived);
    Ok(Admitted { arrived, deadline: arrived + target.timeout, hold, pending: Some(pending), cold_start, at_zero })
}

/// How long a request waits for a slot, and what bounds its answer once it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// The end of the wait for a slot.
    pub until: Instant,
    /// How long that is from arrival.
    pub wait: Duration,
    /// Whether it is the target's progress deadline (then the answer gets the whole timeout from
    /// its slot); otherwise the timeout from arrival bounds the wait and the answer alike.
    pub progress_deadline: bool,
}

impl Hold {
    /// The hold of a request to `target` that arrived at `arrived`.
    pub fn of(target: &Target<'_>, arrived: Instant) -> Hold {
        let wait = target.progress_deadline.unwrap_or(target.timeout);
        Hold { until: arrived + wait, wait, progress_deadline: target.progress_deadline.is_some() }
    }

    /// The deadline of the answer to a request that got its slot at `slot`, `deadline` being the
    /// timeout from its arrival.
    pub fn answer_deadline(&self, deadline: Instant, slot: Instant, timeout: Duration) -> Instant {
        if self.progress_deadline { slot + timeout } else { deadline }
    }
}

/// Reads an admitted request's body within its deadline and `target`'s size limit and byte
/// budgets; the [`Reservation`] holds its bytes in the budgets until dropped.
pub async fn read<B>(
    target: &Target<'_>,
    admitted: &Admitted,
    headers: &HeaderMap,
    body: B,
) -> Result<(Bytes, Reservation)>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    Ok(timeout_at(admitted.deadline, read_body(headers, body, target.body))
        .await
        .map_err(|_| BodyError::Timeout { timeout: target.timeout })??)
}

/// Waits for a slot and sends `outgoing`, retrying as the target allows; the answer streams and
/// keeps the slot, the counts and `held_bytes` until its end.
pub async fn forward(
    forwarder: &Forwarder,
    target: &Target<'_>,
    admitted: Admitted,
    outgoing: &Outgoing,
    held_bytes: Reservation,
) -> Result<HttpResponse> {
    let Admitted { arrived, deadline: timeout_deadline, hold, pending, cold_start, at_zero } = admitted;
    let mut deadline = hold.until;
    let mut held = None;
    let mut refused: Option<(Slot, Error)> = None;
    let mut attempt = 0;
    let mut resent = false;
    loop {
        let slot = match refused.take() {
            None => take_slot(target, hold).await?,
            Some((failed, error)) => {
                attempt += 1;
                retake_slot(target, Hold { until: deadline, ..hold }, failed, error, attempt).await?
            }
        };
        if attempt == 0 {
            deadline = hold.answer_deadline(timeout_deadline, Instant::now(), target.timeout);
            let waited = arrived.elapsed();
            held = at_zero.then_some(waited);
            target.wait_seconds.observe(waited.as_secs_f64());
            if let Some(timer) = &cold_start {
                timer.ready();
            }
        }
        let addr = slot.replica().addr;
        let forwarded = target.load.forwarding();
        let sent = timeout_at(deadline, forwarder.send(addr, outgoing))
            .await
            .map_err(|_| Error::UpstreamTimeout { target: target.label.to_owned(), timeout: target.timeout })?;
        match sent {
            Ok(mut response) => {
                drop_own_headers(response.headers_mut());
                if let Some(held) = held {
                    response.headers_mut().insert(COLD_START_HEADER, HeaderValue::from(held.as_millis() as u64));
                }
                let cold_start = cold_start.map(ColdStartTimer::answered);
                let hold: (Option<Counted>, Slot, Counted, Reservation, Option<ColdStartTimer>) =
                    (pending, slot, forwarded, held_bytes, cold_start);
                return Ok(response.map(|body| Guarded::new(body, Box::new(hold), Some(deadline)).boxed_unsync()));
            }
            Err(error @ Error::Connect { .. }) if target.retry => {
                if attempt == 0 {
                    tracing::warn!(to = target.label, %error, "connection failed; trying another replica");
                } else {
                    tracing::debug!(to = target.label, attempt, %error, "connection failed again");
                }
                refused = Some((slot, error));
            }
            Err(error @ Error::Upstream { .. }) if target.retry && !resent => {
                // The replica died (or dropped a pooled connection) before answering. Inference
                // has no side effects, as the router also assumes when it resends on a reused
                // connection, so the buffered request is sent once more, elsewhere if possible.
                tracing::warn!(to = target.label, %error, "the replica failed before answering; sending once more");
                resent = true;
                refused = Some((slot, error));
            }
            Err(error) => return Err(error),
        }
    }
}

/// Drops the data plane's own headers (`x-skiff-*`) from a replica's answer: only the activator
/// and the router write them, so a replica cannot forge a cold start or a revision.
fn drop_own_headers(headers: &mut HeaderMap) {
    let own: Vec<http::HeaderName> = headers.keys().filter(|name| is_own_header(name.as_str())).cloned().collect();
    for name in own {
        headers.remove(name);
    }
}

/// A free slot now, or a place in the queue until one frees or the hold ends; at once an error
/// while the revision fails for a cause a retry will not fix, or as soon as it does.
async fn take_slot(target: &Target<'_>, hold: Hold) -> Result<Slot> {
    if let Some(slot) = target.endpoints.try_acquire() {
        return Ok(slot);
    }
    let failing = |failing: &Failing| Error::Failing {
        revision: target.name.to_owned(),
        reason: failing.reason.clone(),
        message: failing.message.clone(),
    };
    if let Some(failed) = target.endpoints.failing() {
        return Err(failing(&failed));
    }
    let _queued = target.load.enqueue(target.max_queued).ok_or_else(|| {
        Error::Overloaded(format!(
            "{}: every slot is busy and {} requests are already queued",
            target.label,
            target.max_queued.unwrap_or_default()
        ))
    })?;
    let slot_or_failure = async {
        tokio::select! {
            slot = target.endpoints.acquire() => Ok(slot),
            failed = target.endpoints.failed() => Err(failing(&failed)),
        }
    };
    timeout_at(hold.until, slot_or_failure).await.map_err(|_| {
        if target.endpoints.ready().is_empty() {
            Error::NoReadyReplica {
                revision: target.name.to_owned(),
                timeout: hold.wait,
                progress_deadline: hold.progress_deadline,
            }
        } else {
            Error::NoCapacity { target: target.label.to_owned(), timeout: hold.wait }
        }
    })?
}

/// After `failed`'s replica refused the connection: another replica's slot if one has room now
/// (`failed` is held while choosing, so the least-loaded pick goes elsewhere); otherwise a short
/// pause and a slot anywhere, the same replica included.
async fn retake_slot(target: &Target<'_>, hold: Hold, failed: Slot, error: Error, attempt: u32) -> Result<Slot> {
    let deadline = hold.until;
    let unreachable = |error: &Error| Error::Unreachable {
        target: target.label.to_owned(),
        timeout: target.timeout,
        last: error.to_string(),
    };
    let elsewhere = target.endpoints.try_acquire().filter(|slot| slot.replica().addr != failed.replica().addr);
    drop(failed);
    if let Some(slot) = elsewhere {
        return Ok(slot);
    }
    let pause = Instant::now() + retry_pause(attempt);
    if pause >= deadline {
        sleep_until(deadline).await;
        return Err(unreachable(&error));
    }
    sleep_until(pause).await;
    take_slot(target, hold).await.map_err(|e| match e {
        Error::NoCapacity { .. } => unreachable(&error),
        other => other,
    })
}

/// The pause before trying again when no other replica has room: 10 ms doubling up to 250 ms, short
/// because a published replica that refuses is about to be replaced (no long back-off on cold starts).
pub fn retry_pause(attempt: u32) -> Duration {
    Duration::from_millis(10u64 << attempt.saturating_sub(1).min(5)).min(Duration::from_millis(250))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_pauses_grow_and_stay_short() {
        let pauses: Vec<u128> = (1..=8).map(|a| retry_pause(a).as_millis()).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 250, 250, 250]);
    }
}
