//! From an InferenceService to the autoscaler's per-revision [`ScalingSpec`], and to the
//! component's [`Scaler`] (its autoscaler class, [`crate::autoscaling`]). The inputs are recorded
//! on each revision (its Deployment's `skiff.dev/scaling` annotation), so a revision keeps the
//! settings it was made with while the cluster-wide `config-autoscaler` can change under it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use skiff_autoscaler::{AutoscalerConfig, PredictorScaling, ScalingSpec};

use crate::autoscaling::{self, Class, Scaler, ScalerInputs};
use crate::error::{Error, Result};
use crate::isvc::InferenceService;
use crate::labels::SCALING;
use crate::revision::Component;
use crate::settings::{PROGRESS_DEADLINE_ANNOTATION, RevisionSettings};

/// The annotation prefix Knative reads autoscaling settings from.
const AUTOSCALING_PREFIX: &str = "autoscaling.knative.dev/";

/// A revision's own autoscaling inputs: the predictor's fields and its `autoscaling.knative.dev/*`
/// annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingInputs {
    /// `minReplicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    /// `maxReplicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    /// `scaleTarget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_target: Option<u32>,
    /// `scaleMetric`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_metric: Option<String>,
    /// `containerConcurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_concurrency: Option<u32>,
    /// The `autoscaling.knative.dev/*` annotations, and Knative's progress deadline
    /// ([`PROGRESS_DEADLINE_ANNOTATION`]: how long the autoscaler keeps pods that are starting).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `scaleMetricType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_metric_type: Option<String>,
    /// `autoScaling` (KServe 0.15+), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scaling: Option<Value>,
    /// The `serving.kserve.io/*` autoscaling annotations ([`autoscaling::ANNOTATIONS`]): the class,
    /// the deployment mode and the HPA's older metric annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kserve: BTreeMap<String, String>,
}

impl ScalingInputs {
    /// The inputs of an InferenceService's predictor.
    pub fn of(isvc: &InferenceService) -> ScalingInputs {
        ScalingInputs::of_component(isvc, Component::Predictor).expect("every InferenceService has a predictor")
    }

