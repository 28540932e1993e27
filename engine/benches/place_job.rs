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

use std::time::{Duration, Instant};

use zonemesh_domain::{
    Bps, Collective, Hello, IcmpMode, Job, Micros, NodeName, PathSample, PlaceQuery, Report, Rtt,
    ThroughputSample, UnixMs, ZoneName,
};
use zonemesh_engine::{EngineConfig, Topology};

const ZONES: usize = 50;
const PER_ZONE: usize = 100;

fn name(z: usize, n: usize) -> NodeName {
    NodeName::parse("node", format!("z{z:02}-n{n:03}")).unwrap()
}

fn rtt_of(seed: u64) -> f64 {
    50.0 + (seed % 200) as f64
}

fn sample(src: &NodeName, dst: &NodeName, rtt: f64, t: i64, with_tput: bool) -> PathSample {
    let m = |v: f64| Micros::parse("x", v).unwrap();
    PathSample {
        src: src.clone(),
        dst: dst.clone(),
        window_start: UnixMs(t - 10_000),
        window_end: UnixMs(t),
        sent: 10,
        received: 10,
        rtt: Some(Rtt {
            samples: 10,
            min: m(rtt * 0.9),
            p50: m(rtt),
            p90: m(rtt * 1.1),
            p99: m(rtt * 1.3),
            max: m(rtt * 1.5),
            mean: m(rtt),
            jitter: m(2.0),
        }),
        throughput: with_tput.then(|| ThroughputSample {
            rate: Bps::parse("x", 8e9).unwrap(),
            bytes: 1_000_000_000,
            duration_us: 1_000_000,
            warmup_us: 0,
            streams: 1,
        }),
        method: Some(IcmpMode::Raw),
    }
}

/// One report per node with every planned target (intra-zone mesh plus representatives).
fn reports(topology: &Topology, now: UnixMs, seq: u64) -> Vec<(NodeName, Report)> {
    let plans = topology.view().plan(now);
    let mut out = Vec::with_capacity(plans.len());
    for (src, targets) in plans {
        let s = topology.node(src).name.clone();
        let paths = targets
            .iter()
            .map(|d| {
                let dn = &topology.node(*d).name;
                let h =
                    s.as_str().len() as u64 * 31 + dn.as_str().bytes().map(u64::from).sum::<u64>();
                let cross = topology.view().zone_of(src) != topology.view().zone_of(*d);
                let rtt = if cross {
                    1_000.0 + rtt_of(h)
                } else {
                    rtt_of(h)
                };
                sample(&s, dn, rtt, now.0, h.is_multiple_of(7))
            })
            .collect();
        out.push((
            s,
            Report {
                sequence: seq,
                paths,
            },
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn quantiles(mut d: Vec<Duration>) -> (Duration, Duration) {
    d.sort();
    let q = |p: f64| d[((d.len() as f64 - 1.0) * p).round() as usize];
    (q(0.5), q(0.99))
}

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
    let jobs = [
        ("no job (worst pair)", None),
        ("ring all-reduce", Some(Collective::RingAllReduce)),
        (
            "hierarchical all-reduce",
            Some(Collective::HierarchicalAllReduce),
        ),
        (
            "parameter server, 4 servers",
            Some(Collective::ParameterServer { servers: 4 }),
        ),
        ("all-to-all", Some(Collective::AllToAll)),
    ];
    for (what, collective) in jobs {
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..100 {
            let query = PlaceQuery {
                workers: 64,
                job: collective.map(|collective| Job {
                    collective,
                    bytes_per_iteration: 25 << 20,
                }),
                ..PlaceQuery::default()
            };
            let started = Instant::now();
            let p = topology.view().place(&query, later).unwrap();
            times.push(started.elapsed());
            last = Some(p);
        }
        let (p50, p99) = quantiles(times);
        let p = last.unwrap();
        let predicted = p.prediction.map_or(String::new(), |j| {
            format!(
                ", predicted {:.2} ms, {} of {} figures estimated",
                j.seconds * 1e3,
                j.estimated_figures,
                j.figures
            )
        });
        println!(
            "{what:<28} p50 {:>6.2} ms  p99 {:>6.2} ms (target with a job: p99 < 20 ms); zones {:?}{predicted}",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            p.zones.iter().map(|z| z.as_str()).collect::<Vec<_>>(),
        );
    }
}
