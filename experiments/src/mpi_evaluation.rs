//! Evaluation v2: real Open MPI collectives (the all-reduce; in (g) the all-to-all and the
//! parameter-server exchange) placed by eight strategies on the labs of issues 18's and 27's
//! scenarios ([`crate::scenarios`]). One lab per scenario and seed:
//!
//! 1. the lab is built and the zonemesh stack measures it until the matrix is full and no
//!    throughput test runs;
//! 2. every strategy places the job (the size-aware ones once per gradient size and collective),
//!    and zonemesh's figures of every path are read (for its predicted time of every placement);
//! 3. the agents stop (their probes would share the links with the job), and every distinct
//!    placement runs the scenario's programs under `mpirun` ([`crate::mpi`]) at every size (the
//!    all-reduce with the forced ring and with Open MPI's own choice), several times, the
//!    placements interleaved so that a slow spell of the machine falls on all of them;
//! 4. beside it, the lab's own TCP ring and parameter-server workload ([`crate::train`]) runs on
//!    the same placements (once each: it is the earlier evaluation's workload, kept for
//!    comparison).
//!
//! Everything measured goes into a [`LabResult`] (JSON), from which the report is written.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use tonic::transport::Channel;
use zonemesh_domain::stats::median_duration;
use zonemesh_lab::demo_cluster::FAST_AGGREGATOR_FLAGS;
use zonemesh_lab::stack::{Stack, StackOptions, wait_full, wait_quiet};
use zonemesh_lab::{Lab, LabSpec};
use zonemesh_proto::v1;

use crate::collective_time::{Collective, Link};
use crate::machine;
use crate::mpi::{self, Algorithm, Programs};
use crate::rng::Rng;
use crate::scenarios::{self, Setup};
use crate::train::{self, Workload};

/// How a job is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Strategy {
    /// kube-scheduler's default zone spreading.
    Spread,
    /// Any free slots.
    Random,
    /// The seed paper: the best-scored zone, then its best-scored nodes.
    ZoneThenScore,
    /// Fewest zones by labels, ties by node name (Volcano hard tier, Kueue required topology).
    LabelsOnly,
    /// Fewest zones by labels, ties at random: [`LABEL_DRAWS`] seeded draws per lab.
    LabelsRandom,
    /// zonemesh `Place` without the job (worst pair).
    ZonemeshToday,
    /// zonemesh `Place` with the job's collective and bytes per iteration (predicted time).
    ZonemeshPredicted,
    /// The exhaustive optimum of the predicted time over the truth the lab injected: a model's
    /// best, not a measured one (see [`Confirmation`]).
    Oracle,
}

/// Draws of [`Strategy::LabelsRandom`] per lab.
pub const LABEL_DRAWS: u32 = 5;

/// Sets the model over the injected truth ranks best, run beside the strategies' own in search
/// of the measured best.
pub const MODEL_BEST_SETS: usize = 4;

/// Every strategy, in the report's order.
pub const STRATEGIES: [Strategy; 8] = [
    Strategy::Spread,
    Strategy::Random,
    Strategy::ZoneThenScore,
    Strategy::LabelsOnly,
    Strategy::LabelsRandom,
    Strategy::ZonemeshToday,
    Strategy::ZonemeshPredicted,
    Strategy::Oracle,
];

impl Strategy {
    /// Name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spread => "kube-scheduler spread",
            Self::Random => "random",
            Self::ZoneThenScore => "zone-then-score",
            Self::LabelsOnly => "labels only (fewest zones, ties by name)",
            Self::LabelsRandom => "labels only (fewest zones, random ties)",
            Self::ZonemeshToday => "zonemesh today (worst pair)",
            Self::ZonemeshPredicted => "zonemesh predicted-time",
            Self::Oracle => "model oracle (best by the model over the truth)",
        }
    }

    /// Short name for flags.
    pub fn key(self) -> &'static str {
        match self {
            Self::Spread => "spread",
            Self::Random => "random",
            Self::ZoneThenScore => "zone-then-score",
            Self::LabelsOnly => "labels",
            Self::LabelsRandom => "labels-random",
            Self::ZonemeshToday => "zonemesh-today",
            Self::ZonemeshPredicted => "zonemesh-predicted",
            Self::Oracle => "oracle",
        }
    }

    /// From its short name.
    pub fn from_key(s: &str) -> Option<Self> {
        STRATEGIES.into_iter().find(|x| x.key() == s)
    }

    /// Whether its placement depends on the job: its bytes and its collective.
    pub fn knows_the_job(self) -> bool {
        matches!(self, Self::ZonemeshPredicted | Self::Oracle)
    }
}

/// What one evaluation runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Strategies to place with.
    pub strategies: Vec<Strategy>,
    /// Gradient sizes, bytes.
    pub sizes: Vec<u64>,
    /// What the runs run; empty: the scenario's own ([`scenarios::Scenario::algorithms`]).
    pub algorithms: Vec<Algorithm>,
    /// `mpirun`s per placement and size with the scenario's jobs (the forced ring; the
    /// all-to-all and the parameter server).
    pub runs: u32,
    /// `mpirun`s per placement and size with Open MPI's own choice (the second variant).
    pub choice_runs: u32,
    /// Also run the lab's TCP ring and parameter-server workload on the placements.
    pub tcp_workload: bool,
    /// The model's best sets over the truth to run beside the strategies' (0: none).
    pub model_sets: usize,
    /// Run the fastest set again beside zonemesh's to confirm it.
    pub confirm: bool,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            strategies: STRATEGIES.to_vec(),
            sizes: scenarios::SIZES.to_vec(),
            algorithms: Vec::new(),
            runs: 5,
            choice_runs: 3,
            tcp_workload: true,
            model_sets: MODEL_BEST_SETS,
            confirm: true,
        }
    }
}

