//! The zonemesh agent: probes loss, RTT and throughput to the peers in the aggregator's probe plan
//! and streams one report per window to the aggregator over `Ingest.Connect`.
//!
//! - [`probe`] schedules trains of probes and counts them into windows, against the [`probe::Prober`]
//!   seam; [`icmp`] (surge-ping) and [`tcp`] implement it, and tests use a fake network on tokio's
//!   paused clock.
//! - [`stats`] keeps a window's exact counts and summarises its round trips (HDR histogram) into
//!   a domain [`Rtt`](zonemesh_domain::Rtt).
//! - [`report`] turns a window into domain [`PathSample`](zonemesh_domain::PathSample)s (the
//!   fleet simulator builds its reports with it too).
//! - [`outbox`] holds unacknowledged reports in a bounded buffer and numbers them.
//! - [`session`] keeps the stream to the aggregator: it converts the `Hello` and the reports to
//!   the wire as it sends them, and the plans and grants from the wire as they arrive; the rest
//!   of the agent sees domain types only. [`metrics`] serves Prometheus text.
//! - [`discover`] finds the node's zone (flag, pod label, or the Node object through kube-rs).
//!
//! ```
//! use std::time::Duration;
//! use zonemesh_agent::stats::WindowStats;
//!
//! let mut w = WindowStats::new();
//! for us in [100, 120, 110] {
//!     w.reply(Duration::from_micros(us));
//! }
//! w.lost();
//! assert_eq!((w.sent(), w.received()), (4, 3));
//! let rtt = w.rtt().unwrap();
//! assert_eq!(rtt.samples, 3);
//! assert!((rtt.p50.get() - 110.0).abs() < 1.0);
//! ```

pub mod config;
pub mod discover;
mod error;

pub use error::Error;
pub mod icmp;
pub mod metrics;
pub mod outbox;
pub mod probe;
pub mod report;
pub mod session;
pub mod stats;
pub mod tcp;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{Notify, mpsc, oneshot, watch};
use zonemesh_common::time::unix_ms;
use zonemesh_domain::{
    Hello, IcmpMode, NodeName, ThroughputSample, UNKNOWN_ZONE, UnixMs, ZoneName,
};

use crate::config::{Config, SocketBuffer};
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::probe::{Plan, Target, WindowReport};
use crate::session::{Instruction, SessionConfig, Shared};

/// Sockets opened before the agent runs (so that a busy port fails at startup).
#[derive(Debug)]
pub struct Sockets {
    /// The TCP responders, one per advertised address.
    pub responders: Vec<std::net::TcpListener>,
    /// The Prometheus endpoint.
    pub metrics: std::net::TcpListener,
}

/// The `Hello` this agent sends.
pub fn hello(config: &Config, mode: IcmpMode) -> Hello {
    let unknown = || ZoneName::parse("zone", UNKNOWN_ZONE).expect("a valid zone name");
    Hello {
        node: config.node.clone(),
        zone: config.zone.clone().unwrap_or_else(unknown),
        region: config.region.clone(),
        addresses: config.addresses.clone(),
        agent_version: env!("CARGO_PKG_VERSION").to_owned(),
        icmp_mode: mode,
        probe_port: config.probe_port,
    }
}

/// What an agent had achieved when it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Reports the aggregator acknowledged as durable.
    pub acknowledged_reports: u64,
    /// Probes in them.
    pub acknowledged_probes: u64,
    /// Reports never acknowledged (lost when the process exits).
    pub unacknowledged_reports: usize,
}

