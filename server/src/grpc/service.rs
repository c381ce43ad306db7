//! The V2 gRPC methods over the shared [`App`]: KServe's six and Triton's extensions (streamed
//! inference, configuration, statistics, repository index), with the same models, readiness,
//! admission, budgets, metrics and statistics as the REST handlers, the same inference core
//! ([`predict`]) and the same Triton messages ([`crate::triton`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures::{Stream, StreamExt};
use prost::Message as _;
use tonic::{Request, Response, Status, Streaming};

use super::HeldSlot;
use crate::app::{App, EXTENSIONS, PLATFORM, SERVER_NAME, SERVER_VERSION, predict};
use crate::codec::grpc as codec;
use crate::error::Result;
use crate::model::{MODEL_VERSION, TensorSpec};
use crate::proto::grpc_inference_service_server::GrpcInferenceService;
use crate::proto::model_metadata_response::TensorMetadata;
use crate::proto::*;
use crate::triton;
use skiff_http::HttpError;
use skiff_http::body::Reservation;

/// The responses of a `ModelStreamInfer` call.
type InferStream = Pin<Box<dyn Stream<Item = Result<ModelStreamInferResponse, Status>> + Send>>;

/// The service tonic calls.
pub(super) struct Service {
    app: Arc<App>,
}

impl Service {
    pub(super) fn new(app: Arc<App>) -> Service {
        Service { app }
    }

    async fn infer(&self, request: Request<ModelInferRequest>) -> Result<ModelInferResponse> {
        let slot = request.extensions().get::<HeldSlot>().cloned().unwrap_or_default();
        let mut held = slot.take();
        let _in_flight = self.app.metrics.in_flight();
        let response = infer_message(&self.app, request.into_inner(), &mut held).await;
        // The reservation goes back to travel with the answer, which holds the memory until sent.
        slot.put(held);
        response
    }
}

/// One inference message answered (unary or on a stream), counted in the request metrics; `held`
/// holds what the message's memory budget reserved, and the answer's size once it is made. The
/// caller counts it in flight: a unary call while it is served, a stream for its whole life.
async fn infer_message(app: &App, message: ModelInferRequest, held: &mut Reservation) -> Result<ModelInferResponse> {
    let started = Instant::now();
    let name = message.model_name.clone();
    let answer = run_message(app, message, held).await;
    let status = answer.as_ref().map_or_else(|e| e.status(), |_| http::StatusCode::OK);
    if app.models.get(&name).is_ok() {
        app.metrics.observe(&name, "grpc", status.as_u16(), started.elapsed());
    }
    answer
}

async fn run_message(app: &App, mut message: ModelInferRequest, held: &mut Reservation) -> Result<ModelInferResponse> {
    let model = app.models.get_version(&message.model_name, Some(&message.model_version))?;
    let body_len = message.encoded_len();
    let decoded = codec::decode(&mut message)?;
    let id = if message.id.is_empty() { uuid::Uuid::new_v4().to_string() } else { std::mem::take(&mut message.id) };
    drop(message);
    let outputs = predict(app, model, decoded.inputs, &decoded.wanted, held, body_len).await?;
    let output_bytes = outputs.iter().map(crate::tensor::Tensor::byte_size).sum();
    let response = codec::encode(&model.spec.name, MODEL_VERSION, id, outputs, decoded.raw);
    held.force(response.encoded_len());
    held.release(output_bytes);
    Ok(response)
}

