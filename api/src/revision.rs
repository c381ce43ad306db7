//! Revisions: what defines one, and how they are named.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::isvc::{InferenceService, PredictorSpec};

/// Annotation prefixes that are part of a revision (changing them rolls a new one).
const REVISION_ANNOTATIONS: [&str; 2] = ["autoscaling.knative.dev/", "serving.kserve.io/"];

/// What defines a predictor revision: its spec without the traffic setting, plus the
/// annotations that configure it. Two equal templates are the same revision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RevisionTemplate {
    /// `spec.predictor` with `canaryTrafficPercent` removed.
    pub predictor: PredictorSpec,
    /// The `autoscaling.knative.dev/*` and `serving.kserve.io/*` annotations.
    pub annotations: BTreeMap<String, String>,
}

impl RevisionTemplate {
    /// The template of an InferenceService's predictor.
    pub fn of(isvc: &InferenceService) -> RevisionTemplate {
        let mut predictor = isvc.spec.predictor.clone();
        predictor.canary_traffic_percent = None;
        let annotations = isvc
            .metadata
            .annotations
            .iter()
            .filter(|(k, _)| REVISION_ANNOTATIONS.iter().any(|p| k.starts_with(p)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        RevisionTemplate { predictor, annotations }
    }
}

/// `<service>-<component>-<number, five digits>`, as Knative names revisions.
pub fn revision_name(service: &str, component: &str, number: u32) -> String {
    format!("{service}-{component}-{number:05}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_count_from_one_with_five_digits() {
        assert_eq!(revision_name("iris", "predictor", 1), "iris-predictor-00001");
        assert_eq!(revision_name("iris", "predictor", 123), "iris-predictor-00123");
    }

    #[test]
    fn traffic_and_unrelated_annotations_do_not_change_the_template() {
        let yaml = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: m\nspec:\n  predictor:\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///m\n";
        let base = InferenceService::from_yaml(yaml).unwrap();
        let mut canary = base.clone();
        canary.spec.predictor.canary_traffic_percent = Some(20);
        canary.metadata.annotations.insert("owner".into(), "team-a".into());
        assert_eq!(RevisionTemplate::of(&base), RevisionTemplate::of(&canary));
        let mut scaled = base.clone();
        scaled.metadata.annotations.insert("autoscaling.knative.dev/target".into(), "5".into());
        assert_ne!(RevisionTemplate::of(&base), RevisionTemplate::of(&scaled));
        let mut moved = base;
        moved.spec.predictor.model.as_mut().unwrap().storage_uri = Some("file:///other".into());
        assert_ne!(RevisionTemplate::of(&canary), RevisionTemplate::of(&moved));
    }
}
