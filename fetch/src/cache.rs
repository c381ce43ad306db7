//! The node-local model cache: one folder per model version, shared by every replica on the
//! machine.
//!
//! Layout under the root: `models/<key>/` (the model), `models/<key>.json` ([`Meta`]),
//! `models/<key>.lease` (readers hold it shared; its modification time is the last use),
//! `locks/<key>.lock` (held by the one download of that key), `tmp/` (downloads in progress).
//!
//! - **Keys** hash the whole URI, its query included ([`uri::identity`]: less a presigned URL's
//!   signature), with every object's path, size and version, so another query or a changed model
//!   is a new entry; only the digest is kept (a query may hold a secret). A store that gives no
//!   version is never served from the cache.
//! - **Single flight**: a download holds its key's lock (`flock`, so across processes too); a
//!   second replica waits for it and then reads the entry.
//! - **Atomic**: a download lands in `tmp/` and is renamed into `models/`; a folder in `models/`
//!   is always whole. Its files are flushed to the disk in the background once it serves (the
//!   replica need not wait for the disk); an entry of an earlier boot that was never known
//!   flushed is fetched again rather than trusted.
//! - **Checked**: each time an entry is taken, its files' sizes, inodes and change times are
//!   compared with those recorded when it was written (a `stat` per file, no read). A file
//!   changed on the disk (truncated, rewritten, replaced, removed) changes its ctime, which no
//!   caller can set back: the entry is fetched again, or refused while a replica still holds it.
//!   Files added beside them (a runtime's caches) do not count. The bytes are not hashed again:
//!   that would read the whole model at every start.
//! - **Bounded**: a model larger than the limit is refused, and so is an archive whose content
//!   unpacks past it (counted as it is unpacked, not from the archive's size); after a download,
//!   least recently used entries are evicted until the cache is within its limit; an entry with a
//!   lease held is never evicted.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::fcntl::{Flock, FlockArg};
use ring::digest;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fetcher::{Fetcher, Report};
use crate::remote::Object;
use crate::uri::{self, ToStore};

/// The default bound on the cache: 50 GiB.
pub const DEFAULT_LIMIT: u64 = 50 << 30;

/// How often a wait for a lock looks again.
const POLL: Duration = Duration::from_millis(50);

/// What the cache records of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The URI, as it may be shown.
    pub uri: String,
    /// The store's version of the model (a digest of its objects' versions).
    pub version: String,
    /// Bytes on disk.
    pub bytes: u64,
    /// Objects the store held.
    pub objects: usize,
    /// When it was downloaded (Unix seconds).
    pub fetched_at: u64,
    /// The boot it was downloaded in (`/proc/sys/kernel/random/boot_id`).
    #[serde(default)]
    pub boot: String,
    /// Whether its files have reached the disk (flushed after it was first served).
    #[serde(default)]
    pub durable: bool,
    /// Its files' sizes, inodes and change times by path ([`stamps`]), checked each time the
    /// entry is taken; `None` for entries of earlier releases (trusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<BTreeMap<String, String>>,
}

impl Meta {
    /// Whether the entry may be torn: written in an earlier boot and never known flushed (a crash
    /// of the machine can leave such files short or zero-filled).
    fn suspect(&self, boot: &str) -> bool {
        !self.durable && self.boot != boot
    }
}

/// This boot's id; empty where the kernel does not say.
fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|id| id.trim().to_owned()).unwrap_or_default()
}

/// An entry as [`Cache::entries`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its key (the folder's name).
    pub key: String,
    /// What was recorded.
    pub meta: Meta,
    /// When a replica last took it.
    pub last_used: SystemTime,
    /// Whether a replica holds it now.
    pub in_use: bool,
}

/// A model folder held for a replica: while the lease lives, the folder is not evicted (a
/// folder outside the cache, for a model the store gave no version of, is removed when it ends).
#[derive(Debug)]
pub struct Lease {
    /// The model's folder.
    pub dir: PathBuf,
    /// What fetching it did.
    pub report: Report,
    _hold: Hold,
}

