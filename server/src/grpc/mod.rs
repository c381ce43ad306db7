//! KServe's V2 gRPC service (`inference.GRPCInferenceService`), served on the HTTP port: a
//! request whose content type is `application/grpc` (HTTP/2, prior knowledge or not) goes to
//! tonic's generated server instead of the REST routes. One port keeps the data plane simple: the
//! router, the activator and the queue-proxy reach a replica at one address whichever protocol a
//! client speaks. The body is read under the same limits, deadline and memory budget as a REST
//! body, and errors map from the same [`crate::Error`]s.

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

/// Answers one gRPC call; never fails (errors become gRPC statuses).
pub async fn handle(app: Arc<App>, request: Request<Incoming>) -> GrpcResponse {
    let (parts, body) = request.into_parts();
    let (body, held) = match read_body(&parts.headers, body, &app.body).await {
        Ok(read) => read,
        Err(e) => return tonic::Status::from(Error::Body(e)).into_http::<tonic::body::Body>().map(Held::from),
    };
    let slot = HeldSlot(Arc::new(Mutex::new(Some(held))));
    let mut request = Request::from_parts(parts, Full::<Bytes>::new(body));
    request.extensions_mut().insert(slot.clone());
    let max = app.body.max_bytes;
    let mut server = GrpcInferenceServiceServer::new(Service::new(app))
        .max_decoding_message_size(max)
        .max_encoding_message_size(usize::MAX);
    let response = match server.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    response.map(|body| Held::new(body, slot.take()))
}
