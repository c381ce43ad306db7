//! The logger's sink rule against a real sink in a second process (a Python HTTP server on
//! 127.0.0.1): with the cluster's rule a loopback sink is refused, when the flags are read and again
//! at send time, and the sink gets nothing; with `skiff up`'s (`--logger-allow-loopback`) the same
//! sink gets every event.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderValue;
use skiff_http::logger::sink::SinkPolicy;
use skiff_http::logger::{Half, LogMode, Logger, LoggerArgs, LoggerConfig, LoggerMetrics};

/// Prints its port, then one line per event it receives: the `ce-id`.
const SINK: &str = r#"
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        print(self.headers.get("ce-id"), flush=True)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

server = HTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The sink process and the ids it has received, line by line.
struct SinkProcess {
    child: Child,
    port: u16,
    ids: mpsc::Receiver<String>,
}

impl SinkProcess {
    fn start() -> SinkProcess {
        let mut child =
            Command::new("python3").args(["-c", SINK]).stdout(Stdio::piped()).spawn().expect("python3 runs the sink");
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, ids) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let port = ids.recv_timeout(Duration::from_secs(30)).expect("the sink prints its port").parse().unwrap();
        SinkProcess { child, port, ids }
    }

    fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/events", self.port)
    }

    /// The next `n` ids the sink received, in arrival order.
    fn next(&self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.ids.recv_timeout(Duration::from_secs(30)).expect("the sink printed an id")).collect()
    }
}

impl Drop for SinkProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn args(url: &str, extra: impl FnOnce(&mut LoggerArgs)) -> LoggerArgs {
    let mut args = LoggerArgs { logger_url: Some(url.to_owned()), logger_mode: "all".into(), ..LoggerArgs::default() };
    extra(&mut args);
    args
}

fn log_two(logger: &Logger, id: &str) {
    let json = HeaderValue::from_static("application/json");
    logger.log(Half::Request, id, json.clone(), Bytes::from_static(br#"{"inputs":[]}"#));
    logger.log(Half::Response, id, json, Bytes::from_static(br#"{"outputs":[]}"#));
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..1000 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen within 10 s");
}

#[tokio::test]
async fn a_loopback_sink_is_refused_with_the_clusters_rule_and_served_with_skiff_ups() {
    let sink = SinkProcess::start();
    let cluster = || SinkPolicy::cluster("skiff-system", &[], &[]).unwrap();

    // The cluster's flags (the operator passes no --logger-allow-loopback): the binary refuses to start.
    for host in ["127.0.0.1", "localhost"] {
        let flags = args(&sink.url(host), |a| a.logger_protected_hosts = vec!["*.skiff-system.svc".into()]);
        let refused = flags.config().unwrap_err();
        assert!(refused.starts_with("--logger-url") && refused.contains("is loopback"), "{refused}");
    }

    // Given a loopback sink anyway, the logger sends nothing there: each event counts as failed.
    let metrics = LoggerMetrics::default();
    for host in ["127.0.0.1", "localhost"] {
        let config =
            LoggerConfig { sinks: cluster(), ..LoggerConfig::new(sink.url(host).parse().unwrap(), LogMode::All) };
        log_two(&Logger::start(config, metrics.clone()), "refused");
    }
    eventually("four refused events counted", || metrics.count("failed") == 4).await;
    assert_eq!(metrics.count("sent"), 0);

    // skiff up's flags: the same sink process gets the events, by address and by name.
    let sent = LoggerMetrics::default();
    for host in ["127.0.0.1", "localhost"] {
        let config = args(&sink.url(host), |a| a.logger_allow_loopback = true).config().unwrap().unwrap();
        log_two(&Logger::start(config, sent.clone()), host);
    }
    eventually("four events sent", || sent.count("sent") == 4).await;
    let mut received = sink.next(4);
    received.sort();
    assert_eq!(received, ["127.0.0.1", "127.0.0.1", "localhost", "localhost"], "nothing refused ever arrived");

    // The allow-list (inferenceservice-config logger.allowedHosts) opens the cluster's rule.
    let allowed = args(&sink.url("127.0.0.1"), |a| a.logger_allowed_hosts = vec!["127.0.0.1".into()]);
    log_two(&Logger::start(allowed.config().unwrap().unwrap(), sent.clone()), "allowed");
    eventually("two more events sent", || sent.count("sent") == 6).await;
    assert_eq!(sink.next(2), ["allowed", "allowed"]);
    assert_eq!(sink.ids.try_iter().count(), 0, "nothing else arrived");
}
