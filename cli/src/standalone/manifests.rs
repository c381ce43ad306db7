//! InferenceService manifests as `skiff up` reads them, with the checks standalone mode adds: it serves
//! ONNX models from `file://` storage (relative paths resolve against the manifest's folder) or
//! from a store the fetcher reads (`s3://`, `gs://`, `https://`, `hf://`: [`ModelSource::Fetched`]) and
//! custom containers (a predictor's, a transformer's, an explainer's) as local processes
//! ([`ContainerSpec`]); any other model (framework shorthands expanded first,
//! [`skiff_api::shorthand`]) on the container of the KServe runtime chosen for it
//! ([`super::runtimes`]). The folder itself is read by [`super::folder`].
//!
//! A refusal names the field, or for text that is not an InferenceService the line and column
//! with a generic message: never the text itself (a file may be anything, even a secret).
//!
//! A field KServe's InferenceService does not have (a misspelt `minReplica`, found by
//! [`skiff_api::fields`], the rule the CRD follows on a cluster) is an unknown field: a warning, as
//! `kubectl apply` gives one, or a refusal under `skiff up --strict`, as `kubectl apply
//! --validate=strict`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use skiff_api::InferenceService;
use skiff_api::autoscaling::runs_locally;
use skiff_api::fields::unknown_fields;
use skiff_api::revision::Component;
use skiff_api::runtime::uses_embedded_server;
use skiff_api::shorthand::expand;
use skiff_api::validate::validate;
use skiff_server::model::MODEL_FILE;

use super::config::UpConfig;
use super::container::ContainerSpec;
use super::runtimes::{RuntimeModel, runtime_model};

/// A valid manifest and what its components run.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The file it came from.
    pub path: PathBuf,
    /// The file's text as it was read (the web app shows and patches this, not the file again).
    pub text: Arc<str>,
    /// When the file was created (or last modified, where the file system keeps no birth time).
    pub created: Option<SystemTime>,
    /// Its content.
    pub isvc: InferenceService,
    /// What the predictor runs.
    pub predictor: Predictor,
    /// The transformer's container, when it has one.
    pub transformer: Option<ContainerSpec>,
    /// The explainer's container, when it has one.
    pub explainer: Option<ContainerSpec>,
    /// The path of each field KServe does not have (`spec.predictor.minReplica`), warned about.
    pub unknown: Vec<String>,
    /// `field: why` for each field KServe has and `skiff up` does not act on ([`notices`]), logged once.
    pub notices: Vec<String>,
}

pub use super::source::ModelSource;
use super::source::resolve;

impl Manifest {
    /// What `component` runs; `None` when the manifest does not have it.
    pub fn runs(&self, component: Component) -> Option<Predictor> {
        match component {
            Component::Predictor => Some(self.predictor.clone()),
            Component::Transformer => self.transformer.clone().map(Predictor::Container),
            Component::Explainer => self.explainer.clone().map(Predictor::Container),
        }
    }
}

/// What a predictor runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Predictor {
    /// `skiff-server` on a model.
    Model(ModelSource),
    /// A custom container.
    Container(ContainerSpec),
    /// The container of a KServe runtime on a model ([`super::runtimes`]).
    Runtime(RuntimeModel),
    /// KServe's collocation: `skiff-server` on a model, and a `transformer-container` beside it that
    /// takes the traffic and calls it on localhost.
    Collocated(ModelSource, ContainerSpec),
}

/// What a folder holds: valid manifests by `namespace/name`, and a message per rejected file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Folder {
    /// Valid manifests, by InferenceService `namespace/name`.
    pub manifests: BTreeMap<String, Manifest>,
    /// `file: field: message` (or `file: line L, column C: message`) for every file that was refused.
    pub errors: Vec<String>,
    /// `file: unknown field "path"` for every unknown field of a manifest that was accepted.
    pub warnings: Vec<String>,
    /// Files that hold an InferenceGraph, read by [`super::graphs`].
    pub graph_files: Vec<PathBuf>,
}

/// The fields of the manifest `text` (read as `isvc`) that KServe does not have, by path.
pub fn unknown(text: &str, isvc: &InferenceService) -> Vec<String> {
    // The text as it is: the typed value drops what no type keeps (an unknown top-level field).
    let written = serde_saphyr::from_str::<serde_json::Value>(text).or_else(|_| serde_json::to_value(isvc));
    written.map(|manifest| unknown_fields(&manifest)).unwrap_or_default()
}

/// `kubectl`'s words for an unknown field.
pub fn unknown_field(path: &str) -> String {
    format!("unknown field \"{path}\"")
}

