//! The report's time axis, as a pure function of the cycles: the time under load (each cycle from
//! its first request until its last answer or, after a burst, until its replicas were all ready)
//! is drawn to scale and fills the chart; a long stretch between (waiting for zero, an idle gap, a
//! burst's settling) is compressed to a narrow band that says how long it was.

/// A compressed stretch is drawn this wide, as a share of the time under load.
const GAP_SHARE: f64 = 0.12;

/// One piece of the axis: `from..to` seconds drawn at `x0..x1` (fractions of the plot's width).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    /// First second.
    pub from: f64,
    /// Last second.
    pub to: f64,
    /// Where it starts, 0 to 1.
    pub x0: f64,
    /// Where it ends.
    pub x1: f64,
    /// Drawn narrower than its length.
    pub compressed: bool,
}

/// The axis from 0 to the run's end.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pieces: Vec<Piece>,
}

impl Timeline {
    /// The axis for a run that ended at `end` with the time under load `windows` (seconds since
    /// the run began, in order).
    pub fn new(windows: &[(f64, f64)], end: f64) -> Timeline {
        let mut shown: Vec<(f64, f64)> = Vec::new();
        for &(from, to) in windows {
            let to = to.max(from + 1e-3);
            match shown.last_mut() {
                Some(last) if from <= last.1 => last.1 = last.1.max(to),
                _ => shown.push((from, to)),
            }
        }
        let end = end.max(shown.last().map_or(1.0, |w| w.1));
        let under_load: f64 = shown.iter().map(|(from, to)| to - from).sum();
        let cap = if shown.is_empty() { f64::INFINITY } else { (under_load * GAP_SHARE).max(1e-3) };
        let mut spans = Vec::new();
        let mut t = 0.0;
        for &(from, to) in &shown {
            if from > t {
                spans.push((t, from, from - t > cap));
            }
            spans.push((from, to, false));
            t = to;
        }
        if end > t {
            spans.push((t, end, end - t > cap));
        }
        let length = |(from, to, compressed): (f64, f64, bool)| if compressed { cap } else { to - from };
        let total: f64 = spans.iter().copied().map(length).sum::<f64>().max(1e-9);
        let mut x = 0.0;
        let pieces = spans
            .into_iter()
            .map(|span| {
                let x0 = x;
                x += length(span) / total;
                Piece { from: span.0, to: span.1, x0, x1: x, compressed: span.2 }
            })
            .collect();
        Timeline { pieces }
    }

    /// Where second `t` is drawn, 0 to 1.
    pub fn x(&self, t: f64) -> f64 {
        let Some(piece) = self.pieces.iter().find(|p| t <= p.to).or(self.pieces.last()) else { return 0.0 };
        let fraction =
            if piece.to > piece.from { ((t - piece.from) / (piece.to - piece.from)).clamp(0.0, 1.0) } else { 0.0 };
        piece.x0 + fraction * (piece.x1 - piece.x0)
    }

    /// The compressed stretches.
    pub fn compressed(&self) -> impl Iterator<Item = &Piece> {
        self.pieces.iter().filter(|p| p.compressed)
    }

    /// Round seconds to label, in the stretches drawn to scale, at least `min_gap` apart (a
    /// fraction of the width).
    pub fn ticks(&self, min_gap: f64) -> Vec<f64> {
        let to_scale: Vec<&Piece> = self.pieces.iter().filter(|p| !p.compressed).collect();
        let seconds: f64 = to_scale.iter().map(|p| p.to - p.from).sum();
        let width: f64 = to_scale.iter().map(|p| p.x1 - p.x0).sum();
        if to_scale.is_empty() || seconds <= 0.0 {
            return Vec::new();
        }
        // About fourteen ticks over the whole width (fewer where they would crowd).
        let step = round_step(seconds / width.max(1e-9) / 14.0);
        let mut ticks: Vec<f64> = Vec::new();
        for piece in to_scale {
            let mut k = (piece.from / step - 1e-9).ceil();
            while k * step <= piece.to + 1e-9 {
                // Rounded to the step's decimals, so that labels read 90.6, not 90.60000000000001.
                let t = (k * step * 1000.0).round() / 1000.0;
                if ticks.last().is_none_or(|last| self.x(t) - self.x(*last) >= min_gap) {
                    ticks.push(t);
                }
                k += 1.0;
            }
        }
        ticks
    }
}

/// A round step (1, 2 or 5 times a power of ten) of about `raw`.
fn round_step(raw: f64) -> f64 {
    let raw = raw.max(1e-3);
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_wait_for_zero_is_compressed_and_the_burst_fills_the_axis() {
        // 90 s waiting for zero, a burst answered and its replicas ready within 2 s, 6 s settling.
        let axis = Timeline::new(&[(90.0, 92.0)], 98.0);
        let compressed: Vec<(f64, f64)> = axis.compressed().map(|p| (p.from, p.to)).collect();
        assert_eq!(compressed, [(0.0, 90.0), (92.0, 98.0)]);
        let under_load = axis.x(92.0) - axis.x(90.0);
        assert!(under_load > 0.75, "the time under load fills {under_load} of the width");
        assert!(axis.x(45.0) > 0.0 && axis.x(45.0) < axis.x(90.0), "the wait keeps its place, narrow");
        assert!(axis.x(0.0) == 0.0 && (axis.x(98.0) - 1.0).abs() < 1e-9);
        let ticks = axis.ticks(0.05);
        assert!(ticks.len() >= 3 && ticks.iter().all(|t| (90.0..=92.0).contains(t)), "{ticks:?}");
    }

    #[test]
    fn short_gaps_stay_to_scale() {
        // A closed loop of 10 s after a baseline of half a second: nothing to compress.
        let axis = Timeline::new(&[(0.5, 10.5)], 10.6);
        assert_eq!(axis.compressed().count(), 0);
        assert!((axis.x(5.3) - 0.5).abs() < 1e-9, "linear: {}", axis.x(5.3));
        assert_eq!(axis.ticks(0.05), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
    }

    #[test]
    fn cycles_with_idle_gaps_between_share_the_axis() {
        let axis = Timeline::new(&[(30.0, 31.0), (70.0, 71.0)], 72.0);
        assert_eq!(axis.compressed().count(), 3, "before, between, after");
        let first = axis.x(31.0) - axis.x(30.0);
        let second = axis.x(71.0) - axis.x(70.0);
        assert!((first - second).abs() < 1e-9 && first > 0.35, "{first} {second}");
    }
}
