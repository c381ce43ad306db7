//! Per-container sandbox, both halves:
//! - the agent side prepares a pod's volumes (directories and generated files) and the mount
//!   points on the host;
//! - the `sandbox-exec` helper runs inside the pod's network namespace (started through
//!   `ip netns exec`, which already gives it a private mount namespace), takes its own mount and
//!   UTS namespaces, bind-mounts the container's volumes, sets the hostname and executes the
//!   container's program. It runs before any thread exists, which `unshare` needs.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use clap::Args;
use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::stat::Mode;

use crate::error::{Error, Result};
use crate::volumes::{Bind, VolumePlan};

/// Arguments of `skiff-node-agent sandbox-exec`.
#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    /// Bind mount SOURCE TARGET (read-write); repeatable.
    #[arg(long = "bind", num_args = 2, value_names = ["SOURCE", "TARGET"])]
    pub bind: Vec<String>,
    /// Bind mount SOURCE TARGET read-only; repeatable.
    #[arg(long = "ro-bind", num_args = 2, value_names = ["SOURCE", "TARGET"])]
    pub ro_bind: Vec<String>,
    /// Hostname inside the container.
    #[arg(long)]
    pub hostname: Option<String>,
    /// Working directory (created if missing).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Program and arguments.
    #[arg(last = true, required = true)]
    pub argv: Vec<String>,
}

impl ExecArgs {
    /// Builds the helper's arguments (after `sandbox-exec`).
    pub fn to_args(binds: &[Bind], hostname: Option<&str>, workdir: Option<&Path>, argv: &[String]) -> Vec<String> {
        let mut out = vec!["sandbox-exec".to_string()];
        for b in binds {
            out.push(if b.read_only { "--ro-bind" } else { "--bind" }.to_string());
            out.push(b.source.to_string_lossy().into_owned());
            out.push(b.target.to_string_lossy().into_owned());
        }
        if let Some(h) = hostname {
            out.push("--hostname".into());
            out.push(h.to_string());
        }
        if let Some(w) = workdir {
            out.push("--workdir".into());
            out.push(w.to_string_lossy().into_owned());
        }
        out.push("--".into());
        out.extend(argv.iter().cloned());
        out
    }

    /// The binds, outermost targets first so nested mounts land on top.
    pub fn binds(&self) -> Vec<Bind> {
        let pairs = |v: &[String], read_only| {
            v.chunks(2)
                .filter(|c| c.len() == 2)
                .map(|c| Bind { source: PathBuf::from(&c[0]), target: PathBuf::from(&c[1]), read_only })
                .collect::<Vec<_>>()
        };
        let mut all = pairs(&self.bind, false);
        all.extend(pairs(&self.ro_bind, true));
        all.sort_by_key(|b| b.target.components().count());
        all
    }
}

/// Runs the helper: namespaces, mounts, hostname, working directory, then `exec`. Returns only
/// on failure (the caller prints the error and exits 127).
pub fn exec(args: &ExecArgs) -> Error {
    match prepare(args) {
        Ok(()) => {
            let err = std::process::Command::new(&args.argv[0]).args(&args.argv[1..]).exec();
            Error::io(format!("exec {:?}", args.argv[0]), err)
        }
        Err(e) => e,
    }
}

