//! Runs the Pingora server on its own thread without taking over the process: Pingora's
//! `Server::run` (not `run_forever`, which exits the process) with a shutdown signal that fires
//! when the [`RouterHandle`] asks or when the process gets SIGTERM.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pingora::server::configuration::ServerConf;
use pingora::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch};
use pingora::services::listening::Service;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::config::RouterConfig;
use crate::downstream::Guarded;
use crate::proxy::Proxy;
use crate::{Error, Result};

/// How long `start` waits for the listener to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Time Pingora gives its runtimes to wind down after the grace period.
const RUNTIME_SHUTDOWN_SECS: u64 = 1;

/// How the server is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Close the listener, let in-flight requests finish during the grace period, then stop.
    Graceful,
    /// Stop now, dropping in-flight requests.
    Fast,
}

/// The shutdown signal handed to Pingora: the handle's request or SIGTERM, whichever comes first.
/// On SIGTERM it first marks the router draining and waits the drain delay, so that Pingora, which
/// closes its listener as soon as it is told, keeps serving while load balancers catch up.
struct StopSignal {
    stop: watch::Receiver<Option<Stop>>,
    /// Told once SIGTERM is being watched, so `start` returns only after that.
    armed: mpsc::Sender<()>,
    draining: Arc<AtomicBool>,
    drain_delay: Duration,
}

#[async_trait]
impl ShutdownSignalWatch for StopSignal {
    async fn recv(&self) -> ShutdownSignal {
        let mut stop = self.stop.clone();
        let mut sigterm =
            signal(SignalKind::terminate()).inspect_err(|e| tracing::warn!("router cannot watch SIGTERM: {e}")).ok();
        // The receiver may be gone already (start gave up); nothing to tell then.
        let _ = self.armed.send(());
        let terminated = async {
            match sigterm.as_mut() {
                Some(sigterm) => drop(sigterm.recv().await),
                None => std::future::pending().await,
            }
        };
        // The watch's guard is not `Send`: copy what it says out of the select before awaiting more.
        let asked = tokio::select! {
            asked = stop.wait_for(Option::is_some) => Some(asked.ok().and_then(|stop| *stop)),
            () = terminated => None,
        };
        match asked {
            Some(Some(Stop::Graceful)) => ShutdownSignal::GracefulTerminate,
            Some(_) => ShutdownSignal::FastShutdown,
            None => {
                self.draining.store(true, Ordering::Release);
                tracing::info!(delay = ?self.drain_delay, "router got SIGTERM: serving on for the drain delay, then shutting down gracefully");
                tokio::time::sleep(self.drain_delay).await;
                ShutdownSignal::GracefulTerminate
            }
        }
    }
}

/// A running router. Dropping it stops the server at once; [`RouterHandle::shutdown`] stops it gracefully.
#[derive(Debug)]
pub struct RouterHandle {
    addr: SocketAddr,
    stop: watch::Sender<Option<Stop>>,
    thread: Option<thread::JoinHandle<()>>,
    draining: Arc<AtomicBool>,
}

impl RouterHandle {
    /// True once SIGTERM has been received: readiness should fail while the router drains.
    pub fn draining(&self) -> Arc<AtomicBool> {
        self.draining.clone()
    }

    /// The address the proxy listens on (the chosen port when the configuration asked for port 0).
    pub fn listen_addr(&self) -> SocketAddr {
        self.addr
    }

    /// True once the server has stopped (after a shutdown or SIGTERM).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(thread::JoinHandle::is_finished)
    }

    /// Stops accepting connections, lets in-flight requests run for the grace period, then returns
    /// once the server has stopped. Blocks the calling thread (use `spawn_blocking` from async code).
    pub fn shutdown(mut self) {
        self.stop_and_join(Stop::Graceful);
    }

    /// Blocks until the server stops by itself (on SIGTERM).
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("router server thread panicked");
        }
    }

    fn stop_and_join(&mut self, stop: Stop) {
        self.stop.send_replace(Some(stop));
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("router server thread panicked");
        }
    }

    /// Waits until SIGTERM is watched and the listener accepts a connection, or fails if the server
    /// thread ended or the time ran out.
    fn wait_started(&self, armed: &mpsc::Receiver<()>) -> Result<()> {
        let probe = match self.addr {
            SocketAddr::V4(a) if a.ip().is_unspecified() => SocketAddr::from((Ipv4Addr::LOCALHOST, a.port())),
            SocketAddr::V6(a) if a.ip().is_unspecified() => SocketAddr::from((Ipv6Addr::LOCALHOST, a.port())),
            addr => addr,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        if armed.recv_timeout(START_TIMEOUT).is_err() {
            return Err(Error::NotListening(self.addr));
        }
        while Instant::now() < deadline && !self.is_finished() {
            if TcpStream::connect_timeout(&probe, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(10));
        }
        Err(Error::NotListening(self.addr))
    }
}

impl Drop for RouterHandle {
    fn drop(&mut self) {
        self.stop_and_join(Stop::Fast);
    }
}

/// Checks that `listen` can be bound and resolves port 0 to a free port (the port is released again
/// for Pingora to bind, so another process could take it in between).
fn reserve(listen: SocketAddr) -> Result<SocketAddr> {
    let listener = TcpListener::bind(listen).map_err(|source| Error::Bind { addr: listen, source })?;
    listener.local_addr().map_err(|source| Error::Bind { addr: listen, source })
}

fn server_conf(config: &RouterConfig) -> ServerConf {
    ServerConf {
        threads: config.threads,
        grace_period_seconds: Some(config.grace_period_secs()),
        graceful_shutdown_timeout_seconds: Some(RUNTIME_SHUTDOWN_SECS),
        ..ServerConf::default()
    }
}

/// Starts `proxy` on its own thread and returns once it accepts connections.
pub(crate) fn start(config: &RouterConfig, proxy: Proxy) -> Result<RouterHandle> {
    let addr = reserve(config.listen)?;
    let conf = server_conf(config);
    let downstream = config.downstream;
    let (stop, stop_rx) = watch::channel(None);
    let (armed, armed_rx) = mpsc::channel();
    let draining = proxy.draining.clone();
    let signal = StopSignal { stop: stop_rx, armed, draining: draining.clone(), drain_delay: downstream.drain_delay };
    let thread = thread::Builder::new()
        .name("skiff-router".to_owned())
        .spawn(move || {
            let mut server = Server::new_with_opt_and_conf(None, conf);
            let mut service = Service::new("skiff-router".to_owned(), Guarded::new(proxy, downstream));
            service.add_tcp(&addr.to_string());
            server.add_service(service);
            server.run(RunArgs { shutdown_signal: Box::new(signal) });
        })
        .map_err(Error::Thread)?;
    let handle = RouterHandle { addr, stop, thread: Some(thread), draining };
    handle.wait_started(&armed_rx)?;
    tracing::info!(%addr, "router listening");
    Ok(handle)
}
