//! Property tests of the writer and its snapshots, over random sequences of hellos, reports,
//! disconnects, sweeps (whole and in steps), model fits and clock steps.

use proptest::prelude::*;
use zonemesh_domain::{MatrixQuery, NodesQuery, PlaceQuery, RankQuery, Report, UnixMs, ZonePolicy};

use crate::testing::{hello, sample};
use crate::{EngineConfig, NodeId, Snapshot, Sums, Topology};

/// One step of a random history.
#[derive(Debug, Clone)]
enum Op {
    /// Node `n` (of 8) says hello in zone `z` (of 3).
    Hello { n: usize, z: usize },
    /// Node `n` reports to the nodes of `dsts` (bits of 8): RTT, lost of 100, throughput.
    Report {
        n: usize,
        dsts: u8,
        rtt: u32,
        lost: u8,
        tput: Option<u32>,
    },
    /// Node `n`'s stream closes.
    Disconnect { n: usize },
    /// A whole sweep.
    Sweep,
    /// One step of a sweep of at most `paths` paths.
    SweepStep { paths: usize },
    /// The clock moves on.
    Wait { ms: u32 },
    /// A snapshot is taken (and kept).
    Publish,
    /// The model is fitted now (who is faulty may change).
    Fit,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0usize..8, 0usize..3).prop_map(|(n, z)| Op::Hello { n, z }),
        6 => (0usize..8, any::<u8>(), 20u32..20_000, 0u8..=100, proptest::option::of(1u32..100_000))
            .prop_map(|(n, dsts, rtt, lost, tput)| Op::Report { n, dsts, rtt, lost, tput }),
        1 => (0usize..8).prop_map(|n| Op::Disconnect { n }),
        1 => Just(Op::Sweep),
        2 => (1usize..12).prop_map(|paths| Op::SweepStep { paths }),
        2 => (0u32..40_000).prop_map(|ms| Op::Wait { ms }),
        2 => Just(Op::Publish),
        1 => Just(Op::Fit),
    ]
}

fn node(n: usize) -> String {
    format!("n{n}")
}

/// Plays a history; returns the writer, the clock at the end and the snapshots taken with the
/// time they were taken at.
fn play(ops: &[Op]) -> (Topology, UnixMs, Vec<(Snapshot, UnixMs)>) {
    let mut t = Topology::new(EngineConfig::default());
    let mut now = UnixMs(1_000_000);
    let mut seq = [0u64; 8];
    let mut kept = Vec::new();
    for op in ops {
        match *op {
            Op::Hello { n, z } => {
                t.register(&hello(&node(n), &format!("z{z}")), now);
            }
            Op::Report {
                n,
                dsts,
                rtt,
                lost,
                tput,
            } => {
                let Some(id) = t.id(&crate::testing::name(&node(n))) else {
                    continue;
                };
                seq[n] += 1;
                let paths = (0..8)
                    .filter(|d| *d != n && dsts & (1 << d) != 0)
                    .map(|d| {
                        let mut s = sample(
                            &node(n),
                            &node(d),
                            f64::from(rtt + d as u32),
                            u64::from(lost),
                            tput.map(|t| f64::from(t) * 1e4),
                        );
                        s.window_start = UnixMs(now.0 - 10_000);
                        s.window_end = now;
                        s
                    })
                    .collect();
                let report = Report {
                    sequence: seq[n],
                    paths,
                };
                t.apply_report(id, &report, now)
                    .expect("a report of the node itself");
            }
            Op::Disconnect { n } => {
                if let Some(id) = t.id(&crate::testing::name(&node(n))) {
                    t.disconnect(id, now);
                }
            }
            Op::Sweep => t.sweep(now),
            Op::SweepStep { paths } => {
                t.sweep_step(now, paths);
            }
            Op::Wait { ms } => now = UnixMs(now.0 + i64::from(ms)),
            Op::Publish => kept.push((t.snapshot(), now)),
            Op::Fit => t.fit_model(now),
        }
    }
    (t, now, kept)
}

