//! A cold start's own phases, as pure functions of two replica samples: the revisions that went
//! from no ready replica to some, each with what the source says of its latest start — the fetch
//! of its model from a store (`skiff up`'s `fetched`), the spawn until the process listened, and
//! the model's load until it was ready. A cluster's Deployments tell none of these (`None`).

use serde::Serialize;

use super::sampler::{Revision, Snapshot};

/// What the latest fetch of a revision's model did (`skiff up`'s status `fetched`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fetch {
    /// The URI, as it may be shown.
    pub uri: String,
    /// Bytes of the model.
    pub bytes: u64,
    /// Bytes downloaded (0: it came from the cache).
    pub downloaded: u64,
    /// Whether the cache held it.
    pub cached: bool,
    /// How long the fetch took.
    pub ms: u64,
}

/// What the source says of a revision's latest replica start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Started {
    /// The fetch of its model before the replica started; `None` for a model on local disk, or a
    /// source that does not tell.
    pub fetch: Option<Fetch>,
    /// Spawn until the process listened.
    pub spawn_ms: Option<u64>,
    /// Spawn until ready (the spawn, then the model's load).
    pub start_ms: Option<u64>,
}

/// One revision's start from zero.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ColdStart {
    /// The revision.
    pub revision: String,
    /// The fetch of its model, where the source tells one.
    pub fetch: Option<Fetch>,
    /// Spawn until the process listened.
    pub spawn_ms: Option<u64>,
    /// Listening until ready: the model's load.
    pub load_ms: Option<u64>,
}

impl ColdStart {
    /// The fetch, spawn and load together, where all that apply are known (a model on local disk
    /// fetches nothing).
    pub fn total_ms(&self) -> Option<u64> {
        Some(self.fetch.as_ref().map_or(0, |f| f.ms) + self.spawn_ms? + self.load_ms?)
    }
}

/// Revisions with no ready replica in `before` (or not in it) and some in `after`, with what
/// `after` says of their start.
pub fn from_zero(before: &Snapshot, after: &Snapshot) -> Vec<ColdStart> {
    after
        .revisions
        .iter()
        .filter(|r| r.ready > 0 && before.revisions.iter().find(|b| b.name == r.name).is_none_or(|b| b.ready == 0))
        .map(cold_start)
        .collect()
}

fn cold_start(revision: &Revision) -> ColdStart {
    let started = &revision.started;
    let load_ms = match (started.start_ms, started.spawn_ms) {
        (Some(start), Some(spawn)) => Some(start.saturating_sub(spawn)),
        _ => None,
    };
    ColdStart { revision: revision.name.clone(), fetch: started.fetch.clone(), spawn_ms: started.spawn_ms, load_ms }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(name: &str, ready: u32, started: Started) -> Revision {
        Revision { name: name.into(), desired: ready, ready, addresses: None, panic: None, started }
    }

    fn fetch(downloaded: u64, ms: u64) -> Fetch {
        Fetch { uri: "s3://models/100M".into(), bytes: 100, downloaded, cached: downloaded == 0, ms }
    }

    #[test]
    fn a_revision_ready_from_zero_is_a_cold_start_with_its_fetch_spawn_and_load() {
        let started = Started { fetch: Some(fetch(100, 1200)), spawn_ms: Some(15), start_ms: Some(415) };
        let before =
            Snapshot { revisions: vec![revision("a", 0, Started::default()), revision("b", 1, Started::default())] };
        let after = Snapshot { revisions: vec![revision("a", 1, started.clone()), revision("b", 2, started)] };
        let cold = from_zero(&before, &after);
        assert_eq!(
            cold,
            [ColdStart { revision: "a".into(), fetch: Some(fetch(100, 1200)), spawn_ms: Some(15), load_ms: Some(400) }],
            "b had a ready replica: scaling up is no cold start"
        );
        assert_eq!(cold[0].total_ms(), Some(1615));
        assert!(from_zero(&after, &after).is_empty(), "no change, no start");
        let new = Snapshot { revisions: vec![revision("c", 1, Started::default())] };
        assert_eq!(from_zero(&before, &new).len(), 1, "a revision not sampled before starts from zero");
    }

    #[test]
    fn a_local_model_has_no_fetch_and_a_cluster_tells_nothing() {
        let local = Started { fetch: None, spawn_ms: Some(10), start_ms: Some(60) };
        let before = Snapshot { revisions: vec![revision("a", 0, Started::default())] };
        let cold = from_zero(&before, &Snapshot { revisions: vec![revision("a", 1, local)] });
        assert_eq!((cold[0].fetch.as_ref(), cold[0].load_ms, cold[0].total_ms()), (None, Some(50), Some(60)));
        let cold = from_zero(&before, &Snapshot { revisions: vec![revision("a", 1, Started::default())] });
        assert_eq!((cold[0].spawn_ms, cold[0].load_ms, cold[0].total_ms()), (None, None, None));
    }
}
