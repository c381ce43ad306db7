//! The argument builder against `skiff-server`'s own parser: the command lines `skiff up` and the
//! operator write (`skiff_api::serving::ServerArgs`) are parsed here by the parser `main` uses
//! (`skiff_server::config::Cli`), and every value must come back as written. A flag renamed on
//! either side fails: the builder's flag is refused, or the value reads back as the default.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Parser;
use skiff_api::isvc::{Batcher, LoggerSpec, PredictorSpec};
use skiff_api::serving::{self, Served, ServerArgs, ServerProcess};
use skiff_http::args::{AdmissionArgs, BatchingArgs, DrainArgs};
use skiff_http::logger::LoggerArgs;
use skiff_http::logger::sink::SinkPolicy;
use skiff_server::ServerConfig;
use skiff_server::config::{Cli, LogFormat};

fn parse(args: &[String]) -> ServerConfig {
    let argv = std::iter::once("skiff-server").chain(args.iter().map(String::as_str));
    Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}")).config
}

/// Parses what `args` writes and checks every value against it.
fn round_trip(args: &ServerArgs) -> ServerConfig {
    let config = parse(&args.to_args());
    assert_eq!(config.model_dir, Some(PathBuf::from(&args.model_dir)));
    assert_eq!(config.model_name.as_deref(), Some(args.model_name.as_str()));
    assert_eq!(config.http_port, args.http_port);
    assert_eq!(config.admission, args.admission);
    assert_eq!(config.batching, args.batching);
    assert_eq!(config.logger, args.logger);
    assert_eq!(config.drain, args.drain);
    let process = &args.process;
    let default_bind = parse(&ServerArgs::new("m", "/m", 0).to_args()).bind;
    assert_eq!(config.bind, process.bind.unwrap_or(default_bind));
    assert_eq!(config.log_format == LogFormat::Json, process.json_logs);
    assert_eq!(config.termination_message_path, process.termination_message_path.as_ref().map(PathBuf::from));
    config
}

#[test]
fn every_flag_the_builder_writes_reads_back_as_written() {
    let logger = LoggerArgs {
        logger_url: Some("http://sink.models/events".into()),
        logger_mode: "response".into(),
        logger_source: "http://iris-predictor.models".into(),
        inference_service: "iris".into(),
        namespace: "models".into(),
        component: "transformer".into(),
        revision: "iris-predictor-00002".into(),
        logger_allow_loopback: true,
        logger_protected_hosts: vec!["*.skiff-system".into(), "10.96.0.10".into()],
        logger_allowed_hosts: vec!["10.0.0.0/8".into()],
    };
    let args = ServerArgs {
        admission: AdmissionArgs { container_concurrency: 4, max_queued: Some(7) },
        batching: BatchingArgs { enable_batching: true, max_batch_size: 8, max_latency_ms: 20 },
        logger,
        drain: DrainArgs { drain_delay_secs: 3, drain_timeout_secs: 40 },
        process: ServerProcess {
            bind: Some(IpAddr::from([127, 0, 0, 1])),
            json_logs: true,
            termination_message_path: Some("/dev/termination-log".into()),
        },
        ..ServerArgs::new("iris", "/mnt/models", 9090)
    };
    round_trip(&args).validate().unwrap();
}

#[test]
fn the_defaults_read_back_as_the_servers_defaults() {
    let config = round_trip(&ServerArgs::new("iris", "/mnt/models", 8080));
    assert_eq!(config.log_format, LogFormat::Text);
    config.validate().unwrap();
}

#[test]
fn what_both_modes_write_for_a_predictor_is_what_the_server_reads() {
    let predictor = PredictorSpec {
        container_concurrency: Some(2),
        batcher: Some(Batcher { max_batch_size: Some(16), max_latency: Some(50) }),
        logger: Some(LoggerSpec { url: Some("http://sink.models/events".into()), ..LoggerSpec::default() }),
        ..PredictorSpec::default()
    };
    let served = Served { inference_service: "iris", namespace: "models", component: "predictor", revision: "r-1" };
    let sinks = SinkPolicy::cluster("skiff-system", &[], &[]).unwrap();
    let written = [
        serving::server_args("iris", "/mnt/models", 8080, &predictor),
        serving::logger_args(&predictor, served, &sinks),
    ]
    .concat();
    let config = parse(&written);
    config.validate().unwrap();
    assert_eq!(config.admission, serving::admission(&predictor));
    assert_eq!(config.admission.max_queued(), 20);
    assert_eq!(config.batching, serving::batching(&predictor));
    assert_eq!((config.batching.max_batch_size, config.batching.max_latency_ms), (16, 50));
    assert_eq!(config.logger, serving::logger(&predictor, served, &sinks));
    assert_eq!(config.logger.config().unwrap().unwrap().revision, "r-1");
}