fn prepare(args: &ExecArgs) -> Result<()> {
    unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWUTS).map_err(|e| Error::sys("unshare", e))?;
    // Mounts made here must not propagate back to the host.
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_SLAVE, None::<&str>)
        .map_err(|e| Error::sys("making / a slave mount", e))?;
    let binds = args.binds();
    // Every source is opened before the first mount, as a kubelet resolves them all on the host: a
    // mount on `/tmp` (say) must not hide a source under `/tmp` from the mounts after it.
    let sources: Vec<OwnedFd> = binds.iter().map(|b| open_source(&b.source)).collect::<Result<_>>()?;
    // The image's own files (here: host paths) are the container's root filesystem, under its
    // volumes, so a volume (an emptyDir at /tmp, say) must not hide them when the checkout lives
    // there: they are opened first and bound back after the volumes.
    let image: Vec<(PathBuf, OwnedFd)> = image_paths(&args.argv[0])
        .into_iter()
        .filter(|path| binds.iter().any(|b| path.starts_with(&b.target) && *path != b.target))
        .map(|path| open_source(&path).map(|fd| (path, fd)))
        .collect::<Result<_>>()?;
    for (b, source) in binds.iter().zip(&sources) {
        let source = PathBuf::from(format!("/proc/self/fd/{}", source.as_raw_fd()));
        ensure_mount_point(&source, &b.target, &mut Vec::new())?;
        let what = || format!("bind mount {} on {}", b.source.display(), b.target.display());
        mount(Some(&source), &b.target, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
            .map_err(|e| Error::sys(what(), e))?;
        if b.read_only {
            let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
            mount(None::<&str>, &b.target, None::<&str>, flags, None::<&str>).map_err(|e| Error::sys(what(), e))?;
        }
    }
    for (path, fd) in &image {
        let source = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        ensure_mount_point(&source, path, &mut Vec::new())?;
        mount(Some(&source), path, None::<&str>, MsFlags::MS_BIND, None::<&str>)
            .map_err(|e| Error::sys(format!("binding the image's {} back", path.display()), e))?;
    }
    if let Some(h) = &args.hostname {
        nix::unistd::sethostname(h).map_err(|e| Error::sys("sethostname", e))?;
    }
    if let Some(w) = &args.workdir {
        std::fs::create_dir_all(w).map_err(|e| Error::io(format!("creating workdir {}", w.display()), e))?;
        std::env::set_current_dir(w).map_err(|e| Error::io(format!("chdir {}", w.display()), e))?;
    }
    Ok(())
}

/// What stands for the image's files: the program, and every environment value that names an
/// existing file by its absolute path (the ONNX Runtime library in `ORT_DYLIB_PATH`).
fn image_paths(program: &str) -> Vec<PathBuf> {
    std::iter::once(program.to_owned())
        .chain(std::env::vars().map(|(_, value)| value))
        .map(PathBuf::from)
        .filter(|path| path.is_absolute() && path.is_file())
        .collect()
}

/// A handle on a bind's source that later mounts cannot hide (`O_PATH`: no access to its content).
fn open_source(source: &Path) -> Result<OwnedFd> {
    open(source, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| Error::sys(format!("bind mount source {}", source.display()), e))
}

/// Makes sure `target` exists (a directory, or an empty file when `source` is not a directory).
/// Every path it creates is appended to `created`, parents first.
pub fn ensure_mount_point(source: &Path, target: &Path, created: &mut Vec<PathBuf>) -> Result<()> {
    if target.symlink_metadata().is_ok() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut p = target.parent();
    while let Some(dir) = p {
        if dir.symlink_metadata().is_ok() {
            break;
        }
        missing.push(dir.to_path_buf());
        p = dir.parent();
    }
    for dir in missing.into_iter().rev() {
        std::fs::create_dir(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        created.push(dir);
    }
    let ctx = || format!("creating mount point {}", target.display());
    if source.is_dir() {
        std::fs::create_dir(target).map_err(|e| Error::io(ctx(), e))?;
    } else {
        std::fs::File::create(target).map_err(|e| Error::io(ctx(), e))?;
    }
    created.push(target.to_path_buf());
    Ok(())
}

/// Removes mount points the agent created, deepest first; only empty directories and empty
/// files go.
pub fn remove_mount_points(created: &[PathBuf]) {
    let mut paths = created.to_vec();
    paths.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    paths.dedup();
    for p in paths {
        match p.symlink_metadata() {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir(&p);
            }
            Ok(m) if m.is_file() && m.len() == 0 => {
                let _ = std::fs::remove_file(&p);
            }
            _ => {}
        }
    }
}

