//! The model on synthetic clusters whose truth is known: offsets and bases come apart, a lossy
//! node keeps its loss, caps and capacities, and the error on held-out paths.

use zonemesh_domain::{NodeName, ZoneName};

use super::holdout::*;
use super::*;
use crate::testing::*;

fn zone(n: &str) -> u8 {
    n.as_bytes()[1]
}

#[test]
fn offsets_and_bases_come_apart() {
    let now = UnixMs(1_000_000);
    // Three zones of four; bases 80 µs inside, 1, 3 and 7 ms between; every node its own
    // offset (n0 +0, n1 +40, n2 +120, n3 +400 µs).
    let off = |n: &str| [0.0, 40.0, 120.0, 400.0][usize::from(n.as_bytes()[4] - b'0')];
    let base = |a: u8, b: u8| match (a.min(b), a.max(b)) {
        (x, y) if x == y => 80.0,
        (b'0', b'1') => 1_000.0,
        (b'0', b'2') => 3_000.0,
        _ => 7_000.0,
    };
    let t = mesh(
        3,
        4,
        |s, d| base(zone(s), zone(d)) + off(s) + off(d),
        |_, _| 0,
        now,
    );
    let snap = t.view();
    let model = snap.model();
    assert_eq!(model.fitted_at(), Some(now));
    // The median node of each zone is between n1 and n2: offsets relative to 80 µs.
    let mid = (40.0 + 120.0) / 2.0;
    for (id, info) in snap.nodes() {
        let terms = model.node(id).unwrap();
        let want = off(info.name.as_str()) - mid;
        assert!(
            (terms.rtt_offset_us - want).abs() < 1.0,
            "{}: {} want {want}",
            info.name,
            terms.rtt_offset_us
        );
        assert_eq!((terms.loss_out, terms.loss_in), (0.0, 0.0));
    }
    let z: Vec<ZoneId> = snap
        .zones()
        .filter(|(_, info)| !info.members.is_empty())
        .map(|(z, _)| z)
        .collect();
    let rtt = |a: usize, b: usize| model.zone_pair(z[a], z[b]).unwrap().rtt_us.unwrap();
    assert!(
        (rtt(0, 0) - (80.0 + 2.0 * mid)).abs() < 1.0,
        "{}",
        rtt(0, 0)
    );
    assert!((rtt(0, 1) - (1_000.0 + 2.0 * mid)).abs() < 1.0);
    assert!((rtt(2, 1) - (7_000.0 + 2.0 * mid)).abs() < 1.0);
    // Every path is predicted within a microsecond.
    for ((s, d), p) in snap.paths() {
        let e = model
            .latency(s, snap.zone_of(s), d, snap.zone_of(d))
            .unwrap();
        let measured = f64::from(p.merged.rtt.unwrap().p50);
        assert!((e.rtt_us - measured).abs() < 1.0, "{e:?} {measured}");
    }
}

#[test]
fn a_lossy_node_keeps_its_loss_and_its_zone_stays_clean() {
    let now = UnixMs(1_000_000);
    // Three zones of three (the lab's demo shape): z0-n1 loses 5 % of what reaches it.
    let lossy = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
    let t = mesh(
        3,
        3,
        |s, d| if zone(s) == zone(d) { 50.0 } else { 2_000.0 },
        |s, d| if lossy(s, d) { 5 } else { 0 },
        now,
    );
    let snap = t.view();
    let model = snap.model();
    for (id, info) in snap.nodes() {
        let terms = model.node(id).unwrap();
        if info.name == "z0-n1" {
            assert!((terms.loss_out - 0.05).abs() < 1e-9, "{terms:?}");
            assert!((terms.loss_in - 0.05).abs() < 1e-9, "{terms:?}");
        } else {
            assert_eq!((terms.loss_out, terms.loss_in), (0.0, 0.0), "{}", info.name);
        }
    }
    for ((za, zb), terms) in &model.zones {
        assert_eq!(terms.loss, 0.0, "{za:?}-{zb:?}");
    }
}

