//! `zonemesh-aggregator`: the cluster's one aggregator.
//!
//! Configuration comes from flags or the environment variables named in [`env`] (the same names
//! as in `deploy/`), and is validated before any socket opens: bad configuration exits with
//! status 64 and a message that names the flag.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use zonemesh_aggregator::server::{self, Config};
use zonemesh_common::flags::{
    LogFormat, init_logging, parse_bps, parse_duration, parse_or_exit, parse_share,
};
use zonemesh_engine::planner::MAX_TRAIN_SIZE;
use zonemesh_engine::{EngineConfig, PathConfig, PlanConfig, ThroughputConfig};

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's figures: (allocated, resident) bytes.
#[cfg(not(target_env = "msvc"))]
fn heap_stats() -> Option<(u64, u64)> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    Some((
        stats::allocated::read().ok()? as u64,
        stats::resident::read().ok()? as u64,
    ))
}

/// Environment variables, one constant per name.
mod env {
    pub const LISTEN: &str = "ZONEMESH_LISTEN";
    pub const HTTP_LISTEN: &str = "ZONEMESH_HTTP_LISTEN";
    pub const DATA_DIR: &str = "ZONEMESH_DATA_DIR";
    pub const IN_MEMORY: &str = "ZONEMESH_IN_MEMORY";
    pub const STORE_CACHE_MIB: &str = "ZONEMESH_STORE_CACHE_MIB";
    pub const STORE_HANG_TIMEOUT: &str = "ZONEMESH_STORE_HANG_TIMEOUT";
    pub const WINDOW: &str = "ZONEMESH_WINDOW";
    pub const PROBE_INTERVAL: &str = "ZONEMESH_PROBE_INTERVAL";
    pub const TRAIN_SIZE: &str = "ZONEMESH_TRAIN_SIZE";
    pub const TRAIN_GAP: &str = "ZONEMESH_TRAIN_GAP";
    pub const PROBE_TIMEOUT: &str = "ZONEMESH_PROBE_TIMEOUT";
    pub const INTER_ZONE_PAIRS: &str = "ZONEMESH_INTER_ZONE_PAIRS";
    pub const ROTATE: &str = "ZONEMESH_ROTATE";
    pub const SUSPECT_PROBE_FACTOR: &str = "ZONEMESH_SUSPECT_PROBE_FACTOR";
    pub const MAX_SUSPECTS: &str = "ZONEMESH_MAX_SUSPECTS";
    pub const STALE_AFTER: &str = "ZONEMESH_STALE_AFTER";
    pub const DOWN_AFTER: &str = "ZONEMESH_DOWN_AFTER";
    pub const LOSS_WINDOW: &str = "ZONEMESH_LOSS_WINDOW";
    pub const THROUGHPUT_INTERVAL: &str = "ZONEMESH_THROUGHPUT_INTERVAL";
    pub const THROUGHPUT_DURATION: &str = "ZONEMESH_THROUGHPUT_DURATION";
    pub const THROUGHPUT_WARMUP: &str = "ZONEMESH_THROUGHPUT_WARMUP";
    pub const THROUGHPUT_STREAMS: &str = "ZONEMESH_THROUGHPUT_STREAMS";
    pub const THROUGHPUT_SHARE: &str = "ZONEMESH_THROUGHPUT_SHARE";
    pub const THROUGHPUT_MAX_CONCURRENT: &str = "ZONEMESH_THROUGHPUT_MAX_CONCURRENT";
    pub const LOG_FORMAT: &str = "ZONEMESH_LOG_FORMAT";
    pub const LOG: &str = "ZONEMESH_LOG";
    /// `--extender-job-ttl`.
    pub const EXTENDER_JOB_TTL: &str = "ZONEMESH_EXTENDER_JOB_TTL";
    pub const TLS_CERT: &str = "ZONEMESH_TLS_CERT";
    pub const TLS_KEY: &str = "ZONEMESH_TLS_KEY";
    pub const TLS_CLIENT_CA: &str = "ZONEMESH_TLS_CLIENT_CA";
    pub const TRUST_DOMAIN: &str = "ZONEMESH_TRUST_DOMAIN";
    pub const ALLOW_PLAINTEXT: &str = "ZONEMESH_ALLOW_PLAINTEXT";
    pub const TOKENS_FILE: &str = "ZONEMESH_TOKENS_FILE";
    pub const CREDENTIAL_RELOAD: &str = "ZONEMESH_CREDENTIAL_RELOAD";
    pub const MAX_NODES: &str = "ZONEMESH_MAX_NODES";
    pub const MAX_PATHS: &str = "ZONEMESH_MAX_PATHS";
    pub const MAX_REPORT_PATHS: &str = "ZONEMESH_MAX_REPORT_PATHS";
    pub const MAX_REPORT_BYTES: &str = "ZONEMESH_MAX_REPORT_BYTES";
    pub const MAX_REPORT_RATE: &str = "ZONEMESH_MAX_REPORT_RATE";
    pub const REPORT_BURST: &str = "ZONEMESH_REPORT_BURST";
    pub const TIER_INTERVAL: &str = "ZONEMESH_TIER_INTERVAL";
    pub const TIER_JOIN_RTT: &str = "ZONEMESH_TIER_JOIN_RTT";
    pub const TIER_LEAVE_RTT: &str = "ZONEMESH_TIER_LEAVE_RTT";
    pub const TIER_JOIN_THROUGHPUT: &str = "ZONEMESH_TIER_JOIN_THROUGHPUT";
    pub const TIER_LEAVE_THROUGHPUT: &str = "ZONEMESH_TIER_LEAVE_THROUGHPUT";
    pub const FAULT_INTERVAL: &str = "ZONEMESH_FAULT_INTERVAL";
    pub const FAULT_LOSS: &str = "ZONEMESH_FAULT_LOSS";
    pub const FAULT_LOSS_DOWN: &str = "ZONEMESH_FAULT_LOSS_DOWN";
    pub const FAULT_DELAY: &str = "ZONEMESH_FAULT_DELAY";
    pub const FAULT_DELAY_RATIO: &str = "ZONEMESH_FAULT_DELAY_RATIO";
    pub const FAULT_DELAY_DOWN: &str = "ZONEMESH_FAULT_DELAY_DOWN";
    pub const FAULT_RATE_SHARE: &str = "ZONEMESH_FAULT_RATE_SHARE";
    pub const FAULT_RATE_DOWN_SHARE: &str = "ZONEMESH_FAULT_RATE_DOWN_SHARE";
    pub const FAULT_OPEN_AFTER: &str = "ZONEMESH_FAULT_OPEN_AFTER";
    pub const FAULT_HOLD: &str = "ZONEMESH_FAULT_HOLD";
    pub const FAULT_BASELINE: &str = "ZONEMESH_FAULT_BASELINE";
    pub const PUBLISH: &str = "ZONEMESH_PUBLISH";
    pub const PUBLISH_INTERVAL: &str = "ZONEMESH_PUBLISH_INTERVAL";
    pub const PUBLISH_NAME: &str = "ZONEMESH_PUBLISH_NAME";
    pub const PUBLISH_NAMESPACE: &str = "ZONEMESH_PUBLISH_NAMESPACE";
    pub const PUBLISH_WEIGHTS_NAME: &str = "ZONEMESH_PUBLISH_WEIGHTS_NAME";
    pub const PUBLISH_KUEUE_VERSION: &str = "ZONEMESH_PUBLISH_KUEUE_VERSION";
    pub const PUBLISH_TIER_NAMES: &str = "ZONEMESH_PUBLISH_TIER_NAMES";
    pub const PUBLISH_DIKTYO_CONFIGMAP: &str = "ZONEMESH_PUBLISH_DIKTYO_CONFIGMAP";
    pub const TAINT_FAULTY_NODES: &str = "ZONEMESH_TAINT_FAULTY_NODES";
    pub const TAINT_EFFECT: &str = "ZONEMESH_TAINT_EFFECT";
    pub const MAX_TAINTED_NODES: &str = "ZONEMESH_MAX_TAINTED_NODES";
    pub const TAINT_WARM_UP: &str = "ZONEMESH_TAINT_WARM_UP";
    pub const CLUSTER: &str = "ZONEMESH_CLUSTER";
    pub const CLUSTER_TLS_CA: &str = "ZONEMESH_CLUSTER_TLS_CA";
    pub const CLUSTER_CREDS: &str = "ZONEMESH_CLUSTER_CREDS";
    pub const CLUSTER_REPLICAS: &str = "ZONEMESH_CLUSTER_REPLICAS";
    pub const CLUSTER_RETENTION: &str = "ZONEMESH_CLUSTER_RETENTION";
    pub const CLUSTER_MAX_MIB: &str = "ZONEMESH_CLUSTER_MAX_MIB";
    pub const REPLICA_NAME: &str = "ZONEMESH_REPLICA_NAME";
    pub const LEASE_TTL: &str = "ZONEMESH_LEASE_TTL";
    pub const ADVERTISE_URL: &str = "ZONEMESH_ADVERTISE_URL";
    pub const PEER_CA: &str = "ZONEMESH_PEER_CA";
    pub const PEER_CERT: &str = "ZONEMESH_PEER_CERT";
    pub const PEER_KEY: &str = "ZONEMESH_PEER_KEY";
    pub const MAX_LAG: &str = "ZONEMESH_MAX_LAG";
    pub const SNAPSHOT_INTERVAL: &str = "ZONEMESH_SNAPSHOT_INTERVAL";
}

