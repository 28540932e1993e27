//! The tiers task: every `--tier-interval` it reads the zones and their zone-pair terms through a
//! query on the latest snapshot (O(zones²) look-ups, no path walk), derives the tiers
//! (`zonemesh_engine::tiers::derive`), hands a changed [`TierState`] to the owner to store with
//! its next batch, and publishes the tiers on a watch channel. `GetTiers` and the publisher read
//! that channel; neither ever runs on the owner task.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zonemesh_domain::{TierThresholds, Tiers};
use zonemesh_engine::tiers::{LinkFigures, TierState, derive};

use super::owner::{Command, Owner};

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

/// Starts the task from the stored state (if any). It ends when the owner task stops.
pub fn spawn(
    owner: Owner,
    config: TiersConfig,
    restored: Option<TierState>,
) -> (TiersWatch, JoinHandle<()>) {
    let (tx, rx) = watch::channel(None);
    let task = tokio::spawn(async move {
        let mut state = restored.unwrap_or_default();
        let mut tick = tokio::time::interval(config.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
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
            let (tiers, next) = derive(
                &inputs,
                &|i, j| figures[i * n + j],
                &config.thresholds,
                &state,
                now,
            );
            if next != state {
                let moved = next
                    .groups
                    .iter()
                    .filter(|(z, g)| state.groups.get(*z).is_some_and(|old| old != *g))
                    .count();
                if moved > 0 {
                    tracing::info!(
                        moved,
                        groups = tiers.groups.len(),
                        "zones changed tier-2 group"
                    );
                }
                if owner.send(Command::Tiers(next.clone())).await.is_err() {
                    return;
                }
                state = next;
            }
            tx.send_replace(Some(Arc::new(tiers)));
        }
    });
    (rx, task)
}
