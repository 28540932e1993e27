//! The scale benchmark: the real `zonemesh-aggregator` (release build, sled in a temporary
//! directory) driven by a fleet of N synthetic agents, queried while they report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use hdrhistogram::Histogram;
use tonic::transport::Channel;
use zonemesh_common::time::Stopwatch;
use zonemesh_lab::process::{Aggregator, cpu_seconds, status_kib};
use zonemesh_proto::v1;

use crate::sim::{self, Control, Counters};
use crate::topo::{Fleet, FleetSpec};

/// Streams per HTTP/2 connection (servers commonly allow 100–200 concurrent streams).
pub const STREAMS_PER_CONNECTION: usize = 100;

/// The RPCs timed while ingest runs.
pub const QUERIES: [&str; 5] = [
    "RankNodes",
    "RankNodes100",
    "Place64",
    "GetMatrix",
    "ListZones",
];

/// How one size is run.
#[derive(Debug, Clone)]
pub struct ScaleRun {
    /// The cluster.
    pub spec: FleetSpec,
    /// Length of each measured phase.
    pub phase: Duration,
    /// The aggregator binary.
    pub aggregator: PathBuf,
    /// Extra aggregator flags.
    pub aggregator_args: Vec<String>,
    /// Share of agents that leave and come back during the phases, per mille.
    pub churn_per_mille: u64,
}

/// p50 and p99 of one RPC in one phase, µs, and how many calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Median, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Calls timed.
    pub calls: u64,
}

impl Latency {
    /// The p50 and p99 of `h`, and how many it holds.
    pub fn of(h: &Histogram<u64>) -> Self {
        Self {
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            calls: h.len(),
        }
    }
}

/// Everything one size measured.
#[derive(Debug, Clone)]
pub struct ScaleFigures {
    /// Nodes.
    pub nodes: usize,
    /// Zones.
    pub zones: usize,
    /// From the first Hello until every agent held a plan.
    pub registration: Duration,
    /// Mean peers in a node's plan.
    pub targets_per_node: f64,
    /// Mean probes per second a node's plan asks for.
    pub probes_per_node_per_s: f64,
    /// Durable ingest while agents report at the plan's pace, summaries/s.
    pub paced_ingest_per_s: f64,
    /// Durable ingest while agents flood, summaries/s.
    pub flood_ingest_per_s: f64,
    /// Query latencies while agents report at the plan's pace.
    pub paced: BTreeMap<&'static str, Latency>,
    /// CPU of the aggregator and of the simulator (with its query loop) in the paced phase, in
    /// cores (1.0 = one core busy).
    pub paced_cpu: (f64, f64),
    /// The same while flooding.
    pub flood_cpu: (f64, f64),
    /// Query latencies while agents flood.
    pub flooded: BTreeMap<&'static str, Latency>,
    /// Aggregator RSS after the paced phase, bytes.
    pub paced_rss_bytes: u64,
    /// Aggregator peak RSS after the paced phase (before flooding), bytes.
    pub paced_peak_rss_bytes: u64,
    /// Queries per second with one query client, and with two at once, while ingest is paced.
    pub qps: (f64, f64),
    /// Aggregator RSS at the end, bytes.
    pub rss_bytes: u64,
    /// Aggregator peak RSS, bytes.
    pub peak_rss_bytes: u64,
    /// Bytes of the sled directory.
    pub store_bytes: u64,
    /// From starting the aggregator again on the full store until it answers with every node.
    pub restart: Duration,
    /// Reports sent again after reconnects (churn), errors received, agents' departures.
    pub resent: u64,
    /// Error messages the aggregator sent.
    pub errors: u64,
    /// Agents that left on purpose.
    pub departures: u64,
}

