//! The one owner of the topology: a task fed by channels, and the readers beside it.
//!
//! gRPC handlers send the owner commands (hello, report, goodbye) and never touch the state
//! themselves. After every batch of commands and every step of the sweep, the owner publishes an
//! immutable [`Snapshot`] (copy-on-write: publishing shares every table and copies none). Queries
//! never go to the owner: a [`Reader`] answers them from the latest published snapshot on a pool
//! of blocking threads sized to the cores, so a query never waits behind ingest and ingest never
//! waits behind a query. The once-a-second tick and the sweep's steps come before ingest commands,
//! so that a steady stream of reports cannot hold off housekeeping.
//!
//! A report's effect is published before its acknowledgement can leave (the batch is published
//! before it is written, and acknowledged after): acknowledged means visible to queries.
//!
//! Durability is group commit: while one batch is being written (on a blocking thread), every
//! report that arrives is applied in memory and its acknowledgement waits for the *next* batch.
//! An acknowledgement leaves only after the batch holding its report is durable. A batch that
//! fails to write is kept and retried with whatever came after it; nothing is acknowledged
//! meanwhile, and the ingest health turns NOT_SERVING.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use zonemesh_domain::{Hello, Report, UnixMs};
use zonemesh_engine::model::Model;
use zonemesh_engine::planner::{Plans, ThroughputScheduler};
use zonemesh_engine::{Applied, Dirty, NodeId, Snapshot, Topology};
use zonemesh_proto::v1;

use super::metrics::Metrics;
use crate::Error;
use crate::store::{Batch, Store};

/// Paths one step of the sweep visits (about a millisecond): a query waits for at most one
/// step, where a whole pass over 500,000 paths takes tens of milliseconds.
pub const SWEEP_STEP_PATHS: usize = 16_384;

/// What a stream sends to its agent.
pub type Outbound = mpsc::Sender<Result<v1::AggregatorMessage, tonic::Status>>;

/// Commands from the Ingest streams.
#[derive(Debug)]
pub enum Command {
    /// An agent said hello on a new stream.
    Hello {
        /// The checked hello.
        hello: Hello,
        /// The stream's outbound half.
        outbound: Outbound,
        /// Gets the node and the session id, or why the node is refused (`--max-nodes`).
        reply: oneshot::Sender<Result<(NodeId, u64), Error>>,
    },
    /// A checked report from the agent of `node`.
    Report {
        /// The reporting node.
        node: NodeId,
        /// The stream's session.
        session: u64,
        /// The report.
        report: Report,
        /// Its place in the ingest budget, given back once it is applied.
        permit: Option<OwnedSemaphorePermit>,
    },
    /// Stop: write what is left and end the task.
    Stop,
    /// The tiers' state changed: store it with the next batch (see `server::tiers`).
    Tiers(zonemesh_engine::tiers::TierState),
    /// A stream ended.
    Goodbye {
        /// The node.
        node: NodeId,
        /// The stream's session.
        session: u64,
    },
}

/// The time: the aggregator's `now` comes from here only, so that tests can drive it.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The time now.
    fn now(&self) -> UnixMs;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> UnixMs {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        UnixMs(ms)
    }
}

/// Answers queries from the latest published snapshot, on a pool of blocking threads: never on
/// the owner task, never waiting for it.
#[derive(Clone)]
pub struct Reader {
    published: Arc<ArcSwap<Snapshot>>,
    pool: Arc<Semaphore>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("threads", &self.pool.available_permits())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// A reader of what `published` holds, running at most `threads` queries at once.
    pub fn new(published: Arc<ArcSwap<Snapshot>>, threads: usize, clock: Arc<dyn Clock>) -> Self {
        Self {
            published,
            pool: Arc::new(Semaphore::new(threads.max(1))),
            clock,
        }
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.published.load_full()
    }

    /// The time now, by the aggregator's clock.
    pub fn now(&self) -> UnixMs {
        self.clock.now()
    }

    /// Runs `f` on the latest snapshot, on the query pool, and returns its answer.
    pub async fn query<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Snapshot, UnixMs) -> T + Send + 'static,
    ) -> Result<T, Error> {
        let permit = self
            .pool
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::ShuttingDown)?;
        let snapshot = self.snapshot();
        let now = self.now();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f(&snapshot, now)
        })
        .await
        .map_err(|e| Error::Internal(format!("a query panicked: {e}")))
    }
}

/// Decoded reports that may wait to be applied at once: the ingest budget. Past it, streams
/// stop reading (HTTP/2 flow control then holds their agents back), so that a flood of reports
/// costs bounded memory. 1,024 reports of a 100-peer agent are about 30 MB decoded.
pub const INGEST_BUDGET_REPORTS: usize = 1_024;

/// Handle to the owner task.
#[derive(Clone, Debug)]
pub struct Core {
    commands: mpsc::Sender<Command>,
    reader: Reader,
    budget: Arc<Semaphore>,
}

impl Core {
    /// Sends a command; fails only when the task has stopped.
    pub async fn send(&self, command: Command) -> Result<(), Error> {
        self.commands
            .send(command)
            .await
            .map_err(|_| Error::ShuttingDown)
    }

