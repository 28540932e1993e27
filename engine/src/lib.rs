//! zonemesh's engine: the zone-aware topology matrix and everything computed from it, free of
//! I/O, clocks and server dependencies, so that a scheduler can embed it.
//!
//! [`Topology`] owns the nodes, the directed paths between them, per-node summaries of the paths
//! inside each node's zone and the zone-to-zone roll-up. Every function that depends on time takes
//! `now`. Ranking ([`rank`]), placement ([`place`]), the probe plan ([`planner`]) and the
//! kube-scheduler extender's decisions ([`extender`]) read it. Domain types of `zonemesh-domain`
//! go in and come out.
//!
//! Summaries and roll-ups are running sums kept up to date as samples arrive, so queries cost
//! O(candidates) rather than O(paths); [`Topology::sweep`] recomputes them exactly, expires stale
//! paths and re-evaluates node states, and is meant to run about once a second.
//!
//! Build a topology from samples, rank nodes and place a job:
//!
//! ```
//! use zonemesh_domain::{
//!     Hello, IcmpMode, Micros, NodeName, PathSample, PlaceQuery, RankQuery, Report, Rtt, UnixMs,
//!     ZoneName,
//! };
//! use zonemesh_engine::{EngineConfig, Topology};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let now = UnixMs(1_700_000_000_000);
//! let mut topology = Topology::new(EngineConfig::default());
//! let nodes = [("a1", "zone-a"), ("a2", "zone-a"), ("a3", "zone-a"), ("b1", "zone-b")];
//! for (node, zone) in nodes {
//!     let hello = Hello {
//!         node: NodeName::parse("node", node)?,
//!         zone: ZoneName::parse("zone", zone)?,
//!         region: None,
//!         addresses: vec!["192.0.2.1".parse()?],
//!         agent_version: "example".into(),
//!         icmp_mode: IcmpMode::Raw,
//!         probe_port: 7402,
//!     };
//!     topology.register(&hello, now);
//! }
//! // Every node reports a window of 10 probes to every other: a3 is slow, zone-b is far.
//! for (seq, (src, src_zone)) in nodes.iter().enumerate() {
//!     let src = NodeName::parse("src", *src)?;
//!     let mut paths = Vec::new();
//!     for (dst, dst_zone) in nodes.iter().filter(|(d, _)| *d != src.as_str()) {
//!         let rtt = if src_zone != dst_zone { 2_000.0 }
//!             else if src == "a3" || *dst == "a3" { 400.0 } else { 50.0 };
//!         let us = Micros::parse("rtt", rtt)?;
//!         let stats = Rtt { samples: 10, min: us, p50: us, p90: us, p99: us, max: us, mean: us,
//!                           jitter: Micros::ZERO };
//!         paths.push(PathSample {
//!             src: src.clone(),
//!             dst: NodeName::parse("dst", *dst)?,
//!             window_start: UnixMs(now.0 - 10_000),
//!             window_end: now,
//!             sent: 10,
//!             received: 10,
//!             rtt: Some(stats.checked()?),
//!             histogram: None,
//!             throughput: None,
//!             method: Some(IcmpMode::Raw),
//!         });
//!     }
//!     let node = topology.id(&src).expect("registered");
//!     topology.apply_report(node, &Report { sequence: seq as u64 + 1, paths }, now)?;
//! }
//!
//! let ranking = topology.rank(&RankQuery::default(), now)?;
//! assert_eq!(ranking.nodes.last().unwrap().node, "b1", "alone in its zone: no figures");
//!
//! let placement = topology.place(&PlaceQuery { workers: 2, ..PlaceQuery::default() }, now)?;
//! let mut chosen: Vec<_> = placement.assignments.iter().map(|a| a.node.as_str()).collect();
//! chosen.sort();
//! assert_eq!(chosen, ["a1", "a2"]);
//! assert_eq!(placement.zones, ["zone-a"]);
//! assert_eq!(placement.worst_rtt_us, 50.0);
//! # Ok(())
//! # }
//! ```

