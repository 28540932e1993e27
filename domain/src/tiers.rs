//! The measured tiers: zones (tier 1), groups of near zones (tier 2) and the whole cluster (the
//! top tier), with the figures behind every cut. The engine derives them (`zonemesh_engine::tiers`);
//! the publisher writes them where batch schedulers read topology.

use crate::{FieldError, NodeName, UnixMs, ZoneName};

/// When two zones belong in one group. Two thresholds per figure make the hysteresis: zones join
/// a group only within the `join_*` thresholds, and leave it only beyond the `leave_*` ones, so
/// that a figure jittering between the two never moves a zone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TierThresholds {
    /// Zones join a group when every RTT between them is at most this, µs. Default 3 ms.
    pub join_rtt_us: f64,
    /// A zone leaves its group when an RTT to another member passes this, µs. Default 4 ms.
    pub leave_rtt_us: f64,
    /// Zones join a group when every measured throughput between them is at least this, bit/s
    /// (0: throughput is not a criterion). Default 100 Mbit/s.
    pub join_throughput_bps: f64,
    /// A zone leaves its group when a measured throughput to another member falls below this,
    /// bit/s. Default 80 Mbit/s.
    pub leave_throughput_bps: f64,
}

impl Default for TierThresholds {
    fn default() -> Self {
        Self {
            join_rtt_us: 3_000.0,
            leave_rtt_us: 4_000.0,
            join_throughput_bps: 100e6,
            leave_throughput_bps: 80e6,
        }
    }
}

impl TierThresholds {
    /// Checks the thresholds: finite, not negative, and the leave thresholds no stricter than the
    /// join ones (`leave_rtt_us >= join_rtt_us`, `leave_throughput_bps <= join_throughput_bps`).
    pub fn checked(self) -> Result<Self, FieldError> {
        for (field, v) in [
            ("join_rtt_us", self.join_rtt_us),
            ("leave_rtt_us", self.leave_rtt_us),
            ("join_throughput_bps", self.join_throughput_bps),
            ("leave_throughput_bps", self.leave_throughput_bps),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(FieldError::new(field, format!("{v} is not a figure >= 0")));
            }
        }
        if self.leave_rtt_us < self.join_rtt_us {
            return Err(FieldError::new(
                "leave_rtt_us",
                format!(
                    "{} µs is below join_rtt_us {} µs: a zone would leave a group it just joined",
                    self.leave_rtt_us, self.join_rtt_us
                ),
            ));
        }
        if self.leave_throughput_bps > self.join_throughput_bps {
            return Err(FieldError::new(
                "leave_throughput_bps",
                format!(
                    "{} bit/s is above join_throughput_bps {} bit/s: a zone would leave a group it just joined",
                    self.leave_throughput_bps, self.join_throughput_bps
                ),
            ));
        }
        Ok(self)
    }
}

/// One figure and the zone pair it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct PairFigure {
    /// One zone of the pair (the smaller name).
    pub a: ZoneName,
    /// The other zone.
    pub b: ZoneName,
    /// RTT µs, or throughput bit/s.
    pub value: f64,
}

/// The figures behind a cut: the worst RTT and the lowest throughput among a set of zone pairs
/// (complete linkage), and how many pairs had no fresh figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CutFigures {
    /// Highest RTT among the pairs, with the pair.
    pub worst_rtt: Option<PairFigure>,
    /// Lowest measured throughput among the pairs, with the pair.
    pub lowest_throughput: Option<PairFigure>,
    /// Pairs of fresh zones without an RTT figure.
    pub unmeasured_pairs: u32,
    /// Pairs with a stale zone (their figures decide nothing).
    pub stale_pairs: u32,
}

/// Why two groups are apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cut {
    /// An RTT between them is above the join threshold.
    Rtt,
    /// A throughput between them is below the join threshold.
    Throughput,
    /// A pair of their zones has no RTT figure.
    Unmeasured,
    /// Every pair between them has a stale zone, or both hold stale zones (a stale zone keeps
    /// its group).
    Stale,
}

impl Cut {
    /// The short name users see.
    pub fn as_str(self) -> &'static str {
        match self {
            Cut::Rtt => "rtt",
            Cut::Throughput => "throughput",
            Cut::Unmeasured => "unmeasured",
            Cut::Stale => "stale",
        }
    }
}

/// Tier 1: a zone and its nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct TierZone {
    /// The zone (nodes without a zone are in zone `unknown`).
    pub name: ZoneName,
    /// Its tier-2 group.
    pub group: ZoneName,
    /// Its region, when its nodes said.
    pub region: Option<ZoneName>,
    /// Its nodes, by name.
    pub nodes: Vec<NodeName>,
    /// Whether any of its nodes has fresh figures; a stale zone keeps its group.
    pub fresh: bool,
    /// Mean RTT between its nodes, µs, when measured.
    pub rtt_us: Option<f64>,
    /// Mean throughput between its nodes, bit/s, when measured.
    pub throughput_bps: Option<f64>,
}

