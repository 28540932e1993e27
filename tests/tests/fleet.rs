//! The fleet simulator against the real aggregator: 200 synthetic agents in 4 zones that report
//! at the plan's pace, then flood, while a tenth of them leave and come back every second. Every
//! report is applied exactly once (the aggregator's counters equal the agents' acknowledged
//! ones), the figures the aggregator answers are the synthetic cluster's truth, and the lossy
//! nodes rank last.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Result, ensure};
use zonemesh_fleet::sim::{self, Control, Counters};
use zonemesh_fleet::topo::{Fleet, FleetSpec, Health};
use zonemesh_proto::v1;
use zonemesh_tests::{http_get, sample, start_aggregator, wait_for};

fn metric(text: &str, name: &str) -> Result<u64> {
    sample(text, name)
        .map(|v| v as u64)
        .ok_or_else(|| anyhow::anyhow!("{name} not in /metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_churning_fleet_loses_nothing_and_its_truth_comes_back() -> Result<()> {
    let logs = tempfile::tempdir()?;
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--window",
            "2s",
            "--probe-interval",
            "1s",
            "--probe-timeout",
            "500ms",
        ],
        logs.path(),
    )?;
    let fleet = Arc::new(Fleet::new(FleetSpec {
        nodes: 200,
        zones: 4,
        bad_share: 0.06,
        seed: 11,
    }));
    let channels = vec![aggregator.channel().await?, aggregator.channel().await?];
    let control = Arc::new(Control::new());
    control.churn_check_ms.store(1_000, Ordering::Relaxed);
    let counters = Arc::new(Counters::default());
    let task = tokio::spawn(sim::run(
        fleet.clone(),
        channels,
        control.clone(),
        counters.clone(),
    ));
    wait_for("every agent planned", Duration::from_secs(60), || async {
        (counters.planned.load(Ordering::Relaxed) == 200).then_some(())
    })
    .await?;
    ensure!(
        counters.plan_targets.load(Ordering::Relaxed) >= 200 * 49,
        "a node's plan covers at least its zone"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    control.churn_per_mille.store(100, Ordering::Relaxed);
    control.set_flood(true);
    tokio::time::sleep(Duration::from_secs(4)).await;
    control.set_flood(false);
    control.churn_per_mille.store(0, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(4)).await;
    control.stop();
    tokio::time::timeout(Duration::from_secs(60), task).await???;

    let acked = counters.reports_acked.load(Ordering::Relaxed);
    let summaries = counters.summaries_acked.load(Ordering::Relaxed);
    println!("{counters:?}");
    ensure!(
        counters.errors.load(Ordering::Relaxed) == 0,
        "refused reports"
    );
    ensure!(
        counters.departures.load(Ordering::Relaxed) > 0,
        "nobody left"
    );
    ensure!(
        counters.resent.load(Ordering::Relaxed) > 0,
        "nothing was sent again"
    );
    let metrics = http_get(aggregator.http, "/metrics")?;
    ensure!(
        metric(&metrics, "zonemesh_reports_total")? == acked,
        "applied {} reports, agents saw {acked} acknowledged",
        metric(&metrics, "zonemesh_reports_total")?
    );
    ensure!(metric(&metrics, "zonemesh_path_summaries_total")? == summaries);

    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    for (a, b) in [(0, 1), (10, 40), (60, 99), (120, 180), (150, 199), (3, 77)] {
        let (src, dst) = (&fleet.nodes[a].name, &fleet.nodes[b].name);
        let figures = topology
            .get_path(v1::GetPathRequest {
                src: src.clone(),
                dst: dst.clone(),
            })
            .await?
            .into_inner()
            .figures
            .unwrap_or_default();
        if figures.latency_provenance != v1::Provenance::Measured as i32 {
            continue; // not in the plan (between zones, not a representative pair)
        }
        let truth = fleet.truth(a, b);
        let p50 = figures.rtt.map_or(0.0, |r| r.p50_us);
        ensure!(
            (p50 / truth.rtt_us - 1.0).abs() <= 0.03,
            "{src} -> {dst}: {p50:.0} µs, truth {:.0} µs",
            truth.rtt_us
        );
    }
    let ranked = topology
        .rank_nodes(v1::RankNodesRequest::default())
        .await?
        .into_inner()
        .nodes;
    ensure!(ranked.len() == 200, "{} ranked", ranked.len());
    let lossy: Vec<usize> = fleet
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.health == Health::Lossy)
        .map(|(i, _)| i)
        .collect();
    ensure!(!lossy.is_empty(), "the seed gave no lossy node");
    for i in &lossy {
        let at = ranked
            .iter()
            .position(|r| r.node == fleet.nodes[*i].name)
            .unwrap_or(0);
        ensure!(
            at >= 200 - 2 * lossy.len(),
            "lossy {} ranked {at} of 200",
            fleet.nodes[*i].name
        );
    }
    Ok(())
}
