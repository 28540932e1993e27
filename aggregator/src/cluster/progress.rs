//! How far a replica is: the last entry it applied, the log's head as last seen, and whether it
//! has caught up since it started. The owner writes `applied`; the applier and the head poller
//! write `head`; readiness, the query gate and the metrics read them.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// A replica's place in the log.
#[derive(Debug, Default)]
pub struct Progress {
    applied: AtomicU64,
    head: AtomicU64,
    caught_up: AtomicBool,
    /// When the log last answered (Unix ms; 0: never).
    heard_at: AtomicI64,
    /// When the last checkpoint was written (Unix ms; 0: never).
    checkpoint_at: AtomicI64,
    /// Entries that did not decode, skipped.
    unreadable: AtomicU64,
    /// Throughput tests this replica's agents went without (it is not the writer).
    withheld: AtomicU64,
    /// Its `--max-lag`.
    max_lag: AtomicU64,
}

impl Progress {
    /// A replica that has applied the log up to `applied` (its checkpoint).
    pub fn starting_at(applied: u64) -> Self {
        let p = Self::default();
        p.applied.store(applied, Ordering::SeqCst);
        p.head.store(applied, Ordering::SeqCst);
        p
    }

    /// The owner applied every entry up to `seq`.
    pub fn applied_to(&self, seq: u64) {
        self.applied.fetch_max(seq, Ordering::SeqCst);
        self.note_caught_up();
    }

    /// The log holds entries up to `seq`; it answered at `now_ms`.
    pub fn head_at(&self, seq: u64, now_ms: i64) {
        self.head.fetch_max(seq, Ordering::SeqCst);
        self.heard_at.store(now_ms, Ordering::SeqCst);
        self.note_caught_up();
    }

    fn note_caught_up(&self) {
        if self.lag() == 0 && self.heard_at.load(Ordering::SeqCst) > 0 {
            self.caught_up.store(true, Ordering::SeqCst);
        }
    }

    /// The last entry applied.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::SeqCst)
    }

    /// Entries in the log that this replica has not applied.
    pub fn lag(&self) -> u64 {
        self.head
            .load(Ordering::SeqCst)
            .saturating_sub(self.applied.load(Ordering::SeqCst))
    }

    /// Whether the replica has applied the whole log once since it started.
    pub fn caught_up(&self) -> bool {
        self.caught_up.load(Ordering::SeqCst)
    }

    /// When the log last answered (Unix ms), if it ever did.
    pub fn heard_at(&self) -> Option<i64> {
        Some(self.heard_at.load(Ordering::SeqCst)).filter(|t| *t > 0)
    }

    /// A checkpoint was written at `now_ms`.
    pub fn checkpointed(&self, now_ms: i64) {
        self.checkpoint_at.store(now_ms, Ordering::SeqCst);
    }

    /// When the last checkpoint was written (Unix ms), if one was.
    pub fn checkpoint_at(&self) -> Option<i64> {
        Some(self.checkpoint_at.load(Ordering::SeqCst)).filter(|t| *t > 0)
    }

    /// One more entry did not decode.
    pub fn unreadable(&self) {
        self.unreadable.fetch_add(1, Ordering::SeqCst);
    }

    /// Entries that did not decode since the start.
    pub fn unreadable_count(&self) -> u64 {
        self.unreadable.load(Ordering::SeqCst)
    }

    /// `agents` of this replica's agents went without a throughput test this round.
    pub fn withheld(&self, agents: u64) {
        self.withheld.fetch_add(agents, Ordering::SeqCst);
    }

    /// Throughput tests withheld since the start.
    pub fn withheld_count(&self) -> u64 {
        self.withheld.load(Ordering::SeqCst)
    }

    /// Sets the replica's `--max-lag`.
    pub fn set_max_lag(&self, max_lag: u64) {
        self.max_lag.store(max_lag, Ordering::SeqCst);
    }

    /// Why this replica should not answer now, by its own `--max-lag`.
    pub fn why_unready(&self) -> Option<String> {
        self.unready(self.max_lag.load(Ordering::SeqCst))
    }

    /// Why this replica should not answer now (behind by more than `max_lag`, or never caught
    /// up since it started), if it should not.
    pub fn unready(&self, max_lag: u64) -> Option<String> {
        let lag = self.lag();
        if !self.caught_up() {
            return Some(format!(
                "this replica is catching up with the log ({lag} entries behind)"
            ));
        }
        (lag > max_lag).then(|| {
            format!("this replica is {lag} entries behind the log, more than --max-lag {max_lag}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_is_ready_once_caught_up_and_while_within_the_lag() {
        let p = Progress::starting_at(10);
        assert!(
            p.unready(5).unwrap().contains("catching up"),
            "the log not heard yet"
        );
        p.head_at(30, 1_000);
        assert_eq!(p.lag(), 20);
        assert!(p.unready(5).is_some());
        p.applied_to(30);
        assert_eq!((p.lag(), p.caught_up()), (0, true));
        assert_eq!(p.unready(5), None);
        p.head_at(34, 2_000);
        assert_eq!(p.unready(5), None, "4 behind, within 5");
        p.head_at(40, 3_000);
        assert!(p.unready(5).unwrap().contains("10 entries behind"));
        p.applied_to(25);
        assert_eq!(p.applied(), 30, "applied never goes back");
    }
}
