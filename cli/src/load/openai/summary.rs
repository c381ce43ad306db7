//! The LLM figures of a `--openai` run, as a pure function of its timed streams: TTFT and
//! inter-token latency percentiles, output tokens and tokens per second (per stream: its output
//! tokens over its end-to-end time; in total: all output tokens over the time under load), for
//! all streams, per phase, and with the streams that met a cold start apart from the others.

use std::time::Duration;

use serde::Serialize;

use super::{Stream, TokensFrom};
use crate::load::phase::Phase;
use crate::load::record::histogram;
use crate::load::summary::Latency;

/// One answered stream, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    /// Sent, since the run began.
    pub sent: Duration,
    /// The phase it counts in (as the request latency's).
    pub phase: Option<Phase>,
    /// Its answer carried the cold-start header.
    pub cold: bool,
    /// Its timing.
    pub stream: Stream,
}

/// Figures of a set of streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Streams.
    pub streams: u64,
    /// Their output tokens.
    pub output_tokens: u64,
    /// Time to the first content token.
    pub ttft: Latency,
    /// Between content events, over all the streams' gaps.
    pub itl: Latency,
    /// Each stream's output tokens over its end-to-end time.
    pub tokens_per_s: Spread,
}

/// Percentiles of a per-stream rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spread {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
}

/// A phase's streams.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhasePart {
    /// The phase.
    pub phase: Phase,
    /// Its figures.
    #[serde(flatten)]
    pub part: Part,
}

/// One stream, for the report and `--json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamView {
    /// Sent, seconds since the run began.
    pub t: f64,
    /// It met a cold start.
    pub cold_start: bool,
    /// Time to first token (none when no content came).
    pub ttft_ms: Option<f64>,
    /// End to end.
    pub end_to_end_ms: f64,
    /// Median gap between its content events.
    pub itl_p50_ms: Option<f64>,
    /// Gaps between its content events.
    pub itls: u64,
    /// Content events.
    pub content_events: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Where those came from.
    pub tokens_from: TokensFrom,
}

/// The `llm` part of the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmSummary {
    /// Every answered stream.
    pub all: Part,
    /// All output tokens over the time under load.
    pub total_tokens_per_s: f64,
    /// Streams whose output tokens are the server's `usage`.
    pub tokens_from_usage: u64,
    /// Streams whose output tokens are their content events, counted (the server sent no usage).
    pub tokens_counted: u64,
    /// The streams whose answers carried the cold-start header.
    pub cold_starts: Part,
    /// The others.
    pub warm: Part,
    /// By the phase each was sent in (only with replica samples).
    pub phases: Vec<PhasePart>,
    /// By second of send time.
    pub series: Vec<LlmSecond>,
    /// Each stream.
    pub streams: Vec<StreamView>,
}

/// The streams sent in one second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmSecond {
    /// Seconds since the run began.
    pub t: u64,
    /// Their TTFT.
    pub ttft: Latency,
    /// Their inter-token latency.
    pub itl: Latency,
}

/// Figures of `streams`.
pub fn part<'a>(streams: impl Iterator<Item = &'a Timed>) -> Part {
    let (mut ttft, mut itl, mut rates, mut count, mut tokens) = (histogram(), histogram(), Vec::new(), 0, 0);
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
    for timed in streams {
        let s = &timed.stream;
        count += 1;
        tokens += s.tokens;
        if let Some(t) = s.ttft {
            ttft.saturating_record(micros(t));
        }
        for gap in &s.gaps {
            itl.saturating_record(micros(*gap));
        }
        if !s.end_to_end.is_zero() {
            rates.push(s.tokens as f64 / s.end_to_end.as_secs_f64());
        }
    }
    Part {
        streams: count,
        output_tokens: tokens,
        ttft: Latency::of(&ttft),
        itl: Latency::of(&itl),
        tokens_per_s: spread(rates),
    }
}

