//! Which revisions fail for a cause a retry will not fix, as their InferenceService's status says
//! it: `status.modelStatus.lastFailureInfo`, which the operator writes from the revision's pods (the
//! storage initializer's or the model container's exit code and termination message). The rule is
//! the data plane's, the same as in `skiff up` ([`Cause::of_failure`], [`Cause::retry_helps`]):
//! requests for such a revision are answered at once with 503 and the status's reason and message
//! ([`crate::Error::Failing`]); while a retry can still succeed (a cut transfer, a full disk, a
//! crash), they keep being held. Each still pokes the autoscaler, so a pod keeps retrying, and the
//! failure clears when the status does (a replica of the revision was ready).
//!
//! [`Failures`] is the pure core; [`follow`] the thin watch shell.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use skiff_api::InferenceServiceResource;
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::Endpoints;
use skiff_dataplane::failing::{Cause, Failing};

/// How often the failures are applied again without a change of status: a revision whose
/// EndpointSlices arrive after its status gets its failure within this time.
const REAPPLY: Duration = Duration::from_secs(1);

/// The revision of `isvc` that fails for a cause a retry will not fix, and why, if its status says
/// one does.
pub fn failing_of(isvc: &InferenceServiceResource) -> Option<(RevisionKey, Failing)> {
    let info = isvc.status.as_ref()?.model_status.as_ref()?.last_failure_info.as_ref()?;
    let cause = Cause::of_failure(info.location.as_deref().unwrap_or_default(), &info.reason, info.exit_code);
    if cause.retry_helps() {
        return None;
    }
    let revision = RevisionKey::new(isvc.namespace().unwrap_or_default(), info.model_revision_name.clone());
    Some((revision, Failing { reason: info.reason.clone(), message: info.message.clone() }))
}

/// The failing revisions of every InferenceService seen, by InferenceService.
#[derive(Debug, Default)]
pub struct Failures {
    by_service: BTreeMap<(String, String), (RevisionKey, Failing)>,
}

impl Failures {
    /// Takes `isvc`'s status as it is now; returns its failure when it is new or changed.
    pub fn update(&mut self, isvc: &InferenceServiceResource) -> Option<&(RevisionKey, Failing)> {
        let key = (isvc.namespace().unwrap_or_default(), isvc.name_any());
        match failing_of(isvc) {
            Some(failing) => {
                let changed = self.by_service.get(&key) != Some(&failing);
                self.by_service.insert(key.clone(), failing);
                changed.then(|| &self.by_service[&key])
            }
            None => {
                self.by_service.remove(&key);
                None
            }
        }
    }

    /// Forgets a deleted InferenceService.
    pub fn remove(&mut self, isvc: &InferenceServiceResource) {
        self.by_service.remove(&(isvc.namespace().unwrap_or_default(), isvc.name_any()));
    }

    /// Marks each revision `endpoints` knows as failing or not, as the statuses say: requests
    /// waiting for one that now fails are answered at once.
    pub fn apply(&self, endpoints: &Endpoints) {
        let failing: BTreeMap<&RevisionKey, &Failing> = self.by_service.values().map(|(r, f)| (r, f)).collect();
        for key in endpoints.keys() {
            if let Some(revision) = endpoints.get(&key) {
                revision.set_failing(failing.get(&key).map(|f| (*f).clone()));
            }
        }
    }
}