/// Deserializes an InferenceService; a refusal gives the field being read, the line and column, and
/// says what is wrong in words of its own, without the text (serde-saphyr's messages may quote the
/// source).
pub fn read(text: &str) -> Result<InferenceService, String> {
    InferenceService::read_yaml(text).map_err(|e| match e.path.as_str() {
        "" => located(&e.error),
        path => format!("{path}: {}", located(&e.error)),
    })
}

/// `line L, column C: <what>` for a YAML error, `<what>` alone where it has no location.
fn located(error: &serde_saphyr::Error) -> String {
    use serde_saphyr::Error as E;
    let mut inner = error;
    while let E::WithSnippet { error, .. } | E::AliasError { error, .. } = inner {
        inner = error;
    }
    let what = match inner {
        E::SerdeMissingField { field, .. } => format!("not an InferenceService: missing field `{field}`"),
        E::SerdeInvalidType { expected, .. } => {
            format!("not an InferenceService: a value of the wrong type (expected {expected})")
        }
        E::SerdeInvalidValue { expected, .. } => {
            format!("not an InferenceService: an invalid value (expected {expected})")
        }
        E::SerdeInvalidLength { expected, .. } => {
            format!("not an InferenceService: a wrong number of items (expected {expected})")
        }
        E::SerdeUnknownVariant { expected, .. } | E::SerdeUnknownField { expected, .. } => {
            format!("not an InferenceService: an unknown name (expected one of {})", expected.join(", "))
        }
        E::InvalidScalar { ty, .. } => format!("not an InferenceService: a value that is not a valid {ty}"),
        E::NullIntoString { .. } => "not an InferenceService: an empty value where text is expected".to_owned(),
        E::Unexpected { expected, .. } => format!("not an InferenceService: expected {expected} here"),
        E::DuplicateMappingKey { .. } => "a key appears twice in one mapping".to_owned(),
        E::MultipleDocuments { .. } => {
            "more than one YAML document; skiff up reads one InferenceService a file".to_owned()
        }
        E::InvalidUtf8Input => "not UTF-8 text".to_owned(),
        E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. }
        | E::AliasReplayCounterOverflow { .. }
        | E::Budget { .. } => "more than the YAML reader's limits allow (aliases, depth or size)".to_owned(),
        E::Eof { .. } => "the document ends too early".to_owned(),
        E::Message { .. } | E::SerdeVariantId { .. } => "not an InferenceService".to_owned(),
        _ => "not valid YAML".to_owned(),
    };
    match error.location().filter(|l| l.line() > 0) {
        Some(at) => format!("line {}, column {}: {what}", at.line(), at.column()),
        None => what,
    }
}

/// Where the first byte that is not UTF-8 lies: `valid` bytes before it are; 1-based line and column
/// (in characters).
pub fn utf8_position(bytes: &[u8], valid: usize) -> (usize, usize) {
    let before = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (before.matches('\n').count() + 1, before[line_start..].chars().count() + 1)
}

