//! The detail page and its tabs: overview (conditions, URL, curl), revisions and traffic (with the
//! canary buttons), events, YAML, logs (streamed by the script) and metrics (charts drawn by it).
//! The parts that show state carry `data-part`: the script fetches the page again while it is open
//! and replaces the parts that changed, so the page follows the service without a reload.

use maud::{Markup, html};

use super::layout;
use crate::App;
use crate::backend::{EventView, PodView, ServiceView};
use crate::error::{Error, Result};

/// The tabs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// Conditions, URL, curl.
    Overview,
    /// Revisions, traffic, canary.
    Revisions,
    /// Events.
    Events,
    /// The manifest.
    Yaml,
    /// Streamed logs.
    Logs,
    /// Charts.
    Metrics,
}

const TABS: [(Tab, &str, &str); 6] = [
    (Tab::Overview, "overview", "Overview"),
    (Tab::Revisions, "revisions", "Revisions and traffic"),
    (Tab::Events, "events", "Events"),
    (Tab::Yaml, "yaml", "YAML"),
    (Tab::Logs, "logs", "Logs"),
    (Tab::Metrics, "metrics", "Metrics"),
];

impl Tab {
    /// The tab named in `?tab=` (overview by default).
    pub fn parse(name: Option<&str>) -> Result<Tab> {
        match name {
            None | Some("") => Ok(Tab::Overview),
            Some(name) => TABS
                .iter()
                .find(|(_, id, _)| *id == name)
                .map(|(tab, _, _)| *tab)
                .ok_or_else(|| Error::BadRequest(format!("tab: no tab {name:?}"))),
        }
    }
}

/// What a tab needed from the backend.
pub enum Content {
    /// Nothing beyond the service.
    None,
    /// Events.
    Events(Vec<EventView>),
    /// The manifest.
    Yaml(String),
    /// Replicas whose logs can be read.
    Pods(Vec<PodView>),
    /// The overview's example request body, when one could be built ([`crate::example`]).
    Example(Option<String>),
}

/// The detail page on `tab`.
pub fn page(app: &App, namespaces: &[String], service: &ServiceView, tab: Tab, content: &Content) -> Markup {
    let example = match content {
        Content::Example(body) => body.as_deref(),
        _ => None,
    };
    let prefix = &app.settings.prefix;
    let (namespace, name) = (&service.namespace, &service.name);
    let base = format!("{prefix}/details/{namespace}/{name}");
    let api = format!("{prefix}/api/namespaces/{namespace}/inferenceservices/{name}");
    let body = html! {
        div.title {
            h1 data-part="title" { (name) " " span class={ "status " (service.ready.to_lowercase()) } { "Ready: " (service.ready) } }
            button.danger #delete data-api=(api) data-index={ (prefix) "/?ns=" (namespace) } data-name=(name) { "Delete" }
        }
        nav.tabs {
            @for (t, id, label) in TABS {
                a.active[t == tab] href={ (base) "?tab=" (id) } { (label) }
            }
        }
        section.tab #tab data-api=(api) {
            @match (tab, content) {
                (Tab::Overview, _) => (overview(app, service, example)),
                (Tab::Revisions, _) => (revisions(service, &api)),
                (Tab::Events, Content::Events(events)) => (events_table(events)),
                (Tab::Yaml, Content::Yaml(yaml)) => pre.yaml data-part="yaml" { (yaml) },
                (Tab::Logs, Content::Pods(pods)) => (logs(prefix, namespace, pods)),
                (Tab::Metrics, _) => (metrics(app, &api)),
                _ => p { "Nothing to show." },
            }
        }
    };
    layout::page(app, name, namespace, namespaces, body)
}

/// The curl that reaches the service: its URL, or `skiff up`'s router with the URL's host. With
/// `example` (a body built from the model's metadata) it sends that body inline, runnable as
/// shown; without, it reads the metadata the example is built from.
pub fn curl(app: &App, service: &ServiceView, example: Option<&str>) -> String {
    let url = service.url.clone().unwrap_or_else(|| format!("http://{}.{}", service.name, service.namespace));
    let (path, data) = match example {
        Some(body) if service.protocol == "v1" => (format!("/v1/models/{}:predict", service.name), Some(body)),
        Some(body) => (format!("/v2/models/{}/infer", service.name), Some(body)),
        None => (format!("/v2/models/{}", service.name), None),
    };
    let data = data.map_or_else(String::new, |body| {
        format!(" -H 'Content-Type: application/json' -d '{}'", body.replace('\'', r"'\''"))
    });
    match &app.mode.router {
        Some(router) => format!("curl -s -H 'Host: {}' http://{router}{path}{data}", curl_host(service)),
        None => format!("curl -s {url}{path}{data}"),
    }
}

