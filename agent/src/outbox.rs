//! The reports that the aggregator has not acknowledged yet, in order, in a bounded buffer.
//!
//! A report gets its sequence number when it is first sent, so that an agent that restarts
//! continues above what the aggregator has applied (the answer to every `Hello` says how far that
//! is). Once numbered, a report keeps its number through reconnects: the aggregator applies a
//! replay once and acknowledges it again. When the buffer is full the oldest report goes, and is
//! counted.
//!
//! The outbox holds domain samples, not wire messages: a report becomes a [`Report`] when it is
//! numbered, and the session converts it to the wire as it sends it. (The samples share their
//! node names, so a full buffer also takes less memory than the same reports as messages.)

use std::collections::VecDeque;

use zonemesh_domain::{PathSample, Report};

/// One buffered report.
#[derive(Debug, Clone)]
struct Entry {
    /// Assigned when first sent.
    sequence: Option<u64>,
    paths: Vec<PathSample>,
}

/// What happened to a report that left the buffer, for the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    /// Reports removed.
    pub reports: u64,
    /// Probes they carried.
    pub probes: u64,
}

impl Removed {
    fn add(&mut self, paths: &[PathSample]) {
        self.reports += 1;
        self.probes += paths.iter().map(|p| p.sent).sum::<u64>();
    }
}

/// The bounded buffer of unacknowledged reports.
#[derive(Debug)]
pub struct Outbox {
    entries: VecDeque<Entry>,
    capacity: usize,
    next_sequence: u64,
    /// Entries sent on the current connection (a prefix of `entries`).
    sent: usize,
}

