//! The agent's Prometheus metrics. Per-peer figures are rolled up by the peer's zone: the label
//! sets grow with the number of zones, never with the number of peers or pairs.

use std::collections::BTreeMap;
use std::sync::Mutex;

use zonemesh_common::prom::{Counter, Exposition, Gauge};
use zonemesh_domain::IcmpMode;

use crate::probe::WindowReport;
use crate::stats::WindowStats;

/// Zone of peers that did not say theirs.
const NO_ZONE: &str = "unknown";

#[derive(Debug, Default)]
struct ZoneFigures {
    sent: u64,
    lost: u64,
    peers: u64,
    /// p50, p90, p99 of the last window with replies, seconds.
    rtt: Option<[f64; 3]>,
}

/// Every metric of the agent.
#[derive(Debug)]
pub struct Metrics {
    node: String,
    zone: String,
    mode: IcmpMode,
    /// Report windows closed.
    pub windows: Counter,
    /// Reports waiting for an acknowledgement.
    pub buffered: Gauge,
    /// Reports dropped from a full buffer.
    pub dropped_reports: Counter,
    /// Probes in dropped reports.
    pub dropped_probes: Counter,
    /// Reports the aggregator acknowledged (durable).
    pub acked_reports: Counter,
    /// Probes in acknowledged reports.
    pub acked_probes: Counter,
    /// Reports the aggregator refused.
    pub refused_reports: Counter,
    /// Connections to the aggregator lost or failed.
    pub reconnects: Counter,
    /// 1 while the stream to the aggregator is up.
    pub connected: Gauge,
    /// Version of the probe plan in use.
    pub plan_version: Gauge,
    /// Throughput tests that produced a figure.
    pub throughput_ok: Counter,
    /// Throughput tests that failed.
    pub throughput_failed: Counter,
    zones: Mutex<BTreeMap<String, ZoneFigures>>,
}

impl Metrics {
    /// Metrics of the agent on `node` in `zone`, measuring with `mode`.
    pub fn new(node: &str, zone: &str, mode: IcmpMode) -> Self {
        Self {
            node: node.to_owned(),
            zone: zone.to_owned(),
            mode,
            windows: Counter::default(),
            buffered: Gauge::default(),
            dropped_reports: Counter::default(),
            dropped_probes: Counter::default(),
            acked_reports: Counter::default(),
            acked_probes: Counter::default(),
            refused_reports: Counter::default(),
            reconnects: Counter::default(),
            connected: Gauge::default(),
            plan_version: Gauge::default(),
            throughput_ok: Counter::default(),
            throughput_failed: Counter::default(),
            zones: Mutex::new(BTreeMap::new()),
        }
    }

