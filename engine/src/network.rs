//! The measured network as [`collective::Network`] sees it: the seam between what zonemesh
//! measured and what the job model predicts.
//!
//! [`SnapshotNetwork`] answers over a [`Snapshot`], a list of candidate nodes (indices into it
//! are the network's node numbers) and `now`:
//!
//! - a link `a → b` is [`Snapshot::directed`]'s figures: the pair's RTT and loss (round trips)
//!   where measured (fresh), else the estimate the snapshot gives for an unmeasured pair; its
//!   rate is the throughput measured from `a` to `b`, else the estimate of that direction (a
//!   ring's flows go one way, and a node whose egress is slow may receive at full rate);
//! - where the agents timed message exchanges on the pair (either direction's throughput tests,
//!   while fresh), the link carries a message's own cost and the repair of a lost last segment
//!   from them ([`Link::with_exchanges`]); where the model has a repair ([`TailRepair`]: fitted
//!   over every lossy path's exchanges, or the hosts' retransmission timeout while those say too
//!   little), a lossy link's repair is that one ([`Link::with_tail_repair`]);
//! - a figure nobody measured or estimated is assumed pessimistically ([`UNKNOWN_RTT_US`], no
//!   loss, [`UNKNOWN_RATE_BPS`]) and counted as estimated;
//! - a node's egress and ingress are its caps in the fitted model ([`Snapshot::egress_cap_bps`],
//!   [`Snapshot::ingress_cap_bps`]: the fastest throughput test it sent or received), shared by
//!   the flows it sends or receives at once, so that a parameter server's incast and a node
//!   sending to several peers cost what they share; unlimited when the model has no test of
//!   the node;
//! - zones share no capacity: the model's zone-pair capacity ([`Snapshot::zone_capacity_bps`])
//!   is what single throughput tests between the zones reached, which cannot tell a limit each
//!   flow meets alone (a long path's TCP window, a per-flow policer) from one that flows
//!   crossing at once divide. It already bounds each estimated link's rate; dividing it among
//!   the flows of a collective as well would charge a sharing nobody measured. (A node's own
//!   link, by contrast, is one NIC whichever flow crosses it.)
//! - two ranks on one node talk without the network (no delay, unlimited rate, no share of the
//!   node's own link).
//!
//! It remembers every pair it was asked about, so that an answer can say how many of the figures
//! behind a prediction were estimated ([`SnapshotNetwork::usage`] after
//! [`SnapshotNetwork::forget_usage`]).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use zonemesh_domain::{Provenance, UnixMs};

use crate::collective::{Link, Network};
use crate::model::TailRepair;
use crate::{NodeId, PairHasher, Snapshot};

type Fast = BuildHasherDefault<PairHasher>;

/// The RTT assumed for a pair with no measured or estimated figure, µs: far enough that a
/// placement prefers any pair it knows.
pub const UNKNOWN_RTT_US: f64 = 10_000.0;

/// The rate assumed for a pair with no measured or estimated throughput, bit/s.
pub const UNKNOWN_RATE_BPS: f64 = 1e9;

/// How many link figures a prediction used, and how many of them were estimated (or assumed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Figures used: per node pair its RTT and loss (one figure), per direction used its rate
    /// (another).
    pub figures: u32,
    /// Of them, the ones not measured.
    pub estimated: u32,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    link: Link,
    latency_measured: bool,
    rate_measured: bool,
}

/// A [`Network`] over a snapshot's candidate nodes (see the module docs).
pub struct SnapshotNetwork<'a> {
    snapshot: &'a Snapshot,
    nodes: Vec<NodeId>,
    zones: Vec<usize>,
    now: UnixMs,
    links: RefCell<HashMap<(u32, u32), Entry, Fast>>,
    used: RefCell<HashSet<(u32, u32), Fast>>,
}

