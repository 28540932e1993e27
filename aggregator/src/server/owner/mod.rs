//! The one owner of the topology: a task fed by commands, and the only writer of the state.
//!
//! The edges send the owner domain [`Command`]s (hello, report, goodbye) and never touch the state
//! themselves; what the owner says to an agent is a domain [`Outbound`] (ack, refusal, plan,
//! grant) on that agent's channel, which the ingest edge turns into wire messages, and the
//! store's health goes out on a [`StoreHealth`] watch. After every batch of commands and every
//! step of the sweep, the owner publishes an immutable [`Snapshot`] (copy-on-write: publishing
//! shares every table and copies none). Queries never go to the owner: a [`Reader`] answers them
//! from the latest published snapshot. The once-a-second tick and the sweep's steps come before
//! ingest commands, so that a steady stream of reports cannot hold off housekeeping.
//!
//! A report's effect is published before its acknowledgement can leave (the batch is published
//! before it is written, and acknowledged after): acknowledged means visible to queries.
//!
//! Durability is group commit (see `write.rs`): while one batch is being written (on a blocking
//! thread), every report that arrives is applied in memory and its acknowledgement waits for the
//! *next* batch. An acknowledgement leaves only after the batch holding its report is durable. A
//! batch that fails to write is kept and retried with whatever came after it; nothing is
//! acknowledged meanwhile, and the store's health says why.

mod cluster;
mod config;
mod messages;
mod sessions;
#[cfg(test)]
mod tests;
mod write;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use zonemesh_domain::{Hello, Report, ThroughputGrant, UnixMs};
use zonemesh_engine::model::Model;
use zonemesh_engine::planner::{Grant, Plans, Suspected, ThroughputScheduler};
use zonemesh_engine::tiers::TierState;
use zonemesh_engine::{Applied, NodeId, Snapshot, Topology};

pub use cluster::ClusterStart;
pub use config::{
    INGEST_BUDGET_PATHS, MODEL_ON_OWNER_PATHS, OwnerConfig, STORE_HANG, STORE_STALL,
    SWEEP_STEP_PATHS, budget_permits,
};
pub use messages::{
    Command, Ended, LogItem, Logged, Outbound, OutboundTx, Refusal, RefusalKind, Stopped, ToLog,
};

use super::clock::Clock;
use super::health::StoreHealth;
use super::metrics::Metrics;
use super::reader::Reader;
use crate::Error;
use crate::cluster::entry::Entry;
use crate::store::Store;
use cluster::ClusterState;
use config::RELAY_SLACK_MS;
use sessions::{Session, Sessions};
use write::{PendingAck, Writes};

/// Handle to the owner: commands in, the readers' side, the ingest budget, the store's health,
/// the tiers' groups as decided.
#[derive(Clone, Debug)]
pub struct Owner {
    commands: mpsc::Sender<Command>,
    reader: Reader,
    budget: Arc<Semaphore>,
    health: StoreHealth,
    tiers: watch::Receiver<Option<TierState>>,
}

impl Owner {
    /// Sends a command; fails only when the owner has stopped.
    pub async fn send(&self, command: Command) -> Result<(), Error> {
        self.commands
            .send(command)
            .await
            .map_err(|_| Error::ShuttingDown)
    }

    /// Asks the owner to write what is left and stop.
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

    /// The store's health, as the owner last saw it.
    pub fn store_health(&self) -> &StoreHealth {
        &self.health
    }

    /// The tiers' groups as last decided and stored (by this process alone, or by the leader
    /// through the log); `None` before the first decision.
    pub fn decided_tiers(&self) -> watch::Receiver<Option<TierState>> {
        self.tiers.clone()
    }

    /// Runs `f` on the latest published snapshot (see [`Reader::query`]).
    pub async fn query<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Snapshot, UnixMs) -> T + Send + 'static,
    ) -> Result<T, Error> {
        self.reader.query(f).await
    }
}

