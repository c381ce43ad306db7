//! The models web app in `skiff up`: the same app as on a cluster, over the folder of manifests.
//! It reads the state `skiff up` parsed ([`ManifestFolder::current`]), never the folder itself.
//! Namespaces are those of the manifests; create writes a checked YAML file into the folder (named
//! by [`manifest_file`]; a refusal reads `file: field: message`, as `skiff get` shows it), a canary
//! change edits the one field in the file in place ([`merge_patch`]: the user's comments, key order
//! and quoting stay), a rollback after a full rollout edits the fields that differ from the
//! previous rolled-out revision's spec the same way ([`restore_patch`]), delete removes it, and
//! each refreshes the state at once. What is written is first checked against every rule the
//! folder applies ([`ManifestFolder::check`]: size, YAML, validation, the name kept by another
//! file), so an edit never makes the folder drop a service; an edit follows a symbolic link to its
//! target and never overwrites a save it did not read ([`Edit`]); logs are the replicas' output; events are the changes `skiff up` saw;
//! metrics come from the router's own counters.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use skiff_api::revision::RevisionTemplate;
use skiff_api::status::Condition;
use skiff_api::traffic::canary_percent;
use skiff_web::backend::{Backend, EventView, LogStream, PodView, RevisionView, RollbackView, ServiceView};
use skiff_web::error::{Error, Result};
use skiff_web::formats::{Offer, runnable_formats};
use skiff_web::manifest::{custom_containers, to_yaml};
use skiff_web::metrics::sampler::Scrape;
use skiff_web::rollback::{refusal, restore_patch};
use skiff_web::yaml_edit::merge_patch;
use tokio_stream::wrappers::BroadcastStream;

use super::admin::Admin;
use super::edit::Edit;
use super::events::EventLog;
use super::folder::{ManifestFolder, manifest_file};
use super::logs::ReplicaLogs;
use super::manifests::{Folder, Manifest};
use super::runtimes::{can_run, on_this_machine};
use super::status::ServiceStatus;

/// The folder behind the web app.
pub struct FolderBackend {
    /// The manifest folder and what `skiff up` last parsed of it.
    pub manifests: Arc<ManifestFolder>,
    /// The latest status.
    pub admin: Arc<Admin>,
    /// The replicas' output.
    pub logs: Arc<ReplicaLogs>,
    /// What changed.
    pub events: Arc<EventLog>,
    /// Whether the web app may create custom containers (`skiff up --web-allow-containers`).
    pub allow_containers: bool,
}

fn condition(type_: &str, ready: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ready { "True" } else { "False" }.into(),
        last_transition_time: None,
        reason: (!reason.is_empty()).then(|| reason.to_owned()),
        message: (!message.is_empty()).then(|| message.to_owned()),
    }
}

