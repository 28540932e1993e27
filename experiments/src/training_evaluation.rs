//! Does distributed training run faster when zonemesh places it? One lab per seed — three zones
//! of four nodes, different delays between the zones, one lossy and one slow node — measured by
//! the real zonemesh stack; then the same training workload placed by five strategies and timed,
//! beside the engine's prediction over zonemesh's measured matrix (evaluation v1; v2 is
//! [`crate::mpi_evaluation`]).
//!
//! The strategies:
//! - **default**: what kube-scheduler does without hints — the default topology spread
//!   constraints spread the pods over the zones, and among a zone's nodes (equally free here) the
//!   choice is arbitrary (seeded).
//! - **random**: any nodes.
//! - **zone-only**: one zone that holds the job, its nodes in any order (static topology
//!   schedulers: zone labels, no measurements).
//! - **zone-then-score**: the seed paper's — the zone whose best nodes score best, then those
//!   nodes by their score (`RankNodes` inside the zone).
//! - **zonemesh**: `Place` (one zone, the set whose worst pair is best).

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result};
use tonic::transport::Channel;
use zonemesh_lab::demo_cluster::FAST_AGGREGATOR_FLAGS;
use zonemesh_lab::stack::{Stack, StackOptions, wait_full, wait_quiet};
use zonemesh_lab::{Lab, LabSpec};
use zonemesh_proto::v1;

use crate::rng::Rng;
use crate::train::{self, Collective, Workload};

/// Placement strategies, in the report's order.
pub const STRATEGIES: [Strategy; 5] = [
    Strategy::Default,
    Strategy::Random,
    Strategy::ZoneOnly,
    Strategy::ZoneThenScore,
    Strategy::Zonemesh,
];

/// How the workers are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strategy {
    /// kube-scheduler's default spreading.
    Default,
    /// Random nodes.
    Random,
    /// One zone, nodes in any order.
    ZoneOnly,
    /// The seed paper: the best zone, then the best-scored nodes in it.
    ZoneThenScore,
    /// zonemesh `Place`.
    Zonemesh,
}

impl Strategy {
    /// Name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default (spread)",
            Self::Random => "random",
            Self::ZoneOnly => "zone-only",
            Self::ZoneThenScore => "zone-then-score",
            Self::Zonemesh => "zonemesh Place",
        }
    }
}

/// Zones and nodes of every evaluation lab.
pub const ZONES: [(&str, [&str; 4]); 3] = [
    ("zone-a", ["a1", "a2", "a3", "a4"]),
    ("zone-b", ["b1", "b2", "b3", "b4"]),
    ("zone-c", ["c1", "c2", "c3", "c4"]),
];
/// Loss of the lossy node.
pub const LOSSY_LOSS: f64 = 0.02;
/// Rate of the slow node, and of the others.
pub const SLOW_BPS: u64 = 100_000_000;
/// Rate of every other node.
pub const NODE_BPS: u64 = 1_000_000_000;

/// The lab of one seed: delays of 2, 6 and 10 ms between the zones in an order the seed chooses,
/// a lossy node and a slow node in different zones, 1 Gbit/s elsewhere.
pub fn lab_spec(seed: u64) -> (LabSpec, String, String) {
    let mut rng = Rng::new(seed);
    let us = Duration::from_micros;
    let mut delays = [2_000u64, 6_000, 10_000];
    rng.shuffle(&mut delays);
    let mut spec = LabSpec::new();
    for (zone, nodes) in ZONES {
        spec = spec.zone(zone, &nodes);
    }
    spec = spec
        .delay("zone-a", "zone-b", us(delays[0]), us(delays[0] / 40))
        .delay("zone-a", "zone-c", us(delays[1]), us(delays[1] / 40))
        .delay("zone-b", "zone-c", us(delays[2]), us(delays[2] / 40));
    let mut zones = [0usize, 1, 2];
    rng.shuffle(&mut zones);
    let lossy = ZONES[zones[0]].1[rng.below(4)].to_owned();
    let slow = ZONES[zones[1]].1[rng.below(4)].to_owned();
    spec = spec.node_loss(&lossy, LOSSY_LOSS);
    for (_, nodes) in ZONES {
        for n in nodes {
            spec = spec.node_rate(n, if n == slow { SLOW_BPS } else { NODE_BPS });
        }
    }
    spec.seed = seed;
    (spec, lossy, slow)
}