#[derive(Debug)]
enum Hold {
    Shared { _lock: Flock<File> },
    Owned(PathBuf),
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Hold::Owned(dir) = self {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// The cache at a root folder, with a bound in bytes.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    limit: u64,
}

impl Cache {
    /// The cache at `root` (created if missing), holding at most `limit` bytes.
    pub fn open(root: impl Into<PathBuf>, limit: u64) -> Result<Cache> {
        let cache = Cache { root: root.into(), limit };
        for sub in ["models", "locks", "tmp"] {
            let dir = cache.root.join(sub);
            fs::create_dir_all(&dir).map_err(Error::disk(&dir))?;
        }
        Ok(cache)
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn model(&self, key: &str) -> PathBuf {
        self.root.join("models").join(key)
    }

    fn file(&self, key: &str, ext: &str) -> PathBuf {
        let dir = if ext == "lock" { "locks" } else { "models" };
        self.root.join(dir).join(format!("{key}.{ext}"))
    }

    /// The model `uri` names, from the cache or fetched into it by `fetcher`; concurrent calls
    /// for one model, in any process, download it once.
    pub async fn get(&self, fetcher: &Fetcher, uri: &(impl ToStore + ?Sized)) -> Result<Lease> {
        let started = Instant::now();
        let deadline = started + fetcher.timeout;
        let uri = uri.to_store()?;
        let (remote, objects) = fetcher.list(&*uri).await?;
        let shown = remote.uri().to_owned();
        let report = |downloaded, bytes, cached| Report {
            uri: shown.clone(),
            objects: objects.len(),
            downloaded,
            bytes,
            seconds: started.elapsed().as_secs_f64(),
            cached,
        };
        // Nothing the cache holds, an archive's unpacked content included, may pass its limit.
        let mut bounded = fetcher.clone();
        bounded.plan.max_bytes = bounded.plan.max_bytes.min(self.limit);
        let fetcher = &bounded;
        let Some(version) = version_of(&objects) else {
            let dir = self.root.join("tmp").join(format!("unversioned-{}", unique()));
            fs::create_dir_all(&dir).map_err(Error::disk(&dir))?;
            let hold = Hold::Owned(dir.clone());
            let (downloaded, bytes) = fetcher.download(remote.as_ref(), &objects, &dir).await?;
            return Ok(Lease { dir, report: report(downloaded, bytes, false), _hold: hold });
        };
        let known: u64 = objects.iter().filter_map(|o| o.size).sum();
        if known > self.limit {
            return Err(Error::TooLarge { uri: shown, what: "the model".into(), size: known, limit: self.limit });
        }
        let identity = uri::identity(uri.as_str());
        let key = hex(&digest::digest(&digest::SHA256, format!("{identity}\n{version}").as_bytes()).as_ref()[..16]);
        self.drop_if_suspect(&key)?;
        self.drop_if_changed(&key)?;
        loop {
            if let Some(lock) = self.lease(&key, deadline).await? {
                let bytes = self.meta(&key).map_or(0, |m| m.bytes);
                return Ok(Lease {
                    dir: self.model(&key),
                    report: report(0, bytes, true),
                    _hold: Hold::Shared { _lock: lock },
                });
            }
            let flight = lock(
                &self.file(&key, "lock"),
                FlockArg::LockExclusiveNonblock,
                deadline,
                "a download of this model by another replica",
            )
            .await?;
            if self.model(&key).is_dir() {
                continue;
            }
            let tmp = self.root.join("tmp").join(&key);
            let _ = fs::remove_dir_all(&tmp);
            fs::create_dir_all(&tmp).map_err(Error::disk(&tmp))?;
            let fetched = fetcher.download(remote.as_ref(), &objects, &tmp).await;
            let (downloaded, bytes) = match fetched {
                Ok(sizes) => sizes,
                Err(error) => {
                    let _ = fs::remove_dir_all(&tmp);
                    return Err(error);
                }
            };
            let meta = Meta {
                uri: shown.clone(),
                version: version.clone(),
                bytes,
                objects: objects.len(),
                fetched_at: unix_now(),
                boot: boot_id(),
                durable: false,
                files: Some(stamps(&tmp).map_err(Error::disk(&tmp))?),
            };
            self.commit(&key, &tmp, &meta)?;
            let lease = self.lease(&key, deadline).await?;
            drop(flight);
            if let Err(error) = self.prune(self.limit) {
                tracing::warn!(%error, "the model cache could not evict");
            }
            if let Some(lock) = lease {
                return Ok(Lease {
                    dir: self.model(&key),
                    report: report(downloaded, bytes, false),
                    _hold: Hold::Shared { _lock: lock },
                });
            }
        }
    }

    /// Renames the download `tmp` into place with its metadata, then flushes it to the disk in
    /// the background and records that it was.
    fn commit(&self, key: &str, tmp: &Path, meta: &Meta) -> Result<()> {
        self.write_meta(key, meta)?;
        let dir = self.model(key);
        fs::rename(tmp, &dir).map_err(Error::disk(&dir))?;
        let (cache, key, mut meta) = (self.clone(), key.to_owned(), meta.clone());
        tokio::task::spawn_blocking(move || {
            let flushed = flush(&dir).and_then(|()| File::open(cache.root.join("models")).and_then(|d| d.sync_all()));
            match flushed {
                Ok(()) if dir.is_dir() => {
                    meta.durable = true;
                    if let Err(error) = cache.write_meta(&key, &meta) {
                        tracing::warn!(%error, "the model cache could not record a flushed entry");
                    }
                }
                Ok(()) => {}
                Err(error) => tracing::warn!(%error, dir = %dir.display(), "the model cache could not flush an entry"),
            }
        });
        Ok(())
    }

    fn write_meta(&self, key: &str, meta: &Meta) -> Result<()> {
        let json = self.file(key, "json");
        let staged = self.root.join("tmp").join(format!("{key}.{}.json", unique()));
        fs::write(&staged, serde_json::to_vec_pretty(meta).unwrap_or_default()).map_err(Error::disk(&staged))?;
        fs::rename(&staged, &json).map_err(Error::disk(&json))
    }

    /// Evicts `key`'s entry when it may be torn ([`Meta::suspect`]) and nobody holds it.
    fn drop_if_suspect(&self, key: &str) -> Result<()> {
        let suspect = self.meta(key).is_some_and(|meta| meta.suspect(&boot_id()));
        if suspect
            && self.model(key).is_dir()
            && let Some(held) = try_lock(&self.file(key, "lease"), FlockArg::LockExclusiveNonblock)
        {
            tracing::warn!(key, "a cached model of an earlier boot was never flushed; fetching it again");
            self.remove(key)?;
            drop(held);
        }
        Ok(())
    }

    /// Evicts `key`'s entry when its files are not those it was written with ([`stamps`]);
    /// refuses it while a replica holds it (it cannot be replaced under that replica).
    fn drop_if_changed(&self, key: &str) -> Result<()> {
        let dir = self.model(key);
        let Some(recorded) = self.meta(key).and_then(|meta| meta.files) else { return Ok(()) };
        if !dir.is_dir() || unchanged(&dir, &recorded) {
            return Ok(());
        }
        let Some(held) = try_lock(&self.file(key, "lease"), FlockArg::LockExclusiveNonblock) else {
            return Err(Error::Disk {
                path: dir,
                source: std::io::Error::other(
                    "the cached model changed on disk since it was written, and a replica still holds it; \
                     it is fetched again once none does",
                ),
            });
        };
        tracing::warn!(key, dir = %dir.display(), "a cached model changed on disk since it was written; fetching it again");
        self.remove(key)?;
        drop(held);
        Ok(())
    }

    /// Removes `key`'s entry (its lease held exclusively by the caller): renamed away, then deleted.
    fn remove(&self, key: &str) -> Result<()> {
        let gone = self.root.join("tmp").join(format!("evicted-{key}-{}", unique()));
        let dir = self.model(key);
        fs::rename(&dir, &gone).map_err(Error::disk(&dir))?;
        let _ = fs::remove_file(self.file(key, "json"));
        fs::remove_dir_all(&gone).map_err(Error::disk(&gone))
    }

    /// A shared lock on `key`'s entry when it is there (its last use set to now).
    async fn lease(&self, key: &str, deadline: Instant) -> Result<Option<Flock<File>>> {
        if !self.model(key).is_dir() {
            return Ok(None);
        }
        let path = self.file(key, "lease");
        let held = lock(&path, FlockArg::LockSharedNonblock, deadline, "the eviction of this model").await?;
        if !self.model(key).is_dir() {
            return Ok(None);
        }
        held.set_modified(SystemTime::now()).map_err(Error::disk(&path))?;
        Ok(Some(held))
    }

    fn meta(&self, key: &str) -> Option<Meta> {
        fs::read(self.file(key, "json")).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok())
    }

