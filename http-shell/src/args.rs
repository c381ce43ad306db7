//! The command-line groups `skiff-server` and the queue-proxy (`skiff-activator queue-proxy`) both
//! take, each flattened into both binaries' configs as [`crate::logger::LoggerArgs`] is:
//! [`AdmissionArgs`] (containerConcurrency and the queue in front of it), [`BatchingArgs`] (KServe's
//! batcher) and [`DrainArgs`] (the drain on shutdown). They live in the HTTP shell because it is
//! the one crate both binaries depend on, and the settings are the shell's own: it admits, batches
//! and drains in front of what each binary serves. Each group checks its values, so both binaries
//! refuse the same command lines with the same messages, and writes itself back as flags
//! (`to_args`) for the control plane's argument builders (`skiff_api::serving::args`), whose round
//! trips through each binary's parser keep the two sides' names in step.

use std::time::Duration;

use crate::limits::{MAX_SECS, ServeLimits, check_concurrency, check_secs};

/// Requests that may wait for each concurrency slot when `--max-queued` is not given: the queue
/// rule, `--max-queued` = 10 × `--container-concurrency` (the one definition).
pub const QUEUE_PER_SLOT: usize = 10;

/// Most requests that may queue for a slot: well past any real queue, and far inside what the
/// queue's arithmetic takes.
pub const MAX_QUEUED: usize = 1 << 28;

/// The longest a batch may wait to fill, in milliseconds: as long as any other duration may be.
pub const MAX_LATENCY_MS: u64 = MAX_SECS * 1000;

/// How many requests are served at once, and how many may wait for a slot (Knative's
/// `containerConcurrency` and its queue).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct AdmissionArgs {
    /// Requests served at once (KServe `containerConcurrency`); 0 = unlimited.
    #[arg(long, default_value_t = 0)]
    pub container_concurrency: usize,
    /// Requests that may wait for a slot before 503 (default: 10 × container concurrency).
    #[arg(long)]
    pub max_queued: Option<usize>,
}

impl AdmissionArgs {
    /// Checks the values clap cannot; each message names the flag and the allowed range.
    pub fn validate(&self) -> Result<(), String> {
        check_concurrency(self.container_concurrency)?;
        match self.max_queued {
            Some(queued) if queued > MAX_QUEUED => Err(format!("--max-queued {queued} is more than {MAX_QUEUED}")),
            _ => Ok(()),
        }
    }

    /// Requests that may queue for a slot: `--max-queued`, else [`QUEUE_PER_SLOT`] per slot.
    pub fn max_queued(&self) -> usize {
        self.max_queued.unwrap_or(self.container_concurrency.saturating_mul(QUEUE_PER_SLOT))
    }

    /// The flags that give these values: a concurrency only when limited, a queue only when set.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.container_concurrency > 0 {
            push(&mut args, "--container-concurrency", self.container_concurrency);
        }
        if let Some(queued) = self.max_queued {
            push(&mut args, "--max-queued", queued);
        }
        args
    }
}

/// KServe's batcher (`predictor.batcher`): `skiff-server` stacks concurrent requests' rows into one
/// run of a model; the queue-proxy joins concurrent V1 `:predict` instances into one request to its
/// container.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct BatchingArgs {
    /// Combine concurrent requests into one batch (KServe `predictor.batcher`).
    #[arg(long)]
    pub enable_batching: bool,
    /// Rows (skiff-server) or instances (queue-proxy) that make a full batch.
    #[arg(long, default_value_t = 32)]
    pub max_batch_size: usize,
    /// Milliseconds a batch waits to fill, from its first request.
    #[arg(long, default_value_t = 500)]
    pub max_latency_ms: u64,
}

impl Default for BatchingArgs {
    /// Off, with KServe's sizes: 32 per batch, 500 ms.
    fn default() -> BatchingArgs {
        BatchingArgs { enable_batching: false, max_batch_size: 32, max_latency_ms: 500 }
    }
}

impl BatchingArgs {
    /// Checks the sizes when batching is on (they are unused otherwise); each message names the
    /// flag and the allowed range.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enable_batching {
            return Ok(());
        }
        if self.max_batch_size == 0 {
            return Err("--max-batch-size must be at least 1".into());
        }
        if self.max_latency_ms == 0 {
            return Err("--max-latency-ms must be at least 1 when batching is on".into());
        }
        if self.max_latency_ms > MAX_LATENCY_MS {
            return Err(format!("--max-latency-ms {} is more than {MAX_LATENCY_MS} (a day)", self.max_latency_ms));
        }
        Ok(())
    }

    /// How long a batch waits to fill.
    pub fn max_latency(&self) -> Duration {
        Duration::from_millis(self.max_latency_ms)
    }

    /// The flags that give these values: `--enable-batching` when on, each size when not the
    /// default.
    pub fn to_args(&self) -> Vec<String> {
        let default = BatchingArgs::default();
        let mut args = Vec::new();
        if self.enable_batching {
            args.push("--enable-batching".to_owned());
        }
        if self.max_batch_size != default.max_batch_size {
            push(&mut args, "--max-batch-size", self.max_batch_size);
        }
        if self.max_latency_ms != default.max_latency_ms {
            push(&mut args, "--max-latency-ms", self.max_latency_ms);
        }
        args
    }
}