/// Runs the agent until `shutdown` completes, then flushes: the current window is reported and
/// the agent waits (at most `config.shutdown_timeout`) until the aggregator has acknowledged
/// everything, and closes the stream. Responders and the metrics endpoint run on `bulk`, so
/// that bulk transfers never delay the probes' timestamps on the calling runtime.
pub async fn run(
    config: Config,
    mode: IcmpMode,
    sockets: Sockets,
    bulk: Handle,
    shutdown: impl Future<Output = ()>,
) -> Stopped {
    let zone = config
        .zone
        .as_ref()
        .map_or(UNKNOWN_ZONE.to_owned(), ToString::to_string);
    let metrics = Arc::new(Metrics::new(config.node.as_str(), &zone, mode));
    for listener in sockets.responders {
        bulk.spawn(tcp::respond(listener));
    }
    bulk.spawn(serve_metrics(sockets.metrics, metrics.clone()));

    let shared = Shared {
        outbox: Arc::new(Mutex::new(Outbox::new(config.buffer_reports))),
        queued: Arc::new(Notify::new()),
        metrics: metrics.clone(),
    };
    let (plan_tx, plan_rx) = watch::channel(Plan::default());
    let (windows_tx, windows_rx) = mpsc::channel::<WindowReport>(4);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let stop = async {
        let _ = stop_rx.await;
    };
    let prober = match mode {
        IcmpMode::Raw | IcmpMode::Dgram => tokio::spawn(probe::run(
            Arc::new(icmp::IcmpProber::new(mode, &config.addresses)),
            plan_rx,
            windows_tx,
            stop,
        )),
        IcmpMode::Tcp => tokio::spawn(probe::run(
            Arc::new(tcp::TcpProber::new(&config.addresses)),
            plan_rx,
            windows_tx,
            stop,
        )),
    };

    let (instructions_tx, instructions_rx) = mpsc::unbounded_channel();
    let (results_tx, results_rx) = mpsc::unbounded_channel();
    let (flush_tx, flush_rx) = watch::channel(false);
    let session = tokio::spawn(session::run(
        SessionConfig {
            urls: config.aggregator.clone(),
            tls: config.tls.clone(),
            hello: hello(&config, mode),
            backoff: config.reconnect,
        },
        shared.clone(),
        instructions_tx,
        flush_rx,
    ));
    let instructions = tokio::spawn(follow_instructions(
        instructions_rx,
        plan_tx,
        config.addresses.clone(),
        config.socket_buffer,
        bulk.clone(),
        results_tx,
        metrics.clone(),
    ));
    let reports = tokio::spawn(queue_reports(
        config.node.clone(),
        mode,
        windows_rx,
        results_rx,
        shared.clone(),
    ));

    shutdown.await;
    tracing::info!("stopping: reporting the current window");
    let _ = stop_tx.send(());
    let _ = prober.await;
    let _ = reports.await;
    instructions.abort();
    let _ = flush_tx.send(true);
    match tokio::time::timeout(config.shutdown_timeout, session).await {
        Ok(_) => tracing::info!("every report acknowledged; stream closed"),
        Err(_) => {
            let left = shared.outbox.lock().expect("outbox lock").len();
            tracing::warn!(
                unacknowledged = left,
                timeout = ?config.shutdown_timeout,
                "stopping with reports the aggregator has not acknowledged; they are lost"
            );
        }
    }
    Stopped {
        acknowledged_reports: metrics.acked_reports.get(),
        acknowledged_probes: metrics.acked_probes.get(),
        unacknowledged_reports: shared.outbox.lock().expect("outbox lock").len(),
    }
}

/// Turns windows (and throughput results) into reports in the outbox, until the windows end.
async fn queue_reports(
    node: NodeName,
    mode: IcmpMode,
    mut windows: mpsc::Receiver<WindowReport>,
    mut results: mpsc::UnboundedReceiver<(NodeName, ThroughputSample)>,
    shared: Shared,
) {
    let mut throughput = BTreeMap::new();
    while let Some(window) = windows.recv().await {
        while let Ok((peer, t)) = results.try_recv() {
            throughput.insert(peer, t);
        }
        shared.metrics.record_window(&window);
        let samples = report::of_window(&node, mode, &window, std::mem::take(&mut throughput));
        if samples.is_empty() {
            continue;
        }
        let mut outbox = shared.outbox.lock().expect("outbox lock");
        let dropped = outbox.push(samples);
        if dropped.reports > 0 {
            shared.metrics.dropped_reports.add(dropped.reports);
            shared.metrics.dropped_probes.add(dropped.probes);
            tracing::warn!(
                dropped = dropped.reports,
                buffered = outbox.len(),
                "report buffer full: the oldest unacknowledged report is dropped (raise --buffer-reports)"
            );
        }
        shared.metrics.buffered.set(outbox.len() as u64);
        drop(outbox);
        shared.queued.notify_one();
    }
}

/// How late after its start a granted throughput test may still start, ms: the aggregator keeps
/// the test's nodes busy 2 s past its end.
const GRANT_LATE_MS: i64 = 1_000;