/// The owner's state: the topology, the sessions, the planner's and the writes' state.
struct State {
    topology: Topology,
    sessions: Sessions,
    next_session: u64,
    writes: Writes,
    plans: Plans,
    /// What the faults task suspects: probed densely.
    suspected: Suspected,
    plan_membership: Option<u64>,
    plan_epoch: i64,
    plan_version: u64,
    /// A sweep pass is in progress (see [`SWEEP_STEP_PATHS`]).
    sweeping: bool,
    /// The model's fit in progress: on the blocking pool over a snapshot, so that a fit (65 ms
    /// at 5,000 nodes) never holds up reports, acknowledgements or the sweep. Small topologies
    /// are fitted at once on the owner ([`OwnerConfig::model_on_owner_paths`]).
    model_fit: Option<tokio::task::JoinHandle<Arc<Model>>>,
    /// Where snapshots are published for readers.
    published: Arc<ArcSwap<Snapshot>>,
    clock: Arc<dyn Clock>,
    scheduler: ThroughputScheduler,
    metrics: Arc<Metrics>,
    budget: Arc<Semaphore>,
    config: OwnerConfig,
    /// With `--cluster`: the log's part.
    cluster: Option<ClusterState>,
    /// The tiers' groups as decided (see [`Owner::decided_tiers`]).
    tiers: watch::Sender<Option<TierState>>,
}

/// Starts the owner over a restored topology and its store, on a thread of its own (with a
/// runtime of its own), so that neither the tasks of thousands of agent streams nor queries can
/// hold it up, nor it them. The store's health is written to `health`. A replica (`cluster`)
/// applies the log it is fed and acknowledges once entries are applied. `tiers` is the tiers'
/// state the store held.
pub fn spawn(
    mut topology: Topology,
    store: Box<dyn Store>,
    tiers: Option<TierState>,
    metrics: Arc<Metrics>,
    health: StoreHealth,
    config: OwnerConfig,
    cluster: Option<ClusterStart>,
) -> Result<(Owner, Stopped), Error> {
    let (commands, command_rx) = mpsc::channel(4096);
    // The model is fitted by the owner (see `State::sweep_step`), not inside the sweep.
    topology.fit_models_elsewhere();
    metrics.store_bytes.set(store.size_bytes());
    let published = Arc::new(ArcSwap::from_pointee(topology.snapshot()));
    let reader = Reader::new(
        published.clone(),
        config.query_threads,
        config.clock.clone(),
    );
    let budget = Arc::new(Semaphore::new(INGEST_BUDGET_PATHS));
    let mut writes = Writes::new(store, metrics.clone(), health.clone(), config.clone());
    if let Some(start) = &cluster {
        writes.checkpoints_for(start.progress.clone());
    }
    let cluster = cluster.map(|start| ClusterState::new(start, &mut topology));
    let (tiers, tiers_rx) = watch::channel(tiers);
    let state = State {
        topology,
        sessions: HashMap::new(),
        next_session: 1,
        writes,
        plans: Plans::new(),
        suspected: Suspected::default(),
        plan_membership: None,
        plan_epoch: -1,
        plan_version: 0,
        sweeping: false,
        model_fit: None,
        scheduler: ThroughputScheduler::default(),
        metrics,
        published,
        clock: config.clock.clone(),
        budget: budget.clone(),
        config,
        cluster,
        tiers,
    };
    let (done, stopped) = oneshot::channel();
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
                    let ended = runtime.block_on(state.run(command_rx));
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
        Owner {
            commands,
            reader,
            budget,
            health,
            tiers: tiers_rx,
        },
        stopped,
    ))
}

/// Waits for `slot`'s future, if there is one (`select!` arms guard on `is_some`).
async fn wait_on<F: std::future::Future + Unpin>(slot: &mut Option<F>) -> F::Output {
    slot.as_mut().expect("guarded by is_some").await
}

