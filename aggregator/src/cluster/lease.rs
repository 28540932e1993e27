//! The leader's lease, and the one task through which the leader writes its decisions.
//!
//! The lease is one key of a JetStream KV bucket whose entries expire after `--lease-ttl`. A
//! replica takes it with `create` (which succeeds for one contender, once the key is gone) and
//! renews it with a compare-and-set `update` on the revision every third of the TTL. The revision
//! at which it took the lease is its **epoch**.
//!
//! A new leader first applies the log up to its head, then writes a takeover entry on the
//! decision subject with the subject's expected last sequence, and only then decides. Every
//! decision after that is written the same way, each expecting the one before: a decision made
//! on a stale view (an old leader that was paused, or cut off, while another took over) is
//! refused by JetStream itself, and every replica drops decisions of an epoch older than the
//! newest takeover it applied. The holder steps down when it cannot renew, when a renewal is
//! older than the TTL, when a decision is refused, or when it falls more than `--max-lag`
//! behind the log.
//!
//! Grants reach agents only when the replica that holds the agent's stream applies the decision
//! from the log (`server::owner`), so a decision that never reached the log is never acted on.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use tokio::sync::mpsc;

use super::entry::Entry;
use super::log::Decision;
use super::{ClusterConfig, Log, Progress};
use zonemesh_common::time::Stopwatch;

/// The one key of the lease's bucket.
const KEY: &str = "leader";
/// How long a decision may take to reach the log before the leader gives up leading.
const DECISION_DEADLINE: Duration = Duration::from_secs(2);

/// What the lease task knows while this replica leads.
struct Held {
    /// The epoch (the revision at which the lease was taken).
    epoch: u64,
    /// The lease's current revision (for the next compare-and-set).
    revision: u64,
    /// Since the last renewal that succeeded.
    renewed: Stopwatch,
    /// The sequence of the last decision written (the next one expects it).
    last_decision: u64,
    /// Decisions written at this epoch (their message ids).
    written: u64,
}

/// Runs the lease for this replica until `decisions` closes: contends for the lease, takes over
/// when it wins, writes the decisions the owner hands out while it leads, and steps down when it
/// must. `progress` says whether it leads (and at which epoch).
pub async fn run(
    log: Log,
    config: ClusterConfig,
    progress: Arc<Progress>,
    mut decisions: mpsc::UnboundedReceiver<Entry>,
) {
    let renew_every = config.lease_ttl / 3;
    let mut bucket = None;
    let mut held: Option<Held> = None;
    let mut tick = tokio::time::interval(renew_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            decision = decisions.recv() => {
                let Some(entry) = decision else { break };
                held = decide(&log, &config, &progress, held, entry).await;
                continue;
            }
        }
        let store = match &bucket {
            Some(store) => store,
            None => match log.lease().await {
                Ok(store) => bucket.insert(store),
                Err(e) => {
                    tracing::warn!(error = %e, "the lease's bucket is not reachable");
                    continue;
                }
            },
        };
        held = match held {
            Some(h) => renew(store, &config, &progress, h).await,
            None => contend(store, &log, &config, &progress).await,
        };
        if held.is_none() {
            follow(store, &config, &progress).await;
        } else {
            progress.set_leader_url(None);
        }
    }
    step_down(&progress, "the replica is stopping");
}

/// Writes `entry` (a decision of the owner's) when this replica still leads, at the epoch the
/// owner stamped it with; steps down when it is refused or cannot be written.
async fn decide(
    log: &Log,
    config: &ClusterConfig,
    progress: &Progress,
    held: Option<Held>,
    entry: Entry,
) -> Option<Held> {
    let mut h = held?;
    let stamped = match &entry {
        Entry::Test { epoch, .. } | Entry::Tiers { epoch, .. } => *epoch,
        _ => 0,
    };
    if stamped != h.epoch || h.renewed.elapsed() >= config.lease_ttl {
        // Decided at another epoch, or the lease may have passed to another replica meanwhile.
        tracing::debug!(
            stamped,
            epoch = h.epoch,
            "a decision not written: not of this lease"
        );
        if h.renewed.elapsed() >= config.lease_ttl {
            step_down(progress, "the lease was not renewed within its TTL");
            return None;
        }
        return Some(h);
    }
    h.written += 1;
    let id = format!("d/{}/{}", h.epoch, h.written);
    match log
        .append_decision(&entry, &id, h.last_decision, DECISION_DEADLINE)
        .await
    {
        Ok(seq) => {
            h.last_decision = seq;
            Some(h)
        }
        Err(Decision::Fenced) => {
            step_down(progress, "another leader has written a decision since");
            None
        }
        Err(Decision::Failed(e)) => {
            tracing::warn!(error = %e, "a decision did not reach the log");
            step_down(progress, "a decision did not reach the log");
            None
        }
    }
}

