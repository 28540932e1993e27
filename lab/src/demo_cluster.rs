//! The demo cluster — that of `zonemesh demo`, of the end-to-end tests and of the accuracy
//! report: three zones of three nodes, different delays between the zones, one lossy node and
//! one slow node; the aggregator flags that fill its matrix in about a minute; and starting it
//! and waiting until it has settled.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::fill::Fill;
use crate::stack::{Stack, StackOptions, wait_full, wait_quiet};
use crate::{Lab, LabSpec};

/// The node that drops 5 % of the packets that reach it.
pub const LOSSY_NODE: &str = "a2";
/// Its loss.
pub const LOSSY_LOSS: f64 = 0.05;
/// The node whose link runs at 100 Mbit/s.
pub const SLOW_NODE: &str = "b3";
/// Its rate, bit/s.
pub const SLOW_RATE_BPS: u64 = 100_000_000;
/// Every other node's link, bit/s (a 1 Gbit/s NIC).
pub const NODE_RATE_BPS: u64 = 1_000_000_000;
/// The zone without an impaired node: where a small job belongs.
pub const BEST_ZONE: &str = "zone-c";

/// Three zones of three nodes: zone-a and zone-b 2 ms apart, zone-a and zone-c 6 ms, zone-b and
/// zone-c 10 ms (round trip, with jitter); `a2` loses 5 %, `b3` runs at 100 Mbit/s, every other
/// node at 1 Gbit/s.
pub fn spec() -> LabSpec {
    let us = Duration::from_micros;
    let mut spec = LabSpec::new()
        .zone("zone-a", &["a1", "a2", "a3"])
        .zone("zone-b", &["b1", "b2", "b3"])
        .zone("zone-c", &["c1", "c2", "c3"])
        .delay("zone-a", "zone-b", us(2_000), us(50))
        .delay("zone-a", "zone-c", us(6_000), us(100))
        .delay("zone-b", "zone-c", us(10_000), us(150))
        .node_loss(LOSSY_NODE, LOSSY_LOSS);
    let nodes: Vec<String> = spec.all_nodes().map(str::to_owned).collect();
    for node in nodes {
        let rate = if node == SLOW_NODE {
            SLOW_RATE_BPS
        } else {
            NODE_RATE_BPS
        };
        spec = spec.node_rate(&node, rate);
    }
    spec.seed = 7;
    spec
}

/// Aggregator flags that fill a small cluster's matrix in about a minute: short windows, ten
/// probes a second per path (so that 5 % loss stands out of the noise in a 30 s window), one throughput test of every planned pair (0.5 s warm-up, 2 s
/// counted), two at a time, each node resting as long as it tested (so that idle latency windows
/// keep coming between tests: windows under a test's load are left out of the figures).
pub const FAST_AGGREGATOR_FLAGS: &[&str] = &[
    "--window",
    "5s",
    "--probe-interval",
    "1s",
    "--train-size",
    "10",
    "--train-gap",
    "10ms",
    "--probe-timeout",
    "500ms",
    "--loss-window",
    "30s",
    "--stale-after",
    "20s",
    "--down-after",
    "15s",
    "--throughput-duration",
    "2s",
    "--throughput-warmup",
    "500ms",
    "--throughput-share",
    "0.5",
    "--throughput-max-concurrent",
    "2",
    "--throughput-interval",
    "1h",
    // Tiers every second. Groups join within 3 ms (zone-a and zone-b, 2 ms apart; zone-c is 6
    // and 10 ms away) and, on throughput, above 50 Mbit/s: until the placement model's
    // fault-aware zone-pair terms replace the roll-up (engine/src/zone_terms.rs), b3's 100 Mbit/s
    // weighs in zone-b's mean, and the default 100 Mbit/s could split zones over one node.
    "--tier-interval",
    "1s",
    "--tier-join-throughput",
    "50M",
    "--tier-leave-throughput",
    "40M",
    // Faults looked for every second, opened after 5 s bad, held 30 s; delays judged against
    // what the first 30 s of each element showed (the lab's faults are there from the start,
    // so they are a loss and a rate, never a delay).
    "--fault-interval",
    "1s",
    "--fault-open-after",
    "5s",
    "--fault-hold",
    "30s",
    "--fault-baseline",
    "30s",
];

/// The demo cluster built and running: the lab, and the stack in it (binaries from `dir`, logs
/// in `logs`).
pub fn start(dir: &Path, logs: &Path) -> Result<(Lab, Stack)> {
    let mut lab = Lab::build(spec())?;
    let mut options = StackOptions::new(dir, logs);
    options.aggregator_flags = FAST_AGGREGATOR_FLAGS.iter().map(|s| (*s).into()).collect();
    let stack = Stack::start(&mut lab, &options)?;
    Ok((lab, stack))
}

/// Waits until the matrix is full and the throughput tests that filled it are over, so that what
/// is measured next sees no test traffic.
pub async fn settle(lab: &Lab, stack: &Stack, progress: impl FnMut(&Fill)) -> Result<()> {
    let mut topology = stack.topology().await?;
    wait_full(
        &mut topology,
        lab.spec(),
        Duration::from_secs(240),
        progress,
    )
    .await?;
    wait_quiet(
        &stack.aggregator,
        Duration::from_secs(5),
        Duration::from_secs(120),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_cluster_is_valid_and_has_one_clean_zone() {
        let spec = spec();
        spec.validate().unwrap();
        assert_eq!(spec.all_nodes().count(), 9);
        let clean: Vec<&str> = spec
            .zones
            .iter()
            .filter(|z| z.nodes.iter().all(|n| n != LOSSY_NODE && n != SLOW_NODE))
            .map(|z| z.name.as_str())
            .collect();
        assert_eq!(clean, [BEST_ZONE]);
    }
}
