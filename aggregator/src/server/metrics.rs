//! Prometheus metrics of the aggregator, registered explicitly and named
//! `zonemesh_<what>_<unit>`. Label sets are bounded by RPC names, node states, limits and zones
//! (zone pairs at most), never by nodes or node pairs.

use std::fmt::Write as _;
use std::sync::Mutex;

use zonemesh_domain::UnixMs;

use zonemesh_domain::{NodeState, Provenance};
use zonemesh_engine::Snapshot;

pub use zonemesh_common::prom::{Counter, Gauge};

/// Upper bounds of the latency histograms, seconds.
const BUCKETS: [f64; 12] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// A latency histogram with fixed buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    inner: Mutex<HistogramInner>,
}

#[derive(Debug, Default, Clone)]
struct HistogramInner {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    /// Records one observation in seconds.
    pub fn observe(&self, seconds: f64) {
        let mut h = self.inner.lock().expect("metrics lock");
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let h = self.inner.lock().expect("metrics lock").clone();
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {}",
                h.counts[i]
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", h.count);
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", h.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", h.count);
    }
}

/// The queries whose latency is measured: the Topology RPCs and the extender's verbs.
pub const RPCS: [&str; 8] = [
    "ListNodes",
    "ListZones",
    "GetPath",
    "GetMatrix",
    "RankNodes",
    "Place",
    "ExtenderFilter",
    "ExtenderPrioritize",
];

/// The surfaces whose refusals are counted, and the reasons.
const SURFACES: [&str; 3] = ["ingest", "query", "extender"];
const REASONS: [&str; 2] = ["unauthenticated", "forbidden"];

/// The limits that can bite (`--max-*` flags).
pub const LIMITS: [&str; 5] = [
    "report_rate",
    "report_paths",
    "report_bytes",
    "nodes",
    "paths",
];

/// TLS, authentication and abuse limits.
#[derive(Debug, Default)]
pub struct SecurityMetrics {
    /// TLS handshakes that failed (no certificate the CA signed, plain text on a TLS port, ...).
    pub handshake_failures: Counter,
    /// Reloads of the TLS or token files that took effect.
    pub reloads_ok: Counter,
    /// Reloads that failed (the previous files stay in force).
    pub reloads_failed: Counter,
    refusals: [[Counter; REASONS.len()]; SURFACES.len()],
    limit_hits: [Counter; LIMITS.len()],
}

impl SecurityMetrics {
    /// Counts a refused caller.
    pub fn refused(&self, surface: &str, reason: &str) {
        let s = SURFACES.iter().position(|x| *x == surface);
        let r = REASONS.iter().position(|x| *x == reason);
        if let (Some(s), Some(r)) = (s, r) {
            self.refusals[s][r].inc();
        }
    }

    /// Refusals on `surface`, all reasons.
    pub fn refusals(&self, surface: &str) -> u64 {
        SURFACES
            .iter()
            .position(|x| *x == surface)
            .map_or(0, |s| self.refusals[s].iter().map(Counter::get).sum())
    }

    /// Counts one time `limit` (one of [`LIMITS`]) bit.
    pub fn limit_hit(&self, limit: &str) {
        if let Some(i) = LIMITS.iter().position(|x| *x == limit) {
            self.limit_hits[i].inc();
        }
    }

    /// Times `limit` bit.
    pub fn limit_hits(&self, limit: &str) -> u64 {
        LIMITS
            .iter()
            .position(|x| *x == limit)
            .map_or(0, |i| self.limit_hits[i].get())
    }