mod apply;
mod error;
pub mod extender;
mod ids;
mod membership;
pub mod path;
pub mod place;
pub mod planner;
pub mod query;
pub mod rank;
mod records;
mod sums;
mod sweep;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tiers;
pub mod zone_terms;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use zonemesh_domain::{IcmpMode, NodeName, UnixMs, ZoneName};

pub use apply::{Applied, LOAD_MARGIN_MS};
pub use error::Error;
pub use ids::{NodeId, PairHasher, PairMap, ZoneId};
pub use path::{PathConfig, PathState};
pub use planner::{PlanConfig, ThroughputConfig};
pub use records::{Dirty, StoredNode};
pub use sums::Sums;
pub use zone_terms::ZonePairTerms;
pub use zonemesh_domain::UNKNOWN_ZONE;

use sums::Contribution;
use sweep::SweepCursor;

/// Sweeps between two exact recomputations of the running sums.
pub const REBUILD_EVERY: u32 = 60;

/// Engine settings. Every field has a documented default (see `Default`).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// How paths age and merge.
    pub path: PathConfig,
    /// A node whose agent has been silent (and disconnected) this long is DOWN. Default 30 s.
    pub down_after_ms: i64,
    /// The probe plan.
    pub plan: PlanConfig,
    /// Throughput test scheduling.
    pub throughput: ThroughputConfig,
    /// Pair-cost evaluations `Place` may spend comparing candidate zones (at least one zone is
    /// always evaluated). Default 40,000.
    pub place_budget: usize,
    /// Most nodes the topology holds (registered or named as a report's destination); a Hello
    /// or report that would add more is refused. Default 20,000.
    pub max_nodes: usize,
    /// Most directed paths the topology holds; a report that would add more is refused.
    /// Default 4,000,000 (a full mesh of 2,000 nodes, or 800 peers each of 5,000).
    pub max_paths: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            path: PathConfig::default(),
            down_after_ms: 30_000,
            plan: PlanConfig::default(),
            throughput: ThroughputConfig::default(),
            place_budget: 40_000,
            max_nodes: 20_000,
            max_paths: 4_000_000,
        }
    }
}

/// A limit of [`EngineConfig`] that refused a Hello or a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// [`EngineConfig::max_nodes`].
    Nodes,
    /// [`EngineConfig::max_paths`].
    Paths,
}

impl LimitHit {
    /// The metric label (`zonemesh_limit_hits_total{limit}`).
    pub fn label(self) -> &'static str {
        match self {
            LimitHit::Nodes => "nodes",
            LimitHit::Paths => "paths",
        }
    }
}

/// What the engine knows of one node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// Name.
    pub name: NodeName,
    /// Zone (the [`UNKNOWN_ZONE`] until the agent says hello).
    pub zone: ZoneId,
    /// Region, when known.
    pub region: Option<ZoneName>,
    /// Advertised addresses, best first.
    pub addresses: Vec<IpAddr>,
    /// Agent version.
    pub agent_version: String,
    /// How the agent measures RTT and loss.
    pub icmp_mode: Option<IcmpMode>,
    /// The agent's TCP responder port.
    pub probe_port: u16,
    /// Whether the node's agent ever said hello (a node can be known first as a destination).
    pub registered: bool,
    /// Whether the agent's stream is open.
    pub connected: bool,
    /// Last message from the agent.
    pub last_seen: Option<UnixMs>,
    /// Highest applied report sequence.
    pub applied_seq: u64,
}

/// A zone.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneInfo {
    /// Name.
    pub name: ZoneName,
    /// Region of its nodes (of the first that said).
    pub region: Option<ZoneName>,
    /// Its nodes, in id order.
    pub members: Vec<NodeId>,
}

#[derive(Debug, Clone, PartialEq, Default)]
struct PathEntry {
    state: PathState,
    contribution: Contribution,
}