#[test]
fn a_loss_every_node_of_a_zone_shows_is_the_zones() {
    let now = UnixMs(1_000_000);
    // Inside zone 0 every path loses 3 %; its paths to other zones lose nothing.
    let t = mesh(
        2,
        4,
        |s, d| if zone(s) == zone(d) { 50.0 } else { 2_000.0 },
        |s, d| u64::from(zone(s) == b'0' && zone(d) == b'0') * 3,
        now,
    );
    let snap = t.view();
    let model = snap.model();
    let z0 = snap.zone_of(t.id(&name("z0-n0")).unwrap());
    let z1 = snap.zone_of(t.id(&name("z1-n0")).unwrap());
    assert!((model.zone_pair(z0, z0).unwrap().loss - 0.03).abs() < 1e-9);
    assert_eq!(model.zone_pair(z0, z1).unwrap().loss, 0.0);
    assert!(
        model
            .nodes()
            .iter()
            .all(|t| t.loss_out == 0.0 && t.loss_in == 0.0)
    );
}

#[test]
fn a_node_tested_only_against_a_slow_node_is_not_slow() {
    let now = UnixMs(1_000_000);
    // z0-n2 runs at 100 Mbit/s; zone 0 ↔ zone 1 at 400 Mbit/s; everything else at 1 Gbit/s.
    let t = mesh_with_throughput(
        2,
        3,
        |_, _| 100.0,
        |_, _| 0,
        |s, d| {
            if s == "z0-n2" || d == "z0-n2" {
                100e6
            } else if zone(s) != zone(d) {
                400e6
            } else {
                1e9
            }
        },
        now,
    );
    let snap = t.view();
    let id = |n: &str| t.id(&name(n)).unwrap();
    assert_eq!(snap.egress_cap_bps(id("z0-n2")), Some(100e6));
    assert_eq!(snap.ingress_cap_bps(id("z0-n2")), Some(100e6));
    assert_eq!(snap.egress_cap_bps(id("z0-n0")), Some(1e9));
    assert_eq!(snap.ingress_cap_bps(id("z1-n1")), Some(1e9));
    let (z0, z1) = (snap.zone_of(id("z0-n0")), snap.zone_of(id("z1-n0")));
    assert_eq!(snap.zone_capacity_bps(z0, z1), Some(400e6));
    assert_eq!(snap.zone_capacity_bps(z0, z0), None, "the nodes explain it");
    assert_eq!(
        snap.estimated_rate_bps(id("z0-n0"), id("z1-n1"), Some(100.0), Some(0.0)),
        Some(400e6)
    );
    assert_eq!(
        snap.estimated_rate_bps(id("z1-n1"), id("z0-n2"), Some(100.0), Some(0.0)),
        Some(100e6)
    );
}

