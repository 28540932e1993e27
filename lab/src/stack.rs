//! The zonemesh stack inside a lab: the aggregator in the host's namespace (so that grpcurl and
//! schedulers on the host reach it), one agent in every node's namespace, reaching the
//! aggregator through the lab's control address.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use tonic::transport::Channel;
use zonemesh_proto::v1;

use crate::fill::{Fill, Pair, Reading, Size};
use crate::process::{Agent, Aggregator};
use crate::{Lab, LabSpec};

/// Where the binaries are and how to run them.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// `zonemesh-aggregator`.
    pub aggregator: PathBuf,
    /// `zonemesh-agent`.
    pub agent: PathBuf,
    /// The aggregator's gRPC address on the host (port 0: any).
    pub listen: SocketAddr,
    /// The aggregator's HTTP address on the host.
    pub http_listen: SocketAddr,
    /// sled directory; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// More aggregator flags (probe timing and the like).
    pub aggregator_flags: Vec<String>,
    /// More flags for every agent.
    pub agent_flags: Vec<String>,
    /// Where the processes' logs go.
    pub log_dir: PathBuf,
}

impl StackOptions {
    /// Options with the binaries in `dir`, everything else default (ephemeral loopback ports, in
    /// memory, logs in `log_dir`).
    pub fn new(dir: &Path, log_dir: &Path) -> Self {
        Self {
            aggregator: dir.join("zonemesh-aggregator"),
            agent: dir.join("zonemesh-agent"),
            listen: "127.0.0.1:0".parse().expect("address"),
            http_listen: "127.0.0.1:0".parse().expect("address"),
            data_dir: None,
            aggregator_flags: Vec::new(),
            agent_flags: Vec::new(),
            log_dir: log_dir.to_owned(),
        }
    }
}

/// A running aggregator and its agents; all stopped when dropped.
#[derive(Debug)]
pub struct Stack {
    /// The aggregator.
    pub aggregator: Aggregator,
    /// The agents by node name.
    pub agents: BTreeMap<String, Agent>,
    /// The aggregator's URL as the agents see it.
    pub agent_url: String,
}

impl Stack {
    /// Starts the aggregator, exposes it to the lab, and starts one agent per node.
    pub fn start(lab: &mut Lab, options: &StackOptions) -> Result<Self> {
        let aggregator = Self::start_aggregator(options)?;
        let control = lab.expose(aggregator.grpc)?;
        let agent_url = format!("http://{control}");
        let mut agents = BTreeMap::new();
        let nodes: Vec<_> = lab.nodes().cloned().collect();
        for node in nodes {
            let address = node.address.to_string();
            let metrics = format!("{address}:7403");
            let mut args: Vec<&str> = vec![
                "--zone",
                &node.zone,
                "--address",
                &address,
                "--aggregator",
                &agent_url,
                "--metrics-listen",
                &metrics,
            ];
            args.extend(options.agent_flags.iter().map(String::as_str));
            let agent = Agent::start(
                lab.command(&node.name, &options.agent),
                Some(&node.netns),
                &node.name,
                &args,
                &options.log_dir,
            )
            .with_context(|| format!("starting the agent of {}", node.name))?;
            agents.insert(node.name.clone(), agent);
        }
        Ok(Self {
            aggregator,
            agents,
            agent_url,
        })
    }

    /// Without a lab (no root): the aggregator and one agent per node of `spec` on loopback
    /// addresses `127.77.<zone>.<10 + i>` of the host, without impairments.
    pub fn start_loopback(spec: &LabSpec, options: &StackOptions) -> Result<Self> {
        let aggregator = Self::start_aggregator(options)?;
        let agent_url = format!("http://{}", aggregator.grpc);
        let mut agents = BTreeMap::new();
        for (z, zone) in spec.zones.iter().enumerate() {
            for (i, node) in zone.nodes.iter().enumerate() {
                let address = loopback_address(z, i).to_string();
                let metrics = format!("{address}:0");
                let mut args: Vec<&str> = vec![
                    "--zone",
                    &zone.name,
                    "--address",
                    &address,
                    "--aggregator",
                    &agent_url,
                    "--metrics-listen",
                    &metrics,
                ];
                args.extend(options.agent_flags.iter().map(String::as_str));
                let agent = Agent::start(
                    std::process::Command::new(&options.agent),
                    None,
                    node,
                    &args,
                    &options.log_dir,
                )
                .with_context(|| format!("starting the agent of {node}"))?;
                agents.insert(node.clone(), agent);
            }
        }
        Ok(Self {
            aggregator,
            agents,
            agent_url,
        })
    }