    /// Folds a closed window into the per-zone figures.
    pub fn record_window(&self, window: &WindowReport) {
        self.windows.inc();
        let mut by_zone: BTreeMap<&str, (WindowStats, u64)> = BTreeMap::new();
        for peer in window.peers.values() {
            let zone = if peer.zone.is_empty() {
                NO_ZONE
            } else {
                &peer.zone
            };
            let (stats, peers) = by_zone.entry(zone).or_default();
            stats.add(&peer.stats);
            *peers += 1;
        }
        let mut zones = self.zones.lock().expect("metrics lock");
        for z in zones.values_mut() {
            z.peers = 0;
        }
        for (zone, (stats, peers)) in by_zone {
            let z = zones.entry(zone.to_owned()).or_default();
            z.sent += stats.sent();
            z.lost += stats.sent() - stats.received();
            z.peers = peers;
            if let Some(rtt) = stats.rtt() {
                z.rtt = Some([rtt.p50_us, rtt.p90_us, rtt.p99_us].map(|us| us / 1e6));
            }
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut e = Exposition::new();
        e.gauge(
            "zonemesh_agent_info",
            "The agent: node, zone, version and RTT method.",
            &[
                ("node", &self.node),
                ("zone", &self.zone),
                ("version", env!("CARGO_PKG_VERSION")),
                ("icmp_mode", self.mode.as_str()),
            ],
            1.0,
        );
        {
            let zones = self.zones.lock().expect("metrics lock");
            for (zone, z) in zones.iter() {
                e.counter(
                    "zonemesh_agent_probes_sent_total",
                    "Probes resolved (answered or timed out), by the peer's zone.",
                    &[("peer_zone", zone)],
                    z.sent,
                );
            }
            for (zone, z) in zones.iter() {
                e.counter(
                    "zonemesh_agent_probes_lost_total",
                    "Probes without a reply before their timeout, by the peer's zone.",
                    &[("peer_zone", zone)],
                    z.lost,
                );
            }
            for (zone, z) in zones.iter() {
                e.gauge(
                    "zonemesh_agent_peers",
                    "Peers probed in the last window, by zone.",
                    &[("peer_zone", zone)],
                    z.peers as f64,
                );
            }
            for (zone, z) in zones.iter() {
                let Some(rtt) = z.rtt else { continue };
                for (q, v) in ["0.5", "0.9", "0.99"].iter().zip(rtt) {
                    e.gauge(
                        "zonemesh_agent_rtt_seconds",
                        "RTT quantiles over the peers of a zone in the last window with replies.",
                        &[("peer_zone", zone), ("quantile", q)],
                        v,
                    );
                }
            }
        }
        let counters: [(&str, &str, &Counter); 9] = [
            (
                "zonemesh_agent_windows_total",
                "Report windows closed.",
                &self.windows,
            ),
            (
                "zonemesh_agent_reports_dropped_total",
                "Reports dropped unacknowledged from a full buffer.",
                &self.dropped_reports,
            ),
            (
                "zonemesh_agent_dropped_probes_total",
                "Probes in dropped reports.",
                &self.dropped_probes,
            ),
            (
                "zonemesh_agent_reports_acknowledged_total",
                "Reports the aggregator acknowledged as durable.",
                &self.acked_reports,
            ),
            (
                "zonemesh_agent_acknowledged_probes_total",
                "Probes in acknowledged reports.",
                &self.acked_probes,
            ),
            (
                "zonemesh_agent_reports_refused_total",
                "Reports the aggregator refused.",
                &self.refused_reports,
            ),
            (
                "zonemesh_agent_reconnects_total",
                "Streams to the aggregator that failed or ended.",
                &self.reconnects,
            ),
            (
                "zonemesh_agent_throughput_tests_total",
                "Throughput tests that produced a figure.",
                &self.throughput_ok,
            ),
            (
                "zonemesh_agent_throughput_failures_total",
                "Throughput tests that failed.",
                &self.throughput_failed,
            ),
        ];
        for (name, help, c) in counters {
            e.counter(name, help, &[], c.get());
        }
        e.gauge(
            "zonemesh_agent_plan_version",
            "Version of the probe plan in use.",
            &[],
            self.plan_version.get() as f64,
        );
        e.gauge(
            "zonemesh_agent_buffered_reports",
            "Reports waiting for an acknowledgement.",
            &[],
            self.buffered.get() as f64,
        );
        e.gauge(
            "zonemesh_agent_connected",
            "1 while the stream to the aggregator is up.",
            &[],
            self.connected.get() as f64,
        );
        e.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::PeerWindow;
    use std::time::Duration;

    /// A window of `peers`: (name, zone, RTTs of the replies in µs, probes lost).
    fn window(index: u64, peers: &[(&str, &str, &[u64], u64)]) -> WindowReport {
        let now = tokio::time::Instant::now();
        WindowReport {
            index,
            start: now,
            end: now,
            end_unix_ms: 1,
            peers: peers
                .iter()
                .map(|(name, zone, rtts, lost)| {
                    let mut stats = WindowStats::new();
                    for us in *rtts {
                        stats.reply(Duration::from_micros(*us));
                    }
                    for _ in 0..*lost {
                        stats.lost();
                    }
                    let zone = (*zone).into();
                    ((*name).to_owned(), PeerWindow { zone, stats })
                })
                .collect(),
        }
    }

    /// Every family, type, help text, series and value is what the hand-written exposition
    /// printed (`tests/golden/metrics.prom`, captured before prometheus-client). Only the order
    /// of series inside a family may differ, and RTTs (floating point) may print `0.0` for `0`.
    #[test]
    fn the_exposition_is_what_it_was() {
        let m = Metrics::new("a1", "zone-a", IcmpMode::Dgram);
        m.record_window(&window(
            0,
            &[
                ("b", "z1", &[100, 200, 300], 1),
                ("c", "", &[], 4),
                ("d", "z2", &[900], 0),
            ],
        ));
        // z2 absent from the next window: 0 peers, its last RTTs kept.
        m.record_window(&window(1, &[("b", "z1", &[150], 0)]));
        m.buffered.set(2);
        m.dropped_reports.inc();
        m.dropped_probes.add(30);
        m.acked_reports.add(5);
        m.acked_probes.add(150);
        m.refused_reports.inc();
        m.reconnects.add(3);
        m.connected.set(1);
        m.plan_version.set(17);
        m.throughput_ok.add(4);
        m.throughput_failed.inc();
        let text = m.render();
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/metrics.prom");
        let golden = std::fs::read_to_string(path).unwrap();
        let split = |text: &str| {
            let mut comments = std::collections::BTreeSet::new();
            let mut samples = BTreeMap::new();
            for line in text.lines() {
                if line.starts_with('#') {
                    comments.insert(line.to_owned());
                } else if let Some((series, value)) = line.rsplit_once(' ') {
                    samples.insert(series.to_owned(), value.to_owned());
                }
            }
            (comments, samples)
        };
        let (got_comments, got) = split(&text);
        let (want_comments, want) = split(&golden);
        assert_eq!(got_comments, want_comments, "{text}");
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{text}"
        );
        for (series, value) in &want {
            let ours = &got[series];
            let same = series.starts_with("zonemesh_agent_rtt_seconds")
                && ours.parse::<f64>().ok() == value.parse::<f64>().ok();
            assert!(ours == value || same, "{series}: {ours}, was {value}");
        }
    }

    #[test]
    fn peers_roll_up_into_their_zone() {
        let m = Metrics::new("a", "z1", IcmpMode::Raw);
        let mut peers = BTreeMap::new();
        for (name, zone, us) in [("b", "z1", 100), ("c", "z1", 300), ("d", "z2", 900)] {
            let mut stats = WindowStats::new();
            stats.reply(Duration::from_micros(us));
            stats.lost();
            peers.insert(
                name.to_owned(),
                PeerWindow {
                    zone: zone.into(),
                    stats,
                },
            );
        }
        let now = tokio::time::Instant::now();
        m.record_window(&WindowReport {
            index: 0,
            start: now,
            end: now,
            end_unix_ms: 1,
            peers,
        });
        let text = m.render();
        assert!(
            text.contains("zonemesh_agent_probes_sent_total{peer_zone=\"z1\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("zonemesh_agent_probes_lost_total{peer_zone=\"z2\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("zonemesh_agent_peers{peer_zone=\"z1\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("zonemesh_agent_rtt_seconds{peer_zone=\"z2\",quantile=\"0.5\"} 0.0009"),
            "{text}"
        );
        // One series per zone, none per peer.
        assert!(!text.contains("\"b\""));
    }
}
