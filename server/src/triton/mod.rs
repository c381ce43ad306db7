//! Triton's protocol extensions, the pure part both protocols share: a model's configuration
//! ([`config`]), its statistics and the repository index as Triton's messages, and those
//! messages in protobuf's JSON mapping ([`json`]), as Triton's HTTP endpoints write them.

pub mod config;
pub mod json;

use crate::error::{Error, Result};
use crate::model::stats::{BatchTally, Counters, Tally};
use crate::model::{LoadedModel, MODEL_VERSION, Models};
use crate::proto::repository_index_response::ModelIndex;
use crate::proto::{InferBatchStatistics, InferStatistics, ModelStatistics, StatisticDuration};

/// The repository index's state of a loaded model.
pub const READY: &str = "READY";
/// The repository index's state of a model still loading.
pub const UNAVAILABLE: &str = "UNAVAILABLE";

/// Why load and unload are refused: the server serves the models it was started with.
pub const FIXED_MODELS: &str = "skiff-server serves the models it was started with; load/unload is not supported";

/// A load request: a model the server serves and has loaded is loaded already, as Triton's load
/// of an unchanged model leaves it; a new configuration or files (`parameters`), or a model the
/// server was not started with, is refused; a model still loading is not ready (503).
pub fn load(models: &Models, name: &str, with_parameters: bool) -> Result<()> {
    if with_parameters {
        return Err(Error::Unsupported(format!(
            "{FIXED_MODELS}: model '{name}' cannot be loaded with a new configuration or files"
        )));
    }
    match models.get(name) {
        Err(Error::ModelNotFound(_)) => Err(Error::Unsupported(format!(
            "{FIXED_MODELS}: model '{name}' is not one of them ({})",
            models.names().join(", ")
        ))),
        other => other.map(|_| ()),
    }
}

/// An unload request, always refused.
pub fn unload(name: &str) -> Error {
    Error::Unsupported(format!("{FIXED_MODELS}: model '{name}' cannot be unloaded"))
}

/// One model's statistics as Triton reports them.
pub fn statistics(name: &str, counters: &Counters) -> ModelStatistics {
    let duration = |t: Tally| Some(StatisticDuration { count: t.count, ns: t.ns });
    let batch = |(&size, b): (&u64, &BatchTally)| InferBatchStatistics {
        batch_size: size,
        compute_input: duration(b.input),
        compute_infer: duration(b.infer),
        compute_output: duration(b.output),
    };
    ModelStatistics {
        name: name.to_owned(),
        version: MODEL_VERSION.to_owned(),
        last_inference: counters.last_inference_ms,
        inference_count: counters.inference_count,
        execution_count: counters.execution_count,
        inference_stats: Some(InferStatistics {
            success: duration(counters.success),
            fail: duration(counters.fail),
            queue: duration(counters.queue),
            compute_input: duration(counters.compute_input),
            compute_infer: duration(counters.compute_infer),
            compute_output: duration(counters.compute_output),
            cache_hit: duration(Tally::default()),
            cache_miss: duration(Tally::default()),
        }),
        batch_stats: counters.batches.iter().map(batch).collect(),
    }
}

/// A model's entry in the repository index: READY once loaded, else UNAVAILABLE with the reason.
pub fn index_entry(name: &str, loaded: Option<&LoadedModel>) -> ModelIndex {
    let (state, reason) = match loaded {
        Some(_) => (READY, String::new()),
        None => (UNAVAILABLE, "loading".to_owned()),
    };
    ModelIndex { name: name.to_owned(), version: MODEL_VERSION.to_owned(), state: state.to_owned(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::stats::{Phases, Served};
    use std::time::Duration;

    #[test]
    fn statistics_carry_every_counter() {
        let mut counters = Counters::default();
        let phases =
            Phases { input: Duration::from_nanos(10), infer: Duration::from_nanos(20), output: Duration::ZERO };
        counters.execution(2, &phases);
        counters.success(&Served { inferences: 2, total: Duration::from_nanos(50), queue: Duration::ZERO, phases }, 7);
        let stats = statistics("iris", &counters);
        assert_eq!((stats.name.as_str(), stats.version.as_str(), stats.last_inference), ("iris", "1", 7));
        assert_eq!((stats.inference_count, stats.execution_count), (2, 1));
        let inference = stats.inference_stats.unwrap();
        assert_eq!(inference.success, Some(StatisticDuration { count: 1, ns: 50 }));
        assert_eq!(inference.fail, Some(StatisticDuration { count: 0, ns: 0 }));
        assert_eq!(inference.compute_infer, Some(StatisticDuration { count: 1, ns: 20 }));
        assert_eq!(stats.batch_stats.len(), 1);
        assert_eq!(stats.batch_stats[0].batch_size, 2);
        assert_eq!(stats.batch_stats[0].compute_input, Some(StatisticDuration { count: 1, ns: 10 }));
    }

    #[test]
    fn a_model_still_loading_is_unavailable() {
        let entry = index_entry("mlp", None);
        assert_eq!(
            (entry.name.as_str(), entry.version.as_str(), entry.state.as_str(), entry.reason.as_str()),
            ("mlp", "1", "UNAVAILABLE", "loading")
        );
    }

    #[test]
    fn loading_a_model_not_served_or_with_new_files_and_unloading_are_refused() {
        use skiff_http::HttpError;
        let models = Models::new(vec![]);
        let err = load(&models, "resnet", false).unwrap_err();
        assert_eq!((err.status(), err.grpc_code()), (http::StatusCode::BAD_REQUEST, tonic::Code::FailedPrecondition));
        assert!(err.to_string().starts_with(FIXED_MODELS), "{err}");
        assert!(err.to_string().contains("model 'resnet' is not one of them"), "{err}");
        assert!(load(&models, "resnet", true).unwrap_err().to_string().contains("new configuration or files"));
        assert_eq!(unload("iris").to_string(), format!("{FIXED_MODELS}: model 'iris' cannot be unloaded"));
    }
}
