//! `bench-hostile`: what hostile clients cost the release `skiff-server` with its default limits.
//! 64 clients at once each send a 32 MiB V2 body (peak resident memory, answers by status), then a
//! client trickles its request head a byte every 10 s, and another stops sending its body half way
//! (the time until each is cut). Prints the figures; asserts nothing.
//!
//! Run from the repository root after `scripts/setup.sh`: `target/release/bench-hostile`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use skiff_bench::peer::{Peer, free_port};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Parser)]
struct Args {
    /// Clients sending a large body at once.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Size of each body, in MiB (the server takes at most 32).
    #[arg(long, default_value_t = 32)]
    body_mib: usize,
    /// Seconds between the bytes of the trickled head.
    #[arg(long, default_value_t = 10)]
    trickle_secs: u64,
    /// The classifier's folder.
    #[arg(long, default_value = "examples/models/iris")]
    model_dir: PathBuf,
    /// Where the server's log goes.
    #[arg(long, default_value = "target/bench-logs")]
    logs: PathBuf,
}

/// A V2 body of iris rows just under `mib` MiB.
fn large_body(mib: usize) -> Bytes {
    let row = "[1.5,2.5,3.5,4.5],";
    let rows = ((mib << 20) - 200) / row.len();
    let mut data = row.repeat(rows);
    data.pop();
    Bytes::from(format!(r#"{{"inputs":[{{"name":"input","shape":[{rows},4],"datatype":"FP32","data":[{data}]}}]}}"#))
}

/// Writes `head` a byte at a time, `every` apart, until the server closes; the time that took.
async fn trickle(address: &str, head: &[u8], every: Duration) -> anyhow::Result<Duration> {
    let mut stream = TcpStream::connect(address).await?;
    let started = Instant::now();
    for byte in head {
        if stream.write_all(&[*byte]).await.is_err() {
            return Ok(started.elapsed());
        }
        let mut probe = [0u8; 64];
        if let Ok(read) = tokio::time::timeout(every, stream.read(&mut probe)).await {
            let _ = read;
            return Ok(started.elapsed());
        }
    }
    anyhow::bail!("the whole head was taken")
}

/// Sends a head and half a body, then nothing; the time until the server answers, and its status line.
async fn stall_body(address: &str) -> anyhow::Result<(Duration, String)> {
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(b"POST /v2/models/iris/infer HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n{\"inputs\":[")
        .await?;
    let started = Instant::now();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    Ok((started.elapsed(), answer.lines().next().unwrap_or("(closed)").to_owned()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.logs)?;
    let bin = std::env::current_exe()?.parent().unwrap().join("skiff-server");
    let port = free_port()?;
    let mut command = Command::new(&bin);
    command.args(["--model-dir", &args.model_dir.display().to_string(), "--bind", "127.0.0.1"]);
    command.args(["--http-port", &port.to_string()]);
    let log = args.logs.join("bench-hostile-server.log");
    let server = Peer::start("skiff-server", command, port, "/v2/health/ready", &log, Duration::from_secs(30)).await?;
    let address = server.address.clone();
    println!("skiff-server (release, default limits: 32 MiB bodies, 1 GiB buffered, 20 s header, 60 s body)");
    println!("resident memory at rest: {:.0} MiB", server.peak_rss_mib());

    let body = large_body(args.body_mib);
    let started = Instant::now();
    let clients: Vec<_> = (0..args.clients)
        .map(|_| {
            let (address, body) = (address.clone(), body.clone());
            tokio::spawn(async move { skiff_bench::load::once(&address, "/v2/models/iris/infer", body).await })
        })
        .collect();
    let mut by_status = std::collections::BTreeMap::<String, usize>::new();
    for client in clients {
        let key = match client.await? {
            Ok((status, _)) => status.as_u16().to_string(),
            Err(e) => format!("error: {e}"),
        };
        *by_status.entry(key).or_default() += 1;
    }
    println!(
        "{} clients x {:.1} MiB bodies at once: answers {by_status:?} in {:.1} s; peak RSS {:.0} MiB",
        args.clients,
        body.len() as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64(),
        server.peak_rss_mib()
    );

    let head = b"POST /v2/models/iris/infer HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaa";
    let every = Duration::from_secs(args.trickle_secs);
    let (cut, (stalled, answer)) = tokio::try_join!(trickle(&address, head, every), stall_body(&address))?;
    println!("head trickled a byte every {} s: cut after {:.1} s", args.trickle_secs, cut.as_secs_f64());
    println!("body stalled half way: {answer:?} after {:.1} s", stalled.as_secs_f64());
    server.stop();
    Ok(())
}
