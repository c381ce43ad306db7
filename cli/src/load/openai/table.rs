//! The LLM rows of `skiff load`'s table: TTFT, inter-token latency, output tokens and tokens per
//! second, for all streams, the ones that met a cold start, the others, and per phase.

use super::summary::{LlmSummary, Part};
use crate::load::table::{percentiles, rate};

/// `(label, value)` rows.
pub fn rows(llm: &LlmSummary) -> Vec<(String, String)> {
    let tokens_from = match (llm.tokens_from_usage, llm.tokens_counted) {
        (_, 0) => "the server's usage".to_owned(),
        (0, _) => "content events counted (the server sent no usage)".to_owned(),
        (usage, counted) => format!("usage for {usage} streams, content events counted for {counted}"),
    };
    let mut rows = vec![(
        "Output tokens".to_owned(),
        format!(
            "{} in {} streams, {} tokens/s in total; from {tokens_from}",
            llm.all.output_tokens,
            llm.all.streams,
            rate(llm.total_tokens_per_s)
        ),
    )];
    let mut part = |label: &str, part: &Part| {
        if part.streams == 0 {
            return;
        }
        rows.push((format!("{label} TTFT"), format!("{:>6} streams  {}", part.streams, percentiles(&part.ttft))));
        rows.push((format!("{label} ITL"), format!("{:>6} gaps     {}", part.itl.count, percentiles(&part.itl))));
        let t = &part.tokens_per_s;
        rows.push((
            format!("{label} tokens/s"),
            format!("per stream p50 {}  p90 {}  p99 {}", rate(t.p50), rate(t.p90), rate(t.p99)),
        ));
    };
    part("All", &llm.all);
    part("  met a cold start", &llm.cold_starts);
    part("  warm", &llm.warm);
    for p in &llm.phases {
        part(&format!("  sent {}", p.phase.label()), &p.part);
    }
    rows
}
