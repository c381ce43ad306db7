//! Time windows over per-second buckets, as Knative's `aggregation` package keeps them.
//!
//! Times are [`Duration`]s since any fixed epoch, truncated to whole seconds (whole ticks for [`MaxWindow`]).

use std::collections::VecDeque;
use std::time::Duration;

use crate::spec::Aggregation;

/// The sum of the weights of a weighted average covers at least this much.
const WEIGHT_PRECISION: f64 = 0.9999;
/// The smallest decay factor, so that long windows do not degrade into a plain mean.
const MIN_SMOOTHING: f64 = 0.2;
/// Averages are rounded to this many decimals, so that float noise never adds a pod through `ceil`.
const DECIMALS: i32 = 6;

/// A ring of one-second buckets holding the metric over a window, averaged linearly or weighted toward the present.
#[derive(Debug, Clone)]
pub struct Window {
    buckets: Vec<f64>,
    /// Second of the first write since the window was last empty.
    first_write: u64,
    /// Second of the latest write; `None` before any.
    last_write: Option<u64>,
    /// Sum of all buckets.
    total: f64,
    aggregation: Aggregation,
    smoothing: f64,
}

impl Window {
    /// A window of `length` (rounded up to whole seconds, at least one).
    pub fn new(length: Duration, aggregation: Aggregation) -> Self {
        let len = length.as_secs() + u64::from(length.subsec_nanos() > 0);
        let len = len.max(1) as usize;
        let smoothing = (1.0 - (1.0 - WEIGHT_PRECISION).powf(1.0 / len as f64)).max(MIN_SMOOTHING);
        Self { buckets: vec![0.0; len], first_write: 0, last_write: None, total: 0.0, aggregation, smoothing }
    }

    fn len(&self) -> u64 {
        self.buckets.len() as u64
    }

    fn slot(&mut self, second: u64) -> &mut f64 {
        let len = self.buckets.len();
        &mut self.buckets[(second % len as u64) as usize]
    }

    /// Adds `value` to the bucket of `at`'s second. Seconds skipped since the last write count as zeros; a write
    /// more than a window after the last one starts the window afresh; a write older than a window is ignored.
    pub fn record(&mut self, at: Duration, value: f64) {
        let second = at.as_secs();
        match self.last_write {
            Some(last) if second == last => {}
            Some(last) if second + self.len() <= last => return,
            Some(last) if second < last => self.first_write = self.first_write.min(second),
            Some(last) if second - last < self.len() => {
                for skipped in last + 1..=second {
                    let bucket = std::mem::take(self.slot(skipped));
                    self.total -= bucket;
                }
                self.last_write = Some(second);
            }
            _ => {
                self.buckets.fill(0.0);
                self.total = 0.0;
                self.first_write = second;
                self.last_write = Some(second);
            }
        }
        *self.slot(second) += value;
        self.total += value;
    }

    /// True when nothing was written during the window before `now`.
    pub fn is_empty(&self, now: Duration) -> bool {
        self.last_write.is_none_or(|last| now.as_secs().saturating_sub(last) > self.len())
    }

    /// The window's average at `now`.
    pub fn average(&self, now: Duration) -> f64 {
        match self.aggregation {
            Aggregation::Linear => self.linear_average(now.as_secs()),
            Aggregation::WeightedExponential => self.weighted_average(now.as_secs()),
        }
    }

    /// The mean over the seconds that hold data: a window that started less than its length ago, or whose
    /// latest seconds have not been written yet, is averaged over the part that has.
    fn linear_average(&self, now: u64) -> f64 {
        let Some(last) = self.last_write else { return 0.0 };
        let written = last - self.first_write + 1;
        let average = if now <= last {
            self.total / written.min(self.len()) as f64
        } else if now - last < self.len() {
            let stale: f64 = (last + 1..=now).map(|second| self.buckets[(second % self.len()) as usize]).sum();
            (self.total - stale) / written.min(self.len() - (now - last)) as f64
        } else {
            return 0.0;
        };
        round(average)
    }

    /// Exponentially weighted: the newest second weighs `smoothing`, each older one `1 - smoothing` times less;
    /// unwritten seconds since the last write count as zeros.
    fn weighted_average(&self, now: u64) -> f64 {
        let Some(last) = self.last_write else { return 0.0 };
        if self.is_empty(Duration::from_secs(now)) {
            return 0.0;
        }
        let decay = 1.0 - self.smoothing;
        let silent = now.saturating_sub(last);
        let mut weight = self.smoothing * decay.powi(silent as i32);
        let mut sum = 0.0;
        for age in 0..self.len().saturating_sub(silent) {
            let Some(second) = last.checked_sub(age) else { break };
            sum += self.buckets[(second % self.len()) as usize] * weight;
            weight *= decay;
        }
        sum
    }
}

fn round(value: f64) -> f64 {
    let scale = 10f64.powi(DECIMALS);
    (value * scale).round() / scale
}

/// The largest value recorded over the last `length`, in buckets of one tick (Knative's `max.TimeWindow`,
/// which the scale-down delay uses).
#[derive(Debug, Clone)]
pub struct MaxWindow {
    /// (tick, value), ticks ascending and values descending: the front is the maximum.
    maxima: VecDeque<(u64, u32)>,
    buckets: u64,
    tick: Duration,
}

impl MaxWindow {
    /// A window of `length`, in buckets of `tick` (rounded up; `tick` is at least 1 s).
    pub fn new(length: Duration, tick: Duration) -> Self {
        let tick = tick.max(Duration::from_secs(1));
        let buckets = length.as_nanos().div_ceil(tick.as_nanos()).max(1) as u64;
        Self { maxima: VecDeque::new(), buckets, tick }
    }

    /// Records `value` at `at`; values at the same tick keep the largest.
    pub fn record(&mut self, at: Duration, value: u32) {
        let tick = (at.as_nanos() / self.tick.as_nanos()) as u64;
        let mut value = value;
        // A smaller or equal older value can never be the maximum again.
        while self.maxima.back().is_some_and(|&(_, older)| older <= value) {
            self.maxima.pop_back();
        }
        while self.maxima.front().is_some_and(|&(t, _)| tick.saturating_sub(t) >= self.buckets) {
            self.maxima.pop_front();
        }
        if let Some(&(t, larger)) = self.maxima.back()
            && t == tick
        {
            value = value.max(larger);
            self.maxima.pop_back();
        }
        self.maxima.push_back((tick, value));
    }

    /// The largest value in the window as of the latest record; 0 before any.
    pub fn current(&self) -> u32 {
        self.maxima.front().map_or(0, |&(_, value)| value)
    }
}

#[cfg(test)]
mod tests;
