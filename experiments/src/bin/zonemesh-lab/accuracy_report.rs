//! `zonemesh-lab accuracy`: the demo cluster measured by zonemesh, ping and iperf3, written as
//! docs/ACCURACY.md.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use zonemesh_experiments::accuracy::{self, PooledLoss};
use zonemesh_experiments::machine;
use zonemesh_lab::demo_cluster::{self, LOSSY_NODE, SLOW_NODE};
use zonemesh_proto::v1;

/// What the model section of the report measures, before its table.
const MODEL_INTRO: &str = "\n## The model of paths nobody measured\n\nBetween two zones zonemesh probes only a few node pairs; every other pair is estimated by the\nengine's model (`zonemesh_engine::model`: node terms fitted apart from zone-pair terms). Its error\non measured paths it did not see: the node pairs measured between each two zones are split in two\nhalves, the model is fitted on the paths above without each half and predicts it (both directions).\nRTT error is relative to zonemesh's measured median, loss error absolute (percentage points).\nBeside it, the estimate zonemesh made before the model: the mean of the other measured paths\nbetween the two zones. The same on synthetic clusters of 5,000 nodes:\n`cargo bench -p zonemesh-aggregator --bench engine -- model`; `cargo test -p zonemesh-engine model`\nfails if the held-out median RTT error passes 5 % (on this table and on synthetic clusters).\n\n";

const TCP_INTRO: &str = "\n## What TCP saw\n\nEvery path whose throughput test zonemesh has seen. The share of segments the sender\nretransmitted (`TCP_INFO`, smoothed over the tests) has a direction: a2 drops what reaches it,\nso a test that sends into a2 loses data segments, one that sends out of it only acknowledgements.\niperf3 ran once (`-t 3 -O 1`) on one path into a2; its retransmissions are per 1448-byte\nsegment of what it sent. The exchanges are zonemesh's timed request–response exchanges of a\n64-byte message before each test, application to application: inside a zone their median is\nunder the ICMP round trip of the paths table (whose probes carry a few tens of µs of their own),\nso a message costs the hosts' software nothing measurable here; the mean counts the exchanges that met a loss, which a message that short\nwaits out in a retransmission timeout (about 200 ms on Linux), not a round trip.\n\n";

/// The heading from which `docs/ACCURACY.md` is written by hand: `accuracy --out` keeps it.
pub const KEPT_SECTION: &str = "## Window quantiles";

