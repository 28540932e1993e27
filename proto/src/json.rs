//! JSON views of the Topology answers, shared by the aggregator's web API and the CLI's
//! `--output json`: field names as in the proto, enums by their short names (`READY`,
//! `MEASURED`, `RTT_P50_US`), durations and figures in the proto's units.

use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use crate::v1;

/// A figure that is 0 where the proto says "unknown" (left out of the JSON).
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// `NODE_STATE_READY` → `READY`.
pub fn state(s: i32) -> &'static str {
    match v1::NodeState::try_from(s).unwrap_or(v1::NodeState::Unspecified) {
        v1::NodeState::Ready => "READY",
        v1::NodeState::Stale => "STALE",
        v1::NodeState::Down => "DOWN",
        v1::NodeState::Unreachable => "UNREACHABLE",
        v1::NodeState::Unspecified => "UNSPECIFIED",
    }
}

/// `PROVENANCE_MEASURED` → `MEASURED`.
pub fn provenance(p: i32) -> &'static str {
    match v1::Provenance::try_from(p).unwrap_or(v1::Provenance::Unknown) {
        v1::Provenance::Measured => "MEASURED",
        v1::Provenance::Estimated => "ESTIMATED",
        v1::Provenance::Unknown => "UNKNOWN",
    }
}

/// `METRIC_RTT_P50_US` → `RTT_P50_US`.
pub fn metric(m: i32) -> &'static str {
    match v1::Metric::try_from(m).unwrap_or(v1::Metric::Unspecified) {
        v1::Metric::RttP50Us => "RTT_P50_US",
        v1::Metric::RttP99Us => "RTT_P99_US",
        v1::Metric::LossRatio => "LOSS_RATIO",
        v1::Metric::ThroughputBps => "THROUGHPUT_BPS",
        v1::Metric::Unspecified => "UNSPECIFIED",
    }
}

/// The metric a name (`rtt`, `rtt_p99`, `loss`, `throughput`, or the JSON names) stands for.
pub fn parse_metric(name: &str) -> Option<v1::Metric> {
    match name.to_ascii_lowercase().as_str() {
        "rtt" | "rtt_p50" | "rtt_p50_us" => Some(v1::Metric::RttP50Us),
        "rtt_p99" | "rtt_p99_us" => Some(v1::Metric::RttP99Us),
        "loss" | "loss_ratio" => Some(v1::Metric::LossRatio),
        "throughput" | "throughput_bps" => Some(v1::Metric::ThroughputBps),
        _ => None,
    }
}

/// A Topology answer as JSON: `serde_json::to_string(&AsJson(&answer))`. The shapes are the
/// `*Json` mirrors below, derived with serde (`remote`: they name the fields of the generated
/// wire types that the JSON shows, in the JSON's order, which is alphabetical as it has always
/// been). Every answer type of the Topology service implements `Serialize` through it.
#[derive(Debug, Clone, Copy)]
pub struct AsJson<'a, T>(pub &'a T);

macro_rules! as_json {
    ($($wire:ty => $mirror:ty),+ $(,)?) => {$(
        impl Serialize for AsJson<'_, $wire> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                <$mirror>::serialize(self.0, s)
            }
        }
    )+};
}

as_json! {
    v1::ListNodesResponse => ListNodesJson,
    v1::ListZonesResponse => ListZonesJson,
    v1::GetPathResponse => GetPathJson,
    v1::RankNodesResponse => RankNodesJson,
    v1::GetTiersResponse => TiersJson,
    v1::ListFaultsResponse => ListFaultsJson,
}

/// `Place`: built value by value, since it adds what the wire does not hold (torchrun-style
/// `node_ranks` from the rank order).
impl Serialize for AsJson<'_, v1::PlaceResponse> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        place(self.0).serialize(serializer)
    }
}

impl Serialize for AsJson<'_, v1::GetMatrixResponse> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        MatrixJson::from(self.0).serialize(s)
    }
}

fn state_name<S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(state(*v))
}

fn provenance_name<S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(provenance(*v))
}

fn metric_name<S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(metric(*v))
}

/// Serializes a list of wire messages through their mirror.
macro_rules! list_with {
    ($name:ident, $wire:ty, $mirror:literal) => {
        fn $name<S: Serializer>(items: &[$wire], s: S) -> Result<S::Ok, S::Error> {
            #[derive(Serialize)]
            struct Item<'a>(#[serde(with = $mirror)] &'a $wire);
            s.collect_seq(items.iter().map(Item))
        }
    };
}

