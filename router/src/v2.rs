//! The Open Inference Protocol's server-level endpoints, answered by the router itself when the
//! request's Host (or `:authority`) names no service: `GET /v2/health/live`, `GET
//! /v2/health/ready` and `GET /v2` over REST, `ServerLive`, `ServerReady` and `ServerMetadata`
//! over gRPC. Pure: what to answer, as JSON or as a protobuf message; the proxy writes it.
//!
//! **Live**: the router answers at all. **Ready**: the router is not draining, and a request for
//! any service it routes would be served now: every component that takes traffic (predictor,
//! and the transformer and explainer when the service has them) has a revision with weight, and
//! each revision with weight has a ready replica or, at zero, a ready activator to hold the request
//! while it scales up (as KServe counts a service scaled to zero Ready). With no service, it is
//! ready. **Metadata**: the router's name and version, and no protocol extension: each service
//! behind it declares its own in its own `/v2`.

use skiff_api::traffic::TrafficTarget;
use skiff_dataplane::RevisionKey;

use crate::table::{RouteTable, ServiceRoute};

/// The name in the router's server metadata.
pub const NAME: &str = "skiff-router";
/// The version in the router's server metadata.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A server-level request the router answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Liveness.
    Live,
    /// Readiness.
    Ready,
    /// Server metadata.
    Metadata,
}

/// The server-level REST endpoint `method path` asks for, if it is one (the query is ignored).
pub fn rest(method: &http::Method, path: &str) -> Option<Ask> {
    if method != http::Method::GET {
        return None;
    }
    match path.split('?').next().unwrap_or_default() {
        "/v2/health/live" => Some(Ask::Live),
        "/v2/health/ready" => Some(Ask::Ready),
        "/v2" => Some(Ask::Metadata),
        _ => None,
    }
}

/// Why the router is not ready: one line per service (or the drain) that is not.
pub fn not_ready(
    table: &RouteTable,
    draining: bool,
    activator_ready: bool,
    has_ready_replica: impl Fn(&RevisionKey) -> bool,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if draining {
        reasons.push("the router is draining: shutting down".to_owned());
    }
    let mut services: Vec<_> = table.services().collect();
    services.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    for service in services {
        for (component, targets) in components(service) {
            let weighted: Vec<&TrafficTarget> = targets.iter().filter(|t| t.percent > 0).collect();
            if weighted.is_empty() {
                reasons.push(format!("{}: its {component} has no revision taking traffic", service.key()));
            }
            for target in weighted {
                let key = RevisionKey::new(service.namespace.as_str(), target.revision_name.as_str());
                if !activator_ready && !has_ready_replica(&key) {
                    reasons.push(format!(
                        "{}: revision {} has no ready replica and no activator is ready",
                        service.key(),
                        target.revision_name
                    ));
                }
            }
        }
    }
    reasons
}

/// The components of `service` that take traffic, with their splits.
fn components(service: &ServiceRoute) -> impl Iterator<Item = (&'static str, &[TrafficTarget])> {
    [
        ("predictor", service.targets.as_slice(), true),
        ("transformer", service.transformer.as_slice(), false),
        ("explainer", service.explainer.as_slice(), false),
    ]
    .into_iter()
    .filter(|(_, targets, always)| *always || !targets.is_empty())
    .map(|(component, targets, _)| (component, targets))
}

/// The JSON body answering `ask` over REST, with its status (503 when not ready, with the reasons).
pub fn json(ask: Ask, not_ready: &[String]) -> (u16, serde_json::Value) {
    match ask {
        Ask::Live => (200, serde_json::json!({ "live": true })),
        Ask::Ready if not_ready.is_empty() => (200, serde_json::json!({ "ready": true })),
        Ask::Ready => (503, serde_json::json!({ "error": format!("not ready: {}", not_ready.join("; ")) })),
        Ask::Metadata => (200, serde_json::json!({ "name": NAME, "version": VERSION, "extensions": [] })),
    }
}

/// The protobuf response message answering `ask` over gRPC (`ServerLiveResponse { bool live = 1 }`,
/// `ServerReadyResponse { bool ready = 1 }`, `ServerMetadataResponse { string name = 1; string
/// version = 2; repeated string extensions = 3 }`), without gRPC's prefix.
pub fn protobuf(ask: Ask, not_ready: &[String]) -> Vec<u8> {
    let mut message = Vec::new();
    match ask {
        Ask::Live => message.extend_from_slice(&[0x08, 0x01]),
        // A false bool is the default, which protobuf leaves out.
        Ask::Ready if not_ready.is_empty() => message.extend_from_slice(&[0x08, 0x01]),
        Ask::Ready => {}
        Ask::Metadata => {
            string_field(&mut message, 1, NAME);
            string_field(&mut message, 2, VERSION);
        }
    }
    message
}

/// `message` framed as one gRPC message: flag 0 (not compressed), big-endian length, bytes.
pub fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let length = u32::try_from(message.len()).expect("a server-level message is small");
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(message);
    frame
}

/// Appends protobuf string field `number` holding `value`.
fn string_field(message: &mut Vec<u8>, number: u8, value: &str) {
    debug_assert!(number < 16, "one-byte tags only");
    message.push((number << 3) | 2);
    let mut len = value.len();
    while len >= 0x80 {
        message.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    message.push(len as u8);
    message.extend_from_slice(value.as_bytes());
}

#[cfg(test)]
mod tests;