#[test]
fn the_loss_penalty_is_calibrated_on_the_lossy_paths_loss_held_back() {
    let now = UnixMs(1_000_000);
    // Two zones 10 ms apart, 20 µs inside. z0-n1 loses 2 %: inside its zone TCP still reaches
    // 900 Mbit/s (its link binds, not the loss), across the zones 100 Mbit/s: 10× Mathis's
    // 10 Mbit/s at 10 ms.
    let lossy = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
    let same_zone = |s: &str, d: &str| s[..2] == d[..2];
    let rtt = move |s: &str, d: &str| if same_zone(s, d) { 20.0 } else { 10_000.0 };
    let t = crate::testing::lossy_across_zones_mesh(now);
    let snap = t.view();
    let model = snap.model();
    let penalty = model.loss_penalty().unwrap();
    assert_eq!(penalty.paths, 6, "z0-n1's six paths across the zones");
    let mathis = mathis_bps(10_000.0, 0.02).unwrap();
    assert!((mathis - 10.03e6).abs() < 0.01e6, "{mathis}");
    assert!((penalty.factor - 100e6 / mathis).abs() < 1e-6);
    assert!((penalty.rate_bps(10_000.0, 0.02).unwrap() - 100e6).abs() < 1.0);
    assert!(
        penalty.rate_bps(10_000.0, 0.08).unwrap() < 51e6,
        "4× the loss, half the rate"
    );
    // The slow tests are the loss's, not the zones' link: the zone pair has no capacity.
    let z0 = snap.zone_of(t.id(&name("z0-n0")).unwrap());
    let z1 = snap.zone_of(t.id(&name("z1-n0")).unwrap());
    assert_eq!(model.zone_pair(z0, z1).unwrap().capacity_bps, None);

    // Where the lossy node's tests all run at its caps, no test speaks for the loss, and there is
    // no penalty: the caps alone carry it. (A factor taken from its tests inside the zone,
    // 900 Mbit/s over Mathis's 5 Gbit/s at 20 µs, would have priced a 10 ms path with 2 % loss
    // at 1.8 Mbit/s.)
    let inside = mesh_with_throughput(
        2,
        3,
        rtt,
        |s, d| if lossy(s, d) { 2 } else { 0 },
        |s, d| if lossy(s, d) { 900e6 } else { 1e9 },
        now,
    );
    assert_eq!(inside.view().model().loss_penalty(), None);
    // Nor where they run below its caps: at 20 µs Mathis allows 5 Gbit/s at 2 %, far above the
    // 1 Gbit/s links, so what held the tests at 780 Mbit/s was not the loss (as the lab's 2 %
    // node's tests at 836 Mbit/s beside its cap of 936). A factor taken from them, 0.16, would
    // have priced a 10 ms path with 2 % loss at 1.6 Mbit/s.
    let below_caps = mesh_with_throughput(
        2,
        3,
        rtt,
        |s, d| if lossy(s, d) { 2 } else { 0 },
        |s, d| match (lossy(s, d), s == "z0-n1", same_zone(s, d)) {
            (false, _, _) => 1e9,
            (true, true, _) | (true, false, false) => 1e9,
            (true, false, true) => 780e6,
        },
        now,
    );
    let snap = below_caps.view();
    let n1 = below_caps.id(&name("z0-n1")).unwrap();
    assert_eq!(
        snap.ingress_cap_bps(n1),
        Some(1e9),
        "the tests into it from z1 set it"
    );
    assert_eq!(snap.model().loss_penalty(), None);
    // Without lossy paths with a throughput figure, no penalty at all.
    let clean = mesh(1, 3, |_, _| 100.0, |_, _| 0, now);
    assert_eq!(clean.view().model().loss_penalty(), None);
}

#[test]
fn the_tail_repair_is_fitted_over_every_lossy_paths_exchanges() {
    use crate::collective::Network;
    use crate::network::SnapshotNetwork;
    let now = UnixMs(1_000_000);
    // Two zones of three, 100 µs everywhere. z0-n1 loses 2 % of its round trips. Every test
    // timed exchanges of 100 µs at the median; on clean paths they took 20 µs more on average (the
    // hosts' scheduling), on z0-n1's as much more again as losing 2 % to a 200 ms timeout costs
    // (4 ms) — except on the path z0-n0 → z0-n1, whose exchanges happened to meet no loss.
    let lossy = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
    let t = crate::testing::timed_lossy_mesh(now);
    let snap = t.view();
    let repair = snap.model().tail_repair().expect("ten lossy tests");
    assert_eq!((repair.tests, repair.lossy_tests), (30, 10));
    // Nine lossy tests show 4 ms more than the clean ones' 20 µs, one shows nothing more: 36 ms
    // over ten times 2 %.
    assert!(
        (repair.us - 180_000.0).abs() < 1.0,
        "{repair:?}: 0.9 × 200 ms"
    );

    // The unlucky path's own exchanges say a loss costs nothing; the fit prices it like the rest.
    let id = |n: &str| t.id(&name(n)).unwrap();
    let net = SnapshotNetwork::new(snap, vec![id("z0-n0"), id("z0-n1"), id("z0-n2")], now);
    let unlucky = net.link(0, 1);
    assert!(
        (unlucky.tail_repair_us.unwrap() - 180_000.0).abs() < 1.0,
        "{unlucky:?}"
    );
    assert_eq!(
        net.link(0, 2).tail_repair_us,
        None,
        "a clean link repairs nothing"
    );
    // 64 bytes over it: half the RTT, and 2 % of the repair.
    let expected = 50e-6 + 0.02 * 0.18;
    assert!(
        (unlucky.latency_s(64.0) - expected).abs() < 1e-6,
        "{unlucky:?}"
    );

    // One lossy test is no fit: every other path of z0-n1 untimed.
    let once = mesh_of(2, 3, now, |s, d| {
        let builder = SampleBuilder::new(&name(s), &name(d), 100.0)
            .probes(100, if lossy(s, d) { 2 } else { 0 })
            .throughput(1e9, 125_000_000);
        match (lossy(s, d), (s, d) == ("z0-n1", "z0-n0")) {
            (true, true) => builder.exchange(100.0, 4_120.0).build(),
            (true, false) => builder.build(),
            (false, _) => builder.exchange(100.0, 120.0).build(),
        }
    });
    assert_eq!(once.view().model().tail_repair(), None);
}