/// The zone-aware topology matrix.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    config: EngineConfig,
    names: HashMap<NodeName, NodeId>,
    nodes: Vec<NodeInfo>,
    zone_names: HashMap<ZoneName, ZoneId>,
    zones: Vec<ZoneInfo>,
    paths: PairMap<(NodeId, NodeId), PathEntry>,
    /// Paths by source and by destination, for per-node walks.
    outgoing: Vec<Vec<NodeId>>,
    incoming: Vec<Vec<NodeId>>,
    node_sums: Vec<Sums>,
    link_sums: PairMap<(ZoneId, ZoneId), Sums>,
    /// Nodes every fresh probe to which was lost (evaluated by `sweep`).
    unreachable: Vec<bool>,
    /// When the topology was restored from the store: agents get `down_after_ms` from then to
    /// reconnect before their nodes turn DOWN.
    restored_at: Option<UnixMs>,
    /// Newest latency sample on any path from each node.
    newest_sample: Vec<Option<UnixMs>>,
    /// Sweeps since the last exact recomputation of the sums.
    sweeps_since_rebuild: u32,
    /// The pass of [`Topology::sweep_step`] in progress.
    sweep_cursor: Option<SweepCursor>,
    membership_version: u64,
    dirty_nodes: HashSet<NodeId>,
    /// Nodes whose outgoing paths changed: the store keeps a node's paths together.
    dirty_sources: HashSet<NodeId>,
    /// Per node, the intervals in which it takes part in a throughput test (see
    /// [`Topology::note_throughput_test`]).
    loaded: Vec<Vec<(UnixMs, UnixMs)>>,
    /// Latency windows left out of the figures because a throughput test loaded their path.
    windows_under_load: u64,
}

impl Topology {
    /// An empty topology.
    pub fn new(config: EngineConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Bumped whenever the set of nodes, their zones or their up/down states change: the probe
    /// plan depends on nothing else.
    pub fn membership_version(&self) -> u64 {
        self.membership_version
    }

    /// Looks a node up by name.
    pub fn id(&self, name: &NodeName) -> Option<NodeId> {
        self.names.get(name).copied()
    }

    /// Looks a node up by name, or fails with NOT_FOUND naming it and the request field.
    pub fn require(&self, field: &str, name: &NodeName) -> Result<NodeId, Error> {
        self.id(name).ok_or_else(|| Error::UnknownNode {
            field: field.to_owned(),
            node: name.to_string(),
        })
    }

    /// Looks a zone up by name.
    pub fn zone_id(&self, name: &ZoneName) -> Option<ZoneId> {
        self.zone_names.get(name).copied()
    }

    /// A node.
    pub fn node(&self, id: NodeId) -> &NodeInfo {
        &self.nodes[id.0 as usize]
    }

    /// Every node, in id order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = (NodeId, &NodeInfo)> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (NodeId(i as u32), n))
    }

    /// A zone.
    pub fn zone(&self, id: ZoneId) -> &ZoneInfo {
        &self.zones[id.0 as usize]
    }

    /// Every zone, in id order.
    pub fn zones(&self) -> impl ExactSizeIterator<Item = (ZoneId, &ZoneInfo)> {
        self.zones
            .iter()
            .enumerate()
            .map(|(i, z)| (ZoneId(i as u32), z))
    }

    /// The zone of a node.
    pub fn zone_of(&self, id: NodeId) -> ZoneId {
        self.node(id).zone
    }

    /// Number of directed paths with state.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// The state of a directed path, if any sample arrived for it.
    pub fn path(&self, src: NodeId, dst: NodeId) -> Option<&PathState> {
        self.paths.get(&(src, dst)).map(|e| &e.state)
    }

    /// Every path with state.
    pub fn paths(&self) -> impl Iterator<Item = ((NodeId, NodeId), &PathState)> {
        self.paths.iter().map(|(k, e)| (*k, &e.state))
    }

    /// The paths from `src` that have state, in the order they were first seen.
    pub fn outgoing(&self, src: NodeId) -> impl Iterator<Item = (NodeId, &PathState)> {
        self.outgoing[src.0 as usize]
            .iter()
            .map(move |d| (*d, &self.paths[&(src, *d)].state))
    }

    /// Running sums of a node's fresh paths inside its zone (both directions).
    pub fn node_sums(&self, id: NodeId) -> &Sums {
        &self.node_sums[id.0 as usize]
    }

    /// Running sums of the fresh paths from zone `a` to zone `b`.
    pub fn link_sums(&self, a: ZoneId, b: ZoneId) -> Option<&Sums> {
        self.link_sums.get(&(a, b))
    }
}
