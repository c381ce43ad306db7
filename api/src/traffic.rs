//! Rollout of revisions and the traffic split, as KServe drives Knative: the latest revision takes
//! all traffic once ready, or `canaryTrafficPercent` of it while the previous rolled-out revision
//! keeps the rest. A revision that has never been ready gets no weight while another can serve.
//!
//! Revisions that lose their traffic are kept, scaled to zero, up to
//! [`KEPT_INACTIVE_REVISIONS`] of them ([`kept_inactive`]); a spec equal to a kept revision's routes
//! to it again ([`same_revision`]), so restoring an earlier spec is a rollback that creates nothing.

use crate::error::Result;
use crate::isvc::PredictorSpec;
use crate::revision::{
    Component, KEPT_INACTIVE_REVISIONS, RevisionTemplate, next_number, revision_name, same_revision,
};

/// One entry of `status.components.predictor.traffic` (a status type; re-exported here).
pub use crate::status::TrafficTarget;

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

/// What [`Rollout::apply`] did for a changed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new revision, of this name, runs the template.
    Created(String),
    /// A kept revision already ran the template: it is the latest again (a rollback that creates nothing).
    Restored(String),
}

impl Change {
    /// The revision the template now maps to.
    pub fn revision(&self) -> &str {
        match self {
            Change::Created(name) | Change::Restored(name) => name,
        }
    }
}

/// The revisions of one InferenceService and which of them are rolled out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rollout {
    revisions: Vec<Revision>,
    created: u32,
    rolled_out: RolledOut,
}

impl Rollout {
    /// Makes `template` the latest revision of `component`: nothing when the latest runs it already,
    /// the kept revision that runs it when there is one ([`same_revision`]; it is moved last, as the
    /// newest), else a new revision; an error (nothing changed) once every revision number is taken.
    pub fn apply(&mut self, service: &str, component: Component, template: RevisionTemplate) -> Result<Option<Change>> {
        if self.latest().is_some_and(|r| r.template == template) {
            return Ok(None);
        }
        let kept = self.revisions.iter().map(|r| (r.name.as_str(), &r.template));
        if let Some(name) = same_revision(kept, &template).map(str::to_owned) {
            let at = self.revisions.iter().position(|r| r.name == name).expect("found among the revisions");
            let revision = self.revisions.remove(at);
            self.revisions.push(revision);
            return Ok(Some(Change::Restored(name)));
        }
        self.created = next_number(service, self.created)?;
        let name = revision_name(service, component.name(), self.created);
        self.revisions.push(Revision { name: name.clone(), template, ready: false });
        Ok(Some(Change::Created(name)))
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

    /// Every revision kept, oldest first (a restored one counts as the newest).
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
    /// promoting the latest revision when it is ready and no canary is set, keeping revisions that
    /// no longer receive traffic as [`kept_inactive`] says and forgetting the others. Returns the
    /// targets; shares add up to 100.
    pub fn traffic(&mut self, canary: Option<u32>) -> Vec<TrafficTarget> {
        let Some((latest, latest_ready)) = self.latest().map(|r| (r.name.clone(), r.ready)) else { return Vec::new() };
        let targets = split(&latest, latest_ready, &mut self.rolled_out, canary);
        let names: Vec<&str> = self.revisions.iter().map(|r| r.name.as_str()).collect();
        let kept: Vec<String> = kept_inactive(&names, &targets, self.rolled_out.previous.as_deref())
            .into_iter()
            .map(str::to_owned)
            .collect();
        self.revisions.retain(|r| targets.iter().any(|t| t.revision_name == r.name) || kept.contains(&r.name));
        targets
    }

    /// What to tell the user when `canary` changes nothing ([`idle_canary`]).
    pub fn idle_canary(&self, canary: Option<u32>) -> Option<String> {
        idle_canary(&self.latest()?.name, &self.rolled_out, canary)
    }

    /// The revisions kept without traffic (scaled to zero, for a rollback), oldest first, given the
    /// targets [`Rollout::traffic`] returned.
    pub fn inactive<'a>(&'a self, targets: &'a [TrafficTarget]) -> impl Iterator<Item = &'a Revision> + 'a {
        self.revisions.iter().filter(|r| targets.iter().all(|t| t.revision_name != r.name))
    }
}

/// Of a component's revisions (`revisions`, oldest first), those without a share in `targets` that
/// stay, scaled to zero, for a rollback: `previous` (the previous rolled-out revision) first, then
/// the newest others, [`KEPT_INACTIVE_REVISIONS`] in all. The rest are collected, as Knative's
/// revision GC collects non-active revisions beyond `max-non-active-revisions`.
pub fn kept_inactive<'a>(revisions: &[&'a str], targets: &[TrafficTarget], previous: Option<&str>) -> Vec<&'a str> {
    let inactive = || revisions.iter().rev().copied().filter(|r| targets.iter().all(|t| t.revision_name != *r));
    let first = inactive().filter(|r| Some(*r) == previous);
    first.chain(inactive().filter(|r| Some(*r) != previous)).take(KEPT_INACTIVE_REVISIONS).collect()
}

/// What to tell the user when `canaryTrafficPercent` changes nothing: after a full rollout the
/// latest revision is the rolled-out one, so there is no other revision to split with and all
/// traffic stays on it, as in KServe (which splits between the latest revision and the latest
/// rolled-out one). A rollback then means restoring the previous spec. `None` when the canary
/// share applies (or none is set).
pub fn idle_canary(latest: &str, rolled_out: &RolledOut, canary: Option<u32>) -> Option<String> {
    let percent = canary?;
    if rolled_out.latest.as_deref() != Some(latest) {
        return None;
    }
    let back = match &rolled_out.previous {
        Some(previous) => format!("to roll back, restore the spec of {previous}"),
        None => "there is no earlier revision to roll back to".to_owned(),
    };
    Some(format!(
        "canaryTrafficPercent: {percent} changes nothing: {latest} is rolled out and takes all traffic, \
         as in KServe; {back}"
    ))
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
