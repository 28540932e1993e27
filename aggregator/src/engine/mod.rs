//! The engine: the zone-aware topology matrix and everything computed from it, free of I/O.
//!
//! [`Topology`] owns the nodes, the directed paths between them, per-node summaries of the paths
//! inside each node's zone and the zone-to-zone roll-up. Every function that depends on time takes
//! `now`. Ranking ([`rank`]), placement ([`place`]) and the probe plan ([`planner`]) read it.
//!
//! Summaries and roll-ups are running sums kept up to date as samples arrive, so queries cost
//! O(candidates) rather than O(paths); [`Topology::sweep`] recomputes them exactly, expires stale
//! paths and re-evaluates node states, and is meant to run about once a second.

pub mod extender;
pub mod path;
pub mod place;
pub mod planner;
pub mod query;
pub mod rank;

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

use zonemesh_proto::domain::{Hello, IcmpMode, NodeName, Report, UnixMs, ZoneName};
use zonemesh_proto::v1;

pub use path::{PathConfig, PathState};
pub use place::PlaceQuery;
pub use planner::{PlanConfig, ThroughputConfig};
pub use query::{MatrixQuery, RankQuery};

use crate::Error;

/// Sweeps between two exact recomputations of the running sums.
pub const REBUILD_EVERY: u32 = 60;

pub use zonemesh_proto::domain::UNKNOWN_ZONE;

/// Dense index of a node inside one [`Topology`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Dense index of a zone inside one [`Topology`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZoneId(pub u32);

/// A fast hasher for the dense `(NodeId, NodeId)` and `(ZoneId, ZoneId)` keys (Fibonacci hashing;
/// the keys are small integers chosen by us, not by an attacker).
#[derive(Debug, Default, Clone, Copy)]
pub struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0.rotate_left(32) ^ u64::from(v)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A `HashMap` keyed by dense id pairs.
pub type PairMap<K, V> = HashMap<K, V, BuildHasherDefault<PairHasher>>;

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

/// Running sums of path figures (for a node's intra-zone paths or a zone pair).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sums {
    /// Sum of median RTTs, µs.
    pub rtt: f64,
    /// Sum of 90th percentile RTTs, µs (same paths as `rtt`).
    pub rtt_p90: f64,
    /// Sum of 99th percentile RTTs, µs (same paths as `rtt`).
    pub rtt_p99: f64,
    /// Paths in `rtt`.
    pub rtt_n: u32,
    /// Sum of loss ratios.
    pub loss: f64,
    /// Paths in `loss`.
    pub loss_n: u32,
    /// Sum of latest throughputs, bit/s.
    pub tput: f64,
    /// Paths in `tput`.
    pub tput_n: u32,
    /// Oldest update among the paths counted (conservative between sweeps).
    pub oldest: Option<UnixMs>,
}

impl Sums {
    fn add(&mut self, c: &Contribution, sign: f64) {
        let step = |n: &mut u32| {
            if sign > 0.0 {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
            }
        };
        if let Some([p50, p90, p99]) = c.rtt {
            self.rtt += sign * p50;
            self.rtt_p90 += sign * p90;
            self.rtt_p99 += sign * p99;
            step(&mut self.rtt_n);
        }
        if let Some(l) = c.loss {
            self.loss += sign * l;
            step(&mut self.loss_n);
        }
        if let Some(t) = c.tput {
            self.tput += sign * t;
            step(&mut self.tput_n);
        }
        if sign > 0.0
            && let Some(at) = c.at
        {
            self.oldest = Some(self.oldest.map_or(at, |o| o.min(at)));
        }
    }

    /// Mean median RTT, µs.
    pub fn rtt_mean(&self) -> Option<f64> {
        (self.rtt_n > 0).then(|| (self.rtt / f64::from(self.rtt_n)).max(0.0))
    }
    /// Mean 90th and 99th percentile RTTs, µs.
    pub fn rtt_tail_means(&self) -> Option<(f64, f64)> {
        (self.rtt_n > 0).then(|| {
            let n = f64::from(self.rtt_n);
            ((self.rtt_p90 / n).max(0.0), (self.rtt_p99 / n).max(0.0))
        })
    }
    /// Mean loss ratio.
    pub fn loss_mean(&self) -> Option<f64> {
        (self.loss_n > 0).then(|| (self.loss / f64::from(self.loss_n)).clamp(0.0, 1.0))
    }
    /// Mean throughput, bit/s.
    pub fn tput_mean(&self) -> Option<f64> {
        (self.tput_n > 0).then(|| (self.tput / f64::from(self.tput_n)).max(0.0))
    }
}

/// What one path adds to the sums, remembered so that it can be taken out exactly.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Contribution {
    /// RTT p50, p90, p99, µs.
    rtt: Option<[f64; 3]>,
    loss: Option<f64>,
    tput: Option<f64>,
    at: Option<UnixMs>,
}

