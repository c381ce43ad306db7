//! Skiff's HTTP shell, shared by `skiff-server` and `skiff-activator`: [`serve`] runs the accept
//! loop (HTTP/1.1 and h2c) under [`ServeLimits`] (connections, HTTP/2 streams, header and idle
//! timeouts) and drains in-flight requests on shutdown; [`body`] reads a request body under a size
//! limit, a deadline and memory budgets; [`response`] builds JSON
//! answers and turns any [`HttpError`] into `{"error": "..."}` with its status; [`grpc`] holds the
//! gRPC status trailers proxies answer gRPC calls with; [`admin`] answers the admin port's health,
//! readiness and metrics; [`logger`] sends inference requests and responses to a CloudEvents sink;
//! [`args`] holds the command-line groups both binaries flatten (admission, batching, drain);
//! [`telemetry`] installs the structured logs every Skiff binary writes.

pub mod admin;
pub mod args;
pub mod body;
pub mod grpc;
mod limits;
pub mod logger;
pub mod response;
mod serve;
pub mod telemetry;

pub use limits::{MAX_CONCURRENCY, MAX_SECS, ServeLimits, check_concurrency, check_secs};
pub use response::HttpError;
pub use serve::serve;
