//! The frame of every page: header, namespace selector (hidden when one namespace is allowed),
//! the script and stylesheet, and the error box the script fills.

use maud::{DOCTYPE, Markup, html};

use crate::App;

/// A whole page around `body`.
pub fn page(app: &App, title: &str, namespace: &str, namespaces: &[String], body: Markup) -> Markup {
    let prefix = &app.settings.prefix;
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Skiff models" }
                link rel="stylesheet" href={ (prefix) "/static/app.css" };
                script defer src={ (prefix) "/static/app.js" } {}
            }
            body data-prefix=(prefix) data-namespace=(namespace) {
                header {
                    a.brand href={ (prefix) "/?ns=" (namespace) } { "Skiff " span { "models" } }
                    span.mode { (app.mode.name) }
                    @if app.settings.single_namespace().is_none() {
                        label.namespace {
                            "Namespace "
                            select #namespace name="ns" {
                                @for ns in namespaces {
                                    option value=(ns) selected[ns == namespace] { (ns) }
                                }
                            }
                        }
                    }
                    a.button.primary #new href={ (prefix) "/new?ns=" (namespace) } { "+ New InferenceService" }
                }
                main {
                    div #error .error hidden {}
                    (body)
                }
            }
        }
    }
}

/// A failed page load: the status and the message (an API refusal as the API server wrote it).
pub fn error_page(app: &App, status: http::StatusCode, message: &str) -> Markup {
    let body = html! {
        h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
        div #failure .error { (message) }
        p { a href={ (app.settings.prefix) "/" } { "Back to the InferenceServices" } }
    };
    page(app, &status.to_string(), "", &[], body)
}
