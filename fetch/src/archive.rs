//! A model that is one archive is unpacked in its folder, as KServe's storage initializer does
//! (`.tar`, `.tar.gz`, `.tgz`, `.zip`), then the archive is removed. Nothing is written or read
//! outside the folder, by construction: the entries land in a staging folder opened once, and
//! every path is resolved beneath it without following any link ([`crate::beneath`]), so an
//! entry with an absolute path or `..`, a file or folder under a link, a write through a link and
//! a hard link to anything but a file unpacked before are refused, whatever chain of links the
//! archive built. Once every entry is out, each symbolic link must resolve inside the staging
//! folder as the system would follow it (a chain of links included), or the archive is refused.
//! The unpacked bytes are bounded (by the model cache's limit in the cache); a refused archive
//! leaves nothing unpacked behind. Zip archives are unpacked without links.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::beneath::Beneath;
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
/// `uri` names the model in errors, `max_bytes` bounds what is unpacked. The entries land in a
/// staging folder in `dir`, moved into `dir` (replacing what is there by those names) once all
/// are out and checked; a refused archive leaves only what `dir` held before.
pub fn unpack(uri: &str, archive: &Path, format: Format, dir: &Path, max_bytes: u64) -> Result<u64> {
    let name = archive.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staging = dir.join(format!(".skiff-unpack-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir(&staging).map_err(Error::disk(&staging))?;
    let unpacked = unpack_in(archive, format, &staging, max_bytes);
    let unpacked = unpacked.and_then(|bytes| {
        fs::remove_file(archive).map_err(|e| Refusal::Disk(Error::disk(archive)(e)))?;
        move_out(&staging, dir)?;
        Ok(bytes)
    });
    let _ = fs::remove_dir_all(&staging);
    unpacked.map_err(|e| match e {
        Refusal::Disk(error) => error,
        Refusal::Bad(cause) => {
            Error::Archive { uri: uri.to_owned(), archive: name.clone(), cause: crate::error::tidy(&cause) }
        }
        Refusal::TooLarge => Error::TooLarge {
            uri: uri.to_owned(),
            what: format!("the content of {name} once unpacked"),
            size: max_bytes + 1,
            limit: max_bytes,
        },
    })
}

/// Unpacks `archive` into the empty folder `staging` and checks its links.
fn unpack_in(archive: &Path, format: Format, staging: &Path, max_bytes: u64) -> Result<u64, Refusal> {
    let file = File::open(archive).map_err(|e| Refusal::Disk(Error::disk(archive)(e)))?;
    let mut out = Out {
        dir: Beneath::open(staging).map_err(|e| Refusal::Disk(Error::disk(staging)(e)))?,
        path: staging.to_owned(),
        left: max_bytes,
        links: Vec::new(),
    };
    let unpacked = match format {
        Format::Tar => untar(file, &mut out),
        Format::TarGz => untar(flate2::read::GzDecoder::new(file), &mut out),
        Format::Zip => unzip(file, &mut out),
    }?;
    for (name, to) in &out.links {
        if out.dir.resolves_inside(Path::new(name)).is_err() {
            return Err(Refusal::Bad(format!("link {name:?} -> {:?} leads outside the folder", to.display())));
        }
    }
    Ok(unpacked)
}

/// Moves everything in `staging` into `dir`, replacing what `dir` holds by those names.
fn move_out(staging: &Path, dir: &Path) -> Result<(), Refusal> {
    let disk = |path: &Path| {
        let path = path.to_owned();
        move |e| Refusal::Disk(Error::disk(path)(e))
    };
    for item in fs::read_dir(staging).map_err(disk(staging))? {
        let from = item.map_err(disk(staging))?.path();
        let name = from.file_name().unwrap_or_default();
        let to = dir.join(name);
        if to == staging {
            return Err(Refusal::Bad(format!("entry {name:?} is the unpacker's own folder")));
        }
        match fs::symlink_metadata(&to) {
            Ok(found) if found.is_dir() => fs::remove_dir_all(&to).map_err(disk(&to))?,
            Ok(_) => fs::remove_file(&to).map_err(disk(&to))?,
            Err(_) => {}
        }
        fs::rename(&from, &to).map_err(disk(&to))?;
    }
    Ok(())
}

enum Refusal {
    Bad(String),
    Disk(Error),
    TooLarge,
}

/// Where the entries go: the staging folder, opened once, with the bytes it may still take and
/// the links made in it.
struct Out {
    dir: Beneath,
    path: PathBuf,
    left: u64,
    links: Vec<(String, PathBuf)>,
}

/// The path of an entry named `name` under the folder (`./` and empty parts dropped); `None`
/// for the folder itself; refused when absolute or with `..`.
fn relative(name: &str) -> Result<Option<PathBuf>, Refusal> {
    let parts: Vec<&str> = name.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if name.starts_with('/') || parts.contains(&"..") {
        return Err(Refusal::Bad(format!("entry {name:?} leads outside the folder")));
    }
    Ok((!parts.is_empty()).then(|| parts.iter().collect()))
}

impl Out {
    /// What an error of the disk at the entry `name` means: the archive's fault when the folder
    /// already holds a link, a file or a folder where the entry needs another kind, or the
    /// disk's.
    fn refusal(&self, name: &str, path: &Path, error: std::io::Error) -> Refusal {
        match error.raw_os_error().map(Errno::from_raw) {
            Some(Errno::ELOOP) => Refusal::Bad(format!("entry {name:?} lies under or writes through a link")),
            Some(Errno::EXDEV) => Refusal::Bad(format!("entry {name:?} leads outside the folder")),
            Some(Errno::ENOTDIR | Errno::EISDIR | Errno::EEXIST | Errno::ENOTEMPTY) => {
                Refusal::Bad(format!("entry {name:?} clashes with an earlier entry"))
            }
            Some(Errno::ENOENT | Errno::EINVAL) => Refusal::Bad(format!("entry {name:?}: {error}")),
            _ => Refusal::Disk(Error::disk(self.path.join(path))(error)),
        }
    }

    fn dir(&mut self, name: &str, path: &Path) -> Result<(), Refusal> {
        self.dir.create_dir_all(path).map(drop).map_err(|e| self.refusal(name, path, e))
    }

    fn file(&mut self, name: &str, path: &Path, reader: &mut dyn Read) -> Result<u64, Refusal> {
        let mut file = self.dir.create_file(path).map_err(|e| self.refusal(name, path, e))?;
        let mut limited = reader.take(self.left + 1);
        let written = io::copy(&mut limited, &mut file).map_err(|e| match e.kind() {
            io::ErrorKind::StorageFull | io::ErrorKind::PermissionDenied => {
                Refusal::Disk(Error::disk(self.path.join(path))(e))
            }
            _ => Refusal::Bad(format!("corrupt or truncated: {name}: {e}")),
        })?;
        self.left = self.left.checked_sub(written).ok_or(Refusal::TooLarge)?;
        Ok(written)
    }

    fn symlink(&mut self, name: &str, path: &Path, to: &Path) -> Result<(), Refusal> {
        if to.is_absolute() {
            return Err(Refusal::Bad(format!("link {name:?} -> {:?} leads outside the folder", to.display())));
        }
        self.dir.symlink(path, to).map_err(|e| self.refusal(name, path, e))?;
        self.links.push((path.to_string_lossy().into_owned(), to.to_owned()));
        Ok(())
    }

    fn hard_link(&mut self, name: &str, path: &Path, to: &Path) -> Result<(), Refusal> {
        let outside = || Refusal::Bad(format!("link {name:?} -> {:?} leads outside the folder", to.display()));
        let target = relative(&to.to_string_lossy()).map_err(|_| outside())?.ok_or_else(outside)?;
        self.dir.hard_link(path, &target).map_err(|e| match e.raw_os_error().map(Errno::from_raw) {
            Some(Errno::ENOENT | Errno::EPERM) => {
                Refusal::Bad(format!("hard link {name:?} -> {:?} is not to a file unpacked before", to.display()))
            }
            _ => self.refusal(name, path, e),
        })
    }
}

fn untar(reader: impl Read, out: &mut Out) -> Result<u64, Refusal> {
    let mut archive = tar::Archive::new(reader);
    let entries = archive.entries().map_err(|e| Refusal::Bad(e.to_string()))?;
    let mut total = 0;
    for entry in entries {
        let mut entry = entry.map_err(|e| Refusal::Bad(format!("corrupt or truncated: {e}")))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        let Some(path) = relative(&name)? else {
            if kind.is_dir() {
                continue;
            }
            return Err(Refusal::Bad(format!("entry {name:?} has no name")));
        };
        if kind.is_dir() {
            out.dir(&name, &path)?;
        } else if kind.is_file() {
            total += out.file(&name, &path, &mut entry)?;
        } else if kind.is_symlink() || kind.is_hard_link() {
            let to = entry.link_name().ok().flatten().map(|p| p.into_owned()).unwrap_or_default();
            if kind.is_symlink() {
                out.symlink(&name, &path, &to)?;
            } else {
                out.hard_link(&name, &path, &to)?;
            }
        } else {
            return Err(Refusal::Bad(format!("entry {name:?} is neither a file, a folder nor a link")));
        }
    }
    Ok(total)
}

fn unzip(file: File, out: &mut Out) -> Result<u64, Refusal> {
    let mut archive = zip::ZipArchive::new(file).map_err(|e| Refusal::Bad(format!("corrupt or truncated: {e}")))?;
    let mut total = 0;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|e| Refusal::Bad(format!("corrupt or truncated: {e}")))?;
        let name = entry.name().map_err(|e| Refusal::Bad(format!("an entry's name: {e}")))?.into_owned();
        if entry.is_symlink() {
            return Err(Refusal::Bad(format!("entry {name:?} is a link (zip archives are unpacked without links)")));
        }
        let Some(path) = relative(&name)? else { continue };
        if entry.is_dir() {
            out.dir(&name, &path)?;
        } else {
            total += out.file(&name, &path, &mut entry)?;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests;
