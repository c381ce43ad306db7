//! Skips reconciles of cached copies that are older than the controller's own last status write.
//!
//! After a status write, other watch events (its Deployment being created, say) can trigger a
//! reconcile before the write's own event has reached the cache; that reconcile would compute from
//! the replaced version and its write would fail with a conflict. Remembering, per InferenceService
//! UID, the resourceVersion a successful write replaced makes that case recognisable: the copy is
//! stale, and the write's own event triggers the next reconcile. This is an optimisation only;
//! nothing here is bookkeeping (a restarted controller simply does not skip).

use std::collections::HashMap;
use std::sync::Mutex;

/// The resourceVersion each InferenceService had before our last status write to it.
#[derive(Debug, Default)]
pub struct Replaced(Mutex<HashMap<String, String>>);

impl Replaced {
    /// Whether `resource_version` is one our own write has already replaced.
    pub fn is_stale(&self, uid: &str, resource_version: &str) -> bool {
        self.0.lock().is_ok_and(|m| m.get(uid).is_some_and(|rv| rv == resource_version))
    }

    /// Records that a write replaced `resource_version`.
    pub fn record(&self, uid: &str, resource_version: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(uid.to_owned(), resource_version.to_owned());
        }
    }

    /// Forgets an InferenceService (it is being deleted).
    pub fn forget(&self, uid: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_replaced_version_is_stale() {
        let replaced = Replaced::default();
        assert!(!replaced.is_stale("u", "10"));
        replaced.record("u", "10");
        assert!(replaced.is_stale("u", "10"));
        assert!(!replaced.is_stale("u", "11"), "a newer copy (ours or anyone's) is reconciled");
        assert!(!replaced.is_stale("v", "10"));
        replaced.forget("u");
        assert!(!replaced.is_stale("u", "10"));
    }
}
