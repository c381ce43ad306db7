//! The reconcile decision as a pure function: from an InferenceService, the Deployments and
//! Services that carry its label, and the platform settings, to what to apply, what to delete and
//! the status to write (only when it differs from the one stored).
//!
//! Each component the InferenceService has (the predictor, and a transformer and an explainer when
//! set) has revisions of its own: each change of the component's [`RevisionTemplate`] makes a new
//! immutable revision `<name>-<component>-NNNNN`, numbered after the highest one of that component
//! seen; its traffic split comes from [`skiff_api::traffic::split`] with the component's
//! rolled-out revisions read back from the status and its own `canaryTrafficPercent` (KServe
//! applies a canary per component). A template equal to that of a revision still there routes to
//! that revision instead of making a new one ([`same_revision`]: a rollback that creates nothing).
//! Revisions without a share are kept, scaled to zero and marked `reserve`, as
//! [`kept_inactive`] says; the others, and every revision of a component the InferenceService no
//! longer has, are collected.
//!
//! A predictor model that `skiff-server` does not serve (any format but ONNX, or ONNX with
//! `runtime:`) runs the container of the ServingRuntime or ClusterServingRuntime that
//! [`skiff_api::runtime::select_runtime`] picks from [`Inputs::runtimes`]; the runtime's kind, name
//! and spec are hashed with the template, so a different choice or a changed runtime rolls a new
//! revision (as KServe's runtime container, part of the pod template, makes Knative roll one). No
//! runtime to be had refuses the spec with KServe's reason ([`skiff_api::Error::runtime_reason`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use skiff_api::labels::FIELD_MANAGER;
use skiff_api::revision::{Component, RevisionTemplate, next_number, revision_name, same_revision};
use skiff_api::runtime::{
    ClusterServingRuntime, SelectedRuntime, ServingRuntime, select_runtime, uses_embedded_server,
};
use skiff_api::scaling::{ScalingInputs, component_scaling_spec};
use skiff_api::serving::revision_ready;
use skiff_api::settings::RevisionSettings;
use skiff_api::shorthand::{expand, model_of};
use skiff_api::status::Replicas;
use skiff_api::traffic::{RolledOut, canary_percent, idle_canary, kept_inactive, split};
use skiff_api::validate::validate_for;
use skiff_api::{InferenceService, InferenceServiceResource, InferenceServiceStatus};

use crate::desired::{self, Record, RevisionRef};
use crate::platform::Platform;
use crate::revisions::{LoadFailure, ObservedRevision, keep_last_failure, load_failures, observe};
use crate::status::{self, ComponentObservation, Observation, Urls, Verdict};

/// What the cluster shows for one InferenceService.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The InferenceService (with its last written status).
    pub isvc: &'a InferenceServiceResource,
    /// Deployments labelled with its name.
    pub deployments: &'a [Deployment],
    /// Services labelled with its name.
    pub services: &'a [Service],
    /// Pods labelled with its name (their storage initializers' and model containers' failures,
    /// [`load_failures`]).
    pub pods: &'a [Pod],
    /// Settings from the `inferenceservice-config` ConfigMap.
    pub platform: &'a Platform,
    /// The runtimes the InferenceService may use (read only when it needs one, see [`needs_runtime`]).
    pub runtimes: Runtimes<'a>,
    /// The time to record in changed conditions (RFC 3339).
    pub now: &'a str,
}

/// The ServingRuntimes of the InferenceService's namespace and the ClusterServingRuntimes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Runtimes<'a> {
    /// ServingRuntimes in the InferenceService's namespace.
    pub namespaced: &'a [ServingRuntime],
    /// Every ClusterServingRuntime.
    pub cluster: &'a [ClusterServingRuntime],
}

/// Whether the InferenceService's predictor is served by a runtime rather than `skiff-server` (a
/// `model`, or the framework shorthand that stands for one, that is not ONNX or that names a
/// `runtime:`), so that its reconcile reads the runtimes.
pub fn needs_runtime(isvc: &InferenceServiceResource) -> bool {
    model_of(&isvc.spec.predictor).ok().flatten().is_some_and(|m| !uses_embedded_server(&m))
}

