//! The InferenceService's status from what the plan decided and what the cluster shows: conditions
//! (`PredictorReady`, `TransformerReady` and `ExplainerReady` for the components it has,
//! `IngressReady`, and `Ready` when all of them are, as KServe), URLs, and each component's
//! revisions and traffic (`status.components.<component>`), and the predictor's model
//! (`status.modelStatus`, [`model`]).

use std::collections::BTreeMap;

use skiff_api::revision::Component;
use skiff_api::status::{
    Addressable, BLOCKED_BY_FAILED_LOAD, ComponentStatus, Condition, EXPLAINER_READY, IN_PROGRESS, INGRESS_READY,
    InferenceServiceStatus, ModelStatus, PREDICTOR_READY, READY, Replicas, TRANSFORMER_READY, UP_TO_DATE,
    set_condition,
};
use skiff_api::traffic::{RolledOut, TrafficTarget};

use crate::platform::Platform;
use crate::revisions::LoadFailure;

/// Where the InferenceService is reachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Urls {
    /// `http://<name>.<namespace>.<domain>`.
    pub url: String,
    /// `http://<name>-predictor.<namespace>.<domain>`.
    pub predictor: String,
    /// `http://<name>.<namespace>.svc.cluster.local`.
    pub address: String,
}

impl Urls {
    /// The URLs of `name` in `namespace`.
    pub fn new(name: &str, namespace: &str, platform: &Platform) -> Urls {
        let scheme = &platform.url_scheme;
        let domain = &platform.domain;
        Urls {
            url: format!("{scheme}://{name}.{namespace}.{domain}"),
            predictor: format!("{scheme}://{name}-predictor.{namespace}.{domain}"),
            address: format!("http://{name}.{namespace}.svc.cluster.local"),
        }
    }
}

/// A condition's outcome: `Ok(())` is `True`, `Err((reason, message))` is `False`.
pub type Verdict = Result<(), (&'static str, String)>;

/// Everything the status is computed from.
#[derive(Debug, Clone)]
pub struct Observation<'a> {
    /// The status as last written.
    pub old: &'a InferenceServiceStatus,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// URLs.
    pub urls: Urls,
    /// The components the InferenceService has, predictor first.
    pub components: Vec<ComponentObservation>,
    /// Whether every revision with a share, of any component, is reachable (has its Service).
    pub ingress: Verdict,
    /// The predictor's model ([`model`]).
    pub model: Option<ModelStatus>,
}

/// One component's revisions, traffic and readiness.
#[derive(Debug, Clone)]
pub struct ComponentObservation {
    /// Which component.
    pub component: Component,
    /// The newest revision.
    pub latest_created: Option<String>,
    /// The newest revision that has been ready.
    pub latest_ready: Option<String>,
    /// The rolled-out revisions.
    pub rolled_out: RolledOut,
    /// The split.
    pub traffic: Vec<TrafficTarget>,
    /// Whether the latest rolled-out revision serves (has an available replica, or is scaled to zero).
    pub ready: Verdict,
    /// The replicas of the revisions with a share.
    pub replicas: BTreeMap<String, Replicas>,
    /// What the component's condition says while it is true: that `canaryTrafficPercent` changes
    /// nothing after a full rollout ([`skiff_api::traffic::idle_canary`]).
    pub note: Option<String>,
}

/// The condition that says whether `component` serves.
pub fn condition_type(component: Component) -> &'static str {
    match component {
        Component::Predictor => PREDICTOR_READY,
        Component::Transformer => TRANSFORMER_READY,
        Component::Explainer => EXPLAINER_READY,
    }
}

