//! Localisation measured in the lab (issue 28, part 2): faults injected at random into a running
//! lab, one at a time and in pairs, and clean spells, each scored against what `ListFaults`
//! says while it lasts.
//!
//! The lab: three zones of four nodes at 1 Gbit/s, 2, 6 and 10 ms between the zones (the router
//! is the hub). zonemesh runs with its real agents and aggregator, judging delays against what
//! the clean warm-up showed (`--fault-baseline`), opening a fault after `--fault-open-after` and
//! closing it after `--fault-hold`. Each trial:
//!
//! 1. waits until no fault is open (the previous trial's closed);
//! 2. injects its faults ([`zonemesh_lab::Injection`]) — or nothing, for a clean spell;
//! 3. polls `ListFaults` every second until every injected fault is named (its element and kind)
//!    or its deadline passes (two minutes for loss and delay; for a rate, which waits for the
//!    suspect's throughput tests, one test cycle: [`Timing::deadline`]), noting every other fault
//!    seen meanwhile;
//! 4. clears the lab and waits until the faults close, noting how long it took.
//!
//! Expected elements: a node's loss, in or out, is the node's (ICMP probes are round trips); an
//! egress cap is the node's egress; a zone link's loss or delay is the zone link's; one path's
//! loss is that path's.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use zonemesh_lab::fill::Fill;
use zonemesh_lab::stack::{Stack, StackOptions, wait_fill};
use zonemesh_lab::{Injection, Lab, LabSpec};
use zonemesh_proto::v1;

use crate::machine;
use crate::rng::Rng;

/// Zones and their nodes.
pub const ZONES: [(&str, [&str; 4]); 3] = [
    ("zone-a", ["a1", "a2", "a3", "a4"]),
    ("zone-b", ["b1", "b2", "b3", "b4"]),
    ("zone-c", ["c1", "c2", "c3", "c4"]),
];

/// How long a loss or delay fault may take to be named (the target).
pub const DEADLINE: Duration = Duration::from_secs(120);

/// The windows and hold times a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// `--loss-window`, s: a loss shows fully, and leaves, this long after it starts or stops.
    pub loss_window_s: u64,
    /// `--fault-open-after`, s.
    pub open_after_s: u64,
    /// `--fault-hold`, s.
    pub hold_s: u64,
    /// `--fault-baseline`, s: the clean warm-up after the matrix is full.
    pub baseline_s: u64,
    /// `--throughput-interval`, s: a pair's throughput is tested again after this long, so a
    /// suspect's tests come round once per this.
    pub throughput_interval_s: u64,
    /// How long a clean spell is watched, s.
    pub clean_spell_s: u64,
}

impl Timing {
    /// The report's (three zones of four): the loss window of the demo cluster's flags, a 30 s
    /// hold, a pair's throughput tested every two minutes (the 48 tests of a round, two at a
    /// time, take about one, and leave most latency windows free of a test).
    pub const REPORT: Self = Self {
        loss_window_s: 30,
        open_after_s: 10,
        hold_s: 30,
        baseline_s: 60,
        throughput_interval_s: 120,
        clean_spell_s: 90,
    };

    /// CI's (three zones of three): the loss window, hold-offs and baseline halved, so that one
    /// case of each kind fits a few minutes. The tests' interval stays at two minutes: tests
    /// every minute left some node under a test in nearly every 5 s window, and windows under a
    /// test are left out of the figures (paths went without an RTT for minutes).
    pub const CI: Self = Self {
        loss_window_s: 15,
        open_after_s: 5,
        hold_s: 15,
        baseline_s: 30,
        throughput_interval_s: 120,
        clean_spell_s: 30,
    };

    /// The aggregator flags beyond the demo cluster's.
    pub fn flags(&self) -> Vec<String> {
        [
            ("--loss-window", self.loss_window_s),
            ("--fault-open-after", self.open_after_s),
            ("--fault-hold", self.hold_s),
            ("--fault-baseline", self.baseline_s),
            ("--throughput-interval", self.throughput_interval_s),
        ]
        .into_iter()
        .flat_map(|(flag, s)| [flag.to_owned(), format!("{s}s")])
        .chain(["--fault-interval".to_owned(), "1s".to_owned()])
        .collect()
    }

    /// How long a trial with a fault of `kind` may take to name it: two minutes, or for a rate
    /// two throughput-test intervals (the suspect's first test after the injection comes within
    /// one, and its cap drops once the tests before it are an interval older than its newest),
    /// its hold-off and a few seconds of looks.
    pub fn deadline(&self, kind: Kind) -> Duration {
        match kind {
            Kind::NodeRate => {
                Duration::from_secs(2 * self.throughput_interval_s + self.open_after_s + 20)
            }
            _ => DEADLINE,
        }
    }

