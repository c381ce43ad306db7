//! KServe's serving runtimes in `skiff up`. A model the embedded server does not serve (any format
//! but ONNX, or ONNX that names a `runtime:`; framework shorthands are expanded first) runs the
//! serving container of the runtime chosen for it as a cluster chooses it
//! ([`skiff_api::runtime::select_runtime`]) among the runtimes `skiff up` knows: KServe's defaults,
//! built in from `deploy/runtimes` ([`skiff_api::runtime::defaults`]). The container is built as
//! the operator builds it ([`runtime_containers`]: placeholders replaced, the model's container
//! fields merged) and runs as a local process through the image map, like a custom container
//! ([`ContainerSpec`]), with the model's folder where the runtime expects `/mnt/models`.
//!
//! **The built-in image map** ([`super::config::builtin_images`]) sends KServe's own Python runtimes to local
//! commands: `kserve/sklearnserver`, `kserve/xgbserver` and `kserve/lgbserver` run
//! `python3 -m sklearnserver` (the images' entrypoint), ... with `--enable_grpc=false` (replicas
//! share this machine's ports, and KServe's server would open gRPC on 8081 in each). `python3` is
//! looked up on `PATH`: a Python with `kserve` and those modules (bench/peers/setup.sh's
//! `kserve-runtimes` peer, or KServe's own packages) must come first there. `--image-map` entries
//! replace built-in ones of the same name.

use std::path::Path;

use skiff_api::InferenceService;
use skiff_api::image::ImageMap;
use skiff_api::isvc::ModelSpec;
use skiff_api::runtime::container::{Served, runtime_containers};
use skiff_api::runtime::{ClusterServingRuntime, ServingRuntimeSpec, select_runtime};

use super::container::ContainerSpec;
use super::source::{ModelSource, resolve};

/// Whether `skiff up` can run `runtime`'s serving container (`kserve-container`, else the first):
/// its program (the container's command, else the program `images` maps its image to) is `found`
/// ([`on_this_machine`]). The web app's create form offers a runtime's formats only then
/// ([`skiff_web::formats::runnable_formats`]).
pub fn can_run(runtime: &ServingRuntimeSpec, images: &ImageMap, found: impl Fn(&str) -> bool) -> bool {
    let containers = &runtime.containers;
    let serving = containers.iter().find(|c| c.name == "kserve-container").or(containers.first());
    let program = serving.and_then(|c| match c.command.as_deref() {
        Some([program, ..]) => Some(program.as_str()),
        _ => images.lookup(c.image.as_deref()?)?.first().map(String::as_str),
    });
    program.is_some_and(found)
}

/// Whether `program` is on this machine: a path (with a `/`) that is a file, or a name found in a
/// folder of `PATH`.
pub fn on_this_machine(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    super::env::path().is_some_and(|path| std::env::split_paths(path).any(|dir| dir.join(program).is_file()))
}

/// A model served by a runtime's container.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeModel {
    /// The runtime chosen (`ClusterServingRuntime/kserve-sklearnserver`).
    pub runtime: String,
    /// Its serving container as a local process; for a `file://` model, already pointed at the
    /// model's folder.
    pub container: ContainerSpec,
    /// Where the model is.
    pub source: ModelSource,
}

/// The runtime container that serves `model` of `isvc` (read from `base`), among `runtimes`. The
/// error names the field: no runtime for the format, a container the image map cannot run, a model
/// location `skiff up` cannot read.
pub fn runtime_model(
    isvc: &InferenceService,
    model: &ModelSpec,
    runtimes: &[ClusterServingRuntime],
    images: &ImageMap,
    base: &Path,
) -> Result<RuntimeModel, String> {
    let chosen = select_runtime(model, &[], runtimes).map_err(|e| e.to_string())?;
    let at = format!("spec.predictor.model.runtime: {} {:?}", chosen.kind, chosen.name);
    let served = Served { name: isvc.name(), namespace: isvc.namespace() };
    let containers = runtime_containers(chosen.name, chosen.spec, model, served).map_err(|e| format!("{at}: {e}"))?;
    let values =
        containers.iter().map(serde_json::to_value).collect::<Result<Vec<_>, _>>().map_err(|e| format!("{at}: {e}"))?;
    let container = ContainerSpec::parse(&format!("{at}: containers"), &values, images, base)?;
    let uri = model.storage_uri.as_deref().ok_or_else(|| {
        "spec.predictor.model.storageUri: skiff up gives a runtime its model from a storageUri; none is set".to_owned()
    })?;
    let (container, source) = match resolve(uri, base)? {
        ModelSource::Dir(dir) => {
            if !dir.is_dir() {
                return Err(format!("spec.predictor.model.storageUri: {} is not a folder", dir.display()));
            }
            (container.with_model_dir(&dir), ModelSource::Dir(dir))
        }
        fetched => (container, fetched),
    };
    Ok(RuntimeModel { runtime: format!("{}/{}", chosen.kind, chosen.name), container, source })
}

