//! Inference threads: each has one ONNX Runtime session and takes jobs from a bounded queue. A
//! run small enough to fit [`inline::INLINE_BUDGET`] is done instead on the async worker that
//! received the request, on whichever session is free (see [`inline`]); everything else runs on the
//! threads, so long inference never holds an async worker. With batching on, every job goes to the
//! threads: a thread gathers the jobs that arrive within the batch window and runs them as one
//! stacked batch.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use ort::session::Session;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::oneshot;

use super::batch;
use super::inline::{self, RunCost};
use super::onnx;
use super::spec::ModelSpec;
use super::stats::{Phases, Stats};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// KServe `batcher` settings: flush at `max_batch_size` rows or after `max_latency`, whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchConfig {
    /// Rows that make a full batch.
    pub max_batch_size: usize,
    /// Longest time the first job of a batch waits for others.
    pub max_latency: Duration,
}

/// A handle to a model's inference threads; dropping every handle stops the threads.
#[derive(Clone)]
pub struct Executor {
    model: Arc<str>,
    jobs: Sender<Job>,
    /// `None` with batching on: every job goes to the threads.
    inline: Option<Arc<Sessions>>,
}

/// What one request's run gave: its outputs (every one, in graph order), when the run started and
/// how long its phases took (a batched run's, shared by the requests in the batch).
#[derive(Debug)]
pub struct Ran {
    /// Outputs in graph order.
    pub outputs: Vec<Tensor>,
    /// When the run started.
    pub started: Instant,
    /// The run's phases.
    pub phases: Phases,
}

/// The model's sessions, each used by its thread or, while free, by an async worker running a small job inline.
struct Sessions {
    spec: Arc<ModelSpec>,
    /// The model's statistics, which count every run.
    stats: Arc<Stats>,
    sessions: Vec<Mutex<Session>>,
    cost: RunCost,
    /// Where the next inline job starts looking for a free session.
    next: AtomicUsize,
}

impl Sessions {
    fn lock(&self, i: usize) -> MutexGuard<'_, Session> {
        // A panic mid-run leaves the session as usable as ONNX Runtime left it.
        self.sessions[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn try_free(&self) -> Option<MutexGuard<'_, Session>> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..self.sessions.len()).find_map(|i| self.sessions[(start + i) % self.sessions.len()].try_lock().ok())
    }

    /// Runs `inputs` on `session`, timing it into the model's run cost and statistics (from the
    /// clock reads of the run's own phases: a failed run counts in neither).
    fn run(&self, session: &mut Session, inputs: Vec<Tensor>) -> Result<Ran> {
        let elements = elements_of(&inputs);
        let rows = if self.spec.batchable() { inputs.first().map_or(1, Tensor::rows) } else { 1 };
        let ran = onnx::run(session, &self.spec, inputs)?;
        let phases = &ran.phases;
        self.cost.observe(phases.input + phases.infer + phases.output, elements);
        self.stats.execution(rows as u64, phases);
        Ok(ran)
    }
}

struct Job {
    inputs: Vec<Tensor>,
    reply: oneshot::Sender<Result<Ran>>,
}

impl Executor {
    /// Starts one thread per session. `queue` bounds the jobs waiting for a thread; every run is
    /// counted in `stats`.
    pub fn start(
        spec: Arc<ModelSpec>,
        stats: Arc<Stats>,
        sessions: Vec<Session>,
        batching: Option<BatchConfig>,
        queue: usize,
        batch_sizes: Histogram,
    ) -> Result<Executor> {
        let (jobs, receiver) = crossbeam_channel::bounded(queue);
        let shared = Arc::new(Sessions {
            spec: spec.clone(),
            stats,
            sessions: sessions.into_iter().map(Mutex::new).collect(),
            cost: RunCost::default(),
            next: AtomicUsize::new(0),
        });
        for i in 0..shared.sessions.len() {
            let worker = Worker {
                index: i,
                sessions: shared.clone(),
                jobs: receiver.clone(),
                batching,
                batch_sizes: batch_sizes.clone(),
            };
            std::thread::Builder::new().name(format!("infer-{}-{i}", spec.name)).spawn(move || worker.run())?;
        }
        Ok(Executor { model: spec.name.as_str().into(), jobs, inline: batching.is_none().then_some(shared) })
    }

