//! The owner's store writes: group commit, acknowledgements after durability, failed writes
//! kept and retried, and writes that stall or hang.
//!
//! While one batch is being written (on a blocking thread), the reports applied meanwhile wait
//! for the next batch; an acknowledgement leaves only after the batch holding its report is
//! durable. The records are taken from a snapshot on the writing thread: the owner hands over
//! which nodes and rows changed, never copies them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use zonemesh_engine::faults::Baselines;
use zonemesh_engine::tiers::TierState;
use zonemesh_engine::{Dirty, Topology};

use super::config::OwnerConfig;
use super::messages::{Ended, Outbound, OutboundTx};
use crate::Error;
use crate::cluster::Progress;
use crate::server::health::StoreHealth;
use crate::server::metrics::Metrics;
use crate::store::{Batch, ClusterMeta, Store};

/// An acknowledgement waiting for durability.
pub(super) struct PendingAck {
    /// The stream's session.
    pub session: u64,
    /// Where the acknowledgement goes.
    pub outbound: OutboundTx,
    /// The report's sequence (the hello's: what is already applied).
    pub sequence: u64,
    /// The report's place in the ingest budget: held until it is acknowledged, so that at most
    /// the budget's summaries are applied and not yet durable, and a write never holds more
    /// rows.
    pub _permit: Option<OwnedSemaphorePermit>,
}

/// What one write holds: the nodes and rows that changed, the tiers' state if it changed, the
/// faults' baselines if handed over, and a replica's place in the log.
#[derive(Debug, Default)]
pub(super) struct Written {
    dirty: Dirty,
    tiers: Option<TierState>,
    baselines: Option<Baselines>,
    cluster: Option<ClusterMeta>,
}

/// What a write returns: the store comes home with what was written and how it went.
pub(super) type WriteResult = (Box<dyn Store>, Written, Result<(), Error>);

/// A store write in progress.
type Inflight = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<WriteResult, tokio::task::JoinError>> + Send>,
>;

/// What happened to the write in flight.
pub(super) enum Event {
    /// It returned (or its thread panicked).
    Done(Box<Result<WriteResult, tokio::task::JoinError>>),
    /// It has run past `store_stall`.
    Stalled,
    /// It has run past `store_hang`.
    Hung,
}

/// The owner's writes: the store, the write in flight, and the acknowledgements they hold.
pub(super) struct Writes {
    /// The store, when no write holds it.
    store: Option<Box<dyn Store>>,
    /// The write in progress.
    inflight: Option<Inflight>,
    /// A failed write is tried again no earlier than this.
    retry_at: Option<Instant>,
    /// When the write in flight counts as stalled ([`OwnerConfig::store_stall`]).
    stall_at: Option<Instant>,
    /// When the write in flight counts as hung ([`OwnerConfig::store_hang`]).
    hang_at: Option<Instant>,
    /// Acks for reports applied since the in-flight batch was taken.
    waiting: Vec<PendingAck>,
    /// Acks for the in-flight batch.
    inflight_acks: Vec<PendingAck>,
    /// What a write that failed should have written, to be written again with what follows.
    failed: Option<Written>,
    /// The tiers' state to write with the next batch.
    tiers: Option<TierState>,
    /// The faults' baselines to write with the next batch.
    baselines: Option<Baselines>,
    /// When a store write last measured the store's size.
    size_measured: Option<Instant>,
    metrics: Arc<Metrics>,
    health: StoreHealth,
    config: OwnerConfig,
    /// A replica's progress, told when a checkpoint is written.
    progress: Option<Arc<Progress>>,
}

impl Writes {
    /// Writes to `store`, counted in `metrics`, its health told to `health`.
    pub fn new(
        store: Box<dyn Store>,
        metrics: Arc<Metrics>,
        health: StoreHealth,
        config: OwnerConfig,
    ) -> Self {
        Self {
            store: Some(store),
            inflight: None,
            retry_at: None,
            stall_at: None,
            hang_at: None,
            waiting: Vec::new(),
            inflight_acks: Vec::new(),
            failed: None,
            tiers: None,
            baselines: None,
            size_measured: None,
            metrics,
            health,
            config,
            progress: None,
        }
    }

