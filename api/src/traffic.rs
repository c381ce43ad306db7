//! Rollout of revisions and the traffic split, as KServe drives Knative: the latest revision takes
//! all traffic once ready, or `canaryTrafficPercent` of it while the previous rolled-out revision
//! keeps the rest. A revision that has never been ready gets no weight while another can serve.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::isvc::PredictorSpec;
use crate::revision::{Component, RevisionTemplate, next_number, revision_name};

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

/// The revisions that have taken all traffic: the state a rollout carries from one split to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolledOut {
    /// The revision that last took all traffic.
    pub latest: Option<String>,
    /// The one before it.
    pub previous: Option<String>,
}

/// A revision as the rollout knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// `<service>-predictor-NNNNN`.
    pub name: String,
    /// What it runs.
    pub template: RevisionTemplate,
    /// Has had a ready replica at least once.
    pub ready: bool,
}

/// The revisions of one InferenceService and which of them are rolled out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rollout {
    revisions: Vec<Revision>,
    created: u32,
    rolled_out: RolledOut,
}

impl Rollout {
    /// Makes `template` the latest revision of `component`; returns the new revision's name when it
    /// differs from the latest, and an error (nothing changed) once every revision number is taken.
    pub fn apply(&mut self, service: &str, component: Component, template: RevisionTemplate) -> Result<Option<String>> {
        if self.latest().is_some_and(|r| r.template == template) {
            return Ok(None);
        }
        self.created = next_number(service, self.created)?;
        let name = revision_name(service, component.name(), self.created);
        self.revisions.push(Revision { name: name.clone(), template, ready: false });
        Ok(Some(name))
    }

    /// Records that `revision` has a ready replica; it stays ready from then on.
    pub fn mark_ready(&mut self, revision: &str) {
        if let Some(r) = self.revisions.iter_mut().find(|r| r.name == revision) {
            r.ready = true;
        }
    }

    /// The newest revision.
    pub fn latest(&self) -> Option<&Revision> {
        self.revisions.last()
    }

    /// Every revision kept, oldest first.
    pub fn revisions(&self) -> &[Revision] {
        &self.revisions
    }

    /// The newest revision that has been ready.
    pub fn latest_ready(&self) -> Option<&str> {
        self.revisions.iter().rev().find(|r| r.ready).map(|r| r.name.as_str())
    }

    /// The revision that last took all traffic.
    pub fn latest_rolled_out(&self) -> Option<&str> {
        self.rolled_out.latest.as_deref()
    }

    /// The one before it.
    pub fn previous_rolled_out(&self) -> Option<&str> {
        self.rolled_out.previous.as_deref()
    }

    /// Computes the split for `canary` (percent for the latest revision, `None` = full rollout),
    /// promoting the latest revision when it is ready and no canary is set, and forgetting
    /// revisions that no longer receive traffic. Returns the targets; shares add up to 100.
    pub fn traffic(&mut self, canary: Option<u32>) -> Vec<TrafficTarget> {
        let Some((latest, latest_ready)) = self.latest().map(|r| (r.name.clone(), r.ready)) else { return Vec::new() };
        let targets = split(&latest, latest_ready, &mut self.rolled_out, canary);
        self.revisions.retain(|r| targets.iter().any(|t| t.revision_name == r.name));
        targets
    }
}

/// The canary share a component's `canaryTrafficPercent` asks for (`None`: a full rollout), as both
/// modes hand it to [`Rollout::traffic`] and [`split`]. Validation keeps it within 0..=100; the
/// clamp makes the conversion total.
pub fn canary_percent(predictor: &PredictorSpec) -> Option<u32> {
    predictor.canary_traffic_percent.map(|p| u32::try_from(p.clamp(0, 100)).expect("within 0..=100"))
}

/// The split for the newest revision `latest` (`latest_ready`: it has been ready) under `canary`
/// (percent for the latest revision, `None` = full rollout), given what has been rolled out; promotes
/// `latest` in `rolled_out` when it is ready and no canary is set. Shares add up to 100; revisions
/// that are not among the targets no longer take traffic and can be collected.
pub fn split(latest: &str, latest_ready: bool, rolled_out: &mut RolledOut, canary: Option<u32>) -> Vec<TrafficTarget> {
    let stable = rolled_out.latest.clone().filter(|s| s != latest);
    match (canary, stable) {
        (Some(percent), Some(stable)) => {
            let percent = if latest_ready { percent.min(100) } else { 0 };
            vec![target(latest, percent, Some("latest"), true), target(&stable, 100 - percent, Some("prev"), false)]
        }
        (None, Some(stable)) if !latest_ready => {
            vec![target(latest, 0, Some("latest"), true), target(&stable, 100, Some("prev"), false)]
        }
        _ => {
            if latest_ready && rolled_out.latest.as_deref() != Some(latest) {
                rolled_out.previous = rolled_out.latest.replace(latest.to_owned());
            }
            vec![target(latest, 100, Some("latest"), true)]
        }
    }
}

fn target(revision: &str, percent: u32, tag: Option<&str>, latest: bool) -> TrafficTarget {
    TrafficTarget { revision_name: revision.to_owned(), percent, tag: tag.map(str::to_owned), latest_revision: latest }
}

#[cfg(test)]
mod tests;
