//! Prometheus metrics of the aggregator, registered explicitly in a `prometheus-client`
//! [`Registry`] and named `zonemesh_<what>_<unit>`. Label sets are typed (a label value that is
//! not one of its enum's is a compile error) and bounded by RPC names, node states, limits and
//! zones (zone pairs at most), never by nodes or node pairs.
//!
//! Every series that exists at all exists from the start at 0 (each RPC, refusal, limit, reload
//! result and node state), as scrapers and dashboards expect. The zone figures, the store's
//! health and the engine's count of windows under load are read at scrape time by a collector
//! from what the last sweep published, so a scrape never sees a half-written set.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram;
use prometheus_client::registry::Registry;
use zonemesh_common::label_value;
use zonemesh_domain::{NodeState, Provenance, UnixMs};
use zonemesh_engine::Snapshot;
use zonemesh_engine::model::{LossPenalty, TailRepair};

use super::health::StoreHealth;
use crate::cluster::Progress;

pub use zonemesh_common::metrics::{Counter, Gauge};

/// Upper bounds of the latency histograms, seconds.
const BUCKETS: [f64; 12] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// A latency histogram with the [`BUCKETS`] (a handle: clones observe together).
#[derive(Debug, Clone)]
pub struct Histogram(histogram::Histogram);

impl Default for Histogram {
    fn default() -> Self {
        Self(histogram::Histogram::new(BUCKETS))
    }
}

impl Histogram {
    /// Records one observation in seconds.
    pub fn observe(&self, seconds: f64) {
        self.0.observe(seconds);
    }
}

zonemesh_common::wrapped_metric!(Histogram, MetricType::Histogram);

label_value! {
    /// The queries whose latency is measured: the Topology RPCs and the extender's verbs.
    pub enum Rpc {
        ListNodes => "ListNodes",
        ListZones => "ListZones",
        GetPath => "GetPath",
        GetMatrix => "GetMatrix",
        RankNodes => "RankNodes",
        Place => "Place",
        ExtenderFilter => "ExtenderFilter",
        ExtenderPrioritize => "ExtenderPrioritize",
        GetTiers => "GetTiers",
        ListFaults => "ListFaults",
    }
}

label_value! {
    /// Where callers are refused.
    pub enum Surface {
        /// The agents' stream.
        Ingest => "ingest",
        /// The Topology service and the web API.
        Query => "query",
        /// The scheduler extender.
        Extender => "extender",
    }
}

label_value! {
    /// Why a caller was refused.
    pub enum Reason {
        /// No valid credentials.
        Unauthenticated => "unauthenticated",
        /// Credentials that do not allow it.
        Forbidden => "forbidden",
    }
}

label_value! {
    /// The abuse limits that can bite (`--max-*` flags).
    pub enum Limit {
        /// `--max-report-rate`.
        ReportRate => "report_rate",
        /// `--max-report-paths`.
        ReportPaths => "report_paths",
        /// `--max-report-bytes`.
        ReportBytes => "report_bytes",
        /// `--max-nodes`.
        Nodes => "nodes",
        /// `--max-paths`.
        Paths => "paths",
    }
}

impl From<zonemesh_engine::LimitHit> for Limit {
    fn from(hit: zonemesh_engine::LimitHit) -> Self {
        match hit {
            zonemesh_engine::LimitHit::Nodes => Limit::Nodes,
            zonemesh_engine::LimitHit::Paths => Limit::Paths,
        }
    }
}

label_value! {
    /// How a reload of the TLS and token files went.
    enum ReloadResult { Ok => "ok", Error => "error" }
}

label_value! {
    /// A node state, as a label.
    enum State { Ready => "ready", Stale => "stale", Down => "down", Unreachable => "unreachable" }
}

impl From<NodeState> for State {
    fn from(s: NodeState) -> Self {
        match s {
            NodeState::Ready => State::Ready,
            NodeState::Stale => State::Stale,
            NodeState::Down => State::Down,
            NodeState::Unreachable => State::Unreachable,
        }
    }
}