impl Plan {
    /// `mpirun`s per set with `algorithm`.
    pub fn runs_of(&self, algorithm: Algorithm) -> u32 {
        match algorithm {
            Algorithm::OpenMpiChoice => self.choice_runs,
            Algorithm::Ring | Algorithm::AllToAll | Algorithm::ParameterServer => self.runs,
        }
    }

    /// What runs on the lab of `setup`: the plan's algorithms, or the scenario's.
    pub fn algorithms_for(&self, setup: &Setup) -> Vec<Algorithm> {
        if self.algorithms.is_empty() {
            setup.scenario.algorithms().to_vec()
        } else {
            self.algorithms.clone()
        }
    }

    /// The collectives the jobs on `setup`'s lab are placed for.
    pub fn collectives_for(&self, setup: &Setup) -> Vec<Collective> {
        Algorithm::collectives(&self.algorithms_for(setup))
    }
}

/// Timed iterations and warm-ups of one `mpirun` at `bytes`: enough iterations that a run's
/// median is steady, few enough that a run through the slow node stays within seconds.
pub fn iterations(bytes: u64) -> (u32, u32) {
    if bytes >= 4 << 20 { (2, 1) } else { (20, 3) }
}

/// zonemesh's figures of one path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathFigure {
    /// Source node.
    pub src: String,
    /// Destination node.
    pub dst: String,
    /// Median RTT, µs (0: unknown).
    pub rtt_us: f64,
    /// Loss ratio.
    pub loss: f64,
    /// Throughput, bit/s (0: unknown).
    pub throughput_bps: f64,
    /// RTT and loss were measured (not estimated).
    pub latency_measured: bool,
    /// Throughput was measured (not estimated).
    pub throughput_measured: bool,
    /// Median timed message exchange, µs (absent in results from before the agents timed them).
    #[serde(default)]
    pub exchange_p50_us: Option<f64>,
    /// Mean timed message exchange, µs.
    #[serde(default)]
    pub exchange_mean_us: Option<f64>,
    /// Share of segments the throughput tests retransmitted.
    #[serde(default)]
    pub retransmit_ratio: Option<f64>,
}

impl PathFigure {
    /// As a link to predict over, with its timed exchanges where measured, as the engine's
    /// network gives it; an unknown throughput does not limit.
    pub fn link(&self) -> Link {
        let wire = self.wire_link();
        match (self.exchange_p50_us, self.exchange_mean_us) {
            (Some(p50), Some(mean)) => wire.with_exchanges(p50, mean),
            _ => wire,
        }
    }

    /// As a link of its RTT, loss and throughput alone (the model before the agents timed
    /// exchanges).
    pub fn wire_link(&self) -> Link {
        let rate = if self.throughput_bps > 0.0 {
            self.throughput_bps
        } else {
            f64::INFINITY
        };
        Link::wire(self.rtt_us, self.loss, rate)
    }
}

/// zonemesh's limits of one node's own link (the engine's model, as `ListNodes` answers them):
/// what `Place` prices a job's concurrent flows with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeCaps {
    /// The node.
    pub node: String,
    /// The most it sends, bit/s (`None`: no test shows a limit).
    pub egress_bps: Option<f64>,
    /// The most it receives, bit/s.
    pub ingress_bps: Option<f64>,
}

/// One strategy's placement for one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// The strategy.
    pub strategy: Strategy,
    /// The bytes per iteration it was placed for.
    pub bytes: u64,
    /// The collective it was placed for (a strategy that does not know the job places once, and
    /// the placement is repeated for every collective).
    #[serde(default)]
    pub collective: Collective,
    /// Node of every rank, in rank order (empty when placing failed).
    pub ranks: Vec<String>,
    /// The collective's predicted time over zonemesh's figures, seconds.
    pub predicted_s: Option<f64>,
    /// What `Place` itself predicted (predicted-time strategy only).
    pub place_predicted_s: Option<f64>,
    /// The collective's predicted time over the lab's truth, seconds.
    #[serde(rename = "truth_model_s")]
    pub truth_predicted_s: f64,
    /// How many of the figures behind `predicted_s` were estimated (not measured).
    pub estimated_figures: u32,
    /// Why placing failed, if it did.
    pub failure: Option<String>,
    /// Which draw of a strategy that draws ([`Strategy::LabelsRandom`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<u32>,
}

/// A set the model over the injected truth ranks among the best, run beside the strategies'.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Bytes per iteration.
    pub bytes: u64,
    /// The collective.
    #[serde(default)]
    pub collective: Collective,
    /// Node of every rank, in the model's best order.
    pub ranks: Vec<String>,
    /// Its predicted time over the truth, seconds.
    pub truth_predicted_s: f64,
    /// Its place in the model's order (1: the model oracle's set).
    pub model_rank: u32,
}

/// The fastest set of one size and algorithm, rerun interleaved with zonemesh's, as often, to
/// confirm it: the measured best that zonemesh's regret is reported against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// Gradient size.
    pub bytes: u64,
    /// What ran.
    pub algorithm: Algorithm,
    /// The fastest set of the first round of runs.
    pub best: Vec<String>,
    /// zonemesh predicted-time's set.
    pub zonemesh: Vec<String>,
    /// Timed iterations of every confirming run of `best` (none when it is zonemesh's set).
    pub best_runs: Vec<Vec<f64>>,
    /// Timed iterations of every confirming run of zonemesh's set, interleaved with them.
    pub zonemesh_runs: Vec<Vec<f64>>,
    /// Every failed confirming run's error.
    pub failures: Vec<String>,
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MpiRecord {
    /// Node of every rank.
    pub ranks: Vec<String>,
    /// Bytes per iteration.
    pub bytes: u64,
    /// What ran.
    pub algorithm: Algorithm,
    /// Timed iterations of every successful run, seconds.
    pub runs: Vec<Vec<f64>>,
    /// Every failed run's error.
    pub failures: Vec<String>,
}