/// Every node, ranked by zonemesh (`RankNodes` without a filter).
async fn rank_all(
    topology: &mut v1::topology_client::TopologyClient<Channel>,
) -> Result<Vec<v1::RankedNode>> {
    Ok(topology
        .rank_nodes(v1::RankNodesRequest::default())
        .await
        .context("RankNodes")?
        .into_inner()
        .nodes)
}

/// The nodes `strategy` gives a job of `workers` workers, in rank order.
pub async fn place(
    strategy: Strategy,
    workers: usize,
    seed: u64,
    topology: &mut v1::topology_client::TopologyClient<Channel>,
) -> Result<Vec<String>> {
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(strategy as u64));
    let all: Vec<String> = ZONES
        .iter()
        .flat_map(|(_, nodes)| nodes.iter().map(|n| (*n).to_owned()))
        .collect();
    Ok(match strategy {
        Strategy::Default => {
            // Round robin over the zones (spread), an arbitrary free node in each.
            let mut zones: Vec<Vec<String>> = ZONES
                .iter()
                .map(|(_, nodes)| nodes.iter().map(|n| (*n).to_owned()).collect())
                .collect();
            rng.shuffle(&mut zones);
            for z in &mut zones {
                rng.shuffle(z);
            }
            (0..workers)
                .map(|i| zones[i % zones.len()][i / zones.len()].clone())
                .collect()
        }
        Strategy::Random => {
            let mut nodes = all;
            rng.shuffle(&mut nodes);
            nodes.truncate(workers);
            nodes
        }
        Strategy::ZoneOnly => {
            let (_, nodes) = ZONES[rng.below(ZONES.len())];
            let mut nodes: Vec<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
            rng.shuffle(&mut nodes);
            nodes.truncate(workers);
            nodes
        }
        Strategy::ZoneThenScore => {
            // One ranking of every node (scores comparable across zones), then per zone its best
            // `workers` nodes; the zone whose best nodes score best on average wins.
            let ranked = rank_all(topology).await?;
            let mut best: Option<(f64, Vec<String>)> = None;
            for (zone, _) in ZONES {
                let top: Vec<&v1::RankedNode> = ranked
                    .iter()
                    .filter(|r| r.zone == zone)
                    .take(workers)
                    .collect();
                let score = top.iter().map(|r| r.score).sum::<f64>() / workers as f64;
                if top.len() == workers && best.as_ref().is_none_or(|(b, _)| score > *b) {
                    best = Some((score, top.iter().map(|r| r.node.clone()).collect()));
                }
            }
            best.context("no zone holds the job")?.1
        }
        Strategy::Zonemesh => topology
            .place(v1::PlaceRequest {
                workers: workers as u32,
                zone_policy: v1::ZonePolicy::PreferOne as i32,
                ..Default::default()
            })
            .await
            .context("Place")?
            .into_inner()
            .assignments
            .into_iter()
            .map(|a| a.node)
            .collect(),
    })
}

/// One strategy's runs on one lab.
#[derive(Debug, Clone)]
pub struct Row {
    /// The lab's seed.
    pub seed: u64,
    /// Ring or parameter server.
    pub collective: Collective,
    /// The strategy.
    pub strategy: Strategy,
    /// Its nodes, in rank order.
    pub nodes: Vec<String>,
    /// Predicted iteration time.
    pub predicted: Duration,
    /// Measured iteration times; empty when the run failed.
    pub times: Vec<Duration>,
    /// Why the run failed, if it did.
    pub failure: Option<String>,
}

impl Row {
    /// Mean of the measured iterations.
    pub fn mean(&self) -> Option<Duration> {
        (!self.times.is_empty())
            .then(|| self.times.iter().sum::<Duration>() / self.times.len() as u32)
    }
}

/// What one evaluation run uses.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Lab seeds.
    pub seeds: Vec<u64>,
    /// Workers per job.
    pub workers: usize,
    /// Bytes of a gradient.
    pub gradient_bytes: usize,
    /// Timed iterations per run.
    pub iterations: u32,
    /// Collectives to run.
    pub collectives: Vec<Collective>,
}

