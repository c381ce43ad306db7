//! `status` of an InferenceService, as KServe writes it: conditions, URLs, the predictor's
//! revisions and traffic, and its model's state (`modelStatus`: why its load failed, and whether
//! that blocks it). The operator computes it; the router reads the traffic from it, the activator
//! the model's state.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition: the predictor's latest rolled-out revision can serve.
pub const PREDICTOR_READY: &str = "PredictorReady";
/// Condition: the transformer's latest rolled-out revision can serve.
pub const TRANSFORMER_READY: &str = "TransformerReady";
/// Condition: the explainer's latest rolled-out revision can serve.
pub const EXPLAINER_READY: &str = "ExplainerReady";
/// Condition: every revision that takes traffic has its Service, so the router can reach it.
pub const INGRESS_READY: &str = "IngressReady";
/// Condition: the InferenceService serves (all of the above).
pub const READY: &str = "Ready";
/// The predictor's key in [`InferenceServiceStatus::components`].
pub const PREDICTOR: &str = "predictor";

/// `status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InferenceServiceStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `PredictorReady`, `IngressReady` and `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Where clients reach the service through the router: `http://<name>.<namespace>.<domain>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The cluster-local address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Addressable>,
    /// Per component (`predictor`, `transformer`, `explainer`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub components: BTreeMap<String, ComponentStatus>,
    /// The predictor's model: whether its revisions are up to date, and why loading it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_status: Option<ModelStatus>,
}

/// [`ModelStatus::transition_status`]: the latest revision serves.
pub const UP_TO_DATE: &str = "UpToDate";
/// [`ModelStatus::transition_status`]: the latest revision is on its way (its replicas start, or
/// failed for a cause a retry can fix).
pub const IN_PROGRESS: &str = "InProgress";
/// [`ModelStatus::transition_status`]: the latest load failed for a cause a retry will not fix
/// (a URI, a model missing or forbidden in its store, too large, a corrupt archive): only a change
/// of the InferenceService or of the store makes it serve.
pub const BLOCKED_BY_FAILED_LOAD: &str = "BlockedByFailedLoad";

/// `status.modelStatus`, KServe's: the state of the predictor's model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelStatus {
    /// `UpToDate`, `InProgress` or `BlockedByFailedLoad`.
    pub transition_status: String,
    /// Why the model's latest load failed, until a replica of that revision is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_info: Option<FailureInfo>,
}

/// KServe's `FailureInfo`: one failed load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureInfo {
    /// The container that failed: `storage-initializer` (fetching the model) or `kserve-container`
    /// (none when no pod could be created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// `ModelLoadFailed`, or why a replica cannot be started: the kubelet's reason for a container
    /// it cannot start (`ImagePullBackOff`, `CreateContainerConfigError`, ...) or `FailedCreate`.
    pub reason: String,
    /// What went wrong: the container's termination message, else its exit code.
    pub message: String,
    /// The revision whose replica failed.
    pub model_revision_name: String,
    /// When the failed run ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The container's exit code (`skiff-fetch`'s tells the kind of fetch failure).
    pub exit_code: i32,
}

/// A condition, as Knative writes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `PredictorReady`, `IngressReady`, `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,
    /// When `status` last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// One CamelCase word for the cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What a person should know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// An address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Addressable {
    /// The URL.
    pub url: String,
}

/// One component's revisions and traffic (`status.components.predictor`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    /// The newest revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_created_revision: Option<String>,
    /// The newest revision that has been ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_ready_revision: Option<String>,
    /// The revision that took all traffic before the latest rolled-out one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_rolledout_revision: Option<String>,
    /// The revision that last took all traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_rolledout_revision: Option<String>,
    /// The split across revisions; shares add up to 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traffic: Vec<TrafficTarget>,
    /// Where clients reach this component through the router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The replicas of each revision that takes traffic, by revision name (Skiff's addition, as
    /// Knative's Revision status carries desired and actual replicas).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replicas: BTreeMap<String, Replicas>,
}

/// A revision's replicas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Replicas {
    /// Asked for (`spec.replicas` of its Deployment: the autoscaler's answer).
    pub desired: i32,
    /// Available now.
    pub ready: i32,
}

impl Condition {
    /// A condition that is `True` when `ok`, else `False`; `at` is the transition time to record.
    pub fn new(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>, at: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: if ok { "True" } else { "False" }.to_owned(),
            last_transition_time: Some(at.to_owned()),
            reason: reason.map(str::to_owned),
            message,
        }
    }

    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

impl InferenceServiceStatus {
    /// The condition of that type.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// The predictor's status.
    pub fn predictor(&self) -> Option<&ComponentStatus> {
        self.components.get(PREDICTOR)
    }

    /// A component's status (`predictor`, `transformer`, `explainer`).
    pub fn component(&self, name: &str) -> Option<&ComponentStatus> {
        self.components.get(name)
    }
}

/// Sets `new` in `conditions`, keeping the recorded transition time when the status did not change,
/// so that an unchanged state gives an identical status.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.take();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// One entry of `status.components.predictor.traffic`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrafficTarget {
    /// Revision that receives this share.
    pub revision_name: String,
    /// Share in percent; the shares of one service add up to 100.
    #[schemars(range(max = 100))]
    pub percent: u32,
    /// `latest` or `prev`: reachable on its own at `<tag>-<name>.<namespace>.<domain>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// True for the entry that follows the latest revision.
    #[serde(default)]
    pub latest_revision: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let mut conditions = vec![Condition::new(READY, false, Some("NotReady"), None, "t1")];
        set_condition(&mut conditions, Condition::new(READY, false, Some("Other"), None, "t2"));
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some("t1"));
        assert_eq!(conditions[0].reason.as_deref(), Some("Other"));
        set_condition(&mut conditions, Condition::new(READY, true, None, None, "t3"));
        assert_eq!(conditions[0].last_transition_time.as_deref(), Some("t3"));
        set_condition(&mut conditions, Condition::new(PREDICTOR_READY, true, None, None, "t4"));
        assert_eq!(conditions.len(), 2);
    }

    #[test]
    fn serialises_with_kserve_names() {
        let status = InferenceServiceStatus {
            components: [(
                PREDICTOR.to_owned(),
                ComponentStatus {
                    previous_rolledout_revision: Some("m-predictor-00001".into()),
                    ..ComponentStatus::default()
                },
            )]
            .into(),
            conditions: vec![Condition::new(READY, true, None, None, "t")],
            ..InferenceServiceStatus::default()
        };
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["components"]["predictor"]["previousRolledoutRevision"], "m-predictor-00001");
        assert_eq!(json["conditions"][0]["type"], "Ready");
        assert_eq!(json["conditions"][0]["lastTransitionTime"], "t");
    }
}
