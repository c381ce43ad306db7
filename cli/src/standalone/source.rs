//! Where `skiff up` finds a model: a folder on this machine, or a store the fetcher reads. The
//! `storageUri` is read by the one parser ([`ModelUri::parse`]); [`resolve`] is what standalone mode
//! makes of it, for a model on `skiff-server` and a runtime's alike. A leaf of `standalone`: the
//! manifests and the runtimes both take it, and neither imports the other for it.

use std::path::{Path, PathBuf};

use skiff_api::storage::{ModelUri, StoreUri, not_fetched, redact};

/// Where a model predictor's model is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A folder holding `model.onnx` (`file://`).
    Dir(PathBuf),
    /// A `storageUri` fetched into the model cache before a replica starts.
    Fetched(StoreUri),
}

impl ModelSource {
    /// The folder a replica is given (empty for a fetched model, whose folder the cache gives when
    /// a replica starts), and the store it is fetched from.
    pub fn into_parts(self) -> (String, Option<StoreUri>) {
        match self {
            ModelSource::Dir(dir) => (dir.to_string_lossy().into_owned(), None),
            ModelSource::Fetched(uri) => (String::new(), Some(uri)),
        }
    }
}

/// Where the model `uri` names is for `skiff up`: a `file://` folder (relative paths against
/// `base`, the manifest's folder; not checked here) or a store the fetcher reads. `pvc://` and the
/// schemes the fetcher does not read are refused; the error names `spec.predictor.model.storageUri`.
pub fn resolve(uri: &str, base: &Path) -> Result<ModelSource, String> {
    let refused = |message: String| format!("spec.predictor.model.storageUri: {message}");
    match ModelUri::parse(uri).map_err(|e| refused(e.to_string()))? {
        ModelUri::File(path) => Ok(ModelSource::Dir(base.join(path))),
        ModelUri::Store(store) => Ok(ModelSource::Fetched(store)),
        ModelUri::Pvc { .. } => Err(refused(format!(
            "{}: skiff up has no PersistentVolumeClaims; use file:// or a store (s3://, gs://, https://, hf://)",
            redact(uri)
        ))),
        ModelUri::Other { uri, scheme } => Err(refused(not_fetched(&uri, &scheme).to_string())),
    }
}
