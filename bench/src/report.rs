//! The side-by-side table: one row per peer and connection count with the medians over alternating
//! rounds ([`medians`]) and ratios to named baselines ([`median_table`]).

use std::fmt::Write;

use crate::load::Stats;

/// One measured cell.
pub struct Row {
    /// Peer name.
    pub peer: String,
    /// Connections used.
    pub connections: usize,
    /// Figures.
    pub stats: Stats,
}

/// The medians over rounds of one peer at one connection count.
#[derive(Debug, Clone, PartialEq)]
pub struct Median {
    /// Peer name.
    pub peer: String,
    /// Connections used.
    pub connections: usize,
    /// Rounds measured.
    pub rounds: usize,
    /// Median of the rounds' req/s.
    pub rps: f64,
    /// Median of the rounds' p50, ms.
    pub p50_ms: f64,
    /// Median of the rounds' p99, ms.
    pub p99_ms: f64,
    /// Errors over all rounds.
    pub errors: u64,
}

/// The median of `values` (the mean of the middle two for an even count; NaN for none).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Groups `rows` by peer and connection count (in order of first appearance) and takes each
/// figure's median over the rounds.
pub fn medians(rows: &[Row]) -> Vec<Median> {
    let mut keys: Vec<(&str, usize)> = Vec::new();
    for row in rows {
        if !keys.contains(&(row.peer.as_str(), row.connections)) {
            keys.push((row.peer.as_str(), row.connections));
        }
    }
    keys.into_iter()
        .map(|(peer, connections)| {
            let cell: Vec<&Stats> =
                rows.iter().filter(|r| r.peer == peer && r.connections == connections).map(|r| &r.stats).collect();
            Median {
                peer: peer.to_owned(),
                connections,
                rounds: cell.len(),
                rps: median(cell.iter().map(|s| s.rps()).collect()),
                p50_ms: median(cell.iter().map(|s| s.quantile_ms(0.5)).collect()),
                p99_ms: median(cell.iter().map(|s| s.quantile_ms(0.99)).collect()),
                errors: cell.iter().map(|s| s.errors).sum(),
            }
        })
        .collect()
}

/// Renders the medians as a Markdown table sorted by connection count; `ratio_to` names the peers
/// to divide each row's median req/s by.
pub fn median_table(medians: &[Median], ratio_to: &[&str]) -> String {
    let mut sorted: Vec<&Median> = medians.iter().collect();
    sorted.sort_by_key(|m| m.connections);
    let mut out = String::from("| peer | conns | rounds | median req/s | median p50 ms | median p99 ms | errors |");
    for base in ratio_to {
        let _ = write!(out, " ÷ {base} |");
    }
    out.push_str("\n|---|---:|---:|---:|---:|---:|---:|");
    out.push_str(&"---:|".repeat(ratio_to.len()));
    out.push('\n');
    for m in sorted {
        let _ = write!(
            out,
            "| {} | {} | {} | {:.0} | {:.3} | {:.3} | {} |",
            m.peer, m.connections, m.rounds, m.rps, m.p50_ms, m.p99_ms, m.errors
        );
        for base in ratio_to {
            match medians.iter().find(|b| b.peer == *base && b.connections == m.connections) {
                Some(b) if b.rps > 0.0 => {
                    let _ = write!(out, " {:.2}× |", m.rps / b.rps);
                }
                _ => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_take_the_middle_round_of_each_cell() {
        let stats = |ok, p50| Stats {
            ok,
            errors: 1,
            seconds: 1.0,
            latencies_us: vec![p50, p50, p50],
            histogram: None,
            failures: Default::default(),
        };
        let rows = vec![
            Row { peer: "a".into(), connections: 1, stats: stats(300, 1000) },
            Row { peer: "base".into(), connections: 1, stats: stats(100, 500) },
            Row { peer: "a".into(), connections: 1, stats: stats(100, 3000) },
            Row { peer: "base".into(), connections: 1, stats: stats(200, 700) },
            Row { peer: "a".into(), connections: 1, stats: stats(200, 2000) },
            Row { peer: "base".into(), connections: 1, stats: stats(300, 600) },
        ];
        let medians = medians(&rows);
        assert_eq!(medians.len(), 2);
        assert_eq!((medians[0].rounds, medians[0].rps, medians[0].p50_ms, medians[0].errors), (3, 200.0, 2.0, 3));
        let text = median_table(&medians, &["base"]);
        assert!(text.contains("| a | 1 | 3 | 200 | 2.000 | 2.000 | 3 | 1.00× |"), "{text}");
    }
}