    fn render(&self, out: &mut String) {
        let mut e = zonemesh_common::prom::Exposition::new();
        e.counter(
            "zonemesh_tls_handshake_failures_total",
            "TLS handshakes that failed.",
            &[],
            self.handshake_failures.get(),
        );
        for (result, c) in [("ok", &self.reloads_ok), ("error", &self.reloads_failed)] {
            e.counter(
                "zonemesh_credential_reloads_total",
                "Reloads of the TLS and token files, by result.",
                &[("result", result)],
                c.get(),
            );
        }
        for (surface, counters) in SURFACES.iter().zip(&self.refusals) {
            for (reason, c) in REASONS.iter().zip(counters) {
                e.counter(
                    "zonemesh_auth_refusals_total",
                    "Callers refused, by surface and reason.",
                    &[("surface", surface), ("reason", reason)],
                    c.get(),
                );
            }
        }
        for (limit, c) in LIMITS.iter().zip(&self.limit_hits) {
            e.counter(
                "zonemesh_limit_hits_total",
                "Times an abuse limit bit (a report slowed or refused, a node or path not admitted).",
                &[("limit", limit)],
                c.get(),
            );
        }
        out.push_str(&e.finish());
    }
}

/// Zone-level figures as the last sweep saw them: labels are zones, never nodes or node pairs.
#[derive(Debug, Default, Clone)]
struct ZoneView {
    /// Zone, and its registered nodes by state (ready, stale, down).
    nodes: Vec<(String, [u64; 3])>,
    /// The measured zone-to-zone roll-ups.
    links: Vec<ZoneLinkRow>,
}

#[derive(Debug, Clone)]
struct ZoneLinkRow {
    src: String,
    dst: String,
    /// RTT p50, p90, p99, seconds (`None` without a measured RTT).
    rtt: Option<[f64; 3]>,
    loss: f64,
    /// Smoothed throughput, bytes per second (`None` when none was measured).
    throughput: Option<f64>,
    measured: u32,
}

/// Every metric of the aggregator.
#[derive(Debug, Default)]
pub struct Metrics {
    zone_view: Mutex<ZoneView>,
    /// TLS, authentication and abuse limits.
    pub security: SecurityMetrics,
    /// Why the store cannot be written, while it cannot (`None`: healthy).
    pub store_failure: Mutex<Option<String>>,
    /// Reports applied.
    pub reports: Counter,
    /// Path summaries applied.
    pub path_summaries: Counter,
    /// Reports received again after being applied (replays).
    pub duplicate_reports: Counter,
    /// Reports refused at the edge.
    pub refused_reports: Counter,
    /// Path records written to the store.
    pub paths_written: Counter,
    /// Failed store writes.
    pub store_errors: Counter,
    /// Store commit latency.
    pub commit_seconds: Histogram,
    /// Bytes the store takes.
    pub store_bytes: Gauge,
    /// Open agent streams.
    pub connected: Gauge,
    /// Throughput grants handed out.
    pub grants: Counter,
    /// Snapshots published for readers.
    pub publishes: Counter,
    /// Decoded reports waiting to be applied (the ingest budget in use).
    pub ingest_in_flight: Gauge,
    /// Times a stream waited for room in the ingest budget.
    pub ingest_budget_waits: Counter,
    /// The engine's count of latency windows left out under load (a counter, read from it).
    windows_under_load: Gauge,
    query_seconds: [Histogram; RPCS.len()],
    query_errors: [Counter; RPCS.len()],
    nodes_by_state: [Gauge; 3],
    zones: Gauge,
    paths: Gauge,
}

impl Metrics {
    /// Why the store cannot be written, if it cannot.
    pub fn store_failure(&self) -> Option<String> {
        self.store_failure.lock().expect("metrics lock").clone()
    }

    /// Records one query.
    pub fn observe_query(&self, rpc: &str, seconds: f64, ok: bool) {
        if let Some(i) = RPCS.iter().position(|r| *r == rpc) {
            self.query_seconds[i].observe(seconds);
            if !ok {
                self.query_errors[i].inc();
            }
        }
    }

