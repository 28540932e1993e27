//! Synthetic agents: each one holds an `Ingest.Connect` stream to the real aggregator, follows
//! the probe plan and the throughput grants it is sent, and reports what the [`Fleet`]'s truth
//! says its probes would have seen. Many streams share a few HTTP/2 connections.
//!
//! Two paces: [`Pace::Plan`] reports once per plan window, as a real agent does; [`Pace::Flood`]
//! keeps [`FLOOD_IN_FLIGHT`] reports unacknowledged at all times, to find the aggregator's durable
//! ingest rate. Agents that churn leave for a while and come back on a new stream, sending again
//! what was not acknowledged, as a real agent does: at every churn check (10 s unless set) an
//! agent leaves with the churn probability and comes back after 0.5–3 s.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use zonemesh_agent::report::{Probes, window_samples};
use zonemesh_common::time::unix_ms;
use zonemesh_domain::{Bps, IcmpMode, Micros, NodeName, Report, Rtt, ThroughputSample, UnixMs};
use zonemesh_proto::v1;
use zonemesh_proto::v1::aggregator_message::Kind;

use crate::topo::Fleet;

/// Reports one agent keeps unacknowledged under [`Pace::Flood`].
pub const FLOOD_IN_FLIGHT: usize = 2;

/// How often an agent on a stream decides whether to leave for a while, unless told otherwise.
pub const CHURN_CHECK: Duration = Duration::from_secs(10);

/// How often agents report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Once per plan window.
    Plan,
    /// As fast as the aggregator acknowledges.
    Flood,
}

/// Counters shared by every agent of a fleet.
#[derive(Debug, Default)]
pub struct Counters {
    /// Agents holding a stream now.
    pub connected: AtomicUsize,
    /// Agents that have received a plan.
    pub planned: AtomicUsize,
    /// Sum over agents of their latest plan's targets.
    pub plan_targets: AtomicU64,
    /// Sum over agents of the probes per second their latest plan asks for, in milli-probes.
    pub plan_probes_milli: AtomicU64,
    /// Reports acknowledged.
    pub reports_acked: AtomicU64,
    /// Path summaries in acknowledged reports.
    pub summaries_acked: AtomicU64,
    /// Reports sent again after a reconnect.
    pub resent: AtomicU64,
    /// Throughput grants received (and reported).
    pub grants: AtomicU64,
    /// Error messages from the aggregator.
    pub errors: AtomicU64,
    /// Streams that ended or failed and were opened again.
    pub reconnects: AtomicU64,
    /// Times an agent left on purpose (churn).
    pub departures: AtomicU64,
    /// From a report's first send to its acknowledgement (a resend keeps its first send).
    pub ack_latency: AckLatency,
}

/// Acknowledgement latencies, µs, from 1 µs to an hour at 2 significant digits.
#[derive(Debug)]
pub struct AckLatency(Mutex<Histogram<u64>>);

impl Default for AckLatency {
    fn default() -> Self {
        Self(Mutex::new(
            Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("valid histogram bounds"),
        ))
    }
}

impl AckLatency {
    fn record(&self, latency: Duration) {
        let us = (latency.as_micros() as u64).clamp(1, 3_600_000_000);
        self.0
            .lock()
            .expect("ack latency lock")
            .record(us)
            .expect("within bounds");
    }

    /// What was recorded since the last call (or since the start), and starts afresh.
    pub fn take(&self) -> Histogram<u64> {
        let mut h = self.0.lock().expect("ack latency lock");
        let out = h.clone();
        h.reset();
        out
    }
}

/// Shared control of a running fleet.
#[derive(Debug)]
pub struct Control {
    /// Flood instead of following the plan's pace.
    flood: AtomicBool,
    /// Stop after the reports in flight are acknowledged.
    stop: AtomicBool,
    /// Bumped on every change of `flood` or `stop`, which wakes the agents.
    changes: tokio::sync::watch::Sender<u64>,
    /// Chance, per mille, that an agent leaves for a while at each churn check.
    pub churn_per_mille: AtomicU64,
    /// Time between an agent's churn checks, ms.
    pub churn_check_ms: AtomicU64,
}

impl Control {
    /// A fleet that follows its plans and does not churn.
    pub fn new() -> Self {
        Self {
            flood: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            changes: tokio::sync::watch::Sender::new(0),
            churn_per_mille: AtomicU64::new(0),
            churn_check_ms: AtomicU64::new(CHURN_CHECK.as_millis() as u64),
        }
    }

    /// Flood (or go back to the plan's pace); the agents hear it at once.
    pub fn set_flood(&self, flood: bool) {
        self.flood.store(flood, Ordering::Relaxed);
        self.changes.send_modify(|v| *v += 1);
    }

