//! `--out report.html`: one self-contained page (no script, no external file) with the summary
//! table and inline SVG charts over time of replicas, requests in flight, latency percentiles and
//! requests and errors, rendered here from the [`Summary`]. The time under load fills the charts'
//! width; long waits between (for zero, idle gaps, a burst's settling) are compressed to narrow
//! grey bands labelled with their length ([`Timeline`]).

use std::fmt::Write;
use std::time::Duration;

use super::openai::summary::LlmSecond;
use super::summary::{Latency, Summary};
use super::table::{ms, secs, size, table};
use super::timeline::Timeline;

/// One of a second's LLM latencies (TTFT or inter-token).
type LlmLatency = fn(&LlmSecond) -> &Latency;

/// Chart size and margins, in SVG units.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 210.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 28.0;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Straight segments.
    Line,
    /// Dots, joined only between consecutive seconds.
    Seconds,
    /// Holds each value until the next point (counts that change in steps).
    Steps,
    /// Wide, pale steps drawn under the others (a state such as the autoscaler's panic).
    WideSteps,
    /// Dashed steps.
    DashedSteps,
    /// One bar per point, one second wide.
    Bars,
}

/// One series of a chart.
struct Series {
    name: &'static str,
    colour: &'static str,
    style: Style,
    points: Vec<(f64, f64)>,
}

/// The y axis.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    /// From 0 to a round number.
    Linear,
    /// Powers of ten (latency from microseconds to seconds).
    Log,
}

/// The whole page.
pub fn render(summary: &Summary) -> String {
    let axis = Axis::of(summary);
    let zero_bands = at_zero_bands(summary);
    let starts: Vec<(f64, u32)> = summary.samples.iter().filter(|s| s.starts > 0).map(|s| (s.t, s.starts)).collect();
    let replicas = chart(
        "Replicas",
        "Ready and asked-for replicas, and the asked-for count while the autoscaler panics (red: none ready; \
         orange +N: replicas that became ready)",
        &[
            series(
                "panic",
                "#fca5a5",
                Style::WideSteps,
                summary.samples.iter().map(|s| (s.t, if s.panic { f64::from(s.desired) } else { 0.0 })),
            ),
            series(
                "desired",
                "#9333ea",
                Style::DashedSteps,
                summary.samples.iter().map(|s| (s.t, f64::from(s.desired))),
            ),
            series("ready", "#2563eb", Style::Steps, summary.samples.iter().map(|s| (s.t, f64::from(s.ready)))),
        ],
        &axis,
        Scale::Linear,
        &zero_bands,
        &starts,
    );
    let in_flight = chart(
        "In flight",
        "The most requests of this run waiting for an answer, per sample interval",
        &[series("in flight", "#0891b2", Style::Steps, interval_peaks(summary))],
        &axis,
        Scale::Linear,
        &zero_bands,
        &[],
    );
    let answered = || summary.series.iter().filter(|s| s.requests > 0);
    let latency = chart(
        "Latency",
        "p50 and p99 by second of send time (log scale)",
        &[
            series("p99", "#dc2626", Style::Seconds, answered().map(|s| (axis.middle(s.t as f64), s.p99_ms))),
            series("p50", "#16a34a", Style::Seconds, answered().map(|s| (axis.middle(s.t as f64), s.p50_ms))),
        ],
        &axis,
        Scale::Log,
        &zero_bands,
        &[],
    );
    let errors = chart(
        "Requests",
        "Requests (grey) and errors (red) by second of send time",
        &[
            series(
                "requests/s",
                "#cbd5e1",
                Style::Bars,
                summary.series.iter().map(|s| (s.t as f64, s.requests as f64)),
            ),
            series("errors/s", "#dc2626", Style::Bars, summary.series.iter().map(|s| (s.t as f64, s.errors as f64))),
        ],
        &axis,
        Scale::Linear,
        &zero_bands,
        &[],
    );
    let llm = summary.llm.as_ref().map_or_else(String::new, |llm| {
        let charts: [(&str, &str, LlmLatency); 2] = [
            ("Time to first token", "TTFT p50 and p99 of the streams sent in each second (log scale)", |s| &s.ttft),
            (
                "Inter-token latency",
                "Gaps between content events: p50 and p99 of the streams sent in each second (log scale)",
                |s| &s.itl,
            ),
        ];
        charts
            .iter()
            .map(|&(title, subtitle, latency)| {
                let line = |name: &'static str, colour: &'static str, f: fn(&Latency) -> f64| {
                    series(
                        name,
                        colour,
                        Style::Seconds,
                        llm.series.iter().map(|s| (axis.middle(s.t as f64), f(latency(s)))).filter(|p| p.1 > 0.0),
                    )
                };
                let lines = [line("p99", "#dc2626", |l| l.p99_ms), line("p50", "#16a34a", |l| l.p50_ms)];
                chart(title, subtitle, &lines, &axis, Scale::Log, &zero_bands, &[])
            })
            .collect::<String>()
    });
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>skiff load: {target}</title>\
         <style>{STYLE}</style></head><body><h1>skiff load</h1><p class=\"target\">{target} — {scenario}</p>\
         <pre class=\"summary\">{table}</pre>{cold}{replicas}{in_flight}{latency}{llm}{errors}</body></html>\n",
        cold = cold_starts(summary),
        target = escape(&summary.target),
        scenario = escape(&summary.scenario),
        table = escape(&table(summary)),
    )
}

