//! The InferenceService's status from what the plan decided and what the cluster shows: conditions
//! (`PredictorReady`, `IngressReady`, `Ready`), URLs, and the predictor's revisions and traffic.

use std::collections::BTreeMap;

use skiff_api::status::{
    Addressable, ComponentStatus, Condition, INGRESS_READY, InferenceServiceStatus, PREDICTOR, PREDICTOR_READY, READY,
    Replicas, set_condition,
};
use skiff_api::traffic::{RolledOut, TrafficTarget};

use crate::platform::Platform;

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
    /// The newest revision.
    pub latest_created: Option<String>,
    /// The newest revision that has been ready.
    pub latest_ready: Option<String>,
    /// The rolled-out revisions.
    pub rolled_out: RolledOut,
    /// The split.
    pub traffic: Vec<TrafficTarget>,
    /// Whether the latest rolled-out revision serves (has an available replica, or is scaled to zero).
    pub predictor: Verdict,
    /// Whether every revision with a share is reachable (has its Service).
    pub ingress: Verdict,
    /// The replicas of the revisions with a share.
    pub replicas: BTreeMap<String, Replicas>,
}

/// The status for `o`; conditions keep their transition time unless their status changes, so an
/// unchanged world gives a status equal to the old one. `now` is an RFC 3339 time.
pub fn compute(o: &Observation, now: &str) -> InferenceServiceStatus {
    let mut status = o.old.clone();
    status.observed_generation = o.generation;
    status.url = Some(o.urls.url.clone());
    status.address = Some(Addressable { url: o.urls.address.clone() });
    status.components.insert(
        PREDICTOR.to_owned(),
        ComponentStatus {
            latest_created_revision: o.latest_created.clone(),
            latest_ready_revision: o.latest_ready.clone(),
            previous_rolledout_revision: o.rolled_out.previous.clone(),
            latest_rolledout_revision: o.rolled_out.latest.clone(),
            traffic: o.traffic.clone(),
            url: Some(o.urls.predictor.clone()),
            replicas: o.replicas.clone(),
        },
    );
    set_conditions(&mut status, &o.predictor, &o.ingress, now);
    status
}

/// The status when the spec cannot be served: the old one with the conditions saying why.
pub fn refused(
    old: &InferenceServiceStatus,
    generation: Option<i64>,
    urls: Urls,
    message: String,
    now: &str,
) -> InferenceServiceStatus {
    let mut status = old.clone();
    status.observed_generation = generation;
    status.url = Some(urls.url);
    status.address = Some(Addressable { url: urls.address });
    let verdict: Verdict = Err(("InvalidSpec", message));
    let ingress = match old.condition(INGRESS_READY) {
        Some(c) if c.is_true() => Ok(()),
        _ => Err(("InvalidSpec", "no revision to route to".to_owned())),
    };
    set_conditions(&mut status, &verdict, &ingress, now);
    status
}

fn set_conditions(status: &mut InferenceServiceStatus, predictor: &Verdict, ingress: &Verdict, now: &str) {
    let condition = |type_: &str, verdict: &Verdict| match verdict {
        Ok(()) => Condition::new(type_, true, None, None, now),
        Err((reason, message)) => Condition::new(type_, false, Some(reason), Some(message.clone()), now),
    };
    let ready = predictor.clone().and(ingress.clone());
    for (type_, verdict) in [(PREDICTOR_READY, predictor), (INGRESS_READY, ingress), (READY, &ready)] {
        set_condition(&mut status.conditions, condition(type_, verdict));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(old: &InferenceServiceStatus, predictor: Verdict) -> Observation<'_> {
        Observation {
            old,
            generation: Some(2),
            urls: Urls::new("iris", "ml", &Platform::default()),
            latest_created: Some("iris-predictor-00001".into()),
            latest_ready: Some("iris-predictor-00001".into()),
            rolled_out: RolledOut { latest: Some("iris-predictor-00001".into()), previous: None },
            traffic: vec![],
            predictor,
            ingress: Ok(()),
            replicas: BTreeMap::new(),
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
    fn a_refused_spec_keeps_revisions_and_says_why() {
        let empty = InferenceServiceStatus::default();
        let ready = compute(&observation(&empty, Ok(())), "t1");
        let urls = Urls::new("iris", "ml", &Platform::default());
        let refused = refused(&ready, Some(3), urls, "spec.predictor.model.storageUri: bad".into(), "t2");
        assert_eq!(refused.predictor(), ready.predictor());
        let c = refused.condition(READY).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("InvalidSpec")));
        assert!(refused.condition(INGRESS_READY).unwrap().is_true());
        assert_eq!(refused.observed_generation, Some(3));
    }
}
