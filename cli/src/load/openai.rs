//! `skiff load --openai`: streamed chat completions (`stream: true`, `stream_options.include_usage`)
//! from a prompt file or a built-in prompt set, each answer's server-sent events timed as they
//! arrive: the time to the first content token (TTFT), the gaps between content events
//! (inter-token latency), the output tokens (the server's `usage`, else the content events
//! counted) and the end-to-end time. The request bodies and the timing of one stream are pure;
//! `client` reads the answers.

pub mod sse;
pub mod summary;
pub mod table;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Value, json};

/// Prompts sent when no `--prompts` file is given.
pub const BUILT_IN: [&str; 8] = [
    "Explain what a load balancer does in two sentences.",
    "Write a haiku about autumn rain.",
    "List three uses of a hash map.",
    "Summarise the plot of Hamlet briefly.",
    "What is the difference between a process and a thread?",
    "Give a short recipe for pancakes.",
    "Translate 'good morning, how are you?' into French.",
    "Why is the sky blue? Answer simply.",
];

/// Whether the run speaks OpenAI: `--openai`, or a URL path ending in `/chat/completions`.
pub fn detect(flag: bool, path: &str) -> bool {
    flag || path.split('?').next().is_some_and(|p| p.trim_end_matches('/').ends_with("/chat/completions"))
}

/// Prompts from a file: one per line, or JSON lines (`{"prompt": …}`, `{"text": …}` or a string);
/// blank lines skipped.
pub fn prompts(text: &str) -> Result<Vec<String>, String> {
    let prompts = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let line = line.trim();
            if !line.starts_with(['{', '"']) {
                return Ok(line.to_owned());
            }
            let value: Value = serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", i + 1))?;
            value
                .as_str()
                .or_else(|| value["prompt"].as_str())
                .or_else(|| value["text"].as_str())
                .map(str::to_owned)
                .ok_or_else(|| format!("line {}: a JSON line needs a \"prompt\" or \"text\" string", i + 1))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if prompts.is_empty() {
        return Err("no prompts in the file".into());
    }
    Ok(prompts)
}

/// One streamed chat completion's body.
pub fn body(model: &str, prompt: &str, max_tokens: u32) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

/// The request bodies, one per prompt, sent in turn.
#[derive(Debug)]
pub struct Chat {
    bodies: Vec<Bytes>,
    next: AtomicUsize,
}

impl Chat {
    /// Bodies for `prompts` (at least one).
    pub fn new(model: &str, prompts: &[String], max_tokens: u32) -> Chat {
        let bodies = prompts.iter().map(|p| Bytes::from(body(model, p, max_tokens).to_string())).collect();
        Chat { bodies, next: AtomicUsize::new(0) }
    }

    /// The next body.
    pub fn next_body(&self) -> Bytes {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.bodies[i % self.bodies.len()].clone()
    }
}

/// Where a stream's output token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TokensFrom {
    /// The server's `usage.completion_tokens` in the final chunk.
    Usage,
    /// The server sent no usage: the content events, counted.
    Counted,
}

/// One stream, timed.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// From sending to the first content event; none when no content came.
    pub ttft: Option<Duration>,
    /// Between consecutive content events.
    pub gaps: Vec<Duration>,
    /// Content events.
    pub content_events: u64,
    /// Output tokens.
    pub tokens: u64,
    /// Where `tokens` came from.
    pub tokens_from: TokensFrom,
    /// From sending to the end of the answer.
    pub end_to_end: Duration,
}

/// Times one stream's events as they arrive (pure: the caller gives the clock).
#[derive(Debug, Clone)]
pub struct Tracker {
    sent: Instant,
    last: Option<Instant>,
    ttft: Option<Duration>,
    gaps: Vec<Duration>,
    content_events: u64,
    usage: Option<u64>,
}

impl Tracker {
    /// A stream whose request was sent at `sent`.
    pub fn new(sent: Instant) -> Tracker {
        Tracker { sent, last: None, ttft: None, gaps: Vec::new(), content_events: 0, usage: None }
    }