/// The cold starts from zero as a table, one row each: the model's fetch (its time, size,
/// bytes downloaded, from the cache or not), the spawn and the load; empty without any.
fn cold_starts(summary: &Summary) -> String {
    let Some(cold) = summary.cold_starts.as_ref().filter(|c| !c.starts.is_empty()) else { return String::new() };
    let known = |v: Option<u64>| v.map_or_else(|| "–".to_owned(), |v| ms(v as f64));
    let mut out = String::from(
        "<h2>Cold starts</h2><table class=\"cold\"><tr><th>at</th><th>revision</th><th>fetch</th><th>model</th>\
         <th>downloaded</th><th>from</th><th>spawn</th><th>load</th><th>total</th></tr>",
    );
    for view in &cold.starts {
        let c = &view.start;
        let (fetch, bytes, downloaded, from) = match &c.fetch {
            Some(f) => (
                ms(f.ms as f64),
                size(f.bytes),
                size(f.downloaded),
                format!("{} ({})", f.uri, if f.cached { "cache" } else { "store" }),
            ),
            None => ("–".into(), "–".into(), "–".into(), "–".into()),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{fetch}</td><td>{bytes}</td><td>{downloaded}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            secs(Duration::from_secs_f64(view.t)),
            escape(&c.revision),
            escape(&from),
            known(c.spawn_ms),
            known(c.load_ms),
            known(c.total_ms()),
        );
    }
    out.push_str("</table>");
    out
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:24px;color:#0f172a;max-width:1000px}\
h1{font-size:20px;margin:0 0 4px}.target{color:#475569;margin:0 0 12px}\
pre.summary{background:#f8fafc;border:1px solid #e2e8f0;padding:12px;font-size:12px;overflow-x:auto}\
figure{margin:16px 0}svg{background:#fff;border:1px solid #e2e8f0}\
svg text{font:11px system-ui,sans-serif;fill:#475569}svg .heading{font-size:13px;font-weight:600;fill:#0f172a}\
h2{font-size:15px;margin:16px 0 4px}table.cold{border-collapse:collapse;font-size:12px}\
table.cold td,table.cold th{border:1px solid #e2e8f0;padding:3px 8px;text-align:right}";

fn series(name: &'static str, colour: &'static str, style: Style, points: impl Iterator<Item = (f64, f64)>) -> Series {
    Series { name, colour, style, points: points.collect() }
}

/// Each sample interval's peak in flight, drawn over the interval it was seen in (a sample tells
/// the most since the one before): a burst sent at once rises at once, not along a slope.
fn interval_peaks(summary: &Summary) -> impl Iterator<Item = (f64, f64)> + '_ {
    let starts = std::iter::once(0.0).chain(summary.in_flight.iter().map(|s| s.t));
    starts.zip(&summary.in_flight).map(|(from, s)| (from, s.requests as f64))
}

/// Time spans (seconds) in which the samples saw no ready replica.
fn at_zero_bands(summary: &Summary) -> Vec<(f64, f64)> {
    let mut bands = Vec::new();
    for pair in summary.samples.windows(2) {
        if pair[0].ready == 0 {
            match bands.last_mut() {
                Some((_, end)) if *end == pair[0].t => *end = pair[1].t,
                _ => bands.push((pair[0].t, pair[1].t)),
            }
        }
    }
    bands
}

/// A round step for about four ticks up to `max`.
fn step(max: f64) -> f64 {
    let raw = (max / 4.0).max(1e-9);
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power)
}

/// The y range and its ticks.
fn y_axis(values: impl Iterator<Item = f64> + Clone, scale: Scale) -> (f64, f64, Vec<f64>) {
    match scale {
        Scale::Linear => {
            let max = values.fold(0.0, f64::max);
            let step = step(max.max(1.0)).max(if max <= 4.0 { 1.0 } else { 0.0 });
            let top = (max / step).ceil().max(1.0) * step;
            let ticks = (0..=((top / step).round() as usize)).map(|i| i as f64 * step).collect();
            (0.0, top, ticks)
        }
        Scale::Log => {
            let positive = values.filter(|v| *v > 0.0);
            let low = positive.clone().fold(f64::INFINITY, f64::min);
            let high = positive.fold(0.0, f64::max);
            let (low, high) = if high > 0.0 { (low.log10().floor(), high.log10().ceil()) } else { (0.0, 1.0) };
            let high = if high <= low { low + 1.0 } else { high };
            // Within two decades, 2 and 5 times each power of ten too.
            let between: &[f64] = if high - low <= 2.0 { &[1.0, 2.0, 5.0] } else { &[1.0] };
            let ticks = ((low as i32)..=(high as i32))
                .flat_map(|p| between.iter().map(move |m| m * 10f64.powi(p)))
                .filter(|t| *t <= 10f64.powf(high) * (1.0 + 1e-9))
                .collect();
            (10f64.powf(low), 10f64.powf(high), ticks)
        }
    }
}

fn chart(
    title: &str,
    caption: &str,
    all: &[Series],
    axis: &Axis,
    scale: Scale,
    bands: &[(f64, f64)],
    marks: &[(f64, u32)],
) -> String {
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |t: f64| LEFT + axis.timeline.x(t) * plot_w;
    let (y_low, y_high, ticks) = y_axis(all.iter().flat_map(|s| s.points.iter().map(|p| p.1)), scale);
    let y = |v: f64| {
        let fraction = match scale {
            Scale::Linear => v / y_high,
            Scale::Log => (v.max(y_low).log10() - y_low.log10()) / (y_high.log10() - y_low.log10()),
        };
        TOP + plot_h - fraction.clamp(0.0, 1.0) * plot_h
    };
    let id = title.to_lowercase().replace(' ', "-");
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<figure id=\"chart-{id}\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{WIDTH}\" \
         height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" aria-label=\"{title}\"><title>{title}</title>\
         <text class=\"heading\" x=\"{LEFT}\" y=\"16\">{title}</text>\
         <text x=\"{LEFT}\" y=\"28\">{}</text>",
        escape(caption)
    );
    for (from, to) in bands {
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{plot_h}\" fill=\"#fee2e2\"/>",
            x(*from),
            (x(*to) - x(*from)).max(1.0)
        );
    }
    for tick in &ticks {
        let label = match scale {
            Scale::Linear => format!("{tick}"),
            Scale::Log => ms(*tick),
        };
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e2e8f0\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y(*tick) + 4.0,
            y = y(*tick)
        );
    }
    for piece in axis.timeline.compressed() {
        let (from, to) = (LEFT + piece.x0 * plot_w, LEFT + piece.x1 * plot_w);
        let _ = write!(
            svg,
            "<g class=\"compressed\"><rect x=\"{from:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{plot_h}\" \
             fill=\"#e2e8f0\" fill-opacity=\"0.7\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">\
             {}</text></g>",
            (to - from).max(1.0),
            (from + to) / 2.0,
            HEIGHT - 10.0,
            gap_label(piece.to - piece.from)
        );
    }
    for t in axis.timeline.ticks(56.0 / plot_w) {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x(t),
            HEIGHT - 10.0,
            secs(Duration::from_secs_f64(t))
        );
    }
    for (i, s) in all.iter().enumerate() {
        svg.push_str(&draw(s, axis, &x, &y, y(if scale == Scale::Log { y_low } else { 0.0 })));
        let lx = WIDTH - RIGHT - 110.0 * (all.len() - i) as f64;
        let _ = write!(
            svg,
            "<rect x=\"{lx:.1}\" y=\"8\" width=\"12\" height=\"4\" fill=\"{}\"/><text x=\"{:.1}\" y=\"14\">{}</text>",
            s.colour,
            lx + 16.0,
            s.name
        );
    }
    for (t, n) in marks {
        let _ = write!(
            svg,
            "<g class=\"start\"><line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"#f59e0b\" \
             stroke-width=\"3\"/><text x=\"{3:.1}\" y=\"{4:.1}\" style=\"fill:#b45309\">+{n}</text></g>",
            x(*t),
            TOP + plot_h - 14.0,
            TOP + plot_h,
            x(*t) + 4.0,
            TOP + plot_h - 4.0
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{0:.1}\" stroke=\"#94a3b8\"/>\
         <line x1=\"{LEFT}\" x2=\"{1:.1}\" y1=\"{0:.1}\" y2=\"{0:.1}\" stroke=\"#94a3b8\"/></svg></figure>",
        TOP + plot_h,
        WIDTH - RIGHT
    );
    svg
}

fn draw(s: &Series, axis: &Axis, x: &impl Fn(f64) -> f64, y: &impl Fn(f64) -> f64, base: f64) -> String {
    if s.points.is_empty() {
        return String::new();
    }
    match s.style {
        Style::Bars => s
            .points
            .iter()
            .filter(|p| p.1 > 0.0)
            .map(|&(t, v)| {
                let (from, to) = axis.second(t);
                let width = ((x(to) - x(from)) * 0.9).max(1.0);
                format!(
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
                    x(from),
                    y(v),
                    (base - y(v)).max(0.5),
                    s.colour
                )
            })
            .collect(),
        Style::Seconds => {
            // The first series' dots are larger, so that equal values of two stay visible.
            let r = if s.name == "p99" { 4.0 } else { 2.5 };
            let mut d = String::new();
            let mut dots = String::new();
            for (i, &(t, v)) in s.points.iter().enumerate() {
                let joined = i > 0 && t - s.points[i - 1].0 <= 1.0 + 1e-9;
                let _ = write!(d, "{}{:.1},{:.1}", if joined { 'L' } else { 'M' }, x(t), y(v));
                let _ = write!(dots, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r}\" fill=\"{}\"/>", x(t), y(v), s.colour);
            }
            format!("<path d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>{dots}", s.colour)
        }
        style => {
            let mut d = String::new();
            for (i, &(t, v)) in s.points.iter().enumerate() {
                let command = if i == 0 { 'M' } else { 'L' };
                if i > 0 && style != Style::Line {
                    let _ = write!(d, "L{:.1},{:.1}", x(t), y(s.points[i - 1].1));
                }
                let _ = write!(d, "{command}{:.1},{:.1}", x(t), y(v));
            }
            if style != Style::Line {
                let _ = write!(d, "L{:.1},{:.1}", WIDTH - RIGHT, y(s.points[s.points.len() - 1].1));
            }
            let dash = if style == Style::DashedSteps { " stroke-dasharray=\"6 4\"" } else { "" };
            let width = if style == Style::WideSteps { 7 } else { 2 };
            format!("<path d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{width}\"{dash}/>", s.colour)
        }
    }
}