    /// Refreshes the gauges that describe the topology (from a published snapshot, off the
    /// owner task).
    pub fn observe_topology(&self, topology: &Snapshot, now: UnixMs) {
        let mut by_zone: std::collections::BTreeMap<String, [u64; 3]> = Default::default();
        for (id, n) in topology.nodes() {
            if !n.registered {
                continue;
            }
            let i = match topology.state(id, now).0 {
                NodeState::Ready => 0,
                NodeState::Stale => 1,
                NodeState::Down => 2,
            };
            by_zone
                .entry(topology.zone(n.zone).name.to_string())
                .or_default()[i] += 1;
        }
        for (i, g) in self.nodes_by_state.iter().enumerate() {
            g.set(by_zone.values().map(|c| c[i]).sum());
        }
        let links = topology
            .zone_links(now)
            .links
            .into_iter()
            .map(|l| {
                let f = l.figures;
                let measured = |p: Provenance| p == Provenance::Measured;
                ZoneLinkRow {
                    rtt: f
                        .rtt
                        .filter(|r| r.samples > 0 && measured(f.latency_provenance))
                        .map(|r| [r.p50_us / 1e6, r.p90_us / 1e6, r.p99_us / 1e6]),
                    loss: f.loss_ratio,
                    throughput: (measured(f.throughput_provenance)
                        && f.throughput_smoothed_bps > 0.0)
                        .then_some(f.throughput_smoothed_bps / 8.0),
                    measured: l.measured_paths,
                    src: l.src_zone.into(),
                    dst: l.dst_zone.into(),
                }
            })
            .collect();
        *self.zone_view.lock().expect("metrics lock") = ZoneView {
            nodes: by_zone.into_iter().collect(),
            links,
        };
        self.zones.set(
            topology
                .zones()
                .filter(|(_, z)| !z.members.is_empty())
                .count() as u64,
        );
        self.paths.set(topology.path_count() as u64);
    }

    /// The engine's count of latency windows left out under load.
    pub fn observe_windows_under_load(&self, windows: u64) {
        self.windows_under_load.set(windows);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        counter(
            &mut out,
            "zonemesh_reports_total",
            "Reports applied.",
            self.reports.get(),
        );
        counter(
            &mut out,
            "zonemesh_path_summaries_total",
            "Path summaries applied.",
            self.path_summaries.get(),
        );
        counter(
            &mut out,
            "zonemesh_snapshots_published_total",
            "Snapshots of the matrix published for queries.",
            self.publishes.get(),
        );
        counter(
            &mut out,
            "zonemesh_ingest_budget_waits_total",
            "Times a stream waited for room in the ingest budget (decoded reports not yet applied).",
            self.ingest_budget_waits.get(),
        );
        let _ = writeln!(
            out,
            "# HELP zonemesh_ingest_reports_in_flight Decoded reports not yet applied.\n# TYPE zonemesh_ingest_reports_in_flight gauge\nzonemesh_ingest_reports_in_flight {}",
            self.ingest_in_flight.get()
        );
        counter(
            &mut out,
            "zonemesh_duplicate_reports_total",
            "Replayed reports acknowledged again and not applied.",
            self.duplicate_reports.get(),
        );
        counter(
            &mut out,
            "zonemesh_refused_reports_total",
            "Reports refused as invalid.",
            self.refused_reports.get(),
        );
        counter(
            &mut out,
            "zonemesh_store_paths_written_total",
            "Path records written to the store.",
            self.paths_written.get(),
        );
        counter(
            &mut out,
            "zonemesh_store_errors_total",
            "Failed store writes.",
            self.store_errors.get(),
        );
        counter(
            &mut out,
            "zonemesh_throughput_grants_total",
            "Throughput test slots granted.",
            self.grants.get(),
        );
        counter(
            &mut out,
            "zonemesh_windows_under_load_total",
            "Latency windows left out of the figures because a throughput test loaded their path.",
            self.windows_under_load.get(),
        );
        let gauge = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        gauge(
            &mut out,
            "zonemesh_store_size_bytes",
            "Bytes the store takes on disk.",
            self.store_bytes.get(),
        );
        gauge(
            &mut out,
            "zonemesh_store_healthy",
            "1 while store writes succeed, 0 while they fail (acknowledgements are held).",
            u64::from(self.store_failure().is_none()),
        );
        gauge(
            &mut out,
            "zonemesh_agents_connected",
            "Open agent streams.",
            self.connected.get(),
        );
        gauge(
            &mut out,
            "zonemesh_zones",
            "Zones with nodes.",
            self.zones.get(),
        );
        gauge(
            &mut out,
            "zonemesh_paths",
            "Directed paths with state.",
            self.paths.get(),
        );
        let _ = writeln!(
            out,
            "# HELP zonemesh_nodes Nodes by state.\n# TYPE zonemesh_nodes gauge"
        );
        for (state, g) in ["ready", "stale", "down"].iter().zip(&self.nodes_by_state) {
            let _ = writeln!(out, "zonemesh_nodes{{state=\"{state}\"}} {}", g.get());
        }
        let _ = writeln!(
            out,
            "# HELP zonemesh_store_commit_seconds Latency of durable store commits.\n# TYPE zonemesh_store_commit_seconds histogram"
        );
        self.commit_seconds
            .render(&mut out, "zonemesh_store_commit_seconds", "");
        let _ = writeln!(
            out,
            "# HELP zonemesh_query_seconds Latency of Topology queries.\n# TYPE zonemesh_query_seconds histogram"
        );
        for (rpc, h) in RPCS.iter().zip(&self.query_seconds) {
            h.render(
                &mut out,
                "zonemesh_query_seconds",
                &format!("rpc=\"{rpc}\""),
            );
        }
        let _ = writeln!(
            out,
            "# HELP zonemesh_query_errors_total Topology queries that failed.\n# TYPE zonemesh_query_errors_total counter"
        );
        for (rpc, c) in RPCS.iter().zip(&self.query_errors) {
            let _ = writeln!(
                out,
                "zonemesh_query_errors_total{{rpc=\"{rpc}\"}} {}",
                c.get()
            );
        }
        self.security.render(&mut out);
        out.push_str(&self.render_zones());
        out
    }

