//! Revisions whose replicas another autoscaler sets: the `hpa`, `keda`, `external` and `none`
//! classes. Skiff's autoscaler never decides for them (no decider runs), but the router and the
//! activator stay in their path, so a revision at zero replicas (taken there by an HPA with
//! Kubernetes' HPAScaleToZero, by KEDA, by someone else's autoscaler, or by hand) still holds its
//! first request: the activator's poke wakes it to one replica ([`Deployments::wake`]), and from
//! one replica on its own autoscaler decides again (an HPA does nothing at zero replicas).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use skiff_dataplane::RevisionKey;

use super::deployments::Deployments;

/// The revisions left to another autoscaler, and how to wake one.
pub struct Wakes {
    revisions: Mutex<HashSet<RevisionKey>>,
    deployments: Arc<Deployments>,
}

impl Wakes {
    /// Wakes revisions by scaling their Deployments in `deployments`.
    pub fn new(deployments: Arc<Deployments>) -> Wakes {
        Wakes { revisions: Mutex::new(HashSet::new()), deployments }
    }

    /// Records whether `revision` is left to another autoscaler (`true`) or scaled by Skiff's.
    pub fn set(&self, revision: &RevisionKey, left_alone: bool) {
        let mut revisions = self.lock();
        if left_alone {
            revisions.insert(revision.clone());
        } else {
            revisions.remove(revision);
        }
    }

    /// Whether `revision` is left to another autoscaler.
    pub fn contains(&self, revision: &RevisionKey) -> bool {
        self.lock().contains(revision)
    }

    /// Keeps only the revisions `live` says still exist.
    pub fn retain(&self, live: impl Fn(&RevisionKey) -> bool) {
        self.lock().retain(|key| live(key));
    }

    /// A request waits for `revision`: wakes it if it is left to another autoscaler (true), else
    /// leaves the poke to Skiff's autoscaler (false).
    pub fn poke(&self, revision: &RevisionKey) -> bool {
        if !self.contains(revision) {
            return false;
        }
        self.deployments.wake(revision);
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<RevisionKey>> {
        self.revisions.lock().expect("wakes lock")
    }
}
