//! A model that is one archive is unpacked in its folder, as KServe's storage initializer does
//! (`.tar`, `.tar.gz`, `.tgz`, `.zip`), then the archive is removed. Nothing is written outside
//! the folder: an entry with an absolute path or `..`, a link (symbolic or hard) whose target
//! leaves the folder, or a file under a link is refused, and the unpacked bytes are bounded.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use crate::download::inside;
use crate::error::{Error, Result};

/// An archive's format, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.tar`.
    Tar,
    /// `.tar.gz` or `.tgz`.
    TarGz,
    /// `.zip`.
    Zip,
}

/// The archive format of a file named `name`, if it is one.
pub fn format_of(name: &str) -> Option<Format> {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".tar.gz") || lower.ends_with(".tgz") {
        Some(Format::TarGz)
    } else if lower.ends_with(".tar") {
        Some(Format::Tar)
    } else if lower.ends_with(".zip") {
        Some(Format::Zip)
    } else {
        None
    }
}

/// Unpacks `archive` into `dir` (which holds it), removes it and returns the bytes unpacked;
/// `uri` names the model in errors, `max_bytes` bounds what is unpacked.
pub fn unpack(uri: &str, archive: &Path, format: Format, dir: &Path, max_bytes: u64) -> Result<u64> {
    let name = archive.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let fail = |cause: String| Error::Archive {
        uri: uri.to_owned(),
        archive: name.clone(),
        cause: crate::error::tidy(&cause),
    };
    let file = File::open(archive).map_err(Error::disk(archive))?;
    let mut budget = Budget { left: max_bytes };
    let unpacked = match format {
        Format::Tar => untar(file, dir, &mut budget),
        Format::TarGz => untar(flate2::read::GzDecoder::new(file), dir, &mut budget),
        Format::Zip => unzip(file, dir, &mut budget),
    };
    let unpacked = unpacked.map_err(|e| match e {
        Refusal::Disk(error) => error,
        Refusal::Bad(cause) => fail(cause),
        Refusal::TooLarge => Error::TooLarge {
            uri: uri.to_owned(),
            what: format!("the content of {name}"),
            size: max_bytes + 1,
            limit: max_bytes,
        },
    })?;
    fs::remove_file(archive).map_err(Error::disk(archive))?;
    Ok(unpacked)
}

enum Refusal {
    Bad(String),
    Disk(Error),
    TooLarge,
}

struct Budget {
    left: u64,
}

impl Budget {
    fn take(&mut self, bytes: u64) -> Result<(), Refusal> {
        self.left = self.left.checked_sub(bytes).ok_or(Refusal::TooLarge)?;
        Ok(())
    }
}

/// Where an entry named `name` goes: inside `dir`, and not under a link an earlier entry made.
fn target(dir: &Path, name: &str) -> Result<PathBuf, Refusal> {
    let trimmed = name.trim_end_matches('/');
    let path = inside(dir, trimmed).ok_or_else(|| Refusal::Bad(format!("entry {name:?} leads outside the folder")))?;
    let mut walked = dir.to_path_buf();
    for part in Path::new(trimmed).parent().into_iter().flat_map(Path::components) {
        walked.push(part);
        if fs::symlink_metadata(&walked).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Refusal::Bad(format!("entry {name:?} lies under a link")));
        }
    }
    Ok(path)
}

/// Whether a link at `entry` (relative to the folder) pointing to `to` stays in the folder.
fn stays_inside(entry: &str, to: &Path) -> bool {
    if to.is_absolute() {
        return false;
    }
    let mut depth: i64 = Path::new(entry).parent().map_or(0, |p| p.components().count() as i64);
    for part in to.components() {
        match part {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

fn write_file(path: &Path, reader: &mut dyn Read, budget: &mut Budget) -> Result<u64, Refusal> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| Refusal::Disk(Error::disk(parent)(e)))?;
    }
    let mut out = File::create(path).map_err(|e| Refusal::Disk(Error::disk(path)(e)))?;
    let mut limited = reader.take(budget.left + 1);
    let written = io::copy(&mut limited, &mut out).map_err(|e| match e.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::PermissionDenied => Refusal::Disk(Error::disk(path)(e)),
        _ => Refusal::Bad(format!("{}: {e}", path.display())),
    })?;
    budget.take(written)?;
    Ok(written)
}

fn untar(reader: impl Read, dir: &Path, budget: &mut Budget) -> Result<u64, Refusal> {
    let mut archive = tar::Archive::new(reader);
    let entries = archive.entries().map_err(|e| Refusal::Bad(e.to_string()))?;
    let mut total = 0;
    for entry in entries {
        let mut entry = entry.map_err(|e| Refusal::Bad(format!("corrupt or truncated: {e}")))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        let path = target(dir, &name)?;
        if kind.is_dir() {
            fs::create_dir_all(&path).map_err(|e| Refusal::Disk(Error::disk(&path)(e)))?;
        } else if kind.is_file() {
            total += write_file(&path, &mut entry, budget).map_err(|e| {
                if let Refusal::Bad(cause) = e { Refusal::Bad(format!("corrupt or truncated: {cause}")) } else { e }
            })?;
        } else if kind.is_symlink() || kind.is_hard_link() {
            let to = entry.link_name().ok().flatten().map(|p| p.into_owned()).unwrap_or_default();
            let inside_dir = if kind.is_hard_link() {
                inside(dir, &to.to_string_lossy()).is_some()
            } else {
                stays_inside(&name, &to)
            };
            if !inside_dir {
                return Err(Refusal::Bad(format!("link {name:?} -> {:?} leads outside the folder", to.display())));
            }
            if kind.is_symlink() {
                std::os::unix::fs::symlink(&to, &path).map_err(|e| Refusal::Disk(Error::disk(&path)(e)))?;
            } else {
                fs::hard_link(dir.join(&to), &path).map_err(|e| Refusal::Bad(format!("hard link {name:?}: {e}")))?;
            }
        } else {
            return Err(Refusal::Bad(format!("entry {name:?} is neither a file, a folder nor a link")));
        }
    }
    Ok(total)
}

fn unzip(file: File, dir: &Path, budget: &mut Budget) -> Result<u64, Refusal> {
    let mut archive = zip::ZipArchive::new(file).map_err(|e| Refusal::Bad(format!("corrupt or truncated: {e}")))?;
    let mut total = 0;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|e| Refusal::Bad(format!("corrupt or truncated: {e}")))?;
        let name = entry.name().map_err(|e| Refusal::Bad(format!("an entry's name: {e}")))?.into_owned();
        if entry.is_symlink() {
            return Err(Refusal::Bad(format!("entry {name:?} is a link (zip archives are unpacked without links)")));
        }
        let path = target(dir, &name)?;
        if entry.is_dir() {
            fs::create_dir_all(&path).map_err(|e| Refusal::Disk(Error::disk(&path)(e)))?;
        } else {
            total += write_file(&path, &mut entry, budget).map_err(|e| {
                if let Refusal::Bad(cause) = e { Refusal::Bad(format!("corrupt or truncated: {cause}")) } else { e }
            })?;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests;
