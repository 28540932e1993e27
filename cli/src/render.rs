//! Plain-text tables of the Topology answers.

use std::fmt::Write as _;

use zonemesh_proto::json::state;
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

/// How output looks: colour (only on a terminal, never with `NO_COLOR`) and the width to fit.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// ANSI colours on.
    pub color: bool,
    /// Columns of the terminal; lines are cut to fit.
    pub width: usize,
}

impl Style {
    /// No colour, no width limit (the demo's output, tests).
    pub fn plain() -> Self {
        Self {
            color: false,
            width: usize::MAX,
        }
    }

    fn paint(&self, text: &str, code: Option<&str>) -> String {
        match code {
            Some(code) if self.color => format!("\x1b[{code}m{text}\x1b[0m"),
            _ => text.to_owned(),
        }
    }
}

/// ANSI colour of a node state.
fn state_color(s: &str) -> Option<&'static str> {
    match s {
        "READY" => Some("32"),
        "STALE" => Some("33"),
        "DOWN" => Some("31"),
        _ => None,
    }
}

/// Lines of cells, each column padded to its widest cell, cut to `style.width` (the widest column loses characters first, marked with
/// "…"), with the header bold and cell `(row, column)` in the colour `color` gives it.
fn styled_table(
    rows: &[Vec<String>],
    style: &Style,
    color: impl Fn(usize, usize) -> Option<&'static str>,
) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Two spaces of margin and two between columns.
    let total = |w: &[usize]| 2 + w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
    while total(&widths) > style.width {
        let Some((widest, w)) = widths.iter().copied().enumerate().max_by_key(|(_, w)| *w) else {
            break;
        };
        if w <= 6 {
            break;
        }
        widths[widest] = w - 1;
    }
    let mut out = String::new();
    for (r, row) in rows.iter().enumerate() {
        let mut line = String::from("  ");
        for (c, cell) in row.iter().enumerate() {
            let fitted: String = if cell.chars().count() > widths[c] {
                cell.chars()
                    .take(widths[c].saturating_sub(1))
                    .chain(['…'])
                    .collect()
            } else {
                cell.clone()
            };
            let pad = widths[c] - fitted.chars().count();
            let code = if r == 0 { Some("1") } else { color(r, c) };
            line += &style.paint(&fitted, code);
            if c + 1 < row.len() {
                line += &" ".repeat(pad + 2);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// The zone-to-zone matrix of a `ListZones` answer: one row per directed zone pair.
pub fn zones(answer: &v1::ListZonesResponse, style: &Style) -> String {
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
    let mut out = styled_table(&rows, style, |_, _| None);
    if !answer.zones.is_empty() {
        let mut zones = vec![vec![
            "zone".to_owned(),
            "region".into(),
            "nodes".into(),
            "ready".into(),
        ]];
        for z in &answer.zones {
            zones.push(vec![
                z.name.clone(),
                if z.region.is_empty() {
                    "—".into()
                } else {
                    z.region.clone()
                },
                z.nodes.to_string(),
                z.ready_nodes.to_string(),
            ]);
        }
        let not_all_ready: Vec<bool> = answer
            .zones
            .iter()
            .map(|z| z.ready_nodes < z.nodes)
            .collect();
        out = styled_table(&zones, style, |r, c| {
            (c == 3 && not_all_ready[r - 1]).then_some("33")
        }) + "\n"
            + &out;
    }
    out
}

/// A `RankNodes` answer, best first.
pub fn ranking(answer: &v1::RankNodesResponse, style: &Style) -> String {
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
    let states: Vec<&str> = answer.nodes.iter().map(|n| state(n.state)).collect();
    styled_table(&rows, style, |r, c| {
        if c == 7 {
            state_color(states[r - 1])
        } else {
            None
        }
    })
}

/// A `ListNodes` answer.
pub fn nodes(answer: &v1::ListNodesResponse, style: &Style) -> String {
    let why = answer.nodes.iter().any(|n| !n.state_reason.is_empty());
    let mut rows = vec![vec![
        "node".to_owned(),
        "zone".into(),
        "state".into(),
        "agent".into(),
        "RTT p50 in zone".into(),
        "loss in zone".into(),
        "throughput in zone".into(),
        "paths".into(),
        "addresses".into(),
    ]];
    if why {
        rows[0].push("why not ready".into());
    }
    for n in &answer.nodes {
        let mut row = vec![
            n.name.clone(),
            n.zone.clone(),
            state(n.state).into(),
            if n.connected {
                "connected".into()
            } else {
                "gone".into()
            },
            if n.zone_paths_measured > 0 {
                micros(n.zone_rtt_p50_us)
            } else {
                "—".into()
            },
            if n.zone_paths_measured > 0 {
                percent(n.zone_loss_ratio)
            } else {
                "—".into()
            },
            rate(n.zone_throughput_bps),
            n.zone_paths_measured.to_string(),
            n.addresses.join(","),
        ];
        if why {
            row.push(n.state_reason.clone());
        }
        rows.push(row);
    }
    let states: Vec<&str> = answer.nodes.iter().map(|n| state(n.state)).collect();
    styled_table(&rows, style, |r, c| {
        if c == 2 {
            state_color(states[r - 1])
        } else {
            None
        }
    })
}

/// A `GetPath` answer.
pub fn path(answer: &v1::GetPathResponse) -> String {
    let mut out = format!("  {} → {}\n", answer.src, answer.dst);
    let Some(f) = answer.figures else {
        out += "  no figures\n";
        return out;
    };
    let age = |ms: i64| format!("{:.1} s ago", ms as f64 / 1000.0);
    match f.rtt {
        Some(r) if r.samples > 0 || r.p50_us > 0.0 => {
            let _ = writeln!(
                out,
                "  RTT        p50 {}  p90 {}  p99 {}  (min {}, max {}, jitter {})",
                micros(r.p50_us),
                micros(r.p90_us),
                micros(r.p99_us),
                micros(r.min_us),
                micros(r.max_us),
                micros(r.jitter_us)
            );
        }
        _ => out += "  RTT        —\n",
    }
    let _ = writeln!(
        out,
        "  loss       {} (95 % upper bound {}), {} of {} probes answered",
        percent(f.loss_ratio),
        percent(f.loss_upper_95_ratio),
        f.probes_received,
        f.probes_sent
    );
    let _ = writeln!(
        out,
        "  latency    {}, {}{}",
        provenance(f.latency_provenance),
        age(f.latency_age_ms),
        if f.stale { ", STALE" } else { "" }
    );
    let _ = writeln!(
        out,
        "  throughput {} (smoothed {}), {}, {}",
        rate(f.throughput_bps),
        rate(f.throughput_smoothed_bps),
        provenance(f.throughput_provenance),
        age(f.throughput_age_ms)
    );
    out
}

/// A `GetMatrix` answer: rows are sources, columns destinations; as many columns as fit.
pub fn matrix(answer: &v1::GetMatrixResponse, style: &Style) -> String {
    let n = answer.nodes.len();
    let metric = v1::Metric::try_from(answer.metric).unwrap_or(v1::Metric::Unspecified);
    let value = |v: f64| match metric {
        v1::Metric::LossRatio => percent(v),
        v1::Metric::ThroughputBps => rate(v),
        _ => micros(v),
    };
    // Every cell as text (and its colour) first, so that the columns are sized from them.
    let mut cells: Vec<Vec<(String, Option<&'static str>)>> = Vec::with_capacity(n);
    for i in 0..n {
        let mut row = Vec::with_capacity(n);
        for j in 0..n {
            let cell = answer.cells.get(i * n + j).copied().unwrap_or_default();
            let p = v1::Provenance::try_from(cell.provenance).unwrap_or(v1::Provenance::Unknown);
            let (text, c) = match p {
                _ if i == j => ("·".to_owned(), None),
                v1::Provenance::Unknown => ("—".to_owned(), None),
                v1::Provenance::Estimated => (format!("~{}", value(cell.value)), Some("2")),
                v1::Provenance::Measured => {
                    let bad = metric == v1::Metric::LossRatio && cell.value >= 0.01;
                    (value(cell.value), bad.then_some("31"))
                }
            };
            row.push(if cell.stale {
                (format!("{text}!"), Some("33"))
            } else {
                (text, c)
            });
        }
        cells.push(row);
    }
    const CORNER: &str = "from \\ to";
    let label_width = answer
        .nodes
        .iter()
        .map(|s| s.chars().count())
        .chain([CORNER.chars().count()])
        .max()
        .unwrap_or(0);
    let cell_width = answer
        .nodes
        .iter()
        .map(|s| s.chars().count())
        .chain(cells.iter().flatten().map(|(t, _)| t.chars().count()))
        .max()
        .unwrap_or(1);
    let fit = style.width.saturating_sub(2 + label_width) / (cell_width + 2);
    let shown = n.min(fit.max(1));
    let mut rows = vec![
        std::iter::once(CORNER.to_owned())
            .chain(answer.nodes.iter().take(shown).cloned())
            .collect::<Vec<_>>(),
    ];
    let mut colors = vec![vec![None; shown + 1]];
    for (src, row) in answer.nodes.iter().zip(&cells) {
        rows.push(
            std::iter::once(src.clone())
                .chain(row.iter().take(shown).map(|(t, _)| t.clone()))
                .collect(),
        );
        colors.push(
            std::iter::once(None)
                .chain(row.iter().take(shown).map(|(_, c)| *c))
                .collect(),
        );
    }
    let mut out = styled_table(&rows, style, |r, c| colors[r][c]);
    let _ = writeln!(
        out,
        "  {}; ~ estimated from the zone roll-up, ! stale, — unknown{}",
        json_metric_label(metric),
        if shown < n {
            format!("; {shown} of {n} columns fit (--output json has them all)")
        } else {
            String::new()
        }
    );
    out
}

fn json_metric_label(m: v1::Metric) -> &'static str {
    match m {
        v1::Metric::RttP50Us => "RTT p50",
        v1::Metric::RttP99Us => "RTT p99",
        v1::Metric::LossRatio => "loss",
        v1::Metric::ThroughputBps => "throughput",
        v1::Metric::Unspecified => "?",
    }
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
    if !answer.explanation.is_empty() {
        let _ = writeln!(out, "  why:   {}", answer.explanation);
    }
    let _ = writeln!(
        out,
        "  predicted worst RTT {} ({}), worst loss {}, bottleneck throughput {}",
        micros(answer.worst_rtt_us),
        provenance(answer.latency_provenance),
        percent(answer.worst_loss_ratio),
        rate(answer.bottleneck_throughput_bps)
    );
    if let Some(b) = &answer.bottleneck {
        let _ = writeln!(
            out,
            "  predicted time per iteration: {}",
            seconds(answer.predicted_seconds)
        );
        let what = match v1::BottleneckKind::try_from(b.kind) {
            Ok(v1::BottleneckKind::Link) => format!("link {} → {}", b.from, b.to),
            Ok(v1::BottleneckKind::NodeEgress) => format!("node {} (sending)", b.from),
            Ok(v1::BottleneckKind::NodeIngress) => format!("node {} (receiving)", b.to),
            Ok(v1::BottleneckKind::Zones) => format!("zones {} → {}", b.from, b.to),
            Ok(v1::BottleneckKind::RingLatency) => String::new(),
            _ => "nothing".to_owned(),
        };
        if what.is_empty() {
            // The why names the ring's delays itself.
            let _ = writeln!(out, "  bottleneck: {}", b.why);
        } else {
            let _ = writeln!(out, "  bottleneck: {what}: {}", b.why);
        }
        let _ = writeln!(
            out,
            "  estimated figures: {} of {}",
            answer.estimated_figures, answer.prediction_figures
        );
    }
    if !answer.rank_order.is_empty() {
        let _ = writeln!(out, "  rank order: {}", answer.rank_order.join(", "));
    }
    for (i, a) in answer.alternatives.iter().enumerate() {
        let _ = writeln!(
            out,
            "  alternative {}: {} ({})",
            i + 1,
            seconds(a.predicted_seconds),
            a.rank_order.join(", ")
        );
    }
    out
}

/// A duration in seconds, in the unit that reads best.
pub fn seconds(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// An MPI hostfile of a `Place` answer in rank order: one `host slots=N` line per run of
/// consecutive ranks on one node, as Open MPI reads it (ranks fill a host's slots in order).
pub fn hostfile(answer: &v1::PlaceResponse) -> String {
    let mut out = String::new();
    for (host, ranks) in node_runs(&answer.rank_order) {
        let _ = writeln!(out, "{host} slots={ranks}");
    }
    out
}

/// Consecutive ranks on one node: (node, ranks), in rank order.
pub fn node_runs(ranks: &[String]) -> Vec<(&str, u32)> {
    let mut runs: Vec<(&str, u32)> = Vec::new();
    for r in ranks {
        match runs.last_mut() {
            Some((n, k)) if *n == r.as_str() => *k += 1,
            _ => runs.push((r.as_str(), 1)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostfile_lists_the_hosts_in_rank_order() {
        let answer = v1::PlaceResponse {
            rank_order: ["b2", "b1", "a1", "a1", "a3"].map(String::from).to_vec(),
            ..Default::default()
        };
        assert_eq!(
            hostfile(&answer),
            "b2 slots=1\nb1 slots=1\na1 slots=2\na3 slots=1\n"
        );
        assert_eq!(seconds(0.012_34), "12.34 ms");
        assert_eq!(seconds(0.000_5), "500 µs");
    }

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
        let rows = [
            vec!["a".to_owned(), "bb".into()],
            vec!["ccc".into(), "d".into()],
        ];
        let t = styled_table(&rows, &Style::plain(), |_, _| None);
        assert_eq!(t, "  a    bb\n  ccc  d\n");
        // Cut to 12 columns: the widest column gives way first (to 6 at least), marked with "…";
        // colour only when asked.
        let narrow = Style {
            color: false,
            width: 12,
        };
        let long = [vec!["node".to_owned(), "a very long reason".into()]];
        let t = styled_table(&long, &narrow, |_, _| None);
        assert_eq!(t, "  node  a ver…\n", "{t:?}");
        let colored = Style {
            color: true,
            width: 100,
        };
        let t = styled_table(&rows, &colored, |r, c| (r == 1 && c == 1).then_some("31"));
        assert!(
            t.contains("\x1b[31md\x1b[0m") && t.contains("\x1b[1ma\x1b[0m"),
            "{t:?}"
        );
    }
}
