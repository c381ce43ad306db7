//! KServe's batcher (`predictor.batcher: {maxBatchSize, maxLatency}`) for a custom container: V1
//! `POST /v1/models/<name>:predict` requests whose body is `{"instances": [...]}` and nothing else
//! are held for up to `maxLatency` from the first one, per path, until `maxBatchSize` instances
//! have come; then one `{"instances": [...]}` with all of them, in arrival order, goes to the
//! container, and each caller gets the container's answer with `predictions` cut to its own
//! instances, in order (other fields of the answer are given to every caller as they are).
//!
//! A batch never holds more than `maxBatchSize` instances, except when one request alone brings
//! more: it then goes on its own, whole. Any other request (another method or path, a body that
//! is not an instances list, or has other fields such as `parameters`) is passed through
//! unbatched. The combined request carries only `Content-Type: application/json`.
//!
//! Errors: when the container fails the combined request (an error status, or no answer), every
//! caller gets that same answer; when its answer is not an object with a `predictions` list as
//! long as the batch, every caller gets a 500 that says so.
//!
//! [`Batches`] and [`Batch`] are the pure core (assembly, due times, the split; unit-tested without
//! sockets or timers); [`Batcher`] is the shell: one task that collects callers and a task per
//! batch sent, through the queue-proxy's concurrency limit like any request.

use std::sync::Weak;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, sleep_until, timeout_at};

use super::QueueProxy;
use crate::body::{Guarded, Hold};
use crate::error::{Error, Result};
use crate::response::{self, BoxError, HttpResponse};

/// Callers that may wait to be added to a batch before submitting waits.
const QUEUE: usize = 1024;

/// When a batch is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// Instances that make a full batch (KServe `maxBatchSize`).
    pub max_batch_size: usize,
    /// How long a batch waits to fill, from its first request (KServe `maxLatency`).
    pub max_latency: Duration,
}

/// Whether a request may be batched: a `POST` to a V1 predict path, `/v1/models/<name>:predict`.
pub fn batchable(method: &Method, path: &str) -> bool {
    method == Method::POST && path.starts_with("/v1/models/") && path.ends_with(":predict")
}

/// The instances of a V1 body that is exactly `{"instances": [...]}`, non-empty; `None` for any
/// other body, which is passed through unbatched.
pub fn instances(body: &[u8]) -> Option<Vec<Value>> {
    let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(body) else { return None };
    if object.len() != 1 {
        return None;
    }
    match object.remove("instances") {
        Some(Value::Array(instances)) if !instances.is_empty() => Some(instances),
        _ => None,
    }
}

/// One batch: a path, its instances in arrival order, and who sent how many of them.
#[derive(Debug)]
pub struct Batch<W> {
    path: String,
    due: Instant,
    instances: Vec<Value>,
    callers: Vec<(W, usize)>,
}

impl<W> Batch<W> {
    /// The path the combined request goes to.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Instances in the batch.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    /// Whether it has no instance (never, for a batch handed out).
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    /// The combined request's body, `{"instances": [...]}`, and how to split its answer.
    pub fn into_request(self) -> (String, Bytes, Split<W>) {
        let total = self.instances.len();
        let body = serde_json::to_vec(&serde_json::json!({ "instances": self.instances }))
            .expect("JSON values always serialize");
        (self.path, Bytes::from(body), Split { callers: self.callers, total })
    }
}

/// The callers of a sent batch and their share of it.
#[derive(Debug)]
pub struct Split<W> {
    callers: Vec<(W, usize)>,
    total: usize,
}

impl<W> Split<W> {
    /// The callers, in arrival order (to give each the same error).
    pub fn callers(self) -> impl Iterator<Item = W> {
        self.callers.into_iter().map(|(caller, _)| caller)
    }

