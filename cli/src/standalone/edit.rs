//! How the models web app in `skiff up` writes a manifest file it edits, as a careful editor does:
//! - a symbolic link is followed to its target inside the folder, which is edited while the link
//!   stays (as `sed -i --follow-symlinks`); a link that now leads out of the folder is refused,
//!   naming the link ([`ManifestFolder::target`], the rule the folder reads links by);
//! - a change the edit did not read is never overwritten: the target is locked (`flock`,
//!   advisory: other edits, and writers that lock and then check that the file they locked is
//!   still the path's, wait) from the read to the swap, the edit starts only from the text `skiff
//!   up` parsed, and right before the swap the file must still hold that text, or the edit is
//!   refused with 409 naming the file and nothing is written;
//! - the text is written whole or not at all: a temporary file beside the target (a name the
//!   folder watch ignores, the target's permissions), swapped with the target in one step
//!   (`RENAME_EXCHANGE`); if what it displaced is not the text the edit read (a save by a rename
//!   landed in between), it is swapped back and the edit refused. A writer that saves in place
//!   without the lock, in the microseconds between the last look and the swap, can still lose its
//!   save: no file system offers a compare-and-swap of a file's content.
//!
//! The result is checked against the folder's rules ([`ManifestFolder::check`]) by the caller
//! before [`Edit::write`].

use std::fs::{File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use skiff_web::error::{Error, Result};

use super::folder::{MAX_MANIFEST_BYTES, ManifestFolder};
use super::manifests::Manifest;

/// How long an edit waits for another one (or a writer that locks) to let the file go.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// An edit in progress: the file it writes, locked, and the text it started from.
pub struct Edit {
    /// The folder's entry (what errors name).
    path: PathBuf,
    /// The file written: the entry, or its link's target.
    target: PathBuf,
    /// The target as opened, holding the lock.
    file: File,
    /// The text the edit started from.
    base: String,
}

fn conflict(path: &Path, why: &str) -> Error {
    Error::Refused { status: 409, message: format!("{}: {why}", path.display()) }
}

fn unavailable(what: &str, path: &Path, error: std::io::Error) -> Error {
    Error::Unavailable(format!("{what} {}: {error}", path.display()))
}

/// Reads what `file` holds, at most one byte past the folder's limit.
fn contents(file: &File) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl Edit {
    /// Starts an edit of `manifest`'s file in `folder`: resolves it, locks it, and checks that it
    /// still holds the text `skiff up` parsed (409 naming it if not: reload and edit again).
    pub async fn begin(folder: &ManifestFolder, manifest: &Manifest) -> Result<Edit> {
        let path = manifest.path.clone();
        let target = folder.target(&path).map_err(|why| conflict(&path, &format!("{why}; edit the file by hand")))?;
        let deadline = Instant::now() + LOCK_WAIT;
        let file = loop {
            // O_NOFOLLOW: the target was resolved and must not have become a link since.
            let file = OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&target)
                .map_err(|e| conflict(&path, &format!("cannot be opened for the edit ({})", e.kind())))?;
            match file.try_lock() {
                Ok(()) => break file,
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(conflict(&path, "another edit holds the file; try again"));
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(unavailable("locking", &target, e)),
            }
        };
        // Read through the path, not the locked handle: a file renamed into place while this edit
        // waited for the lock is what the edit must start from.
        let now =
            File::open(&target).and_then(|file| contents(&file)).map_err(|e| unavailable("reading", &target, e))?;
        if now != manifest.text.as_bytes() {
            return Err(conflict(
                &path,
                "the file changed since skiff up read it; nothing was written (reload and edit again)",
            ));
        }
        Ok(Edit { path, target, file, base: manifest.text.to_string() })
    }

    /// The text the edit starts from.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Writes `text` in place of the file if it still holds the text the edit started from;
    /// else 409 naming the file, and the file is left as it is.
    pub fn write(self, text: &str) -> Result<()> {
        let name = self.target.file_name().and_then(|n| n.to_str()).unwrap_or("manifest");
        let temporary = self.target.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let written = std::fs::write(&temporary, text)
            .and_then(|()| std::fs::set_permissions(&temporary, self.file.metadata()?.permissions()));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(unavailable("writing", &temporary, e));
        }
        // The last look before the swap: a save made since the edit read the file is kept.
        let refused = || {
            let _ = std::fs::remove_file(&temporary);
            conflict(
                &self.path,
                "the file changed while the edit was made; nothing was written (reload and edit again)",
            )
        };
        if !holds(&self.target, &self.base) {
            return Err(refused());
        }
        // Swap the new text in, atomically, then look at what it displaced: a save that landed
        // between the look and the swap (by a rename) is what now lies under the temporary name,
        // and is swapped back, so no save made by a rename is ever lost.
        exchange(&temporary, &self.target).map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            unavailable("writing", &self.target, e)
        })?;
        if !holds(&temporary, &self.base) {
            exchange(&temporary, &self.target).map_err(|e| unavailable("restoring", &self.target, e))?;
            return Err(refused());
        }
        std::fs::remove_file(&temporary).map_err(|e| unavailable("removing", &temporary, e))
    }
}

