//! `Place` with a job model at 5,000 nodes in 50 zones of 100 (the probe plan's paths measured,
//! as `zonemesh-aggregator`'s `engine` bench builds them), engine alone. Prints p50/p99 per
//! collective beside `Place` without a job, in one run; run with
//!
//! ```text
//! cargo bench -p zonemesh-engine --bench place_job
//! ```

// A bench measures wall-clock time around the engine's calls; the engine itself still takes
// `now` as an argument.
#![allow(clippy::disallowed_methods)]

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{PER_ZONE, ZONES, name, reports};
use zonemesh_domain::{Hello, IcmpMode, UnixMs, ZoneName};
use zonemesh_engine::{EngineConfig, Topology};

fn main() {
    let now = UnixMs(1_700_000_000_000);
    let mut topology = Topology::new(EngineConfig::default());
    for z in 0..ZONES {
        let zone = ZoneName::parse("zone", format!("zone-{z:02}")).unwrap();
        for n in 0..PER_ZONE {
            let hello = Hello {
                node: name(z, n),
                zone: zone.clone(),
                region: None,
                addresses: vec!["10.0.0.1".parse().unwrap()],
                agent_version: "bench".into(),
                icmp_mode: IcmpMode::Raw,
                probe_port: 7402,
            };
            topology.register(&hello, now);
        }
    }
    for (seq, at) in [(1, now), (2, UnixMs(now.0 + 10_000))] {
        for (node, report) in reports(&topology, at, seq) {
            let id = topology.id(&node).unwrap();
            topology.apply_report(id, &report, at).unwrap();
        }
    }
    let later = UnixMs(now.0 + 10_000);
    topology.sweep(later);
    println!(
        "machine: {} cores; Place of 64 workers among {} nodes in {ZONES} zones, 100 calls each",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        ZONES * PER_ZONE
    );
    cluster::place_jobs(&topology, later);
}