    /// The inputs of one component (its own fields, the service's annotations); `None` when
    /// `isvc` does not have it.
    pub fn of_component(isvc: &InferenceService, component: Component) -> Option<ScalingInputs> {
        let p = component.spec(isvc)?;
        let unsigned = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
        Some(ScalingInputs {
            min_replicas: unsigned(p.min_replicas),
            max_replicas: unsigned(p.max_replicas),
            scale_target: unsigned(p.scale_target),
            scale_metric: p.scale_metric.clone(),
            // Knative's input is the revision's setting ([`RevisionSettings`]), absent when unset.
            container_concurrency: p.container_concurrency.map(|_| RevisionSettings::of(p).container_concurrency),
            annotations: isvc
                .metadata
                .annotations
                .iter()
                .filter(|(k, _)| k.starts_with(AUTOSCALING_PREFIX) || *k == PROGRESS_DEADLINE_ANNOTATION)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            scale_metric_type: p
                .other
                .get("scaleMetricType")
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)),
            auto_scaling: p.other.get("autoScaling").cloned(),
            kserve: isvc
                .metadata
                .annotations
                .iter()
                .filter(|(k, _)| autoscaling::ANNOTATIONS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    /// What scales the component's revisions ([`autoscaling::scaler`]); errors name the field or
    /// annotation of `component`.
    pub fn scaler(&self, component: Component) -> Result<Scaler> {
        let at = format!("spec.{}", component.name());
        autoscaling::scaler(&ScalerInputs {
            at: &at,
            min_replicas: self.min_replicas,
            max_replicas: self.max_replicas,
            scale_target: self.scale_target,
            scale_metric: self.scale_metric.as_deref(),
            scale_metric_type: self.scale_metric_type.as_deref(),
            auto_scaling: self.auto_scaling.as_ref(),
            annotations: &self.kserve,
        })
    }

    /// The component's autoscaler class; the KPA when the recorded inputs name none or an invalid one
    /// (which [`ScalingInputs::resolve_for`] refuses).
    pub fn class(&self) -> Class {
        Class::of(&self.kserve).unwrap_or_default()
    }

    /// The annotation that records the inputs on a revision's Deployment ([`SCALING`], JSON).
    pub fn annotation(&self) -> (String, String) {
        let text = serde_json::to_string(self).expect("options, strings and a map of strings are JSON");
        (SCALING.to_owned(), text)
    }

    /// Read back from a revision Deployment's annotations: the default inputs (the cluster-wide
    /// settings alone) when the annotation is absent or not the JSON [`ScalingInputs::annotation`]
    /// writes. Values are not bounded here: [`ScalingInputs::resolve`] refuses those out of range.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> ScalingInputs {
        annotations.get(SCALING).and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default()
    }

    /// Resolves a predictor's inputs against the cluster-wide config, as KServe hands them to
    /// Knative; the error names the field or annotation.
    pub fn resolve(&self, config: &AutoscalerConfig) -> Result<ScalingSpec> {
        self.resolve_for(config, Component::Predictor)
    }

    /// [`ScalingInputs::resolve`] for `component`'s inputs (errors name its fields).
    ///
    /// The component's class is checked first ([`ScalingInputs::scaler`]). With a class other than
    /// the KPA, `scaleMetric` and `scaleTarget` belong to that class's autoscaler, and an
    /// `autoscaling.knative.dev/*` annotation is refused (nothing would read it); the spec then
    /// gives the replicas a new revision starts with (for `none`, exactly `minReplicas`).
    pub fn resolve_for(&self, config: &AutoscalerConfig, component: Component) -> Result<ScalingSpec> {
        let kpa = self.scaler(component)?.class() == Class::Kpa;
        if let Some(key) = self.annotations.keys().find(|k| !kpa && k.starts_with(AUTOSCALING_PREFIX)) {
            return Err(Error::invalid(
                format!("metadata.annotations[{key}]"),
                format!(
                    "is a setting of the kpa class; this InferenceService's class is {} ({})",
                    self.class().name(),
                    autoscaling::AUTOSCALER_CLASS
                ),
            ));
        }
        let fields = PredictorScaling {
            min_replicas: self.min_replicas,
            max_replicas: self.max_replicas,
            scale_target: self.scale_target.filter(|_| kpa),
            scale_metric: self.scale_metric.clone().filter(|_| kpa),
            container_concurrency: self.container_concurrency,
        };
        let mut spec = ScalingSpec::resolve(&fields, &self.annotations, config).map_err(|e| {
            let key = e.key().to_owned();
            let field = if key.contains('/') {
                format!("metadata.annotations[{key}]")
            } else {
                format!("spec.{}.{key}", component.name())
            };
            Error::invalid(field, e.reason())
        })?;
        if self.class() == Class::None {
            // KServe's `none`: the Deployment has exactly `minReplicas` (0: it starts at zero, and
            // its first request wakes it).
            spec.initial_scale = spec.min_scale;
        }
        Ok(spec)
    }
}

/// Resolves the predictor's scaling fields and `autoscaling.knative.dev/*` annotations against the
/// global config, as KServe hands them to Knative.
pub fn scaling_spec(isvc: &InferenceService, config: &AutoscalerConfig) -> Result<ScalingSpec> {
    ScalingInputs::of(isvc).resolve(config)
}

/// [`scaling_spec`] for one component; `None` when `isvc` does not have it.
pub fn component_scaling_spec(
    isvc: &InferenceService,
    component: Component,
    config: &AutoscalerConfig,
) -> Option<Result<ScalingSpec>> {
    Some(ScalingInputs::of_component(isvc, component)?.resolve_for(config, component))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inputs_round_trip_through_json_and_resolve_alike() {
        let yaml = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: m\n  annotations:\n    autoscaling.knative.dev/target: \"3\"\n    owner: x\nspec:\n  predictor:\n    minReplicas: 0\n    maxReplicas: 6\n    containerConcurrency: 4\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///m\n";
        let isvc = InferenceService::from_yaml(yaml).unwrap();
        let inputs = ScalingInputs::of(&isvc);
        assert_eq!(inputs.annotations.keys().collect::<Vec<_>>(), ["autoscaling.knative.dev/target"]);
        let text = serde_json::to_string(&inputs).unwrap();
        let back: ScalingInputs = serde_json::from_str(&text).unwrap();
        assert_eq!(back, inputs);
        let config = AutoscalerConfig::default();
        assert_eq!(back.resolve(&config).unwrap(), scaling_spec(&isvc, &config).unwrap());
        assert_eq!((back.resolve(&config).unwrap().min_scale, back.resolve(&config).unwrap().max_scale), (0, 6));
    }

    #[test]
    fn the_progress_deadline_reaches_the_autoscaler_through_the_recorded_inputs() {
        let yaml = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: m\n  annotations:\n    serving.knative.dev/progress-deadline: 15m\n    serving.kserve.io/autoscalerClass: none\nspec:\n  predictor:\n    minReplicas: 0\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///m\n";
        let isvc = InferenceService::from_yaml(yaml).unwrap();
        let inputs = ScalingInputs::from_annotations(&BTreeMap::from([ScalingInputs::of(&isvc).annotation()]));
        let spec = inputs.resolve(&AutoscalerConfig::default()).expect("the deadline is no kpa-only setting");
        assert_eq!(spec.progress_deadline, Some(std::time::Duration::from_secs(900)));
        assert_eq!(spec.activation_timeout(), std::time::Duration::from_secs(930));
    }
}