    /// The zone-level families: at most zones² series each.
    fn render_zones(&self) -> String {
        let view = self.zone_view.lock().expect("metrics lock").clone();
        let mut e = zonemesh_common::prom::Exposition::new();
        for (zone, counts) in &view.nodes {
            for (state, c) in ["ready", "stale", "down"].iter().zip(counts) {
                e.gauge(
                    "zonemesh_zone_nodes",
                    "Registered nodes of a zone by state.",
                    &[("zone", zone), ("state", state)],
                    *c as f64,
                );
            }
        }
        let pair = |l: &ZoneLinkRow| [("src_zone", l.src.clone()), ("dst_zone", l.dst.clone())];
        for l in &view.links {
            if let Some(rtt) = l.rtt {
                // `percentile`, not `quantile`: that label belongs to summaries, and these are
                // gauges (Prometheus's linter says so).
                for (q, v) in ["50", "90", "99"].iter().zip(rtt) {
                    let [a, b] = pair(l);
                    e.gauge(
                        "zonemesh_zone_rtt_seconds",
                        "Round-trip time from one zone to another: the mean over the measured paths of each path's percentile over the sliding window.",
                        &[(a.0, &a.1), (b.0, &b.1), ("percentile", q)],
                        v,
                    );
                }
            }
        }
        for l in &view.links {
            let [a, b] = pair(l);
            e.gauge(
                "zonemesh_zone_loss_ratio",
                "Probe loss from one zone to another over the sliding window (0..1), mean over the measured paths.",
                &[(a.0, &a.1), (b.0, &b.1)],
                l.loss,
            );
        }
        for l in &view.links {
            if let Some(t) = l.throughput {
                let [a, b] = pair(l);
                e.gauge(
                    "zonemesh_zone_throughput_bytes_per_second",
                    "TCP throughput from one zone to another (smoothed), mean over the measured paths.",
                    &[(a.0, &a.1), (b.0, &b.1)],
                    t,
                );
            }
        }
        for l in &view.links {
            let [a, b] = pair(l);
            e.gauge(
                "zonemesh_zone_paths_measured",
                "Measured paths the zone-to-zone figures are made of.",
                &[(a.0, &a.1), (b.0, &b.1)],
                f64::from(l.measured),
            );
        }
        e.finish()
    }
}