/// `FAULT_ELEMENT_ZONE_LINK` → `ZONE_LINK`.
pub fn fault_element(e: i32) -> &'static str {
    match v1::FaultElement::try_from(e).unwrap_or(v1::FaultElement::Unspecified) {
        v1::FaultElement::Node => "NODE",
        v1::FaultElement::Egress => "EGRESS",
        v1::FaultElement::Ingress => "INGRESS",
        v1::FaultElement::ZoneLink => "ZONE_LINK",
        v1::FaultElement::Path => "PATH",
        v1::FaultElement::Unspecified => "UNSPECIFIED",
    }
}

/// `FAULT_KIND_LOSS` → `LOSS`.
pub fn fault_kind(k: i32) -> &'static str {
    match v1::FaultKind::try_from(k).unwrap_or(v1::FaultKind::Unspecified) {
        v1::FaultKind::Loss => "LOSS",
        v1::FaultKind::Delay => "DELAY",
        v1::FaultKind::Rate => "RATE",
        v1::FaultKind::Unspecified => "UNSPECIFIED",
    }
}

/// `FAULT_SEVERITY_DOWN` → `DOWN`.
pub fn fault_severity(k: i32) -> &'static str {
    match v1::FaultSeverity::try_from(k).unwrap_or(v1::FaultSeverity::Unspecified) {
        v1::FaultSeverity::Degraded => "DEGRADED",
        v1::FaultSeverity::Down => "DOWN",
        v1::FaultSeverity::Unspecified => "UNSPECIFIED",
    }
}

fn fault_element_name<S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(fault_element(*v))
}

fn fault_kind_name<S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(fault_kind(*v))
}

fn fault_severity_name<S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(fault_severity(*v))
}

fn is_zero_ms(v: &i64) -> bool {
    *v == 0
}

fn is_zero_count(v: &u64) -> bool {
    *v == 0
}

list_with!(node_list, v1::Node, "NodeJson");
list_with!(fault_list, v1::Fault, "FaultJson");
list_with!(fault_path_list, v1::FaultPath, "FaultPathJson");
list_with!(zone_list, v1::Zone, "ZoneJson");
list_with!(link_list, v1::ZoneLink, "ZoneLinkJson");
list_with!(ranked_list, v1::RankedNode, "RankedNodeJson");

fn opt_figures<S: Serializer>(f: &Option<v1::PathFigures>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Figures<'a>(#[serde(with = "PathFiguresJson")] &'a v1::PathFigures);
    f.as_ref().map(Figures).serialize(s)
}

fn opt_rtt<S: Serializer>(r: &Option<v1::RttStats>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Rtt<'a>(#[serde(with = "RttJson")] &'a v1::RttStats);
    r.as_ref().map(Rtt).serialize(s)
}

#[derive(Serialize)]
#[serde(remote = "v1::RttStats")]
struct RttJson {
    jitter_us: f64,
    max_us: f64,
    mean_us: f64,
    min_us: f64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    samples: u64,
}

/// A path's (or a roll-up's) figures.
#[derive(Serialize)]
#[serde(remote = "v1::PathFigures")]
struct PathFiguresJson {
    latency_age_ms: i64,
    #[serde(serialize_with = "provenance_name")]
    latency_provenance: i32,
    loss_ratio: f64,
    loss_upper_95_ratio: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_exchange_mean_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_exchange_p50_us: Option<f64>,
    probes_received: u64,
    probes_received_total: u64,
    probes_sent: u64,
    probes_sent_total: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    retransmit_ratio: Option<f64>,
    #[serde(serialize_with = "opt_rtt")]
    rtt: Option<v1::RttStats>,
    stale: bool,
    throughput_age_ms: i64,
    throughput_bps: f64,
    #[serde(serialize_with = "provenance_name")]
    throughput_provenance: i32,
    throughput_smoothed_bps: f64,
}

/// One node (its ICMP mode is not shown).
#[derive(Serialize)]
#[serde(remote = "v1::Node")]
struct NodeJson {
    addresses: Vec<String>,
    agent_version: String,
    connected: bool,
    #[serde(skip_serializing_if = "is_zero")]
    egress_cap_bps: f64,
    #[serde(skip_serializing_if = "is_zero")]
    ingress_cap_bps: f64,
    last_seen_unix_ms: i64,
    name: String,
    nodes_left_out: Vec<String>,
    probe_port: u32,
    region: String,
    #[serde(serialize_with = "state_name")]
    state: i32,
    state_reason: String,
    zone: String,
    zone_loss_ratio: f64,
    zone_paths_measured: u32,
    zone_rtt_p50_us: f64,
    zone_throughput_bps: f64,
}

#[derive(Serialize)]
#[serde(remote = "v1::FaultPath")]
struct FaultPathJson {
    dst: String,
    src: String,
}