/// The zonemesh aggregator: ingests agents' measurements, keeps the zone-aware topology matrix in
/// sled, and serves rankings and placements over gRPC (Ingest, Topology, health, reflection) and
/// HTTP (/metrics, /healthz).
#[derive(Debug, Parser)]
#[command(name = "zonemesh-aggregator", version)]
struct Cli {
    /// gRPC address (Ingest, Topology, health, reflection).
    #[arg(long, env = env::LISTEN, default_value = "0.0.0.0:7400")]
    listen: SocketAddr,
    /// HTTP address (/metrics, /healthz).
    #[arg(long, env = env::HTTP_LISTEN, default_value = "0.0.0.0:7401")]
    http_listen: SocketAddr,
    /// sled data directory (created if missing). Required unless --in-memory.
    #[arg(long, env = env::DATA_DIR, required_unless_present = "in_memory")]
    data_dir: Option<PathBuf>,
    /// Keep everything in memory: nothing survives a restart (demos and tests only).
    #[arg(long, env = env::IN_MEMORY, conflicts_with = "data_dir")]
    in_memory: bool,
    /// sled's page cache, MiB (8–65536). Figures live in memory; the cache only serves writes.
    #[arg(long, env = env::STORE_CACHE_MIB, default_value_t = 64)]
    store_cache_mib: u64,
    /// A store write that has not returned after this long stops the aggregator (exit code 1),
    /// so that its supervisor starts it again: sled has been seen to hang in a write on a full
    /// disk, and cannot be opened again in the same process. Everything acknowledged is on disk;
    /// agents send the rest again. (/healthz says "degraded" after 10 s already.)
    #[arg(long, env = env::STORE_HANG_TIMEOUT, default_value = "60s", value_parser = parse_duration)]
    store_hang_timeout: Duration,
    /// Length of an agent's report window.
    #[arg(long, env = env::WINDOW, default_value = "10s", value_parser = parse_duration)]
    window: Duration,
    /// Time between the starts of two probe trains to one peer.
    #[arg(long, env = env::PROBE_INTERVAL, default_value = "5s", value_parser = parse_duration)]
    probe_interval: Duration,
    /// Probes per train (1..=100).
    #[arg(long, env = env::TRAIN_SIZE, default_value_t = 5)]
    train_size: u32,
    /// Gap between the probes of a train.
    #[arg(long, env = env::TRAIN_GAP, default_value = "10ms", value_parser = parse_duration)]
    train_gap: Duration,
    /// A probe without a reply after this long is lost.
    #[arg(long, env = env::PROBE_TIMEOUT, default_value = "1s", value_parser = parse_duration)]
    probe_timeout: Duration,
    /// Representative pairs probed between two zones.
    #[arg(long, env = env::INTER_ZONE_PAIRS, default_value_t = 2)]
    inter_zone_pairs: usize,
    /// How often the representative pairs between zones rotate.
    #[arg(long, env = env::ROTATE, default_value = "10m", value_parser = parse_duration)]
    rotate: Duration,
    /// A node or zone link whose probes lose at least half --fault-loss, but not yet clearly
    /// above it, is probed with this many times the probes a train (as many as still fit
    /// --probe-interval, at most 100), until its fault opens or the suspicion goes; 1 turns this
    /// off.
    #[arg(long, env = env::SUSPECT_PROBE_FACTOR, default_value_t = 4)]
    suspect_probe_factor: u32,
    /// At most this many suspects (nodes and zone links) are probed densely at once, the
    /// likeliest first.
    #[arg(long, env = env::MAX_SUSPECTS, default_value_t = 8)]
    max_suspects: usize,
    /// Sliding window over which loss and RTT are merged.
    #[arg(long, env = env::LOSS_WINDOW, default_value = "60s", value_parser = parse_duration)]
    loss_window: Duration,
    /// A path without samples for this long is stale.
    #[arg(long, env = env::STALE_AFTER, default_value = "30s", value_parser = parse_duration)]
    stale_after: Duration,
    /// A node whose agent has been gone this long is DOWN.
    #[arg(long, env = env::DOWN_AFTER, default_value = "30s", value_parser = parse_duration)]
    down_after: Duration,
    /// A pair's throughput is measured again after this long.
    #[arg(long, env = env::THROUGHPUT_INTERVAL, default_value = "1h", value_parser = parse_duration)]
    throughput_interval: Duration,
    /// Counted length of a throughput test.
    #[arg(long, env = env::THROUGHPUT_DURATION, default_value = "3s", value_parser = parse_duration)]
    throughput_duration: Duration,
    /// Uncounted warm-up before a throughput test (as iperf3 -O).
    #[arg(long, env = env::THROUGHPUT_WARMUP, default_value = "1s", value_parser = parse_duration)]
    throughput_warmup: Duration,
    /// Parallel TCP streams of a throughput test (1..=16).
    #[arg(long, env = env::THROUGHPUT_STREAMS, default_value_t = 1)]
    throughput_streams: u32,
    /// Most of its time a node spends in throughput tests (0 < share <= 1).
    #[arg(long, env = env::THROUGHPUT_SHARE, default_value_t = 0.05)]
    throughput_share: f64,
    /// Most throughput tests at once in the cluster; 0 turns them off.
    #[arg(long, env = env::THROUGHPUT_MAX_CONCURRENT, default_value_t = 2)]
    throughput_max_concurrent: usize,
    /// How long the kube-scheduler extender keeps a job's zones after it last saw a pod of it.
    #[arg(long, env = env::EXTENDER_JOB_TTL, default_value = "10m", value_parser = parse_duration)]
    extender_job_ttl: Duration,
    /// Server certificate chain (PEM). With it both ports speak TLS only.
    #[arg(long, env = env::TLS_CERT, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Server private key (PEM).
    #[arg(long, env = env::TLS_KEY, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// CA of the client certificates (PEM): agents must then present a certificate naming their
    /// node (URI SAN spiffe://<domain>/node/<name>), and queries a scheduler or reader
    /// certificate or a bearer token.
    #[arg(long, env = env::TLS_CLIENT_CA, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Trust domain of the client identities: a client certificate whose identities are all
    /// spiffe://<another domain>/... is refused at the handshake, even if --tls-client-ca signed it.
    #[arg(long, env = env::TRUST_DOMAIN, default_value = zonemesh_tls::DEFAULT_TRUST_DOMAIN)]
    trust_domain: String,
    /// With --tls-cert, accept plain-text connections too (for a migration; off by default).
    #[arg(long, env = env::ALLOW_PLAINTEXT, requires = "tls_cert")]
    allow_plaintext: bool,
    /// Bearer tokens for queries: lines of `<scheduler|reader> <name> <token>`. With it, queries
    /// need credentials.
    #[arg(long, env = env::TOKENS_FILE)]
    tokens_file: Option<PathBuf>,
    /// How often the TLS and token files are read again (Kubernetes rotates Secrets in place).
    #[arg(long, env = env::CREDENTIAL_RELOAD, default_value = "10s", value_parser = parse_duration)]
    credential_reload: Duration,
    /// Most nodes the aggregator keeps; an agent or report that would add more is refused.
    #[arg(long, env = env::MAX_NODES, default_value_t = 20_000)]
    max_nodes: usize,
    /// Most directed paths the aggregator keeps; a report that would add more is refused.
    #[arg(long, env = env::MAX_PATHS, default_value_t = 4_000_000)]
    max_paths: usize,
    /// Most path summaries in one report; a larger report is refused.
    #[arg(long, env = env::MAX_REPORT_PATHS, default_value_t = 10_000)]
    max_report_paths: usize,
    /// Largest message an agent may send, bytes; a larger one closes its stream.
    #[arg(long, env = env::MAX_REPORT_BYTES, default_value_t = 16 << 20)]
    max_report_bytes: usize,
    /// Messages per second one agent may send on average over all its streams (0: no limit);
    /// faster agents are read more slowly, and nothing is lost.
    #[arg(long, env = env::MAX_REPORT_RATE, default_value_t = 10.0)]
    max_report_rate: f64,
    /// Reports an agent may send at once above --max-report-rate (its backlog after a reconnect).
    #[arg(long, env = env::REPORT_BURST, default_value_t = 120)]
    report_burst: u32,
    /// How often the tiers (zones, groups of near zones, all nodes) are derived.
    #[arg(long, env = env::TIER_INTERVAL, default_value = "10s", value_parser = parse_duration)]
    tier_interval: Duration,
    /// Zones join a tier-2 group when every RTT between them is at most this.
    #[arg(long, env = env::TIER_JOIN_RTT, default_value = "3ms", value_parser = parse_duration)]
    tier_join_rtt: Duration,
    /// A zone leaves its group when an RTT to another member passes this (at least
    /// --tier-join-rtt; between the two, nothing moves).
    #[arg(long, env = env::TIER_LEAVE_RTT, default_value = "4ms", value_parser = parse_duration)]
    tier_leave_rtt: Duration,
    /// Zones join a group when every measured throughput between them is at least this, bit/s
    /// (100M, 1G; 0: throughput is no criterion).
    #[arg(long, env = env::TIER_JOIN_THROUGHPUT, default_value = "100M", value_parser = parse_bps)]
    tier_join_throughput: f64,
    /// A zone leaves its group when a measured throughput to another member falls below this
    /// (at most --tier-join-throughput).
    #[arg(long, env = env::TIER_LEAVE_THROUGHPUT, default_value = "80M", value_parser = parse_bps)]
    tier_leave_throughput: f64,
    /// How often the network is looked at for faults (`zonemesh faults`, ListFaults).
    #[arg(long, env = env::FAULT_INTERVAL, default_value = "5s", value_parser = parse_duration)]
    fault_interval: Duration,
    /// A node, zone link or path that loses at least this share of its probes is at fault (0.5%
    /// or 0.005; the 95 % interval must clear it).
    #[arg(long, env = env::FAULT_LOSS, default_value = "0.5%", value_parser = parse_share)]
    fault_loss: f64,
    /// A loss at least this is a `down` fault (at least --fault-loss).
    #[arg(long, env = env::FAULT_LOSS_DOWN, default_value = "20%", value_parser = parse_share)]
    fault_loss_down: f64,
    /// An RTT this far above the element's own baseline is a fault (or --fault-delay-ratio of the
    /// baseline, whichever is more).
    #[arg(long, env = env::FAULT_DELAY, default_value = "100us", value_parser = parse_duration)]
    fault_delay: Duration,
    /// The share of its baseline an RTT must rise by to be a fault.
    #[arg(long, env = env::FAULT_DELAY_RATIO, default_value = "25%", value_parser = parse_share)]
    fault_delay_ratio: f64,
    /// An RTT this far above the baseline is a `down` fault (at least --fault-delay).
    #[arg(long, env = env::FAULT_DELAY_DOWN, default_value = "10ms", value_parser = parse_duration)]
    fault_delay_down: Duration,
    /// A node's egress or ingress cap below this share of its zone's median (a zone link's
    /// capacity below this share of its baseline) is a fault.
    #[arg(long, env = env::FAULT_RATE_SHARE, default_value = "50%", value_parser = parse_share)]
    fault_rate_share: f64,
    /// A rate below this share of its reference is a `down` fault (at most --fault-rate-share).
    #[arg(long, env = env::FAULT_RATE_DOWN_SHARE, default_value = "10%", value_parser = parse_share)]
    fault_rate_down_share: f64,
    /// How long an element must be bad before its fault opens.
    #[arg(long, env = env::FAULT_OPEN_AFTER, default_value = "30s", value_parser = parse_duration)]
    fault_open_after: Duration,
    /// How long an element must be clean before its fault closes (so a flapping element opens
    /// at most once per hold).
    #[arg(long, env = env::FAULT_HOLD, default_value = "2m", value_parser = parse_duration)]
    fault_hold: Duration,
    /// How long each element's RTT (and each zone link's capacity) is learnt before a delay is
    /// judged against it: hours in production, the clean minutes before an injection in a lab.
    #[arg(long, env = env::FAULT_BASELINE, default_value = "2h", value_parser = parse_duration)]
    fault_baseline: Duration,
    /// Publish the tiers to Kubernetes for these schedulers (comma-separated, may repeat):
    /// volcano (HyperNodes), kueue (Topology and node labels), diktyo (scheduler-plugins'
    /// NetworkTopology); and health (every node's label zonemesh.io/network-health: ok,
    /// degraded or down, from the open faults). Needs the deploy/publish component of each.
    #[arg(long, env = env::PUBLISH, action = clap::ArgAction::Append)]
    publish: Vec<String>,
    /// At most one publishing round per interval.
    #[arg(long, env = env::PUBLISH_INTERVAL, default_value = "60s", value_parser = parse_duration)]
    publish_interval: Duration,
    /// Name of the Kueue Topology, the NetworkTopology and its ConfigMap.
    #[arg(long, env = env::PUBLISH_NAME, default_value = "zonemesh")]
    publish_name: String,
    /// Namespace of the NetworkTopology and its ConfigMap (list it in NetworkOverheadArgs.namespaces).
    #[arg(long, env = env::PUBLISH_NAMESPACE, default_value = "zonemesh")]
    publish_namespace: String,
    /// Name of the NetworkTopology's weights entry (NetworkOverheadArgs.weightsName).
    #[arg(long, env = env::PUBLISH_WEIGHTS_NAME, default_value = "zonemesh")]
    publish_weights_name: String,
    /// API version of Kueue's Topology: v1beta2 (Kueue 0.15 and later), v1beta1 (Kueue 0.14) or
    /// v1alpha1 (before 0.14).
    #[arg(long, env = env::PUBLISH_KUEUE_VERSION, default_value = "v1beta2")]
    publish_kueue_version: String,
    /// Volcano tierName of the zone, group and cluster HyperNodes, comma-separated (prefixed, so
    /// that another HyperNode source's tier names cannot clash with them).
    #[arg(
        long,
        env = env::PUBLISH_TIER_NAMES,
        default_value = "zonemesh-zone,zonemesh-zone-group,zonemesh-cluster"
    )]
    publish_tier_names: String,
    /// Also write the ConfigMap that the NetworkTopology's configmapName names (off: Diktyo's
    /// networktopology controller, if it runs, then rewrites the costs to 0; NetworkOverhead
    /// never reads it).
    #[arg(long, env = env::PUBLISH_DIKTYO_CONFIGMAP)]
    publish_diktyo_configmap: bool,
    /// With --publish health: taint the nodes with an open fault of their own
    /// (zonemesh.io/network-fault), within the guard rails of docs/faults.md (measured evidence,
    /// told apart from its zone link, at most --max-tainted-nodes, not while warming up or while
    /// the store fails); the taint goes when the fault closes.
    #[arg(long, env = env::TAINT_FAULTY_NODES)]
    taint_faulty_nodes: bool,
    /// The taint's effect: NoSchedule (new pods stay off) or NoExecute (running pods without a
    /// toleration are evicted too).
    #[arg(long, env = env::TAINT_EFFECT, default_value = "NoSchedule")]
    taint_effect: String,
    /// The most nodes tainted at once: a count ("3") or a share of the nodes ("5%", rounded
    /// down, at least one).
    #[arg(long, env = env::MAX_TAINTED_NODES, default_value = "5%")]
    max_tainted_nodes: String,
    /// No taint is added or removed this long after the aggregator starts (the faults need
    /// their baselines and hold-offs first).
    #[arg(long, env = env::TAINT_WARM_UP, default_value = "10m", value_parser = parse_duration)]
    taint_warm_up: Duration,
    /// Run as a replica on a replicated log: the NATS JetStream servers, comma-separated
    /// (`nats://host:4222,...`; `tls://` for TLS). Without it, one aggregator on its own store.
    #[arg(long, env = env::CLUSTER, value_delimiter = ',')]
    cluster: Vec<String>,
    /// CA of the NATS servers' certificates; TLS to them is required when set.
    #[arg(long, env = env::CLUSTER_TLS_CA, requires = "cluster")]
    cluster_tls_ca: Option<PathBuf>,
    /// NATS credentials file (user JWT and seed) of the aggregators' account.
    #[arg(long, env = env::CLUSTER_CREDS, requires = "cluster")]
    cluster_creds: Option<PathBuf>,
    /// Copies of the log the stream keeps (set when the stream is created: 3 in production).
    #[arg(long, env = env::CLUSTER_REPLICAS, default_value_t = 3)]
    cluster_replicas: usize,
    /// The log keeps entries this long (a replica that stayed away longer starts from the newest
    /// snapshot).
    #[arg(long, env = env::CLUSTER_RETENTION, default_value = "6h", value_parser = parse_duration)]
    cluster_retention: Duration,
    /// The log keeps at most this many MiB, oldest entries dropped first.
    #[arg(long, env = env::CLUSTER_MAX_MIB, default_value_t = 65_536)]
    cluster_max_mib: u64,
    /// This replica's name, unique among the replicas (default: the host name).
    #[arg(long, env = env::REPLICA_NAME, requires = "cluster")]
    replica_name: Option<String>,
    /// How long the leader's lease lasts unless renewed (renewed every third of it): a leader
    /// that dies is replaced within about this long.
    #[arg(long, env = env::LEASE_TTL, default_value = "5s", value_parser = parse_duration)]
    lease_ttl: Duration,
    /// This replica's HTTP address as the other replicas reach it (`http://host:port`, or
    /// `https://host:port` when it serves TLS): the others forward extender calls here while
    /// this one leads.
    #[arg(long, env = env::ADVERTISE_URL, requires = "cluster")]
    advertise_url: Option<String>,
    /// CA of the replicas' certificates (PEM): how this replica verifies an `https://` leader it
    /// forwards extender calls to. Required with an `https://` --advertise-url.
    #[arg(long, env = env::PEER_CA, requires = "cluster")]
    peer_ca: Option<PathBuf>,
    /// Certificate chain (PEM) this replica presents to the leader when it forwards: a
    /// scheduler's identity (`spiffe://<domain>/scheduler/<name>`) where the leader verifies
    /// clients without tokens.
    #[arg(long, env = env::PEER_CERT, requires = "peer_ca")]
    peer_cert: Option<PathBuf>,
    /// Private key (PEM) of --peer-cert.
    #[arg(long, env = env::PEER_KEY, requires = "peer_cert")]
    peer_key: Option<PathBuf>,
    /// Entries a replica may be behind the log before it answers UNAVAILABLE and fails
    /// readiness.
    #[arg(long, env = env::MAX_LAG, default_value_t = 10_000)]
    max_lag: u64,
    /// How often a replica writes its snapshot to the log's bucket (where new replicas start).
    #[arg(long, env = env::SNAPSHOT_INTERVAL, default_value = "3m", value_parser = parse_duration)]
    snapshot_interval: Duration,
    /// Testing only: make every store write take at least this long (fault injection).
    #[arg(long, hide = true, default_value = "0ms", value_parser = parse_duration)]
    fault_commit_delay: Duration,
    /// Log format.
    #[arg(long, env = env::LOG_FORMAT, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Log filter (tracing EnvFilter syntax).
    #[arg(long, env = env::LOG, default_value = "info")]
    log: String,
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

