//! The replicated benchmark (`zonemesh-fleet bench --cluster`): three nats-server processes
//! (JetStream, file storage, on loopback) and three `zonemesh-aggregator --cluster` replicas, the
//! fleet's agents spread over the replicas. It measures durable ingest through the log, the
//! acknowledgement latency agents see, query latency on each replica, what the log stores per
//! entry, and two failovers under ingest: the log's leader SIGKILLed, and a replica SIGKILLed and
//! started again. Then the same cluster once more with nats-server's default fsync policy, to show
//! what `sync_interval: always` costs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tonic::transport::Channel;
use zonemesh_common::time::Stopwatch;
use zonemesh_lab::nats::{NatsCluster, Sync};
use zonemesh_lab::process::{Aggregator, cpu_seconds, http_get};
use zonemesh_proto::v1;

use crate::bench::{Latency, STREAMS_PER_CONNECTION, query_channel, query_loop};
use crate::sim::{self, Control, Counters};
use crate::topo::{Fleet, FleetSpec};

/// The stream the replicas write (`aggregator/src/cluster/log.rs`).
const STREAM: &str = "ZONEMESH";

/// How long a failover is watched after the kill.
const FAILOVER_WATCH: Duration = Duration::from_secs(25);

/// How one replicated run is made.
#[derive(Debug, Clone)]
pub struct ClusterRun {
    /// The cluster.
    pub spec: FleetSpec,
    /// Length of each measured phase.
    pub phase: Duration,
    /// The aggregator binary.
    pub aggregator: PathBuf,
    /// Replicas.
    pub replicas: usize,
    /// Log servers.
    pub servers: usize,
}

/// CPU over a phase, in cores (1.0 = one core busy).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// Every replica together.
    pub replicas: f64,
    /// Every nats-server together.
    pub log: f64,
    /// The simulator with its query loop.
    pub simulator: f64,
}

/// One measured phase.
#[derive(Debug, Clone)]
pub struct PhaseFigures {
    /// Summaries acknowledged per second (each stored by the log and applied by its replica).
    pub summaries_per_s: f64,
    /// Reports (log entries) acknowledged per second.
    pub reports_per_s: f64,
    /// From a report's send to its acknowledgement.
    pub ack: Latency,
    /// Query latencies on each replica (queried in turn, one replica at a time).
    pub queries: Vec<BTreeMap<&'static str, Latency>>,
    /// CPU.
    pub cpu: Cpu,
}

/// One failover under paced ingest.
#[derive(Debug, Clone)]
pub struct Failover {
    /// The longest stretch without a single acknowledgement, from the kill on.
    pub ingest_pause: Duration,
    /// The longest an agent waited for an acknowledgement of a report sent around the kill.
    pub longest_ack_wait: Duration,
    /// Reports acknowledged while it was watched, against the same stretch before the kill.
    pub acked_vs_before: (u64, u64),
    /// From starting the killed process again until it had caught up (the log server: its copy
    /// of the stream as long as the leader's; the replica: ready, every entry applied).
    pub catch_up: Duration,
    /// Queries asked through a client that retries on another replica, and how many were
    /// answered.
    pub queries: (u64, u64),
}

/// Everything a replicated run measured.
#[derive(Debug, Clone)]
pub struct ClusterFigures {
    /// Nodes.
    pub nodes: usize,
    /// Zones.
    pub zones: usize,
    /// Replicas and log servers.
    pub shape: (usize, usize),
    /// From the first Hello until every agent held a plan.
    pub registration: Duration,
    /// Agents reporting once per plan window.
    pub paced: PhaseFigures,
    /// Agents keeping reports in flight at all times.
    pub flooded: PhaseFigures,
    /// Entries the stream holds, its bytes (one server's copy), and the summaries acknowledged.
    pub stream: (u64, u64, u64),
    /// The log's leader SIGKILLed under paced ingest, and started again.
    pub leader_killed: Failover,
    /// A replica (not the writer) SIGKILLed under paced ingest, and started again.
    pub replica_killed: Failover,
    /// Once ingest stopped: the nodes each replica lists (convergence).
    pub nodes_listed: Vec<usize>,
    /// The same cluster with nats-server's default fsync policy: paced and flooding.
    pub default_sync: (PhaseFigures, PhaseFigures),
}

/// Log servers and replicas on loopback, in one temporary directory.
struct Replicated {
    nats: NatsCluster,
    replicas: Vec<Option<Aggregator>>,
    aggregator: PathBuf,
    data: PathBuf,
    logs: PathBuf,
    _dir: tempfile::TempDir,
}