impl Contribution {
    fn of(path: &PathState, now: UnixMs, config: &PathConfig) -> Self {
        if path.is_stale(now, config) {
            return Self {
                tput: path.fresh_throughput(now, config).map(|t| t.latest_bps),
                ..Self::default()
            };
        }
        Self {
            rtt: path
                .merged
                .rtt
                .map(|r| [f64::from(r.p50), f64::from(r.p90), f64::from(r.p99)]),
            loss: path.merged.loss(),
            tput: path.fresh_throughput(now, config).map(|t| t.latest_bps),
            at: path.last_update,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
struct PathEntry {
    state: PathState,
    contribution: Contribution,
}

/// A node's state with the reason when it is not READY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Fresh.
    Ready,
    /// Connected but without fresh samples.
    Stale,
    /// Gone, or unreachable from every peer that probes it.
    Down,
}

impl NodeState {
    /// The wire enum.
    pub fn wire(self) -> v1::NodeState {
        match self {
            Self::Ready => v1::NodeState::Ready,
            Self::Stale => v1::NodeState::Stale,
            Self::Down => v1::NodeState::Down,
        }
    }
}

/// Outcome of [`Topology::apply_report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The report was new and is now part of the matrix.
    Applied,
    /// The report's sequence was already applied: nothing changed.
    Duplicate,
}

/// Where a stepwise sweep is, and what it has counted so far.
#[derive(Debug, Clone, Default)]
struct SweepCursor {
    /// The next source node whose outgoing paths are swept.
    next_src: usize,
    /// Which nodes were DOWN when the pass began.
    down_before: Vec<bool>,
    /// Per destination: fresh paths into it, and those with a reply.
    fresh_in: Vec<u32>,
    alive_in: Vec<u32>,
}

/// Nodes and outgoing paths changed since the last [`Topology::take_dirty`], for the store.
#[derive(Debug, Default)]
pub struct Dirty {
    /// Nodes whose records changed.
    pub nodes: Vec<NodeId>,
    /// Nodes some of whose outgoing paths changed.
    pub sources: Vec<NodeId>,
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

/// A latency window that ends within this long after a throughput test of one of its nodes is
/// still taken as measured under that load (queues take a moment to drain).
pub const LOAD_MARGIN_MS: i64 = 500;

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

    fn intern_zone(&mut self, name: &ZoneName) -> ZoneId {
        if let Some(id) = self.zone_names.get(name) {
            return *id;
        }
        let id = ZoneId(self.zones.len() as u32);
        self.zones.push(ZoneInfo {
            name: name.clone(),
            region: None,
            members: Vec::new(),
        });
        self.zone_names.insert(name.clone(), id);
        id
    }

    fn intern_node(&mut self, name: &NodeName) -> NodeId {
        if let Some(id) = self.names.get(name) {
            return *id;
        }
        let unknown = ZoneName::parse("zone", UNKNOWN_ZONE).expect("valid zone name");
        let zone = self.intern_zone(&unknown);
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(NodeInfo {
            name: name.clone(),
            zone,
            region: None,
            addresses: Vec::new(),
            agent_version: String::new(),
            icmp_mode: None,
            probe_port: 0,
            registered: false,
            connected: false,
            last_seen: None,
            applied_seq: 0,
        });
        self.zones[zone.0 as usize].members.push(id);
        self.names.insert(name.clone(), id);
        self.outgoing.push(Vec::new());
        self.incoming.push(Vec::new());
        self.node_sums.push(Sums::default());
        self.unreachable.push(false);
        self.loaded.push(Vec::new());
        self.newest_sample.push(None);
        self.dirty_nodes.insert(id);
        self.membership_version += 1;
        id
    }

    /// Whether a Hello from `hello.node` fits under [`EngineConfig::max_nodes`] registered nodes.
    ///
    /// Only nodes whose agents said hello count here, so that names an agent reported as
    /// destinations (bounded by [`Topology::admit_report`]) can never lock real agents out.
    pub fn admit_hello(&self, hello: &Hello) -> Result<(), (LimitHit, Error)> {
        if self
            .names
            .get(&hello.node)
            .is_some_and(|id| self.nodes[id.0 as usize].registered)
        {
            return Ok(());
        }
        let registered = self.nodes.iter().filter(|n| n.registered).count();
        if registered < self.config.max_nodes {
            return Ok(());
        }
        Err((
            LimitHit::Nodes,
            Error::Limit(format!(
                "hello.node: {} would be agent {} of at most {} (--max-nodes)",
                hello.node,
                registered + 1,
                self.config.max_nodes
            )),
        ))
    }

    /// Whether the report of `node` fits under [`EngineConfig::max_nodes`] (its destinations
    /// become nodes) and [`EngineConfig::max_paths`]. Replays always fit.
    pub fn admit_report(&self, node: NodeId, report: &Report) -> Result<(), (LimitHit, Error)> {
        if report.sequence <= self.nodes[node.0 as usize].applied_seq {
            return Ok(());
        }
        let mut new_nodes = HashSet::new();
        let mut new_paths = 0usize;
        for sample in &report.paths {
            match self.names.get(&sample.dst) {
                Some(dst) => {
                    if !self.paths.contains_key(&(node, *dst)) {
                        new_paths += 1;
                    }
                }
                None => {
                    if new_nodes.insert(&sample.dst) {
                        new_paths += 1;
                    }
                }
            }
        }
        if !new_nodes.is_empty() && self.nodes.len() + new_nodes.len() > self.config.max_nodes {
            return Err((
                LimitHit::Nodes,
                Error::Limit(format!(
                    "report {}: its {} unknown destinations would pass the {} nodes of --max-nodes",
                    report.sequence,
                    new_nodes.len(),
                    self.config.max_nodes
                )),
            ));
        }
        if new_paths > 0 && self.paths.len() + new_paths > self.config.max_paths {
            return Err((
                LimitHit::Paths,
                Error::Limit(format!(
                    "report {}: its {new_paths} new paths would pass the {} paths of --max-paths",
                    report.sequence, self.config.max_paths
                )),
            ));
        }
        Ok(())
    }

