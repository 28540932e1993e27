//! A job's communication time as the experiments predict it: the engine's
//! [`zonemesh_engine::collective::predict`] (its α–β formula, the one `Place` minimises), asked
//! over a [`Named`] network of the lab's nodes. The experiments ask it over two networks: the
//! truth the lab injected (the oracle, [`crate::scenarios`]) and the figures zonemesh measured
//! (the predicted time of any placement, [`crate::mpi_evaluation`]). (The engine's `model` is
//! something else: its estimate of the paths it did not measure.)

use serde::{Deserialize, Serialize};
use zonemesh_engine::collective::{self, Job};

pub use zonemesh_engine::collective::{Bottleneck, Link, Network, Prediction};

/// What the predictions come from, as the reports and results files name it.
pub const PREDICTOR: &str = "the engine's α–β model (`zonemesh_engine::collective::predict`)";

/// Two ranks on one node talk over the node's loopback (Open MPI's TCP transport, as the lab runs
/// it), which no rate limit or loss of the lab touches: a flow on it uses no NIC (the network's
/// `same_host`), only its own delay and rate.
pub const LOOPBACK: Link = Link::wire(20.0, 0.0, 20e9);

/// How the job's ranks communicate (the collectives the lab runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Collective {
    /// Ring all-reduce: rank r sends to rank r + 1.
    RingAllReduce,
    /// One parameter server on rank 0's node; every other rank sends it the whole gradient and
    /// receives the sum.
    ParameterServer,
    /// All-to-all as a pairwise exchange: every rank sends `bytes / (p − 1)` to every other.
    AllToAll,
}

impl Default for Collective {
    /// What results files from before the collective was recorded ran.
    fn default() -> Self {
        Self::RingAllReduce
    }
}

impl Collective {
    /// The engine's collective.
    pub fn engine(self) -> collective::Collective {
        match self {
            Self::RingAllReduce => collective::Collective::RingAllReduce,
            Self::ParameterServer => collective::Collective::ParameterServer { servers: 1 },
            Self::AllToAll => collective::Collective::AllToAll,
        }
    }
}

/// The predicted time of one iteration of `collective` over `bytes`, ranks on the nodes `ranks`
/// of `net` in rank order.
pub fn predict(
    collective: Collective,
    bytes: u64,
    ranks: &[usize],
    net: &dyn Network,
) -> Prediction {
    collective::predict(
        &Job {
            collective: collective.engine(),
            bytes_per_iteration: bytes,
        },
        ranks,
        net,
    )
}

/// A network of named nodes given by functions: the link between two distinct nodes, each node's
/// zone and its own rates, and the capacity between two zones; a node to itself is [`LOOPBACK`].
pub struct Named<'a> {
    /// The nodes; a network index is a position here.
    pub nodes: &'a [String],
    /// The zone of a node.
    pub zone: &'a dyn Fn(&str) -> String,
    /// The link from the first node to the second (never called for a node to itself).
    pub link: &'a dyn Fn(&str, &str) -> Link,
    /// What a node's own link carries out of it, bit/s (`f64::INFINITY` when unknown).
    pub egress_bps: &'a dyn Fn(&str) -> f64,
    /// What a node's own link carries into it, bit/s (`f64::INFINITY` when unknown).
    pub ingress_bps: &'a dyn Fn(&str) -> f64,
    /// The capacity every flow from the first zone to the second shares, bit/s (`None`: no
    /// limit, or not known).
    pub zone_bps: &'a dyn Fn(&str, &str) -> Option<f64>,
}

/// A [`Named::zone_bps`] for networks whose zones share no capacity.
pub fn no_zone_limit(_: &str, _: &str) -> Option<f64> {
    None
}

/// A rate function for nodes without a limit of their own.
pub fn unlimited(_: &str) -> f64 {
    f64::INFINITY
}

impl std::fmt::Debug for Named<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Named").field("nodes", &self.nodes).finish()
    }
}