/// Whether the file at `path` holds `text`.
fn holds(path: &Path, text: &str) -> bool {
    File::open(path).and_then(|file| contents(&file)).is_ok_and(|now| now == text.as_bytes())
}

/// Swaps the files at `a` and `b` in one step (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use skiff_server::model::MODEL_FILE;

    use super::*;
    use crate::standalone::config::UpConfig;

    fn examples() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
    }

    /// A folder whose `iris.yaml` links to `src/iris.txt`, read once.
    fn linked() -> (tempfile::TempDir, ManifestFolder, Manifest) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("models/iris")).unwrap();
        std::fs::create_dir(tmp.path().join("src")).unwrap();
        std::fs::copy(examples().join("models/iris").join(MODEL_FILE), tmp.path().join("models/iris").join(MODEL_FILE))
            .unwrap();
        std::fs::copy(examples().join("iris.yaml"), tmp.path().join("src/iris.txt")).unwrap();
        std::os::unix::fs::symlink("src/iris.txt", tmp.path().join("iris.yaml")).unwrap();
        let folder = ManifestFolder::new(tmp.path().to_owned(), UpConfig::default());
        let manifest = folder.refresh().manifests["default/iris"].clone();
        (tmp, folder, manifest)
    }

    fn refusal(result: Result<impl Sized>) -> (u16, String) {
        match result {
            Err(Error::Refused { status, message }) => (status, message),
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("not refused"),
        }
    }

    #[tokio::test]
    async fn the_target_of_a_link_is_written_and_the_link_stays() {
        let (tmp, folder, manifest) = linked();
        let edit = Edit::begin(&folder, &manifest).await.unwrap();
        let text = format!("# edited\n{}", edit.base());
        edit.write(&text).unwrap();
        assert!(std::fs::symlink_metadata(tmp.path().join("iris.yaml")).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(tmp.path().join("src/iris.txt")).unwrap(), text);
    }

    #[tokio::test]
    async fn a_link_that_now_leads_out_of_the_folder_is_refused_naming_it() {
        let (tmp, folder, manifest) = linked();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), &*manifest.text).unwrap();
        std::fs::remove_file(tmp.path().join("iris.yaml")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("iris.yaml")).unwrap();
        let (status, message) = refusal(Edit::begin(&folder, &manifest).await);
        let link = tmp.path().join("iris.yaml");
        assert_eq!(status, 409);
        assert_eq!(
            message,
            format!("{}: a symbolic link that leads out of the folder; refused; edit the file by hand", link.display())
        );
        assert_eq!(std::fs::read_to_string(outside.path()).unwrap(), &*manifest.text, "left as it was");
    }

    #[tokio::test]
    async fn a_save_made_during_the_edit_is_kept_and_the_edit_refused() {
        let (tmp, folder, manifest) = linked();
        let edit = Edit::begin(&folder, &manifest).await.unwrap();
        let saved = format!("# the user's save\n{}", manifest.text);
        std::fs::write(tmp.path().join("src/iris.txt"), &saved).unwrap();
        let (status, message) = refusal(edit.write("# the edit\n"));
        assert_eq!(status, 409);
        assert!(
            message.ends_with(
                "iris.yaml: the file changed while the edit was made; nothing was written (reload and edit again)"
            ),
            "{message}"
        );
        assert_eq!(std::fs::read_to_string(tmp.path().join("src/iris.txt")).unwrap(), saved);
        // A file changed since skiff up read it: the edit does not start.
        let (status, _) = refusal(Edit::begin(&folder, &manifest).await);
        assert_eq!(status, 409);
    }
}