/// Runs one size.
pub async fn run_scale(run: &ScaleRun, progress: impl Fn(&str)) -> Result<ScaleFigures> {
    let fleet = Arc::new(Fleet::new(run.spec.clone()));
    let n = fleet.nodes.len();
    let data = tempfile::tempdir()?;
    let logs = tempfile::tempdir()?;
    let data_dir = data.path().join("sled");
    let mut args: Vec<String> = vec!["--data-dir".into(), data_dir.display().to_string()];
    args.extend(run.aggregator_args.iter().cloned());
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let aggregator = Aggregator::start(&run.aggregator, &arg_refs, logs.path())?;
    let pid = aggregator.pid();

    let connections = n.div_ceil(STREAMS_PER_CONNECTION);
    let mut channels = Vec::with_capacity(connections);
    for _ in 0..connections {
        channels.push(aggregator.channel().await?);
    }
    let control = Arc::new(Control::new());
    let counters = Arc::new(Counters::default());
    let started = Stopwatch::start();
    let fleet_task = tokio::spawn(sim::run(
        fleet.clone(),
        channels,
        control.clone(),
        counters.clone(),
    ));
    wait_until(Duration::from_secs(300), || {
        counters.planned.load(Ordering::Relaxed) == n
    })
    .await
    .with_context(|| {
        format!(
            "{} of {n} agents got a plan",
            counters.planned.load(Ordering::Relaxed)
        )
    })?;
    let registration = started.elapsed();
    progress(&format!(
        "{n} nodes: every agent holds a plan after {registration:.1?}"
    ));
    // Let the membership settle into the plans (they are recomputed on the aggregator's tick).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let targets_per_node = counters.plan_targets.load(Ordering::Relaxed) as f64 / n as f64;
    let probes_per_node_per_s =
        counters.plan_probes_milli.load(Ordering::Relaxed) as f64 / 1000.0 / n as f64;
    control
        .churn_per_mille
        .store(run.churn_per_mille, Ordering::Relaxed);

    let query_channel = query_channel(&format!("http://{}", aggregator.grpc)).await?;
    let (paced_ingest_per_s, paced, paced_cpu) =
        measure_phase(&fleet, &query_channel, &counters, run.phase, pid).await?;
    progress(&format!(
        "{n} nodes: {paced_ingest_per_s:.0} summaries/s at the plan's pace"
    ));
    let (paced_rss_bytes, paced_peak_rss_bytes) = rss(pid)?;
    let qps = (
        throughput(&aggregator.grpc.to_string(), fleet.spec.zones, 1, QPS_PHASE).await?,
        throughput(&aggregator.grpc.to_string(), fleet.spec.zones, 2, QPS_PHASE).await?,
    );
    progress(&format!(
        "{n} nodes: {:.0} queries/s with one client, {:.0} with two",
        qps.0, qps.1
    ));
    control.set_flood(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (flood_ingest_per_s, flooded, flood_cpu) =
        measure_phase(&fleet, &query_channel, &counters, run.phase, pid).await?;
    progress(&format!(
        "{n} nodes: {flood_ingest_per_s:.0} summaries/s flooding"
    ));
    control.set_flood(false);
    let (rss_bytes, peak_rss_bytes) = rss(pid)?;

    control.stop();
    tokio::time::timeout(Duration::from_secs(120), fleet_task)
        .await
        .context("the fleet did not stop within 120 s")???;
    aggregator.terminate()?;
    let store_bytes = dir_bytes(&data_dir)?;

    let restarted = Stopwatch::start();
    let aggregator = Aggregator::start(&run.aggregator, &arg_refs, logs.path())?;
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?)
        .max_decoding_message_size(256 << 20);
    loop {
        let nodes = count_nodes(&mut topology).await?;
        if nodes == n {
            break;
        }
        ensure!(
            restarted.elapsed() < Duration::from_secs(300),
            "after a restart the aggregator knows {nodes} of {n} nodes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let restart = restarted.elapsed();
    aggregator.terminate()?;
    Ok(ScaleFigures {
        nodes: n,
        zones: run.spec.zones,
        registration,
        targets_per_node,
        probes_per_node_per_s,
        paced_ingest_per_s,
        flood_ingest_per_s,
        paced,
        paced_cpu,
        flood_cpu,
        flooded,
        paced_rss_bytes,
        paced_peak_rss_bytes,
        qps,
        rss_bytes,
        peak_rss_bytes,
        store_bytes,
        restart,
        resent: counters.resent.load(Ordering::Relaxed),
        errors: counters.errors.load(Ordering::Relaxed),
        departures: counters.departures.load(Ordering::Relaxed),
    })
}

/// How long the one-client and two-client query rates are measured.
const QPS_PHASE: Duration = Duration::from_secs(8);

/// Queries answered per second by `clients` query loops at once, each on its own connection,
/// over `length`.
async fn throughput(grpc: &str, zones: usize, clients: usize, length: Duration) -> Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut loops = Vec::new();
    for _ in 0..clients {
        // Each on its own connection, as two schedulers would be.
        let channel = query_channel(&format!("http://{grpc}")).await?;
        loops.push(tokio::spawn(query_loop(channel, zones, stop.clone())));
    }
    let t0 = Stopwatch::start();
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    let mut calls = 0u64;
    for l in loops {
        calls += l.await??.values().map(Histogram::len).sum::<u64>();
    }
    Ok(calls as f64 / t0.elapsed().as_secs_f64())
}

/// Times the queries in a loop for `length` while the fleet reports; returns the durable ingest
/// rate over the same stretch, the latencies, and the CPU (cores) of the aggregator `pid` and of
/// this process.
async fn measure_phase(
    fleet: &Fleet,
    channel: &Channel,
    counters: &Counters,
    length: Duration,
    pid: u32,
) -> Result<(f64, BTreeMap<&'static str, Latency>, (f64, f64))> {
    let cpu_before = (cpu_seconds(pid)?, cpu_seconds(std::process::id())?);
    let stop = Arc::new(AtomicBool::new(false));
    let queries = tokio::spawn(query_loop(channel.clone(), fleet.spec.zones, stop.clone()));
    let before = counters.summaries_acked.load(Ordering::Relaxed);
    let t0 = Stopwatch::start();
    tokio::time::sleep(length).await;
    let acked = counters.summaries_acked.load(Ordering::Relaxed) - before;
    let elapsed = t0.elapsed().as_secs_f64();
    let rate = acked as f64 / elapsed;
    let cpu = (
        (cpu_seconds(pid)? - cpu_before.0) / elapsed,
        (cpu_seconds(std::process::id())? - cpu_before.1) / elapsed,
    );
    stop.store(true, Ordering::Relaxed);
    let histograms = queries.await??;
    let latencies = histograms
        .iter()
        .map(|(k, h)| (*k, Latency::of(h)))
        .collect();
    Ok((rate, latencies, cpu))
}

/// Calls the four queries one after another until `stop`, the zone of `GetMatrix` in turn among
/// `zones`,, timing each call as a client sees it
/// (gRPC on loopback included).
pub async fn query_loop(
    channel: Channel,
    zones: usize,
    stop: Arc<AtomicBool>,
) -> Result<BTreeMap<&'static str, Histogram<u64>>> {
    let mut client =
        v1::topology_client::TopologyClient::new(channel).max_decoding_message_size(256 << 20);
    let mut out: BTreeMap<&'static str, Histogram<u64>> = QUERIES
        .iter()
        .map(|q| Ok((*q, Histogram::new_with_bounds(1, 60_000_000, 3)?)))
        .collect::<Result<_>>()?;
    let mut zone = 0;
    while !stop.load(Ordering::Relaxed) {
        for q in QUERIES {
            let t = Stopwatch::start();
            match q {
                "RankNodes" | "RankNodes100" => {
                    let limit = if q == "RankNodes" { 0 } else { 100 };
                    let r = client
                        .rank_nodes(v1::RankNodesRequest {
                            limit,
                            ..Default::default()
                        })
                        .await
                        .context("RankNodes")?;
                    ensure!(!r.get_ref().nodes.is_empty(), "RankNodes ranked nothing");
                }
                "Place64" => {
                    let r = client
                        .place(v1::PlaceRequest {
                            workers: 64,
                            zone_policy: v1::ZonePolicy::PreferOne as i32,
                            ..Default::default()
                        })
                        .await
                        .context("Place of 64 workers")?;
                    ensure!(
                        r.get_ref().assignments.len() == 64,
                        "Place gave {} nodes for 64 workers",
                        r.get_ref().assignments.len()
                    );
                }
                "GetMatrix" => {
                    zone = (zone + 1) % zones;
                    client
                        .get_matrix(v1::GetMatrixRequest {
                            metric: v1::Metric::RttP50Us as i32,
                            zone: Fleet::zone_name(zone),
                            ..Default::default()
                        })
                        .await
                        .context("GetMatrix")?;
                }
                _ => {
                    client
                        .list_zones(v1::ListZonesRequest::default())
                        .await
                        .context("ListZones")?;
                }
            }
            let us = t.elapsed().as_micros() as u64;
            out.get_mut(q)
                .expect("every query has a histogram")
                .record(us.max(1))?;
        }
    }
    Ok(out)
}