    /// A replica: every write is its checkpoint, told to `progress`.
    pub fn checkpoints_for(&mut self, progress: Arc<Progress>) {
        self.progress = Some(progress);
    }

    /// An acknowledgement to send once everything applied so far is durable.
    pub fn acknowledge_when_durable(&mut self, ack: PendingAck) {
        self.waiting.push(ack);
    }

    /// The tiers' state to store with the next batch.
    pub fn store_tiers(&mut self, tiers: TierState) {
        self.tiers = Some(tiers);
    }

    /// The faults' baselines to store with the next batch.
    pub fn store_baselines(&mut self, baselines: Baselines) {
        self.baselines = Some(baselines);
    }

    /// A write is in flight.
    pub fn in_flight(&self) -> bool {
        self.inflight.is_some()
    }

    /// Waits for what happens next to the write in flight (there must be one). Cancel-safe: the
    /// write goes on and is waited for again.
    pub async fn event(&mut self) -> Event {
        let (stall_at, hang_at) = (self.stall_at, self.hang_at);
        let inflight = self.inflight.as_mut().expect("a write is in flight");
        tokio::select! {
            biased;
            done = inflight => Event::Done(Box::new(done)),
            _ = sleep_until(stall_at), if stall_at.is_some() => Event::Stalled,
            _ = sleep_until(hang_at), if hang_at.is_some() => Event::Hung,
        }
    }

    /// Acts on an [`Event`]: acknowledges a durable batch, keeps a failed one to write again,
    /// marks the store unhealthy while a write stalls. `Err` when the owner must stop.
    pub fn on(&mut self, event: Event) -> Result<(), Ended> {
        match event {
            Event::Done(done) => self.done(*done),
            Event::Stalled => {
                self.stall_at = None;
                let stalled = format!(
                    "a store write has not finished in {} s (a full or hung disk?)",
                    self.config.store_stall.as_secs_f64()
                );
                tracing::error!(problem = %stalled, "store write stalled; acknowledgements held until it finishes");
                self.health.fail(stalled);
                Ok(())
            }
            Event::Hung => {
                let hung = format!(
                    "a store write has not returned in {} s; the store cannot be opened again while it holds it",
                    self.config.store_hang.as_secs_f64()
                );
                tracing::error!(problem = %hung, "store hung; stopping (everything acknowledged is on disk)");
                Err(Ended::StoreHung(hung))
            }
        }
    }

    /// A write came back: acknowledge its reports, or keep it to be written again.
    fn done(&mut self, done: Result<WriteResult, tokio::task::JoinError>) -> Result<(), Ended> {
        self.inflight = None;
        (self.stall_at, self.hang_at) = (None, None);
        let (store, written, result) = done.map_err(|join| {
            tracing::error!(error = %join, "store writer panicked; stopping");
            Ended::Failed(format!("the store writer panicked: {join}"))
        })?;
        self.store = Some(store);
        match result {
            Ok(()) => {
                if self.health.recover() {
                    tracing::info!("store writes succeed again; held acknowledgements sent");
                }
                if let (Some(progress), Some(_)) = (&self.progress, &written.cluster) {
                    progress.checkpointed(zonemesh_common::time::unix_ms());
                }
                self.acknowledge();
            }
            Err(e) => {
                self.metrics.store_errors.inc();
                if self.health.fail(e.to_string()) {
                    tracing::error!(error = %e, "store write failed; acknowledgements held, retrying every second");
                } else {
                    tracing::debug!(error = %e, "store write failed again");
                }
                self.failed = Some(written);
                self.retry_at = Some(Instant::now() + Duration::from_secs(1));
            }
        }
        Ok(())
    }

    /// Starts the next write of what changed in `topology`, when none is in flight and a failed
    /// one's pause is over.
    pub fn start_if_due(
        &mut self,
        topology: &mut Topology,
        place: impl FnOnce(&Topology) -> Option<ClusterMeta>,
    ) {
        let may_write = self.retry_at.is_none_or(|t| Instant::now() >= t);
        if self.inflight.is_none() && may_write {
            self.retry_at = None;
            let place = place(topology);
            self.inflight = self.start(
                topology,
                place,
                self.config.commit_delay,
                self.config.inline_writes,
            );
            if self.inflight.is_some() {
                let now = Instant::now();
                self.stall_at = Some(now + self.config.store_stall);
                self.hang_at = Some(now + self.config.store_hang);
            }
        }
    }

