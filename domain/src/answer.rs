//! What the engine answers: node and zone views, path figures, matrices, rankings and
//! placements. Every figure says whether it was measured on the path itself or estimated.

use std::net::IpAddr;

use crate::{IcmpMode, Metric, NodeName, UnixMs, ZoneName};

/// Where a figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub enum Provenance {
    /// Measured on the path itself.
    Measured,
    /// Estimated from other paths (the model of the measured network).
    Estimated,
    /// Nobody knows.
    #[default]
    Unknown,
}

/// A node's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeState {
    /// Fresh.
    Ready,
    /// Connected but without fresh samples.
    Stale,
    /// Its agent is gone (or never connected): nothing is known of its network, and nothing
    /// about it is a network fault.
    Down,
    /// Its agent is connected, but every probe its peers sent it was lost: a network fault.
    Unreachable,
}

impl NodeState {
    /// The upper-case name users see: `READY`, `STALE`, `DOWN` or `UNREACHABLE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "READY",
            Self::Stale => "STALE",
            Self::Down => "DOWN",
            Self::Unreachable => "UNREACHABLE",
        }
    }

    /// Whether nothing may be placed on it: its agent is gone, or the network does not reach it.
    pub fn is_out(self) -> bool {
        matches!(self, Self::Down | Self::Unreachable)
    }
}

/// RTT statistics of a path's sliding window (or of a roll-up or an estimate), µs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RttSummary {
    /// Replies behind the figures (0 for estimates).
    pub samples: u64,
    /// Smallest (0 when unknown).
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest (0 when unknown).
    pub max_us: f64,
    /// Mean (0 when unknown).
    pub mean_us: f64,
    /// Jitter (0 when unknown).
    pub jitter_us: f64,
}

/// Figures of one directed path, or of the roll-up of many.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PathFigures {
    /// Where the RTT and loss figures come from.
    pub latency_provenance: Provenance,
    /// Age of the newest RTT and loss sample, ms (0 when unknown).
    pub latency_age_ms: i64,
    /// RTT statistics.
    pub rtt: Option<RttSummary>,
    /// Loss ratio over the sliding window.
    pub loss_ratio: f64,
    /// Upper end of the 95 % Wilson interval of the loss ratio.
    pub loss_upper_95_ratio: f64,
    /// Probes sent in the sliding window.
    pub probes_sent: u64,
    /// Replies received in the sliding window.
    pub probes_received: u64,
    /// Where the throughput figure comes from.
    pub throughput_provenance: Provenance,
    /// Age of the newest throughput test, ms (0 when unknown).
    pub throughput_age_ms: i64,
    /// Latest throughput test, bit/s.
    pub throughput_bps: f64,
    /// Exponentially smoothed throughput, bit/s.
    pub throughput_smoothed_bps: f64,
    /// Whether the newest sample is older than the stale timeout.
    pub stale: bool,
    /// Probes sent since the aggregator first saw the path.
    pub probes_sent_total: u64,
    /// Replies received since the aggregator first saw the path.
    pub probes_received_total: u64,
    /// The share of data segments retransmitted in the path's throughput tests, smoothed.
    pub retransmit_ratio: Option<f64>,
    /// Median time of a small message's request and response between the agents, µs, smoothed.
    pub message_exchange_p50_us: Option<f64>,
    /// Mean of the same exchanges, µs, smoothed.
    pub message_exchange_mean_us: Option<f64>,
}

