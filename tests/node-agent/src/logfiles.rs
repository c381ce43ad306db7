//! Container logs for the kubelet API (I/O shell): which pods this node runs and with which
//! containers ([`PodLogs`], filled in by the pod workers), and a container's log file as a byte
//! stream ([`PodLogs::open`]): all of it or its last lines, up to a byte limit, and in follow mode
//! new output as it is written, until the pod's containers have stopped for good.

use std::collections::HashMap;
use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tokio::fs::File;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::logquery::{LogRequest, tail_offset};

/// How often a follower looks for new output.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// Largest piece of log sent at once.
const CHUNK: u64 = 64 * 1024;

type Key = (String, String);

struct Entry {
    uid: String,
    containers: Vec<String>,
    /// Cancelled once no container of the pod will write again.
    finished: CancellationToken,
}

/// The pods this node runs, by namespace and name, and their log files.
pub struct PodLogs {
    config: Config,
    pods: Mutex<HashMap<Key, Entry>>,
}

/// A pod worker's registration; dropping it removes the pod (and ends its followers).
pub struct Registration {
    logs: Arc<PodLogs>,
    key: Key,
    uid: String,
    finished: CancellationToken,
}

impl Registration {
    /// No container of the pod will write again: followers get the rest of the log and end.
    pub fn finished(&self) {
        self.finished.cancel();
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.finished.cancel();
        let mut pods = self.logs.pods.lock().expect("pod logs lock");
        if pods.get(&self.key).is_some_and(|e| e.uid == self.uid) {
            pods.remove(&self.key);
        }
    }
}

impl PodLogs {
    /// An empty registry; log files are found through `config`.
    pub fn new(config: Config) -> Arc<Self> {
        Arc::new(PodLogs { config, pods: Mutex::new(HashMap::new()) })
    }

    /// Makes a pod's containers' logs available until the returned registration is dropped.
    pub fn register(self: &Arc<Self>, namespace: &str, name: &str, uid: &str, containers: Vec<String>) -> Registration {
        let key = (namespace.to_string(), name.to_string());
        let finished = CancellationToken::new();
        let entry = Entry { uid: uid.to_string(), containers, finished: finished.clone() };
        self.pods.lock().expect("pod logs lock").insert(key.clone(), entry);
        Registration { logs: self.clone(), key, uid: uid.to_string(), finished }
    }

    /// The log a request asks for, as a stream of bytes. A container that has not written yet
    /// has an empty log. Unknown pods and containers are 404s that name them.
    pub async fn open(&self, req: &LogRequest) -> Result<impl Stream<Item = Result<Bytes>> + Send + 'static> {
        let finished = {
            let pods = self.pods.lock().expect("pod logs lock");
            let entry = pods.get(&(req.namespace.clone(), req.pod.clone())).ok_or_else(|| {
                Error::refused(404, format!("pod \"{}/{}\" is not running on this node", req.namespace, req.pod))
            })?;
            if !entry.containers.contains(&req.container) {
                return Err(Error::refused(
                    404,
                    format!(
                        "container \"{}\" is not in pod \"{}/{}\" (its containers: {})",
                        req.container,
                        req.namespace,
                        req.pod,
                        entry.containers.join(", ")
                    ),
                ));
            }
            entry.finished.clone()
        };
        let path = self.config.container_log(&req.namespace, &req.pod, &req.container);
        let (file, start, end) = match File::open(&path).await {
            Ok(mut file) => {
                let len = file.metadata().await.map_err(|e| Error::io(format!("reading {}", path.display()), e))?.len();
                let start = match req.tail_lines {
                    Some(n) => tail_start(&mut file, len, n, &path).await?,
                    None => 0,
                };
                file.seek(SeekFrom::Start(start))
                    .await
                    .map_err(|e| Error::io(format!("seeking {}", path.display()), e))?;
                (Some(file), start, len)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, 0, 0),
            Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
        };
        let reader =
            Reader { path, file, pos: start, end: (!req.follow).then_some(end), left: req.limit_bytes, finished };
        Ok(futures::stream::unfold(reader, |mut r| async move { r.next().await.map(|item| (item, r)) }))
    }
}

/// Where the last `lines` lines of a file of `len` bytes start: reads ever larger pieces of its end.
async fn tail_start(file: &mut File, len: u64, lines: u64, path: &Path) -> Result<u64> {
    let io = |e| Error::io(format!("reading {}", path.display()), e);
    let mut window = CHUNK.min(len);
    loop {
        let from = len - window;
        let mut buf = vec![0; window as usize];
        file.seek(SeekFrom::Start(from)).await.map_err(io)?;
        file.read_exact(&mut buf).await.map_err(io)?;
        match tail_offset(&buf, lines) {
            Some(at) => return Ok(from + at as u64),
            None if from == 0 => return Ok(0),
            None => window = (window * 4).min(len),
        }
    }
}

/// The state of one log stream.
struct Reader {
    path: PathBuf,
    /// `None` until the container has written its first output.
    file: Option<File>,
    pos: u64,
    /// Where a non-following read stops (the length when it began).
    end: Option<u64>,
    /// Bytes still allowed by `limitBytes`.
    left: Option<u64>,
    finished: CancellationToken,
}

