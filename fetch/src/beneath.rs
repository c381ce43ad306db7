//! Paths resolved beneath a folder opened once, never through a link. Every part of a path is
//! opened with Linux's `openat2` under `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (no `..` above the
//! folder, no absolute path, no symbolic link, magic ones included, anywhere on the way), and the
//! last part with `O_NOFOLLOW`, so no name and no chain of links can reach outside the folder.
//! The archive unpacker writes every entry through it, and the node cache opens every file it
//! serves through it.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::{Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, linkat, symlinkat, unlinkat};

/// How every part of a path is resolved: beneath the folder, never through a link.
const CONFINED: ResolveFlag =
    ResolveFlag::RESOLVE_BENEATH.union(ResolveFlag::RESOLVE_NO_SYMLINKS).union(ResolveFlag::RESOLVE_NO_MAGICLINKS);

/// A folder, opened once; every path given to it is relative to it.
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
}

/// The folder and last part of a relative path, or `EINVAL` when it has another kind of part.
fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(Errno::EINVAL.into());
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(Errno::EINVAL.into()),
    }
}

fn at(dir: impl AsFd, path: &Path, flags: OFlag, mode: Mode, resolve: ResolveFlag) -> io::Result<OwnedFd> {
    let how = OpenHow::new().flags(flags | OFlag::O_CLOEXEC).mode(mode).resolve(resolve);
    Ok(openat2(dir, path, how)?)
}

/// Whether `name` in `dir` is a symbolic link.
fn is_link(dir: impl AsFd, name: &OsStr) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

/// Whether the file behind `fd` is a regular file.
fn regular(fd: impl AsFd) -> io::Result<bool> {
    Ok(SFlag::from_bits_truncate(fstat(fd)?.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG)
}

impl Beneath {
    /// The folder `dir`, which must not itself be a link.
    pub fn open(dir: &Path) -> io::Result<Beneath> {
        let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW;
        Ok(Beneath { root: at(nix::fcntl::AT_FDCWD, dir, flags, Mode::empty(), ResolveFlag::empty())? })
    }

    /// The folder `path`, which exists; an empty path is the folder itself.
    fn dir(&self, path: &Path) -> io::Result<OwnedFd> {
        if path.as_os_str().is_empty() {
            return self.root.try_clone();
        }
        let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW;
        at(&self.root, path, flags, Mode::empty(), CONFINED)
    }

    /// The folder `path`, created with its parents where missing; an empty path is the folder
    /// itself. `ELOOP` when a part is a link, `ENOTDIR` when it is a file.
    pub fn create_dir_all(&self, path: &Path) -> io::Result<OwnedFd> {
        let mut dir = self.root.try_clone()?;
        for part in path.components() {
            let Component::Normal(name) = part else { return Err(Errno::EINVAL.into()) };
            match mkdirat(&dir, name, Mode::from_bits_truncate(0o755)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(errno) => return Err(errno.into()),
            }
            let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW;
            dir = match at(&dir, Path::new(name), flags, Mode::empty(), CONFINED) {
                Ok(next) => next,
                // `O_DIRECTORY` tells a link as not a folder: say it is a link.
                Err(_) if is_link(&dir, name) => return Err(Errno::ELOOP.into()),
                Err(error) => return Err(error),
            };
        }
        Ok(dir)
    }

    /// Creates the regular file `path` (emptied if it is one already), its folders with it.
    /// `ELOOP` when `path` or a folder on the way is a link.
    pub fn create_file(&self, path: &Path) -> io::Result<File> {
        let (parent, name) = split(path)?;
        let dir = self.create_dir_all(parent)?;
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC | OFlag::O_NOFOLLOW;
        Ok(File::from(at(dir, Path::new(name), flags, Mode::from_bits_truncate(0o644), CONFINED)?))
    }

    /// Makes `path` a symbolic link to `to` (what it points to is not looked at here: see
    /// [`Beneath::resolves_inside`]), replacing a file or link of that name.
    pub fn symlink(&self, path: &Path, to: &Path) -> io::Result<()> {
        let (parent, name) = split(path)?;
        let dir = self.create_dir_all(parent)?;
        replacing(&dir, name, || symlinkat(to, &dir, name))
    }

    /// Makes `path` a hard link to the regular file `to` (both relative to the folder),
    /// replacing a file or link of that name. `EPERM` when `to` is not a regular file.
    pub fn hard_link(&self, path: &Path, to: &Path) -> io::Result<()> {
        let (from_parent, from_name) = split(to)?;
        let from = self.dir(from_parent)?;
        let kind = fstatat(&from, from_name, AtFlags::AT_SYMLINK_NOFOLLOW)?.st_mode;
        if SFlag::from_bits_truncate(kind) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(Errno::EPERM.into());
        }
        let (parent, name) = split(path)?;
        let dir = self.create_dir_all(parent)?;
        replacing(&dir, name, || linkat(&from, from_name, &dir, name, AtFlags::empty()))
    }

    /// Opens the regular file `path` to read it; `ELOOP` when it or a folder on the way is a
    /// link, `EINVAL` when it is not a regular file.
    pub fn open_file(&self, path: &Path) -> io::Result<File> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
        let fd = at(&self.root, path, flags, Mode::empty(), CONFINED)?;
        if !regular(&fd)? {
            return Err(Errno::EINVAL.into());
        }
        Ok(File::from(fd))
    }

    /// Whether following `path` and the links it meets the way the system does stays beneath
    /// the folder: an error (`EXDEV` leaving it, `ELOOP` a loop) when it does not. A link to
    /// nothing yet (`ENOENT`) stays.
    pub fn resolves_inside(&self, path: &Path) -> io::Result<()> {
        let resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS;
        match at(&self.root, path, OFlag::O_PATH, Mode::empty(), resolve) {
            Ok(_) => Ok(()),
            Err(error) if error.raw_os_error() == Some(Errno::ENOENT as i32) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// Runs `make`; when `name` is taken by something other than a folder, removes it (the name
/// only: a link is never followed) and runs `make` again, as tar does.
fn replacing(dir: &OwnedFd, name: &OsStr, make: impl Fn() -> nix::Result<()>) -> io::Result<()> {
    match make() {
        Err(Errno::EEXIST) => {
            unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?;
            Ok(make()?)
        }
        other => Ok(other?),
    }
}
