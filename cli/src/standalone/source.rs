//! Where `skiff up` finds a model: a folder on this machine, or a store the fetcher reads. A leaf
//! of `standalone`: the manifests and the runtimes both make one, and neither imports the other for it.

use std::path::PathBuf;

/// Where a model predictor's model is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A folder holding `model.onnx` (`file://`).
    Dir(PathBuf),
    /// A `storageUri` fetched into the model cache before a replica starts.
    Fetched(String),
}