    /// Runs one request's inputs (checked, in graph order) and returns every output in graph
    /// order, with the run's timing.
    pub async fn infer(&self, inputs: Vec<Tensor>) -> Result<Ran> {
        if let Some(shared) = &self.inline
            && shared.cost.fits(elements_of(&inputs), inline::INLINE_BUDGET)
            && let Some(mut session) = shared.try_free()
        {
            return shared.run(&mut session, inputs);
        }
        let (reply, answer) = oneshot::channel();
        self.jobs.try_send(Job { inputs, reply }).map_err(|e| match e {
            TrySendError::Full(_) => {
                Error::Overloaded(format!("the inference queue of model '{}' is full", self.model))
            }
            TrySendError::Disconnected(_) => {
                Error::Inference(format!("the inference threads of model '{}' stopped", self.model))
            }
        })?;
        answer.await.map_err(|_| {
            Error::Inference(format!("an inference thread of model '{}' stopped mid-request", self.model))
        })?
    }
}

struct Worker {
    /// Its session in `sessions`.
    index: usize,
    sessions: Arc<Sessions>,
    jobs: Receiver<Job>,
    batching: Option<BatchConfig>,
    batch_sizes: Histogram,
}

impl Worker {
    fn run(self) {
        while let Ok(first) = self.jobs.recv() {
            let mut jobs = match self.batching {
                Some(config) => self.gather(first, config),
                None => vec![first],
            };
            jobs.retain(|job| !job.reply.is_closed());
            if jobs.is_empty() {
                continue;
            }
            self.batch_sizes.observe(jobs.len() as f64);
            for group in batch::group(jobs, |job| job.inputs.as_slice()) {
                self.execute(group);
            }
        }
    }

    /// Collects jobs until the batch holds `max_batch_size` rows or `max_latency` has passed.
    fn gather(&self, first: Job, config: BatchConfig) -> Vec<Job> {
        let deadline = Instant::now() + config.max_latency;
        let mut rows = rows_of(&first);
        let mut jobs = vec![first];
        while rows < config.max_batch_size {
            match self.jobs.recv_deadline(deadline) {
                Ok(job) => {
                    rows += rows_of(&job);
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        jobs
    }

    /// Runs a group of compatible jobs as one batch; when the batch fails, each job runs alone,
    /// so one bad request fails only itself.
    fn execute(&self, mut group: Vec<Job>) {
        let shared = &self.sessions;
        let mut session = shared.lock(self.index);
        if group.len() == 1 {
            let job = group.remove(0);
            let _ = job.reply.send(shared.run(&mut session, job.inputs));
            return;
        }
        let rows: Vec<usize> = group.iter().map(rows_of).collect();
        let stacked = batch::stack(group.iter().map(|job| job.inputs.as_slice()));
        let outcome = shared.run(&mut session, stacked).and_then(|ran| {
            let per_request = batch::split(ran.outputs, &rows).map_err(Error::Inference)?;
            Ok((per_request, ran.started, ran.phases))
        });
        match outcome {
            Ok((per_request, started, phases)) => {
                for (job, outputs) in group.into_iter().zip(per_request) {
                    let _ = job.reply.send(Ok(Ran { outputs, started, phases }));
                }
            }
            Err(e) => {
                tracing::debug!(model = %shared.spec.name, jobs = group.len(), error = %e, "a batch failed; running its jobs one by one");
                for job in group {
                    let _ = job.reply.send(shared.run(&mut session, job.inputs));
                }
            }
        }
    }
}

fn elements_of(inputs: &[Tensor]) -> usize {
    inputs.iter().map(|t| t.data.len()).sum()
}

fn rows_of(job: &Job) -> usize {
    job.inputs.first().map_or(1, Tensor::rows)
}
