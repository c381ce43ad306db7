//! Models: discovery on disk, loading into ONNX Runtime, and the registry handlers read from.

mod batch;
pub mod check;
mod executor;
mod inline;
mod onnx;
mod repository;
mod spec;
pub mod stats;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub use executor::{BatchConfig, Executor, Ran};
pub use repository::{MODEL_FILE, ModelSource, discover};
pub use spec::{ModelSpec, TensorSpec};

use crate::error::{Error, Result};
use crate::metrics::Metrics;

/// The one version each model has. KServe's paths and gRPC messages may name a version; this
/// one, or none, is accepted, and any other is a 404.
pub const MODEL_VERSION: &str = "1";

/// The models under `dir` ([`discover`]), each file checked ([`check::check_file`]): what a
/// server started on `dir` would refuse before ONNX Runtime reads anything.
pub fn preflight(dir: &std::path::Path, name: Option<&str>) -> Result<Vec<ModelSource>> {
    let sources = discover(dir, name)?;
    for source in &sources {
        check::check_file(&source.path).map_err(|reason| Error::ModelLoad {
            name: source.name.clone(),
            path: source.path.display().to_string(),
            reason,
        })?;
    }
    Ok(sources)
}

/// How models are loaded and run.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Inference threads (one session each) per model.
    pub workers: usize,
    /// ONNX Runtime intra-op threads per session.
    pub intra_threads: usize,
    /// Dynamic batching; `None` runs every request alone.
    pub batching: Option<BatchConfig>,
    /// Jobs that may wait for an inference thread, per model.
    pub queue: usize,
    /// The batch size a model that batches advertises (Triton's `max_batch_size`): the batcher's
    /// when it is on, and the same flag's value when it is off (the server then takes any size).
    pub max_batch_size: usize,
}

/// How a loaded model is served: what its Triton configuration describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Serving {
    /// Inference threads, each with its own session.
    pub instances: usize,
    /// The batch size advertised when the model batches.
    pub max_batch_size: usize,
    /// Dynamic batching, when it is on for this model.
    pub batching: Option<BatchConfig>,
}

/// A model that is loaded and can serve.
pub struct LoadedModel {
    /// Its signature.
    pub spec: Arc<ModelSpec>,
    /// Its inference threads.
    pub executor: Executor,
    /// How it is served.
    pub serving: Serving,
    /// Its statistics.
    pub stats: Arc<stats::Stats>,
}

/// Every model the server was started with; each becomes loaded once.
pub struct Models {
    slots: HashMap<String, (ModelSource, OnceLock<LoadedModel>)>,
}

impl Models {
    /// A registry of models that are not loaded yet.
    pub fn new(sources: Vec<ModelSource>) -> Models {
        Models { slots: sources.into_iter().map(|s| (s.name.clone(), (s, OnceLock::new()))).collect() }
    }

    /// The loaded model, 404 when unknown, 503 while it loads.
    pub fn get(&self, name: &str) -> Result<&LoadedModel> {
        let (_, loaded) = self.slots.get(name).ok_or_else(|| Error::ModelNotFound(name.to_owned()))?;
        loaded.get().ok_or_else(|| Error::ModelNotReady(name.to_owned()))
    }

    /// The loaded model at `version` (none: the one it has); 404 for an unknown model or version.
    pub fn get_version(&self, name: &str, version: Option<&str>) -> Result<&LoadedModel> {
        match version {
            Some(v) if !v.is_empty() && v != MODEL_VERSION => {
                self.slots.get(name).ok_or_else(|| Error::ModelNotFound(name.to_owned()))?;
                Err(Error::VersionNotFound { model: name.to_owned(), version: v.to_owned(), has: MODEL_VERSION })
            }
            _ => self.get(name),
        }
    }

    /// Model names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.slots.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// Every model's name and, once it is loaded, the model, sorted by name.
    pub fn index(&self) -> Vec<(&str, Option<&LoadedModel>)> {
        self.names().into_iter().map(|name| (name, self.slots[name].1.get())).collect()
    }

    /// True once every model is loaded.
    pub fn all_loaded(&self) -> bool {
        self.slots.values().all(|(_, loaded)| loaded.get().is_some())
    }

    /// Loads every model, one after the other; blocks, so call it off the async runtime.
    pub fn load_all(
        &self,
        env: &ort::environment::Environment,
        options: &LoadOptions,
        metrics: &Metrics,
    ) -> Result<()> {
        for (source, slot) in self.slots.values() {
            let started = std::time::Instant::now();
            let model = load(env, source, options, metrics)?;
            tracing::info!(
                model = %source.name,
                path = %source.path.display(),
                inputs = ?model.spec.inputs,
                outputs = ?model.spec.outputs,
                millis = started.elapsed().as_millis() as u64,
                "model loaded"
            );
            let _ = slot.set(model);
        }
        Ok(())
    }
}

fn load(
    env: &ort::environment::Environment,
    source: &ModelSource,
    options: &LoadOptions,
    metrics: &Metrics,
) -> Result<LoadedModel> {
    let fail = |reason: String| Error::ModelLoad {
        name: source.name.clone(),
        path: source.path.display().to_string(),
        reason,
    };
    check::check_file(&source.path).map_err(fail)?;
    let sessions = (0..options.workers.max(1))
        .map(|_| onnx::load_session(env, &source.path, options.intra_threads))
        .collect::<ort::Result<Vec<_>>>()
        .map_err(|e| fail(e.to_string()))?;
    let spec = Arc::new(onnx::spec_of(&source.name, &sessions[0]).map_err(fail)?);
    let batching = options.batching.filter(|_| {
        let ok = spec.batchable();
        if !ok {
            tracing::warn!(model = %spec.name, "batching off: an input or output has a fixed first dimension");
        }
        ok
    });
    let stats = Arc::new(stats::Stats::default());
    let serving = Serving { instances: sessions.len(), max_batch_size: options.max_batch_size, batching };
    let executor = Executor::start(
        spec.clone(),
        stats.clone(),
        sessions,
        batching,
        options.queue,
        metrics.batch_sizes(&spec.name),
    )?;
    Ok(LoadedModel { spec, executor, serving, stats })
}