    /// Splits the container's successful `answer`: each caller gets the answer with `predictions`
    /// cut to its own instances, in order; each gets the same error when the answer is not a JSON
    /// object with a `predictions` list as long as the batch.
    pub fn split(self, answer: &[u8]) -> Vec<(W, Result<Bytes, String>)> {
        let total = self.total;
        let parsed = match serde_json::from_slice::<Value>(answer) {
            Ok(Value::Object(mut object)) => match object.remove("predictions") {
                Some(Value::Array(predictions)) if predictions.len() == total => Ok((object, predictions)),
                Some(Value::Array(predictions)) => Err(format!(
                    "the container answered {} predictions for a batch of {total} instances",
                    predictions.len()
                )),
                _ => Err(format!("the container's answer to a batch of {total} instances has no predictions list")),
            },
            Ok(_) => Err(format!("the container's answer to a batch of {total} instances is not a JSON object")),
            Err(e) => Err(format!("the container's answer to a batch of {total} instances is not JSON: {e}")),
        };
        let (rest, predictions) = match parsed {
            Ok(parsed) => parsed,
            Err(message) => {
                return self.callers.into_iter().map(|(caller, _)| (caller, Err(message.clone()))).collect();
            }
        };
        let mut predictions = predictions.into_iter();
        self.callers
            .into_iter()
            .map(|(caller, count)| {
                let mut own = Map::with_capacity(rest.len() + 1);
                own.insert("predictions".into(), Value::Array(predictions.by_ref().take(count).collect()));
                own.extend(rest.iter().map(|(k, v)| (k.clone(), v.clone())));
                let body = serde_json::to_vec(&Value::Object(own)).expect("JSON values always serialize");
                (caller, Ok(Bytes::from(body)))
            })
            .collect()
    }
}

/// The open batches, one per path, and when each is due.
#[derive(Debug)]
pub struct Batches<W> {
    settings: BatchSettings,
    open: Vec<Batch<W>>,
}

impl<W> Batches<W> {
    /// No batch open yet.
    pub fn new(settings: BatchSettings) -> Batches<W> {
        Batches { settings, open: Vec::new() }
    }

    /// Adds `caller`'s `instances` to the open batch for `path`, or to a new one due
    /// `max_latency` after `now`. Returns the batches to send now: the open one when these
    /// instances would take it past `max_batch_size`, and the one they joined once it is full.
    pub fn add(&mut self, path: &str, instances: Vec<Value>, caller: W, now: Instant) -> Vec<Batch<W>> {
        let mut ready = Vec::new();
        let max = self.settings.max_batch_size;
        let at = match self.open.iter().position(|b| b.path == path) {
            Some(at) if self.open[at].len() + instances.len() > max => {
                ready.push(self.open.swap_remove(at));
                None
            }
            found => found,
        };
        let at = at.unwrap_or_else(|| {
            let due = now + self.settings.max_latency;
            self.open.push(Batch { path: path.to_owned(), due, instances: Vec::new(), callers: Vec::new() });
            self.open.len() - 1
        });
        let batch = &mut self.open[at];
        batch.callers.push((caller, instances.len()));
        batch.instances.extend(instances);
        if batch.len() >= max {
            ready.push(self.open.swap_remove(at));
        }
        ready
    }

    /// When the next open batch is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.open.iter().map(|b| b.due).min()
    }

    /// The batches due at `now`.
    pub fn take_due(&mut self, now: Instant) -> Vec<Batch<W>> {
        let (due, open) = std::mem::take(&mut self.open).into_iter().partition(|b| b.due <= now);
        self.open = open;
        due
    }

    /// Every open batch.
    pub fn take_all(&mut self) -> Vec<Batch<W>> {
        std::mem::take(&mut self.open)
    }
}

/// What a caller of a batch is answered: a status, `Content-Type` (and `Retry-After`) and a body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// `Content-Type`, and `Retry-After` when there is one.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// A JSON answer.
    pub fn json(status: StatusCode, body: Bytes) -> Answer {
        let headers = HeaderMap::from_iter([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))]);
        Answer { status, headers, body }
    }

    /// `{"error": message}` with `status`.
    pub fn error(status: StatusCode, message: &str) -> Answer {
        Answer::json(status, Bytes::from(serde_json::json!({ "error": message }).to_string()))
    }

    /// The answer the queue-proxy gives for `error`.
    pub async fn of_error(error: &Error) -> Answer {
        let (parts, body) = response::error(error, response::Dialect::Json).into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        Answer { status: parts.status, headers: parts.headers, body }
    }

    fn into_response(self, hold: Hold) -> HttpResponse {
        let body = Full::new(self.body).map_err(|never| -> BoxError { match never {} });
        let mut response = http::Response::new(Guarded::new(body, hold, None).boxed_unsync());
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }
}

struct Entry {
    path: String,
    instances: Vec<Value>,
    reply: oneshot::Sender<Answer>,
}