#[derive(Serialize)]
#[serde(remote = "v1::Fault")]
struct FaultJson {
    a: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    b: String,
    #[serde(skip_serializing_if = "is_zero_ms")]
    clean_since_unix_ms: i64,
    #[serde(serialize_with = "fault_element_name")]
    element: i32,
    #[serde(serialize_with = "fault_path_list")]
    evidence: Vec<v1::FaultPath>,
    evidence_paths: u32,
    figure: f64,
    #[serde(skip_serializing_if = "is_zero")]
    figure_high: f64,
    #[serde(skip_serializing_if = "is_zero")]
    figure_low: f64,
    #[serde(serialize_with = "fault_kind_name")]
    kind: i32,
    #[serde(skip_serializing_if = "is_zero_count")]
    probes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    reference: f64,
    #[serde(serialize_with = "fault_severity_name")]
    severity: i32,
    since_unix_ms: i64,
}

/// `ListFaults`.
#[derive(Serialize)]
#[serde(remote = "v1::ListFaultsResponse")]
struct ListFaultsJson {
    evaluated_unix_ms: i64,
    #[serde(serialize_with = "fault_list")]
    faults: Vec<v1::Fault>,
}

/// `ListNodes`.
#[derive(Serialize)]
#[serde(remote = "v1::ListNodesResponse")]
struct ListNodesJson {
    #[serde(serialize_with = "node_list")]
    nodes: Vec<v1::Node>,
}

#[derive(Serialize)]
#[serde(remote = "v1::Zone")]
struct ZoneJson {
    name: String,
    nodes: u32,
    ready_nodes: u32,
    region: String,
}

#[derive(Serialize)]
#[serde(remote = "v1::ZoneLink")]
struct ZoneLinkJson {
    dst_zone: String,
    #[serde(serialize_with = "fault_list", skip_serializing_if = "Vec::is_empty")]
    faults: Vec<v1::Fault>,
    #[serde(serialize_with = "opt_figures")]
    figures: Option<v1::PathFigures>,
    measured_paths: u32,
    nodes_left_out: Vec<String>,
    src_zone: String,
}

/// `ListZones`.
#[derive(Serialize)]
#[serde(remote = "v1::ListZonesResponse")]
struct ListZonesJson {
    #[serde(serialize_with = "link_list")]
    links: Vec<v1::ZoneLink>,
    #[serde(serialize_with = "zone_list")]
    zones: Vec<v1::Zone>,
}

/// `GetPath`.
#[derive(Serialize)]
#[serde(remote = "v1::GetPathResponse")]
struct GetPathJson {
    dst: String,
    #[serde(serialize_with = "fault_list", skip_serializing_if = "Vec::is_empty")]
    faults: Vec<v1::Fault>,
    #[serde(serialize_with = "opt_figures")]
    figures: Option<v1::PathFigures>,
    src: String,
}

#[derive(Serialize)]
#[serde(remote = "v1::MatrixCell")]
struct MatrixCellJson {
    age_ms: i64,
    #[serde(serialize_with = "provenance_name")]
    provenance: i32,
    stale: bool,
    value: f64,
}

list_with!(cell_list, v1::MatrixCell, "MatrixCellJson");

#[derive(Serialize)]
struct MatrixRow<'a>(#[serde(serialize_with = "cell_list")] &'a [v1::MatrixCell]);

/// `GetMatrix`: the cells row by row (`cells[i][j]` is the path `nodes[i] → nodes[j]`; an
/// answer with fewer cells than nodes² has short rows).
#[derive(Serialize)]
struct MatrixJson<'a> {
    cells: Vec<MatrixRow<'a>>,
    #[serde(serialize_with = "metric_name")]
    metric: i32,
    nodes: &'a [String],
}

impl<'a> From<&'a v1::GetMatrixResponse> for MatrixJson<'a> {
    fn from(r: &'a v1::GetMatrixResponse) -> Self {
        let n = r.nodes.len();
        let row = |i: usize| {
            let rest = r.cells.get(i * n..).unwrap_or_default();
            MatrixRow(&rest[..n.min(rest.len())])
        };
        Self {
            cells: (0..n).map(row).collect(),
            metric: r.metric,
            nodes: &r.nodes,
        }
    }
}

/// One ranked node (its oldest figure's age is not shown).
#[derive(Serialize)]
#[serde(remote = "v1::RankedNode")]
struct RankedNodeJson {
    loss_ratio: f64,
    node: String,
    nodes_left_out: Vec<String>,
    paths_estimated: u32,
    paths_measured: u32,
    reason: String,
    rtt_p50_us: f64,
    score: f64,
    #[serde(serialize_with = "state_name")]
    state: i32,
    throughput_bps: f64,
    zone: String,
}

