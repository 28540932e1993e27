//! Engine and store benchmarks at 5,000 nodes in 50 zones. Prints its figures; run with
//!
//! ```text
//! cargo bench -p zonemesh-aggregator --bench engine
//! ```
//!
//! Latencies are measured per call with `Instant` around the engine call alone (no gRPC), as
//! p50/p99 over repeated calls; ingest rates as path summaries per second over whole batches.

// A bench reads the monotonic clock around what it times (the clock rule is for the server).
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

#[path = "../../engine/benches/support/cluster.rs"]
mod cluster;

use cluster::{PER_ZONE, ZONES, name, quantiles, reports};
use zonemesh_aggregator::store::{Batch, SledStore, Store};
use zonemesh_domain::{
    Hello, IcmpMode, MatrixQuery, Metric, NodeName, PlaceQuery, RankQuery, UnixMs, ZoneName,
};
use zonemesh_engine::model::Model;
use zonemesh_engine::model::holdout::holdout;
use zonemesh_engine::testing::synthetic;
use zonemesh_engine::{EngineConfig, Topology};

/// This process's resident set, bytes.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

fn main() {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let wants = |what: &str| filter.as_deref().is_none_or(|f| what.contains(f));
    println!(
        "machine: {} cores; zonemesh engine at {} nodes in {ZONES} zones",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        ZONES * PER_ZONE
    );
    let now = UnixMs(1_700_000_000_000);
    let rss_empty = rss_bytes();
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

    // Ingest into the engine alone.
    let batch = reports(&topology, now, 1);
    let summaries: usize = batch.iter().map(|(_, r)| r.paths.len()).sum();
    let started = Instant::now();
    for (node, report) in &batch {
        let id = topology.id(node).unwrap();
        topology.apply_report(id, report, now).unwrap();
    }
    let first = started.elapsed();
    topology.take_dirty();
    let later = UnixMs(now.0 + 10_000);
    let batch = reports(&topology, later, 2);
    let started = Instant::now();
    for (node, report) in &batch {
        let id = topology.id(node).unwrap();
        topology.apply_report(id, report, later).unwrap();
    }
    let second = started.elapsed();
    println!(
        "engine ingest: {summaries} path summaries; first window {:.0}/s (creates paths), next window {:.0}/s",
        summaries as f64 / first.as_secs_f64(),
        summaries as f64 / second.as_secs_f64()
    );
    let full_mesh = (ZONES * PER_ZONE) * (ZONES * PER_ZONE - 1);
    println!(
        "probe plan: {summaries} directed paths = {:.2} % of the full mesh ({:.1} per node)",
        100.0 * summaries as f64 / full_mesh as f64,
        summaries as f64 / (ZONES * PER_ZONE) as f64
    );
    let started = Instant::now();
    topology.sweep(later);
    println!(
        "sweep (exact recompute of all sums): {:?}",
        started.elapsed()
    );
    drop(batch);
    let rss_engine = rss_bytes().saturating_sub(rss_empty);
    println!(
        "engine state: RSS {:.0} MiB above the empty process for {} paths = {:.0} bytes a path (target < 600)",
        rss_engine as f64 / f64::from(1 << 20),
        topology.view().path_count(),
        rss_engine as f64 / topology.view().path_count() as f64
    );
    // Publishing: a snapshot copies one pointer per table; the writer's next write copies the
    // chunks (and rows) it touches.
    let mut times = Vec::new();
    let mut writes = Vec::new();
    for (node, report) in reports(&topology, later, 3).iter().take(200) {
        let started = Instant::now();
        let snapshot = topology.snapshot();
        times.push(started.elapsed());
        let id = topology.id(node).unwrap();
        let started = Instant::now();
        topology.apply_report(id, report, later).unwrap();
        writes.push(started.elapsed());
        drop(snapshot);
    }
    let (p50, p99) = quantiles(times);
    let (w50, w99) = quantiles(writes);
    println!(
        "publish a snapshot: p50 {p50:?} p99 {p99:?}; the next report's apply (copies its row): p50 {w50:?} p99 {w99:?}"
    );

    if wants("rank") {
        bench_rank(&topology, later);
    }

    if wants("zones") {
        bench_zones(&topology, later);
    }

    if wants("place") {
        bench_place(&topology, later);
    }

    if wants("model") {
        bench_model(&topology, later);
    }
    if wants("place-job") {
        // The same Place with the job model: nodes and rank order by predicted time.
        cluster::place_jobs(&topology, later);
    }

    if wants("store") {
        bench_store(&topology, later);
    }
}

/// RankNodes over all 5,000 nodes, and scored against 8 peers.
fn bench_rank(topology: &Topology, later: UnixMs) {
    let mut times = Vec::new();
    for _ in 0..300 {
        let started = Instant::now();
        let r = topology.view().rank(&RankQuery::default(), later).unwrap();
        times.push(started.elapsed());
        assert_eq!(r.nodes.len(), ZONES * PER_ZONE);
    }
    let (p50, p99) = quantiles(times);
    println!(
        "RankNodes over 5000 nodes (all candidates): p50 {p50:?} p99 {p99:?} (target p99 < 2 ms)"
    );
    let peers: Vec<NodeName> = (0..8).map(|n| name(3, n)).collect();
    let mut times = Vec::new();
    for _ in 0..300 {
        let started = Instant::now();
        topology
            .view()
            .rank(
                &RankQuery {
                    peers: peers.clone(),
                    ..RankQuery::default()
                },
                later,
            )
            .unwrap();
        times.push(started.elapsed());
    }
    let (p50, p99) = quantiles(times);
    println!("RankNodes over 5000 nodes scored against 8 peers: p50 {p50:?} p99 {p99:?}");
}

