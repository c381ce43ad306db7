//! `skiff-node-agent`: see the library documentation, or `skiff-node-agent --help`.

use std::io::IsTerminal;

use anyhow::Context;
use skiff_node_agent::{Cli, Command, agent, sandbox};
use tracing_subscriber::EnvFilter;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse_args();
    if let Some(Command::SandboxExec(args)) = cli.command {
        // Single-threaded on purpose: unshare(CLONE_NEWNS) needs it.
        let err = sandbox::exec(&args);
        eprintln!("skiff-node-agent sandbox-exec: {err}");
        std::process::exit(127);
    }
    tracing_subscriber::fmt()
        .with_ansi(std::io::stdout().is_terminal())
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,kube=warn")))
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let result = runtime.block_on(agent::run(cli.config)).context("node agent failed");
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result
}
