//! The aggregator server: Ingest and Topology over gRPC (with reflection v1 and v1alpha and
//! `grpc.health.v1`), and HTTP for Prometheus metrics and health.

pub mod auth;
pub mod clock;
pub mod extender;
pub mod faults;
pub mod forward;
pub mod health;
pub mod ingest;
pub mod metrics;
pub mod owner;
pub mod priority;
pub mod query;
pub mod reader;
pub mod replica;
pub mod tiers;
pub mod tls;
pub mod topology;
pub mod web;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use zonemesh_proto::v1;

use crate::store::{MemStore, SledStore, Store};
use crate::{ConfigError, Error};
use metrics::Metrics;
use owner::{Ended, OwnerConfig};
use zonemesh_engine::tiers::TierState;
use zonemesh_engine::{EngineConfig, Topology};

/// HTTP/2 receive window of one stream (an agent's stream), bytes.
const STREAM_WINDOW_BYTES: u32 = 256 << 10;
/// HTTP/2 receive window of one connection (the fleet simulator puts many streams on one).
const CONNECTION_WINDOW_BYTES: u32 = 2 << 20;

/// Largest gRPC message the server decodes (a full report is about 2 MiB).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Validated server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// gRPC address.
    pub listen: SocketAddr,
    /// HTTP address (metrics, health, the kube-scheduler extender).
    pub http_listen: SocketAddr,
    /// How long the extender remembers a job's zones after its last pod, ms.
    pub job_ttl_ms: i64,
    /// sled data directory; `None` keeps everything in memory (nothing survives a restart).
    pub data_dir: Option<PathBuf>,
    /// Size of sled's page cache, bytes.
    pub store_cache_bytes: u64,
    /// Engine settings.
    pub engine: EngineConfig,
    /// The owner's settings.
    pub owner: OwnerConfig,
    /// What one agent may send.
    pub ingest: ingest::IngestLimits,
    /// TLS on both ports; `None`: plain text.
    pub tls: Option<tls::TlsFiles>,
    /// With TLS, accept plain-text connections too (migrations; refused by default).
    pub allow_plaintext: bool,
    /// Bearer tokens for queries.
    pub tokens_file: Option<PathBuf>,
    /// How often the TLS and token files are read again.
    pub reload_every: Duration,
    /// How much memory the allocator holds, if it can tell: `(allocated, resident)` bytes,
    /// exported as `zonemesh_heap_allocated_bytes` and `zonemesh_heap_resident_bytes`.
    pub heap_stats: Option<metrics::HeapStats>,
    /// How tiers are derived.
    pub tiers: tiers::TiersConfig,
    /// The faults task's settings.
    pub faults: faults::FaultsConfig,
    /// The Kubernetes publisher (`--publish`); `None`: off.
    pub publish: Option<PublishConfig>,
    /// A replica on a replicated log (`--cluster`); `None`: the single aggregator.
    pub cluster: Option<crate::cluster::ClusterConfig>,
}

/// The publisher's settings.
#[derive(Debug, Clone)]
pub struct PublishConfig {
    /// What to publish, under which names.
    pub settings: zonemesh_publish::Settings,
    /// At most one round per interval (`--publish-interval`).
    pub interval: Duration,
}

/// Addresses the server actually listens on (useful with port 0).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// gRPC.
    pub grpc: SocketAddr,
    /// HTTP.
    pub http: SocketAddr,
}

fn bind_error(addr: SocketAddr, source: std::io::Error) -> Error {
    Error::Listen {
        addr: addr.to_string(),
        source,
    }
}