/// Issue 27's (f): a node losing 1 % inside a fast zone, and only a few of its paths tested yet.
/// Their exchanges (64 each, about 0.6 lost expected a test) often meet no loss, and a repair
/// fitted over them priced the gray node's links as clean: `Place` chose it in one CI run in two
/// and ran 4.5× slower than the best. Until the lossy tests expect 8 lost exchanges, the
/// connections' retransmission timeout prices a tail loss; beyond, the exchanges do.
#[test]
fn the_retransmission_timeout_prices_a_tail_loss_until_the_exchanges_can() {
    use crate::collective::Network;
    use crate::network::SnapshotNetwork;
    let now = UnixMs(1_000_000);
    let gray = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
    // Every path tested, its exchanges timed and its connection's timeout read (204 ms, as Linux
    // has it on a fast link); `lossy_tested` of z0-n1's paths lose 1 % (the others only probed
    // yet, untested); no exchange met a loss.
    let lab = |lossy_tested: usize| {
        let tested = std::cell::Cell::new(0);
        mesh_of(2, 3, now, move |s, d| {
            let builder = SampleBuilder::new(&name(s), &name(d), 100.0)
                .probes(100, if gray(s, d) { 1 } else { 0 });
            if gray(s, d) {
                tested.set(tested.get() + 1);
                if tested.get() > lossy_tested {
                    return builder.build();
                }
            }
            builder
                .throughput(1e9, 125_000_000)
                .exchange(100.0, 120.0)
                .exchange_timeout(204_000.0)
                .build()
        })
    };
    // Four lossy tests expect 4 × 1 % × 64 = 2.6 lost exchanges: the timeout prices it.
    let few = lab(4);
    let repair = few
        .view()
        .model()
        .tail_repair()
        .expect("timeouts were read");
    assert!(repair.from_timeouts, "{repair:?}");
    assert_eq!(
        (repair.us, repair.tests, repair.lossy_tests),
        (204_000.0, 6, 4),
        "{repair:?}: the six nodes' timeouts, four lossy tests"
    );
    let id = |t: &crate::Topology, n: &str| t.id(&name(n)).unwrap();
    let ids = |t: &crate::Topology| vec![id(t, "z0-n0"), id(t, "z0-n1"), id(t, "z0-n2")];
    let net = SnapshotNetwork::new(few.view(), ids(&few), now);
    assert_eq!(net.link(0, 1).tail_repair_us, Some(204_000.0));
    assert_eq!(net.link(0, 2).tail_repair_us, None, "a clean link");
    // All ten of z0-n1's paths: 6.4 expected, still the timeout.
    assert!(lab(10).view().model().tail_repair().unwrap().from_timeouts);

    // At 2 % the ten expect 12.8 lost exchanges: the exchanges price it (the fixture's 180 ms),
    // timeouts read or not.
    let many = mesh_of(2, 3, now, |s, d| {
        let lossy = gray(s, d);
        let excess = match (lossy, s) {
            (true, "z0-n0") => 20.0,
            (true, _) => 20.0 + 0.02 * 200_000.0,
            (false, _) => 20.0,
        };
        SampleBuilder::new(&name(s), &name(d), 100.0)
            .probes(100, if lossy { 2 } else { 0 })
            .throughput(1e9, 125_000_000)
            .exchange(100.0, 100.0 + excess)
            .exchange_timeout(204_000.0)
            .build()
    });
    let repair = many.view().model().tail_repair().unwrap();
    assert!(!repair.from_timeouts, "{repair:?}");
    assert!((repair.us - 180_000.0).abs() < 1.0, "{repair:?}");

    // Only the nodes that sent a fresh test count. z1-n0 tested (a 900 ms timeout) two hours
    // ago, past a test's hour of freshness; then z0-n0 tests one path losing 20 %: 12.8 lost
    // exchanges expected, but one test is no fit, so the timeout, z0-n0's alone.
    let mut aged = mesh_of(2, 3, now, |s, d| {
        let builder = SampleBuilder::new(&name(s), &name(d), 100.0).probes(100, 0);
        match s {
            "z1-n0" => builder
                .throughput(1e9, 125_000_000)
                .exchange(100.0, 120.0)
                .exchange_timeout(900_000.0)
                .build(),
            _ => builder.build(),
        }
    });
    let later = UnixMs(now.0 + 2 * 3_600_000);
    let n0 = aged.id(&name("z0-n0")).unwrap();
    let test = SampleBuilder::new(&name("z0-n0"), &name("z0-n1"), 100.0)
        .probes(100, 20)
        .window(later, 10_000)
        .throughput(1e9, 125_000_000)
        .exchange(100.0, 120.0)
        .exchange_timeout(210_000.0)
        .build();
    let report = zonemesh_domain::Report {
        sequence: 100,
        paths: vec![test],
    };
    aged.apply_report(n0, &report, later).unwrap();
    aged.fit_model(later);
    let repair = aged.view().model().tail_repair().unwrap();
    assert_eq!(
        (
            repair.us,
            repair.tests,
            repair.lossy_tests,
            repair.from_timeouts
        ),
        (210_000.0, 1, 1, true),
        "{repair:?}"
    );
}