/// `RankNodes`.
#[derive(Serialize)]
#[serde(remote = "v1::RankNodesResponse")]
struct RankNodesJson {
    #[serde(serialize_with = "ranked_list")]
    nodes: Vec<v1::RankedNode>,
}

/// `Place`.
pub fn place(r: &v1::PlaceResponse) -> Value {
    json!({
        "assignments": r.assignments.iter().map(|a| json!({
            "node": a.node, "zone": a.zone, "workers": a.workers,
        })).collect::<Vec<_>>(),
        "zones": r.zones,
        "worst_rtt_us": r.worst_rtt_us,
        "worst_loss_ratio": r.worst_loss_ratio,
        "bottleneck_throughput_bps": r.bottleneck_throughput_bps,
        "latency_provenance": provenance(r.latency_provenance),
        "throughput_provenance": provenance(r.throughput_provenance),
        "oldest_age_ms": r.oldest_age_ms,
        "explanation": r.explanation,
        "rank_order": r.rank_order,
        "predicted_seconds": r.predicted_seconds,
        "bottleneck": r.bottleneck.as_ref().map(|b| json!({
            "kind": bottleneck_kind(b.kind), "from": b.from, "to": b.to, "why": b.why,
        })),
        "prediction_figures": r.prediction_figures,
        "estimated_figures": r.estimated_figures,
        "alternatives": r.alternatives.iter().map(|a| json!({
            "rank_order": a.rank_order, "predicted_seconds": a.predicted_seconds,
        })).collect::<Vec<_>>(),
        "node_ranks": node_ranks(&r.rank_order),
    })
}

/// torchrun-style node ranks: one entry per node in rank order (`node_rank` 0, 1, …), with
/// how many consecutive ranks (`nproc_per_node`) it runs and its first global rank.
pub fn node_ranks(rank_order: &[String]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut first = 0usize;
    let mut i = 0;
    while i < rank_order.len() {
        let host = &rank_order[i];
        let mut n = 1;
        while i + n < rank_order.len() && rank_order[i + n] == *host {
            n += 1;
        }
        out.push(json!({
            "host": host, "node_rank": out.len(), "nproc_per_node": n, "first_rank": first,
        }));
        first += n;
        i += n;
    }
    out
}

/// `BOTTLENECK_KIND_LINK` → `LINK`.
pub fn bottleneck_kind(k: i32) -> &'static str {
    use v1::BottleneckKind as K;
    match K::try_from(k).unwrap_or(K::Unspecified) {
        K::None => "NONE",
        K::Link => "LINK",
        K::NodeEgress => "NODE_EGRESS",
        K::NodeIngress => "NODE_INGRESS",
        K::Zones => "ZONES",
        K::RingLatency => "RING_LATENCY",
        K::Unspecified => "UNSPECIFIED",
    }
}

/// `TIER_CUT_RTT` → `RTT`.
pub fn tier_cut(c: i32) -> &'static str {
    match v1::TierCut::try_from(c).unwrap_or(v1::TierCut::Unspecified) {
        v1::TierCut::Rtt => "RTT",
        v1::TierCut::Throughput => "THROUGHPUT",
        v1::TierCut::Unmeasured => "UNMEASURED",
        v1::TierCut::Stale => "STALE",
        v1::TierCut::Unspecified => "UNSPECIFIED",
    }
}

fn tier_cut_name<S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(tier_cut(*v))
}

/// Serializes an optional wire message through its mirror.
macro_rules! option_with {
    ($name:ident, $wire:ty, $mirror:literal) => {
        fn $name<S: Serializer>(item: &Option<$wire>, s: S) -> Result<S::Ok, S::Error> {
            #[derive(Serialize)]
            struct Item<'a>(#[serde(with = $mirror)] &'a $wire);
            item.as_ref().map(Item).serialize(s)
        }
    };
}

option_with!(opt_pair_figure, v1::ZonePairFigure, "ZonePairFigureJson");
option_with!(opt_cut, v1::CutFigures, "CutFiguresJson");
option_with!(opt_thresholds, v1::TierThresholds, "TierThresholdsJson");
option_with!(opt_group_link, v1::TierGroupLink, "TierGroupLinkJson");
list_with!(tier_zone_list, v1::TierZone, "TierZoneJson");
list_with!(tier_group_list, v1::TierGroup, "TierGroupJson");
list_with!(tier_pair_list, v1::TierZonePair, "TierZonePairJson");

#[derive(Serialize)]
#[serde(remote = "v1::ZonePairFigure")]
struct ZonePairFigureJson {
    value: f64,
    zone_a: String,
    zone_b: String,
}

