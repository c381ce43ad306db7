//! Finding models on disk: a folder holding `model.onnx`, or a folder of such folders.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The file a model folder must hold.
pub const MODEL_FILE: &str = "model.onnx";

/// A model found on disk, not yet loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSource {
    /// Name clients use.
    pub name: String,
    /// Path of the `.onnx` file.
    pub path: PathBuf,
}

/// Lists the models under `dir`: one named `name` (default: the folder's name) when `dir` holds
/// `model.onnx`, otherwise one per sub-folder that holds it, named after the sub-folder. A
/// `model.onnx` counts when its name is there, even as a dangling symlink or a folder: loading it
/// then says what is wrong with it ([`super::check`]) rather than that there is none.
pub fn discover(dir: &Path, name: Option<&str>) -> Result<Vec<ModelSource>> {
    let dir = dir.canonicalize().map_err(|e| Error::Config(format!("model directory {}: {e}", dir.display())))?;
    let single = dir.join(MODEL_FILE);
    if single.symlink_metadata().is_ok() {
        let name = match name {
            Some(n) => n.to_owned(),
            None => folder_name(&dir)?,
        };
        return Ok(vec![ModelSource { name, path: single }]);
    }
    if let Some(name) = name {
        return Err(Error::Config(format!(
            "--model-name {name} needs {} to hold {MODEL_FILE}; it is a folder of models, which are named after their sub-folders",
            dir.display()
        )));
    }
    let mut models = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path().join(MODEL_FILE);
        if path.symlink_metadata().is_ok() {
            let folder = path.parent().expect("joined path has a parent");
            models.push(ModelSource { name: folder_name(folder)?, path });
        }
    }
    if models.is_empty() {
        return Err(Error::Config(format!("no {MODEL_FILE} in {} or in its sub-folders", dir.display())));
    }
    models.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(models)
}

fn folder_name(dir: &Path) -> Result<String> {
    dir.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| Error::Config(format!("cannot name a model after {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    #[test]
    fn a_folder_with_model_onnx_is_one_model() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("iris");
        touch(&dir.join(MODEL_FILE));
        let found = discover(&dir, None).unwrap();
        assert_eq!(
            found,
            vec![ModelSource { name: "iris".into(), path: dir.canonicalize().unwrap().join(MODEL_FILE) }]
        );
        assert_eq!(discover(&dir, Some("flowers")).unwrap()[0].name, "flowers");
    }

    #[test]
    fn a_folder_of_folders_is_many_models() {
        let tmp = tempfile::tempdir().unwrap();
        touch(&tmp.path().join("b/model.onnx"));
        touch(&tmp.path().join("a/model.onnx"));
        touch(&tmp.path().join("notes/readme.txt"));
        let names: Vec<_> = discover(tmp.path(), None).unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(discover(tmp.path(), Some("x")).unwrap_err().to_string().contains("--model-name x needs"));
    }

    #[test]
    fn nothing_to_serve_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(discover(tmp.path(), None).unwrap_err().to_string().contains("no model.onnx in"));
        assert!(discover(&tmp.path().join("missing"), None).unwrap_err().to_string().contains("model directory"));
    }
}
