//! The benches' cluster at 5,000 nodes in 50 zones of 100, measured along the probe plan (one
//! path in seven with a throughput test), and `Place` with a job model over it. Shared by
//! `zonemesh-engine`'s `place_job` bench and `zonemesh-aggregator`'s `engine` bench (through
//! `#[path]`, as `tests/support/quality.rs` is shared).

use std::time::{Duration, Instant};

use zonemesh_domain::{
    Collective, IcmpMode, Job, NodeName, PathSample, PlaceQuery, Report, UnixMs,
};
use zonemesh_engine::Topology;
use zonemesh_engine::testing::SampleBuilder;

pub const ZONES: usize = 50;
pub const PER_ZONE: usize = 100;

pub fn name(z: usize, n: usize) -> NodeName {
    NodeName::parse("node", format!("z{z:02}-n{n:03}")).unwrap()
}

fn rtt_of(seed: u64) -> f64 {
    50.0 + (seed % 200) as f64
}

/// A 10 s window ending at `t` of 10 probes from `src` to `dst`, all answered, median RTT `rtt`
/// µs; with a throughput test of 8 Gbit/s when `with_tput`.
pub fn sample(src: &NodeName, dst: &NodeName, rtt: f64, t: i64, with_tput: bool) -> PathSample {
    let builder = SampleBuilder::new(src, dst, rtt)
        .probes(10, 0)
        .window(UnixMs(t), 10_000)
        .spread(0.9, 1.1, 1.3, 1.5)
        .jitter(2.0)
        .method(IcmpMode::Raw);
    if with_tput {
        builder.throughput(8e9, 1_000_000_000).build()
    } else {
        builder.build()
    }
}

/// One report per node with every planned target (intra-zone mesh plus representatives).
pub fn reports(topology: &Topology, now: UnixMs, seq: u64) -> Vec<(NodeName, Report)> {
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

pub fn quantiles(mut d: Vec<Duration>) -> (Duration, Duration) {
    d.sort();
    let q = |p: f64| d[((d.len() as f64 - 1.0) * p).round() as usize];
    (q(0.5), q(0.99))
}

/// `Place` of 64 workers, 100 calls each, without a job and with a 25 MiB job of each
/// collective: one line each with p50, p99, the zones and the prediction.
pub fn place_jobs(topology: &Topology, later: UnixMs) {
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
        // Issue 27: an all-to-all's pairwise rounds are p − 1 predictions' worth of flows.
        let target = match collective {
            None => "target with a job: p99 < 20 ms",
            Some(Collective::AllToAll) => "target: p99 < 40 ms",
            Some(_) => "target: p99 < 20 ms",
        };
        println!(
            "{what:<28} p50 {:>6.2} ms  p99 {:>6.2} ms ({target}); zones {:?}{predicted}",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            p.zones.iter().map(|z| z.as_str()).collect::<Vec<_>>(),
        );
    }
}