    /// How long a cleared fault of `kind` may take to close: the hold, after what the clearing
    /// must leave first (the loss window; for a rate, the suspect's tests coming round again,
    /// two intervals as for naming it), and a minute of model refits and looks (a zone link's
    /// delay was seen closing 55 s after its clearing with a 15 s window and hold).
    pub fn close_limit(&self, kind: Option<Kind>) -> Duration {
        self.close_target(kind) + Duration::from_secs(60)
    }

    /// The target for a cleared fault of `kind` (issue 28: "closed within its hold time"): the
    /// hold, after what the clearing must leave first (as in [`Self::close_limit`]).
    pub fn close_target(&self, kind: Option<Kind>) -> Duration {
        let leave = match kind {
            Some(Kind::NodeRate) => 2 * self.throughput_interval_s,
            _ => self.loss_window_s,
        };
        Duration::from_secs(leave + self.hold_s)
    }
}

/// What the experiment draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The seed of the draws.
    pub seed: u64,
    /// Single injections.
    pub singles: usize,
    /// Injections of two faults at once.
    pub pairs: usize,
    /// Clean spells.
    pub clean: usize,
    /// Only these kinds (empty: all).
    pub kinds: Vec<Kind>,
}

/// The kinds of injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A node drops what reaches it.
    NodeLossIn,
    /// A node drops what it sends.
    NodeLossOut,
    /// A node's egress capped at 100 Mbit/s.
    NodeRate,
    /// A zone link drops some of what crosses it.
    LinkLoss,
    /// A zone link gains delay.
    LinkDelay,
    /// One path inside a zone drops some of what crosses it.
    PathLoss,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Self; 6] = [
        Self::NodeLossIn,
        Self::NodeLossOut,
        Self::NodeRate,
        Self::LinkLoss,
        Self::LinkDelay,
        Self::PathLoss,
    ];

    /// As the flag and the report name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::NodeLossIn => "node-loss-in",
            Self::NodeLossOut => "node-loss-out",
            Self::NodeRate => "node-rate",
            Self::LinkLoss => "link-loss",
            Self::LinkDelay => "link-delay",
            Self::PathLoss => "path-loss",
        }
    }

    /// From its name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A fault as `ListFaults` names it: element (`NODE`, ...), its names, and the kind (`LOSS`, ...).
pub type Named = (String, String, String, String);

/// One injected fault: what was done, and what zonemesh should name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Injected {
    /// The kind.
    pub kind: Kind,
    /// What was injected, in words.
    pub what: String,
    /// The fault zonemesh should name.
    pub expected: Named,
    /// Seconds from the injection until zonemesh named it; `None` if it did not by the deadline.
    pub named_after_s: Option<f64>,
}

/// One trial: what was injected (nothing for a clean spell) and what zonemesh said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The injections (empty: a clean spell).
    pub injected: Vec<Injected>,
    /// Every other fault open at some time while the trial watched.
    pub others: Vec<Named>,
    /// Those of `others` first seen after the clearing, while the trial waited for every fault
    /// to close (empty in results files written before this was recorded).
    #[serde(default)]
    pub others_after_clearing: Vec<Named>,
    /// Seconds from the clearing until no fault was open; `None` if some was still open past
    /// [`Timing::close_limit`].
    pub closed_after_s: Option<f64>,
    /// Seconds from the injection (the start of a clean spell) until the clearing (`None` in
    /// results files written before this was recorded).
    #[serde(default)]
    pub cleared_at_s: Option<f64>,
    /// What `ListFaults` said each time it changed, from the injection until every fault closed
    /// (empty in results files written before this was recorded): what traces a late name or
    /// close, or a fault named beside, after the run.
    #[serde(default)]
    pub polls: Vec<Poll>,
}

/// `ListFaults` when what it said changed: a fault opened or closed, or turned clean or bad.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Poll {
    /// Seconds from the injection (the start of a clean spell).
    pub at_s: f64,
    /// The open faults.
    pub open: Vec<Listed>,
}

/// One open fault as `ListFaults` answered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listed {
    /// Its element and kind.
    pub named: Named,
    /// Its figure (a loss ratio, µs above the baseline, or bit/s).
    pub figure: f64,
    /// The paths that show it, in all.
    pub evidence_paths: u32,
    /// The first of them (source, destination), as `ListFaults` lists them.
    pub evidence: Vec<(String, String)>,
    /// Whether the last look found it clean again (it waits out its hold).
    pub clean: bool,
}

/// A trial's [`Poll`]s: one whenever the open faults, or which of them are clean, change.
struct Recorder {
    started: Instant,
    polls: Vec<Poll>,
    last: Option<Vec<(Named, bool)>>,
}

