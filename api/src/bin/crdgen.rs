//! `crdgen`: prints a CustomResourceDefinition generated from the Rust types: the InferenceService's
//! by default, or the one named by the first argument (`inferenceservices`, `servingruntimes`,
//! `clusterservingruntimes`, `inferencegraphs`).
//!
//! ```text
//! cargo run -q -p skiff-api --bin crdgen > deploy/crds/serving.kserve.io_inferenceservices.yaml
//! cargo run -q -p skiff-api --bin crdgen servingruntimes > deploy/crds/serving.kserve.io_servingruntimes.yaml
//! cargo run -q -p skiff-api --bin crdgen clusterservingruntimes > deploy/crds/serving.kserve.io_clusterservingruntimes.yaml
//! cargo run -q -p skiff-api --bin crdgen inferencegraphs > deploy/crds/serving.kserve.io_inferencegraphs.yaml
//! ```

use skiff_api::runtime;

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "inferenceservices".to_owned());
    let yaml = match which.as_str() {
        "inferenceservices" => skiff_api::resource::crd_yaml(),
        "servingruntimes" => runtime::crd_yaml(&runtime::servingruntimes_crd(), runtime::SERVINGRUNTIMES_CRD_PATH),
        "clusterservingruntimes" => {
            runtime::crd_yaml(&runtime::clusterservingruntimes_crd(), runtime::CLUSTERSERVINGRUNTIMES_CRD_PATH)
        }
        "inferencegraphs" => skiff_api::graph::crd_yaml(),
        other => {
            eprintln!(
                "crdgen: unknown CRD {other:?}; one of inferenceservices, servingruntimes, clusterservingruntimes, inferencegraphs"
            );
            std::process::exit(2);
        }
    };
    match yaml {
        Ok(yaml) => print!("{yaml}"),
        Err(e) => {
            eprintln!("crdgen: {e}");
            std::process::exit(1);
        }
    }
}
