//! The lab's rate limits, checked with iperf3 (root; CI runs it): a zone link's capacity at the
//! hub is shared by every flow that crosses it, each way, and leaves the other zone links and the
//! traffic inside a zone alone; a node's egress limit slows what it sends and not what it
//! receives.

use std::time::Duration;

use anyhow::{Result, ensure};
use zonemesh_lab::tools::iperf3;
use zonemesh_lab::{Lab, LabSpec, cleanup_on_signals};
use zonemesh_tests::{lab_can_run, tool_available};

const MBIT: f64 = 1e6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_link_capacity_is_shared_and_an_egress_limit_has_one_direction() -> Result<()> {
    if !lab_can_run("lab_shaping")
        || !tool_available("iperf3", &["--version"], "apt-get install iperf3")
    {
        return Ok(());
    }
    cleanup_on_signals();
    let mut lab = Lab::build(
        LabSpec::new()
            .zone("zone-a", &["a1", "a2", "a3"])
            .zone("zone-b", &["b1", "b2"])
            .zone("zone-c", &["c1"])
            .delay("zone-a", "zone-b", Duration::from_millis(2), Duration::ZERO)
            .link_rate("zone-a", "zone-b", 100_000_000)
            .node_egress_rate("a3", 100_000_000),
    )?;
    let rate = |src: &'static str, dst: &'static str| {
        let lab = &lab;
        async move {
            let bps = iperf3(lab, src, dst, 2).await?;
            println!("{src} -> {dst}: {:.1} Mbit/s", bps / MBIT);
            anyhow::Ok(bps)
        }
    };
    // Across the thin link, each way: at most its 100 Mbit/s (TCP's goodput a few % under).
    for (src, dst) in [("a1", "b1"), ("b1", "a1")] {
        let bps = rate(src, dst).await?;
        ensure!(
            (80.0 * MBIT..=101.0 * MBIT).contains(&bps),
            "{src} -> {dst} across a 100 Mbit/s zone link: {:.1} Mbit/s",
            bps / MBIT
        );
    }
    // Two flows across it at once share it.
    let (one, two) = tokio::join!(rate("a1", "b1"), rate("a2", "b2"));
    let (one, two) = (one?, two?);
    ensure!(
        one + two <= 101.0 * MBIT && one.min(two) >= 20.0 * MBIT,
        "two flows across the zone link: {:.1} + {:.1} Mbit/s",
        one / MBIT,
        two / MBIT
    );
    // Another zone link and the zone's own bridge are not limited.
    for (src, dst) in [("a1", "c1"), ("a1", "a2")] {
        let bps = rate(src, dst).await?;
        ensure!(
            bps > 400.0 * MBIT,
            "{src} -> {dst} without a limit: {:.1} Mbit/s",
            bps / MBIT
        );
    }
    // a3 sends at 100 Mbit/s and receives unlimited.
    let out = rate("a3", "a1").await?;
    let inn = rate("a1", "a3").await?;
    ensure!(
        (80.0 * MBIT..=101.0 * MBIT).contains(&out) && inn > 400.0 * MBIT,
        "a3's egress limit: out {:.1}, in {:.1} Mbit/s",
        out / MBIT,
        inn / MBIT
    );
    lab.remove()?;
    Ok(())
}
