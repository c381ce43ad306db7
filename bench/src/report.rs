//! The side-by-side table: one row per peer and connection count, with ratios to named baselines.

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

/// Renders a Markdown table; `ratio_to` names the peers to divide each row's req/s by.
pub fn table(rows: &[Row], ratio_to: &[&str]) -> String {
    let mut out = String::from("| peer | conns | req/s | p50 ms | p99 ms | errors |");
    for base in ratio_to {
        let _ = write!(out, " ÷ {base} |");
    }
    out.push_str("\n|---|---:|---:|---:|---:|---:|");
    out.push_str(&"---:|".repeat(ratio_to.len()));
    out.push('\n');
    for row in rows {
        let s = &row.stats;
        let _ = write!(
            out,
            "| {} | {} | {:.0} | {:.3} | {:.3} | {} |",
            row.peer,
            row.connections,
            s.rps(),
            s.quantile_ms(0.5),
            s.quantile_ms(0.99),
            s.errors
        );
        for base in ratio_to {
            let base_rps =
                rows.iter().find(|r| r.peer == *base && r.connections == row.connections).map(|r| r.stats.rps());
            match base_rps {
                Some(b) if b > 0.0 => {
                    let _ = write!(out, " {:.2}× |", s.rps() / b);
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
    fn ratios_divide_by_the_baseline_at_the_same_connection_count() {
        let stats =
            |ok| Stats { ok, errors: 0, seconds: 1.0, latencies_us: vec![1000, 2000], failures: Default::default() };
        let rows = vec![
            Row { peer: "a".into(), connections: 1, stats: stats(300) },
            Row { peer: "base".into(), connections: 1, stats: stats(100) },
        ];
        let text = table(&rows, &["base"]);
        assert!(text.contains("| a | 1 | 300 | 2.000 | 2.000 | 0 | 3.00× |"), "{text}");
        assert!(text.contains("| base | 1 | 100 |"), "{text}");
    }
}