impl Recorder {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            polls: Vec::new(),
            last: None,
        }
    }

    fn note(&mut self, open: &[Listed]) {
        let key: Vec<(Named, bool)> = open.iter().map(|l| (l.named.clone(), l.clean)).collect();
        if self.last.as_ref() != Some(&key) {
            self.polls.push(Poll {
                at_s: self.started.elapsed().as_secs_f64(),
                open: open.to_vec(),
            });
            self.last = Some(key);
        }
    }
}

/// The elements and kinds of `open`.
fn names(open: &[Listed]) -> BTreeSet<Named> {
    open.iter().map(|l| l.named.clone()).collect()
}

/// The results of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// When it ran (UTC).
    pub date: String,
    /// The machine.
    pub machine: String,
    /// The seed.
    pub seed: u64,
    /// The windows and hold times.
    pub timing: Timing,
    /// The trials, in the order they ran.
    pub trials: Vec<Trial>,
}

/// The lab: three zones of `per_zone` nodes (at most four: [`ZONES`]) at 1 Gbit/s, 2, 6 and
/// 10 ms apart.
pub fn spec(seed: u64, per_zone: usize) -> LabSpec {
    let ms = Duration::from_millis;
    let mut spec = LabSpec::new();
    for (zone, nodes) in ZONES {
        spec = spec.zone(zone, &nodes[..per_zone.clamp(2, 4)]);
    }
    spec = spec
        .delay(
            "zone-a",
            "zone-b",
            ms(link_rtt_ms("zone-a", "zone-b")),
            Duration::from_micros(50),
        )
        .delay(
            "zone-a",
            "zone-c",
            ms(link_rtt_ms("zone-a", "zone-c")),
            Duration::from_micros(100),
        )
        .delay(
            "zone-b",
            "zone-c",
            ms(link_rtt_ms("zone-b", "zone-c")),
            Duration::from_micros(150),
        );
    let nodes: Vec<String> = spec.all_nodes().map(str::to_owned).collect();
    for node in nodes {
        spec = spec.node_rate(&node, 1_000_000_000);
    }
    spec.seed = seed;
    spec
}

/// The round trip the lab gives the link between zones `a` and `b`, ms.
fn link_rtt_ms(a: &str, b: &str) -> u64 {
    match (a.min(b), a.max(b)) {
        ("zone-a", "zone-b") => 2,
        ("zone-a", "zone-c") => 6,
        _ => 10,
    }
}

/// The zone of lab node `n` (empty for a name not in [`ZONES`]).
fn zone_of(n: &str) -> &'static str {
    ZONES
        .iter()
        .find(|(_, nodes)| nodes.contains(&n))
        .map_or("", |(z, _)| *z)
}

fn named(element: &str, a: &str, b: &str, kind: &str) -> Named {
    (element.into(), a.into(), b.into(), kind.into())
}

/// A random injection of `kind`, avoiding the nodes and zones in `busy`.
fn draw(kind: Kind, rng: &mut Rng, busy: &BTreeSet<String>) -> (Injection, Named, String) {
    let free_nodes: Vec<&str> = ZONES
        .iter()
        .flat_map(|(z, n)| n.iter().map(move |n| (*z, *n)))
        .filter(|(z, n)| !busy.contains(*n) && !busy.contains(*z))
        .map(|(_, n)| n)
        .collect();
    let node = free_nodes[rng.below(free_nodes.len())].to_owned();
    let percent = |p: f64| format!("{:.0} %", p * 100.0);
    match kind {
        Kind::NodeLossIn | Kind::NodeLossOut => {
            let loss = [0.01, 0.02, 0.05][rng.below(3)];
            let (injection, way) = if kind == Kind::NodeLossIn {
                (
                    Injection::NodeLossIn {
                        node: node.clone(),
                        loss,
                    },
                    "in",
                )
            } else {
                (
                    Injection::NodeLossOut {
                        node: node.clone(),
                        loss,
                    },
                    "out",
                )
            };
            (
                injection,
                named("NODE", &node, "", "LOSS"),
                format!("{node} drops {} of what goes {way}", percent(loss)),
            )
        }
        Kind::NodeRate => (
            Injection::NodeEgressRate {
                node: node.clone(),
                bps: 100_000_000,
            },
            named("EGRESS", &node, "", "RATE"),
            format!("{node} sends at 100 Mbit/s"),
        ),
        Kind::PathLoss => {
            let zone = zone_of(&node);
            let mates: Vec<&str> = ZONES
                .iter()
                .find(|(z, _)| *z == zone)
                .map(|(_, n)| {
                    n.iter()
                        .copied()
                        .filter(|m| *m != node && !busy.contains(*m))
                        .collect()
                })
                .unwrap_or_default();
            let other = mates[rng.below(mates.len())].to_owned();
            let loss = [0.03, 0.05][rng.below(2)];
            let (a, b) = if node < other {
                (node.clone(), other)
            } else {
                (other, node.clone())
            };
            (
                Injection::PathLoss {
                    a: a.clone(),
                    b: b.clone(),
                    loss,
                },
                named("PATH", &a, &b, "LOSS"),
                format!("{a}–{b} drops {} each way", percent(loss)),
            )
        }
        Kind::LinkLoss | Kind::LinkDelay => {
            let free_zones: Vec<&str> = ZONES
                .iter()
                .map(|(z, _)| *z)
                .filter(|z| !busy.contains(*z))
                .collect();
            let mut pick = free_zones.clone();
            rng.shuffle(&mut pick);
            let (a, b) = if pick[0] < pick[1] {
                (pick[0], pick[1])
            } else {
                (pick[1], pick[0])
            };
            if kind == Kind::LinkLoss {
                let loss = [0.01, 0.02][rng.below(2)];
                (
                    Injection::LinkLoss {
                        a: a.into(),
                        b: b.into(),
                        loss,
                    },
                    named("ZONE_LINK", a, b, "LOSS"),
                    format!("{a}–{b} drops {} each way", percent(loss)),
                )
            } else {
                // Half or all of the link's own RTT again: above the 25 % of its baseline a delay
                // must clear to count.
                let rtt_ms = link_rtt_ms(a, b);
                let extra = Duration::from_micros(rtt_ms * 1000 / 2 * (1 + rng.below(2) as u64));
                (
                    Injection::LinkDelay {
                        a: a.into(),
                        b: b.into(),
                        extra,
                    },
                    named("ZONE_LINK", a, b, "DELAY"),
                    format!(
                        "{a}–{b} gains {:.0} ms of round trip (on {rtt_ms} ms)",
                        extra.as_secs_f64() * 1e3
                    ),
                )
            }
        }
    }
}