/// Everything a reader can ask, as one comparable value.
fn answers(s: &Snapshot, now: UnixMs) -> String {
    let mut out = String::new();
    out += &format!("{:?}\n", s.list_nodes(&NodesQuery::default(), now));
    out += &format!("{:?}\n", s.zone_links(now));
    out += &format!("{:?}\n", s.rank(&RankQuery::default(), now));
    out += &format!("{:?}\n", s.matrix(&MatrixQuery::default(), now));
    for workers in [2, 4] {
        let place = PlaceQuery {
            workers,
            policy: ZonePolicy::Any,
            ..PlaceQuery::default()
        };
        out += &format!("{:?}\n", s.place(&place, now));
    }
    let plan: std::collections::BTreeMap<_, _> = s.plan(now).into_iter().collect();
    out += &format!("{plan:?}\n");
    out
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The running sums equal sums rebuilt from every path, within rounding. `oldest` is left out:
/// between sweeps it is conservative (it may be older than any path still counted).
fn sums_agree(running: &Sums, rebuilt: &Sums) -> bool {
    (running.rtt_n, running.loss_n, running.tput_n)
        == (rebuilt.rtt_n, rebuilt.loss_n, rebuilt.tput_n)
        && close(running.rtt, rebuilt.rtt)
        && close(running.rtt_p90, rebuilt.rtt_p90)
        && close(running.rtt_p99, rebuilt.rtt_p99)
        && close(running.loss, rebuilt.loss)
        && close(running.tput, rebuilt.tput)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A snapshot answers as the writer answered when it was taken, whatever the writer did
    /// since (copy-on-write keeps it apart), and a snapshot taken now answers as the writer.
    #[test]
    fn snapshots_answer_as_the_writer_did(ops in proptest::collection::vec(op(), 1..60)) {
        let mut expected = Vec::new();
        // Replay prefix by prefix: the answers at each Publish, computed on the writer then.
        for (i, op) in ops.iter().enumerate() {
            if matches!(op, Op::Publish) {
                let (writer, now, _) = play(&ops[..=i]);
                expected.push(answers(writer.view(), now));
            }
        }
        let (writer, now, kept) = play(&ops);
        prop_assert_eq!(kept.len(), expected.len());
        for ((snapshot, at), answer) in kept.iter().zip(&expected) {
            prop_assert_eq!(&answers(snapshot, *at), answer);
        }
        prop_assert_eq!(answers(&writer.snapshot(), now), answers(writer.view(), now));
    }

    /// The running sums equal sums recounted from every path after any history (whole sweeps
    /// and sweeps cut off halfway included), and, after a whole sweep, sums rebuilt from the
    /// paths' figures at that time. Exceptions, by design: `oldest` (conservative between
    /// sweeps), and paths that turned stale since the last sweep (still counted until it runs).
    #[test]
    fn running_sums_equal_a_full_rebuild(ops in proptest::collection::vec(op(), 1..80)) {
        let (mut writer, now, _) = play(&ops);
        let recounted = writer.recounted();
        check_sums(writer.view(), &recounted)?;
        writer.sweep(now);
        let mut rebuilt = writer.clone();
        rebuilt.rebuild_sums(now);
        check_sums(writer.view(), rebuilt.view())?;
    }

    /// A node's own figures, one subtraction of running sums, are what subtracting each faulty
    /// zone-mate's paths gives, and name the same mates, after any history: reports while the
    /// faulty set stays, fits that change it, sweeps that take stale paths out.
    #[test]
    fn own_figures_equal_each_faulty_mates_paths_taken_out(
        ops in proptest::collection::vec(op(), 1..80)
    ) {
        let (mut writer, now, kept) = play(&ops);
        check_own(writer.view())?;
        for (snapshot, _) in &kept {
            check_own(snapshot)?;
        }
        writer.fit_model(now);
        check_own(writer.view())?;
    }
}

/// Some histories of the proptests' kind leave nodes out of their zone-mates' figures, so that
/// the comparison above is not empty.
#[test]
fn some_histories_leave_a_faulty_mate_out() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = proptest::collection::vec(op(), 40..80);
    let mut leaving_out = 0;
    for _ in 0..64 {
        let ops = strategy.new_tree(&mut runner).expect("a history").current();
        let (mut writer, now, _) = play(&ops);
        writer.fit_model(now);
        leaving_out += check_own(writer.view()).expect("own figures agree");
    }
    assert!(leaving_out > 0, "no history left a faulty mate out");
}

/// A node's own figures and who they leave out, as `own` first computed them: its sums less each
/// faulty zone-mate's two paths, looked up one by one.
fn own_by_lookups(s: &Snapshot, id: NodeId) -> (Sums, Vec<NodeId>) {
    let all = *s.node_sums(id);
    let mut sums = all;
    let mut left_out = Vec::new();
    for &f in s
        .faulty()
        .in_zone(s.zone_of(id))
        .iter()
        .filter(|f| **f != id)
    {
        let mut touched = false;
        for (src, dst) in [(id, f), (f, id)] {
            if let Some(c) = s.contribution(src, dst) {
                sums.add(c, -1.0);
                touched = true;
            }
        }
        if touched {
            left_out.push(f);
        }
    }
    if left_out.is_empty() || (sums.loss_n == 0 && sums.tput_n == 0) {
        return (all, Vec::new());
    }
    (sums, left_out)
}

fn means_agree(a: &Sums, b: &Sums) -> bool {
    let same = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => close(x, y),
        (x, y) => x.is_none() && y.is_none(),
    };
    (a.rtt_n, a.loss_n, a.tput_n) == (b.rtt_n, b.loss_n, b.tput_n)
        && same(a.rtt_mean(), b.rtt_mean())
        && same(a.loss_mean(), b.loss_mean())
        && same(a.tput_mean(), b.tput_mean())
        && a.oldest == b.oldest
}

fn check_own(s: &Snapshot) -> Result<usize, TestCaseError> {
    let faulty = s.faulty();
    let mut leaving_out = 0;
    for (id, _) in s.nodes() {
        let (sums, left_out) = own_by_lookups(s, id);
        let own = s.own_sums(id, &faulty);
        prop_assert!(
            means_agree(&own.sums, &sums),
            "{id:?}: {:?} / by lookups {sums:?}",
            own.sums
        );
        prop_assert_eq!(&own.left_out, &left_out, "{:?}", id);
        leaving_out += usize::from(!left_out.is_empty());
    }
    Ok(leaving_out)
}

fn check_sums(a: &Snapshot, b: &Snapshot) -> Result<(), TestCaseError> {
    {
        for i in 0..a.nodes.len() {
            let id = NodeId(i as u32);
            prop_assert!(
                sums_agree(a.node_sums(id), b.node_sums(id)),
                "node {i}: {:?} / {:?}",
                a.node_sums(id),
                b.node_sums(id)
            );
            prop_assert!(
                sums_agree(a.left_sums(id), b.left_sums(id)),
                "node {i}, left out: {:?} / {:?}",
                a.left_sums(id),
                b.left_sums(id)
            );
        }
        for (za, _) in a.zones() {
            for (zb, _) in a.zones() {
                let (x, y) = (
                    a.link_sums(za, zb).copied().unwrap_or_default(),
                    b.link_sums(za, zb).copied().unwrap_or_default(),
                );
                prop_assert!(sums_agree(&x, &y), "{za:?} -> {zb:?}: {x:?} / {y:?}");
            }
        }
    }
    Ok(())
}