/// One node as `ListNodes` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// Name.
    pub name: NodeName,
    /// Zone.
    pub zone: ZoneName,
    /// Region, when known.
    pub region: Option<ZoneName>,
    /// Advertised addresses, best first.
    pub addresses: Vec<IpAddr>,
    /// State.
    pub state: NodeState,
    /// Why it is not READY; empty when it is.
    pub state_reason: &'static str,
    /// Last message from its agent.
    pub last_seen: Option<UnixMs>,
    /// Agent version.
    pub agent_version: String,
    /// How its agent measures RTT and loss.
    pub icmp_mode: Option<IcmpMode>,
    /// Its agent's TCP responder port (0 when unknown).
    pub probe_port: u16,
    /// Mean median RTT of its own measured paths inside its zone, µs (0 when none): the paths
    /// to the zone-mates in `nodes_left_out` are not counted.
    pub zone_rtt_p50_us: f64,
    /// Mean loss ratio of those paths.
    pub zone_loss_ratio: f64,
    /// Mean throughput of those paths, bit/s (0 when none measured).
    pub zone_throughput_bps: f64,
    /// Measured paths behind the three figures above.
    pub zone_paths_measured: u32,
    /// Zone-mates with a fault of their own (in the engine's model) whose paths the figures
    /// above leave out, by name; empty when they leave out none.
    pub nodes_left_out: Vec<NodeName>,
    /// Whether its agent's stream is open.
    pub connected: bool,
    /// The most the node sends, bit/s, as the engine's model has it (the egress limit its
    /// throughput tests show, which `Place` prices a job with); `None` when no test shows one.
    pub egress_cap_bps: Option<f64>,
    /// The most the node receives, bit/s, likewise.
    pub ingress_cap_bps: Option<f64>,
}

/// A zone with its node counts.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneView {
    /// Name.
    pub name: ZoneName,
    /// Region, when known.
    pub region: Option<ZoneName>,
    /// Nodes.
    pub nodes: u32,
    /// READY nodes.
    pub ready_nodes: u32,
}

/// The roll-up of the measured paths from one zone to another (or inside one zone).
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneLink {
    /// Source zone.
    pub src_zone: ZoneName,
    /// Destination zone.
    pub dst_zone: ZoneName,
    /// The zone pair's own figures (the engine's model: what belongs to the zone pair, apart
    /// from its nodes' own faults).
    pub figures: PathFigures,
    /// Measured paths behind them.
    pub measured_paths: u32,
    /// Nodes of the two zones whose own fault the figures leave out, by name.
    pub nodes_left_out: Vec<NodeName>,
    /// The open faults of this zone link (filled by the aggregator from its faults task).
    pub faults: Vec<crate::Fault>,
}

/// `ListZones`: every zone, and a page of the links between them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Zones {
    /// Zones, by name.
    pub zones: Vec<ZoneView>,
    /// Links with measured paths, by source and destination zone.
    pub links: Vec<ZoneLink>,
    /// Where the next page of links starts, if there is one.
    pub next_offset: Option<usize>,
}

/// `ListNodes`: a page of nodes, by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Nodes {
    /// The nodes.
    pub nodes: Vec<NodeView>,
    /// Where the next page starts, if there is one.
    pub next_offset: Option<usize>,
}

/// `GetPath`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathAnswer {
    /// Source.
    pub src: NodeName,
    /// Destination.
    pub dst: NodeName,
    /// Its figures.
    pub figures: PathFigures,
    /// The open faults that explain what it shows: its nodes', their zones' link's, its own
    /// (filled by the aggregator from its faults task).
    pub faults: Vec<crate::Fault>,
}

/// One cell of a matrix.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MatrixCell {
    /// The metric's value (0 when unknown).
    pub value: f64,
    /// Where it comes from.
    pub provenance: Provenance,
    /// Age of the sample behind it, ms.
    pub age_ms: i64,
    /// Whether the path's newest sample is older than the stale timeout.
    pub stale: bool,
}

/// `GetMatrix`: a page of rows. Cell `(i, j)` of the page is the path `nodes[first_row + i] ->
/// nodes[j]`, row-major; the diagonal is unknown.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Matrix {
    /// The metric.
    pub metric: Metric,
    /// Row and column order: every node of the matrix, in every page.
    pub nodes: Vec<NodeName>,
    /// The row this page starts at.
    pub first_row: usize,
    /// The cells of this page's rows.
    pub cells: Vec<MatrixCell>,
    /// Where the next page of rows starts, if there is one.
    pub next_offset: Option<usize>,
}