/// The upper end of the lab's zero-loss interval: every path without injected loss, pooled,
/// 0 of 2,402 probes lost, 95 % Wilson interval 0.00–0.16 % (docs/ACCURACY.md).
const LAB_ZERO_LOSS_UPPER: f64 = 0.0016;

#[test]
fn held_out_inter_zone_paths_are_predicted_within_five_percent() {
    let now = UnixMs(1_000_000);
    for seed in 0..4 {
        // Eight zones of twelve, four representative pairs between two zones.
        let (t, _) = synthetic(8, 12, 4, seed, now);
        let error = holdout(t.view(), now);
        println!("seed {seed}: {}", error.summary());
        assert!(error.paths >= 28 * 4 * 2, "{}", error.paths);
        let median = HoldoutError::quantile(&error.rtt_relative, 0.5);
        assert!(median <= 0.05, "seed {seed}: {}", error.summary());
        // Every probed inter-zone path has a throughput test: the nodes' caps fitted from
        // the other paths predict it.
        assert_eq!(error.rate_relative.len(), error.paths);
        let rate = HoldoutError::quantile(&error.rate_relative, 0.5);
        assert!(rate <= 0.05, "seed {seed}: {}", error.summary());
    }
}

#[test]
fn held_out_rates_come_from_the_nodes_caps_and_the_zone_pairs_capacity() {
    let now = UnixMs(1_000_000);
    // z1-n2 runs at 100 Mbit/s; zone 0 ↔ zone 2 carries 400 Mbit/s; the rest 1 Gbit/s.
    let cap = |n: &str| -> f64 { if n == "z1-n2" { 100e6 } else { 1e9 } };
    let t = mesh_with_throughput(
        3,
        4,
        |s, d| if zone(s) == zone(d) { 50.0 } else { 2_000.0 },
        |_, _| 0,
        |s, d| {
            let zones = [zone(s), zone(d)];
            let across = if zones.contains(&b'0') && zones.contains(&b'2') {
                400e6
            } else {
                f64::INFINITY
            };
            cap(s).min(cap(d)).min(across)
        },
        now,
    );
    let error = holdout(t.view(), now);
    println!("{}", error.summary());
    // Three zone pairs of 16 node pairs each, both directions, all tested.
    assert_eq!(error.rate_relative.len(), 3 * 16 * 2, "{}", error.summary());
    assert_eq!(error.rate_unpredicted, 0);
    let worst = HoldoutError::quantile(&error.rate_relative, 1.0);
    assert!(worst < 1e-9, "{}", error.summary());
}

/// A topology whose pairs are tested every minute, with `nodes` registered (zone-0 for z0-…,
/// zone-1 for z1-…), fed throughput tests.
struct Tested {
    t: crate::Topology,
    sequence: u64,
}

