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

/// How output looks: colour (see [`crate::query::ColorChoice`]) and the width to fit.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// ANSI colours on.
    pub color: bool,
    /// Columns of the terminal; lines are cut to fit.
    pub width: usize,
}

impl Style {
    /// No colour, no width limit (the demo's output, tests).
    #[cfg(any(feature = "demo", test))]
    pub fn plain() -> Self {
        Self {
            color: false,
            width: usize::MAX,
        }
    }
}

/// The colour of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    /// All is well (READY).
    Good,
    /// Look at it (STALE, a zone not all ready, a stale figure).
    Warn,
    /// Something is wrong (DOWN, loss of 1 % or more).
    Bad,
    /// Not measured: estimated.
    Dim,
}

/// The colour of a node state.
fn state_paint(s: &str) -> Option<Paint> {
    match s {
        "READY" => Some(Paint::Good),
        "STALE" => Some(Paint::Warn),
        "DOWN" | "UNREACHABLE" => Some(Paint::Bad),
        _ => None,
    }
}

/// Columns a text takes on a terminal: wide glyphs (CJK, most emoji) take two, combining marks
/// none.
pub fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// The width of each column: its widest cell, then, while the line (two spaces of margin and two
/// between columns) is wider than `fit`, the widest column loses one, down to 6 at least.
/// (Our own policy: comfy-table's dynamic arrangement wraps or shares the room otherwise.)
fn column_widths(rows: &[Vec<String>], fit: usize) -> Vec<usize> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| width(s))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let total = |w: &[usize]| 2 + w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
    while total(&widths) > fit {
        let Some((widest, w)) = widths.iter().copied().enumerate().max_by_key(|(_, w)| *w) else {
            break;
        };
        if w <= 6 {
            break;
        }
        widths[widest] = w - 1;
    }
    widths
}

/// Lines of cells with comfy-table: each column padded to its width ([`column_widths`]), a cell
/// too wide cut and marked with "…", the first row (the header) bold, and cell `(row, column)`
/// of the others in the colour `paint` gives it (when `style.color`).
fn styled_table(
    rows: &[Vec<String>],
    style: &Style,
    paint: impl Fn(usize, usize) -> Option<Paint>,
) -> String {
    use comfy_table::{Attribute, Cell, Color, ColumnConstraint, Row, Table, Width, presets};
    let widths = column_widths(rows, style.width);
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_truncation_indicator("…")
        // Cut inside words, by width, rather than wrap at spaces.
        .set_delimiter('\0')
        // Colour is decided by --color and the terminal, not by comfy-table.
        .force_no_tty();
    table.style_text_only();
    if style.color {
        table.enforce_styling();
    }
    for (r, cells) in rows.iter().enumerate() {
        let mut row = Row::from(cells.iter().enumerate().map(|(c, text)| {
            let cell = Cell::new(text);
            if r == 0 {
                return cell.add_attribute(Attribute::Bold);
            }
            match paint(r, c) {
                Some(Paint::Good) => cell.fg(Color::DarkGreen),
                Some(Paint::Warn) => cell.fg(Color::DarkYellow),
                Some(Paint::Bad) => cell.fg(Color::DarkRed),
                Some(Paint::Dim) => cell.add_attribute(Attribute::Dim),
                None => cell,
            }
        }));
        row.max_height(1);
        table.add_row(row);
    }
    for (column, w) in table.column_iter_mut().zip(&widths) {
        let w = u16::try_from(*w).unwrap_or(u16::MAX);
        column
            .set_padding((2, 0))
            .set_constraint(ColumnConstraint::Absolute(Width::Fixed(
                w.saturating_add(2),
            )));
    }
    table.trim_fmt() + "\n"
}

