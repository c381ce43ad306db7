//! The cached form of a model (issue 37): the graph ONNX Runtime optimized, saved in ORT format
//! the first time the server loads the model, and loaded on later cold starts with the session
//! options that use its bytes in place (`session.use_ort_model_bytes_directly` and
//! `session.use_ort_model_bytes_for_initializers`: no protobuf parse, no copy of the weights, no
//! graph optimization again).
//!
//! - **Where**: one folder (`--ort-cache-dir`, `SKIFF_ORT_CACHE_DIR`; `skiff up` gives
//!   `<model cache>/ort`), two files per entry: `<name>.ort` (ONNX Runtime's own file) and
//!   `<name>.json` ([`Meta`]), written last: the entry exists only once its meta does.
//! - **Keyed** by the model file (its canonical path, device, inode, size and modification time:
//!   a `stat`, no read) and by what makes the optimized graph valid: ONNX Runtime's version and
//!   build, the optimization level, the execution provider and the machine's architecture
//!   ([`Key`]). All of it is in the name, so a changed runtime looks for another name and never
//!   reads a stale entry; the meta repeats it and is compared too.
//! - **Never half-written**: both files are written under a temporary name, flushed to the disk
//!   (`fsync`) and renamed into place, then the folder is flushed. A reader checks the meta's
//!   length and CRC-32 of the ORT bytes before ONNX Runtime sees them; a mismatch, or an ORT
//!   file ONNX Runtime refuses, removes the entry, and the model loads from its ONNX file and
//!   the entry is written again.
//! - **Off the critical path**: a miss loads the ONNX file as before; the entry is written after
//!   the server is ready, by one more session built in the background (ONNX Runtime writes the
//!   optimized graph while it builds a session with `optimized_model_filepath`).

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The optimization level sessions are built at (the name in keys and meta).
pub const LEVEL: &str = "layout";
/// The execution provider sessions run on.
pub const PROVIDER: &str = "cpu";
/// The meta's format; another value is a miss.
const FORMAT: u32 = 1;

/// What makes an optimized graph valid besides the model: the runtime and how it optimizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// ONNX Runtime's version (from the library's file name) and build (its git commit).
    pub runtime: String,
    /// Graph optimization level.
    pub level: String,
    /// Execution provider.
    pub provider: String,
    /// The machine's architecture (layout optimizations are hardware-specific).
    pub arch: String,
}

impl Key {
    /// The key of this process's runtime: `runtime` as [`runtime_label`] gives it.
    pub fn current(runtime: &str) -> Key {
        Key {
            runtime: runtime.to_owned(),
            level: LEVEL.into(),
            provider: PROVIDER.into(),
            arch: std::env::consts::ARCH.into(),
        }
    }

    fn label(&self) -> String {
        let clean = |s: &str| {
            s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).collect::<String>()
        };
        format!("ort{}-{}-{}-{}", clean(&self.runtime), clean(&self.level), clean(&self.provider), clean(&self.arch))
    }
}

/// ONNX Runtime's identity for keys: the version in the library's file name
/// (`libonnxruntime.so.1.31.1`) and the git commit in its build information.
pub fn runtime_label(dylib: &Path, build_info: &str) -> String {
    let name = dylib.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let version = name.strip_prefix("libonnxruntime.so.").filter(|v| !v.is_empty()).unwrap_or("unversioned");
    let commit = build_info.split(',').find_map(|part| part.trim().strip_prefix("git-commit-id=")).unwrap_or("unknown");
    format!("{version}+{commit}")
}

/// The model file as a `stat` shows it: what changes when the file is replaced or rewritten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Canonical path.
    pub path: PathBuf,
    /// Device and inode.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
}

impl Source {
    /// Stats `path` (following symlinks).
    pub fn of(path: &Path) -> std::io::Result<Source> {
        let path = path.canonicalize()?;
        let m = fs::metadata(&path)?;
        Ok(Source {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            path,
        })
    }

    /// A short stable digest of the whole identity (FNV-1a, 64 bits).
    fn digest(&self) -> String {
        let text = format!("{}\0{}\0{}\0{}\0{}", self.path.display(), self.dev, self.ino, self.len, self.mtime_ns);
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in text.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{hash:016x}")
    }
}

