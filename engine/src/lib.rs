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
//!             throughput: None,
//!             method: Some(IcmpMode::Raw),
//!         });
//!     }
//!     let node = topology.id(&src).expect("registered");
//!     topology.apply_report(node, &Report { sequence: seq as u64 + 1, paths }, now)?;
//! }
//!
//! let ranking = topology.view().rank(&RankQuery::default(), now)?;
//! assert_eq!(ranking.nodes.last().unwrap().node, "b1", "alone in its zone: no figures");
//!
//! let placement = topology.view().place(&PlaceQuery { workers: 2, ..PlaceQuery::default() }, now)?;
//! let mut chosen: Vec<_> = placement.assignments.iter().map(|a| a.node.as_str()).collect();
//! chosen.sort();
//! assert_eq!(chosen, ["a1", "a2"]);
//! assert_eq!(placement.zones, ["zone-a"]);
//! assert_eq!(placement.worst_rtt_us, 50.0);
//! # Ok(())
//! # }
//! ```

mod apply;
pub mod collective;
mod cow;
mod error;
pub mod extender;
pub mod faults;
mod ids;
mod membership;
pub mod model;
pub mod network;
pub mod own;
pub mod path;
pub mod place;
pub mod planner;
#[cfg(test)]
mod proptests;
pub mod query;
pub mod rank;
mod records;
mod search;
mod sums;
mod sweep;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tiers;
pub mod zone_terms;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

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

use cow::CowVec;
use sums::Contribution;
use sweep::SweepCursor;

/// The writer refits the [`model`] after at least one millisecond per this many paths (and at
/// least every [`EngineConfig::model_every_ms`]): a fit costs about 130 ns a path (65 ms at
/// 500,000 paths, docs/BENCHMARKS.md), so fitting takes under 1 % of the writer's time at any
/// size; small topologies are refitted at every sweep pass.
pub const MODEL_PATHS_PER_MS: usize = 50;

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
    /// The writer refits the [`model`] at the end of a sweep pass when its last fit is at least
    /// this old, or sooner when the topology is small (see [`MODEL_PATHS_PER_MS`]), and always
    /// when it has none. Default 10 s.
    pub model_every_ms: i64,
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
            model_every_ms: 10_000,
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

/// What the engine knows of one node. Cheap to copy (its strings and addresses are shared), so
/// that the chunks of the node table a snapshot shares are copied quickly when written.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// Name.
    pub name: NodeName,
    /// Zone (the [`UNKNOWN_ZONE`] until the agent says hello).
    pub zone: ZoneId,
    /// Region, when known.
    pub region: Option<ZoneName>,
    /// Advertised addresses, best first.
    pub addresses: Arc<[IpAddr]>,
    /// Agent version.
    pub agent_version: Arc<str>,
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
    /// The retransmission timeout a throughput test it sent read after the timed exchanges, µs
    /// ([`MessageExchange::timeout`]): the last one its latest report carrying one gave (a report
    /// rarely carries more than one test). The model prices a lost message's tail with the
    /// tested nodes' median while the lossy paths' exchanges say too little
    /// ([`model::TailRepair`]). A host's TCP stack, not a path, sets most of it (its minimum,
    /// 200 ms on Linux unless a route says less), so one figure a node is kept, not one a path.
    ///
    /// [`MessageExchange::timeout`]: zonemesh_domain::MessageExchange::timeout
    pub exchange_timeout_us: Option<f32>,
    /// Every fresh probe to it was lost (evaluated by the sweep).
    unreachable: bool,
    /// Newest latency sample on any path from it.
    newest_sample: Option<UnixMs>,
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

/// One directed path in its source's row.
#[derive(Debug, Clone, PartialEq, Default)]
struct PathEntry {
    state: PathState,
    contribution: Contribution,
}

/// Every path from one source, by destination id: the unit a report changes and a snapshot
/// shares. The destinations are kept apart from the paths so that a lookup searches four bytes
/// a path, not the path states (a lookup per pair is what ranking and placement do most).
#[derive(Debug, Clone, PartialEq, Default)]
struct Row {
    dsts: Vec<NodeId>,
    entries: Vec<PathEntry>,
}

impl Row {
    fn find(&self, dst: NodeId) -> Result<usize, usize> {
        self.dsts.binary_search(&dst)
    }

    fn get(&self, dst: NodeId) -> Option<&PathEntry> {
        self.find(dst).ok().map(|i| &self.entries[i])
    }

    /// The paths with their destinations, by destination id.
    fn iter(&self) -> impl Iterator<Item = (NodeId, &PathEntry)> {
        self.dsts.iter().copied().zip(&self.entries)
    }