fn ms32(flag: &str, d: Duration) -> Result<u32, String> {
    u32::try_from(d.as_millis()).map_err(|_| format!("--{flag}: {d:?} is too long"))
}

/// An error when `d` (of `--flag`) is below `min`.
fn at_least(flag: &str, d: Duration, min: Duration) -> Result<(), String> {
    if d < min {
        Err(format!(
            "--{flag}: {d:?} is shorter than the minimum {min:?}"
        ))
    } else {
        Ok(())
    }
}

impl Cli {
    /// Checks what clap cannot and builds the server configuration.
    fn config(&self) -> Result<Config, String> {
        self.check_probing()?;
        self.check_store_and_ports()?;
        self.check_limits()?;
        let thresholds = self.tier_thresholds()?;
        let faults = server::faults::FaultsConfig {
            thresholds: self.fault_thresholds()?,
            every: self.fault_interval,
            ..Default::default()
        };
        Ok(Config {
            faults,
            publish: self.publish_config()?,
            tiers: server::tiers::TiersConfig {
                thresholds,
                every: self.tier_interval,
            },
            ingest: server::ingest::IngestLimits {
                max_report_paths: self.max_report_paths,
                max_report_bytes: self.max_report_bytes,
                reports_per_second: self.max_report_rate,
                report_burst: self.report_burst,
            },
            tls: match (&self.tls_cert, &self.tls_key) {
                (Some(cert), Some(key)) => Some(server::tls::TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: self.tls_client_ca.clone(),
                    trust_domain: self.trust_domain.clone(),
                }),
                _ => None,
            },
            allow_plaintext: self.allow_plaintext,
            tokens_file: self.tokens_file.clone(),
            reload_every: self.credential_reload,
            #[cfg(not(target_env = "msvc"))]
            heap_stats: Some(heap_stats),
            #[cfg(target_env = "msvc")]
            heap_stats: None,
            listen: self.listen,
            http_listen: self.http_listen,
            job_ttl_ms: ms(self.extender_job_ttl),
            data_dir: if self.in_memory {
                None
            } else {
                self.data_dir.clone()
            },
            store_cache_bytes: self.store_cache_mib << 20,
            engine: self.engine_config()?,
            cluster: self.cluster_config()?,
            owner: server::owner::OwnerConfig {
                commit_delay: self.fault_commit_delay,
                store_hang: self.store_hang_timeout,
                ..Default::default()
            },
        })
    }

    /// The probe plan's and the throughput tests' flags: a train fits its interval.
    fn check_probing(&self) -> Result<(), String> {
        at_least("window", self.window, Duration::from_millis(500))?;
        at_least(
            "probe-interval",
            self.probe_interval,
            Duration::from_millis(100),
        )?;
        at_least(
            "probe-timeout",
            self.probe_timeout,
            Duration::from_millis(10),
        )?;
        at_least("stale-after", self.stale_after, self.window)
            .map_err(|e| format!("{e} (it must be at least --window)"))?;
        at_least("down-after", self.down_after, Duration::from_secs(1))?;
        at_least(
            "throughput-duration",
            self.throughput_duration,
            Duration::from_millis(100),
        )?;
        if !(1..=MAX_TRAIN_SIZE).contains(&self.train_size) {
            return Err(format!(
                "--train-size: {} is not between 1 and {MAX_TRAIN_SIZE}",
                self.train_size
            ));
        }
        if !(1..=MAX_TRAIN_SIZE).contains(&self.suspect_probe_factor) {
            return Err(format!(
                "--suspect-probe-factor: {} is not between 1 (off) and {MAX_TRAIN_SIZE}",
                self.suspect_probe_factor
            ));
        }
        let train = self.train_gap * (self.train_size - 1) + self.probe_timeout;
        if train > self.probe_interval {
            return Err(format!(
                "--probe-interval: {:?} is shorter than a train ({} probes {:?} apart plus --probe-timeout {:?})",
                self.probe_interval, self.train_size, self.train_gap, self.probe_timeout
            ));
        }
        if !(1..=16).contains(&self.throughput_streams) {
            return Err(format!(
                "--throughput-streams: {} is not between 1 and 16",
                self.throughput_streams
            ));
        }
        if !(self.throughput_share > 0.0 && self.throughput_share <= 1.0) {
            return Err(format!(
                "--throughput-share: {} is not in (0, 1]",
                self.throughput_share
            ));
        }
        Ok(())
    }

    /// The store's flags and the two ports.
    fn check_store_and_ports(&self) -> Result<(), String> {
        if self.store_hang_timeout < Duration::from_secs(1) {
            return Err(format!(
                "--store-hang-timeout: {:?} is below 1s",
                self.store_hang_timeout
            ));
        }
        if !(8..=65_536).contains(&self.store_cache_mib) {
            return Err(format!(
                "--store-cache-mib: {} is not in 8..=65536",
                self.store_cache_mib
            ));
        }
        zonemesh_tls::check_trust_domain(&self.trust_domain)
            .map_err(|e| format!("--trust-domain: {e}"))?;
        if self.listen == self.http_listen && self.listen.port() != 0 {
            return Err(format!(
                "--http-listen: {} is also --listen",
                self.http_listen
            ));
        }
        Ok(())
    }

    /// The limits on what agents may send, and the intervals of the background tasks.
    fn check_limits(&self) -> Result<(), String> {
        if !(self.max_report_rate == 0.0
            || (self.max_report_rate >= 0.01 && self.max_report_rate.is_finite()))
        {
            return Err(format!(
                "--max-report-rate: {} is not 0 (off) or a rate of at least 0.01 reports a second",
                self.max_report_rate
            ));
        }
        for (flag, value, min) in [
            ("max-nodes", self.max_nodes, 2),
            ("max-paths", self.max_paths, 1),
            ("max-report-paths", self.max_report_paths, 1),
            ("max-report-bytes", self.max_report_bytes, 4096),
            ("report-burst", self.report_burst as usize, 1),
        ] {
            if value < min {
                return Err(format!("--{flag}: {value} is less than {min}"));
            }
        }
        if self.max_report_paths > zonemesh_domain::MAX_PATHS_PER_REPORT {
            return Err(format!(
                "--max-report-paths: {} is above the protocol's {} paths per report",
                self.max_report_paths,
                zonemesh_domain::MAX_PATHS_PER_REPORT
            ));
        }
        at_least(
            "credential-reload",
            self.credential_reload,
            Duration::from_millis(100),
        )?;
        at_least(
            "tier-interval",
            self.tier_interval,
            Duration::from_millis(100),
        )?;
        Ok(())
    }

    /// The tiers' thresholds (`--tier-*`), checked: a leave threshold beyond its join.
    fn tier_thresholds(&self) -> Result<zonemesh_domain::TierThresholds, String> {
        zonemesh_domain::TierThresholds {
            join_rtt_us: self.tier_join_rtt.as_secs_f64() * 1e6,
            leave_rtt_us: self.tier_leave_rtt.as_secs_f64() * 1e6,
            join_throughput_bps: self.tier_join_throughput,
            leave_throughput_bps: self.tier_leave_throughput,
        }
        .checked()
        .map_err(|e| {
            let flag = match e.field() {
                "leave_rtt_us" => "--tier-leave-rtt",
                "leave_throughput_bps" => "--tier-leave-throughput",
                "join_rtt_us" => "--tier-join-rtt",
                _ => "--tier-join-throughput",
            };
            format!("{flag}: {}", e.problem())
        })
    }

    /// The faults' thresholds (`--fault-*`), checked: a `down` threshold milder than its
    /// `degraded` one, a hold time or a baseline learning time of 0.
    fn fault_thresholds(&self) -> Result<zonemesh_domain::FaultThresholds, String> {
        at_least(
            "fault-interval",
            self.fault_interval,
            Duration::from_millis(100),
        )?;
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        zonemesh_domain::FaultThresholds {
            loss_degraded: self.fault_loss,
            loss_down: self.fault_loss_down,
            delay_degraded_us: self.fault_delay.as_secs_f64() * 1e6,
            delay_ratio: self.fault_delay_ratio,
            delay_down_us: self.fault_delay_down.as_secs_f64() * 1e6,
            rate_degraded_share: self.fault_rate_share,
            rate_down_share: self.fault_rate_down_share,
            open_after_ms: ms(self.fault_open_after),
            hold_ms: ms(self.fault_hold),
            baseline_ms: ms(self.fault_baseline),
        }
        .checked()
        .map_err(|e| {
            let flag = match e.field() {
                "loss_degraded" => "--fault-loss",
                "loss_down" => "--fault-loss-down",
                "delay_degraded_us" => "--fault-delay",
                "delay_ratio" => "--fault-delay-ratio",
                "delay_down_us" => "--fault-delay-down",
                "rate_degraded_share" => "--fault-rate-share",
                "rate_down_share" => "--fault-rate-down-share",
                "open_after_ms" => "--fault-open-after",
                "hold_ms" => "--fault-hold",
                _ => "--fault-baseline",
            };
            format!("{flag}: {}", e.problem())
        })
    }

    /// The taint's settings (`--taint-*`, `--max-tainted-nodes`); `None` without
    /// `--taint-faulty-nodes`.
    fn taint_settings(&self) -> Result<Option<zonemesh_publish::health::TaintSettings>, String> {
        use zonemesh_publish::health::{MaxTainted, TaintEffect, TaintSettings};
        if !self.taint_faulty_nodes {
            return Ok(None);
        }
        Ok(Some(TaintSettings {
            effect: TaintEffect::parse(&self.taint_effect)
                .map_err(|e| format!("--taint-effect: {e}"))?,
            max: MaxTainted::parse(&self.max_tainted_nodes)
                .map_err(|e| format!("--max-tainted-nodes: {e}"))?,
            warm_up: self.taint_warm_up,
        }))
    }

    /// The publisher's settings (`--publish*`); `None` when nothing is published.
    fn publish_config(&self) -> Result<Option<server::PublishConfig>, String> {
        let mut schedulers = Vec::new();
        for item in &self.publish {
            for s in zonemesh_publish::Scheduler::parse_list(item)
                .map_err(|e| format!("--publish: {e}"))?
            {
                if !schedulers.contains(&s) {
                    schedulers.push(s);
                }
            }
        }
        schedulers.sort();
        if schedulers.is_empty() && self.taint_faulty_nodes {
            return Err(zonemesh_publish::SettingsError::TaintWithoutHealth.to_string());
        }
        Ok(if schedulers.is_empty() {
            None
        } else {
            at_least(
                "publish-interval",
                self.publish_interval,
                Duration::from_secs(1),
            )?;
            let kueue_version = zonemesh_publish::KueueVersion::parse(&self.publish_kueue_version)
                .map_err(|e| format!("--publish-kueue-version: {e}"))?;
            let tier_names = zonemesh_publish::objects::tier_names(&self.publish_tier_names)
                .map_err(|e| e.to_string())?;
            Some(server::PublishConfig {
                settings: zonemesh_publish::Settings {
                    schedulers,
                    name: self.publish_name.clone(),
                    namespace: self.publish_namespace.clone(),
                    weights_name: self.publish_weights_name.clone(),
                    kueue_version,
                    tier_names,
                    diktyo_configmap: self.publish_diktyo_configmap,
                    taint: self.taint_settings()?,
                }
                .checked()
                .map_err(|e| e.to_string())?,
                interval: self.publish_interval,
            })
        })
    }

    /// A replica's settings (`--cluster*`), checked; `None` without `--cluster`.
    fn cluster_config(
        &self,
    ) -> Result<Option<zonemesh_aggregator::cluster::ClusterConfig>, String> {
        let servers: Vec<String> = self
            .cluster
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        if servers.is_empty() {
            return Ok(None);
        }
        for server in &servers {
            let ok = ["nats://", "tls://"].iter().any(|scheme| {
                server
                    .strip_prefix(scheme)
                    .is_some_and(|rest| !rest.is_empty())
            });
            if !ok {
                return Err(format!(
                    "--cluster: {server:?} is not a NATS server URL (nats://host:port or tls://host:port)"
                ));
            }
        }
        if !(1..=5).contains(&self.cluster_replicas) {
            return Err(format!(
                "--cluster-replicas: {} is not between 1 and 5",
                self.cluster_replicas
            ));
        }
        at_least(
            "cluster-retention",
            self.cluster_retention,
            Duration::from_secs(1),
        )?;
        at_least(
            "snapshot-interval",
            self.snapshot_interval,
            Duration::from_secs(1),
        )?;
        if self.cluster_max_mib == 0 {
            return Err("--cluster-max-mib: 0 MiB holds nothing".into());
        }
        if self.max_lag == 0 {
            return Err("--max-lag: 0 would make every replica unready at every new entry".into());
        }
        let replica = match &self.replica_name {
            Some(name) => name.clone(),
            None => host_name()
                .ok_or("--replica-name: not given, and the host name could not be read")?,
        };
        if replica.is_empty()
            || replica.len() > 64
            || !replica
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "--replica-name: {replica:?} is not 1 to 64 letters, digits, '-' or '_'"
            ));
        }
        let mut config =
            zonemesh_aggregator::cluster::ClusterConfig::new(self.cluster.clone(), replica);
        config.tls_ca = self.cluster_tls_ca.clone();
        config.creds = self.cluster_creds.clone();
        if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&self.lease_ttl) {
            return Err(format!(
                "--lease-ttl: {:?} is not between 1 s and 60 s",
                self.lease_ttl
            ));
        }
        config.lease_ttl = self.lease_ttl;
        config.peer_tls = zonemesh_tls::ClientTls {
            ca: self.peer_ca.clone(),
            cert: self.peer_cert.clone(),
            key: self.peer_key.clone(),
            server_name: None,
        };
        config.peer_tls.check("peer-").map_err(|e| e.to_string())?;
        if let Some(url) = &self.advertise_url {
            let (https, host) = match url.split_once("://") {
                Some(("https", host)) => (true, host),
                Some(("http", host)) => (false, host),
                _ => (false, ""),
            };
            if host.is_empty() || host.contains(char::is_whitespace) {
                return Err(format!(
                    "--advertise-url: {url:?} is not http://host:port or https://host:port"
                ));
            }
            if https && self.tls_cert.is_none() {
                return Err(format!(
                    "--advertise-url: {url} is https://, but this replica serves no TLS (--tls-cert)"
                ));
            }
            if https && self.peer_ca.is_none() {
                return Err(format!(
                    "--peer-ca: required with --advertise-url {url} (the replicas verify the leader's certificate with it)"
                ));
            }
            if !https && self.tls_cert.is_some() && !self.allow_plaintext {
                return Err(format!(
                    "--advertise-url: {url} is http://, but this replica serves TLS only (--tls-cert): use https://"
                ));
            }
        }
        config.advertise = self.advertise_url.clone();
        config.max_lag = self.max_lag;
        config.snapshot_every = self.snapshot_interval;
        config.stream = zonemesh_aggregator::cluster::StreamSettings {
            replicas: self.cluster_replicas,
            max_age: self.cluster_retention,
            max_bytes: i64::try_from(self.cluster_max_mib << 20).unwrap_or(i64::MAX),
        };
        Ok(Some(config))
    }

    /// The engine's settings: windows, staleness, the probe plan, throughput tests, limits.
    fn engine_config(&self) -> Result<EngineConfig, String> {
        Ok(EngineConfig {
            path: PathConfig {
                window_ms: ms(self.loss_window),
                stale_after_ms: ms(self.stale_after),
                ..PathConfig::default()
            },
            down_after_ms: ms(self.down_after),
            plan: PlanConfig {
                window_ms: ms32("window", self.window)?,
                interval_ms: ms32("probe-interval", self.probe_interval)?,
                train_size: self.train_size,
                train_gap_ms: ms32("train-gap", self.train_gap)?,
                timeout_ms: ms32("probe-timeout", self.probe_timeout)?,
                inter_zone_pairs: self.inter_zone_pairs,
                rotate_ms: ms(self.rotate),
                suspect_factor: self.suspect_probe_factor,
                max_suspects: self.max_suspects,
                ..PlanConfig::default()
            },
            throughput: ThroughputConfig {
                enabled: self.throughput_max_concurrent > 0,
                duration_ms: ms32("throughput-duration", self.throughput_duration)?,
                warmup_ms: ms32("throughput-warmup", self.throughput_warmup)?,
                streams: self.throughput_streams,
                pair_interval_ms: ms(self.throughput_interval),
                share: self.throughput_share,
                max_concurrent: self.throughput_max_concurrent,
            },
            max_nodes: self.max_nodes,
            max_paths: self.max_paths,
            ..EngineConfig::default()
        })
    }
}

/// The host name (a pod's name in a StatefulSet), if the kernel tells it.
fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

const PROGRAM: &str = "zonemesh-aggregator";

fn main() {
    let cli: Cli = parse_or_exit();
    let config = cli
        .config()
        .unwrap_or_else(|e| zonemesh_common::flags::usage_error(PROGRAM, &e));
    init_logging(PROGRAM, cli.log_format, &cli.log);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("zonemesh-aggregator: cannot start the runtime: {e}");
            std::process::exit(1);
        });
    let result = runtime.block_on(server::serve(config, shutdown_signal(), |bound| {
        // One line on stdout that scripts and tests can wait for.
        println!(
            "zonemesh-aggregator listening grpc={} http={}",
            bound.grpc, bound.http
        );
    }));
    match result {
        Ok(()) => {}
        // A TLS or token file that cannot be used: the message names the flag.
        Err(zonemesh_aggregator::Error::Config(e)) => {
            zonemesh_common::flags::usage_error(PROGRAM, &e.to_string())
        }
        Err(e) => {
            eprintln!("zonemesh-aggregator: {e}");
            std::process::exit(1);
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
