//! The model a gRPC call is for, read from its first request message, for calls whose
//! `:authority` names no service (a client that dials the router's address, as Triton's and
//! KServe's clients do). Pure: [`method`] says what a call's path is and which protobuf field of
//! its request names the model; [`peek`] reads that field from the first bytes of the request
//! body (gRPC's 5-byte message prefix, then protobuf), never more than [`PEEK_LIMIT`], and says
//! when it needs more. The proxy replays the bytes it read to the upstream and streams the rest,
//! so a stream is never held back.
//!
//! The fields are those of KServe's `grpc_predict_v2.proto` and Triton's `grpc_service.proto`:
//! `model_name = 1` of `ModelInferRequest` (also each message of `ModelStreamInfer`), `name = 1`
//! of `ModelReadyRequest`, `ModelMetadataRequest`, `ModelConfigRequest` and
//! `ModelStatisticsRequest`, `model_name = 2` of `RepositoryModelLoadRequest`,
//! `RepositoryModelUnloadRequest` and `TraceSettingRequest`. Where a message repeats the field
//! (protobuf keeps the last), the first is used: encoders write a field once.

/// The gRPC service of the Open Inference Protocol (and Triton's extensions of it).
pub const SERVICE: &str = "inference.GRPCInferenceService";

/// The most bytes of the request body read to find the model name: the 5-byte prefix and the
/// message fields before the name must fit, as they do for every client seen (the name comes
/// first, or after a short repository name).
pub const PEEK_LIMIT: usize = 8 * 1024;

/// What a gRPC method of [`SERVICE`] is, for routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Its request names the model in this protobuf field (a string).
    Model(u32),
    /// `ServerLive`: the router answers for itself.
    ServerLive,
    /// `ServerReady`: the router answers for itself.
    ServerReady,
    /// `ServerMetadata`: the router answers for itself.
    ServerMetadata,
    /// A method of the service that names no model (repository index, shared memory, logging):
    /// only a service's own `:authority` can route it.
    Unroutable,
}

/// The method of a gRPC path `/inference.GRPCInferenceService/<Method>`, with its name; `None`
/// for any other path.
pub fn method(path: &str) -> Option<(&str, Method)> {
    let name = path.strip_prefix('/')?.strip_prefix(SERVICE)?.strip_prefix('/')?;
    let method = match name {
        "ModelInfer" | "ModelStreamInfer" | "ModelReady" | "ModelMetadata" | "ModelConfig" | "ModelStatistics" => {
            Method::Model(1)
        }
        "RepositoryModelLoad" | "RepositoryModelUnload" | "TraceSetting" => Method::Model(2),
        "ServerLive" => Method::ServerLive,
        "ServerReady" => Method::ServerReady,
        "ServerMetadata" => Method::ServerMetadata,
        "" => return None,
        _ => Method::Unroutable,
    };
    Some((name, method))
}

/// What the first bytes of a request body say about its model name; `E` says why it cannot be
/// read (this module's [`PeekError`] for gRPC, [`crate::openai::JsonError`] for OpenAI's JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peek<E = PeekError> {
    /// The field holds this name (possibly empty).
    Found(String),
    /// The message (or JSON object) is whole and has no such field: it names no model.
    Absent,
    /// More bytes are needed.
    NeedMore,
    /// The name cannot be read.
    Invalid(E),
}

/// Why a model name cannot be read from a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeekError {
    /// The first message is compressed (`grpc-encoding`): the router does not decompress.
    Compressed,
    /// The 5-byte prefix's flag byte is neither 0 nor 1.
    BadPrefix(u8),
    /// The message is not valid protobuf where the router read it.
    Malformed(&'static str),
    /// The name is not UTF-8 (a protobuf string must be).
    NotUtf8,
    /// The name was not within the first [`PEEK_LIMIT`] bytes.
    TooFar,
    /// The body ended before its first message did.
    Ended,
}

impl std::fmt::Display for PeekError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeekError::Compressed => f.write_str("its first message is compressed"),
            PeekError::BadPrefix(flag) => write!(f, "its first message's prefix has flag {flag} (0 or 1 expected)"),
            PeekError::Malformed(why) => write!(f, "its first message is not valid protobuf ({why})"),
            PeekError::NotUtf8 => f.write_str("the model name is not UTF-8"),
            PeekError::TooFar => write!(f, "the model name is not within the first {PEEK_LIMIT} bytes"),
            PeekError::Ended => f.write_str("the request ended before its first message"),
        }
    }
}

