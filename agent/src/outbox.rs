//! The reports that the aggregator has not acknowledged yet, in order, in a bounded buffer.
//!
//! A window's samples go in as reports of at most [`REPORT_MAX_PATHS`] paths
//! ([`crate::report::parts`]); the buffer's bound counts windows, so that it holds as long a
//! time whatever a window's size.
//!
//! A report gets its sequence number when it is first sent, so that an agent that restarts
//! continues above what the aggregator has applied (the answer to every `Hello` says how far that
//! is). Once numbered, a report keeps its number through reconnects: the aggregator applies a
//! replay once and acknowledges it again. When the buffer is full the oldest window's reports
//! go, and are counted.
//!
//! The outbox holds domain samples, not wire messages: a report becomes a [`Report`] when it is
//! numbered, and the session converts it to the wire as it sends it. (The samples share their
//! node names, so a full buffer also takes less memory than the same reports as messages.)

use std::collections::VecDeque;

use zonemesh_domain::{PathSample, Report};

#[cfg(doc)]
use crate::report::REPORT_MAX_PATHS;

/// One buffered report.
#[derive(Debug, Clone)]
struct Entry {
    /// The window whose samples it carries (the outbox's own count). A window's reports stay
    /// next to each other.
    window: u64,
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
    /// Windows held at most.
    capacity: usize,
    /// Windows with a report in `entries`.
    windows: usize,
    next_window: u64,
    next_sequence: u64,
    /// Entries sent on the current connection (a prefix of `entries`).
    sent: usize,
}

impl Outbox {
    /// An empty outbox for the reports of at most `capacity` windows.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            capacity: capacity.max(1),
            windows: 0,
            next_window: 0,
            next_sequence: 1,
            sent: 0,
        }
    }

    /// Reports waiting for an acknowledgement (sent or not).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Windows with a report waiting.
    pub fn windows(&self) -> usize {
        self.windows
    }

    /// Reports sent on this connection and not acknowledged yet.
    pub fn in_flight(&self) -> usize {
        self.sent
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Queues the samples of one window as its reports (numbered when sent). When full, the
    /// oldest window's reports are dropped and returned in the count.
    pub fn push(&mut self, samples: Vec<PathSample>) -> Removed {
        let mut dropped = Removed::default();
        if samples.is_empty() {
            return dropped;
        }
        while self.windows >= self.capacity {
            let Some(oldest) = self.entries.front().map(|e| e.window) else {
                break;
            };
            while self.entries.front().is_some_and(|e| e.window == oldest) {
                let old = self.entries.pop_front().expect("front exists");
                dropped.add(&old.paths);
                self.sent = self.sent.saturating_sub(1);
            }
            self.windows -= 1;
        }
        let window = self.next_window;
        self.next_window += 1;
        self.windows += 1;
        self.entries
            .extend(crate::report::parts(samples).map(|paths| Entry {
                window,
                sequence: None,
                paths,
            }));
        dropped
    }

    /// Takes out the report at `i`, keeping the count of windows.
    fn remove(&mut self, i: usize) -> Entry {
        let entry = self.entries.remove(i).expect("index exists");
        let same = |j: Option<usize>| {
            j.and_then(|j| self.entries.get(j))
                .is_some_and(|e| e.window == entry.window)
        };
        if !same(i.checked_sub(1)) && !same(Some(i)) {
            self.windows -= 1;
        }
        if i < self.sent {
            self.sent -= 1;
        }
        entry
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
                    let entry = self.remove(0);
                    removed.add(&entry.paths);
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
            let entry = self.remove(i);
            removed.add(&entry.paths);
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

    /// The samples of a window of `paths` paths, one probe each, all lost.
    fn window(paths: usize) -> Vec<PathSample> {
        (0..paths).flat_map(|_| report(1)).collect()
    }

    #[test]
    fn a_large_window_goes_out_in_reports_numbered_one_after_another() {
        let mut o = Outbox::new(10);
        o.connected(0);
        o.push(window(70));
        o.push(window(1));
        assert_eq!((o.len(), o.windows()), (4, 2));
        let sent: Vec<(u64, usize)> = std::iter::from_fn(|| o.next_to_send())
            .map(|r| (r.sequence, r.paths.len()))
            .collect();
        assert_eq!(sent, [(1, 32), (2, 32), (3, 6), (4, 1)]);
        // Half a window acknowledged: the window still waits.
        assert_eq!(o.ack(2).reports, 2);
        assert_eq!((o.len(), o.windows()), (2, 2));
        assert_eq!(o.ack(3).probes, 6);
        assert_eq!((o.len(), o.windows()), (1, 1));
    }

    #[test]
    fn the_bound_counts_windows_and_drops_a_whole_window() {
        let mut o = Outbox::new(2);
        o.push(window(70));
        assert_eq!(o.push(window(2)), Removed::default());
        assert_eq!(
            o.push(window(3)),
            Removed {
                reports: 3,
                probes: 70
            }
        );
        assert_eq!((o.len(), o.windows()), (2, 2));
        o.connected(0);
        let sizes: Vec<usize> = std::iter::from_fn(|| o.next_to_send())
            .map(|r| r.paths.len())
            .collect();
        assert_eq!(sizes, [2, 3]);
    }

    #[test]
    fn a_refused_report_of_a_window_leaves_its_other_reports_and_the_window_count() {
        let mut o = Outbox::new(10);
        o.connected(0);
        o.push(window(70));
        o.push(window(40));
        assert_eq!(send_all(&mut o), [1, 2, 3, 4, 5]);
        assert_eq!(o.refuse(2).reports, 1);
        assert_eq!((o.len(), o.windows()), (4, 2));
        assert_eq!(o.refuse(4).reports, 1);
        assert_eq!(o.refuse(5).reports, 1);
        assert_eq!((o.len(), o.windows()), (2, 1));
        assert_eq!(o.in_flight(), 2);
        assert_eq!(o.ack(3).reports, 2);
        assert!(o.is_empty());
        assert_eq!(o.windows(), 0);
        assert!(o.push(window(1)).reports == 0 && o.windows() == 1);
    }
}