/// One seed: builds the lab, lets zonemesh measure it, places with every strategy, and runs and
/// predicts every collective. `progress` hears what is happening.
pub async fn evaluate_seed(
    plan: &Plan,
    seed: u64,
    options: &StackOptions,
    progress: &mut impl FnMut(&str),
) -> Result<(Vec<Row>, String, String)> {
    let (spec, lossy, slow) = lab_spec(seed);
    let mut lab = Lab::build(spec)?;
    let mut options = options.clone();
    options.aggregator_flags = FAST_AGGREGATOR_FLAGS.iter().map(|s| (*s).into()).collect();
    let mut stack = Stack::start(&mut lab, &options)?;
    let mut topology = stack.topology().await?;
    progress(&format!(
        "seed {seed}: lossy {lossy}, slow {slow}; zonemesh is measuring the lab"
    ));
    settle(&lab, &stack, &mut topology, seed, progress).await?;

    let mut placements = Vec::new();
    for strategy in STRATEGIES {
        let nodes = place(strategy, plan.workers, seed, &mut topology).await?;
        progress(&format!(
            "seed {seed}: {} -> {}",
            strategy.as_str(),
            nodes.join(",")
        ));
        placements.push((strategy, nodes));
    }
    // What zonemesh made of the nodes when it placed them, for whoever reads a surprising choice.
    let ranked = rank_all(&mut topology).await?;
    progress(&format!(
        "seed {seed}: RankNodes {}",
        describe_ranking(&ranked)
    ));
    let figures = Figures::read(&mut topology, &placements).await?;
    // The agents' probes would share the links with the job: stop them first.
    for (_, agent) in std::mem::take(&mut stack.agents) {
        agent.terminate()?;
    }
    let mut rows = Vec::new();
    for &collective in &plan.collectives {
        for (strategy, nodes) in &placements {
            let workload = Workload {
                collective,
                gradient_bytes: plan.gradient_bytes,
                iterations: plan.iterations,
                timeout: Duration::from_secs(60),
            };
            let predicted =
                figures.predict(lab.spec(), collective, plan.gradient_bytes as u64, nodes);
            let run = {
                let lab = &lab;
                let nodes = nodes.clone();
                let workload = workload.clone();
                tokio::task::block_in_place(move || train::run(lab, &nodes, &workload))
            };
            let (times, failure) = match run {
                Ok(t) => (t, None),
                Err(e) => (Vec::new(), Some(format!("{e:#}"))),
            };
            progress(&format!(
                "seed {seed}: {} {}: {:?} (predicted {predicted:.2?})",
                collective.as_str(),
                strategy.as_str(),
                times
            ));
            rows.push(Row {
                seed,
                collective,
                strategy: *strategy,
                nodes: nodes.clone(),
                predicted,
                times,
                failure,
            });
        }
    }
    drop(stack);
    lab.remove()?;
    Ok((rows, lossy, slow))
}

/// Waits until zonemesh's matrix of the lab is full, the throughput tests are over, and it is
/// full again.
async fn settle(
    lab: &Lab,
    stack: &Stack,
    topology: &mut v1::topology_client::TopologyClient<Channel>,
    seed: u64,
    progress: &mut impl FnMut(&str),
) -> Result<()> {
    wait_full(topology, lab.spec(), Duration::from_secs(300), |f| {
        progress(&format!("seed {seed}: {f:?}"))
    })
    .await?;
    wait_quiet(
        &stack.aggregator,
        Duration::from_secs(5),
        Duration::from_secs(120),
    )
    .await?;
    // Full again, every node READY: on two busy cores a node's figures can lapse while the last
    // throughput tests run, and a strategy placed then would be judged on a lab half seen.
    wait_full(topology, lab.spec(), Duration::from_secs(120), |f| {
        progress(&format!("seed {seed}: before placing: {f:?}"))
    })
    .await?;
    Ok(())
}