impl std::fmt::Debug for SnapshotNetwork<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotNetwork")
            .field("nodes", &self.nodes)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl<'a> SnapshotNetwork<'a> {
    /// The network of `nodes` (network node `i` is `nodes[i]`) at `now`.
    pub fn new(snapshot: &'a Snapshot, nodes: Vec<NodeId>, now: UnixMs) -> Self {
        let zones = nodes
            .iter()
            .map(|&n| snapshot.zone_of(n).0 as usize)
            .collect();
        Self {
            snapshot,
            nodes,
            zones,
            now,
            links: RefCell::default(),
            used: RefCell::default(),
        }
    }

    /// The snapshot's node behind network node `i`.
    pub fn node(&self, i: usize) -> NodeId {
        self.nodes[i]
    }

    /// The network's nodes.
    pub fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// Forgets which pairs were used (before a prediction whose figures are to be counted).
    pub fn forget_usage(&self) {
        self.used.borrow_mut().clear();
    }

    /// The figures used since the last [`forget_usage`](Self::forget_usage).
    pub fn usage(&self) -> Usage {
        let links = self.links.borrow();
        let used = self.used.borrow();
        let mut usage = Usage::default();
        for key in used.iter() {
            let e = &links[key];
            usage.figures += 1;
            usage.estimated += u32::from(!e.rate_measured);
            // The pair's round-trip figures count once, whichever directions were used.
            let reverse = (key.1, key.0);
            if key.0 <= key.1 || !used.contains(&reverse) {
                usage.figures += 1;
                usage.estimated += u32::from(!e.latency_measured);
            }
        }
        usage
    }

    fn entry(&self, a: usize, b: usize) -> Entry {
        let key = (a as u32, b as u32);
        self.used.borrow_mut().insert(key);
        if let Some(e) = self.links.borrow().get(&key) {
            return *e;
        }
        let p = self
            .snapshot
            .directed(self.nodes[a], self.nodes[b], self.now);
        let e = Entry {
            link: measured_link(&p, self.snapshot.model().tail_repair()),
            latency_measured: p.latency == Provenance::Measured && p.rtt_us.is_some(),
            rate_measured: p.throughput == Provenance::Measured,
        };
        self.links.borrow_mut().insert(key, e);
        e
    }
}

/// The link of a pair's directed figures (unknown figures assumed as the module docs say), with
/// the pair's timed message exchanges where measured.
fn measured_link(p: &crate::query::PairFigures, tail_repair: Option<TailRepair>) -> Link {
    let link = Link::wire(
        p.rtt_us.unwrap_or(UNKNOWN_RTT_US),
        p.loss.unwrap_or(0.0),
        p.tput_bps.filter(|r| *r > 0.0).unwrap_or(UNKNOWN_RATE_BPS),
    );
    let link = match p.exchange_us {
        Some((p50, mean)) => link.with_exchanges(p50, mean),
        None => link,
    };
    match tail_repair {
        Some(t) => link.with_tail_repair(t.us),
        None => link,
    }
}

