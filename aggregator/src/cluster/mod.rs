//! Replicas on NATS JetStream: every report, hello and departure goes into one replicated
//! stream (the log), and every replica applies the whole log in order with the owner it has,
//! answering queries from its own snapshots.
//!
//! - [`entry`]: what the log holds, and how an entry is named (`Nats-Msg-Id`) and filed
//!   (subjects per zone).
//! - [`log`]: the connection, the stream and the snapshots' bucket, and [`Log::append`], which
//!   returns once the stream has stored an entry (retrying through a failover).
//! - [`applier`]: the consumer that feeds the owner the log in order, with the stream's own
//!   timestamps, and tells how far behind the replica is.
//! - [`lease`]: the leader's lease, the takeover, and the one task that writes its decisions,
//!   fenced by the epoch and JetStream's expected last sequence.
//! - [`liveness`]: which replicas are alive, from their heartbeats in the log.
//! - [`snapshot`]: the replica's state as one object in the snapshots' bucket, written every few
//!   minutes, from which a new replica (or one the stream's retention passed by) starts.
//!
//! A replica acknowledges a report to its agent once the stream has stored it and the replica
//! has applied it (`server::owner`): acknowledged means durable (three copies, synced) and
//! visible. The single aggregator without `--cluster` uses none of this.

pub mod applier;
pub mod entry;
pub mod lease;
pub mod liveness;
pub mod log;
pub mod progress;
pub mod snapshot;

use std::path::PathBuf;
use std::time::Duration;

pub use log::Log;
pub use progress::Progress;

/// The stream's name.
pub const STREAM: &str = "ZONEMESH";
/// The bucket of the leader's lease.
pub const LEASE: &str = "zonemesh-lease";
/// The bucket of the replicas' snapshots.
pub const SNAPSHOTS: &str = "zonemesh-snapshots";

/// Settings of a replica (`--cluster*` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// NATS servers, `nats://host:port` (or `tls://`).
    pub servers: Vec<String>,
    /// CA of the servers' certificates (`--cluster-tls-ca`): TLS is required when set.
    pub tls_ca: Option<PathBuf>,
    /// NATS credentials file (`--cluster-creds`).
    pub creds: Option<PathBuf>,
    /// This replica's name, unique in the cluster (`--replica-name`; default the host name).
    pub replica: String,
    /// How long the leader's lease lasts unless renewed (`--lease-ttl`).
    pub lease_ttl: Duration,
    /// This replica's HTTP base URL as the other replicas reach it (`--advertise-url`): the
    /// leader's is where the others forward extender calls.
    pub advertise: Option<String>,
    /// How this replica reaches a leader that advertises `https://` (`--peer-ca`, `--peer-cert`,
    /// `--peer-key`): the CA of the replicas' certificates, and the certificate it presents
    /// (a scheduler's identity, which the leader's guard lets use the extender).
    pub peer_tls: zonemesh_tls::ClientTls,
    /// Entries a replica may be behind the log before it answers UNAVAILABLE and fails
    /// readiness (`--max-lag`).
    pub max_lag: u64,
    /// The stream's settings.
    pub stream: StreamSettings,
    /// How often the replica writes its snapshot to the bucket (`--snapshot-interval`).
    pub snapshot_every: Duration,
    /// How long an append may retry (a failover of the stream's leader pauses writes for up to
    /// about 9 s).
    pub append_deadline: Duration,
}

/// The stream's retention and copies.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSettings {
    /// Copies (3 in production; a test on one server may use 1).
    pub replicas: usize,
    /// Entries older than this are dropped (`--cluster-retention`).
    pub max_age: Duration,
    /// The stream holds at most this many bytes, oldest dropped first (`--cluster-max-bytes`).
    pub max_bytes: i64,
}

impl Default for StreamSettings {
    fn default() -> Self {
        Self {
            replicas: 3,
            max_age: Duration::from_secs(6 * 3600),
            max_bytes: 64 << 30,
        }
    }
}

impl ClusterConfig {
    /// A replica named `replica` on `servers` with the default settings.
    pub fn new(servers: Vec<String>, replica: impl Into<String>) -> Self {
        Self {
            servers,
            tls_ca: None,
            creds: None,
            replica: replica.into(),
            lease_ttl: Duration::from_secs(5),
            advertise: None,
            peer_tls: zonemesh_tls::ClientTls::default(),
            max_lag: 10_000,
            stream: StreamSettings::default(),
            snapshot_every: Duration::from_secs(180),
            append_deadline: Duration::from_secs(30),
        }
    }
}