/// The reason of the conditions of a spec that cannot be realised, unless a more precise one applies.
pub const INVALID_SPEC: &str = "InvalidSpec";

/// Why a component cannot be realised: the reason and the message of its condition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    reason: &'static str,
    message: String,
}

impl From<String> for Refusal {
    fn from(message: String) -> Self {
        Refusal { reason: INVALID_SPEC, message }
    }
}

impl From<skiff_api::Error> for Refusal {
    fn from(e: skiff_api::Error) -> Self {
        Refusal { reason: e.runtime_reason().unwrap_or(INVALID_SPEC), message: e.to_string() }
    }
}

/// What to do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Deployments to server-side apply (missing or changed).
    pub deployments: Vec<Deployment>,
    /// Services to server-side apply (missing or changed).
    pub services: Vec<Service>,
    /// Revisions whose Deployment and Service go.
    pub delete: Vec<String>,
    /// Revisions that lost their traffic and are kept for a rollback: to scale to zero and mark
    /// `reserve` (after the retention period, as deletions are).
    pub reserve: Vec<String>,
    /// Kept revisions routed to again (a restored spec): to mark `active` before traffic moves.
    pub activate: Vec<String>,
    /// The status to write; `None` when the stored one is already right.
    pub status: Option<InferenceServiceStatus>,
    /// Why the spec cannot be realised, as the status says; `None` when it can.
    pub refused: Option<String>,
}

/// The latest revision of a component: observed, or to be created in this pass.
struct Latest {
    name: String,
    number: u32,
    ready: bool,
    observed: Option<ObservedRevision>,
    initial_scale: u32,
}

/// What every component's plan reads.
struct Shared<'a> {
    input: Inputs<'a>,
    manifest: &'a InferenceService,
    owner: &'a OwnerReference,
    name: &'a str,
    namespace: &'a str,
    old: &'a InferenceServiceStatus,
    revisions: &'a [ObservedRevision],
    /// Why revisions' replicas failed to load their model, by revision.
    failures: &'a BTreeMap<String, LoadFailure>,
}

/// Decides everything for one InferenceService.
pub fn plan(input: Inputs) -> Plan {
    let isvc = input.isvc;
    let Some(mut owner) = isvc.controller_owner_ref(&()) else { return Plan::default() };
    // Foreground deletion of the InferenceService waits for its children.
    owner.block_owner_deletion = Some(true);
    let (name, namespace) = (isvc.name_any(), isvc.namespace().unwrap_or_default());
    let old = isvc.status.clone().unwrap_or_default();
    let urls = Urls::new(&name, &namespace, input.platform);
    let manifest = isvc.to_manifest();
    let revisions = observe(input.deployments, &owner.uid);
    let mut failures = load_failures(input.pods, &revisions);
    let last_failure = old.model_status.as_ref().and_then(|m| m.last_failure_info.as_ref());
    keep_last_failure(&mut failures, last_failure, &revisions);
    let mut plan = Plan::default();

    // The same checks as `skiff up` (and the CRD), against this cluster's autoscaler settings and logger sink rule.
    if let Err(e) = validate_for(&manifest, &input.platform.autoscaler, &input.platform.logger_sinks) {
        return refused(input, e.to_string());
    }
    // A framework shorthand (`sklearn:`) is served as the `model` KServe's webhook makes of it.
    let manifest = match expand(manifest) {
        Ok(manifest) => manifest,
        Err(e) => return refused(input, e.to_string()),
    };
    let shared = Shared {
        input,
        manifest: &manifest,
        owner: &owner,
        name: &name,
        namespace: &namespace,
        old: &old,
        revisions: &revisions,
        failures: &failures,
    };
    let mut components = Vec::new();
    let mut keep = BTreeSet::new();
    for component in Component::of(&manifest) {
        match plan_component(&shared, component, &mut plan, &mut keep) {
            Ok(observation) => components.push(observation),
            Err(Refusal { reason, message }) => return refused_because(input, reason, message),
        }
    }
    plan.delete = revisions.iter().filter(|r| !keep.contains(&r.name)).map(|r| r.name.clone()).collect();

    // Services applied in this pass count: the status is written only after they are.
    let reachable = |revision: &str| input.services.iter().chain(&plan.services).any(|s| s.name_any() == revision);
    let missing = components.iter().flat_map(|c| &c.traffic).find(|t| t.percent > 0 && !reachable(&t.revision_name));
    let ingress: Verdict = match missing {
        Some(t) => Err(("ServiceMissing", format!("waiting for the Service of revision {}", t.revision_name))),
        None => Ok(()),
    };
    let model = components.iter().find(|c| c.component == Component::Predictor).map(|p| status::model(p, &failures));
    let observation = Observation { old: &old, generation: isvc.metadata.generation, urls, components, ingress, model };
    let status = status::compute(&observation, input.now);
    plan.status = (isvc.status.as_ref() != Some(&status)).then_some(status);
    plan
}