/// The figures between two zones (both directions combined: the worse RTT, the lower
/// throughput), as the derivation saw them.
#[derive(Debug, Clone, PartialEq)]
pub struct ZonePair {
    /// One zone (the smaller name).
    pub a: ZoneName,
    /// The other zone.
    pub b: ZoneName,
    /// RTT, µs.
    pub rtt_us: Option<f64>,
    /// Throughput, bit/s.
    pub throughput_bps: Option<f64>,
    /// Both zones fresh (else the figures decided nothing).
    pub fresh: bool,
}

/// The nearest other group of a group and why the two are apart.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupLink {
    /// The other group.
    pub group: ZoneName,
    /// The figures between the two groups (every pair of their zones).
    pub figures: CutFigures,
    /// Why they are apart.
    pub cut: Cut,
}

/// Tier 2: a group of near zones.
#[derive(Debug, Clone, PartialEq)]
pub struct TierGroup {
    /// Stable name (`group-<n>`), a Kubernetes label value.
    pub name: ZoneName,
    /// Its zones, by name.
    pub zones: Vec<ZoneName>,
    /// The figures among its zones.
    pub inside: CutFigures,
    /// Whether a figure among its zones is past a join threshold but within the leave one: the
    /// group holds by hysteresis.
    pub held: bool,
    /// The group it came closest to joining (smallest worst RTT), if there is another.
    pub nearest: Option<GroupLink>,
}

/// The `GetTiers` answer: every zone in exactly one group, every node in exactly one zone; the
/// top tier is every node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tiers {
    /// When they were derived.
    pub computed_at: UnixMs,
    /// The thresholds they were derived with.
    pub thresholds: TierThresholds,
    /// Tier 1, by name.
    pub zones: Vec<TierZone>,
    /// Tier 2, by name.
    pub groups: Vec<TierGroup>,
    /// The figures among all zones (the top tier).
    pub cluster: CutFigures,
    /// Every zone pair with a figure, by names.
    pub pairs: Vec<ZonePair>,
}

impl Tiers {
    /// The zone a node is in.
    pub fn zone_of(&self, node: &NodeName) -> Option<&TierZone> {
        self.zones.iter().find(|z| z.nodes.contains(node))
    }

    /// A group by name.
    pub fn group(&self, name: &ZoneName) -> Option<&TierGroup> {
        self.groups.iter().find(|g| &g.name == name)
    }

    /// Every node, by zone.
    pub fn nodes(&self) -> impl Iterator<Item = (&TierZone, &NodeName)> {
        self.zones
            .iter()
            .flat_map(|z| z.nodes.iter().map(move |n| (z, n)))
    }

    /// Checks what the types cannot: every zone and node once, every zone's group a group that
    /// lists it, every group's zones zones that name it.
    pub fn check(&self) -> Result<(), FieldError> {
        let mut seen_nodes = std::collections::HashSet::new();
        let mut seen_zones = std::collections::HashSet::new();
        for (i, z) in self.zones.iter().enumerate() {
            if !seen_zones.insert(&z.name) {
                return Err(FieldError::new(
                    format!("zones[{i}].name"),
                    format!("zone {} is listed twice", z.name),
                ));
            }
            for (j, n) in z.nodes.iter().enumerate() {
                if !seen_nodes.insert(n) {
                    return Err(FieldError::new(
                        format!("zones[{i}].nodes[{j}]"),
                        format!("node {n} is in two zones"),
                    ));
                }
            }
            match self.group(&z.group) {
                Some(g) if g.zones.contains(&z.name) => {}
                _ => {
                    return Err(FieldError::new(
                        format!("zones[{i}].group"),
                        format!(
                            "zone {} names group {}, which does not list it",
                            z.name, z.group
                        ),
                    ));
                }
            }
        }
        let mut seen_groups = std::collections::HashSet::new();
        for (i, g) in self.groups.iter().enumerate() {
            if !seen_groups.insert(&g.name) {
                return Err(FieldError::new(
                    format!("groups[{i}].name"),
                    format!("group {} is listed twice", g.name),
                ));
            }
            if g.zones.is_empty() {
                return Err(FieldError::new(
                    format!("groups[{i}].zones"),
                    format!("group {} has no zone", g.name),
                ));
            }
            for (j, z) in g.zones.iter().enumerate() {
                if !self.zones.iter().any(|t| &t.name == z && t.group == g.name) {
                    return Err(FieldError::new(
                        format!("groups[{i}].zones[{j}]"),
                        format!("zone {z} of group {} is not a zone of that group", g.name),
                    ));
                }
            }
        }
        Ok(())
    }
}
