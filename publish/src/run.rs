//! The publisher as one task: fed by tier snapshots, writing at most once per interval, backing
//! off on API errors.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zonemesh_domain::{Tiers, UnixMs};

use crate::objects::{Desired, Settings, desired};
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

/// Runs until `tiers` closes: a round when the tiers' objects changed (or every
/// [`RESYNC_INTERVALS`] intervals), never two within `interval`, and only while `may_publish`
/// says so (a replica publishes only while it holds the lease; once it may again, it publishes
/// afresh).
pub async fn run(
    mut writer: Writer,
    settings: Settings,
    mut tiers: watch::Receiver<Option<Arc<Tiers>>>,
    interval: Duration,
    clock: impl Fn() -> UnixMs,
    may_publish: impl Fn() -> bool,
    metrics: Arc<crate::PublishMetrics>,
) {
    let mut last: Option<Desired> = None;
    let mut rounds_since_check = 0u32;
    let mut failures = 0u32;
    loop {
        let current = tiers.borrow_and_update().clone();
        if !may_publish() {
            last = None;
        } else if let Some(t) = current {
            let want = desired(&t, &settings);
            let unchanged = last.as_ref() == Some(&want);
            if unchanged && rounds_since_check + 1 < RESYNC_INTERVALS {
                rounds_since_check += 1;
                metrics.rounds_unchanged.inc();
            } else {
                match writer.publish(&want, clock()).await {
                    Ok(round) => {
                        failures = 0;
                        rounds_since_check = 0;
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
                        tokio::time::sleep(wait.saturating_sub(interval)).await;
                    }
                }
            }
        }
        tokio::time::sleep(interval).await;
        if tiers.has_changed().is_err() {
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