impl Reader {
    /// The next piece of log; `None` at the end.
    async fn next(&mut self) -> Option<Result<Bytes>> {
        loop {
            // Looked at before reading: output written before the pod finished is still sent.
            let finished = self.finished.is_cancelled();
            let want = [Some(CHUNK), self.left, self.end.map(|e| e.saturating_sub(self.pos))]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(CHUNK);
            if want == 0 {
                return None;
            }
            let got = match self.read(want).await {
                Ok(got) => got,
                Err(e) => return Some(Err(e)),
            };
            if !got.is_empty() {
                self.pos += got.len() as u64;
                if let Some(left) = &mut self.left {
                    *left -= got.len() as u64;
                }
                return Some(Ok(got));
            }
            if self.end.is_some() || finished {
                return None;
            }
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_POLL) => {}
                _ = self.finished.cancelled() => {}
            }
        }
    }

    async fn read(&mut self, want: u64) -> Result<Bytes> {
        if self.file.is_none() {
            match File::open(&self.path).await {
                Ok(f) => self.file = Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Bytes::new()),
                Err(e) => return Err(Error::io(format!("opening {}", self.path.display()), e)),
            }
        }
        let file = self.file.as_mut().expect("opened above");
        let mut buf = vec![0; want as usize];
        let n = file.read(&mut buf).await.map_err(|e| Error::io(format!("reading {}", self.path.display()), e))?;
        buf.truncate(n);
        Ok(Bytes::from(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use futures::StreamExt;

    fn logs(dir: &Path) -> Arc<PodLogs> {
        let cli = crate::Cli::try_parse_from(["agent", "--cluster-dir", dir.to_str().unwrap()]).unwrap();
        std::fs::create_dir_all(dir.join("pods")).unwrap();
        PodLogs::new(cli.config)
    }

    fn req(query: &str) -> LogRequest {
        crate::logquery::parse("/containerLogs/ns/p/c", Some(query)).unwrap()
    }

    async fn collect(s: impl Stream<Item = Result<Bytes>>) -> String {
        let parts: Vec<Bytes> = s.map(|b| b.unwrap()).collect().await;
        String::from_utf8(parts.concat()).unwrap()
    }

    #[tokio::test]
    async fn whole_tail_and_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let logs = logs(dir);
        let _reg = logs.register("ns", "p", "u1", vec!["c".into()]);
        std::fs::write(dir.join("pods/ns_p_c.log"), "one\ntwo\nthree\n").unwrap();
        assert_eq!(collect(logs.open(&req("")).await.unwrap()).await, "one\ntwo\nthree\n");
        assert_eq!(collect(logs.open(&req("tailLines=2")).await.unwrap()).await, "two\nthree\n");
        assert_eq!(collect(logs.open(&req("tailLines=9")).await.unwrap()).await, "one\ntwo\nthree\n");
        assert_eq!(collect(logs.open(&req("limitBytes=5")).await.unwrap()).await, "one\nt");
        assert_eq!(collect(logs.open(&req("tailLines=1&limitBytes=2")).await.unwrap()).await, "th");
    }

    #[tokio::test]
    async fn unknown_pod_or_container_is_404_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let logs = logs(dir);
        let reg = logs.register("ns", "p", "u1", vec!["c".into()]);
        let miss = |path: &str| crate::logquery::parse(path, None).unwrap();
        let Err(Error::Refused { status: 404, message }) = logs.open(&miss("/containerLogs/ns/q/c")).await else {
            panic!()
        };
        assert!(message.contains("ns/q"), "{message}");
        let Err(Error::Refused { status: 404, message }) = logs.open(&miss("/containerLogs/ns/p/x")).await else {
            panic!()
        };
        assert!(message.contains("\"x\"") && message.contains("c"), "{message}");
        // Not yet written: empty.
        assert_eq!(collect(logs.open(&req("")).await.unwrap()).await, "");
        drop(reg);
        assert!(logs.open(&req("")).await.is_err());
    }

    #[tokio::test]
    async fn follow_streams_until_the_pod_finishes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let logs = logs(dir);
        let reg = logs.register("ns", "p", "u1", vec!["c".into()]);
        let file = dir.join("pods/ns_p_c.log");
        std::fs::write(&file, "old\n").unwrap();
        let mut s = Box::pin(logs.open(&req("follow=true&tailLines=1")).await.unwrap());
        assert_eq!(s.next().await.unwrap().unwrap(), "old\n");
        std::fs::write(&file, "old\nnew\n").unwrap();
        assert_eq!(s.next().await.unwrap().unwrap(), "new\n");
        let next = tokio::spawn(async move { collect(s).await });
        std::fs::write(&file, "old\nnew\nlast\n").unwrap();
        reg.finished();
        assert_eq!(next.await.unwrap(), "last\n");
    }

    #[tokio::test]
    async fn a_new_pod_of_the_same_name_survives_the_old_registration() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let logs = logs(dir);
        let old = logs.register("ns", "p", "u1", vec!["c".into()]);
        let _new = logs.register("ns", "p", "u2", vec!["c".into()]);
        drop(old);
        assert!(logs.open(&req("")).await.is_ok());
    }
}
