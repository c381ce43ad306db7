//! The LLM rows of `skiff load`'s table: output tokens, then TTFT, inter-token latency and tokens
//! per second per stream, each for all streams, then for the ones that met a cold start, the
//! others, and per phase.

use super::summary::{LlmSummary, Part};
use crate::load::table::{percentiles, rate};

/// One metric's figures of a set of streams.
type Figures = fn(&Part) -> String;

/// `(label, value)` rows.
pub fn rows(llm: &LlmSummary) -> Vec<(String, String)> {
    let tokens_from = match (llm.tokens_from_usage, llm.tokens_counted) {
        (_, 0) => "the server's usage".to_owned(),
        (0, _) => "content events counted: the server sent no usage".to_owned(),
        (usage, counted) => format!("usage for {usage} streams, content events counted for {counted}"),
    };
    let mut rows = vec![(
        "Output tokens".to_owned(),
        format!(
            "{} in {} streams, {} tokens/s in total ({tokens_from})",
            llm.all.output_tokens,
            llm.all.streams,
            rate(llm.total_tokens_per_s)
        ),
    )];
    let mut groups = vec![("  met a cold start".to_owned(), &llm.cold_starts), ("  warm".to_owned(), &llm.warm)];
    groups.extend(llm.phases.iter().map(|p| (format!("  sent {}", p.phase.label()), &p.part)));
    let metrics: [(&str, Figures); 3] = [
        ("Time to first token", |p| format!("{:>6} streams  {}", p.streams, percentiles(&p.ttft))),
        ("Inter-token latency", |p| format!("{:>6} gaps     {}", p.itl.count, percentiles(&p.itl))),
        ("Tokens/s per stream", |p| {
            let t = &p.tokens_per_s;
            format!("{:>6} streams  p50 {}  p90 {}  p99 {}", p.streams, rate(t.p50), rate(t.p90), rate(t.p99))
        }),
    ];
    for (name, figures) in metrics {
        rows.push((name.to_owned(), figures(&llm.all)));
        rows.extend(
            groups.iter().filter(|(_, part)| part.streams > 0).map(|(label, part)| (label.clone(), figures(part))),
        );
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::openai::summary::{Timed, summarize};
    use crate::load::openai::{Stream, TokensFrom};
    use std::time::Duration;

    fn stream(cold: bool, tokens_from: TokensFrom) -> Timed {
        let ms = Duration::from_millis;
        let stream = Stream {
            ttft: Some(ms(50)),
            gaps: vec![ms(5)],
            content_events: 2,
            tokens: 2,
            tokens_from,
            end_to_end: ms(60),
        };
        Timed { sent: ms(0), phase: None, cold, stream }
    }

    #[test]
    fn the_rows_say_where_the_tokens_came_from_and_skip_empty_groups() {
        let counted = rows(&summarize(&[stream(false, TokensFrom::Counted)], Duration::from_secs(1), false));
        assert!(counted[0].1.contains("content events counted"), "{counted:?}");
        let labels: Vec<&str> = counted.iter().map(|(label, _)| label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "Output tokens",
                "Time to first token",
                "  warm",
                "Inter-token latency",
                "  warm",
                "Tokens/s per stream",
                "  warm"
            ]
        );
        let mixed = [stream(true, TokensFrom::Usage), stream(false, TokensFrom::Counted)];
        let mixed = rows(&summarize(&mixed, Duration::from_secs(1), false));
        assert!(mixed[0].1.contains("usage for 1 streams, content events counted for 1"), "{mixed:?}");
        assert!(mixed.iter().any(|(label, _)| label == "  met a cold start"));
    }
}
