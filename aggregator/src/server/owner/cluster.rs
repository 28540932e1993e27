//! The owner's part of a replica (`--cluster`): it applies the log in order, with the stream's
//! timestamps as its clock (kept monotonic), keeps the sessions the log opened and closed, and
//! acknowledges a report to its agent once the entry that holds it is applied. The leader's
//! decisions are applied here too: a takeover raises the epoch, a decision of an older epoch is
//! dropped, a throughput test of the current epoch is handed back to the owner to relay, and the
//! tiers' groups to store and draw from.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use zonemesh_domain::{Hello, NodeName, UnixMs};
use zonemesh_engine::planner::Grant;
use zonemesh_engine::tiers::TierState;
use zonemesh_engine::{Applied, NodeId, Topology};

use super::messages::{LogItem, Logged, Outbound, OutboundTx, Refusal, RefusalKind, ToLog};
use super::sessions::{Session, Sessions};
use super::write::{PendingAck, send_acks};
use crate::Error;
use crate::cluster::Progress;
use crate::cluster::entry::Entry;
use crate::cluster::liveness::Liveness;
use crate::server::metrics::Metrics;
use crate::store::{Batch, ClusterMeta, NodeTests};

/// A hello of this replica's stream waiting for its entry to be applied.
struct PendingHello {
    outbound: OutboundTx,
    reply: oneshot::Sender<Result<(NodeId, u64), Error>>,
}

/// What a replica's owner keeps beside the topology.
pub(super) struct ClusterState {
    /// The last entry applied.
    applied: u64,
    /// The applier's clock: the latest stream timestamp applied.
    clock: UnixMs,
    /// The session each connected node has, by the log.
    log_sessions: HashMap<NodeId, u64>,
    /// The replica that holds each of those sessions.
    session_replica: HashMap<NodeId, String>,
    /// Which replicas are alive, by their heartbeats.
    liveness: Liveness,
    /// The sessions changed since the last checkpoint.
    sessions_changed: bool,
    /// Nodes in the last checkpoint's node order.
    nodes_checkpointed: usize,
    /// A throughput test was noted since the last checkpoint.
    tests_changed: bool,
    /// Acknowledgements waiting for the entries that hold their reports.
    awaiting: BTreeMap<u64, Vec<PendingAck>>,
    /// Acknowledgements to send once what was applied is published.
    ready: Vec<PendingAck>,
    /// This replica's hellos waiting for their entries, by node and session.
    hellos: HashMap<(NodeName, u64), PendingHello>,
    progress: Arc<Progress>,
    /// The newest leader's epoch applied (a takeover's, or a decision's).
    epoch: u64,
    /// Throughput tests of the current epoch applied since the owner last took them, with it.
    decided: Vec<(Grant, u64)>,
    /// The tiers' groups the leader decided last, applied since the owner last took them.
    decided_tiers: Option<TierState>,
    /// Entries and snapshots for the replica's cluster task.
    out: mpsc::UnboundedSender<ToLog>,
    snapshot_every: Duration,
    last_snapshot: Option<tokio::time::Instant>,
}

/// Where a replica starts: the place its checkpoint (or snapshot) holds.
#[derive(Debug, Clone)]
pub struct ClusterStart {
    /// The last entry the restored state holds.
    pub applied: u64,
    /// The applier's clock then.
    pub clock: UnixMs,
    /// The sessions the log had open then, and the replicas that held them.
    pub sessions: Vec<(NodeName, u64, String)>,
    /// The throughput tests noted then.
    pub tests: Vec<NodeTests>,
    /// How often to write a snapshot to the bucket.
    pub snapshot_every: Duration,
    /// How far it is.
    pub progress: Arc<Progress>,
    /// Where entries and snapshots go.
    pub out: mpsc::UnboundedSender<ToLog>,
}

