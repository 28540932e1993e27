//! A window's samples in domain types: one [`PathSample`] per peer that resolved a probe in the
//! window, carrying that peer's throughput result if one came, then one per remaining throughput
//! result. The agent builds its reports here from its windows, and the fleet simulator
//! (`zonemesh-fleet`) builds its synthetic ones here too, so both send what the same code makes.
//! The session converts them to the wire (`v1::Report::from`), with the sequence number the
//! outbox gives them.
//!
//! ```
//! use std::collections::BTreeMap;
//! use zonemesh_agent::report::{Probes, window_samples};
//! use zonemesh_domain::{IcmpMode, NodeName, UnixMs};
//!
//! let name = |n: &str| NodeName::parse("node", n).unwrap();
//! let lost = Probes { sent: 3, received: 0, rtt: None };
//! let samples = window_samples(
//!     &name("a"),
//!     IcmpMode::Raw,
//!     (UnixMs(1_000), UnixMs(11_000)),
//!     [(name("b"), lost)],
//!     BTreeMap::new(),
//! );
//! assert_eq!(samples.len(), 1);
//! assert_eq!(samples[0].loss().unwrap().get(), 1.0);
//! ```

use std::collections::BTreeMap;

use zonemesh_domain::{IcmpMode, NodeName, PathSample, ThroughputSample, UnixMs};

use crate::probe::WindowReport;
pub use crate::stats::Probes;

/// The samples `node` reports for the window `(start, end)`, measured with `mode`: one per peer
/// of `probed` (in its order) with a resolved probe, then one per `throughput` result left (in
/// name order). A peer's throughput result rides on its probe sample. Paths to `node` itself are
/// left out. Empty when there is nothing to say.
pub fn window_samples(
    node: &NodeName,
    mode: IcmpMode,
    (start, end): (UnixMs, UnixMs),
    probed: impl IntoIterator<Item = (NodeName, Probes)>,
    mut throughput: BTreeMap<NodeName, ThroughputSample>,
) -> Vec<PathSample> {
    let sample = |dst: NodeName, probes: Probes, throughput| PathSample {
        src: node.clone(),
        dst,
        window_start: start,
        window_end: end,
        sent: probes.sent,
        received: probes.received,
        rtt: probes.rtt,
        throughput,
        method: Some(mode),
    };
    let mut samples = Vec::new();
    for (dst, probes) in probed {
        if probes.sent == 0 || &dst == node {
            continue;
        }
        let t = throughput.remove(&dst);
        samples.push(sample(dst, probes, t));
    }
    let none = Probes {
        sent: 0,
        received: 0,
        rtt: None,
    };
    for (dst, t) in throughput {
        if &dst != node {
            samples.push(sample(dst, none, Some(t)));
        }
    }
    samples
}

