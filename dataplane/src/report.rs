//! What the activator tells the autoscaler across processes (in a cluster): a poke when a request
//! arrives for a revision at zero, and every second the requests it holds per revision. JSON over
//! HTTP, POSTed to the controller's admin port with the activator's ServiceAccount token.

use serde::{Deserialize, Serialize};

use crate::key::RevisionKey;

/// Path of a poke (body: one [`Held`]).
pub const POKE_PATH: &str = "/autoscaler/poke";
/// Path of the periodic report (body: [`HeldReport`]).
pub const REPORT_PATH: &str = "/autoscaler/stats";

/// Requests an activator holds for one revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// Which activator (its pod's name): the counts of several activators add up.
    pub from: String,
    /// The revision's namespace.
    pub namespace: String,
    /// The revision's name.
    pub name: String,
    /// Requests waiting for a replica.
    pub held: usize,
}

impl Held {
    /// `held` requests for `key`, held by activator `from`.
    pub fn new(from: &str, key: &RevisionKey, held: usize) -> Held {
        Held { from: from.to_owned(), namespace: key.namespace.clone(), name: key.name.clone(), held }
    }

    /// The revision's key.
    pub fn key(&self) -> RevisionKey {
        RevisionKey::new(self.namespace.as_str(), self.name.as_str())
    }
}

/// One activator's periodic report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldReport {
    /// Every revision it serves, zeros included (so a count goes back to 0).
    pub revisions: Vec<Held>,
}