/// Nearest-rank percentiles and the mean.
fn spread(mut values: Vec<f64>) -> Spread {
    if values.is_empty() {
        return Spread::default();
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
    Spread { p50: at(0.5), p90: at(0.9), p99: at(0.99), mean: values.iter().sum::<f64>() / values.len() as f64 }
}

/// The LLM summary of `streams`, over `under_load` of load; phases when the run was sampled.
pub fn summarize(streams: &[Timed], under_load: Duration, sampled: bool) -> LlmSummary {
    let all = part(streams.iter());
    let phases = if sampled {
        Phase::ALL
            .iter()
            .map(|&phase| PhasePart { phase, part: part(streams.iter().filter(|s| s.phase == Some(phase))) })
            .collect()
    } else {
        Vec::new()
    };
    let from_usage = streams.iter().filter(|s| s.stream.tokens_from == TokensFrom::Usage).count() as u64;
    let seconds = under_load.as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    LlmSummary {
        total_tokens_per_s: if seconds > 0.0 { all.output_tokens as f64 / seconds } else { 0.0 },
        all,
        tokens_from_usage: from_usage,
        tokens_counted: streams.len() as u64 - from_usage,
        cold_starts: part(streams.iter().filter(|s| s.cold)),
        warm: part(streams.iter().filter(|s| !s.cold)),
        phases,
        series: (0..streams.iter().map(|s| s.sent.as_secs() + 1).max().unwrap_or(0))
            .filter_map(|t| {
                let second = part(streams.iter().filter(|s| s.sent.as_secs() == t));
                (second.streams > 0).then_some(LlmSecond { t, ttft: second.ttft, itl: second.itl })
            })
            .collect(),
        streams: streams
            .iter()
            .map(|s| {
                let mut gaps = s.stream.gaps.clone();
                gaps.sort_unstable();
                StreamView {
                    t: s.sent.as_secs_f64(),
                    cold_start: s.cold,
                    ttft_ms: s.stream.ttft.map(ms),
                    end_to_end_ms: ms(s.stream.end_to_end),
                    itl_p50_ms: gaps.get(gaps.len().saturating_sub(1) / 2).copied().map(ms),
                    itls: gaps.len() as u64,
                    content_events: s.stream.content_events,
                    output_tokens: s.stream.tokens,
                    tokens_from: s.stream.tokens_from,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(sent_ms: u64, cold: bool, phase: Phase, ttft_ms: u64, gaps_ms: &[u64], from: TokensFrom) -> Timed {
        let ms = Duration::from_millis;
        let gaps: Vec<Duration> = gaps_ms.iter().copied().map(ms).collect();
        let end = ttft_ms + gaps_ms.iter().sum::<u64>();
        let events = gaps.len() as u64 + 1;
        Timed {
            sent: ms(sent_ms),
            phase: Some(phase),
            cold,
            stream: Stream {
                ttft: Some(ms(ttft_ms)),
                gaps,
                content_events: events,
                tokens: if from == TokensFrom::Usage { events + 1 } else { events },
                tokens_from: from,
                end_to_end: ms(end),
            },
        }
    }

    #[test]
    fn cold_streams_are_apart_and_phases_split_the_rest() {
        let streams = [
            timed(0, true, Phase::AtZero, 2000, &[10, 10, 10], TokensFrom::Counted),
            timed(100, false, Phase::Steady, 50, &[10, 20, 10], TokensFrom::Counted),
            timed(200, false, Phase::Steady, 60, &[30], TokensFrom::Usage),
        ];
        let summary = summarize(&streams, Duration::from_secs(2), true);
        assert_eq!((summary.all.streams, summary.all.output_tokens), (3, 4 + 4 + 3));
        assert_eq!((summary.tokens_from_usage, summary.tokens_counted), (1, 2));
        assert_eq!((summary.cold_starts.streams, summary.warm.streams), (1, 2));
        assert!(summary.cold_starts.ttft.p50_ms >= 1999.0 && summary.warm.ttft.max_ms < 61.0);
        assert_eq!(summary.all.itl.count, 7, "every gap of every stream");
        assert_eq!(summary.total_tokens_per_s, 11.0 / 2.0);
        let steady = summary.phases.iter().find(|p| p.phase == Phase::Steady).unwrap();
        assert_eq!((steady.part.streams, steady.part.itl.count), (2, 4));
        assert_eq!(summary.streams[1].itls, 3);
        assert_eq!(summary.series.iter().map(|s| (s.t, s.ttft.count)).collect::<Vec<_>>(), [(0, 3)]);
        assert_eq!(summary.streams[1].itl_p50_ms, Some(10.0));
        assert_eq!(summarize(&streams, Duration::from_secs(2), false).phases, []);
    }

    #[test]
    fn per_stream_rates_are_tokens_over_end_to_end() {
        let streams = [timed(0, false, Phase::Steady, 100, &[100, 100, 100], TokensFrom::Counted)];
        let rates = part(streams.iter()).tokens_per_s;
        assert_eq!((rates.p50, rates.p99, rates.mean), (10.0, 10.0, 10.0));
        assert_eq!(spread(vec![3.0, 1.0, 2.0, 4.0]).p50, 2.0);
        assert_eq!(part([].iter()), Part::default());
    }
}
