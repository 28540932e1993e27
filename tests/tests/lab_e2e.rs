//! End to end in the network lab (root; CI runs it as root): the demo cluster — three zones with
//! 2, 6 and 10 ms between them, a node that drops 5 %, a node at 100 Mbit/s among 1 Gbit/s ones —
//! with the real aggregator and nine real agents. zonemesh's figures must agree with what the lab
//! injected and with iputils ping and iperf3 run on the same paths; its placement and ranking
//! must follow them; a node cut off turns DOWN and is never placed on.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use zonemesh_domain::stats::wilson;
use zonemesh_experiments::accuracy::{self, PooledLoss};
use zonemesh_lab::demo_cluster::{
    self, BEST_ZONE, LOSSY_LOSS, LOSSY_NODE, NODE_RATE_BPS, SLOW_NODE,
};
use zonemesh_lab::{Watchdog, cleanup_on_signals};
use zonemesh_proto::v1;
use zonemesh_tests::{binary, lab_can_run, stack_binaries, wait_for};

/// z for a 99.9 % interval. A correct measurement falls outside a 95 % interval in one run of
/// twenty, so a test that asserted 95 % would fail honest runs; the report prints the 95 % one.
const Z_999: f64 = 3.29;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_cluster_is_measured_truly_and_placed_by_its_measurements() -> Result<()> {
    if !lab_can_run("lab_e2e") {
        return Ok(());
    }
    cleanup_on_signals();
    let logs = tempfile::tempdir()?;
    // About 5 minutes; a run stuck anywhere ends with where it was and its logs' tails.
    let watchdog = Watchdog::start("lab_e2e", Duration::from_secs(20 * 60), Some(logs.path()));
    watchdog.stage("build the lab and start the stack");
    let dir = stack_binaries();
    let (mut lab, stack) = demo_cluster::start(&dir, logs.path())?;
    for (node, agent) in &stack.agents {
        ensure!(agent.icmp == "raw", "{node} measures with {}", agent.icmp);
    }
    watchdog.stage("settle: the matrix fills");
    demo_cluster::settle(&lab, &stack, |f| eprintln!("fill: {f:?}")).await?;
    let mut topology = stack.topology().await?;

    // RTT and loss on every measured path, beside ping on the same path over the same stretch
    // of time as zonemesh's figures.
    watchdog.stage("RTT and loss beside ping");
    let rows = accuracy::measure_paths(
        &lab,
        &mut topology,
        accuracy::PING_COUNT,
        accuracy::PING_INTERVAL,
    )
    .await?;
    println!("{}", accuracy::paths_table(&rows));
    ensure!(rows.len() >= 18 + 6, "{} paths measured", rows.len());
    for r in &rows {
        let gap = (r.zonemesh_p50_us - r.ping_p50_us).abs();
        ensure!(
            gap <= 50.0 || gap <= 0.02 * r.ping_p50_us,
            "{} -> {}: zonemesh {:.0} µs, ping {:.0} µs",
            r.src,
            r.dst,
            r.zonemesh_p50_us,
            r.ping_p50_us
        );
        // What the lab added, plus the path's own few tens of µs and the emulator's hand-off.
        let over = r.zonemesh_p50_us - r.injected_rtt_us;
        ensure!(
            (0.0..=300.0).contains(&over) || over.abs() <= 0.03 * r.injected_rtt_us,
            "{} -> {}: zonemesh {:.0} µs for an injected {:.0} µs",
            r.src,
            r.dst,
            r.zonemesh_p50_us,
            r.injected_rtt_us
        );
    }
    // Loss: the lossy node's paths pooled, and the clean paths pooled, each inside the 99.9 %
    // interval of what zonemesh counted.
    for lossy in [true, false] {
        let pool = PooledLoss::of(&rows, LOSSY_NODE, lossy);
        let (sent, lost) = (pool.sent, pool.lost);
        let injected = if lossy { demo_cluster::LOSSY_LOSS } else { 0.0 };
        let (lo, hi) = pool.interval(Z_999);
        println!(
            "loss, {} paths: {lost}/{sent} = {:.2} %, 99.9 % interval {:.2}–{:.2} %, injected {:.1} %",
            if lossy { "lossy node's" } else { "other" },
            100.0 * pool.ratio(),
            lo * 100.0,
            hi * 100.0,
            injected * 100.0
        );
        ensure!(sent >= 500, "only {sent} probes");
        ensure!(
            (lo..=hi).contains(&injected),
            "loss {lost}/{sent} does not fit the injected {injected}"
        );
    }

    // Throughput beside iperf3: to the slow node, and between two 1 Gbit/s nodes.
    watchdog.stage("throughput beside iperf3");
    let mut t_rows = Vec::new();
    for (src, dst) in [("b1", SLOW_NODE), ("c1", "c2")] {
        t_rows.push(accuracy::measure_throughput(&lab, &mut topology, src, dst).await?);
    }
    println!("{}", accuracy::throughput_table(&t_rows));
    for r in &t_rows {
        let vs_iperf = r.zonemesh_bps / r.iperf3_bps;
        let vs_rate = r.zonemesh_bps / r.expected_goodput_bps();
        ensure!(
            (0.95..=1.05).contains(&vs_iperf),
            "{} -> {}: zonemesh {:.1} Mbit/s, iperf3 {:.1} Mbit/s",
            r.src,
            r.dst,
            r.zonemesh_bps / 1e6,
            r.iperf3_bps / 1e6
        );
        ensure!(
            (0.95..=1.05).contains(&vs_rate),
            "{} -> {}: zonemesh {:.1} Mbit/s over a {:.0} Mbit/s tbf",
            r.src,
            r.dst,
            r.zonemesh_bps / 1e6,
            r.rate_bps / 1e6
        );
    }

    // TCP's own view, which has a direction. The lossy node drops what reaches it: a test that
    // sends into it retransmits about its loss (as iperf3 does on the same path), one that
    // sends out of it (only its ACKs dropped) and one between clean nodes about nothing. Every
    // tested path timed its message exchanges; between clean nodes their median agrees with
    // ping's round trip (within 250 µs and 5 %: a TCP request and response application to
    // application against an ICMP echo; paths of the lossy node wait out its losses).
    watchdog.stage("TCP figures of every path");
    let nodes: Vec<String> = lab.spec().all_nodes().map(str::to_owned).collect();
    let mut tcp_rows = Vec::new();
    for src in &nodes {
        for dst in nodes.iter().filter(|d| *d != src) {
            let Ok(row) = accuracy::measure_tcp_zonemesh(&lab, &mut topology, src, dst).await
            else {
                continue;
            };
            tcp_rows.push(row);
        }
    }
    let into = tcp_rows.iter().position(|r| r.dst == LOSSY_NODE);
    ensure!(into.is_some(), "no throughput test into {LOSSY_NODE}");
    let into = into.unwrap_or_default();
    accuracy::add_iperf3_retransmits(&lab, &mut tcp_rows[into]).await?;
    println!("{}", accuracy::tcp_table(&tcp_rows));
    ensure!(
        tcp_rows.len() >= 9,
        "{} paths with TCP figures",
        tcp_rows.len()
    );
    for r in &tcp_rows {
        let path = format!("{} -> {}", r.src, r.dst);
        if r.dst == LOSSY_NODE {
            ensure!(
                (0.5..=2.0).contains(&(r.zonemesh_retransmit_ratio / r.injected_data_loss)),
                "{path}: {:.2} % retransmitted for {:.1} % injected",
                100.0 * r.zonemesh_retransmit_ratio,
                100.0 * r.injected_data_loss
            );
        } else {
            ensure!(
                r.zonemesh_retransmit_ratio < 0.005,
                "{path}: {:.2} % retransmitted, nothing injected that way",
                100.0 * r.zonemesh_retransmit_ratio
            );
        }
        let clean = r.src != LOSSY_NODE && r.dst != LOSSY_NODE;
        if let Some(ping) = rows.iter().find(|p| p.src == r.src && p.dst == r.dst)
            && clean
        {
            // Within 500 µs and 5 %: the agents are debug builds here, nine of them beside the
            // aggregator and the link emulator on two cores, and an exchange's smoothed median
            // was seen at 127 µs against ping's 13 µs inside a zone (the release evaluation's
            // are 18–30 µs) and at 2,423 µs against ping's 2,050 between zones (a full suite
            // run, 2026-12-07); an exchange that missed the path's delay (2 and 10 ms between
            // zones) would still fail.
            let gap = (r.exchange_p50_us - ping.ping_p50_us).abs();
            ensure!(
                gap <= 500.0 + 0.05 * ping.ping_p50_us,
                "{path}: exchanges of {:.0} µs against ping's {:.0} µs",
                r.exchange_p50_us,
                ping.ping_p50_us
            );
        }
    }
    let r = &tcp_rows[into];
    ensure!(
        (0.67..=1.5).contains(&(r.zonemesh_retransmit_ratio / r.iperf3_retransmit_ratio)),
        "{} -> {}: zonemesh {:.2} %, iperf3 {:.2} % retransmitted",
        r.src,
        r.dst,
        100.0 * r.zonemesh_retransmit_ratio,
        100.0 * r.iperf3_retransmit_ratio
    );

    // Placement: a 3-worker job goes to the one zone without an impaired node.
    watchdog.stage("placement, ranking and faults");
    let place = |exclude: Vec<String>| v1::PlaceRequest {
        workers: 3,
        zone_policy: v1::ZonePolicy::PreferOne as i32,
        exclude,
        ..Default::default()
    };
    let placed = topology.place(place(vec![])).await?.into_inner();
    ensure!(placed.zones == [BEST_ZONE], "placed in {:?}", placed.zones);
    ensure!(placed.assignments.len() == 3);

    // Ranking: the lossy and the slow node last, overall and in their zones.
    let rank = |zone: &str| v1::RankNodesRequest {
        zone: zone.into(),
        ..Default::default()
    };
    let all = topology.rank_nodes(rank("")).await?.into_inner();
    let order: Vec<&str> = all.nodes.iter().map(|n| n.node.as_str()).collect();
    println!("ranking: {order:?}");
    let last_two: BTreeSet<&str> = order[order.len() - 2..].iter().copied().collect();
    ensure!(
        last_two == BTreeSet::from([LOSSY_NODE, SLOW_NODE]),
        "ranking {order:?}"
    );
    for (zone, node) in [("zone-a", LOSSY_NODE), ("zone-b", SLOW_NODE)] {
        let z = topology.rank_nodes(rank(zone)).await?.into_inner();
        ensure!(
            z.nodes.last().map(|n| n.node.as_str()) == Some(node),
            "{zone}: {:?}",
            z.nodes
        );
    }
    // Each node's figures are its own: the lossy and the slow node's zone-mates show their own
    // clean figures and say whose fault they left out (before, a1 and a3 showed a2's loss, and
    // b1 and b2 the mean of their clean paths and their paths to b3: 525.6 Mbit/s).
    let row = |n: &str| {
        all.nodes
            .iter()
            .find(|r| r.node == n)
            .with_context(|| format!("{n} is not ranked"))
    };
    for (neighbours, faulty) in [(["a1", "a3"], LOSSY_NODE), (["b1", "b2"], SLOW_NODE)] {
        for n in neighbours {
            let r = row(n)?;
            println!(
                "{n}: loss {:.2} %, {:.1} Mbit/s, leaves out {:?}",
                100.0 * r.loss_ratio,
                r.throughput_bps / 1e6,
                r.nodes_left_out
            );
            ensure!(
                r.loss_ratio < LOSSY_LOSS / 5.0,
                "{n}: loss {:.2} %, its own should be clean",
                100.0 * r.loss_ratio
            );
            ensure!(
                r.throughput_bps > 0.8 * NODE_RATE_BPS as f64,
                "{n}: {:.1} Mbit/s, its own should be its link's",
                r.throughput_bps / 1e6
            );
            ensure!(
                r.nodes_left_out == [faulty],
                "{n} leaves out {:?}, not {faulty}",
                r.nodes_left_out
            );
        }
    }

    // Faults: a2's loss and b3's rate (both directions: its link is limited both ways), and
    // nothing else: no neighbour, zone link or path of theirs.
    let faults = topology
        .list_faults(v1::ListFaultsRequest {})
        .await?
        .into_inner();
    let named: BTreeSet<(String, i32, i32)> = faults
        .faults
        .iter()
        .map(|f| (f.a.clone(), f.element, f.kind))
        .collect();
    println!("faults: {named:?}");
    let node = |n: &str, e: v1::FaultElement, k: v1::FaultKind| (n.to_owned(), e as i32, k as i32);
    ensure!(
        named
            == BTreeSet::from([
                node(LOSSY_NODE, v1::FaultElement::Node, v1::FaultKind::Loss),
                node(SLOW_NODE, v1::FaultElement::Egress, v1::FaultKind::Rate),
                node(SLOW_NODE, v1::FaultElement::Ingress, v1::FaultKind::Rate),
            ]),
        "faults {:?}",
        faults.faults
    );
    let loss = faults
        .faults
        .iter()
        .find(|f| f.kind == v1::FaultKind::Loss as i32)
        .context("the loss fault")?;
    // Its figure is the lost share of the probes behind its 95 % interval, so it lies inside
    // it; the injected loss must fit those probes at 99.9 % (a 95 % interval misses the truth
    // in one run of twenty: CI once saw 5.16–7.95 % for the injected 5 %).
    let lost = (loss.figure * loss.probes as f64).round() as u64;
    let (low, high) = wilson(lost, loss.probes, Z_999);
    println!(
        "{LOSSY_NODE} loss: {:.2} % of {} probes, 95 % {:.2}–{:.2} %",
        100.0 * loss.figure,
        loss.probes,
        100.0 * loss.figure_low,
        100.0 * loss.figure_high
    );
    ensure!(
        loss.probes > 0
            && (loss.figure_low..=loss.figure_high).contains(&loss.figure)
            && (low..=high).contains(&demo_cluster::LOSSY_LOSS),
        "{LOSSY_NODE}: {:.2} % of {} probes (95 %: {:.2}–{:.2} %, 99.9 %: {:.2}–{:.2} %) for an injected {:.1} %",
        100.0 * loss.figure,
        loss.probes,
        100.0 * loss.figure_low,
        100.0 * loss.figure_high,
        100.0 * low,
        100.0 * high,
        100.0 * demo_cluster::LOSSY_LOSS
    );

    // The tiers as the publisher would write them (`zonemesh publish --dry-run`, no cluster):
    // the near zones (2 ms) share a tier-2 group, the far one (6 and 10 ms) does not, and every
    // node carries every level.
    watchdog.stage("publish --dry-run");
    let dry_run = std::process::Command::new(binary("zonemesh"))
        .args(["publish", "--dry-run", "--output", "json", "--aggregator"])
        .arg(format!("http://{}", stack.aggregator.grpc))
        .output()?;
    ensure!(
        dry_run.status.success(),
        "publish --dry-run: {}",
        String::from_utf8_lossy(&dry_run.stderr)
    );
    let objects: serde_json::Value = serde_json::from_slice(&dry_run.stdout)?;
    let items = objects["items"].as_array().context("items")?;
    let group_of = |node: &str| -> Option<String> {
        items
            .iter()
            .find(|o| o["kind"] == "Node" && o["metadata"]["name"] == node)
            .and_then(|o| o["metadata"]["labels"]["zonemesh.io/zone-group"].as_str())
            .map(str::to_owned)
    };
    let groups: Vec<Option<String>> = ["a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2", "c3"]
        .iter()
        .map(|n| group_of(n))
        .collect();
    ensure!(
        groups.iter().all(Option::is_some),
        "every node labelled: {groups:?}"
    );
    ensure!(
        groups[..6].iter().all(|g| *g == groups[0]) && groups[6..].iter().all(|g| *g == groups[6]),
        "zones a and b together, zone-c apart: {groups:?}"
    );
    ensure!(
        groups[0] != groups[6],
        "zone-c shares a group with a and b: {groups:?}"
    );
    // The health labels (`health` among the dry run's targets): a2 and b3 are not ok, and no
    // one else pays for their faults.
    let health: Vec<(&str, &str)> = ["a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2", "c3"]
        .iter()
        .map(|n| {
            let label = items
                .iter()
                .find(|o| o["kind"] == "Node" && o["metadata"]["name"] == *n)
                .and_then(|o| o["metadata"]["labels"]["zonemesh.io/network-health"].as_str());
            (*n, label.unwrap_or("none"))
        })
        .collect();
    println!("health labels: {health:?}");
    ensure!(
        health
            .iter()
            .all(|(n, h)| if [LOSSY_NODE, SLOW_NODE].contains(n) {
                ["degraded", "down"].contains(h)
            } else {
                *h == "ok"
            }),
        "{health:?}"
    );
    let tiers = topology
        .get_tiers(v1::GetTiersRequest {})
        .await?
        .into_inner();
    for g in &tiers.groups {
        println!(
            "tier 2 {}: {:?}, inside {:?}, nearest {:?}",
            g.name, g.zones, g.inside, g.nearest
        );
    }
    let hypernodes = items.iter().filter(|o| o["kind"] == "HyperNode").count();
    ensure!(
        hypernodes == 3 + 2 + 1,
        "{hypernodes} HyperNodes: 3 zones, 2 groups, the cluster"
    );

    // A node cut off from everything turns DOWN and is never placed on.
    let victim = placed.assignments[0].node.clone();
    watchdog.stage(format!("{victim} cut off"));
    lab.cut_off(&victim)?;
    wait_for(
        &format!("{victim} to turn DOWN"),
        Duration::from_secs(90),
        || {
            let mut topology = topology.clone();
            let victim = victim.clone();
            async move {
                let nodes = topology
                    .list_nodes(v1::ListNodesRequest::default())
                    .await
                    .ok()?
                    .into_inner();
                nodes
                    .nodes
                    .iter()
                    .any(|n| n.name == victim && n.state == v1::NodeState::Down as i32)
                    .then_some(())
            }
        },
    )
    .await?;
    for request in [
        place(vec![]),
        v1::PlaceRequest {
            workers: 8,
            zone_policy: v1::ZonePolicy::Any as i32,
            ..Default::default()
        },
    ] {
        let placed = topology.place(request).await?.into_inner();
        ensure!(
            placed.assignments.iter().all(|a| a.node != victim),
            "placed on DOWN {victim}: {placed:?}"
        );
    }
    let all = topology.rank_nodes(rank("")).await?.into_inner();
    let last = all.nodes.last().context("ranking")?;
    ensure!(
        last.node == victim && last.state == v1::NodeState::Down as i32,
        "{:?}",
        all.nodes
    );

    // A whole zone cut off (a rack or an availability zone lost): its nodes turn DOWN, no
    // placement uses them, and when it comes back its agents deliver what they buffered —
    // every report acknowledged, none refused or dropped.
    lab.reconnect(&victim)?;
    let cut_zone = "zone-a";
    let cut: Vec<String> = stack
        .agents
        .keys()
        .filter(|n| n.starts_with('a'))
        .cloned()
        .collect();
    ensure!(cut.len() == 3, "{cut:?}");
    watchdog.stage(format!("{cut_zone} cut off"));
    for node in &cut {
        lab.cut_off(node)?;
    }
    let client = topology.clone();
    let states = |want: v1::NodeState| {
        let topology = client.clone();
        let cut = cut.clone();
        move || {
            let mut topology = topology.clone();
            let cut = cut.clone();
            async move {
                let nodes = topology
                    .list_nodes(v1::ListNodesRequest::default())
                    .await
                    .ok()?
                    .into_inner()
                    .nodes;
                cut.iter()
                    .all(|c| nodes.iter().any(|n| &n.name == c && n.state == want as i32))
                    .then_some(())
            }
        }
    };
    wait_for(
        &format!("every node of {cut_zone} to turn DOWN"),
        Duration::from_secs(90),
        states(v1::NodeState::Down),
    )
    .await?;
    let placed = topology
        .place(v1::PlaceRequest {
            workers: 5,
            zone_policy: v1::ZonePolicy::Any as i32,
            ..Default::default()
        })
        .await?
        .into_inner();
    ensure!(
        placed.assignments.iter().all(|a| a.zone != cut_zone),
        "placed in the cut-off {cut_zone}: {placed:?}"
    );
    watchdog.stage(format!("{cut_zone} back"));
    for node in &cut {
        lab.reconnect(node)?;
    }
    wait_for(
        &format!("every node of {cut_zone} to be READY again"),
        Duration::from_secs(120),
        states(v1::NodeState::Ready),
    )
    .await?;
    for node in &cut {
        let agent = &stack.agents[node];
        wait_for(
            &format!("{node} to deliver what it buffered while cut off"),
            Duration::from_secs(60),
            || async {
                (agent.metric("zonemesh_agent_buffered_reports").ok()? == 0.0).then_some(())
            },
        )
        .await?;
        for lost in [
            "zonemesh_agent_reports_refused_total",
            "zonemesh_agent_reports_dropped_total",
        ] {
            ensure!(agent.metric(lost)? == 0.0, "{node}: {lost} is not 0");
        }
        ensure!(
            agent.metric("zonemesh_agent_reconnects_total")? >= 1.0,
            "{node} never reconnected"
        );
    }

    watchdog.stage("stop the stack and remove the lab");
    drop(stack);
    lab.remove()?;
    Ok(())
}
