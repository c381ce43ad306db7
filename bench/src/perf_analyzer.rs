//! NVIDIA's `perf_analyzer` (Triton's load generator, which published Triton figures come from)
//! as a second load generator beside [`crate::load`]: the same model at the same concurrency,
//! over HTTP or gRPC. It is installed and started by `scripts/perf-analyzer.sh` ([`command`]); a
//! run ([`run`]) reads the CSV it writes ([`parse_csv`], pure); [`medians`] and [`table`] put the
//! rounds' figures beside the Skiff load generator's.

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::report::{Median, median};

/// The command prefix that runs perf_analyzer (installed first if needed by
/// `scripts/perf-analyzer.sh`, run from the repository root), one word per element.
pub fn command() -> anyhow::Result<Vec<String>> {
    let output = std::process::Command::new("scripts/perf-analyzer.sh")
        .arg("--path")
        .output()
        .context("running scripts/perf-analyzer.sh (from the repository root)")?;
    if !output.status.success() {
        anyhow::bail!(
            "scripts/perf-analyzer.sh could not install perf_analyzer: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let words: Vec<String> = String::from_utf8(output.stdout)?.lines().map(str::to_owned).collect();
    if words.is_empty() {
        anyhow::bail!("scripts/perf-analyzer.sh --path printed nothing");
    }
    Ok(words)
}

/// One perf_analyzer measurement.
#[derive(Debug, Clone)]
pub struct Spec {
    /// `host:port`.
    pub address: String,
    /// The model.
    pub model: String,
    /// `http` or `grpc`.
    pub protocol: String,
    /// Requests in flight (`--concurrency-range C:C`).
    pub concurrency: usize,
    /// Rows per request (`-b`).
    pub batch: usize,
    /// Time measured: three windows of a third each (perf_analyzer's stability check, here
    /// accepting any three windows, wants three).
    pub duration: Duration,
}

/// What perf_analyzer measured at one concurrency.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Concurrency.
    pub concurrency: usize,
    /// Inferences (rows) per second.
    pub infer_per_sec: f64,
    /// Median client latency, ms.
    pub p50_ms: f64,
    /// 99th percentile client latency, ms.
    pub p99_ms: f64,
}

/// Runs perf_analyzer (`command`) for `spec`; its CSV report goes to `csv`. An error carries the
/// end of its output.
pub async fn run(command: &[String], spec: &Spec, csv: &Path) -> anyhow::Result<Figures> {
    let window_ms = (spec.duration.as_millis() / 3).max(200);
    let output = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .args(["-m", &spec.model, "-u", &spec.address, "-i", &spec.protocol])
        .args(["-b", &spec.batch.to_string()])
        .args(["--concurrency-range", &format!("{0}:{0}", spec.concurrency)])
        .args(["--measurement-interval", &window_ms.to_string(), "--stability-percentage", "1000"])
        .arg("-f")
        .arg(csv)
        .output()
        .await
        .context("starting perf_analyzer")?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if !output.status.success() || text.contains("Thread [") {
        let tail: Vec<&str> = text.lines().rev().take(3).collect();
        anyhow::bail!(
            "perf_analyzer failed ({}): {}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    let report = std::fs::read_to_string(csv).with_context(|| format!("reading {}", csv.display()))?;
    parse_csv(&report)?.into_iter().next().context("perf_analyzer's CSV has no row")
}

/// The rows of perf_analyzer's CSV report (`-f`): columns `Concurrency`, `Inferences/Second`,
/// `p50 latency` and `p99 latency` (µs), found by name.
pub fn parse_csv(text: &str) -> anyhow::Result<Vec<Figures>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().context("an empty CSV report")?.split(',').map(str::trim).collect();
    let column = |name: &str| header.iter().position(|h| *h == name).with_context(|| format!("no {name} column"));
    let (concurrency, throughput, p50, p99) =
        (column("Concurrency")?, column("Inferences/Second")?, column("p50 latency")?, column("p99 latency")?);
    lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            let cell = |i: usize| cells.get(i).with_context(|| format!("a short row: {line}"));
            let number = |i: usize| -> anyhow::Result<f64> { Ok(cell(i)?.parse::<f64>()?) };
            Ok(Figures {
                concurrency: cell(concurrency)?.parse()?,
                infer_per_sec: number(throughput)?,
                p50_ms: number(p50)? / 1000.0,
                p99_ms: number(p99)? / 1000.0,
            })
        })
        .collect()
}

/// One measured cell: the peer, the protocol and the figures.
#[derive(Debug, Clone)]
pub struct Row {
    /// Peer name.
    pub peer: String,
    /// `http` or `grpc`.
    pub protocol: String,
    /// Figures.
    pub figures: Figures,
}

/// The median figures over rounds of one peer, protocol and concurrency.
#[derive(Debug, Clone, PartialEq)]
pub struct MedianRow {
    /// Peer name.
    pub peer: String,
    /// `http` or `grpc`.
    pub protocol: String,
    /// Concurrency.
    pub concurrency: usize,
    /// Rounds measured.
    pub rounds: usize,
    /// Median inferences per second.
    pub infer_per_sec: f64,
    /// Median p50, ms.
    pub p50_ms: f64,
    /// Median p99, ms.
    pub p99_ms: f64,
}