    /// An agent said hello: records (or updates) its node and marks it connected. Returns the node
    /// and the highest report sequence already applied for it.
    pub fn register(&mut self, hello: &Hello, now: UnixMs) -> (NodeId, u64) {
        let id = self.intern_node(&hello.node);
        let node = &self.nodes[id.0 as usize];
        let membership_changed = !node.registered
            || self.zone(node.zone).name != hello.zone
            || node.addresses != hello.addresses
            || node.probe_port != hello.probe_port;
        let moved = self.place_in_zone(id, &hello.zone, &hello.region);
        let node = &mut self.nodes[id.0 as usize];
        node.region.clone_from(&hello.region);
        node.addresses.clone_from(&hello.addresses);
        node.agent_version.clone_from(&hello.agent_version);
        node.icmp_mode = Some(hello.icmp_mode);
        node.probe_port = hello.probe_port;
        node.registered = true;
        node.connected = true;
        node.last_seen = Some(now);
        let applied = node.applied_seq;
        if moved {
            // Every sum this node's paths fed is keyed by zone: rebuild them.
            self.rebuild_sums(now);
        }
        if membership_changed {
            self.membership_version += 1;
        }
        self.dirty_nodes.insert(id);
        (id, applied)
    }

    /// Puts a node in a zone (interning it; the zone takes the node's region if it has none yet),
    /// keeping every zone's members in id order. Returns whether the node moved.
    fn place_in_zone(&mut self, id: NodeId, zone: &ZoneName, region: &Option<ZoneName>) -> bool {
        let zone = self.intern_zone(zone);
        if self.zones[zone.0 as usize].region.is_none() {
            self.zones[zone.0 as usize].region.clone_from(region);
        }
        let old = self.nodes[id.0 as usize].zone;
        if old == zone {
            return false;
        }
        self.zones[old.0 as usize].members.retain(|m| *m != id);
        let members = &mut self.zones[zone.0 as usize].members;
        let at = members.partition_point(|m| *m < id);
        members.insert(at, id);
        self.nodes[id.0 as usize].zone = zone;
        true
    }

    /// The agent's stream closed. The node stays READY until `down_after_ms` passes.
    pub fn disconnect(&mut self, id: NodeId, now: UnixMs) {
        let node = &mut self.nodes[id.0 as usize];
        node.connected = false;
        node.last_seen = Some(node.last_seen.map_or(now, |t| t.max(now)));
        self.dirty_nodes.insert(id);
    }

    /// Applies a checked report from the agent of `node`: every path sample is folded in, unless
    /// the sequence was applied before (a replay), in which case nothing changes.
    ///
    /// The report must come from [`Report::from_agent`] for this node (every `src` is the node).
    pub fn apply_report(
        &mut self,
        node: NodeId,
        report: &Report,
        now: UnixMs,
    ) -> Result<Applied, Error> {
        let info = &self.nodes[node.0 as usize];
        if let Some(bad) = report.paths.iter().position(|p| p.src != info.name) {
            return Err(Error::InvalidArgument(zonemesh_proto::WireError::new(
                format!("paths[{bad}].src"),
                format!(
                    "{} is not the reporting node {}",
                    report.paths[bad].src, info.name
                ),
            )));
        }
        if report.sequence <= info.applied_seq {
            return Ok(Applied::Duplicate);
        }
        for sample in &report.paths {
            let dst = self.intern_node(&sample.dst);
            // The window's span by this aggregator's clock: it ended when it arrived.
            let span = sample
                .window_end
                .0
                .saturating_sub(sample.window_start.0)
                .max(0);
            let from = UnixMs(now.0 - span);
            let under_load =
                self.loaded_between(node, from, now) || self.loaded_between(dst, from, now);
            if under_load && sample.sent > 0 {
                self.windows_under_load += 1;
            }
            self.update_path(node, dst, now, |state, config| {
                state.apply(sample, now, config, under_load)
            });
        }
        let info = &mut self.nodes[node.0 as usize];
        info.applied_seq = report.sequence;
        info.last_seen = Some(now);
        self.dirty_nodes.insert(node);
        Ok(Applied::Applied)
    }

    /// Notes that `src` and `dst` take part in a throughput test from `from` to `until`. Their
    /// paths' latency windows that overlap it are measured under that load (bulk traffic fills
    /// queues and delays probes) and are left out of the RTT and loss figures, counted only in
    /// the lifetime totals, as perfSONAR keeps latency tests apart from throughput tests.
    pub fn note_throughput_test(&mut self, src: NodeId, dst: NodeId, from: UnixMs, until: UnixMs) {
        let keep_after = from.0 - 10 * self.config.path.window_ms.max(1);
        for n in [src, dst] {
            let intervals = &mut self.loaded[n.0 as usize];
            intervals.retain(|(_, u)| u.0 >= keep_after);
            intervals.push((from, until));
        }
    }

    /// Whether `node` was in a throughput test between `from` and `to` (or up to
    /// [`LOAD_MARGIN_MS`] before `from`).
    fn loaded_between(&self, node: NodeId, from: UnixMs, to: UnixMs) -> bool {
        self.loaded[node.0 as usize]
            .iter()
            .any(|(f, u)| f.0 <= to.0 && u.0 + LOAD_MARGIN_MS >= from.0)
    }

    /// Latency windows left out because a throughput test loaded their path.
    pub fn windows_under_load(&self) -> u64 {
        self.windows_under_load
    }