/// The charts' time axis and the time under load it fills.
struct Axis {
    timeline: Timeline,
    windows: Vec<(f64, f64)>,
}

impl Axis {
    /// Each cycle under load, until its last answer or, when later, until its replicas were all
    /// ready; the run ends at the last sample or answer.
    fn of(summary: &Summary) -> Axis {
        let windows: Vec<(f64, f64)> = summary
            .cycle_results
            .iter()
            .map(|c| {
                let ready = c.time_to_needed_s.map_or(c.loaded_s, |t| c.start_s + t);
                (c.start_s, c.loaded_s.max(ready).min(c.end_s.max(c.loaded_s)))
            })
            .collect();
        let end = summary
            .samples
            .iter()
            .map(|s| s.t)
            .chain(summary.in_flight.iter().map(|s| s.t))
            .chain(summary.cycle_results.iter().map(|c| c.end_s))
            .fold(0.0, f64::max);
        Axis { timeline: Timeline::new(&windows, end), windows }
    }

    /// The second of send time from `t`, as drawn: within the time under load that holds it.
    fn second(&self, t: f64) -> (f64, f64) {
        self.windows
            .iter()
            .find(|(from, to)| *from < t + 1.0 && *to > t)
            .map_or((t, t + 1.0), |(from, to)| (t.max(*from), (t + 1.0).min(*to)))
    }