    /// Asks the task to write what is left and stop.
    pub async fn stop(&self) {
        let _ = self.commands.send(Command::Stop).await;
    }

    /// The readers' side.
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The ingest budget: a permit per decoded report on its way to the owner.
    pub fn budget(&self) -> Arc<Semaphore> {
        self.budget.clone()
    }

    /// Runs `f` on the latest published snapshot (see [`Reader::query`]).
    pub async fn query<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Snapshot, UnixMs) -> T + Send + 'static,
    ) -> Result<T, Error> {
        self.reader.query(f).await
    }
}

struct Session {
    id: u64,
    outbound: Outbound,
    /// Targets of the last plan sent, to send only changes.
    plan: Option<Vec<NodeId>>,
}

/// An acknowledgement waiting for durability.
struct PendingAck {
    session: u64,
    outbound: Outbound,
    sequence: u64,
    /// The report's place in the ingest budget: held until it is acknowledged, so that at most
    /// the budget's reports are applied and not yet durable, and a write never holds more rows.
    _permit: Option<OwnedSemaphorePermit>,
}

/// What one write holds: the nodes and rows that changed, and the tiers' state if it changed.
#[derive(Debug, Default)]
struct Written {
    dirty: Dirty,
    tiers: Option<zonemesh_engine::tiers::TierState>,
}

/// A store write in progress: the store comes home with what was written and how it went.
type Inflight = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<
                    (Box<dyn Store>, Written, Result<(), Error>),
                    tokio::task::JoinError,
                >,
            > + Send,
    >,
>;

/// How long a store write may run before the store counts as unhealthy (a commit takes
/// milliseconds; see `CoreConfig::store_stall`).
pub const STORE_STALL: Duration = Duration::from_secs(10);

/// How long a store write may run before the owner gives up on the store
/// (`CoreConfig::store_hang`).
pub const STORE_HANG: Duration = Duration::from_secs(60);

/// Paths up to which the owner fits the model itself (about 1.3 ms of work at 10,000 paths).
pub const MODEL_ON_OWNER_PATHS: usize = 10_000;

/// Settings of the owner task.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// How often to sweep, re-plan and grant throughput slots.
    pub tick: Duration,
    /// Commands handled before the task looks at queries and finished writes again.
    pub batch_commands: usize,
    /// Fault injection for tests: every store write takes at least this long, which widens the
    /// window in which a crash finds reports applied in memory but not yet durable.
    pub commit_delay: Duration,
    /// Queries answered at once; default: the cores.
    pub query_threads: usize,
    /// Write the store on the owner task itself instead of a blocking thread (tests on a paused
    /// clock, where a write must finish before the next command is looked at).
    pub inline_writes: bool,
    /// Topologies of at most this many paths get the model fitted on the owner at the end of the
    /// sweep pass, as an embedded engine does (cheap: about 130 ns a path), so that the figures
    /// published with the pass are the model's; larger ones on the blocking pool (see
    /// `Owner::run`). Default [`MODEL_ON_OWNER_PATHS`].
    pub model_on_owner_paths: usize,
    /// A store write still running after this long makes the store unhealthy (`/healthz`
    /// degraded, Ingest NOT_SERVING) until it finishes: a disk can hang a write instead of
    /// failing it (sled 0.34 has been seen waiting forever in a flush on a full tmpfs), and a
    /// write that never returns must not look like a slow one. Default [`STORE_STALL`].
    pub store_stall: Duration,
    /// A store write still running after this long stops the owner with [`Ended::StoreHung`],
    /// and the server with an error, so that a supervisor restarts the process: sled cannot be
    /// opened again in a process while a hung write holds its lock. Everything acknowledged is
    /// on disk; agents send what was not acknowledged again. Default [`STORE_HANG`].
    pub store_hang: Duration,
    /// The clock.
    pub clock: Arc<dyn Clock>,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            tick: Duration::from_secs(1),
            batch_commands: 256,
            commit_delay: Duration::ZERO,
            query_threads: std::thread::available_parallelism().map_or(2, usize::from),
            inline_writes: false,
            model_on_owner_paths: MODEL_ON_OWNER_PATHS,
            store_stall: STORE_STALL,
            store_hang: STORE_HANG,
            clock: Arc::new(WallClock),
        }
    }
}

/// The owner task's state.
struct Owner {
    topology: Topology,
    store: Option<Box<dyn Store>>,
    sessions: HashMap<NodeId, Session>,
    next_session: u64,
    /// Acks for reports applied since the in-flight batch was taken.
    waiting: Vec<PendingAck>,
    /// Acks for the in-flight batch.
    inflight_acks: Vec<PendingAck>,
    /// What a write that failed should have written, to be written again with what follows.
    failed: Option<Written>,
    /// The tiers' state to write with the next batch.
    tiers: Option<zonemesh_engine::tiers::TierState>,
    plans: Plans,
    plan_membership: Option<u64>,
    plan_epoch: i64,
    plan_version: u64,
    /// A sweep pass is in progress (see [`SWEEP_STEP_PATHS`]).
    sweeping: bool,
    /// When a store write last measured the store's size.
    size_measured: Option<tokio::time::Instant>,
    /// Where snapshots are published for readers.
    published: Arc<ArcSwap<Snapshot>>,
    clock: Arc<dyn Clock>,
    scheduler: ThroughputScheduler,
    metrics: Arc<Metrics>,
    health: tonic_health::server::HealthReporter,
}

