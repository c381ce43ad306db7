//! Leader election through a `coordination.k8s.io/v1` Lease, so that two replicas never reconcile
//! at once: a pure decision ([`decide`]) on the Lease as read, and a small shell that creates,
//! takes and renews it with optimistic concurrency (the write carries the resourceVersion read).
//! A leader that cannot renew in time, or finds another holder, stops (the process exits and is
//! restarted), as controller-runtime does.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// What to do with the Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// There is none: create it, held by us.
    Create,
    /// Nobody holds it, or the holder let it expire: take it.
    Take,
    /// We hold it: renew it.
    Renew,
    /// Someone else holds it and it is fresh.
    Wait,
}

/// Decides from the Lease's spec (`None`: no Lease), who we are and the time.
pub fn decide(lease: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Decision {
    let Some(spec) = lease else { return Decision::Create };
    match spec.holder_identity.as_deref() {
        Some(holder) if holder == me => Decision::Renew,
        None | Some("") => Decision::Take,
        Some(_) => {
            let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()).map(|t| t.0);
            let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
            match renewed {
                Some(renewed) if renewed.saturating_add(duration).is_ok_and(|end| end > now) => Decision::Wait,
                _ => Decision::Take,
            }
        }
    }
}

/// The Lease's spec after `decision` (for `Create`, `Take` and `Renew`).
pub fn next_spec(
    old: Option<&LeaseSpec>,
    decision: &Decision,
    me: &str,
    now: Timestamp,
    duration: Duration,
) -> LeaseSpec {
    let mut spec = old.cloned().unwrap_or_default();
    if *decision != Decision::Renew {
        if *decision == Decision::Take {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.acquire_time = Some(MicroTime(now));
    }
    spec.holder_identity = Some(me.to_owned());
    spec.lease_duration_seconds = Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX));
    spec.renew_time = Some(MicroTime(now));
    spec
}

/// The Lease shell.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    me: String,
    duration: Duration,
    renew: Duration,
}

impl Elector {
    /// An elector for Lease `name` in `api`'s namespace.
    pub fn new(api: Api<Lease>, name: &str, me: String, duration: Duration, renew: Duration) -> Elector {
        Elector { api, name: name.to_owned(), me, duration, renew }
    }

    /// One round: read, decide, write. True when we hold the Lease afterwards.
    async fn round(&self) -> Result<bool> {
        let current = self.api.get_opt(&self.name).await?;
        let now = Timestamp::now();
        let decision = decide(current.as_ref().and_then(|l| l.spec.as_ref()), &self.me, now);
        if decision == Decision::Wait {
            return Ok(false);
        }
        let spec = next_spec(current.as_ref().and_then(|l| l.spec.as_ref()), &decision, &self.me, now, self.duration);
        match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await?;
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                // Carries the resourceVersion read: a concurrent writer makes this fail with 409.
                self.api.replace(&self.name, &PostParams::default(), &lease).await?;
            }
        }
        if decision != Decision::Renew {
            tracing::info!(lease = %self.name, identity = %self.me, ?decision, "became the leader");
        }
        Ok(true)
    }

    /// Waits until we hold the Lease; `None` if `stop` is cancelled first.
    pub async fn acquire(&self, stop: &CancellationToken) -> Option<()> {
        loop {
            match self.round().await {
                Ok(true) => return Some(()),
                Ok(false) => tracing::debug!(lease = %self.name, "another replica leads; waiting"),
                Err(e) => tracing::debug!(lease = %self.name, error = %e, "lease round failed"),
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = tokio::time::sleep(self.renew) => {}
            }
        }
    }

    /// Renews until a renewal fails for longer than two thirds of the Lease, or another holder shows
    /// up; returns the reason. Runs until then (cancel by dropping the future).
    pub async fn keep(&self) -> Error {
        let mut last = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.renew).await;
            match self.round().await {
                Ok(true) => last = tokio::time::Instant::now(),
                Ok(false) => return Error::LostLease(format!("{} (another replica holds it)", self.name)),
                Err(e) => {
                    tracing::warn!(lease = %self.name, error = %e, "lease renewal failed");
                    if last.elapsed() > self.duration * 2 / 3 {
                        return Error::LostLease(format!("{} (not renewed in time: {e})", self.name));
                    }
                }
            }
        }
    }

    /// Gives the Lease up (on shutdown) so that another replica takes over at once.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else { return };
        let Some(spec) = lease.spec.as_mut() else { return };
        if spec.holder_identity.as_deref() != Some(&self.me) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        if let Err(e) = self.api.replace(&self.name, &PostParams::default(), &lease).await {
            tracing::warn!(lease = %self.name, error = %e, "could not release the lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(at(renewed))),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(decide(None, "a", at(0)), Decision::Create);
        assert_eq!(decide(Some(&held_by("a", 0)), "a", at(100)), Decision::Renew);
        assert_eq!(decide(Some(&held_by("b", 0)), "a", at(10)), Decision::Wait);
        assert_eq!(decide(Some(&held_by("b", 0)), "a", at(16)), Decision::Take, "expired");
        assert_eq!(decide(Some(&LeaseSpec::default()), "a", at(0)), Decision::Take, "released");
    }

    #[test]
    fn taking_counts_a_transition_and_renewing_keeps_the_acquire_time() {
        let taken = next_spec(Some(&held_by("b", 0)), &Decision::Take, "a", at(20), Duration::from_secs(15));
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(20))));
        let renewed = next_spec(Some(&taken), &Decision::Renew, "a", at(25), Duration::from_secs(15));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(20))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(25))));
        assert_eq!(renewed.lease_transitions, Some(1));
    }
}