/// One component's revisions: its latest revision's Deployment when new or changed, the Services of
/// the revisions it keeps (added to `keep`), and what its status says. The error (for the status)
/// says why the component cannot be realised.
fn plan_component(
    shared: &Shared,
    component: Component,
    plan: &mut Plan,
    keep: &mut BTreeSet<String>,
) -> Result<ComponentObservation, Refusal> {
    let Shared { input, manifest, owner, name, namespace, old, failures, .. } = *shared;
    let spec = component.spec(manifest).ok_or_else(|| format!("spec.{}: not set", component.name()))?;
    let scaling = component_scaling_spec(manifest, component, &input.platform.autoscaler)
        .ok_or_else(|| format!("spec.{}: not set", component.name()))?
        .map_err(|e| e.to_string())?;
    let template = RevisionTemplate::of_component(manifest, component)
        .ok_or_else(|| format!("spec.{}: not set", component.name()))?;
    let runtime: Option<SelectedRuntime> = match (component, &spec.model) {
        (Component::Predictor, Some(model)) if !uses_embedded_server(model) => {
            Some(select_runtime(model, input.runtimes.namespaced, input.runtimes.cluster)?)
        }
        _ => None,
    };
    let template_hash = match &runtime {
        None => crate::hash::of(&template),
        Some(r) => crate::hash::of(&(&template, r.kind.kind(), r.name, r.spec)),
    };
    let revisions: Vec<ObservedRevision> =
        shared.revisions.iter().filter(|r| r.component == component).cloned().collect();
    let old_component = old.component(component.name()).cloned().unwrap_or_default();

    // The latest revision: the one that runs this template (newest first), else a new one.
    let existing = revisions.iter().map(|r| (r.name.as_str(), r.template_hash.as_str()));
    let same = same_revision(existing, template_hash.as_str()).and_then(|n| revisions.iter().find(|r| r.name == n));
    // Rolled out once, a kept revision has been ready: routed to again, it takes its share at once
    // and starts from zero on the first request.
    let has_been_ready = |name: &str| {
        [
            &old_component.latest_ready_revision,
            &old_component.latest_rolledout_revision,
            &old_component.previous_rolledout_revision,
        ]
        .iter()
        .any(|n| n.as_deref() == Some(name))
    };
    let latest = match same {
        Some(r) => Latest {
            name: r.name.clone(),
            number: r.number,
            ready: revision_ready(
                r.serving() || has_been_ready(&r.name),
                r.initial_scale.unwrap_or_else(|| scaling.initial_pods()),
            ),
            observed: Some(r.clone()),
            initial_scale: r.initial_scale.unwrap_or_else(|| scaling.initial_pods()),
        },
        None => {
            let seen = [&old_component.latest_created_revision, &old_component.latest_rolledout_revision]
                .into_iter()
                .filter_map(|n| n.as_deref().and_then(revision_number))
                .max();
            let highest = revisions.iter().map(|r| r.number).max().max(seen).unwrap_or(0);
            let number = next_number(name, highest).map_err(|e| e.to_string())?;
            let initial_scale = scaling.initial_pods();
            Latest {
                name: revision_name(name, component.name(), number),
                number,
                ready: revision_ready(false, initial_scale),
                observed: None,
                initial_scale,
            }
        }
    };
    let revision_ref = |name: &str, number: u32, serving: RevisionSettings| RevisionRef {
        service: shared.name.to_owned(),
        namespace: namespace.to_owned(),
        component,
        name: name.to_owned(),
        number,
        serving,
    };
    let serving = RevisionSettings::of(spec).with_progress_deadline(&manifest.metadata.annotations);
    let latest_ref = revision_ref(&latest.name, latest.number, serving);
    let existing = input.deployments.iter().find(|d| d.name_any() == latest.name && latest.observed.is_some());
    let replicas = match existing {
        None => Some(i32::try_from(latest.initial_scale).unwrap_or(i32::MAX)),
        Some(d) => replicas_to_apply(d),
    };
    let record = Record {
        template_hash: template_hash.clone(),
        initial_scale: latest.initial_scale,
        scaling: ScalingInputs::of_component(manifest, component).unwrap_or_default(),
    };
    let wanted = desired::deployment(&latest_ref, owner, spec, &record, replicas, input.platform, runtime.as_ref())?;
    if existing.is_none_or(|d| desired::applied_hash(&d.metadata) != desired::applied_hash(&wanted.metadata)) {
        plan.deployments.push(wanted.clone());
    }

    // Traffic: the rolled-out revisions are read back from the status, as long as they still exist.
    let exists = |n: &Option<String>| n.clone().filter(|n| *n == latest.name || revisions.iter().any(|r| r.name == *n));
    let mut rolled_out = RolledOut {
        latest: exists(&old_component.latest_rolledout_revision),
        previous: old_component.previous_rolledout_revision.clone(),
    };
    let traffic = split(&latest.name, latest.ready, &mut rolled_out, canary_percent(spec));
    let kept: BTreeSet<&str> = traffic.iter().map(|t| t.revision_name.as_str()).chain([latest.name.as_str()]).collect();
    keep.extend(kept.iter().map(|n| (*n).to_owned()));
    // Revisions without a share: the newest kept at zero for a rollback, the others collected.
    let names: Vec<&str> = revisions.iter().map(|r| r.name.as_str()).collect();
    let inactive = kept_inactive(&names, &traffic, rolled_out.previous.as_deref());
    keep.extend(inactive.iter().map(|n| (*n).to_owned()));
    for r in &revisions {
        if inactive.contains(&r.name.as_str()) && !r.reserved {
            plan.reserve.push(r.name.clone());
        } else if kept.contains(r.name.as_str()) && r.reserved {
            plan.activate.push(r.name.clone());
        }
    }

    // Services of every kept revision; the new one's port comes from its Deployment.
    let latest_port = crate::revisions::observe(std::slice::from_ref(&wanted), &owner.uid)
        .first()
        .map_or(desired::SERVER_PORT, |r| r.port);
    let services = revisions
        .iter()
        .filter(|r| kept.contains(r.name.as_str()) && r.name != latest.name)
        .map(|r| (revision_ref(&r.name, r.number, r.serving), r.port))
        .chain([(latest_ref, latest_port)]);
    for (revision, port) in services {
        let wanted = desired::service(&revision, owner, port);
        let current = input.services.iter().find(|s| s.name_any() == revision.name);
        if current.is_none_or(|s| desired::applied_hash(&s.metadata) != desired::applied_hash(&wanted.metadata)) {
            plan.services.push(wanted);
        }
    }

    let ready = component_verdict(rolled_out.latest.as_deref(), &latest, &revisions);
    // A revision that does not serve because its model does not load says so, as KServe does;
    // one whose model cannot load until something changes says so at zero replicas too.
    let concerned = rolled_out.latest.as_deref().unwrap_or(&latest.name);
    let ready = match failures.get(concerned) {
        Some(f) if !f.cause().retry_helps() => Err((f.reason, f.message.clone())),
        Some(f) => ready.map_err(|_| (f.reason, f.message.clone())),
        None => ready,
    };
    let latest_ready =
        if latest.ready { Some(latest.name.clone()) } else { exists(&old_component.latest_ready_revision) };
    // A revision created in this pass has its initial scale asked for and nothing ready yet.
    let replicas = traffic
        .iter()
        .filter_map(|t| match revisions.iter().find(|r| r.name == t.revision_name) {
            Some(r) => Some((r.name.clone(), Replicas { desired: r.replicas, ready: r.available })),
            None if t.revision_name == latest.name => {
                let desired = i32::try_from(latest.initial_scale).unwrap_or(i32::MAX);
                Some((latest.name.clone(), Replicas { desired, ready: 0 }))
            }
            None => None,
        })
        .collect();
    let note = idle_canary(&latest.name, &rolled_out, canary_percent(spec));
    Ok(ComponentObservation {
        component,
        note,
        latest_created: Some(latest.name.clone()),
        latest_ready,
        rolled_out,
        traffic,
        ready,
        replicas,
    })
}

