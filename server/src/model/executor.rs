//! Inference threads: each owns one ONNX Runtime session and takes jobs from a bounded queue, so
//! inference never runs on the async runtime's workers. With batching on, a thread gathers the jobs
//! that arrive within the batch window and runs them as one stacked batch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use ort::session::Session;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::oneshot;

use super::batch;
use super::onnx;
use super::spec::ModelSpec;
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
}

struct Job {
    inputs: Vec<Tensor>,
    reply: oneshot::Sender<Result<Vec<Tensor>>>,
}

impl Executor {
    /// Starts one thread per session. `queue` bounds the jobs waiting for a thread.
    pub fn start(
        spec: Arc<ModelSpec>,
        sessions: Vec<Session>,
        batching: Option<BatchConfig>,
        queue: usize,
        batch_sizes: Histogram,
    ) -> Result<Executor> {
        let (jobs, receiver) = crossbeam_channel::bounded(queue);
        for (i, session) in sessions.into_iter().enumerate() {
            let worker = Worker {
                session,
                spec: spec.clone(),
                jobs: receiver.clone(),
                batching,
                batch_sizes: batch_sizes.clone(),
            };
            std::thread::Builder::new().name(format!("infer-{}-{i}", spec.name)).spawn(move || worker.run())?;
        }
        Ok(Executor { model: spec.name.as_str().into(), jobs })
    }

    /// Runs one request's inputs (checked, in graph order) and returns every output in graph order.
    pub async fn infer(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
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
    session: Session,
    spec: Arc<ModelSpec>,
    jobs: Receiver<Job>,
    batching: Option<BatchConfig>,
    batch_sizes: Histogram,
}

impl Worker {
    fn run(mut self) {
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
    fn execute(&mut self, mut group: Vec<Job>) {
        if group.len() == 1 {
            let job = group.remove(0);
            let _ = job.reply.send(onnx::run(&mut self.session, &self.spec, job.inputs));
            return;
        }
        let rows: Vec<usize> = group.iter().map(rows_of).collect();
        let stacked = batch::stack(group.iter().map(|job| job.inputs.as_slice()));
        let outcome = onnx::run(&mut self.session, &self.spec, stacked)
            .and_then(|outputs| batch::split(outputs, &rows).map_err(Error::Inference));
        match outcome {
            Ok(per_request) => {
                for (job, outputs) in group.into_iter().zip(per_request) {
                    let _ = job.reply.send(Ok(outputs));
                }
            }
            Err(e) => {
                tracing::debug!(model = %self.spec.name, jobs = group.len(), error = %e, "a batch failed; running its jobs one by one");
                for job in group {
                    let _ = job.reply.send(onnx::run(&mut self.session, &self.spec, job.inputs));
                }
            }
        }
    }
}

fn rows_of(job: &Job) -> usize {
    job.inputs.first().map_or(1, Tensor::rows)
}
