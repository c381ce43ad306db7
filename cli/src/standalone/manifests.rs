//! Reading a folder of InferenceService manifests, with the checks standalone mode adds: it serves
//! ONNX models from `file://` storage (relative paths resolve against the manifest's folder) and
//! custom containers (a predictor's, a transformer's, an explainer's) as local processes
//! ([`ContainerSpec`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use skiff_api::InferenceService;
use skiff_api::revision::Component;
use skiff_api::validate::validate;
use skiff_server::model::MODEL_FILE;

use super::config::UpConfig;
use super::container::ContainerSpec;

/// A valid manifest and what its components run.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The file it came from.
    pub path: PathBuf,
    /// Its content.
    pub isvc: InferenceService,
    /// What the predictor runs.
    pub predictor: Predictor,
    /// The transformer's container, when it has one.
    pub transformer: Option<ContainerSpec>,
    /// The explainer's container, when it has one.
    pub explainer: Option<ContainerSpec>,
}

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
    /// `skiff-server` on the folder holding `model.onnx`.
    Model(PathBuf),
    /// A custom container.
    Container(ContainerSpec),
}

/// What a folder holds: valid manifests by `namespace/name`, and a message per rejected file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Folder {
    /// Valid manifests, by InferenceService `namespace/name`.
    pub manifests: BTreeMap<String, Manifest>,
    /// `file: field: message` for every file that was refused.
    pub errors: Vec<String>,
}

/// Reads every `*.yaml` / `*.yml` file directly in `dir`.
pub fn read_folder(dir: &Path, config: &UpConfig) -> std::io::Result<Folder> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    paths.sort();
    let mut folder = Folder::default();
    for path in paths {
        let text = std::fs::read_to_string(&path)?;
        match parse(&path, &text, config) {
            Ok(manifest) => {
                let key = format!("{}/{}", manifest.isvc.namespace(), manifest.isvc.name());
                if let Some(first) = folder.manifests.get(&key) {
                    folder.errors.push(format!(
                        "{}: metadata.name: {key} is already defined in {}",
                        path.display(),
                        first.path.display()
                    ));
                } else {
                    folder.manifests.insert(key, manifest);
                }
            }
            Err(message) => folder.errors.push(format!("{}: {message}", path.display())),
        }
    }
    Ok(folder)
}

/// Parses and checks one manifest; the error names the field.
pub fn parse(path: &Path, text: &str, config: &UpConfig) -> Result<Manifest, String> {
    let isvc = InferenceService::from_yaml(text).map_err(|e| e.to_string())?;
    validate(&isvc, &config.autoscaler).map_err(|e| e.to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    let spec = &isvc.spec.predictor;
    let predictor = match (&spec.model, &spec.containers) {
        (None, Some(containers)) => {
            Predictor::Container(ContainerSpec::parse("spec.predictor.containers", containers, &config.images, base)?)
        }
        _ => Predictor::Model(model_dir(&isvc, base)?),
    };
    let container = |component: Component| match component.spec(&isvc).and_then(|spec| spec.containers.as_ref()) {
        Some(containers) => {
            let field = format!("spec.{}.containers", component.name());
            ContainerSpec::parse(&field, containers, &config.images, base).map(Some)
        }
        None => Ok(None),
    };
    let (transformer, explainer) = (container(Component::Transformer)?, container(Component::Explainer)?);
    Ok(Manifest { path: path.to_owned(), isvc, predictor, transformer, explainer })
}

/// The folder of a `model` predictor's ONNX model.
fn model_dir(isvc: &InferenceService, base: &Path) -> Result<PathBuf, String> {
    let Some(model) = &isvc.spec.predictor.model else {
        return Err("spec.predictor: skiff up serves `model` predictors and custom `containers`; framework \
                    shorthands need the Kubernetes mode"
            .to_owned());
    };
    if model.model_format.name != "onnx" {
        return Err(format!(
            "spec.predictor.model.modelFormat.name: skiff up serves onnx models, not {:?}",
            model.model_format.name
        ));
    }
    let uri = model.storage_uri.as_deref().unwrap_or_default();
    let Some(location) = uri.strip_prefix("file://") else {
        return Err(format!("spec.predictor.model.storageUri: skiff up reads file:// URIs, not {uri:?}"));
    };
    let model_dir = base.join(location);
    if !model_dir.join(MODEL_FILE).is_file() {
        return Err(format!("spec.predictor.model.storageUri: {} holds no {MODEL_FILE}", model_dir.display()));
    }
    Ok(model_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn examples() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
    }

    #[test]
    fn the_examples_are_valid() {
        let folder = read_folder(&examples(), &UpConfig::default()).unwrap();
        assert_eq!(folder.errors, Vec::<String>::new());
        assert_eq!(folder.manifests.keys().collect::<Vec<_>>(), ["default/adder", "default/iris", "default/mlp"]);
        let Predictor::Model(dir) = &folder.manifests["default/iris"].predictor else { panic!("a model") };
        assert!(dir.join(MODEL_FILE).is_file());
    }

    #[test]
    fn refusals_name_the_file_and_the_field() {
        let tmp = tempfile::tempdir().unwrap();
        let iris = std::fs::read_to_string(examples().join("iris.yaml")).unwrap();
        std::fs::write(tmp.path().join("a-bad.yaml"), iris.replace("minReplicas: 0", "minReplicas: 9")).unwrap();
        std::fs::write(tmp.path().join("b-sk.yaml"), iris.replace("name: onnx", "name: sklearn")).unwrap();
        std::fs::write(tmp.path().join("c-missing.yaml"), iris.clone()).unwrap();
        std::fs::write(tmp.path().join("notes.txt"), "ignored").unwrap();
        let folder = read_folder(tmp.path(), &UpConfig::default()).unwrap();
        assert!(folder.manifests.is_empty());
        let errors = folder.errors.join("\n");
        assert!(errors.contains("a-bad.yaml: spec.predictor.minReplicas: 9 is more than maxReplicas 4"), "{errors}");
        assert!(errors.contains("b-sk.yaml: spec.predictor.model.modelFormat.name: skiff up serves onnx"), "{errors}");
        assert!(errors.contains("c-missing.yaml: spec.predictor.model.storageUri:"), "{errors}");
        assert_eq!(folder.errors.len(), 3);
    }
}
