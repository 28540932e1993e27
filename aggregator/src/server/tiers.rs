//! The tiers task: every `--tier-interval`, and whenever new groups are decided, it reads the
//! zones and their zone-pair terms through a query on the latest snapshot (O(zones²) look-ups,
//! no path walk), draws the tiers with the groups as decided (`zonemesh_engine::tiers::render`)
//! and publishes them on a watch channel. `GetTiers` and the publisher read that channel; neither
//! ever runs on the owner task.
//!
//! Where it may decide (a single aggregator, or the replica that holds the lease) it also derives
//! the groups with their hysteresis (`zonemesh_engine::tiers::derive`) and hands changed groups
//! to the owner: alone they are decided at once; in a cluster they go through the log as the
//! leader's fenced decision, and every replica draws from them once it applies the entry. So
//! every replica shows the groups one leader decided, and a new leader goes on from them.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zonemesh_domain::{TierThresholds, Tiers};
use zonemesh_engine::tiers::{LinkFigures, TierState, derive, render};

use super::owner::{Command, Owner};
use crate::cluster::Progress;

/// Settings of the tiers task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TiersConfig {
    /// The thresholds (`--tier-*` flags).
    pub thresholds: TierThresholds,
    /// How often tiers are derived (`--tier-interval`). Default 10 s.
    pub every: Duration,
}

impl Default for TiersConfig {
    fn default() -> Self {
        Self {
            thresholds: TierThresholds::default(),
            every: Duration::from_secs(10),
        }
    }
}

/// The latest tiers; `None` until the first derivation.
pub type TiersWatch = watch::Receiver<Option<Arc<Tiers>>>;

/// Starts the task. `cluster` is a replica's progress (it decides only while it leads); without
/// it the task always decides. It ends when the owner task stops.
pub fn spawn(
    owner: Owner,
    config: TiersConfig,
    cluster: Option<Arc<Progress>>,
) -> (TiersWatch, JoinHandle<()>) {
    let (tx, rx) = watch::channel(None);
    let mut decided = owner.decided_tiers();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(config.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                changed = decided.changed() => if changed.is_err() {
                    return; // the owner stopped
                },
            }
            let state = decided.borrow_and_update().clone().unwrap_or_default();
            let read = owner
                .query(|t, now| {
                    let (inputs, ids) = t.tier_inputs(now);
                    let n = ids.len();
                    let mut figures = Vec::with_capacity(n * n);
                    for a in &ids {
                        for b in &ids {
                            figures.push(t.zone_pair_terms(*a, *b, now).map_or(
                                LinkFigures::default(),
                                |terms| LinkFigures {
                                    rtt_us: terms.rtt_us,
                                    throughput_bps: terms.throughput_bps,
                                },
                            ));
                        }
                    }
                    (inputs, figures, now)
                })
                .await;
            let Ok((inputs, figures, now)) = read else {
                return; // shutting down
            };
            let n = inputs.len();
            let figure = |i: usize, j: usize| figures[i * n + j];
            if cluster.as_ref().is_none_or(|p| p.leading().is_some()) {
                let (_, next) = derive(&inputs, &figure, &config.thresholds, &state, now);
                if next != state {
                    log_moves(&state, &next);
                    if owner.send(Command::Tiers(next)).await.is_err() {
                        return;
                    }
                    // Drawn once decided: at once alone, when the log's entry is applied in a
                    // cluster (or at the next tick, should it never be).
                    continue;
                }
            }
            let tiers = render(&inputs, &figure, &config.thresholds, &state, now);
            tx.send_replace(Some(Arc::new(tiers)));
        }
    });
    (rx, task)
}

/// Says how many zones changed group, if any did.
fn log_moves(state: &TierState, next: &TierState) {
    let moved = next
        .groups
        .iter()
        .filter(|(z, g)| state.groups.get(*z).is_some_and(|old| old != *g))
        .count();
    if moved > 0 {
        tracing::info!(
            moved,
            groups = next.group_names().len(),
            "zones changed tier-2 group"
        );
    }
}
