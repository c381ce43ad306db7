//! The six V2 gRPC methods over the shared [`App`]: the same models, readiness, admission,
//! budgets and metrics as the REST handlers, and the same inference core ([`predict`]), both from
//! [`crate::app`].

use std::sync::Arc;
use std::time::Instant;

use prost::Message as _;
use tonic::{Request, Response, Status};

use super::HeldSlot;
use crate::app::{App, EXTENSIONS, PLATFORM, SERVER_NAME, SERVER_VERSION, predict};
use crate::codec::grpc as codec;
use crate::error::{Error, Result};
use crate::model::{MODEL_VERSION, TensorSpec};
use crate::proto::grpc_inference_service_server::GrpcInferenceService;
use crate::proto::model_metadata_response::TensorMetadata;
use crate::proto::*;
use skiff_http::HttpError;

/// The service tonic calls.
pub(super) struct Service {
    app: Arc<App>,
}

impl Service {
    pub(super) fn new(app: Arc<App>) -> Service {
        Service { app }
    }

    async fn infer(&self, request: Request<ModelInferRequest>) -> Result<ModelInferResponse> {
        let app = &self.app;
        let slot = request.extensions().get::<HeldSlot>().cloned().unwrap_or_default();
        let mut message = request.into_inner();
        let model = app.models.get_version(&message.model_name, Some(&message.model_version))?;
        let body_len = message.encoded_len();
        let decoded = codec::decode(&mut message)?;
        let id = if message.id.is_empty() { uuid::Uuid::new_v4().to_string() } else { std::mem::take(&mut message.id) };
        drop(message);
        let mut held = slot.take();
        let predicted = predict(app, model, decoded.inputs, &decoded.wanted, &mut held, body_len).await;
        let response = predicted.map(|outputs| {
            let output_bytes = outputs.iter().map(crate::tensor::Tensor::byte_size).sum();
            let response = codec::encode(&model.spec.name, MODEL_VERSION, id, outputs, decoded.raw);
            held.force(response.encoded_len());
            held.release(output_bytes);
            response
        });
        // The reservation goes back to travel with the answer, which holds the memory until sent.
        slot.put(held);
        response
    }
}

fn metadata(specs: &[TensorSpec]) -> Vec<TensorMetadata> {
    specs
        .iter()
        .map(|t| TensorMetadata {
            name: t.name.clone(),
            datatype: t.datatype.as_str().to_owned(),
            shape: t.shape.clone(),
        })
        .collect()
}

#[tonic::async_trait]
impl GrpcInferenceService for Service {
    async fn server_live(&self, _: Request<ServerLiveRequest>) -> Result<Response<ServerLiveResponse>, Status> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }

    async fn server_ready(&self, _: Request<ServerReadyRequest>) -> Result<Response<ServerReadyResponse>, Status> {
        Ok(Response::new(ServerReadyResponse { ready: self.app.ready() }))
    }

    async fn model_ready(&self, request: Request<ModelReadyRequest>) -> Result<Response<ModelReadyResponse>, Status> {
        let request = request.into_inner();
        let ready = match self.app.models.get_version(&request.name, Some(&request.version)) {
            Ok(_) => true,
            Err(Error::ModelNotReady(_)) => false,
            Err(e) => return Err(e.into()),
        };
        Ok(Response::new(ModelReadyResponse { ready }))
    }

    async fn server_metadata(
        &self,
        _: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        Ok(Response::new(ServerMetadataResponse {
            name: SERVER_NAME.to_owned(),
            version: SERVER_VERSION.to_owned(),
            extensions: EXTENSIONS.map(str::to_owned).to_vec(),
        }))
    }

    async fn model_metadata(
        &self,
        request: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        let request = request.into_inner();
        let spec = &self.app.models.get_version(&request.name, Some(&request.version))?.spec;
        Ok(Response::new(ModelMetadataResponse {
            name: spec.name.clone(),
            versions: vec![MODEL_VERSION.to_owned()],
            platform: PLATFORM.to_owned(),
            inputs: metadata(&spec.inputs),
            outputs: metadata(&spec.outputs),
        }))
    }

    async fn model_infer(&self, request: Request<ModelInferRequest>) -> Result<Response<ModelInferResponse>, Status> {
        let started = Instant::now();
        let _in_flight = self.app.metrics.in_flight();
        let name = request.get_ref().model_name.clone();
        let answer = self.infer(request).await;
        let status = answer.as_ref().map_or_else(|e| e.status(), |_| http::StatusCode::OK);
        if self.app.models.get(&name).is_ok() {
            self.app.metrics.observe(&name, "grpc", status.as_u16(), started.elapsed());
        }
        answer.map(Response::new).map_err(Status::from)
    }
}