impl ClusterState {
    /// The state of a replica restored at `start`: the log's sessions are connected again.
    pub fn new(start: ClusterStart, topology: &mut Topology) -> Self {
        let mut log_sessions = HashMap::new();
        let mut session_replica = HashMap::new();
        let mut liveness = Liveness::default();
        for (node, session, replica) in &start.sessions {
            if let Some(id) = topology.id(node) {
                topology.resume(id);
                log_sessions.insert(id, *session);
                session_replica.insert(id, replica.clone());
                liveness.hello(replica);
            }
        }
        for (node, tests) in &start.tests {
            if let Some(id) = topology.id(node) {
                topology.restore_throughput_tests(id, tests);
            }
        }
        start.progress.applied_to(start.applied);
        Self {
            applied: start.applied,
            clock: start.clock,
            log_sessions,
            session_replica,
            liveness,
            sessions_changed: false,
            nodes_checkpointed: topology.view().nodes().len(),
            tests_changed: false,
            awaiting: BTreeMap::new(),
            ready: Vec::new(),
            hellos: HashMap::new(),
            progress: start.progress,
            epoch: 0,
            decided: Vec::new(),
            decided_tiers: None,
            out: start.out,
            snapshot_every: start.snapshot_every,
            last_snapshot: None,
        }
    }

    /// A hello of this replica's stream whose entry the log stored at `logged`: answered once it
    /// is applied (at once when it already is).
    pub fn hello(
        &mut self,
        hello: Hello,
        outbound: OutboundTx,
        reply: oneshot::Sender<Result<(NodeId, u64), Error>>,
        logged: Logged,
        topology: &Topology,
        sessions: &mut Sessions,
    ) {
        let pending = PendingHello { outbound, reply };
        if logged.seq > self.applied {
            self.hellos.insert((hello.node, logged.session), pending);
            return;
        }
        let open = topology
            .id(&hello.node)
            .filter(|id| self.log_sessions.get(id) == Some(&logged.session));
        match open {
            Some(id) => self.attach(id, logged.session, pending, topology, sessions),
            None => {
                let _ = pending.reply.send(Err(Error::TryAgain(format!(
                    "the session of {} ended before it was answered",
                    hello.node
                ))));
            }
        }
    }

    /// Opens the local session of `id` and answers its hello with what is applied.
    fn attach(
        &mut self,
        id: NodeId,
        session: u64,
        pending: PendingHello,
        topology: &Topology,
        sessions: &mut Sessions,
    ) {
        let applied = topology.node(id).applied_seq;
        sessions.insert(
            id,
            Session {
                id: session,
                outbound: pending.outbound.clone(),
                plan: None,
            },
        );
        self.ready.push(PendingAck {
            session,
            outbound: pending.outbound,
            sequence: applied,
            _permit: None,
        });
        let _ = pending.reply.send(Ok((id, session)));
    }

    /// A report of this replica's stream, in the entry `log_seq`: acknowledged once applied.
    pub fn ack_after(&mut self, log_seq: u64, ack: PendingAck) {
        if log_seq <= self.applied {
            self.ready.push(ack);
        } else {
            self.awaiting.entry(log_seq).or_default().push(ack);
        }
    }

    /// Applies entries in order (each once: a replayed sequence is passed over).
    pub fn apply(
        &mut self,
        items: Vec<LogItem>,
        topology: &mut Topology,
        sessions: &mut Sessions,
        metrics: &Metrics,
    ) {
        for item in items {
            if item.seq <= self.applied {
                continue;
            }
            self.clock = UnixMs(self.clock.0.max(item.at.0));
            let now = self.clock;
            match item.entry {
                Ok(entry) => self.apply_entry(entry, now, topology, sessions, metrics),
                Err(_) => self.progress.unreadable(),
            }
            self.applied = item.seq;
        }
        let later = self.awaiting.split_off(&(self.applied + 1));
        for (_, acks) in std::mem::replace(&mut self.awaiting, later) {
            self.ready.extend(acks);
        }
        self.progress.applied_to(self.applied);
    }

