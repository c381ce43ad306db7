//! Events in standalone mode, for the web app's events tab and `skiff up`'s own account of a run
//! (`lifecycle`): what changed between two status snapshots (a service created or removed, a
//! revision created, a service ready or not, its traffic split, replicas asked for and ready, a
//! replica that exited on its own, why it failed — `ModelLoadFailed` — and the back-off before the
//! next start, a revision that gave up starting — `ProgressDeadlineExceeded`), kept for the last
//! [`KEPT`] changes.

use std::collections::VecDeque;
use std::sync::Mutex;

use skiff_web::backend::EventView;

use super::status::{RevisionStatus, ServiceStatus, Status};

/// Events kept.
const KEPT: usize = 1000;

/// One event and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Namespace of the service.
    pub namespace: String,
    /// The service.
    pub service: String,
    /// The event.
    pub event: EventView,
}

fn event(service: &ServiceStatus, kind: &str, reason: &str, object: String, message: String, at: &str) -> Recorded {
    Recorded {
        namespace: service.namespace.clone(),
        service: service.name.clone(),
        event: EventView {
            kind: kind.into(),
            reason: reason.into(),
            object,
            message,
            count: 1,
            last_seen: Some(at.to_owned()),
        },
    }
}

/// The events between `old` and `new`, at time `at` (RFC 3339).
pub fn diff(old: &Status, new: &Status, at: &str) -> Vec<Recorded> {
    let mut events = Vec::new();
    for service in &new.services {
        let before = old.services.iter().find(|s| s.name == service.name && s.namespace == service.namespace);
        let isvc = format!("InferenceService/{}", service.name);
        if before.is_none() {
            events.push(event(service, "Normal", "Created", isvc.clone(), format!("read from {}", service.file), at));
        }
        if let Some(revision) = &service.latest_created_revision
            && before.and_then(|b| b.latest_created_revision.as_ref()) != Some(revision)
        {
            let message = "the predictor's spec changed: a new revision".to_owned();
            events.push(event(service, "Normal", "RevisionCreated", format!("Revision/{revision}"), message, at));
        }
        if before.map(|b| b.ready) != Some(service.ready) && (before.is_some() || service.ready) {
            let (kind, reason, message) = if service.ready {
                ("Normal", "Ready", format!("serving at {}", service.url))
            } else {
                ("Warning", "NotReady", "no revision can serve".to_owned())
            };
            events.push(event(service, kind, reason, isvc.clone(), message, at));
        }
        if let Some(before) = before
            && split(&before.revisions) != split(&service.revisions)
        {
            let message = format!("traffic: {}", split(&service.revisions).join(", "));
            events.push(event(service, "Normal", "TrafficChanged", isvc.clone(), message, at));
        }
        for revision in &service.revisions {
            let then = before.and_then(|b| b.revisions.iter().find(|r| r.name == revision.name));
            let object = format!("Revision/{}", revision.name);
            let (desired, ready, restarts, spawns) =
                then.map_or((0, 0, 0, 0), |t| (t.desired, t.ready, t.restarts, t.health.spawns));
            if desired != revision.desired {
                let message = format!("replicas asked for: {desired} → {}", revision.desired);
                events.push(event(service, "Normal", "Scaled", object.clone(), message, at));
            }
            if ready != revision.ready {
                let message = format!("ready replicas: {ready} → {}", revision.ready);
                events.push(event(service, "Normal", "ReplicasReady", object.clone(), message, at));
            }
            if revision.restarts > restarts {
                let message = format!("a replica exited on its own and was replaced ({} so far)", revision.restarts);
                events.push(event(service, "Warning", "ReplicaRestarted", object.clone(), message, at));
            }
            let (failure, back_off) = (&revision.health.last_failure_info, revision.health.back_off_ms);
            if let Some(failure) = failure
                && then.and_then(|t| t.health.last_failure_info.as_ref()) != Some(failure)
            {
                events.push(event(service, "Warning", &failure.reason, object.clone(), failure.message.clone(), at));
            }
            let timed_out = |r: &RevisionStatus| r.autoscaler.as_ref().and_then(|a| a.timed_out.clone());
            if let Some(message) = timed_out(revision)
                && then.and_then(timed_out).is_none()
            {
                let reason = skiff_autoscaler::activation::TIMED_OUT_REASON;
                events.push(event(service, "Warning", reason, object.clone(), message, at));
            }
            if let Some(ms) = back_off
                && (then.and_then(|t| t.health.back_off_ms) != Some(ms) || revision.health.spawns > spawns)
            {
                let message = format!("back-off {ms}ms restarting failed replica");
                events.push(event(service, "Warning", "BackOff", object, message, at));
            }
        }
    }
    for gone in
        old.services.iter().filter(|s| !new.services.iter().any(|n| n.name == s.name && n.namespace == s.namespace))
    {
        let message = format!("{} no longer defines it: its revisions are removed", gone.file);
        events.push(event(gone, "Normal", "Deleted", format!("InferenceService/{}", gone.name), message, at));
    }
    events
}