/// The figures behind a cut.
#[derive(Serialize)]
#[serde(remote = "v1::CutFigures")]
struct CutFiguresJson {
    #[serde(serialize_with = "opt_pair_figure")]
    lowest_throughput: Option<v1::ZonePairFigure>,
    stale_pairs: u32,
    unmeasured_pairs: u32,
    #[serde(serialize_with = "opt_pair_figure")]
    worst_rtt: Option<v1::ZonePairFigure>,
}

#[derive(Serialize)]
#[serde(remote = "v1::TierThresholds")]
struct TierThresholdsJson {
    join_rtt_us: f64,
    join_throughput_bps: f64,
    leave_rtt_us: f64,
    leave_throughput_bps: f64,
}

#[derive(Serialize)]
#[serde(remote = "v1::TierZone")]
struct TierZoneJson {
    fresh: bool,
    group: String,
    name: String,
    nodes: Vec<String>,
    region: String,
    rtt_us: f64,
    throughput_bps: f64,
}

#[derive(Serialize)]
#[serde(remote = "v1::TierGroupLink")]
struct TierGroupLinkJson {
    #[serde(serialize_with = "tier_cut_name")]
    cut: i32,
    #[serde(serialize_with = "opt_cut")]
    figures: Option<v1::CutFigures>,
    group: String,
}

#[derive(Serialize)]
#[serde(remote = "v1::TierGroup")]
struct TierGroupJson {
    held: bool,
    #[serde(serialize_with = "opt_cut")]
    inside: Option<v1::CutFigures>,
    name: String,
    #[serde(serialize_with = "opt_group_link")]
    nearest: Option<v1::TierGroupLink>,
    zones: Vec<String>,
}

#[derive(Serialize)]
#[serde(remote = "v1::TierZonePair")]
struct TierZonePairJson {
    fresh: bool,
    rtt_us: f64,
    throughput_bps: f64,
    zone_a: String,
    zone_b: String,
}

/// `GetTiers`.
#[derive(Serialize)]
#[serde(remote = "v1::GetTiersResponse")]
struct TiersJson {
    #[serde(serialize_with = "opt_cut")]
    cluster: Option<v1::CutFigures>,
    computed_at_unix_ms: i64,
    #[serde(serialize_with = "tier_group_list")]
    groups: Vec<v1::TierGroup>,
    #[serde(serialize_with = "tier_pair_list")]
    pairs: Vec<v1::TierZonePair>,
    #[serde(serialize_with = "opt_thresholds")]
    thresholds: Option<v1::TierThresholds>,
    #[serde(serialize_with = "tier_zone_list")]
    zones: Vec<v1::TierZone>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_comes_out_row_by_row_with_names_for_enums() {
        let cell = |value, p: v1::Provenance| v1::MatrixCell {
            value,
            provenance: p as i32,
            age_ms: 5,
            stale: false,
        };
        let m = v1::GetMatrixResponse {
            metric: v1::Metric::LossRatio as i32,
            nodes: vec!["a".into(), "b".into()],
            cells: vec![
                cell(0.0, v1::Provenance::Unknown),
                cell(0.1, v1::Provenance::Measured),
                cell(0.2, v1::Provenance::Estimated),
                cell(0.0, v1::Provenance::Unknown),
            ],
            ..Default::default()
        };
        let v = serde_json::to_value(AsJson(&m)).unwrap();
        assert_eq!(v["metric"], "LOSS_RATIO");
        assert_eq!(v["cells"][0][1]["value"], 0.1);
        assert_eq!(v["cells"][0][1]["provenance"], "MEASURED");
        assert_eq!(v["cells"][1][0]["provenance"], "ESTIMATED");
    }

    #[test]
    fn metric_names_parse() {
        assert_eq!(parse_metric("RTT"), Some(v1::Metric::RttP50Us));
        assert_eq!(parse_metric("loss"), Some(v1::Metric::LossRatio));
        assert_eq!(parse_metric("throughput"), Some(v1::Metric::ThroughputBps));
        assert_eq!(parse_metric("jitter"), None);
    }
}

/// The JSON of representative answers, as the web page and `zonemesh --output json` read it,
/// compared byte for byte with the files in `proto/tests/json/` (captured before the views
/// were derived with serde).
#[cfg(test)]
mod golden {
    use super::*;

    fn rtt() -> v1::RttStats {
        v1::RttStats {
            samples: 1_999,
            min_us: 40.25,
            p50_us: 52.5,
            p90_us: 70.0,
            p99_us: 90.125,
            max_us: 1_234_567.5,
            mean_us: 55.000_001,
            jitter_us: 0.1,
        }
    }