impl Network for SnapshotNetwork<'_> {
    fn link(&self, a: usize, b: usize) -> Link {
        if self.nodes[a] == self.nodes[b] {
            return Link::wire(0.0, 0.0, f64::INFINITY);
        }
        self.entry(a, b).link
    }

    fn same_host(&self, a: usize, b: usize) -> bool {
        self.nodes[a] == self.nodes[b]
    }

    fn zone(&self, a: usize) -> usize {
        self.zones[a]
    }

    fn egress_bps(&self, a: usize) -> f64 {
        self.snapshot
            .egress_cap_bps(self.nodes[a])
            .unwrap_or(f64::INFINITY)
    }

    fn ingress_bps(&self, a: usize) -> f64 {
        self.snapshot
            .ingress_cap_bps(self.nodes[a])
            .unwrap_or(f64::INFINITY)
    }

    fn zone_capacity_bps(&self, _: usize, _: usize) -> Option<f64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use zonemesh_domain::{Collective, Job, Report};

    use super::*;
    use crate::collective::{Bottleneck, predict};
    use crate::testing::*;
    use crate::{EngineConfig, Topology};

    #[test]
    fn a_pairs_timed_exchanges_price_its_lost_last_segments() {
        use zonemesh_domain::{MessageExchange, Micros};
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        for n in ["a1", "a2"] {
            t.register(&hello(n, "zone-a"), now);
        }
        // a1 -> a2 loses 5 of 100 probes; its test's exchanges: median 30 µs, mean 10 ms over.
        let mut s = sample("a1", "a2", 20.0, 5, Some(9e8));
        let us = |v| Micros::parse("e", v).unwrap();
        s.throughput.as_mut().unwrap().exchange =
            Some(MessageExchange::new(64, us(30.0), us(10_030.0), us(220_000.0)).unwrap());
        let id = t.id(&name("a1")).unwrap();
        t.apply_report(
            id,
            &Report {
                sequence: 1,
                paths: vec![s],
            },
            now,
        )
        .unwrap();
        t.sweep(now);
        let ids: Vec<NodeId> = ["a1", "a2"].map(|n| t.id(&name(n)).unwrap()).to_vec();
        let net = SnapshotNetwork::new(t.view(), ids, now);
        // Both directions: the exchanges are round trips, whichever side timed them.
        for (a, b) in [(0, 1), (1, 0)] {
            let link = net.link(a, b);
            assert_eq!(link.message_us, 5.0, "{link:?}");
            assert!(
                (link.tail_repair_us.unwrap() - 200_000.0).abs() < 1e-6,
                "{link:?}"
            );
        }
        // An hour and more later the test no longer counts, nor do its exchanges.
        let later = UnixMs(now.0 + 3_600_001);
        let net = SnapshotNetwork::new(t.view(), net.nodes().to_vec(), later);
        assert_eq!(net.link(0, 1).tail_repair_us, None);
    }

    #[test]
    fn links_are_the_pairs_figures_and_unmeasured_ones_are_counted() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        for (n, z) in [
            ("a1", "zone-a"),
            ("a2", "zone-a"),
            ("b1", "zone-b"),
            ("b2", "zone-b"),
        ] {
            t.register(&hello(n, z), now);
        }
        // a1–a2 and b1–b2 measured with throughput; a1–b1 measured without; a2–b2 never: the
        // model estimates it.
        let reports = [
            (
                "a1",
                vec![
                    sample("a1", "a2", 100.0, 0, Some(9e8)),
                    sample("a1", "b1", 2_000.0, 2, None),
                ],
            ),
            ("b1", vec![sample("b1", "b2", 100.0, 0, Some(9e8))]),
        ];
        for (seq, (src, paths)) in reports.into_iter().enumerate() {
            let id = t.id(&name(src)).unwrap();
            t.apply_report(
                id,
                &Report {
                    sequence: seq as u64 + 1,
                    paths,
                },
                now,
            )
            .unwrap();
        }
        t.sweep(now);
        let ids: Vec<NodeId> = ["a1", "a2", "b1", "b2"]
            .map(|n| t.id(&name(n)).unwrap())
            .to_vec();
        let net = SnapshotNetwork::new(t.view(), ids, now);
        let inside = net.link(0, 1);
        assert_eq!(
            (inside.rtt_us, inside.loss, inside.rate_bps),
            (100.0, 0.0, 9e8)
        );
        assert_eq!(
            net.usage(),
            Usage {
                figures: 2,
                estimated: 0
            }
        );
        let across = net.link(0, 2);
        assert_eq!(across.rtt_us, 2_000.0);
        assert!((across.loss - 0.02).abs() < 1e-12, "{across:?}");
        // No test crossed the zones: the model's estimate from the nodes' caps (the tests inside
        // the zones ran at 900 Mbit/s), not the pessimistic unknown rate.
        assert_eq!(across.rate_bps, 9e8, "{across:?}");
        assert!(across.rate_bps != UNKNOWN_RATE_BPS);
        assert_eq!(
            net.usage(),
            Usage {
                figures: 4,
                estimated: 1
            }
        );
        let estimated = net.link(3, 1);
        assert_eq!(
            estimated.rtt_us, 2_000.0,
            "zone-a → zone-b's base RTT in the model"
        );
        assert_eq!(
            net.usage(),
            Usage {
                figures: 6,
                estimated: 3
            }
        );
        assert_eq!(net.zone(0), net.zone(1));
        assert_ne!(net.zone(1), net.zone(3));
        net.forget_usage();
        let job = Job {
            collective: Collective::RingAllReduce,
            bytes_per_iteration: 1_000_000,
        };
        predict(&job, &[0, 1], &net);
        // A ring of two uses both directions: the pair's round trip (measured), a1 → a2's rate
        // (measured) and a2 → a1's, which no test measured (the model's estimate).
        assert_eq!(
            net.usage(),
            Usage {
                figures: 3,
                estimated: 1
            }
        );
        assert_eq!(net.link(1, 0).rtt_us, 100.0, "round trips are the pair's");
    }

    #[test]
    fn a_links_rate_is_its_own_direction_and_its_round_trip_the_pairs() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        for n in ["a1", "a2"] {
            t.register(&hello(n, "zone-a"), now);
        }
        // a2 sends slowly (its egress at 100 Mbit/s) and receives at full rate; a2's probes
        // see a longer RTT than a1's.
        let reports = [
            ("a1", sample("a1", "a2", 100.0, 0, Some(9e8))),
            ("a2", sample("a2", "a1", 140.0, 0, Some(1e8))),
        ];
        for (seq, (src, path)) in reports.into_iter().enumerate() {
            let id = t.id(&name(src)).unwrap();
            let report = Report {
                sequence: seq as u64 + 1,
                paths: vec![path],
            };
            t.apply_report(id, &report, now).unwrap();
        }
        t.sweep(now);
        let ids = ["a1", "a2"].map(|n| t.id(&name(n)).unwrap()).to_vec();
        let net = SnapshotNetwork::new(t.view(), ids.clone(), now);
        let (ab, ba) = (net.link(0, 1), net.link(1, 0));
        assert_eq!((ab.rate_bps, ba.rate_bps), (9e8, 1e8));
        assert_eq!(
            (ab.rtt_us, ba.rtt_us),
            (140.0, 140.0),
            "round trips: the worse"
        );
        // The pair's figures (RankNodes, GetPath) stay the worse of both directions.
        let pair = t.view().pair(ids[0], ids[1], now);
        assert_eq!(pair.tput_bps, Some(1e8));
        // A parameter server on a1 pushes to and pulls from a2: the pull runs at a1 → a2's
        // rate, the push at a2 → a1's; both directions count.
        net.forget_usage();
        let job = Job {
            collective: Collective::ParameterServer { servers: 1 },
            bytes_per_iteration: 1_000_000,
        };
        predict(&job, &[0, 1], &net);
        assert_eq!(
            net.usage(),
            Usage {
                figures: 3,
                estimated: 0
            }
        );
    }

    #[test]
    fn a_parameter_server_shares_its_own_link_among_the_workers_pushing_to_it() {
        let now = UnixMs(1_000_000);
        // One zone of four nodes, every throughput test at 1 Gbit/s: the model caps each node's
        // own link at 1 Gbit/s, so three workers pushing to one server share it.
        let t = mesh_with_throughput(1, 4, |_, _| 100.0, |_, _| 0, |_, _| 1e9, now);
        let ids: Vec<NodeId> = (0..4)
            .map(|n| t.id(&name(&format!("z0-n{n}"))).unwrap())
            .collect();
        let net = SnapshotNetwork::new(t.view(), ids, now);
        assert_eq!(net.egress_bps(0), 1e9);
        assert_eq!(net.ingress_bps(3), 1e9);
        let job = Job {
            collective: Collective::ParameterServer { servers: 1 },
            bytes_per_iteration: 30_000_000,
        };
        let p = predict(&job, &[0, 1, 2, 3], &net);
        // Push: 3 × 30 MB through the server's 1 Gbit/s; pull: the same out of it.
        let serial = 2.0 * 3.0 * 30e6 * 8.0 / 1e9;
        assert!(
            p.seconds >= serial && p.seconds < serial * 1.05,
            "{p} (serialisation alone {serial} s)"
        );
        assert!(
            matches!(p.bottleneck, Bottleneck::Node { .. }),
            "the server's own link, not a link: {p}"
        );
    }

    #[test]
    fn a_capacity_between_zones_bounds_each_link_but_is_not_divided_among_flows() {
        let now = UnixMs(1_000_000);
        // Inside a zone 1 Gbit/s; between the zones 400 Mbit/s that the nodes do not explain.
        let t = mesh_with_throughput(
            2,
            2,
            |_, _| 100.0,
            |_, _| 0,
            |s, d| if s[..2] == d[..2] { 1e9 } else { 400e6 },
            now,
        );
        let ids: Vec<NodeId> = ["z0-n0", "z0-n1", "z1-n0", "z1-n1"]
            .map(|n| t.id(&name(n)).unwrap())
            .to_vec();
        let net = SnapshotNetwork::new(t.view(), ids, now);
        assert_eq!(net.zone_capacity_bps(net.zone(0), net.zone(2)), None);
        let job = Job {
            collective: Collective::RingAllReduce,
            bytes_per_iteration: 64_000_000,
        };
        // Grouped by zone the ring crosses once each way, alternating twice each way at once:
        // each crossing link runs at its own 400 Mbit/s either way.
        let grouped = predict(&job, &[0, 1, 2, 3], &net);
        let alternating = predict(&job, &[0, 2, 1, 3], &net);
        let serial = 6.0 * 16e6 * 8.0 / 400e6;
        assert!(
            grouped.seconds >= serial && grouped.seconds < serial * 1.05,
            "{grouped}"
        );
        assert!(
            alternating.seconds < grouped.seconds * 1.05,
            "grouped {grouped}, alternating {alternating}"
        );
    }

    #[test]
    fn two_ranks_on_one_node_cost_nothing() {
        let now = UnixMs(1_000_000);
        let t = mesh(1, 2, |_, _| 100.0, |_, _| 0, now);
        let a = t.id(&name("z0-n0")).unwrap();
        let net = SnapshotNetwork::new(t.view(), vec![a, a], now);
        let job = Job {
            collective: Collective::RingAllReduce,
            bytes_per_iteration: 1_000_000,
        };
        assert_eq!(predict(&job, &[0, 1], &net).seconds, 0.0);
        assert_eq!(net.usage().figures, 0);
    }
}