    /// One event's data, arrived at `at`: a chunk with content is a token event, one with `usage`
    /// gives the count; `[DONE]` and anything not JSON are skipped.
    pub fn event(&mut self, at: Instant, data: &str) {
        let Ok(chunk) = serde_json::from_str::<Value>(data) else { return };
        if let Some(tokens) = chunk["usage"]["completion_tokens"].as_u64() {
            self.usage = Some(tokens);
        }
        let content = chunk["choices"].as_array().into_iter().flatten().any(|choice| {
            let text = choice["delta"]["content"].as_str().or_else(|| choice["text"].as_str());
            text.is_some_and(|t| !t.is_empty())
        });
        if !content {
            return;
        }
        self.content_events += 1;
        match self.last {
            Some(last) => self.gaps.push(at.saturating_duration_since(last)),
            None => self.ttft = Some(at.saturating_duration_since(self.sent)),
        }
        self.last = Some(at);
    }

    /// The stream, ended at `at`.
    pub fn finish(self, at: Instant) -> Stream {
        let (tokens, tokens_from) = match self.usage {
            Some(tokens) => (tokens, TokensFrom::Usage),
            None => (self.content_events, TokensFrom::Counted),
        };
        Stream {
            ttft: self.ttft,
            gaps: self.gaps,
            content_events: self.content_events,
            tokens,
            tokens_from,
            end_to_end: at.saturating_duration_since(self.sent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_is_asked_for_or_read_from_the_path() {
        assert!(detect(true, "/"));
        assert!(detect(false, "/openai/v1/chat/completions"));
        assert!(detect(false, "/v1/chat/completions/?x=1"));
        assert!(!detect(false, "/v2/models/iris/infer"));
    }

    #[test]
    fn prompts_are_lines_or_json_lines() {
        assert_eq!(prompts("hello\n\n  world \n").unwrap(), ["hello", "world"]);
        assert_eq!(prompts("{\"prompt\": \"a\"}\n{\"text\": \"b\"}\n\"c\"\n").unwrap(), ["a", "b", "c"]);
        assert!(prompts("{\"other\": 1}").unwrap_err().contains("line 1"));
        assert!(prompts("\n").is_err());
    }

    #[test]
    fn bodies_stream_with_usage_and_take_turns() {
        let chat = Chat::new("llama", &["a".into(), "b".into()], 16);
        let bodies: Vec<Value> = (0..3).map(|_| serde_json::from_slice(&chat.next_body()).unwrap()).collect();
        let prompts: Vec<&str> = bodies.iter().map(|b| b["messages"][0]["content"].as_str().unwrap()).collect();
        assert_eq!(prompts, ["a", "b", "a"]);
        assert_eq!(
            (&bodies[0]["stream"], &bodies[0]["max_tokens"], &bodies[0]["model"]),
            (&json!(true), &json!(16), &json!("llama"))
        );
        assert_eq!(bodies[0]["stream_options"]["include_usage"], true);
    }

    fn chunk(content: &str) -> String {
        json!({"choices": [{"delta": {"content": content}}]}).to_string()
    }

    #[test]
    fn a_stream_is_timed_from_its_content_events() {
        let sent = Instant::now();
        let ms = Duration::from_millis;
        let mut tracker = Tracker::new(sent);
        tracker.event(sent + ms(5), &json!({"choices": [{"delta": {"role": "assistant"}}]}).to_string());
        tracker.event(sent + ms(40), &chunk("Hel"));
        tracker.event(sent + ms(50), &chunk(""));
        tracker.event(sent + ms(55), &chunk("lo"));
        tracker.event(sent + ms(70), &chunk("!"));
        let counted = tracker.clone().finish(sent + ms(80));
        assert_eq!(counted.ttft, Some(ms(40)));
        assert_eq!(counted.gaps, [ms(15), ms(15)]);
        assert_eq!((counted.tokens, counted.tokens_from, counted.end_to_end), (3, TokensFrom::Counted, ms(80)));
        tracker.event(sent + ms(75), &json!({"choices": [], "usage": {"completion_tokens": 4}}).to_string());
        tracker.event(sent + ms(76), "[DONE]");
        let used = tracker.finish(sent + ms(80));
        assert_eq!((used.tokens, used.tokens_from, used.content_events), (4, TokensFrom::Usage, 3));
    }
}
