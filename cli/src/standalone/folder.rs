//! The manifest folder as `skiff up` watches it. Every `*.yaml` / `*.yml` file directly in it is
//! looked at on each pass and refused on its own, so one bad file never stops the others:
//! - a symbolic link that leads out of the folder is refused without being read;
//! - a file over [`MAX_MANIFEST_BYTES`] is refused by its size, without being read;
//! - text that is not UTF-8, not YAML or not an InferenceService is refused with the line and
//!   column, never the text.
//!
//! A file whose device, inode, size and modification time are those of the last pass is not read
//! or parsed again; its InferenceService is checked again (cheap: a model that appears later makes
//! it valid). A refusal is logged at warn once, when it first appears or changes, and so are the
//! unknown fields of an accepted manifest (a misspelt `minReplica`, also in [`Folder::warnings`])
//! and the fields it has that skiff up does not act on ([`super::manifests::notices`]). Two files
//! that define one name: the older keeps it ([`owners`]). The controller refreshes the folder; the
//! web app reads the same parsed state ([`ManifestFolder::current`]), and checks what it writes
//! with the same rules ([`ManifestFolder::check`]) and resolves links the same way
//! ([`ManifestFolder::target`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, Metadata, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use serde::Deserialize;
use skiff_api::InferenceService;

use super::config::UpConfig;
use super::manifests::{Folder, Manifest, check, read, unknown, unknown_field, utf8_position};
use owners::{Claim, owners};

mod owners;

/// The largest manifest file read: 1.5 MiB, etcd's default limit on one request
/// (`--max-request-bytes`). The Kubernetes API server cannot store a larger object, so a larger
/// file is no InferenceService `kubectl apply` could apply; KServe manifests take a few KB.
pub const MAX_MANIFEST_BYTES: u64 = 1536 * 1024;

/// What this module answers for a file that holds an InferenceGraph (not a refusal).
pub const GRAPH_FILE: &str = "\u{0}InferenceGraph";

/// Whether a manifest's text is an InferenceGraph.
pub fn is_graph(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Kind {
        kind: Option<String>,
    }
    text.contains("InferenceGraph")
        && serde_saphyr::from_str::<Kind>(text).is_ok_and(|k| k.kind.as_deref() == Some(skiff_api::graph::KIND))
}

/// What tells one version of a file from another without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        Stamp { dev: meta.dev(), ino: meta.ino(), size: meta.size(), mtime: (meta.mtime(), meta.mtime_nsec()) }
    }
}

/// How long after its last modification a file is read on every pass even if its stamp did not
/// change: a write in the same clock tick as a read leaves the stamp as it was (git's "racily
/// clean" entries).
const SETTLE: Duration = Duration::from_secs(1);

/// What reading a file gave, before the checks that depend on more than its text.
#[derive(Clone)]
struct Parsed {
    isvc: InferenceService,
    unknown: Vec<String>,
    text: Arc<str>,
    created: Option<SystemTime>,
}

/// A file as last read: its stamp, when it was read, and what reading it gave.
struct Seen {
    stamp: Stamp,
    read_at: SystemTime,
    parsed: Result<Parsed, String>,
}

impl Seen {
    /// Whether a file whose metadata is now `meta` is the one read: same stamp, and modified
    /// [`SETTLE`] before it was read.
    fn holds(&self, meta: &Metadata) -> bool {
        let settled = meta.modified().is_ok_and(|modified| modified + SETTLE < self.read_at);
        self.stamp == Stamp::of(meta) && settled
    }
}

/// The folder's files as last seen, what was last said about each, and which file holds each name.
#[derive(Default)]
struct Scan {
    seen: BTreeMap<PathBuf, Seen>,
    said: BTreeMap<PathBuf, Vec<String>>,
    owners: BTreeMap<String, PathBuf>,
    folder_error: Option<String>,
}