impl Tested {
    fn new(nodes: &[&str], at: UnixMs) -> Self {
        let mut config = crate::EngineConfig::default();
        config.throughput.pair_interval_ms = 60_000;
        let mut t = crate::Topology::new(config);
        for n in nodes {
            t.register(&hello(n, &format!("zone-{}", &n[1..2])), at);
        }
        Self { t, sequence: 0 }
    }

    /// One report of `src`'s tests to each `(peer, bit/s)`, applied at `at`.
    fn report(&mut self, src: &str, peers: &[(&str, f64)], at: UnixMs) {
        self.sequence += 1;
        let paths = peers
            .iter()
            .map(|(d, bps)| sample(src, d, 50.0, 0, Some(*bps)))
            .collect();
        let id = self.t.id(&name(src)).unwrap();
        let report = zonemesh_domain::Report {
            sequence: self.sequence,
            paths,
        };
        self.t.apply_report(id, &report, at).unwrap();
    }
}

#[test]
fn a_nodes_cap_follows_its_tests_of_the_last_interval() {
    let t0 = UnixMs(10_000_000);
    let nodes = ["z0-n0", "z0-n1", "z0-n2", "z0-n3"];
    let mut tested = Tested::new(&nodes, t0);
    // Every pair tested at 1 Gbit/s.
    for src in nodes {
        let peers: Vec<(&str, f64)> = nodes
            .iter()
            .filter(|d| **d != src)
            .map(|d| (*d, 1e9))
            .collect();
        tested.report(src, &peers, t0);
    }
    let t = &mut tested.t;
    t.fit_model(t0);
    let n1 = t.id(&name("z0-n1")).unwrap();
    assert_eq!(t.view().model().node(n1).unwrap().egress_bps, Some(1e9));
    // Two minutes later z0-n1's link has slowed: its tests to two peers run at 100 Mbit/s; its
    // test to the third is the old one, a full interval before its newest.
    let later = UnixMs(t0.0 + 120_000);
    tested.report("z0-n1", &[("z0-n0", 100e6), ("z0-n2", 100e6)], later);
    let t = &mut tested.t;
    t.fit_model(later);
    let terms = *t.view().model().node(n1).unwrap();
    assert_eq!(terms.egress_bps, Some(100e6), "{terms:?}");
    assert_eq!(
        terms.ingress_bps,
        Some(1e9),
        "what it receives is unchanged"
    );
}

#[test]
fn a_zone_links_capacity_leaves_out_tests_older_than_an_interval_before_its_newest() {
    let t0 = UnixMs(10_000_000);
    let nodes = [
        "z0-n0", "z0-n1", "z0-n2", "z0-n3", "z1-n0", "z1-n1", "z1-n2", "z1-n3",
    ];
    let mut tested = Tested::new(&nodes, t0);
    // z0-n2 is capped at 100 Mbit/s: every test it sends runs at that.
    for src in nodes {
        let bps = if src == "z0-n2" { 100e6 } else { 1e9 };
        let peers: Vec<(&str, f64)> = nodes
            .iter()
            .filter(|d| **d != src)
            .map(|d| (*d, bps))
            .collect();
        tested.report(src, &peers, t0);
    }
    // Ten minutes later its cap is gone; every pair is tested again but z0-n2 → z1-n3, which
    // keeps its old figure.
    let later = UnixMs(t0.0 + 600_000);
    for src in nodes {
        let peers: Vec<(&str, f64)> = nodes
            .iter()
            .filter(|d| **d != src && !(src == "z0-n2" && **d == "z1-n3"))
            .map(|d| (*d, 1e9))
            .collect();
        tested.report(src, &peers, later);
    }
    let t = &mut tested.t;
    t.fit_model(later);
    let snap = t.view();
    let id = |n: &str| t.id(&name(n)).unwrap();
    assert_eq!(snap.egress_cap_bps(id("z0-n2")), Some(1e9));
    let (z0, z1) = (snap.zone_of(id("z0-n0")), snap.zone_of(id("z1-n0")));
    assert_eq!(
        snap.zone_capacity_bps(z0, z1),
        None,
        "the nodes explain every current test"
    );
}