/// Keeps each revision of `endpoints` marked failing or not from every InferenceService's status,
/// cluster-wide. Runs until the watch stream ends (never, with its back-off).
pub async fn follow(api: Api<InferenceServiceResource>, endpoints: Arc<Endpoints>) {
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut failures = Failures::default();
    let mut listing: Option<Failures> = None;
    let mut reapply = tokio::time::interval(REAPPLY);
    loop {
        tokio::select! {
            event = stream.next() => match event {
                None => return,
                Some(Ok(watcher::Event::Init)) => listing = Some(Failures::default()),
                Some(Ok(watcher::Event::InitApply(isvc))) => {
                    if let Some(listing) = listing.as_mut() {
                        listing.update(&isvc);
                    }
                }
                Some(Ok(watcher::Event::InitDone)) => failures = listing.take().unwrap_or_default(),
                Some(Ok(watcher::Event::Apply(isvc))) => {
                    if let Some((revision, failing)) = failures.update(&isvc) {
                        tracing::info!(
                            %revision,
                            reason = %failing.reason,
                            message = %failing.message,
                            "the revision fails for a cause a retry will not fix: its requests are answered at once"
                        );
                    }
                }
                Some(Ok(watcher::Event::Delete(isvc))) => failures.remove(&isvc),
                Some(Err(e)) => tracing::warn!(error = %e, "InferenceService watch failed; retrying"),
            },
            _ = reapply.tick() => {}
        }
        failures.apply(&endpoints);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn isvc(name: &str, failure: Option<Value>) -> InferenceServiceResource {
        let mut model = json!({"transitionStatus": "InProgress"});
        if let Some(failure) = failure {
            model["lastFailureInfo"] = failure;
        }
        serde_json::from_value(json!({
            "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "onnx"}, "storageUri": "s3://models/nope"}}},
            "status": {"modelStatus": model},
        }))
        .unwrap()
    }

    fn failure(location: &str, exit_code: i32, message: &str) -> Value {
        json!({"location": location, "reason": "ModelLoadFailed", "message": message,
               "modelRevisionName": "nope-predictor-00001", "exitCode": exit_code})
    }

    const NOT_FOUND: &str = "fetching the model failed: s3://models/nope: not found";

    #[test]
    fn a_fetch_that_a_retry_will_not_fix_fails_its_revision_with_the_status_words() {
        let (revision, failing) =
            failing_of(&isvc("nope", Some(failure("storage-initializer", 3, NOT_FOUND)))).unwrap();
        assert_eq!(revision, RevisionKey::new("ml", "nope-predictor-00001"));
        assert_eq!(failing, Failing { reason: "ModelLoadFailed".into(), message: NOT_FOUND.into() });
        for (location, exit_code) in
            [("storage-initializer", 2), ("storage-initializer", 4), ("storage-initializer", 7)]
        {
            assert!(failing_of(&isvc("nope", Some(failure(location, exit_code, "x")))).is_some(), "{exit_code}");
        }
    }

    #[test]
    fn a_failure_a_retry_can_fix_keeps_requests_held() {
        for (location, exit_code) in [("storage-initializer", 5), ("storage-initializer", 8), ("kserve-container", 1)] {
            assert_eq!(
                failing_of(&isvc("nope", Some(failure(location, exit_code, "x")))),
                None,
                "{location} {exit_code}"
            );
        }
        assert_eq!(failing_of(&isvc("nope", None)), None, "no failure");
    }

    #[tokio::test]
    async fn held_requests_hear_of_a_failure_and_of_its_end() {
        let endpoints = Endpoints::default();
        let key = RevisionKey::new("ml", "nope-predictor-00001");
        let other = endpoints.get_or_insert(&RevisionKey::new("ml", "iris-predictor-00001"), 0);
        let revision = endpoints.get_or_insert(&key, 0);
        let held = tokio::spawn({
            let revision = revision.clone();
            async move { revision.failed().await }
        });
        let mut failures = Failures::default();
        let failing = isvc("nope", Some(failure("storage-initializer", 3, NOT_FOUND)));
        assert!(failures.update(&failing).is_some(), "new");
        assert!(failures.update(&failing).is_none(), "unchanged");
        failures.apply(&endpoints);
        assert_eq!(held.await.unwrap().message, NOT_FOUND);
        assert_eq!(other.failing(), None, "another revision is not concerned");

        // A revision whose EndpointSlices come after the status gets the failure at the next apply.
        let late = RevisionKey::new("ml", "late-predictor-00001");
        let late_isvc = {
            let mut late_isvc = isvc("late", Some(failure("storage-initializer", 4, "access denied")));
            let status = late_isvc.status.as_mut().unwrap().model_status.as_mut().unwrap();
            status.last_failure_info.as_mut().unwrap().model_revision_name = late.name.clone();
            late_isvc
        };
        failures.update(&late_isvc);
        failures.apply(&endpoints);
        let late_endpoints = endpoints.get_or_insert(&late, 0);
        assert_eq!(late_endpoints.failing(), None);
        failures.apply(&endpoints);
        assert_eq!(late_endpoints.failing().unwrap().message, "access denied");

        failures.update(&isvc("nope", None));
        failures.remove(&late_isvc);
        failures.apply(&endpoints);
        assert_eq!((revision.failing(), late_endpoints.failing()), (None, None), "the status cleared, or it went");
    }
}