/// The manifest folder and its latest parsed state, shared by the controller and the web app.
pub struct ManifestFolder {
    dir: PathBuf,
    config: UpConfig,
    scan: Mutex<Scan>,
    current: ArcSwap<Folder>,
}

impl ManifestFolder {
    /// The folder `dir`, not looked at yet; manifests are checked against `config`.
    pub fn new(dir: PathBuf, config: UpConfig) -> ManifestFolder {
        ManifestFolder { dir, config, scan: Mutex::default(), current: ArcSwap::from_pointee(Folder::default()) }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The settings manifests are checked against.
    pub fn config(&self) -> &UpConfig {
        &self.config
    }

    /// The state of the latest pass.
    pub fn current(&self) -> Arc<Folder> {
        self.current.load_full()
    }

    /// Checks `text`, about to be written to the folder's file `path`, against every rule a pass
    /// applies to a file: its size, YAML, the InferenceService's validation as `skiff up` runs
    /// it, and that no other file keeps its name. The refusal is the one the pass would give
    /// (`field: message`, without the file).
    pub fn check(&self, path: &Path, text: &str) -> Result<Manifest, String> {
        let parsed = parse_text(text.to_owned(), None)?;
        let manifest = check(path, parsed.isvc, parsed.unknown, parsed.text, parsed.created, &self.config)?;
        let key = format!("{}/{}", manifest.isvc.namespace(), manifest.isvc.name());
        match self.current().manifests.get(&key) {
            Some(owner) if owner.path.as_path() != path => Err(taken_by(&key, &owner.path)),
            _ => Ok(manifest),
        }
    }

    /// The file that holds the folder's entry `path`, as a pass reads it: the entry itself, or the
    /// target of a symbolic link inside the folder; a link out of the folder is refused, naming why.
    pub fn target(&self, path: &Path) -> Result<PathBuf, String> {
        let root = self.dir.canonicalize().map_err(|e| format!("the folder cannot be read ({})", e.kind()))?;
        let link = std::fs::symlink_metadata(path).map_err(|e| format!("cannot be read ({})", e.kind()))?;
        target_of(&root, path, &link)
    }

    /// One pass over the folder (reading only the files that changed); publishes and returns the
    /// new state. If the folder itself cannot be read, the last state stays.
    pub fn refresh(&self) -> Arc<Folder> {
        let mut scan = self.scan.lock().unwrap_or_else(PoisonError::into_inner);
        match scan.pass(&self.dir, &self.config) {
            Ok(folder) => {
                scan.folder_error = None;
                let folder = Arc::new(folder);
                self.current.store(folder.clone());
                folder
            }
            Err(e) => {
                let message = e.to_string();
                if scan.folder_error.as_ref() != Some(&message) {
                    tracing::warn!(dir = %self.dir.display(), error = %message, "cannot read the manifest folder");
                    scan.folder_error = Some(message);
                }
                self.current()
            }
        }
    }
}

impl Scan {
    fn pass(&mut self, dir: &Path, config: &UpConfig) -> std::io::Result<Folder> {
        let root = dir.canonicalize()?;
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
            .collect();
        paths.sort();
        let mut checked = Vec::new();
        let mut graph_files = Vec::new();
        for path in paths {
            let Some(parsed) = self.look(&root, &path) else { continue };
            if matches!(&parsed, Err(message) if message == GRAPH_FILE) {
                graph_files.push(path);
                continue;
            }
            let manifest = parsed.and_then(|p| check(&path, p.isvc, p.unknown, p.text, p.created, config));
            let key = manifest.as_ref().map(|m| format!("{}/{}", m.isvc.namespace(), m.isvc.name())).ok();
            checked.push((path, key, manifest));
        }
        let claims: Vec<Claim<'_>> = checked
            .iter()
            .filter_map(|(path, key, _)| {
                let modified = self.seen.get(path).map_or((0, 0), |seen| seen.stamp.mtime);
                Some(Claim { key: key.as_deref()?, path, modified })
            })
            .collect();
        let owners = owners(&claims, &self.owners);
        let present: BTreeSet<PathBuf> = checked.iter().map(|(path, _, _)| path.clone()).collect();
        let mut folder = Folder { graph_files, ..Folder::default() };
        let mut said = BTreeMap::new();
        for (path, key, manifest) in checked {
            let taken = key.as_ref().and_then(|key| owners.get(key).filter(|owner| **owner != path).map(|o| (key, o)));
            let outcome = match (manifest, taken) {
                (Ok(_), Some((key, owner))) => Err(taken_by(key, owner)),
                (Ok(manifest), None) => Ok(accepted(key.unwrap_or_default(), manifest, &mut folder)),
                (Err(message), _) => Err(message),
            };
            let lines = outcome.unwrap_or_else(|message| {
                let line = format!("{}: {message}", path.display());
                folder.errors.push(line.clone());
                vec![format!("refused {line}")]
            });
            if self.said.get(&path) != Some(&lines) {
                for line in &lines {
                    tracing::warn!(file = %path.display(), "{line}");
                }
            }
            said.insert(path, lines);
        }
        self.seen.retain(|path, _| present.contains(path));
        self.said = said;
        self.owners = folder.manifests.iter().map(|(key, m)| (key.clone(), m.path.clone())).collect();
        Ok(folder)
    }