#[cfg(test)]
mod tests {
    use skiff_api::runtime::defaults::kserve_runtimes;

    use super::*;
    use crate::standalone::config::builtin_images;

    fn isvc(predictor: &str) -> InferenceService {
        let text = format!(
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {{name: sklearn-iris}}\nspec:\n  predictor:\n{predictor}"
        );
        skiff_api::shorthand::expand(serde_saphyr::from_str(&text).unwrap()).unwrap()
    }

    fn served(isvc: &InferenceService, images: &ImageMap, base: &Path) -> Result<RuntimeModel, String> {
        let model = isvc.spec.predictor.model.as_ref().unwrap();
        runtime_model(isvc, model, &kserve_runtimes().unwrap(), images, base)
    }

    #[test]
    fn the_sklearn_sample_runs_kserves_sklearnserver_as_a_python_module() {
        let sample = isvc("    sklearn:\n      storageUri: gs://kfserving-examples/models/sklearn/1.0/model\n");
        let got = served(&sample, &builtin_images(), Path::new("/m")).unwrap();
        assert_eq!(got.runtime, "ClusterServingRuntime/kserve-sklearnserver");
        let uri = skiff_api::storage::StoreUri::parse("gs://kfserving-examples/models/sklearn/1.0/model").unwrap();
        assert_eq!(got.source, ModelSource::Fetched(uri));
        assert_eq!(
            got.container.argv,
            [
                "python3",
                "-m",
                "sklearnserver",
                "--enable_grpc=false",
                "--model_name=sklearn-iris",
                "--model_dir=/mnt/models",
                "--http_port=8080"
            ]
        );
        let local = got.container.with_model_dir(Path::new("/cache/x")).process(4242, &[]);
        assert!(local.argv.ends_with(&["--model_dir=/cache/x".into(), "--http_port=4242".into()]), "{:?}", local.argv);

        for (format, module) in [("xgboost", "xgbserver"), ("lightgbm", "lgbserver")] {
            let got = served(
                &isvc(&format!("    {format}: {{storageUri: 's3://b/m'}}\n")),
                &builtin_images(),
                Path::new("/m"),
            )
            .unwrap();
            assert_eq!(got.container.argv[..3], ["python3", "-m", module]);
            assert!(got.container.argv.contains(&"--nthread=1".to_owned()), "{:?}", got.container.argv);
        }
    }

    #[test]
    fn the_form_offers_the_formats_of_the_runtimes_whose_program_is_here() {
        let runtimes = kserve_runtimes().unwrap();
        let specs = || runtimes.iter().map(|r| &r.spec.spec);
        let builtin = builtin_images();
        let python_only = |program: &str| program == "python3";
        let offered = skiff_web::formats::runnable_formats(specs(), |r| can_run(r, &builtin, python_only));
        assert_eq!(offered, ["onnx", "lightgbm", "sklearn", "xgboost"]);
        let tf = |program: &str| program == "/usr/bin/tensorflow_model_server";
        let offered = skiff_web::formats::runnable_formats(specs(), |r| can_run(r, &builtin, tf));
        assert_eq!(offered, ["onnx", "tensorflow"], "TensorFlow Serving's runtime names its command");
        let triton = builtin.overridden_by(ImageMap::from_entries([(
            "nvcr.io/nvidia/tritonserver",
            vec!["/opt/tritonserver/bin/tritonserver".to_owned()],
        )]));
        let offered = skiff_web::formats::runnable_formats(specs(), |r| can_run(r, &triton, |_| true));
        assert!(offered.contains(&"triton".to_owned()) && offered.contains(&"sklearn".to_owned()), "{offered:?}");
    }