/// The lab's TCP workload on one placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpRecord {
    /// Node of every worker (the parameter server on the first).
    pub ranks: Vec<String>,
    /// Gradient size.
    pub bytes: u64,
    /// Ring or parameter server.
    pub collective: Collective,
    /// Timed iterations, seconds (empty when it failed or did not run).
    pub iterations: Vec<f64>,
    /// Why it failed or did not run.
    pub failure: Option<String>,
}

/// Everything one lab measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabResult {
    /// The scenario, seed and what the lab injected.
    pub setup: Setup,
    /// What the predictions came from ([`crate::collective_time::PREDICTOR`]).
    #[serde(rename = "model")]
    pub predictor: String,
    /// When it ran (UTC).
    pub date: String,
    /// The machine's load average (1 min) before and after the runs.
    pub load: (f64, f64),
    /// Seconds zonemesh took to fill its matrix.
    pub measuring_s: f64,
    /// zonemesh's figures of every path between candidates.
    pub network: Vec<PathFigure>,
    /// zonemesh's limits of every candidate's own link (absent in results from before they were
    /// answered: their predictions priced the paths alone).
    #[serde(default)]
    pub node_caps: Vec<NodeCaps>,
    /// Every strategy's placement per size.
    pub placements: Vec<Placement>,
    /// The MPI runs.
    pub mpi: Vec<MpiRecord>,
    /// The TCP workload.
    pub tcp: Vec<TcpRecord>,
    /// The model's best sets over the truth, run beside the strategies' own.
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    /// The fastest set of each size and algorithm, confirmed against zonemesh's.
    #[serde(default)]
    pub confirmations: Vec<Confirmation>,
}

impl LabResult {
    /// The placement of `strategy` for `bytes` of `collective` (a drawing strategy's first
    /// draw).
    pub fn placement(
        &self,
        strategy: Strategy,
        bytes: u64,
        collective: Collective,
    ) -> Option<&Placement> {
        self.placements_of(strategy, bytes, collective).next()
    }

    /// Every placement of `strategy` for `bytes` of `collective` (one, or a drawing strategy's
    /// draws).
    pub fn placements_of(
        &self,
        strategy: Strategy,
        bytes: u64,
        collective: Collective,
    ) -> impl Iterator<Item = &Placement> + '_ {
        self.placements.iter().filter(move |p| {
            p.strategy == strategy && p.bytes == bytes && p.collective == collective
        })
    }

    /// What ran on this lab (its MPI records' algorithms, in the scenario's order).
    pub fn algorithms(&self) -> Vec<Algorithm> {
        let mut out: Vec<Algorithm> = Vec::new();
        for r in &self.mpi {
            if !out.contains(&r.algorithm) {
                out.push(r.algorithm);
            }
        }
        out.sort_by_key(|a| {
            self.setup
                .scenario
                .algorithms()
                .iter()
                .position(|x| x == a)
                .unwrap_or(usize::MAX)
        });
        out
    }

    /// The confirmation of `bytes` and `algorithm`, if it ran.
    pub fn confirmation(&self, bytes: u64, algorithm: Algorithm) -> Option<&Confirmation> {
        self.confirmations
            .iter()
            .find(|c| c.bytes == bytes && c.algorithm == algorithm)
    }

    /// The MPI runs of `ranks` at `bytes` with `algorithm`.
    pub fn mpi(&self, ranks: &[String], bytes: u64, algorithm: Algorithm) -> Option<&MpiRecord> {
        self.mpi
            .iter()
            .find(|r| r.ranks == ranks && r.bytes == bytes && r.algorithm == algorithm)
    }

    /// zonemesh's figures of the path from `a` to `b`.
    pub fn figure(&self, a: &str, b: &str) -> Option<&PathFigure> {
        self.network.iter().find(|f| f.src == a && f.dst == b)
    }
}

type Topology = v1::topology_client::TopologyClient<Channel>;

/// The placement of a job-blind or job-aware `strategy` (the oracle needs no zonemesh); `draw`
/// numbers a drawing strategy's draws.
async fn place(
    strategy: Strategy,
    setup: &Setup,
    (bytes, collective): (u64, Collective),
    draw: u32,
    topology: &mut Topology,
) -> Result<(Vec<String>, Option<f64>)> {
    let mut rng = Rng::new(
        setup
            .seed
            .wrapping_mul(31)
            .wrapping_add(strategy as u64)
            .wrapping_add((setup.scenario as u64) << 20)
            .wrapping_add(u64::from(draw) << 32),
    );
    Ok(match strategy {
        Strategy::Spread => (scenarios::spread(setup, &mut rng), None),
        Strategy::Random => (scenarios::random(setup, &mut rng), None),
        Strategy::LabelsOnly => (scenarios::labels_only(setup), None),
        Strategy::LabelsRandom => (scenarios::labels_random(setup, &mut rng), None),
        Strategy::Oracle => {
            let (ranks, _) = scenarios::oracle(setup, collective, bytes);
            (ranks, None)
        }
        Strategy::ZoneThenScore => {
            let ranked: Vec<(String, f64)> = topology
                .rank_nodes(v1::RankNodesRequest {
                    candidates: setup.slots.keys().cloned().collect(),
                    ..Default::default()
                })
                .await
                .context("RankNodes")?
                .into_inner()
                .nodes
                .into_iter()
                .map(|r| (r.node, r.score))
                .collect();
            (scenarios::zone_then_score(setup, &ranked), None)
        }
        Strategy::ZonemeshToday => {
            let answer = topology
                .place(v1::PlaceRequest {
                    workers: setup.workers as u32,
                    candidates: setup
                        .candidates()
                        .into_iter()
                        .map(|(node, slots)| v1::Candidate { node, slots })
                        .collect(),
                    zone_policy: v1::ZonePolicy::PreferOne as i32,
                    ..Default::default()
                })
                .await
                .context("Place")?
                .into_inner();
            let assignments: Vec<(String, u32)> = answer
                .assignments
                .into_iter()
                .map(|a| (a.node, a.workers))
                .collect();
            (scenarios::expand(&assignments), None)
        }
        Strategy::ZonemeshPredicted => {
            // Place with the job's collective: its nodes, its rank order and its predicted time.
            let answer = topology
                .place(v1::PlaceRequest {
                    workers: setup.workers as u32,
                    candidates: setup
                        .candidates()
                        .into_iter()
                        .map(|(node, slots)| v1::Candidate { node, slots })
                        .collect(),
                    zone_policy: v1::ZonePolicy::PreferOne as i32,
                    collective: v1::Collective::from(collective.engine()) as i32,
                    servers: u32::from(collective == Collective::ParameterServer),
                    bytes_per_iteration: bytes,
                    ..Default::default()
                })
                .await
                .context("Place with a collective")?
                .into_inner();
            if answer.rank_order.len() != setup.workers {
                bail!(
                    "Place answered {} ranks for {} workers",
                    answer.rank_order.len(),
                    setup.workers
                );
            }
            (answer.rank_order, Some(answer.predicted_seconds))
        }
    })
}