    /// What `path` holds, read again only if it changed; `None` for what is not a manifest file
    /// (a folder, or a file removed since the folder was listed).
    fn look(&mut self, root: &Path, path: &Path) -> Option<Result<Parsed, String>> {
        let link = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return Some(Err(format!("cannot be read ({})", e.kind()))),
        };
        let target = match target_of(root, path, &link) {
            Ok(target) => target,
            Err(refusal) => return Some(Err(refusal)),
        };
        let meta = match std::fs::metadata(&target) {
            Ok(meta) if meta.is_dir() => return None,
            Ok(meta) => meta,
            Err(e) => return Some(Err(format!("cannot be read ({})", e.kind()))),
        };
        if let Some(seen) = self.seen.get(path)
            && seen.holds(&meta)
        {
            return Some(seen.parsed.clone());
        }
        let read_at = SystemTime::now();
        let (stamp, parsed) = read_file(&target, &meta);
        self.seen.insert(path.to_owned(), Seen { stamp, read_at, parsed: parsed.clone() });
        Some(parsed)
    }
}

/// Adds the accepted `manifest` to `folder` under `key`, with a warning per unknown field; the
/// lines to log about it (each unknown field, and the fields skiff up does not act on).
fn accepted(key: String, manifest: Manifest, folder: &mut Folder) -> Vec<String> {
    let file = manifest.path.display().to_string();
    let mut lines: Vec<String> =
        manifest.unknown.iter().map(|field| format!("{file}: {}", unknown_field(field))).collect();
    folder.warnings.extend(lines.iter().cloned());
    if !manifest.notices.is_empty() {
        lines.push(format!("accepted; {file}: not acted on: {}", manifest.notices.join("; ")));
    }
    folder.manifests.insert(key, manifest);
    lines
}

/// The refusal of a file of `size` bytes.
fn too_large(size: u64) -> String {
    format!(
        "{size} bytes is more than a manifest may hold ({MAX_MANIFEST_BYTES} bytes, etcd's limit on one request: \
         the Kubernetes API server could not store it either)"
    )
}

