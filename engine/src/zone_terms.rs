//! The zone-pair terms the tiers are derived from, and the inputs of [`crate::tiers::derive`]
//! taken from a [`Topology`].
//!
//! **Seam.** [`Topology::zone_pair_terms`] is where the placement model's fault-aware zone-pair
//! terms (issue 18: a zone pair's base RTT, loss and capacity, fitted apart from what belongs to
//! single nodes, so that one bad node never moves its zone) plug in. Until that model lands it is
//! built from the public roll-up ([`Topology::roll_up`]): the mean over the measured paths
//! between the two zones, in which one slow or lossy node still weighs. Only its body changes
//! when the model lands; the tiers and everything downstream stay as they are.

use zonemesh_domain::{NodeState, TierThresholds, Tiers, UnixMs};

use crate::tiers::{LinkFigures, TierState, ZoneInput, derive};
use crate::{Snapshot, ZoneId};

/// What belongs to a zone pair, apart from its nodes' own faults.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ZonePairTerms {
    /// Base RTT between the zones, µs.
    pub rtt_us: Option<f64>,
    /// Loss ratio between the zones.
    pub loss: Option<f64>,
    /// Capacity between the zones, bit/s.
    pub throughput_bps: Option<f64>,
    /// Measured paths behind the terms.
    pub measured_paths: u32,
    /// Oldest sample behind the terms.
    pub oldest: Option<UnixMs>,
}

impl Snapshot {
    /// The terms of the zone pair `a` → `b` (`a == b`: inside one zone), or `None` when nothing
    /// between them is measured.
    ///
    /// This is the seam the placement model replaces (see the module documentation): today the
    /// roll-up mean of the fresh measured paths between the zones, both directions.
    pub fn zone_pair_terms(&self, a: ZoneId, b: ZoneId, now: UnixMs) -> Option<ZonePairTerms> {
        let _ = now; // the roll-up is kept current by the sweep; the model will use `now`
        let sums = self.roll_up(a, b)?;
        let terms = ZonePairTerms {
            rtt_us: sums.rtt_mean(),
            loss: sums.loss_mean(),
            throughput_bps: sums.tput_mean(),
            measured_paths: sums.loss_n.max(sums.tput_n),
            oldest: sums.oldest,
        };
        (terms.rtt_us.is_some() || terms.throughput_bps.is_some()).then_some(terms)
    }

    /// The inputs of [`derive`]: every zone with registered nodes (fresh when one of them is
    /// READY), and the zone ids in the same order.
    pub fn tier_inputs(&self, now: UnixMs) -> (Vec<ZoneInput>, Vec<ZoneId>) {
        let mut inputs = Vec::new();
        let mut ids = Vec::new();
        for (id, zone) in self.zones() {
            let members: Vec<_> = zone
                .members
                .iter()
                .filter(|m| self.node(**m).registered)
                .collect();
            if members.is_empty() {
                continue;
            }
            inputs.push(ZoneInput {
                name: zone.name.clone(),
                region: zone.region.clone(),
                nodes: members
                    .iter()
                    .map(|m| self.node(**m).name.clone())
                    .collect(),
                fresh: members
                    .iter()
                    .any(|m| self.state(**m, now).0 == NodeState::Ready),
            });
            ids.push(id);
        }
        (inputs, ids)
    }

    /// The tiers of this topology at `now` (see [`crate::tiers`]), from its zone-pair terms.
    pub fn tiers(
        &self,
        thresholds: &TierThresholds,
        previous: &TierState,
        now: UnixMs,
    ) -> (Tiers, TierState) {
        let (inputs, ids) = self.tier_inputs(now);
        let figures = |i: usize, j: usize| {
            self.zone_pair_terms(ids[i], ids[j], now)
                .map_or(LinkFigures::default(), |t| LinkFigures {
                    rtt_us: t.rtt_us,
                    throughput_bps: t.throughput_bps,
                })
        };
        derive(&inputs, &figures, thresholds, previous, now)
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::*;
    use zonemesh_domain::*;

    #[test]
    fn the_tiers_of_a_topology_group_its_near_zones() {
        let now = UnixMs(1_000_000);
        // Zones 0 and 1 are 1.5 ms apart, zone 2 is 8 ms from both; 100 µs inside a zone.
        let t = mesh(
            3,
            2,
            |s, d| {
                let zone = |n: &str| n.as_bytes()[1];
                match (zone(s), zone(d)) {
                    (a, b) if a == b => 100.0,
                    (b'0', b'1') | (b'1', b'0') => 1_500.0,
                    _ => 8_000.0,
                }
            },
            |_, _| 0,
            now,
        );
        let (tiers, state) = t
            .view()
            .tiers(&TierThresholds::default(), &Default::default(), now);
        tiers.check().unwrap();
        assert_eq!(tiers.zones.len(), 3);
        assert!(tiers.zones.iter().all(|z| z.fresh && z.nodes.len() == 2));
        assert_eq!(tiers.zones[0].group, tiers.zones[1].group);
        assert_ne!(tiers.zones[0].group, tiers.zones[2].group);
        assert_eq!(tiers.zones[0].rtt_us, Some(100.0));
        assert_eq!(state.groups.len(), 3);
        let a = t.view().zone_id(&tiers.zones[0].name).unwrap();
        let c = t.view().zone_id(&tiers.zones[2].name).unwrap();
        assert_eq!(
            t.view().zone_pair_terms(a, c, now).unwrap().rtt_us,
            Some(8_000.0)
        );
    }
}
