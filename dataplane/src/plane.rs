//! One place that sets a revision up, and tears it down, in every part of the data plane that a
//! process runs: the endpoint registry (always), the activator's queue (a [`Holder`]) and the
//! autoscaler (a [`Scaler`]). `skiff up` runs all three in one process; in a cluster the router
//! has only the registry, the activator the registry and its queues, and the controller's leader
//! the autoscaler.

use std::sync::Arc;
use std::time::Duration;

use skiff_api::settings::RevisionSettings;
use skiff_autoscaler::{Decision, ScalingSpec};

use crate::endpoints::{Endpoints, RevisionEndpoints};
use crate::key::RevisionKey;
use crate::runner::{MetricSource, ReplicaBackend, Runner};

/// What the router and the activator need to know of a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionSpec {
    /// Its namespace and name.
    pub key: RevisionKey,
    /// Requests one replica takes at once (`containerConcurrency`; 0 = unlimited).
    pub container_concurrency: usize,
    /// Bound on a request's answer (`timeout`), from its slot on a replica.
    pub timeout: Duration,
    /// How long a request is held for a ready replica, when the InferenceService sets it
    /// (`serving.knative.dev/progress-deadline`); else `timeout` bounds the wait too.
    pub progress_deadline: Option<Duration>,
}

impl RevisionSpec {
    /// What the data plane takes of a revision's [`RevisionSettings`] (read from its labels in a
    /// cluster, from its spec in `skiff up`).
    pub fn new(key: RevisionKey, settings: &RevisionSettings) -> RevisionSpec {
        RevisionSpec {
            key,
            container_concurrency: settings.per_replica_limit(),
            timeout: settings.timeout(),
            progress_deadline: settings.progress_deadline_secs.map(Duration::from_secs),
        }
    }
}

/// Holds requests for revisions without ready capacity: the activator.
pub trait Holder: Send + Sync {
    /// Starts holding requests for `revision`, or updates its settings.
    fn hold(&self, revision: &RevisionSpec);
    /// Stops taking requests for `revision` (held ones run to their end).
    fn release(&self, revision: &RevisionKey);
}

/// Decides replicas: the autoscaler.
pub trait Scaler: Send + Sync {
    /// Starts autoscaling a new `revision` (to its initial scale at once).
    fn track(&self, revision: &RevisionKey, scaling: ScalingSpec);
    /// Stops autoscaling `revision`.
    fn untrack(&self, revision: &RevisionKey);
    /// The latest decision for `revision`, if it is autoscaled here.
    fn decision(&self, revision: &RevisionKey) -> Option<Decision>;
}

impl<B: ReplicaBackend, S: MetricSource> Scaler for Runner<B, S> {
    fn track(&self, revision: &RevisionKey, scaling: ScalingSpec) {
        self.add(revision, scaling);
    }

    fn untrack(&self, revision: &RevisionKey) {
        self.remove(revision);
    }

    fn decision(&self, revision: &RevisionKey) -> Option<Decision> {
        Runner::decision(self, revision)
    }
}

/// The parts of the data plane this process runs.
pub struct Plane {
    endpoints: Arc<Endpoints>,
    holder: Option<Arc<dyn Holder>>,
    scaler: Option<Arc<dyn Scaler>>,
}

impl Plane {
    /// A plane with the endpoint registry only (the router's).
    pub fn new(endpoints: Arc<Endpoints>) -> Plane {
        Plane { endpoints, holder: None, scaler: None }
    }

    /// Adds the activator.
    pub fn with_holder(mut self, holder: Arc<dyn Holder>) -> Plane {
        self.holder = Some(holder);
        self
    }

    /// Adds the autoscaler.
    pub fn with_scaler(mut self, scaler: Arc<dyn Scaler>) -> Plane {
        self.scaler = Some(scaler);
        self
    }

    /// The endpoint registry.
    pub fn endpoints(&self) -> &Arc<Endpoints> {
        &self.endpoints
    }

    /// The autoscaler's latest decision for `revision`, where this process runs the autoscaler.
    pub fn decision(&self, revision: &RevisionKey) -> Option<Decision> {
        self.scaler.as_ref().and_then(|scaler| scaler.decision(revision))
    }

    /// Sets `revision` up in every part: its endpoints (kept when it has some already), its
    /// activator queue, and, given its scaling, its decider. Returns its endpoints.
    pub fn provision(&self, revision: &RevisionSpec, scaling: Option<ScalingSpec>) -> Arc<RevisionEndpoints> {
        let endpoints = self.endpoints.get_or_insert(&revision.key, revision.container_concurrency);
        if let Some(holder) = &self.holder {
            holder.hold(revision);
        }
        if let (Some(scaler), Some(scaling)) = (&self.scaler, scaling) {
            scaler.track(&revision.key, scaling);
        }
        endpoints
    }

    /// Tears `revision` down in every part, the autoscaler first so nothing scales it meanwhile.
    pub fn teardown(&self, revision: &RevisionKey) {
        if let Some(scaler) = &self.scaler {
            scaler.untrack(revision);
        }
        if let Some(holder) = &self.holder {
            holder.release(revision);
        }
        self.endpoints.remove(revision);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl Holder for Log {
        fn hold(&self, revision: &RevisionSpec) {
            self.0.lock().unwrap().push(format!("hold {} {:?}", revision.key, revision.timeout));
        }
        fn release(&self, revision: &RevisionKey) {
            self.0.lock().unwrap().push(format!("release {revision}"));
        }
    }

    impl Scaler for Log {
        fn track(&self, revision: &RevisionKey, scaling: ScalingSpec) {
            self.0.lock().unwrap().push(format!("track {revision} min {}", scaling.min_scale));
        }
        fn untrack(&self, revision: &RevisionKey) {
            self.0.lock().unwrap().push(format!("untrack {revision}"));
        }
        fn decision(&self, _: &RevisionKey) -> Option<Decision> {
            None
        }
    }

    #[test]
    fn provision_and_teardown_reach_every_part_present() {
        let log = Arc::new(Log::default());
        let plane = Plane::new(Arc::default()).with_holder(log.clone()).with_scaler(log.clone());
        let spec = RevisionSpec {
            key: RevisionKey::new("ns", "r-predictor-00001"),
            container_concurrency: 4,
            timeout: Duration::from_secs(60),
            progress_deadline: None,
        };
        let endpoints = plane.provision(&spec, Some(ScalingSpec::default()));
        assert_eq!(endpoints.container_concurrency(), 4);
        assert!(Arc::ptr_eq(&plane.provision(&spec, None), &endpoints), "provisioning again keeps the endpoints");
        plane.teardown(&spec.key);
        assert!(plane.endpoints().get(&spec.key).is_none());
        assert_eq!(
            log.0.lock().unwrap().as_slice(),
            [
                "hold ns/r-predictor-00001 60s",
                "track ns/r-predictor-00001 min 0",
                "hold ns/r-predictor-00001 60s",
                "untrack ns/r-predictor-00001",
                "release ns/r-predictor-00001",
            ]
        );
    }

    #[test]
    fn the_routers_plane_has_the_registry_only() {
        let plane = Plane::new(Arc::default());
        let key = RevisionKey::new("ns", "r");
        plane.provision(
            &RevisionSpec {
                key: key.clone(),
                container_concurrency: 0,
                timeout: Duration::from_secs(1),
                progress_deadline: Some(Duration::from_secs(5)),
            },
            None,
        );
        assert!(plane.endpoints().get(&key).is_some());
        plane.teardown(&key);
        assert!(plane.endpoints().get(&key).is_none());
    }
}
