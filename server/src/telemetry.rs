//! Structured logging with `tracing`; `RUST_LOG` sets the filter (default `info`).

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber; call once, first thing in `main`.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only on a terminal: logs piped to a file or collected from a pod stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