    fn update_path(
        &mut self,
        src: NodeId,
        dst: NodeId,
        now: UnixMs,
        change: impl FnOnce(&mut PathState, &PathConfig),
    ) {
        let config = self.config.path;
        let key = (src, dst);
        let entry = self.paths.entry(key).or_insert_with(|| {
            self.outgoing[src.0 as usize].push(dst);
            self.incoming[dst.0 as usize].push(src);
            PathEntry::default()
        });
        change(&mut entry.state, &config);
        if let Some(t) = entry.state.current_at(&config) {
            let newest = &mut self.newest_sample[src.0 as usize];
            *newest = Some(newest.map_or(t, |n| n.max(t)));
        }
        let new = Contribution::of(&entry.state, now, &config);
        let old = std::mem::replace(&mut entry.contribution, new);
        self.dirty_sources.insert(src);
        if old != new {
            self.account(src, dst, &old, -1.0);
            self.account(src, dst, &new, 1.0);
        }
    }

    fn account(&mut self, src: NodeId, dst: NodeId, c: &Contribution, sign: f64) {
        let (zs, zd) = (self.zone_of(src), self.zone_of(dst));
        if zs == zd {
            self.node_sums[src.0 as usize].add(c, sign);
            self.node_sums[dst.0 as usize].add(c, sign);
        }
        self.link_sums.entry((zs, zd)).or_default().add(c, sign);
    }

    fn rebuild_sums(&mut self, now: UnixMs) {
        self.sweeps_since_rebuild = 0;
        let config = self.config.path;
        self.node_sums.iter_mut().for_each(|s| *s = Sums::default());
        self.link_sums.clear();
        let keys: Vec<(NodeId, NodeId)> = self.paths.keys().copied().collect();
        for (src, dst) in keys {
            let entry = self.paths.get_mut(&(src, dst)).expect("key from the map");
            let c = Contribution::of(&entry.state, now, &config);
            entry.contribution = c;
            self.account(src, dst, &c, 1.0);
        }
    }

    /// Housekeeping, about once a second: slides windows, turns paths stale (taking them out of
    /// the sums) and re-evaluates which nodes are unreachable or DOWN, in one pass over the paths
    /// that does real work only for paths whose figures change. Every [`REBUILD_EVERY`] sweeps it
    /// recomputes every sum exactly, which clears rounding drift. Bumps the membership version
    /// when a node changes between up and down.
    ///
    /// One whole pass; a pass that [`sweep_step`](Self::sweep_step) had begun starts over.
    pub fn sweep(&mut self, now: UnixMs) {
        self.sweep_cursor = None;
        while !self.sweep_step(now, usize::MAX) {}
    }

    /// The sweep in steps, so that a server can answer queries between them: goes on with the
    /// pass in progress (or begins one) over the outgoing paths of whole source nodes, about
    /// `max_paths` of them, and returns whether the pass is complete. Between steps the figures
    /// are as correct as between two passes of [`sweep`](Self::sweep): a path not yet swept
    /// this pass keeps the state the previous pass left it in.
    pub fn sweep_step(&mut self, now: UnixMs, max_paths: usize) -> bool {
        let n = self.nodes.len();
        let mut cursor = match self.sweep_cursor.take() {
            Some(c) => c,
            None => SweepCursor {
                next_src: 0,
                down_before: (0..n)
                    .map(|i| self.state(NodeId(i as u32), now).0 == NodeState::Down)
                    .collect(),
                fresh_in: vec![0; n],
                alive_in: vec![0; n],
            },
        };
        let config = self.config.path;
        let horizon = now.0 - config.window_ms;
        let mut changed: Vec<((NodeId, NodeId), Contribution, Contribution)> = Vec::new();
        let mut swept = 0usize;
        while cursor.next_src < n && swept < max_paths {
            let src = NodeId(cursor.next_src as u32);
            cursor.next_src += 1;
            for &dst in &self.outgoing[src.0 as usize] {
                swept += 1;
                let Some(entry) = self.paths.get_mut(&(src, dst)) else {
                    continue;
                };
                let state = &mut entry.state;
                let slides = state.windows.len() > config.max_windows
                    || (state.windows.len() > 1 && state.windows[0].at.0 < horizon);
                if slides {
                    state.expire(now, &config);
                }
                let was_fresh = entry.contribution.at.is_some();
                let throughput_aged = entry.contribution.tput.is_some()
                    && state.fresh_throughput(now, &config).is_none();
                if slides || throughput_aged || was_fresh == state.is_stale(now, &config) {
                    let new = Contribution::of(state, now, &config);
                    if new != entry.contribution {
                        changed.push(((src, dst), entry.contribution, new));
                        entry.contribution = new;
                    }
                }
                let d = dst.0 as usize;
                if d < cursor.fresh_in.len()
                    && !state.is_stale(now, &config)
                    && state.merged.sent > 0
                {
                    cursor.fresh_in[d] += 1;
                    cursor.alive_in[d] += u32::from(state.merged.received > 0);
                }
            }
        }
        for ((src, dst), old, new) in changed {
            self.account(src, dst, &old, -1.0);
            self.account(src, dst, &new, 1.0);
        }
        if cursor.next_src < n {
            self.sweep_cursor = Some(cursor);
            return false;
        }
        self.sweeps_since_rebuild += 1;
        if self.sweeps_since_rebuild >= REBUILD_EVERY {
            self.rebuild_sums(now);
        }
        // Nodes that registered during the pass are judged by the next one.
        for (i, (fresh, alive)) in cursor.fresh_in.iter().zip(&cursor.alive_in).enumerate() {
            self.unreachable[i] = *fresh > 0 && *alive == 0;
        }
        let changed =
            cursor.down_before.iter().enumerate().any(|(i, before)| {
                *before != (self.state(NodeId(i as u32), now).0 == NodeState::Down)
            });
        if changed {
            self.membership_version += 1;
        }
        true
    }