impl Replicated {
    fn start(run: &ClusterRun, sync: Sync) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs)?;
        let nats = NatsCluster::start_with(run.servers, dir.path(), &logs, sync)?;
        let mut env = Self {
            nats,
            replicas: (0..run.replicas).map(|_| None).collect(),
            aggregator: run.aggregator.clone(),
            data: dir.path().to_owned(),
            logs,
            _dir: dir,
        };
        for i in 0..run.replicas {
            env.start_replica(i)?;
        }
        Ok(env)
    }

    fn start_replica(&mut self, i: usize) -> Result<()> {
        let urls = self.nats.urls();
        let name = format!("r{i}");
        let data = self.data.join(&name).display().to_string();
        let args = vec![
            "--cluster",
            &urls,
            "--replica-name",
            &name,
            "--data-dir",
            &data,
            "--log",
            "warn",
            // Within the servers' max_file_store (4 GB).
            "--cluster-max-mib",
            "2048",
            // The bench measures what the replicas take, not the per-agent rate limit.
            "--max-report-rate",
            "0",
        ];
        let replica = Aggregator::start(&self.aggregator, &args, &self.logs)
            .with_context(|| format!("replica {name} (logs in {})", self.logs.display()))?;
        self.replicas[i] = Some(replica);
        Ok(())
    }

    fn running(&self) -> impl Iterator<Item = &Aggregator> {
        self.replicas.iter().flatten()
    }

    fn urls(&self) -> Vec<String> {
        self.running()
            .map(|r| format!("http://{}", r.grpc))
            .collect()
    }

    /// CPU seconds of the replicas and of the log servers running now.
    fn cpu_seconds(&self) -> (f64, f64) {
        let replicas = self
            .running()
            .filter_map(|r| cpu_seconds(r.pid()).ok())
            .sum();
        let log = (0..self.nats.len())
            .filter_map(|i| self.nats.pid(i))
            .filter_map(|pid| cpu_seconds(pid).ok())
            .sum();
        (replicas, log)
    }
}

