//! `skiff up`'s account of a run: each event between two status snapshots ([`super::events`]: a
//! service created, ready or removed, a revision created, its traffic split changed, replicas
//! scaled or ready, a replica failed) as one line on stdout for a person at a terminal, or, when
//! stdout is not a terminal, as a structured `tracing` event (target `skiff::lifecycle`, with
//! `namespace`, `service`, `reason` and `object` fields) for whatever collects the logs.

use std::io::IsTerminal;

use super::events::Recorded;

/// Where the events go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Story {
    /// One line each on stdout.
    Lines,
    /// `tracing` events with fields, at info (warn for a `Warning`).
    Structured,
}

impl Story {
    /// Lines when stdout is a terminal, structured events otherwise.
    pub fn for_stdout() -> Story {
        if std::io::stdout().is_terminal() { Story::Lines } else { Story::Structured }
    }

    /// Tells `events`, oldest first.
    pub fn tell(self, events: &[Recorded]) {
        for recorded in events {
            match self {
                Story::Lines => println!("{}", line(recorded)),
                Story::Structured => structured(recorded),
            }
        }
    }
}

/// One event as a line: `HH:MM:SS namespace/service Reason [revision] [(warning)]: message`; the
/// object is named when it is a revision (the service is named already), and a message of several
/// lines (a replica's last words) is joined with ` | `.
pub fn line(recorded: &Recorded) -> String {
    let event = &recorded.event;
    let time = event.last_seen.as_deref().and_then(|at| at.get(11..19)).unwrap_or("--:--:--");
    let mut line = format!("{time} {}/{} {}", recorded.namespace, recorded.service, event.reason);
    if let Some(revision) = event.object.strip_prefix("Revision/") {
        line.push(' ');
        line.push_str(revision);
    }
    if event.kind == "Warning" {
        line.push_str(" (warning)");
    }
    line.push_str(": ");
    let message: Vec<&str> = event.message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    line.push_str(&message.join(" | "));
    line
}

fn structured(recorded: &Recorded) {
    let event = &recorded.event;
    let (namespace, service, reason, object) = (&recorded.namespace, &recorded.service, &event.reason, &event.object);
    if event.kind == "Warning" {
        tracing::warn!(target: "skiff::lifecycle", %namespace, %service, %reason, %object, "{}", event.message);
    } else {
        tracing::info!(target: "skiff::lifecycle", %namespace, %service, %reason, %object, "{}", event.message);
    }
}

#[cfg(test)]
mod tests {
    use skiff_web::backend::EventView;

    use super::*;

    fn recorded(kind: &str, reason: &str, object: &str, message: &str) -> Recorded {
        Recorded {
            namespace: "team-a".into(),
            service: "iris".into(),
            event: EventView {
                kind: kind.into(),
                reason: reason.into(),
                object: object.into(),
                message: message.into(),
                count: 1,
                last_seen: Some("2026-11-26T10:21:03Z".into()),
            },
        }
    }

    #[test]
    fn each_event_is_one_line_naming_the_service_and_revision() {
        let created = recorded("Normal", "RevisionCreated", "Revision/iris-predictor-00002", "a new revision");
        assert_eq!(line(&created), "10:21:03 team-a/iris RevisionCreated iris-predictor-00002: a new revision");
        let canary =
            recorded("Normal", "TrafficChanged", "InferenceService/iris", "traffic: a 20% (latest), b 80% (prev)");
        assert_eq!(line(&canary), "10:21:03 team-a/iris TrafficChanged: traffic: a 20% (latest), b 80% (prev)");
        let failed = recorded("Warning", "ModelLoadFailed", "Revision/iris-predictor-00001", "cannot load\nmodel");
        let failed = line(&failed);
        assert_eq!(failed, "10:21:03 team-a/iris ModelLoadFailed iris-predictor-00001 (warning): cannot load | model");
    }
}