/// zonemesh's figures of every ordered pair of candidates, and its limits of their own links.
async fn network(
    setup: &Setup,
    topology: &mut Topology,
) -> Result<(Vec<PathFigure>, Vec<NodeCaps>)> {
    let nodes: Vec<String> = setup.slots.keys().cloned().collect();
    let paths = figures(&nodes, topology).await?;
    let listed = topology
        .list_nodes(v1::ListNodesRequest::default())
        .await
        .context("ListNodes")?
        .into_inner()
        .nodes;
    let known = |bps: f64| (bps > 0.0).then_some(bps);
    let caps = listed
        .into_iter()
        .filter(|n| nodes.contains(&n.name))
        .map(|n| NodeCaps {
            node: n.name,
            egress_bps: known(n.egress_cap_bps),
            ingress_bps: known(n.ingress_cap_bps),
        })
        .collect();
    Ok((paths, caps))
}

/// The model's fitted terms that price a loss, as the aggregator's `/metrics` shows them
/// (`zonemesh_model_*`), for the progress log: what `Place` priced the lab's gray node with.
fn model_terms(aggregator: &zonemesh_lab::process::Aggregator) -> String {
    match zonemesh_lab::process::http_get(aggregator.http, "/metrics") {
        Ok(text) => {
            let terms: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("zonemesh_model_"))
                .collect();
            if terms.is_empty() {
                "no fitted loss terms".to_owned()
            } else {
                terms.join(", ")
            }
        }
        Err(e) => format!("(its /metrics: {e:#})"),
    }
}

/// zonemesh's figures of every directed path between `nodes`.
pub async fn figures(nodes: &[String], topology: &mut Topology) -> Result<Vec<PathFigure>> {
    let mut out = Vec::new();
    for a in nodes {
        for b in nodes {
            if a == b {
                continue;
            }
            let f = topology
                .get_path(v1::GetPathRequest {
                    src: a.clone(),
                    dst: b.clone(),
                })
                .await
                .with_context(|| format!("GetPath {a} -> {b}"))?
                .into_inner()
                .figures
                .unwrap_or_default();
            out.push(PathFigure {
                src: a.clone(),
                dst: b.clone(),
                rtt_us: f.rtt.map_or(0.0, |r| r.p50_us),
                loss: f.loss_ratio,
                throughput_bps: f.throughput_bps,
                latency_measured: f.latency_provenance == v1::Provenance::Measured as i32,
                throughput_measured: f.throughput_provenance == v1::Provenance::Measured as i32,
                exchange_p50_us: f.message_exchange_p50_us,
                exchange_mean_us: f.message_exchange_mean_us,
                retransmit_ratio: f.retransmit_ratio,
            });
        }
    }
    Ok(out)
}

/// The predicted time of `collective` over zonemesh's figures (`None` when a path it uses has no
/// figures), and how many of the figures it used were estimated.
pub fn predicted(
    (network, caps): (&[PathFigure], &[NodeCaps]),
    collective: Collective,
    ranks: &[String],
    bytes: u64,
) -> (Option<f64>, u32) {
    let figure = |a: &str, b: &str| network.iter().find(|f| f.src == a && f.dst == b);
    let mut estimated = 0;
    for (a, b) in pairs_used(collective, ranks) {
        if a == b {
            continue;
        }
        match figure(a, b) {
            None => return (None, 0),
            Some(f) => {
                estimated += u32::from(!f.latency_measured) + u32::from(!f.throughput_measured);
            }
        }
    }
    let link =
        |a: &str, b: &str| figure(a, b).map_or(crate::collective_time::LOOPBACK, PathFigure::link);
    // A node's own limits as zonemesh's model has them (what `Place` prices with); none in
    // results from before `ListNodes` answered them.
    let cap = |n: &str, f: fn(&NodeCaps) -> Option<f64>| {
        caps.iter()
            .find(|c| c.node == n)
            .and_then(f)
            .unwrap_or(f64::INFINITY)
    };
    let egress = |n: &str| cap(n, |c| c.egress_bps);
    let ingress = |n: &str| cap(n, |c| c.ingress_bps);
    let s = scenarios::predict_named(collective, bytes, ranks, &link, (&egress, &ingress));
    (Some(s.seconds), estimated)
}

/// The directed pairs of ranks' nodes that `collective` sends over: a ring's neighbours, every
/// pair of an all-to-all, every rank to and from the parameter server (rank 0).
fn pairs_used(collective: Collective, ranks: &[String]) -> Vec<(&str, &str)> {
    let n = ranks.len();
    let at = |i: usize| ranks[i % n].as_str();
    match collective {
        Collective::RingAllReduce => (0..n).map(|i| (at(i), at(i + 1))).collect(),
        Collective::AllToAll => (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|(i, j)| i != j)
            .map(|(i, j)| (at(i), at(j)))
            .collect(),
        Collective::ParameterServer => (1..n)
            .flat_map(|i| [(at(i), at(0)), (at(0), at(i))])
            .collect(),
    }
}