/// One ranked node with the figures behind its score.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedNode {
    /// The node.
    pub node: NodeName,
    /// Its zone.
    pub zone: ZoneName,
    /// 0 (worst) .. 1 (best) among the candidates of the query.
    pub score: f64,
    /// Its state.
    pub state: NodeState,
    /// Why it ranks where it does when it is not READY or has no figures.
    pub reason: String,
    /// Mean median RTT of the scoring paths, µs (its own: see `nodes_left_out`).
    pub rtt_p50_us: f64,
    /// Mean loss ratio of the scoring paths.
    pub loss_ratio: f64,
    /// Mean throughput of the scoring paths, bit/s.
    pub throughput_bps: f64,
    /// Scoring paths that were measured.
    pub paths_measured: u32,
    /// Scoring paths that were estimated.
    pub paths_estimated: u32,
    /// Age of the oldest sample behind the figures, ms.
    pub oldest_age_ms: i64,
    /// Zone-mates with a fault of their own (in the engine's model) whose paths the scoring
    /// paths leave out, by name; empty when they leave out none (always, with peers).
    pub nodes_left_out: Vec<NodeName>,
}

/// `RankNodes`: best first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ranking {
    /// The nodes.
    pub nodes: Vec<RankedNode>,
}

/// Workers assigned to one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// The node.
    pub node: NodeName,
    /// Its zone.
    pub zone: ZoneName,
    /// Workers on it.
    pub workers: u32,
}

/// `Place`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaceAnswer {
    /// Nodes with their workers, in the order they were chosen.
    pub assignments: Vec<Assignment>,
    /// Zones used, in the order of the assignments.
    pub zones: Vec<ZoneName>,
    /// Worst median RTT between two chosen nodes, µs (0 with one node).
    pub worst_rtt_us: f64,
    /// Worst loss ratio between two chosen nodes.
    pub worst_loss_ratio: f64,
    /// Smallest throughput between two chosen nodes, when any is known.
    pub bottleneck_throughput_bps: Option<f64>,
    /// Measured when every pair among the chosen nodes is measured.
    pub latency_provenance: Provenance,
    /// The same for throughput.
    pub throughput_provenance: Provenance,
    /// Age of the oldest figure behind the prediction, ms.
    pub oldest_age_ms: i64,
    /// One line: why these nodes.
    pub explanation: String,
    /// The node of each rank, rank 0 first (a node with several workers holds consecutive
    /// ranks). With a job, the order that minimises its predicted time; else the assignments'.
    pub ranks: Vec<NodeName>,
    /// The job's predicted time per iteration, when the query gave a job.
    pub prediction: Option<JobPrediction>,
    /// Runner-up placements (with a job, as many as asked for and found), fastest first.
    pub alternatives: Vec<PlaceAlternative>,
}

/// What decided a predicted time.
#[derive(Debug, Clone, PartialEq)]
pub enum JobBottleneck {
    /// Nothing crosses the network.
    None,
    /// The link between two nodes.
    Link {
        /// Sending node.
        from: NodeName,
        /// Receiving node.
        to: NodeName,
    },
    /// A node's own link, shared by the flows it sends or receives at once.
    Node {
        /// The node.
        node: NodeName,
        /// Its receiving side (else its sending side).
        ingress: bool,
    },
    /// The capacity between two zones.
    Zones {
        /// Source zone.
        from: ZoneName,
        /// Destination zone.
        to: ZoneName,
    },
    /// The delays around the ring, not any one link's rate.
    RingLatency,
}

/// A job's predicted time per iteration on a placement.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPrediction {
    /// Seconds per iteration of the collective.
    pub seconds: f64,
    /// What decided it.
    pub bottleneck: JobBottleneck,
    /// One line: why that is the bottleneck (the term and its figures).
    pub why: String,
    /// Link figures (RTT and loss, rate) the prediction used.
    pub figures: u32,
    /// How many of them were estimated rather than measured.
    pub estimated_figures: u32,
}

/// A runner-up placement.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaceAlternative {
    /// The node of each rank.
    pub ranks: Vec<NodeName>,
    /// Its predicted time per iteration, seconds.
    pub seconds: f64,
}
