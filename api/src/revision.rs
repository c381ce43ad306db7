//! Revisions: what defines one, and how they are named.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::isvc::{InferenceService, PredictorSpec};

/// Annotation prefixes that are part of a revision (changing them rolls a new one).
const REVISION_ANNOTATIONS: [&str; 2] = ["autoscaling.knative.dev/", "serving.kserve.io/"];

/// An InferenceService component that has revisions of its own, each scaled on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    /// `spec.predictor`: the model server.
    Predictor,
    /// `spec.transformer`: pre/post-processing that calls the predictor.
    Transformer,
    /// `spec.explainer`: answers `:explain`.
    Explainer,
}

impl Component {
    /// Every component, predictor first.
    pub const ALL: [Component; 3] = [Component::Predictor, Component::Transformer, Component::Explainer];

    /// Its name in revision names, labels and `status.components`.
    pub fn name(self) -> &'static str {
        match self {
            Component::Predictor => PREDICTOR,
            Component::Transformer => TRANSFORMER,
            Component::Explainer => EXPLAINER,
        }
    }

    /// Its spec in `isvc`, when set (the predictor always is).
    pub fn spec(self, isvc: &InferenceService) -> Option<&PredictorSpec> {
        match self {
            Component::Predictor => Some(&isvc.spec.predictor),
            Component::Transformer => isvc.spec.transformer.as_ref(),
            Component::Explainer => isvc.spec.explainer.as_ref(),
        }
    }

    /// The components `isvc` has.
    pub fn of(isvc: &InferenceService) -> impl Iterator<Item = Component> + '_ {
        Component::ALL.into_iter().filter(|c| c.spec(isvc).is_some())
    }
}

/// What defines a revision of a component: its spec without the traffic setting, plus the
/// annotations that configure it. Two equal templates are the same revision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RevisionTemplate {
    /// The component's spec (`spec.predictor`, `spec.transformer`, ...) with
    /// `canaryTrafficPercent` removed.
    pub predictor: PredictorSpec,
    /// The `autoscaling.knative.dev/*` and `serving.kserve.io/*` annotations.
    pub annotations: BTreeMap<String, String>,
}

impl RevisionTemplate {
    /// The template of an InferenceService's predictor.
    pub fn of(isvc: &InferenceService) -> RevisionTemplate {
        RevisionTemplate::of_component(isvc, Component::Predictor).expect("every InferenceService has a predictor")
    }

    /// The template of one component, `None` when `isvc` does not have it.
    pub fn of_component(isvc: &InferenceService, component: Component) -> Option<RevisionTemplate> {
        let mut predictor = component.spec(isvc)?.clone();
        predictor.canary_traffic_percent = None;
        let annotations = isvc
            .metadata
            .annotations
            .iter()
            .filter(|(k, _)| REVISION_ANNOTATIONS.iter().any(|p| k.starts_with(p)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(RevisionTemplate { predictor, annotations })
    }
}

/// The predictor's name (KServe's `component` label).
pub const PREDICTOR: &str = "predictor";
/// The transformer's name.
pub const TRANSFORMER: &str = "transformer";
/// The explainer's name.
pub const EXPLAINER: &str = "explainer";
pub use crate::limits::{DNS_LABEL_MAX, MAX_NAME_LENGTH, MAX_REVISION};

/// Revisions of a component without traffic that stay, scaled to zero, for a rollback: the previous
/// rolled-out revision first, then the newest others; older ones are collected. Knative's revision
/// GC (`config-gc`) keeps between `min-non-active-revisions` (20) and `max-non-active-revisions`
/// (1000) of them for hours; Skiff keeps two, since a rollback is to the last spec or two, and each
/// kept revision is a Deployment (on a cluster) or a known revision (in `skiff up`).
pub const KEPT_INACTIVE_REVISIONS: usize = 2;

/// The revision a component's template maps to among its existing revisions (oldest first, as
/// `(name, template or its hash)`): the newest one whose template equals `wanted`, since two equal
/// templates are the same revision. Restoring an earlier spec so routes to the revision that ran it
/// instead of creating a new one (KServe, through Knative, would create one). Both modes decide
/// by this one rule: `skiff up` compares [`RevisionTemplate`]s, the operator their hashes.
pub fn same_revision<'a, T: PartialEq + ?Sized + 'a>(
    existing: impl DoubleEndedIterator<Item = (&'a str, &'a T)>,
    wanted: &T,
) -> Option<&'a str> {
    existing.rev().find(|(_, template)| *template == wanted).map(|(name, _)| name)
}

/// `<service>-<component>-<number, five digits>`, as Knative names revisions.
pub fn revision_name(service: &str, component: &str, number: u32) -> String {
    format!("{service}-{component}-{number:05}")
}

/// The number of the revision after `highest` (0: none yet); an error once [`MAX_REVISION`] is
/// taken, never an overflow.
pub fn next_number(service: &str, highest: u32) -> Result<u32> {
    highest
        .checked_add(1)
        .filter(|n| *n <= MAX_REVISION)
        .ok_or_else(|| Error::RevisionsExhausted { service: service.to_owned(), max: MAX_REVISION })
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
    fn the_longest_name_makes_revision_names_of_63_characters() {
        let longest = "a".repeat(MAX_NAME_LENGTH);
        assert_eq!(MAX_NAME_LENGTH, 47);
        assert_eq!(revision_name(&longest, PREDICTOR, MAX_REVISION).len(), DNS_LABEL_MAX);
        assert!(format!("{longest}-{PREDICTOR}").len() < DNS_LABEL_MAX);
        assert!(format!("latest-{longest}").len() < DNS_LABEL_MAX);
    }

    #[test]
    fn numbers_stop_at_five_digits_without_overflow() {
        assert_eq!(next_number("iris", 0).unwrap(), 1);
        assert_eq!(next_number("iris", MAX_REVISION - 1).unwrap(), MAX_REVISION);
        for highest in [MAX_REVISION, u32::MAX] {
            let err = next_number("iris", highest).unwrap_err().to_string();
            assert_eq!(
                err,
                "iris: every revision number up to 99999 is taken; delete and re-create the InferenceService \
                 to number its revisions from 1 again"
            );
        }
    }

    #[test]
    fn a_template_maps_to_the_newest_revision_that_ran_it() {
        let existing = [("m-predictor-00001", "a"), ("m-predictor-00002", "b"), ("m-predictor-00003", "a")];
        let iter = || existing.iter().map(|(n, t)| (*n, *t));
        assert_eq!(same_revision(iter(), "a"), Some("m-predictor-00003"));
        assert_eq!(same_revision(iter(), "b"), Some("m-predictor-00002"));
        assert_eq!(same_revision(iter(), "c"), None, "a new template makes a new revision");
        assert_eq!(same_revision(std::iter::empty::<(&str, &str)>(), "a"), None);
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