/// Reads protobuf string field `field` of the first gRPC message in `body` (the request body's
/// first bytes). `ended`: the body has no more bytes than these. Looks at the first
/// [`PEEK_LIMIT`] bytes only, and never asks for more.
pub fn peek(body: &[u8], field: u32, ended: bool) -> Peek {
    let (body, ended) = match body.get(..PEEK_LIMIT) {
        Some(first) => (first, ended && body.len() == PEEK_LIMIT),
        None => (body, ended),
    };
    match scan(body, field) {
        Scan::Found(name) => match std::str::from_utf8(name) {
            Ok(name) => Peek::Found(name.to_owned()),
            Err(_) => Peek::Invalid(PeekError::NotUtf8),
        },
        Scan::Absent => Peek::Absent,
        Scan::Invalid(error) => Peek::Invalid(error),
        Scan::Short if ended => Peek::Invalid(PeekError::Ended),
        Scan::Short if body.len() >= PEEK_LIMIT => Peek::Invalid(PeekError::TooFar),
        Scan::Short => Peek::NeedMore,
    }
}

enum Scan<'a> {
    Found(&'a [u8]),
    Absent,
    Invalid(PeekError),
    /// The bytes stop before the answer.
    Short,
}

/// Length of gRPC's message prefix: a compression flag and a big-endian length.
const PREFIX: usize = 5;

fn scan(body: &[u8], field: u32) -> Scan<'_> {
    let Some(prefix) = body.get(..PREFIX) else { return Scan::Short };
    match prefix[0] {
        0 => {}
        1 => return Scan::Invalid(PeekError::Compressed),
        flag => return Scan::Invalid(PeekError::BadPrefix(flag)),
    }
    let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    let available = &body[PREFIX..];
    let whole = available.len() >= length;
    let message = &available[..length.min(available.len())];
    // Past the end of the bytes at hand: the message is cut short when whole, else wait for more.
    let short = |why| if whole { Scan::Invalid(PeekError::Malformed(why)) } else { Scan::Short };
    let mut at = 0;
    while at < message.len() {
        let (tag, next) = match varint(message, at) {
            Varint::Value(tag, next) => (tag, next),
            Varint::Short => return short("a field tag runs past the message"),
            Varint::TooLong => return Scan::Invalid(PeekError::Malformed("a varint is longer than ten bytes")),
        };
        at = next;
        let (number, wire) = (tag >> 3, tag & 7);
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return Scan::Invalid(PeekError::Malformed("a field number is out of range"));
        }
        let skip = match wire {
            0 => match varint(message, at) {
                Varint::Value(_, next) => next - at,
                Varint::Short => return short("a varint runs past the message"),
                Varint::TooLong => return Scan::Invalid(PeekError::Malformed("a varint is longer than ten bytes")),
            },
            1 => 8,
            5 => 4,
            2 => {
                let (len, next) = match varint(message, at) {
                    Varint::Value(len, next) => (len, next),
                    Varint::Short => return short("a length runs past the message"),
                    Varint::TooLong => return Scan::Invalid(PeekError::Malformed("a varint is longer than ten bytes")),
                };
                at = next;
                let Some(end) = usize::try_from(len).ok().and_then(|len| at.checked_add(len)) else {
                    return Scan::Invalid(PeekError::Malformed("a length is out of range"));
                };
                if number == u64::from(field) {
                    return match message.get(at..end) {
                        Some(name) => Scan::Found(name),
                        None => short("the name runs past the message"),
                    };
                }
                end - at
            }
            _ => return Scan::Invalid(PeekError::Malformed("a field has a group or unknown wire type")),
        };
        if number == u64::from(field) {
            return Scan::Invalid(PeekError::Malformed("the model name field is not a string"));
        }
        at = match at.checked_add(skip) {
            Some(end) if end <= message.len() => end,
            _ => return short("a field runs past the message"),
        };
    }
    if whole { Scan::Absent } else { Scan::Short }
}

/// A varint read from a message.
enum Varint {
    /// Its value and the position after it.
    Value(u64, usize),
    /// The bytes end first.
    Short,
    /// Longer than ten bytes: not a varint.
    TooLong,
}

/// The varint at `at` in `bytes`.
fn varint(bytes: &[u8], at: usize) -> Varint {
    let mut value = 0u64;
    let rest = bytes.get(at..).unwrap_or_default();
    for (i, byte) in rest.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Varint::Value(value, at + i + 1);
        }
    }
    if rest.len() >= 10 { Varint::TooLong } else { Varint::Short }
}

#[cfg(test)]
mod tests;
