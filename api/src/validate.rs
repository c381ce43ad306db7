//! Validation of an InferenceService, with errors that name the offending field. `skiff up` calls
//! [`validate`] and the operator [`validate_for`] with its cluster's logger sink rule (the one
//! difference); the CRD carries the same bounds (the constants below) and the name rules, so the
//! API server refuses what they refuse.

use skiff_autoscaler::AutoscalerConfig;
/// The request logger's sink rule, which `logger.url` is checked against.
pub use skiff_http::logger::sink::SinkPolicy;

use crate::error::{Error, Result};
use crate::isvc::{API_VERSION, InferenceService, KIND, PredictorSpec};
use crate::limits::{DNS_LABEL_MAX, MAX_NAME_LENGTH, MAX_REVISION};
use crate::revision::{Component, revision_name};
use crate::runtime::uses_embedded_server;
use crate::scaling::component_scaling_spec;

pub use crate::limits::{
    COLLOCATED_MODEL_PORT, DNS_1035, FRAMEWORKS, MAX_CONTAINER_CONCURRENCY, MAX_REPLICAS, MAX_SCALE_TARGET,
    MAX_TIMEOUT_SECS, TRANSFORMER_CONTAINER, name_limit,
};

/// Checks everything Skiff relies on, as `skiff up` does (a logger sink on loopback is allowed);
/// the first problem found is returned.
pub fn validate(isvc: &InferenceService, config: &AutoscalerConfig) -> Result<()> {
    validate_for(isvc, config, &SinkPolicy::standalone())
}

/// [`validate`] with `sinks` deciding which `logger.url` hosts are allowed (on a cluster: no
/// loopback, link-local or platform component, unless inferenceservice-config allows it).
pub fn validate_for(isvc: &InferenceService, config: &AutoscalerConfig, sinks: &SinkPolicy) -> Result<()> {
    if isvc.api_version != API_VERSION {
        return Err(Error::invalid("apiVersion", format!("must be {API_VERSION}, not {:?}", isvc.api_version)));
    }
    if isvc.kind != KIND {
        return Err(Error::invalid("kind", format!("must be {KIND}, not {:?}", isvc.kind)));
    }
    name(&isvc.metadata.name)?;
    crate::settings::progress_deadline(&isvc.metadata.annotations).map_err(|message| {
        Error::invalid(format!("metadata.annotations[{}]", crate::settings::PROGRESS_DEADLINE_ANNOTATION), message)
    })?;
    if let Some(namespace) = &isvc.metadata.namespace {
        dns_label("metadata.namespace", namespace)?;
    }
    for which in Component::of(isvc) {
        let spec = which.spec(isvc).expect("Component::of lists the components that are set");
        component(&format!("spec.{}", which.name()), spec, which, sinks)?;
        revision_name_fits(&isvc.metadata.name, which)?;
        component_scaling_spec(isvc, which, config).expect("the component is set")?;
    }
    Ok(())
}

/// KServe's collocation (`containers` beside `model`, at `at`): a `transformer-container` that
/// takes the traffic, and any sidecars. KServe takes the model server's container fields from
/// `model` (a `kserve-container` here would be a second one), and refuses the storage URI
/// variable in the transformer (its `validateCollocationStorageURI`); a `kserve-container` with
/// `RAY_NODE_COUNT` is KServe's multi-node serving.
fn collocation(at: &str, containers: &[serde_json::Value]) -> Result<()> {
    let named =
        |name: &str| containers.iter().find(|c| c.get("name").and_then(serde_json::Value::as_str) == Some(name));
    let env_has = |c: &serde_json::Value, var: &str| {
        c.get("env").and_then(serde_json::Value::as_array).is_some_and(|env| env.iter().any(|e| e["name"] == var))
    };
    if let Some(server) = named("kserve-container") {
        if env_has(server, "RAY_NODE_COUNT") {
            return Err(Error::invalid(
                at,
                "Skiff does not have KServe's multi-node serving (RAY_NODE_COUNT: a Ray head and worker pods)",
            ));
        }
        return Err(Error::invalid(
            at,
            "kserve-container beside model: the model server's container fields go in model (KServe's collocation \
             takes them from there and runs transformer-container beside it)",
        ));
    }
    let Some(transformer) = named(TRANSFORMER_CONTAINER) else {
        return Err(Error::invalid(
            at,
            "containers beside model must include transformer-container (KServe's collocation: it takes the \
             traffic and calls the model server on localhost:8085)",
        ));
    };
    if env_has(transformer, "STORAGE_URI") {
        return Err(Error::invalid(
            at,
            "transformer-container must not set STORAGE_URI: the model's storage is model.storageUri (as KServe)",
        ));
    }
    Ok(())
}