/// The drain on SIGTERM: serve on with readiness off for a while (Knative's drain sleep), then let
/// in-flight requests finish. One name for the delay, `--drain-delay-secs`, as the router and the
/// queue-proxy always called it and as [`ServeLimits::drain_delay`] does; `--shutdown-delay-secs`,
/// `skiff-server`'s name before, stays a hidden alias so that existing command lines keep working.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct DrainArgs {
    /// Seconds to keep serving after SIGTERM, with readiness off, before closing the listener:
    /// time for routers and activators to see the pod leave its EndpointSlice.
    #[arg(long, default_value_t = 0, alias = "shutdown-delay-secs")]
    pub drain_delay_secs: u64,
    /// Seconds to let in-flight requests finish after SIGTERM.
    #[arg(long, default_value_t = 30)]
    pub drain_timeout_secs: u64,
}

impl Default for DrainArgs {
    /// No delay, 30 s for in-flight requests.
    fn default() -> DrainArgs {
        DrainArgs { drain_delay_secs: 0, drain_timeout_secs: 30 }
    }
}

impl DrainArgs {
    /// Checks both durations against [`MAX_SECS`]; each message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        check_secs("drain-delay-secs", self.drain_delay_secs)?;
        check_secs("drain-timeout-secs", self.drain_timeout_secs)
    }

    /// `limits` with this drain.
    pub fn limits(&self, limits: ServeLimits) -> ServeLimits {
        ServeLimits {
            drain_delay: Duration::from_secs(self.drain_delay_secs),
            drain_timeout: Duration::from_secs(self.drain_timeout_secs),
            ..limits
        }
    }

    /// The flags that give these values: each when not the default.
    pub fn to_args(&self) -> Vec<String> {
        let default = DrainArgs::default();
        let mut args = Vec::new();
        if self.drain_delay_secs != default.drain_delay_secs {
            push(&mut args, "--drain-delay-secs", self.drain_delay_secs);
        }
        if self.drain_timeout_secs != default.drain_timeout_secs {
            push(&mut args, "--drain-timeout-secs", self.drain_timeout_secs);
        }
        args
    }
}