#[test]
fn a_test_a_newer_test_across_the_same_zones_beat_sets_no_capacity() {
    let t0 = UnixMs(10_000_000);
    let all = |nodes: &[&'static str], src: &str, bps: f64| -> Vec<(&'static str, f64)> {
        nodes
            .iter()
            .filter(|d| **d != src)
            .map(|d| (*d, bps))
            .collect()
    };
    // One zone of four; z0-n3 sends at 100 Mbit/s, the rest run at 1 Gbit/s.
    let nodes = ["z0-n0", "z0-n1", "z0-n2", "z0-n3"];
    let mut tested = Tested::new(&nodes, t0);
    for src in nodes {
        let bps = if src == "z0-n3" { 100e6 } else { 1e9 };
        tested.report(src, &all(&nodes, src, bps), t0);
    }
    // Half an interval later its cap is gone: its first test since runs at 1 Gbit/s, and so
    // does a test between two other nodes. Its two slow tests are still of the last interval,
    // and its cap (1 Gbit/s now) no longer explains them.
    let later = UnixMs(t0.0 + 30_000);
    tested.report("z0-n3", &[("z0-n0", 1e9)], later);
    tested.report("z0-n1", &[("z0-n2", 1e9)], later);
    let t = &mut tested.t;
    t.fit_model(later);
    let snap = t.view();
    let id = |n: &str| t.id(&name(n)).unwrap();
    assert_eq!(snap.egress_cap_bps(id("z0-n3")), Some(1e9));
    let z0 = snap.zone_of(id("z0-n0"));
    assert_eq!(
        snap.zone_capacity_bps(z0, z0),
        None,
        "the zone carried 1 Gbit/s since its slow tests"
    );

    // A zone link that slows shows at once: older faster tests beat nothing newer.
    let nodes = ["z0-n0", "z0-n1", "z1-n0", "z1-n1"];
    let mut tested = Tested::new(&nodes, t0);
    for src in nodes {
        tested.report(src, &all(&nodes, src, 1e9), t0);
    }
    let slow = |src: &str| {
        let peer = if src.starts_with("z0") {
            "z1-n0"
        } else {
            "z0-n0"
        };
        (peer, 200e6)
    };
    for src in nodes {
        let inside = nodes
            .iter()
            .find(|d| **d != src && d[..2] == src[..2])
            .unwrap();
        tested.report(src, &[slow(src), (inside, 1e9)], later);
    }
    let t = &mut tested.t;
    t.fit_model(later);
    let snap = t.view();
    let id = |n: &str| t.id(&name(n)).unwrap();
    let (z0, z1) = (snap.zone_of(id("z0-n0")), snap.zone_of(id("z1-n0")));
    assert_eq!(snap.zone_capacity_bps(z0, z1), Some(200e6));
}

#[test]
fn a_model_fitted_elsewhere_is_installed_unless_a_later_fit_is_in_place() {
    let now = UnixMs(1_000_000);
    let mut t = mesh(2, 3, |_, _| 100.0, |_, _| 0, now);
    assert_eq!(
        t.view().model().fitted_at(),
        Some(now),
        "fitted by the sweep"
    );
    t.fit_models_elsewhere();
    let later = UnixMs(now.0 + 60_000);
    t.sweep(later);
    assert_eq!(
        t.view().model().fitted_at(),
        Some(now),
        "the sweep leaves it"
    );
    assert!(t.model_due(later));
    let fitted = std::sync::Arc::new(Model::fit(&t.snapshot(), later));
    assert!(t.install_model(fitted.clone()));
    assert_eq!(t.view().model().fitted_at(), Some(later));
    let older = std::sync::Arc::new(Model::fit(&t.snapshot(), now));
    assert!(
        !t.install_model(older),
        "an older fit never replaces a newer one"
    );
    assert_eq!(t.view().model().fitted_at(), Some(later));
}

