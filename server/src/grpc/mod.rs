//! KServe's V2 gRPC service with Triton's extensions (`inference.GRPCInferenceService`), served
//! on the HTTP port: a request whose content type is `application/grpc` (HTTP/2, prior knowledge
//! or not) goes to tonic's generated server instead of the REST routes. One port keeps the data
//! plane simple: the router, the activator and the queue-proxy reach a replica at one address
//! whichever protocol a client speaks. A unary call's body is read under the same limits,
//! deadline and memory budget as a REST body; a stream's messages are served as they arrive, each
//! bounded by the body limit and counted against the memory budget while served; a method the
//! service lacks is refused from its headers. Errors map from the same [`crate::Error`]s.

mod service;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use tonic::codegen::Service as _;

use crate::app::App;
use crate::error::Error;
use crate::proto::grpc_inference_service_server::GrpcInferenceServiceServer;
use service::Service;
use skiff_http::body::{Held, Reservation, read_body};

/// A gRPC answer, holding its request's memory budget until it is sent.
pub type GrpcResponse = Response<Held<tonic::body::Body, Reservation>>;

/// The request's budget reservation, handed to the service through the request's extensions and
/// taken back to travel with the answer.
#[derive(Clone, Default)]
struct HeldSlot(Arc<Mutex<Option<Reservation>>>);

impl HeldSlot {
    fn take(&self) -> Reservation {
        self.0.lock().expect("never poisoned").take().unwrap_or_default()
    }

    fn put(&self, held: Reservation) {
        *self.0.lock().expect("never poisoned") = Some(held);
    }
}

/// How a gRPC method is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One message in: read whole under the body limits, then answered.
    Unary,
    /// A stream of messages in: each is served as it arrives.
    Streaming,
}

/// The method a gRPC path names, from the service's descriptors; `None` when the server does not
/// serve it.
pub fn method_kind(path: &str) -> Option<Kind> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    let service = crate::proto::pool().get_service_by_name(service)?;
    let method = service.methods().find(|m| m.name() == method)?;
    Some(if method.is_client_streaming() { Kind::Streaming } else { Kind::Unary })
}

/// Answers one gRPC call; never fails (errors become gRPC statuses). A method the server does not
/// serve is refused from its headers, without reading its body; a streaming method gets its body
/// as it arrives; a unary one's body is read whole under the same limits, deadline and memory
/// budget as a REST body.
pub async fn handle(app: Arc<App>, request: Request<Incoming>) -> GrpcResponse {
    let max = app.body.max_bytes;
    let server = |app| {
        GrpcInferenceServiceServer::new(Service::new(app))
            .max_decoding_message_size(max)
            .max_encoding_message_size(usize::MAX)
    };
    match method_kind(request.uri().path()) {
        None => {
            let status = tonic::Status::unimplemented(format!(
                "skiff-server does not serve the gRPC method {} (it serves {SERVICE}: {})",
                request.uri().path(),
                methods().join(", ")
            ));
            status.into_http::<tonic::body::Body>().map(Held::from)
        }
        Some(Kind::Streaming) => match server(app).call(request).await {
            Ok(response) => response.map(Held::from),
            Err(never) => match never {},
        },
        Some(Kind::Unary) => {
            let (parts, body) = request.into_parts();
            let (body, held) = match read_body(&parts.headers, body, &app.body).await {
                Ok(read) => read,
                Err(e) => return tonic::Status::from(Error::Body(e)).into_http::<tonic::body::Body>().map(Held::from),
            };
            let slot = HeldSlot(Arc::new(Mutex::new(Some(held))));
            let mut request = Request::from_parts(parts, Full::<Bytes>::new(body));
            request.extensions_mut().insert(slot.clone());
            let response = match server(app).call(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            response.map(|body| Held::new(body, slot.take()))
        }
    }
}

/// The service served.
const SERVICE: &str = "inference.GRPCInferenceService";

/// The service's methods, by name.
fn methods() -> Vec<String> {
    let service = crate::proto::pool().get_service_by_name(SERVICE).expect("the service is in the descriptors");
    service.methods().map(|m| m.name().to_owned()).collect()
}

/// `bytes` of a message already received, counted against the server's memory budget (503 /
/// RESOURCE_EXHAUSTED past it) until the reservation drops: how a streamed message is held.
async fn reserve(app: &App, bytes: usize) -> crate::Result<Reservation> {
    let (_, mut held) = read_body(&http::HeaderMap::new(), http_body_util::Empty::<Bytes>::new(), &app.body).await?;
    held.add(bytes)?;
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_known_by_the_service_descriptor() {
        assert_eq!(method_kind("/inference.GRPCInferenceService/ModelInfer"), Some(Kind::Unary));
        assert_eq!(method_kind("/inference.GRPCInferenceService/ModelConfig"), Some(Kind::Unary));
        assert_eq!(method_kind("/inference.GRPCInferenceService/ModelStreamInfer"), Some(Kind::Streaming));
        for unknown in [
            "/inference.GRPCInferenceService/SystemSharedMemoryStatus",
            "/inference.Other/ModelInfer",
            "/grpc.health.v1.Health/Check",
            "/inference.GRPCInferenceService",
            "",
        ] {
            assert_eq!(method_kind(unknown), None, "{unknown}");
        }
        assert_eq!(methods().len(), 12);
    }
}