/// The host of the service's URL.
fn curl_host(service: &ServiceView) -> String {
    let url = service.url.clone().unwrap_or_else(|| format!("http://{}.{}", service.name, service.namespace));
    url.trim_start_matches("http://").trim_start_matches("https://").to_owned()
}

fn overview(app: &App, service: &ServiceView, example: Option<&str>) -> Markup {
    let curl = curl(app, service, example);
    html! {
        dl.facts data-part="facts" {
            dt { "URL" } dd { (service.url.as_deref().unwrap_or("-")) }
            dt { "Namespace" } dd { (service.namespace) }
            dt { "Model format" } dd { (service.model_format.as_deref().unwrap_or("-")) }
            dt { "Protocol" } dd { (service.protocol) }
        }
        h2 { "Try it" }
        div.curl { code #curl { (curl) } button #copy-curl type="button" { "Copy" } }
        @if example.is_none() && app.mode.router.is_some() {
            p.note #curl-note {
                "The example request is built from the model's metadata, read once a replica is ready \
                 (a page never wakes a service at zero). Until then, this curl reads that metadata \
                 (and wakes the service, as any request does)."
            }
        } @else if example.is_none() {
            p.note #curl-note {
                "This curl reads the model's metadata: its inputs' names, datatypes and shapes. \
                 `skiff load --model " (service.name) " --host " (curl_host(service)) "` builds an \
                 example request from it and sends it."
            }
        }
        h2 { "Conditions" }
        table data-part="conditions" {
            thead { tr { th { "Type" } th { "Status" } th { "Reason" } th { "Message" } th { "Last transition" } } }
            tbody {
                @for c in &service.conditions {
                    tr {
                        td { (c.type_) }
                        td { span class={ "status " (c.status.to_lowercase()) } { (c.status) } }
                        td { (c.reason.as_deref().unwrap_or("")) }
                        td { (c.message.as_deref().unwrap_or("")) }
                        td { (c.last_transition_time.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    }
}

fn revisions(service: &ServiceView, api: &str) -> Markup {
    html! {
        table #revisions data-part="revisions" {
            thead { tr { th { "Revision" } th { "Tag" } th { "Traffic" } th { "Ready" } th { "Desired" } } }
            tbody {
                @for r in &service.revisions {
                    tr data-revision=(r.name) data-tag=(r.tag.as_deref().unwrap_or("")) data-percent=(r.percent) {
                        td { (r.name) }
                        td { (r.tag.as_deref().unwrap_or("")) }
                        td.percent { (r.percent) "%" }
                        td { (r.ready.map_or("-".into(), |n| n.to_string())) }
                        td { (r.desired.map_or("-".into(), |n| n.to_string())) }
                    }
                }
            }
        }
        h2 { "Canary" }
        p {
            "canaryTrafficPercent: "
            strong #canary data-part="canary" data-percent=(service.canary_percent.map_or(String::new(), |p| p.to_string())) { (service.canary_percent.map_or("not set (the latest revision takes all traffic)".into(), |p| format!("{p}%"))) }
        }
        p #pending .pending hidden {}
        div.canary data-api=(api) {
            button #promote type="button" title="Remove canaryTrafficPercent: the latest revision takes all traffic" { "Promote" }
            (rollback_button(service))
            label { "Set " input #canary-percent type="number" min="0" max="100" value=(service.canary_percent.unwrap_or(10)); " %" }
            button #set-canary type="button" { "Set" }
        }
    }
}

/// "Roll back", which the page refreshes (`data-part`) as the rollout moves on: during a canary it
/// sets `canaryTrafficPercent: 0`; after a full rollout, where that changes nothing, it restores the
/// previous rolled-out revision's spec (`data-restore`), or, where the backend cannot, it is
/// disabled and says what to do.
fn rollback_button(service: &ServiceView) -> Markup {
    let rollback = &service.rollback;
    let stable = service.revisions.iter().find(|r| r.tag.as_deref() == Some("prev")).map(|r| r.name.as_str());
    html! {
        span.rollback data-part="rollback" {
            @match (rollback.rolled_out, rollback.previous.as_deref(), rollback.restorable) {
                (false, ..) => button #rollback type="button"
                    title={ "canaryTrafficPercent: 0, all traffic to " (stable.unwrap_or("the rolled-out revision")) } { "Roll back" },
                (true, Some(previous), true) => button #rollback type="button" data-restore=(previous)
                    title={ "Restore the spec of " (previous) " in the manifest: it takes all traffic again, with no new revision" } { "Roll back" },
                (true, Some(previous), false) => {
                    button #rollback type="button" disabled
                        title={ "To roll back, restore the spec of " (previous) } { "Roll back" }
                    span.note #rollback-note {
                        "To roll back, restore the spec of " (previous) " (apply the manifest it ran): it is kept at \
                         zero and takes the traffic back with no new revision. This app cannot restore it: the \
                         operator records only a hash of each revision's spec."
                    }
                }
                (true, None, _) => button #rollback type="button" disabled
                    title="There is no earlier rolled-out revision to roll back to" { "Roll back" },
            }
        }
    }
}

fn events_table(events: &[EventView]) -> Markup {
    html! {
        div data-part="events" { @if events.is_empty() { p.empty { "No events." } }
        @else {
            table #events {
                thead { tr { th { "Type" } th { "Reason" } th { "Object" } th { "Message" } th { "Count" } th { "Last seen" } } }
                tbody {
                    @for e in events {
                        tr class=(e.kind.to_lowercase()) {
                            td { (e.kind) } td { (e.reason) } td { (e.object) } td { (e.message) }
                            td { (e.count) } td { (e.last_seen.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        } }
    }
}

fn logs(prefix: &str, namespace: &str, pods: &[PodView]) -> Markup {
    html! {
        div data-part="replicas" { @if pods.is_empty() { p.empty { "No replicas are running (the revision may be at zero)." } }
        @else {
            label { "Replica "
                select #pod data-logs={ (prefix) "/api/namespaces/" (namespace) "/pods/" } {
                    @for p in pods {
                        option value=(p.name) data-container=(p.container) { (p.name) " (" (p.revision) ", " (p.phase) ")" }
                    }
                }
            }
            div #logs .logs role="log" {}
        } }
    }
}

fn metrics(app: &App, api: &str) -> Markup {
    html! {
        p.hint {
            "From " (app.sampler.source()) "; updated every 5 s. Window: "
            select #window aria-label="Window" {
                option value="5" { "5 minutes" }
                option value="15" selected { "15 minutes" }
                option value="60" { "1 hour" }
            }
        }
        div #charts .charts data-metrics={ (api) "/metrics?minutes=" } {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{RevisionView, RollbackView};

    fn service(rolled_out: bool, previous: Option<&str>, restorable: bool) -> ServiceView {
        let revision = |n: u32, percent, tag: &str| RevisionView {
            name: format!("iris-predictor-0000{n}"),
            percent,
            tag: Some(tag.into()),
            desired: None,
            ready: None,
        };
        ServiceView {
            name: "iris".into(),
            namespace: "default".into(),
            ready: "True".into(),
            url: None,
            conditions: Vec::new(),
            revisions: if rolled_out {
                vec![revision(2, 100, "latest")]
            } else {
                vec![revision(2, 30, "latest"), revision(1, 70, "prev")]
            },
            canary_percent: (!rolled_out).then_some(30),
            model_format: None,
            protocol: "v1".into(),
            rollback: RollbackView { rolled_out, previous: previous.map(str::to_owned), restorable },
            created: None,
        }
    }

    fn button(service: &ServiceView) -> String {
        rollback_button(service).into_string()
    }

    #[test]
    fn during_a_canary_roll_back_sets_the_canary_to_zero() {
        let html = button(&service(false, Some("iris-predictor-00000"), true));
        assert!(!html.contains("data-restore") && !html.contains("disabled"), "{html}");
        assert!(html.contains("canaryTrafficPercent: 0, all traffic to iris-predictor-00001"), "{html}");
    }

    #[test]
    fn after_a_full_rollout_it_restores_the_previous_spec_where_the_backend_can() {
        let html = button(&service(true, Some("iris-predictor-00001"), true));
        assert!(html.contains(r#"data-restore="iris-predictor-00001""#) && !html.contains("disabled"), "{html}");
    }

    #[test]
    fn on_a_cluster_it_is_disabled_and_says_what_to_do() {
        let html = button(&service(true, Some("iris-predictor-00001"), false));
        assert!(html.contains("disabled") && !html.contains("data-restore"), "{html}");
        assert!(html.contains(r#"title="To roll back, restore the spec of iris-predictor-00001""#), "{html}");
        assert!(html.contains(r#"id="rollback-note""#), "a visible note: {html}");
        let alone = button(&service(true, None, true));
        assert!(alone.contains("disabled") && alone.contains("no earlier rolled-out revision"), "{alone}");
    }
}