/// The nodes whose own fault a zone link's (or a node's) figures leave out: "—" for none, at most
/// three names.
fn left_out(nodes: &[String]) -> String {
    match nodes.len() {
        0 => "—".into(),
        1..=3 => nodes.join(", "),
        n => format!("{}, … ({n} nodes)", nodes[..3].join(", ")),
    }
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
        "leaves out".into(),
    ]];
    for link in &answer.links {
        let f = link.figures.unwrap_or_default();
        let latency = f.latency_provenance != v1::Provenance::Unknown as i32;
        rows.push(vec![
            link.src_zone.clone(),
            link.dst_zone.clone(),
            f.rtt.map_or("—".into(), |r| micros(r.p50_us)),
            if latency {
                percent(f.loss_ratio)
            } else {
                "—".into()
            },
            rate(f.throughput_bps),
            link.measured_paths.to_string(),
            provenance(f.latency_provenance).into(),
            left_out(&link.nodes_left_out),
        ]);
    }
    let mut out = styled_table(&rows, style, |_, _| None);
    if answer.links.iter().any(|l| !l.nodes_left_out.is_empty()) {
        out += "zone figures are the zone pair's own: they leave out the own fault (loss, added RTT, \
                slow link) of the nodes under \"leaves out\"; `zonemesh path` shows those nodes' pairs\n";
    }
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
            (c == 3 && not_all_ready[r - 1]).then_some(Paint::Warn)
        }) + "\n"
            + &out;
    }
    for link in &answer.links {
        for f in &link.faults {
            let _ = writeln!(out, "at fault: {}", fault_line(f));
        }
    }
    out
}

/// The element of a fault as users name it: `a2`, `a2 (egress)`, `zone-a – zone-b`,
/// `inside zone-a`, `a1 – a3`.
fn fault_element(f: &v1::Fault) -> String {
    match v1::FaultElement::try_from(f.element).unwrap_or(v1::FaultElement::Unspecified) {
        v1::FaultElement::Node => f.a.clone(),
        v1::FaultElement::Egress => format!("{} (egress)", f.a),
        v1::FaultElement::Ingress => format!("{} (ingress)", f.a),
        v1::FaultElement::ZoneLink if f.a == f.b => format!("inside {}", f.a),
        v1::FaultElement::ZoneLink => format!("{} – {}", f.a, f.b),
        v1::FaultElement::Path => format!("{} – {} (path)", f.a, f.b),
        v1::FaultElement::Unspecified => f.a.clone(),
    }
}

/// A fault's figure with what it is judged against.
fn fault_figure(f: &v1::Fault) -> String {
    match v1::FaultKind::try_from(f.kind).unwrap_or(v1::FaultKind::Unspecified) {
        v1::FaultKind::Loss if f.figure_high > 0.0 => format!(
            "{} ({}–{}{})",
            percent(f.figure),
            percent(f.figure_low),
            percent(f.figure_high),
            if f.probes > 0 {
                format!(" of {} probes", f.probes)
            } else {
                String::new()
            }
        ),
        v1::FaultKind::Loss => percent(f.figure),
        v1::FaultKind::Delay => {
            format!("+{} (baseline {})", micros(f.figure), micros(f.reference))
        }
        v1::FaultKind::Rate => format!("{} (of {})", rate(f.figure), rate(f.reference)),
        v1::FaultKind::Unspecified => format!("{}", f.figure),
    }
}