    /// Shutting down: writes what is left (with a replica's place) and acknowledges it.
    pub async fn finish(&mut self, topology: &mut Topology, place: Option<ClusterMeta>) {
        if let Some(handle) = self.inflight.take()
            && let Ok((store, written, result)) = handle.await
        {
            self.store = Some(store);
            match result {
                Ok(()) => self.acknowledge(),
                // Written again below with the rest; its acks wait for that write.
                Err(_) => self.failed = Some(written),
            }
        }
        if let Some(handle) = self.start(topology, place, Duration::ZERO, self.config.inline_writes)
            && let Ok((_, _, Ok(()))) = handle.await
        {
            self.acknowledge();
        }
    }

    /// Starts writing what changed, if anything did (or acks are waiting): on a blocking thread,
    /// or at once on this task when `inline`.
    fn start(
        &mut self,
        topology: &mut Topology,
        mut cluster: Option<ClusterMeta>,
        delay: Duration,
        inline: bool,
    ) -> Option<Inflight> {
        let mut dirty = topology.take_dirty();
        let mut tiers = self.tiers.take();
        let mut baselines = self.baselines.take();
        if let Some(failed) = self.failed.take() {
            dirty = failed.dirty.union(dirty);
            // A newer state of the tiers (or baselines) supersedes the one that failed; a newer
            // place too, but the node order and sessions it does not carry are the failed write's.
            tiers = tiers.or(failed.tiers);
            baselines = baselines.or(failed.baselines);
            if let (Some(new), Some(old)) = (&mut cluster, failed.cluster) {
                new.node_order = new.node_order.take().or(old.node_order);
                new.sessions = new.sessions.take().or(old.sessions);
                new.tests = new.tests.take().or(old.tests);
            }
        }
        self.inflight_acks.append(&mut self.waiting);
        let place_changed = cluster
            .as_ref()
            .is_some_and(|c| c.node_order.is_some() || c.sessions.is_some() || c.tests.is_some());
        if dirty.is_empty() && tiers.is_none() && baselines.is_none() && !place_changed {
            // Everything before is durable already: waiting acks can go.
            self.acknowledge();
            return None;
        }
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
            self.size_measured = Some(Instant::now());
        }
        let snapshot = topology.snapshot();
        let write = move || {
            let started = zonemesh_common::time::Stopwatch::start();
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            let mut batch = Batch::from_snapshot(&snapshot, &dirty);
            batch.tiers = tiers.clone();
            batch.baselines = baselines.clone();
            batch.cluster = cluster.clone();
            drop(snapshot);
            let result = store.commit(&batch);
            metrics
                .commit_seconds
                .observe(started.elapsed().as_secs_f64());
            metrics.paths_written.add(batch.path_count() as u64);
            if measure_size {
                metrics.store_bytes.set(store.size_bytes());
            }
            (
                store,
                Written {
                    dirty,
                    tiers,
                    baselines,
                    cluster,
                },
                result,
            )
        };
        if inline {
            let done = write();
            return Some(Box::pin(async move { Ok(done) }));
        }
        Some(Box::pin(tokio::task::spawn_blocking(write)))
    }

    /// Sends the acknowledgements of the batch that just became durable.
    fn acknowledge(&mut self) {
        send_acks(self.inflight_acks.drain(..));
    }
}

/// Sends acknowledgements, the highest per stream; their places in the ingest budget are given
/// back.
pub(super) fn send_acks(acks: impl IntoIterator<Item = PendingAck>) {
    let mut highest: HashMap<u64, (OutboundTx, u64)> = HashMap::new();
    for ack in acks {
        let entry = highest.entry(ack.session).or_insert((ack.outbound, 0));
        entry.1 = entry.1.max(ack.sequence);
    }
    for (_, (outbound, sequence)) in highest {
        // A full channel means the agent is not reading: a later ack covers this one.
        let _ = outbound.try_send(Outbound::Ack { sequence });
    }
}

/// Sleeps until `at`, if set (the arm that calls it is guarded on `is_some`).
async fn sleep_until(at: Option<Instant>) {
    tokio::time::sleep_until(at.expect("guarded by is_some")).await;
}
