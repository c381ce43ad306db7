//! Objects downloaded straight to disk: each large object in ranges fetched in parallel and
//! written at their offsets (never whole in memory: at most [`Plan::parallel`] buffers of
//! [`WRITE_BUFFER`] bytes), a failed range retried with back-off, every byte counted so a
//! connection cut halfway is an error rather than a short file, and the total bounded. Nothing is
//! flushed to the disk here (an init container's emptyDir does not outlive a crash of its node;
//! the cache flushes its entries after they serve: [`crate::cache`]).

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::{StreamExt, TryStreamExt, stream};

use crate::error::{Error, Result};
use crate::remote::{Object, Remote};

/// Bytes gathered before one write to disk.
pub const WRITE_BUFFER: usize = 1 << 20;

/// How a download runs.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Bytes per range.
    pub chunk: u64,
    /// Ranges in flight at once.
    pub parallel: usize,
    /// Tries of one range before the download fails.
    pub attempts: u32,
    /// The most bytes a model may hold.
    pub max_bytes: u64,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan { chunk: 16 << 20, parallel: 8, attempts: 4, max_bytes: 64 << 30 }
    }
}

/// The path of `relative` (`/`-separated, from a store) under `dir`; an error when it could leave
/// `dir` (absolute, `..`, empty parts).
pub fn inside(dir: &Path, relative: &str) -> Option<PathBuf> {
    let path = Path::new(relative);
    let plain = !relative.is_empty()
        && !relative.split('/').any(|part| part.is_empty() || part == "." || part == "..")
        && path.components().all(|c| matches!(c, Component::Normal(_)));
    plain.then(|| dir.join(path))
}

/// One range of one object to fetch.
struct Part {
    object: usize,
    range: Option<Range<u64>>,
}

/// Downloads `objects` of `remote` into `dir` (which exists); returns the bytes written.
pub async fn download(remote: &dyn Remote, objects: &[Object], dir: &Path, plan: Plan) -> Result<u64> {
    let known: u64 = objects.iter().filter_map(|o| o.size).sum();
    if known > plan.max_bytes {
        return Err(too_large(remote, "the model", known, plan.max_bytes));
    }
    let mut files = Vec::with_capacity(objects.len());
    let mut parts = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        let path = inside(dir, &object.path).ok_or_else(|| Error::Transfer {
            uri: remote.uri().to_owned(),
            cause: format!("the store named an object {:?} that would land outside the model's folder", object.path),
        })?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(Error::disk(parent))?;
        }
        let file = File::create(&path).map_err(Error::disk(&path))?;
        match (object.size, object.ranged) {
            (Some(size), true) => {
                file.set_len(size).map_err(Error::disk(&path))?;
                let mut start = 0;
                while start < size {
                    let end = (start + plan.chunk).min(size);
                    parts.push(Part { object: index, range: Some(start..end) });
                    start = end;
                }
            }
            _ => parts.push(Part { object: index, range: None }),
        }
        files.push((Arc::new(file), path));
    }
    let written = stream::iter(parts)
        .map(|part| {
            let (file, path) = files[part.object].clone();
            fetch_part(remote, &objects[part.object], part.range, file, path, plan)
        })
        .buffer_unordered(plan.parallel.max(1))
        .try_fold(0u64, |total, bytes| async move { Ok(total + bytes) })
        .await?;
    Ok(written)
}

fn too_large(remote: &dyn Remote, what: &str, size: u64, limit: u64) -> Error {
    Error::TooLarge { uri: remote.uri().to_owned(), what: what.to_owned(), size, limit }
}

/// Fetches one part, trying again with back-off (0.2 s, 0.4 s, ...) while the error is transient.
async fn fetch_part(
    remote: &dyn Remote,
    object: &Object,
    range: Option<Range<u64>>,
    file: Arc<File>,
    path: PathBuf,
    plan: Plan,
) -> Result<u64> {
    let mut attempt = 1;
    loop {
        match fetch_once(remote, object, range.clone(), &file, &path, plan).await {
            Err(error) if error.is_transient() && attempt < plan.attempts => {
                tracing::warn!(uri = remote.uri(), file = object.path, attempt, %error, "a range failed; trying again");
                tokio::time::sleep(Duration::from_millis(200 << (attempt - 1))).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn fetch_once(
    remote: &dyn Remote,
    object: &Object,
    range: Option<Range<u64>>,
    file: &Arc<File>,
    path: &Path,
    plan: Plan,
) -> Result<u64> {
    let mut body = remote.read(object, range.clone()).await?;
    let start = range.as_ref().map_or(0, |r| r.start);
    let mut offset = start;
    let mut buffer = BytesMut::with_capacity(WRITE_BUFFER);
    let flush = |buffer: BytesMut, at: u64| {
        let (file, path) = (Arc::clone(file), path.to_owned());
        async move {
            tokio::task::spawn_blocking(move || file.write_all_at(&buffer, at).map_err(Error::disk(path)))
                .await
                .map_err(|e| Error::Config(format!("a disk task failed: {e}")))?
        }
    };
    let expected = range.as_ref().map(|r| r.end - r.start).or(object.size);
    let cut = |received: u64, cause: &str| Error::Transfer {
        uri: remote.uri().to_owned(),
        cause: match expected {
            Some(expected) => {
                format!("{}: the connection ended after {received} of {expected} bytes: {cause}", object.path)
            }
            None => format!("{}: the connection ended after {received} bytes: {cause}", object.path),
        },
    };
    while let Some(bytes) = body.next().await {
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(Error::Transfer { cause, .. }) => return Err(cut(offset + buffer.len() as u64 - start, &cause)),
            Err(other) => return Err(other),
        };
        let end = offset + (buffer.len() + bytes.len()) as u64;
        if range.as_ref().is_some_and(|r| end - start > r.end - r.start) {
            return Err(Error::Transfer {
                uri: remote.uri().to_owned(),
                cause: format!("{}: more bytes than asked", object.path),
            });
        }
        if end > plan.max_bytes {
            return Err(too_large(remote, &object.path, end, plan.max_bytes));
        }
        buffer.extend_from_slice(&bytes);
        if buffer.len() >= WRITE_BUFFER {
            let full = std::mem::replace(&mut buffer, BytesMut::with_capacity(WRITE_BUFFER));
            let length = full.len() as u64;
            flush(full, offset).await?;
            offset += length;
        }
    }
    let length = buffer.len() as u64;
    if length > 0 {
        flush(buffer, offset).await?;
        offset += length;
    }
    let received = offset - start;
    match expected {
        Some(expected) if received != expected => Err(cut(received, "the body was short")),
        _ => Ok(received),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::inside;

    #[test]
    fn only_plain_relative_paths_land_inside() {
        let dir = Path::new("/cache/m");
        assert_eq!(inside(dir, "a/model.onnx").unwrap(), Path::new("/cache/m/a/model.onnx"));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/."] {
            assert!(inside(dir, bad).is_none(), "{bad:?}");
        }
    }
}
