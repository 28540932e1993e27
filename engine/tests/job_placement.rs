//! `Place` with a job against the exhaustive optimum: random clusters small enough to try every
//! node set and every rank order that matters, every pair measured (RTT, loss, throughput), jobs
//! of every collective and three sizes, half of them fitting one zone and half spanning zones.
//! The optimum is over the same number of zones as `Place` uses (`Place` keeps the fewest-zones
//! rule) and prices with the same `collective::predict` over the same measured network.
//!
//! Measured (1,000 instances, seeds 0..1000, half spanning zones), since the network shares a
//! node's own link (its model cap) among the flows it carries at once: fitting one zone 100 %
//! within 10 % of the optimum, worst gap 0.1 % (seed 722, hierarchical all-reduce); spanning
//! zones 99.8 %, worst gap 10.7 % (seed 279, parameter server with 2 servers, 16 MB: the search
//! steers by the worst link and the worst own-link load separately, and the exact polish does not
//! reach the optimum's server choice). Before the node caps were shared the worst gaps were
//! 3.6 % and 4.1 %. The test prints the figures and every instance above 10 %.

#[path = "support/quality.rs"]
#[allow(dead_code)]
mod quality;

use quality::Rng;
use zonemesh_domain::{
    Collective, Hello, IcmpMode, Job, NodeName, PlaceQuery, Report, UnixMs, ZoneName,
};
use zonemesh_engine::collective::predict;
use zonemesh_engine::network::SnapshotNetwork;
use zonemesh_engine::{EngineConfig, NodeId, Topology};

/// Instances: seeds 0.., the odd ones spanning zones.
const INSTANCES: u64 = 1_000;
/// Share of instances whose predicted time must be within [`WITHIN`] of the optimum's.
const SHARE_AT_LEAST: f64 = 0.95;
/// 10 %.
const WITHIN: f64 = 0.10;
/// The worst gap allowed: the worst measured (10.7 %), with a margin.
const WORST_GAP_AT_MOST: f64 = 0.15;

struct Instance {
    topology: Topology,
    query: PlaceQuery,
    now: UnixMs,
    spans: bool,
}

/// 2–3 zones of 2–4 nodes (at most 8 nodes); one node in 6 lossy (1–5 %), one in 6 slow
/// (1 Gbit/s among 10–25 Gbit/s); zones 300 µs to 6 ms apart; a job of 2–5 workers that fits
/// the largest zone, or (`spans`) does not.
fn instance(seed: u64, spans: bool) -> Instance {
    let mut rng = Rng::new(seed);
    let zones = rng.int(2, 3);
    let mut nodes: Vec<(String, usize, f64, f64, f64)> = Vec::new(); // name, zone, delay, loss, nic
    for z in 0..zones {
        for i in 0..rng.int(2, 8 / zones) {
            let (loss, nic) = match rng.int(0, 5) {
                0 => (rng.range(0.01, 0.05), 10e9),
                1 => (0.0, 1e9),
                _ => (0.0, rng.range(10e9, 25e9)),
            };
            nodes.push((format!("z{z}-n{i}"), z, rng.range(10.0, 80.0), loss, nic));
        }
    }
    let mut zone_rtt = vec![vec![40.0; zones]; zones];
    let pairs: Vec<(usize, usize)> = (0..zones)
        .flat_map(|a| (a + 1..zones).map(move |b| (a, b)))
        .collect();
    for (a, b) in pairs {
        let rtt = rng.range(300.0, 6_000.0);
        zone_rtt[a][b] = rtt;
        zone_rtt[b][a] = rtt;
    }
    let now = UnixMs(1_000_000);
    let mut topology = Topology::new(EngineConfig::default());
    for (name, zone, ..) in &nodes {
        topology.register(
            &Hello {
                node: NodeName::parse("node", name.as_str()).unwrap(),
                zone: ZoneName::parse("zone", format!("zone-{zone}")).unwrap(),
                region: None,
                addresses: vec!["192.0.2.1".parse().unwrap()],
                agent_version: String::new(),
                icmp_mode: IcmpMode::Raw,
                probe_port: 7402,
            },
            now,
        );
    }
    for src in &nodes {
        let name = NodeName::parse("node", src.0.as_str()).unwrap();
        let paths = nodes
            .iter()
            .filter(|dst| dst.0 != src.0)
            .map(|dst| {
                let rtt = (zone_rtt[src.1][dst.1] + src.2 + dst.2) * rng.range(0.95, 1.05);
                let loss = 1.0 - (1.0 - src.3) * (1.0 - dst.3);
                let lost = (1000.0 * loss).round() as u64;
                let across = if src.1 == dst.1 { 1.0 } else { 0.4 };
                let bps = src.4.min(dst.4) * across * rng.range(0.9, 1.0);
                let bytes = (bps / 8.0) as u64;
                quality::measured_path(&name, dst.0.as_str(), rtt, lost, bytes, now)
            })
            .collect();
        let id = topology.id(&name).unwrap();
        topology
            .apply_report(id, &Report { sequence: 1, paths }, now)
            .unwrap();
    }
    topology.sweep(now);
    let largest = (0..zones)
        .map(|z| nodes.iter().filter(|n| n.1 == z).count())
        .max()
        .unwrap();
    let workers = if spans {
        rng.int(
            largest + 1,
            (largest + 2).min(nodes.len()).min(5).max(largest + 1),
        )
    } else {
        rng.int(2, largest.min(5))
    } as u32;
    let collective = match rng.int(0, 3) {
        0 => Collective::RingAllReduce,
        1 => Collective::HierarchicalAllReduce,
        2 => Collective::ParameterServer {
            servers: rng.int(1, 2).min(workers as usize) as u32,
        },
        _ => Collective::AllToAll,
    };
    let bytes = [256_000, 4_000_000, 16_000_000][rng.int(0, 2)];
    Instance {
        topology,
        query: PlaceQuery {
            workers,
            job: Some(Job {
                collective,
                bytes_per_iteration: bytes,
            }),
            ..PlaceQuery::default()
        },
        now,
        spans,
    }
}

