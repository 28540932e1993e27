//! `zonemesh-lab bench`: what the lab itself sustains.

use std::time::Duration;

use anyhow::Result;
use zonemesh_experiments::accuracy::TCP_GOODPUT_SHARE;
use zonemesh_experiments::machine;
use zonemesh_lab::tools::iperf3;
use zonemesh_lab::{Lab, LabSpec};

/// iperf3 through the link emulator: 19 ms round trip (9.5 ms each way, as in issue 5's
/// figures), unshaped, then with a 43 Mbit/s tbf on the receiver, beside the same transfers
/// inside one zone (no emulator).
pub async fn bench(seconds: u32) -> Result<()> {
    let ms = Duration::from_millis;
    let spec = LabSpec::new()
        .zone("zone-x", &["x1", "x2"])
        .zone("zone-y", &["y1", "y2"])
        .delay("zone-x", "zone-y", ms(19), Duration::ZERO)
        .node_rate("y2", 43_000_000)
        .node_rate("x2", 43_000_000);
    let lab = Lab::build(spec)?;
    println!(
        "lab bench, {} — {}",
        machine::describe(),
        machine::utc_minute()
    );
    println!("iperf3 -t {seconds} -O 1, one TCP stream, MTU 1500:");
    let mut results = Vec::new();
    for (src, dst, what) in [
        ("x1", "y1", "through the emulator, 19 ms RTT, unshaped"),
        ("x1", "x2", "inside a zone (no emulator), 43 Mbit/s tbf"),
        ("x1", "y2", "through the emulator, 19 ms RTT, 43 Mbit/s tbf"),
    ] {
        let bps = iperf3(&lab, src, dst, seconds).await?;
        println!("  {src} -> {dst}: {:.1} Mbit/s  ({what})", bps / 1e6);
        results.push(bps);
    }
    let expected = 43e6 * TCP_GOODPUT_SHARE;
    println!(
        "  43 Mbit/s tbf carries {:.1} Mbit/s of TCP payload (1448 of every 1514 bytes): delayed path at {:.3} of it, undelayed at {:.3}",
        expected / 1e6,
        results[2] / expected,
        results[1] / expected
    );
    if let Some(e) = lab.emulator() {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &e.counters;
        let released = c.released.load(Relaxed).max(1);
        println!(
            "  emulator: {} packets (GSO super-packets count once), {} verdict messages, on average {:.1} µs late and {:.1} µs early, at most {} held",
            c.packets.load(Relaxed),
            c.verdicts.load(Relaxed),
            c.late_ns.load(Relaxed) as f64 / released as f64 / 1e3,
            c.early_ns.load(Relaxed) as f64 / released as f64 / 1e3,
            c.peak_held.load(Relaxed)
        );
    }
    Ok(())
}
