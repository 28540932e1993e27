//! A toy batch scheduler that embeds the zonemesh engine instead of calling the aggregator:
//! it keeps its own `Topology`, feeds it the agents' reports as they come (here: a synthetic
//! cluster of three racks, one with a congested top-of-rack switch), and places a queue of jobs
//! on the nodes left free, one zone per job where one can hold it.
//!
//! ```text
//! cargo run -p zonemesh-engine --example embedded_scheduler
//! ```
//!
//! It exits non-zero if a placement breaks the rules it relies on (every node used at most once,
//! zones kept), so CI runs it as a check.

use std::collections::BTreeSet;

use zonemesh_domain::{
    FieldError, Hello, IcmpMode, Micros, NodeName, PathSample, PlaceQuery, Report, Rtt, UnixMs,
    ZoneName, ZonePolicy,
};
use zonemesh_engine::{EngineConfig, Topology};

/// Three racks of six GPU nodes; rack-b's switch drops 2 % and adds delay.
fn cluster() -> Vec<(String, String)> {
    ["rack-a", "rack-b", "rack-c"]
        .iter()
        .flat_map(|rack| {
            (1..=6).map(move |i| (format!("{}-gpu{i}", &rack[5..]), (*rack).to_owned()))
        })
        .collect()
}

/// What an agent on `src` would report about `dst` after a 10 s window, checked as the engine
/// takes it.
fn sample(
    src: &(String, String),
    dst: &(String, String),
    now: UnixMs,
) -> Result<PathSample, FieldError> {
    let (rtt, lost) = match (src.1 == dst.1, src.1 == "rack-b" || dst.1 == "rack-b") {
        (true, false) => (45.0, 0),
        (true, true) => (180.0, 2),
        (false, _) => (900.0, 0),
    };
    let us = |field: &str, v: f64| Micros::parse(field, v);
    Ok(PathSample {
        src: NodeName::parse("src", src.0.as_str())?,
        dst: NodeName::parse("dst", dst.0.as_str())?,
        window_start: UnixMs(now.0 - 10_000),
        window_end: now,
        sent: 100,
        received: 100 - lost,
        rtt: Some(
            Rtt {
                samples: 100 - lost,
                min: us("min_us", rtt * 0.9)?,
                p50: us("p50_us", rtt)?,
                p90: us("p90_us", rtt * 1.1)?,
                p99: us("p99_us", rtt * 1.3)?,
                max: us("max_us", rtt * 1.5)?,
                mean: us("mean_us", rtt)?,
                jitter: us("jitter_us", 3.0)?,
            }
            .checked()?,
        ),
        histogram: None,
        throughput: None,
        method: Some(IcmpMode::Raw),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let now = UnixMs(1_700_000_000_000);
    let nodes = cluster();
    let mut topology = Topology::new(EngineConfig::default());
    for (node, rack) in &nodes {
        let hello = Hello {
            node: NodeName::parse("node", node.as_str())?,
            zone: ZoneName::parse("zone", rack.as_str())?,
            region: None,
            addresses: vec!["192.0.2.1".parse()?],
            agent_version: "embedded".into(),
            icmp_mode: IcmpMode::Raw,
            probe_port: 7402,
        };
        topology.register(&hello, now);
    }
    // The reports, as the scheduler's own probes would give them: one per node.
    for (seq, src) in nodes.iter().enumerate() {
        let report = Report {
            sequence: seq as u64 + 1,
            paths: nodes
                .iter()
                .filter(|d| d.0 != src.0)
                .map(|d| sample(src, d, now))
                .collect::<Result<_, _>>()?,
        };
        let name = NodeName::parse("node", src.0.as_str())?;
        let id = topology.id(&name).ok_or("registered node")?;
        topology.apply_report(id, &report.only_from(&name)?, now)?;
    }
    topology.sweep(now);

    // The queue: jobs of 4, 4, 6 and 3 workers; each takes whole nodes, which then are busy.
    let mut busy: BTreeSet<String> = BTreeSet::new();
    for (job, workers) in [
        ("resnet-50", 4),
        ("bert-large", 4),
        ("gpt-small", 6),
        ("vit", 3),
    ] {
        let free: Vec<(NodeName, u32)> = nodes
            .iter()
            .filter(|(n, _)| !busy.contains(n))
            .map(|(n, _)| Ok((NodeName::parse("node", n.as_str())?, 1)))
            .collect::<Result<_, FieldError>>()?;
        let query = PlaceQuery {
            workers,
            candidates: free,
            policy: ZonePolicy::PreferOne,
            ..PlaceQuery::default()
        };
        let placed = topology.view().place(&query, now)?;
        let chosen: Vec<&str> = placed.assignments.iter().map(|a| a.node.as_str()).collect();
        println!(
            "{job:<10} {workers} workers -> {:<42} zones {:<16} worst RTT {:>4.0} µs, loss {:.1} %",
            chosen.join(","),
            placed
                .zones
                .iter()
                .map(ZoneName::as_str)
                .collect::<Vec<_>>()
                .join(","),
            placed.worst_rtt_us,
            placed.worst_loss_ratio * 100.0
        );
        for n in &chosen {
            if !busy.insert((*n).to_owned()) {
                return Err(format!("{n} placed twice").into());
            }
        }
        let one_rack_fits = ["rack-a", "rack-b", "rack-c"].iter().any(|rack| {
            nodes
                .iter()
                .filter(|(n, r)| r == rack && (!busy.contains(n) || chosen.contains(&n.as_str())))
                .count()
                >= workers as usize
        });
        if one_rack_fits && placed.zones.len() != 1 {
            return Err(
                format!("{job} spans {:?} though a rack could hold it", placed.zones).into(),
            );
        }
        if job == "resnet-50" && placed.zones != ["rack-a"] && placed.zones != ["rack-c"] {
            return Err(format!("{job} went to the congested rack: {:?}", placed.zones).into());
        }
    }
    Ok(())
}