/// Runs the demo cluster and returns the accuracy report (Markdown).
pub async fn accuracy() -> Result<String> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("binary directory")?.to_owned();
    let logs = std::env::temp_dir().join(format!("zonemesh-accuracy-{}", std::process::id()));
    std::fs::create_dir_all(&logs)?;
    println!("building the demo cluster and filling its matrix (about two minutes)…");
    let (lab, stack) = demo_cluster::start(&dir, &logs)?;
    demo_cluster::settle(&lab, &stack, |f| println!("  {f}")).await?;
    let mut topology = stack.topology().await?;
    println!("pinging every measured path for 32 s…");
    let rows = accuracy::measure_paths(
        &lab,
        &mut topology,
        accuracy::PING_COUNT,
        accuracy::PING_INTERVAL,
    )
    .await?;
    let model_md = accuracy::model_section(&lab, &rows)?;
    println!("iperf3 on three paths…");
    let mut pairs = vec![
        ("b1".to_owned(), SLOW_NODE.to_owned()),
        ("c1".into(), "c2".into()),
    ];
    // A delayed, rate-limited path, if zonemesh measured one between zones.
    for r in &rows {
        let into_slow = r.dst == SLOW_NODE || r.src == SLOW_NODE;
        if r.injected_rtt_us > 0.0 && into_slow {
            let f = topology
                .get_path(v1::GetPathRequest {
                    src: r.src.clone(),
                    dst: r.dst.clone(),
                })
                .await?
                .into_inner()
                .figures
                .unwrap_or_default();
            if f.throughput_provenance == v1::Provenance::Measured as i32 {
                pairs.push((r.src.clone(), r.dst.clone()));
                break;
            }
        }
    }
    let mut t_rows = Vec::new();
    for (src, dst) in &pairs {
        t_rows.push(accuracy::measure_throughput(&lab, &mut topology, src, dst).await?);
    }
    println!("TCP's own figures on every tested path, iperf3's retransmissions into {LOSSY_NODE}…");
    let nodes: Vec<String> = lab.spec().all_nodes().map(str::to_owned).collect();
    let mut tcp_rows = Vec::new();
    for src in &nodes {
        for dst in nodes.iter().filter(|d| *d != src) {
            if let Ok(row) = accuracy::measure_tcp_zonemesh(&lab, &mut topology, src, dst).await {
                tcp_rows.push(row);
            }
        }
    }
    if let Some(into) = tcp_rows.iter_mut().find(|r| r.dst == LOSSY_NODE) {
        accuracy::add_iperf3_retransmits(&lab, into).await?;
    }
    let ranking = topology
        .rank_nodes(v1::RankNodesRequest::default())
        .await?
        .into_inner();
    let placed = topology
        .place(v1::PlaceRequest {
            workers: 3,
            zone_policy: v1::ZonePolicy::PreferOne as i32,
            ..Default::default()
        })
        .await?
        .into_inner();
    drop(stack);
    drop(lab);
    let _ = std::fs::remove_dir_all(&logs);

    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Accuracy\n\nzonemesh's figures beside what the lab injected and beside iputils `ping` and `iperf3` run on the\nsame paths. Written by `zonemesh-lab accuracy --out docs/ACCURACY.md` (as root, after\n`cargo build --release --locked`); the end-to-end test `tests/tests/lab_e2e.rs` runs the same\nmeasurements and asserts on them.\n\nMachine: {}. Run: {}.\n",
        machine::describe(),
        machine::utc_minute()
    );
    md += "## The cluster\n\nThe demo cluster (`zonemesh_lab::demo_cluster`): zones `zone-a`, `zone-b`, `zone-c` of three nodes;\n2 ms round trip between zone-a and zone-b (±50 µs jitter each way), 6 ms zone-a–zone-c (±100 µs),\n10 ms zone-b–zone-c (±150 µs); `a2` drops 5 % of the packets that reach it; every node's link is\nlimited to 1 Gbit/s by `tbf`, `b3`'s to 100 Mbit/s. The aggregator runs with\n`demo_cluster::FAST_AGGREGATOR_FLAGS` (5 s windows, ten probes a second per path, throughput tests of\n0.5 s warm-up and 2 s). Measured once the matrix was full and the throughput tests were over.\n\n";
    md += "## RTT and loss, every path zonemesh measured\n\nzonemesh's median is the median of its last six windows' medians (30 s); ping sent\n1,600 echoes 20 ms apart on the same path meanwhile (iputils prints times ≥ 1 ms with three significant\ndigits, so its medians at 10 ms move in steps of 100 µs). Injected RTT is what the emulator adds;\nthe path itself adds a few tens of µs. Loss: zonemesh's probes in its window; the 95 % Wilson\ninterval of that count, and whether the injected loss lies inside it. At 95 %, about one path\nin twenty falls outside by chance alone; the pooled counts below the table are the check.\n\n";
    md += &accuracy::paths_table(&rows);
    let gaps: Vec<f64> = rows
        .iter()
        .map(|r| (r.zonemesh_p50_us - r.ping_p50_us).abs())
        .collect();
    let within = rows
        .iter()
        .filter(|r| {
            let g = (r.zonemesh_p50_us - r.ping_p50_us).abs();
            g <= 50.0 || g <= 0.02 * r.ping_p50_us
        })
        .count();
    let _ = writeln!(
        md,
        "\n{within} of {} paths have zonemesh's median within 50 µs or 2 % of ping's (the DESIGN.md\ntarget); the largest gap is {:.0} µs.\n",
        rows.len(),
        gaps.iter().copied().fold(0.0, f64::max)
    );
    for lossy in [true, false] {
        let pool = PooledLoss::of(&rows, LOSSY_NODE, lossy);
        let PooledLoss {
            sent,
            lost,
            ping_sent,
            ping_lost,
        } = pool;
        let (lo, hi) = pool.interval(1.96);
        let injected = if lossy { demo_cluster::LOSSY_LOSS } else { 0.0 };
        let _ = writeln!(
            md,
            "- {}: zonemesh {lost}/{sent} = {:.2} % (95 % interval {:.2}–{:.2} %, injected {:.1} % {}), ping {ping_lost}/{ping_sent} = {:.2} %.",
            if lossy {
                "Paths to and from a2, pooled"
            } else {
                "Every other path, pooled"
            },
            100.0 * pool.ratio(),
            lo * 100.0,
            hi * 100.0,
            injected * 100.0,
            if (lo..=hi).contains(&injected) {
                "inside"
            } else {
                "outside"
            },
            100.0 * pool.ping_ratio(),
        );
    }
    md += MODEL_INTRO;
    md += &model_md;
    md += "\n## Throughput\n\nzonemesh's figure is its last test of the path (one TCP stream, 0.5 s warm-up, 2 s counted, taken\nby the receiver); iperf3 ran afterwards on the same path (`-t 3 -O 1`, receiver figure; run again, up to\nfour times, while a run reads under 95 % of the goodput the rate carries, as it does when it\nshares the link or the cores with one of the agents' own tests, and the best run counts). TCP\ncarries 1448 payload bytes in each 1514-byte frame that `tbf` counts, so the goodput to expect\nis 95.6 % of the rate.\n\n";
    md += &accuracy::throughput_table(&t_rows);
    md += TCP_INTRO;
    md += &accuracy::tcp_table(&tcp_rows);
    md += "\n## What zonemesh made of it\n\n";
    let order: Vec<String> = ranking
        .nodes
        .iter()
        .map(|n| format!("{} ({:.3})", n.node, n.score))
        .collect();
    let _ = writeln!(md, "- `RankNodes`, best first: {}.", order.join(", "));
    let _ = writeln!(
        md,
        "- `Place` of 3 workers (prefer one zone): {} in {}; predicted worst RTT {:.0} µs, worst loss {:.2} %, bottleneck {:.1} Mbit/s.",
        placed
            .assignments
            .iter()
            .map(|a| a.node.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        placed.zones.join(", "),
        placed.worst_rtt_us,
        placed.worst_loss_ratio * 100.0,
        placed.bottleneck_throughput_bps / 1e6
    );
    Ok(md)
}