/// Appends `flag value`.
pub(crate) fn push(args: &mut Vec<String>, flag: &str, value: impl ToString) {
    args.extend([flag.to_owned(), value.to_string()]);
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use proptest::prelude::*;

    use super::*;
    use crate::MAX_CONCURRENCY;
    use crate::logger::LoggerArgs;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        admission: AdmissionArgs,
        #[command(flatten)]
        batching: BatchingArgs,
        #[command(flatten)]
        drain: DrainArgs,
        #[command(flatten)]
        logger: LoggerArgs,
    }

    fn parse(args: &[String]) -> Cli {
        Cli::try_parse_from(std::iter::once("groups").chain(args.iter().map(String::as_str))).unwrap()
    }

    #[test]
    fn defaults_are_the_parsers_and_write_no_flags() {
        let parsed = parse(&[]);
        assert_eq!(parsed.admission, AdmissionArgs::default());
        assert_eq!(parsed.batching, BatchingArgs::default());
        assert_eq!(parsed.drain, DrainArgs::default());
        assert!(AdmissionArgs::default().to_args().is_empty());
        assert!(BatchingArgs::default().to_args().is_empty());
        assert!(DrainArgs::default().to_args().is_empty());
    }

    #[test]
    fn each_group_reads_back_what_it_writes() {
        let admission = AdmissionArgs { container_concurrency: 4, max_queued: Some(7) };
        let batching = BatchingArgs { enable_batching: true, max_batch_size: 8, max_latency_ms: 20 };
        let drain = DrainArgs { drain_delay_secs: 3, drain_timeout_secs: 40 };
        let args = [admission.to_args(), batching.to_args(), drain.to_args()].concat();
        assert_eq!(
            args.join(" "),
            "--container-concurrency 4 --max-queued 7 --enable-batching --max-batch-size 8 --max-latency-ms 20 \
             --drain-delay-secs 3 --drain-timeout-secs 40"
        );
        let parsed = parse(&args);
        assert_eq!((parsed.admission, parsed.batching, parsed.drain), (admission, batching, drain));
    }

    /// A name as the control plane writes them (never empty, never starting with `-`).
    const NAME: &str = "[a-z0-9][a-z0-9.-]{0,15}";

    fn logger() -> impl Strategy<Value = LoggerArgs> {
        let identity = (NAME, "|[a-z]{1,8}", "|[a-z]{1,8}", NAME, "|[a-z][a-z0-9-]{0,11}");
        let sinks = (any::<bool>(), prop::collection::vec(NAME, 0..3), prop::collection::vec(NAME, 0..3));
        let mode = prop::sample::select(vec!["all", "request", "response"]);
        (NAME, mode, identity, sinks).prop_map(|(url, mode, identity, sinks)| LoggerArgs {
            logger_url: Some(format!("http://{url}/events")),
            logger_mode: mode.into(),
            logger_source: format!("http://{}", identity.0),
            inference_service: identity.1,
            namespace: identity.2,
            component: identity.3,
            revision: identity.4,
            logger_allow_loopback: sinks.0,
            logger_protected_hosts: sinks.1,
            logger_allowed_hosts: sinks.2,
        })
    }

    proptest! {
        #[test]
        fn any_values_read_back_as_written(
            admission in (0..=MAX_CONCURRENCY, prop::option::of(0..=MAX_QUEUED)),
            batching in (any::<bool>(), 1..=1usize << 20, 1..=MAX_LATENCY_MS),
            drain in (0..=MAX_SECS, 0..=MAX_SECS),
            logger in prop::option::of(logger()),
        ) {
            let admission = AdmissionArgs { container_concurrency: admission.0, max_queued: admission.1 };
            let (enable_batching, max_batch_size, max_latency_ms) = batching;
            let batching = BatchingArgs { enable_batching, max_batch_size, max_latency_ms };
            let drain = DrainArgs { drain_delay_secs: drain.0, drain_timeout_secs: drain.1 };
            let logger = logger.unwrap_or_default();
            let args = [admission.to_args(), batching.to_args(), drain.to_args(), logger.to_args()].concat();
            let parsed = parse(&args);
            prop_assert!(admission.validate().and(batching.validate()).and(drain.validate()).is_ok());
            prop_assert_eq!((parsed.admission, parsed.batching, parsed.drain), (admission, batching, drain));
            prop_assert_eq!(parsed.logger, logger);
        }
    }

    #[test]
    fn the_queue_rule_is_ten_per_slot_unless_given() {
        let admission = |container_concurrency, max_queued| AdmissionArgs { container_concurrency, max_queued };
        assert_eq!(admission(4, None).max_queued(), 40);
        assert_eq!(admission(4, Some(3)).max_queued(), 3);
        assert_eq!(admission(0, None).max_queued(), 0);
        assert_eq!(admission(usize::MAX, None).max_queued(), usize::MAX, "saturates");
    }

    #[test]
    fn the_drain_delay_keeps_the_servers_old_name_hidden() {
        let old = ["--shutdown-delay-secs".to_owned(), "2".to_owned()];
        assert_eq!(parse(&old).drain.drain_delay_secs, 2);
        let command = <Cli as clap::CommandFactory>::command();
        let arg = command.get_arguments().find(|a| a.get_id() == "drain_delay_secs").unwrap();
        assert_eq!(arg.get_long(), Some("drain-delay-secs"));
        assert_eq!(arg.get_all_aliases(), Some(vec!["shutdown-delay-secs"]));
        assert_eq!(arg.get_visible_aliases(), Some(vec![]), "the alias is hidden from --help");
    }

    #[test]
    fn out_of_range_values_are_refused_with_the_flag_named() {
        let too_many = AdmissionArgs { container_concurrency: MAX_CONCURRENCY + 1, max_queued: None };
        assert_eq!(too_many.validate().unwrap_err(), "--container-concurrency 16777217 is more than 16777216");
        let queued = AdmissionArgs { container_concurrency: 1, max_queued: Some(MAX_QUEUED + 1) };
        assert_eq!(queued.validate().unwrap_err(), "--max-queued 268435457 is more than 268435456");
        let on =
            |max_batch_size, max_latency_ms| BatchingArgs { enable_batching: true, max_batch_size, max_latency_ms };
        assert_eq!(on(0, 500).validate().unwrap_err(), "--max-batch-size must be at least 1");
        assert_eq!(on(32, 0).validate().unwrap_err(), "--max-latency-ms must be at least 1 when batching is on");
        assert_eq!(
            on(32, MAX_LATENCY_MS + 1).validate().unwrap_err(),
            "--max-latency-ms 86400001 is more than 86400000 (a day)"
        );
        let off = BatchingArgs { enable_batching: false, ..on(0, 0) };
        assert!(off.validate().is_ok(), "unchecked while batching is off");
        let drain = DrainArgs { drain_delay_secs: MAX_SECS + 1, drain_timeout_secs: 30 };
        assert_eq!(drain.validate().unwrap_err(), "--drain-delay-secs 86401 is more than 86400 (a day)");
    }
}
