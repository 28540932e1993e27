//! The synthetic cluster the fleet reports about: zones placed on a plane (RTT between zones grows
//! with their distance), nodes with their own delay and NIC rate, a few bad nodes (lossy or slow).
//! Everything follows from the seed, so a run can be repeated and the truth compared with what
//! the aggregator answers.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSpec {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Zones; nodes are spread over them as evenly as they divide.
    pub zones: usize,
    /// Share of nodes that are bad: half of them drop packets, half have a slow NIC.
    pub bad_share: f64,
    /// Seed of everything random.
    pub seed: u64,
}

/// Kind of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Nothing wrong.
    Good,
    /// Drops [`LOSSY_LOSS`] of the packets through it and adds [`LOSSY_EXTRA_US`] of delay.
    Lossy,
    /// Its NIC runs at [`SLOW_NIC_BPS`].
    Slow,
}

/// Loss of a lossy node.
pub const LOSSY_LOSS: f64 = 0.03;
/// Extra RTT through a lossy node, µs.
pub const LOSSY_EXTRA_US: f64 = 250.0;
/// NIC rate of a good node, bit/s.
pub const NIC_BPS: f64 = 25e9;
/// NIC rate of a slow node, bit/s.
pub const SLOW_NIC_BPS: f64 = 1e9;

/// One simulated node.
#[derive(Debug, Clone, PartialEq)]
pub struct SimNode {
    /// Node name (`z07-n0042`).
    pub name: String,
    /// Index of its zone.
    pub zone: usize,
    /// Its own share of every RTT through it, µs.
    pub delay_us: f64,
    /// Good, lossy or slow.
    pub health: Health,
}

/// What a path really is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Truth {
    /// Median round trip, µs.
    pub rtt_us: f64,
    /// Loss ratio of a probe (request or reply lost).
    pub loss: f64,
    /// Bulk TCP rate, bit/s.
    pub bps: f64,
}

/// The whole synthetic cluster.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// The spec it was built from.
    pub spec: FleetSpec,
    /// Nodes, zone by zone.
    pub nodes: Vec<SimNode>,
    zone_xy: Vec<(f64, f64)>,
}

impl Fleet {
    /// Builds the cluster of `spec`.
    pub fn new(spec: FleetSpec) -> Self {
        assert!(spec.zones >= 1 && spec.nodes >= spec.zones, "{spec:?}");
        let mut rng = StdRng::seed_from_u64(spec.seed);
        let zone_xy = (0..spec.zones)
            .map(|_| (rng.random::<f64>(), rng.random::<f64>()))
            .collect();
        let nodes = (0..spec.nodes)
            .map(|i| {
                let zone = i * spec.zones / spec.nodes;
                let health = if rng.random::<f64>() < spec.bad_share {
                    if rng.random::<bool>() {
                        Health::Lossy
                    } else {
                        Health::Slow
                    }
                } else {
                    Health::Good
                };
                SimNode {
                    name: format!("z{zone:02}-n{i:04}"),
                    zone,
                    delay_us: rng.random_range(10.0..60.0),
                    health,
                }
            })
            .collect();
        Self {
            spec,
            nodes,
            zone_xy,
        }
    }

    /// Name of zone `z`.
    pub fn zone_name(z: usize) -> String {
        format!("zone-{z:02}")
    }

    /// Round trip between two zones' networks, µs: 40 µs inside a zone, else 400 µs plus 4 ms per
    /// unit of distance on the plane.
    pub fn zone_rtt_us(&self, a: usize, b: usize) -> f64 {
        if a == b {
            return 40.0;
        }
        let (xa, ya) = self.zone_xy[a];
        let (xb, yb) = self.zone_xy[b];
        400.0 + 4_000.0 * ((xa - xb).powi(2) + (ya - yb).powi(2)).sqrt()
    }

    /// The truth of the path between nodes `a` and `b` (symmetric).
    pub fn truth(&self, a: usize, b: usize) -> Truth {
        let (na, nb) = (&self.nodes[a], &self.nodes[b]);
        let mut rtt = self.zone_rtt_us(na.zone, nb.zone) + na.delay_us + nb.delay_us;
        let mut pass = 1.0;
        let mut bps = NIC_BPS;
        for n in [na, nb] {
            match n.health {
                Health::Good => {}
                Health::Lossy => {
                    rtt += LOSSY_EXTRA_US;
                    pass *= 1.0 - LOSSY_LOSS;
                }
                Health::Slow => bps = SLOW_NIC_BPS,
            }
        }
        if na.zone != nb.zone {
            bps *= 0.4;
        }
        Truth {
            rtt_us: rtt,
            loss: 1.0 - pass,
            bps: bps * 0.94,
        }
    }

    /// Index of the node called `name`, from the name's own number.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        let i: usize = name.rsplit_once("-n")?.1.parse().ok()?;
        (self.nodes.get(i)?.name == name).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_follows_its_spec() {
        let fleet = Fleet::new(FleetSpec {
            nodes: 1000,
            zones: 10,
            bad_share: 0.02,
            seed: 7,
        });
        assert_eq!(fleet.nodes.len(), 1000);
        for z in 0..10 {
            assert_eq!(fleet.nodes.iter().filter(|n| n.zone == z).count(), 100);
        }
        let bad = fleet
            .nodes
            .iter()
            .filter(|n| n.health != Health::Good)
            .count();
        assert!((5..=40).contains(&bad), "{bad} bad nodes");
        assert_eq!(fleet.index_of(&fleet.nodes[417].name), Some(417));
        assert_eq!(fleet.index_of("z00-n9999"), None);
        let (inside, across) = (fleet.truth(0, 1), fleet.truth(0, 999));
        assert!(inside.rtt_us < 200.0 + 2.0 * LOSSY_EXTRA_US, "{inside:?}");
        assert!(across.rtt_us > 400.0 && across.bps < inside.bps.max(SLOW_NIC_BPS));
        assert_eq!(fleet.truth(3, 8), fleet.truth(8, 3));
    }
}
