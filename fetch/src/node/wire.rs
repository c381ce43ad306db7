//! What crosses the wire between an init container and the node cache: the request (a URI and
//! the caller's store settings under KServe's variable names), the answer (a ticket, the files,
//! what fetching did), and [`WireError`], the fetcher's [`Error`] in a form that survives JSON
//! so the init container ends with the same message and exit code as a direct fetch.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The variables an init container forwards to the node cache: KServe's store settings (see
/// [`crate::env`]). A key file (`GOOGLE_APPLICATION_CREDENTIALS`) is a path in the caller's file
/// system and is not among them: a caller with one fetches directly.
pub const FORWARDED: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "S3_ENDPOINT",
    "S3_USE_HTTPS",
    "S3_VERIFY_SSL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "STORAGE_EMULATOR_HOST",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_ENDPOINT",
];

/// The largest request body the node cache reads.
pub const MAX_REQUEST_BYTES: usize = 64 << 10;

/// `POST /v1/models`: a model and the caller's store settings.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The model's `storageUri`.
    pub uri: String,
    /// The caller's store settings, by variable name ([`FORWARDED`] only).
    pub env: BTreeMap<String, String>,
}

impl fmt::Debug for ModelRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The values hold credentials: only the names are shown.
        f.debug_struct("ModelRequest")
            .field("uri", &crate::uri::redact(&self.uri))
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One file of a cached model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct File {
    /// Its path under the model's folder, `/`-separated.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
}

/// The answer to `POST /v1/models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelAnswer {
    /// The entry's key: files are at `GET /v1/models/{key}/{path}`.
    pub key: String,
    /// The bearer token those reads carry; it holds the entry (never evicted) until it expires.
    pub ticket: String,
    /// The URI, as it may be shown.
    pub uri: String,
    /// Objects the store listed.
    pub objects: usize,
    /// Bytes the node cache downloaded from the store for this request (0: it had the model).
    pub downloaded: u64,
    /// Whether the model was in the cache already.
    pub cached: bool,
    /// Seconds the node cache took (listing, any wait for another download, the download).
    pub seconds: f64,
    /// The model's files.
    pub files: Vec<File>,
}

/// A fetcher [`Error`] as JSON: its kind and fields, beside its message.
// The fields are [`Error`]'s, documented there.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WireError {
    /// [`Error::Uri`].
    Uri { uri: String, message: String },
    /// [`Error::Config`].
    Config { message: String },
    /// [`Error::NotFound`].
    NotFound { uri: String, cause: String },
    /// [`Error::Denied`].
    Denied { uri: String, cause: String },
    /// [`Error::Unreachable`].
    Unreachable { uri: String, host: String },
    /// [`Error::Transfer`].
    Transfer { uri: String, cause: String },
    /// [`Error::TooLarge`].
    TooLarge { uri: String, what: String, size: u64, limit: u64 },
    /// [`Error::Archive`].
    Archive { uri: String, archive: String, cause: String },
    /// [`Error::Disk`] (of the node's disk).
    Disk { path: PathBuf, cause: String },
    /// [`Error::Timeout`].
    Timeout { what: String, seconds: u64 },
}

impl From<&Error> for WireError {
    fn from(error: &Error) -> Self {
        match error {
            Error::Uri { uri, message } => WireError::Uri { uri: uri.clone(), message: message.clone() },
            Error::Config(message) => WireError::Config { message: message.clone() },
            Error::NotFound { uri, cause } => WireError::NotFound { uri: uri.clone(), cause: cause.clone() },
            Error::Denied { uri, cause } => WireError::Denied { uri: uri.clone(), cause: cause.clone() },
            Error::Unreachable { uri, host } => WireError::Unreachable { uri: uri.clone(), host: host.clone() },
            Error::Transfer { uri, cause } => WireError::Transfer { uri: uri.clone(), cause: cause.clone() },
            Error::TooLarge { uri, what, size, limit } => {
                WireError::TooLarge { uri: uri.clone(), what: what.clone(), size: *size, limit: *limit }
            }
            Error::Archive { uri, archive, cause } => {
                WireError::Archive { uri: uri.clone(), archive: archive.clone(), cause: cause.clone() }
            }
            Error::Disk { path, source } => WireError::Disk { path: path.clone(), cause: source.to_string() },
            Error::Timeout { what, seconds } => WireError::Timeout { what: what.clone(), seconds: *seconds },
        }
    }
}