    /// zone-a–zone-b's loss, as the zone link's and a path's answer name it.
    fn link_loss() -> v1::Fault {
        v1::Fault {
            element: v1::FaultElement::ZoneLink as i32,
            a: "zone-a".into(),
            b: "zone-b".into(),
            kind: v1::FaultKind::Loss as i32,
            severity: v1::FaultSeverity::Degraded as i32,
            figure: 0.012_5,
            figure_low: 0.008,
            figure_high: 0.019,
            probes: 1_800,
            evidence_paths: 6,
            since_unix_ms: 1_733_300_000_000,
            ..Default::default()
        }
    }

    fn measured() -> v1::PathFigures {
        v1::PathFigures {
            latency_provenance: v1::Provenance::Measured as i32,
            latency_age_ms: 1_500,
            rtt: Some(rtt()),
            loss_ratio: 0.012_5,
            loss_upper_95_ratio: 0.031,
            probes_sent: 400,
            probes_received: 395,
            throughput_provenance: v1::Provenance::Measured as i32,
            throughput_age_ms: 61_000,
            throughput_bps: 9.41e9,
            throughput_smoothed_bps: 9.2e9,
            stale: false,
            probes_sent_total: 18_446_744_073_709_551_615,
            probes_received_total: 12_000_000_000,
            retransmit_ratio: Some(0.004_25),
            message_exchange_p50_us: Some(61.5),
            message_exchange_mean_us: Some(70.25),
        }
    }

    fn estimated() -> v1::PathFigures {
        v1::PathFigures {
            latency_provenance: v1::Provenance::Estimated as i32,
            latency_age_ms: -3,
            rtt: None,
            loss_ratio: 0.0,
            loss_upper_95_ratio: 1.0,
            throughput_provenance: 17, // not a Provenance: UNKNOWN
            stale: true,
            ..Default::default()
        }
    }

    fn node(name: &str, state: i32, region: &str) -> v1::Node {
        v1::Node {
            name: name.into(),
            zone: "zone-a".into(),
            region: region.into(),
            addresses: vec!["10.0.0.1".into(), "fd00::1".into()],
            state,
            last_seen_unix_ms: 1_733_300_000_123,
            agent_version: "0.1.0".into(),
            icmp_mode: v1::IcmpMode::Raw as i32,
            probe_port: 7402,
            zone_rtt_p50_us: 85.5,
            zone_loss_ratio: 0.0,
            zone_throughput_bps: 1e9,
            zone_paths_measured: 2,
            connected: state == v1::NodeState::Ready as i32,
            egress_cap_bps: if name == "a1" { 9.4e8 } else { 0.0 },
            ingress_cap_bps: 0.0,
            nodes_left_out: if name == "a1" {
                vec!["a2".into()]
            } else {
                Vec::new()
            },
            state_reason: if state == v1::NodeState::Ready as i32 {
                String::new()
            } else {
                "no report for 12 s \"late\" \\ ü 東京".into()
            },
        }
    }

