//! How far a replica is: the last entry it applied, the log's head as last seen, whether it has
//! caught up since it started, and whether it leads (the lease's epoch while it does). The owner
//! writes `applied`; the applier and the head poller write `head`; the lease task writes the
//! epoch; readiness, the query gate, the owner's grants, the publisher and the metrics read them.

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
    /// The lease's epoch while this replica leads; 0 while it does not.
    leading: AtomicU64,
    /// The newest epoch this replica acquired the lease at (0: never).
    lease_epoch: AtomicU64,
    /// Grants this replica did not relay: started too long ago, or of an older epoch.
    skipped_late: AtomicU64,
    skipped_stale: AtomicU64,
    /// Where the leader answers extender calls, as its lease says (while another replica leads).
    leader_url: std::sync::Mutex<Option<String>>,
    /// Extender calls answered without the leader: none known, or it did not answer.
    leaderless: AtomicU64,
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

    /// The last entry the log holds, as last heard.
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::SeqCst)
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

    /// The lease's epoch while this replica leads (decides grants, publishes).
    pub fn leading(&self) -> Option<u64> {
        Some(self.leading.load(Ordering::SeqCst)).filter(|e| *e > 0)
    }

    /// This replica leads at `epoch` (`None`: it stepped down).
    pub fn lead(&self, epoch: Option<u64>) {
        if let Some(e) = epoch {
            self.lease_epoch.fetch_max(e, Ordering::SeqCst);
        }
        self.leading.store(epoch.unwrap_or(0), Ordering::SeqCst);
    }

    /// The newest epoch this replica led at (0: never).
    pub fn lease_epoch(&self) -> u64 {
        self.lease_epoch.load(Ordering::SeqCst)
    }

    /// A grant was not relayed: `late` (its start had passed by more than the slack) or of an
    /// older epoch than one already applied.
    pub fn skipped(&self, late: bool) {
        let counter = if late {
            &self.skipped_late
        } else {
            &self.skipped_stale
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    /// The leader's advertised URL (`None`: this replica leads, or no leader is known).
    pub fn set_leader_url(&self, url: Option<String>) {
        *self.leader_url.lock().expect("leader url lock") = url;
    }

    /// Where to forward extender calls, while another replica leads.
    pub fn leader_url(&self) -> Option<String> {
        self.leader_url.lock().expect("leader url lock").clone()
    }

    /// An extender call was answered without the leader.
    pub fn leaderless(&self) {
        self.leaderless.fetch_add(1, Ordering::SeqCst);
    }

    /// Extender calls answered without the leader since the start.
    pub fn leaderless_count(&self) -> u64 {
        self.leaderless.load(Ordering::SeqCst)
    }

    /// Grants not relayed since the start: (late, stale epoch).
    pub fn skipped_counts(&self) -> (u64, u64) {
        (
            self.skipped_late.load(Ordering::SeqCst),
            self.skipped_stale.load(Ordering::SeqCst),
        )
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
