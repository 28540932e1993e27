//! Placement quality: random clusters small enough to solve exactly, `Place`'s greedy choice
//! beside the best choice found by trying every subset (`place_exact_ids`). Shared by the test
//! `placement_quality` and the bench `placement` (included with `#[path]`).

use zonemesh_domain::{
    Hello, IcmpMode, NodeName, PathSample, PlaceQuery, Report, UnixMs, ZoneName, ZonePolicy,
};
use zonemesh_engine::place::Placement;
use zonemesh_engine::testing::SampleBuilder;
use zonemesh_engine::{EngineConfig, Topology};

/// splitmix64: a small, seedable generator, so that an instance is its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x1234_5678)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in lo..=hi.
    pub fn int(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
}

/// One random instance: a measured cluster and a job.
pub struct Instance {
    pub topology: Topology,
    pub query: PlaceQuery,
    pub now: UnixMs,
}

/// Up to 12 nodes in 1–3 zones; some lossy, some slow; every directed path measured with 1,000
/// probes; a job of 2–6 workers, one zone preferred (or, one time in three, any nodes).
pub fn instance(seed: u64) -> Instance {
    let mut rng = Rng::new(seed);
    let zones = rng.int(1, 3);
    let mut nodes: Vec<(String, usize, f64, f64, f64)> = Vec::new(); // name, zone, delay, loss, nic
    for z in 0..zones {
        for i in 0..rng.int(3, 12 / zones) {
            let (loss, nic) = match rng.int(0, 6) {
                0 => (rng.range(0.01, 0.06), 10e9),
                1 => (0.0, 1e9),
                _ => (0.0, rng.range(10e9, 25e9)),
            };
            nodes.push((format!("z{z}-n{i}"), z, rng.range(10.0, 80.0), loss, nic));
        }
    }
    let zone_rtt: Vec<Vec<f64>> = (0..zones)
        .map(|a| {
            (0..zones)
                .map(|b| {
                    if a == b {
                        40.0
                    } else {
                        500.0 + 500.0 * (a + b) as f64
                    }
                })
                .collect()
        })
        .collect();
    let now = UnixMs(1_000_000);
    let mut topology = Topology::new(EngineConfig::default());
    for (name, zone, ..) in &nodes {
        let hello = Hello {
            node: NodeName::parse("node", name.as_str()).expect("valid name"),
            zone: ZoneName::parse("zone", format!("zone-{zone}")).expect("valid zone"),
            region: None,
            addresses: vec!["192.0.2.1".parse().expect("an address")],
            agent_version: String::new(),
            icmp_mode: IcmpMode::Raw,
            probe_port: 7402,
        };
        topology.register(&hello, now);
    }
    for (s, src) in nodes.iter().enumerate() {
        let name = NodeName::parse("node", src.0.as_str()).expect("valid name");
        let paths = nodes
            .iter()
            .enumerate()
            .filter(|(d, _)| *d != s)
            .map(|(_, dst)| {
                let rtt = (zone_rtt[src.1][dst.1] + src.2 + dst.2) * rng.range(0.9, 1.1);
                let loss = 1.0 - (1.0 - src.3) * (1.0 - dst.3);
                let lost = (1000.0 * loss * rng.range(0.8, 1.2)).round() as u64;
                let across = if src.1 == dst.1 { 1.0 } else { 0.4 };
                let bps = src.4.min(dst.4) * across * rng.range(0.9, 1.0);
                let bytes = (bps / 8.0) as u64;
                measured_path(&name, dst.0.as_str(), rtt, lost, bytes, now)
            })
            .collect();
        let id = topology.id(&name).expect("registered");
        let report = Report { sequence: 1, paths };
        topology.apply_report(id, &report, now).expect("applied");
    }
    topology.sweep(now);
    let workers = rng.int(2, 6.min(nodes.len())) as u32;
    let policy = if rng.int(0, 2) == 0 {
        ZonePolicy::Any
    } else {
        ZonePolicy::PreferOne
    };
    Instance {
        topology,
        query: PlaceQuery {
            workers,
            policy,
            ..PlaceQuery::default()
        },
        now,
    }
}