/// Creates what a volume needs on the host: emptyDir directories, generated files, and
/// hostPath directories or files for the `...OrCreate` types (checking the other types).
pub fn materialize(plan: &VolumePlan) -> Result<()> {
    match plan {
        VolumePlan::EmptyDir { dir } => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))
        }
        VolumePlan::Files { dir, files } => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
            for f in files {
                let path = dir.join(&f.path);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
                }
                std::fs::write(&path, &f.data).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(f.mode & 0o7777))
                    .map_err(|e| Error::io(format!("chmod {}", path.display()), e))?;
            }
            Ok(())
        }
        VolumePlan::HostPath { path, kind } => {
            let meta = path.metadata();
            let fail = |what: &str| Err(Error::Unsupported(format!("hostPath {}: {what}", path.display())));
            match kind.as_str() {
                "DirectoryOrCreate" => {
                    std::fs::create_dir_all(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))
                }
                "FileOrCreate" => {
                    if meta.is_err() {
                        if let Some(parent) = path.parent() {
                            std::fs::create_dir_all(parent)
                                .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
                        }
                        std::fs::File::create(path)
                            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
                    }
                    Ok(())
                }
                "Directory" if !meta.as_ref().is_ok_and(|m| m.is_dir()) => fail("is not a directory"),
                "File" if !meta.as_ref().is_ok_and(|m| m.is_file()) => fail("is not a file"),
                "Socket" | "CharDevice" | "BlockDevice" if meta.is_err() => fail("does not exist"),
                _ if meta.is_err() && kind.is_empty() => {
                    // Type unset: the kubelet mounts whatever is there; a missing path makes the
                    // bind mount fail, so create a directory as a convenience.
                    std::fs::create_dir_all(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))
                }
                _ => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_args_round_trip() {
        let binds = vec![
            Bind { source: "/h/a".into(), target: "/x/y/z".into(), read_only: true },
            Bind { source: "/h/b".into(), target: "/x".into(), read_only: false },
        ];
        let args = ExecArgs::to_args(&binds, Some("pod-1"), Some(Path::new("/w")), &["prog".into(), "--flag".into()]);
        let cli =
            <crate::config::Cli as clap::Parser>::try_parse_from(std::iter::once("agent".to_string()).chain(args))
                .unwrap();
        let Some(crate::config::Command::SandboxExec(parsed)) = cli.command else { panic!() };
        assert_eq!(parsed.argv, vec!["prog".to_string(), "--flag".to_string()]);
        assert_eq!(parsed.hostname.as_deref(), Some("pod-1"));
        let sorted = parsed.binds();
        assert_eq!(sorted[0].target, PathBuf::from("/x"), "outer mount first");
        assert!(sorted[1].read_only);
    }

    #[test]
    fn mount_points_are_created_and_removed() {
        let tmp = std::env::temp_dir().join(format!("skiff-na-test-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let src_dir = tmp.join("src");
        std::fs::create_dir_all(&src_dir).unwrap();
        let mut created = Vec::new();
        let target = tmp.join("a/b/c");
        ensure_mount_point(&src_dir, &target, &mut created).unwrap();
        assert!(target.is_dir());
        assert_eq!(created.len(), 3);
        let file_target = tmp.join("f/token");
        ensure_mount_point(&tmp.join("missing-file"), &file_target, &mut created).unwrap();
        assert!(file_target.is_file());
        remove_mount_points(&created);
        assert!(!tmp.join("a").exists() && !tmp.join("f").exists());
        let files = VolumePlan::Files {
            dir: tmp.join("vol"),
            files: vec![crate::volumes::FileItem { path: "d/x".into(), data: b"hi".to_vec(), mode: 0o600 }],
        };
        materialize(&files).unwrap();
        let meta = std::fs::metadata(tmp.join("vol/d/x")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
