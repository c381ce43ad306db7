//! Validation of an InferenceService, with errors that name the offending field.

use skiff_autoscaler::AutoscalerConfig;

use crate::error::{Error, Result};
use crate::isvc::{API_VERSION, InferenceService, KIND, PredictorSpec};
use crate::scaling::scaling_spec;

/// KServe's predictor shorthands for a framework, each an alternative to `model` and `containers`.
pub const FRAMEWORKS: [&str; 10] =
    ["sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "pmml", "lightgbm", "paddle", "huggingface"];

/// Checks everything Skiff relies on; the first problem found is returned.
pub fn validate(isvc: &InferenceService, config: &AutoscalerConfig) -> Result<()> {
    if isvc.api_version != API_VERSION {
        return Err(Error::invalid("apiVersion", format!("must be {API_VERSION}, not {:?}", isvc.api_version)));
    }
    if isvc.kind != KIND {
        return Err(Error::invalid("kind", format!("must be {KIND}, not {:?}", isvc.kind)));
    }
    dns_label("metadata.name", &isvc.metadata.name)?;
    if let Some(namespace) = &isvc.metadata.namespace {
        dns_label("metadata.namespace", namespace)?;
    }
    predictor(&isvc.spec.predictor)?;
    scaling_spec(isvc, config).map(|_| ())
}

fn predictor(p: &PredictorSpec) -> Result<()> {
    let mut implementations: Vec<&str> = Vec::new();
    if p.model.is_some() {
        implementations.push("model");
    }
    if p.containers.is_some() {
        implementations.push("containers");
    }
    implementations.extend(FRAMEWORKS.iter().filter(|f| p.other.contains_key(**f)));
    if implementations.len() != 1 {
        return Err(Error::invalid(
            "spec.predictor",
            format!(
                "exactly one of model, containers or a framework ({}) must be set; found {}",
                FRAMEWORKS.join(", "),
                if implementations.is_empty() { "none".to_owned() } else { implementations.join(", ") }
            ),
        ));
    }
    if let Some(model) = &p.model {
        if model.model_format.name.trim().is_empty() {
            return Err(Error::invalid("spec.predictor.model.modelFormat.name", "must not be empty"));
        }
        if model.storage_uri.as_deref().is_none_or(str::is_empty) {
            return Err(Error::invalid("spec.predictor.model.storageUri", "is required"));
        }
        if let Some(protocol) = &model.protocol_version
            && !["v1", "v2", "grpc-v2"].contains(&protocol.as_str())
        {
            return Err(Error::invalid(
                "spec.predictor.model.protocolVersion",
                format!("must be v1, v2 or grpc-v2, not {protocol:?}"),
            ));
        }
    }
    at_least("spec.predictor.minReplicas", p.min_replicas, 0)?;
    at_least("spec.predictor.maxReplicas", p.max_replicas, 0)?;
    if let (Some(min), Some(max)) = (p.min_replicas, p.max_replicas)
        && max > 0
        && min > max
    {
        return Err(Error::invalid("spec.predictor.minReplicas", format!("{min} is more than maxReplicas {max}")));
    }
    at_least("spec.predictor.containerConcurrency", p.container_concurrency, 0)?;
    at_least("spec.predictor.scaleTarget", p.scale_target, 1)?;
    at_least("spec.predictor.timeout", p.timeout, 1)?;
    if let Some(percent) = p.canary_traffic_percent
        && !(0..=100).contains(&percent)
    {
        return Err(Error::invalid("spec.predictor.canaryTrafficPercent", format!("{percent} is outside 0..100")));
    }
    if let Some(batcher) = &p.batcher {
        at_least("spec.predictor.batcher.maxBatchSize", batcher.max_batch_size, 1)?;
        at_least("spec.predictor.batcher.maxLatency", batcher.max_latency, 1)?;
    }
    Ok(())
}

fn at_least(field: &str, value: Option<i64>, min: i64) -> Result<()> {
    match value {
        Some(v) if v < min => Err(Error::invalid(field, format!("{v} is less than {min}"))),
        _ => Ok(()),
    }
}

/// A DNS-1035 label: lowercase letters, digits and '-', starting with a letter, at most 63 characters.
fn dns_label(field: &str, value: &str) -> Result<()> {
    let bytes = value.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[bytes.len() - 1] != b'-';
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!(
                "{value:?} is not a DNS-1035 label (lowercase letters, digits and '-', starting with a letter, at most 63 characters)"
            ),
        ))
    }
}

#[cfg(test)]
mod tests;
