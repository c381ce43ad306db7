//! The index: the namespace's InferenceServices with status, URL, latest and previous revision
//! with their traffic, replicas and age, under the refused manifests and warnings; the script
//! replaces the rows and those notices as they change.

use maud::{Markup, html};

use super::{age, layout};
use crate::App;
use crate::backend::{RevisionView, ServiceView};

/// The index page; `refused` and `warnings` are the backend's ([`crate::backend::Backend::refused`],
/// [`crate::backend::Backend::warnings`]).
pub fn page(
    app: &App,
    namespace: &str,
    namespaces: &[String],
    services: &[ServiceView],
    refused: &[String],
    warnings: &[String],
) -> Markup {
    let prefix = &app.settings.prefix;
    let body = html! {
        h1 { "InferenceServices in " (namespace) }
        (notices(refused, warnings))
        table.services #services data-live={ (prefix) "/api/namespaces/" (namespace) "/rows" } {
            thead {
                tr {
                    th { "Status" } th { "Name" } th { "URL" } th { "Latest revision" } th { "Previous revision" }
                    th { "Replicas" } th { "Age" }
                }
            }
            tbody { (rows(app, services)) }
        }
    };
    layout::page(app, "InferenceServices", namespace, namespaces, body)
}

/// The refused manifests and the warnings above the table, in their `#notices` box (also sent
/// on their own to the live index, as `rows` are; never empty, as an event's data must not be).
pub fn notices(refused: &[String], warnings: &[String]) -> Markup {
    html! { div #notices {
        @if !refused.is_empty() {
            div #refused .error {
                strong { "Refused manifests (not served):" }
                ul { @for message in refused { li { (message) } } }
            }
        }
        @if !warnings.is_empty() {
            div #warnings .warning {
                strong { "Warnings (served; kubectl apply --validate=strict would refuse these):" }
                ul { @for message in warnings { li { (message) } } }
            }
        }
    } }
}

fn revision_cell(revision: Option<&RevisionView>) -> Markup {
    html! {
        @if let Some(r) = revision {
            span.revision { (r.name) } " " span.percent { (r.percent) "%" }
        } @else { "-" }
    }
}

fn replicas(revisions: &[RevisionView]) -> String {
    let ready: u32 = revisions.iter().filter_map(|r| r.ready).sum();
    let desired: u32 = revisions.iter().filter_map(|r| r.desired).sum();
    format!("{ready}/{desired}")
}

/// The table rows (also sent on their own to the live index).
pub fn rows(app: &App, services: &[ServiceView]) -> Markup {
    let prefix = &app.settings.prefix;
    html! {
        @if services.is_empty() {
            tr { td colspan="7" .empty { "No InferenceServices yet." } }
        }
        @for s in services {
            @let latest = s.revisions.iter().find(|r| r.tag.as_deref() == Some("latest")).or(s.revisions.first());
            @let previous = s.revisions.iter().find(|r| r.tag.as_deref() == Some("prev"));
            tr data-name=(s.name) data-ready=(s.ready) {
                td { span class={ "status " (s.ready.to_lowercase()) } title={ "Ready: " (s.ready) } { (s.ready) } }
                td { a href={ (prefix) "/details/" (s.namespace) "/" (s.name) } { (s.name) } }
                td.url { (s.url.as_deref().unwrap_or("-")) }
                td { (revision_cell(latest)) }
                td { (revision_cell(previous)) }
                td.replicas { (replicas(&s.revisions)) }
                td { (age(s.created)) }
            }
        }
    }
}