/// Renews the lease (compare-and-set on its revision); steps down when it cannot, or when the
/// replica is too far behind the log to decide.
async fn renew(
    store: &kv::Store,
    config: &ClusterConfig,
    progress: &Progress,
    mut h: Held,
) -> Option<Held> {
    if h.renewed.elapsed() >= config.lease_ttl {
        step_down(progress, "the lease was not renewed within its TTL");
        return None;
    }
    if progress.lag() > config.max_lag {
        step_down(
            progress,
            "the replica is more than --max-lag behind the log",
        );
        return None;
    }
    let value = lease_value(config);
    // Never believe in the lease past its TTL: a renewal still unanswered then has failed.
    let left = config.lease_ttl.saturating_sub(h.renewed.elapsed());
    // Counted from before the request: the servers' TTL runs from when they stored it, which is
    // later, so this replica stops believing in the lease before it expires there.
    let sent = Stopwatch::start();
    match tokio::time::timeout(left, store.update(KEY, value, h.revision)).await {
        Ok(Ok(revision)) => {
            h.revision = revision;
            h.renewed = sent;
            Some(h)
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, epoch = h.epoch, "the lease was not renewed");
            step_down(progress, "the lease could not be renewed");
            None
        }
        Err(_) => {
            step_down(progress, "the lease was not renewed within its TTL");
            None
        }
    }
}

/// Tries to take the lease; on success, catches up with the log and writes the takeover.
async fn contend(
    store: &kv::Store,
    log: &Log,
    config: &ClusterConfig,
    progress: &Progress,
) -> Option<Held> {
    if progress.why_unready().is_some() {
        return None;
    }
    let value = lease_value(config);
    let renewed = Stopwatch::start();
    let epoch = store.create(KEY, value).await.ok()?;
    // Apply the log up to its head (the previous leader's last decisions included) before
    // deciding anything; give up (the lease then expires) if that takes half the TTL.
    let last = match log.last_decision().await {
        Ok(last) => last,
        Err(e) => {
            tracing::warn!(error = %e, "took the lease but could not read the last decision");
            return None;
        }
    };
    // The log's head as this replica last saw it when it took the lease (not "no lag at all",
    // which a busy log may never show for a moment).
    let head = progress.applied() + progress.lag();
    while progress.applied() < last.max(head) {
        if renewed.elapsed() >= config.lease_ttl / 2 {
            tracing::warn!(
                epoch,
                "took the lease but did not catch up with the log in time; letting it go"
            );
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let takeover = Entry::Takeover {
        epoch,
        replica: config.replica.clone(),
    };
    let id = format!("d/{epoch}/0");
    match log
        .append_decision(&takeover, &id, last, DECISION_DEADLINE)
        .await
    {
        Ok(seq) => {
            tracing::info!(epoch, replica = %config.replica, "this replica leads");
            progress.lead(Some(epoch));
            Some(Held {
                epoch,
                revision: epoch,
                renewed,
                last_decision: seq,
                written: 0,
            })
        }
        Err(e) => {
            tracing::warn!(?e, epoch, "took the lease but the takeover was refused");
            None
        }
    }
}

/// What the lease's key holds: the holder's name and, when it advertises one, its URL.
fn lease_value(config: &ClusterConfig) -> bytes::Bytes {
    match &config.advertise {
        Some(url) => format!("{} {url}", config.replica),
        None => config.replica.clone(),
    }
    .into()
}

/// While another replica leads: where it answers extender calls, from the lease's key (a read,
/// which may be a moment stale: it only routes calls, it decides nothing).
async fn follow(store: &kv::Store, config: &ClusterConfig, progress: &Progress) {
    let url = match tokio::time::timeout(config.lease_ttl / 3, store.get(KEY)).await {
        Ok(Ok(Some(value))) => {
            let value = String::from_utf8_lossy(&value).into_owned();
            let mut parts = value.split_whitespace();
            let holder = parts.next().unwrap_or_default();
            parts
                .next()
                .filter(|_| holder != config.replica)
                .map(str::to_owned)
        }
        _ => None,
    };
    progress.set_leader_url(url);
}

fn step_down(progress: &Progress, why: &str) {
    if let Some(epoch) = progress.leading() {
        tracing::warn!(epoch, "this replica no longer leads: {why}");
    }
    progress.lead(None);
}
