//! The lab's rate limits, checked with iperf3 (root; CI runs it): a zone link's capacity at the
//! hub is shared by every flow that crosses it, each way, and leaves the other zone links and the
//! traffic inside a zone alone; a node's egress limit slows what it sends and not what it
//! receives. And the faults injected into a running lab (`Lab::inject`), checked with ping and
//! iperf3, each where it belongs and gone once cleared.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Result, ensure};
use zonemesh_lab::tools::{iperf3, ping_rtts, start_ping};
use zonemesh_lab::{Injection, Lab, LabSpec, cleanup_on_signals};
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

/// Pings `src` → `dst` `count` times 10 ms apart: (replies, median RTT µs).
async fn ping(lab: &Lab, src: &str, dst: &str, count: u32) -> Result<(usize, f64)> {
    let mut rtts = ping_rtts(start_ping(lab, src, dst, count, Duration::from_millis(10))?).await?;
    rtts.sort_by(f64::total_cmp);
    let median = rtts.get(rtts.len() / 2).copied().unwrap_or(f64::NAN);
    Ok((rtts.len(), median))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_faults_show_where_they_were_put_and_go_when_cleared() -> Result<()> {
    if !lab_can_run("lab_shaping")
        || !tool_available("iperf3", &["--version"], "apt-get install iperf3")
    {
        return Ok(());
    }
    cleanup_on_signals();
    let mut lab = Lab::build(
        LabSpec::new()
            .zone("zone-a", &["a1", "a2", "a3"])
            .zone("zone-b", &["b1"])
            .delay("zone-a", "zone-b", Duration::from_millis(2), Duration::ZERO)
            .node_egress_rate("a1", 1_000_000_000),
    )?;
    const N: u32 = 300;
    // Clean: nothing lost, 2 ms across.
    let (got, rtt) = ping(&lab, "a1", "b1", N).await?;
    ensure!(
        got == N as usize && (1_900.0..2_600.0).contains(&rtt),
        "clean: {got}/{N}, {rtt} µs"
    );

    // a2 drops 30 % of what reaches it: a round trip through it loses about that, others none.
    let loss = |got: usize| 1.0 - got as f64 / f64::from(N);
    for fault in [
        Injection::NodeLossIn {
            node: "a2".into(),
            loss: 0.3,
        },
        Injection::NodeLossOut {
            node: "a2".into(),
            loss: 0.3,
        },
    ] {
        lab.inject(&fault)?;
        let (through, _) = ping(&lab, "a1", "a2", N).await?;
        let (beside, _) = ping(&lab, "a1", "a3", N).await?;
        println!(
            "{fault:?}: a1 → a2 {:.1} %, a1 → a3 {:.1} %",
            100.0 * loss(through),
            100.0 * loss(beside)
        );
        ensure!(
            (0.2..0.4).contains(&loss(through)),
            "{fault:?}: {through}/{N} through a2"
        );
        ensure!(beside == N as usize, "{fault:?}: {beside}/{N} beside a2");
        lab.clear()?;
        ensure!(
            ping(&lab, "a1", "a2", N).await?.0 == N as usize,
            "{fault:?} cleared"
        );
    }

    // One path: a1–a3 loses, a1–a2 and a2–a3 do not.
    lab.inject(&Injection::PathLoss {
        a: "a1".into(),
        b: "a3".into(),
        loss: 0.3,
    })?;
    let (path, _) = ping(&lab, "a3", "a1", N).await?;
    let (others, _) = ping(&lab, "a2", "a3", N).await?;
    println!(
        "path a1–a3: {:.1} %, a2 → a3: {:.1} %",
        100.0 * loss(path),
        100.0 * loss(others)
    );
    ensure!(
        (0.35..0.65).contains(&loss(path)),
        "a1–a3 (30 % each way): {path}/{N}"
    );
    ensure!(others == N as usize, "a2 → a3: {others}/{N}");
    lab.clear()?;

    // The zone link: loss each way, and 3 ms more round trip; inside zone-a neither.
    lab.inject(&Injection::LinkLoss {
        a: "zone-a".into(),
        b: "zone-b".into(),
        loss: 0.2,
    })?;
    lab.inject(&Injection::LinkDelay {
        a: "zone-a".into(),
        b: "zone-b".into(),
        extra: Duration::from_millis(3),
    })?;
    let (across, rtt) = ping(&lab, "a1", "b1", N).await?;
    let (inside, inside_rtt) = ping(&lab, "a1", "a2", N).await?;
    println!(
        "zone link: {:.1} % lost, {rtt:.0} µs; inside: {inside}/{N}, {inside_rtt:.0} µs",
        100.0 * loss(across)
    );
    ensure!(
        (0.25..0.5).contains(&loss(across)),
        "across (20 % each way): {across}/{N}"
    );
    ensure!(
        (4_800.0..5_800.0).contains(&rtt),
        "across, 2 + 3 ms: {rtt} µs"
    );
    ensure!(
        inside == N as usize && inside_rtt < 1_000.0,
        "inside: {inside}/{N}, {inside_rtt} µs"
    );
    lab.clear()?;
    let (back, rtt) = ping(&lab, "a1", "b1", N).await?;
    ensure!(
        back == N as usize && rtt < 2_600.0,
        "cleared: {back}/{N}, {rtt} µs"
    );

    // An egress limit: a1 sends at 100 Mbit/s instead of its 1 Gbit/s and receives as before;
    // cleared, it sends at 1 Gbit/s again.
    // It is put on while a1 sends at full speed, as the localisation experiment does, and a1
    // still answers afterwards (a tbf lowered in place kept a packet it could never send).
    let quiet = |node: &str, args: &[&str]| {
        tokio::process::Command::from(lab.command(node, "iperf3"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
    };
    let _server = quiet("a2", &["-s", "-1", "-p", "5301"])?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let a2 = lab.node("a2").address.to_string();
    let mut client = quiet("a1", &["-c", &a2, "-p", "5301", "-t", "3"])?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    lab.inject(&Injection::NodeEgressRate {
        node: "a1".into(),
        bps: 100_000_000,
    })?;
    let sent = tokio::time::timeout(Duration::from_secs(10), client.wait()).await;
    ensure!(
        matches!(sent, Ok(Ok(status)) if status.success()),
        "iperf3 a1 -> a2, capped mid-transfer, did not finish within 10 s: {sent:?}"
    );
    let (answered, _) = ping(&lab, "a1", "a2", 50).await?;
    ensure!(
        answered == 50,
        "a1 capped mid-transfer: {answered}/50 pings answered"
    );
    let out = iperf3(&lab, "a1", "a2", 2).await?;
    let inn = iperf3(&lab, "a2", "a1", 2).await?;
    println!(
        "a1 capped: out {:.1}, in {:.1} Mbit/s",
        out / MBIT,
        inn / MBIT
    );
    ensure!(
        (80.0 * MBIT..=101.0 * MBIT).contains(&out) && inn > 400.0 * MBIT,
        "out {out}, in {inn}"
    );
    lab.clear()?;
    let freed = iperf3(&lab, "a1", "a2", 2).await?;
    ensure!(freed > 400.0 * MBIT, "cleared: {:.1} Mbit/s", freed / MBIT);
    ensure!(lab.injected().is_empty());

    // Bad injections change nothing.
    ensure!(
        lab.inject(&Injection::NodeLossIn {
            node: "z9".into(),
            loss: 0.1
        })
        .is_err()
    );
    ensure!(lab.injected().is_empty());
    lab.remove()?;
    Ok(())
}