/// Applies plans and runs granted throughput tests (on `bulk`), sending results to `results`.
async fn follow_instructions(
    mut instructions: mpsc::UnboundedReceiver<Instruction>,
    plan: watch::Sender<Plan>,
    ours: Vec<IpAddr>,
    buffer: SocketBuffer,
    bulk: Handle,
    results: mpsc::UnboundedSender<(NodeName, ThroughputSample)>,
    metrics: Arc<Metrics>,
) {
    // The newest leader's epoch whose grant came (replicated aggregators; 0: a single one).
    let mut newest_epoch = 0;
    while let Some(instruction) = instructions.recv().await {
        match instruction {
            Instruction::Plan(next) => {
                let targets: Vec<Target> = next
                    .targets
                    .iter()
                    .filter_map(|t| {
                        Target::from_plan(t, &ours)
                            .map_err(|e| tracing::warn!("probe plan: {e}; not probed"))
                            .ok()
                    })
                    .collect();
                let window = Duration::from_millis(u64::from(next.window_ms.max(100)));
                tracing::info!(
                    version = next.version,
                    targets = targets.len(),
                    ?window,
                    "probe plan"
                );
                metrics.plan_version.set(next.version);
                plan.send_if_modified(|p| {
                    let new = Plan { targets, window };
                    let changed = *p != new;
                    *p = new;
                    changed
                });
            }
            Instruction::Grant(grant) => {
                if grant.epoch < newest_epoch {
                    tracing::warn!(
                        grant = grant.id,
                        epoch = grant.epoch,
                        newest_epoch,
                        "throughput grant of an older leader; skipped"
                    );
                    metrics.grants_stale.inc();
                    continue;
                }
                newest_epoch = grant.epoch;
                let late_ms = UnixMs(unix_ms()).since(grant.start);
                if late_ms > GRANT_LATE_MS {
                    // Started this late, the test would still run when its nodes' next one may.
                    tracing::warn!(grant = grant.id, peer = %grant.peer, late_ms, "throughput grant arrived after its start; skipped");
                    metrics.grants_late.inc();
                    continue;
                }
                let Some(ip) = grant.peer_address else {
                    tracing::warn!(grant = grant.id, peer = %grant.peer, "throughput grant without the peer's address; skipped");
                    continue;
                };
                let test = tcp::Test {
                    peer: SocketAddr::new(ip, grant.peer_port),
                    warmup: Duration::from_millis(grant.warmup_ms.into()),
                    duration: Duration::from_millis(grant.duration_ms.into()),
                    streams: grant.streams.clamp(1, 16),
                };
                let source = ours.iter().copied().find(|o| o.is_ipv4() == ip.is_ipv4());
                let wait =
                    Duration::from_millis(grant.start.since(UnixMs(unix_ms())).min(60_000) as u64);
                let (id, peer) = (grant.id, grant.peer);
                let (results, metrics) = (results.clone(), metrics.clone());
                bulk.spawn(async move {
                    tokio::time::sleep(wait).await;
                    match tcp::measure(&test, source, buffer).await {
                        Ok(t) => {
                            metrics.throughput_ok.inc();
                            tracing::info!(grant = id, %peer, bps = t.rate.get(), "throughput measured");
                            let _ = results.send((peer, t));
                        }
                        Err(e) => {
                            metrics.throughput_failed.inc();
                            tracing::warn!(grant = id, %peer, "throughput test failed: {e}");
                        }
                    }
                });
            }
        }
    }
}

async fn serve_metrics(listener: std::net::TcpListener, metrics: Arc<Metrics>) {
    use axum::routing::get;
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "metrics endpoint cannot use its socket");
            return;
        }
    };
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move |headers: axum::http::HeaderMap| {
                let accept = headers.get_all(axum::http::header::ACCEPT);
                let accept = accept.iter().map(|v| v.to_str().ok());
                let exposition = zonemesh_common::metrics::exposition(metrics.registry(), accept);
                // Encoding into a String fails only on a value the format cannot hold.
                let status = match exposition {
                    Ok(_) => axum::http::StatusCode::OK,
                    Err(_) => axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                };
                let (content_type, text) = exposition.unwrap_or(("text/plain", String::new()));
                async move { (status, [("content-type", content_type)], text) }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }));
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "metrics endpoint failed");
    }
}
