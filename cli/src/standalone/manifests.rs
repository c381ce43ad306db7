//! Reading a folder of InferenceService manifests, with the checks standalone mode adds: it serves
//! ONNX models from `file://` storage (relative paths resolve against the manifest's folder).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use skiff_api::InferenceService;
use skiff_api::validate::validate;
use skiff_autoscaler::AutoscalerConfig;
use skiff_server::model::MODEL_FILE;

/// A valid manifest and where its model lives.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The file it came from.
    pub path: PathBuf,
    /// Its content.
    pub isvc: InferenceService,
    /// The folder holding `model.onnx`.
    pub model_dir: PathBuf,
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
pub fn read_folder(dir: &Path, config: &AutoscalerConfig) -> std::io::Result<Folder> {
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
pub fn parse(path: &Path, text: &str, config: &AutoscalerConfig) -> Result<Manifest, String> {
    let isvc = InferenceService::from_yaml(text).map_err(|e| e.to_string())?;
    validate(&isvc, config).map_err(|e| e.to_string())?;
    let predictor = &isvc.spec.predictor;
    let Some(model) = &predictor.model else {
        return Err("spec.predictor: skiff up serves `model` predictors; custom containers and framework \
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
    let base = path.parent().unwrap_or(Path::new("."));
    let model_dir = base.join(location);
    if !model_dir.join(MODEL_FILE).is_file() {
        return Err(format!("spec.predictor.model.storageUri: {} holds no {MODEL_FILE}", model_dir.display()));
    }
    Ok(Manifest { path: path.to_owned(), isvc, model_dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn examples() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
    }

    #[test]
    fn the_examples_are_valid() {
        let folder = read_folder(&examples(), &AutoscalerConfig::default()).unwrap();
        assert_eq!(folder.errors, Vec::<String>::new());
        assert_eq!(folder.manifests.keys().collect::<Vec<_>>(), ["default/adder", "default/iris", "default/mlp"]);
        assert!(folder.manifests["default/iris"].model_dir.join(MODEL_FILE).is_file());
    }

    #[test]
    fn refusals_name_the_file_and_the_field() {
        let tmp = tempfile::tempdir().unwrap();
        let iris = std::fs::read_to_string(examples().join("iris.yaml")).unwrap();
        std::fs::write(tmp.path().join("a-bad.yaml"), iris.replace("minReplicas: 0", "minReplicas: 9")).unwrap();
        std::fs::write(tmp.path().join("b-sk.yaml"), iris.replace("name: onnx", "name: sklearn")).unwrap();
        std::fs::write(tmp.path().join("c-missing.yaml"), iris.clone()).unwrap();
        std::fs::write(tmp.path().join("notes.txt"), "ignored").unwrap();
        let folder = read_folder(tmp.path(), &AutoscalerConfig::default()).unwrap();
        assert!(folder.manifests.is_empty());
        let errors = folder.errors.join("\n");
        assert!(errors.contains("a-bad.yaml: spec.predictor.minReplicas: 9 is more than maxReplicas 4"), "{errors}");
        assert!(errors.contains("b-sk.yaml: spec.predictor.model.modelFormat.name: skiff up serves onnx"), "{errors}");
        assert!(errors.contains("c-missing.yaml: spec.predictor.model.storageUri:"), "{errors}");
        assert_eq!(folder.errors.len(), 3);
    }
}