impl Named<'_> {
    /// The network index of `node`; panics on a node not in the network (the caller's mistake).
    pub fn index(&self, node: &str) -> usize {
        self.nodes
            .iter()
            .position(|n| n == node)
            .unwrap_or_else(|| panic!("{node} is not in the network"))
    }

    /// [`predict`] over `ranks` given by name.
    pub fn predict(&self, collective: Collective, bytes: u64, ranks: &[String]) -> Prediction {
        let index: Vec<usize> = ranks.iter().map(|r| self.index(r)).collect();
        predict(collective, bytes, &index, self)
    }
}

impl Network for Named<'_> {
    fn link(&self, a: usize, b: usize) -> Link {
        if a == b {
            LOOPBACK
        } else {
            (self.link)(&self.nodes[a], &self.nodes[b])
        }
    }

    fn zone(&self, a: usize) -> usize {
        let z = (self.zone)(&self.nodes[a]);
        // Equal zones give equal numbers: the index of the first node of that zone.
        self.nodes
            .iter()
            .position(|n| (self.zone)(n) == z)
            .unwrap_or(a)
    }

    fn egress_bps(&self, a: usize) -> f64 {
        (self.egress_bps)(&self.nodes[a])
    }

    fn ingress_bps(&self, a: usize) -> f64 {
        (self.ingress_bps)(&self.nodes[a])
    }

    fn zone_capacity_bps(&self, a: usize, b: usize) -> Option<f64> {
        (self.zone_bps)(&(self.zone)(&self.nodes[a]), &(self.zone)(&self.nodes[b]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_node_and_a_far_zone_cost_what_the_engine_says() {
        let nodes: Vec<String> = ["a1", "a2", "b1", "b2"].map(String::from).to_vec();
        let zone = |n: &str| n[..1].to_owned();
        let link =
            |a: &str, b: &str| Link::wire(if a[..1] == b[..1] { 50.0 } else { 10_000.0 }, 0.0, 1e9);
        let slow = |n: &str| if n == "a2" { 1e8 } else { 1e9 };
        let fast = |_: &str| 1e9;
        let fast_net = Named {
            nodes: &nodes,
            zone: &zone,
            link: &link,
            egress_bps: &fast,
            ingress_bps: &fast,
            zone_bps: &no_zone_limit,
        };
        let slow_net = Named {
            egress_bps: &slow,
            ingress_bps: &slow,
            ..fast_net
        };
        let ring = |n: &Named, ranks: &[&str], bytes| {
            let ranks: Vec<String> = ranks.iter().map(|s| (*s).to_owned()).collect();
            n.predict(Collective::RingAllReduce, bytes, &ranks).seconds
        };
        // 16 MiB over four ranks at 1 Gbit/s: 6 steps of 4 MiB.
        let t = ring(&fast_net, &["a1", "a2", "b1", "b2"], 16 << 20);
        assert!((t - 6.0 * (4 << 20) as f64 * 8.0 / 1e9).abs() < 0.02, "{t}");
        // The slow node's own link is ten times slower.
        let s = ring(&slow_net, &["a1", "a2", "b1", "b2"], 16 << 20);
        assert!(s > 9.0 * t, "{s} against {t}");
        // Small: crossing the zones twice beats crossing at every step.
        let good = ring(&fast_net, &["a1", "a2", "b1", "b2"], 256 << 10);
        let bad = ring(&fast_net, &["a1", "b1", "a2", "b2"], 256 << 10);
        assert!(bad > 1.5 * good, "{bad} against {good}");
        // Two ranks on one node talk over the loopback, which takes nothing of the node's own
        // link: a1 a1 b1 b1 costs about what a1 a2 b1 b2 does (one flow leaves a node, one
        // arrives), not twice that (as when the loopback flow shared a1's 1 Gbit/s).
        assert_eq!(fast_net.link(0, 0), LOOPBACK);
        let shared = ring(&fast_net, &["a1", "a1", "b1", "b1"], 16 << 20);
        assert!(
            shared > 0.85 * t && shared < 1.05 * t,
            "{shared} against {t}"
        );
        assert_eq!(fast_net.zone(1), fast_net.zone(0));
        assert_ne!(fast_net.zone(2), fast_net.zone(0));
    }
}
