//! The create page: a form for the common case (it shows the YAML it will submit, and creates it),
//! or YAML pasted or uploaded as in KServe's app. Both submit YAML; the backend forces the selected
//! namespace. The form offers only what can run here ([`Offer`]).

use maud::{Markup, html};

use super::layout;
use crate::App;
use crate::formats::Offer;
use crate::manifest::CUSTOM_CONTAINER;

/// The create page.
pub fn page(app: &App, namespace: &str, namespaces: &[String], offer: &Offer) -> Markup {
    let prefix = &app.settings.prefix;
    let api = format!("{prefix}/api/namespaces/{namespace}");
    let body = html! {
        h1 { "New InferenceService in " (namespace) }
        div.create {
            form #isvc-form data-render={ (api) "/render" } {
                h2 { "Form" }
                label { "Name" input name="name" required pattern="[a-z]([-a-z0-9]*[a-z0-9])?" placeholder="iris"; }
                label { "Model format"
                    select name="modelFormat" {
                        @for format in &offer.formats {
                            option value=(format) { (format) }
                        }
                        @if offer.containers {
                            option value=(CUSTOM_CONTAINER) { "custom container" }
                        }
                    }
                }
                label.container-only { "Container image" input name="image" placeholder="kserve/sklearnserver:latest"; }
                label { "Storage URI" input name="storageUri" placeholder="file://models/iris or gs://bucket/model"; }
                label { "Protocol"
                    select name="protocol" { option value="v2" { "v2" } option value="v1" { "v1" } }
                }
                div.row {
                    label { "Min replicas" input name="minReplicas" type="number" min="0" max="1000" value="0"; }
                    label { "Max replicas" input name="maxReplicas" type="number" min="0" max="1000" value="3"; }
                    label { "Canary %" input name="canaryPercent" type="number" min="0" max="100" placeholder="none"; }
                }
                div.actions {
                    button.primary #create-form type="submit" { "Create" }
                    button #use-form type="button" { "Show as YAML" }
                }
            }
            form #yaml-form data-create={ (api) "/inferenceservices" } data-details={ (prefix) "/details/" (namespace) "/" } {
                h2 { "YAML" }
                label { "Upload a file " input #yaml-file type="file" accept=".yaml,.yml,.json"; }
                textarea #yaml name="yaml" rows="16" spellcheck="false" placeholder="apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n…" {}
                p.hint { "metadata.namespace is set to " strong { (namespace) } "." }
                button.primary #create type="submit" { "Create" }
            }
        }
    };
    layout::page(app, "New InferenceService", namespace, namespaces, body)
}
