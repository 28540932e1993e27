//! A replica's start and its background duties (`--cluster`): where its state starts (its
//! checkpoint, or the newest snapshot when the log's retention passed the checkpoint by, or
//! when it has none), the entries and snapshots the owner hands out, and its readiness.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::owner::{ClusterStart, Owner, ToLog};
use crate::Error;
use crate::cluster::entry::{Entry, writer_subject};
use crate::cluster::liveness::HEARTBEAT_EVERY;
use crate::cluster::{ClusterConfig, Log, Progress, snapshot};
use crate::store::{Contents, Store};

/// How long the log may take to answer at start.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A replica being started.
#[derive(Debug)]
pub struct Replica {
    /// The log.
    pub log: Log,
    /// How far it is.
    pub progress: Arc<Progress>,
    to_log: mpsc::UnboundedSender<ToLog>,
    from_owner: Option<mpsc::UnboundedReceiver<ToLog>>,
}

impl Replica {
    /// Connects to the log (an unreachable or refusing `--cluster` fails here, naming the
    /// flag).
    pub async fn connect(config: &ClusterConfig) -> Result<Self, Error> {
        let log = Log::connect(config, CONNECT_TIMEOUT).await?;
        let progress = Arc::new(Progress::default());
        progress.set_max_lag(config.max_lag);
        let (to_log, from_owner) = mpsc::unbounded_channel();
        Ok(Self {
            log,
            progress,
            to_log,
            from_owner: Some(from_owner),
        })
    }

    /// The store's contents to start from: the checkpoint, unless the log's retention passed it
    /// by (or there is none), when the newest snapshot that holds more replaces the store.
    pub async fn starting_contents(&self, store: &mut dyn Store) -> Result<Contents, Error> {
        let contents = store.load()?;
        let applied = contents.cluster.as_ref().map_or(0, |c| c.applied_seq);
        let (first, last) = self.log.bounds().await?;
        let passed_by = applied + 1 < first;
        if applied > 0 && !passed_by {
            tracing::info!(applied, last, "starting from the checkpoint");
            return Ok(contents);
        }
        // A new replica takes any snapshot (the first replica of a migrated store writes one that
        // holds no entry yet); one passed by needs one that holds more than it has.
        let at_least = if applied == 0 { 0 } else { applied + 1 };
        match snapshot::newest(&self.log, at_least).await? {
            Some((held, _)) if held == 0 && !contents.nodes.is_empty() => {
                tracing::info!(
                    nodes = contents.nodes.len(),
                    "starting from the store as it is (it holds more than an empty snapshot)"
                );
                Ok(contents)
            }
            Some((held, blob)) => {
                let records = snapshot::decode(&blob)?;
                tracing::info!(
                    held,
                    applied,
                    first,
                    last,
                    bytes = blob.len(),
                    "starting from the newest snapshot"
                );
                store.replace_all(&records)?;
                let contents = store.load()?;
                if held + 1 < first {
                    tracing::warn!(
                        held,
                        first,
                        "the newest snapshot is older than the log holds: entries in between are lost to this replica"
                    );
                }
                Ok(contents)
            }
            None => {
                if passed_by {
                    tracing::warn!(
                        applied,
                        first,
                        "the log's retention passed this replica's checkpoint by and no snapshot holds more: entries in between are lost to it"
                    );
                } else {
                    tracing::info!(applied, last, "no snapshot yet: reading the whole log");
                }
                Ok(contents)
            }
        }
    }

    /// The owner's part of the replica, starting at what `contents` held.
    pub fn start(&self, config: &ClusterConfig, contents: &Contents) -> ClusterStart {
        let place = contents.cluster.clone().unwrap_or_default();
        ClusterStart {
            applied: place.applied_seq,
            clock: place.clock,
            sessions: place.sessions.unwrap_or_default(),
            tests: place.tests.unwrap_or_default(),
            snapshot_every: config.snapshot_every,
            progress: self.progress.clone(),
            out: self.to_log.clone(),
        }
    }

    /// Starts reading the log into `owner` (after `applied`), the lease (through which the
    /// leader's decisions go to the log), and the task that writes the replica's snapshots.
    pub fn run(&mut self, owner: Owner, applied: u64) -> Vec<JoinHandle<()>> {
        let applier = tokio::spawn(crate::cluster::applier::run(
            self.log.clone(),
            applied,
            owner,
            self.progress.clone(),
        ));
        let mut from_owner = self.from_owner.take().expect("run once");
        let log = self.log.clone();
        let (decisions, decided) = mpsc::unbounded_channel();
        let lease = tokio::spawn(crate::cluster::lease::run(
            self.log.clone(),
            self.log.config().clone(),
            self.progress.clone(),
            decided,
        ));
        let heartbeat = tokio::spawn(heartbeats(self.log.clone()));
        let outbox = tokio::spawn(async move {
            while let Some(item) = from_owner.recv().await {
                match item {
                    ToLog::Append(entry) => {
                        let _ = decisions.send(entry);
                    }
                    ToLog::Snapshot { applied, blob } => {
                        let bytes = blob.len();
                        match snapshot::write(&log, applied, blob).await {
                            Ok(()) => tracing::info!(applied, bytes, "snapshot written"),
                            Err(e) => tracing::warn!(error = %e, "the snapshot was not written"),
                        }
                    }
                }
            }
        });
        vec![applier, lease, heartbeat, outbox]
    }
}

/// Appends this replica's numbered heartbeat to the log every [`HEARTBEAT_EVERY`], for as long as
/// it runs (its id names this start, so that a restart's heartbeats are not taken for resends).
async fn heartbeats(log: Log) {
    let replica = log.config().replica.clone();
    let started = zonemesh_common::time::unix_ms();
    let mut tick = tokio::time::interval(HEARTBEAT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    for beat in 1u64.. {
        tick.tick().await;
        let entry = Entry::Heartbeat {
            replica: replica.clone(),
            beat,
        };
        let id = format!("b/{replica}/{started}/{beat}");
        if let Err(e) = log
            .append(writer_subject("heartbeat"), &id, entry.encode())
            .await
        {
            tracing::warn!(error = %e, "a heartbeat did not reach the log");
        }
    }
}
