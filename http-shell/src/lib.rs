//! Skiff's HTTP shell, shared by `skiff-server` and `skiff-activator`: [`serve`] runs the accept
//! loop (HTTP/1.1 and h2c) and drains in-flight requests on shutdown; [`response`] builds JSON
//! answers and turns any [`HttpError`] into `{"error": "..."}` with its status; [`admin`] answers
//! the admin port's health, readiness and metrics.

pub mod admin;
pub mod response;
mod serve;

pub use response::HttpError;
pub use serve::serve;