/// The nodes and zones an injection touches (a pair's second fault keeps off them, so that the
/// two are told apart by element).
fn touched(injection: &Injection) -> Vec<String> {
    match injection {
        Injection::NodeLossIn { node, .. }
        | Injection::NodeLossOut { node, .. }
        | Injection::NodeEgressRate { node, .. } => vec![node.clone(), zone_of(node).to_owned()],
        Injection::PathLoss { a, b, .. } => vec![a.clone(), b.clone(), zone_of(a).to_owned()],
        Injection::LinkLoss { a, b, .. } | Injection::LinkDelay { a, b, .. } => {
            let mut all = vec![a.clone(), b.clone()];
            for (z, nodes) in ZONES {
                if z == a || z == b {
                    all.extend(nodes.iter().map(|n| (*n).to_owned()));
                }
            }
            all
        }
    }
}

/// One trial's injections: each with the fault zonemesh should name, in words, and its kind.
pub type Schedule = Vec<Vec<(Injection, Named, String, Kind)>>;

/// The trials of `plan`, drawn from its seed: the injections (one or two each) and the clean
/// spells (empty), shuffled.
pub fn trials(plan: &Plan) -> Schedule {
    let mut rng = Rng::new(plan.seed);
    let kinds: Vec<Kind> = if plan.kinds.is_empty() {
        Kind::ALL.to_vec()
    } else {
        plan.kinds.clone()
    };
    let mut out = Vec::new();
    for i in 0..plan.singles + plan.pairs {
        let mut busy = BTreeSet::new();
        let mut trial = Vec::new();
        let count = if i < plan.singles { 1 } else { 2 };
        for j in 0..count {
            // Singles go round the kinds so that each is tried; pairs draw. A zone link needs
            // two zones the first fault left alone, a path two free nodes of one zone.
            let free_zones = ZONES.iter().filter(|(z, _)| !busy.contains(*z)).count();
            let feasible: Vec<Kind> = kinds
                .iter()
                .copied()
                .filter(|k| !matches!(k, Kind::LinkLoss | Kind::LinkDelay) || free_zones >= 2)
                .filter(|k| *k != Kind::PathLoss || free_zones >= 1)
                .collect();
            if feasible.is_empty() {
                break;
            }
            let kind = if count == 1 {
                kinds[i % kinds.len()]
            } else {
                feasible[(rng.below(feasible.len()) + j) % feasible.len()]
            };
            let (injection, expected, what) = draw(kind, &mut rng, &busy);
            busy.extend(touched(&injection));
            trial.push((injection, expected, what, kind));
        }
        out.push(trial);
    }
    out.extend((0..plan.clean).map(|_| Vec::new()));
    rng.shuffle(&mut out);
    out
}

/// `base` (flag, value, flag, value, ...) with the flags of `over` set to their values there.
fn with_flags(base: &[&str], over: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for pair in base.chunks(2) {
        if !over.iter().step_by(2).any(|f| f == pair[0]) {
            out.extend(pair.iter().map(|s| (*s).to_owned()));
        }
    }
    out.extend(over.iter().cloned());
    out
}