/// `Place` beside the exact optimum on one instance.
#[derive(Debug, Clone, Copy)]
pub struct Gap {
    /// Greedy worst-pair cost minus the optimum's (0: optimal). Costs are normalised: 1.0 is the
    /// worst loss, delay and throughput among the candidates' zones, all at once.
    pub cost: f64,
    /// Greedy worst RTT over the optimum's, minus one (negative: the greedy choice has a lower
    /// worst RTT and pays for it in loss or throughput).
    pub rtt: f64,
    /// One minus greedy bottleneck throughput over the optimum's (negative: better).
    pub throughput: f64,
}

pub fn gap(i: &Instance) -> Gap {
    let greedy: Placement = i
        .topology
        .view()
        .place_ids(&i.query, i.now)
        .expect("placed");
    let exact: Placement = i
        .topology
        .view()
        .place_exact_ids(&i.query, i.now)
        .expect("placed");
    assert!(
        exact.worst_cost <= greedy.worst_cost + 1e-9,
        "the exhaustive search lost to the greedy walk: {} > {}",
        exact.worst_cost,
        greedy.worst_cost
    );
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 1.0 };
    Gap {
        cost: greedy.worst_cost - exact.worst_cost,
        rtt: ratio(greedy.worst_rtt_us, exact.worst_rtt_us) - 1.0,
        throughput: 1.0
            - ratio(
                greedy.bottleneck_bps.unwrap_or(0.0),
                exact.bottleneck_bps.unwrap_or(0.0),
            ),
    }
}

/// Gaps over many instances.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub instances: usize,
    /// Share of instances where the greedy choice is as good as the optimum.
    pub optimal: f64,
    pub mean_cost: f64,
    pub p95_cost: f64,
    pub max_cost: f64,
    pub mean_rtt: f64,
    pub max_rtt: f64,
    pub mean_throughput: f64,
    pub max_throughput: f64,
}

pub fn summary(seeds: std::ops::Range<u64>) -> Summary {
    let gaps: Vec<Gap> = seeds.map(|s| gap(&instance(s))).collect();
    let n = gaps.len() as f64;
    let mut costs: Vec<f64> = gaps.iter().map(|g| g.cost).collect();
    costs.sort_by(f64::total_cmp);
    let max = |f: fn(&Gap) -> f64| gaps.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
    Summary {
        instances: gaps.len(),
        optimal: gaps.iter().filter(|g| g.cost <= 1e-9).count() as f64 / n,
        mean_cost: costs.iter().sum::<f64>() / n,
        p95_cost: costs[((costs.len() as f64 * 0.95) as usize).min(costs.len() - 1)],
        max_cost: max(|g| g.cost),
        mean_rtt: gaps.iter().map(|g| g.rtt).sum::<f64>() / n,
        max_rtt: max(|g| g.rtt),
        mean_throughput: gaps.iter().map(|g| g.throughput).sum::<f64>() / n,
        max_throughput: max(|g| g.throughput),
    }
}

/// A path measured from `src` to `dst`: 1,000 probes with `lost` lost, median RTT `rtt` µs, and a
/// throughput test that carried `bytes` in 1 s, in a 10 s window ending at `now`.
pub fn measured_path(
    src: &NodeName,
    dst: &str,
    rtt: f64,
    lost: u64,
    bytes: u64,
    now: UnixMs,
) -> PathSample {
    let dst = NodeName::parse("node", dst).expect("valid name");
    SampleBuilder::new(src, &dst, rtt)
        .probes(1000, lost)
        .window(now, 10_000)
        .spread(0.95, 1.1, 1.3, 1.5)
        .throughput(bytes as f64 * 8.0, bytes)
        .method(IcmpMode::Raw)
        .build()
}
