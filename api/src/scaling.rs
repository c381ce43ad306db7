//! From an InferenceService to the autoscaler's per-revision [`ScalingSpec`].

use skiff_autoscaler::{AutoscalerConfig, PredictorScaling, ScalingSpec};

use crate::error::{Error, Result};
use crate::isvc::InferenceService;

/// Resolves the predictor's scaling fields and `autoscaling.knative.dev/*` annotations against the
/// global config, as KServe hands them to Knative.
pub fn scaling_spec(isvc: &InferenceService, config: &AutoscalerConfig) -> Result<ScalingSpec> {
    let p = &isvc.spec.predictor;
    let unsigned = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
    let fields = PredictorScaling {
        min_replicas: unsigned(p.min_replicas),
        max_replicas: unsigned(p.max_replicas),
        scale_target: unsigned(p.scale_target),
        scale_metric: p.scale_metric.clone(),
        container_concurrency: unsigned(p.container_concurrency),
    };
    ScalingSpec::resolve(&fields, &isvc.metadata.annotations, config).map_err(|e| {
        let key = e.key().to_owned();
        let field =
            if key.contains('/') { format!("metadata.annotations[{key}]") } else { format!("spec.predictor.{key}") };
        Error::invalid(field, e.to_string())
    })
}