/// A lab of `spec` with zonemesh on it, the aggregator on [`FAST_AGGREGATOR_FLAGS`] (which fill
/// a small lab's matrix in about a minute), and a client of its Topology API.
pub async fn start_lab(spec: LabSpec, options: &StackOptions) -> Result<(Lab, Stack, Topology)> {
    let mut lab = Lab::build(spec)?;
    let mut options = options.clone();
    options.aggregator_flags = FAST_AGGREGATOR_FLAGS.iter().map(|s| (*s).into()).collect();
    let stack = Stack::start(&mut lab, &options)?;
    let topology = stack.topology().await?;
    Ok((lab, stack, topology))
}

/// Runs one lab of `setup` through `plan`. `progress` hears what happens.
pub async fn evaluate_lab(
    setup: &Setup,
    plan: &Plan,
    programs: &Programs,
    options: &StackOptions,
    progress: &mut impl FnMut(&str),
) -> Result<LabResult> {
    let tag = format!("{} seed {}", setup.scenario, setup.seed);
    let date = machine::utc_minute();
    let (mut lab, mut stack, mut topology) = start_lab(setup.spec(), options).await?;
    progress(&format!(
        "{tag}: lossy {} ({:.1} %), slow {}{}, zone RTTs {:?}{}; zonemesh is measuring",
        setup.lossy,
        setup.loss * 100.0,
        if setup.slow.is_empty() {
            "none"
        } else {
            &setup.slow
        },
        if setup.slow_egress_only {
            " (egress)"
        } else {
            ""
        },
        setup.zone_rtt_us,
        setup
            .thin_link
            .as_ref()
            .map(|l| format!(", thin link {l}"))
            .unwrap_or_default()
    ));
    // 1. zonemesh measures the lab.
    let measuring = Instant::now();
    wait_full(&mut topology, lab.spec(), Duration::from_secs(300), |_| {}).await?;
    wait_quiet(
        &stack.aggregator,
        Duration::from_secs(5),
        Duration::from_secs(120),
    )
    .await?;
    let measuring_s = measuring.elapsed().as_secs_f64();
    progress(&format!(
        "{tag}: the model prices with {}",
        model_terms(&stack.aggregator)
    ));
    // 2. Every strategy places; zonemesh's figures of every path, for the predictions.
    let (network, node_caps) = network(setup, &mut topology).await?;
    let placements = place_all(
        setup,
        plan,
        (&network, &node_caps),
        &mut topology,
        &tag,
        progress,
    )
    .await?;
    let mut candidates: Vec<Candidate> = Vec::new();
    for &bytes in &plan.sizes {
        for collective in plan.collectives_for(setup) {
            let best = scenarios::best_sets(setup, collective, bytes, plan.model_sets);
            candidates.extend(best.into_iter().enumerate().map(
                |(i, (ranks, truth_predicted_s))| Candidate {
                    bytes,
                    collective,
                    ranks,
                    truth_predicted_s,
                    model_rank: i as u32 + 1,
                },
            ));
        }
    }
    // 3. The agents' probes would share the links with the job.
    for (_, agent) in std::mem::take(&mut stack.agents) {
        agent.terminate()?;
    }
    let load_before = machine::load_average();
    let mpi_records = run_mpi(
        &lab,
        programs,
        &plan.algorithms_for(setup),
        plan,
        &placements,
        &candidates,
        &tag,
        progress,
    );
    let confirmations = if plan.confirm {
        confirm(
            &lab,
            programs,
            setup,
            plan,
            &placements,
            &mpi_records,
            progress,
        )
    } else {
        Vec::new()
    };
    // 4. The lab's TCP workload on the same placements.
    let tcp = if plan.tcp_workload {
        run_tcp(&lab, plan, &placements, &tag, progress)
    } else {
        Vec::new()
    };
    let load_after = machine::load_average();
    drop(stack);
    lab.remove()?;
    Ok(LabResult {
        setup: setup.clone(),
        predictor: crate::collective_time::PREDICTOR.to_owned(),
        date,
        load: (load_before, load_after),
        measuring_s,
        network,
        node_caps,
        placements,
        mpi: mpi_records,
        tcp,
        candidates,
        confirmations,
    })
}