/// Runs the replicated benchmark.
pub async fn run_cluster(run: &ClusterRun, progress: impl Fn(&str)) -> Result<ClusterFigures> {
    ensure!(run.replicas >= 2, "a failover needs at least 2 replicas");
    let n = run.spec.nodes;
    let mut env = Replicated::start(run, Sync::Always)?;
    let (fleet, control, counters, task, registration) = start_fleet(run, &env).await?;
    progress(&format!(
        "{n} nodes on {} replicas: every agent holds a plan after {registration:.1?}",
        run.replicas
    ));
    let paced = measure(&env, &fleet, &counters, run.phase).await?;
    progress(&format!(
        "paced: {:.0} summaries/s, ack p99 {} µs",
        paced.summaries_per_s, paced.ack.p99_us
    ));
    control.set_flood(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let flooded = measure(&env, &fleet, &counters, run.phase).await?;
    progress(&format!(
        "flooding: {:.0} summaries/s, ack p99 {} µs",
        flooded.summaries_per_s, flooded.ack.p99_us
    ));
    control.set_flood(false);
    tokio::time::sleep(Duration::from_secs(3)).await;

    let leader = env
        .nats
        .leader_of(STREAM)
        .context("no server leads the stream")?;
    let leader_killed = failover(&mut env, &counters, Victim::LogServer(leader)).await?;
    progress(&format!("log leader n{leader} killed: {leader_killed:?}"));
    let replica_killed = failover(&mut env, &counters, Victim::Replica(run.replicas - 1)).await?;
    progress(&format!(
        "replica r{} killed: {replica_killed:?}",
        run.replicas - 1
    ));

    control.stop();
    tokio::time::timeout(Duration::from_secs(120), task)
        .await
        .context("the fleet did not stop within 120 s")???;
    let stream = stream_figures(&env, &counters)?;
    let nodes_listed = converged_nodes(&env, n).await?;
    drop(env);

    let env = Replicated::start(run, Sync::Default)?;
    let (fleet, control, counters, task, _) = start_fleet(run, &env).await?;
    let default_paced = measure(&env, &fleet, &counters, run.phase).await?;
    control.set_flood(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let default_flooded = measure(&env, &fleet, &counters, run.phase).await?;
    progress(&format!(
        "default fsync: paced ack p99 {} µs, flooding {:.0} summaries/s",
        default_paced.ack.p99_us, default_flooded.summaries_per_s
    ));
    control.stop();
    tokio::time::timeout(Duration::from_secs(120), task)
        .await
        .context("the fleet did not stop within 120 s")???;
    Ok(ClusterFigures {
        nodes: n,
        zones: run.spec.zones,
        shape: (run.replicas, run.servers),
        registration,
        paced,
        flooded,
        stream,
        leader_killed,
        replica_killed,
        nodes_listed,
        default_sync: (default_paced, default_flooded),
    })
}

type RunningFleet = (
    Arc<Fleet>,
    Arc<Control>,
    Arc<Counters>,
    tokio::task::JoinHandle<Result<()>>,
    Duration,
);

/// Starts the fleet with its agents spread over the replicas and waits until each holds a plan.
async fn start_fleet(run: &ClusterRun, env: &Replicated) -> Result<RunningFleet> {
    let fleet = Arc::new(Fleet::new(run.spec.clone()));
    let n = fleet.nodes.len();
    let urls = env.urls();
    let connections = n.div_ceil(STREAMS_PER_CONNECTION).max(urls.len());
    let mut channels = Vec::with_capacity(connections);
    for k in 0..connections {
        let url = &urls[k % urls.len()];
        channels.push(Channel::from_shared(url.clone())?.connect().await?);
    }
    let control = Arc::new(Control::new());
    let counters = Arc::new(Counters::default());
    let started = Stopwatch::start();
    let task = tokio::spawn(sim::run(
        fleet.clone(),
        channels,
        control.clone(),
        counters.clone(),
    ));
    while counters.planned.load(Ordering::Relaxed) < n {
        ensure!(
            started.elapsed() < Duration::from_secs(300),
            "{} of {n} agents got a plan in 300 s",
            counters.planned.load(Ordering::Relaxed)
        );
        ensure!(!task.is_finished(), "the fleet stopped: {:?}", task.await?);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let registration = started.elapsed();
    // Let the membership settle into the plans.
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok((fleet, control, counters, task, registration))
}

/// Measures one phase: ingest and acknowledgements over all of it, and each replica's query
/// latencies over its share of it (one query loop at a time, as the single aggregator's bench has
/// one).
async fn measure(
    env: &Replicated,
    fleet: &Fleet,
    counters: &Counters,
    length: Duration,
) -> Result<PhaseFigures> {
    let (replicas0, log0) = env.cpu_seconds();
    let sim0 = cpu_seconds(std::process::id())?;
    let summaries0 = counters.summaries_acked.load(Ordering::Relaxed);
    let reports0 = counters.reports_acked.load(Ordering::Relaxed);
    counters.ack_latency.take();
    let t0 = Stopwatch::start();
    let replicas: Vec<SocketAddr> = env.running().map(|r| r.grpc).collect();
    let share = length / replicas.len() as u32;
    let mut queries = Vec::new();
    for grpc in replicas {
        let channel = query_channel(&format!("http://{grpc}")).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(query_loop(channel, fleet.spec.zones, stop.clone()));
        tokio::time::sleep(share).await;
        stop.store(true, Ordering::Relaxed);
        let histograms = task.await??;
        queries.push(
            histograms
                .iter()
                .map(|(q, h)| (*q, Latency::of(h)))
                .collect(),
        );
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let (replicas1, log1) = env.cpu_seconds();
    let per_s = |now: u64, then: u64| (now - then) as f64 / elapsed;
    Ok(PhaseFigures {
        summaries_per_s: per_s(counters.summaries_acked.load(Ordering::Relaxed), summaries0),
        reports_per_s: per_s(counters.reports_acked.load(Ordering::Relaxed), reports0),
        ack: Latency::of(&counters.ack_latency.take()),
        queries,
        cpu: Cpu {
            replicas: (replicas1 - replicas0) / elapsed,
            log: (log1 - log0) / elapsed,
            simulator: (cpu_seconds(std::process::id())? - sim0) / elapsed,
        },
    })
}

#[derive(Debug, Clone, Copy)]
enum Victim {
    LogServer(usize),
    Replica(usize),
}

/// SIGKILLs `victim` under paced ingest, watches for [`FAILOVER_WATCH`] while a retrying client
/// queries, starts it again and times its catch-up.
async fn failover(env: &mut Replicated, counters: &Counters, victim: Victim) -> Result<Failover> {
    let grpc: Vec<SocketAddr> = env.running().map(|r| r.grpc).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicU64::new(0));
    let answered = Arc::new(AtomicU64::new(0));
    let queries = tokio::spawn(retrying_queries(
        grpc,
        stop.clone(),
        asked.clone(),
        answered.clone(),
    ));
    // Acknowledgements before the kill, over as long as the watch after it.
    let before0 = counters.reports_acked.load(Ordering::Relaxed);
    tokio::time::sleep(FAILOVER_WATCH).await;
    let before = counters.reports_acked.load(Ordering::Relaxed) - before0;
    counters.ack_latency.take();
    let killed = Stopwatch::start();
    match victim {
        Victim::LogServer(i) => env.nats.kill(i),
        Victim::Replica(i) => {
            if let Some(r) = env.replicas[i].take() {
                r.kill();
            }
        }
    }
    let mut last = counters.reports_acked.load(Ordering::Relaxed);
    let mut last_change = killed.elapsed();
    let mut pause = Duration::ZERO;
    while killed.elapsed() < FAILOVER_WATCH {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = counters.reports_acked.load(Ordering::Relaxed);
        let at = killed.elapsed();
        if now != last {
            (last, last_change) = (now, at);
        }
        pause = pause.max(at - last_change);
    }
    let after = counters.reports_acked.load(Ordering::Relaxed) - before0 - before;
    let longest_ack_wait = Duration::from_micros(counters.ack_latency.take().max());
    stop.store(true, Ordering::Relaxed);
    queries.await??;
    let restarted = Stopwatch::start();
    match victim {
        Victim::LogServer(i) => {
            env.nats.restart(i)?;
            env.nats.wait_healthy(i)?;
            wait(Duration::from_secs(120), || {
                let leader = env.nats.leader_of(STREAM)?;
                let target = env.nats.stream(leader, STREAM)?.last;
                (env.nats.stream(i, STREAM)?.last >= target).then_some(())
            })
            .await
            .with_context(|| format!("log server n{i} did not catch up in 120 s"))?;
        }
        Victim::Replica(i) => {
            env.start_replica(i)?;
            let http = env.replicas[i].as_ref().expect("just started").http;
            wait(Duration::from_secs(120), || {
                http_get(http, "/readyz").ok().map(drop)
            })
            .await
            .with_context(|| format!("replica r{i} not ready in 120 s"))?;
        }
    }
    Ok(Failover {
        ingest_pause: pause,
        longest_ack_wait,
        acked_vs_before: (after, before),
        catch_up: restarted.elapsed(),
        queries: (
            asked.load(Ordering::Relaxed),
            answered.load(Ordering::Relaxed),
        ),
    })
}

/// Polls `done` every 100 ms until it gives `Some`, at most `limit`.
async fn wait(limit: Duration, mut done: impl FnMut() -> Option<()>) -> Result<()> {
    let t0 = Stopwatch::start();
    while done().is_none() {
        ensure!(t0.elapsed() < limit, "not done after {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// A scheduler's client: RankNodes (best 100) every 20 ms, each with a 2 s deadline, asked again
/// of the next replica when one fails (as `zonemesh` does on UNAVAILABLE); a query counts as
/// answered when some replica answered it.
async fn retrying_queries(
    replicas: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    asked: Arc<AtomicU64>,
    answered: Arc<AtomicU64>,
) -> Result<()> {
    let clients: Vec<_> = replicas
        .iter()
        .map(|a| {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{a}"))?
                .connect_timeout(Duration::from_secs(1))
                .timeout(Duration::from_secs(2))
                .connect_lazy();
            Ok(v1::topology_client::TopologyClient::new(channel))
        })
        .collect::<Result<_>>()?;
    let mut at = 0;
    while !stop.load(Ordering::Relaxed) {
        asked.fetch_add(1, Ordering::Relaxed);
        for _ in 0..clients.len() {
            let mut client = clients[at % clients.len()].clone();
            let request = v1::RankNodesRequest {
                limit: 100,
                ..Default::default()
            };
            if client.rank_nodes(request).await.is_ok() {
                answered.fetch_add(1, Ordering::Relaxed);
                break;
            }
            at += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The stream's entries and bytes (on its leader), and the summaries acknowledged.
fn stream_figures(env: &Replicated, counters: &Counters) -> Result<(u64, u64, u64)> {
    let leader = env
        .nats
        .leader_of(STREAM)
        .context("no server leads the stream")?;
    let s = env
        .nats
        .stream(leader, STREAM)
        .context("the leader's stream")?;
    Ok((
        s.messages,
        s.bytes,
        counters.summaries_acked.load(Ordering::Relaxed),
    ))
}

/// Once ingest has stopped and every replica has applied the whole log, the nodes each lists.
async fn converged_nodes(env: &Replicated, nodes: usize) -> Result<Vec<usize>> {
    let mut listed = Vec::new();
    for r in env.running() {
        let http = r.http;
        wait(Duration::from_secs(120), || {
            let body = http_get(http, "/healthz").ok()?;
            body.contains(" 0 entries behind").then_some(())
        })
        .await
        .with_context(|| format!("replica at {http} did not apply the whole log"))?;
        let mut topology = v1::topology_client::TopologyClient::new(r.channel().await?)
            .max_decoding_message_size(256 << 20);
        listed.push(crate::bench::count_nodes(&mut topology).await?);
    }
    ensure!(
        listed.iter().all(|&l| l == nodes),
        "replicas list {listed:?} nodes of {nodes}"
    );
    Ok(listed)
}