impl From<WireError> for Error {
    fn from(wire: WireError) -> Self {
        match wire {
            WireError::Uri { uri, message } => Error::Uri { uri, message },
            WireError::Config { message } => Error::Config(message),
            WireError::NotFound { uri, cause } => Error::NotFound { uri, cause },
            WireError::Denied { uri, cause } => Error::Denied { uri, cause },
            WireError::Unreachable { uri, host } => Error::Unreachable { uri, host },
            WireError::Transfer { uri, cause } => Error::Transfer { uri, cause },
            WireError::TooLarge { uri, what, size, limit } => Error::TooLarge { uri, what, size, limit },
            WireError::Archive { uri, archive, cause } => Error::Archive { uri, archive, cause },
            WireError::Disk { path, cause } => Error::Disk { path, source: std::io::Error::other(cause) },
            WireError::Timeout { what, seconds } => Error::Timeout { what, seconds },
        }
    }
}

/// An error answer's body: the message, and the fetcher's error when it is one (absent for the
/// node cache's own refusals: a bad request, an unknown ticket, an endpoint it will not reach).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, in words.
    pub error: String,
    /// The fetcher's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch: Option<WireError>,
}

/// Whether a fetcher error is the store's answer about the model (missing, refused, too large, a
/// bad archive, a bad URI or setting), which a direct fetch would get too; the others (a cut
/// transfer, a time limit, the node's disk, an address the node cache does not reach for a
/// caller) make the init container fetch directly instead, from its own network.
pub fn is_final(error: &Error) -> bool {
    !matches!(error, Error::Transfer { .. } | Error::Timeout { .. } | Error::Disk { .. } | Error::Unreachable { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<Error> {
        vec![
            Error::Uri { uri: "s3:///x".into(), message: "no bucket".into() },
            Error::Config("store settings: S3_USE_HTTPS=\"yes\": expected 0 or 1".into()),
            Error::NotFound { uri: "s3://b/m".into(), cause: "no such key".into() },
            Error::Denied { uri: "s3://b/m".into(), cause: "signature mismatch".into() },
            Error::Transfer { uri: "s3://b/m".into(), cause: "connection reset".into() },
            Error::Unreachable { uri: "https://h/m.onnx".into(), host: "127.0.0.1:9".into() },
            Error::TooLarge { uri: "s3://b/m".into(), what: "the model".into(), size: 9, limit: 4 },
            Error::Archive { uri: "https://h/m.tgz".into(), archive: "m.tgz".into(), cause: "truncated".into() },
            Error::disk("/cache/tmp/x")(std::io::Error::from_raw_os_error(28)),
            Error::Timeout { what: "the download".into(), seconds: 60 },
        ]
    }

    #[test]
    fn every_kind_keeps_its_message_and_exit_code_across_the_wire() {
        for error in every_kind() {
            let json = serde_json::to_string(&WireError::from(&error)).unwrap();
            let back: Error = serde_json::from_str::<WireError>(&json).unwrap().into();
            assert_eq!(back.to_string(), error.to_string(), "{json}");
            assert_eq!(back.exit_code(), error.exit_code(), "{json}");
            assert_eq!(is_final(&back), is_final(&error));
        }
    }

    #[test]
    fn a_request_never_shows_its_credentials() {
        let request = ModelRequest {
            uri: "https://user:pa55word@h/m.onnx?sig=s1gnature".into(),
            env: [("AWS_SECRET_ACCESS_KEY".to_owned(), "s3cr3t-value".to_owned())].into(),
        };
        let shown = format!("{request:?}");
        assert!(shown.contains("AWS_SECRET_ACCESS_KEY"), "{shown}");
        for secret in ["s3cr3t-value", "pa55word", "s1gnature"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}