/// A ranking in one line: every node's score, state and figures.
fn describe_ranking(ranked: &[v1::RankedNode]) -> String {
    ranked
        .iter()
        .map(|r| {
            format!(
                "{} {:.3} {:?} ({:.0} µs, loss {:.2} %, {:.0} Mbit/s)",
                r.node,
                r.score,
                r.state(),
                r.rtt_p50_us,
                100.0 * r.loss_ratio,
                r.throughput_bps / 1e6
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// zonemesh's figures that the predictions use, read before the agents stop.
#[derive(Debug, Default)]
struct Figures {
    /// Every ordered pair of a placement: RTT (µs), loss (when measured), throughput (bit/s).
    paths: HashMap<(String, String), (f64, Option<f64>, f64)>,
    /// Each node's own loss: at most that of its cleanest measured path (a node is no lossier
    /// than a path through it).
    own_loss: HashMap<String, f64>,
    /// Each node's own capacity: its measured throughput inside its zone.
    capacity: HashMap<String, f64>,
}

impl Figures {
    /// Reads the figures of the pairs of every placement, and of every node.
    async fn read(
        topology: &mut v1::topology_client::TopologyClient<Channel>,
        placements: &[(Strategy, Vec<String>)],
    ) -> Result<Self> {
        let mut figures = Self::default();
        for (_, nodes) in placements {
            for a in nodes {
                for b in nodes {
                    let key = (a.clone(), b.clone());
                    if a == b || figures.paths.contains_key(&key) {
                        continue;
                    }
                    let f = topology
                        .get_path(v1::GetPathRequest {
                            src: a.clone(),
                            dst: b.clone(),
                        })
                        .await?
                        .into_inner()
                        .figures
                        .unwrap_or_default();
                    let rtt = f.rtt.map_or(0.0, |r| r.p50_us);
                    let measured = f.latency_provenance == v1::Provenance::Measured as i32;
                    figures.paths.insert(
                        key,
                        (rtt, measured.then_some(f.loss_ratio), f.throughput_bps),
                    );
                }
            }
        }
        for (zone, _) in ZONES {
            let m = topology
                .get_matrix(v1::GetMatrixRequest {
                    metric: v1::Metric::LossRatio as i32,
                    zone: zone.into(),
                    ..Default::default()
                })
                .await
                .with_context(|| format!("GetMatrix of {zone}"))?
                .into_inner();
            let k = m.nodes.len();
            for (i, cell) in m.cells.iter().enumerate() {
                let (src, dst) = (i / k.max(1), i % k.max(1));
                if src == dst || cell.provenance != v1::Provenance::Measured as i32 {
                    continue;
                }
                for n in [&m.nodes[src], &m.nodes[dst]] {
                    let e = figures.own_loss.entry(n.clone()).or_insert(1.0);
                    *e = e.min(cell.value);
                }
            }
        }
        figures.capacity = topology
            .list_nodes(v1::ListNodesRequest::default())
            .await?
            .into_inner()
            .nodes
            .into_iter()
            .map(|n| (n.name, n.zone_throughput_bps))
            .collect();
        Ok(figures)
    }

    /// The engine's predicted iteration time of `collective` over `bytes` on `nodes` (in rank
    /// order) of the lab `spec`, over these figures: a pair zonemesh did not measure loses what
    /// its two ends lose (not its zones' mean, which would spread a lossy node's loss over its
    /// whole zone), and a node's own capacity is its measured throughput inside its zone.
    fn predict(
        &self,
        spec: &LabSpec,
        collective: Collective,
        bytes: u64,
        nodes: &[String],
    ) -> Duration {
        let link = |a: &str, b: &str| {
            let (rtt, loss, tput) = self
                .paths
                .get(&(a.to_owned(), b.to_owned()))
                .copied()
                .unwrap_or((0.0, None, 0.0));
            let own = |n: &str| self.own_loss.get(n).copied().unwrap_or(0.0);
            crate::collective_time::Link::wire(
                rtt,
                loss.unwrap_or_else(|| 1.0 - (1.0 - own(a)) * (1.0 - own(b))),
                if tput > 0.0 { tput } else { f64::INFINITY },
            )
        };
        let node_bps = |n: &str| {
            self.capacity
                .get(n)
                .copied()
                .filter(|c| *c > 0.0)
                .unwrap_or(f64::INFINITY)
        };
        let zone = |n: &str| spec.zone_of(n).unwrap_or_default().to_owned();
        let all: Vec<String> = spec.all_nodes().map(str::to_owned).collect();
        let collective = match collective {
            Collective::Ring => crate::collective_time::Collective::RingAllReduce,
            Collective::ParameterServer => crate::collective_time::Collective::ParameterServer,
        };
        let network = crate::collective_time::Named {
            nodes: &all,
            zone: &zone,
            link: &link,
            egress_bps: &node_bps,
            ingress_bps: &node_bps,
            zone_bps: &crate::collective_time::no_zone_limit,
        };
        Duration::from_secs_f64(network.predict(collective, bytes, nodes).seconds)
    }
}