/// The shell: hands callers to the collecting task and waits for their share of the answer.
#[derive(Debug)]
pub struct Batcher {
    entries: mpsc::Sender<Entry>,
}

impl Batcher {
    /// Starts the collecting task on the current tokio runtime; batches are sent through `proxy`.
    pub fn start(settings: BatchSettings, proxy: Weak<QueueProxy>) -> Batcher {
        let (entries, receiver) = mpsc::channel(QUEUE);
        tokio::spawn(collect(receiver, settings, proxy));
        Batcher { entries }
    }

    /// Adds a caller's `instances` for `path` to a batch and waits, until `deadline`, for its
    /// answer; `hold` (its counts and body bytes) is kept until that answer has been sent.
    pub async fn submit(
        &self,
        path: &str,
        instances: Vec<Value>,
        hold: Hold,
        deadline: Instant,
        timed_out: impl FnOnce() -> Error,
    ) -> Result<HttpResponse> {
        let (reply, answer) = oneshot::channel();
        let entry = Entry { path: path.to_owned(), instances, reply };
        let stopped = || Error::NotReady("the batcher has stopped".into());
        match timeout_at(deadline, self.entries.send(entry)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(stopped()),
            Err(_) => return Err(timed_out()),
        }
        match timeout_at(deadline, answer).await {
            Ok(Ok(answer)) => Ok(answer.into_response(hold)),
            Ok(Err(_)) => Err(stopped()),
            Err(_) => Err(timed_out()),
        }
    }
}

/// Collects callers into batches and sends each when it is full or due, until every [`Batcher`]
/// handle is gone (then what is open is sent at once).
async fn collect(mut entries: mpsc::Receiver<Entry>, settings: BatchSettings, proxy: Weak<QueueProxy>) {
    let mut batches = Batches::new(settings);
    loop {
        let due = batches.next_due();
        let (ready, closed) = tokio::select! {
            entry = entries.recv() => match entry {
                Some(Entry { path, instances, reply }) => (batches.add(&path, instances, reply, Instant::now()), false),
                None => (batches.take_all(), true),
            },
            () = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                (batches.take_due(Instant::now()), false)
            }
        };
        for batch in ready {
            tokio::spawn(send(batch, proxy.clone()));
        }
        if closed {
            return;
        }
    }
}

