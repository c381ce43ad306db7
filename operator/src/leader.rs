//! Leader election through a `coordination.k8s.io/v1` Lease, so that two replicas never reconcile
//! at once, done as client-go's `leaderelection` does it:
//!
//! - **No clock is compared with another machine's.** A candidate judges a Lease held by another
//!   replica expired only when the Lease (its resourceVersion and spec) has stayed the same for
//!   the Lease's `leaseDurationSeconds`, measured on the candidate's own monotonic clock from the
//!   moment it first read it in that state ([`Observer`]). `renewTime` is written for people and
//!   tools; it is never compared with this replica's clock.
//! - **A leader steps down before anyone may take over.** Each round (read, then write with the
//!   resourceVersion read, so a concurrent writer gets 409) has a deadline. The leader's is its
//!   renew deadline ([`Elector::new`]: shorter than the Lease), counted from the start of its last
//!   successful renewal; a hung API call or a run of failures reaches it, and the leader stops
//!   ([`Elector::keep`] returns, the process exits and is restarted, as controller-runtime does).
//!   Another replica saw that renewal no earlier than it started, and waits a whole Lease after
//!   that, so it cannot take over while this one still acts.
//!
//! A pure core ([`Observer::decide`], [`next_spec`], [`missing_namespace`]) and a thin shell
//! ([`Elector`] over [`LeaseApi`], which kube's `Api<Lease>` implements).

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// What to do with the Lease as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// There is none: create it, held by us.
    Create,
    /// Nobody holds it, or the holder has not renewed it for a whole Lease: take it.
    Take,
    /// We hold it: renew it.
    Renew,
    /// Someone else holds it, and it changed less than a Lease ago (by our clock).
    Wait,
}

/// The Lease as read: what changes with every write to it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// `metadata.resourceVersion`.
    pub version: Option<String>,
    /// `spec`.
    pub spec: LeaseSpec,
}

impl Record {
    /// The record of a Lease object.
    pub fn of(lease: &Lease) -> Record {
        Record { version: lease.metadata.resource_version.clone(), spec: lease.spec.clone().unwrap_or_default() }
    }
}

/// What this replica has seen of the Lease: the last record, and when (on this replica's
/// monotonic clock) it first saw the Lease in that state.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    seen: Option<(Record, Instant)>,
}

impl Observer {
    /// Notes `current` (`None`: there is no Lease) as read at `now`, and decides. A Lease another
    /// replica holds counts as expired once it has not changed for its `leaseDurationSeconds`
    /// since this replica first saw it so.
    pub fn decide(&mut self, current: Option<&Record>, me: &str, now: Instant) -> Decision {
        let Some(record) = current else {
            self.seen = None;
            return Decision::Create;
        };
        let since = match &self.seen {
            Some((seen, at)) if seen == record => *at,
            _ => now,
        };
        self.seen = Some((record.clone(), since));
        match record.spec.holder_identity.as_deref() {
            Some(holder) if holder == me => Decision::Renew,
            None | Some("") => Decision::Take,
            Some(_) => {
                let seconds = record.spec.lease_duration_seconds.unwrap_or(0);
                let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
                if now.saturating_duration_since(since) >= duration { Decision::Take } else { Decision::Wait }
            }
        }
    }
}

/// The Lease's spec after `decision` (for `Create`, `Take` and `Renew`); `now` is the wall-clock
/// time written for people and tools (never compared).
pub fn next_spec(
    old: Option<&LeaseSpec>,
    decision: Decision,
    me: &str,
    now: Timestamp,
    duration: Duration,
) -> LeaseSpec {
    let mut spec = old.cloned().unwrap_or_default();
    if decision != Decision::Renew {
        if decision == Decision::Take {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.acquire_time = Some(MicroTime(now));
    }
    spec.holder_identity = Some(me.to_owned());
    spec.lease_duration_seconds = Some(i32::try_from(duration.as_secs()).unwrap_or(i32::MAX));
    spec.renew_time = Some(MicroTime(now));
    spec
}

/// Whether a failed call says that the namespace itself does not exist (creating a Lease there
/// answers 404 with details of kind `namespaces`).
pub fn missing_namespace(error: &Error) -> bool {
    matches!(error, Error::Kube(kube::Error::Api(status))
        if status.code == 404 && status.details.as_ref().is_some_and(|d| d.kind == "namespaces"))
}

/// The Lease calls the elector makes: kube's `Api<Lease>`, or a fake in tests.
pub trait LeaseApi: Send + Sync {
    /// The Lease `name`, `None` when there is none.
    fn get(&self, name: &str) -> impl Future<Output = Result<Option<Lease>>> + Send;
    /// Creates `lease`; fails if it exists.
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<()>> + Send;
    /// Replaces `lease`, on the condition that its resourceVersion is still the stored one.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<()>> + Send;
}

impl LeaseApi for Api<Lease> {
    async fn get(&self, name: &str) -> Result<Option<Lease>> {
        Ok(self.get_opt(name).await?)
    }

    async fn create(&self, lease: &Lease) -> Result<()> {
        Api::create(self, &PostParams::default(), lease).await?;
        Ok(())
    }

    async fn replace(&self, lease: &Lease) -> Result<()> {
        let name = lease.metadata.name.clone().unwrap_or_default();
        Api::replace(self, &name, &PostParams::default(), lease).await?;
        Ok(())
    }
}

/// Timing of the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long the Lease lasts without renewal (written in it for the others).
    pub lease: Duration,
    /// How long the leader may go without a successful renewal before it steps down; shorter than `lease`.
    pub renew_deadline: Duration,
    /// The time between rounds, for the leader and for the candidates; shorter than `renew_deadline`.
    pub retry: Duration,
}

