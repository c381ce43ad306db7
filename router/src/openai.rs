//! OpenAI's API as KServe's Hugging Face runtime serves it (`/openai/v1/...`, and `/v1/...` as
//! vLLM's own server does), for requests to the router itself (a Host that names no service).
//! Pure: [`endpoint`] says which requests qualify; [`ModelField`] reads the top-level `"model"`
//! field of a JSON body from its first bytes, never more than [`PEEK_LIMIT`], and says when it
//! needs more; [`models`] is the answer to `GET .../v1/models`. The proxy replays the bytes it read
//! to the upstream and streams the rest, as for gRPC calls routed by their message ([`crate::peek`]).
//!
//! The name is the InferenceService's, found as a `/v2/models/<m>` path finds it
//! ([`crate::RouteTable::resolve_model`]): KServe's runtime serves a model under the service's
//! name unless `--model_name` says otherwise. Where an object repeats `"model"` (JSON parsers keep
//! the last), the first is used: encoders write a field once.

use std::sync::Arc;

use crate::peek::Peek;
use crate::table::{RouteTable, ServiceRoute};

/// The most bytes of a request body read to find `"model"`: 1 MiB. OpenAI's Python client writes
/// `messages` (chat) and `input` (embeddings) before `model`, so the whole prompt may come first;
/// 1 MiB of JSON holds some 250,000 tokens of text, past the context of the models served, and is
/// nginx's default bound on a whole request body. The router holds at most this much per request
/// while it routes, for at most the head deadline.
pub const PEEK_LIMIT: usize = 1024 * 1024;

/// The API paths' prefixes: KServe's (`KSERVE_OPENAI_ROUTE_PREFIX`, `/openai` by default), then
/// OpenAI's own, which vLLM serves.
const PREFIXES: [&str; 2] = ["/openai/v1/", "/v1/"];

/// A request of OpenAI's API the router handles itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST completions`, `chat/completions`, `embeddings` or `rerank` (KServe's runtime's
    /// routes): routed by the `"model"` of its JSON body.
    ByModel,
    /// `GET models`: answered with the services the router reaches by name.
    Models,
}

/// The OpenAI endpoint `method path` is, if it is one (the query is ignored).
pub fn endpoint(method: &http::Method, path: &str) -> Option<Endpoint> {
    let path = path.split('?').next().unwrap_or_default();
    let rest = PREFIXES.iter().find_map(|prefix| path.strip_prefix(prefix))?;
    match rest {
        "completions" | "chat/completions" | "embeddings" | "rerank" if method == http::Method::POST => {
            Some(Endpoint::ByModel)
        }
        "models" if method == http::Method::GET => Some(Endpoint::Models),
        _ => None,
    }
}

/// Why the model named in a JSON body cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// The body is empty.
    Empty,
    /// The body does not start with a JSON object.
    NotObject,
    /// The body is not valid JSON where the router read it.
    Malformed(&'static str),
    /// `"model"` holds something other than a string.
    NotString,
    /// `"model"` (or its whole value) is not within the first [`PEEK_LIMIT`] bytes.
    TooFar,
    /// The body ended before its object did.
    Ended,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonError::Empty => f.write_str("the body is empty"),
            JsonError::NotObject => f.write_str("the body is not a JSON object"),
            JsonError::Malformed(why) => write!(f, "the body is not valid JSON ({why})"),
            JsonError::NotString => f.write_str("\"model\" is not a string"),
            JsonError::TooFar => write!(f, "\"model\" is not within the first {} KiB of the body", PEEK_LIMIT / 1024),
            JsonError::Ended => f.write_str("the body ends before its JSON object does"),
        }
    }
}

/// Where the scan of a body stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the top-level object.
    Start,
    /// In the object, before a field name (or its end, when `first`).
    Key { first: bool },
    /// In a field name that began at this offset (its quote).
    InKey { start: usize },
    /// After a field name; `model`: it was `"model"`.
    Colon { model: bool },
    /// Before a field's value.
    Value { model: bool },
    /// In the `"model"` string that began at this offset (its quote).
    InModel { start: usize },
    /// In another value: a string, or an array or object `depth` deep (and maybe in a string there).
    Skip { depth: usize, in_string: bool },
    /// In a number, `true`, `false` or `null`.
    Scalar,
    /// After a value: a comma or the object's end.
    After,
}

/// Reads the top-level `"model"` of a JSON object from a body that arrives in pieces: each call to
/// [`ModelField::peek`] passes every byte read so far (the same bytes, and more) and scans only
/// the new ones.
#[derive(Debug, Clone)]
pub struct ModelField {
    state: State,
    /// Offset of the next byte to scan.
    at: usize,
    /// The previous byte in a string was an unescaped backslash.
    escaped: bool,
}

impl Default for ModelField {
    fn default() -> Self {
        ModelField { state: State::Start, at: 0, escaped: false }
    }
}