/// A traffic split as `revision percent% (tag)` for each revision.
fn split(revisions: &[RevisionStatus]) -> Vec<String> {
    revisions
        .iter()
        .map(|r| match &r.tag {
            Some(tag) => format!("{} {}% ({tag})", r.name, r.percent),
            None => format!("{} {}%", r.name, r.percent),
        })
        .collect()
}

/// The latest events.
#[derive(Default)]
pub struct EventLog {
    events: Mutex<VecDeque<Recorded>>,
}

impl EventLog {
    /// Adds events, forgetting the oldest past [`KEPT`].
    pub fn record(&self, events: Vec<Recorded>) {
        let mut kept = self.events.lock().expect("event log lock");
        for event in events {
            if kept.len() == KEPT {
                kept.pop_front();
            }
            kept.push_back(event);
        }
    }

    /// The events of one service, newest first.
    pub fn of(&self, namespace: &str, service: &str) -> Vec<EventView> {
        let kept = self.events.lock().expect("event log lock");
        kept.iter()
            .rev()
            .filter(|e| e.namespace == namespace && e.service == service)
            .map(|e| e.event.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standalone::status::{AutoscalerStatus, FailureInfo, ReplicaHealth, RevisionStatus};

    fn service(ready: bool, desired: u32, ready_replicas: u32, restarts: u32) -> ServiceStatus {
        ServiceStatus {
            name: "iris".into(),
            namespace: "default".into(),
            url: "http://iris.default.example.com".into(),
            ready,
            file: "iris.yaml".into(),
            latest_created_revision: Some("iris-predictor-00001".into()),
            latest_ready_revision: None,
            latest_rolledout_revision: None,
            previous_rolledout_revision: None,
            kept_revisions: Vec::new(),
            previous_template: None,
            revisions: vec![RevisionStatus {
                name: "iris-predictor-00001".into(),
                percent: 100,
                tag: None,
                desired,
                ready: ready_replicas,
                restarts,
                last_start_ms: None,
                last_spawn_ms: None,
                fetched: None,
                replicas: Vec::new(),
                queued: 0,
                cold_start_last_ms: None,
                cold_start_p50_ms: None,
                autoscaler: None,
                health: ReplicaHealth::default(),
            }],
        }
    }

    fn reasons(old: &Status, new: &Status) -> Vec<String> {
        diff(old, new, "2026-11-22T21:00:00Z").into_iter().map(|e| e.event.reason).collect()
    }

    #[test]
    fn changes_between_snapshots_are_events() {
        let empty = Status::default();
        let starting = Status { services: vec![service(false, 1, 0, 0)], ..Status::default() };
        assert_eq!(reasons(&empty, &starting), ["Created", "RevisionCreated", "Scaled"]);
        let ready = Status { services: vec![service(true, 1, 1, 0)], ..Status::default() };
        assert_eq!(reasons(&starting, &ready), ["Ready", "ReplicasReady"]);
        let restarted = Status { services: vec![service(true, 1, 1, 1)], ..Status::default() };
        assert_eq!(reasons(&ready, &restarted), ["ReplicaRestarted"]);
        assert!(reasons(&restarted, &restarted).is_empty());
        let log = EventLog::default();
        log.record(diff(&empty, &starting, "t1"));
        log.record(diff(&starting, &ready, "t2"));
        let events = log.of("default", "iris");
        assert_eq!(events[0].reason, "ReplicasReady", "newest first");
        assert!(log.of("default", "other").is_empty());
    }

    #[test]
    fn a_canary_and_a_removed_service_are_events() {
        let one = Status { services: vec![service(true, 1, 1, 0)], ..Status::default() };
        let mut canary = service(true, 1, 1, 0);
        canary.latest_created_revision = Some("iris-predictor-00002".into());
        let mut latest = canary.revisions[0].clone();
        latest.name = "iris-predictor-00002".into();
        (latest.percent, latest.tag) = (20, Some("latest".into()));
        (canary.revisions[0].percent, canary.revisions[0].tag) = (80, Some("prev".into()));
        canary.revisions.insert(0, latest);
        let canary = Status { services: vec![canary], ..Status::default() };
        let events = diff(&one, &canary, "t1");
        let changed = events.iter().find(|e| e.event.reason == "TrafficChanged").expect("a traffic event");
        assert_eq!(
            changed.event.message,
            "traffic: iris-predictor-00002 20% (latest), iris-predictor-00001 80% (prev)"
        );
        assert!(reasons(&canary, &canary).is_empty());
        let events = diff(&canary, &Status::default(), "t2");
        let removed: Vec<(&str, &str, &str)> = events
            .iter()
            .map(|e| (e.event.reason.as_str(), e.event.object.as_str(), e.event.message.as_str()))
            .collect();
        assert_eq!(
            removed,
            [("Deleted", "InferenceService/iris", "iris.yaml no longer defines it: its revisions are removed")]
        );
    }

    #[test]
    fn a_failure_and_each_back_off_are_events() {
        let starting = Status { services: vec![service(false, 1, 0, 0)], ..Status::default() };
        let failing = |spawns, message: &str, back_off_ms| {
            let mut s = service(false, 1, 0, 0);
            s.revisions[0].health = ReplicaHealth {
                spawns,
                last_failure_info: Some(FailureInfo {
                    reason: "ModelLoadFailed".into(),
                    message: message.into(),
                    exit_code: Some(1),
                }),
                back_off_ms: Some(back_off_ms),
            };
            Status { services: vec![s], ..Status::default() }
        };
        let first = failing(1, "cannot load model 'iris'", 1000);
        let events = diff(&starting, &first, "t1");
        let kinds: Vec<(&str, &str)> =
            events.iter().map(|e| (e.event.kind.as_str(), e.event.reason.as_str())).collect();
        assert_eq!(kinds, [("Warning", "ModelLoadFailed"), ("Warning", "BackOff")]);
        assert_eq!(events[0].event.message, "cannot load model 'iris'");
        assert_eq!(events[1].event.message, "back-off 1000ms restarting failed replica");
        assert!(reasons(&first, &first).is_empty(), "nothing new");
        assert_eq!(reasons(&first, &failing(2, "cannot load model 'iris'", 2000)), ["BackOff"]);
        assert_eq!(reasons(&first, &failing(2, "cannot load model 'iris'", 1000)), ["BackOff"], "capped: same wait");
        assert_eq!(reasons(&first, &failing(1, "another error", 1000)), ["ModelLoadFailed"]);
    }

    #[test]
    fn a_revision_that_gives_up_starting_is_a_warning_naming_the_progress_deadline() {
        let decision = |desired_pods, activation_timed_out| skiff_autoscaler::Decision {
            desired_pods,
            panic: false,
            excess_burst_capacity: -1,
            observed_stable: 0.0,
            observed_panic: 0.0,
            idle: activation_timed_out,
            activation_timed_out,
        };
        let at = |desired, timed_out| {
            let mut s = service(false, desired, 0, 0);
            let deadline = Some(std::time::Duration::from_secs(5));
            s.revisions[0].autoscaler = Some(AutoscalerStatus::of(decision(desired, timed_out), deadline));
            Status { services: vec![s], ..Status::default() }
        };
        let (starting, gave_up) = (at(1, false), at(0, true));
        let events = diff(&starting, &gave_up, "t1");
        let told: Vec<(&str, &str)> = events.iter().map(|e| (e.event.kind.as_str(), e.event.reason.as_str())).collect();
        assert_eq!(told, [("Normal", "Scaled"), ("Warning", "ProgressDeadlineExceeded")]);
        assert_eq!(
            events[1].event.message,
            "no replica became ready within the progress deadline (5s, serving.knative.dev/progress-deadline) plus \
             30s while no request waited: scaled to zero; the next request starts it again"
        );
        assert!(reasons(&gave_up, &gave_up).is_empty(), "told once");
        assert_eq!(reasons(&gave_up, &starting), ["Scaled"], "a request starts it again");
        assert_eq!(gave_up.services[0].revisions[0].reason().map(|(r, _)| r), Some("ProgressDeadlineExceeded"));
    }
}