/// ListZones of 50 zones, and GetMatrix of one zone of 100 nodes.
fn bench_zones(topology: &Topology, later: UnixMs) {
    let mut times = Vec::new();
    for _ in 0..300 {
        let started = Instant::now();
        let z = topology.view().list_zones(&Default::default(), later);
        times.push(started.elapsed());
        assert_eq!(z.zones.len(), ZONES);
    }
    let (p50, p99) = quantiles(times);
    println!("ListZones of 50 zones: p50 {p50:?} p99 {p99:?}");
    let mut times = Vec::new();
    for i in 0..300 {
        let query = MatrixQuery {
            metric: Metric::RttP50Us,
            zone: Some(ZoneName::parse("zone", format!("zone-{:02}", i % ZONES)).unwrap()),
            nodes: Vec::new(),
            page: Default::default(),
        };
        let started = Instant::now();
        let m = topology.view().matrix(&query, later).unwrap();
        times.push(started.elapsed());
        assert_eq!(m.nodes.len(), PER_ZONE);
    }
    let (p50, p99) = quantiles(times);
    println!("GetMatrix of one zone of 100 nodes: p50 {p50:?} p99 {p99:?}");
}

/// Place of 64 workers among 5,000 nodes in 50 zones.
fn bench_place(topology: &Topology, later: UnixMs) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..200 {
        let started = Instant::now();
        let p = topology
            .view()
            .place(
                &PlaceQuery {
                    workers: 64,
                    ..PlaceQuery::default()
                },
                later,
            )
            .unwrap();
        times.push(started.elapsed());
        last = Some(p);
    }
    let (p50, p99) = quantiles(times);
    let p = last.unwrap();
    println!(
        "Place 64 workers among 5000 nodes in 50 zones: p50 {p50:?} p99 {p99:?} (target p99 < 10 ms); zones {:?}, worst RTT {:.0} µs",
        p.zones, p.worst_rtt_us
    );
}

/// The model's fit at 5,000 nodes, and its error on held-out paths of synthetic clusters.
fn bench_model(topology: &Topology, later: UnixMs) {
    // The model's fit, as the writer runs it at the end of a sweep pass (every 10 s).
    let mut times = Vec::new();
    let mut rounds = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let model = Model::fit(topology.view(), later);
        times.push(started.elapsed());
        rounds = model.rounds();
    }
    let (p50, _) = quantiles(times.clone());
    println!(
        "model fit over {} paths at 5000 nodes: p50 {p50:?}, max {:?} ({rounds} RTT rounds)",
        topology.view().path_count(),
        times.iter().max().unwrap()
    );
    // Its error on held-out inter-zone paths of synthetic clusters measured as the planner
    // probes them (zonemesh_engine::testing::synthetic).
    for (zones, per_zone, k) in [(50, 100, 2), (50, 100, 4), (8, 12, 4)] {
        for seed in 0..3 {
            let (t, truth) = synthetic(zones, per_zone, k, seed, later);
            let started = Instant::now();
            let error = holdout(t.view(), later);
            println!(
                "model error, {zones} zones of {per_zone}, {k} pairs between zones, seed {seed} ({} slow, {} lossy nodes; 2 fits in {:?}): {}",
                truth.slow.len(),
                truth.lossy.len(),
                started.elapsed(),
                error.summary()
            );
        }
    }
}

/// Durable ingest (the engine and sled, group commit as the server does it) and a restart.
fn bench_store(topology: &Topology, later: UnixMs) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = SledStore::open(dir.path()).unwrap();
    let mut t = topology.clone();
    t.take_dirty();
    let mut applied = 0usize;
    let mut commits = 0usize;
    let started = Instant::now();
    for round in 0..3 {
        let at = UnixMs(later.0 + 10_000 * (round + 1));
        let batch = reports(&t, at, 3 + round as u64);
        // Group commit as the server does it: about 100 reports (10,000 summaries) a batch.
        for chunk in batch.chunks(100) {
            for (node, report) in chunk {
                let id = t.id(node).unwrap();
                t.apply_report(id, report, at).unwrap();
                applied += report.paths.len();
            }
            store.commit(&Batch::from_dirty(&mut t)).unwrap();
            commits += 1;
        }
    }
    let elapsed = started.elapsed();
    println!(
        "durable ingest (engine + sled, {commits} flushed commits): {:.0} path summaries/s; sled size {:.1} MiB",
        applied as f64 / elapsed.as_secs_f64(),
        store.size_bytes() as f64 / (1024.0 * 1024.0)
    );
    let started = Instant::now();
    let snapshot = store.load().unwrap();
    let paths = snapshot.paths.len();
    let restored = Topology::restore(
        EngineConfig::default(),
        snapshot.nodes,
        snapshot.paths,
        later,
    );
    println!(
        "restart: load and restore {paths} paths in {:?}",
        started.elapsed()
    );
    assert_eq!(restored.view().path_count(), t.view().path_count());
}