    fn start_aggregator(options: &StackOptions) -> Result<Aggregator> {
        let listen = options.listen.to_string();
        let http = options.http_listen.to_string();
        let data = options
            .data_dir
            .as_ref()
            .map(|d| d.to_string_lossy().into_owned());
        let mut args: Vec<&str> = vec!["--listen", &listen, "--http-listen", &http];
        match &data {
            Some(d) => args.extend(["--data-dir", d]),
            None => args.push("--in-memory"),
        }
        args.extend(options.aggregator_flags.iter().map(String::as_str));
        Aggregator::start(&options.aggregator, &args, &options.log_dir)
            .context("starting zonemesh-aggregator")
    }

    /// A Topology client of the aggregator.
    pub async fn topology(&self) -> Result<v1::topology_client::TopologyClient<Channel>> {
        Ok(v1::topology_client::TopologyClient::new(
            self.aggregator.channel().await?,
        ))
    }
}

/// The host loopback address of node `i` of zone `z` when there is no lab.
pub fn loopback_address(z: usize, i: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, 77, z as u8 + 1, i as u8 + 10)
}

/// Reads how far the matrix of the cluster `spec` has filled (one reading).
pub async fn fill(
    topology: &mut v1::topology_client::TopologyClient<Channel>,
    spec: &LabSpec,
) -> Result<Fill> {
    let mut fill = Fill::new(Size::of(spec));
    fill.observe(read(topology, spec).await?);
    Ok(fill)
}