    /// Stop once what was sent is acknowledged; the agents hear it at once.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.changes.send_modify(|v| *v += 1);
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn pace(&self) -> Pace {
        if self.flood.load(Ordering::Relaxed) {
            Pace::Flood
        } else {
            Pace::Plan
        }
    }
}

impl Default for Control {
    fn default() -> Self {
        Self::new()
    }
}

struct Plan {
    /// Peers with the probes of one window to each.
    targets: Vec<(usize, u32)>,
    window_ms: u32,
    /// Probes per second the plan asks for, in thousandths.
    probes_milli: u64,
}

/// One synthetic agent.
struct SimAgent {
    fleet: Arc<Fleet>,
    /// The fleet's node names, checked once for every agent.
    names: Arc<[NodeName]>,
    me: usize,
    sequence: u64,
    /// Reports not yet acknowledged, with when each was first sent.
    unacked: VecDeque<(v1::Report, Instant)>,
    plan: Option<Plan>,
    /// Peers whose throughput test ends at the instant given.
    grants: Vec<(usize, Instant)>,
    rng: StdRng,
}

impl SimAgent {
    fn hello(&self) -> v1::AgentMessage {
        let n = &self.fleet.nodes[self.me];
        v1::AgentMessage {
            kind: Some(v1::agent_message::Kind::Hello(v1::Hello {
                node_name: n.name.clone(),
                zone: Fleet::zone_name(n.zone),
                region: String::new(),
                // Documentation range (RFC 5737): never a real host; nothing probes it.
                addresses: vec![format!(
                    "198.51.{}.{}",
                    100 + self.me / 250 % 50,
                    1 + self.me % 250
                )],
                agent_version: "zonemesh-fleet".into(),
                icmp_mode: v1::IcmpMode::Raw as i32,
                probe_port: 7402,
            })),
        }
    }

    /// The report of one window, built as the agent builds its own
    /// ([`zonemesh_agent::report`]): a sample per planned peer from the truth, with the probe
    /// outcomes drawn at random, and the throughput of the tests that have ended. `None` without
    /// a plan or with nothing to report.
    fn next_report(&mut self) -> Result<Option<v1::Report>> {
        let Some(plan) = &self.plan else {
            return Ok(None);
        };
        let end = unix_ms();
        let window = (UnixMs(end - i64::from(plan.window_ms.max(1))), UnixMs(end));
        let now = Instant::now();
        let mut throughput = BTreeMap::new();
        for (peer, _) in self.grants.extract_if(.., |(_, at)| *at <= now) {
            let bps = self.fleet.truth(self.me, peer).bps * self.rng.random_range(0.97..1.0);
            let rate = Bps::parse("throughput_bps", bps)?;
            let t = ThroughputSample::new(rate, (bps * 3.0 / 8.0) as u64, 3_000_000, 1_000_000, 1)?;
            throughput.insert(self.names[peer].clone(), t);
        }
        let mut probed = Vec::with_capacity(plan.targets.len());
        for &(peer, probes) in &plan.targets {
            let truth = self.fleet.truth(self.me, peer);
            let sent = u64::from(probes.max(1));
            let lost = (0..sent)
                .filter(|_| self.rng.random::<f64>() < truth.loss)
                .count() as u64;
            let received = sent - lost;
            let p50 = truth.rtt_us * self.rng.random_range(0.98..1.02);
            let rtt = (received > 0)
                .then(|| rtt_around(p50, received))
                .transpose()?;
            probed.push((
                self.names[peer].clone(),
                Probes {
                    sent,
                    received,
                    rtt,
                },
            ));
        }
        let node = &self.names[self.me];
        let paths = window_samples(node, IcmpMode::Raw, window, probed, throughput);
        if paths.is_empty() {
            return Ok(None);
        }
        self.sequence += 1;
        let report = Report {
            sequence: self.sequence,
            paths,
        };
        Ok(Some(v1::Report::from(report)))
    }

