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
//! This costs a few subtractions per faulty zone-mate (each path remembers what it added to the
//! sums), so ranking every node still reads no path of a zone without faults.

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

    /// Node `id`'s own figures in its zone: its running sums without its paths to the zone-mates
    /// `faulty` names (see the module docs).
    pub fn own_sums(&self, id: NodeId, faulty: &Faulty) -> OwnSums {
        let all = *self.node_sums(id);
        let mut sums = all;
        let mut left_out = Vec::new();
        for &f in faulty
            .in_zone(self.zone_of(id))
            .iter()
            .filter(|f| **f != id)
        {
            let mut touched = false;
            for (src, dst) in [(id, f), (f, id)] {
                if let Some(c) = self.contribution(src, dst) {
                    sums.add(c, -1.0);
                    touched = true;
                }
            }
            if touched {
                left_out.push(f);
            }
        }
        if left_out.is_empty() || (sums.loss_n == 0 && sums.tput_n == 0) {
            return OwnSums {
                sums: all,
                left_out: Vec::new(),
            };
        }
        // What was taken out leaves rounding behind: a count at 0 is a sum at 0.
        if sums.rtt_n == 0 {
            (sums.rtt, sums.rtt_p90, sums.rtt_p99) = (0.0, 0.0, 0.0);
        }
        if sums.loss_n == 0 {
            sums.loss = 0.0;
        }
        if sums.tput_n == 0 {
            sums.tput = 0.0;
        }
        OwnSums { sums, left_out }
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
        let now = UnixMs(1_000_000);
        let lossy = |s: &str, d: &str| if s == "z0-n1" || d == "z0-n1" { 5 } else { 0 };
        let t = mesh(1, 3, |_, _| 50.0, lossy, now);
        let view = t.view();
        let id = |n: &str| t.id(&name(n)).unwrap();
        let (n0, n1, n2) = (id("z0-n0"), id("z0-n1"), id("z0-n2"));
        let faulty = view.faulty();
        assert_eq!(faulty.in_zone(view.zone_of(n0)), [n1]);
        // Were z0-n2 faulty too, z0-n0 would have no path of its own left: it keeps them all.
        let mut both = faulty.clone();
        both.by_zone[view.zone_of(n0).0 as usize] = vec![n1, n2];
        let own = view.own_sums(n0, &both);
        assert!(own.left_out.is_empty());
        assert_eq!(&own.sums, view.node_sums(n0));
    }
}