    fn apply_entry(
        &mut self,
        entry: Entry,
        now: UnixMs,
        topology: &mut Topology,
        sessions: &mut Sessions,
        metrics: &Metrics,
    ) {
        match entry {
            Entry::Hello {
                hello,
                session,
                replica,
            } => {
                let pending = self.hellos.remove(&(hello.node.clone(), session));
                if let Err(e) = topology.admit_hello(&hello) {
                    tracing::warn!(node = %hello.node, "hello in the log refused: {e}");
                    if let Some(p) = pending {
                        let _ = p.reply.send(Err(e.into()));
                    }
                    return;
                }
                let (id, _) = topology.register(&hello, now);
                self.log_sessions.insert(id, session);
                self.liveness.hello(&replica);
                self.session_replica.insert(id, replica);
                self.sessions_changed = true;
                // A newer session elsewhere ends this replica's stream of the node.
                if sessions.get(&id).is_some_and(|s| s.id != session) {
                    sessions.remove(&id);
                }
                if let Some(p) = pending {
                    self.attach(id, session, p, topology, sessions);
                }
                metrics.connected.set(self.log_sessions.len() as u64);
            }
            Entry::Report { node, report } => {
                let Some(id) = topology.id(&node) else {
                    tracing::warn!(%node, sequence = report.sequence, "report in the log of a node the log never introduced; skipped");
                    return;
                };
                let paths = report.paths.len() as u64;
                match topology.apply_report(id, &report, now) {
                    Ok(Applied::Applied) => {
                        metrics.reports.inc();
                        metrics.path_summaries.add(paths);
                    }
                    Ok(Applied::Duplicate) => metrics.duplicate_reports.inc(),
                    Err(e) => {
                        metrics.refused_reports.inc();
                        tracing::warn!(%node, sequence = report.sequence, "report in the log refused by the engine: {e}");
                    }
                }
            }
            Entry::Goodbye { node, session } => {
                if let Some(id) = topology.id(&node)
                    && self.log_sessions.get(&id) == Some(&session)
                {
                    self.log_sessions.remove(&id);
                    self.session_replica.remove(&id);
                    self.sessions_changed = true;
                    topology.disconnect(id, now);
                    metrics.connected.set(self.log_sessions.len() as u64);
                }
            }
            Entry::Test {
                src,
                dst,
                from,
                until,
                epoch,
                id,
            } => {
                if epoch < self.epoch {
                    tracing::warn!(epoch, newest = self.epoch, %src, %dst, "a decision of an older leader dropped");
                    self.progress.skipped(false);
                    return;
                }
                self.epoch = epoch;
                if let (Some(s), Some(d)) = (topology.id(&src), topology.id(&dst)) {
                    topology.note_throughput_test(s, d, from, until);
                    self.tests_changed = true;
                    let grant = Grant {
                        id,
                        src: s,
                        dst: d,
                        start: from,
                        until,
                    };
                    self.decided.push((grant, epoch));
                }
            }
            Entry::Tiers { epoch, state } => {
                if epoch < self.epoch {
                    tracing::warn!(
                        epoch,
                        newest = self.epoch,
                        "a tiers decision of an older leader dropped"
                    );
                    self.progress.skipped(false);
                    return;
                }
                self.epoch = epoch;
                self.decided_tiers = Some(state);
            }
            Entry::Takeover { epoch, replica } => {
                if epoch > self.epoch {
                    tracing::info!(epoch, %replica, "a new leader took over");
                    self.epoch = epoch;
                }
            }
            Entry::Heartbeat { replica, beat } => {
                for dead in self.liveness.beat(&replica, beat) {
                    self.end_sessions_of(&dead, now, topology, sessions, metrics);
                }
            }
        }
    }

    /// Ends every session `replica` held: its heartbeats stopped (every replica decides this
    /// alike, from the log). When that replica is this one (it was cut off from the log), its
    /// agents' streams are ended too, so that they say hello again.
    fn end_sessions_of(
        &mut self,
        replica: &str,
        now: UnixMs,
        topology: &mut Topology,
        sessions: &mut Sessions,
        metrics: &Metrics,
    ) {
        let held: Vec<NodeId> = self
            .session_replica
            .iter()
            .filter(|(_, r)| r.as_str() == replica)
            .map(|(id, _)| *id)
            .collect();
        tracing::warn!(
            replica,
            sessions = held.len(),
            "a replica's heartbeats stopped; its sessions end"
        );
        for id in held {
            self.session_replica.remove(&id);
            if self.log_sessions.remove(&id).is_some() {
                self.sessions_changed = true;
                topology.disconnect(id, now);
            }
            if let Some(s) = sessions.remove(&id) {
                let _ = s.outbound.try_send(Outbound::End(Refusal {
                    kind: RefusalKind::Unavailable,
                    field: String::new(),
                    message: "this replica's heartbeats did not reach the log; say hello again"
                        .into(),
                    sequence: 0,
                }));
            }
        }
        metrics.connected.set(self.log_sessions.len() as u64);
    }