    /// Adds new paths to the row, in one merge (an agent's first report adds a hundred, which
    /// one insertion at a time would move a hundred times). `new` must be sorted, without
    /// duplicates and without destinations the row has. The row's vectors are exactly as large
    /// as their contents afterwards.
    fn add(&mut self, new: &[NodeId]) {
        if new.is_empty() {
            return;
        }
        let len = self.dsts.len() + new.len();
        let mut dsts = Vec::with_capacity(len);
        let mut entries = Vec::with_capacity(len);
        let mut old = std::mem::take(&mut self.dsts)
            .into_iter()
            .zip(std::mem::take(&mut self.entries))
            .peekable();
        let mut new = new.iter().copied().peekable();
        loop {
            let take_new = match (old.peek(), new.peek()) {
                (Some((o, _)), Some(n)) => n < o,
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (None, None) => break,
            };
            if take_new {
                dsts.extend(new.next());
                entries.push(PathEntry::default());
            } else if let Some((d, e)) = old.next() {
                dsts.push(d);
                entries.push(e);
            }
        }
        self.dsts = dsts;
        self.entries = entries;
    }
}

/// What readers see: the matrix at one moment, immutable, cheap to copy (its tables are shared
/// copy-on-write with the [`Topology`] that published it). Every query — views, ranking,
/// placement, the probe plan, the extender's decisions — runs on a snapshot.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    config: Arc<EngineConfig>,
    names: Arc<HashMap<NodeName, NodeId>>,
    nodes: CowVec<NodeInfo>,
    zone_names: Arc<HashMap<ZoneName, ZoneId>>,
    zones: Arc<Vec<ZoneInfo>>,
    /// Paths by source.
    rows: CowVec<Arc<Row>>,
    path_count: usize,
    /// Running sums of each node's fresh paths inside its zone (both directions).
    node_sums: CowVec<Sums>,
    /// Running sums of each node's paths to and from its zone-mates with a fault of their own in
    /// [`Snapshot::model`]: what its own figures leave out of `node_sums` (see [`own`]).
    left_sums: CowVec<Sums>,
    /// Running sums of the fresh paths between zones: by source zone, then destination zone.
    link_sums: CowVec<Arc<Vec<Sums>>>,
    /// When the topology was restored from the store: agents get `down_after_ms` from then to
    /// reconnect before their nodes turn DOWN.
    restored_at: Option<UnixMs>,
    membership_version: u64,
    /// Nodes whose agents said hello.
    registered: usize,
    /// The model of the measured network the writer fitted last (see [`model`]).
    model: Arc<model::Model>,
}

/// The writer: the matrix as the one owner changes it (hellos, reports, the sweep), with what
/// only the writer needs. [`Topology::view`] reads it in place; [`Topology::snapshot`] hands
/// readers on other threads an immutable copy.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    snap: Snapshot,
    /// Sweeps since the last exact recomputation of the sums.
    sweeps_since_rebuild: u32,
    /// The pass of [`Topology::sweep_step`] in progress.
    sweep_cursor: Option<SweepCursor>,
    dirty_nodes: HashSet<NodeId>,
    /// Nodes whose outgoing paths changed: the store keeps a node's paths together.
    dirty_sources: HashSet<NodeId>,
    /// Per node, the intervals in which it takes part in a throughput test (see
    /// [`Topology::note_throughput_test`]).
    loaded: Vec<Vec<(UnixMs, UnixMs)>>,
    /// Latency windows left out of the figures because a throughput test loaded their path.
    windows_under_load: u64,
    /// Which nodes were DOWN when the last sweep pass ended.
    down_after_last_pass: Vec<bool>,
    /// The sweep leaves the model's fits to the caller ([`Topology::fit_models_elsewhere`]).
    models_elsewhere: bool,
}

impl Topology {
    /// Fits the [`model`] to the fresh measured paths at `now` and publishes it with the next
    /// snapshot. The sweep does this at the end of a pass every
    /// [`EngineConfig::model_every_ms`]; call it to refit at once.
    pub fn fit_model(&mut self, now: UnixMs) {
        self.snap.model = Arc::new(model::Model::fit(&self.snap, now));
        self.snap.recount_left_sums();
    }

    /// From now on the sweep does not fit the model itself: the caller fits it on a snapshot
    /// ([`model::Model::fit`]) when [`model_due`](Self::model_due) says so, away from the writer,
    /// and hands it back with [`install_model`](Self::install_model). A server does this so that
    /// a fit (65 ms at 5,000 nodes) never holds up the writes.
    pub fn fit_models_elsewhere(&mut self) {
        self.models_elsewhere = true;
    }

