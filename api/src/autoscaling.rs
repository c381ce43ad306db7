//! KServe's autoscaler classes and deployment modes, as Skiff realises them (the pure part: what a
//! component's annotations and fields ask for; the operator makes the objects).
//!
//! - `serving.kserve.io/deploymentMode`: `Serverless` (KServe's older name; `Knative` is its newer
//!   one) and absent mean Knative's semantics, the KPA class by default; `RawDeployment` (older)
//!   and `Standard` mean KServe's Standard mode, whose default class is `hpa`. `ModelMesh` is
//!   refused. Every mode stays behind Skiff's router and activator.
//! - `serving.kserve.io/autoscalerClass`: `kpa` (Skiff's autoscaler), `hpa` (an `autoscaling/v2`
//!   HorizontalPodAutoscaler, KServe's `createHPA`), `keda` (a KEDA ScaledObject, KServe's
//!   `createKedaScaledObject`), `external` and `none` (nothing scales: replicas are left alone).
//!   Anything else is refused naming the annotation.
//!
//! Whatever the class, a revision at zero replicas still holds its first request in the activator,
//! which wakes it to one replica; from there the class's autoscaler decides (see
//! `docs/architecture.md`). Fields that only one class reads are refused with another, naming the
//! field, so that nothing is silently ignored.

pub mod metrics;

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerBehavior, MetricSpec};
use serde_json::Value;

use crate::error::{Error, Result};

/// The annotation naming the autoscaler class.
pub const AUTOSCALER_CLASS: &str = "serving.kserve.io/autoscalerClass";
/// The annotation naming the deployment mode.
pub const DEPLOYMENT_MODE: &str = "serving.kserve.io/deploymentMode";
/// KServe's older annotation for the HPA's metric (`cpu` or `memory`), before `scaleMetric`.
pub const LEGACY_METRICS: &str = "serving.kserve.io/metrics";
/// KServe's older annotation for the HPA's target utilisation, before `scaleTarget`.
pub const LEGACY_TARGET_UTILIZATION: &str = "serving.kserve.io/targetUtilizationPercentage";
/// The `serving.kserve.io/*` annotations this module reads (recorded on each revision).
pub const ANNOTATIONS: [&str; 4] = [AUTOSCALER_CLASS, DEPLOYMENT_MODE, LEGACY_METRICS, LEGACY_TARGET_UTILIZATION];
/// KServe's `DefaultMinReplicas`: an HPA's least replicas (the API server refuses 0 for resource metrics).
pub const HPA_MIN_REPLICAS: i32 = 1;

/// `serving.kserve.io/deploymentMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeploymentMode {
    /// `Serverless` / `Knative` (or absent): the KPA by default, scale to zero with `minReplicas: 0`.
    #[default]
    Serverless,
    /// `Standard` / `RawDeployment`: the `hpa` class by default, as in KServe's Standard mode.
    Standard,
}

impl DeploymentMode {
    /// The mode `annotations` ask for; the error names the annotation.
    pub fn of(annotations: &BTreeMap<String, String>) -> Result<DeploymentMode> {
        match annotations.get(DEPLOYMENT_MODE).map(|v| v.trim()) {
            None | Some("Serverless" | "Knative") => Ok(DeploymentMode::Serverless),
            Some("Standard" | "RawDeployment") => Ok(DeploymentMode::Standard),
            Some("ModelMesh") => Err(annotation(
                DEPLOYMENT_MODE,
                "ModelMesh is not supported: Skiff serves each InferenceService from its own revisions \
                 (use Serverless, Knative, Standard or RawDeployment)",
            )),
            Some(other) => Err(annotation(
                DEPLOYMENT_MODE,
                format!("must be Serverless, Knative, Standard or RawDeployment, not {other:?}"),
            )),
        }
    }
}

/// `serving.kserve.io/autoscalerClass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Class {
    /// Skiff's KPA-style autoscaler on concurrency or rps (Knative's class).
    #[default]
    Kpa,
    /// A Kubernetes HorizontalPodAutoscaler on CPU or memory.
    Hpa,
    /// A KEDA ScaledObject.
    Keda,
    /// Someone else's autoscaler: replicas are left alone.
    External,
    /// No autoscaler: the revision keeps the replicas it was created with.
    None,
}

impl Class {
    /// Every class, as the annotation names them.
    pub const ALL: [Class; 5] = [Class::Kpa, Class::Hpa, Class::Keda, Class::External, Class::None];

