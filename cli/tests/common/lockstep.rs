//! The client side of `tests/fixtures/lockstep_sse.py`, the OpenAI-style server that streams in
//! lockstep with its client: before writing event n the server writes n to `<events>/written`,
//! and it writes event n+1 only once the client has created `<events>/read-<n>`. So finding
//! `written` at n when event n arrives proves the event came through every hop before the server
//! wrote the next one: an ordering check through real files, not a timing one. Each event carries
//! the server's clock when it wrote it (`: written_at <unix seconds>`); [`Streamed::report`] puts
//! it beside the client's clock when the event arrived (both on one machine).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::repo;

/// The server's script.
pub fn server() -> PathBuf {
    repo().join("tests/fixtures/lockstep_sse.py")
}

/// One server-sent event as it arrived.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its `data:` line's value (a JSON chunk, or `[DONE]`).
    pub data: String,
    /// When the server wrote it (its `: written_at` line), Unix seconds.
    pub written_at: f64,
    /// When its last byte reached the client, Unix seconds.
    pub arrived_at: f64,
}

/// A streamed chat completion read in lockstep.
#[derive(Debug)]
pub struct Streamed {
    /// The answer's status and headers.
    pub head: http::response::Parts,
    /// When the request was sent, Unix seconds.
    pub sent_at: f64,
    /// Its events, in order.
    pub events: Vec<Event>,
}

impl Streamed {
    /// The `content` of each chunk before `[DONE]`.
    pub fn contents(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e.data != "[DONE]")
            .map(|e| serde_json::from_str::<Value>(&e.data).unwrap_or_else(|err| panic!("{err}: {}", e.data)))
            .map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// One line per event: when the server wrote it and when it arrived (seconds since the request
    /// was sent), and the gap between the two.
    pub fn report(&self) -> String {
        self.events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                format!(
                    "event {}: written at +{:.6} s, arrived at +{:.6} s, gap {:.3} ms  {}\n",
                    i + 1,
                    e.written_at - self.sent_at,
                    e.arrived_at - self.sent_at,
                    (e.arrived_at - e.written_at) * 1e3,
                    e.data
                )
            })
            .collect()
    }
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Parses one event's block (its lines, without the blank line that ends it).
fn parse(block: &str, arrived_at: f64) -> Event {
    let mut written_at = None;
    let mut data = None;
    for line in block.lines() {
        if let Some(stamp) = line.strip_prefix(": written_at ") {
            written_at = Some(stamp.trim().parse::<f64>().unwrap_or_else(|e| panic!("{e}: {block:?}")));
        } else if let Some(value) = line.strip_prefix("data: ") {
            data = Some(value.to_owned());
        }
    }
    let (Some(written_at), Some(data)) = (written_at, data) else {
        panic!("an event without its stamp or data: {block:?}")
    };
    Event { data, written_at, arrived_at }
}

/// Sends `POST {base}/openai/v1/chat/completions` (`base`: `http://host:port`) naming `model`, with
/// `"stream": true`, and reads its events in lockstep with the server, whose handshake folder is
/// `events`: at event n, `written` must hold n (else the event was held back somewhere while the
/// server went on), then `read-<n>` lets the server write the next. A status other than 200 ends
/// the read with no events.
pub async fn stream(base: &str, model: &str, events: &Path) -> Streamed {
    let body = json!({"messages": [{"role": "user", "content": "Count"}], "model": model, "stream": true});
    let sent_at = now();
    let response = super::post_json(&format!("{base}/openai/v1/chat/completions"), &body).await;
    let (head, mut answer) = response.into_parts();
    let mut streamed = Streamed { head, sent_at, events: Vec::new() };
    if streamed.head.status != http::StatusCode::OK {
        return streamed;
    }
    let mut buffer = String::new();
    // A liveness bound, not a timing check.
    let bound = Duration::from_secs(120);
    while let Some(frame) = tokio::time::timeout(bound, answer.frame()).await.expect("the stream stalled") {
        let Ok(data) = frame.unwrap().into_data() else { continue };
        let arrived_at = now();
        buffer.push_str(std::str::from_utf8(&data).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            streamed.events.push(parse(block.trim_end(), arrived_at));
            let n = streamed.events.len();
            // The server is at this event, not the next: it waits for the file written below.
            let written = std::fs::read_to_string(events.join("written")).unwrap_or_default();
            assert_eq!(
                written,
                n.to_string(),
                "event {n} arrived only after the server wrote event {written}: held back on the way\n{}",
                streamed.report()
            );
            std::fs::write(events.join(format!("read-{n}")), "").unwrap();
        }
    }
    streamed
}