    /// Every whole entry, least recently used first.
    pub fn entries(&self) -> Result<Vec<Entry>> {
        let dir = self.root.join("models");
        let mut entries = Vec::new();
        for item in fs::read_dir(&dir).map_err(Error::disk(&dir))? {
            let path = item.map_err(Error::disk(&dir))?.path();
            let (Some(key), true) = (path.file_name().and_then(|n| n.to_str()), path.is_dir()) else { continue };
            let Some(meta) = self.meta(key) else { continue };
            let lease = self.file(key, "lease");
            let last_used = fs::metadata(&lease).and_then(|m| m.modified()).unwrap_or(UNIX_EPOCH);
            let in_use = try_lock(&lease, FlockArg::LockExclusiveNonblock).is_none();
            entries.push(Entry { key: key.to_owned(), meta, last_used, in_use });
        }
        entries.sort_by_key(|e| (e.last_used, e.key.clone()));
        Ok(entries)
    }

    /// Evicts least recently used entries not in use until the cache holds at most `bytes`;
    /// returns those evicted. Downloads left behind by a process that died go too.
    pub fn prune(&self, bytes: u64) -> Result<Vec<Entry>> {
        let entries = self.entries()?;
        let mut total: u64 = entries.iter().map(|e| e.meta.bytes).sum();
        let mut evicted = Vec::new();
        for entry in entries {
            if total <= bytes {
                break;
            }
            let Some(held) = try_lock(&self.file(&entry.key, "lease"), FlockArg::LockExclusiveNonblock) else {
                continue;
            };
            self.remove(&entry.key)?;
            drop(held);
            total -= entry.meta.bytes;
            evicted.push(entry);
        }
        self.sweep()?;
        Ok(evicted)
    }

