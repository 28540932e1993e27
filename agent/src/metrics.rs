//! The agent's Prometheus metrics, registered explicitly in a `prometheus-client` [`Registry`].
//! Per-peer figures are rolled up by the peer's zone: the label sets grow with the number of
//! zones, never with the number of peers or pairs.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use zonemesh_common::label_value;
use zonemesh_common::metrics::{Counter, Gauge};
use zonemesh_domain::IcmpMode;

use crate::probe::WindowReport;
use crate::stats::WindowStats;

/// Zone of peers that did not say theirs.
const NO_ZONE: &str = "unknown";

#[derive(Debug, Default, Clone)]
struct ZoneFigures {
    sent: u64,
    lost: u64,
    peers: u64,
    /// p50, p90, p99 of the last window with replies, seconds.
    rtt: Option<[f64; 3]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct AgentLabels {
    node: String,
    zone: String,
    version: String,
    icmp_mode: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PeerZoneLabels {
    peer_zone: String,
}

label_value! {
    /// The RTT quantiles of a zone's peers (`quantile`, as the agent has always named them).
    enum Quantile { P50 => "0.5", P90 => "0.9", P99 => "0.99" }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PeerZoneQuantileLabels {
    peer_zone: String,
    quantile: Quantile,
}

/// Every metric of the agent.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
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
    /// Grants not run: their start had passed by more than the slack.
    pub grants_late: Counter,
    /// Grants not run: decided by a leader older than one whose grant already came.
    pub grants_stale: Counter,
    zones: Arc<Mutex<BTreeMap<String, ZoneFigures>>>,
}

impl Metrics {
    /// Metrics of the agent on `node` in `zone`, measuring with `mode`.
    pub fn new(node: &str, zone: &str, mode: IcmpMode) -> Self {
        let mut registry = Registry::default();
        // Registered as `zonemesh_agent`: the text format prints an info metric as the gauge
        // `zonemesh_agent_info … 1`.
        registry.register(
            "zonemesh_agent",
            "The agent: node, zone, version and RTT method",
            Info::new(AgentLabels {
                node: node.to_owned(),
                zone: zone.to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                icmp_mode: mode.as_str().to_owned(),
            }),
        );
        let zones = Arc::new(Mutex::new(BTreeMap::new()));
        registry.register_collector(Box::new(ByZone(zones.clone())));
        // Help texts without their final full stop: the registry adds it.
        let mut counter = |name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let windows = counter("zonemesh_agent_windows", "Report windows closed");
        let dropped_reports = counter(
            "zonemesh_agent_reports_dropped",
            "Reports dropped unacknowledged from a full buffer",
        );
        let dropped_probes = counter("zonemesh_agent_dropped_probes", "Probes in dropped reports");
        let acked_reports = counter(
            "zonemesh_agent_reports_acknowledged",
            "Reports the aggregator acknowledged as durable",
        );
        let acked_probes = counter(
            "zonemesh_agent_acknowledged_probes",
            "Probes in acknowledged reports",
        );
        let refused_reports = counter(
            "zonemesh_agent_reports_refused",
            "Reports the aggregator refused",
        );
        let reconnects = counter(
            "zonemesh_agent_reconnects",
            "Streams to the aggregator that failed or ended",
        );
        let throughput_ok = counter(
            "zonemesh_agent_throughput_tests",
            "Throughput tests that produced a figure",
        );
        let throughput_failed = counter(
            "zonemesh_agent_throughput_failures",
            "Throughput tests that failed",
        );
        let grants_late = counter(
            "zonemesh_agent_grants_late",
            "Throughput grants not run because their start had passed by more than 1 s",
        );
        let grants_stale = counter(
            "zonemesh_agent_grants_stale",
            "Throughput grants not run because a newer leader of the replicated aggregator had already granted one",
        );
        let mut gauge = |name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let plan_version = gauge(
            "zonemesh_agent_plan_version",
            "Version of the probe plan in use",
        );
        let buffered = gauge(
            "zonemesh_agent_buffered_reports",
            "Reports waiting for an acknowledgement",
        );
        let connected = gauge(
            "zonemesh_agent_connected",
            "1 while the stream to the aggregator is up",
        );
        Self {
            registry,
            windows,
            buffered,
            dropped_reports,
            dropped_probes,
            acked_reports,
            acked_probes,
            refused_reports,
            reconnects,
            connected,
            plan_version,
            throughput_ok,
            throughput_failed,
            grants_late,
            grants_stale,
            zones,
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
                z.rtt = Some([rtt.p50, rtt.p90, rtt.p99].map(|us| us.get() / 1e6));
            }
        }
    }

    /// The registry to expose (`zonemesh_common::metrics::exposition`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// One figure of a zone's peers.
type Figure = fn(&ZoneFigures) -> u64;

/// The per-zone families, read at scrape time from the figures the windows left: a zone shows
/// from its first window on.
#[derive(Debug)]
struct ByZone(Arc<Mutex<BTreeMap<String, ZoneFigures>>>);

impl Collector for ByZone {
    // Help texts here are written as given: they keep their full stop.
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let zones = self.0.lock().expect("metrics lock").clone();
        if zones.is_empty() {
            return Ok(());
        }
        let labels = |zone: &str| PeerZoneLabels {
            peer_zone: zone.to_owned(),
        };
        let families: [(&str, &str, MetricType, Figure); 3] = [
            (
                "zonemesh_agent_probes_sent",
                "Probes resolved (answered or timed out), by the peer's zone.",
                MetricType::Counter,
                |z| z.sent,
            ),
            (
                "zonemesh_agent_probes_lost",
                "Probes without a reply before their timeout, by the peer's zone.",
                MetricType::Counter,
                |z| z.lost,
            ),
            (
                "zonemesh_agent_peers",
                "Peers probed in the last window, by zone.",
                MetricType::Gauge,
                |z| z.peers,
            ),
        ];
        for (name, help, kind, value) in families {
            let mut family = encoder.encode_descriptor(name, help, None, kind)?;
            for (zone, z) in &zones {
                let labels = labels(zone);
                let series = family.encode_family(&labels)?;
                match kind {
                    MetricType::Counter => ConstCounter::new(value(z)).encode(series)?,
                    _ => ConstGauge::new(value(z) as i64).encode(series)?,
                }
            }
        }
        if zones.values().any(|z| z.rtt.is_some()) {
            let mut family = encoder.encode_descriptor(
                "zonemesh_agent_rtt_seconds",
                "RTT quantiles over the peers of a zone in the last window with replies.",
                None,
                MetricType::Gauge,
            )?;
            for (zone, z) in &zones {
                let Some(rtt) = z.rtt else { continue };
                for (&quantile, v) in Quantile::ALL.iter().zip(rtt) {
                    let labels = PeerZoneQuantileLabels {
                        peer_zone: zone.clone(),
                        quantile,
                    };
                    ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::PeerWindow;
    use std::time::Duration;
    use zonemesh_domain::{NodeName, UnixMs};

    fn name(n: &str) -> NodeName {
        NodeName::parse("node", n).unwrap()
    }

    /// A window of `peers`: (name, zone, RTTs of the replies in µs, probes lost).
    fn window(index: u64, peers: &[(&str, &str, &[u64], u64)]) -> WindowReport {
        let now = tokio::time::Instant::now();
        WindowReport {
            index,
            start: now,
            end: now,
            end_unix_ms: UnixMs(1),
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
                    (self::name(name), PeerWindow { zone, stats })
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
        m.grants_late.add(2);
        m.grants_stale.inc();
        let text = zonemesh_common::metrics::render(m.registry());
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/metrics.prom");
        let golden = std::fs::read_to_string(path).unwrap();
        zonemesh_common::metrics::assert_same_exposition(&text, &golden, |series| {
            series.starts_with("zonemesh_agent_rtt_seconds")
        });
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
                self::name(name),
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
            end_unix_ms: UnixMs(1),
            peers,
        });
        let text = zonemesh_common::metrics::render(m.registry());
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
