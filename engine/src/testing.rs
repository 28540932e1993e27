//! Builders shared by the engine's tests.

use zonemesh_domain::{
    Bps, Hello, IcmpMode, MessageExchange, Micros, NodeName, PathSample, Report, Rtt,
    ThroughputSample, UnixMs, ZoneName,
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

/// Builds a [`PathSample`] for tests and benches. By default: 100 probes, none lost; a 10 s
/// window ending at 10,000 ms; RTT quantiles 0.9, 1, 1.1, 1.2 and 1.3 times the median, mean
/// the median, jitter 1 µs; no throughput test; no ICMP method.
#[derive(Debug, Clone)]
pub struct SampleBuilder {
    src: NodeName,
    dst: NodeName,
    rtt_us: f64,
    /// min, p90, p99 and max as multiples of the median.
    spread: [f64; 4],
    jitter_us: f64,
    sent: u64,
    lost: u64,
    window_end: UnixMs,
    window_ms: i64,
    /// (rate, bytes).
    throughput: Option<(f64, u64)>,
    /// Median and mean of the test's timed exchanges, µs.
    exchange: Option<(f64, f64)>,
    /// The exchanges' connection's retransmission timeout, µs.
    exchange_timeout_us: Option<f64>,
    method: Option<IcmpMode>,
}

impl SampleBuilder {
    /// A sample of `src` → `dst` with median RTT `rtt_us`.
    pub fn new(src: &NodeName, dst: &NodeName, rtt_us: f64) -> Self {
        Self {
            src: src.clone(),
            dst: dst.clone(),
            rtt_us,
            spread: [0.9, 1.1, 1.2, 1.3],
            jitter_us: 1.0,
            sent: 100,
            lost: 0,
            window_end: UnixMs(10_000),
            window_ms: 10_000,
            throughput: None,
            exchange: None,
            exchange_timeout_us: None,
            method: None,
        }
    }

    /// `sent` probes of which `lost` got no reply.
    pub fn probes(mut self, sent: u64, lost: u64) -> Self {
        (self.sent, self.lost) = (sent, lost);
        self
    }

    /// A window of `ms` milliseconds ending at `end`.
    pub fn window(mut self, end: UnixMs, ms: i64) -> Self {
        (self.window_end, self.window_ms) = (end, ms);
        self
    }

    /// min, p90, p99 and max as multiples of the median.
    pub fn spread(mut self, min: f64, p90: f64, p99: f64, max: f64) -> Self {
        self.spread = [min, p90, p99, max];
        self
    }

    /// The jitter, µs.
    pub fn jitter(mut self, us: f64) -> Self {
        self.jitter_us = us;
        self
    }

    /// A throughput test of `bps` that carried `bytes` in 1 s.
    pub fn throughput(mut self, bps: f64, bytes: u64) -> Self {
        self.throughput = Some((bps, bytes));
        self
    }

    /// The throughput test timed 64 exchanges: their median and mean, µs.
    pub fn exchange(mut self, p50_us: f64, mean_us: f64) -> Self {
        self.exchange = Some((p50_us, mean_us));
        self
    }

    /// The timed exchanges' connection read a retransmission timeout of `us`.
    pub fn exchange_timeout(mut self, us: f64) -> Self {
        self.exchange_timeout_us = Some(us);
        self
    }

    /// The ICMP method the agent used.
    pub fn method(mut self, method: IcmpMode) -> Self {
        self.method = Some(method);
        self
    }

    /// The sample (an RTT summary only when a reply came).
    pub fn build(self) -> PathSample {
        let m = |v: f64| Micros::parse("rtt", v).unwrap();
        let received = self.sent - self.lost;
        let [min, p90, p99, max] = self.spread;
        let rtt = self.rtt_us;
        PathSample {
            src: self.src,
            dst: self.dst,
            window_start: UnixMs(self.window_end.0 - self.window_ms),
            window_end: self.window_end,
            sent: self.sent,
            received,
            rtt: (received > 0).then(|| Rtt {
                samples: received,
                min: m(rtt * min),
                p50: m(rtt),
                p90: m(rtt * p90),
                p99: m(rtt * p99),
                max: m(rtt * max),
                mean: m(rtt),
                jitter: m(self.jitter_us),
            }),
            throughput: self.throughput.map(|(bps, bytes)| ThroughputSample {
                rate: Bps::parse("rate", bps).unwrap(),
                bytes,
                duration_us: 1_000_000,
                warmup_us: 0,
                streams: 1,
                retransmits: None,
                exchange: self.exchange.map(|(p50, mean)| {
                    MessageExchange::new(64, m(p50), m(mean), m(p50.max(mean) * 64.0))
                        .unwrap()
                        .with_timeout(self.exchange_timeout_us.map(m))
                }),
            }),
            method: self.method,
        }
    }
}

/// A sample from `src` to `dst` with `rtt_us` median, `lost` of 100 probes lost, and an
/// optional throughput (see [`SampleBuilder`] for the rest).
pub fn sample(src: &str, dst: &str, rtt_us: f64, lost: u64, tput: Option<f64>) -> PathSample {
    let builder = SampleBuilder::new(&name(src), &name(dst), rtt_us).probes(100, lost);
    match tput {
        Some(bps) => builder.throughput(bps, (bps / 8.0) as u64),
        None => builder,
    }
    .build()
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
    mesh_of(zones, per_zone, now, |src, dst| {
        sample(
            src,
            dst,
            rtt(src, dst),
            loss(src, dst),
            Some(tput(src, dst)),
        )
    })
}

/// As [`mesh`], with each path's sample from `sample(src, dst)`.
pub fn mesh_of(
    zones: usize,
    per_zone: usize,
    now: UnixMs,
    sample: impl Fn(&str, &str) -> PathSample,
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
            .map(|(d, _)| sample(src, d))
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

/// Two zones of three, 100 µs everywhere, whose z0-n1 loses 2 % of its round trips, every path
/// tested and its exchanges timed: 100 µs at the median, 20 µs more on average on clean paths
/// (the hosts' scheduling) and as much more again on z0-n1's as losing 2 % to a 200 ms timeout
/// costs (4 ms), except on z0-n0 → z0-n1, whose exchanges happened to meet no loss. The model
/// fits a tail repair of 180 ms over its 10 lossy tests of 30.
pub fn timed_lossy_mesh(now: UnixMs) -> Topology {
    let lossy = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
    mesh_of(2, 3, now, |s, d| {
        let (lost, excess) = match (lossy(s, d), s) {
            (true, "z0-n0") => (2, 20.0),
            (true, _) => (2, 20.0 + 0.02 * 200_000.0),
            (false, _) => (0, 20.0),
        };
        SampleBuilder::new(&name(s), &name(d), 100.0)
            .probes(100, lost)
            .throughput(1e9, 125_000_000)
            .exchange(100.0, 100.0 + excess)
            .build()
    })
}

/// Two zones 10 ms apart, 20 µs inside, whose z0-n1 loses 2 %: inside its zone TCP still
/// reaches 900 Mbit/s (its link binds, not the loss), across the zones 100 Mbit/s, ten times
/// Mathis's 10 Mbit/s at 10 ms. The model calibrates its loss penalty on z0-n1's six paths
/// across the zones.
pub fn lossy_across_zones_mesh(now: UnixMs) -> Topology {
    let lossy = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
    let same_zone = |s: &str, d: &str| s[..2] == d[..2];
    mesh_with_throughput(
        2,
        3,
        |s, d| if same_zone(s, d) { 20.0 } else { 10_000.0 },
        |s, d| if lossy(s, d) { 2 } else { 0 },
        |s, d| match (lossy(s, d), same_zone(s, d)) {
            (false, _) => 1e9,
            (true, true) => 900e6,
            (true, false) => 100e6,
        },
        now,
    )
}

/// What [`synthetic`] injected, to compare the model with.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// Nodes that lose a share of the packets that reach them or leave them, with the share.
    pub lossy: Vec<(String, f64)>,
    /// Nodes whose stack adds RTT beyond the noise, with the µs they add to each path.
    pub slow: Vec<(String, f64)>,
    /// Nodes whose link is ten times slower than the others'.
    pub narrow: Vec<String>,
}

/// A synthetic cluster measured the way zonemesh measures one: `zones` zones of `per_zone`
/// nodes named `z{zone}-n{node}`, a full mesh inside each zone and the probe plan's
/// `inter_zone_pairs` representative pairs between zones (both directions), one window of 100
/// probes a path. The network (from `seed`): 60–150 µs inside a zone, 1–10 ms between two zones,
/// each node 0–20 µs of its own, one node in twenty 100–500 µs more, one in fifty losing 2–5 %
/// of its packets, one in twenty at a tenth of the others' 1 Gbit/s; every path ±1 % and ±3 µs of
/// noise, loss drawn probe by probe; a throughput test (the slower node's rate, −0–1 %) on one
/// path in five inside zones and on every probed path between zones.
pub fn synthetic(
    zones: usize,
    per_zone: usize,
    inter_zone_pairs: usize,
    seed: u64,
    now: UnixMs,
) -> (Topology, Truth) {
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut config = EngineConfig::default();
    config.plan.inter_zone_pairs = inter_zone_pairs;
    let mut t = Topology::new(config);
    let names: Vec<String> = (0..zones)
        .flat_map(|z| (0..per_zone).map(move |n| format!("z{z}-n{n}")))
        .collect();
    let zone_of = |i: usize| i / per_zone;
    for (i, n) in names.iter().enumerate() {
        t.register(&hello(n, &format!("zone-{}", zone_of(i))), now);
    }
    let inside: Vec<f64> = (0..zones).map(|_| 60.0 + 90.0 * next()).collect();
    let mut drawn = std::collections::HashMap::new();
    for a in 0..zones {
        for b in a + 1..zones {
            drawn.insert((a, b), 1_000.0 + 9_000.0 * next());
        }
    }
    let between = |a: usize, b: usize| drawn[&(a.min(b), a.max(b))];
    let mut truth = Truth::default();
    let mut offset = Vec::new();
    let mut loss = Vec::new();
    let mut rate: Vec<f64> = Vec::new();
    for n in &names {
        let mut off = 20.0 * next();
        if next() < 0.05 {
            let extra = 100.0 + 400.0 * next();
            off += extra;
            truth.slow.push((n.clone(), extra));
        }
        offset.push(off);
        let l = if next() < 0.02 {
            let l = 0.02 + 0.03 * next();
            truth.lossy.push((n.clone(), l));
            l
        } else {
            0.0
        };
        loss.push(l);
        rate.push(if next() < 0.05 {
            truth.narrow.push(n.clone());
            0.956e8
        } else {
            0.956e9
        });
    }
    let plans = t.view().plan(now);
    let mut sources: Vec<(NodeId, usize)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (t.id(&name(n)).expect("registered"), i))
        .collect();
    sources.sort();
    let index: std::collections::HashMap<NodeId, usize> = sources.iter().copied().collect();
    for (seq, (src, s)) in sources.iter().enumerate() {
        let mut paths = Vec::new();
        for dst in plans.get(src).into_iter().flatten() {
            let d = index[dst];
            let base = if zone_of(*s) == zone_of(d) {
                inside[zone_of(*s)]
            } else {
                between(zone_of(*s), zone_of(d))
            };
            let rtt = (base + offset[*s] + offset[d]) * (1.0 + 0.02 * (next() - 0.5))
                + 6.0 * (next() - 0.5);
            // A probe and its reply cross both nodes' links twice.
            let survive = ((1.0 - loss[*s]) * (1.0 - loss[d])).powi(2);
            let lost = (0..100).filter(|_| next() > survive).count() as u64;
            let tested = zone_of(*s) != zone_of(d) || next() < 0.2;
            let tput = tested.then(|| {
                let (a, b) = (rate[*s], rate[d]);
                a.min(b) * (1.0 - 0.01 * next())
            });
            paths.push(sample(&names[*s], &names[d], rtt.max(1.0), lost, tput));
        }
        t.apply_report(
            *src,
            &Report {
                sequence: seq as u64 + 1,
                paths,
            },
            now,
        )
        .expect("within limits");
    }
    t.sweep(now);
    (t, truth)
}

/// Two zones of three, 50 µs inside and 2 ms between them: z0-n1 loses 5 % and adds 300 µs
/// to its paths, z1-n2 runs at 100 Mbit/s where the others run at 1 Gbit/s (the demo's
/// shape).
pub fn demo_shape(now: UnixMs) -> crate::Topology {
    let bad = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
    mesh_with_throughput(
        2,
        3,
        |s, d| {
            let base = if s.as_bytes()[1] == d.as_bytes()[1] {
                50.0
            } else {
                2_000.0
            };
            base + if bad(s, d) { 300.0 } else { 0.0 }
        },
        |s, d| if bad(s, d) { 5 } else { 0 },
        |s, d| {
            if s == "z1-n2" || d == "z1-n2" {
                100e6
            } else {
                1e9
            }
        },
        now,
    )
}