/// What the aggregator shows of the cluster `spec` now: its matrices inside every zone, its zone
/// links and its nodes.
async fn read(
    topology: &mut v1::topology_client::TopologyClient<Channel>,
    spec: &LabSpec,
) -> Result<Reading> {
    let mut reading = Reading::default();
    for zone in &spec.zones {
        for metric in [v1::Metric::RttP50Us, v1::Metric::ThroughputBps] {
            let m = topology
                .get_matrix(v1::GetMatrixRequest {
                    metric: metric as i32,
                    nodes: zone.nodes.clone(),
                    zone: String::new(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            let pairs = if metric == v1::Metric::RttP50Us {
                &mut reading.rtt
            } else {
                &mut reading.throughput
            };
            pairs.extend(measured_pairs(&m));
        }
    }
    let zones = topology
        .list_zones(v1::ListZonesRequest::default())
        .await?
        .into_inner();
    reading.zone_links = zones
        .links
        .into_iter()
        .filter(|l| l.src_zone != l.dst_zone)
        .filter(|l| {
            l.figures
                .as_ref()
                .is_some_and(|p| p.latency_provenance != v1::Provenance::Unknown as i32)
        })
        .map(|l| (l.src_zone, l.dst_zone))
        .collect();
    let nodes = topology
        .list_nodes(v1::ListNodesRequest::default())
        .await?
        .into_inner()
        .nodes;
    for n in nodes {
        if n.state == v1::NodeState::Ready as i32 {
            reading.ready.insert(n.name.clone());
        }
        if n.connected {
            reading.connected.insert(n.name);
        }
    }
    Ok(reading)
}

/// The directed pairs (off the diagonal) that the matrix `m` shows measured.
fn measured_pairs(m: &v1::GetMatrixResponse) -> BTreeSet<Pair> {
    let k = m.nodes.len();
    (0..k * k)
        .filter(|i| i / k != i % k)
        .filter(|i| {
            m.cells
                .get(*i)
                .is_some_and(|c| c.provenance == v1::Provenance::Measured as i32)
        })
        .map(|i| (m.nodes[i / k].clone(), m.nodes[i % k].clone()))
        .collect()
}

/// Waits (at most `timeout`) until the matrix of the cluster `spec` is full, calling `progress`
/// with each new reading.
pub async fn wait_full(
    topology: &mut v1::topology_client::TopologyClient<Channel>,
    spec: &LabSpec,
    timeout: Duration,
    progress: impl FnMut(&Fill),
) -> Result<Fill> {
    wait_fill(topology, spec, timeout, progress, Fill::is_full).await
}

/// Waits (at most `timeout`) until `done` says the fill is enough, calling `progress` with each
/// new reading ([`wait_full`]; or [`Fill::has_seen_all`] where throughput tests run all the
/// time and some path is always under one).
pub async fn wait_fill(
    topology: &mut v1::topology_client::TopologyClient<Channel>,
    spec: &LabSpec,
    timeout: Duration,
    mut progress: impl FnMut(&Fill),
    done: impl Fn(&Fill) -> bool,
) -> Result<Fill> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut fill = Fill::new(Size::of(spec));
    let mut last: Option<Fill> = None;
    loop {
        // Until every agent has said hello, the aggregator does not know every node: not yet.
        match read(topology, spec).await {
            Ok(reading) => fill.observe(reading),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing_free_note(&e);
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(e) => return Err(e),
        }
        if last.as_ref() != Some(&fill) {
            progress(&fill);
            last = Some(fill.clone());
        }
        if done(&fill) {
            return Ok(fill);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the matrix did not fill within {timeout:?}: {fill:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// An error while the matrix fills is expected (nodes not registered yet); it is only shown when
/// `ZONEMESH_LAB_DEBUG` is set.
fn tracing_free_note(e: &anyhow::Error) {
    if std::env::var_os("ZONEMESH_LAB_DEBUG").is_some() {
        eprintln!("matrix not readable yet: {e:#}");
    }
}

/// Waits (at most `timeout`) until the aggregator has granted no throughput test for `quiet`:
/// from then on its latency figures (over a loss window no longer than `quiet`) hold no cross
/// traffic of tests between other nodes either.
pub async fn wait_quiet(aggregator: &Aggregator, quiet: Duration, timeout: Duration) -> Result<()> {
    let http = aggregator.http;
    let grants = move || -> Result<f64> {
        let text = crate::process::http_get(http, "/metrics")?;
        text.lines()
            .find_map(|l| l.strip_prefix("zonemesh_throughput_grants_total "))
            .context("zonemesh_throughput_grants_total in /metrics")?
            .trim()
            .parse()
            .context("grants")
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = grants()?;
    let mut since = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = grants()?;
        if now != last {
            last = now;
            since = tokio::time::Instant::now();
        } else if since.elapsed() >= quiet {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "throughput tests still being granted after {timeout:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3-node zone's matrix with the directed pairs `measured` (by cell index) measured.
    fn matrix(measured: &[usize]) -> v1::GetMatrixResponse {
        let cell = |i| v1::MatrixCell {
            provenance: if measured.contains(&i) {
                v1::Provenance::Measured
            } else {
                v1::Provenance::Unknown
            } as i32,
            ..Default::default()
        };
        v1::GetMatrixResponse {
            nodes: vec!["a1".into(), "a2".into(), "a3".into()],
            cells: (0..9).map(cell).collect(),
            ..Default::default()
        }
    }

    /// A matrix's cells are read row by row; the diagonal (cells 0, 4 and 8) is a node to
    /// itself and never counts.
    #[test]
    fn the_measured_pairs_of_a_matrix() {
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        let cases: [(&[usize], Vec<Pair>); 4] = [
            (&[], vec![]),
            (&[0, 4, 8], vec![]),
            (&[1, 5], vec![pair("a1", "a2"), pair("a2", "a3")]),
            (&[0, 3, 7], vec![pair("a2", "a1"), pair("a3", "a2")]),
        ];
        for (cells, want) in cases {
            let got: Vec<Pair> = measured_pairs(&matrix(cells)).into_iter().collect();
            assert_eq!(got, want, "cells {cells:?}");
        }
    }
}