/// What an entry's `.json` records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// [`FORMAT`].
    pub format: u32,
    /// The runtime and options the graph was optimized for.
    pub key: Key,
    /// The model file it was built from.
    pub source: Source,
    /// Bytes of the `.ort` file.
    pub len: u64,
    /// CRC-32 of the `.ort` file.
    pub crc32: u32,
    /// Milliseconds the build took.
    pub build_ms: u64,
}

/// Why an entry was not used.
#[derive(Debug, PartialEq, Eq)]
pub enum Miss {
    /// None exists for this model and key.
    Absent,
    /// One exists but is not whole or not this one (the reason); it was removed.
    Invalid(String),
}

/// The folder of cached forms, for one runtime.
#[derive(Debug, Clone)]
pub struct CompiledCache {
    dir: PathBuf,
    key: Key,
}

/// An entry being written: its ORT file goes to `tmp_ort` first.
#[derive(Debug)]
pub struct Pending {
    model: PathBuf,
    source: Source,
    /// Where the ORT file is to be written.
    pub tmp_ort: PathBuf,
    started: Instant,
}

/// An entry read and checked: its ORT bytes, to build sessions from.
pub struct Entry {
    /// The ORT format model.
    pub bytes: Box<[u8]>,
    /// Where it was read from (for logs, and to remove it if ONNX Runtime refuses it).
    pub path: PathBuf,
}

impl CompiledCache {
    /// Cached forms under `dir` (created when the first is written) for `key`.
    pub fn new(dir: PathBuf, key: Key) -> CompiledCache {
        CompiledCache { dir, key }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry's two paths (`.ort`, `.json`) for the model `source`.
    fn paths(&self, source: &Source) -> (PathBuf, PathBuf) {
        let stem = format!("{}.{}", source.digest(), self.key.label());
        (self.dir.join(format!("{stem}.ort")), self.dir.join(format!("{stem}.json")))
    }

    /// Reads and checks the entry for the model at `model`: `Err(Miss::Absent)` when there is none,
    /// `Err(Miss::Invalid)` (the entry removed) when its meta, length or checksum does not match.
    pub fn read(&self, model: &Path) -> Result<Entry, Miss> {
        let source = Source::of(model).map_err(|e| Miss::Invalid(format!("cannot stat the model: {e}")))?;
        let (ort, json) = self.paths(&source);
        let meta = match fs::read(&json) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Miss::Absent),
            Err(e) => return Err(self.invalid(&ort, &json, format!("cannot read {}: {e}", json.display()))),
        };
        let meta: Meta = serde_json::from_slice(&meta)
            .map_err(|e| self.invalid(&ort, &json, format!("{} does not parse: {e}", json.display())))?;
        if meta.format != FORMAT || meta.key != self.key || meta.source != source {
            return Err(self.invalid(&ort, &json, format!("{} is for another model or runtime", json.display())));
        }
        let bytes = read_checked(&ort, meta.len, meta.crc32).map_err(|reason| self.invalid(&ort, &json, reason))?;
        Ok(Entry { bytes, path: ort })
    }

    fn invalid(&self, ort: &Path, json: &Path, reason: String) -> Miss {
        remove_entry(ort, json);
        Miss::Invalid(reason)
    }

    /// Removes the entry at `ort` (after ONNX Runtime refused it).
    pub fn discard(&self, ort: &Path) {
        remove_entry(ort, &ort.with_extension("json"));
    }

    /// Writes the entry for the model at `model`: `build` must build a session that saves its
    /// optimized graph in ORT format to the path it is given (and drop it). Temporary names,
    /// `fsync` and renames: a reader sees the whole entry or none. Entries of this folder whose
    /// model is gone or changed, or that are for another runtime, are removed.
    pub fn write(&self, model: &Path, build: impl FnOnce(&Path) -> Result<(), String>) -> Result<Meta, String> {
        let pending = self.begin(model)?;
        match build(&pending.tmp_ort) {
            Ok(()) => self.finish(pending),
            Err(e) => {
                let _ = fs::remove_file(&pending.tmp_ort);
                Err(e)
            }
        }
    }

    /// Starts an entry for the model at `model`: the folder exists, and the ORT file is to be
    /// written at the returned [`Pending::tmp_ort`] (by a session built with
    /// `optimized_model_filepath`), then [`CompiledCache::finish`]ed.
    pub fn begin(&self, model: &Path) -> Result<Pending, String> {
        let source = Source::of(model).map_err(|e| format!("cannot stat the model: {e}"))?;
        fs::create_dir_all(&self.dir).map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let tmp_ort = self.dir.join(format!(".tmp-{}-{}.ort", std::process::id(), source.digest()));
        Ok(Pending { model: model.to_path_buf(), source, tmp_ort, started: Instant::now() })
    }

    /// Flushes the ORT file `pending` names, checksums it, writes its meta and renames both into
    /// place (the ORT file first, the meta last); on failure nothing is left.
    pub fn finish(&self, pending: Pending) -> Result<Meta, String> {
        let (ort, json) = self.paths(&pending.source);
        let tmp_json = pending.tmp_ort.with_extension("json");
        let result = (|| {
            let (len, crc32) = sync_and_checksum(&pending.tmp_ort)?;
            let meta = Meta {
                format: FORMAT,
                key: self.key.clone(),
                source: Source::of(&pending.model).map_err(|e| format!("cannot stat the model: {e}"))?,
                len,
                crc32,
                build_ms: pending.started.elapsed().as_millis() as u64,
            };
            if meta.source != pending.source {
                return Err("the model changed while its cached form was built".to_owned());
            }
            let text = serde_json::to_vec_pretty(&meta).map_err(|e| e.to_string())?;
            write_synced(&tmp_json, &text)?;
            fs::rename(&pending.tmp_ort, &ort).map_err(|e| format!("cannot rename into {}: {e}", ort.display()))?;
            fs::rename(&tmp_json, &json).map_err(|e| format!("cannot rename into {}: {e}", json.display()))?;
            sync_dir(&self.dir)?;
            Ok(meta)
        })();
        let _ = fs::remove_file(&pending.tmp_ort);
        let _ = fs::remove_file(&tmp_json);
        if result.is_ok() {
            self.collect(&json);
        }
        result
    }

    /// Removes the entries other than `keep` whose model is gone or changed or whose key is not
    /// this runtime's, and temporary files of processes that are gone.
    fn collect(&self, keep: &Path) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if let Some(rest) = name.strip_prefix(".tmp-") {
                let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
                if pid.is_some_and(|pid| pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()) {
                    let _ = fs::remove_file(&path);
                }
                continue;
            }
            if path == keep || path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let stale = match fs::read(&path).ok().and_then(|t| serde_json::from_slice::<Meta>(&t).ok()) {
                Some(meta) => meta.key != self.key || Source::of(&meta.source.path).ok().as_ref() != Some(&meta.source),
                None => true,
            };
            if stale {
                remove_entry(&path.with_extension("ort"), &path);
            }
        }
    }
}