    /// The annotation's value.
    pub fn name(self) -> &'static str {
        match self {
            Class::Kpa => "kpa",
            Class::Hpa => "hpa",
            Class::Keda => "keda",
            Class::External => "external",
            Class::None => "none",
        }
    }

    /// The class `annotations` ask for, or the mode's default; the error names the annotation.
    pub fn of(annotations: &BTreeMap<String, String>) -> Result<Class> {
        let mode = DeploymentMode::of(annotations)?;
        let Some(raw) = annotations.get(AUTOSCALER_CLASS) else {
            return Ok(match mode {
                DeploymentMode::Serverless => Class::Kpa,
                DeploymentMode::Standard => Class::Hpa,
            });
        };
        let raw = raw.trim();
        Class::ALL.into_iter().find(|c| c.name() == raw).ok_or_else(|| {
            let names: Vec<&str> = Class::ALL.iter().map(|c| c.name()).collect();
            annotation(AUTOSCALER_CLASS, format!("must be one of {}, not {raw:?}", names.join(", ")))
        })
    }

    /// Whether Skiff's own autoscaler sets the replicas (the KPA); the other classes leave them
    /// to their autoscaler, and Skiff's only wakes a revision at zero on its first request.
    pub fn scaled_by_skiff(self) -> bool {
        self == Class::Kpa
    }
}

/// What scales a component's revisions, with what each class's object needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Scaler {
    /// Skiff's autoscaler ([`crate::scaling::ScalingInputs::resolve`] gives its settings).
    Kpa,
    /// An `autoscaling/v2` HorizontalPodAutoscaler on the revision's Deployment.
    Hpa(Hpa),
    /// A KEDA `ScaledObject` (`keda.sh/v1alpha1`) on the revision's Deployment.
    Keda(Keda),
    /// Nothing Skiff makes: another autoscaler sets the replicas.
    External,
    /// Nothing: the replicas the revision was created with stay.
    None,
}

impl Scaler {
    /// Its class.
    pub fn class(&self) -> Class {
        match self {
            Scaler::Kpa => Class::Kpa,
            Scaler::Hpa(_) => Class::Hpa,
            Scaler::Keda(_) => Class::Keda,
            Scaler::External => Class::External,
            Scaler::None => Class::None,
        }
    }
}

/// A HorizontalPodAutoscaler's spec, as KServe's `createHPA` writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hpa {
    /// `minReplicas`, at least [`HPA_MIN_REPLICAS`].
    pub min_replicas: i32,
    /// `maxReplicas`: the component's, at least `min_replicas` (so unset means `min_replicas`, as in KServe).
    pub max_replicas: i32,
    /// `metrics`.
    pub metrics: Vec<MetricSpec>,
    /// `behavior`, from `autoScaling.behavior`.
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

/// A KEDA ScaledObject's spec, as KServe's `createKedaScaledObject` writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Keda {
    /// `minReplicaCount`: `minReplicas`, 1 when unset (0 lets KEDA scale to zero).
    pub min_replicas: i32,
    /// `maxReplicaCount`: `maxReplicas`, at least `min_replicas`.
    pub max_replicas: i32,
    /// `triggers`.
    pub triggers: Vec<Value>,
    /// `advanced.horizontalPodAutoscalerConfig.behavior`, from `autoScaling.behavior`.
    pub behavior: Option<Value>,
}

impl Keda {
    /// The triggers for the revision Deployment `deployment` in `namespace`: a `PodMetric`'s query
    /// is scoped to its pods, as KServe scopes it to the component's Deployment.
    pub fn triggers_for(&self, namespace: &str, deployment: &str) -> Vec<Value> {
        let mut triggers = self.triggers.clone();
        for query in triggers.iter_mut().filter_map(|t| t.pointer_mut("/metadata/metricQuery")) {
            if let Some(text) = query.as_str() {
                *query =
                    Value::String(text.replace(metrics::NAMESPACE, namespace).replace(metrics::DEPLOYMENT, deployment));
            }
        }
        triggers
    }
}

