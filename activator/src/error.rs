//! The crate's one error type, and the HTTP status and gRPC status each error maps to (the mapping
//! to a response lives in [`crate::response::error`]).

use std::net::SocketAddr;
use std::time::Duration;

use http::StatusCode;
use skiff_http::grpc::Code;

/// Everything that can go wrong in the activator or the queue-proxy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request names no revision (400).
    #[error("the request has no {header} header", header = crate::REVISION_HEADER)]
    MissingRevision,
    /// The request is malformed (400).
    #[error("{0}")]
    BadRequest(String),
    /// No revision of this name is registered (404).
    #[error("unknown revision '{0}'")]
    UnknownRevision(String),
    /// The request body is too large (413), too slow (408), over a byte budget (503) or broken (400).
    #[error(transparent)]
    Body(#[from] skiff_http::body::BodyError),
    /// Too many requests are already held; answered with `Retry-After` (503).
    #[error("{0}")]
    Overloaded(String),
    /// Not ready for traffic: the upstream is not ready, or the process is draining (503).
    #[error("not ready: {0}")]
    NotReady(String),
    /// No replica of the revision became ready while the request was held (504): for its progress
    /// deadline when it has one, else for its timeout.
    #[error("revision {revision} had no ready replica within {}", held(*timeout, *progress_deadline))]
    NoReadyReplica {
        /// The revision.
        revision: String,
        /// How long the request was held.
        timeout: Duration,
        /// Whether that was the revision's progress deadline (else its timeout).
        progress_deadline: bool,
    },
    /// The revision fails for a cause a retry will not fix ([`skiff_dataplane::failing`]): its
    /// requests are answered at once rather than held (503).
    #[error("revision {revision} cannot start a replica: {reason}: {message}; fix the InferenceService or its model")]
    Failing {
        /// The revision.
        revision: String,
        /// Its status's reason (`ModelLoadFailed`).
        reason: String,
        /// Its status's message.
        message: String,
    },
    /// Replicas were ready but none had a free slot before the deadline (504).
    #[error("{target} had no free slot within {}", secs(*timeout))]
    NoCapacity {
        /// What was waited for: `revision R` or `upstream A`.
        target: String,
        /// The timeout.
        timeout: Duration,
    },
    /// Every replica tried refused the connection until the deadline (504).
    #[error("{target}: no replica accepted a connection within {}: {last}", secs(*timeout))]
    Unreachable {
        /// What was waited for: `revision R` or `upstream A`.
        target: String,
        /// The timeout.
        timeout: Duration,
        /// The last connection error.
        last: String,
    },
    /// The replica did not answer before the deadline (504).
    #[error("{target} did not answer within {}", secs(*timeout))]
    UpstreamTimeout {
        /// What was asked: `revision R` or `upstream A`.
        target: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The connection to a replica failed before the request was sent; safe to retry elsewhere (502).
    #[error("cannot connect to replica {addr}: {reason}")]
    Connect {
        /// The replica.
        addr: SocketAddr,
        /// What failed.
        reason: String,
    },
    /// The replica failed after the request was sent; never retried (502).
    #[error("replica {addr} failed: {reason}")]
    Upstream {
        /// The replica.
        addr: SocketAddr,
        /// What failed.
        reason: String,
    },
    /// The command line or a revision's settings are invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Socket I/O failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl skiff_http::HttpError for Error {
    fn status(&self) -> StatusCode {
        match self {
            Error::MissingRevision | Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::UnknownRevision(_) => StatusCode::NOT_FOUND,
            Error::Body(e) => e.status(),
            Error::Overloaded(_) | Error::NotReady(_) | Error::Failing { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::NoReadyReplica { .. }
            | Error::NoCapacity { .. }
            | Error::Unreachable { .. }
            | Error::UpstreamTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            Error::Connect { .. } | Error::Upstream { .. } => StatusCode::BAD_GATEWAY,
            Error::Config(_) | Error::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn retry_after(&self) -> bool {
        match self {
            Error::Overloaded(_) => true,
            Error::Body(e) => e.retry_after(),
            _ => false,
        }
    }
}

impl Error {
    /// The gRPC status a gRPC call hears: UNAVAILABLE when it may succeed later (held too long,
    /// nothing ready or reachable), RESOURCE_EXHAUSTED when too much is held already or the body is
    /// too large, DEADLINE_EXCEEDED when an answer or the body did not arrive in time.
    pub fn grpc_code(&self) -> Code {
        use skiff_http::body::BodyError;
        match self {
            Error::MissingRevision | Error::Config(_) | Error::Io(_) => Code::Internal,
            Error::BadRequest(_) | Error::Body(BodyError::Read(_)) => Code::InvalidArgument,
            Error::UnknownRevision(_) => Code::NotFound,
            Error::Overloaded(_) | Error::Body(BodyError::TooLarge { .. } | BodyError::OverBudget { .. }) => {
                Code::ResourceExhausted
            }
            Error::UpstreamTimeout { .. } | Error::Body(BodyError::Timeout { .. }) => Code::DeadlineExceeded,
            Error::NotReady(_)
            | Error::Failing { .. }
            | Error::NoReadyReplica { .. }
            | Error::NoCapacity { .. }
            | Error::Unreachable { .. }
            | Error::Connect { .. }
            | Error::Upstream { .. } => Code::Unavailable,
        }
    }
}

/// `300s` for whole seconds, `250ms` otherwise.
pub(crate) fn secs(d: Duration) -> String {
    if d.subsec_nanos() == 0 { format!("{}s", d.as_secs()) } else { format!("{}ms", d.as_millis()) }
}

/// How long a request was held for a replica, and by which setting.
fn held(timeout: Duration, progress_deadline: bool) -> String {
    if progress_deadline {
        format!("{}, its progress deadline (serving.knative.dev/progress-deadline)", secs(timeout))
    } else {
        format!(
            "{}, its timeout (serving.knative.dev/progress-deadline holds requests longer while replicas start)",
            secs(timeout)
        )
    }
}

/// An error and its sources on one line, `outer: inner: root`.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use skiff_http::HttpError;
    use skiff_http::body::BodyError;

    use super::*;

    #[test]
    fn timeouts_read_in_whole_seconds_or_milliseconds() {
        let e = Error::NoReadyReplica {
            revision: "iris-predictor-00001".into(),
            timeout: Duration::from_secs(300),
            progress_deadline: false,
        };
        assert_eq!(
            e.to_string(),
            "revision iris-predictor-00001 had no ready replica within 300s, its timeout \
             (serving.knative.dev/progress-deadline holds requests longer while replicas start)"
        );
        let e = Error::NoReadyReplica {
            revision: "llm-predictor-00001".into(),
            timeout: Duration::from_secs(900),
            progress_deadline: true,
        };
        assert_eq!(
            e.to_string(),
            "revision llm-predictor-00001 had no ready replica within 900s, its progress deadline \
             (serving.knative.dev/progress-deadline)"
        );
        assert_eq!(e.status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(secs(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn each_error_has_its_status() {
        assert_eq!(Error::UnknownRevision("r".into()).status(), StatusCode::NOT_FOUND);
        assert_eq!(Error::Overloaded("full".into()).status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(Error::from(BodyError::TooLarge { limit: 1 }).status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(Error::MissingRevision.to_string(), "the request has no x-skiff-revision header");
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        assert_eq!(Error::Upstream { addr, reason: "reset".into() }.status(), StatusCode::BAD_GATEWAY);
    }
}
