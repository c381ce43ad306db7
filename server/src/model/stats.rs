//! Per-model inference statistics, as Triton's statistics extension reports them: request and
//! execution counts, and cumulative durations of the request phases. [`Counters`] is the pure
//! accumulation (times passed in); [`Stats`] is the shared, locked copy the server updates.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long one run spent in each of its phases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Phases {
    /// Turning the request's tensors into the runtime's values.
    pub input: Duration,
    /// The run itself.
    pub infer: Duration,
    /// Turning the runtime's outputs back into tensors.
    pub output: Duration,
}

/// A count and the total time of what was counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// How many.
    pub count: u64,
    /// Their cumulative duration, in nanoseconds.
    pub ns: u64,
}

impl Tally {
    fn add(&mut self, took: Duration) {
        self.count += 1;
        self.ns = self.ns.saturating_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
    }
}

/// One successful request's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// Inferences it held: its rows when the model batches, else 1.
    pub inferences: u64,
    /// From its arrival at the model to its outputs.
    pub total: Duration,
    /// From its arrival to the start of its run (a concurrency slot, then an inference thread).
    pub queue: Duration,
    /// The phases of the run that served it (shared with the requests batched with it).
    pub phases: Phases,
}

/// The phase durations of the runs of one batch size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchTally {
    /// Input phase.
    pub input: Tally,
    /// Run phase.
    pub infer: Tally,
    /// Output phase.
    pub output: Tally,
}

/// A model's statistics since the server started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Milliseconds since the Unix epoch of the last request answered; 0 before the first.
    pub last_inference_ms: u64,
    /// Inferences served: a batched request counts each of its rows.
    pub inference_count: u64,
    /// Runs of the model: requests batched together make one.
    pub execution_count: u64,
    /// Requests answered with outputs, and their total durations.
    pub success: Tally,
    /// Requests that failed after reaching the model, and their durations.
    pub fail: Tally,
    /// Successful requests' waits before their runs.
    pub queue: Tally,
    /// Successful requests' input phases.
    pub compute_input: Tally,
    /// Successful requests' runs.
    pub compute_infer: Tally,
    /// Successful requests' output phases.
    pub compute_output: Tally,
    /// Runs by batch size (rows).
    pub batches: BTreeMap<u64, BatchTally>,
}

impl Counters {
    /// Counts a request answered with outputs at `at_ms` (milliseconds since the epoch).
    pub fn success(&mut self, served: &Served, at_ms: u64) {
        self.last_inference_ms = self.last_inference_ms.max(at_ms);
        self.inference_count += served.inferences;
        self.success.add(served.total);
        self.queue.add(served.queue);
        self.compute_input.add(served.phases.input);
        self.compute_infer.add(served.phases.infer);
        self.compute_output.add(served.phases.output);
    }

    /// Counts a request that failed after `took`, at `at_ms`.
    pub fn failure(&mut self, took: Duration, at_ms: u64) {
        self.last_inference_ms = self.last_inference_ms.max(at_ms);
        self.fail.add(took);
    }

    /// Counts one run of `batch_size` rows.
    pub fn execution(&mut self, batch_size: u64, phases: &Phases) {
        self.execution_count += 1;
        let batch = self.batches.entry(batch_size).or_default();
        batch.input.add(phases.input);
        batch.infer.add(phases.infer);
        batch.output.add(phases.output);
    }
}

/// A model's [`Counters`], shared by its request handlers and inference threads.
#[derive(Debug, Default)]
pub struct Stats(Mutex<Counters>);

impl Stats {
    /// A copy of the counters now.
    pub fn snapshot(&self) -> Counters {
        self.lock().clone()
    }

    /// [`Counters::success`], now.
    pub fn success(&self, served: &Served) {
        self.lock().success(served, now_ms());
    }

    /// [`Counters::failure`], now.
    pub fn failure(&self, took: Duration) {
        self.lock().failure(took, now_ms());
    }

    /// [`Counters::execution`].
    pub fn execution(&self, batch_size: u64, phases: &Phases) {
        self.lock().execution(batch_size, phases);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counters> {
        // The counters are whole after every update: a panic elsewhere cannot tear them.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn phases(input: u64, infer: u64, output: u64) -> Phases {
        Phases {
            input: Duration::from_millis(input),
            infer: Duration::from_millis(infer),
            output: Duration::from_millis(output),
        }
    }

    /// Two requests batched into one run of 5 rows, then a lone request, then a failure.
    #[test]
    fn requests_and_runs_accumulate_apart() {
        let mut c = Counters::default();
        let batch = phases(1, 4, 2);
        c.execution(5, &batch);
        c.success(&Served { inferences: 2, total: 10 * MS, queue: 3 * MS, phases: batch }, 1_000);
        c.success(&Served { inferences: 3, total: 11 * MS, queue: 4 * MS, phases: batch }, 1_001);
        let alone = phases(1, 1, 1);
        c.execution(1, &alone);
        c.success(&Served { inferences: 1, total: 5 * MS, queue: 2 * MS, phases: alone }, 1_002);
        c.failure(7 * MS, 999);

        assert_eq!((c.inference_count, c.execution_count, c.last_inference_ms), (6, 2, 1_002));
        assert_eq!(c.success, Tally { count: 3, ns: 26_000_000 });
        assert_eq!(c.fail, Tally { count: 1, ns: 7_000_000 });
        assert_eq!(c.queue, Tally { count: 3, ns: 9_000_000 });
        assert_eq!(c.compute_infer, Tally { count: 3, ns: 9_000_000 });
        assert_eq!(c.compute_output, Tally { count: 3, ns: 5_000_000 });
        assert_eq!(c.batches.keys().copied().collect::<Vec<_>>(), [1, 5]);
        assert_eq!(c.batches[&5].infer, Tally { count: 1, ns: 4_000_000 });
        assert_eq!(c.batches[&1].input, Tally { count: 1, ns: 1_000_000 });
    }

    #[test]
    fn nothing_served_is_all_zero() {
        assert_eq!(Stats::default().snapshot(), Counters::default());
    }
}