/// The status for `o`; conditions keep their transition time unless their status changes, so an
/// unchanged world gives a status equal to the old one. `now` is an RFC 3339 time. A component the
/// InferenceService no longer has loses its entry and its condition. The URL stays the
/// service's: a transformer's and an explainer's is the service's too (the router sends the
/// service's requests to its transformer, and explain requests to its explainer); the predictor's
/// is its own host, `<name>-predictor`.
pub fn compute(o: &Observation, now: &str) -> InferenceServiceStatus {
    let mut status = o.old.clone();
    status.observed_generation = o.generation;
    status.url = Some(o.urls.url.clone());
    status.address = Some(Addressable { url: o.urls.address.clone() });
    status.components.retain(|name, _| o.components.iter().any(|c| c.component.name() == name));
    status.model_status = o.model.clone();
    for c in &o.components {
        let url = match c.component {
            Component::Predictor => &o.urls.predictor,
            Component::Transformer | Component::Explainer => &o.urls.url,
        };
        status.components.insert(
            c.component.name().to_owned(),
            ComponentStatus {
                latest_created_revision: c.latest_created.clone(),
                latest_ready_revision: c.latest_ready.clone(),
                previous_rolledout_revision: c.rolled_out.previous.clone(),
                latest_rolledout_revision: c.rolled_out.latest.clone(),
                traffic: c.traffic.clone(),
                url: Some(url.clone()),
                replicas: c.replicas.clone(),
            },
        );
    }
    for component in Component::ALL {
        if !o.components.iter().any(|c| c.component == component) {
            status.conditions.retain(|c| c.type_ != condition_type(component));
        }
    }
    let verdicts: Vec<(&str, &Verdict)> =
        o.components.iter().map(|c| (condition_type(c.component), &c.ready)).collect();
    set_conditions(&mut status, &verdicts, &o.ingress, now);
    for c in o.components.iter().filter(|c| c.ready.is_ok()) {
        let condition = status.conditions.iter_mut().find(|x| x.type_ == condition_type(c.component));
        if let (Some(condition), Some(note)) = (condition, &c.note) {
            condition.message = Some(note.clone());
        }
    }
    status
}

/// The predictor's `modelStatus`: why its latest revision's model failed to load, else its latest
/// rolled-out revision's (`lastFailureInfo`, from `failures`); and whether the latest revision
/// serves (`UpToDate`), is on its way (`InProgress`: starting, or failed for a cause a retry can
/// fix) or is blocked by a failure a retry will not fix (`BlockedByFailedLoad`, by
/// [`skiff_dataplane::failing::Cause::retry_helps`]).
pub fn model(predictor: &ComponentObservation, failures: &BTreeMap<String, LoadFailure>) -> ModelStatus {
    let latest = predictor.latest_created.as_deref();
    let failure_of = |revision: Option<&str>| revision.and_then(|r| failures.get(r).map(|f| f.info(r)));
    let latest_failure = latest.and_then(|r| failures.get(r));
    let transition_status = match latest_failure {
        Some(f) if !f.cause().retry_helps() => BLOCKED_BY_FAILED_LOAD,
        None if latest.is_some() && predictor.latest_ready.as_deref() == latest => UP_TO_DATE,
        _ => IN_PROGRESS,
    };
    ModelStatus {
        transition_status: transition_status.to_owned(),
        last_failure_info: failure_of(latest).or_else(|| failure_of(predictor.rolled_out.latest.as_deref())),
    }
}

/// The status when the spec cannot be served: the old one with the conditions saying why
/// (`PredictorReady` and `Ready` False with `reason` and `message`).
pub fn refused(
    old: &InferenceServiceStatus,
    generation: Option<i64>,
    urls: Urls,
    reason: &'static str,
    message: String,
    now: &str,
) -> InferenceServiceStatus {
    let mut status = old.clone();
    status.observed_generation = generation;
    status.url = Some(urls.url);
    status.address = Some(Addressable { url: urls.address });
    let verdict: Verdict = Err((reason, message));
    let ingress = match old.condition(INGRESS_READY) {
        Some(c) if c.is_true() => Ok(()),
        _ => Err(("InvalidSpec", "no revision to route to".to_owned())),
    };
    set_conditions(&mut status, &[(PREDICTOR_READY, &verdict)], &ingress, now);
    status
}