    /// Whether the model's last fit is older than its cost allows (see [`MODEL_PATHS_PER_MS`]),
    /// or than [`EngineConfig::model_every_ms`], or there was none.
    pub fn model_due(&self, now: UnixMs) -> bool {
        let interval = (self.snap.path_count / MODEL_PATHS_PER_MS) as i64;
        self.snap.model.fitted_at().is_none_or(|at| {
            now.since(at) >= interval.min(self.snap.config.model_every_ms) || now.0 < at.0
        })
    }

    /// Publishes `model` (fitted on an earlier snapshot of this topology) with the next snapshot,
    /// unless the model in place was fitted later; returns whether it was installed. Nodes
    /// registered after its snapshot have no terms in it, as after any fit.
    pub fn install_model(&mut self, model: Arc<model::Model>) -> bool {
        let newer = match (model.fitted_at(), self.snap.model.fitted_at()) {
            (Some(new), Some(old)) => new.0 >= old.0,
            (new, _) => new.is_some(),
        };
        if newer {
            self.snap.model = model;
            self.snap.recount_left_sums();
        }
        newer
    }
}

impl Topology {
    /// An empty topology.
    pub fn new(config: EngineConfig) -> Self {
        Self {
            snap: Snapshot {
                config: Arc::new(config),
                ..Snapshot::default()
            },
            ..Self::default()
        }
    }

    /// The matrix as it is now, to read in place.
    pub fn view(&self) -> &Snapshot {
        &self.snap
    }

    /// An immutable copy of the matrix as it is now, for readers elsewhere: it copies one
    /// pointer per table (the tables' chunks are shared until the writer changes them).
    pub fn snapshot(&self) -> Snapshot {
        self.snap.clone()
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.snap.config
    }

    /// A node (short for `view().node(id)`).
    pub fn node(&self, id: NodeId) -> &NodeInfo {
        self.snap.node(id)
    }

    /// Looks a node up by name (short for `view().id(name)`).
    pub fn id(&self, name: &NodeName) -> Option<NodeId> {
        self.snap.id(name)
    }
}

impl Snapshot {
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
        self.nodes.get(id.0 as usize)
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
        self.path_count
    }

    /// The state of a directed path, if any sample arrived for it.
    pub fn path(&self, src: NodeId, dst: NodeId) -> Option<&PathState> {
        self.rows.get(src.0 as usize).get(dst).map(|e| &e.state)
    }

    /// Every path with state, by source, then destination id.
    pub fn paths(&self) -> impl Iterator<Item = ((NodeId, NodeId), &PathState)> {
        self.rows.iter().enumerate().flat_map(|(s, row)| {
            row.iter()
                .map(move |(dst, e)| ((NodeId(s as u32), dst), &e.state))
        })
    }

    /// The paths from `src` that have state, by destination id.
    pub fn outgoing(&self, src: NodeId) -> impl Iterator<Item = (NodeId, &PathState)> {
        self.rows
            .get(src.0 as usize)
            .iter()
            .map(|(dst, e)| (dst, &e.state))
    }

    /// Running sums of a node's fresh paths inside its zone (both directions).
    pub fn node_sums(&self, id: NodeId) -> &Sums {
        self.node_sums.get(id.0 as usize)
    }

    /// What node `id`'s paths to and from its faulty zone-mates add to its running sums (see
    /// [`own`]).
    pub(crate) fn left_sums(&self, id: NodeId) -> &Sums {
        self.left_sums.get(id.0 as usize)
    }

    /// What the path `src → dst` adds to the running sums, as of its last apply or sweep step.
    pub(crate) fn contribution(&self, src: NodeId, dst: NodeId) -> Option<&Contribution> {
        self.rows
            .get(src.0 as usize)
            .get(dst)
            .map(|e| &e.contribution)
    }

    /// Running sums of the fresh paths from zone `a` to zone `b`, if any path between them
    /// was ever counted.
    pub fn link_sums(&self, a: ZoneId, b: ZoneId) -> Option<&Sums> {
        if (a.0 as usize) >= self.link_sums.len() {
            return None;
        }
        self.link_sums.get(a.0 as usize).get(b.0 as usize)
    }
}

#[cfg(test)]
mod size_tests {
    /// A path's state is most of the engine's memory (500,000 paths at 5,000 nodes): keep its
    /// size where the budget of 600 bytes a path, all of the process counted, leaves room.
    #[test]
    fn a_path_costs_under_450_bytes_in_its_row() {
        let entry = std::mem::size_of::<super::PathEntry>() + std::mem::size_of::<super::NodeId>();
        println!("{entry} bytes a path");
        assert!(entry <= 444, "{entry} bytes a path");
    }
}