fn remove_entry(ort: &Path, json: &Path) {
    // The meta first: without it the ORT file is never read.
    let _ = fs::remove_file(json);
    let _ = fs::remove_file(ort);
}

/// Reads `path` whole, checking its length and CRC-32 as it reads.
fn read_checked(path: &Path, len: u64, crc32: u32) -> Result<Box<[u8]>, String> {
    let mut file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let actual = file.metadata().map_err(|e| e.to_string())?.len();
    if actual != len {
        return Err(format!("{} has {actual} bytes, its meta says {len}", path.display()));
    }
    let size = usize::try_from(len).map_err(|e| e.to_string())?;
    let mut bytes = vec![0u8; size].into_boxed_slice();
    let mut hasher = crc32fast::Hasher::new();
    const CHUNK: usize = 8 << 20;
    for chunk in bytes.chunks_mut(CHUNK) {
        file.read_exact(chunk).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        hasher.update(chunk);
    }
    let sum = hasher.finalize();
    if sum != crc32 {
        return Err(format!("{}'s CRC-32 is {sum:08x}, its meta says {crc32:08x}", path.display()));
    }
    Ok(bytes)
}

/// Flushes `path` to the disk and returns its length and CRC-32.
fn sync_and_checksum(path: &Path) -> Result<(u64, u32), String> {
    let mut file = File::open(path).map_err(|e| format!("the runtime wrote no {}: {e}", path.display()))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buffer = vec![0u8; 8 << 20];
    let mut len = 0u64;
    loop {
        let n = file.read(&mut buffer).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        len += n as u64;
    }
    file.sync_all().map_err(|e| format!("cannot flush {}: {e}", path.display()))?;
    Ok((len, hasher.finalize()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| format!("cannot flush {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path, runtime: &str) -> CompiledCache {
        CompiledCache::new(dir.to_path_buf(), Key::current(runtime))
    }

    fn fake_build(bytes: &'static [u8]) -> impl FnOnce(&Path) -> Result<(), String> {
        move |path: &Path| fs::write(path, bytes).map_err(|e| e.to_string())
    }

    #[test]
    fn the_runtime_label_has_the_version_and_the_commit() {
        let info = "ORT Build Info: git-branch=HEAD, git-commit-id=6af1a93, build type=Release";
        assert_eq!(runtime_label(Path::new("/x/libonnxruntime.so.1.31.1"), info), "1.31.1+6af1a93");
        assert_eq!(runtime_label(Path::new("/x/libonnxruntime.so"), "?"), "unversioned+unknown");
    }

    #[test]
    fn written_once_read_back_and_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model.onnx");
        fs::write(&model, b"onnx").unwrap();
        let c = cache(&tmp.path().join("ort"), "1.31.1+a");
        assert_eq!(c.read(&model).err(), Some(Miss::Absent));
        let meta = c.write(&model, fake_build(b"ORT bytes")).unwrap();
        assert_eq!(meta.len, 9);
        let entry = c.read(&model).unwrap();
        assert_eq!(&*entry.bytes, b"ORT bytes");
        // Only the entry's two files remain: no temporary ones.
        let mut names: Vec<_> = fs::read_dir(c.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn another_runtime_or_a_changed_model_misses() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model.onnx");
        fs::write(&model, b"onnx").unwrap();
        let old = cache(&tmp.path().join("ort"), "1.30.0+a");
        old.write(&model, fake_build(b"old")).unwrap();
        let new = cache(&tmp.path().join("ort"), "1.31.1+b");
        assert_eq!(new.read(&model).err(), Some(Miss::Absent), "another runtime looks under another name");
        new.write(&model, fake_build(b"new")).unwrap();
        assert_eq!(fs::read_dir(new.dir()).unwrap().count(), 2, "the other runtime's entry was collected");
        assert_eq!(&*new.read(&model).unwrap().bytes, b"new");

        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(&model, b"another model").unwrap();
        assert_eq!(new.read(&model).err(), Some(Miss::Absent), "a rewritten model is another entry");
    }

    #[test]
    fn a_corrupt_truncated_or_foreign_entry_is_removed_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model.onnx");
        fs::write(&model, b"onnx").unwrap();
        let c = cache(&tmp.path().join("ort"), "1.31.1+a");
        let ort_of = || {
            fs::read_dir(c.dir())
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.extension().is_some_and(|e| e == "ort"))
                .unwrap()
        };

        c.write(&model, fake_build(b"ORT bytes")).unwrap();
        fs::write(ort_of(), b"ORT bytez").unwrap();
        assert!(matches!(c.read(&model), Err(Miss::Invalid(r)) if r.contains("CRC-32")));
        assert_eq!(fs::read_dir(c.dir()).unwrap().count(), 0, "the corrupt entry is gone");
        assert_eq!(c.read(&model).err(), Some(Miss::Absent));

        c.write(&model, fake_build(b"ORT bytes")).unwrap();
        fs::write(ort_of(), b"ORT").unwrap();
        assert!(matches!(c.read(&model), Err(Miss::Invalid(r)) if r.contains("has 3 bytes")));

        c.write(&model, fake_build(b"ORT bytes")).unwrap();
        let json = ort_of().with_extension("json");
        fs::write(&json, b"{\"format\": 1,").unwrap();
        assert!(matches!(c.read(&model), Err(Miss::Invalid(r)) if r.contains("does not parse")));
    }

    #[test]
    fn a_half_written_entry_is_never_read() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model.onnx");
        fs::write(&model, b"onnx").unwrap();
        let c = cache(&tmp.path().join("ort"), "1.31.1+a");
        // A build that fails midway (the process killed, the disk full) leaves nothing behind.
        let failed = c.write(&model, |path| {
            fs::write(path, b"ORT by").unwrap();
            Err("killed".into())
        });
        assert_eq!(failed.unwrap_err(), "killed");
        assert_eq!(c.read(&model).err(), Some(Miss::Absent));
        assert_eq!(fs::read_dir(c.dir()).unwrap().count(), 0);
        // An ORT file renamed into place without its meta (a crash between the renames) is not read.
        c.write(&model, fake_build(b"ORT bytes")).unwrap();
        let json = fs::read_dir(c.dir())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "json"))
            .unwrap();
        fs::remove_file(&json).unwrap();
        assert_eq!(c.read(&model).err(), Some(Miss::Absent));
    }
}
