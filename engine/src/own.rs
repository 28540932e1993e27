//! A node's own figures: the running sums of its paths inside its zone, leaving out the paths to
//! the zone-mates with a fault of their own in the [model](crate::model)
//! ([`Model::has_own_fault`](crate::model::Model::has_own_fault)).
//!
//! A path's loss, delay and rate come from both of its ends, so a lossy node's fault shows on the
//! paths of every one of its zone-mates. Counted against them, it made innocent nodes look bad and
//! rank below clean zones (`zonemesh demo` listed a1 at a2's 2 % loss and b1 at the mean of its
//! clean paths and its paths to the slow b3). A path to a faulty neighbour counts against the
//! neighbour: a node's own figures leave it out and name the neighbour, as the zone links leave a
//! faulty node's fault out of a zone's figures. A faulty node's own row keeps its paths to clean
//! nodes, which all show its fault. When every path of a node goes to faulty neighbours, nothing is
//! left out: a figure of no path would say less than the measured one.
//!
//! What a node's paths to and from its faulty zone-mates add is kept as running sums of its own,
//! beside the node's (each path remembers what it added, so the writer adds and takes it out as
//! it changes, and counts them again when a new model changes who is faulty). A node's own
//! figures are one subtraction, so ranking every node reads no path: only the nodes an answer
//! names are looked up for the mates they leave out. (Subtracting each faulty mate's two paths
//! per node, on every `RankNodes`, was 15 % of the aggregator's CPU at 5,000 nodes, most of it
//! waiting for memory: docs/BENCHMARKS.md.)

use crate::{NodeId, Snapshot, Sums, ZoneId};

/// The zone-mates with a fault of their own, by zone id (up to the highest zone that has one:
/// ranking looks a zone up once per node, without hashing).
#[derive(Debug, Clone, Default)]
pub struct Faulty {
    by_zone: Vec<Vec<NodeId>>,
}

impl Faulty {
    /// The nodes of `zone` with a fault of their own, by id.
    pub fn in_zone(&self, zone: ZoneId) -> &[NodeId] {
        self.by_zone.get(zone.0 as usize).map_or(&[], Vec::as_slice)
    }

    /// Whether node `id` of `zone` has a fault of its own.
    pub fn contains(&self, zone: ZoneId, id: NodeId) -> bool {
        self.in_zone(zone).contains(&id)
    }
}

/// A node's own figures in its zone (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OwnSums {
    /// The running sums of its paths inside its zone, without those to `left_out`.
    pub sums: Sums,
    /// The zone-mates whose paths (both directions) the sums leave out, by id.
    pub left_out: Vec<NodeId>,
}

impl Snapshot {
    /// The nodes with a fault of their own in the model, by zone.
    pub fn faulty(&self) -> Faulty {
        let mut by_zone: Vec<Vec<NodeId>> = Vec::new();
        let known = self.nodes.len();
        for (i, t) in self.model().nodes().iter().enumerate().take(known) {
            if t.own_fault {
                let id = NodeId(i as u32);
                let zone = self.zone_of(id).0 as usize;
                if by_zone.len() <= zone {
                    by_zone.resize_with(zone + 1, Vec::new);
                }
                by_zone[zone].push(id);
            }
        }
        Faulty { by_zone }
    }

    /// Node `id`'s own figures in its zone: its running sums without what its paths to and from
    /// its faulty zone-mates add (kept as running sums of their own), or all of them when that
    /// would leave no loss and no rate measured (see the module docs). Reads no path.
    pub fn own_figures(&self, id: NodeId) -> Sums {
        let all = *self.node_sums(id);
        let left = self.left_sums(id);
        if left.rtt_n == 0 && left.loss_n == 0 && left.tput_n == 0 {
            return all;
        }
        let own = all.without(left);
        if own.loss_n == 0 && own.tput_n == 0 {
            return all;
        }
        own
    }

    /// The zone-mates `faulty` (this snapshot's [`faulty`](Self::faulty)) names whose paths node
    /// `id`'s [own figures](Self::own_figures) leave out: those with a path to or from it, even
    /// one that carries no figure now (a stale one), and none when taking them all out would
    /// leave no loss and no rate. Reads two paths per faulty zone-mate: for the nodes an answer
    /// names, not for every node it weighs.
    pub fn left_out(&self, id: NodeId, faulty: &Faulty) -> Vec<NodeId> {
        let (all, left) = (self.node_sums(id), self.left_sums(id));
        if all.loss_n.saturating_sub(left.loss_n) == 0
            && all.tput_n.saturating_sub(left.tput_n) == 0
        {
            return Vec::new();
        }
        faulty
            .in_zone(self.zone_of(id))
            .iter()
            .copied()
            .filter(|&f| {
                f != id
                    && (self.contribution(id, f).is_some() || self.contribution(f, id).is_some())
            })
            .collect()
    }

    /// Node `id`'s own figures and the faulty zone-mates they leave out. `faulty` must be this
    /// snapshot's [`faulty`](Self::faulty) (the figures follow the model's faulty nodes, kept by
    /// the writer; it is taken once for the many nodes of an answer).
    pub fn own_sums(&self, id: NodeId, faulty: &Faulty) -> OwnSums {
        OwnSums {
            sums: self.own_figures(id),
            left_out: self.left_out(id, faulty),
        }
    }

