//! Models: discovery on disk, loading into ONNX Runtime, and the registry handlers read from.

mod batch;
pub mod check;
pub mod compiled;
mod executor;
mod inline;
mod onnx;
mod repository;
mod spec;
pub mod stats;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use ort::session::builder::PrepackedWeights;

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
    /// Prepacked weights (ONNX Runtime's `session.disable_prepacking` off), shared by the
    /// model's sessions.
    pub prepacking: bool,
    /// The cached forms of models ([`compiled`]); `None`: off.
    pub compiled: Option<compiled::CompiledCache>,
}

/// Where a model's sessions were loaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadedFrom {
    /// Its ONNX file, no cached form asked for.
    Onnx,
    /// Its ONNX file, the cached form missing or refused (the reason); it is written next.
    OnnxThenCache(String),
    /// Its cached form.
    Cached,
}

/// A model whose cached form was written by its first session, to be finished (flushed,
/// checked, renamed into place) once the server is ready.
#[derive(Debug)]
pub struct PendingCache {
    /// The model's name.
    pub name: String,
    /// The entry.
    pub entry: compiled::Pending,
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
    /// Where its sessions were loaded from.
    pub from: LoadedFrom,
    /// Its cached form, written as it loaded, to be finished.
    pending: Option<compiled::Pending>,
    /// The weights its sessions prepacked (kept while they live).
    _prepacked: Option<PrepackedWeights>,
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

    /// Loads every model, one after the other; blocks, so call it off the async runtime. Returns
    /// the models whose cached form is to be written ([`write_cached_forms`]).
    pub fn load_all(
        &self,
        env: &ort::environment::Environment,
        options: &LoadOptions,
        metrics: &Metrics,
    ) -> Result<Vec<PendingCache>> {
        let mut pending = Vec::new();
        for (source, slot) in self.slots.values() {
            let started = std::time::Instant::now();
            let mut model = load(env, source, options, metrics)?;
            tracing::info!(
                model = %source.name,
                path = %source.path.display(),
                inputs = ?model.spec.inputs,
                outputs = ?model.spec.outputs,
                from = ?model.from,
                millis = started.elapsed().as_millis() as u64,
                "model loaded"
            );
            if let Some(entry) = model.pending.take() {
                pending.push(PendingCache { name: source.name.clone(), entry });
            }
            let _ = slot.set(model);
        }
        Ok(pending)
    }
}

/// Finishes the cached form of each of `pending` ([`compiled::CompiledCache::finish`]: flushed,
/// checked and renamed into place), one after the other; blocks. A failure is logged: the model
/// serves on from its ONNX file and the next start writes it again.
pub fn finish_cached_forms(options: &LoadOptions, pending: Vec<PendingCache>) {
    let Some(cache) = &options.compiled else { return };
    for model in pending {
        match cache.finish(model.entry) {
            Ok(meta) => tracing::info!(
                model = %model.name,
                dir = %cache.dir().display(),
                bytes = meta.len,
                millis = meta.build_ms,
                "cached form written"
            ),
            Err(error) => {
                tracing::warn!(model = %model.name, dir = %cache.dir().display(), %error, "cached form not written")
            }
        }
    }
}

/// The model's sessions: from its cached form when there is a valid one, else from its ONNX file.
fn sessions(
    env: &ort::environment::Environment,
    source: &ModelSource,
    options: &LoadOptions,
    build: onnx::Build<'_>,
) -> ort::Result<(Vec<ort::session::Session>, LoadedFrom, Option<compiled::Pending>)> {
    let workers = options.workers.max(1);
    let from = match &options.compiled {
        None => LoadedFrom::Onnx,
        Some(cache) => match cache.read(&source.path) {
            Ok(entry) => {
                let built = (0..workers)
                    .map(|_| onnx::load_session_in_place(env, &entry.bytes, build))
                    .collect::<ort::Result<Vec<_>>>();
                match built {
                    Ok(sessions) => {
                        // The sessions read the graph and the weights from these bytes for as
                        // long as they live, which is as long as the process.
                        let _ = Box::leak(entry.bytes);
                        return Ok((sessions, LoadedFrom::Cached, None));
                    }
                    // The sessions built so far are dropped (by `collect`) before the bytes.
                    Err(e) => {
                        cache.discard(&entry.path);
                        LoadedFrom::OnnxThenCache(format!("the runtime refused the cached form: {e}"))
                    }
                }
            }
            Err(compiled::Miss::Absent) => LoadedFrom::OnnxThenCache("none yet".into()),
            Err(compiled::Miss::Invalid(reason)) => LoadedFrom::OnnxThenCache(reason),
        },
    };
    let mut sessions = Vec::with_capacity(workers);
    let mut pending = None;
    if let (LoadedFrom::OnnxThenCache(reason), Some(cache)) = (&from, &options.compiled) {
        tracing::info!(model = %source.name, %reason, "loading the ONNX file: no valid cached form");
        // The first session writes the optimized graph as it is built (to the page cache: the
        // flush waits until the server is ready), so no second build is needed.
        match cache.begin(&source.path) {
            Ok(entry) => match onnx::load_session_saving(env, &source.path, &entry.tmp_ort, build) {
                Ok(session) => {
                    sessions.push(session);
                    pending = Some(entry);
                }
                Err(error) => {
                    let _ = std::fs::remove_file(&entry.tmp_ort);
                    tracing::warn!(model = %source.name, %error, "cached form not written");
                }
            },
            Err(error) => tracing::warn!(model = %source.name, %error, "cached form not written"),
        }
    }
    while sessions.len() < workers {
        sessions.push(onnx::load_session(env, &source.path, build)?);
    }
    Ok((sessions, from, pending))
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
    let prepacked = options.prepacking.then(PrepackedWeights::new);
    let build = onnx::Build { intra_threads: options.intra_threads, prepacked: prepacked.as_ref() };
    let (sessions, from, pending) = sessions(env, source, options, build).map_err(|e| fail(e.to_string()))?;
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
    Ok(LoadedModel { spec, executor, serving, stats, from, pending, _prepacked: prepacked })
}
