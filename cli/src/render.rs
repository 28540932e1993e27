//! Plain-text tables of the Topology answers.

use std::fmt::Write as _;

use zonemesh_proto::v1;

/// A duration in µs as the most readable unit.
pub fn micros(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// A rate in bit/s as the most readable unit; "—" when unknown.
pub fn rate(bps: f64) -> String {
    if bps <= 0.0 {
        "—".into()
    } else if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else {
        format!("{:.1} Mbit/s", bps / 1e6)
    }
}

/// A ratio as a percentage.
pub fn percent(ratio: f64) -> String {
    format!("{:.2} %", ratio * 100.0)
}

fn provenance(p: i32) -> &'static str {
    match v1::Provenance::try_from(p) {
        Ok(v1::Provenance::Measured) => "measured",
        Ok(v1::Provenance::Estimated) => "estimated",
        _ => "unknown",
    }
}

fn state(s: i32) -> &'static str {
    match v1::NodeState::try_from(s) {
        Ok(v1::NodeState::Ready) => "READY",
        Ok(v1::NodeState::Stale) => "STALE",
        Ok(v1::NodeState::Down) => "DOWN",
        _ => "?",
    }
}

/// Lines of cells, each column padded to its widest cell.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::from("  ");
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            line += cell;
            if c + 1 < row.len() {
                line += &" ".repeat(pad + 2);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// The zone-to-zone matrix of a `ListZones` answer: one row per directed zone pair.
pub fn zones(answer: &v1::ListZonesResponse) -> String {
    let mut rows = vec![vec![
        "from".to_owned(),
        "to".into(),
        "RTT p50".into(),
        "loss".into(),
        "throughput".into(),
        "paths measured".into(),
        "figures".into(),
    ]];
    for link in &answer.links {
        let f = link.figures.unwrap_or_default();
        rows.push(vec![
            link.src_zone.clone(),
            link.dst_zone.clone(),
            f.rtt.map_or("—".into(), |r| micros(r.p50_us)),
            percent(f.loss_ratio),
            rate(f.throughput_bps),
            link.measured_paths.to_string(),
            provenance(f.latency_provenance).into(),
        ]);
    }
    table(&rows)
}

/// A `RankNodes` answer, best first.
pub fn ranking(answer: &v1::RankNodesResponse) -> String {
    let mut rows = vec![vec![
        "#".to_owned(),
        "node".into(),
        "zone".into(),
        "score".into(),
        "RTT p50".into(),
        "loss".into(),
        "throughput".into(),
        "state".into(),
    ]];
    for (i, n) in answer.nodes.iter().enumerate() {
        let mut st = state(n.state).to_owned();
        if !n.reason.is_empty() {
            st = n.reason.clone();
        }
        rows.push(vec![
            (i + 1).to_string(),
            n.node.clone(),
            n.zone.clone(),
            format!("{:.3}", n.score),
            micros(n.rtt_p50_us),
            percent(n.loss_ratio),
            rate(n.throughput_bps),
            st,
        ]);
    }
    table(&rows)
}

/// A `Place` answer.
pub fn placement(answer: &v1::PlaceResponse) -> String {
    let mut out = String::new();
    let nodes: Vec<String> = answer
        .assignments
        .iter()
        .map(|a| {
            if a.workers > 1 {
                format!("{} ({} workers)", a.node, a.workers)
            } else {
                a.node.clone()
            }
        })
        .collect();
    let _ = writeln!(out, "  nodes: {}", nodes.join(", "));
    let _ = writeln!(out, "  zones: {}", answer.zones.join(", "));
    let _ = writeln!(
        out,
        "  predicted worst RTT {} ({}), worst loss {}, bottleneck throughput {}",
        micros(answer.worst_rtt_us),
        provenance(answer.latency_provenance),
        percent(answer.worst_loss_ratio),
        rate(answer.bottleneck_throughput_bps)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_well() {
        assert_eq!(micros(85.2), "85 µs");
        assert_eq!(micros(2_150.0), "2.15 ms");
        assert_eq!(micros(10_400.0), "10.4 ms");
        assert_eq!(rate(9.6e7), "96.0 Mbit/s");
        assert_eq!(rate(1.2e9), "1.20 Gbit/s");
        assert_eq!(rate(0.0), "—");
        assert_eq!(percent(0.0512), "5.12 %");
    }

    #[test]
    fn tables_align_their_columns() {
        let t = table(&[
            vec!["a".into(), "bb".into()],
            vec!["ccc".into(), "d".into()],
        ]);
        assert_eq!(t, "  a    bb\n  ccc  d\n");
    }
}
