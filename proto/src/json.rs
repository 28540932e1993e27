//! JSON views of the Topology answers, shared by the aggregator's web API and the CLI's
//! `--output json`: field names as in the proto, enums by their short names (`READY`,
//! `MEASURED`, `RTT_P50_US`), durations and figures in the proto's units.

use serde_json::{Value, json};

use crate::v1;

/// `NODE_STATE_READY` → `READY`.
pub fn state(s: i32) -> &'static str {
    match v1::NodeState::try_from(s).unwrap_or(v1::NodeState::Unspecified) {
        v1::NodeState::Ready => "READY",
        v1::NodeState::Stale => "STALE",
        v1::NodeState::Down => "DOWN",
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

fn rtt(r: &v1::RttStats) -> Value {
    json!({
        "samples": r.samples, "min_us": r.min_us, "p50_us": r.p50_us, "p90_us": r.p90_us,
        "p99_us": r.p99_us, "max_us": r.max_us, "mean_us": r.mean_us, "jitter_us": r.jitter_us,
    })
}

/// A path's (or a roll-up's) figures.
pub fn figures(f: &v1::PathFigures) -> Value {
    json!({
        "latency_provenance": provenance(f.latency_provenance),
        "latency_age_ms": f.latency_age_ms,
        "rtt": f.rtt.as_ref().map(rtt),
        "loss_ratio": f.loss_ratio,
        "loss_upper_95_ratio": f.loss_upper_95_ratio,
        "probes_sent": f.probes_sent,
        "probes_received": f.probes_received,
        "throughput_provenance": provenance(f.throughput_provenance),
        "throughput_age_ms": f.throughput_age_ms,
        "throughput_bps": f.throughput_bps,
        "throughput_smoothed_bps": f.throughput_smoothed_bps,
        "stale": f.stale,
        "probes_sent_total": f.probes_sent_total,
        "probes_received_total": f.probes_received_total,
    })
}

/// One node.
pub fn node(n: &v1::Node) -> Value {
    json!({
        "name": n.name, "zone": n.zone, "region": n.region, "addresses": n.addresses,
        "state": state(n.state), "state_reason": n.state_reason, "connected": n.connected,
        "last_seen_unix_ms": n.last_seen_unix_ms, "agent_version": n.agent_version,
        "probe_port": n.probe_port,
        "zone_rtt_p50_us": n.zone_rtt_p50_us, "zone_loss_ratio": n.zone_loss_ratio,
        "zone_throughput_bps": n.zone_throughput_bps,
        "zone_paths_measured": n.zone_paths_measured,
    })
}

/// `ListNodes`.
pub fn nodes(r: &v1::ListNodesResponse) -> Value {
    json!({ "nodes": r.nodes.iter().map(node).collect::<Vec<_>>() })
}

/// `ListZones`.
pub fn zones(r: &v1::ListZonesResponse) -> Value {
    json!({
        "zones": r.zones.iter().map(|z| json!({
            "name": z.name, "region": z.region, "nodes": z.nodes, "ready_nodes": z.ready_nodes,
        })).collect::<Vec<_>>(),
        "links": r.links.iter().map(|l| json!({
            "src_zone": l.src_zone, "dst_zone": l.dst_zone,
            "figures": l.figures.as_ref().map(figures), "measured_paths": l.measured_paths,
        })).collect::<Vec<_>>(),
    })
}

/// `GetPath`.
pub fn path(r: &v1::GetPathResponse) -> Value {
    json!({ "src": r.src, "dst": r.dst, "figures": r.figures.as_ref().map(figures) })
}

/// `GetMatrix`: the cells row by row (`cells[i][j]` is the path `nodes[i] → nodes[j]`).
pub fn matrix(r: &v1::GetMatrixResponse) -> Value {
    let n = r.nodes.len();
    let rows: Vec<Value> = (0..n)
        .map(|i| {
            Value::Array(
                r.cells
                    .iter()
                    .skip(i * n)
                    .take(n)
                    .map(|c| {
                        json!({
                            "value": c.value, "provenance": provenance(c.provenance),
                            "age_ms": c.age_ms, "stale": c.stale,
                        })
                    })
                    .collect(),
            )
        })
        .collect();
    json!({ "metric": metric(r.metric), "nodes": r.nodes, "cells": rows })
}

/// `RankNodes`.
pub fn rank(r: &v1::RankNodesResponse) -> Value {
    json!({
        "nodes": r.nodes.iter().map(|n| json!({
            "node": n.node, "zone": n.zone, "score": n.score, "state": state(n.state),
            "reason": n.reason, "rtt_p50_us": n.rtt_p50_us, "loss_ratio": n.loss_ratio,
            "throughput_bps": n.throughput_bps, "paths_measured": n.paths_measured,
            "paths_estimated": n.paths_estimated,
        })).collect::<Vec<_>>(),
    })
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
    })
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
        let v = matrix(&m);
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
