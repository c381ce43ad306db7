//! The replicas' output, for the web app's log tab: the last lines of each running replica (its
//! "pod", `<revision>-<n>`) and a live feed of new ones. A replica's log goes when it exits, as a
//! deleted pod's does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use skiff_dataplane::RevisionKey;
use tokio::sync::broadcast;

/// Lines kept per replica.
const KEPT_LINES: usize = 2000;
/// Lines a slow reader may fall behind before it skips ahead.
const LIVE_BACKLOG: usize = 1024;

/// One replica's output.
pub struct Log {
    lines: Mutex<VecDeque<String>>,
    live: broadcast::Sender<String>,
}

impl Log {
    /// Adds a line.
    pub fn push(&self, line: String) {
        let mut lines = self.lines.lock().expect("log lock");
        if lines.len() == KEPT_LINES {
            lines.pop_front();
        }
        // Sent under the lock, so a reader that copies the tail and subscribes misses nothing.
        let _ = self.live.send(line.clone());
        lines.push_back(line);
    }

    /// The last lines, at most `bytes` of them in all (whole lines; the newest always).
    pub fn tail(&self, bytes: usize) -> Vec<String> {
        let lines = self.lines.lock().expect("log lock");
        let mut total = 0;
        let mut tail: Vec<String> = lines
            .iter()
            .rev()
            .take_while(|line| {
                let first = total == 0;
                total += line.len() + 1;
                first || total <= bytes
            })
            .cloned()
            .collect();
        tail.reverse();
        tail
    }
}

/// A replica as the log tab lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaLog {
    /// `<revision>-<n>`.
    pub pod: String,
    /// Its revision.
    pub revision: String,
}

/// Replicas by namespace and name: their revision and log.
type Replicas = BTreeMap<(String, String), (String, Arc<Log>)>;

/// Every running replica's log, by namespace and replica name.
#[derive(Default)]
pub struct ReplicaLogs {
    replicas: Mutex<Replicas>,
}

impl ReplicaLogs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Replicas> {
        self.replicas.lock().expect("replica logs lock")
    }

    /// The name of replica `id` of `revision`.
    pub fn pod_name(revision: &RevisionKey, id: u64) -> String {
        format!("{}-{id}", revision.name)
    }

    /// Starts the log of replica `id` of `revision`.
    pub fn start(&self, revision: &RevisionKey, id: u64) -> Arc<Log> {
        let log = Arc::new(Log { lines: Mutex::new(VecDeque::new()), live: broadcast::channel(LIVE_BACKLOG).0 });
        let key = (revision.namespace.clone(), Self::pod_name(revision, id));
        self.lock().insert(key, (revision.name.clone(), log.clone()));
        log
    }

    /// Forgets the log of a replica that exited; its readers' feeds end.
    pub fn finish(&self, revision: &RevisionKey, id: u64) {
        self.lock().remove(&(revision.namespace.clone(), Self::pod_name(revision, id)));
    }

    /// The replicas in `namespace` of any of `revisions`.
    pub fn pods(&self, namespace: &str, revisions: &[String]) -> Vec<ReplicaLog> {
        self.lock()
            .iter()
            .filter(|((ns, _), (revision, _))| ns == namespace && revisions.contains(revision))
            .map(|((_, pod), (revision, _))| ReplicaLog { pod: pod.clone(), revision: revision.clone() })
            .collect()
    }

    /// The last `tail` lines of a replica and a feed of the lines after them.
    pub fn follow(
        &self,
        namespace: &str,
        pod: &str,
        tail: usize,
    ) -> Option<(Vec<String>, broadcast::Receiver<String>)> {
        let log = self.lock().get(&(namespace.to_owned(), pod.to_owned())).map(|(_, log)| log.clone())?;
        let lines = log.lines.lock().expect("log lock");
        let feed = log.live.subscribe();
        Some((lines.iter().skip(lines.len().saturating_sub(tail)).cloned().collect(), feed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_the_tail_then_every_new_line_and_the_feed_ends_with_the_replica() {
        let logs = ReplicaLogs::default();
        let revision = RevisionKey::new("default", "iris-predictor-00001");
        let log = logs.start(&revision, 3);
        for i in 0..5 {
            log.push(format!("line {i}"));
        }
        let (tail, mut feed) = logs.follow("default", "iris-predictor-00001-3", 2).unwrap();
        assert_eq!(tail, ["line 3", "line 4"]);
        assert_eq!(log.tail(14), ["line 3", "line 4"], "two lines of 6 bytes and their newlines");
        assert_eq!(log.tail(1), ["line 4"], "the newest line at least");
        log.push("line 5".into());
        assert_eq!(feed.try_recv().unwrap(), "line 5");
        assert_eq!(
            logs.pods("default", &["iris-predictor-00001".into()]),
            [ReplicaLog { pod: "iris-predictor-00001-3".into(), revision: "iris-predictor-00001".into() }]
        );
        assert!(logs.pods("other", &["iris-predictor-00001".into()]).is_empty());
        logs.finish(&revision, 3);
        drop(log);
        assert!(matches!(feed.try_recv(), Err(broadcast::error::TryRecvError::Closed)));
        assert!(logs.follow("default", "iris-predictor-00001-3", 2).is_none());
    }

    #[test]
    fn a_log_keeps_its_last_lines_only() {
        let logs = ReplicaLogs::default();
        let log = logs.start(&RevisionKey::new("default", "r"), 1);
        for i in 0..(KEPT_LINES + 5) {
            log.push(i.to_string());
        }
        let (tail, _) = logs.follow("default", "r-1", usize::MAX).unwrap();
        assert_eq!(tail.len(), KEPT_LINES);
        assert_eq!(tail[0], "5");
    }
}
