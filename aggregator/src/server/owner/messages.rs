//! What goes in and out of the owner: domain [`Command`]s from the edges, a domain [`Outbound`]
//! to each agent, and why the owner [`Ended`].

use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use zonemesh_domain::{Hello, ProbePlan, Report, ThroughputGrant, UnixMs};
use zonemesh_engine::NodeId;
use zonemesh_engine::tiers::TierState;

use crate::Error;
use crate::cluster::entry::{Entry, EntryError};

/// Why a report or a stream is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The message is invalid (a field, a second hello); sending it again will not help.
    Invalid,
    /// The message is over a limit (`--max-report-*`, the engine's path limit).
    OverLimit,
    /// It cannot be taken now (a replica cannot write the log): send it again, elsewhere.
    Unavailable,
}

/// A refusal: the named `field` of report `sequence` (0: no report) is refused, and that report
/// is never applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Why.
    pub kind: RefusalKind,
    /// The refused field (`paths`, `paths[3].rtt.p50_us`, `hello`, ...).
    pub field: String,
    /// What was wrong, for the agent's log.
    pub message: String,
    /// The report refused; 0 when the refusal is not about a report.
    pub sequence: u64,
}

/// What the aggregator says to one agent. The ingest edge turns each into a wire message.
#[derive(Debug, Clone, PartialEq)]
pub enum Outbound {
    /// Every report up to `sequence` is durable (and visible to queries).
    Ack {
        /// The highest sequence acknowledged.
        sequence: u64,
    },
    /// A report or message refused; the stream stays open.
    Refused(Refusal),
    /// The agent's probe plan (sent when it changes).
    Plan(ProbePlan),
    /// A throughput test slot.
    Grant(ThroughputGrant),
    /// The stream ends for this reason (a limit of the stream itself).
    End(Refusal),
}

/// The sending half of one agent's channel.
pub type OutboundTx = mpsc::Sender<Outbound>;

/// Commands from the Ingest streams.
#[derive(Debug)]
pub enum Command {
    /// An agent said hello on a new stream.
    Hello {
        /// The checked hello.
        hello: Hello,
        /// The stream's outbound half.
        outbound: OutboundTx,
        /// Gets the node and the session id, or why the node is refused (`--max-nodes`).
        reply: oneshot::Sender<Result<(NodeId, u64), Error>>,
        /// With `--cluster`: where the log stored the hello, and the session it opened. The
        /// owner answers once it has applied that entry.
        logged: Option<Logged>,
    },
    /// With `--cluster`: entries of the log, in order, to apply.
    Apply(Vec<LogItem>),
    /// With `--cluster`: acknowledge report `sequence` of `session` once the log entry `log_seq`
    /// (which holds it) is applied.
    AckAfter {
        /// The entry holding the report.
        log_seq: u64,
        /// The stream's session.
        session: u64,
        /// Where the acknowledgement goes.
        outbound: OutboundTx,
        /// The report's sequence.
        sequence: u64,
        /// Its place in the ingest budget, held until then.
        permit: Option<OwnedSemaphorePermit>,
    },
    /// A checked report from the agent of `node`.
    Report {
        /// The reporting node.
        node: NodeId,
        /// The stream's session.
        session: u64,
        /// The report.
        report: Report,
        /// Its place in the ingest budget, given back once it is acknowledged.
        permit: Option<OwnedSemaphorePermit>,
    },
    /// Stop: write what is left and end the task.
    Stop,
    /// The tiers task derived new groups: decide them (see `State::decide_tiers`).
    Tiers(TierState),
    /// The faults task's baselines: store them with the next write (each replica keeps its own).
    Baselines(zonemesh_engine::faults::Baselines),
    /// The faults task's suspects (nodes and zone links that may be losing, the likeliest
    /// first): their paths are probed densely from the next plans on.
    Suspects(Vec<zonemesh_domain::Element>),
    /// A stream ended.
    Goodbye {
        /// The node.
        node: NodeId,
        /// The stream's session.
        session: u64,
    },
}

/// Resolves when the owner has stopped, with why.
pub type Stopped = oneshot::Receiver<Ended>;

/// Why the owner stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Asked to ([`Owner::stop`], or every sender gone), after writing what was left.
    Asked,
    /// A store write did not return within [`OwnerConfig::store_hang`]; the message says so.
    StoreHung(String),
    /// The owner could not run (its runtime did not start, or a store writer panicked).
    Failed(String),
}

/// Where the log stored a hello, and the session it opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logged {
    /// The entry's sequence.
    pub seq: u64,
    /// The session.
    pub session: u64,
}

/// One entry read from the log: its sequence, the stream's timestamp, and the entry (or why it
/// does not decode: skipped and counted on every replica alike).
#[derive(Debug, Clone, PartialEq)]
pub struct LogItem {
    /// The stream's sequence.
    pub seq: u64,
    /// When the stream stored it.
    pub at: UnixMs,
    /// The entry.
    pub entry: Result<Entry, EntryError>,
}

/// What the owner hands the replica's cluster task (with `--cluster`).
#[derive(Debug)]
pub enum ToLog {
    /// A decision of the leader for the log (a throughput test, the tiers' groups), written
    /// through the lease.
    Append(Entry),
    /// The replica's snapshot, holding the log up to `applied`, for the snapshots' bucket.
    Snapshot {
        /// The last entry it holds.
        applied: u64,
        /// The encoded state.
        blob: Vec<u8>,
    },
}
