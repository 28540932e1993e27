//! Builders shared by the engine's tests.

use zonemesh_domain::{
    Bps, Hello, IcmpMode, Micros, NodeName, PathSample, Report, Rtt, ThroughputSample, UnixMs,
    ZoneName,
};

use crate::{EngineConfig, NodeId, Topology};

/// A name, panicking on invalid input (test data only).
pub fn name(s: &str) -> NodeName {
    NodeName::parse("test", s).unwrap()
}

/// A hello for `node` in `zone`.
pub fn hello(node: &str, zone: &str) -> Hello {
    Hello {
        node: name(node),
        zone: ZoneName::parse("zone", zone).unwrap(),
        region: None,
        addresses: vec!["127.0.0.1".parse().unwrap()],
        agent_version: "test".into(),
        icmp_mode: IcmpMode::Raw,
        probe_port: 7402,
    }
}

/// A sample from `src` to `dst` with `rtt_us` median, `lost` of 100 probes lost, and an
/// optional throughput.
pub fn sample(src: &str, dst: &str, rtt_us: f64, lost: u64, tput: Option<f64>) -> PathSample {
    let m = |v: f64| Micros::parse("x", v).unwrap();
    let received = 100 - lost;
    PathSample {
        src: name(src),
        dst: name(dst),
        window_start: UnixMs(0),
        window_end: UnixMs(10_000),
        sent: 100,
        received,
        rtt: (received > 0).then(|| Rtt {
            samples: received,
            min: m(rtt_us * 0.9),
            p50: m(rtt_us),
            p90: m(rtt_us * 1.1),
            p99: m(rtt_us * 1.2),
            max: m(rtt_us * 1.3),
            mean: m(rtt_us),
            jitter: m(1.0),
        }),
        histogram: None,
        throughput: tput.map(|bps| ThroughputSample {
            rate: Bps::parse("x", bps).unwrap(),
            bytes: (bps / 8.0) as u64,
            duration_us: 1_000_000,
            warmup_us: 0,
            streams: 1,
        }),
        method: None,
    }
}

/// Makes a node's agent gone long ago, so that it is DOWN.
pub fn force_down(t: &mut Topology, id: NodeId) {
    let node = t.snap.nodes.get_mut(id.0 as usize);
    node.connected = false;
    node.last_seen = Some(UnixMs(0));
}

/// A topology of `zones` zones of `per_zone` nodes named `z{zone}-n{node}`, every pair
/// measured: `rtt(src, dst)` gives the median RTT, `loss(src, dst)` lost probes of 100.
pub fn mesh(
    zones: usize,
    per_zone: usize,
    rtt: impl Fn(&str, &str) -> f64,
    loss: impl Fn(&str, &str) -> u64,
    now: UnixMs,
) -> Topology {
    mesh_with_throughput(zones, per_zone, rtt, loss, |_, _| 1e9, now)
}

/// As [`mesh`], with each path's throughput from `tput`.
pub fn mesh_with_throughput(
    zones: usize,
    per_zone: usize,
    rtt: impl Fn(&str, &str) -> f64,
    loss: impl Fn(&str, &str) -> u64,
    tput: impl Fn(&str, &str) -> f64,
    now: UnixMs,
) -> Topology {
    let mut t = Topology::new(EngineConfig::default());
    let names: Vec<(String, String)> = (0..zones)
        .flat_map(|z| (0..per_zone).map(move |n| (format!("z{z}-n{n}"), format!("zone-{z}"))))
        .collect();
    for (n, z) in &names {
        t.register(&hello(n, z), now);
    }
    for (seq, (src, _)) in names.iter().enumerate() {
        let paths = names
            .iter()
            .filter(|(d, _)| d != src)
            .map(|(d, _)| sample(src, d, rtt(src, d), loss(src, d), Some(tput(src, d))))
            .collect();
        let id = t.id(&name(src)).unwrap();
        t.apply_report(
            id,
            &Report {
                sequence: seq as u64 + 1,
                paths,
            },
            now,
        )
        .unwrap();
    }
    t.sweep(now);
    t
}
