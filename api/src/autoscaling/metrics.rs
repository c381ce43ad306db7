//! The metrics of the `hpa` and `keda` classes: KServe's `autoScaling` block (0.15+) or the older
//! `scaleMetric` / `scaleTarget` fields (and their older annotations), to an HPA's `metrics`
//! (KServe's `getHPAMetrics`) or a ScaledObject's `triggers` (KServe's `getKedaMetrics`), with
//! KServe's webhook checks (`validateScalingHPACompExtension`, `validateScalingKedaCompExtension`).

use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscalerBehavior, MetricSpec, MetricTarget as HpaTarget, ResourceMetricSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{HPA_MIN_REPLICAS, Hpa, Keda, LEGACY_METRICS, LEGACY_TARGET_UTILIZATION, ScalerInputs};
use crate::error::{Error, Result};

/// KServe's `DefaultCPUUtilization`: the CPU target when none is given.
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;
/// Where KEDA's OpenTelemetry scaler is reached when a `PodMetric` names no `serverAddress`
/// (`metricScalerEndpoint` of KServe's shipped `inferenceservice-config`).
pub const OTEL_SCALER_ENDPOINT: &str = "keda-otel-scaler.keda.svc:4318";
/// In a `PodMetric` trigger's query: the revision's namespace, filled in by [`Keda::triggers_for`].
pub const NAMESPACE: &str = "$(NAMESPACE)";
/// In a `PodMetric` trigger's query: the revision's Deployment, filled in by [`Keda::triggers_for`].
pub const DEPLOYMENT: &str = "$(DEPLOYMENT)";

/// `autoScaling`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AutoScaling {
    #[serde(default)]
    metrics: Vec<Metric>,
    #[serde(default)]
    behavior: Option<Value>,
}

/// `autoScaling.metrics[]`.
#[derive(Debug, Deserialize)]
struct Metric {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    resource: Option<Resource>,
    #[serde(default)]
    external: Option<External>,
    #[serde(default)]
    podmetric: Option<PodMetric>,
}