label_value! {
    /// The RTT percentiles of a zone pair. `percentile`, not `quantile`: that label belongs to
    /// summaries, and these are gauges (Prometheus's linter says so).
    enum Percentile { P50 => "50", P90 => "90", P99 => "99" }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RpcLabels {
    rpc: Rpc,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RefusalLabels {
    surface: Surface,
    reason: Reason,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LimitLabels {
    limit: Limit,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReloadLabels {
    result: ReloadResult,
}

label_value! {
    /// Why the extender placed a pod without its job model: the annotation it refused.
    pub enum JobModelReason {
        /// `zonemesh.io/collective`.
        Collective => "collective",
        /// `zonemesh.io/bytes-per-iteration`.
        BytesPerIteration => "bytes_per_iteration",
        /// `zonemesh.io/servers`.
        Servers => "servers",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct JobModelLabels {
    reason: JobModelReason,
}

label_value! {
    /// A fault's kind, as a label.
    enum Kind { Loss => "loss", Delay => "delay", Rate => "rate" }
}

label_value! {
    /// A fault's severity, as a label.
    enum Severity { Degraded => "degraded", Down => "down" }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FaultLabels {
    kind: Kind,
    severity: Severity,
}

impl FaultLabels {
    fn of(f: &zonemesh_domain::Fault) -> Self {
        use zonemesh_domain::{FaultKind, Severity as S};
        Self {
            kind: match f.kind {
                FaultKind::Loss => Kind::Loss,
                FaultKind::Delay => Kind::Delay,
                FaultKind::Rate => Kind::Rate,
            },
            severity: match f.severity {
                S::Degraded => Severity::Degraded,
                S::Down => Severity::Down,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    state: State,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ZoneStateLabels {
    zone: String,
    state: State,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PairLabels {
    src_zone: String,
    dst_zone: String,
}

/// Why a replica did not relay a throughput grant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct SkipLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PairPercentileLabels {
    src_zone: String,
    dst_zone: String,
    percentile: Percentile,
}

/// TLS, authentication and abuse limits.
#[derive(Debug)]
pub struct SecurityMetrics {
    /// TLS handshakes that failed (no certificate the CA signed, plain text on a TLS port, ...).
    pub handshake_failures: Counter,
    /// Reloads of the TLS or token files that took effect.
    pub reloads_ok: Counter,
    /// Reloads that failed (the previous files stay in force).
    pub reloads_failed: Counter,
    refusals: Family<RefusalLabels, Counter>,
    limit_hits: Family<LimitLabels, Counter>,
}

impl SecurityMetrics {
    fn register(registry: &mut Registry) -> Self {
        let handshake_failures = Counter::default();
        registry.register(
            "zonemesh_tls_handshake_failures",
            "TLS handshakes that failed",
            handshake_failures.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "zonemesh_credential_reloads",
            "Reloads of the TLS and token files, by result",
            reloads.clone(),
        );
        let refusals = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "zonemesh_auth_refusals",
            "Callers refused, by surface and reason",
            refusals.clone(),
        );
        for &surface in Surface::ALL {
            for &reason in Reason::ALL {
                drop(refusals.get_or_create(&RefusalLabels { surface, reason }));
            }
        }
        let limit_hits = Family::<LimitLabels, Counter>::default();
        registry.register(
            "zonemesh_limit_hits",
            "Times an abuse limit bit (a report slowed or refused, a node or path not admitted)",
            limit_hits.clone(),
        );
        for &limit in Limit::ALL {
            drop(limit_hits.get_or_create(&LimitLabels { limit }));
        }
        let reload = |result| reloads.get_or_create_owned(&ReloadLabels { result });
        Self {
            handshake_failures,
            reloads_ok: reload(ReloadResult::Ok),
            reloads_failed: reload(ReloadResult::Error),
            refusals,
            limit_hits,
        }
    }

    /// Counts a refused caller.
    pub fn refused(&self, surface: Surface, reason: Reason) {
        self.refusals
            .get_or_create(&RefusalLabels { surface, reason })
            .inc();
    }

    /// Refusals on `surface`, all reasons.
    pub fn refusals(&self, surface: Surface) -> u64 {
        Reason::ALL
            .iter()
            .map(|&reason| {
                self.refusals
                    .get(&RefusalLabels { surface, reason })
                    .map_or(0, |c| c.get())
            })
            .sum()
    }

    /// Counts one time `limit` bit.
    pub fn limit_hit(&self, limit: impl Into<Limit>) {
        let limit = limit.into();
        self.limit_hits.get_or_create(&LimitLabels { limit }).inc();
    }

    /// Times `limit` bit.
    pub fn limit_hits(&self, limit: Limit) -> u64 {
        self.limit_hits
            .get(&LimitLabels { limit })
            .map_or(0, |c| c.get())
    }
}

/// What the last sweep published, read at scrape time: zone-level figures (labels are zones,
/// never nodes or node pairs) and the model's calibrations of the whole cluster.
#[derive(Debug, Default, Clone)]
struct ZoneView {
    /// Zone, and its registered nodes by state (ready, stale, down, unreachable).
    nodes: Vec<(String, [u64; State::ALL.len()])>,
    /// The measured zone-to-zone roll-ups.
    links: Vec<ZoneLinkRow>,
    /// What a lost last segment costs, where the model has fitted it.
    tail_repair: Option<TailRepair>,
    /// How loss holds back a TCP transfer, where the model has calibrated it.
    loss_penalty: Option<LossPenalty>,
}

/// Reads how much memory the allocator holds, if it can tell: `(allocated, resident)` bytes.
pub type HeapStats = fn() -> Option<(u64, u64)>;

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
    /// Nodes whose own fault the figures leave out.
    left_out: usize,
}

/// Every metric of the aggregator.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    zone_view: Arc<Mutex<ZoneView>>,
    /// TLS, authentication and abuse limits.
    pub security: SecurityMetrics,
    /// Whether the store can be written (the owner writes it; `zonemesh_store_healthy` reads it).
    pub store_health: StoreHealth,
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
    /// Summaries of decoded reports not yet durable (the ingest budget in use).
    pub ingest_in_flight: Gauge,
    /// Times a stream waited for room in the ingest budget.
    pub ingest_budget_waits: Counter,
    /// The Kubernetes publisher (`--publish`).
    pub publish: Arc<zonemesh_publish::PublishMetrics>,
    heap_stats: Arc<OnceLock<HeapStats>>,
    /// A replica's progress (only with `--cluster`: its families appear only then).
    cluster: Arc<OnceLock<Arc<Progress>>>,
    /// The engine's count of latency windows left out under load (a counter the engine owns).
    windows_under_load: Arc<AtomicU64>,
    query_seconds: Family<RpcLabels, Histogram>,
    query_errors: Family<RpcLabels, Counter>,
    nodes_by_state: Family<StateLabels, Gauge>,
    faults: Family<FaultLabels, Gauge>,
    fault_suspects: Gauge,
    job_model_refusals: Family<JobModelLabels, Counter>,
    zones: Gauge,
    paths: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        // Help texts without their final full stop: the registry adds it.
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let reports = counter(&mut registry, "zonemesh_reports", "Reports applied");
        let path_summaries = counter(
            &mut registry,
            "zonemesh_path_summaries",
            "Path summaries applied",
        );
        let duplicate_reports = counter(
            &mut registry,
            "zonemesh_duplicate_reports",
            "Replayed reports acknowledged again and not applied",
        );
        let refused_reports = counter(
            &mut registry,
            "zonemesh_refused_reports",
            "Reports refused as invalid",
        );
        let paths_written = counter(
            &mut registry,
            "zonemesh_store_paths_written",
            "Path records written to the store",
        );
        let store_errors = counter(
            &mut registry,
            "zonemesh_store_errors",
            "Failed store writes",
        );
        let grants = counter(
            &mut registry,
            "zonemesh_throughput_grants",
            "Throughput test slots granted",
        );
        let publishes = counter(
            &mut registry,
            "zonemesh_snapshots_published",
            "Snapshots of the matrix published for queries",
        );
        let ingest_budget_waits = counter(
            &mut registry,
            "zonemesh_ingest_budget_waits",
            "Times a stream waited for room in the ingest budget (summaries of decoded reports not yet durable)",
        );
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let store_bytes = gauge(
            &mut registry,
            "zonemesh_store_size_bytes",
            "Bytes the store takes on disk",
        );
        let connected = gauge(
            &mut registry,
            "zonemesh_agents_connected",
            "Open agent streams",
        );
        let ingest_in_flight = gauge(
            &mut registry,
            "zonemesh_ingest_paths_in_flight",
            "Summaries of decoded reports not yet durable (the ingest budget in use)",
        );
        let zones = gauge(&mut registry, "zonemesh_zones", "Zones with nodes");
        let paths = gauge(&mut registry, "zonemesh_paths", "Directed paths with state");
        let nodes_by_state = Family::<StateLabels, Gauge>::default();
        registry.register("zonemesh_nodes", "Nodes by state", nodes_by_state.clone());
        for &state in State::ALL {
            drop(nodes_by_state.get_or_create(&StateLabels { state }));
        }
        let faults = Family::<FaultLabels, Gauge>::default();
        registry.register(
            "zonemesh_faults",
            "Open faults by kind and severity (zonemesh faults lists them)",
            faults.clone(),
        );
        for &kind in Kind::ALL {
            for &severity in Severity::ALL {
                drop(faults.get_or_create(&FaultLabels { kind, severity }));
            }
        }
        let fault_suspects = gauge(
            &mut registry,
            "zonemesh_fault_suspects",
            "Nodes and zone links whose paths are probed densely: those that may be losing (half the loss threshold, no fault open yet), and those whose open loss or delay fault was not found bad at the last look (it may be closing)",
        );
        let commit_seconds = Histogram::default();
        registry.register(
            "zonemesh_store_commit_seconds",
            "Latency of durable store commits",
            commit_seconds.clone(),
        );
        let query_seconds = Family::<RpcLabels, Histogram>::default();
        registry.register(
            "zonemesh_query_seconds",
            "Latency of Topology queries",
            query_seconds.clone(),
        );
        let query_errors = Family::<RpcLabels, Counter>::default();
        registry.register(
            "zonemesh_query_errors",
            "Topology queries that failed",
            query_errors.clone(),
        );
        for &rpc in Rpc::ALL {
            drop(query_seconds.get_or_create(&RpcLabels { rpc }));
            drop(query_errors.get_or_create(&RpcLabels { rpc }));
        }
        let security = SecurityMetrics::register(&mut registry);
        let publish = Arc::new(zonemesh_publish::PublishMetrics::default());
        publish.register(&mut registry);
        let job_model_refusals = Family::<JobModelLabels, Counter>::default();
        registry.register(
            "zonemesh_extender_job_model_refusals",
            "Pods the extender placed without their job model, by the annotation refused",
            job_model_refusals.clone(),
        );
        for &reason in JobModelReason::ALL {
            drop(job_model_refusals.get_or_create(&JobModelLabels { reason }));
        }
        let zone_view = Arc::new(Mutex::new(ZoneView::default()));
        let store_health = StoreHealth::default();
        let heap_stats = Arc::new(OnceLock::new());
        let cluster = Arc::new(OnceLock::new());
        let windows_under_load = Arc::new(AtomicU64::new(0));
        registry.register_collector(Box::new(Published {
            view: zone_view.clone(),
            store_health: store_health.clone(),
            heap_stats: heap_stats.clone(),
            cluster: cluster.clone(),
            windows_under_load: windows_under_load.clone(),
        }));
        Self {
            registry,
            zone_view,
            security,
            store_health,
            reports,
            path_summaries,
            duplicate_reports,
            refused_reports,
            paths_written,
            store_errors,
            commit_seconds,
            store_bytes,
            connected,
            grants,
            publishes,
            ingest_in_flight,
            ingest_budget_waits,
            publish,
            heap_stats,
            cluster,
            windows_under_load,
            query_seconds,
            query_errors,
            nodes_by_state,
            faults,
            fault_suspects,
            job_model_refusals,
            zones,
            paths,
        }
    }
}

impl Metrics {
    /// Counts a pod placed without its job model because of `reason` (the engine's name of the
    /// refused annotation: `collective`, `bytes_per_iteration` or `servers`; another name is a
    /// bug and counts nowhere).
    pub fn job_model_refused(&self, reason: &str) {
        if let Some(reason) = JobModelReason::ALL.iter().find(|r| r.as_str() == reason) {
            self.job_model_refusals
                .get_or_create(&JobModelLabels { reason: *reason })
                .inc();
        }
    }

    /// Pods placed without their job model because of `reason`.
    pub fn job_model_refusals(&self, reason: &str) -> u64 {
        JobModelReason::ALL
            .iter()
            .find(|r| r.as_str() == reason)
            .map_or(0, |reason| {
                self.job_model_refusals
                    .get_or_create(&JobModelLabels { reason: *reason })
                    .get()
            })
    }

    /// Records one query.
    pub fn observe_query(&self, rpc: Rpc, seconds: f64, ok: bool) {
        let labels = RpcLabels { rpc };
        self.query_seconds.get_or_create(&labels).observe(seconds);
        if !ok {
            self.query_errors.get_or_create(&labels).inc();
        }
    }

    /// The open faults, counted by kind and severity.
    pub fn set_faults(&self, open: &zonemesh_domain::Faults) {
        for &kind in Kind::ALL {
            for &severity in Severity::ALL {
                let labels = FaultLabels { kind, severity };
                let n = open
                    .faults
                    .iter()
                    .filter(|f| FaultLabels::of(f) == labels)
                    .count();
                self.faults.get_or_create(&labels).set(n as u64);
            }
        }
    }

    /// The nodes and zone links suspected of a loss (probed densely), counted.
    pub fn set_fault_suspects(&self, suspects: usize) {
        self.fault_suspects.set(suspects as u64);
    }

    /// A replica: its progress in the log is exported (`zonemesh_cluster_*`).
    pub fn set_cluster(&self, progress: Arc<Progress>) {
        let _ = self.cluster.set(progress);
    }

    /// Where the allocator's figures come from (the binary's allocator knows them).
    pub fn set_heap_stats(&self, stats: Option<HeapStats>) {
        if let Some(stats) = stats {
            let _ = self.heap_stats.set(stats);
        }
    }

    /// The engine's count of latency windows left out under load.
    pub fn observe_windows_under_load(&self, windows: u64) {
        self.windows_under_load.store(windows, Ordering::Relaxed);
    }

    /// Refreshes the gauges that describe the topology (from a published snapshot, off the
    /// owner task).
    pub fn observe_topology(&self, topology: &Snapshot, now: UnixMs) {
        let mut by_zone: std::collections::BTreeMap<String, [u64; State::ALL.len()]> =
            Default::default();
        for (id, n) in topology.nodes() {
            if n.registered {
                let state = State::from(topology.state(id, now).0);
                let zone = topology.zone(n.zone).name.to_string();
                by_zone.entry(zone).or_default()[state as usize] += 1;
            }
        }
        let links = topology.zone_links(now).links.into_iter();
        let view = ZoneView {
            nodes: by_zone.into_iter().collect(),
            links: links.map(ZoneLinkRow::from).collect(),
            tail_repair: topology.model().tail_repair(),
            loss_penalty: topology.model().loss_penalty(),
        };
        let with_members = topology.zones().filter(|(_, z)| !z.members.is_empty());
        self.zones.set(with_members.count() as u64);
        self.paths.set(topology.path_count() as u64);
        self.publish(view);
    }

    /// Makes `view` what scrapes read, and the node gauges its sums.
    fn publish(&self, view: ZoneView) {
        for &state in State::ALL {
            let n = view.nodes.iter().map(|(_, c)| c[state as usize]).sum();
            self.nodes_by_state
                .get_or_create(&StateLabels { state })
                .set(n);
        }
        *self.zone_view.lock().expect("metrics lock") = view;
    }

    /// The registry to expose (`zonemesh_common::metrics::exposition`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

impl From<zonemesh_domain::ZoneLink> for ZoneLinkRow {
    fn from(l: zonemesh_domain::ZoneLink) -> Self {
        let f = l.figures;
        let measured = |p: Provenance| p == Provenance::Measured;
        ZoneLinkRow {
            rtt: f
                .rtt
                .filter(|r| r.samples > 0 && measured(f.latency_provenance))
                .map(|r| [r.p50_us / 1e6, r.p90_us / 1e6, r.p99_us / 1e6]),
            loss: f.loss_ratio,
            throughput: (measured(f.throughput_provenance) && f.throughput_smoothed_bps > 0.0)
                .then_some(f.throughput_smoothed_bps / 8.0),
            measured: l.measured_paths,
            left_out: l.nodes_left_out.len(),
            src: l.src_zone.into(),
            dst: l.dst_zone.into(),
        }
    }
}

/// The collector of what is read at scrape time: [`ZoneView`], the store's health, the engine's
/// windows under load and the allocator's figures.
#[derive(Debug)]
struct Published {
    view: Arc<Mutex<ZoneView>>,
    store_health: StoreHealth,
    heap_stats: Arc<OnceLock<HeapStats>>,
    cluster: Arc<OnceLock<Arc<Progress>>>,
    windows_under_load: Arc<AtomicU64>,
}

impl Collector for Published {
    // Help texts here are written as given: they keep their full stop.
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let view = self.view.lock().expect("metrics lock").clone();
        let healthy = self.store_health.problem().is_none();
        let metric = encoder.encode_descriptor(
            "zonemesh_windows_under_load",
            "Latency windows left out of the figures because a throughput test loaded their path.",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(self.windows_under_load.load(Ordering::Relaxed)).encode(metric)?;
        let metric = encoder.encode_descriptor(
            "zonemesh_store_healthy",
            "1 while store writes succeed, 0 while they fail (acknowledgements are held).",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::from(healthy)).encode(metric)?;
        // Only where the allocator can tell (jemalloc in the binary; not in tests).
        if let Some((allocated, resident)) = self.heap_stats.get().and_then(|stats| stats()) {
            for (name, help, bytes) in [
                (
                    "zonemesh_heap_allocated_bytes",
                    "Bytes the program has allocated and not freed.",
                    allocated,
                ),
                (
                    "zonemesh_heap_resident_bytes",
                    "Bytes the allocator holds in memory (allocated, cached and fragmented).",
                    resident,
                ),
            ] {
                let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(i64::try_from(bytes).unwrap_or(i64::MAX)).encode(metric)?;
            }
        }
        if !view.nodes.is_empty() {
            let mut family = encoder.encode_descriptor(
                "zonemesh_zone_nodes",
                "Registered nodes of a zone by state.",
                None,
                MetricType::Gauge,
            )?;
            for (zone, counts) in &view.nodes {
                for &state in State::ALL {
                    let zone = zone.clone();
                    let labels = ZoneStateLabels { zone, state };
                    let n = ConstGauge::new(counts[state as usize] as i64);
                    n.encode(family.encode_family(&labels)?)?;
                }
            }
        }
        if let Some(progress) = self.cluster.get() {
            encode_cluster(&mut encoder, progress)?;
        }
        encode_model(&mut encoder, &view)?;
        encode_links(&mut encoder, &view.links)
    }
}

/// The model's calibrations of the whole cluster (each family only once the model has fitted
/// it: until then the predictions go without the term).
fn encode_model(encoder: &mut DescriptorEncoder, view: &ZoneView) -> Result<(), fmt::Error> {
    let count = |n: usize| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
    if let Some(t) = view.tail_repair {
        let metric = encoder.encode_descriptor(
            "zonemesh_model_tail_repair_seconds",
            "What a lost last segment of a message costs (a tail-loss probe or a retransmission timeout), fitted over the timed exchanges of the throughput tests of every lossy path, or, while they expect fewer than 8 lost exchanges, the median over the tested nodes of the retransmission timeout their agents read; Place charges it on every lossy link. Absent until either says.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(t.us / 1e6).encode(metric)?;
        for (name, help, n) in [
            (
                "zonemesh_model_tail_repair_tests",
                "Throughput tests with timed exchanges behind the tail repair; when it is the timeouts', the tested nodes whose timeouts it is the median of.",
                t.tests,
            ),
            (
                "zonemesh_model_tail_repair_lossy_tests",
                "Throughput tests with timed exchanges on paths losing at least 0.5 % of their probes.",
                t.lossy_tests,
            ),
            (
                "zonemesh_model_tail_repair_from_timeouts",
                "1 when the tail repair is the tests' connections' median retransmission timeout (the lossy paths' exchanges expected too few losses to price it), 0 when it is fitted over their exchanges.",
                usize::from(t.from_timeouts),
            ),
        ] {
            count(n).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
        }
    }
    if let Some(p) = view.loss_penalty {
        let metric = encoder.encode_descriptor(
            "zonemesh_model_loss_penalty_factor",
            "Measured TCP throughput over Mathis's limit on lossy paths (the median), the factor that prices loss in the rates of unmeasured paths. Absent until two lossy paths were tested where loss could have held them back (Mathis's limit below their nodes' caps).",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(p.factor).encode(metric)?;
        let metric = encoder.encode_descriptor(
            "zonemesh_model_loss_penalty_paths",
            "Lossy paths the loss penalty factor was calibrated on.",
            None,
            MetricType::Gauge,
        )?;
        count(p.paths).encode(metric)?;
    }
    Ok(())
}

/// A replica's families (only with `--cluster`).
fn encode_cluster(encoder: &mut DescriptorEncoder, p: &Progress) -> Result<(), fmt::Error> {
    let gauge = |v: u64| ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
    for (name, help, value) in [
        (
            "zonemesh_cluster_applied_sequence",
            "The last entry of the replicated log this replica applied.",
            p.applied(),
        ),
        (
            "zonemesh_cluster_lag_entries",
            "Entries of the replicated log this replica has not applied yet.",
            p.lag(),
        ),
        (
            "zonemesh_cluster_ready",
            "1 while this replica answers queries (caught up, within --max-lag), else 0.",
            u64::from(p.why_unready().is_none()),
        ),
        (
            "zonemesh_leader",
            "1 while this replica holds the lease (grants throughput tests, publishes), else 0.",
            u64::from(p.leading().is_some()),
        ),
        (
            "zonemesh_lease_epoch",
            "The lease's revision when this replica last took it (0: never): decisions carry it.",
            p.lease_epoch(),
        ),
    ] {
        gauge(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
    }
    if let Some(at) = p.checkpoint_at() {
        let age = (zonemesh_common::time::unix_ms() - at).max(0) as f64 / 1000.0;
        let metric = encoder.encode_descriptor(
            "zonemesh_cluster_checkpoint_age_seconds",
            "Seconds since this replica last wrote its checkpoint to its store.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(age).encode(metric)?;
    }
    for (name, help, value) in [
        (
            "zonemesh_cluster_unreadable_entries",
            "Entries of the replicated log that did not decode, skipped.",
            p.unreadable_count(),
        ),
        (
            "zonemesh_extender_leaderless",
            "Extender calls a replica that does not lead answered itself: no leader was known (answered as without figures), or the leader did not answer (answered from this replica's memory).",
            p.leaderless_count(),
        ),
    ] {
        let metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        ConstCounter::new(value).encode(metric)?;
    }
    let (late, stale) = p.skipped_counts();
    let mut family = encoder.encode_descriptor(
        "zonemesh_grants_skipped",
        "Throughput grants of the leader this replica did not relay to its agent: late (its start had passed by more than the slack) or stale_epoch (decided by an older leader).",
        None,
        MetricType::Counter,
    )?;
    for (reason, value) in [("late", late), ("stale_epoch", stale)] {
        ConstCounter::new(value).encode(family.encode_family(&SkipLabels { reason })?)?;
    }
    Ok(())
}

/// The zone-to-zone families: at most zones² series each, and none without a link to show.
fn encode_links(encoder: &mut DescriptorEncoder, links: &[ZoneLinkRow]) -> Result<(), fmt::Error> {
    let pair = |l: &ZoneLinkRow| (l.src.clone(), l.dst.clone());
    if links.iter().any(|l| l.rtt.is_some()) {
        let mut family = encoder.encode_descriptor(
            "zonemesh_zone_rtt_seconds",
            "Round-trip time from one zone to another between two typical nodes (the zone pair's own term, fitted from the measured paths' percentiles over the sliding window apart from single nodes' own faults).",
            None,
            MetricType::Gauge,
        )?;
        for l in links {
            let Some(rtt) = l.rtt else { continue };
            let (src_zone, dst_zone) = pair(l);
            for (&percentile, v) in Percentile::ALL.iter().zip(rtt) {
                let labels = PairPercentileLabels {
                    src_zone: src_zone.clone(),
                    dst_zone: dst_zone.clone(),
                    percentile,
                };
                ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    let figure = |encoder: &mut DescriptorEncoder,
                  name: &str,
                  help: &str,
                  value: &dyn Fn(&ZoneLinkRow) -> Option<f64>|
     -> Result<(), fmt::Error> {
        if !links.iter().any(|l| value(l).is_some()) {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for l in links {
            if let Some(v) = value(l) {
                let (src_zone, dst_zone) = pair(l);
                let labels = PairLabels { src_zone, dst_zone };
                ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    };
    figure(
        encoder,
        "zonemesh_zone_loss_ratio",
        "Probe loss from one zone to another over the sliding window (0..1): the zone pair's own loss, apart from single nodes' own loss.",
        &|l| Some(l.loss),
    )?;
    figure(
        encoder,
        "zonemesh_zone_throughput_bytes_per_second",
        "TCP throughput from one zone to another: the capacity between the zones where a test shows one, else the median test between nodes without a fault of their own.",
        &|l| l.throughput,
    )?;
    if !links.is_empty() {
        let mut family = encoder.encode_descriptor(
            "zonemesh_zone_paths_measured",
            "Measured paths the zone-to-zone figures are made of.",
            None,
            MetricType::Gauge,
        )?;
        for l in links {
            let (src_zone, dst_zone) = pair(l);
            let labels = PairLabels { src_zone, dst_zone };
            ConstGauge::new(i64::from(l.measured)).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "zonemesh_zone_nodes_left_out",
            "Nodes of the two zones whose own fault (loss, added RTT, a slow link) the zone-to-zone figures leave out.",
            None,
            MetricType::Gauge,
        )?;
        for l in links {
            let (src_zone, dst_zone) = pair(l);
            let labels = PairLabels { src_zone, dst_zone };
            ConstGauge::new(l.left_out as i64).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zonemesh_engine::testing::{force_down, mesh, name};

    /// Metrics after a little of everything: counters, histograms, refusals, limits, a failing
    /// store, and the zone figures of a two-zone mesh with one node down.
    fn exercised() -> Metrics {
        let m = Metrics::default();
        m.reports.inc();
        m.reports.inc();
        m.path_summaries.add(7);
        m.duplicate_reports.inc();
        m.refused_reports.inc();
        m.paths_written.add(12);
        m.store_errors.inc();
        m.grants.inc();
        m.commit_seconds.observe(0.000_3);
        m.commit_seconds.observe(0.2);
        m.store_bytes.set(123_456);
        m.connected.set(3);
        m.observe_query(Rpc::GetPath, 0.001_2, true);
        m.observe_query(Rpc::Place, 0.5, false);
        m.observe_query(Rpc::ExtenderFilter, 2.0, true);
        m.security.handshake_failures.inc();
        m.security.reloads_ok.inc();
        m.security.reloads_failed.inc();
        m.security.reloads_failed.inc();
        m.security.refused(Surface::Query, Reason::Forbidden);
        m.security.refused(Surface::Ingest, Reason::Unauthenticated);
        m.security.limit_hit(Limit::ReportRate);
        m.security.limit_hit(zonemesh_engine::LimitHit::Paths);
        m.store_health.fail("disk full");
        let now = UnixMs(100_000);
        let rtt = |a: &str, b: &str| if a[..2] == b[..2] { 100.0 } else { 2_000.0 };
        let loss = |a: &str, b: &str| u64::from(a == "z0-n1" && b.starts_with("z1"));
        let mut t = mesh(2, 2, rtt, loss, now);
        let down = t.id(&name("z1-n1")).unwrap();
        force_down(&mut t, down);
        m.observe_topology(t.view(), now);
        m
    }

    /// A node every probe misses counts as UNREACHABLE, in the node gauge and in its zone's
    /// (the fourth state once overran the zone counts' array).
    #[test]
    fn an_unreachable_node_is_counted_in_its_own_state() {
        let m = Metrics::default();
        let now = UnixMs(100_000);
        let lost = |_: &str, b: &str| if b == "z0-n1" { 100 } else { 0 };
        let mut t = mesh(2, 2, |_, _| 100.0, lost, now);
        t.sweep(now);
        m.observe_topology(t.view(), now);
        let text = zonemesh_common::metrics::render(m.registry());
        for series in [
            "zonemesh_nodes{state=\"unreachable\"} 1",
            "zonemesh_nodes{state=\"ready\"} 3",
            "zonemesh_zone_nodes{zone=\"zone-0\",state=\"unreachable\"} 1",
            "zonemesh_zone_nodes{zone=\"zone-1\",state=\"unreachable\"} 0",
        ] {
            assert!(text.contains(series), "{series} in\n{text}");
        }
    }

    /// The value of an unlabelled series in an exposition.
    fn series_value(text: &str, series: &str) -> f64 {
        let line = text
            .lines()
            .find(|l| l.split(' ').next() == Some(series))
            .unwrap_or_else(|| panic!("{series} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    /// The model's calibrations show once it has fitted them, and no family before: the tail
    /// repair of the engine's fixture whose lossy node's tests timed exchanges (180 ms over 10
    /// lossy tests of 30), and the loss penalty of the one whose lossy node is slow across zones.
    #[test]
    fn the_models_calibrations_show_once_fitted() {
        use zonemesh_engine::testing::{lossy_across_zones_mesh, timed_lossy_mesh};
        let now = UnixMs(1_000_000);
        let m = Metrics::default();
        m.observe_topology(mesh(2, 3, |_, _| 100.0, |_, _| 0, now).view(), now);
        let text = zonemesh_common::metrics::render(m.registry());
        assert!(!text.contains("zonemesh_model_"), "{text}");

        m.observe_topology(timed_lossy_mesh(now).view(), now);
        let text = zonemesh_common::metrics::render(m.registry());
        let value = |series: &str| series_value(&text, series);
        assert!((value("zonemesh_model_tail_repair_seconds") - 0.18).abs() < 1e-6);
        assert_eq!(value("zonemesh_model_tail_repair_tests"), 30.0);
        assert_eq!(value("zonemesh_model_tail_repair_lossy_tests"), 10.0);
        assert_eq!(value("zonemesh_model_tail_repair_from_timeouts"), 0.0);

        // z0-n1 loses 2 % and gets 100 Mbit/s across zones 10 ms apart, about ten times
        // Mathis's limit, on six paths.
        m.observe_topology(lossy_across_zones_mesh(now).view(), now);
        let text = zonemesh_common::metrics::render(m.registry());
        let value = |series: &str| series_value(&text, series);
        let mathis = zonemesh_engine::model::mathis_bps(10_000.0, 0.02).unwrap();
        assert!((value("zonemesh_model_loss_penalty_factor") - 100e6 / mathis).abs() < 1e-6);
        assert_eq!(value("zonemesh_model_loss_penalty_paths"), 6.0);
        assert!(
            !text.contains("zonemesh_model_tail_repair"),
            "no exchanges were timed"
        );
    }

    /// Every family, type, help text, series and value is what the hand-written exposition
    /// printed (`tests/golden/metrics.prom`, captured before prometheus-client). Only the order
    /// of series inside a family may differ, and the figures that are floating point (a
    /// histogram's `_sum`, RTT, loss, throughput) may print `0.0` for `0`; counts stay integers.
    #[test]
    fn the_exposition_is_what_it_was() {
        let text = zonemesh_common::metrics::render(exercised().registry());
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/metrics.prom");
        let golden = std::fs::read_to_string(path).unwrap();
        zonemesh_common::metrics::assert_same_exposition(&text, &golden, |series| {
            ["_sum", "_rtt_seconds", "_loss_ratio", "_bytes_per_second"]
                .iter()
                .any(|f| series.contains(f))
        });
    }
}