impl State {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) -> Ended {
        let mut tick = tokio::time::interval(self.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                event = self.writes.event(), if self.writes.in_flight() => {
                    if let Err(ended) = self.writes.on(event) {
                        return ended;
                    }
                }
                fitted = wait_on(&mut self.model_fit), if self.model_fit.is_some() => {
                    self.model_fitted(fitted);
                }
                // Before commands, so that a steady stream of reports cannot hold off the sweep.
                // A pass still running when the next tick comes simply goes on.
                _ = tick.tick() => self.sweeping = true,
                // One step at a time: finished writes and new commands get their turn between steps.
                _ = std::future::ready(()), if self.sweeping => self.sweep_step(),
                command = commands.recv() => {
                    let Some(command) = command else { break };
                    if !self.handle_batch(command, &mut commands) {
                        break;
                    }
                }
            }
            let cluster = &mut self.cluster;
            self.writes.start_if_due(&mut self.topology, |t| {
                cluster.as_mut().map(|c| c.checkpoint(t))
            });
        }
        let place = self.cluster.as_mut().map(|c| c.checkpoint(&self.topology));
        self.writes.finish(&mut self.topology, place).await;
        Ended::Asked
    }

    /// Handles `first` and the commands already waiting behind it, up to a batch; then
    /// publishes. False means stop.
    fn handle_batch(&mut self, first: Command, commands: &mut mpsc::Receiver<Command>) -> bool {
        let mut go_on = self.handle(first);
        for _ in 1..self.config.batch_commands {
            if !go_on {
                break;
            }
            match commands.try_recv() {
                Ok(c) => go_on = self.handle(c),
                Err(_) => break,
            }
        }
        // Visible before its write starts, so before any of its acknowledgements.
        self.publish();
        if let Some(cluster) = &mut self.cluster {
            cluster.release();
        }
        self.metrics
            .ingest_in_flight
            .set((INGEST_BUDGET_PATHS - self.budget.available_permits()) as u64);
        go_on
    }

    /// One step of the sweep; at the end of a pass, the model's fit when due, plans, grants and
    /// gauges.
    fn sweep_step(&mut self) {
        let now = self.clock.now();
        if self.topology.sweep_step(now, SWEEP_STEP_PATHS) {
            self.sweeping = false;
            // Before the gauges of the pass are taken (`after_sweep`).
            if self.model_fit.is_none() && self.topology.model_due(now) {
                if self.topology.view().path_count() <= self.config.model_on_owner_paths {
                    self.topology.fit_model(now);
                } else {
                    let snapshot = self.topology.snapshot();
                    self.model_fit = Some(tokio::task::spawn_blocking(move || {
                        Arc::new(Model::fit(&snapshot, now))
                    }));
                }
            }
            self.after_sweep();
        }
        self.publish();
    }

    /// A fit from the blocking pool came back: installed unless a later one already is.
    fn model_fitted(&mut self, fitted: Result<Arc<Model>, tokio::task::JoinError>) {
        self.model_fit = None;
        match fitted {
            Ok(model) => {
                if self.topology.install_model(model) {
                    self.publish();
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "the model's fit failed; the previous model stays")
            }
        }
    }

    /// Hands readers the matrix as it is now.
    fn publish(&self) {
        self.published.store(Arc::new(self.topology.snapshot()));
        self.metrics.publishes.inc();
    }

    /// Handles one command; false means stop.
    fn handle(&mut self, command: Command) -> bool {
        match command {
            Command::Stop => return false,
            Command::Tiers(state) => self.decide_tiers(state),
            Command::Baselines(baselines) => self.writes.store_baselines(baselines),
            Command::Suspects(elements) => {
                let view = self.topology.view();
                self.suspected = Suspected::new(view, &elements, view.config().plan.max_suspects);
                self.scheduler
                    .keep_quiet(self.suspected.quiet(view, &self.plans));
                self.push_plans();
            }
            Command::Hello {
                hello,
                outbound,
                reply,
                logged: Some(logged),
            } => match &mut self.cluster {
                Some(cluster) => cluster.hello(
                    hello,
                    outbound,
                    reply,
                    logged,
                    &self.topology,
                    &mut self.sessions,
                ),
                None => {
                    let _ = reply.send(Err(Error::Internal(
                        "a logged hello on an aggregator without --cluster".into(),
                    )));
                }
            },
            Command::Hello {
                hello,
                outbound,
                reply,
                logged: None,
            } => {
                let _ = reply.send(self.hello(&hello, outbound));
            }
            Command::Apply(items) => {
                if let Some(cluster) = &mut self.cluster {
                    cluster.apply(items, &mut self.topology, &mut self.sessions, &self.metrics);
                    if let Some(state) = cluster.take_decided_tiers() {
                        self.keep_tiers(state);
                    }
                }
                self.relay_decided();
            }
            Command::AckAfter {
                log_seq,
                session,
                outbound,
                sequence,
                permit,
            } => {
                if let Some(cluster) = &mut self.cluster {
                    let ack = PendingAck {
                        session,
                        outbound,
                        sequence,
                        _permit: permit,
                    };
                    cluster.ack_after(log_seq, ack);
                }
            }
            Command::Report {
                node,
                session,
                report,
                permit,
            } => self.report(node, session, &report, permit),
            Command::Goodbye { node, session } => self.goodbye(node, session),
        }
        true
    }

    /// New tiers' groups from the tiers task. Alone, they are decided: stored with the next
    /// batch and drawn from at once. In a cluster they go to the log as the leader's decision
    /// (dropped when this replica does not lead), and every replica keeps them when it applies
    /// the entry.
    fn decide_tiers(&mut self, state: TierState) {
        match &self.cluster {
            None => self.keep_tiers(state),
            Some(cluster) => {
                if let Some(epoch) = cluster.leading() {
                    cluster.decide(Entry::Tiers { epoch, state });
                }
            }
        }
    }

    /// Stores decided tiers' groups and hands them to the tiers task.
    fn keep_tiers(&mut self, state: TierState) {
        self.writes.store_tiers(state.clone());
        self.tiers.send_replace(Some(state));
    }

    /// Registers the agent of `hello` and opens its session; refused over `--max-nodes`.
    fn hello(&mut self, hello: &Hello, outbound: OutboundTx) -> Result<(NodeId, u64), Error> {
        if let Err(e) = self.topology.admit_hello(hello) {
            if let zonemesh_engine::Error::Limit { limit, .. } = &e {
                self.metrics.security.limit_hit(*limit);
            }
            tracing::warn!(node = %hello.node, "agent refused: {e}");
            return Err(e.into());
        }
        let (node, applied) = self.topology.register(hello, self.clock.now());
        let session = self.next_session;
        self.next_session += 1;
        tracing::info!(node = %hello.node, zone = %hello.zone, icmp = hello.icmp_mode.as_str(), applied, session, "agent connected");
        // The answer to a hello is an ack of what is already applied, once that is durable.
        self.writes.acknowledge_when_durable(PendingAck {
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
        Ok((node, session))
    }

    /// Applies a report; its acknowledgement waits for the write that holds it. Its place in the
    /// ingest budget is given back with its acknowledgement (or at once, if it is refused).
    fn report(
        &mut self,
        node: NodeId,
        session: u64,
        report: &Report,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        let Some(s) = self.sessions.get(&node).filter(|s| s.id == session) else {
            return; // a stream that was replaced; its agent resends on the new one
        };
        let outbound = s.outbound.clone();
        if let Err(e) = self.topology.admit_report(node, report) {
            if let zonemesh_engine::Error::Limit { limit, .. } = &e {
                self.metrics.security.limit_hit(*limit);
            }
            self.metrics.refused_reports.inc();
            tracing::warn!(node = %self.topology.node(node).name, sequence = report.sequence, "report refused: {e}");
            let refusal = Refusal {
                kind: RefusalKind::OverLimit,
                field: "paths".into(),
                message: e.to_string(),
                sequence: report.sequence,
            };
            // `try_send`: the owner never waits for a stream.
            let _ = outbound.try_send(Outbound::Refused(refusal));
            return;
        }
        let paths = report.paths.len() as u64;
        match self.topology.apply_report(node, report, self.clock.now()) {
            Ok(Applied::Applied) => {
                self.metrics.reports.inc();
                self.metrics.path_summaries.add(paths);
            }
            Ok(Applied::Duplicate) => self.metrics.duplicate_reports.inc(),
            Err(e) => {
                // The stream checked the report already; this is a bug, not bad input.
                tracing::error!(error = %e, "report refused by the engine");
                return;
            }
        }
        self.writes.acknowledge_when_durable(PendingAck {
            session,
            outbound,
            sequence: report.sequence,
            _permit: permit,
        });
    }

    /// A stream ended: its session closes, unless a newer one has replaced it. (A replica only
    /// lets go of its stream: the node disconnects when the log's departure is applied.)
    fn goodbye(&mut self, node: NodeId, session: u64) {
        if self.sessions.get(&node).is_some_and(|s| s.id == session) {
            self.sessions.remove(&node);
            if self.cluster.is_some() {
                return;
            }
            self.topology.disconnect(node, self.clock.now());
            self.metrics.connected.set(self.sessions.len() as u64);
            tracing::info!(node = %self.topology.node(node).name, session, "agent disconnected");
        }
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
            self.scheduler
                .keep_quiet(self.suspected.quiet(self.topology.view(), &self.plans));
        }
        self.push_plans();
        self.grant_throughput_tests(now);
        if let Some(cluster) = &mut self.cluster {
            cluster.snapshot_if_due(&self.topology, self.tiers.borrow().clone());
        }
        self.metrics
            .observe_windows_under_load(self.topology.windows_under_load());
        // The gauges are read from the snapshot just published, on the query pool.
        let (metrics, snapshot) = (self.metrics.clone(), self.topology.snapshot());
        tokio::task::spawn_blocking(move || metrics.observe_topology(&snapshot, now));
    }

    /// Grants the throughput tests due now to connected agents. A single aggregator grants to
    /// its own agents at once. In a cluster only the leader decides, over every agent connected
    /// to any replica; its decisions go to the log (fenced by its epoch) and reach agents when
    /// the replica that holds each agent's stream applies them ([`State::relay_decided`]).
    fn grant_throughput_tests(&mut self, now: UnixMs) {
        let Some(cluster) = &self.cluster else {
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
                self.send_grant(&grant, 0);
            }
            return;
        };
        let Some(epoch) = cluster.leading() else {
            return;
        };
        let grants = self.scheduler.schedule(
            self.topology.view(),
            &self.plans,
            &|n| cluster.connected(n),
            now,
        );
        for grant in grants {
            cluster.decide(Entry::Test {
                src: self.topology.node(grant.src).name.clone(),
                dst: self.topology.node(grant.dst).name.clone(),
                from: grant.start,
                until: grant.until,
                epoch,
                id: grant.id,
            });
        }
    }

    /// Relays the leader's throughput tests just applied to the agents whose streams this
    /// replica holds (unless the start passed more than [`RELAY_SLACK_MS`] ago: the agent would
    /// start late and overlap the next test), and keeps the scheduler's bookkeeping of all of
    /// them, so that this replica, should it lead next, never overlaps them.
    fn relay_decided(&mut self) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let decided = cluster.take_decided();
        if decided.is_empty() {
            return;
        }
        let now = self.clock.now();
        for (grant, epoch) in decided {
            self.scheduler.record(self.topology.view(), &grant);
            if !self.sessions.contains_key(&grant.src) {
                continue;
            }
            if now.0 > grant.start.0 + RELAY_SLACK_MS {
                tracing::warn!(node = %self.topology.node(grant.src).name, late_ms = now.0 - grant.start.0, "a throughput grant arrived too late to relay; skipped");
                if let Some(cluster) = &self.cluster {
                    cluster.skipped(true);
                }
                continue;
            }
            self.send_grant(&grant, epoch);
        }
    }

    /// Sends `grant` (decided at `epoch`; 0 without a cluster) to its sender's agent, if this
    /// process holds its stream.
    fn send_grant(&self, grant: &Grant, epoch: u64) {
        let described = ThroughputGrant {
            epoch,
            ..ThroughputScheduler::describe(self.topology.view(), grant)
        };
        if let Some(s) = self.sessions.get(&grant.src) {
            tracing::debug!(src = %self.topology.node(grant.src).name, dst = %described.peer, id = grant.id, "throughput grant");
            self.metrics.grants.inc();
            let _ = s.outbound.try_send(Outbound::Grant(described));
        }
    }

    /// Sends every connected agent whose plan changed its new plan.
    fn push_plans(&mut self) {
        let view = self.topology.view();
        for (node, session) in &mut self.sessions {
            let targets: Vec<(NodeId, bool)> = self.plans.get(node).map_or_else(Vec::new, |t| {
                t.iter()
                    .map(|&t| (t, self.suspected.dense(view, *node, t)))
                    .collect()
            });
            if session.plan.as_ref() == Some(&targets) {
                continue;
            }
            // On a replica, never below the log's clock (ms × 1000, room for a thousand plans a
            // millisecond): an agent that moves to another replica gets a higher version than
            // the plans it had, whichever replica made them.
            let floor = self
                .cluster
                .as_ref()
                .map_or(0, |c| (c.clock().0.max(0) as u64).saturating_mul(1000));
            self.plan_version = (self.plan_version + 1).max(floor);
            let plan = view.probe_plan(&targets, self.plan_version);
            // On a full channel the plan is tried again at the next tick.
            if session.outbound.try_send(Outbound::Plan(plan)).is_ok() {
                session.plan = Some(targets);
            }
        }
    }
}