/// What the pages show of a manifest and, once `skiff up` serves it, its status.
fn view(manifest: &Manifest, status: Option<&ServiceStatus>) -> ServiceView {
    let isvc = &manifest.isvc;
    let model = isvc.spec.predictor.model.as_ref();
    let ready = status.is_some_and(|s| s.ready);
    let (reason, message) = match status {
        None => ("Pending", "skiff up has not read this manifest yet"),
        Some(s)
            if !s.ready
                && let Some(failure) = s.failure() =>
        {
            (failure.reason.as_str(), failure.message.as_str())
        }
        Some(s) if !s.ready => ("RevisionNotReady", "no revision can serve yet"),
        Some(_) => ("", ""),
    };
    ServiceView {
        name: isvc.name().to_owned(),
        namespace: isvc.namespace().to_owned(),
        ready: if status.is_some() { if ready { "True" } else { "False" } } else { "Unknown" }.into(),
        url: status.map(|s| s.url.clone()),
        conditions: vec![
            condition("Ready", ready, reason, message),
            condition("PredictorReady", ready, reason, message),
        ],
        revisions: status
            .map(|s| {
                s.revisions
                    .iter()
                    .map(|r| RevisionView {
                        name: r.name.clone(),
                        percent: r.percent,
                        tag: r.tag.clone(),
                        desired: Some(r.desired),
                        ready: Some(r.ready),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        canary_percent: canary_percent(&isvc.spec.predictor),
        model_format: model.map(|m| m.model_format.name.clone()),
        protocol: model.and_then(|m| m.protocol_version.clone()).unwrap_or_else(|| "v1".into()),
        rollback: status.map(rollback_view).unwrap_or_default(),
        created: manifest.created,
    }
}

/// What "Roll back" can do: `skiff up` keeps the spec of each kept revision, so the previous
/// rolled-out one's can be restored while it is kept.
fn rollback_view(status: &ServiceStatus) -> RollbackView {
    RollbackView {
        rolled_out: status.latest_rolledout_revision.is_some()
            && status.latest_rolledout_revision == status.latest_created_revision,
        previous: status.previous_rolledout_revision.clone(),
        restorable: status.previous_template.is_some(),
    }
}

/// A revision's template as the parts of a manifest it comes from, for [`restore_patch`].
fn template_value(template: &RevisionTemplate) -> Value {
    json!({ "metadata": { "annotations": template.annotations }, "spec": { "predictor": template.predictor } })
}

/// A refusal of an edit to `path`, naming the file first (as `skiff get` shows a refused manifest).
fn in_file(path: &Path, error: Error) -> Error {
    match error {
        Error::Refused { status, message } => {
            Error::Refused { status, message: format!("{}: {message}", path.display()) }
        }
        other => other,
    }
}

fn unavailable(what: &str, error: impl std::fmt::Display) -> Error {
    Error::Unavailable(format!("{what}: {error}"))
}

/// Writes `text` to `path` whole or not at all (a temporary name the folder watch ignores, then a rename).
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("manifest");
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&temporary, text).map_err(|e| unavailable(&format!("writing {}", temporary.display()), e))?;
    std::fs::rename(&temporary, path).map_err(|e| unavailable(&format!("writing {}", path.display()), e))
}

impl FolderBackend {
    /// What `skiff up` last parsed.
    fn folder(&self) -> Arc<Folder> {
        self.manifests.current()
    }

    fn manifest(&self, namespace: &str, name: &str) -> Result<Manifest> {
        self.folder()
            .manifests
            .get(&format!("{namespace}/{name}"))
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("InferenceService {namespace}/{name}")))
    }

    fn status(&self, namespace: &str, name: &str) -> Option<ServiceStatus> {
        self.admin.status.load().services.iter().find(|s| s.namespace == namespace && s.name == name).cloned()
    }

    /// Checks `text` as `skiff up` will when it reads it from `path`, by every rule of the folder:
    /// `file: field: message` if not.
    fn check(&self, path: &Path, text: &str) -> Result<Manifest> {
        self.manifests
            .check(path, text)
            .map_err(|message| Error::Refused { status: 422, message: format!("{}: {message}", path.display()) })
    }
}

#[async_trait]
impl Backend for FolderBackend {
    async fn namespaces(&self) -> Result<Vec<String>> {
        let mut namespaces: BTreeSet<String> =
            self.folder().manifests.values().map(|m| m.isvc.namespace().to_owned()).collect();
        namespaces.insert("default".into());
        Ok(namespaces.into_iter().collect())
    }

