//! `crdgen`: prints the InferenceService CustomResourceDefinition generated from the Rust types.
//!
//! `cargo run -q -p skiff-api --bin crdgen > deploy/crds/serving.kserve.io_inferenceservices.yaml`

fn main() {
    match skiff_api::resource::crd_yaml() {
        Ok(yaml) => print!("{yaml}"),
        Err(e) => {
            eprintln!("crdgen: {e}");
            std::process::exit(1);
        }
    }
}