/// Every strategy's placement at every size and for every collective (a job-blind strategy
/// places once), each with its predicted time over zonemesh's figures (`network`) and over the
/// truth.
async fn place_all(
    setup: &Setup,
    plan: &Plan,
    network: (&[PathFigure], &[NodeCaps]),
    topology: &mut Topology,
    tag: &str,
    progress: &mut impl FnMut(&str),
) -> Result<Vec<Placement>> {
    let mut placements: Vec<Placement> = Vec::new();
    let collectives = plan.collectives_for(setup);
    for &bytes in &plan.sizes {
        for &collective in &collectives {
            for &strategy in &plan.strategies {
                let draws = if strategy == Strategy::LabelsRandom {
                    LABEL_DRAWS
                } else {
                    1
                };
                for draw in 0..draws {
                    let placed_before = !strategy.knows_the_job()
                        && (bytes, collective) != (plan.sizes[0], collectives[0]);
                    let placed = if placed_before {
                        // The same as for the first size and collective.
                        let p = placements
                            .iter()
                            .find(|p| p.strategy == strategy && p.draw.unwrap_or(0) == draw)
                            .cloned()
                            .expect("placed for the first job");
                        Ok((p.ranks, p.place_predicted_s))
                    } else {
                        place(strategy, setup, (bytes, collective), draw, topology).await
                    };
                    let (ranks, place_predicted_s, failure) = match placed {
                        Ok((r, p)) => (r, p, None),
                        Err(e) => (Vec::new(), None, Some(format!("{e:#}"))),
                    };
                    let (predicted_s, estimated_figures) = if ranks.is_empty() {
                        (None, 0)
                    } else {
                        predicted(network, collective, &ranks, bytes)
                    };
                    let truth_predicted_s = if ranks.is_empty() {
                        f64::NAN
                    } else {
                        setup.truth_prediction(collective, bytes, &ranks).seconds
                    };
                    progress(&format!(
                        "{tag}: {bytes} B {collective:?} {}{} -> {} (predicted {predicted_s:?}, truth model {truth_predicted_s:.4} s){}",
                        strategy.as_str(),
                        if draws > 1 {
                            format!(" draw {draw}")
                        } else {
                            String::new()
                        },
                        ranks.join(","),
                        failure
                            .as_ref()
                            .map(|f| format!(" FAILED: {f}"))
                            .unwrap_or_default()
                    ));
                    placements.push(Placement {
                        strategy,
                        bytes,
                        collective,
                        ranks,
                        predicted_s,
                        place_predicted_s,
                        truth_predicted_s,
                        estimated_figures,
                        failure,
                        draw: (draws > 1).then_some(draw),
                    });
                }
            }
        }
    }
    Ok(placements)
}

/// `algorithms` on every distinct set (the strategies' placements for the algorithm's
/// collective, then the model's best sets `candidates`) at every size of `plan`, run after run,
/// the sets interleaved (a slow spell of the machine falls on all).
#[allow(clippy::too_many_arguments)]
fn run_mpi(
    lab: &Lab,
    programs: &Programs,
    algorithms: &[Algorithm],
    plan: &Plan,
    placements: &[Placement],
    candidates: &[Candidate],
    tag: &str,
    progress: &mut impl FnMut(&str),
) -> Vec<MpiRecord> {
    let mut mpi_records = Vec::new();
    for &bytes in &plan.sizes {
        for &algorithm in algorithms {
            let collective = algorithm.collective();
            // Distinct rank orders, in strategy order, then the model's.
            let mut distinct: Vec<(Vec<String>, f64)> = Vec::new();
            let sets = placements
                .iter()
                .filter(|p| p.bytes == bytes && p.collective == collective)
                .map(|p| (&p.ranks, p.truth_predicted_s))
                .chain(
                    candidates
                        .iter()
                        .filter(|c| c.bytes == bytes && c.collective == collective)
                        .map(|c| (&c.ranks, c.truth_predicted_s)),
                );
            for (ranks, truth_s) in sets {
                if !ranks.is_empty() && !distinct.iter().any(|(r, _)| r == ranks) {
                    distinct.push((ranks.clone(), truth_s));
                }
            }
            let mut records: Vec<MpiRecord> = distinct
                .iter()
                .map(|(ranks, _)| MpiRecord {
                    ranks: ranks.clone(),
                    bytes,
                    algorithm,
                    runs: Vec::new(),
                    failures: Vec::new(),
                })
                .collect();
            for run in 0..plan.runs_of(algorithm) {
                for (i, (ranks, truth_s)) in distinct.iter().enumerate() {
                    let label = format!("run {run}");
                    match mpi_once(lab, programs, ranks, bytes, algorithm, *truth_s) {
                        Ok(times) => {
                            progress(&describe(tag, bytes, algorithm, &label, ranks, &times));
                            records[i].runs.push(times);
                        }
                        Err(e) => {
                            progress(&format!(
                                "{tag}: mpi {bytes} B {} {label} [{}] FAILED: {e}",
                                algorithm.key(),
                                ranks.join(",")
                            ));
                            records[i].failures.push(e);
                        }
                    }
                }
            }
            mpi_records.extend(records);
        }
    }
    mpi_records
}

/// One `mpirun` of `ranks` at `bytes`: its timed iterations, seconds, or why it failed.
/// `truth_s` (the truth's predicted time) sets its timeout.
fn mpi_once(
    lab: &Lab,
    programs: &Programs,
    ranks: &[String],
    bytes: u64,
    algorithm: Algorithm,
    truth_s: f64,
) -> std::result::Result<Vec<f64>, String> {
    let (timed, warmup) = iterations(bytes);
    let truth_s = if truth_s.is_finite() { truth_s } else { 1.0 };
    let job = mpi::Job {
        ranks: ranks.to_vec(),
        bytes: bytes as usize,
        iterations: timed,
        warmup,
        algorithm,
        // Start-up, then ten times what the truth predicts (loss makes tails).
        timeout: Duration::from_secs(30)
            + Duration::from_secs_f64((10.0 * truth_s * f64::from(timed + warmup)).min(600.0)),
    };
    tokio::task::block_in_place(|| mpi::run(lab, programs, &job))
        .map(|m| m.iterations.iter().map(Duration::as_secs_f64).collect())
        .map_err(|e| format!("{e:#}"))
}

/// A progress line for one run's timed iterations.
fn describe(
    tag: &str,
    bytes: u64,
    algorithm: Algorithm,
    label: &str,
    ranks: &[String],
    times: &[f64],
) -> String {
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    format!(
        "{tag}: mpi {bytes} B {} {label} [{}]: mean {mean:.4} s, median {:.4} s",
        algorithm.key(),
        ranks.join(","),
        median_f64(times)
    )
}

