//! `pingora-minimal --port P --upstream HOST:PORT [--threads N] [--no-work-stealing]`: the smallest
//! Pingora reverse proxy — one fixed upstream, no hooks but `upstream_peer`, Pingora's own HTTP/1
//! server app and upstream keep-alive pool. It is the ceiling of Pingora as the router drives it:
//! `bench-dataplane` measures it beside `skiff-router` and nginx, so what separates the router from
//! nginx splits into Skiff's part (router − minimal) and Pingora's (minimal − nginx).

use std::net::SocketAddr;

use async_trait::async_trait;
use clap::Parser;
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;

#[derive(Parser)]
struct Args {
    /// Port on 127.0.0.1.
    #[arg(long)]
    port: u16,
    /// `host:port` every request goes to.
    #[arg(long)]
    upstream: SocketAddr,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// One single-threaded runtime per thread instead of one work-stealing runtime.
    #[arg(long)]
    no_work_stealing: bool,
    /// HTTP/2 with prior knowledge (h2c) to the upstream instead of HTTP/1.1.
    #[arg(long)]
    h2c: bool,
}

struct Minimal(SocketAddr, bool);

#[async_trait]
impl ProxyHttp for Minimal {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        let mut peer = HttpPeer::new(self.0, false, String::new());
        if self.1 {
            peer.options.set_http_version(2, 2);
        }
        Ok(Box::new(peer))
    }
}

fn main() {
    let args = Args::parse();
    let conf = ServerConf { threads: args.threads, work_stealing: !args.no_work_stealing, ..ServerConf::default() };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    let mut proxy = http_proxy_service(&server.configuration, Minimal(args.upstream, args.h2c));
    proxy.add_tcp(&format!("127.0.0.1:{}", args.port));
    server.add_service(proxy);
    server.run_forever();
}