/// How long ago `unix_ms` was, at `now_ms`.
fn ago(now_ms: i64, unix_ms: i64) -> String {
    let s = (now_ms - unix_ms).max(0) / 1000;
    match s {
        0..60 => format!("{s} s ago"),
        60..3_600 => format!("{} min ago", s / 60),
        3_600..86_400 => format!("{} h {} min ago", s / 3_600, s % 3_600 / 60),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// `ListFaults`: one row per open fault, `down` first.
pub fn faults(answer: &v1::ListFaultsResponse, style: &Style) -> String {
    if answer.evaluated_unix_ms == 0 {
        return "no faults known yet: the aggregator has not looked at the network\n".into();
    }
    if answer.faults.is_empty() {
        return "no open faults\n".into();
    }
    let now = answer.evaluated_unix_ms;
    let mut rows = vec![vec![
        "element".to_owned(),
        "kind".into(),
        "severity".into(),
        "figure".into(),
        "since".into(),
        "evidence".into(),
    ]];
    for f in &answer.faults {
        let mut evidence: Vec<String> = f
            .evidence
            .iter()
            .take(3)
            .map(|p| format!("{}→{}", p.src, p.dst))
            .collect();
        if f.evidence_paths as usize > evidence.len() {
            evidence.push(format!("{} paths in all", f.evidence_paths));
        }
        let mut since = ago(now, f.since_unix_ms);
        if f.clean_since_unix_ms > 0 {
            since += &format!("; clean {}", ago(now, f.clean_since_unix_ms));
        }
        rows.push(vec![
            fault_element(f),
            zonemesh_proto::json::fault_kind(f.kind).to_lowercase(),
            zonemesh_proto::json::fault_severity(f.severity).to_lowercase(),
            fault_figure(f),
            since,
            evidence.join(", "),
        ]);
    }
    let down: Vec<bool> = answer
        .faults
        .iter()
        .map(|f| f.severity == v1::FaultSeverity::Down as i32)
        .collect();
    styled_table(&rows, style, |r, c| {
        (c == 2).then_some(if down[r - 1] { Paint::Bad } else { Paint::Warn })
    })
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
    let leaves_out = answer.nodes.iter().any(|n| !n.nodes_left_out.is_empty());
    if leaves_out {
        rows[0].insert(7, "leaves out".into());
    }
    for (i, n) in answer.nodes.iter().enumerate() {
        let mut st = state(n.state).to_owned();
        if !n.reason.is_empty() {
            st = n.reason.clone();
        }
        // Figures only where paths were measured or estimated; "~" when all were estimated.
        let figure = |text: String| match (n.paths_measured, n.paths_estimated) {
            (0, 0) => "—".to_owned(),
            (0, _) => format!("~{text}"),
            _ => text,
        };
        let mut row = vec![
            (i + 1).to_string(),
            n.node.clone(),
            n.zone.clone(),
            format!("{:.3}", n.score),
            figure(micros(n.rtt_p50_us)),
            figure(percent(n.loss_ratio)),
            rate(n.throughput_bps),
            st,
        ];
        if leaves_out {
            row.insert(7, left_out(&n.nodes_left_out));
        }
        rows.push(row);
    }
    let state_column = if leaves_out { 8 } else { 7 };
    let states: Vec<&str> = answer.nodes.iter().map(|n| state(n.state)).collect();
    let estimated: Vec<bool> = answer
        .nodes
        .iter()
        .map(|n| n.paths_measured == 0 && n.paths_estimated > 0)
        .collect();
    let mut out = styled_table(&rows, style, |r, c| match c {
        _ if c == state_column => state_paint(states[r - 1]),
        4 | 5 if estimated[r - 1] => Some(Paint::Dim),
        _ => None,
    });
    if estimated.contains(&true) {
        out += "  ~ estimated by the model of the measured network (no scoring path measured)\n";
    }
    if leaves_out {
        out += LEAVES_OUT_NODES;
    }
    out
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
    let leaves_out = answer.nodes.iter().any(|n| !n.nodes_left_out.is_empty());
    if leaves_out {
        rows[0].insert(8, "leaves out".into());
    }
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
        if leaves_out {
            row.insert(8, left_out(&n.nodes_left_out));
        }
        if why {
            row.push(n.state_reason.clone());
        }
        rows.push(row);
    }
    let states: Vec<&str> = answer.nodes.iter().map(|n| state(n.state)).collect();
    let mut out = styled_table(&rows, style, |r, c| {
        if c == 2 {
            state_paint(states[r - 1])
        } else {
            None
        }
    });
    if leaves_out {
        out += LEAVES_OUT_NODES;
    }
    out
}

/// What a ranking's or a node list's "leaves out" means.
const LEAVES_OUT_NODES: &str = "  a node's figures are its own: they leave out its paths to the zone-mates under \
                                \"leaves out\", whose own fault (loss, added RTT, slow link) counts against them\n";

/// Where the estimates of a path come from: the engine's model of the measured network (its two
/// nodes' terms and their zone pair's).
const ESTIMATED: &str = "estimated by the model";

/// A `GetPath` answer. Measured figures in full; an estimate only with what it has (the model's
/// RTT percentiles, loss and throughput), labelled as such; nothing for what is unknown, never a
/// zero that was not measured.
pub fn path(answer: &v1::GetPathResponse) -> String {
    let mut out = format!("  {} → {}\n", answer.src, answer.dst);
    let Some(f) = answer.figures else {
        out += "  no figures\n";
        return out;
    };
    let age = |ms: i64| format!("{:.1} s ago", ms as f64 / 1000.0);
    let percentiles = |r: &v1::RttStats| {
        format!(
            "p50 {}  p90 {}  p99 {}",
            micros(r.p50_us),
            micros(r.p90_us),
            micros(r.p99_us)
        )
    };
    match v1::Provenance::try_from(f.latency_provenance) {
        Ok(v1::Provenance::Measured) => {
            match f.rtt {
                Some(r) if r.samples > 0 => {
                    let _ = writeln!(
                        out,
                        "  RTT        {}  (min {}, max {}, jitter {})",
                        percentiles(&r),
                        micros(r.min_us),
                        micros(r.max_us),
                        micros(r.jitter_us)
                    );
                }
                _ => out += "  RTT        — (no reply)\n",
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
                "  latency    measured, {}{}",
                age(f.latency_age_ms),
                if f.stale { ", STALE" } else { "" }
            );
        }
        Ok(v1::Provenance::Estimated) => {
            match f.rtt {
                Some(r) if r.p50_us > 0.0 => {
                    let _ = writeln!(out, "  RTT        {}  ({ESTIMATED})", percentiles(&r));
                }
                _ => out += "  RTT        —\n",
            }
            let _ = writeln!(out, "  loss       {} ({ESTIMATED})", percent(f.loss_ratio));
            let _ = writeln!(
                out,
                "  latency    not measured on this path; the oldest sample behind the estimate is from {}",
                age(f.latency_age_ms)
            );
        }
        _ => {
            out += "  RTT        —\n  loss       —\n";
            out += "  latency    unknown: not measured, and no measured path between the zones\n";
        }
    }
    match v1::Provenance::try_from(f.throughput_provenance) {
        Ok(v1::Provenance::Measured) => {
            let _ = writeln!(
                out,
                "  throughput {} (smoothed {}), measured, {}",
                rate(f.throughput_bps),
                rate(f.throughput_smoothed_bps),
                age(f.throughput_age_ms)
            );
        }
        Ok(v1::Provenance::Estimated) => {
            let _ = writeln!(
                out,
                "  throughput {} ({ESTIMATED})",
                rate(f.throughput_smoothed_bps)
            );
        }
        _ => out += "  throughput — (not measured)\n",
    }
    if let Some(ratio) = f.retransmit_ratio {
        let _ = writeln!(
            out,
            "  TCP        {} of segments retransmitted in its throughput tests (this direction)",
            percent(ratio)
        );
    }
    if let Some(p50) = f.message_exchange_p50_us {
        let _ = writeln!(
            out,
            "  messages   {} a small message's request and response, app to app (mean {})",
            micros(p50),
            micros(f.message_exchange_mean_us.unwrap_or(p50))
        );
    }
    for fault in &answer.faults {
        let _ = writeln!(out, "  at fault   {}", fault_line(fault));
    }
    out
}

/// One fault in a line: `a2: loss, degraded, 4.93 % (4.21 %–5.77 %)`.
fn fault_line(f: &v1::Fault) -> String {
    format!(
        "{}: {}, {}, {}",
        fault_element(f),
        zonemesh_proto::json::fault_kind(f.kind).to_lowercase(),
        zonemesh_proto::json::fault_severity(f.severity).to_lowercase(),
        fault_figure(f)
    )
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
    let mut cells: Vec<Vec<(String, Option<Paint>)>> = Vec::with_capacity(n);
    for i in 0..n {
        let mut row = Vec::with_capacity(n);
        for j in 0..n {
            let cell = answer.cells.get(i * n + j).copied().unwrap_or_default();
            let p = v1::Provenance::try_from(cell.provenance).unwrap_or(v1::Provenance::Unknown);
            let (text, c) = match p {
                _ if i == j => ("·".to_owned(), None),
                v1::Provenance::Unknown => ("—".to_owned(), None),
                v1::Provenance::Estimated => (format!("~{}", value(cell.value)), Some(Paint::Dim)),
                v1::Provenance::Measured => {
                    let bad = metric == v1::Metric::LossRatio && cell.value >= 0.01;
                    (value(cell.value), bad.then_some(Paint::Bad))
                }
            };
            row.push(if cell.stale {
                (format!("{text}!"), Some(Paint::Warn))
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
        .map(|s| width(s))
        .chain([width(CORNER)])
        .max()
        .unwrap_or(0);
    let cell_width = answer
        .nodes
        .iter()
        .map(|s| width(s))
        .chain(cells.iter().flatten().map(|(t, _)| width(t)))
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
        "  {}; ~ estimated by the model, ! stale, — unknown{}",
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

    fn node(name: &str, zone: &str, state: v1::NodeState, reason: &str) -> v1::Node {
        v1::Node {
            name: name.into(),
            zone: zone.into(),
            addresses: vec!["10.0.0.1".into(), "fd00::1".into()],
            state: state as i32,
            connected: state != v1::NodeState::Down,
            zone_rtt_p50_us: 85.5,
            zone_loss_ratio: 0.001,
            zone_throughput_bps: 9.4e9,
            zone_paths_measured: u32::from(state == v1::NodeState::Ready) * 2,
            state_reason: reason.into(),
            ..Default::default()
        }
    }

    fn figures(p: v1::Provenance, p50_us: f64) -> v1::PathFigures {
        v1::PathFigures {
            latency_provenance: p as i32,
            rtt: Some(v1::RttStats {
                samples: 100,
                p50_us,
                ..Default::default()
            }),
            loss_ratio: 0.0125,
            throughput_bps: 2.5e8,
            ..Default::default()
        }
    }

    /// Each table as it printed before comfy-table, plain (the demo, a pipe) and cut to 60
    /// columns (a narrow terminal): `(name, style, text)`.
    fn tables() -> Vec<(String, String)> {
        let node_list = v1::ListNodesResponse {
            nodes: vec![
                v1::Node {
                    nodes_left_out: vec!["a2".into()],
                    ..node("a1", "zone-a", v1::NodeState::Ready, "")
                },
                node(
                    "a2",
                    "zone-a",
                    v1::NodeState::Stale,
                    "its measurements are stale",
                ),
                node("b1", "zone-b", v1::NodeState::Down, "its agent is gone"),
            ],
            ..Default::default()
        };
        let zone_list = v1::ListZonesResponse {
            zones: vec![
                v1::Zone {
                    name: "zone-a".into(),
                    region: "eu-west".into(),
                    nodes: 2,
                    ready_nodes: 1,
                },
                v1::Zone {
                    name: "zone-b".into(),
                    region: String::new(),
                    nodes: 1,
                    ready_nodes: 0,
                },
            ],
            links: vec![
                v1::ZoneLink {
                    src_zone: "zone-a".into(),
                    dst_zone: "zone-b".into(),
                    figures: Some(figures(v1::Provenance::Measured, 2_150.0)),
                    measured_paths: 2,
                    nodes_left_out: Vec::new(),
                    faults: Vec::new(),
                },
                v1::ZoneLink {
                    src_zone: "zone-b".into(),
                    dst_zone: "zone-a".into(),
                    figures: None,
                    measured_paths: 0,
                    nodes_left_out: Vec::new(),
                    faults: Vec::new(),
                },
            ],
            ..Default::default()
        };
        let rank = v1::RankNodesResponse {
            nodes: vec![
                v1::RankedNode {
                    node: "a1".into(),
                    zone: "zone-a".into(),
                    score: 0.98765,
                    state: v1::NodeState::Ready as i32,
                    rtt_p50_us: 52.5,
                    loss_ratio: 0.0,
                    throughput_bps: 9.41e9,
                    paths_measured: 2,
                    nodes_left_out: vec!["a2".into()],
                    ..Default::default()
                },
                v1::RankedNode {
                    node: "b1".into(),
                    zone: "zone-b".into(),
                    score: 0.0,
                    state: v1::NodeState::Down as i32,
                    reason: "DOWN: its agent is gone".into(),
                    ..Default::default()
                },
            ],
        };
        let cell = |value, p: v1::Provenance, stale| v1::MatrixCell {
            value,
            provenance: p as i32,
            age_ms: 0,
            stale,
        };
        let cells = v1::GetMatrixResponse {
            metric: v1::Metric::LossRatio as i32,
            nodes: vec!["a1".into(), "a2".into(), "b1-long-name".into()],
            cells: vec![
                cell(0.0, v1::Provenance::Unknown, false),
                cell(0.0, v1::Provenance::Measured, false),
                cell(0.02, v1::Provenance::Estimated, false),
                cell(0.05, v1::Provenance::Measured, false),
                cell(0.0, v1::Provenance::Unknown, false),
                cell(0.0, v1::Provenance::Unknown, false),
                cell(0.001, v1::Provenance::Measured, true),
                cell(0.0, v1::Provenance::Unknown, false),
                cell(0.0, v1::Provenance::Unknown, false),
            ],
            ..Default::default()
        };
        let mut out = Vec::new();
        for (style_name, style) in [
            ("plain", Style::plain()),
            (
                "narrow",
                Style {
                    color: false,
                    width: 60,
                },
            ),
        ] {
            out.push((format!("nodes-{style_name}"), nodes(&node_list, &style)));
            out.push((format!("zones-{style_name}"), zones(&zone_list, &style)));
            out.push((format!("rank-{style_name}"), ranking(&rank, &style)));
            out.push((format!("matrix-{style_name}"), matrix(&cells, &style)));
        }
        out
    }

    /// (Changes on purpose, in the golden files too: a ranked node without figures and a zone
    /// link without figures show "—" where they showed a measured-looking "0 µs" and "0.00 %";
    /// a1's figures leave out a2's paths and say so, under "leaves out" and in a note; the
    /// matrix says its estimates come from the model, not a zone roll-up.)
    #[test]
    fn tables_print_as_they_did() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
        for (name, text) in tables() {
            let path = dir.join(format!("{name}.txt"));
            let want = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text, want, "{name}:\n{text}");
        }
    }

    #[test]
    fn zone_links_say_whose_fault_they_leave_out() {
        let link = |src: &str, dst: &str, left_out: &[&str]| v1::ZoneLink {
            src_zone: src.into(),
            dst_zone: dst.into(),
            figures: Some(v1::PathFigures::default()),
            measured_paths: 4,
            nodes_left_out: left_out.iter().map(|n| n.to_string()).collect(),
            faults: Vec::new(),
        };
        let answer = v1::ListZonesResponse {
            zones: Vec::new(),
            links: vec![
                link("zone-a", "zone-b", &["a2"]),
                link("zone-b", "zone-c", &[]),
                link("zone-c", "zone-c", &["c1", "c2", "c3", "c4"]),
            ],
            next_page_token: String::new(),
        };
        let out = zones(&answer, &Style::plain());
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].ends_with("leaves out"), "{out}");
        assert!(lines[1].ends_with("a2"), "{out}");
        assert!(lines[2].ends_with("—"), "{out}");
        assert!(lines[3].ends_with("c1, c2, c3, … (4 nodes)"), "{out}");
        assert!(lines[4].contains("leave out the own fault"), "{out}");
        let clean = v1::ListZonesResponse {
            links: vec![link("zone-b", "zone-c", &[])],
            ..answer
        };
        assert!(!zones(&clean, &Style::plain()).contains("own fault"));
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
        let t = styled_table(&rows, &colored, |r, c| {
            (r == 1 && c == 1).then_some(Paint::Bad)
        });
        // Dark red (crossterm's 256-colour escape) and bold, around the text only: without the
        // escapes the layout is the plain one.
        assert!(
            t.contains("\x1b[38;5;1md\x1b[") && t.contains("\x1b[1ma\x1b["),
            "{t:?}"
        );
        let plain = styled_table(&rows, &Style::plain(), |_, _| None);
        assert_eq!(anstream::adapter::strip_str(&t).to_string(), plain);
    }

    #[test]
    fn a_ranking_marks_estimated_figures() {
        let ranked = |node: &str, measured, estimated| v1::RankedNode {
            node: node.into(),
            zone: "zone-a".into(),
            score: 0.5,
            state: v1::NodeState::Ready as i32,
            rtt_p50_us: 2_150.0,
            loss_ratio: 0.01,
            throughput_bps: 1e9,
            paths_measured: measured,
            paths_estimated: estimated,
            ..Default::default()
        };
        let answer = v1::RankNodesResponse {
            nodes: vec![ranked("a1", 2, 1), ranked("a2", 0, 3), ranked("a3", 0, 0)],
        };
        let t = ranking(&answer, &Style::plain());
        assert_eq!(
            t,
            "  #  node  zone    score  RTT p50   loss     throughput   state\n\
             \x20 1  a1    zone-a  0.500  2.15 ms   1.00 %   1.00 Gbit/s  READY\n\
             \x20 2  a2    zone-a  0.500  ~2.15 ms  ~1.00 %  1.00 Gbit/s  READY\n\
             \x20 3  a3    zone-a  0.500  —         —        1.00 Gbit/s  READY\n\
             \x20 ~ estimated by the model of the measured network (no scoring path measured)\n"
        );
    }

    #[test]
    fn wide_glyphs_take_two_columns() {
        let rows = [
            vec!["zone".to_owned(), "nodes".into()],
            vec!["東京".into(), "3".into()],
            vec!["osaka".into(), "12".into()],
            vec!["e\u{301}te\u{301}".into(), "1".into()],
        ];
        let t = styled_table(&rows, &Style::plain(), |_, _| None);
        // 東京 takes four columns and the combining accents none: the second column lines up.
        assert_eq!(
            t, "  zone   nodes\n  東京   3\n  osaka  12\n  e\u{301}te\u{301}    1\n",
            "{t}"
        );
        // Cut by width to fit 14 columns: 東京 (4) and the "…" fit in the 6 left, a third glyph
        // would not.
        let narrow = Style {
            color: false,
            width: 14,
        };
        let long = [vec!["node".to_owned(), "東京東京東京東京".into()]];
        let t = styled_table(&long, &narrow, |_, _| None);
        assert_eq!(t, "  node  東京…\n", "{t:?}");
        for line in t.lines() {
            assert!(width(line) <= 14, "{line:?}");
        }
    }

    fn path_answer(figures: v1::PathFigures) -> v1::GetPathResponse {
        v1::GetPathResponse {
            src: "a3".into(),
            dst: "b2".into(),
            figures: Some(figures),
            faults: Vec::new(),
        }
    }

    #[test]
    fn a_path_names_the_faults_that_explain_it() {
        let mut answer = path_answer(v1::PathFigures::default());
        answer.faults = vec![v1::Fault {
            element: v1::FaultElement::Node as i32,
            a: "b2".into(),
            kind: v1::FaultKind::Loss as i32,
            severity: v1::FaultSeverity::Degraded as i32,
            figure: 0.05,
            figure_low: 0.04,
            figure_high: 0.06,
            probes: 1_800,
            ..Default::default()
        }];
        let text = path(&answer);
        assert!(
            text.contains("at fault   b2: loss, degraded, 5.00 % (4.00 %–6.00 % of 1800 probes)"),
            "{text}"
        );
    }

    #[test]
    fn a_measured_path_shows_every_figure() {
        let f = v1::PathFigures {
            latency_provenance: v1::Provenance::Measured as i32,
            latency_age_ms: 1_500,
            rtt: Some(v1::RttStats {
                samples: 200,
                min_us: 80.0,
                p50_us: 100.0,
                p90_us: 120.0,
                p99_us: 150.0,
                max_us: 300.0,
                mean_us: 105.0,
                jitter_us: 4.0,
            }),
            loss_ratio: 0.01,
            loss_upper_95_ratio: 0.03,
            probes_sent: 200,
            probes_received: 198,
            throughput_provenance: v1::Provenance::Measured as i32,
            throughput_age_ms: 60_000,
            throughput_bps: 9.4e9,
            throughput_smoothed_bps: 9.3e9,
            retransmit_ratio: Some(0.0125),
            message_exchange_p50_us: Some(140.0),
            message_exchange_mean_us: Some(260.0),
            ..Default::default()
        };
        let t = path(&path_answer(f));
        assert_eq!(
            t,
            "  a3 → b2\n\
             \x20 RTT        p50 100 µs  p90 120 µs  p99 150 µs  (min 80 µs, max 300 µs, jitter 4 µs)\n\
             \x20 loss       1.00 % (95 % upper bound 3.00 %), 198 of 200 probes answered\n\
             \x20 latency    measured, 1.5 s ago\n\
             \x20 throughput 9.40 Gbit/s (smoothed 9.30 Gbit/s), measured, 60.0 s ago\n\
             \x20 TCP        1.25 % of segments retransmitted in its throughput tests (this direction)\n\
             \x20 messages   140 µs a small message's request and response, app to app (mean 260 µs)\n"
        );
    }

    /// `zonemesh path a3 b2` on an estimated path printed "min 0 µs, max 0 µs, jitter 0 µs …
    /// 0 of 0 probes answered": an estimate shows what it has, labelled, and no zeros.
    #[test]
    fn an_estimated_path_shows_only_what_the_estimate_has() {
        let f = v1::PathFigures {
            latency_provenance: v1::Provenance::Estimated as i32,
            latency_age_ms: 3_000,
            rtt: Some(v1::RttStats {
                p50_us: 2_150.0,
                p90_us: 2_300.0,
                p99_us: 2_600.0,
                ..Default::default()
            }),
            loss_ratio: 0.0125,
            loss_upper_95_ratio: 0.0125,
            throughput_provenance: v1::Provenance::Estimated as i32,
            throughput_bps: 2.5e8,
            throughput_smoothed_bps: 2.5e8,
            ..Default::default()
        };
        let t = path(&path_answer(f));
        assert_eq!(
            t,
            "  a3 → b2\n\
             \x20 RTT        p50 2.15 ms  p90 2.30 ms  p99 2.60 ms  (estimated by the model)\n\
             \x20 loss       1.25 % (estimated by the model)\n\
             \x20 latency    not measured on this path; the oldest sample behind the estimate is from 3.0 s ago\n\
             \x20 throughput 250.0 Mbit/s (estimated by the model)\n"
        );
        for zero in ["0 µs", "0 of 0", "upper bound", "smoothed"] {
            assert!(!t.contains(zero), "{zero:?} in {t}");
        }
        let unknown = path(&path_answer(v1::PathFigures::default()));
        assert!(
            unknown.contains("RTT        —\n  loss       —\n  latency    unknown"),
            "{unknown}"
        );
        assert!(unknown.contains("throughput — (not measured)"), "{unknown}");
        assert!(!unknown.contains("0.00 %"), "{unknown}");
    }
}