/// The answer to one message of a stream: the inference, or its error's message (the stream
/// goes on). The message's bytes count against the memory budget while it is served.
async fn stream_message(app: &App, message: ModelInferRequest) -> ModelStreamInferResponse {
    let answer = async {
        let mut held = super::reserve(app, message.encoded_len()).await?;
        infer_message(app, message, &mut held).await
    };
    match answer.await {
        Ok(response) => ModelStreamInferResponse { error_message: String::new(), infer_response: Some(response) },
        Err(e) => ModelStreamInferResponse { error_message: e.to_string(), infer_response: None },
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

    /// False, not an error, for a model or version the server does not have, as Triton answers.
    async fn model_ready(&self, request: Request<ModelReadyRequest>) -> Result<Response<ModelReadyResponse>, Status> {
        let request = request.into_inner();
        let ready = self.app.models.get_version(&request.name, Some(&request.version)).is_ok();
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
        self.infer(request).await.map(Response::new).map_err(Status::from)
    }

    type ModelStreamInferStream = InferStream;

    /// Answers each message as it arrives, one at a time and in order: nothing is read ahead, so
    /// the stream is never buffered. A message that cannot be decoded ends the stream with its
    /// status; one over the body limit, which tonic reports as OUT_OF_RANGE, with
    /// RESOURCE_EXHAUSTED, as a unary call over it is answered (and gRPC's own servers answer).
    /// The stream counts as one request in flight for its whole life, idle or not, as Knative's
    /// queue-proxy counts it: it holds a slot of the replica's concurrency all along, so the
    /// autoscaler must see it.
    async fn model_stream_infer(
        &self,
        request: Request<Streaming<ModelInferRequest>>,
    ) -> Result<Response<InferStream>, Status> {
        let app = self.app.clone();
        let in_flight = app.metrics.in_flight();
        let answers = request.into_inner().then(move |message| {
            // The closure owns the count, so it lasts as long as the stream.
            let _stream = &in_flight;
            let app = app.clone();
            async move {
                match message {
                    Ok(message) => Ok(stream_message(&app, message).await),
                    Err(status) if status.code() == tonic::Code::OutOfRange => {
                        Err(Status::resource_exhausted(status.message()))
                    }
                    Err(status) => Err(status),
                }
            }
        });
        Ok(Response::new(Box::pin(answers)))
    }

    async fn model_config(
        &self,
        request: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        let request = request.into_inner();
        let model = self.app.models.get_version(&request.name, Some(&request.version))?;
        let config = triton::config::model_config(&model.spec, &model.serving);
        Ok(Response::new(ModelConfigResponse { config: Some(config) }))
    }

    /// Every loaded model's statistics when no name is given, else the one model's.
    async fn model_statistics(
        &self,
        request: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        let request = request.into_inner();
        let model_stats = if request.name.is_empty() {
            let loaded = self.app.models.index().into_iter().filter_map(|(name, m)| Some((name, m?)));
            loaded.map(|(name, m)| triton::statistics(name, &m.stats.snapshot())).collect()
        } else {
            let model = self.app.models.get_version(&request.name, Some(&request.version))?;
            vec![triton::statistics(&request.name, &model.stats.snapshot())]
        };
        Ok(Response::new(ModelStatisticsResponse { model_stats }))
    }

    /// Every model, or only the ready ones when `ready` is set.
    async fn repository_index(
        &self,
        request: Request<RepositoryIndexRequest>,
    ) -> Result<Response<RepositoryIndexResponse>, Status> {
        let ready_only = request.into_inner().ready;
        let models = self
            .app
            .models
            .index()
            .into_iter()
            .filter(|(_, loaded)| !ready_only || loaded.is_some())
            .map(|(name, loaded)| triton::index_entry(name, loaded))
            .collect();
        Ok(Response::new(RepositoryIndexResponse { models }))
    }

    /// Loading a model the server serves and has loaded is done already (Triton reloads an
    /// unchanged model); any other load is refused.
    async fn repository_model_load(
        &self,
        request: Request<RepositoryModelLoadRequest>,
    ) -> Result<Response<RepositoryModelLoadResponse>, Status> {
        let request = request.into_inner();
        triton::load(&self.app.models, &request.model_name, !request.parameters.is_empty())?;
        Ok(Response::new(RepositoryModelLoadResponse {}))
    }

    async fn repository_model_unload(
        &self,
        request: Request<RepositoryModelUnloadRequest>,
    ) -> Result<Response<RepositoryModelUnloadResponse>, Status> {
        Err(triton::unload(&request.into_inner().model_name).into())
    }
}