impl Outbox {
    /// An empty outbox for at most `capacity` reports.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            capacity: capacity.max(1),
            next_sequence: 1,
            sent: 0,
        }
    }

    /// Reports waiting for an acknowledgement (sent or not).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Reports sent on this connection and not acknowledged yet.
    pub fn in_flight(&self) -> usize {
        self.sent
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Queues the samples of one report (numbered when sent). When full, the oldest report is
    /// dropped and returned in the count.
    pub fn push(&mut self, paths: Vec<PathSample>) -> Removed {
        let mut dropped = Removed::default();
        while self.entries.len() >= self.capacity {
            if let Some(old) = self.entries.pop_front() {
                dropped.add(&old.paths);
                self.sent = self.sent.saturating_sub(1);
            }
        }
        self.entries.push_back(Entry {
            sequence: None,
            paths,
        });
        dropped
    }

    /// A new connection whose aggregator has applied everything up to `applied`: drops what that
    /// covers, numbers future reports above it, and makes every remaining report due again.
    pub fn connected(&mut self, applied: u64) -> Removed {
        let removed = self.ack(applied);
        self.next_sequence = self.next_sequence.max(applied + 1);
        self.sent = 0;
        removed
    }

    /// The next report to send on this connection, numbered; `None` when all are sent.
    pub fn next_to_send(&mut self) -> Option<Report> {
        let entry = self.entries.get_mut(self.sent)?;
        let sequence = *entry.sequence.get_or_insert_with(|| {
            let s = self.next_sequence;
            self.next_sequence += 1;
            s
        });
        self.sent += 1;
        Some(Report {
            sequence,
            paths: entry.paths.clone(),
        })
    }

    /// Everything up to and including `sequence` is durable: forget it.
    pub fn ack(&mut self, sequence: u64) -> Removed {
        let mut removed = Removed::default();
        while let Some(front) = self.entries.front() {
            match front.sequence {
                Some(s) if s <= sequence => {
                    let entry = self.entries.pop_front().expect("front exists");
                    removed.add(&entry.paths);
                    self.sent = self.sent.saturating_sub(1);
                }
                _ => break,
            }
        }
        removed
    }

    /// The aggregator refused report `sequence` (sending it again cannot succeed): forget it.
    pub fn refuse(&mut self, sequence: u64) -> Removed {
        let mut removed = Removed::default();
        if let Some(i) = self
            .entries
            .iter()
            .position(|e| e.sequence == Some(sequence))
        {
            let entry = self.entries.remove(i).expect("index exists");
            removed.add(&entry.paths);
            if i < self.sent {
                self.sent -= 1;
            }
        }
        removed
    }

    /// The highest sequence number given out so far (0 if none).
    pub fn last_sequence(&self) -> u64 {
        self.next_sequence - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use zonemesh_domain::{IcmpMode, NodeName, UnixMs};

    /// The samples of a report of `probes` probes, all lost.
    fn report(probes: u64) -> Vec<PathSample> {
        let name = |n: &str| NodeName::parse("node", n).unwrap();
        vec![PathSample {
            src: name("a"),
            dst: name("b"),
            window_start: UnixMs(1),
            window_end: UnixMs(2),
            sent: probes,
            received: 0,
            rtt: None,
            throughput: None,
            method: Some(IcmpMode::Raw),
        }]
    }

    fn send_all(o: &mut Outbox) -> Vec<u64> {
        std::iter::from_fn(|| o.next_to_send().map(|r| r.sequence)).collect()
    }

    #[test]
    fn numbers_continue_above_what_the_aggregator_applied() {
        let mut o = Outbox::new(10);
        o.push(report(1));
        o.push(report(1));
        // A restarted agent: the aggregator has applied up to 41 for this node.
        o.connected(41);
        assert_eq!(send_all(&mut o), [42, 43]);
        o.push(report(1));
        assert_eq!(send_all(&mut o), [44]);
        assert_eq!(o.ack(43).reports, 2);
        assert_eq!(o.len(), 1);
    }

    #[test]
    fn a_reconnect_resends_the_unacknowledged_with_the_same_numbers() {
        let mut o = Outbox::new(10);
        o.connected(0);
        for _ in 0..3 {
            o.push(report(5));
        }
        assert_eq!(send_all(&mut o), [1, 2, 3]);
        o.ack(1);
        // The connection drops; the new aggregator answer says 2 is already durable.
        let removed = o.connected(2);
        assert_eq!(
            removed,
            Removed {
                reports: 1,
                probes: 5
            }
        );
        assert_eq!(send_all(&mut o), [3]);
        assert!(o.next_to_send().is_none());
    }

    #[test]
    fn an_aggregator_that_lost_its_data_gets_the_same_numbers_again() {
        let mut o = Outbox::new(10);
        o.connected(0);
        o.push(report(1));
        o.push(report(1));
        assert_eq!(send_all(&mut o), [1, 2]);
        o.connected(0);
        assert_eq!(send_all(&mut o), [1, 2]);
        o.push(report(1));
        assert_eq!(send_all(&mut o), [3]);
    }

    #[test]
    fn overflow_drops_the_oldest_and_counts_it() {
        let mut o = Outbox::new(2);
        assert_eq!(o.push(report(3)).reports, 0);
        o.push(report(4));
        assert_eq!(
            o.push(report(5)),
            Removed {
                reports: 1,
                probes: 3
            }
        );
        o.connected(0);
        let sent: Vec<u64> = std::iter::from_fn(|| o.next_to_send())
            .map(|r| r.paths[0].sent)
            .collect();
        assert_eq!(sent, [4, 5]);
    }

    #[test]
    fn a_refused_report_is_forgotten_and_the_rest_go_on() {
        let mut o = Outbox::new(10);
        o.connected(0);
        for _ in 0..3 {
            o.push(report(1));
        }
        assert_eq!(send_all(&mut o), [1, 2, 3]);
        assert_eq!(o.refuse(2).reports, 1);
        assert_eq!(o.refuse(9).reports, 0);
        assert_eq!(o.ack(3).reports, 2);
        assert!(o.is_empty());
        o.push(report(1));
        assert_eq!(send_all(&mut o), [4]);
    }
}
