//! KServe's default ClusterServingRuntimes as Skiff ships them (`deploy/runtimes`, one file each,
//! listed in its kustomization and copied into the Helm chart), built in: `skiff up` selects from
//! them as a cluster with `kubectl apply -k deploy/runtimes` does ([`kserve_runtimes`]).

use super::{ClusterServingRuntime, cluster_serving_runtime_from_yaml};
use crate::error::Result;

/// Where the files are, relative to the repository root.
pub const RUNTIMES_DIR: &str = "deploy/runtimes";

macro_rules! runtime_files {
    ($($name:literal),* $(,)?) => {
        /// Each file of [`RUNTIMES_DIR`]: its name and its text.
        pub const RUNTIME_FILES: &[(&str, &str)] =
            &[$(($name, include_str!(concat!("../../../deploy/runtimes/", $name)))),*];
    };
}

runtime_files!(
    "kserve-tensorflow-serving.yaml",
    "kserve-sklearnserver.yaml",
    "kserve-mlserver.yaml",
    "kserve-xgbserver.yaml",
    "kserve-tritonserver.yaml",
    "kserve-pmmlserver.yaml",
    "kserve-paddleserver.yaml",
    "kserve-lgbserver.yaml",
    "kserve-torchserve.yaml",
    "kserve-huggingfaceserver.yaml",
);

/// The built-in runtimes, parsed ([`RUNTIME_FILES`]).
pub fn kserve_runtimes() -> Result<Vec<ClusterServingRuntime>> {
    RUNTIME_FILES.iter().map(|(_, text)| cluster_serving_runtime_from_yaml(text)).collect()
}