/// The Lease shell.
pub struct Elector<A: LeaseApi = Api<Lease>> {
    api: A,
    name: String,
    namespace: String,
    me: String,
    timing: Timing,
    observer: Mutex<Observer>,
}

impl<A: LeaseApi> Elector<A> {
    /// An elector for the Lease `name` in `namespace` (where `api` points).
    pub fn new(api: A, namespace: &str, name: &str, me: String, timing: Timing) -> Elector<A> {
        Elector {
            api,
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            me,
            timing,
            observer: Mutex::new(Observer::default()),
        }
    }

    /// One round: read, decide, write. True when we hold the Lease afterwards. A leader
    /// (`leading`) never takes a Lease someone else holds: it has lost it.
    async fn round(&self, leading: bool) -> Result<bool> {
        let current = self.api.get(&self.name).await?;
        let record = current.as_ref().map(Record::of);
        let decision = self.observer.lock().expect("observer lock").decide(record.as_ref(), &self.me, Instant::now());
        if decision == Decision::Wait || (leading && decision == Decision::Take) {
            return Ok(false);
        }
        let old = record.as_ref().map(|r| &r.spec);
        let spec = next_spec(old, decision, &self.me, Timestamp::now(), self.timing.lease);
        match current {
            None => {
                let metadata = ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() };
                self.api.create(&Lease { metadata, spec: Some(spec) }).await?;
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                self.api.replace(&lease).await?;
            }
        }
        if decision != Decision::Renew {
            tracing::info!(lease = %self.name, identity = %self.me, ?decision, "became the leader");
        }
        Ok(true)
    }

    /// Waits until we hold the Lease; returns when the winning round started (the start of the
    /// term, for [`Elector::keep`]), or `None` if `stop` is cancelled first. Every round is bounded
    /// by the renew deadline; every failure is logged, a missing namespace as an error naming it.
    pub async fn acquire(&self, stop: &CancellationToken) -> Option<Instant> {
        loop {
            let started = Instant::now();
            match timeout(self.timing.renew_deadline, self.round(false)).await {
                Ok(Ok(true)) => return Some(started),
                Ok(Ok(false)) => tracing::debug!(lease = %self.name, "another replica leads; waiting"),
                Ok(Err(e)) => self.report(&e),
                Err(_) => {
                    tracing::warn!(lease = %self.name, limit = ?self.timing.renew_deadline, "lease round timed out")
                }
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = tokio::time::sleep(self.timing.retry) => {}
            }
        }
    }

    /// Renews every `retry` from a term that started at `renewed`, until a renewal has not
    /// succeeded within the renew deadline of the last successful one (a hung call included), or
    /// another holder shows up; returns the reason. Runs until then (cancel by dropping the future).
    pub async fn keep(&self, mut renewed: Instant) -> Error {
        loop {
            tokio::time::sleep(self.timing.retry).await;
            let deadline = renewed + self.timing.renew_deadline;
            let started = Instant::now();
            let outcome = if started < deadline { timeout_at(deadline, self.round(true)).await.ok() } else { None };
            match outcome {
                Some(Ok(true)) => renewed = started,
                Some(Ok(false)) => return Error::LostLease(format!("{} (another replica holds it)", self.name)),
                Some(Err(e)) => self.report(&e),
                None => {
                    return Error::LostLease(format!(
                        "{} (not renewed within the renew deadline of {:?}; stepping down before it expires)",
                        self.name, self.timing.renew_deadline
                    ));
                }
            }
        }
    }

    /// Gives the Lease up (on shutdown) so that another replica takes over at once; bounded by the
    /// renew deadline.
    pub async fn release(&self) {
        if timeout(self.timing.renew_deadline, self.give_up()).await.is_err() {
            tracing::warn!(lease = %self.name, "could not release the lease in time");
        }
    }

    async fn give_up(&self) {
        let Ok(Some(mut lease)) = self.api.get(&self.name).await else { return };
        let Some(spec) = lease.spec.as_mut() else { return };
        if spec.holder_identity.as_deref() != Some(&self.me) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        if let Err(e) = self.api.replace(&lease).await {
            tracing::warn!(lease = %self.name, error = %e, "could not release the lease");
        }
    }

    /// Logs a failed round: a missing namespace as an error that names it, a lost race (409) as
    /// debug, anything else as a warning.
    fn report(&self, error: &Error) {
        if missing_namespace(error) {
            tracing::error!(
                namespace = %self.namespace,
                lease = %self.name,
                "namespace {} does not exist: the leader Lease cannot be created, so this controller \
                 does nothing; create the namespace, or run with --namespace (POD_NAMESPACE) set to one that exists",
                self.namespace
            );
        } else if error.kind() == "conflict" {
            tracing::debug!(lease = %self.name, %error, "lost a race for the lease");
        } else {
            tracing::warn!(lease = %self.name, %error, "lease round failed");
        }
    }
}

#[cfg(test)]
mod tests;