/// Groups `rows` by peer, protocol and concurrency (in order of first appearance) and takes each
/// figure's median over the rounds.
pub fn medians(rows: &[Row]) -> Vec<MedianRow> {
    let mut keys: Vec<(&str, &str, usize)> = Vec::new();
    for row in rows {
        let key = (row.peer.as_str(), row.protocol.as_str(), row.figures.concurrency);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .map(|(peer, protocol, concurrency)| {
            let cell: Vec<&Figures> = rows
                .iter()
                .filter(|r| r.peer == peer && r.protocol == protocol && r.figures.concurrency == concurrency)
                .map(|r| &r.figures)
                .collect();
            MedianRow {
                peer: peer.to_owned(),
                protocol: protocol.to_owned(),
                concurrency,
                rounds: cell.len(),
                infer_per_sec: median(cell.iter().map(|f| f.infer_per_sec).collect()),
                p50_ms: median(cell.iter().map(|f| f.p50_ms).collect()),
                p99_ms: median(cell.iter().map(|f| f.p99_ms).collect()),
            }
        })
        .collect()
}

/// A Markdown table of perf_analyzer's medians at `batch` rows a request, each beside the Skiff
/// load generator's median for the same peer and concurrency (`loadgen`: requests of one row).
pub fn table(rows: &[MedianRow], loadgen: &[Median], batch: usize) -> String {
    let mut sorted: Vec<&MedianRow> = rows.iter().collect();
    sorted.sort_by(|a, b| (a.concurrency, &a.protocol).cmp(&(b.concurrency, &b.protocol)));
    let mut out = format!(
        "| peer | perf_analyzer over | concurrency | rounds | median infer/s (batch {batch}) | median req/s | median p50 ms | median p99 ms | bench-server's load generator req/s | p50 ms |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for row in sorted {
        let ours = loadgen.iter().find(|m| m.peer == row.peer && m.connections == row.concurrency);
        let (rps, p50) = ours
            .map_or(("–".to_owned(), "–".to_owned()), |m| (format!("{:.0}", m.rps), format!("{:.3}", m.p50_ms)));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.0} | {:.0} | {:.3} | {:.3} | {rps} | {p50} |",
            row.peer,
            row.protocol,
            row.concurrency,
            row.rounds,
            row.infer_per_sec,
            row.infer_per_sec / batch as f64,
            row.p50_ms,
            row.p99_ms
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf_analyzer 2.60's CSV against skiff-server over gRPC (server-side columns included).
    const CSV: &str = "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n4,3143.95,1,881,342,6,24,7,1,1200,1842,2032,2508\n";

    #[test]
    fn the_csv_report_gives_throughput_and_latencies_by_column_name() {
        let rows = parse_csv(CSV).unwrap();
        assert_eq!(rows, [Figures { concurrency: 4, infer_per_sec: 3143.95, p50_ms: 1.2, p99_ms: 2.508 }]);
        let reordered = "p99 latency,Concurrency,p50 latency,Inferences/Second\n900,2,450,10.5\n\n";
        assert_eq!(
            parse_csv(reordered).unwrap(),
            [Figures { concurrency: 2, infer_per_sec: 10.5, p50_ms: 0.45, p99_ms: 0.9 }]
        );
    }

    #[test]
    fn a_report_without_a_needed_column_or_with_a_short_row_is_an_error() {
        let error = parse_csv("Concurrency,Inferences/Second,p50 latency\n1,2,3\n").unwrap_err();
        assert!(error.to_string().contains("p99 latency"), "{error}");
        assert!(parse_csv("").is_err());
        assert!(parse_csv("Concurrency,Inferences/Second,p50 latency,p99 latency\n1,2\n").is_err());
    }

    #[test]
    fn medians_and_the_table_put_perf_analyzer_beside_the_load_generator() {
        let row = |protocol: &str, infer_per_sec, p50_ms| Row {
            peer: "skiff-server".into(),
            protocol: protocol.into(),
            figures: Figures { concurrency: 16, infer_per_sec, p50_ms, p99_ms: 2.0 * p50_ms },
        };
        let rows =
            [row("http", 900.0, 1.0), row("grpc", 800.0, 1.5), row("http", 1100.0, 3.0), row("http", 1000.0, 2.0)];
        let medians = medians(&rows);
        assert_eq!(medians.len(), 2);
        assert_eq!((medians[0].rounds, medians[0].infer_per_sec, medians[0].p50_ms), (3, 1000.0, 2.0));
        let loadgen = [Median {
            peer: "skiff-server".into(),
            connections: 16,
            rounds: 3,
            rps: 1234.0,
            p50_ms: 0.5,
            p99_ms: 1.0,
            errors: 0,
        }];
        let text = table(&medians, &loadgen, 2);
        assert!(
            text.contains("| skiff-server | http | 16 | 3 | 1000 | 500 | 2.000 | 4.000 | 1234 | 0.500 |"),
            "{text}"
        );
        assert!(text.contains("| skiff-server | grpc | 16 | 1 | 800 | 400 |"), "{text}");
    }
}