fn reflection<T>(
    build: impl FnOnce(
        tonic_reflection::server::Builder<'static>,
    ) -> Result<T, tonic_reflection::server::Error>,
) -> Result<T, Error> {
    let builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(zonemesh_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    build(builder).map_err(|e| Error::Internal(format!("reflection: {e}")))
}

/// Opens the store, restores the topology, binds both ports, and serves until `shutdown`
/// resolves; then stops taking streams, writes what is left, and returns. `on_bound` hears the
/// bound addresses before serving starts. If the owner stops by itself (a store write that
/// hangs, see `OwnerConfig::store_hang`), the server stops too and returns the error, so that a
/// supervisor starts the process again.
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_bound: impl FnOnce(Bound),
) -> Result<(), Error> {
    let metrics = Arc::new(Metrics::default());
    metrics.set_heap_stats(config.heap_stats);
    let (tls, guard) = security(&config, &metrics)?;
    // The publisher's Kubernetes client (the in-cluster service account), before any socket.
    let kube_client = match &config.publish {
        Some(_) => Some(
            kube::Client::try_default()
                .await
                .map_err(ConfigError::Kube)?,
        ),
        None => None,
    };
    // A replica connects to its log before anything else opens (a bad --cluster fails here).
    let mut replica = match &config.cluster {
        Some(c) => Some(replica::Replica::connect(c).await?),
        None => None,
    };
    let (topology, store, restored_tiers, restored_baselines, cluster_start) =
        restore(&config, replica.as_ref()).await?;
    let (grpc_listener, http_listener, bound) = bind(&config).await?;

    let health = tonic_health::server::HealthReporter::new();
    let health_service = tonic_health::server::HealthService::from_health_reporter(health.clone());
    health
        .set_serving::<v1::ingest_server::IngestServer<ingest::IngestService>>()
        .await;
    health
        .set_serving::<v1::topology_server::TopologyServer<topology::TopologyService>>()
        .await;
    health
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;

    let (owner, mut stopped) = owner::spawn(
        topology,
        store,
        restored_tiers,
        metrics.clone(),
        metrics.store_health.clone(),
        config.owner.clone(),
        cluster_start.clone(),
    )?;
    let mut replica_tasks = Vec::new();
    if let (Some(r), Some(start)) = (&mut replica, &cluster_start) {
        metrics.set_cluster(r.progress.clone());
        replica_tasks = r.run(owner.clone(), start.applied);
    }
    let gate = replica.as_ref().map(|r| r.progress.clone());
    let store_health = ingest::follow_store_health(owner.store_health().watch(), health);
    let (tiers_watch, tiers_task) = tiers::spawn(owner.clone(), config.tiers, gate.clone());
    let (faults_watch, faults_task) = faults::spawn(
        owner.clone(),
        config.faults,
        restored_baselines.unwrap_or_default(),
        metrics.clone(),
    );
    // One writer, fed by tier snapshots; it never runs on the owner, and on a replica only while
    // the replica holds the lease.
    let publisher = kube_client.and_then(|client| {
        start_publisher(
            &config,
            client,
            zonemesh_publish::run::Inputs {
                tiers: tiers_watch.clone(),
                faults: faults_watch.clone(),
            },
            gate.clone(),
            metrics.clone(),
        )
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let ingest_runtime = IngestRuntime::start()?;
    let queries = query::Queries::new(
        owner.reader().clone(),
        metrics.clone(),
        tiers_watch,
        faults_watch,
        gate.clone(),
    );
    let mut ingest = ingest::IngestService::new(
        owner.clone(),
        metrics.clone(),
        guard.clone(),
        config.ingest,
        stop_rx.clone(),
        ingest_runtime.handle.clone(),
    );
    if let Some(r) = &replica {
        ingest = ingest.replicated(Arc::new(ingest::ClusterEdge {
            log: r.log.clone(),
            reader: owner.reader().clone(),
            sessions: Default::default(),
        }));
    }
    let grpc = grpc_server(GrpcParts {
        listener: grpc_listener,
        health: health_service,
        ingest,
        max_report_bytes: config.ingest.max_report_bytes,
        topology: topology::TopologyService::new(queries.clone()),
        guard: guard.clone(),
        tls: tls.clone(),
        metrics: metrics.clone(),
        stop: stop_rx.clone(),
    })?;
    auth::spawn_reloader(
        tls.clone(),
        guard.clone(),
        metrics.clone(),
        config.reload_every,
    );

    on_bound(bound);
    tracing::info!(grpc = %bound.grpc, http = %bound.http, "serving");

    let mut http_stop = stop_rx.clone();
    let extender = extender::Extender::new(
        owner.reader().clone(),
        metrics.clone(),
        config.job_ttl_ms,
        gate.clone(),
    )
    .forwarding_with(forwarder(&config)?);
    let http = axum::serve(
        tls::incoming(http_listener, tls.clone(), metrics.clone()),
        http_router(metrics.clone(), gate)
            .merge(extender.router(guard.clone()))
            .merge(web::router(queries, guard.clone()))
            .into_make_service_with_connect_info::<tls::Peer>(),
    )
    .with_graceful_shutdown(async move {
        let _ = http_stop.wait_for(|s| *s).await;
    });
    let grpc_task = tokio::spawn(grpc);
    let http_task = tokio::spawn(async move { http.await });

    let ended = tokio::select! {
        _ = shutdown => None,
        // A thread that ended without a word panicked.
        ended = &mut stopped => Some(ended.unwrap_or_else(|_| {
            Ended::Failed("the owner's thread ended without saying why (a panic?)".into())
        })),
    };
    let owner_gone = ended.is_some();
    let failure = ended.and_then(|e| failure(e, &config));
    match &failure {
        None => tracing::info!("shutting down: closing agent streams and writing what is left"),
        Some(e) => tracing::error!(error = %e, "the owner stopped; shutting down"),
    }
    let _ = stop_tx.send(true);
    let grace = Duration::from_secs(10);
    let _ = tokio::time::timeout(grace, grpc_task).await;
    let _ = tokio::time::timeout(grace, http_task).await;
    tiers_task.abort();
    faults_task.abort();
    store_health.abort();
    for task in replica_tasks {
        task.abort();
    }
    if let Some(p) = publisher {
        p.abort();
    }
    owner.stop().await;
    drop(owner);
    if !owner_gone {
        let _ = tokio::time::timeout(grace, stopped).await;
    }
    let _ = tokio::task::spawn_blocking(move || ingest_runtime.stop()).await;
    match failure {
        None => {
            tracing::info!("stopped");
            Ok(())
        }
        Some(e) => Err(e),
    }
}

/// What the owner's end means for the server: `None` when it was asked to stop.
fn failure(ended: Ended, config: &Config) -> Option<Error> {
    match ended {
        Ended::Asked => None,
        Ended::StoreHung(why) => Some(Error::Store {
            path: config
                .data_dir
                .as_ref()
                .map_or_else(|| "memory".to_owned(), |d| d.display().to_string()),
            action: "write",
            source: std::io::Error::other(why),
        }),
        Ended::Failed(why) => Some(Error::Internal(why)),
    }
}

/// TLS (if configured) and the guard of who may report and query, with warnings about what the
/// configuration leaves open.
fn security(
    config: &Config,
    metrics: &Arc<Metrics>,
) -> Result<(Option<Arc<tls::Tls>>, Arc<auth::Guard>), Error> {
    let tls = match &config.tls {
        Some(files) => Some(Arc::new(
            tls::Tls::load(files.clone(), config.allow_plaintext).map_err(ConfigError::from)?,
        )),
        None => None,
    };
    let guard = Arc::new(
        auth::Guard::new(
            tls.as_ref().is_some_and(|t| t.verifies_clients()),
            config.tokens_file.clone(),
            metrics.clone(),
        )
        .map_err(ConfigError::from)?,
    );
    if tls.is_none() && guard.enabled() {
        tracing::warn!("bearer tokens over plain text: anyone on the network can read them");
    }
    if !guard.enabled() {
        tracing::warn!("no client CA and no tokens: every caller may report and query");
    } else if !guard.verifies_clients() {
        tracing::warn!(
            "no client CA: agents are not authenticated, anyone who reaches the port may report (tokens cover queries only)"
        );
    }
    Ok((tls, guard))
}

/// The client that forwards extender calls to the leader: over TLS with `--peer-*` when set.
fn forwarder(config: &Config) -> Result<forward::Forwarder, Error> {
    let peer = config.cluster.as_ref().map(|c| &c.peer_tls);
    let tls = match peer.filter(|p| p.enabled()) {
        Some(p) => Some(p.client_config().map_err(ConfigError::Peer)?),
        None => None,
    };
    Ok(forward::Forwarder::new(tls))
}

/// What a start restores: the topology, its store, the tiers' state, and a replica's place.
type Restored = (
    Topology,
    Box<dyn Store>,
    Option<TierState>,
    Option<zonemesh_engine::faults::Baselines>,
    Option<owner::ClusterStart>,
);

/// Opens the store and restores the topology, the tiers' state and the faults' baselines from it (a replica: from its
/// checkpoint or the newest snapshot, its nodes in their ids' order, at its applier's clock).
async fn restore(config: &Config, replica: Option<&replica::Replica>) -> Result<Restored, Error> {
    let mut store: Box<dyn Store> = match &config.data_dir {
        Some(dir) => Box::new(SledStore::open_with_cache(dir, config.store_cache_bytes)?),
        None => Box::new(MemStore::default()),
    };
    let started = zonemesh_common::time::Stopwatch::start();
    let mut contents = match replica {
        Some(r) => r.starting_contents(store.as_mut()).await?,
        None => store.load()?,
    };
    let start = replica
        .zip(config.cluster.as_ref())
        .map(|(r, c)| r.start(c, &contents));
    let now = match &contents.cluster {
        Some(place) => {
            if let Some(order) = &place.node_order {
                let rank: std::collections::HashMap<_, _> =
                    order.iter().enumerate().map(|(i, n)| (n, i)).collect();
                contents
                    .nodes
                    .sort_by_key(|n| rank.get(&n.name).copied().unwrap_or(usize::MAX));
            }
            place.clock.max(config.owner.clock.now())
        }
        None => config.owner.clock.now(),
    };
    let (nodes, paths) = (contents.nodes.len(), contents.paths.len());
    let topology = Topology::restore(config.engine.clone(), contents.nodes, contents.paths, now);
    tracing::info!(
        nodes,
        paths,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "topology restored"
    );
    Ok((topology, store, contents.tiers, contents.baselines, start))
}

/// Binds both ports.
async fn bind(config: &Config) -> Result<(TcpListener, TcpListener, Bound), Error> {
    let grpc = TcpListener::bind(config.listen)
        .await
        .map_err(|e| bind_error(config.listen, e))?;
    let http = TcpListener::bind(config.http_listen)
        .await
        .map_err(|e| bind_error(config.http_listen, e))?;
    let bound = Bound {
        grpc: grpc
            .local_addr()
            .map_err(|e| bind_error(config.listen, e))?,
        http: http
            .local_addr()
            .map_err(|e| bind_error(config.http_listen, e))?,
    };
    Ok((grpc, http, bound))
}

/// Starts the Kubernetes publisher, when `--publish` asks for it.
fn start_publisher(
    config: &Config,
    client: kube::Client,
    inputs: zonemesh_publish::run::Inputs,
    lease: Option<Arc<crate::cluster::Progress>>,
    metrics: Arc<Metrics>,
) -> Option<tokio::task::JoinHandle<()>> {
    let p = config.publish.as_ref()?;
    tracing::info!(
        schedulers = ?p.settings.schedulers,
        interval = ?p.interval,
        "publishing the tiers to Kubernetes"
    );
    let writer = zonemesh_publish::Writer::new(client, p.settings.clone(), metrics.publish.clone());
    let clock = config.owner.clock.clone();
    let store = metrics.store_health.clone();
    Some(tokio::spawn(zonemesh_publish::run::run(
        writer,
        p.settings.clone(),
        inputs,
        p.interval,
        move || clock.now(),
        move || lease.as_ref().is_none_or(|p| p.leading().is_some()),
        move || store.problem().is_none(),
        metrics.publish.clone(),
    )))
}

/// The gRPC server: health, reflection v1 and v1alpha, Ingest and Topology (behind the
/// authenticating interceptor), until `stop` turns true.
fn grpc_server(
    parts: GrpcParts,
) -> Result<impl Future<Output = Result<(), tonic::transport::Error>> + Send + 'static, Error> {
    let GrpcParts {
        listener,
        health,
        ingest,
        max_report_bytes,
        topology,
        guard,
        tls,
        metrics,
        mut stop,
    } = parts;
    let reflection_v1 = reflection(|b| b.build_v1())?;
    let reflection_v1alpha = reflection(|b| b.build_v1alpha())?;
    let ingest =
        v1::ingest_server::IngestServer::new(ingest).max_decoding_message_size(max_report_bytes);
    let topology = tonic::service::interceptor::InterceptedService::new(
        v1::topology_server::TopologyServer::new(topology)
            .max_decoding_message_size(MAX_MESSAGE_BYTES),
        topology::authenticate(guard),
    );
    Ok(tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(20)))
        // Receive windows above HTTP/2's 64 KiB, so that an agent's reports are not held to 64 KiB
        // per round trip, and no larger: what the windows let in before a stream is read is
        // memory, part of the ingest budget (256 KiB a stream, 2 MiB a connection: at 5,000
        // agents on 50 connections, 100 MiB at most). Fixed, not adaptive: with adaptive windows a
        // stream read slowly on purpose (--max-report-rate) had its connection reset within half
        // a minute.
        .initial_stream_window_size(Some(STREAM_WINDOW_BYTES))
        .initial_connection_window_size(Some(CONNECTION_WINDOW_BYTES))
        .add_service(tonic_health::pb::health_server::HealthServer::new(health))
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(ingest)
        .add_service(topology)
        // Answers are small writes on long-lived connections: without TCP_NODELAY, Nagle holds
        // them until the peer's delayed ACK (40 ms on Linux). The listener sets it on every
        // connection (`serve_with_incoming` ignores the builder's `tcp_nodelay`).
        .serve_with_incoming_shutdown(tls::incoming(listener, tls, metrics), async move {
            let _ = stop.wait_for(|s| *s).await;
        }))
}