/// What `ListFaults` names now.
async fn open_faults(
    topology: &mut v1::topology_client::TopologyClient<tonic::transport::Channel>,
) -> Result<Vec<Listed>> {
    let answer = topology
        .list_faults(v1::ListFaultsRequest {})
        .await?
        .into_inner();
    Ok(answer
        .faults
        .iter()
        .map(|f| Listed {
            named: named(
                zonemesh_proto::json::fault_element(f.element),
                &f.a,
                &f.b,
                zonemesh_proto::json::fault_kind(f.kind),
            ),
            figure: f.figure,
            evidence_paths: f.evidence_paths,
            evidence: f
                .evidence
                .iter()
                .map(|p| (p.src.clone(), p.dst.clone()))
                .collect(),
            clean: f.clean_since_unix_ms != 0,
        })
        .collect())
}

/// Waits until no fault is open (at most `limit`); how long it took.
async fn until_closed(
    topology: &mut v1::topology_client::TopologyClient<tonic::transport::Channel>,
    limit: Duration,
    seen: &mut BTreeSet<Named>,
    mut record: Option<&mut Recorder>,
) -> Result<Option<f64>> {
    let started = Instant::now();
    loop {
        let open = open_faults(topology).await?;
        if let Some(r) = record.as_deref_mut() {
            r.note(&open);
        }
        if open.is_empty() {
            return Ok(Some(started.elapsed().as_secs_f64()));
        }
        seen.extend(names(&open));
        if started.elapsed() > limit {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs `schedule` in one lab of `seed` (zones of `per_zone` nodes) with `timing`; `progress`
/// hears what happens.
pub async fn run(
    seed: u64,
    per_zone: usize,
    schedule: Schedule,
    timing: Timing,
    options: &StackOptions,
    progress: &mut impl FnMut(&str),
) -> Result<Results> {
    let date = machine::utc_minute();
    let mut lab = Lab::build(spec(seed, per_zone))?;
    let mut options = options.clone();
    options.aggregator_flags = with_flags(
        zonemesh_lab::demo_cluster::FAST_AGGREGATOR_FLAGS,
        &timing.flags(),
    );
    let stack = Stack::start(&mut lab, &options)?;
    let mut topology = stack.topology().await?;
    progress("filling the matrix");
    // Throughput tests come round every interval here, so some path is often under one: full
    // over time, not at one moment.
    wait_fill(
        &mut topology,
        lab.spec(),
        Duration::from_secs(300),
        |_| {},
        Fill::has_seen_all,
    )
    .await?;
    // Each element's baseline is learnt over its first `baseline_s`; then the lab must be clean.
    tokio::time::sleep(Duration::from_secs(timing.baseline_s + 10)).await;
    let mut warmup = BTreeSet::new();
    if until_closed(&mut topology, timing.close_limit(None), &mut warmup, None)
        .await?
        .is_none()
    {
        anyhow::bail!("the clean lab has open faults after its warm-up: {warmup:?}");
    }
    let mut results = Vec::new();
    for (i, trial) in schedule.into_iter().enumerate() {
        let mut before = BTreeSet::new();
        let longest = |trial: &[(Injection, Named, String, Kind)]| {
            trial
                .iter()
                .map(|t| timing.close_limit(Some(t.3)))
                .max()
                .unwrap_or(timing.close_limit(None))
        };
        until_closed(
            &mut topology,
            timing.close_limit(Some(Kind::NodeRate)),
            &mut before,
            None,
        )
        .await?;
        let started = Instant::now();
        let mut record = Recorder::new();
        let mut injected: Vec<Injected> = Vec::new();
        for (injection, expected, what, kind) in &trial {
            lab.inject(injection)
                .with_context(|| format!("injecting {what}"))?;
            injected.push(Injected {
                kind: *kind,
                what: what.clone(),
                expected: expected.clone(),
                named_after_s: None,
            });
        }
        let deadline = trial
            .iter()
            .map(|t| timing.deadline(t.3))
            .max()
            .unwrap_or(Duration::from_secs(timing.clean_spell_s));
        let mut others: BTreeSet<Named> = BTreeSet::new();
        while started.elapsed() < deadline {
            let listed = open_faults(&mut topology).await?;
            record.note(&listed);
            let open = names(&listed);
            for inj in &mut injected {
                if inj.named_after_s.is_none() && open.contains(&inj.expected) {
                    inj.named_after_s = Some(started.elapsed().as_secs_f64());
                }
            }
            others.extend(
                open.into_iter()
                    .filter(|f| !injected.iter().any(|i| &i.expected == f)),
            );
            if !trial.is_empty() && injected.iter().all(|i| i.named_after_s.is_some()) {
                // Watch a little longer for faults named beside it.
                tokio::time::sleep(Duration::from_secs(5)).await;
                let listed = open_faults(&mut topology).await?;
                record.note(&listed);
                others.extend(
                    names(&listed)
                        .into_iter()
                        .filter(|f| !injected.iter().any(|i| &i.expected == f)),
                );
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        lab.clear()?;
        let cleared_at_s = Some(started.elapsed().as_secs_f64());
        let before_clearing = others.clone();
        let closed_after_s = until_closed(
            &mut topology,
            longest(&trial),
            &mut others,
            Some(&mut record),
        )
        .await?;
        others.retain(|f| !injected.iter().any(|i| &i.expected == f));
        let others_after_clearing: Vec<Named> =
            others.difference(&before_clearing).cloned().collect();
        let summary = if injected.is_empty() {
            "clean".to_owned()
        } else {
            injected
                .iter()
                .map(|i| {
                    format!(
                        "{} → {}",
                        i.what,
                        i.named_after_s
                            .map_or("not named".into(), |s| format!("named after {s:.0} s"))
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        progress(&format!(
            "trial {}: {summary}; others {:?} (after the clearing: {:?}); closed after {}",
            i + 1,
            others,
            others_after_clearing,
            closed_after_s.map_or("—".into(), |s| format!("{s:.0} s"))
        ));
        results.push(Trial {
            injected,
            others: others.into_iter().collect(),
            others_after_clearing,
            closed_after_s,
            cleared_at_s,
            polls: record.polls,
        });
    }
    drop(stack);
    lab.remove()?;
    Ok(Results {
        date,
        machine: machine::describe(),
        seed,
        timing,
        trials: results,
    })
}

/// The heading of the localisation section in `docs/ACCURACY.md`.
pub const HEADING: &str = "## Faults, localised";

/// The section: how it ran, the table per kind, the targets, and every miss.
pub fn section(runs: &[Results]) -> String {
    use std::fmt::Write as _;
    let mut out = format!("{HEADING}\n\n");
    let timing = runs.first().map_or(Timing::REPORT, |r| r.timing);
    let _ = writeln!(
        out,
        "Written by `zonemesh-lab localise` (as root, after `cargo build --release --locked`; results in\n`docs/localisation/`). Faults injected at random into a running lab of three zones of four\nnodes (1 Gbit/s, 2, 6 and 10 ms between the zones), one at a time and in pairs, and clean\nspells, each scored against `ListFaults` (`experiments/src/localisation.rs`). zonemesh ran with\n`{}`.\n",
        timing.flags().join(" ")
    );
    let trials: Vec<&Trial> = runs.iter().flat_map(|r| &r.trials).collect();
    let injections: Vec<&Injected> = trials.iter().flat_map(|t| &t.injected).collect();
    let _ = writeln!(
        out,
        "Runs: {}. Machine: {}.\n",
        runs.iter()
            .map(|r| format!("{} (seed {})", r.date, r.seed))
            .collect::<Vec<_>>()
            .join(", "),
        runs.first().map_or("—", |r| r.machine.as_str())
    );
    out += "| injected | trials | named right | within the deadline | median time to name | slowest | other faults named beside |\n|---|---|---|---|---|---|---|\n";
    for kind in Kind::ALL {
        let of: Vec<&&Injected> = injections.iter().filter(|i| i.kind == kind).collect();
        if of.is_empty() {
            continue;
        }
        let mut times: Vec<f64> = of.iter().filter_map(|i| i.named_after_s).collect();
        times.sort_by(f64::total_cmp);
        let deadline = timing.deadline(kind);
        let beside = trials
            .iter()
            .filter(|t| t.injected.iter().any(|i| i.kind == kind))
            .filter(|t| !t.others.is_empty())
            .count();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} s | {} | {} | {beside} |",
            kind.name(),
            of.len(),
            times.len(),
            deadline.as_secs(),
            times
                .get(times.len().saturating_sub(1) / 2)
                .map_or("—".into(), |s| format!("{s:.0} s")),
            times.last().map_or("—".into(), |s| format!("{s:.0} s")),
        );
    }
    let loss_delay: Vec<&&Injected> = injections
        .iter()
        .filter(|i| i.kind != Kind::NodeRate)
        .collect();
    let right = loss_delay
        .iter()
        .filter(|i| i.named_after_s.is_some_and(|s| s <= DEADLINE.as_secs_f64()))
        .count();
    let rate: Vec<&&Injected> = injections
        .iter()
        .filter(|i| i.kind == Kind::NodeRate)
        .collect();
    let rate_deadline = timing.deadline(Kind::NodeRate).as_secs_f64();
    let rate_in = rate
        .iter()
        .filter(|i| i.named_after_s.is_some_and(|s| s <= rate_deadline))
        .count();
    let clean: Vec<&&Trial> = trials.iter().filter(|t| t.injected.is_empty()).collect();
    let clean_false = clean.iter().filter(|t| !t.others.is_empty()).count();
    let hold = timing.hold_s;
    let closed: Vec<f64> = trials
        .iter()
        .filter(|t| !t.injected.is_empty())
        .filter_map(|t| t.closed_after_s)
        .collect();
    let unclosed = trials
        .iter()
        .filter(|t| !t.injected.is_empty() && t.closed_after_s.is_none())
        .count();
    // Closed within the target, give or take the 10 s that the looks (every second) and the
    // experiment's polls of ListFaults add.
    let with_injections = trials.iter().filter(|t| !t.injected.is_empty()).count();
    let in_time = trials
        .iter()
        .filter(|t| !t.injected.is_empty())
        .filter(|t| {
            // The longest of its faults' targets, as the run waits for the longest limit.
            let target = t
                .injected
                .iter()
                .map(|i| timing.close_target(Some(i.kind)))
                .max()
                .unwrap_or_default();
            t.closed_after_s
                .is_some_and(|s| s <= target.as_secs_f64() + 10.0)
        })
        .count();
    let share = |a: usize, b: usize| {
        if b == 0 {
            "—".to_owned()
        } else {
            format!("{:.0} %", 100.0 * a as f64 / b as f64)
        }
    };
    let _ = writeln!(
        out,
        "\nTargets (issue 28): loss and delay localised to the right element within 2 minutes in at least 95 % of injections: **{right} of {} ({})**; rate faults within one throughput-test cycle of the suspect: **{rate_in} of {}** named within two {}-s test intervals of the injection, the hold-off and 20 s of looks (the suspect's first test after the cap comes within one interval, and its figure falls once its tests from before the cap are an interval older than its newest: one cycle after its first slow test); no fault in a clean lab: **{clean_false} of {} clean spells named one**; a cleared fault closed within its hold time: **{in_time} of {with_injections} trials** closed within the hold ({hold} s) after what the clearing must leave first (the loss window, {} s; for a rate cap two test intervals), give or take 10 s of looks; the slowest close took {} after the clearing, and {unclosed} did not close within the target and a minute more.",
        loss_delay.len(),
        share(right, loss_delay.len()),
        rate.len(),
        timing.throughput_interval_s,
        clean.len(),
        timing.loss_window_s,
        closed
            .iter()
            .copied()
            .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))))
            .map_or("—".into(), |s| format!("{s:.0} s")),
    );
    let misses: Vec<String> = trials
        .iter()
        .flat_map(|t| {
            t.injected
                .iter()
                .filter(|i| i.named_after_s.is_none())
                .map(|i| {
                    format!(
                        "- not named: {} (expected {:?}; named instead: {:?})",
                        i.what, i.expected, t.others
                    )
                })
                .chain(
                    (!t.others.is_empty() && t.injected.iter().all(|i| i.named_after_s.is_some()))
                        .then(|| {
                            format!(
                                "- named beside {}: {:?}{}",
                                if t.injected.is_empty() {
                                    "a clean spell".to_owned()
                                } else {
                                    t.injected
                                        .iter()
                                        .map(|i| i.what.clone())
                                        .collect::<Vec<_>>()
                                        .join(" and ")
                                },
                                t.others,
                                if t.others_after_clearing.is_empty() {
                                    String::new()
                                } else {
                                    format!(
                                        " (first after the clearing: {:?})",
                                        t.others_after_clearing
                                    )
                                }
                            )
                        }),
                )
                .collect::<Vec<_>>()
        })
        .collect();
    if !misses.is_empty() {
        out += "\nEvery miss:\n\n";
        out += &misses.join("\n");
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timings_flags_replace_the_demo_clusters() {
        let flags = with_flags(
            zonemesh_lab::demo_cluster::FAST_AGGREGATOR_FLAGS,
            &Timing::CI.flags(),
        );
        for flag in ["--loss-window", "--fault-hold", "--throughput-interval"] {
            assert_eq!(flags.iter().filter(|f| *f == flag).count(), 1, "{flag}");
        }
        let at = flags.iter().position(|f| f == "--loss-window").unwrap();
        assert_eq!(flags[at + 1], "15s");
        assert!(
            flags.contains(&"--probe-interval".to_owned()),
            "the rest kept"
        );
    }

    #[test]
    fn trials_cover_every_kind_and_keep_a_pairs_faults_apart() {
        let plan = Plan {
            seed: 3,
            singles: 12,
            pairs: 6,
            clean: 4,
            kinds: vec![],
        };
        let all = trials(&plan);
        assert_eq!(all.len(), 22);
        assert_eq!(all.iter().filter(|t| t.is_empty()).count(), 4);
        let kinds: BTreeSet<Kind> = all.iter().flatten().map(|t| t.3).collect();
        assert_eq!(kinds.len(), Kind::ALL.len());
        for pair in all.iter().filter(|t| t.len() == 2) {
            let first: BTreeSet<String> = touched(&pair[0].0).into_iter().collect();
            let second: BTreeSet<String> = touched(&pair[1].0).into_iter().collect();
            // The second keeps off the first's nodes and zones, so each has its own element.
            assert_ne!(pair[0].1, pair[1].1, "{pair:?}");
            assert!(
                match &pair[1].0 {
                    Injection::NodeLossIn { node, .. }
                    | Injection::NodeLossOut { node, .. }
                    | Injection::NodeEgressRate { node, .. } => !first.contains(node),
                    _ => true,
                },
                "{first:?} / {second:?}"
            );
        }
        assert_eq!(all, trials(&plan), "a seed is a schedule");
    }

    #[test]
    fn a_trials_record_keeps_what_listfaults_said_each_time_it_changed() {
        let listed = |a: &str, figure: f64, clean: bool| Listed {
            named: ("NODE".into(), a.into(), String::new(), "LOSS".into()),
            figure,
            evidence_paths: 3,
            evidence: vec![(a.into(), "b1".into())],
            clean,
        };
        let mut record = Recorder::new();
        record.note(&[]);
        record.note(&[]);
        record.note(&[listed("a2", 0.05, false)]);
        // The figure moves every look: no new poll for that.
        record.note(&[listed("a2", 0.06, false)]);
        record.note(&[listed("a2", 0.01, true)]);
        record.note(&[]);
        let said: Vec<Vec<(String, f64, bool)>> = record
            .polls
            .iter()
            .map(|p| {
                p.open
                    .iter()
                    .map(|l| (l.named.1.clone(), l.figure, l.clean))
                    .collect()
            })
            .collect();
        assert_eq!(
            said,
            vec![
                vec![],
                vec![("a2".to_owned(), 0.05, false)],
                vec![("a2".to_owned(), 0.01, true)],
                vec![],
            ]
        );
        assert!(record.polls.windows(2).all(|w| w[0].at_s <= w[1].at_s));
    }

    #[test]
    fn results_files_written_before_the_polls_were_recorded_still_read() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/localisation/a7c5317/seed1.json"
        );
        let results: Results = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
            .expect("the a7c5317 run's results file");
        assert_eq!(results.trials.len(), 50);
        assert!(
            results
                .trials
                .iter()
                .all(|t| t.polls.is_empty() && t.cleared_at_s.is_none())
        );
    }

    #[test]
    fn the_targets_count_each_trial_against_its_own_deadline_and_close_target() {
        let named = |e: &str, a: &str, k: &str| (e.into(), a.into(), String::new(), k.into());
        let injected = |kind, after: Option<f64>| Injected {
            kind,
            what: kind.name().into(),
            expected: named("NODE", "a1", "LOSS"),
            named_after_s: after,
        };
        let trial = |injected: Vec<Injected>, closed: Option<f64>| Trial {
            injected,
            others: vec![],
            others_after_clearing: vec![],
            closed_after_s: closed,
            cleared_at_s: None,
            polls: vec![],
        };
        let results = Results {
            date: "2026-12-07".into(),
            machine: "test".into(),
            seed: 1,
            timing: Timing::REPORT,
            trials: vec![
                // Named in time; closed within the loss window and the hold (30 + 30 s).
                trial(vec![injected(Kind::NodeLossIn, Some(30.0))], Some(55.0)),
                // Named too late for the 2 minutes; closed 15 s past its target.
                trial(vec![injected(Kind::LinkLoss, Some(130.0))], Some(85.0)),
                // A rate cap: its own deadline (two 120 s intervals, 10 s, 20 s) and close
                // target (two intervals and the hold).
                trial(vec![injected(Kind::NodeRate, Some(200.0))], Some(260.0)),
                // A clean spell that named something.
                Trial {
                    others: vec![named("ZONE_LINK", "zone-a", "LOSS")],
                    ..trial(vec![], Some(0.0))
                },
            ],
        };
        let text = section(std::slice::from_ref(&results));
        for expected in [
            "**1 of 2 (50 %)**",
            "**1 of 1** named within two 120-s test intervals",
            "**1 of 1 clean spells named one**",
            "**2 of 3 trials** closed within the hold (30 s)",
            "(the loss window, 30 s;",
            "the slowest close took 260 s",
            "0 did not close",
        ] {
            assert!(text.contains(expected), "{expected:?} missing:\n{text}");
        }
    }
}