/// The plan for a spec that cannot be realised: nothing applied or deleted (the revisions there keep
/// serving), and the status says why (`Ready` False, reason `InvalidSpec`, `message`).
pub fn refused(input: Inputs, message: String) -> Plan {
    refused_because(input, INVALID_SPEC, message)
}

/// [`refused`] with another reason (KServe's for a runtime that cannot be had, e.g.
/// `NoSupportingRuntime`).
pub fn refused_because(input: Inputs, reason: &'static str, message: String) -> Plan {
    let isvc = input.isvc;
    let (name, namespace) = (isvc.name_any(), isvc.namespace().unwrap_or_default());
    let urls = Urls::new(&name, &namespace, input.platform);
    let old = isvc.status.clone().unwrap_or_default();
    let status = status::refused(&old, isvc.metadata.generation, urls, reason, message.clone(), input.now);
    Plan {
        status: (isvc.status.as_ref() != Some(&status)).then_some(status),
        refused: Some(message),
        ..Plan::default()
    }
}

/// A component serves when the revision that takes its stable share does: it has an available
/// replica, or it was scaled to zero after having been ready (rolled out implies it has been ready).
fn component_verdict(rolled_out: Option<&str>, latest: &Latest, revisions: &[ObservedRevision]) -> Verdict {
    let Some(stable) = rolled_out else {
        let why = match &latest.observed {
            Some(r) => format!("revision {} has {} of {} replicas available", r.name, r.available, r.replicas),
            None => format!("revision {} has 0 of {} replicas available", latest.name, latest.initial_scale),
        };
        return Err(("RevisionNotReady", why));
    };
    match revisions.iter().find(|r| r.name == stable) {
        Some(r) if r.serving() || r.replicas == 0 => Ok(()),
        Some(r) => Err((
            "NoAvailableReplicas",
            format!("revision {} has {} of {} replicas available", r.name, r.available, r.replicas),
        )),
        // Rolled out in this pass without pods (initial scale 0): the activator starts it.
        None if stable == latest.name && latest.ready => Ok(()),
        None => Err(("RevisionMissing", format!("revision {stable} has no Deployment"))),
    }
}

/// `spec.replicas` to put in an apply of an existing Deployment: its current value while this
/// controller is the field's only manager (so the apply neither changes it nor drops it), nothing
/// once another manager (the autoscaler, `kubectl scale`) has written it, so it is never fought over.
pub fn replicas_to_apply(existing: &Deployment) -> Option<i32> {
    let others_own_replicas = existing.managed_fields().iter().any(|entry| {
        entry.manager.as_deref() != Some(FIELD_MANAGER)
            && entry.fields_v1.as_ref().is_some_and(|f| f.0.get("f:spec").and_then(|s| s.get("f:replicas")).is_some())
    });
    if others_own_replicas { None } else { Some(existing.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)) }
}

/// `7` for `iris-predictor-00007` (or `iris-transformer-00007`).
fn revision_number(name: &str) -> Option<u32> {
    name.rsplit('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests;