impl ModelField {
    /// What `body` (every byte read so far; `ended`: there are no more) says about `"model"`.
    /// Looks at the first [`PEEK_LIMIT`] bytes only, and never asks for more.
    pub fn peek(&mut self, body: &[u8], ended: bool) -> Peek<JsonError> {
        let (body, ended) = match body.get(..PEEK_LIMIT) {
            Some(first) => (first, ended && body.len() == PEEK_LIMIT),
            None => (body, ended),
        };
        while self.at < body.len() {
            let byte = body[self.at];
            match self.step(body, byte) {
                Ok(None) => self.at += 1,
                Ok(Some(answer)) => return answer,
                Err(error) => return Peek::Invalid(error),
            }
        }
        match self.state {
            State::Start if ended => Peek::Invalid(JsonError::Empty),
            _ if ended => Peek::Invalid(JsonError::Ended),
            _ if body.len() >= PEEK_LIMIT => Peek::Invalid(JsonError::TooFar),
            _ => Peek::NeedMore,
        }
    }

    /// Takes `byte` (at `self.at` in `body`): `Some` once the answer is known.
    fn step(&mut self, body: &[u8], byte: u8) -> Result<Option<Peek<JsonError>>, JsonError> {
        let space = byte.is_ascii_whitespace();
        self.state = match self.state {
            state @ (State::Start | State::Key { .. } | State::Colon { .. } | State::Value { .. } | State::After)
                if space =>
            {
                state
            }
            State::Start if byte == b'{' => State::Key { first: true },
            State::Start => return Err(JsonError::NotObject),
            State::Key { .. } if byte == b'"' => State::InKey { start: self.at },
            State::Key { first: true } if byte == b'}' => return Ok(Some(Peek::Absent)),
            State::Key { .. } => return Err(JsonError::Malformed("a field name is expected")),
            State::InKey { start } => match self.string_end(byte) {
                false => State::InKey { start },
                true => State::Colon { model: decode(&body[start..=self.at])? == "model" },
            },
            State::Colon { model } if byte == b':' => State::Value { model },
            State::Colon { .. } => return Err(JsonError::Malformed("a colon is expected after a field name")),
            State::Value { model: true } if byte == b'"' => State::InModel { start: self.at },
            State::Value { model: true } => return Err(JsonError::NotString),
            State::Value { model: false } => match byte {
                b'"' => State::Skip { depth: 0, in_string: true },
                b'{' | b'[' => State::Skip { depth: 1, in_string: false },
                b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => State::Scalar,
                _ => return Err(JsonError::Malformed("a value is expected after a colon")),
            },
            State::InModel { start } => match self.string_end(byte) {
                false => State::InModel { start },
                true => return Ok(Some(Peek::Found(decode(&body[start..=self.at])?))),
            },
            State::Skip { depth, in_string: true } => match (self.string_end(byte), depth) {
                (false, _) => State::Skip { depth, in_string: true },
                (true, 0) => State::After,
                (true, _) => State::Skip { depth, in_string: false },
            },
            State::Skip { depth, in_string: false } => match byte {
                b'"' => State::Skip { depth, in_string: true },
                b'{' | b'[' => State::Skip { depth: depth + 1, in_string: false },
                b'}' | b']' if depth == 1 => State::After,
                b'}' | b']' => State::Skip { depth: depth - 1, in_string: false },
                _ => State::Skip { depth, in_string: false },
            },
            State::Scalar if byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'-' | b'.') => State::Scalar,
            // The scalar ended: this byte is the next token's, read again as one.
            State::Scalar => {
                self.state = State::After;
                return self.step(body, byte);
            }
            State::After if byte == b',' => State::Key { first: false },
            State::After if byte == b'}' => return Ok(Some(Peek::Absent)),
            State::After => return Err(JsonError::Malformed("a comma or the object's end is expected after a value")),
        };
        Ok(None)
    }

    /// Whether `byte`, inside a string, ends it (an unescaped quote).
    fn string_end(&mut self, byte: u8) -> bool {
        if self.escaped {
            self.escaped = false;
            return false;
        }
        match byte {
            b'\\' => self.escaped = true,
            b'"' => return true,
            _ => {}
        }
        false
    }
}

/// The text of a JSON string literal (quotes included), escapes decoded.
fn decode(literal: &[u8]) -> Result<String, JsonError> {
    serde_json::from_slice(literal).map_err(|_| JsonError::Malformed("a string has an invalid escape or is not UTF-8"))
}

/// The services a request to the router reaches by model name, each once, sorted by name: the one
/// of each name that [`RouteTable::resolve_model`] picks (a name held in several namespaces, none
/// of them `default`, reaches none).
pub fn reachable(table: &RouteTable) -> Vec<Arc<ServiceRoute>> {
    let mut names: Vec<&str> = table.services().map(|service| service.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names.into_iter().filter_map(|name| table.resolve_model(name, "/")).map(|resolved| resolved.service).collect()
}

/// The answer to `GET .../v1/models`: OpenAI's model list, as KServe's runtime writes it
/// (`created` the time its server started, in Unix seconds), one model per service the router
/// reaches by name; `owned_by` is the service's namespace (KServe's runtime, serving one, leaves it empty).
pub fn models(table: &RouteTable, created: u64) -> serde_json::Value {
    let data: Vec<serde_json::Value> = reachable(table)
        .into_iter()
        .map(|service| {
            serde_json::json!({
                "id": service.name,
                "object": "model",
                "created": created,
                "owned_by": service.namespace,
            })
        })
        .collect();
    serde_json::json!({ "object": "list", "data": data })
}

#[cfg(test)]
mod tests;