    #[test]
    fn a_gguf_model_runs_on_the_llama_cpp_runtime_of_examples_runtimes() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/runtimes/llama-cpp-server.yaml");
        let mut config = super::super::config::UpConfig::default();
        let before = config.runtimes.len();
        config.add_runtime(&example).unwrap();
        config.add_runtime(&example).unwrap();
        assert_eq!(config.runtimes.len(), before + 1, "a runtime of the same name replaces the earlier one");
        let missing = config.add_runtime(Path::new("/no/such-runtime.yaml")).unwrap_err();
        assert!(missing.starts_with("/no/such-runtime.yaml: "), "{missing}");

        let llama = isvc("    model:\n      modelFormat: {name: gguf}\n      storageUri: s3://models/llama\n");
        let model = llama.spec.predictor.model.as_ref().unwrap();
        let got = runtime_model(&llama, model, &config.runtimes, &config.images, Path::new("/m")).unwrap();
        assert_eq!(got.runtime, "ClusterServingRuntime/llama-cpp-server");
        assert_eq!(got.container.readiness_path.as_deref(), Some("/v1/models"), "the server's own readiness");
        let local = got.container.with_model_dir(Path::new("/cache/llama")).process(4242, &[]);
        assert_eq!(
            local.argv,
            [
                "python3",
                "-m",
                "llama_cpp.server",
                "--model=/cache/llama/model.gguf",
                "--model_alias=sklearn-iris",
                "--host=0.0.0.0",
                "--port=4242",
                "--root_path=/openai",
                "--interrupt_requests=False"
            ]
        );
    }

    #[test]
    fn programs_are_found_by_path_or_on_path() {
        let tmp = tempfile::tempdir().unwrap();
        let program = tmp.path().join("server");
        assert!(!on_this_machine(program.to_str().unwrap()));
        std::fs::write(&program, "").unwrap();
        assert!(on_this_machine(program.to_str().unwrap()));
        assert!(on_this_machine("sh"), "sh is on PATH");
        assert!(!on_this_machine("no-such-program-skiff"));
    }

    #[test]
    fn a_file_model_is_given_to_the_runtime_where_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("iris")).unwrap();
        let got = served(&isvc("    sklearn: {storageUri: 'file://iris'}\n"), &builtin_images(), tmp.path()).unwrap();
        let dir = tmp.path().join("iris");
        assert_eq!(got.source, ModelSource::Dir(dir.clone()));
        assert!(got.container.argv.contains(&format!("--model_dir={}", dir.display())), "{:?}", got.container.argv);
        let missing = served(&isvc("    sklearn: {storageUri: 'file://nope'}\n"), &builtin_images(), tmp.path());
        assert!(missing.unwrap_err().starts_with("spec.predictor.model.storageUri: "));
    }

    #[test]
    fn what_cannot_run_here_is_refused_with_the_field() {
        let base = Path::new("/m");
        let triton = served(&isvc("    triton: {storageUri: 'gs://b/m'}\n"), &builtin_images(), base).unwrap_err();
        assert!(
            triton.starts_with("spec.predictor.model.runtime: ClusterServingRuntime \"kserve-tritonserver\": containers[0].command: image \"nvcr.io/nvidia/tritonserver:23.05-py3\" is not in the image map"),
            "{triton}"
        );
        let none =
            served(&isvc("    model: {modelFormat: {name: caffe}, storageUri: 'gs://b/m'}\n"), &builtin_images(), base);
        assert!(none.unwrap_err().starts_with("spec.predictor.model.modelFormat: no ServingRuntime"));
        let pvc = served(&isvc("    sklearn: {storageUri: 'pvc://claim/m'}\n"), &builtin_images(), base).unwrap_err();
        assert!(pvc.contains("no PersistentVolumeClaims"), "{pvc}");
        let mapped = builtin_images().overridden_by(ImageMap::from_entries([(
            "nvcr.io/nvidia/tritonserver",
            vec!["/opt/tritonserver/bin/tritonserver".to_owned()],
        )]));
        let runs = served(&isvc("    triton: {storageUri: 'gs://b/m'}\n"), &mapped, base).unwrap();
        assert_eq!(runs.container.argv[..2], ["/opt/tritonserver/bin/tritonserver", "tritonserver"]);
    }
}
