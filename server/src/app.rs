//! What both protocols share: the state every connection serves from ([`App`]), the server's
//! metadata, and the inference core ([`predict`]) that runs once a request is decoded. The REST
//! handlers ([`crate::http`]) and the gRPC service ([`crate::grpc`]) both build on this module and
//! never on each other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::admission::Admission;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::model::stats::Served;
use crate::model::{LoadedModel, Models};
use crate::tensor::Tensor;
use skiff_http::body::{BodyLimits, Reservation};
use skiff_http::logger::Logger;

/// The server's name in V2 server metadata.
pub const SERVER_NAME: &str = "skiff-server";
/// The server's version in V2 server metadata.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The protocol extensions served, in server metadata: KServe's binary tensors and Triton's
/// configuration, statistics and repository index ([`crate::triton`]).
pub const EXTENSIONS: [&str; 4] = ["binary_tensor_data", "model_configuration", "statistics", "model_repository"];
/// The platform a model's V2 metadata names.
pub const PLATFORM: &str = "onnxruntime_onnx";

/// State shared by every connection.
pub struct App {
    /// The models being served.
    pub models: Models,
    /// The container-concurrency gate.
    pub admission: Admission,
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// How request bodies are read: size limit, deadline, the process's memory budget.
    pub body: BodyLimits,
    /// The request logger, when `--logger-url` is set.
    pub logger: Option<Logger>,
    draining: AtomicBool,
}

impl App {
    /// Builds the state; not ready until every model is loaded.
    pub fn new(
        models: Models,
        admission: Admission,
        metrics: Metrics,
        body: BodyLimits,
        logger: Option<Logger>,
    ) -> App {
        App { models, admission, metrics, body, logger, draining: AtomicBool::new(false) }
    }

    /// Ready: every model loaded and not shutting down.
    pub fn ready(&self) -> bool {
        !self.draining.load(Ordering::Acquire) && self.models.all_loaded()
    }

    /// Turns readiness off for good, so load balancers stop sending new requests.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }
}

/// What every protocol does once its request is decoded: the output names and the inputs are
/// checked against the model, the budget counts the tensors instead of the body they came from
/// (`body_len` bytes, already dropped), the request waits for a concurrency slot and runs; the
/// outputs asked for come back in the order asked, and the budget counts them too. The model's
/// statistics count the request, served or failed.
pub async fn predict(
    app: &App,
    model: &LoadedModel,
    inputs: Vec<Tensor>,
    wanted: &[String],
    held: &mut Reservation,
    body_len: usize,
) -> Result<Vec<Tensor>> {
    let arrived = Instant::now();
    let spec = &model.spec;
    let run = async {
        spec.check_outputs(wanted)?;
        let inputs = spec.check_inputs(inputs)?;
        let inferences = if spec.batchable() { inputs.first().map_or(1, Tensor::rows) } else { 1 };
        held.add(inputs.iter().map(Tensor::byte_size).sum())?;
        held.release(body_len);
        let _permit = app.admission.admit().await?;
        Ok((inferences, model.executor.infer(inputs).await?))
    };
    match run.await {
        Ok((inferences, ran)) => {
            let served = Served {
                inferences: inferences as u64,
                total: arrived.elapsed(),
                queue: ran.started.saturating_duration_since(arrived),
                phases: ran.phases,
            };
            model.stats.success(&served);
            held.force(ran.outputs.iter().map(Tensor::byte_size).sum());
            Ok(select(ran.outputs, wanted))
        }
        Err(e) => {
            model.stats.failure(arrived.elapsed());
            Err(e)
        }
    }
}

/// Keeps the requested outputs, in request order; all of them when none were named.
fn select(mut outputs: Vec<Tensor>, wanted: &[String]) -> Vec<Tensor> {
    if wanted.is_empty() {
        return outputs;
    }
    let mut selected = Vec::with_capacity(wanted.len());
    for name in wanted {
        if let Some(at) = outputs.iter().position(|t| &t.name == name) {
            selected.push(outputs.swap_remove(at));
        }
    }
    selected
}