    /// Counts every node's left-out sums again from its paths, for a model just installed: which
    /// nodes are faulty may have changed. A few lookups per faulty node and zone-mate.
    pub(crate) fn recount_left_sums(&mut self) {
        let mut left = vec![Sums::default(); self.nodes.len()];
        let faulty = self.faulty();
        for (zone, mates) in self.zones() {
            for &f in faulty.in_zone(zone) {
                for &m in mates.members.iter().filter(|m| **m != f) {
                    for c in [self.contribution(m, f), self.contribution(f, m)]
                        .into_iter()
                        .flatten()
                    {
                        left[m.0 as usize].add(c, 1.0);
                    }
                }
            }
        }
        self.left_sums = left.into_iter().collect();
    }
}

#[cfg(test)]
mod tests {
    use zonemesh_domain::UnixMs;

    use crate::testing::*;

    #[test]
    fn a_nodes_own_sums_leave_its_faulty_neighbours_out() {
        let now = UnixMs(1_000_000);
        let t = demo_shape(now);
        let view = t.view();
        let faulty = view.faulty();
        let id = |n: &str| t.id(&name(n)).unwrap();
        let names = |ids: &[crate::NodeId]| -> Vec<String> {
            ids.iter().map(|i| t.node(*i).name.to_string()).collect()
        };
        // The clean nodes: their paths to each other only, clean, naming the faulty mate.
        for (n, mate, bad) in [
            ("z0-n0", "z0-n2", "z0-n1"),
            ("z0-n2", "z0-n0", "z0-n1"),
            ("z1-n0", "z1-n1", "z1-n2"),
            ("z1-n1", "z1-n0", "z1-n2"),
        ] {
            let own = view.own_sums(id(n), &faulty);
            assert_eq!(names(&own.left_out), [bad], "{n}");
            assert_eq!(own.sums.loss_n, 2, "{n}: to and from {mate}");
            assert!(own.sums.loss_mean().unwrap() < 1e-9, "{n}: {:?}", own.sums);
            assert!(
                (own.sums.rtt_mean().unwrap() - 50.0).abs() < 1e-6,
                "{n}: {:?}",
                own.sums
            );
            assert!(
                (own.sums.tput_mean().unwrap() - 1e9).abs() < 1.0,
                "{n}: {:?}",
                own.sums
            );
            // Everything measured, the faulty mate's paths too, is what the sums had.
            let all = view.node_sums(id(n));
            assert_eq!(all.loss_n, 4, "{n}");
        }
        // The faulty nodes keep their fault: every one of their paths shows it.
        let lossy = view.own_sums(id("z0-n1"), &faulty);
        assert!(lossy.left_out.is_empty());
        assert_eq!(lossy.sums.loss_n, 4);
        assert!((lossy.sums.loss_mean().unwrap() - 0.05).abs() < 1e-6);
        assert!((lossy.sums.rtt_mean().unwrap() - 350.0).abs() < 1e-6);
        let slow = view.own_sums(id("z1-n2"), &faulty);
        assert!(slow.left_out.is_empty());
        assert!((slow.sums.tput_mean().unwrap() - 100e6).abs() < 1.0);
    }

    #[test]
    fn a_node_whose_every_path_goes_to_faulty_neighbours_keeps_them() {
        use crate::{EngineConfig, Topology};
        use zonemesh_domain::Report;
        let now = UnixMs(1_000_000);
        // Ten nodes in one zone; z0-n1 and z0-n2 lose 5 % each (a path between them 10 %).
        // z0-n1 to z0-n9 measure each other (most of their paths clean, so the zone's own terms
        // are); z0-n0 measures only z0-n1 and z0-n2: every path of its own goes to a faulty
        // neighbour.
        let mut t = Topology::new(EngineConfig::default());
        let nodes = [
            "z0-n0", "z0-n1", "z0-n2", "z0-n3", "z0-n4", "z0-n5", "z0-n6", "z0-n7", "z0-n8",
            "z0-n9",
        ];
        for n in nodes {
            t.register(&hello(n, "zone-0"), now);
        }
        let bad = |n: &str| n == "z0-n1" || n == "z0-n2";
        for src in nodes {
            let dsts: &[&str] = if src == "z0-n0" {
                &["z0-n1", "z0-n2"]
            } else {
                &nodes[1..]
            };
            let paths = dsts
                .iter()
                .filter(|d| **d != src)
                .map(|d| {
                    sample(
                        src,
                        d,
                        50.0,
                        5 * u64::from(bad(src)) + 5 * u64::from(bad(d)),
                        None,
                    )
                })
                .collect();
            let id = t.id(&name(src)).unwrap();
            t.apply_report(id, &Report { sequence: 1, paths }, now)
                .unwrap();
        }
        t.sweep(now);
        let view = t.view();
        let id = |n: &str| t.id(&name(n)).unwrap();
        let (n0, n1, n2) = (id("z0-n0"), id("z0-n1"), id("z0-n2"));
        let faulty = view.faulty();
        assert_eq!(faulty.in_zone(view.zone_of(n0)), [n1, n2]);
        // z0-n0 would have no path of its own left: it keeps them all.
        let own = view.own_sums(n0, &faulty);
        assert!(own.left_out.is_empty());
        assert_eq!(own.sums.loss_n, 2);
        assert_eq!(&own.sums, view.node_sums(n0));
        // z0-n1 leaves out its two paths with z0-n2 and keeps its 15 with the others.
        let own = view.own_sums(n1, &faulty);
        assert_eq!(own.left_out, [n2]);
        assert_eq!((view.node_sums(n1).loss_n, own.sums.loss_n), (17, 15));
    }
}
