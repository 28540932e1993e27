//! Which replicas are alive, decided from the log alone, so that every replica decides alike:
//! each replica appends a numbered heartbeat every [`HEARTBEAT_EVERY`]; a replica that missed
//! [`MISSED`] heartbeats of another one since its own last is presumed dead, and the sessions it
//! held end on every replica.
//!
//! Counting another replica's heartbeats, rather than reading the entries' timestamps, keeps a
//! stretch without any entry (every log server down for a minute) from ending every session at
//! once when the log comes back: a replica is dead only while some other replica is seen alive.

use std::collections::HashMap;
use std::time::Duration;

/// How often a replica appends its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);

/// Heartbeats of another replica a replica may miss before it is presumed dead (about 10 s).
pub const MISSED: u64 = 5;

/// The replicas seen, and what each had seen of the others at its last heartbeat.
#[derive(Debug, Default, Clone)]
pub struct Liveness {
    /// The last heartbeat number of each replica.
    beats: HashMap<String, u64>,
    /// For each replica: the others' heartbeat numbers when it last beat (or was first seen).
    seen: HashMap<String, HashMap<String, u64>>,
}

impl Liveness {
    /// `replica` is known to be alive now (a heartbeat, or a hello it took).
    fn alive(&mut self, replica: &str) {
        self.seen.insert(replica.to_owned(), self.beats.clone());
    }

    /// A hello that `replica` took: it counts as alive from here if it was not known.
    pub fn hello(&mut self, replica: &str) {
        if !self.seen.contains_key(replica) {
            self.alive(replica);
        }
    }

    /// `replica`'s heartbeat number `beat`. Returns the replicas presumed dead by it (each has
    /// missed [`MISSED`] of `replica`'s heartbeats since its own last), now forgotten.
    pub fn beat(&mut self, replica: &str, beat: u64) -> Vec<String> {
        if self.beats.get(replica).is_some_and(|b| *b > beat) {
            // It started again: its count starts over, so what others saw of it is reset.
            for seen in self.seen.values_mut() {
                seen.insert(replica.to_owned(), 0);
            }
        }
        self.beats.insert(replica.to_owned(), beat);
        self.alive(replica);
        let mut dead = Vec::new();
        for (other, seen) in &mut self.seen {
            if other.as_str() == replica {
                continue;
            }
            // Not seen beside this one yet (a replica restored from its checkpoint knows no
            // counts): counted from here.
            let since = *seen.entry(replica.to_owned()).or_insert(beat);
            if beat.saturating_sub(since) >= MISSED {
                dead.push(other.clone());
            }
        }
        dead.sort();
        for d in &dead {
            self.seen.remove(d);
            self.beats.remove(d);
        }
        dead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_is_dead_once_another_has_beaten_five_times_since_its_last() {
        let mut l = Liveness::default();
        l.beat("a", 1);
        l.beat("b", 1);
        for n in 2..6 {
            assert!(l.beat("a", n).is_empty(), "beat {n}");
        }
        // b beat when a was at 1: a's sixth beat is its fifth since.
        assert_eq!(l.beat("a", 6), vec!["b".to_owned()]);
        assert!(l.beat("a", 7).is_empty(), "b is forgotten");
    }

    #[test]
    fn heartbeats_of_both_keep_both_alive() {
        let mut l = Liveness::default();
        for n in 1..100 {
            assert!(l.beat("a", n).is_empty());
            assert!(l.beat("b", n).is_empty());
        }
    }

    #[test]
    fn a_replica_known_only_by_a_hello_dies_like_one_that_beat() {
        let mut l = Liveness::default();
        l.beat("a", 10);
        l.hello("c");
        for n in 11..15 {
            assert!(l.beat("a", n).is_empty());
        }
        assert_eq!(l.beat("a", 15), vec!["c".to_owned()]);
    }

    #[test]
    fn a_restarted_replica_counting_from_one_is_not_taken_for_silence() {
        let mut l = Liveness::default();
        l.beat("a", 500);
        l.beat("b", 40);
        // a restarts: its count starts over; b keeps beating.
        for n in 1..20 {
            assert!(l.beat("a", n).is_empty(), "a's beat {n}");
            assert!(l.beat("b", 40 + n).is_empty(), "b's beat {n}");
        }
    }

    #[test]
    fn a_replica_restored_without_counts_waits_five_beats_before_presuming_anyone_dead() {
        // Restored from a checkpoint: the sessions' replicas are known, no counts.
        let mut l = Liveness::default();
        l.hello("a");
        l.hello("b");
        for n in 700..705 {
            assert!(l.beat("a", n).is_empty(), "a's beat {n}");
        }
        assert_eq!(l.beat("a", 705), vec!["b".to_owned()]);
    }
}
