//! The zonemesh stack inside a lab: the aggregator in the host's namespace (so that grpcurl and
//! schedulers on the host reach it), one agent in every node's namespace, reaching the
//! aggregator through the lab's control address.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use tonic::transport::Channel;
use zonemesh_proto::v1;

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

/// How far the matrix has filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fill {
    /// Directed pairs inside zones with a measured RTT.
    pub rtt_measured: usize,
    /// Directed pairs inside zones.
    pub rtt_total: usize,
    /// Directed pairs inside zones with a measured throughput.
    pub throughput_measured: usize,
    /// Directed zone pairs with figures (measured or estimated).
    pub zone_links: usize,
    /// Directed zone pairs.
    pub zone_links_total: usize,
    /// Nodes whose agent is connected.
    pub connected: usize,
    /// Nodes that are READY.
    pub ready: usize,
    /// Nodes.
    pub nodes: usize,
}

impl Fill {
    /// Every pair inside every zone has RTT and throughput, every zone pair has figures, and every
    /// node is READY.
    pub fn is_full(&self) -> bool {
        self.rtt_total > 0
            && self.rtt_measured == self.rtt_total
            && self.throughput_measured == self.rtt_total
            && self.zone_links == self.zone_links_total
            && self.ready == self.nodes
    }
}

/// Reads how far the matrix of the cluster `spec` has filled.
pub async fn fill(
    topology: &mut v1::topology_client::TopologyClient<Channel>,
    spec: &LabSpec,
) -> Result<Fill> {
    let mut f = Fill {
        nodes: spec.all_nodes().count(),
        ..Fill::default()
    };
    for zone in &spec.zones {
        let n = zone.nodes.len();
        f.rtt_total += n * (n - 1);
        for (metric, count) in [
            (v1::Metric::RttP50Us, &mut f.rtt_measured),
            (v1::Metric::ThroughputBps, &mut f.throughput_measured),
        ] {
            let m = topology
                .get_matrix(v1::GetMatrixRequest {
                    metric: metric as i32,
                    nodes: zone.nodes.clone(),
                    zone: String::new(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            let k = m.nodes.len();
            *count += (0..k * k)
                .filter(|i| i / k != i % k)
                .filter(|i| m.cells[*i].provenance == v1::Provenance::Measured as i32)
                .count();
        }
    }
    let zones = topology
        .list_zones(v1::ListZonesRequest::default())
        .await?
        .into_inner();
    let z = spec.zones.len();
    f.zone_links_total = z * (z - 1);
    f.zone_links = zones
        .links
        .iter()
        .filter(|l| l.src_zone != l.dst_zone)
        .filter(|l| {
            l.figures
                .as_ref()
                .is_some_and(|p| p.latency_provenance != v1::Provenance::Unknown as i32)
        })
        .count();
    let nodes = topology
        .list_nodes(v1::ListNodesRequest::default())
        .await?
        .into_inner();
    f.connected = nodes.nodes.iter().filter(|n| n.connected).count();
    f.ready = nodes
        .nodes
        .iter()
        .filter(|n| n.state == v1::NodeState::Ready as i32)
        .count();
    Ok(f)
}

/// Waits (at most `timeout`) until the matrix of the cluster `spec` is full, calling `progress`
/// with each new reading.
pub async fn wait_full(
    topology: &mut v1::topology_client::TopologyClient<Channel>,
    spec: &LabSpec,
    timeout: Duration,
    mut progress: impl FnMut(&Fill),
) -> Result<Fill> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = None;
    loop {
        // Until every agent has said hello, the aggregator does not know every node: not yet.
        let f = match fill(topology, spec).await {
            Ok(f) => f,
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing_free_note(&e);
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        if last != Some(f) {
            progress(&f);
            last = Some(f);
        }
        if f.is_full() {
            return Ok(f);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the matrix did not fill within {timeout:?}: {f:?}"
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
