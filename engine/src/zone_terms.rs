//! The zone-pair terms the tiers are derived from, and the inputs of [`crate::tiers::derive`]
//! taken from a [`Topology`].
//!
//! The terms come from the [model](crate::model) of the measured network: a zone pair's base
//! RTT, loss and capacity fitted apart from what belongs to single nodes, so that one slow or
//! lossy node never moves its zone.

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
    /// The terms of the zone pair `a`–`b` (`a == b`: inside one zone; the model's zone-pair
    /// terms are symmetric), or `None` when nothing between them is measured. Throughput is the
    /// zone pair's capacity where a test shows one, else its typical tested rate.
    pub fn zone_pair_terms(&self, a: ZoneId, b: ZoneId, now: UnixMs) -> Option<ZonePairTerms> {
        let _ = now; // the model is refitted by the writer; its terms carry their oldest sample
        let z = self.model().zone_pair(a, b)?;
        let terms = ZonePairTerms {
            rtt_us: z.rtt_us,
            loss: (z.measured_paths > 0).then_some(z.loss),
            throughput_bps: z.capacity_bps.or(z.typical_bps),
            measured_paths: z.measured_paths.max(z.throughput_paths),
            oldest: z.oldest,
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