/// Sets each component's condition, `IngressReady`, and `Ready`: the first of them that is not
/// true (components in order, then ingress), else true.
fn set_conditions(status: &mut InferenceServiceStatus, components: &[(&str, &Verdict)], ingress: &Verdict, now: &str) {
    let condition = |type_: &str, verdict: &Verdict| match verdict {
        Ok(()) => Condition::new(type_, true, None, None, now),
        Err((reason, message)) => Condition::new(type_, false, Some(reason), Some(message.clone()), now),
    };
    let ready = components.iter().map(|(_, v)| *v).chain([ingress]).find(|v| v.is_err()).cloned().unwrap_or(Ok(()));
    for (type_, verdict) in components.iter().copied().chain([(INGRESS_READY, ingress), (READY, &ready)]) {
        set_condition(&mut status.conditions, condition(type_, verdict));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(component: Component, ready: Verdict) -> ComponentObservation {
        let revision = format!("iris-{}-00001", component.name());
        ComponentObservation {
            component,
            latest_created: Some(revision.clone()),
            latest_ready: Some(revision.clone()),
            rolled_out: RolledOut { latest: Some(revision), previous: None },
            traffic: vec![],
            ready,
            replicas: BTreeMap::new(),
            note: None,
        }
    }

    fn observation(old: &InferenceServiceStatus, predictor: Verdict) -> Observation<'_> {
        Observation {
            old,
            generation: Some(2),
            urls: Urls::new("iris", "ml", &Platform::default()),
            components: vec![component(Component::Predictor, predictor)],
            ingress: Ok(()),
            model: None,
        }
    }

    #[test]
    fn ready_needs_predictor_and_ingress_and_reuses_transition_times() {
        let empty = InferenceServiceStatus::default();
        let not_ready = compute(&observation(&empty, Err(("NoAvailableReplicas", "0 of 1".into()))), "t1");
        assert_eq!(not_ready.url.as_deref(), Some("http://iris.ml.example.com"));
        assert_eq!(not_ready.address.as_ref().unwrap().url, "http://iris.ml.svc.cluster.local");
        let ready = not_ready.condition(READY).unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("False", Some("NoAvailableReplicas")));
        assert!(not_ready.condition(INGRESS_READY).unwrap().is_true());

        let now_ready = compute(&observation(&not_ready, Ok(())), "t2");
        assert!(now_ready.condition(READY).unwrap().is_true());
        assert_eq!(now_ready.condition(READY).unwrap().last_transition_time.as_deref(), Some("t2"));
        assert_eq!(now_ready.condition(INGRESS_READY).unwrap().last_transition_time.as_deref(), Some("t1"));
        assert_eq!(compute(&observation(&now_ready, Ok(())), "t3"), now_ready, "nothing changed: equal status");
    }

    #[test]
    fn ready_needs_every_component_and_a_removed_component_leaves_the_status() {
        let empty = InferenceServiceStatus::default();
        let mut o = observation(&empty, Ok(()));
        o.components.push(component(Component::Transformer, Err(("RevisionNotReady", "0 of 1".into()))));
        o.components.push(component(Component::Explainer, Ok(())));
        let status = compute(&o, "t1");
        let state = |type_: &str| {
            let c = status.condition(type_).unwrap();
            (c.status.clone(), c.reason.clone())
        };
        assert_eq!(state(PREDICTOR_READY), ("True".into(), None));
        assert_eq!(state(TRANSFORMER_READY), ("False".into(), Some("RevisionNotReady".into())));
        assert_eq!(state(EXPLAINER_READY), ("True".into(), None));
        assert_eq!(state(READY), ("False".into(), Some("RevisionNotReady".into())), "the transformer is not ready");
        let transformer = status.component("transformer").unwrap();
        assert_eq!(transformer.latest_created_revision.as_deref(), Some("iris-transformer-00001"));
        assert_eq!(transformer.url.as_deref(), Some("http://iris.ml.example.com"), "the service's URL");
        assert_eq!(status.predictor().unwrap().url.as_deref(), Some("http://iris-predictor.ml.example.com"));
        assert_eq!(status.url.as_deref(), Some("http://iris.ml.example.com"));

        o.components[1].ready = Ok(());
        let all = compute(&Observation { old: &status, ..o.clone() }, "t2");
        assert!(all.condition(READY).unwrap().is_true());

        let predictor_only = compute(&observation(&all, Ok(())), "t3");
        assert!(predictor_only.component("transformer").is_none() && predictor_only.component("explainer").is_none());
        assert!(predictor_only.condition(TRANSFORMER_READY).is_none());
        assert!(predictor_only.condition(EXPLAINER_READY).is_none());
        assert!(predictor_only.condition(READY).unwrap().is_true());
    }

    #[test]
    fn a_refused_spec_keeps_revisions_and_says_why() {
        let empty = InferenceServiceStatus::default();
        let ready = compute(&observation(&empty, Ok(())), "t1");
        let urls = Urls::new("iris", "ml", &Platform::default());
        let refused =
            refused(&ready, Some(3), urls, "InvalidSpec", "spec.predictor.model.storageUri: bad".into(), "t2");
        assert_eq!(refused.predictor(), ready.predictor());
        let c = refused.condition(READY).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("InvalidSpec")));
        assert!(refused.condition(INGRESS_READY).unwrap().is_true());
        assert_eq!(refused.observed_generation, Some(3));
    }
}