    /// The state of a node at `now`, with the reason when it is not READY.
    pub fn state(&self, id: NodeId, now: UnixMs) -> (NodeState, &'static str) {
        let node = self.node(id);
        if !node.registered {
            return (NodeState::Down, "its agent never connected");
        }
        let last_seen = node.last_seen.max(self.restored_at);
        if !node.connected && last_seen.is_none_or(|t| now.since(t) > self.config.down_after_ms) {
            return (NodeState::Down, "its agent is gone");
        }
        if self.unreachable[id.0 as usize] {
            return (NodeState::Down, "every probe to it was lost");
        }
        match self.newest_sample[id.0 as usize] {
            Some(t) if now.since(t) > self.config.path.stale_after_ms => {
                (NodeState::Stale, "its measurements are stale")
            }
            _ => (NodeState::Ready, ""),
        }
    }

    /// Takes the set of nodes and paths changed since the last call.
    pub fn take_dirty(&mut self) -> Dirty {
        let mut dirty = Dirty {
            nodes: self.dirty_nodes.drain().collect(),
            sources: self.dirty_sources.drain().collect(),
        };
        dirty.nodes.sort_unstable();
        dirty.sources.sort_unstable();
        dirty
    }

    /// Rebuilds a topology from stored records (see [`crate::store`]).
    pub fn restore(
        config: EngineConfig,
        nodes: Vec<StoredNode>,
        paths: Vec<(NodeName, NodeName, PathState)>,
        now: UnixMs,
    ) -> Self {
        let mut topology = Self::new(config);
        for stored in nodes {
            let id = topology.intern_node(&stored.name);
            topology.place_in_zone(id, &stored.zone, &stored.region);
            let node = &mut topology.nodes[id.0 as usize];
            node.region = stored.region;
            node.addresses = stored.addresses;
            node.agent_version = stored.agent_version;
            node.icmp_mode = stored.icmp_mode;
            node.probe_port = stored.probe_port;
            node.registered = stored.registered;
            node.last_seen = stored.last_seen;
            node.applied_seq = stored.applied_seq;
        }
        for (src, dst, state) in paths {
            let (s, d) = (topology.intern_node(&src), topology.intern_node(&dst));
            topology.update_path(s, d, now, |p, config| {
                *p = state;
                p.expire(now, config);
            });
        }
        topology.restored_at = Some(now);
        topology.rebuild_sums(now);
        topology.sweep(now);
        topology.dirty_nodes.clear();
        topology.dirty_sources.clear();
        topology
    }

    /// The record of a node, as the store keeps it.
    pub fn stored_node(&self, id: NodeId) -> StoredNode {
        let n = self.node(id);
        StoredNode {
            name: n.name.clone(),
            zone: self.zone(n.zone).name.clone(),
            region: n.region.clone(),
            addresses: n.addresses.clone(),
            agent_version: n.agent_version.clone(),
            icmp_mode: n.icmp_mode,
            probe_port: n.probe_port,
            registered: n.registered,
            last_seen: n.last_seen,
            applied_seq: n.applied_seq,
        }
    }
}

/// A node as the store keeps it (names instead of ids, no connection state).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredNode {
    /// Name.
    pub name: NodeName,
    /// Zone.
    pub zone: ZoneName,
    /// Region.
    pub region: Option<ZoneName>,
    /// Addresses.
    pub addresses: Vec<IpAddr>,
    /// Agent version.
    pub agent_version: String,
    /// ICMP mode.
    pub icmp_mode: Option<IcmpMode>,
    /// Probe port.
    pub probe_port: u16,
    /// Whether the agent ever said hello.
    pub registered: bool,
    /// Last message from the agent.
    pub last_seen: Option<UnixMs>,
    /// Highest applied report sequence.
    pub applied_seq: u64,
}

#[cfg(test)]
pub(crate) mod testing {
    //! Builders shared by the engine's tests.

    use super::*;
    use zonemesh_proto::domain::{Micros, PathSample, Rtt, ThroughputSample};

    /// A name, panicking on invalid input (test data only).
    pub fn name(s: &str) -> NodeName {
        NodeName::parse("test", s).unwrap()
    }

    /// A hello for `node` in `zone`.
    pub fn hello(node: &str, zone: &str) -> Hello {
        Hello {
            node: name(node),
            zone: ZoneName::parse("zone", zone).unwrap(),
            region: None,
            addresses: vec!["127.0.0.1".parse().unwrap()],
            agent_version: "test".into(),
            icmp_mode: IcmpMode::Raw,
            probe_port: 7402,
        }
    }

