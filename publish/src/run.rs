//! The publisher as one task: fed by tier snapshots (and, for `health`, the open faults),
//! writing at most once per interval, backing off on API errors.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use zonemesh_domain::{Faults, Tiers, UnixMs};

use crate::health::Held;
use crate::objects::{Desired, Settings, apply_health, desired};
use crate::writer::Writer;

/// Longest wait after API errors.
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// How often the cluster is compared with the tiers even when they did not change (objects
/// someone else changed or deleted are written again): this many intervals.
pub const RESYNC_INTERVALS: u32 = 10;

/// The wait after `failures` failed rounds in a row: the interval doubled each time, at most
/// [`MAX_BACKOFF`].
pub fn backoff(interval: Duration, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.min(16));
    interval
        .saturating_mul(factor)
        .min(MAX_BACKOFF.max(interval))
}

/// What the publisher reads.
#[derive(Debug)]
pub struct Inputs {
    /// The tiers, as derived.
    pub tiers: watch::Receiver<Option<Arc<Tiers>>>,
    /// The open faults (for `health`).
    pub faults: watch::Receiver<Arc<Faults>>,
}

/// Runs until the tiers close: a round when what it would write changed (or every
/// [`RESYNC_INTERVALS`] intervals), never two within `interval`, and only while `may_publish`
/// says so (a replica publishes only while it holds the lease; once it may again, it publishes
/// afresh). Taints change only once `--taint-warm-up` has passed since it started, the faults
/// have been looked at, and `healthy` (the store is written) says so; till then they stay as
/// they are. Before its first round that may change taints (and again after losing the lease or
/// a failed round) it lists which nodes carry zonemesh's taint: those keep it first.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    mut writer: Writer,
    settings: Settings,
    mut inputs: Inputs,
    interval: Duration,
    clock: impl Fn() -> UnixMs,
    may_publish: impl Fn() -> bool,
    healthy: impl Fn() -> bool,
    metrics: Arc<crate::PublishMetrics>,
) {
    let started = Instant::now();
    let mut last: Option<Desired> = None;
    let mut rounds_since_check = 0u32;
    let mut failures = 0u32;
    // The nodes that carry zonemesh's taint, as of the last round that looked; `None` until
    // one has (read from the API server before the first round that may change taints, so that
    // a restarted publisher, or a replica that takes the lease over, keeps the taints it finds
    // while the count is full instead of moving them to other nodes).
    let mut carrying: Option<BTreeSet<String>> = None;
    let mut held: BTreeMap<String, Held> = BTreeMap::new();
    loop {
        let current = inputs.tiers.borrow_and_update().clone();
        if !may_publish() {
            last = None;
            carrying = None;
        } else if let Some(t) = current {
            let mut want = desired(&t, &settings);
            let faults = inputs.faults.borrow().clone();
            let may_taint = settings
                .taint
                .is_some_and(|ts| started.elapsed() >= ts.warm_up)
                && faults.evaluated_at.is_some()
                && healthy();
            if may_taint && carrying.is_none() {
                match writer.carrying().await {
                    Ok(nodes) => carrying = Some(nodes),
                    Err(e) => {
                        metrics.api_errors.inc();
                        tracing::warn!(error = %e, "could not list the nodes' taints; taints stay as they are this round");
                    }
                }
            }
            let plan = apply_health(
                &mut want,
                &t,
                &faults,
                &settings,
                carrying.as_ref().filter(|_| may_taint),
            );
            if let Some(plan) = plan
                && plan.held != held
            {
                for (node, why) in &plan.held {
                    if held.get(node) != Some(why) {
                        tracing::info!(%node, why = why.as_str(), "a fault of the node's own, not tainted");
                    }
                }
                held = plan.held;
            }
            let unchanged = last.as_ref() == Some(&want);
            if unchanged && rounds_since_check + 1 < RESYNC_INTERVALS {
                rounds_since_check += 1;
                metrics.rounds_unchanged.inc();
            } else {
                match writer.publish(&want, clock()).await {
                    Ok(round) => {
                        failures = 0;
                        rounds_since_check = 0;
                        if want.taints.is_some() {
                            carrying = Some(round.carrying.iter().cloned().collect());
                        }
                        tracing::debug!(?round, "published");
                        last = Some(want);
                    }
                    Err(e) => {
                        failures += 1;
                        metrics.api_errors.inc();
                        let wait = backoff(interval, failures);
                        let hint = if e.code() == Some(403) {
                            " (is the ClusterRole of the deploy/publish component for this scheduler bound to the aggregator's ServiceAccount?)"
                        } else {
                            ""
                        };
                        tracing::warn!(error = %e, retry_in = ?wait, "publishing failed{hint}");
                        last = None;
                        // A round cut short may have changed some taints: read them again.
                        carrying = None;
                        tokio::time::sleep(wait.saturating_sub(interval)).await;
                    }
                }
            }
        }
        tokio::time::sleep(interval).await;
        if inputs.tiers.has_changed().is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_ten_minutes() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(30), 0), s(30));
        assert_eq!(backoff(s(30), 1), s(60));
        assert_eq!(backoff(s(30), 3), s(240));
        assert_eq!(backoff(s(30), 30), s(600));
        assert_eq!(backoff(s(900), 2), s(900), "never below the interval");
    }
}