    /// The throughput tests of the current leader applied since the last call: the owner
    /// relays those of its own agents and keeps the scheduler's bookkeeping.
    pub fn take_decided(&mut self) -> Vec<(Grant, u64)> {
        std::mem::take(&mut self.decided)
    }

    /// The tiers' groups the leader decided, if a decision was applied since the last call.
    pub fn take_decided_tiers(&mut self) -> Option<TierState> {
        self.decided_tiers.take()
    }

    /// The applier's clock: the latest stream timestamp applied (the same on every replica).
    pub fn clock(&self) -> UnixMs {
        self.clock
    }

    /// Whether `node` has a session on some replica, by the log.
    pub fn connected(&self, node: NodeId) -> bool {
        self.log_sessions.contains_key(&node)
    }

    /// The lease's epoch while this replica leads.
    pub fn leading(&self) -> Option<u64> {
        self.progress.leading()
    }

    /// A grant was not relayed: `late`, or of an older epoch.
    pub fn skipped(&self, late: bool) {
        self.progress.skipped(late);
    }

    /// Sends the acknowledgements whose entries are applied (after their effect is published).
    pub fn release(&mut self) {
        if !self.ready.is_empty() {
            send_acks(self.ready.drain(..));
        }
    }

    /// A decision of the leader (a throughput test, the tiers' groups): it goes to the log
    /// (fenced), and every replica learns it from there.
    pub fn decide(&self, entry: Entry) {
        let _ = self.out.send(ToLog::Append(entry));
    }

    /// The replica's place for the next checkpoint: the node order when nodes were added, the
    /// sessions when they changed.
    pub fn checkpoint(&mut self, topology: &Topology) -> ClusterMeta {
        let nodes = topology.view().nodes().len();
        let node_order = (nodes != self.nodes_checkpointed).then(|| {
            self.nodes_checkpointed = nodes;
            topology
                .view()
                .nodes()
                .map(|(_, n)| n.name.clone())
                .collect()
        });
        let sessions = std::mem::take(&mut self.sessions_changed).then(|| self.sessions(topology));
        let tests = std::mem::take(&mut self.tests_changed).then(|| tests(topology));
        ClusterMeta {
            applied_seq: self.applied,
            clock: self.clock,
            node_order,
            sessions,
            tests,
        }
    }

    fn sessions(&self, topology: &Topology) -> Vec<(NodeName, u64, String)> {
        let mut sessions: Vec<_> = self
            .log_sessions
            .iter()
            .map(|(id, s)| {
                let replica = self.session_replica.get(id).cloned().unwrap_or_default();
                (topology.node(*id).name.clone(), *s, replica)
            })
            .collect();
        sessions.sort();
        sessions
    }

    /// Every few minutes: the whole state with the tiers' groups last decided, encoded on the
    /// blocking pool, for the bucket.
    pub fn snapshot_if_due(&mut self, topology: &Topology, tiers: Option<TierState>) {
        let now = tokio::time::Instant::now();
        if self
            .last_snapshot
            .is_some_and(|t| now.duration_since(t) < self.snapshot_every)
        {
            return;
        }
        self.last_snapshot = Some(now);
        let snapshot = topology.snapshot();
        let meta = ClusterMeta {
            applied_seq: self.applied,
            clock: self.clock,
            node_order: Some(snapshot.nodes().map(|(_, n)| n.name.clone()).collect()),
            sessions: Some(self.sessions(topology)),
            tests: Some(tests(topology)),
        };
        let out = self.out.clone();
        tokio::task::spawn_blocking(move || {
            let mut batch = Batch::full(&snapshot);
            batch.cluster = Some(meta);
            batch.tiers = tiers;
            let applied = batch.cluster.as_ref().map_or(0, |m| m.applied_seq);
            let blob = crate::cluster::snapshot::encode(&batch);
            let _ = out.send(ToLog::Snapshot { applied, blob });
        });
    }
}

/// The throughput tests every node takes part in, by name.
fn tests(topology: &Topology) -> Vec<NodeTests> {
    topology
        .throughput_tests()
        .map(|(id, t)| (topology.node(id).name.clone(), t.to_vec()))
        .collect()
}