    fn take_plan(&mut self, plan: v1::ProbePlan, counters: &Counters) {
        let targets: Vec<(usize, u32)> = plan
            .targets
            .iter()
            .filter_map(|t| {
                let peer = self.fleet.index_of(&t.node)?;
                // Probes in one window: trains per window times probes per train.
                let trains = plan.window_ms / t.interval_ms.max(1);
                Some((peer, trains.max(1) * t.train_size.max(1)))
            })
            .collect();
        let probes_milli: u64 = plan
            .targets
            .iter()
            .map(|t| u64::from(t.train_size) * 1_000_000 / u64::from(t.interval_ms.max(1)))
            .sum();
        let new = Plan {
            targets,
            window_ms: plan.window_ms,
            probes_milli,
        };
        counters
            .plan_targets
            .fetch_add(new.targets.len() as u64, Ordering::Relaxed);
        counters
            .plan_probes_milli
            .fetch_add(new.probes_milli, Ordering::Relaxed);
        match self.plan.replace(new) {
            Some(old) => {
                counters
                    .plan_targets
                    .fetch_sub(old.targets.len() as u64, Ordering::Relaxed);
                counters
                    .plan_probes_milli
                    .fetch_sub(old.probes_milli, Ordering::Relaxed);
            }
            None => {
                counters.planned.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The RTT statistics of `samples` replies around the median `p50_us`, in the shape a real
/// window has (a tail above the median).
fn rtt_around(p50_us: f64, samples: u64) -> Result<Rtt> {
    let us = |field: &str, factor: f64| Micros::parse(field, p50_us * factor);
    let rtt = Rtt {
        samples,
        min: us("min_us", 0.95)?,
        p50: us("p50_us", 1.0)?,
        p90: us("p90_us", 1.1)?,
        p99: us("p99_us", 1.3)?,
        max: us("max_us", 1.5)?,
        mean: us("mean_us", 1.02)?,
        jitter: us("jitter_us", 0.05)?,
    };
    Ok(rtt.checked()?)
}

/// Runs one agent per node of `fleet` against the aggregator behind `channels` (agent `i` starts
/// on channel `i % channels.len()` and moves to the next one each time it connects again: with
/// channels to several replicas, agents of a replica that fails move to the others) until
/// `control.stop` is set. Returns when every
/// agent has stopped; an agent stops only once what it sent is acknowledged (or after 30 s).
pub async fn run(
    fleet: Arc<Fleet>,
    channels: Vec<Channel>,
    control: Arc<Control>,
    counters: Arc<Counters>,
) -> Result<()> {
    if channels.is_empty() {
        bail!("no channel to the aggregator");
    }
    let names = fleet
        .nodes
        .iter()
        .map(|n| NodeName::parse("node", n.name.as_str()))
        .collect::<Result<Arc<[NodeName]>, _>>()
        .context("the fleet's node names")?;
    let channels: Arc<[Channel]> = channels.into();
    let mut tasks = tokio::task::JoinSet::new();
    for me in 0..fleet.nodes.len() {
        let agent = SimAgent {
            fleet: fleet.clone(),
            names: names.clone(),
            me,
            sequence: 0,
            unacked: VecDeque::new(),
            plan: None,
            grants: Vec::new(),
            rng: StdRng::seed_from_u64(fleet.spec.seed ^ (me as u64).wrapping_mul(0x9e37_79b9)),
        };
        let (channels, control, counters) = (channels.clone(), control.clone(), counters.clone());
        tasks.spawn(async move {
            let name = agent.fleet.nodes[me].name.clone();
            run_agent(agent, channels, control, counters)
                .await
                .with_context(|| format!("simulated agent {name}"))
        });
    }
    let mut first_error = None;
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done.context("agent task").and_then(|r| r) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn run_agent(
    mut agent: SimAgent,
    channels: Arc<[Channel]>,
    control: Arc<Control>,
    counters: Arc<Counters>,
) -> Result<()> {
    let mut changes = control.changes.subscribe();
    let mut at = agent.me;
    loop {
        let mut client =
            v1::ingest_client::IngestClient::new(channels[at % channels.len()].clone())
                .max_decoding_message_size(64 << 20)
                .max_encoding_message_size(64 << 20);
        at = at.wrapping_add(1);
        let (tx, rx) = mpsc::channel(FLOOD_IN_FLIGHT + 16);
        tx.send(agent.hello()).await?;
        let mut stream = match client.connect(ReceiverStream::new(rx)).await {
            Ok(s) => s.into_inner(),
            Err(status) if !control.stopping() => {
                counters.reconnects.fetch_add(1, Ordering::Relaxed);
                drop(status);
                pause(&mut agent.rng).await;
                continue;
            }
            Err(status) => return Err(status).context("Ingest.Connect"),
        };
        counters.connected.fetch_add(1, Ordering::Relaxed);
        for (report, _) in &agent.unacked {
            tx.send(report_message(report.clone())).await?;
            counters.resent.fetch_add(1, Ordering::Relaxed);
        }
        // At every churn check on the stream, an agent leaves with the churn probability.
        let churn_every = || Duration::from_millis(control.churn_check_ms.load(Ordering::Relaxed));
        let mut churn_check = Instant::now() + churn_every();
        // The first report on a stream comes at a random point of the first window, as from
        // agents that started (or came back) at different times.
        let mut scheduled = false;
        let mut next_report = Instant::now() + Duration::from_secs(3600);
        let mut stopping_since: Option<Instant> = None;
        let outcome = loop {
            let window = agent
                .plan
                .as_ref()
                .map(|p| Duration::from_millis(u64::from(p.window_ms.max(100))));
            if let Some(window) = window {
                if !scheduled {
                    scheduled = true;
                    let ms = window.as_millis() as u64;
                    next_report = Instant::now()
                        + Duration::from_millis(agent.rng.random_range(0..ms.max(1)));
                }
                if control.pace() == Pace::Flood && agent.unacked.len() < FLOOD_IN_FLIGHT {
                    next_report = Instant::now();
                }
            }
            if control.stopping() {
                let since = *stopping_since.get_or_insert_with(Instant::now);
                if agent.unacked.is_empty() || since.elapsed() > Duration::from_secs(30) {
                    break Ok(true);
                }
                // Nothing more is sent; this wakes the agent to give up on its last acks.
                next_report = since + Duration::from_secs(30);
            }
            tokio::select! {
                message = stream.message() => match message {
                    Ok(Some(m)) => handle(&mut agent, m, &counters),
                    Ok(None) => break Ok(false),
                    Err(status) => break Err(status),
                },
                () = tokio::time::sleep_until(next_report) => {
                    if control.stopping() {
                        continue;
                    }
                    let Some(report) = agent.next_report()? else {
                        next_report = Instant::now() + Duration::from_millis(500);
                        continue;
                    };
                    agent.unacked.push_back((report.clone(), Instant::now()));
                    if tx.send(report_message(report)).await.is_err() {
                        break Ok(false);
                    }
                    if let Some(window) = window {
                        next_report = Instant::now() + window;
                    }
                }
                () = tokio::time::sleep_until(churn_check) => {
                    churn_check = Instant::now() + churn_every();
                    let churn = control.churn_per_mille.load(Ordering::Relaxed);
                    if agent.rng.random_range(0..1000) < churn {
                        counters.departures.fetch_add(1, Ordering::Relaxed);
                        break Ok(false);
                    }
                }
                _ = changes.changed() => {}
            }
        };
        counters.connected.fetch_sub(1, Ordering::Relaxed);
        drop(tx);
        match outcome {
            Ok(true) => return Ok(()),
            Ok(false) | Err(_) => {
                if control.stopping() && agent.unacked.is_empty() {
                    return Ok(());
                }
                counters.reconnects.fetch_add(1, Ordering::Relaxed);
                pause(&mut agent.rng).await;
            }
        }
    }
}

/// A pause before coming back: 0.5–3 s.
async fn pause(rng: &mut StdRng) {
    tokio::time::sleep(Duration::from_millis(rng.random_range(500..3_000))).await;
}

fn report_message(report: v1::Report) -> v1::AgentMessage {
    v1::AgentMessage {
        kind: Some(v1::agent_message::Kind::Report(report)),
    }
}

fn handle(agent: &mut SimAgent, message: v1::AggregatorMessage, counters: &Counters) {
    match message.kind {
        Some(Kind::Ack(ack)) => {
            while agent
                .unacked
                .front()
                .is_some_and(|(r, _)| r.sequence <= ack.sequence)
            {
                let (r, sent) = agent.unacked.pop_front().expect("front exists");
                counters.ack_latency.record(sent.elapsed());
                counters.reports_acked.fetch_add(1, Ordering::Relaxed);
                counters
                    .summaries_acked
                    .fetch_add(r.paths.len() as u64, Ordering::Relaxed);
            }
        }
        Some(Kind::Plan(plan)) => agent.take_plan(plan, counters),
        Some(Kind::Grant(grant)) => {
            if let Some(peer) = agent.fleet.index_of(&grant.peer) {
                let start = Duration::from_millis(
                    u64::try_from(grant.start_unix_ms - unix_ms()).unwrap_or(0),
                );
                let length = Duration::from_millis(u64::from(grant.warmup_ms + grant.duration_ms));
                agent.grants.push((peer, Instant::now() + start + length));
                counters.grants.fetch_add(1, Ordering::Relaxed);
            }
        }
        Some(Kind::Error(error)) => {
            // A refused report is never acknowledged: sending it again cannot succeed.
            agent.unacked.retain(|(r, _)| r.sequence != error.sequence);
            counters.errors.fetch_add(1, Ordering::Relaxed);
        }
        None => {}
    }
}