/// One component's checks; `at` is its field (`spec.predictor`, ...). A transformer or explainer
/// is a custom container.
fn component(at: &str, p: &PredictorSpec, which: Component, sinks: &SinkPolicy) -> Result<()> {
    let field = |name: &str| format!("{at}.{name}");
    unsupported::check(at, p)?;
    let mut implementations: Vec<&str> = Vec::new();
    if p.model.is_some() {
        implementations.push("model");
    }
    if p.containers.is_some() {
        implementations.push("containers");
    }
    implementations.extend(FRAMEWORKS.iter().filter(|f| p.other.contains_key(**f)));
    if which != Component::Predictor && implementations != ["containers"] {
        return Err(Error::invalid(
            at,
            format!(
                "must set containers (Skiff runs the {} as a custom container); found {}",
                which.name(),
                if implementations.is_empty() { "none".to_owned() } else { implementations.join(", ") }
            ),
        ));
    }
    if implementations == ["model", "containers"] {
        collocation(&field("containers"), p.containers.as_deref().unwrap_or_default())?;
        implementations.pop();
    }
    if implementations.len() != 1 {
        return Err(Error::invalid(
            at,
            format!(
                "exactly one of model, containers or a framework ({}) must be set; found {}",
                FRAMEWORKS.join(", "),
                if implementations.is_empty() { "none".to_owned() } else { implementations.join(", ") }
            ),
        ));
    }
    if let Some(model) = &p.model {
        if model.model_format.is_unset() && model.runtime.is_none() {
            return Err(Error::invalid(
                field("model.modelFormat"),
                "is required unless model.runtime names a ServingRuntime (a runtime is chosen by the model's format)",
            ));
        }
        if !model.model_format.is_unset() && model.model_format.name.trim().is_empty() {
            return Err(Error::invalid(field("model.modelFormat.name"), "must not be empty"));
        }
        if uses_embedded_server(model) && model.storage_uri.as_deref().is_none_or(str::is_empty) {
            return Err(Error::invalid(
                field("model.storageUri"),
                "is required: Skiff's embedded server loads an ONNX model from it (file://, pvc://, gs://, s3://, \
                 https://, hf://, ...)",
            ));
        }
        if let Some(protocol) = &model.protocol_version
            && !["v1", "v2", "grpc-v2"].contains(&protocol.as_str())
        {
            return Err(Error::invalid(
                field("model.protocolVersion"),
                format!("must be v1, v2 or grpc-v2, not {protocol:?}"),
            ));
        }
    }
    within(&field("minReplicas"), p.min_replicas, 0, MAX_REPLICAS)?;
    within(&field("maxReplicas"), p.max_replicas, 0, MAX_REPLICAS)?;
    if let (Some(min), Some(max)) = (p.min_replicas, p.max_replicas)
        && max > 0
        && min > max
    {
        return Err(Error::invalid(field("minReplicas"), format!("{min} is more than maxReplicas {max}")));
    }
    within(&field("containerConcurrency"), p.container_concurrency, 0, MAX_CONTAINER_CONCURRENCY)?;
    within(&field("scaleTarget"), p.scale_target, 1, MAX_SCALE_TARGET)?;
    within(&field("timeout"), p.timeout, 1, MAX_TIMEOUT_SECS)?;
    if let Some(percent) = p.canary_traffic_percent
        && !(0..=100).contains(&percent)
    {
        return Err(Error::invalid(field("canaryTrafficPercent"), format!("{percent} is outside 0..100")));
    }
    if let Some(batcher) = &p.batcher {
        at_least(&field("batcher.maxBatchSize"), batcher.max_batch_size, 1)?;
        at_least(&field("batcher.maxLatency"), batcher.max_latency, 1)?;
    }
    if let Some(logger) = &p.logger {
        let url = logger.url.as_deref().unwrap_or_default();
        sinks.check_url(url).map_err(|why| Error::invalid(field("logger.url"), why))?;
        if let Some(mode) = &logger.mode
            && !["all", "request", "response"].contains(&mode.as_str())
        {
            return Err(Error::invalid(
                field("logger.mode"),
                format!("must be all, request or response, not {mode:?}"),
            ));
        }
    }
    Ok(())
}

fn at_least(field: &str, value: Option<i64>, min: i64) -> Result<()> {
    within(field, value, min, i64::MAX)
}

fn within(field: &str, value: Option<i64>, min: i64, max: i64) -> Result<()> {
    match value {
        Some(v) if v < min => Err(Error::invalid(field, format!("{v} is less than {min}"))),
        Some(v) if v > max => Err(Error::invalid(field, format!("{v} is more than {max}"))),
        _ => Ok(()),
    }
}

/// `<name>-<component>-00001` must be a DNS label: a transformer's longer name leaves the
/// InferenceService's name two characters less than [`MAX_NAME_LENGTH`].
fn revision_name_fits(name: &str, which: Component) -> Result<()> {
    let longest = revision_name(name, which.name(), MAX_REVISION);
    if longest.len() > DNS_LABEL_MAX {
        return Err(Error::invalid(
            "metadata.name",
            format!(
                "{} characters is too long for a {}: its revision names ({longest}) must fit in {DNS_LABEL_MAX}",
                name.chars().count(),
                which.name()
            ),
        ));
    }
    Ok(())
}

/// The InferenceService's name: short enough for the names Skiff derives from it, and a DNS-1035 label.
fn name(value: &str) -> Result<()> {
    let length = value.chars().count();
    if length > MAX_NAME_LENGTH {
        return Err(Error::invalid("metadata.name", format!("{length} characters is too long; {}", name_limit())));
    }
    dns_label("metadata.name", value)
}

/// A DNS-1035 label: lowercase letters, digits and '-', starting with a letter, at most 63 characters.
fn dns_label(field: &str, value: &str) -> Result<()> {
    let bytes = value.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= DNS_LABEL_MAX
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[bytes.len() - 1] != b'-';
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("{value:?} is not a DNS-1035 label ({DNS_1035}, at most {DNS_LABEL_MAX} characters)"),
        ))
    }
}

mod unsupported;

#[cfg(test)]
mod tests;