/// Sends one batch and answers its callers.
async fn send(batch: Batch<oneshot::Sender<Answer>>, proxy: Weak<QueueProxy>) {
    let Some(proxy) = proxy.upgrade() else { return };
    tracing::debug!(path = batch.path(), instances = batch.len(), "sending a batch");
    let (path, body, split) = batch.into_request();
    let answer = proxy.send_batch(&path, body).await;
    drop(proxy);
    if !answer.status.is_success() {
        for caller in split.callers() {
            let _ = caller.send(answer.clone());
        }
        return;
    }
    for (caller, share) in split.split(&answer.body) {
        let _ = caller.send(match share {
            Ok(body) => Answer { body, ..answer.clone() },
            Err(message) => Answer::error(StatusCode::INTERNAL_SERVER_ERROR, &message),
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings(max_batch_size: usize) -> BatchSettings {
        BatchSettings { max_batch_size, max_latency: Duration::from_millis(100) }
    }

    fn values(range: std::ops::Range<i64>) -> Vec<Value> {
        range.map(|i| json!([i])).collect()
    }

    const PATH: &str = "/v1/models/m:predict";

    #[test]
    fn only_v1_predict_posts_of_a_bare_instances_list_are_batched() {
        assert!(batchable(&Method::POST, PATH));
        assert!(!batchable(&Method::GET, PATH));
        assert!(!batchable(&Method::POST, "/v1/models/m:explain"));
        assert!(!batchable(&Method::POST, "/v2/models/m/infer"));
        assert_eq!(instances(br#"{"instances": [[1], [2]]}"#), Some(vec![json!([1]), json!([2])]));
        assert_eq!(instances(br#"{"instances": []}"#), None);
        assert_eq!(instances(br#"{"instances": [1], "parameters": {}}"#), None);
        assert_eq!(instances(br#"{"inputs": [1]}"#), None);
        assert_eq!(instances(br#"[1]"#), None);
        assert_eq!(instances(b"not json"), None);
    }

    #[test]
    fn a_batch_fills_to_the_max_and_is_sent_full() {
        let now = Instant::now();
        let mut batches = Batches::new(settings(4));
        assert!(batches.add(PATH, values(0..1), 'a', now).is_empty());
        assert!(batches.add(PATH, values(1..3), 'b', now).is_empty());
        assert_eq!(batches.next_due(), Some(now + Duration::from_millis(100)));
        let ready = batches.add(PATH, values(3..4), 'c', now);
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].len(), 4);
        assert_eq!(batches.next_due(), None);
        let (path, body, split) = ready.into_iter().next().unwrap().into_request();
        assert_eq!(path, PATH);
        assert_eq!(body, r#"{"instances":[[0],[1],[2],[3]]}"#);
        assert_eq!(split.callers().collect::<String>(), "abc");
    }

    #[test]
    fn paths_batch_apart_and_each_is_due_after_the_latency() {
        let now = Instant::now();
        let mut batches = Batches::new(settings(10));
        assert!(batches.add(PATH, values(0..1), 1, now).is_empty());
        let later = now + Duration::from_millis(40);
        assert!(batches.add("/v1/models/other:predict", values(0..1), 2, later).is_empty());
        assert!(batches.add(PATH, values(1..2), 3, later).is_empty());
        assert!(batches.take_due(now + Duration::from_millis(99)).is_empty());
        let due = batches.take_due(now + Duration::from_millis(100));
        assert_eq!((due.len(), due[0].path(), due[0].len()), (1, PATH, 2));
        assert_eq!(batches.next_due(), Some(later + Duration::from_millis(100)));
        let rest = batches.take_all();
        assert_eq!((rest.len(), rest[0].path()), (1, "/v1/models/other:predict"));
    }

    #[test]
    fn a_request_that_does_not_fit_closes_the_open_batch_and_a_large_one_goes_whole() {
        let now = Instant::now();
        let mut batches = Batches::new(settings(4));
        assert!(batches.add(PATH, values(0..3), 'a', now).is_empty());
        let ready = batches.add(PATH, values(3..5), 'b', now);
        assert_eq!(ready.iter().map(Batch::len).collect::<Vec<_>>(), [3], "the open batch goes as it is");
        let ready = batches.add(PATH, values(5..11), 'c', now);
        assert_eq!(ready.iter().map(Batch::len).collect::<Vec<_>>(), [2, 6], "then the large request, whole");
        assert!(batches.take_all().is_empty());
    }

    #[test]
    fn predictions_are_split_back_in_order_with_the_rest_of_the_answer() {
        let mut batches = Batches::new(settings(3));
        batches.add(PATH, values(0..2), 'a', Instant::now());
        let ready = batches.add(PATH, values(2..3), 'b', Instant::now());
        let (_, _, split) = ready.into_iter().next().unwrap().into_request();
        let shares = split.split(br#"{"predictions": [10, 11, 12], "model_name": "m"}"#);
        let shares: Vec<(char, Value)> =
            shares.into_iter().map(|(c, r)| (c, serde_json::from_slice(&r.unwrap()).unwrap())).collect();
        assert_eq!(
            shares,
            [
                ('a', json!({"predictions": [10, 11], "model_name": "m"})),
                ('b', json!({"predictions": [12], "model_name": "m"}))
            ]
        );
    }

    #[test]
    fn a_wrong_answer_is_the_same_error_for_every_caller() {
        let split = |answer: &[u8]| {
            let mut batches = Batches::new(settings(2));
            batches.add(PATH, values(0..1), 'a', Instant::now());
            let ready = batches.add(PATH, values(1..2), 'b', Instant::now());
            let (_, _, split) = ready.into_iter().next().unwrap().into_request();
            let shares = split.split(answer);
            assert_eq!(shares.iter().map(|(c, _)| *c).collect::<String>(), "ab");
            let errors: Vec<String> = shares.into_iter().map(|(_, r)| r.unwrap_err()).collect();
            assert_eq!(errors[0], errors[1]);
            errors[0].clone()
        };
        assert_eq!(
            split(br#"{"predictions": [1]}"#),
            "the container answered 1 predictions for a batch of 2 instances"
        );
        assert_eq!(
            split(br#"{"outputs": []}"#),
            "the container's answer to a batch of 2 instances has no predictions list"
        );
        assert!(split(b"[1, 2]").contains("is not a JSON object"));
        assert!(split(b"<html>").contains("is not JSON"));
    }
}