/// Checks a deserialized manifest read from `path` as standalone mode runs it; the error names the field.
pub fn check(
    path: &Path,
    isvc: InferenceService,
    unknown: Vec<String>,
    text: Arc<str>,
    created: Option<SystemTime>,
    config: &UpConfig,
) -> Result<Manifest, String> {
    validate(&isvc, &config.autoscaler).map_err(|e| e.to_string())?;
    // skiff up runs the kpa class only: another class (or Standard mode's hpa) is refused naming
    // the annotation that asks for it.
    runs_locally(&isvc.metadata.annotations).map_err(|e| e.to_string())?;
    // Loopback sinks are allowed here, but not Skiff's own ports.
    sinks::refuse_own(&isvc, &config.own_listeners)?;
    // After validation, whose refusal of a field KServe no longer has says more (`explainer.alibi`).
    if config.strict
        && let Some((first, rest)) = unknown.split_first()
    {
        let also = if rest.is_empty() { String::new() } else { format!("; also unknown: {}", rest.join(", ")) };
        return Err(format!(
            "{first}: {} (skiff up --strict refuses fields KServe's InferenceService does not have, as kubectl \
             apply --validate=strict does){also}",
            unknown_field(first)
        ));
    }
    // An unknown field is warned about as such, not as a field skiff up leaves to a cluster.
    let mut notices = notices::notices(&isvc);
    notices.retain(|notice| !notice.split_once(": ").is_some_and(|(field, _)| unknown.iter().any(|u| u == field)));
    // A framework shorthand (`sklearn:`) is served as the `model` KServe's webhook makes of it.
    let isvc = expand(isvc).map_err(|e| e.to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    let spec = &isvc.spec.predictor;
    let predictor = match (&spec.model, &spec.containers) {
        (Some(model), Some(containers)) => {
            if !uses_embedded_server(model) {
                return Err(COLLOCATION.to_owned());
            }
            let transformer = ContainerSpec::parse("spec.predictor.containers", containers, &config.images, base)?;
            Predictor::Collocated(model_source(&isvc, base)?, transformer)
        }
        (None, Some(containers)) => {
            Predictor::Container(ContainerSpec::parse("spec.predictor.containers", containers, &config.images, base)?)
        }
        (Some(model), _) if !uses_embedded_server(model) => {
            Predictor::Runtime(runtime_model(&isvc, model, &config.runtimes, &config.images, base)?)
        }
        _ => Predictor::Model(model_source(&isvc, base)?),
    };
    let container = |component: Component| match component.spec(&isvc).and_then(|spec| spec.containers.as_ref()) {
        Some(containers) => {
            let field = format!("spec.{}.containers", component.name());
            ContainerSpec::parse(&field, containers, &config.images, base).map(Some)
        }
        None => Ok(None),
    };
    let (transformer, explainer) = (container(Component::Transformer)?, container(Component::Explainer)?);
    Ok(Manifest { path: path.to_owned(), text, created, isvc, predictor, transformer, explainer, unknown, notices })
}

/// Why `skiff up` refuses KServe's collocation beside a runtime's container, which a cluster runs.
const COLLOCATION: &str = "spec.predictor.containers: skiff up runs KServe's collocation (transformer-container) \
     beside an ONNX model on skiff-server only, not beside a ServingRuntime's container (a cluster runs it)";

/// Where a `model` predictor's ONNX model is: a `file://` folder, which must hold it now, or a URI
/// the fetcher reads, checked when a replica starts.
fn model_source(isvc: &InferenceService, base: &Path) -> Result<ModelSource, String> {
    let Some(model) = &isvc.spec.predictor.model else {
        return Err("spec.predictor: neither a model nor containers".to_owned());
    };
    if model.model_format.name != "onnx" {
        return Err(format!(
            "spec.predictor.model.modelFormat.name: skiff up serves onnx models, not {:?}",
            model.model_format.name
        ));
    }
    let source = resolve(model.storage_uri.as_deref().unwrap_or_default(), base)?;
    if let ModelSource::Dir(model_dir) = &source
        && !model_dir.join(MODEL_FILE).is_file()
    {
        return Err(format!("spec.predictor.model.storageUri: {} holds no {MODEL_FILE}", model_dir.display()));
    }
    Ok(source)
}

pub mod notices;
mod sinks;

#[cfg(test)]
mod corpus;

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: x\n";

    #[test]
    fn yaml_errors_give_the_field_the_line_and_column_never_the_text() {
        let cases = [
            ("root:$6$TOPSECRET$hash:19000:0:99999:7:::\n", "line 1, column 1: not an InferenceService"),
            (
                &format!("{HEAD}spec:\n  predictor:\n    minReplicas: TOPSECRET\n"),
                "spec.predictor.minReplicas: line 7, column 18: not an InferenceService: a value that is not a valid i64",
            ),
            (
                &format!("{HEAD}spec: [TOPSECRET\n"),
                "spec: line 5, column 7: not an InferenceService: expected mapping start here",
            ),
            (&format!("{HEAD}spec:\n  predictor: \"TOPSECRET\n"), "spec: line 7, column 1: not valid YAML"),
            (&format!("{HEAD}TOPSECRET: 1\nTOPSECRET: 2\n"), "line 6, column 1: a key appears twice"),
        ];
        for (text, want) in cases {
            let refusal = read(text).unwrap_err();
            assert!(refusal.starts_with(want), "{want:?} in {refusal:?}");
            assert!(!refusal.contains("TOPSECRET"), "{refusal}");
        }
    }

    #[test]
    fn the_first_byte_that_is_not_utf8_has_a_line_and_column() {
        let bytes = "ab\nçd\u{e9}".as_bytes().iter().copied().chain([0xFF, b'x']).collect::<Vec<u8>>();
        let valid = std::str::from_utf8(&bytes).unwrap_err().valid_up_to();
        assert_eq!(utf8_position(&bytes, valid), (2, 4));
        assert_eq!(utf8_position(&[0xFF], 0), (1, 1));
    }
}
