//! The crate's error type, and the one place errors become HTTP answers.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::json;

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Auth is on and the request carries no user.
    #[error("no user: the {0} header is missing")]
    Unauthenticated(String),
    /// Auth is on and the request did not come through the configured front proxy (or none is
    /// configured): its user header is not believed.
    #[error("untrusted request: {0}")]
    UntrustedProxy(String),
    /// The request's `Host` is not one the app answers to (DNS rebinding).
    #[error("misdirected request: {0}")]
    MisdirectedHost(String),
    /// A mutating request from a page of another origin.
    #[error("cross-origin request refused: {0}")]
    CrossSite(String),
    /// The user may not do this, or the namespace is not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// A mutating request without the session cookie and the CSRF token issued for it.
    #[error("CSRF check failed: {0}")]
    Csrf(&'static str),
    /// The request is malformed: names the field.
    #[error("{0}")]
    BadRequest(String),
    /// No such object.
    #[error("{0} not found")]
    NotFound(String),
    /// The API server (or `skiff up`) refused the request: its status and message, shown as they are.
    #[error("{message}")]
    Refused {
        /// The status the API server answered with.
        status: u16,
        /// Its message (validation refusals name the field).
        message: String,
    },
    /// A dependency (API server, Prometheus) cannot be reached or answered nonsense.
    #[error("{0}")]
    Unavailable(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::Unauthenticated(_) | Error::UntrustedProxy(_) => StatusCode::UNAUTHORIZED,
            Error::MisdirectedHost(_) => StatusCode::MISDIRECTED_REQUEST,
            Error::Forbidden(_) | Error::Csrf(_) | Error::CrossSite(_) => StatusCode::FORBIDDEN,
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Refused { status, .. } => StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY),
            Error::Unavailable(_) => StatusCode::BAD_GATEWAY,
        }
    }
}

impl From<kube::Error> for Error {
    fn from(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => Error::Refused { status: status.code, message: status.message },
            other => Error::Unavailable(format!("the Kubernetes API: {other}")),
        }
    }
}

/// An error on a page load: the same status, shown as a page of the app (the guard renders it
/// with the app's frame, [`crate::pages::layout::error_page`]) rather than as JSON.
#[derive(Debug)]
pub struct PageError(pub Error);

/// What a failed page load carries to the guard, which renders it.
#[derive(Debug, Clone)]
pub struct PageFailure(pub String);

impl From<Error> for PageError {
    fn from(error: Error) -> Self {
        PageError(error)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        if status.is_server_error() {
            tracing::warn!(error = %self.0, "page failed");
        }
        let mut response = status.into_response();
        response.extensions_mut().insert(PageFailure(self.0.to_string()));
        response
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, "request failed");
        }
        (status, Json(json!({ "status": status.as_u16(), "error": self.to_string() }))).into_response()
    }
}