/// Reads and parses the regular file at `target` (whose metadata is `meta`), at most
/// [`MAX_MANIFEST_BYTES`]; returns the stamp of what was read.
fn read_file(target: &Path, meta: &Metadata) -> (Stamp, Result<Parsed, String>) {
    let stamp = Stamp::of(meta);
    if !meta.is_file() {
        return (stamp, Err("not a regular file".to_owned()));
    }
    if let Err(refusal) = within_limit(meta.len()) {
        return (stamp, Err(refusal));
    }
    // O_NOFOLLOW: the last component was resolved above and must not have become a link since;
    // O_NONBLOCK: a FIFO put in its place must not hang the pass.
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(target)
        .and_then(|file| file.metadata().map(|meta| (file, meta)));
    let (file, meta): (File, Metadata) = match opened {
        Ok(opened) => opened,
        Err(e) => return (stamp, Err(format!("cannot be read ({})", e.kind()))),
    };
    let stamp = Stamp::of(&meta);
    if !meta.is_file() {
        return (stamp, Err("not a regular file".to_owned()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or_default());
    if let Err(e) = file.take(MAX_MANIFEST_BYTES + 1).read_to_end(&mut bytes) {
        return (stamp, Err(format!("cannot be read ({})", e.kind())));
    }
    if let Err(refusal) = within_limit(bytes.len() as u64) {
        return (stamp, Err(refusal));
    }
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let (line, column) = utf8_position(e.as_bytes(), e.utf8_error().valid_up_to());
            return (stamp, Err(format!("line {line}, column {column}: not UTF-8 text")));
        }
    };
    (stamp, parse_text(text, meta.created().or_else(|_| meta.modified()).ok()))
}

/// The rules on a file's text that do not depend on the rest of the folder: within
/// [`MAX_MANIFEST_BYTES`], YAML, an InferenceService.
fn parse_text(text: String, created: Option<SystemTime>) -> Result<Parsed, String> {
    within_limit(text.len() as u64)?;
    if is_graph(&text) {
        return Err(GRAPH_FILE.to_owned());
    }
    read(&text).map(|isvc| Parsed { unknown: unknown(&text, &isvc), isvc, text: Arc::from(text), created })
}

/// Refuses a file of `size` bytes past [`MAX_MANIFEST_BYTES`].
fn within_limit(size: u64) -> Result<(), String> {
    if size > MAX_MANIFEST_BYTES { Err(too_large(size)) } else { Ok(()) }
}

/// The refusal of a file that defines `key`, which `owner` keeps.
fn taken_by(key: &str, owner: &Path) -> String {
    format!(
        "metadata.name: {key} is already defined in {}, which keeps it (the older file keeps a name; rename this \
         one)",
        owner.display()
    )
}

/// The file the folder's entry `path` (whose own metadata is `link`) stands for: itself, or the
/// target of a symbolic link that resolves inside `root` (the folder, resolved); a link out of
/// the folder, or to nothing, is refused.
fn target_of(root: &Path, path: &Path, link: &Metadata) -> Result<PathBuf, String> {
    if !link.file_type().is_symlink() {
        return Ok(path.to_owned());
    }
    match path.canonicalize() {
        Ok(target) if target.starts_with(root) => Ok(target),
        Ok(_) => Err("a symbolic link that leads out of the folder; refused".to_owned()),
        Err(_) => Err("a symbolic link to nothing that can be read".to_owned()),
    }
}

/// The file the web app writes `namespace/name` to: `<name>.yaml` in `default` (as before),
/// `<namespace>__<name>.yaml` elsewhere. Namespaces and names are DNS labels (lowercase letters,
/// digits, `-`), which never hold `_`, so no two InferenceServices map to one file:
/// `default/team-a-coll` is `team-a-coll.yaml`, `team-a/coll` is `team-a__coll.yaml`. Files named
/// otherwise (written by hand, or by an older `skiff up`) are read all the same.
pub fn manifest_file(namespace: &str, name: &str) -> Result<String, String> {
    dns_label("metadata.namespace", namespace)?;
    dns_label("metadata.name", name)?;
    Ok(if namespace == "default" { format!("{name}.yaml") } else { format!("{namespace}__{name}.yaml") })
}