#[derive(Debug, Deserialize)]
struct Resource {
    name: String,
    #[serde(default)]
    target: Target,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Target {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    value: Option<Value>,
    #[serde(default)]
    average_value: Option<Value>,
    #[serde(default)]
    average_utilization: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct External {
    metric: ExternalMetric,
    #[serde(default)]
    authentication_ref: Option<Authentication>,
    #[serde(default)]
    target: Target,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExternalMetric {
    #[serde(default)]
    backend: String,
    #[serde(default)]
    server_address: String,
    #[serde(default)]
    query: String,
    #[serde(default)]
    namespace: String,
    /// Where KServe's samples write it; KServe reads it from `authenticationRef`.
    #[serde(default)]
    auth_modes: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Authentication {
    #[serde(default)]
    auth_modes: Option<String>,
    #[serde(default)]
    authentication_ref: Option<Named>,
    /// The name, where written directly under `authenticationRef`.
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Named {
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodMetric {
    metric: PodMetricSource,
    #[serde(default)]
    target: Target,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodMetricSource {
    #[serde(default)]
    backend: String,
    #[serde(default)]
    server_address: String,
    #[serde(default)]
    query: String,
    #[serde(default)]
    operation_over_time: String,
}

fn parse(inputs: &ScalerInputs) -> Result<Option<AutoScaling>> {
    let Some(raw) = inputs.auto_scaling else { return Ok(None) };
    serde_json::from_value(raw.clone())
        .map(Some)
        .map_err(|e| Error::invalid(format!("{}.autoScaling", inputs.at), e.to_string()))
}

/// `minReplicas` and `maxReplicas` as KServe's reconcilers take them: the least is `floor` when
/// unset (or below it), and the most is at least the least.
fn replicas(inputs: &ScalerInputs, floor: i32) -> (i32, i32) {
    let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    let min = inputs.min_replicas.map_or(HPA_MIN_REPLICAS, int).max(floor);
    let max = inputs.max_replicas.map_or(0, int).max(min);
    (min, max)
}

/// The HPA of the `hpa` class.
pub fn hpa(inputs: &ScalerInputs) -> Result<Hpa> {
    let at = |name: &str| format!("{}.{name}", inputs.at);
    let (min_replicas, max_replicas) = replicas(inputs, HPA_MIN_REPLICAS);
    let (metrics, behavior) = match parse(inputs)? {
        Some(block) => {
            let mut metrics = Vec::new();
            for (i, metric) in block.metrics.iter().enumerate() {
                let field = at(&format!("autoScaling.metrics[{i}]"));
                metrics.push(hpa_resource_metric(&field, metric)?);
            }
            let behavior = block
                .behavior
                .map(serde_json::from_value::<HorizontalPodAutoscalerBehavior>)
                .transpose()
                .map_err(|e| Error::invalid(at("autoScaling.behavior"), e.to_string()))?;
            (metrics, behavior)
        }
        None => (vec![hpa_field_metric(inputs)?], None),
    };
    if metrics.is_empty() {
        return Err(Error::invalid(
            at("autoScaling.metrics"),
            "names no metric: an HPA without one would scale on CPU at 80% unasked; list a Resource metric",
        ));
    }
    Ok(Hpa { min_replicas, max_replicas, metrics, behavior })
}

/// A resource metric of `autoScaling.metrics` (the only kind KServe's HPA takes).
fn hpa_resource_metric(field: &str, metric: &Metric) -> Result<MetricSpec> {
    if metric.kind != "Resource" {
        return Err(Error::invalid(
            format!("{field}.type"),
            format!(
                "{:?} is not an HPA metric (the hpa class takes Resource; External and PodMetric need keda)",
                metric.kind
            ),
        ));
    }
    let resource = metric
        .resource
        .as_ref()
        .ok_or_else(|| Error::invalid(format!("{field}.resource"), "is required for a Resource metric"))?;
    let target = &resource.target;
    let kind = target.kind.as_deref().unwrap_or("Utilization");
    let hpa_target = match (resource.name.as_str(), kind) {
        ("cpu", "Utilization") => utilization(target.average_utilization.unwrap_or(DEFAULT_CPU_UTILIZATION)),
        ("memory", "Utilization") => {
            let value = target.average_utilization.ok_or_else(|| {
                Error::invalid(format!("{field}.resource.target.averageUtilization"), "is required for memory")
            })?;
            utilization(value)
        }
        ("memory", "AverageValue") => HpaTarget {
            type_: "AverageValue".into(),
            average_value: Some(Quantity(quantity(target.average_value.as_ref()).ok_or_else(|| {
                Error::invalid(format!("{field}.resource.target.averageValue"), "is required for AverageValue")
            })?)),
            ..HpaTarget::default()
        },
        ("cpu" | "memory", other) => {
            return Err(Error::invalid(
                format!("{field}.resource.target.type"),
                format!(
                    "{other:?} is not taken for {} (KServe's HPA takes Utilization, and AverageValue for memory)",
                    resource.name
                ),
            ));
        }
        (other, _) => {
            return Err(Error::invalid(
                format!("{field}.resource.name"),
                format!("must be cpu or memory, not {other:?}"),
            ));
        }
    };
    if let Some(v) = hpa_target.average_utilization
        && !(1..=100).contains(&v)
    {
        return Err(Error::invalid(
            format!("{field}.resource.target.averageUtilization"),
            format!("{v} is outside 1..100 (a percentage of the pods' requests)"),
        ));
    }
    Ok(resource_metric(&resource.name, hpa_target))
}

/// The metric of `scaleMetric` / `scaleTarget` (or KServe's older `serving.kserve.io/metrics` and
/// `serving.kserve.io/targetUtilizationPercentage` annotations, which the fields override).
fn hpa_field_metric(inputs: &ScalerInputs) -> Result<MetricSpec> {
    let annotation =
        |key: &str| inputs.annotations.get(key).map(|v| (format!("metadata.annotations[{key}]"), v.trim()));
    let (metric_field, metric) = match inputs.scale_metric {
        Some(m) => (format!("{}.scaleMetric", inputs.at), m),
        None => annotation(LEGACY_METRICS).unwrap_or_else(|| (String::new(), "cpu")),
    };
    let target: Option<(String, u32)> = match inputs.scale_target {
        Some(t) => Some((format!("{}.scaleTarget", inputs.at), t)),
        None => match annotation(LEGACY_TARGET_UTILIZATION) {
            Some((field, raw)) => {
                let value = raw
                    .parse::<u32>()
                    .map_err(|_| Error::invalid(&field, format!("{raw:?} is not a whole percentage")))?;
                Some((field, value))
            }
            None => None,
        },
    };
    let percent = |field: &str, value: u32| {
        i32::try_from(value).ok().filter(|v| (1..=100).contains(v)).ok_or_else(|| {
            Error::invalid(field, format!("{value} is outside 1..100 (the target utilization percentage)"))
        })
    };
    let spec_target = match (metric, target) {
        ("cpu", None) => utilization(DEFAULT_CPU_UTILIZATION),
        ("cpu" | "memory", Some((field, value))) => utilization(percent(&field, value)?),
        ("memory", None) => {
            return Err(Error::invalid(
                format!("{}.scaleTarget", inputs.at),
                "is required with scaleMetric: memory (KServe sets no default, and an HPA without a metric would \
                 scale on CPU)",
            ));
        }
        (other, _) => {
            return Err(Error::invalid(
                metric_field,
                format!("{other:?} is not an HPA metric: the hpa class scales on cpu or memory"),
            ));
        }
    };
    Ok(resource_metric(metric, spec_target))
}

fn utilization(percent: i32) -> HpaTarget {
    HpaTarget { type_: "Utilization".into(), average_utilization: Some(percent), ..HpaTarget::default() }
}

fn resource_metric(name: &str, target: HpaTarget) -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource { name: name.to_owned(), target }),
        ..MetricSpec::default()
    }
}

/// A quantity as written (KServe's `MetricQuantity` keeps the original text): a string or a number.
fn quantity(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The ScaledObject of the `keda` class.
pub fn keda(inputs: &ScalerInputs) -> Result<Keda> {
    let at = |name: &str| format!("{}.{name}", inputs.at);
    let (min_replicas, max_replicas) = replicas(inputs, 0);
    let Some(block) = parse(inputs)? else {
        return Err(Error::invalid(
            at("autoScaling"),
            "is required with the keda class: a ScaledObject needs at least one trigger",
        ));
    };
    let mut triggers = Vec::new();
    for (i, metric) in block.metrics.iter().enumerate() {
        triggers.push(keda_trigger(&at(&format!("autoScaling.metrics[{i}]")), metric)?);
    }
    if triggers.is_empty() {
        return Err(Error::invalid(at("autoScaling.metrics"), "names no metric: a ScaledObject needs a trigger"));
    }
    let behavior = block.behavior;
    if let Some(b) = &behavior {
        serde_json::from_value::<HorizontalPodAutoscalerBehavior>(b.clone())
            .map_err(|e| Error::invalid(at("autoScaling.behavior"), e.to_string()))?;
    }
    Ok(Keda { min_replicas, max_replicas, triggers, behavior })
}

fn keda_trigger(field: &str, metric: &Metric) -> Result<Value> {
    let missing = |name: &str, why: &str| Error::invalid(format!("{field}.{name}"), why.to_owned());
    let target_value = |target: &Target, name: &str| -> Result<String> {
        quantity(target.value.as_ref())
            .ok_or_else(|| missing(&format!("{name}.target.value"), "the target threshold value must not be empty"))
    };
    match metric.kind.as_str() {
        "Resource" => {
            let resource =
                metric.resource.as_ref().ok_or_else(|| missing("resource", "is required for a Resource metric"))?;
            let target = &resource.target;
            let kind = target.kind.as_deref().unwrap_or_default();
            let value = match (resource.name.as_str(), kind) {
                ("cpu", "Utilization") => target.average_utilization.unwrap_or(DEFAULT_CPU_UTILIZATION).to_string(),
                ("memory", "Utilization") => target
                    .average_utilization
                    .ok_or_else(|| missing("resource.target.averageUtilization", "is required for Utilization"))?
                    .to_string(),
                ("memory", "AverageValue") => quantity(target.average_value.as_ref())
                    .ok_or_else(|| missing("resource.target.averageValue", "is required for AverageValue"))?,
                ("cpu", _) => {
                    return Err(missing("resource.target.type", "the cpu target value type must be Utilization"));
                }
                ("memory", _) => {
                    return Err(missing(
                        "resource.target.type",
                        "the memory target value type must be AverageValue or Utilization",
                    ));
                }
                (other, _) => {
                    return Err(Error::invalid(
                        format!("{field}.resource.name"),
                        format!("must be cpu or memory, not {other:?}"),
                    ));
                }
            };
            Ok(json!({"type": resource.name, "metricType": kind, "metadata": {"value": value}}))
        }
        "External" => {
            let external =
                metric.external.as_ref().ok_or_else(|| missing("external", "is required for an External metric"))?;
            let m = &external.metric;
            if m.query.is_empty() {
                return Err(missing("external.metric.query", "the query must not be empty"));
            }
            if !["prometheus", "graphite"].contains(&m.backend.as_str()) {
                return Err(Error::invalid(
                    format!("{field}.external.metric.backend"),
                    format!("must be prometheus or graphite, not {:?}", m.backend),
                ));
            }
            let mut metadata = json!({
                "serverAddress": m.server_address,
                "query": m.query,
                "threshold": target_value(&external.target, "external")?,
            });
            if m.backend == "prometheus" && !m.namespace.is_empty() {
                metadata["namespace"] = json!(m.namespace);
            }
            let auth = external.authentication_ref.as_ref();
            if let Some(modes) = auth.and_then(|a| a.auth_modes.clone()).or_else(|| m.auth_modes.clone()) {
                metadata["authModes"] = json!(modes);
            }
            let mut trigger = json!({"type": m.backend, "metadata": metadata});
            let auth_name = auth.and_then(|a| a.authentication_ref.as_ref().map(|n| n.name.clone()).or(a.name.clone()));
            if let Some(name) = auth_name.filter(|n| !n.is_empty()) {
                trigger["authenticationRef"] = json!({"name": name});
            }
            Ok(trigger)
        }
        "PodMetric" => {
            let pod =
                metric.podmetric.as_ref().ok_or_else(|| missing("podmetric", "is required for a PodMetric metric"))?;
            let m = &pod.metric;
            if m.query.is_empty() {
                return Err(missing("podmetric.metric.query", "the query must not be empty"));
            }
            if m.backend != "opentelemetry" {
                return Err(Error::invalid(
                    format!("{field}.podmetric.metric.backend"),
                    format!("must be opentelemetry, not {:?}", m.backend),
                ));
            }
            let address = if m.server_address.is_empty() { OTEL_SCALER_ENDPOINT } else { &m.server_address };
            let mut metadata = json!({
                "metricQuery": format!("sum({}{{namespace=\"{NAMESPACE}\", deployment=\"{DEPLOYMENT}\"}})", m.query),
                "targetValue": target_value(&pod.target, "podmetric")?,
                "scalerAddress": address,
            });
            if !m.operation_over_time.is_empty() {
                metadata["operationOverTime"] = json!(m.operation_over_time);
            }
            Ok(json!({"type": "external", "metadata": metadata}))
        }
        other => Err(Error::invalid(
            format!("{field}.type"),
            format!("{other:?} is not a KEDA metric type: Resource, External or PodMetric"),
        )),
    }
}