/// For every size and algorithm: the set whose runs were fastest (by their median run time),
/// run again in turn with zonemesh predicted-time's set, as often as the first round ran each,
/// so that both are measured side by side. zonemesh's regret is reported against this confirmed
/// best; when zonemesh's set was itself the fastest, nothing more runs.
fn confirm(
    lab: &Lab,
    programs: &Programs,
    setup: &Setup,
    plan: &Plan,
    placements: &[Placement],
    records: &[MpiRecord],
    progress: &mut impl FnMut(&str),
) -> Vec<Confirmation> {
    let tag = &format!("{} seed {}", setup.scenario, setup.seed);
    let mut out = Vec::new();
    for &bytes in &plan.sizes {
        for algorithm in plan.algorithms_for(setup) {
            let collective = algorithm.collective();
            let Some(zonemesh) = placements
                .iter()
                .find(|p| {
                    p.strategy == Strategy::ZonemeshPredicted
                        && p.bytes == bytes
                        && p.collective == collective
                })
                .filter(|p| !p.ranks.is_empty())
            else {
                continue;
            };
            let fastest = records
                .iter()
                .filter(|r| r.bytes == bytes && r.algorithm == algorithm)
                .filter_map(|r| {
                    let times = run_times(r);
                    (!times.is_empty()).then(|| (r, median_f64(&times)))
                })
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let Some((best, _)) = fastest else { continue };
            let mut c = Confirmation {
                bytes,
                algorithm,
                best: best.ranks.clone(),
                zonemesh: zonemesh.ranks.clone(),
                best_runs: Vec::new(),
                zonemesh_runs: Vec::new(),
                failures: Vec::new(),
            };
            if c.best != c.zonemesh {
                let truth =
                    |ranks: &[String]| setup.truth_prediction(collective, bytes, ranks).seconds;
                let (best_truth, zonemesh_truth) = (truth(&c.best), truth(&c.zonemesh));
                for run in 0..plan.runs_of(algorithm) {
                    for (ranks, truth_s, is_best) in [
                        (&c.best, best_truth, true),
                        (&c.zonemesh, zonemesh_truth, false),
                    ] {
                        let label = format!("confirming run {run}");
                        match mpi_once(lab, programs, ranks, bytes, algorithm, truth_s) {
                            Ok(times) => {
                                progress(&describe(tag, bytes, algorithm, &label, ranks, &times));
                                if is_best {
                                    c.best_runs.push(times);
                                } else {
                                    c.zonemesh_runs.push(times);
                                }
                            }
                            Err(e) => {
                                progress(&format!(
                                    "{tag}: mpi {bytes} B {} {label} [{}] FAILED: {e}",
                                    algorithm.key(),
                                    ranks.join(",")
                                ));
                                c.failures.push(e);
                            }
                        }
                    }
                }
            }
            out.push(c);
        }
    }
    out
}

/// The lab's TCP ring and parameter server once on every distinct placement at every size.
fn run_tcp(
    lab: &Lab,
    plan: &Plan,
    placements: &[Placement],
    tag: &str,
    progress: &mut impl FnMut(&str),
) -> Vec<TcpRecord> {
    let mut tcp = Vec::new();
    for &bytes in &plan.sizes {
        let mut done: Vec<Vec<String>> = Vec::new();
        for p in placements
            .iter()
            .filter(|p| p.bytes == bytes && p.collective == Collective::RingAllReduce)
        {
            if p.ranks.is_empty() || done.contains(&p.ranks) {
                continue;
            }
            done.push(p.ranks.clone());
            for collective in [Collective::RingAllReduce, Collective::ParameterServer] {
                let record = tcp_run(lab, &p.ranks, bytes, collective);
                progress(&format!(
                    "{tag}: tcp {bytes} B {collective:?} [{}]: {:?}{}",
                    p.ranks.join(","),
                    record.iterations,
                    record
                        .failure
                        .as_ref()
                        .map(|f| format!(" ({f})"))
                        .unwrap_or_default()
                ));
                tcp.push(record);
            }
        }
    }
    tcp
}

/// The lab's TCP workload once on `ranks` (one warm-up, three timed iterations).
fn tcp_run(lab: &Lab, ranks: &[String], bytes: u64, collective: Collective) -> TcpRecord {
    let mut record = TcpRecord {
        ranks: ranks.to_vec(),
        bytes,
        collective,
        iterations: Vec::new(),
        failure: None,
    };
    if scenarios::group(ranks).windows(2).any(|w| w[0] == w[1]) {
        record.failure = Some("two workers on one node: the TCP workload runs one a node".into());
        return record;
    }
    let workload = Workload {
        collective: match collective {
            Collective::ParameterServer => train::Collective::ParameterServer,
            // The workload has no all-to-all; run_tcp asks for the ring and the server only.
            Collective::RingAllReduce | Collective::AllToAll => train::Collective::Ring,
        },
        gradient_bytes: bytes as usize,
        iterations: 3,
        timeout: Duration::from_secs(60),
    };
    match tokio::task::block_in_place(|| train::run(lab, ranks, &workload)) {
        Ok(t) => record.iterations = t.iter().map(Duration::as_secs_f64).collect(),
        Err(e) => record.failure = Some(format!("{e:#}")),
    }
    record
}

/// Each run's time: the mean of its timed iterations (a job's time is the sum of its
/// iterations, retransmission timeouts included, which a median would hide).
pub fn run_times(record: &MpiRecord) -> Vec<f64> {
    run_means(&record.runs)
}

/// The mean of each run's timed iterations (runs without any left out).
fn run_means(runs: &[Vec<f64>]) -> Vec<f64> {
    runs.iter()
        .filter(|r| !r.is_empty())
        .map(|r| r.iter().sum::<f64>() / r.len() as f64)
        .collect()
}

/// Per scenario and seed: the results file's name.
pub fn file_name(setup: &Setup) -> String {
    format!("{}-seed{}.json", setup.scenario.letter(), setup.seed)
}

/// Reads every results file in `dir`.
pub fn read_results(dir: &std::path::Path) -> Result<Vec<LabResult>> {
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    for p in paths {
        let text = std::fs::read_to_string(&p)?;
        out.push(serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?);
    }
    Ok(out)
}