/// A channel for queries: HTTP/2 flow-control windows that grow with the answers (as grpc-go's
/// do by default). With the fixed 64 KiB windows, an answer of a few hundred KiB (ListZones at
/// 50 zones, RankNodes of 5,000 nodes) waits for a window update per 64 KiB.
pub async fn query_channel(url: &str) -> Result<Channel> {
    tonic::transport::Endpoint::from_shared(url.to_owned())
        .with_context(|| format!("aggregator URL {url}"))?
        .http2_adaptive_window(true)
        .connect()
        .await
        .with_context(|| format!("connect to {url}"))
}

async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> Result<()> {
    let t0 = Stopwatch::start();
    while !done() {
        if t0.elapsed() > limit {
            bail!("not done after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// (VmRSS, VmHWM) of a process, bytes.
pub fn rss(pid: u32) -> Result<(u64, u64)> {
    let bytes = |key| status_kib(pid, key).map(|kib| (kib * 1024.0) as u64);
    Ok((bytes("VmRSS:")?, bytes("VmHWM:")?))
}

/// Bytes of the files under `dir`.
pub fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// The nodes the aggregator lists, every page followed (a page holds at most
/// `MAX_NODES_PAGE` nodes).
pub(crate) async fn count_nodes(
    topology: &mut v1::topology_client::TopologyClient<Channel>,
) -> Result<usize> {
    let mut count = 0;
    let mut page_token = String::new();
    loop {
        let page = topology
            .list_nodes(v1::ListNodesRequest {
                page_token,
                ..Default::default()
            })
            .await?
            .into_inner();
        count += page.nodes.len();
        if page.next_page_token.is_empty() {
            return Ok(count);
        }
        page_token = page.next_page_token;
    }
}
