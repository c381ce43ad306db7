//! The autoscaler objects of an InferenceService's revisions, as pure functions of their
//! Deployments: each revision whose recorded class ([`ScalingInputs::scaler`]) is `hpa` gets an
//! `autoscaling/v2` HorizontalPodAutoscaler, and `keda` a KEDA `ScaledObject`, named after the
//! revision, aimed at its Deployment and owned by it (a controller owner reference), so that it
//! goes when the revision is collected. A class never changes within a revision (the class and the
//! deployment mode are `serving.kserve.io/*` annotations, part of the revision's template), so a
//! switch of class rolls a new revision with its own object; an object of this InferenceService
//! that no revision wants any more is deleted at once, as is that of a revision kept at zero
//! without traffic (`reserve`). `kpa`, `external` and `none` make nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use serde_json::json;
use skiff_api::InferenceService;
use skiff_api::autoscaling::{AUTOSCALER_CLASS, Class, Hpa, Keda, Scaler};
use skiff_api::revision::Component;
use skiff_api::scaling::ScalingInputs;
use skiff_api::settings::component_of;

use crate::desired::{applied_hash, stamp};

/// The CRD a `keda` revision needs, as its condition names it when the cluster lacks it.
pub const SCALED_OBJECT_CRD: &str = "scaledobjects.keda.sh";

/// KEDA's `ScaledObject` (`keda.sh/v1alpha1`).
pub fn scaled_object_resource() -> ApiResource {
    ApiResource {
        group: "keda.sh".into(),
        version: "v1alpha1".into(),
        api_version: "keda.sh/v1alpha1".into(),
        kind: "ScaledObject".into(),
        plural: "scaledobjects".into(),
    }
}

/// Which kinds of autoscaler object an InferenceService's reconcile must read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// Some revision (or the spec, for its next one) has the `hpa` class.
    pub hpa: bool,
    /// Some revision has the `keda` class.
    pub keda: bool,
    /// The spec asks for `keda`: without KEDA's CRD it cannot be realised.
    pub keda_wanted: bool,
}

/// What `manifest` and its revision `deployments` need read; nothing for KPA services, which
/// therefore make no more calls than before.
pub fn needs(manifest: &InferenceService, deployments: &[Deployment]) -> Needs {
    let wanted: Vec<Class> = Component::of(manifest)
        .filter_map(|c| ScalingInputs::of_component(manifest, c))
        .map(|inputs| inputs.class())
        .collect();
    let recorded: Vec<Class> =
        deployments.iter().map(|d| ScalingInputs::from_annotations(d.annotations()).class()).collect();
    let any = |class: Class| wanted.iter().chain(&recorded).any(|c| *c == class);
    Needs { hpa: any(Class::Hpa), keda: any(Class::Keda), keda_wanted: wanted.contains(&Class::Keda) }
}

/// The writes that bring the autoscaler objects in line with the revisions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScalerPlan {
    /// HPAs to server-side apply (missing or changed).
    pub hpas: Vec<HorizontalPodAutoscaler>,
    /// ScaledObjects to server-side apply (missing or changed).
    pub scaled_objects: Vec<DynamicObject>,
    /// HPAs no revision wants.
    pub delete_hpas: Vec<String>,
    /// ScaledObjects no revision wants.
    pub delete_scaled_objects: Vec<String>,
}

/// The plan for the revision `deployments` (as stored, with their uids) against the objects that
/// exist; `keda` is false when the cluster has no ScaledObject CRD (none is made then).
pub fn plan(
    deployments: &[Deployment],
    hpas: &[HorizontalPodAutoscaler],
    scaled_objects: &[DynamicObject],
    keda: bool,
) -> ScalerPlan {
    let mut plan = ScalerPlan::default();
    let (mut wanted_hpas, mut wanted_scaled) = (Vec::new(), Vec::new());
    // A revision kept at zero without traffic has no autoscaler object: one would scale it up.
    for deployment in deployments.iter().filter(|d| !crate::revisions::reserved(d)) {
        let component = component_of(deployment.labels()).unwrap_or(Component::Predictor);
        match ScalingInputs::from_annotations(deployment.annotations()).scaler(component) {
            Ok(Scaler::Hpa(spec)) => {
                let wanted = hpa(deployment, &spec);
                wanted_hpas.push(wanted.name_any());
                let current = hpas.iter().find(|h| h.name_any() == wanted.name_any());
                if current.is_none_or(|c| applied_hash(&c.metadata) != applied_hash(&wanted.metadata)) {
                    plan.hpas.push(wanted);
                }
            }
            Ok(Scaler::Keda(spec)) if keda => {
                let wanted = scaled_object(deployment, &spec);
                wanted_scaled.push(wanted.name_any());
                let current = scaled_objects.iter().find(|s| s.name_any() == wanted.name_any());
                if current.is_none_or(|c| applied_hash(&c.metadata) != applied_hash(&wanted.metadata)) {
                    plan.scaled_objects.push(wanted);
                }
            }
            _ => {}
        }
    }
    plan.delete_hpas = hpas.iter().map(|h| h.name_any()).filter(|n| !wanted_hpas.contains(n)).collect();
    plan.delete_scaled_objects =
        scaled_objects.iter().map(|s| s.name_any()).filter(|n| !wanted_scaled.contains(n)).collect();
    plan
}

/// The metadata of a revision's autoscaler object: its name, namespace and labels, owned by its
/// Deployment, annotated with the class.
fn metadata(deployment: &Deployment, class: Class) -> ObjectMeta {
    let owner = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: deployment.name_any(),
        uid: deployment.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    ObjectMeta {
        name: Some(deployment.name_any()),
        namespace: deployment.namespace(),
        labels: Some(deployment.labels().clone()),
        annotations: Some(BTreeMap::from([(AUTOSCALER_CLASS.to_owned(), class.name().to_owned())])),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    }
}

/// The HPA of a revision, as KServe's `createHPA` makes it for a component.
pub fn hpa(deployment: &Deployment, spec: &Hpa) -> HorizontalPodAutoscaler {
    let spec = HorizontalPodAutoscalerSpec {
        scale_target_ref: CrossVersionObjectReference {
            api_version: Some("apps/v1".into()),
            kind: "Deployment".into(),
            name: deployment.name_any(),
        },
        min_replicas: Some(spec.min_replicas),
        max_replicas: spec.max_replicas,
        metrics: Some(spec.metrics.clone()),
        behavior: spec.behavior.clone(),
    };
    let mut metadata = metadata(deployment, Class::Hpa);
    stamp(&mut metadata, &spec);
    HorizontalPodAutoscaler { metadata, spec: Some(spec), status: None }
}

/// The ScaledObject of a revision, as KServe's `createKedaScaledObject` makes it for a component.
pub fn scaled_object(deployment: &Deployment, spec: &Keda) -> DynamicObject {
    let name = deployment.name_any();
    let triggers = spec.triggers_for(&deployment.namespace().unwrap_or_default(), &name);
    let mut body = json!({
        "scaleTargetRef": {"name": name},
        "triggers": triggers,
        "minReplicaCount": spec.min_replicas,
        "maxReplicaCount": spec.max_replicas,
    });
    if let Some(behavior) = &spec.behavior {
        body["advanced"] = json!({"horizontalPodAutoscalerConfig": {"behavior": behavior}});
    }
    let mut metadata = metadata(deployment, Class::Keda);
    stamp(&mut metadata, &body);
    let mut object = DynamicObject::new(&name, &scaled_object_resource()).data(json!({"spec": body}));
    object.metadata = metadata;
    object
}

#[cfg(test)]
mod tests;
