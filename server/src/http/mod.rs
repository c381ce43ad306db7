//! The REST shell: the URL space ([`route`]) and the handlers ([`handle`]) over the shared state
//! and inference core of [`crate::app`]. The listener that sends each request here or to the gRPC
//! service is [`crate::serve`]; the accept loop and drain are `skiff-http`'s.

mod handlers;
mod routes;

pub use handlers::handle;
pub use routes::{ModelRef, Route, route};