    /// A sample from `src` to `dst` with `rtt_us` median, `lost` of 100 probes lost, and an
    /// optional throughput.
    pub fn sample(src: &str, dst: &str, rtt_us: f64, lost: u64, tput: Option<f64>) -> PathSample {
        let m = |v: f64| Micros::parse("x", v).unwrap();
        let received = 100 - lost;
        PathSample {
            src: name(src),
            dst: name(dst),
            window_start: UnixMs(0),
            window_end: UnixMs(10_000),
            sent: 100,
            received,
            rtt: (received > 0).then(|| Rtt {
                samples: received,
                min: m(rtt_us * 0.9),
                p50: m(rtt_us),
                p90: m(rtt_us * 1.1),
                p99: m(rtt_us * 1.2),
                max: m(rtt_us * 1.3),
                mean: m(rtt_us),
                jitter: m(1.0),
            }),
            histogram: None,
            throughput: tput.map(|bps| ThroughputSample {
                rate: zonemesh_proto::domain::Bps::parse("x", bps).unwrap(),
                bytes: (bps / 8.0) as u64,
                duration_us: 1_000_000,
                warmup_us: 0,
                streams: 1,
            }),
            method: None,
        }
    }

    /// Makes a node's agent gone long ago, so that it is DOWN.
    pub fn force_down(t: &mut Topology, id: NodeId) {
        let node = &mut t.nodes[id.0 as usize];
        node.connected = false;
        node.last_seen = Some(UnixMs(0));
    }

    /// A topology of `zones` zones of `per_zone` nodes named `z{zone}-n{node}`, every pair
    /// measured: `rtt(src, dst)` gives the median RTT, `loss(src, dst)` lost probes of 100.
    pub fn mesh(
        zones: usize,
        per_zone: usize,
        rtt: impl Fn(&str, &str) -> f64,
        loss: impl Fn(&str, &str) -> u64,
        now: UnixMs,
    ) -> Topology {
        mesh_with_throughput(zones, per_zone, rtt, loss, |_, _| 1e9, now)
    }

    /// As [`mesh`], with each path's throughput from `tput`.
    pub fn mesh_with_throughput(
        zones: usize,
        per_zone: usize,
        rtt: impl Fn(&str, &str) -> f64,
        loss: impl Fn(&str, &str) -> u64,
        tput: impl Fn(&str, &str) -> f64,
        now: UnixMs,
    ) -> Topology {
        let mut t = Topology::new(EngineConfig::default());
        let names: Vec<(String, String)> = (0..zones)
            .flat_map(|z| (0..per_zone).map(move |n| (format!("z{z}-n{n}"), format!("zone-{z}"))))
            .collect();
        for (n, z) in &names {
            t.register(&hello(n, z), now);
        }
        for (seq, (src, _)) in names.iter().enumerate() {
            let paths = names
                .iter()
                .filter(|(d, _)| d != src)
                .map(|(d, _)| sample(src, d, rtt(src, d), loss(src, d), Some(tput(src, d))))
                .collect();
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
        t
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn limits_refuse_new_nodes_and_paths_but_never_replays_or_known_ones() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig {
            max_nodes: 3,
            max_paths: 2,
            ..EngineConfig::default()
        });
        let (a, _) = t.register(&hello("a", "z1"), now);
        let report = |sequence, dsts: &[&str]| Report {
            sequence,
            paths: dsts
                .iter()
                .map(|d| sample("a", d, 100.0, 0, None))
                .collect(),
        };
        // b and c fit (3 nodes, 2 paths); so does the same pair again.
        let first = report(1, &["b", "c"]);
        assert!(t.admit_report(a, &first).is_ok());
        t.apply_report(a, &first, now).unwrap();
        assert!(t.admit_report(a, &report(2, &["b", "c"])).is_ok());
        // A fourth node does not, as a destination or as an agent.
        let (hit, e) = t.admit_report(a, &report(2, &["d"])).unwrap_err();
        assert_eq!(hit, LimitHit::Nodes);
        assert!(e.to_string().contains("--max-nodes"), "{e}");
        // b and c are only destinations: a real agent still gets in, up to 3 registered.
        assert!(t.admit_hello(&hello("d", "z1")).is_ok());
        t.register(&hello("b", "z1"), now);
        t.register(&hello("c", "z1"), now);
        let (hit, _) = t.admit_hello(&hello("d", "z1")).unwrap_err();
        assert_eq!(hit, LimitHit::Nodes);
        // At --max-nodes (a, b, c), a report to known nodes adds none and fits.
        assert!(t.admit_report(a, &report(2, &["b", "c"])).is_ok());
        // A known node says hello again; a replay is always admitted.
        assert!(t.admit_hello(&hello("b", "z1")).is_ok());
        assert!(t.admit_report(a, &report(1, &["d", "e"])).is_ok());
        // b's path to a would be a third path.
        let b = t.id(&name("b")).unwrap();
        let back = Report {
            sequence: 1,
            paths: vec![sample("b", "a", 100.0, 0, None)],
        };
        let (hit, e) = t.admit_report(b, &back).unwrap_err();
        assert_eq!(hit, LimitHit::Paths);
        assert!(e.to_string().contains("--max-paths"), "{e}");
        assert_eq!(t.path_count(), 2);
    }