/// What the gRPC server is made of.
struct GrpcParts {
    listener: TcpListener,
    health: tonic_health::server::HealthService,
    ingest: ingest::IngestService,
    max_report_bytes: usize,
    topology: topology::TopologyService,
    guard: Arc<auth::Guard>,
    tls: Option<Arc<tls::Tls>>,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
}

/// The runtime of the agents' streams: one worker thread, its own run queue. The server's
/// runtime keeps the connections, queries, the extender and HTTP; the owner task has a thread of
/// its own (see [`owner::spawn`]).
struct IngestRuntime {
    handle: tokio::runtime::Handle,
    stop: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IngestRuntime {
    fn start() -> Result<Self, Error> {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("zonemesh-ingest-rt".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("zonemesh-ingest")
                    .on_thread_start(priority::yield_to_queries)
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => {
                        let _ = handle_tx.send(Ok(runtime.handle().clone()));
                        // Until the server stops (or drops this).
                        let _ = stopped.recv();
                        runtime.shutdown_timeout(Duration::from_secs(5));
                    }
                    Err(e) => {
                        let _ = handle_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| Error::Internal(format!("the ingest runtime's thread: {e}")))?;
        let handle = handle_rx
            .recv()
            .map_err(|_| Error::Internal("the ingest runtime did not start".into()))?
            .map_err(|e| Error::Internal(format!("the ingest runtime did not start: {e}")))?;
        Ok(Self {
            handle,
            stop,
            thread: Some(thread),
        })
    }

    fn stop(mut self) {
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn http_router(metrics: Arc<Metrics>, gate: Option<Arc<crate::cluster::Progress>>) -> axum::Router {
    use axum::http::header;
    use axum::response::IntoResponse as _;
    use axum::routing::get;
    let health_metrics = metrics.clone();
    axum::Router::new()
        .route(
            "/metrics",
            get(move |headers: axum::http::HeaderMap| {
                let metrics = metrics.clone();
                async move {
                    let accept = headers.get_all(header::ACCEPT).into_iter();
                    let accept = accept.map(|v| v.to_str().ok());
                    match zonemesh_common::metrics::exposition(metrics.registry(), accept) {
                        Ok((content_type, text)) => {
                            ([(header::CONTENT_TYPE, content_type)], text).into_response()
                        }
                        Err(_) => axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                    }
                }
            }),
        )
        // Liveness: 200 while the process serves, so that a full disk does not turn into a
        // restart loop; the body says when the store cannot be written (and the gRPC health of
        // zonemesh.v1.Ingest is NOT_SERVING meanwhile).
        .route(
            "/healthz",
            get({
                let gate = gate.clone();
                move || {
                    let metrics = health_metrics.clone();
                    let gate = gate.clone();
                    async move {
                        let place = gate.as_deref().map(replica_place).unwrap_or_default();
                        match metrics.store_health.problem() {
                            None => format!("ok{place}\n"),
                            Some(e) => format!(
                                "degraded: the store cannot be written, acknowledgements are held until a write succeeds: {e}{place}\n"
                            ),
                        }
                    }
                }
            }),
        )
        // Readiness: a replica is ready once caught up with the log and while within --max-lag;
        // a single aggregator is ready while it serves.
        .route(
            "/readyz",
            get(move || {
                let gate = gate.clone();
                async move {
                    match gate.as_ref().and_then(|g| g.why_unready()) {
                        None => (axum::http::StatusCode::OK, "ready\n".to_owned()),
                        Some(why) => (axum::http::StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")),
                    }
                }
            }),
        )
}

/// A replica's place for `/healthz`: the last entry applied, the lag, the checkpoint's age.
fn replica_place(p: &crate::cluster::Progress) -> String {
    let checkpoint = match p.checkpoint_at() {
        Some(at) => format!(
            "checkpoint {:.0} s ago",
            (zonemesh_common::time::unix_ms() - at).max(0) as f64 / 1000.0
        ),
        None => "no checkpoint yet".into(),
    };
    format!(
        "; replica: applied {}, {} entries behind, {checkpoint}",
        p.applied(),
        p.lag()
    )
}
