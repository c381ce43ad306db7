//! Where ONNX Runtime's shared library is, without environment variables: `--ort-dylib` /
//! `ORT_DYLIB_PATH` when given, else next to the running binary (as the container images put it),
//! else where `scripts/setup.sh` installs it (`.ort/onnxruntime/capi/` in the checkout the binary
//! was built in, found from `target/<profile>/`). `skiff-server` and `skiff up` share this rule.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The library's file name without its version.
const LIBRARY: &str = "libonnxruntime.so";
/// Where `scripts/setup.sh` puts the library, under the checkout.
const SETUP_DIR: &str = ".ort/onnxruntime/capi";
/// How many folders above the binary's the checkout may be (`target/release/` is two).
const CHECKOUT_DEPTH: usize = 4;

/// The library in `dir`: `libonnxruntime.so`, or the highest `libonnxruntime.so.<version>`.
fn library_in(dir: &Path) -> Option<PathBuf> {
    let plain = dir.join(LIBRARY);
    if plain.is_file() {
        return Some(plain);
    }
    let prefix = format!("{LIBRARY}.");
    let mut versioned: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix)))
        .collect();
    versioned.sort();
    versioned.pop()
}

/// The folders searched for a binary in `exe_dir`, in order.
pub fn search_path(exe_dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![exe_dir.to_path_buf()];
    dirs.extend(exe_dir.ancestors().take(CHECKOUT_DEPTH + 1).map(|a| a.join(SETUP_DIR)));
    dirs
}

/// The library to load: `explicit` (the flag or `ORT_DYLIB_PATH`) if given, else the first found
/// on [`search_path`] of the running binary.
pub fn locate(explicit: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path);
    }
    let exe = std::env::current_exe().map_err(|e| Error::Config(format!("cannot tell where this binary is: {e}")))?;
    let exe_dir = exe.parent().unwrap_or(Path::new("/"));
    locate_from(exe_dir)
}

/// [`locate`] for a binary in `exe_dir`, without an explicit path.
pub fn locate_from(exe_dir: &Path) -> Result<PathBuf> {
    let dirs = search_path(exe_dir);
    dirs.iter().find_map(|dir| library_in(dir)).ok_or_else(|| {
        let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        Error::Config(format!(
            "ONNX Runtime's library not found: run scripts/setup.sh, or give --ort-dylib or ORT_DYLIB_PATH \
             (searched {})",
            searched.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_to_the_binary_first_then_the_checkouts_setup_folder() {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("target/release");
        std::fs::create_dir_all(&bin).unwrap();
        let error = locate_from(&bin).unwrap_err().to_string();
        assert!(error.contains("scripts/setup.sh") && error.contains(".ort/onnxruntime/capi"), "{error}");

        let setup = root.path().join(SETUP_DIR);
        std::fs::create_dir_all(&setup).unwrap();
        for version in ["1.30.0", "1.31.1"] {
            std::fs::write(setup.join(format!("libonnxruntime.so.{version}")), b"").unwrap();
        }
        std::fs::write(setup.join("libonnxruntime_providers_shared.so"), b"").unwrap();
        assert_eq!(locate_from(&bin).unwrap(), setup.join("libonnxruntime.so.1.31.1"), "the newest version");

        std::fs::write(bin.join(LIBRARY), b"").unwrap();
        assert_eq!(locate_from(&bin).unwrap(), bin.join(LIBRARY), "next to the binary wins");
        assert_eq!(
            locate(Some("/given/lib.so".into())).unwrap(),
            PathBuf::from("/given/lib.so"),
            "an explicit path wins"
        );
    }
}