    #[test]
    fn replays_are_applied_once() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        let (a, seq) = t.register(&hello("a", "z1"), now);
        assert_eq!(seq, 0);
        t.register(&hello("b", "z1"), now);
        let report = Report {
            sequence: 1,
            paths: vec![sample("a", "b", 100.0, 0, None)],
        };
        assert_eq!(t.apply_report(a, &report, now).unwrap(), Applied::Applied);
        assert_eq!(t.apply_report(a, &report, now).unwrap(), Applied::Duplicate);
        let b = t.id(&name("b")).unwrap();
        assert_eq!(t.path(a, b).unwrap().sent_total, 100);
        assert_eq!(t.register(&hello("a", "z1"), now).1, 1);
    }

    #[test]
    fn a_report_about_another_nodes_path_changes_nothing() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        let (a, _) = t.register(&hello("a", "z1"), now);
        let report = Report {
            sequence: 1,
            paths: vec![
                sample("a", "b", 100.0, 0, None),
                sample("c", "b", 1.0, 0, None),
            ],
        };
        let err = t.apply_report(a, &report, now).unwrap_err();
        assert!(err.to_string().contains("paths[1].src"), "{err}");
        assert_eq!(t.path_count(), 0);
        assert_eq!(t.node(a).applied_seq, 0);
    }

    #[test]
    fn sums_follow_updates_and_staleness() {
        let now = UnixMs(1_000_000);
        let t = mesh(2, 3, |_, _| 100.0, |_, _| 0, now);
        let a = t.id(&name("z0-n0")).unwrap();
        // Two zone peers, both directions.
        let s = t.node_sums(a);
        assert_eq!(s.rtt_n, 4);
        assert_eq!(s.rtt_mean(), Some(100.0));
        let (z0, z1) = (t.zone_of(a), t.zone_of(t.id(&name("z1-n0")).unwrap()));
        assert_eq!(t.link_sums(z0, z1).unwrap().rtt_n, 9);
        let mut t = t;
        let later = UnixMs(now.0 + 31_000);
        t.sweep(later);
        assert_eq!(t.node_sums(a).rtt_n, 0, "stale paths leave the sums");
        assert_eq!(t.state(a, later).0, NodeState::Stale);
    }

    #[test]
    fn a_sweep_in_small_steps_ends_where_one_pass_ends() {
        let now = UnixMs(1_000_000);
        // Every path into z0-n1 loses everything: it turns unreachable. Then half the nodes go
        // quiet long enough for their paths to turn stale.
        let mut whole = mesh(
            3,
            4,
            |s, d| 100.0 + (s.len() + d.len()) as f64,
            |_, d| if d == "z0-n1" { 100 } else { 0 },
            now,
        );
        let later = UnixMs(now.0 + 31_000);
        for n in ["z1-n0", "z1-n1", "z2-n3"] {
            let id = whole.id(&name(n)).unwrap();
            let paths = whole
                .nodes()
                .filter(|(other, _)| *other != id)
                .map(|(_, info)| {
                    let dst = info.name.as_str();
                    sample(n, dst, 120.0, if dst == "z0-n1" { 100 } else { 0 }, None)
                })
                .collect();
            let seq = whole.node(id).applied_seq + 1;
            whole
                .apply_report(
                    id,
                    &Report {
                        sequence: seq,
                        paths,
                    },
                    later,
                )
                .unwrap();
        }
        let mut stepped = whole.clone();
        whole.sweep(later);
        let mut steps = 0;
        while !stepped.sweep_step(later, 5) {
            steps += 1;
            assert!(steps < 1_000, "the pass never ends");
        }
        assert!(
            steps >= 10,
            "{steps} steps for 132 paths of at most 5 (whole sources)"
        );
        for (id, info) in whole.nodes() {
            assert_eq!(
                whole.state(id, later),
                stepped.state(id, later),
                "{}",
                info.name
            );
            // The same paths, added up in another order.
            let (a, b) = (whole.node_sums(id), stepped.node_sums(id));
            assert_eq!((a.rtt_n, a.loss_n, a.tput_n), (b.rtt_n, b.loss_n, b.tput_n));
            assert!(
                (a.rtt - b.rtt).abs() <= 1e-6 * a.rtt.abs().max(1.0),
                "{}",
                info.name
            );
            assert!((a.loss - b.loss).abs() <= 1e-9, "{}", info.name);
        }
        let unreachable = whole.id(&name("z0-n1")).unwrap();
        assert_eq!(whole.state(unreachable, later).0, NodeState::Down);
        let zones = |t: &Topology| t.list_zones(later).zones;
        assert_eq!(zones(&whole), zones(&stepped));
        assert_eq!(whole.membership_version(), stepped.membership_version());
    }

    #[test]
    fn figures_held_back_by_throughput_tests_stay_current_for_a_bounded_time() {
        // All three nodes measured at `now`, then every window arrives during a long test of
        // a and b (so c's windows toward them are held back too).
        let now = UnixMs(1_000_000);
        let mut t = mesh(1, 3, |_, _| 100.0, |_, _| 0, now);
        let mut quiet = t.clone();
        let names = ["z0-n0", "z0-n1", "z0-n2"];
        let ids: Vec<NodeId> = names.iter().map(|n| t.id(&name(n)).unwrap()).collect();
        t.note_throughput_test(
            ids[0],
            ids[1],
            UnixMs(now.0 + 1_000),
            UnixMs(now.0 + 300_000),
        );
        let figures_before = t.path(ids[2], ids[1]).unwrap().merged;
        let stale_after = t.config.path.stale_after_ms;
        let report_all = |t: &mut Topology, at: UnixMs, seq: u64| {
            for (i, src) in names.iter().enumerate() {
                let paths = names
                    .iter()
                    .filter(|d| *d != src)
                    .map(|dst| sample(src, dst, 5_000.0, 50, None))
                    .collect();
                t.apply_report(
                    ids[i],
                    &Report {
                        sequence: seq,
                        paths,
                    },
                    at,
                )
                .unwrap();
            }
            t.sweep(at);
        };
        let mut at = now;
        for seq in 10.. {
            at = UnixMs(at.0 + 10_000);
            if at.0 > now.0 + 2 * stale_after {
                break;
            }
            report_all(&mut t, at, seq);
        }
        // Past the stale timeout, the nodes are READY with their figures from before the test
        // (the loaded windows' 5 ms and 50 % loss never enter them), and they rank as measured.
        let at = UnixMs(now.0 + 2 * stale_after);
        for &id in &ids {
            assert_eq!(t.state(id, at).0, NodeState::Ready);
        }
        assert_eq!(t.path(ids[2], ids[1]).unwrap().merged, figures_before);
        assert!(!t.path(ids[2], ids[1]).unwrap().is_stale(at, &t.config.path));
        let ranked = t.rank_ids(&RankQuery::default(), at).unwrap();
        assert!(
            ranked
                .iter()
                .all(|r| r.reason.is_empty() && r.figures.loss == Some(0.0)),
            "{ranked:?}"
        );
        // Without the held-back windows the same figures are stale by then.
        quiet.sweep(at);
        assert_eq!(quiet.state(ids[0], at).0, NodeState::Stale);
        // The hold is bounded: still under test, the figures go stale HOLD_STALE_AFTERS stale
        // timeouts after they were measured, plus the stale timeout.
        let mut seq = 100;
        let end = now.0 + (path::HOLD_STALE_AFTERS + 1) * stale_after + 10_000;
        let mut at = UnixMs(now.0 + 2 * stale_after);
        while at.0 < end {
            at = UnixMs(at.0 + 10_000);
            seq += 1;
            report_all(&mut t, at, seq);
        }
        for &id in &ids {
            assert_eq!(t.state(id, at).0, NodeState::Stale, "held for ever");
        }
        assert!(t.path(ids[2], ids[1]).unwrap().is_stale(at, &t.config.path));
    }

    #[test]
    fn windows_measured_during_a_throughput_test_stay_out_of_the_figures() {
        let now = UnixMs(1_000_000);
        let mut t = mesh(1, 3, |_, _| 100.0, |_, _| 0, now);
        let (a, b, c) = (
            t.id(&name("z0-n0")).unwrap(),
            t.id(&name("z0-n1")).unwrap(),
            t.id(&name("z0-n2")).unwrap(),
        );
        // a sends to b from 1,005,000 to 1,009,000; c probes b in a window that overlaps it,
        // with RTTs the queue of the test inflated.
        t.note_throughput_test(a, b, UnixMs(1_005_000), UnixMs(1_009_000));
        let loaded = |seq, at: i64| Report {
            sequence: seq,
            paths: vec![zonemesh_proto::domain::PathSample {
                window_start: UnixMs(at - 10_000),
                window_end: UnixMs(at),
                ..sample("z0-n2", "z0-n1", 5_000.0, 50, None)
            }],
        };
        let before = t.path(c, b).unwrap().clone();
        t.apply_report(c, &loaded(100, 1_012_000), UnixMs(1_012_000))
            .unwrap();
        let after = t.path(c, b).unwrap();
        assert_eq!(after.merged, before.merged, "figures unchanged");
        assert_eq!(
            after.sent_total,
            before.sent_total + 100,
            "but every probe counted"
        );
        assert_eq!(t.windows_under_load(), 1);
        // A window that ends long after the test is measured as usual.
        t.apply_report(c, &loaded(101, 1_030_000), UnixMs(1_030_000))
            .unwrap();
        assert!(t.path(c, b).unwrap().merged.sent > before.merged.sent);
        assert_eq!(t.windows_under_load(), 1);
        // b's own window over the test is left out too, whichever peer it probed.
        t.apply_report(
            b,
            &Report {
                sequence: 100,
                paths: vec![sample("z0-n1", "z0-n2", 100.0, 0, None)],
            },
            UnixMs(1_012_000),
        )
        .unwrap();
        assert_eq!(t.windows_under_load(), 2, "b itself was in the test");
    }

    #[test]
    fn gone_agents_turn_down_after_the_timeout() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        let (a, _) = t.register(&hello("a", "z1"), now);
        t.disconnect(a, now);
        assert_eq!(t.state(a, UnixMs(now.0 + 30_000)).0, NodeState::Ready);
        assert_eq!(t.state(a, UnixMs(now.0 + 30_001)).0, NodeState::Down);
    }

    #[test]
    fn a_node_every_probe_to_which_is_lost_is_down() {
        let now = UnixMs(1_000_000);
        let t = mesh(
            1,
            3,
            |_, _| 50.0,
            |_, d| if d == "z0-n2" { 100 } else { 0 },
            now,
        );
        let c = t.id(&name("z0-n2")).unwrap();
        assert_eq!(
            t.state(c, now),
            (NodeState::Down, "every probe to it was lost")
        );
        let a = t.id(&name("z0-n0")).unwrap();
        assert_eq!(t.state(a, now).0, NodeState::Ready);
    }

    #[test]
    fn moving_a_node_to_another_zone_rekeys_its_sums() {
        let now = UnixMs(1_000_000);
        let mut t = mesh(2, 2, |_, _| 80.0, |_, _| 0, now);
        let a = t.id(&name("z0-n0")).unwrap();
        assert_eq!(t.node_sums(a).rtt_n, 2);
        t.register(&hello("z0-n0", "zone-1"), now);
        assert_eq!(t.node_sums(a).rtt_n, 4, "now with the two nodes of zone-1");
        assert_eq!(t.zone(t.zone_of(a)).members.len(), 3);
    }
}