/// Resolves when the owner task has stopped, with why.
pub type Stopped = oneshot::Receiver<Ended>;

/// Why the owner task stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Asked to ([`Core::stop`], or every sender gone), after writing what was left.
    Asked,
    /// A store write did not return within `CoreConfig::store_hang`; the message says so.
    StoreHung(String),
    /// The owner could not run (its runtime did not start, or a store writer panicked).
    Failed(String),
}

/// Starts the owner task over a restored topology and its store, on a thread of its own (with a
/// runtime of its own), so that neither the tasks of thousands of agent streams nor queries can
/// hold it up, nor it them.
pub fn spawn(
    mut topology: Topology,
    store: Box<dyn Store>,
    metrics: Arc<Metrics>,
    health: tonic_health::server::HealthReporter,
    config: CoreConfig,
) -> Result<(Core, Stopped), Error> {
    let (commands, command_rx) = mpsc::channel(4096);
    // The model is fitted by the owner (see `Owner::run`), not inside the sweep.
    topology.fit_models_elsewhere();
    metrics.store_bytes.set(store.size_bytes());
    let published = Arc::new(ArcSwap::from_pointee(topology.snapshot()));
    let reader = Reader::new(
        published.clone(),
        config.query_threads,
        config.clock.clone(),
    );
    let owner = Owner {
        topology,
        store: Some(store),
        sessions: HashMap::new(),
        next_session: 1,
        waiting: Vec::new(),
        inflight_acks: Vec::new(),
        failed: None,
        tiers: None,
        plans: Plans::new(),
        plan_membership: None,
        plan_epoch: -1,
        plan_version: 0,
        sweeping: false,
        size_measured: None,
        scheduler: ThroughputScheduler::default(),
        metrics,
        health,
        published,
        clock: config.clock.clone(),
    };
    let budget = Arc::new(Semaphore::new(INGEST_BUDGET_REPORTS));
    let (done, stopped) = oneshot::channel();
    let owner_budget = budget.clone();
    std::thread::Builder::new()
        .name("zonemesh-owner".into())
        .spawn(move || {
            // The owner and its store writes give way to queries (see `priority`).
            super::priority::yield_to_queries();
            let ended = match tokio::runtime::Builder::new_current_thread()
                .on_thread_start(super::priority::yield_to_queries)
                .enable_all()
                .build()
            {
                Ok(runtime) => {
                    let ended = runtime.block_on(owner.run(command_rx, config, owner_budget));
                    if matches!(ended, Ended::StoreHung(_)) {
                        // Dropping the runtime would wait for the hung write forever.
                        runtime.shutdown_background();
                    }
                    ended
                }
                Err(e) => {
                    tracing::error!(error = %e, "the owner's runtime did not start");
                    Ended::Failed(format!("the owner's runtime did not start: {e}"))
                }
            };
            let _ = done.send(ended);
        })
        .map_err(|e| Error::Internal(format!("the owner's thread did not start: {e}")))?;
    Ok((
        Core {
            commands,
            reader,
            budget,
        },
        stopped,
    ))
}