/// Calls `f` with every permutation of `items` (Heap's algorithm).
fn permutations(items: &mut Vec<usize>, k: usize, f: &mut dyn FnMut(&[usize])) {
    if k <= 1 {
        f(items);
        return;
    }
    for i in 0..k {
        permutations(items, k - 1, f);
        let j = if k.is_multiple_of(2) { i } else { 0 };
        items.swap(j, k - 1);
    }
}

/// The smallest predicted time over every set of `workers` nodes spanning `zones` zones and
/// every rank order that can change it.
fn optimum(i: &Instance, zones: usize) -> f64 {
    let view = i.topology.view();
    let ids: Vec<NodeId> = view.nodes().map(|(id, _)| id).collect();
    let net = SnapshotNetwork::new(view, ids.clone(), i.now);
    let job = i.query.job.unwrap();
    let w = i.query.workers as usize;
    let n = ids.len();
    let mut best = f64::INFINITY;
    let mut pick: Vec<usize> = (0..w).collect();
    loop {
        let mut zs: Vec<_> = pick.iter().map(|&x| view.zone_of(ids[x])).collect();
        zs.sort();
        zs.dedup();
        if zs.len() == zones {
            let mut eval = |ranks: &[usize]| {
                best = best.min(predict(&job, ranks, &net).seconds);
            };
            match job.collective {
                // Rotations of a ring are the same ring; so are those of a pairwise exchange
                // (round k pairs rank r with r + k), whose rounds depend on the order.
                Collective::RingAllReduce | Collective::AllToAll => {
                    let mut rest = pick[1..].to_vec();
                    let k = rest.len();
                    permutations(&mut rest, k, &mut |r| {
                        let mut ranks = vec![pick[0]];
                        ranks.extend_from_slice(r);
                        eval(&ranks);
                    });
                }
                // Only which ranks are servers matters.
                Collective::ParameterServer { servers } => {
                    let s = servers as usize;
                    let mut chosen: Vec<usize> = (0..s).collect();
                    loop {
                        let mut ranks: Vec<usize> = chosen.iter().map(|&c| pick[c]).collect();
                        ranks.extend((0..w).filter(|x| !chosen.contains(x)).map(|x| pick[x]));
                        eval(&ranks);
                        let Some(x) = (0..s).rev().find(|&x| chosen[x] < w - s + x) else {
                            break;
                        };
                        chosen[x] += 1;
                        for y in x + 1..s {
                            chosen[y] = chosen[y - 1] + 1;
                        }
                    }
                }
                Collective::HierarchicalAllReduce => {
                    let mut all = pick.clone();
                    permutations(&mut all, w, &mut |r| eval(r));
                }
            }
        }
        let Some(x) = (0..w).rev().find(|&x| pick[x] < n - w + x) else {
            break;
        };
        pick[x] += 1;
        for y in x + 1..w {
            pick[y] = pick[y - 1] + 1;
        }
    }
    best
}

#[test]
fn place_predicts_within_ten_percent_of_the_exhaustive_optimum() {
    let mut gaps: Vec<(f64, u64, bool, String)> = Vec::new();
    for seed in 0..INSTANCES {
        let i = instance(seed, seed % 2 == 1);
        let p = i.topology.view().place(&i.query, i.now).unwrap();
        let predicted = p.prediction.as_ref().unwrap().seconds;
        let opt = optimum(&i, p.zones.len());
        assert!(
            predicted >= opt * (1.0 - 1e-9),
            "seed {seed}: Place's {predicted} below the optimum {opt}"
        );
        let gap = if opt > 0.0 {
            predicted / opt - 1.0
        } else {
            0.0
        };
        let job = i.query.job.unwrap();
        gaps.push((
            gap,
            seed,
            i.spans,
            format!(
                "{} workers, {} of {} B",
                i.query.workers, job.collective, job.bytes_per_iteration
            ),
        ));
    }
    for g in gaps.iter().filter(|g| g.0 > WITHIN) {
        println!(
            "miss: {:.1} % seed {} spans {} {}",
            g.0 * 100.0,
            g.1,
            g.2,
            g.3
        );
    }
    for spans in [false, true] {
        let part: Vec<_> = gaps.iter().filter(|g| g.2 == spans).collect();
        let within = part.iter().filter(|g| g.0 <= WITHIN).count() as f64 / part.len() as f64;
        let worst = part.iter().max_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
        let what = if spans {
            "spanning zones"
        } else {
            "fitting one zone"
        };
        println!(
            "{what}: {} instances, {:.1} % within 10 % of the optimum, worst gap {:.1} % (seed {}, {})",
            part.len(),
            within * 100.0,
            worst.0 * 100.0,
            worst.1,
            worst.3
        );
        assert!(
            within >= SHARE_AT_LEAST,
            "{what}: only {:.1} % of instances within 10 % of the optimum",
            within * 100.0
        );
        assert!(
            worst.0 <= WORST_GAP_AT_MOST,
            "{what}: worst gap {:.1} % (seed {}, {}) above the bound of {:.0} %",
            worst.0 * 100.0,
            worst.1,
            worst.3,
            WORST_GAP_AT_MOST * 100.0
        );
    }
}
