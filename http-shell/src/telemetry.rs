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
    init_quiet(format, default_filter, &[]);
}

/// [`init`], with `quiet` directives (`target=level`) added to the filter for every target that
/// `RUST_LOG` does not name itself: a library's lines that mean nothing to the person running the
/// binary (Pingora's own shutdown steps, say) stay out unless asked for.
pub fn init_quiet(format: LogFormat, default_filter: &str, quiet: &[&str]) {
    let filter = directives(std::env::var("RUST_LOG").ok().as_deref(), default_filter, quiet);
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new(default_filter));
    // Colour only on a terminal: logs piped to a file or collected from a pod stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// A filter's directives: `rust_log` (else `default_filter`), then each of `extra` whose target
/// `rust_log` (when set and valid) does not mention.
pub fn directives(rust_log: Option<&str>, default_filter: &str, extra: &[&str]) -> String {
    let rust_log = rust_log.filter(|text| !text.trim().is_empty() && EnvFilter::try_new(text).is_ok());
    let base = rust_log.unwrap_or(default_filter);
    let mut directives = vec![base.to_owned()];
    for directive in extra {
        let target = directive.split('=').next().unwrap_or(directive);
        if !rust_log.is_some_and(|text| text.contains(target)) {
            directives.push((*directive).to_owned());
        }
    }
    directives.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_targets_are_added_unless_rust_log_names_them() {
        let quiet = ["pingora_core=warn"];
        assert_eq!(directives(None, "info", &quiet), "info,pingora_core=warn");
        assert_eq!(directives(Some("debug"), "info", &quiet), "debug,pingora_core=warn");
        assert_eq!(directives(Some("info,pingora_core=info"), "info", &quiet), "info,pingora_core=info");
        let invalid = directives(Some("pingora_core=loud"), "info", &quiet);
        assert_eq!(invalid, "info,pingora_core=warn", "an invalid RUST_LOG is ignored");
        assert_eq!(directives(Some(" "), "info", &[]), "info");
    }
}