/// Group of results by (scenario, seed), for lookups.
pub fn by_lab(results: &[LabResult]) -> BTreeMap<(scenarios::Scenario, u64), &LabResult> {
    results
        .iter()
        .map(|r| ((r.setup.scenario, r.setup.seed), r))
        .collect()
}

/// What the runs of one placement measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// The median over runs of each run's time (its mean iteration), seconds.
    pub time: f64,
    /// The lowest and the highest run time, seconds.
    pub range: (f64, f64),
    /// The median of every timed iteration of every run, seconds (what a median hides: compare
    /// with `time`).
    pub iteration_median: f64,
    /// Successful runs.
    pub runs: usize,
    /// Failed runs.
    pub failed: usize,
}

impl Measurement {
    /// Run-to-run spread: (highest − lowest run time) / time.
    pub fn spread(&self) -> f64 {
        (self.range.1 - self.range.0) / self.time
    }
}

/// The median of seconds, taken over durations (to the nanosecond) as the reports have always
/// taken it.
fn median_f64(values: &[f64]) -> f64 {
    let d: Vec<Duration> = values.iter().map(|s| Duration::from_secs_f64(*s)).collect();
    median_duration(&d).as_secs_f64()
}

/// What `strategy`'s placement at `bytes` measured with `algorithm` in `result` (`None` when it
/// did not run or every run failed). A drawing strategy's time is the mean over its draws (its
/// range: the fastest and the slowest draw).
pub fn measured(
    result: &LabResult,
    strategy: Strategy,
    bytes: u64,
    algorithm: Algorithm,
) -> Option<Measurement> {
    let draws: Vec<Measurement> = result
        .placements_of(strategy, bytes, algorithm.collective())
        .filter_map(|p| measured_set(result, &p.ranks, bytes, algorithm))
        .collect();
    match draws.as_slice() {
        [] => None,
        [one] => Some(*one),
        many => {
            let n = many.len() as f64;
            Some(Measurement {
                time: many.iter().map(|m| m.time).sum::<f64>() / n,
                range: (
                    many.iter().map(|m| m.time).fold(f64::INFINITY, f64::min),
                    many.iter().map(|m| m.time).fold(0.0, f64::max),
                ),
                iteration_median: many.iter().map(|m| m.iteration_median).sum::<f64>() / n,
                runs: many.iter().map(|m| m.runs).sum(),
                failed: many.iter().map(|m| m.failed).sum(),
            })
        }
    }
}

/// What the runs of the set `ranks` measured at `bytes` with `algorithm`.
pub fn measured_set(
    result: &LabResult,
    ranks: &[String],
    bytes: u64,
    algorithm: Algorithm,
) -> Option<Measurement> {
    let r = result.mpi(ranks, bytes, algorithm)?;
    of_runs(&r.runs, r.failures.len())
}

/// A measurement of runs (each its timed iterations), `None` when none succeeded.
fn of_runs(runs: &[Vec<f64>], failed: usize) -> Option<Measurement> {
    let times = run_means(runs);
    if times.is_empty() {
        return None;
    }
    let all: Vec<f64> = runs.iter().flatten().copied().collect();
    Some(Measurement {
        time: median_f64(&times),
        range: (
            times.iter().copied().fold(f64::INFINITY, f64::min),
            times.iter().copied().fold(0.0, f64::max),
        ),
        iteration_median: median_f64(&all),
        runs: times.len(),
        failed,
    })
}

/// zonemesh predicted-time against the confirmed best of one size and algorithm: both measured
/// side by side in the confirming runs (or zonemesh's own runs, when its set was the fastest).
#[derive(Debug, Clone, PartialEq)]
pub struct Regret {
    /// The confirmed best's set.
    pub best: Vec<String>,
    /// Its time, seconds.
    pub best_time: f64,
    /// zonemesh's time, seconds, measured beside it.
    pub zonemesh_time: f64,
    /// Whether the first round's fastest set ran slower than zonemesh's when run again beside
    /// it (then zonemesh's set is the best measured, and the regret is 0).
    pub overturned: bool,
}

impl Regret {
    /// zonemesh's time over the best's, minus one (0: zonemesh's set is the best measured).
    pub fn ratio(&self) -> f64 {
        self.zonemesh_time / self.best_time - 1.0
    }
}

/// The regret of zonemesh predicted-time at `bytes` with `algorithm` in `result`, if confirmed.
pub fn regret(result: &LabResult, bytes: u64, algorithm: Algorithm) -> Option<Regret> {
    let c = result.confirmation(bytes, algorithm)?;
    if c.best == c.zonemesh {
        let own = measured_set(result, &c.zonemesh, bytes, algorithm)?;
        return Some(Regret {
            best: c.best.clone(),
            best_time: own.time,
            zonemesh_time: own.time,
            overturned: false,
        });
    }
    let best = of_runs(&c.best_runs, 0)?;
    let zonemesh = of_runs(&c.zonemesh_runs, 0)?;
    let overturned = zonemesh.time < best.time;
    Some(Regret {
        best: if overturned {
            c.zonemesh.clone()
        } else {
            c.best.clone()
        },
        best_time: best.time.min(zonemesh.time),
        zonemesh_time: zonemesh.time,
        overturned,
    })
}

/// zonemesh's prediction for `strategy`'s placement for `bytes` of `collective`: `Place`'s own
/// where it gave one, else the model over zonemesh's figures.
pub fn prediction(
    result: &LabResult,
    strategy: Strategy,
    bytes: u64,
    collective: Collective,
) -> Option<f64> {
    let p = result.placement(strategy, bytes, collective)?;
    p.place_predicted_s.or(p.predicted_s)
}

/// Geometric mean (`None` when empty or a value is not positive).
pub fn geomean(values: &[f64]) -> Option<f64> {
    if values.is_empty()
        || values
            .iter()
            .any(|v| v.is_nan() || *v <= 0.0 || v.is_infinite())
    {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}