impl Owner {
    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        config: CoreConfig,
        budget: Arc<Semaphore>,
    ) -> Ended {
        let mut tick = tokio::time::interval(config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut inflight: Option<Inflight> = None;
        let mut retry_at: Option<tokio::time::Instant> = None;
        // When the write in flight counts as stalled (`CoreConfig::store_stall`), and as hung
        // (`CoreConfig::store_hang`).
        let mut stall_at: Option<tokio::time::Instant> = None;
        let mut hang_at: Option<tokio::time::Instant> = None;
        // The model's fit in progress: on the blocking pool over a snapshot, so that a fit
        // (65 ms at 5,000 nodes) never holds up reports, acknowledgements or the sweep. Small
        // topologies are fitted at once on the owner (`CoreConfig::model_on_owner_paths`).
        let mut model_fit: Option<tokio::task::JoinHandle<Arc<Model>>> = None;
        loop {
            tokio::select! {
                biased;
                done = async { inflight.as_mut().expect("guarded").await }, if inflight.is_some() => {
                    inflight = None;
                    (stall_at, hang_at) = (None, None);
                    match done {
                        Ok((store, written, result)) => {
                            self.store = Some(store);
                            match result {
                                Ok(()) => {
                                    let recovered = self.metrics.store_failure.lock().expect("metrics lock").take();
                                    if recovered.is_some() {
                                        tracing::info!("store writes succeed again; held acknowledgements sent");
                                        self.health.set_serving::<v1::ingest_server::IngestServer<super::ingest::IngestService>>().await;
                                    }
                                    self.acknowledge();
                                }
                                Err(e) => {
                                    self.metrics.store_errors.inc();
                                    let first = self.metrics.store_failure.lock().expect("metrics lock").replace(e.to_string()).is_none();
                                    if first {
                                        tracing::error!(error = %e, "store write failed; acknowledgements held, retrying every second");
                                        self.health.set_not_serving::<v1::ingest_server::IngestServer<super::ingest::IngestService>>().await;
                                    } else {
                                        tracing::debug!(error = %e, "store write failed again");
                                    }
                                    self.failed = Some(written);
                                    retry_at = Some(tokio::time::Instant::now() + Duration::from_secs(1));
                                }
                            }
                        }
                        Err(join) => {
                            tracing::error!(error = %join, "store writer panicked; stopping");
                            return Ended::Failed(format!("the store writer panicked: {join}"));
                        }
                    }
                }
                _ = async { tokio::time::sleep_until(stall_at.expect("guarded")).await }, if stall_at.is_some() => {
                    stall_at = None;
                    let stalled = format!(
                        "a store write has not finished in {} s (a full or hung disk?)",
                        config.store_stall.as_secs_f64()
                    );
                    let first = self.metrics.store_failure.lock().expect("metrics lock").replace(stalled.clone()).is_none();
                    tracing::error!(problem = %stalled, "store write stalled; acknowledgements held until it finishes");
                    if first {
                        self.health.set_not_serving::<v1::ingest_server::IngestServer<super::ingest::IngestService>>().await;
                    }
                }
                _ = async { tokio::time::sleep_until(hang_at.expect("guarded")).await }, if hang_at.is_some() => {
                    let hung = format!(
                        "a store write has not returned in {} s; the store cannot be opened again while it holds it",
                        config.store_hang.as_secs_f64()
                    );
                    tracing::error!(problem = %hung, "store hung; stopping (everything acknowledged is on disk)");
                    return Ended::StoreHung(hung);
                }
                fitted = async { model_fit.as_mut().expect("guarded").await }, if model_fit.is_some() => {
                    model_fit = None;
                    match fitted {
                        Ok(model) => {
                            if self.topology.install_model(model) {
                                self.publish();
                            }
                        }
                        Err(e) => tracing::error!(error = %e, "the model's fit failed; the previous model stays"),
                    }
                }
                // Before commands, so that a steady stream of reports cannot hold off the sweep.
                _ = tick.tick() => {
                    // A pass still running when the next tick comes simply goes on.
                    self.sweeping = true;
                }
                // One step at a time: finished writes and new commands get their turn between steps.
                _ = std::future::ready(()), if self.sweeping => {
                    let now = self.clock.now();
                    if self.topology.sweep_step(now, SWEEP_STEP_PATHS) {
                        self.sweeping = false;
                        // Before the gauges of the pass are taken (`after_sweep`).
                        if model_fit.is_none() && self.topology.model_due(now) {
                            if self.topology.view().path_count() <= config.model_on_owner_paths {
                                self.topology.fit_model(now);
                            } else {
                                let snapshot = self.topology.snapshot();
                                model_fit = Some(tokio::task::spawn_blocking(move || {
                                    Arc::new(Model::fit(&snapshot, now))
                                }));
                            }
                        }
                        self.after_sweep();
                    }
                    self.publish();
                }
                command = commands.recv() => {
                    let Some(command) = command else { break };
                    let mut stop = !self.handle(command);
                    for _ in 1..config.batch_commands {
                        if stop {
                            break;
                        }
                        match commands.try_recv() {
                            Ok(c) => stop = !self.handle(c),
                            Err(_) => break,
                        }
                    }
                    // Visible before its write starts, so before any of its acknowledgements.
                    self.publish();
                    self.metrics
                        .ingest_in_flight
                        .set((INGEST_BUDGET_REPORTS - budget.available_permits()) as u64);
                    if stop {
                        break;
                    }
                }
            }
            let may_write = retry_at.is_none_or(|t| tokio::time::Instant::now() >= t);
            if inflight.is_none() && may_write {
                retry_at = None;
                inflight = self.start_write(config.commit_delay, config.inline_writes);
                if inflight.is_some() {
                    let now = tokio::time::Instant::now();
                    (stall_at, hang_at) = (
                        Some(now + config.store_stall),
                        Some(now + config.store_hang),
                    );
                }
            }
        }
        // Shutting down: write what is left and acknowledge it.
        if let Some(handle) = inflight.take()
            && let Ok((store, written, result)) = handle.await
        {
            self.store = Some(store);
            match result {
                Ok(()) => self.acknowledge(),
                // Written again below with the rest; its acks wait for that write.
                Err(_) => self.failed = Some(written),
            }
        }
        if let Some(handle) = self.start_write(Duration::ZERO, config.inline_writes)
            && let Ok((_, _, Ok(()))) = handle.await
        {
            self.acknowledge();
        }
        Ended::Asked
    }

    /// Hands readers the matrix as it is now.
    fn publish(&self) {
        self.published.store(Arc::new(self.topology.snapshot()));
        self.metrics.publishes.inc();
    }

    /// Starts writing what changed, if anything did (or acks are waiting): on a blocking thread,
    /// or at once on this task when `inline`.
    ///
    /// The records are taken from a snapshot on the writing thread: the owner hands over which
    /// nodes and rows changed, never copies them.
    fn start_write(&mut self, delay: Duration, inline: bool) -> Option<Inflight> {
        let mut dirty = self.topology.take_dirty();
        let mut tiers = self.tiers.take();
        if let Some(failed) = self.failed.take() {
            dirty = failed.dirty.union(dirty);
            // A newer state of the tiers supersedes the one that failed.
            tiers = tiers.or(failed.tiers);
        }
        if dirty.is_empty() && tiers.is_none() {
            // Everything before is durable already: waiting acks can go.
            self.inflight_acks.append(&mut self.waiting);
            self.acknowledge();
            return None;
        }
        self.inflight_acks.append(&mut self.waiting);
        let mut store = self
            .store
            .take()
            .expect("store is home when nothing is in flight");
        let metrics = self.metrics.clone();
        // sled walks its files to tell its size: at most once a second, and never on this task
        // (it took an eighth of the owner's time at 5,000 nodes when done after every commit).
        let measure_size = self
            .size_measured
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if measure_size {
            self.size_measured = Some(tokio::time::Instant::now());
        }
        let snapshot = self.topology.snapshot();
        let write = move || {
            let started = std::time::Instant::now();
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            let mut batch = Batch::from_snapshot(&snapshot, &dirty);
            batch.tiers = tiers.clone();
            drop(snapshot);
            let result = store.commit(&batch);
            metrics
                .commit_seconds
                .observe(started.elapsed().as_secs_f64());
            metrics.paths_written.add(batch.path_count() as u64);
            if measure_size {
                metrics.store_bytes.set(store.size_bytes());
            }
            (store, Written { dirty, tiers }, result)
        };
        if inline {
            let done = write();
            return Some(Box::pin(async move { Ok(done) }));
        }
        Some(Box::pin(tokio::task::spawn_blocking(write)))
    }

    /// Sends the acknowledgements of the batch that just became durable (the highest per stream).
    fn acknowledge(&mut self) {
        let mut highest: HashMap<u64, (Outbound, u64)> = HashMap::new();
        for ack in self.inflight_acks.drain(..) {
            let entry = highest.entry(ack.session).or_insert((ack.outbound, 0));
            entry.1 = entry.1.max(ack.sequence);
        }
        for (_, (outbound, sequence)) in highest {
            let message = v1::AggregatorMessage {
                kind: Some(v1::aggregator_message::Kind::Ack(v1::Ack { sequence })),
            };
            // A full channel means the agent is not reading: a later ack covers this one.
            let _ = outbound.try_send(Ok(message));
        }
    }

    /// Handles one command; false means stop.
    fn handle(&mut self, command: Command) -> bool {
        let now = self.clock.now();
        match command {
            Command::Stop => return false,
            Command::Tiers(state) => self.tiers = Some(state),
            Command::Hello {
                hello,
                outbound,
                reply,
            } => {
                if let Err(e) = self.topology.admit_hello(&hello) {
                    if let zonemesh_engine::Error::Limit { limit, .. } = &e {
                        self.metrics.security.limit_hit(*limit);
                    }
                    tracing::warn!(node = %hello.node, "agent refused: {e}");
                    let _ = reply.send(Err(e.into()));
                    return true;
                }
                let (node, applied) = self.topology.register(&hello, now);
                let session = self.next_session;
                self.next_session += 1;
                tracing::info!(node = %hello.node, zone = %hello.zone, icmp = hello.icmp_mode.as_str(), applied, session, "agent connected");
                // The answer to a hello is an ack of what is already applied, once that is durable.
                self.waiting.push(PendingAck {
                    session,
                    outbound: outbound.clone(),
                    sequence: applied,
                    _permit: None,
                });
                self.sessions.insert(
                    node,
                    Session {
                        id: session,
                        outbound,
                        plan: None,
                    },
                );
                self.metrics.connected.set(self.sessions.len() as u64);
                let _ = reply.send(Ok((node, session)));
            }
            Command::Report {
                node,
                session,
                report,
                permit,
            } => {
                // Its place in the ingest budget is given back with its acknowledgement (or at
                // once, if it is refused).
                let Some(s) = self.sessions.get(&node).filter(|s| s.id == session) else {
                    return true; // a stream that was replaced; its agent resends on the new one
                };
                let outbound = s.outbound.clone();
                if let Err(e) = self.topology.admit_report(node, &report) {
                    if let zonemesh_engine::Error::Limit { limit, .. } = &e {
                        self.metrics.security.limit_hit(*limit);
                    }
                    self.metrics.refused_reports.inc();
                    tracing::warn!(node = %self.topology.node(node).name, sequence = report.sequence, "report refused: {e}");
                    let refusal = super::ingest::refusal(
                        tonic::Code::ResourceExhausted,
                        "paths",
                        e.to_string(),
                        report.sequence,
                    );
                    // `try_send`: the owner task never waits for a stream.
                    let _ = outbound.try_send(Ok(refusal));
                    return true;
                }
                let paths = report.paths.len() as u64;
                match self.topology.apply_report(node, &report, now) {
                    Ok(Applied::Applied) => {
                        self.metrics.reports.inc();
                        self.metrics.path_summaries.add(paths);
                    }
                    Ok(Applied::Duplicate) => self.metrics.duplicate_reports.inc(),
                    Err(e) => {
                        // The stream checked the report already; this is a bug, not bad input.
                        tracing::error!(error = %e, "report refused by the engine");
                        return true;
                    }
                }
                self.waiting.push(PendingAck {
                    session,
                    outbound,
                    sequence: report.sequence,
                    _permit: permit,
                });
            }
            Command::Goodbye { node, session } => {
                if self.sessions.get(&node).is_some_and(|s| s.id == session) {
                    self.sessions.remove(&node);
                    self.topology.disconnect(node, now);
                    self.metrics.connected.set(self.sessions.len() as u64);
                    tracing::info!(node = %self.topology.node(node).name, session, "agent disconnected");
                }
            }
        }
        true
    }

    /// What follows a complete sweep: plans for the new membership, throughput grants, gauges.
    fn after_sweep(&mut self) {
        let now = self.clock.now();
        let config = self.topology.config().plan;
        let epoch = if config.rotate_ms > 0 {
            now.0 / config.rotate_ms
        } else {
            0
        };
        if self.plan_membership != Some(self.topology.view().membership_version())
            || epoch != self.plan_epoch
        {
            self.plans = self.topology.view().plan(now);
            self.plan_membership = Some(self.topology.view().membership_version());
            self.plan_epoch = epoch;
        }
        self.push_plans();
        let sessions = &self.sessions;
        let grants = self.scheduler.schedule(
            self.topology.view(),
            &self.plans,
            &|n| sessions.contains_key(&n),
            now,
        );
        for grant in grants {
            self.topology
                .note_throughput_test(grant.src, grant.dst, grant.start, grant.until);
            let wire = v1::ThroughputGrant::from(ThroughputScheduler::describe(
                self.topology.view(),
                &grant,
            ));
            if let Some(s) = self.sessions.get(&grant.src) {
                tracing::debug!(src = %self.topology.node(grant.src).name, dst = %wire.peer, id = grant.id, "throughput grant");
                self.metrics.grants.inc();
                let _ = s.outbound.try_send(Ok(v1::AggregatorMessage {
                    kind: Some(v1::aggregator_message::Kind::Grant(wire)),
                }));
            }
        }
        self.metrics
            .observe_windows_under_load(self.topology.windows_under_load());
        // The gauges are read from the snapshot just published, on the query pool.
        let (metrics, snapshot) = (self.metrics.clone(), self.topology.snapshot());
        tokio::task::spawn_blocking(move || metrics.observe_topology(&snapshot, now));
    }

    /// Sends every connected agent whose plan changed its new plan.
    fn push_plans(&mut self) {
        for (node, session) in &mut self.sessions {
            let targets = self.plans.get(node).cloned().unwrap_or_default();
            if session.plan.as_ref() == Some(&targets) {
                continue;
            }
            self.plan_version += 1;
            let plan =
                v1::ProbePlan::from(self.topology.view().probe_plan(&targets, self.plan_version));
            let message = v1::AggregatorMessage {
                kind: Some(v1::aggregator_message::Kind::Plan(plan)),
            };
            // On a full channel the plan is tried again at the next tick.
            if session.outbound.try_send(Ok(message)).is_ok() {
                session.plan = Some(targets);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The owner task on an injected clock, with writes done inline on the task: group commit,
    //! acknowledgements held while the store fails, housekeeping under a steady stream of
    //! reports, and "acknowledged means visible".

    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};

    use zonemesh_domain::NodeState;
    use zonemesh_engine::testing::{hello, name, sample};
    use zonemesh_engine::{EngineConfig, NodeId};

    use super::*;
    use crate::store::{Contents, MemStore};

    /// A clock the test moves.
    #[derive(Debug, Default)]
    struct ManualClock(AtomicI64);

    impl ManualClock {
        fn at(ms: i64) -> Arc<Self> {
            Arc::new(Self(AtomicI64::new(ms)))
        }
        fn advance(&self, ms: i64) {
            self.0.fetch_add(ms, Ordering::SeqCst);
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> UnixMs {
            UnixMs(self.0.load(Ordering::SeqCst))
        }
    }

    /// A store in memory that counts its writes, fails them while `failing` is set and holds
    /// them (as a hung disk does) while `hanging` is set.
    #[derive(Debug, Default)]
    struct Flaky {
        inner: MemStore,
        failing: Arc<AtomicBool>,
        hanging: Arc<AtomicBool>,
        commits: Arc<AtomicUsize>,
        reports_written: Arc<Mutex<Vec<usize>>>,
    }

    impl Store for Flaky {
        fn load(&self) -> Result<Contents, Error> {
            self.inner.load()
        }
        fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
            for _ in 0..3_000 {
                if !self.hanging.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if self.failing.load(Ordering::SeqCst) {
                return Err(Error::Store {
                    path: "memory".into(),
                    action: "write",
                    source: std::io::Error::other("the disk is full"),
                });
            }
            self.commits.fetch_add(1, Ordering::SeqCst);
            self.reports_written.lock().unwrap().push(batch.rows.len());
            self.inner.commit(batch)
        }
        fn size_bytes(&self) -> u64 {
            self.inner.size_bytes()
        }
    }

    struct Harness {
        core: Core,
        clock: Arc<ManualClock>,
        failing: Arc<AtomicBool>,
        hanging: Arc<AtomicBool>,
        commits: Arc<AtomicUsize>,
        metrics: Arc<Metrics>,
        health: tonic_health::server::HealthService,
    }

    fn harness() -> Harness {
        harness_with(|_| {})
    }

    fn harness_with(adjust: impl FnOnce(&mut CoreConfig)) -> Harness {
        let clock = ManualClock::at(1_000_000);
        let store = Flaky::default();
        let (failing, hanging, commits) = (
            store.failing.clone(),
            store.hanging.clone(),
            store.commits.clone(),
        );
        let metrics = Arc::new(Metrics::default());
        let health = tonic_health::server::HealthReporter::new();
        let health_service =
            tonic_health::server::HealthService::from_health_reporter(health.clone());
        let mut config = CoreConfig {
            tick: Duration::from_millis(100),
            inline_writes: true,
            // Every fit on the blocking pool, as on a large cluster.
            model_on_owner_paths: 0,
            query_threads: 1,
            clock: clock.clone(),
            ..CoreConfig::default()
        };
        adjust(&mut config);
        let (core, _stopped) = spawn(
            Topology::new(EngineConfig::default()),
            Box::new(store),
            metrics.clone(),
            health,
            config,
        )
        .unwrap();
        Harness {
            core,
            clock,
            failing,
            hanging,
            commits,
            metrics,
            health: health_service,
        }
    }

    /// An agent's session: its node and its outbound channel's receiving end.
    struct Agent {
        node: NodeId,
        session: u64,
        inbox: mpsc::Receiver<Result<v1::AggregatorMessage, tonic::Status>>,
        name: &'static str,
    }

    async fn connect(h: &Harness, node: &'static str, zone: &str) -> Agent {
        let (outbound, inbox) = mpsc::channel(1024);
        let (reply, replied) = oneshot::channel();
        h.core
            .send(Command::Hello {
                hello: hello(node, zone),
                outbound,
                reply,
            })
            .await
            .unwrap();
        let (id, session) = replied.await.unwrap().unwrap();
        Agent {
            node: id,
            session,
            inbox,
            name: node,
        }
    }

    async fn report(h: &Harness, agent: &Agent, sequence: u64, to: &str, rtt_us: f64) {
        let mut s = sample(agent.name, to, rtt_us, 0, None);
        let now = h.clock.now();
        s.window_start = UnixMs(now.0 - 10_000);
        s.window_end = now;
        let permit = h.core.budget().try_acquire_owned().ok();
        h.core
            .send(Command::Report {
                node: agent.node,
                session: agent.session,
                report: Report {
                    sequence,
                    paths: vec![s],
                },
                permit,
            })
            .await
            .unwrap();
    }

    /// The highest sequence acknowledged among the messages waiting, within `limit`.
    async fn acked(agent: &mut Agent, limit: Duration) -> Option<u64> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut highest = None;
        loop {
            let next = tokio::time::timeout_at(deadline, agent.inbox.recv()).await;
            match next {
                Ok(Some(Ok(v1::AggregatorMessage {
                    kind: Some(v1::aggregator_message::Kind::Ack(a)),
                }))) => {
                    highest = Some(a.sequence);
                    return highest;
                }
                Ok(Some(_)) => continue,
                _ => return highest,
            }
        }
    }

    #[tokio::test]
    async fn a_report_acknowledged_is_visible_to_queries_and_writes_are_grouped() {
        let h = harness();
        let mut a = connect(&h, "a", "z1").await;
        let _b = connect(&h, "b", "z1").await;
        assert_eq!(
            acked(&mut a, Duration::from_secs(5)).await,
            Some(0),
            "the hello's ack"
        );
        for seq in 1..=50 {
            report(&h, &a, seq, "b", 100.0 + seq as f64).await;
        }
        // Wait for the last report's acknowledgement; then a query sees it, with no wait.
        let mut last = 0;
        while last < 50 {
            last = acked(&mut a, Duration::from_secs(5))
                .await
                .expect("acks come");
        }
        let (src, dst) = (a.node, h.core.reader().snapshot().id(&name("b")).unwrap());
        let seen = h
            .core
            .query(move |t, _| t.path(src, dst).map(|p| p.sent_total))
            .await
            .unwrap();
        assert_eq!(
            seen,
            Some(50 * 100),
            "every acknowledged report is in the snapshot"
        );
        assert_eq!(
            h.core.budget().available_permits(),
            INGEST_BUDGET_REPORTS,
            "all given back"
        );
        let commits = h.commits.load(Ordering::SeqCst);
        assert!(
            commits < 50,
            "50 reports in {commits} writes: acknowledgements wait for a group commit"
        );
    }

    #[tokio::test]
    async fn acknowledgements_wait_while_the_store_fails_and_come_when_it_recovers() {
        let h = harness();
        let mut a = connect(&h, "a", "z1").await;
        let _b = connect(&h, "b", "z1").await;
        assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(0));
        h.failing.store(true, Ordering::SeqCst);
        report(&h, &a, 1, "b", 100.0).await;
        report(&h, &a, 2, "b", 100.0).await;
        assert_eq!(
            acked(&mut a, Duration::from_millis(1_500)).await,
            None,
            "nothing acknowledged while writes fail"
        );
        assert!(h.metrics.store_errors.get() >= 1);
        // Applied (and visible) all the same: only the acknowledgement waits for durability.
        let visible = h.core.query(|t, _| t.path_count()).await.unwrap();
        assert_eq!(visible, 1);
        assert_eq!(
            h.core.budget().available_permits(),
            INGEST_BUDGET_REPORTS - 2,
            "held until acknowledged"
        );
        h.failing.store(false, Ordering::SeqCst);
        let mut last = 0;
        while last < 2 {
            last = acked(&mut a, Duration::from_secs(5))
                .await
                .expect("acknowledged once the write succeeds (retried every second)");
        }
        assert_eq!(h.core.budget().available_permits(), INGEST_BUDGET_REPORTS);
    }

    /// Ingest's serving status as a health client sees it.
    async fn ingest_status(h: &Harness) -> i32 {
        use tonic_health::pb::health_server::Health as _;
        let request = tonic::Request::new(tonic_health::pb::HealthCheckRequest {
            service: "zonemesh.v1.Ingest".into(),
        });
        match h.health.check(request).await {
            Ok(answer) => answer.into_inner().status,
            Err(_) => tonic_health::pb::health_check_response::ServingStatus::Unknown as i32,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_hangs_makes_the_store_unhealthy_until_it_finishes() {
        use tonic_health::pb::health_check_response::ServingStatus;
        let h = harness_with(|c| {
            c.inline_writes = false;
            c.store_stall = Duration::from_millis(300);
        });
        let mut a = connect(&h, "a", "z1").await;
        let _b = connect(&h, "b", "z1").await;
        assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(0));
        h.hanging.store(true, Ordering::SeqCst);
        report(&h, &a, 1, "b", 100.0).await;
        // Neither acknowledged nor healthy while the write hangs.
        assert_eq!(acked(&mut a, Duration::from_millis(1_000)).await, None);
        let failure = h
            .metrics
            .store_failure()
            .expect("a stalled write is a store failure");
        assert!(failure.contains("has not finished in 0.3 s"), "{failure}");
        assert_eq!(ingest_status(&h).await, ServingStatus::NotServing as i32);
        // The write returns: acknowledged, healthy again.
        h.hanging.store(false, Ordering::SeqCst);
        assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(1));
        assert_eq!(h.metrics.store_failure(), None);
        assert_eq!(ingest_status(&h).await, ServingStatus::Serving as i32);
    }

    #[tokio::test]
    async fn the_model_is_fitted_away_from_the_owner_and_published() {
        let h = harness();
        let mut a = connect(&h, "a", "z1").await;
        let _b = connect(&h, "b", "z1").await;
        assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(0));
        report(&h, &a, 1, "b", 100.0).await;
        assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(1));
        h.clock.advance(1_000);
        let after = h.clock.now();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let snapshot = h.core.reader().snapshot();
            let model = snapshot.model();
            if model.fitted_at().is_some_and(|at| at.0 >= after.0)
                && model.node(a.node).is_some_and(|t| t.paths == 1)
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no model fitted at {after:?} or later was published: {:?}",
                model.fitted_at()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn housekeeping_runs_under_a_steady_stream_of_reports() {
        let h = harness();
        let mut a = connect(&h, "a", "z1").await;
        let gone = connect(&h, "gone", "z1").await;
        let _b = connect(&h, "b", "z1").await;
        assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(0));
        h.core
            .send(Command::Goodbye {
                node: gone.node,
                session: gone.session,
            })
            .await
            .unwrap();
        // "gone" is DOWN once 30 s pass without its agent; the sweep must notice while a
        // reports without a pause.
        let gone_id = gone.node;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        // (A snapshot published before "gone" said hello does not hold it yet.)
        let connected =
            |s: &Snapshot| s.nodes().len() <= gone_id.0 as usize || s.node(gone_id).connected;
        while connected(&h.core.reader().snapshot()) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the goodbye is applied"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        h.clock.advance(31_000);
        let feeder = {
            let (core, clock) = (h.core.clone(), h.clock.clone());
            let a = Agent {
                node: a.node,
                session: a.session,
                inbox: mpsc::channel(1).1,
                name: "a",
            };
            tokio::spawn(async move {
                let h = Harness {
                    core,
                    clock,
                    failing: Arc::default(),
                    hanging: Arc::default(),
                    commits: Arc::default(),
                    metrics: Arc::default(),
                    health: tonic_health::server::HealthService::from_health_reporter(
                        tonic_health::server::HealthReporter::new(),
                    ),
                };
                for seq in 1..=100_000 {
                    report(&h, &a, seq, "b", 100.0).await;
                }
            })
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let version_before = h.core.reader().snapshot().membership_version();
        loop {
            let snapshot = h.core.reader().snapshot();
            let now = h.clock.now();
            if snapshot.state(gone_id, now).0 == NodeState::Down
                && snapshot.membership_version() > version_before
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no sweep under a stream of reports: membership {} (before {version_before}), {:?}, publishes {}",
                snapshot.membership_version(),
                snapshot.state(gone_id, now),
                h.metrics.publishes.get()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!feeder.is_finished(), "the reports were still coming");
        feeder.abort();
    }
}