/// What [`scaler`] reads of one component: its fields and the service's `serving.kserve.io/*`
/// autoscaling annotations ([`ANNOTATIONS`]).
#[derive(Debug, Clone, Copy)]
pub struct ScalerInputs<'a> {
    /// The component's field path, `spec.predictor`.
    pub at: &'a str,
    /// `minReplicas`.
    pub min_replicas: Option<u32>,
    /// `maxReplicas` (0 = unset).
    pub max_replicas: Option<u32>,
    /// `scaleTarget`.
    pub scale_target: Option<u32>,
    /// `scaleMetric`.
    pub scale_metric: Option<&'a str>,
    /// `scaleMetricType`.
    pub scale_metric_type: Option<&'a str>,
    /// `autoScaling`, as written.
    pub auto_scaling: Option<&'a Value>,
    /// The annotations.
    pub annotations: &'a BTreeMap<String, String>,
}

/// The component's scaler; the error names the field or annotation that its class cannot take.
pub fn scaler(inputs: &ScalerInputs) -> Result<Scaler> {
    let class = Class::of(inputs.annotations)?;
    let field = |name: &str| format!("{}.{name}", inputs.at);
    let not_read = |name: &str, reader: &str| {
        Error::invalid(
            field(name),
            format!("is read by {reader}; this component's autoscaler class is {} ({AUTOSCALER_CLASS})", class.name()),
        )
    };
    for key in [LEGACY_METRICS, LEGACY_TARGET_UTILIZATION] {
        if class != Class::Hpa && inputs.annotations.contains_key(key) {
            return Err(annotation(
                key,
                format!("is read by the hpa class; this InferenceService's class is {}", class.name()),
            ));
        }
    }
    if let Some(kind) = inputs.scale_metric_type.filter(|k| *k != "Utilization") {
        return Err(Error::invalid(
            field("scaleMetricType"),
            format!(
                "{kind:?} is not acted on (KServe reads no scaleMetricType); use autoScaling.metrics with \
                 target.type {kind} (hpa or keda)"
            ),
        ));
    }
    match class {
        Class::Kpa => {
            if inputs.auto_scaling.is_some() {
                return Err(not_read("autoScaling", "the hpa and keda classes"));
            }
            if let Some(metric @ ("cpu" | "memory")) = inputs.scale_metric {
                return Err(Error::invalid(
                    field("scaleMetric"),
                    format!(
                        "{metric} needs the hpa class ({AUTOSCALER_CLASS}: hpa, or {DEPLOYMENT_MODE}: Standard); \
                         the kpa scales on concurrency or rps"
                    ),
                ));
            }
            Ok(Scaler::Kpa)
        }
        Class::Hpa => metrics::hpa(inputs).map(Scaler::Hpa),
        Class::Keda => {
            if inputs.scale_metric.is_some() {
                return Err(Error::invalid(
                    field("scaleMetric"),
                    "is not supported for KEDA (as in KServe): give the metrics in autoScaling.metrics",
                ));
            }
            if inputs.scale_target.is_some() {
                return Err(not_read("scaleTarget", "the kpa and hpa classes"));
            }
            metrics::keda(inputs).map(Scaler::Keda)
        }
        Class::External | Class::None => {
            for (name, set) in [
                ("scaleMetric", inputs.scale_metric.is_some()),
                ("scaleTarget", inputs.scale_target.is_some()),
                ("autoScaling", inputs.auto_scaling.is_some()),
            ] {
                if set {
                    return Err(not_read(name, "the kpa, hpa and keda classes"));
                }
            }
            Ok(if class == Class::External { Scaler::External } else { Scaler::None })
        }
    }
}

/// `skiff up`'s check: it runs the KPA only (no HPA controller, no KEDA, no other autoscaler on
/// one machine), so any other class is refused naming the annotation that asks for it.
pub fn runs_locally(annotations: &BTreeMap<String, String>) -> Result<()> {
    let class = Class::of(annotations)?;
    if class == Class::Kpa {
        return Ok(());
    }
    let (key, why) = match annotations.get(AUTOSCALER_CLASS) {
        Some(_) => (AUTOSCALER_CLASS, format!("{} is", class.name())),
        None => (DEPLOYMENT_MODE, format!("{:?} means the hpa class, which is", annotations[DEPLOYMENT_MODE])),
    };
    Err(annotation(
        key,
        format!(
            "{why} not run by skiff up: it runs the kpa class only (Skiff's concurrency autoscaler); on a cluster \
             the operator makes the HPA or KEDA ScaledObject. Set {AUTOSCALER_CLASS}: kpa to run it here"
        ),
    ))
}

/// An error naming an annotation.
fn annotation(key: &str, message: impl Into<String>) -> Error {
    Error::invalid(format!("metadata.annotations[{key}]"), message)
}

#[cfg(test)]
mod tests;