    fn cases() -> Vec<(&'static str, String)> {
        let nodes = v1::ListNodesResponse {
            nodes: vec![
                node("a1", v1::NodeState::Ready as i32, "eu-west"),
                node("a2", v1::NodeState::Stale as i32, ""),
                node("a3", v1::NodeState::Down as i32, ""),
                node("a4", 99, ""),
            ],
            ..Default::default()
        };
        let zones = v1::ListZonesResponse {
            zones: vec![
                v1::Zone {
                    name: "zone-a".into(),
                    region: "eu-west".into(),
                    nodes: 3,
                    ready_nodes: 2,
                },
                v1::Zone {
                    name: "zone-b".into(),
                    region: String::new(),
                    nodes: 1,
                    ready_nodes: 1,
                },
            ],
            links: vec![
                v1::ZoneLink {
                    src_zone: "zone-a".into(),
                    dst_zone: "zone-b".into(),
                    figures: Some(measured()),
                    measured_paths: 6,
                    nodes_left_out: vec!["a2".into()],
                    faults: vec![link_loss()],
                },
                v1::ZoneLink {
                    src_zone: "zone-b".into(),
                    dst_zone: "zone-a".into(),
                    figures: Some(estimated()),
                    measured_paths: 0,
                    nodes_left_out: Vec::new(),
                    faults: Vec::new(),
                },
                v1::ZoneLink {
                    src_zone: "zone-b".into(),
                    dst_zone: "zone-c".into(),
                    figures: None,
                    measured_paths: 0,
                    nodes_left_out: Vec::new(),
                    faults: Vec::new(),
                },
            ],
            ..Default::default()
        };
        let cell = |value, p: v1::Provenance, age_ms, stale| v1::MatrixCell {
            value,
            provenance: p as i32,
            age_ms,
            stale,
        };
        let matrix = v1::GetMatrixResponse {
            metric: v1::Metric::RttP99Us as i32,
            nodes: vec!["a1".into(), "a2".into(), "b1".into()],
            cells: vec![
                cell(0.0, v1::Provenance::Unknown, 0, false),
                cell(101.5, v1::Provenance::Measured, 1_200, false),
                cell(2_000.0, v1::Provenance::Estimated, 30_000, true),
                cell(99.0, v1::Provenance::Measured, 900, false),
                cell(0.0, v1::Provenance::Unknown, 0, false),
                cell(1e-7, v1::Provenance::Measured, 1, false),
                cell(2_001.25, v1::Provenance::Measured, 5, false),
                cell(0.0, v1::Provenance::Unknown, 0, false),
                cell(0.0, v1::Provenance::Unknown, 0, false),
            ],
            ..Default::default()
        };
        // A short answer (fewer cells than nodes²) keeps its short rows.
        let ragged = v1::GetMatrixResponse {
            metric: 42,
            nodes: vec!["a1".into(), "a2".into()],
            cells: vec![cell(3.0, v1::Provenance::Measured, 7, false)],
            ..Default::default()
        };
        let rank = v1::RankNodesResponse {
            nodes: vec![
                v1::RankedNode {
                    node: "a1".into(),
                    zone: "zone-a".into(),
                    score: 0.987_654_321,
                    state: v1::NodeState::Ready as i32,
                    reason: String::new(),
                    rtt_p50_us: 52.5,
                    loss_ratio: 0.0,
                    throughput_bps: 9.41e9,
                    paths_measured: 3,
                    paths_estimated: 1,
                    oldest_age_ms: 4_000,
                    nodes_left_out: vec!["a2".into(), "a4".into()],
                },
                v1::RankedNode {
                    node: "b1".into(),
                    zone: "zone-b".into(),
                    score: -1.0,
                    state: v1::NodeState::Down as i32,
                    reason: "DOWN: agent gone".into(),
                    ..Default::default()
                },
            ],
        };
        let place = v1::PlaceResponse {
            assignments: vec![
                v1::Assignment {
                    node: "a1".into(),
                    zone: "zone-a".into(),
                    workers: 2,
                },
                v1::Assignment {
                    node: "a2".into(),
                    zone: "zone-a".into(),
                    workers: 1,
                },
            ],
            zones: vec!["zone-a".into()],
            worst_rtt_us: 101.5,
            worst_loss_ratio: 0.001,
            bottleneck_throughput_bps: 9.2e9,
            latency_provenance: v1::Provenance::Measured as i32,
            throughput_provenance: v1::Provenance::Estimated as i32,
            oldest_age_ms: 12_345,
            explanation: "one zone holds all 3 workers".into(),
            rank_order: vec!["a1".into(), "a1".into(), "a2".into()],
            predicted_seconds: 0.0125,
            bottleneck: Some(v1::Bottleneck {
                kind: v1::BottleneckKind::Link as i32,
                from: "a1".into(),
                to: "a2".into(),
                why: "8.39 MB at 9.2 Gbit/s".into(),
            }),
            prediction_figures: 3,
            estimated_figures: 1,
            alternatives: vec![v1::PlaceAlternative {
                rank_order: vec!["a2".into(), "a1".into(), "a1".into()],
                predicted_seconds: 0.013,
            }],
        };
        vec![
            ("nodes", pretty(AsJson(&nodes))),
            (
                "nodes_empty",
                pretty(AsJson(&v1::ListNodesResponse::default())),
            ),
            ("zones", pretty(AsJson(&zones))),
            (
                "path_measured",
                pretty(AsJson(&v1::GetPathResponse {
                    src: "a1".into(),
                    dst: "b1".into(),
                    figures: Some(measured()),
                    faults: vec![link_loss()],
                })),
            ),
            (
                "path_estimated",
                pretty(AsJson(&v1::GetPathResponse {
                    src: "a3".into(),
                    dst: "b2".into(),
                    figures: Some(estimated()),
                    faults: Vec::new(),
                })),
            ),
            (
                "path_none",
                pretty(AsJson(&v1::GetPathResponse {
                    src: "a3".into(),
                    dst: "b2".into(),
                    figures: None,
                    faults: Vec::new(),
                })),
            ),
            ("matrix", pretty(AsJson(&matrix))),
            ("matrix_ragged", pretty(AsJson(&ragged))),
            ("rank", pretty(AsJson(&rank))),
            ("place", pretty(AsJson(&place))),
            ("place_empty", pretty(AsJson(&v1::PlaceResponse::default()))),
            ("tiers", pretty(AsJson(&tier_answer()))),
            (
                "tiers_empty",
                pretty(AsJson(&v1::GetTiersResponse::default())),
            ),
            ("faults", pretty(AsJson(&fault_answer()))),
            (
                "faults_empty",
                pretty(AsJson(&v1::ListFaultsResponse::default())),
            ),
        ]
    }

