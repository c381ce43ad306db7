//! The argument builder against the queue-proxy's own parser: the command lines `skiff up` and the
//! operator write (`skiff_api::serving::QueueProxyArgs`) are parsed here by the parser
//! `skiff-activator`'s `main` uses (`skiff_activator::cli::Cli`), and every value must come back
//! as written. A flag renamed on either side fails: the builder's flag is refused, or the value
//! reads back as the default.

use std::net::{IpAddr, SocketAddr};

use clap::Parser;
use skiff_activator::QueueProxyConfig;
use skiff_activator::cli::{Cli, Command, LogFormat};
use skiff_api::serving::QueueProxyArgs;
use skiff_http::args::{AdmissionArgs, BatchingArgs, DrainArgs};
use skiff_http::logger::LoggerArgs;

fn parse(args: &[String]) -> (QueueProxyConfig, LogFormat) {
    let argv = std::iter::once("skiff-activator").chain(args.iter().map(String::as_str));
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let Command::QueueProxy(config) = cli.command else { panic!("{args:?}: not the queue-proxy") };
    (*config, cli.log_format)
}

/// Parses what `args` writes and checks every value against it.
fn round_trip(args: &QueueProxyArgs) -> QueueProxyConfig {
    let (config, log_format) = parse(&args.to_args());
    assert_eq!(config.port, args.port);
    assert_eq!(config.bind, args.bind.unwrap_or(QueueProxyConfig::default().bind));
    assert_eq!(config.upstream, args.upstream);
    assert_eq!(config.admission, args.admission);
    assert_eq!(config.timeout_secs, args.timeout_secs);
    assert_eq!(config.drain, args.drain);
    assert_eq!(config.batching, args.batching);
    assert_eq!(config.logger, args.logger);
    assert_eq!(config.readiness_path, args.readiness_path);
    assert_eq!(log_format == LogFormat::Json, args.json_logs);
    config
}

#[test]
fn every_flag_the_builder_writes_reads_back_as_written() {
    let logger = LoggerArgs {
        logger_url: Some("http://sink.models/events".into()),
        logger_mode: "request".into(),
        logger_source: "http://iris-predictor.models".into(),
        inference_service: "iris".into(),
        namespace: "models".into(),
        component: "explainer".into(),
        revision: "iris-predictor-00003".into(),
        logger_allow_loopback: true,
        logger_protected_hosts: vec!["*.skiff-system".into()],
        logger_allowed_hosts: vec!["sink.models".into(), "10.0.0.0/8".into()],
    };
    let args = QueueProxyArgs {
        port: 9012,
        bind: Some(IpAddr::from([127, 0, 0, 1])),
        upstream: SocketAddr::from(([127, 0, 0, 1], 9000)),
        admission: AdmissionArgs { container_concurrency: 3, max_queued: Some(5) },
        timeout_secs: 60,
        drain: DrainArgs { drain_delay_secs: 3, drain_timeout_secs: 45 },
        batching: BatchingArgs { enable_batching: true, max_batch_size: 4, max_latency_ms: 25 },
        logger,
        readiness_path: Some("/v2/health/ready".into()),
        json_logs: true,
    };
    round_trip(&args).validate().unwrap();
}

#[test]
fn the_defaults_read_back_as_the_queue_proxys_defaults() {
    let config = round_trip(&QueueProxyArgs::default());
    let default = QueueProxyConfig::default();
    assert_eq!(
        (config.port, config.upstream, config.timeout_secs),
        (default.port, default.upstream, default.timeout_secs)
    );
    config.validate().unwrap();
}

#[test]
fn the_old_server_name_of_the_drain_delay_reads_too() {
    let args: Vec<String> = ["queue-proxy", "--shutdown-delay-secs", "2"].map(str::to_owned).into();
    assert_eq!(parse(&args).0.drain.drain_delay_secs, 2);
}