/// The samples of one of the agent's windows: [`window_samples`] over its peers' counts and
/// RTT statistics, with the throughput results that arrived during it.
pub fn of_window(
    node: &NodeName,
    mode: IcmpMode,
    window: &WindowReport,
    throughput: BTreeMap<NodeName, ThroughputSample>,
) -> Vec<PathSample> {
    let probed = window
        .peers
        .iter()
        .map(|(peer, w)| (peer.clone(), w.stats.probes()));
    let span = (window.start_unix_ms(), window.end_unix_ms);
    window_samples(node, mode, span, probed, throughput)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use zonemesh_domain::{Bps, Micros};

    use super::*;
    use crate::probe::PeerWindow;
    use crate::stats::WindowStats;
    use zonemesh_domain::Rtt;

    fn name(n: &str) -> NodeName {
        NodeName::parse("node", n).unwrap()
    }

    fn throughput() -> ThroughputSample {
        ThroughputSample::new(
            Bps::parse("throughput_bps", 8e6).unwrap(),
            1_000_000,
            1_000_000,
            0,
            1,
        )
        .unwrap()
    }

    #[test]
    fn probed_peers_come_first_with_their_throughput_then_throughput_alone() {
        let us = |v| Micros::parse("rtt", v).unwrap();
        let rtt = Rtt {
            samples: 1,
            min: us(80.0),
            p50: us(80.0),
            p90: us(80.0),
            p99: us(80.0),
            max: us(80.0),
            mean: us(80.0),
            jitter: us(0.0),
        };
        let probed = [
            (
                name("c"),
                Probes {
                    sent: 2,
                    received: 1,
                    rtt: Some(rtt),
                },
            ),
            // Resolved nothing: not reported.
            (
                name("b"),
                Probes {
                    sent: 0,
                    received: 0,
                    rtt: None,
                },
            ),
            // The node itself: never reported.
            (
                name("a"),
                Probes {
                    sent: 1,
                    received: 0,
                    rtt: None,
                },
            ),
        ];
        let results = BTreeMap::from([
            (name("e"), throughput()),
            (name("c"), throughput()),
            (name("a"), throughput()),
            (name("d"), throughput()),
        ]);
        let window = (UnixMs(1_000), UnixMs(11_000));
        let samples = window_samples(&name("a"), IcmpMode::Tcp, window, probed, results);
        let dsts: Vec<&str> = samples.iter().map(|s| s.dst.as_str()).collect();
        assert_eq!(dsts, ["c", "d", "e"]);
        assert_eq!(samples[0].rtt, Some(rtt));
        assert!(samples.iter().all(|s| s.throughput.is_some()));
        assert_eq!((samples[1].sent, samples[1].rtt), (0, None));
        assert!(samples.iter().all(|s| s.src == "a"
            && s.method == Some(IcmpMode::Tcp)
            && (s.window_start, s.window_end) == window));
    }

    #[test]
    fn nothing_to_say_is_no_sample() {
        let samples = window_samples(
            &name("a"),
            IcmpMode::Raw,
            (UnixMs(1), UnixMs(2)),
            [],
            BTreeMap::from([(name("a"), throughput())]),
        );
        assert!(samples.is_empty());
    }

    #[test]
    fn a_window_becomes_a_report_the_aggregator_accepts() {
        let now = tokio::time::Instant::now();
        let mut stats = WindowStats::new();
        stats.reply(Duration::from_micros(80));
        stats.lost();
        let peers = BTreeMap::from([
            (
                name("b"),
                PeerWindow {
                    zone: "z".into(),
                    stats,
                },
            ),
            (
                name("c"),
                PeerWindow {
                    zone: "z".into(),
                    stats: WindowStats::new(),
                },
            ),
        ]);
        let window = WindowReport {
            index: 0,
            start: now,
            end: now + Duration::from_secs(10),
            end_unix_ms: UnixMs(1_700_000_010_000),
            peers,
        };
        let throughput = BTreeMap::from([(name("d"), throughput())]);
        let paths = of_window(&name("a"), IcmpMode::Raw, &window, throughput);
        let dsts: Vec<&str> = paths.iter().map(|p| p.dst.as_str()).collect();
        // c resolved no probe: not reported; d has only a throughput figure.
        assert_eq!(dsts, ["b", "d"]);
        assert_eq!(paths[0].window_start, UnixMs(1_700_000_000_000));
        let report = zonemesh_domain::Report { sequence: 1, paths };
        let wire = zonemesh_proto::v1::Report::from(report.clone());
        let back = zonemesh_proto::convert::report_from_agent(&name("a"), wire);
        assert_eq!(back, Ok(report), "the aggregator reads back what was sent");
    }

    #[test]
    fn an_empty_window_is_not_reported() {
        let now = tokio::time::Instant::now();
        let window = WindowReport {
            index: 0,
            start: now,
            end: now,
            end_unix_ms: UnixMs(5),
            peers: BTreeMap::new(),
        };
        assert!(of_window(&name("a"), IcmpMode::Tcp, &window, BTreeMap::new()).is_empty());
    }

    #[test]
    fn the_summary_passes_the_aggregators_checks() {
        let mut w = WindowStats::new();
        for us in [37, 41, 39, 2_000, 40] {
            w.reply(Duration::from_micros(us));
        }
        w.lost();
        let name = |n: &str| zonemesh_domain::NodeName::parse("node", n).unwrap();
        let samples = window_samples(
            &name("a"),
            zonemesh_domain::IcmpMode::Raw,
            (zonemesh_domain::UnixMs(1), zonemesh_domain::UnixMs(2)),
            [(name("b"), w.probes())],
            Default::default(),
        );
        let wire = zonemesh_proto::v1::PathSummary::from(samples[0].clone());
        let back = zonemesh_domain::PathSample::try_from(wire).expect("valid summary");
        assert_eq!(back, samples[0]);
    }
}