#[test]
fn a_lossy_node_never_lifts_another_nodes_estimated_loss() {
    let now = UnixMs(1_000_000);
    let mut lossy_seen = 0;
    let mut clean_estimates = 0;
    for seed in 0..12 {
        let (t, truth) = synthetic(4, 10, 2, seed, now);
        let snap = t.view();
        let lossy: Vec<NodeId> = truth
            .lossy
            .iter()
            .map(|(n, _)| t.id(&name(n)).unwrap())
            .collect();
        lossy_seen += lossy.len();
        for (a, _) in snap.nodes() {
            for (b, _) in snap.nodes() {
                if a >= b || snap.path(a, b).is_some() || snap.path(b, a).is_some() {
                    continue;
                }
                let pair = snap.pair(a, b, now);
                assert_eq!(pair.latency, zonemesh_domain::Provenance::Estimated);
                let loss = pair.loss.unwrap();
                let (na, nb) = (&snap.node(a).name, &snap.node(b).name);
                if lossy.contains(&a) || lossy.contains(&b) {
                    assert!(loss >= 0.01, "seed {seed}: {na}–{nb} lost its node's fault");
                } else {
                    clean_estimates += 1;
                    assert!(
                        loss <= LAB_ZERO_LOSS_UPPER,
                        "seed {seed}: {na}–{nb} estimated at {loss} ({:?} lossy)",
                        truth.lossy
                    );
                }
                let figures = snap.path_figures(a, b, now);
                assert_eq!(figures.loss_ratio, {
                    let z = (snap.zone_of(a), snap.zone_of(b));
                    snap.model().latency(a, z.0, b, z.1).unwrap().loss
                });
            }
        }
    }
    assert!(lossy_seen >= 3, "the seeds hold {lossy_seen} lossy nodes");
    assert!(clean_estimates > 1_000, "{clean_estimates}");
}

/// Every path the lab's accuracy run measured (docs/ACCURACY.md's table: the demo cluster,
/// zones a, b, c of three nodes, two node pairs probed between two zones, a2 losing 5 %).
fn lab_paths() -> Vec<MeasuredPath> {
    let doc = include_str!("../../../docs/ACCURACY.md");
    let node = |s: &str| NodeName::parse("node", s).unwrap();
    let zone = |s: &str| ZoneName::parse("zone", format!("zone-{}", &s[..1])).unwrap();
    doc.lines()
        .skip_while(|l| !l.starts_with("## RTT and loss"))
        // The RTT table ends where the model's section (with its table of held-out rates) begins.
        .take_while(|l| !l.starts_with("## The model of paths"))
        .filter(|l| l.starts_with("| ") && l.contains(" → "))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let (src, dst) = cells[1].split_once(" → ").unwrap();
            let us: f64 = cells[3].trim_end_matches(" µs").parse().unwrap();
            // "8.00 % (150)": the loss and the probes sent.
            let (loss, sent) = cells[7].split_once(" % (").unwrap();
            let sent: u64 = sent.trim_end_matches(')').parse().unwrap();
            let lost = (loss.parse::<f64>().unwrap() / 100.0 * sent as f64).round() as u64;
            MeasuredPath {
                src: node(src),
                src_zone: zone(src),
                dst: node(dst),
                dst_zone: zone(dst),
                rtt_p50_us: us,
                sent,
                received: sent - lost,
                throughput_bps: None,
            }
        })
        .collect()
}

#[test]
fn on_the_labs_measured_paths_the_model_predicts_the_held_out_ones() {
    let now = UnixMs(1_000_000);
    let paths = lab_paths();
    assert_eq!(paths.len(), 30, "the table of docs/ACCURACY.md");
    let t = topology_of(&paths, now).unwrap();
    let error = holdout(t.view(), now);
    println!("lab, 2026-12-04: {}", error.summary());
    assert_eq!(
        error.paths, 12,
        "two node pairs a zone pair, both directions, three zone pairs"
    );
    let median = HoldoutError::quantile(&error.rtt_relative, 0.5);
    assert!(median <= 0.05, "{}", error.summary());
    // a2's 5 % stays on a2: no pair between other nodes is estimated lossy.
    let snap = t.view();
    let a2 = t.id(&name("a2")).unwrap();
    let mut estimated = 0;
    for (a, _) in snap.nodes() {
        for (b, _) in snap.nodes() {
            if a >= b || snap.path(a, b).is_some() || snap.path(b, a).is_some() {
                continue;
            }
            estimated += 1;
            let loss = snap.pair(a, b, now).loss.unwrap();
            if a == a2 || b == a2 {
                assert!(loss >= 0.03, "{loss}");
            } else {
                assert!(
                    loss <= LAB_ZERO_LOSS_UPPER,
                    "{}–{}: {loss}",
                    snap.node(a).name,
                    snap.node(b).name
                );
            }
        }
    }
    assert_eq!(
        estimated,
        36 - 9 - 6,
        "every pair but the 9 inside zones and 6 between"
    );
}