fn dns_label(field: &str, value: &str) -> Result<(), String> {
    let allowed = value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if value.is_empty() || value.len() > 63 || !allowed || value.starts_with('-') || value.ends_with('-') {
        return Err(format!(
            "{field}: {value:?} is not a DNS label (1 to 63 lowercase letters, digits and '-', starting and \
             ending with a letter or digit)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs::FileTimes;

    use skiff_server::model::MODEL_FILE;

    use super::*;
    use crate::standalone::manifests::{ModelSource, Predictor};

    fn examples() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
    }

    fn iris() -> String {
        std::fs::read_to_string(examples().join("iris.yaml")).unwrap()
    }

    /// A folder with the iris model under `models/iris`, and the refresher over it.
    fn folder() -> (tempfile::TempDir, ManifestFolder) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("models/iris")).unwrap();
        std::fs::copy(examples().join("models/iris").join(MODEL_FILE), tmp.path().join("models/iris").join(MODEL_FILE))
            .unwrap();
        let folder = ManifestFolder::new(tmp.path().to_owned(), UpConfig::default());
        (tmp, folder)
    }

    fn errors(folder: &Folder) -> String {
        folder.errors.join("\n")
    }

    #[test]
    fn the_examples_are_valid() {
        let folder = ManifestFolder::new(examples(), UpConfig::default()).refresh();
        assert_eq!(folder.errors, Vec::<String>::new());
        assert_eq!(folder.manifests.keys().collect::<Vec<_>>(), ["default/adder", "default/iris", "default/mlp"]);
        let Predictor::Model(ModelSource::Dir(dir)) = &folder.manifests["default/iris"].predictor else {
            panic!("a model")
        };
        assert!(dir.join(MODEL_FILE).is_file());
    }

    #[test]
    fn refusals_name_the_file_and_the_field() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a-bad.yaml"), iris().replace("minReplicas: 0", "minReplicas: 9")).unwrap();
        std::fs::write(tmp.path().join("b-sk.yaml"), iris().replace("name: onnx", "name: caffe")).unwrap();
        std::fs::write(tmp.path().join("c-missing.yaml"), iris()).unwrap();
        std::fs::write(tmp.path().join("notes.txt"), "ignored").unwrap();
        let folder = ManifestFolder::new(tmp.path().to_owned(), UpConfig::default()).refresh();
        assert!(folder.manifests.is_empty());
        let errors = errors(&folder);
        assert!(errors.contains("a-bad.yaml: spec.predictor.minReplicas: 9 is more than maxReplicas 4"), "{errors}");
        assert!(errors.contains("b-sk.yaml: spec.predictor.model.modelFormat: no ServingRuntime"), "{errors}");
        assert!(errors.contains("c-missing.yaml: spec.predictor.model.storageUri:"), "{errors}");
        assert_eq!(folder.errors.len(), 3);
    }

    #[test]
    fn each_bad_file_is_refused_on_its_own_with_its_line_and_column() {
        let (tmp, manifests) = folder();
        std::fs::write(tmp.path().join("iris.yaml"), iris()).unwrap();
        let mut latin1 = iris().replace("name: iris", "name: other").into_bytes();
        let at = latin1.iter().position(|b| *b == b'\n').unwrap() + 3;
        latin1.insert(at, 0xE9);
        std::fs::write(tmp.path().join("latin1.yaml"), latin1).unwrap();
        std::fs::write(tmp.path().join("list.yaml"), "- a\n- b\n").unwrap();
        let huge = File::create(tmp.path().join("huge.yaml")).unwrap();
        huge.set_len(100 << 20).unwrap();
        std::fs::create_dir(tmp.path().join("folder.yaml")).unwrap();
        let folder = manifests.refresh();
        assert_eq!(folder.manifests.keys().collect::<Vec<_>>(), ["default/iris"]);
        let dir = tmp.path().display();
        assert_eq!(folder.errors.len(), 3, "{:?}", folder.errors);
        assert_eq!(
            folder.errors[..2],
            [
                format!(
                    "{dir}/huge.yaml: 104857600 bytes is more than a manifest may hold (1572864 bytes, etcd's limit \
                     on one request: the Kubernetes API server could not store it either)"
                ),
                format!("{dir}/latin1.yaml: line 2, column 3: not UTF-8 text"),
            ]
        );
        let list = &folder.errors[2];
        assert!(list.starts_with(&format!("{dir}/list.yaml: line 1, column 1: not an InferenceService")), "{list}");
    }

    #[test]
    fn links_out_of_the_folder_are_refused_unread_and_links_inside_are_read() {
        let (tmp, manifests) = folder();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "root:$6$TOPSECRET$hash:19000:0:99999:7:::\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("shadow.yaml")).unwrap();
        std::fs::create_dir(tmp.path().join("src")).unwrap();
        std::fs::write(tmp.path().join("src/iris.txt"), iris()).unwrap();
        std::os::unix::fs::symlink("src/iris.txt", tmp.path().join("linked.yaml")).unwrap();
        let folder = manifests.refresh();
        assert_eq!(folder.manifests.keys().collect::<Vec<_>>(), ["default/iris"]);
        assert_eq!(
            folder.errors,
            [format!("{}/shadow.yaml: a symbolic link that leads out of the folder; refused", tmp.path().display())]
        );

        // Read directly, the secret is refused by its shape, not shown.
        std::fs::remove_file(tmp.path().join("shadow.yaml")).unwrap();
        std::fs::copy(outside.path(), tmp.path().join("shadow.yaml")).unwrap();
        let errors = errors(&manifests.refresh());
        assert!(errors.contains("shadow.yaml: line 1, column 1: not an InferenceService"), "{errors}");
        assert!(!errors.contains("TOPSECRET"), "{errors}");
    }

    #[test]
    fn an_unchanged_file_is_not_read_again_but_a_changed_one_is() {
        let (tmp, manifests) = folder();
        let path = tmp.path().join("iris.yaml");
        std::fs::write(&path, iris()).unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        File::options().write(true).open(&path).unwrap().set_times(FileTimes::new().set_modified(old)).unwrap();
        assert_eq!(manifests.refresh().manifests.len(), 1);

        // Other bytes in place, with the same size, inode and modification time: not read again.
        let garbage = "#".repeat(iris().len());
        std::fs::write(&path, &garbage).unwrap();
        File::options().write(true).open(&path).unwrap().set_times(FileTimes::new().set_modified(old)).unwrap();
        let folder = manifests.refresh();
        assert_eq!(folder.manifests.len(), 1, "{:?}", folder.errors);
        assert_eq!(&*folder.manifests["default/iris"].text, iris());

        // A new modification time: read again.
        let newer = old + Duration::from_secs(60);
        File::options().write(true).open(&path).unwrap().set_times(FileTimes::new().set_modified(newer)).unwrap();
        let folder = manifests.refresh();
        assert!(folder.manifests.is_empty());
        assert_eq!(folder.errors.len(), 1, "{:?}", folder.errors);
    }

    #[test]
    fn a_manifest_waiting_for_its_model_is_served_once_the_model_appears() {
        let (tmp, manifests) = folder();
        std::fs::write(tmp.path().join("later.yaml"), iris().replace("models/iris", "models/later")).unwrap();
        let errors = errors(&manifests.refresh());
        assert!(errors.contains("later.yaml: spec.predictor.model.storageUri:"), "{errors}");
        std::fs::create_dir(tmp.path().join("models/later")).unwrap();
        std::fs::copy(
            examples().join("models/iris").join(MODEL_FILE),
            tmp.path().join("models/later").join(MODEL_FILE),
        )
        .unwrap();
        let folder = manifests.refresh();
        assert_eq!(folder.manifests.keys().collect::<Vec<_>>(), ["default/iris"], "{:?}", folder.errors);
    }

    /// Sets the modification time of `path` to `ago` before now.
    fn modified_ago(path: &Path, ago: Duration) {
        let at = SystemTime::now() - ago;
        File::options().write(true).open(path).unwrap().set_times(FileTimes::new().set_modified(at)).unwrap();
    }

    #[test]
    fn an_unknown_field_is_a_warning_and_with_strict_a_refusal() {
        let (tmp, manifests) = folder();
        let path = tmp.path().join("iris.yaml");
        std::fs::write(&path, iris().replace("minReplicas: 0", "minReplica: 0")).unwrap();
        let folder = manifests.refresh();
        assert_eq!(folder.manifests.keys().collect::<Vec<_>>(), ["default/iris"], "{:?}", folder.errors);
        assert_eq!(folder.warnings, [format!("{}: unknown field \"spec.predictor.minReplica\"", path.display())]);
        // Not also a field "not used by skiff up".
        assert_eq!(folder.manifests["default/iris"].notices, Vec::<String>::new());

        let strict = ManifestFolder::new(tmp.path().to_owned(), UpConfig { strict: true, ..UpConfig::default() });
        let folder = strict.refresh();
        assert!(folder.manifests.is_empty() && folder.warnings.is_empty());
        let refusal =
            format!("{}: spec.predictor.minReplica: unknown field \"spec.predictor.minReplica\"", path.display());
        assert!(folder.errors.len() == 1 && folder.errors[0].starts_with(&refusal), "{:?}", folder.errors);
    }

    #[test]
    fn the_file_that_holds_a_name_keeps_it_and_the_newcomer_is_refused_naming_both() {
        let (tmp, manifests) = folder();
        let (original, copy) = (tmp.path().join("iris.yaml"), tmp.path().join("iris-dup.yaml"));
        std::fs::write(&original, iris()).unwrap();
        modified_ago(&original, Duration::from_secs(60));
        assert_eq!(manifests.refresh().manifests["default/iris"].path, original);

        // The copy sorts first and is modified earlier still: the running holder keeps the name.
        std::fs::write(&copy, iris().replace("maxReplicas: 4", "maxReplicas: 3")).unwrap();
        modified_ago(&copy, Duration::from_secs(3600));
        let folder = manifests.refresh();
        assert_eq!(folder.manifests["default/iris"].path, original);
        let refusal = format!(
            "{}: metadata.name: default/iris is already defined in {}, which keeps it",
            copy.display(),
            original.display()
        );
        assert!(folder.errors.len() == 1 && folder.errors[0].starts_with(&refusal), "{:?}", folder.errors);

        // On start-up, the file modified first takes it (here the copy); once the original goes,
        // the copy takes the name while running too.
        let restarted = ManifestFolder::new(tmp.path().to_owned(), UpConfig::default()).refresh();
        assert_eq!(restarted.manifests["default/iris"].path, copy);
        assert!(restarted.errors[0].starts_with(&format!("{}: metadata.name: default/iris", original.display())));
        std::fs::remove_file(&original).unwrap();
        let folder = manifests.refresh();
        assert_eq!((folder.manifests["default/iris"].path.as_path(), folder.errors.len()), (copy.as_path(), 0));
    }

    #[test]
    fn no_two_namespaces_share_a_file_name() {
        assert_eq!(manifest_file("default", "team-a-coll").unwrap(), "team-a-coll.yaml");
        assert_eq!(manifest_file("team-a", "coll").unwrap(), "team-a__coll.yaml");
        assert_eq!(manifest_file("team", "a-coll").unwrap(), "team__a-coll.yaml");
        for (namespace, name) in [("default", "a__b"), ("a_", "b"), ("default", "../x"), ("Team", "x"), ("-a", "x")] {
            let refusal = manifest_file(namespace, name).unwrap_err();
            assert!(refusal.contains("is not a DNS label"), "{refusal}");
        }
    }
}