    async fn list(&self, namespace: &str) -> Result<Vec<ServiceView>> {
        let status = self.admin.status.load();
        Ok(self
            .folder()
            .manifests
            .values()
            .filter(|m| m.isvc.namespace() == namespace)
            .map(|m| view(m, status.services.iter().find(|s| s.namespace == namespace && s.name == m.isvc.name())))
            .collect())
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<ServiceView> {
        let manifest = self.manifest(namespace, name)?;
        Ok(view(&manifest, self.status(namespace, name).as_ref()))
    }

    async fn manifest(&self, namespace: &str, name: &str) -> Result<String> {
        Ok(self.manifest(namespace, name)?.text.to_string())
    }

    async fn create(&self, namespace: &str, manifest: Value) -> Result<ServiceView> {
        let containers = custom_containers(&manifest);
        if !containers.is_empty() && !self.allow_containers {
            return Err(Error::Forbidden(format!(
                "{}: the models web app may not create custom containers, which skiff up runs as commands on \
                 this machine (a page that reached the app could run any); start skiff up with \
                 --web-allow-containers to allow it, or put the manifest in the folder yourself",
                containers.join(", ")
            )));
        }
        let name = manifest["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        if self.folder().manifests.contains_key(&format!("{namespace}/{name}")) {
            return Err(Error::Refused {
                status: 409,
                message: format!("InferenceService {namespace}/{name} already exists"),
            });
        }
        let file = manifest_file(namespace, &name).map_err(|message| Error::Refused { status: 422, message })?;
        let path = self.manifests.dir().join(&file);
        if path.exists() {
            return Err(Error::Refused { status: 409, message: format!("{}: the file exists", path.display()) });
        }
        let text = to_yaml(&manifest);
        let checked = self.check(&path, &text)?;
        write_atomically(&path, &text)?;
        self.manifests.refresh();
        Ok(view(&checked, None))
    }

    async fn patch(&self, namespace: &str, name: &str, patch: Value) -> Result<()> {
        // The file as it is now (read again only if it changed), so an edit made since the last
        // pass is patched, not overwritten.
        self.manifests.refresh();
        let manifest = self.manifest(namespace, name)?;
        let edit = Edit::begin(&self.manifests, &manifest).await?;
        // The field is edited where it stands: the user's comments, order and quoting stay.
        let text = merge_patch(edit.base(), 0, &patch).map_err(|error| in_file(&manifest.path, error))?;
        self.check(&manifest.path, &text)?;
        edit.write(&text)?;
        self.manifests.refresh();
        Ok(())
    }

    async fn rollback(&self, namespace: &str, name: &str) -> Result<()> {
        self.manifests.refresh();
        let manifest = self.manifest(namespace, name)?;
        let status = self.status(namespace, name).ok_or_else(|| Error::Refused {
            status: 409,
            message: format!("InferenceService {namespace}/{name} is not served yet"),
        })?;
        let view = rollback_view(&status);
        let (previous, kept) = match (refusal(&view), view.previous, status.previous_template) {
            (None, Some(previous), Some(kept)) => (previous, kept),
            (refused, ..) => return Err(refused.unwrap_or_else(|| Error::NotFound("the previous revision".into()))),
        };
        // Only the fields that differ are edited, in place; a change that cannot be made so (a
        // list) is refused naming the field, and nothing is written.
        let current = RevisionTemplate::of(&manifest.isvc);
        let canary_set = manifest.isvc.spec.predictor.canary_traffic_percent.is_some();
        let patch = restore_patch(&template_value(&current), &template_value(&kept), canary_set);
        let restoring = |error| {
            in_file(
                &manifest.path,
                match error {
                    Error::Refused { status, message } => {
                        Error::Refused { status, message: format!("restoring the spec of {previous}: {message}") }
                    }
                    other => other,
                },
            )
        };
        let edit = Edit::begin(&self.manifests, &manifest).await?;
        let text = merge_patch(edit.base(), 0, &patch).map_err(restoring)?;
        let checked = self.check(&manifest.path, &text)?;
        if RevisionTemplate::of(&checked.isvc) != kept {
            return Err(restoring(Error::Refused {
                status: 422,
                message: "the file edited in place does not give that spec; restore it by hand".into(),
            }));
        }
        edit.write(&text)?;
        self.manifests.refresh();
        Ok(())
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<()> {
        let manifest = self.manifest(namespace, name)?;
        std::fs::remove_file(&manifest.path)
            .map_err(|e| unavailable(&format!("removing {}", manifest.path.display()), e))?;
        self.manifests.refresh();
        Ok(())
    }

    async fn events(&self, namespace: &str, name: &str) -> Result<Vec<EventView>> {
        Ok(self.events.of(namespace, name))
    }

    async fn pods(&self, namespace: &str, name: &str) -> Result<Vec<PodView>> {
        let revisions: Vec<String> = self
            .status(namespace, name)
            .map(|s| s.revisions.iter().map(|r| r.name.clone()).collect())
            .unwrap_or_default();
        Ok(self
            .logs
            .pods(namespace, &revisions)
            .into_iter()
            .map(|r| PodView {
                name: r.pod,
                revision: r.revision,
                container: "kserve-container".into(),
                phase: "Running".into(),
            })
            .collect())
    }

    async fn logs(&self, namespace: &str, pod: &str, _container: &str, tail: u32) -> Result<LogStream> {
        let (lines, feed) = self
            .logs
            .follow(namespace, pod, tail as usize)
            .ok_or_else(|| Error::NotFound(format!("replica {namespace}/{pod}")))?;
        let live = BroadcastStream::new(feed).filter_map(|line| async move { line.ok().map(Ok) });
        Ok(futures::stream::iter(lines.into_iter().map(Ok)).chain(live).boxed())
    }

    async fn offer(&self, _namespace: &str) -> Result<Offer> {
        let config = self.manifests.config();
        let runtimes = config.runtimes.iter().map(|r| &r.spec.spec);
        let formats = runnable_formats(runtimes, |r| can_run(r, &config.images, on_this_machine));
        Ok(Offer { formats, containers: self.allow_containers })
    }

    async fn refused(&self) -> Result<Vec<String>> {
        Ok(self.admin.status.load().errors.clone())
    }

    async fn warnings(&self) -> Result<Vec<String>> {
        Ok(self.admin.status.load().warnings.clone())
    }
}

/// Skiff's metrics text, read in process.
pub struct AdminMetrics(pub Arc<Admin>);

#[async_trait]
impl Scrape for AdminMetrics {
    async fn scrape(&self) -> Result<String> {
        Ok((self.0.metrics)())
    }
}
