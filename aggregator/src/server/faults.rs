//! The faults task: every `--fault-interval` it looks at the latest snapshot on the query pool
//! (`zonemesh_engine::faults::Tracker`: the model's terms and one pass over the fresh paths),
//! moves each fault through its hysteresis, and publishes the open faults on a watch channel that
//! `ListFaults`, the web view and the metrics read. It never runs on the owner task.
//!
//! Each look also hands the owner the nodes and zone links that may be losing
//! ([`Tracker::suspected`]), whenever they change: the owner's plans probe their paths densely.
//!
//! Every replica runs its own (the faults are read from the same applied log, so they agree) and
//! keeps its own baselines: every `save_every` (a minute) it hands them to the owner, which writes
//! them with its next batch, so that a restart judges delays against what was learnt instead of learning
//! again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zonemesh_domain::{FaultThresholds, Faults};
use zonemesh_engine::faults::{Baselines, Tracker};

use super::metrics::Metrics;
use super::owner::{Command, Owner};

/// Settings of the faults task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultsConfig {
    /// The thresholds, hold-offs and baseline learning time (`--fault-*`), checked.
    pub thresholds: FaultThresholds,
    /// How often the network is looked at (`--fault-interval`). Default 5 s.
    pub every: Duration,
    /// How often the baselines are handed to the owner to store. Default 1 min.
    pub save_every: Duration,
}

impl Default for FaultsConfig {
    fn default() -> Self {
        Self {
            thresholds: FaultThresholds::default(),
            every: Duration::from_secs(5),
            save_every: Duration::from_secs(60),
        }
    }
}

/// The open faults, as of the latest look.
pub type FaultsWatch = watch::Receiver<Arc<Faults>>;

/// Starts the task from the stored `baselines`. It ends when the owner stops.
pub fn spawn(
    owner: Owner,
    config: FaultsConfig,
    baselines: Baselines,
    metrics: Arc<Metrics>,
) -> (FaultsWatch, JoinHandle<()>) {
    let (tx, rx) = watch::channel(Arc::new(Faults::default()));
    let task = tokio::spawn(async move {
        let mut tracker = Some(Tracker::new(config.thresholds, baselines));
        let mut tick = tokio::time::interval(config.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut saved = zonemesh_common::time::Stopwatch::start();
        let mut suspected: Vec<zonemesh_domain::Element> = Vec::new();
        loop {
            tick.tick().await;
            let mut t = tracker.take().expect("the tracker is home between looks");
            let Ok((t, faults)) = owner
                .query(move |snapshot, now| {
                    let faults = t.update(snapshot, now);
                    (t, faults)
                })
                .await
            else {
                return; // shutting down
            };
            if t.suspected() != suspected.as_slice() {
                suspected = t.suspected().to_vec();
                if !suspected.is_empty() {
                    tracing::debug!(?suspected, "loss suspected: probed densely");
                }
                if owner
                    .send(Command::Suspects(suspected.clone()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            log_changes(&tx.borrow(), &faults);
            metrics.set_faults(&faults);
            metrics.set_fault_suspects(suspected.len());
            tx.send_replace(Arc::new(faults));
            if saved.elapsed() >= config.save_every {
                saved = zonemesh_common::time::Stopwatch::start();
                if owner
                    .send(Command::Baselines(t.baselines().clone()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            tracker = Some(t);
        }
    });
    (rx, task)
}

/// Logs each fault that opened, changed severity or closed since the last look.
fn log_changes(before: &Faults, after: &Faults) {
    let key = |f: &zonemesh_domain::Fault| (f.element.clone(), f.kind);
    for f in &after.faults {
        match before.faults.iter().find(|b| key(b) == key(f)) {
            None => tracing::warn!(
                element = %f.element,
                kind = f.kind.as_str(),
                severity = f.severity.as_str(),
                figure = f.figure,
                evidence_paths = f.evidence_paths,
                "fault opened"
            ),
            Some(b) if b.severity != f.severity => tracing::warn!(
                element = %f.element,
                kind = f.kind.as_str(),
                severity = f.severity.as_str(),
                figure = f.figure,
                "fault changed severity"
            ),
            Some(_) => {}
        }
    }
    for b in &before.faults {
        if !after.faults.iter().any(|f| key(f) == key(b)) {
            tracing::info!(element = %b.element, kind = b.kind.as_str(), "fault closed");
        }
    }
}
