//! Structured logs for every Skiff binary: `tracing` lines on stderr, filtered by `RUST_LOG`, as
//! text (coloured only on a terminal) or one JSON object per line (`--log-format json`, what the
//! pods write for their collectors).

use tracing_subscriber::EnvFilter;

/// Log line format, each binary's `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber; call once, first thing in `main`. `default_filter` applies
/// when `RUST_LOG` is unset or invalid (`info`, or `info,kube=warn` for a controller).
pub fn init(format: LogFormat, default_filter: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // Colour only on a terminal: logs piped to a file or collected from a pod stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