    /// The middle of the second from `t`, as drawn.
    fn middle(&self, t: f64) -> f64 {
        let (from, to) = self.second(t);
        (from + to) / 2.0
    }
}

/// A compressed stretch's length, to a tenth of a second below 10 s: `⋯2.0s⋯`, `⋯87s⋯`.
fn gap_label(seconds: f64) -> String {
    if seconds < 10.0 { format!("⋯{seconds:.1}s⋯") } else { format!("⋯{seconds:.0}s⋯") }
}

/// Text safe inside HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::coldstart::{ColdStart, Fetch};
    use crate::load::record::{Cycle, Record, Sample};
    use crate::load::summary::{About, summarize};
    use std::time::Duration;

    fn report() -> String {
        let ms = Duration::from_millis;
        let mut record = Record {
            samples: vec![
                Sample { at: ms(0), ready: 0, desired: 0, starts: 0, panic: false },
                Sample { at: ms(500), ready: 0, desired: 1, starts: 0, panic: true },
                Sample { at: ms(1000), ready: 2, desired: 2, starts: 2, panic: true },
            ],
            in_flight: vec![(ms(0), 0), (ms(500), 20), (ms(1000), 0)],
            cycles: vec![Cycle { began: ms(10), loaded: ms(1104), ended: ms(1200), ok: 1 }],
            ..Record::default()
        };
        record.cold_starts = vec![(
            ms(1000),
            ColdStart {
                revision: "iris-predictor-00001".into(),
                fetch: Some(Fetch {
                    uri: "s3://models/<1G>".into(),
                    bytes: 1 << 30,
                    downloaded: 0,
                    cached: true,
                    ms: 4,
                }),
                spawn_ms: Some(12),
                load_ms: Some(2100),
            },
        )];
        record.add(ms(10), None, ms(900), None, None);
        record.add(ms(1100), None, ms(3), Some("HTTP 503".into()), None);
        render(&summarize(&record, &about()))
    }

    fn about() -> About {
        About {
            target: "http://127.0.0.1:8080/v2/models/iris/infer (Host <iris>)".into(),
            scenario: "burst of 20".into(),
            cycles: 1,
            rate: None,
            replica_source: Some("skiff up".into()),
        }
    }

    #[test]
    fn the_report_is_one_page_with_four_titled_charts_and_nothing_external() {
        let html = report();
        for title in ["Replicas", "In flight", "Latency", "Requests"] {
            assert!(html.contains(&format!("<title>{title}</title>")), "no {title} chart");
        }
        assert_eq!(html.matches("<svg ").count(), 4);
        assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));
        assert!(html.contains("Host &lt;iris&gt;"), "text is escaped");
        assert!(html.contains("fill=\"#fee2e2\""), "time at zero is shaded");
        assert!(html.contains("class=\"start\""), "replica starts are marked");
        assert!(html.contains(">panic</text>"), "the autoscaler's panic is drawn beside the replicas");
    }

    #[test]
    fn an_openai_run_adds_ttft_and_inter_token_charts() {
        use crate::load::openai::{Stream, TokensFrom};
        let ms = Duration::from_millis;
        let mut record = Record {
            cycles: vec![Cycle { began: ms(0), loaded: ms(2000), ended: ms(2000), ok: 1 }],
            ..Record::default()
        };
        let stream = Stream {
            ttft: Some(ms(700)),
            gaps: vec![ms(20), ms(30)],
            content_events: 3,
            tokens: 3,
            tokens_from: TokensFrom::Counted,
            end_to_end: ms(750),
        };
        record.add(ms(10), None, ms(750), None, Some(ms(600)));
        record.add_stream(ms(10), None, true, stream);
        let html = render(&summarize(&record, &about()));
        for title in ["Time to first token", "Inter-token latency"] {
            assert!(html.contains(&format!("<title>{title}</title>")), "no {title} chart");
        }
        assert_eq!(html.matches("<svg ").count(), 6);
        assert!(html.contains("Time to first token     "), "the table has the LLM rows");
        assert!(!report().contains("Time to first token"), "no LLM charts without streams");
    }

    #[test]
    fn the_report_tables_each_cold_start_with_its_fetch() {
        let html = report();
        assert!(
            html.contains(
                "<tr><td>1s</td><td>iris-predictor-00001</td><td>4.00ms</td><td>1.00 GiB</td><td>0 B</td>\
                 <td>s3://models/&lt;1G&gt; (cache)</td><td>12.0ms</td><td>2.10s</td><td>2.12s</td></tr>"
            ),
            "{html}"
        );
        assert!(html.contains("fetch 4.00ms (1.00 GiB from the cache, s3://models/&lt;1G&gt;)"), "and in the summary");
        let sampled = Record {
            samples: vec![Sample { at: Duration::ZERO, ready: 1, desired: 1, starts: 0, panic: false }],
            ..Record::default()
        };
        let summary = summarize(&sampled, &about());
        assert!(summary.cold_starts.as_ref().is_some_and(|c| c.starts.is_empty()));
        assert!(!render(&summary).contains("<h2>Cold starts"), "no cold start, no table");
    }

    #[test]
    fn a_peak_in_flight_covers_the_interval_it_was_seen_in() {
        let ms = Duration::from_millis;
        let record = Record { in_flight: vec![(ms(250), 0), (ms(500), 100), (ms(750), 0)], ..Record::default() };
        let peaks: Vec<(f64, f64)> = interval_peaks(&summarize(&record, &about())).collect();
        assert_eq!(peaks, [(0.0, 0.0), (0.25, 100.0), (0.5, 0.0)]);
    }

    #[test]
    fn axes_get_round_ticks() {
        assert_eq!(step(20.0), 5.0);
        assert_eq!(step(3.0), 1.0);
        assert_eq!(y_axis([0.0, 3.0].into_iter(), Scale::Linear), (0.0, 3.0, vec![0.0, 1.0, 2.0, 3.0]));
        let (low, high, ticks) = y_axis([0.8, 1200.0].into_iter(), Scale::Log);
        assert_eq!((low, high, ticks.len()), (0.1, 10000.0, 6));
    }
}