    /// Removes downloads in `tmp/` whose download lock nobody holds (their process died).
    fn sweep(&self) -> Result<()> {
        let dir = self.root.join("tmp");
        for item in fs::read_dir(&dir).map_err(Error::disk(&dir))? {
            let path = item.map_err(Error::disk(&dir))?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            // `<key>` (a download) or `<key>.<unique>.json` (metadata being written).
            let key = name.split('.').next().unwrap_or(name);
            if name.starts_with("unversioned-") || name.starts_with("evicted-") || !self.file(key, "lock").exists() {
                continue;
            }
            if let Some(held) = try_lock(&self.file(key, "lock"), FlockArg::LockExclusiveNonblock) {
                let _ = if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
                drop(held);
            }
        }
        Ok(())
    }
}

/// A digest of every object's path, size and version; `None` when one has no version.
fn version_of(objects: &[Object]) -> Option<String> {
    let mut lines: Vec<String> = Vec::with_capacity(objects.len());
    for object in objects {
        lines.push(format!("{}\t{:?}\t{}", object.path, object.size, object.version.as_deref()?));
    }
    lines.sort();
    Some(hex(&digest::digest(&digest::SHA256, lines.join("\n").as_bytes()).as_ref()[..16]))
}

/// Every file (and link) under `dir` by its path: its size, inode and change time. Any write to
/// a file, a rename onto it or its replacement changes its stamp (the kernel sets the change
/// time; no caller can set it back), and it costs one `stat` per file.
fn stamps(dir: &Path) -> std::io::Result<BTreeMap<String, String>> {
    let mut stamps = BTreeMap::new();
    let mut folders = vec![dir.to_owned()];
    while let Some(folder) = folders.pop() {
        for item in fs::read_dir(&folder)? {
            let path = item?.path();
            let meta = fs::symlink_metadata(&path)?;
            if meta.is_dir() {
                folders.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy().into_owned();
                stamps.insert(relative, stamp(&meta));
            }
        }
    }
    Ok(stamps)
}

fn stamp(meta: &fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{} {} {}.{}", meta.len(), meta.ino(), meta.ctime(), meta.ctime_nsec())
}

/// Whether every file `recorded` under `dir` is still the one it was: files added since (a
/// runtime's own caches) do not count.
fn unchanged(dir: &Path, recorded: &BTreeMap<String, String>) -> bool {
    recorded.iter().all(|(path, was)| fs::symlink_metadata(dir.join(path)).is_ok_and(|meta| stamp(&meta) == *was))
}

/// Flushes every file under `dir` to the disk.
fn flush(dir: &Path) -> std::io::Result<()> {
    for item in fs::read_dir(dir)? {
        let path = item?.path();
        let kind = fs::symlink_metadata(&path)?.file_type();
        if kind.is_dir() {
            flush(&path)?;
        } else if kind.is_file() {
            File::open(&path)?.sync_data()?;
        }
    }
    File::open(dir)?.sync_all()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn unique() -> String {
    format!("{}-{}", std::process::id(), SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()))
}

fn open_lock_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).truncate(false).read(true).write(true).open(path)
}

/// The lock `arg` on `path` now, or `None` when another holder has it.
fn try_lock(path: &Path, arg: FlockArg) -> Option<Flock<File>> {
    Flock::lock(open_lock_file(path).ok()?, arg).ok()
}

/// The lock `arg` (non-blocking) on `path`, tried until `deadline`; `waiting_for` names what
/// holds it in the timeout's message.
async fn lock(path: &Path, arg: FlockArg, deadline: Instant, waiting_for: &str) -> Result<Flock<File>> {
    let started = Instant::now();
    let mut file = open_lock_file(path).map_err(Error::disk(path))?;
    loop {
        match Flock::lock(file, arg) {
            Ok(held) => return Ok(held),
            Err((back, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                file = back;
                tokio::time::sleep(POLL).await;
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(Error::Timeout {
                    what: format!("waiting for {waiting_for}"),
                    seconds: started.elapsed().as_secs(),
                });
            }
            Err((_, errno)) => return Err(Error::disk(path)(std::io::Error::from(errno))),
        }
    }
}