    fn fault_answer() -> v1::ListFaultsResponse {
        v1::ListFaultsResponse {
            faults: vec![
                v1::Fault {
                    element: v1::FaultElement::Node as i32,
                    a: "a2".into(),
                    kind: v1::FaultKind::Loss as i32,
                    severity: v1::FaultSeverity::Down as i32,
                    figure: 0.25,
                    figure_low: 0.21,
                    figure_high: 0.29,
                    probes: 1_400,
                    evidence: vec![v1::FaultPath {
                        src: "a1".into(),
                        dst: "a2".into(),
                    }],
                    evidence_paths: 14,
                    since_unix_ms: 1_733_300_000_123,
                    ..Default::default()
                },
                v1::Fault {
                    element: v1::FaultElement::ZoneLink as i32,
                    a: "zone-a".into(),
                    b: "zone-b".into(),
                    kind: v1::FaultKind::Delay as i32,
                    severity: v1::FaultSeverity::Degraded as i32,
                    figure: 1_950.5,
                    reference: 2_000.0,
                    evidence_paths: 32,
                    since_unix_ms: 1_733_300_000_000,
                    clean_since_unix_ms: 1_733_300_060_000,
                    ..Default::default()
                },
                v1::Fault {
                    element: v1::FaultElement::Egress as i32,
                    a: "b3".into(),
                    kind: v1::FaultKind::Rate as i32,
                    severity: 7, // not a FaultSeverity: UNSPECIFIED
                    figure: 95.6e6,
                    reference: 956e6,
                    ..Default::default()
                },
            ],
            evaluated_unix_ms: 1_733_300_065_000,
        }
    }

    /// Pretty JSON as `zonemesh --output json` prints it (the web API sends the same compact).
    fn tier_answer() -> v1::GetTiersResponse {
        let figure = |a: &str, b: &str, value| v1::ZonePairFigure {
            zone_a: a.into(),
            zone_b: b.into(),
            value,
        };
        let cut = |rtt, unmeasured| v1::CutFigures {
            worst_rtt: Some(figure("zone-a", "zone-b", rtt)),
            lowest_throughput: Some(figure("zone-a", "zone-b", 9.4e9)),
            unmeasured_pairs: unmeasured,
            stale_pairs: 1,
        };
        v1::GetTiersResponse {
            computed_at_unix_ms: 1_733_000_000_000,
            thresholds: Some(v1::TierThresholds {
                join_rtt_us: 500.0,
                leave_rtt_us: 750.5,
                join_throughput_bps: 5e9,
                leave_throughput_bps: 4e9,
            }),
            zones: vec![
                v1::TierZone {
                    name: "zone-a".into(),
                    group: "group-1".into(),
                    nodes: vec!["a1".into(), "a2".into()],
                    fresh: true,
                    rtt_us: 85.5,
                    throughput_bps: 9.4e9,
                    region: "eu-west".into(),
                },
                v1::TierZone {
                    name: "zone-c".into(),
                    group: "group-2".into(),
                    ..Default::default()
                },
            ],
            groups: vec![
                v1::TierGroup {
                    name: "group-1".into(),
                    zones: vec!["zone-a".into(), "zone-b".into()],
                    inside: Some(cut(420.0, 0)),
                    held: true,
                    nearest: Some(v1::TierGroupLink {
                        group: "group-2".into(),
                        figures: Some(v1::CutFigures::default()),
                        cut: v1::TierCut::Unmeasured as i32,
                    }),
                },
                v1::TierGroup {
                    name: "group-2".into(),
                    zones: vec!["zone-c".into()],
                    ..Default::default()
                },
            ],
            cluster: Some(cut(2_150.0, 2)),
            pairs: vec![v1::TierZonePair {
                zone_a: "zone-a".into(),
                zone_b: "zone-b".into(),
                rtt_us: 420.0,
                throughput_bps: 9.4e9,
                fresh: true,
            }],
        }
    }

    fn pretty(view: impl serde::Serialize) -> String {
        serde_json::to_string_pretty(&view).unwrap() + "\n"
    }
    #[test]
    fn the_json_is_what_it_was() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/json");
        for (name, text) in cases() {
            let path = dir.join(format!("{name}.json"));
            if std::env::var_os("ZONEMESH_WRITE_GOLDEN").is_some() {
                std::fs::write(&path, &text).unwrap();
            }
            let want = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text, want, "{name}: the JSON changed");
        }
    }
}
