//! Faults, localised: which node, node direction, zone link or path is at fault, of what kind
//! (loss, delay, rate), how badly and since when.
//!
//! The [model](crate::model) already takes the measured network apart: what belongs to each node
//! (its RTT offset, the loss of what it sends and receives, its egress and ingress caps) and
//! what belongs to each zone pair (base RTT, loss, capacity). Its `own_fault` flag, which the
//! node rows and zone links use to leave a neighbour's fault out of a node's figures, stays as
//! the first step: instantaneous and without thresholds of the operator's. This module judges
//! the same terms against the operator's thresholds ([`FaultThresholds`], the `--fault-*`
//! flags), names the paths that show each fault, and keeps each fault open with hysteresis.
//!
//! What is judged, each time [`Tracker::update`] looks at a snapshot:
//!
//! - **A node's loss**: the lower median of its paths' loss inside its zone, where the full mesh
//!   measures every one and no zone link is crossed, less what the zone's paths that do not
//!   touch it lose (in a zone of fewer than three registered nodes, the larger of its model
//!   terms: what it sends, what it is sent; in a larger zone whose other agents are gone but
//!   one, not judged). ICMP probes are round trips, so a loss
//!   belongs to the node, never to a direction. A fault needs the 95 % Wilson interval over the
//!   probes of those paths to lie above the threshold, so a lost probe or two never opens one;
//!   its paths to other lossy nodes are left out of that pool (they speak for those). The
//!   figure it reports is that pool's lost share, as for every loss: the median only decides
//!   which nodes are looked at, and so the figure lies inside its interval. A node whose agent is connected but that every probe
//!   misses (UNREACHABLE) is a `down` loss fault. A node whose agent has no session (DOWN: a
//!   rollout, a drained node; or disconnected and not yet DOWN) is no network fault: nothing
//!   about it, nor its paths, is judged, and its open faults close at once. A node with
//!   zone-mates but too few fresh paths among them (throughput tests withhold windows) is not
//!   judged at that look, and its fault stays as it was (see [`Look::unjudged`]).
//! - **A node's delay**: inside its zone, as for its loss: the median RTT of its paths there less
//!   the lower median of its zone-mates' own medians, against its own baseline (with fewer than
//!   three nodes to the zone, its model RTT offset). The model's offsets are fitted on the paths
//!   between zones too, which a zone link's delay coming and going was seen to move for good.
//! - **A node's rate, by direction**: its egress and ingress caps (throughput tests have a
//!   direction) against the median cap of its zone; one slow test that is the only evidence of
//!   one end's fault and also evidence of the other end's opposite direction names neither
//!   (`untold_rate_tests`).
//! - **A zone link** (or a zone's own network): its loss (with the same interval rule over the
//!   paths between the zones that touch no lossy node), its base RTT against its baseline, and
//!   its capacity, where a test shows one, against its baseline (a link built thin is not a
//!   fault; one that became thin is; the tests below it must not all touch one node: those are
//!   the node's). Its loss leaves out the paths of every node that may be losing (half the
//!   threshold), so that a node's loss on its way up is never taken for its zone link's, and
//!   each lossy path whose nodes have not reported on their other paths since it began to lose.
//! - **A single path**, inside a zone (the full mesh measures every one) or between zones (as
//!   far as the plan's rotation measures them): a loss the model's node and zone-pair terms do not
//!   explain, its lower 95 % bound above the expected loss, and above the other paths of its zone
//!   pair's upper bound, by the threshold. Paths touching a node or a zone link with a loss fault
//!   are left to that fault, and a path is named only once both its nodes' other paths have
//!   reported since it began to lose (so that a node's own loss has had the chance to show).
//!
//! **Baselines.** A delay means nothing in absolute terms across clusters, so each element's RTT
//! figure (and a zone link's capacity) is learnt for `baseline_ms` after it is first seen (the
//! mean of what is seen); after that a figure is judged against it, and while it is not bad the
//! baseline follows it slowly (weight `elapsed / baseline_ms`). The aggregator keeps the
//! baselines in its store ([`Baselines::entries`]).
//!
//! **Hysteresis.** A fault opens once its element has been bad for `open_after_ms` without a
//! break, and says since when; it closes once the element has been clean for `hold_ms`. So an
//! element opens a fault of one kind at most once per `hold_ms`, and one that flaps faster stays
//! one open fault. A look that cannot judge an element leaves its fault as it is, for one hold at
//! most: after that the element counts as clean, so no fault outlives its evidence by more than
//! two holds.
//!
//! The cost is one pass over the fresh paths per look (every few seconds, on the query pool).

use std::collections::{HashMap, HashSet};

use zonemesh_domain::stats::{Z_95, wilson};
use zonemesh_domain::{
    Element, Fault, FaultKind, FaultThresholds, Faults, MAX_EVIDENCE, NodeName, NodeState,
    Severity, UnixMs,
};

use crate::{NodeId, Snapshot, ZoneId};

/// Baselines not seen for this long are forgotten (a node removed, a zone renamed), ms.
pub const FORGET_AFTER_MS: i64 = 7 * 24 * 3_600_000;

/// What an element's figure is learnt as.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    /// The figure: an RTT or RTT offset (µs), or a capacity (bit/s).
    pub value: f64,
    /// When the element was first seen: it is learnt until `first_seen + baseline_ms`.
    pub first_seen: UnixMs,
    /// When `value` last moved.
    pub updated: UnixMs,
    /// When the element was last seen.
    pub seen: UnixMs,
    /// Figures folded into it.
    pub samples: u32,
}

/// Every element's baseline, by element and kind.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Baselines {
    by_element: HashMap<(Element, FaultKind), Baseline>,
}

impl Baselines {
    /// Baselines as stored.
    pub fn from_entries(entries: impl IntoIterator<Item = (Element, FaultKind, Baseline)>) -> Self {
        Self {
            by_element: entries.into_iter().map(|(e, k, b)| ((e, k), b)).collect(),
        }
    }

    /// Every baseline, in element order (as stored).
    pub fn entries(&self) -> Vec<(Element, FaultKind, Baseline)> {
        let mut all: Vec<_> = self
            .by_element
            .iter()
            .map(|((e, k), b)| (e.clone(), *k, *b))
            .collect();
        all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        all
    }

    /// The baseline of `element`'s `kind`, learnt or not.
    pub fn get(&self, element: &Element, kind: FaultKind) -> Option<&Baseline> {
        self.by_element.get(&(element.clone(), kind))
    }

    /// Sees `value` for `element`'s `kind` at `now`: while the baseline is being learnt it is
    /// folded in and `None` comes back; once learnt, the baseline comes back, and `bad` (given
    /// the baseline) says whether the figure is at fault: if not, the baseline follows it slowly.
    fn judge(
        &mut self,
        key: (Element, FaultKind),
        value: f64,
        now: UnixMs,
        learn_ms: i64,
        bad: impl Fn(f64) -> bool,
    ) -> Option<(f64, bool)> {
        let b = self.by_element.entry(key).or_insert(Baseline {
            value,
            first_seen: now,
            updated: now,
            seen: now,
            samples: 0,
        });
        b.seen = now;
        if now.since(b.first_seen) < learn_ms {
            b.samples = b.samples.saturating_add(1);
            b.value += (value - b.value) / f64::from(b.samples);
            b.updated = now;
            return None;
        }
        let baseline = b.value;
        let is_bad = bad(baseline);
        if !is_bad {
            let weight = (now.since(b.updated) as f64 / learn_ms as f64).min(1.0);
            b.value += (value - b.value) * weight;
            b.samples = b.samples.saturating_add(1);
            b.updated = now;
        }
        Some((baseline, is_bad))
    }

    /// Forgets the baselines of elements not seen for [`FORGET_AFTER_MS`].
    fn forget_old(&mut self, now: UnixMs) {
        self.by_element
            .retain(|_, b| now.since(b.seen) <= FORGET_AFTER_MS);
    }
}

/// What one look at the network found wrong with an element, before the hysteresis.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspect {
    /// Where.
    pub element: Element,
    /// What.
    pub kind: FaultKind,
    /// How bad.
    pub severity: Severity,
    /// The figure (see [`Fault::figure`]).
    pub figure: f64,
    /// A loss's 95 % interval.
    pub interval: Option<(f64, f64)>,
    /// A loss's probes behind its figure and interval.
    pub probes: u64,
    /// What the figure is judged against (see [`Fault::reference`]).
    pub reference: Option<f64>,
    /// Paths that show it, at most [`MAX_EVIDENCE`].
    pub evidence: Vec<(NodeName, NodeName)>,
    /// Paths that show it, in all.
    pub evidence_paths: u32,
}

/// Probes sent and lost, pooled over paths.
#[derive(Debug, Clone, Copy, Default)]
struct Pool {
    sent: u64,
    lost: u64,
}

impl Pool {
    fn add(&mut self, sent: u32, received: u32) {
        self.sent += u64::from(sent);
        self.lost += u64::from(sent.saturating_sub(received));
    }

    fn interval(self) -> (f64, f64) {
        wilson(self.lost, self.sent, Z_95)
    }
}

/// Paths named as evidence: the first [`MAX_EVIDENCE`], the count, and the nodes every one of
/// them touches.
#[derive(Debug, Clone, Default)]
struct Evidence {
    paths: Vec<(NodeId, NodeId)>,
    count: u32,
    /// The nodes common to every path so far (`None` before the first).
    common: Option<Vec<NodeId>>,
}

impl Evidence {
    fn push(&mut self, src: NodeId, dst: NodeId) {
        self.count += 1;
        if self.paths.len() < MAX_EVIDENCE {
            self.paths.push((src, dst));
        }
        match &mut self.common {
            None => self.common = Some(vec![src, dst]),
            Some(common) => common.retain(|n| *n == src || *n == dst),
        }
    }

    /// Whether one node touches every path: then the paths say nothing about a zone link.
    fn one_node(&self) -> bool {
        self.common.as_ref().is_some_and(|c| !c.is_empty())
    }
}

/// A figure found bad, waiting for the pass over the paths to gather its evidence.
struct Candidate {
    element: Element,
    kind: FaultKind,
    severity: Severity,
    figure: f64,
    reference: Option<f64>,
    /// What a path must show to be evidence.
    test: Test,
    evidence: Evidence,
    pool: Pool,
}

/// What makes a path evidence of a candidate.
#[derive(Debug, Clone, Copy)]
enum Test {
    /// A path touching `node` with a loss of at least `at_least`; its interval pools only the
    /// paths inside its zone when `inside_only` (its loss was judged on them).
    NodeLoss {
        node: NodeId,
        at_least: f64,
        inside_only: bool,
    },
    /// A path touching `node` whose RTT is at least `excess` µs above what it would be with the
    /// node at its baseline `offset`: inside the zone, the zone-mates' RTT `inside` (when the
    /// node was judged on them) plus `offset`; elsewhere, the zone pair's base, the other end's
    /// offset and `offset`.
    NodeDelay {
        node: NodeId,
        offset: f64,
        excess: f64,
        inside: Option<f64>,
    },
    /// A test from (`egress`) or to the node below `below` bit/s.
    NodeRate {
        node: NodeId,
        egress: bool,
        below: f64,
    },
    /// A path between the zones (touching no lossy node) with a loss of at least `at_least`.
    ZoneLoss {
        zones: (ZoneId, ZoneId),
        at_least: f64,
    },
    /// A path between the zones whose RTT, less its ends' offsets, is `excess` µs above the
    /// baseline `base`.
    ZoneDelay {
        zones: (ZoneId, ZoneId),
        base: f64,
        excess: f64,
    },
    /// A test between the zones below `below` bit/s.
    ZoneRate { zones: (ZoneId, ZoneId), below: f64 },
    /// A single path's loss: its own evidence, gathered as it is found.
    Path,
}

/// The node rate candidates (by index) that one slow test alone speaks for, when that test is
/// evidence for the other end's opposite direction too: a test `a → b` below the zone's rates says
/// `a`'s egress or `b`'s ingress, and alone it cannot tell which. Neither is named on it until
/// another test tells them apart (a second slow test from `a`, and `a`'s egress is named while
/// `b`'s ingress still rests on the one test they share). In the localisation lab, a capped
/// node's first slow test named its receiver's ingress beside it for a minute.
fn untold_rate_tests(candidates: &[Candidate]) -> HashSet<usize> {
    let direction = |c: &Candidate| match c.test {
        Test::NodeRate { node, egress, .. } => Some((node, egress)),
        _ => None,
    };
    let by_direction: HashMap<(NodeId, bool), &Evidence> = candidates
        .iter()
        .filter_map(|c| Some((direction(c)?, &c.evidence)))
        .collect();
    candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            let (Some((_, egress)), [(src, dst)]) = (direction(c), c.evidence.paths.as_slice())
            else {
                return false;
            };
            let other = if egress { (*dst, false) } else { (*src, true) };
            c.evidence.count == 1
                && by_direction
                    .get(&other)
                    .is_some_and(|e| e.paths.contains(&(*src, *dst)))
        })
        .map(|(i, _)| i)
        .collect()
}

fn unordered(a: ZoneId, b: ZoneId) -> (ZoneId, ZoneId) {
    if a <= b { (a, b) } else { (b, a) }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[(v.len() - 1) / 2])
}

/// The severity of a loss `figure`.
fn loss_severity(t: &FaultThresholds, figure: f64) -> Severity {
    if figure >= t.loss_down {
        Severity::Down
    } else {
        Severity::Degraded
    }
}

/// The severity of a delay `excess` µs above its baseline.
fn delay_severity(t: &FaultThresholds, excess: f64) -> Severity {
    if excess >= t.delay_down_us {
        Severity::Down
    } else {
        Severity::Degraded
    }
}

/// The severity of a rate `value` below its `reference`.
fn rate_severity(t: &FaultThresholds, value: f64, reference: f64) -> Severity {
    if value < t.rate_down_share * reference {
        Severity::Down
    } else {
        Severity::Degraded
    }
}

/// How far above its baseline `base` an RTT must be to be a fault, µs.
fn delay_threshold(t: &FaultThresholds, base: f64) -> f64 {
    t.delay_degraded_us.max(t.delay_ratio * base.abs())
}

/// Looks at `snapshot` at `now`: every element that is bad now by `thresholds`, judging delays
/// (and zone links' rates) against `baselines`, which it learns. No hysteresis: see [`Tracker`].
pub fn suspects(
    snapshot: &Snapshot,
    thresholds: &FaultThresholds,
    baselines: &mut Baselines,
    now: UnixMs,
) -> Vec<Suspect> {
    look(snapshot, thresholds, baselines, &HashSet::new(), now).found
}

/// What one look found: the suspects, and the elements it could not judge this time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Look {
    /// Every element bad now.
    pub found: Vec<Suspect>,
    /// Elements (and kinds) that could not be judged at this look: a node's loss or delay while
    /// too few of its paths inside its zone are fresh. Neither bad nor clean: the [`Tracker`]
    /// leaves their faults as they are.
    pub unjudged: Vec<(Element, FaultKind)>,
    /// Nodes and zone links whose probes lost at least half the loss threshold (beyond what
    /// their zone's other paths lose), with that share, the likeliest first: whether or not
    /// their interval clears the threshold yet. The planner probes them densely (see
    /// [`Tracker::suspected`]).
    pub lossy: Vec<(Element, f64)>,
    /// Registered nodes whose agent has no session (DOWN, or disconnected within
    /// `--down-after`): the [`Tracker`] closes their faults, and their paths', at once.
    pub gone: Vec<NodeName>,
}

/// [`suspects`], with the elements it could not judge. The nodes of `losing` (those whose loss
/// fault is open) count as losing until their fault closes, whatever this look's figure: what
/// their paths still lose in the loss window is theirs, neither a single path's nor a zone
/// link's (a path of a node whose loss had just been cleared was named alone, on the probes it
/// had lost before the clearing).
pub fn look(
    snapshot: &Snapshot,
    thresholds: &FaultThresholds,
    baselines: &mut Baselines,
    losing: &HashSet<NodeName>,
    now: UnixMs,
) -> Look {
    let model = snapshot.model();
    if model.fitted_at().is_none() {
        return Look::default();
    }
    let mut unjudged: Vec<(Element, FaultKind)> = Vec::new();
    let t = thresholds;
    let n = snapshot.nodes().len();
    let states: Vec<NodeState> = (0..n)
        .map(|i| snapshot.state(NodeId(i as u32), now).0)
        .collect();
    // A node whose agent has no session (DOWN, or disconnected within --down-after) is no
    // network fault, and its paths blame nobody: a rollout or a drained node is not a fault.
    let gone_nodes: Vec<bool> = (0..n)
        .map(|i| {
            let id = NodeId(i as u32);
            states[i] == NodeState::Down || !snapshot.node(id).connected
        })
        .collect();
    let gone = |id: NodeId| gone_nodes[id.0 as usize];
    let terms = |id: NodeId| model.node(id).copied().unwrap_or_default();
    let mut candidates: Vec<Candidate> = Vec::new();
    let candidate = |element, kind, severity, figure, reference, test| Candidate {
        element,
        kind,
        severity,
        figure,
        reference,
        test,
        evidence: Evidence::default(),
        pool: Pool::default(),
    };

    // The zones' median caps, for the nodes' rates.
    let zone_count = snapshot.zones().len();
    let mut caps: Vec<(Vec<f64>, Vec<f64>)> = vec![Default::default(); zone_count];
    for (id, info) in snapshot.nodes() {
        if gone(id) || !info.registered {
            continue;
        }
        let z = &mut caps[info.zone.0 as usize];
        z.0.extend(terms(id).egress_bps);
        z.1.extend(terms(id).ingress_bps);
    }
    let medians: Vec<(Option<f64>, Option<f64>)> = caps
        .iter_mut()
        .map(|(e, i)| (median(e), median(i)))
        .collect();

    // Each node's loss inside its zone, where the full mesh measures every path: the lower
    // median of its paths' loss there beyond what the zone's paths that do not touch it lose,
    // once it has paths to two zone-mates. That is the node's own loss, apart from any zone link
    // (which its paths inside do not cross), from the zone's own loss (which the other paths
    // show as well) and from a lossy zone-mate or path (a minority of its paths). The reference
    // is those paths, not the model's zone term: in a zone of three, a lossy node's paths are
    // most of the zone's, and the term (their median) took its loss for the zone's. The model's
    // node terms, which the few paths between zones can push either way while a loss comes or
    // goes, speak only for a node without two zone-mates.
    let config = &snapshot.config().path;
    let fresh_loss = |path: &crate::PathState| {
        (!path.is_stale(now, config))
            .then(|| path.merged.loss())
            .flatten()
    };
    let mut inside: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut inside_rtts: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut node_pools: Vec<Pool> = vec![Pool::default(); n];
    let mut zone_pools: Vec<Pool> = vec![Pool::default(); snapshot.zones().len()];
    for ((src, dst), path) in snapshot.paths() {
        let (s, d) = (src.0 as usize, dst.0 as usize);
        if src == dst
            || s >= n
            || d >= n
            || gone(src)
            || gone(dst)
            || snapshot.zone_of(src) != snapshot.zone_of(dst)
        {
            continue;
        }
        if let Some(rtt) = path.merged.rtt.filter(|_| !path.is_stale(now, config)) {
            for end in [s, d] {
                inside_rtts[end].push(f64::from(rtt.p50));
            }
        }
        if let Some(loss) = fresh_loss(path) {
            let (sent, received) = (path.merged.sent, path.merged.received);
            for end in [s, d] {
                inside[end].push(loss);
                node_pools[end].add(sent, received);
            }
            if let Some(z) = zone_pools.get_mut(snapshot.zone_of(src).0 as usize) {
                z.add(sent, received);
            }
        }
    }
    // What the zone's paths that do not touch each node lose: the reference of its loss inside.
    let share = |p: Pool| {
        if p.sent > 0 {
            p.lost as f64 / p.sent as f64
        } else {
            0.0
        }
    };
    let reference: Vec<f64> = (0..n)
        .map(|i| {
            let zone = zone_pools
                .get(snapshot.zone_of(NodeId(i as u32)).0 as usize)
                .copied()
                .unwrap_or_default();
            share(Pool {
                sent: zone.sent.saturating_sub(node_pools[i].sent),
                lost: zone.lost.saturating_sub(node_pools[i].lost),
            })
        })
        .collect();
    let inside_loss: Vec<Option<f64>> = inside
        .iter_mut()
        .enumerate()
        .map(|(i, v)| {
            (v.len() >= 4).then(|| {
                v.sort_by(f64::total_cmp);
                (v[(v.len() - 1) / 2] - reference[i]).max(0.0)
            })
        })
        .collect();
    // Registered nodes per zone, their agents gone or not: a node with two zone-mates is judged
    // inside its zone alone, on its paths to the zone-mates whose agents are there, and is not
    // judged while it has paths to fewer than two. The model's terms, which took a zone link's
    // loss for the nodes of the few paths across it, judge only a node of a smaller zone. The
    // publisher's guard rail counts the same nodes (the tiers'), so a node judged on those terms
    // is never tainted.
    let mut zone_sizes: Vec<usize> = vec![0; zone_count];
    for (_, info) in snapshot.nodes() {
        if info.registered {
            zone_sizes[info.zone.0 as usize] += 1;
        }
    }
    let judged_inside = |id: NodeId| zone_sizes[snapshot.zone_of(id).0 as usize] >= 3;
    // Each node's loss: inside its zone; the larger of its model terms only for a node without
    // two zone-mates. A node with zone-mates whose paths there are not fresh enough (throughput
    // tests withhold windows) is not judged at this look: on its model terms, the few paths
    // between zones that it carries put a zone link's loss on it (in the lab, a2 and a3 were
    // named for zone-a–zone-c's 1 %, on a2→c4 and a3→c1 alone, and the link went unnamed).
    let node_loss: Vec<Option<f64>> = (0..n)
        .map(|i| {
            let id = NodeId(i as u32);
            let own = terms(id);
            match inside_loss[i] {
                Some(loss) => Some(loss),
                None if judged_inside(id) => None,
                None => Some(own.loss_out.max(own.loss_in)),
            }
        })
        .collect();
    // Each node's delay inside its zone, in the same spirit: the median RTT of its paths there
    // less the lower median of its zone-mates' own medians. A slow node's paths are all slow,
    // while each zone-mate has only its paths to that node slow, a minority, so the zone-mates'
    // medians stay at the zone's RTT. The model's offsets are fitted on the paths between zones
    // too: in a lab with four nodes to a zone, those few paths moved two nodes' offsets by
    // 130 µs for good when a zone link's delay came and went, and both were named slow. A node
    // of a zone with fewer than three nodes is judged on its model offset.
    let node_rtt: Vec<Option<f64>> = inside_rtts
        .iter_mut()
        .map(|v| if v.len() >= 2 { median(v) } else { None })
        .collect();
    let mut zone_rtts: Vec<Vec<f64>> = vec![Vec::new(); zone_count];
    for (id, info) in snapshot.nodes() {
        if gone(id) || !info.registered {
            continue;
        }
        zone_rtts[info.zone.0 as usize].extend(node_rtt[id.0 as usize]);
    }
    for v in &mut zone_rtts {
        v.sort_by(f64::total_cmp);
    }
    // A node's delay figure and the RTT its paths are judged against at a figure of 0: inside its
    // zone when it has three nodes or more (`None` while its paths there are not fresh), else its
    // offset against the model's RTT inside the zone.
    let node_delay = |id: NodeId, offset: f64| -> Option<(f64, f64)> {
        let zone = snapshot.zone_of(id);
        if !judged_inside(id) {
            let inside = model
                .zone_pair(zone, zone)
                .and_then(|z| z.rtt_us)
                .unwrap_or(0.0);
            return Some((offset, inside));
        }
        let own = node_rtt[id.0 as usize]?;
        let sorted = &zone_rtts[zone.0 as usize];
        if sorted.len() < 3 {
            return None;
        }
        // The lower median of the others: `sorted` without one copy of `own`.
        let at = sorted.partition_point(|&v| v < own);
        let middle = (sorted.len() - 2) / 2;
        let reference = if middle < at {
            sorted[middle]
        } else {
            sorted[middle + 1]
        };
        Some((own - reference, reference))
    };
    // Nodes that may be losing (half the threshold): a zone link's figures leave their paths
    // out, so that a node's loss on its way up is never taken for its zone link's.
    let suspect_nodes: HashSet<NodeId> = (0..n)
        .filter(|&i| {
            node_loss[i].is_some_and(|l| l >= t.loss_degraded / 2.0)
                || states[i] == NodeState::Unreachable
        })
        .map(|i| NodeId(i as u32))
        .chain(losing.iter().filter_map(|name| snapshot.id(name)))
        .collect();

    // Nodes and zone links that may be losing, for denser probes: a node's figure, or the lost
    // share of all its probes inside its zone beyond the reference (a loss near the threshold
    // leaves most of a node's paths without a lost probe, and their median at 0), over two lost
    // probes at least.
    let half = t.loss_degraded / 2.0;
    let mut lossy: Vec<(Element, f64)> = Vec::new();
    let mut lossy_nodes: HashSet<NodeId> = HashSet::new();
    for (id, info) in snapshot.nodes() {
        let i = id.0 as usize;
        if gone(id) || !info.registered || states[i] == NodeState::Unreachable {
            continue;
        }
        let pooled = node_pools[i];
        let excess = if pooled.lost >= 2 {
            share(pooled) - reference[i]
        } else {
            0.0
        };
        let figure = node_loss[i].unwrap_or(0.0).max(excess);
        if figure >= half {
            lossy.push((Element::Node(info.name.clone()), figure));
            lossy_nodes.insert(id);
        }
    }

    // Nodes.
    for (id, info) in snapshot.nodes() {
        if gone(id) || !info.registered {
            continue;
        }
        let node = || info.name.clone();
        let own = terms(id);
        if states[id.0 as usize] == NodeState::Unreachable {
            candidates.push(candidate(
                Element::Node(node()),
                FaultKind::Loss,
                Severity::Down,
                1.0,
                None,
                Test::NodeLoss {
                    node: id,
                    at_least: t.loss_degraded,
                    inside_only: false,
                },
            ));
            continue;
        }
        let loss = node_loss[id.0 as usize];
        if loss.is_none() {
            unjudged.push((Element::Node(node()), FaultKind::Loss));
        }
        if let Some(loss) = loss.filter(|&l| own.paths > 0 && l >= t.loss_degraded) {
            candidates.push(candidate(
                Element::Node(node()),
                FaultKind::Loss,
                loss_severity(t, loss),
                loss,
                None,
                Test::NodeLoss {
                    node: id,
                    at_least: t.loss_degraded,
                    inside_only: inside_loss[id.0 as usize].is_some(),
                },
            ));
        }
        let delay = node_delay(id, own.rtt_offset_us);
        if delay.is_none() {
            unjudged.push((Element::Node(node()), FaultKind::Delay));
        }
        if let Some((figure, reference)) = delay.filter(|_| own.paths > 0) {
            let judged = baselines.judge(
                (Element::Node(node()), FaultKind::Delay),
                figure,
                now,
                t.baseline_ms,
                |base| figure - base >= delay_threshold(t, reference + base),
            );
            if let Some((base, true)) = judged {
                let excess = figure - base;
                candidates.push(candidate(
                    Element::Node(node()),
                    FaultKind::Delay,
                    delay_severity(t, excess),
                    excess,
                    Some(reference + base),
                    Test::NodeDelay {
                        node: id,
                        offset: base,
                        excess: delay_threshold(t, reference + base),
                        inside: judged_inside(id).then_some(reference),
                    },
                ));
            }
        }
        let (egress_median, ingress_median) = medians[info.zone.0 as usize];
        for (egress, cap, median) in [
            (true, own.egress_bps, egress_median),
            (false, own.ingress_bps, ingress_median),
        ] {
            let (Some(cap), Some(median)) = (cap, median) else {
                continue;
            };
            if cap < t.rate_degraded_share * median {
                candidates.push(candidate(
                    if egress {
                        Element::Egress(node())
                    } else {
                        Element::Ingress(node())
                    },
                    FaultKind::Rate,
                    rate_severity(t, cap, median),
                    cap,
                    Some(median),
                    Test::NodeRate {
                        node: id,
                        egress,
                        below: t.rate_degraded_share * median,
                    },
                ));
            }
        }
    }

    // Zone links.
    let mut lossy_links: HashSet<(ZoneId, ZoneId)> = HashSet::new();
    let mut pairs: Vec<_> = model.zone_pairs().collect();
    pairs.sort_by_key(|(k, _)| *k);
    for ((a, b), z) in pairs {
        let element =
            || Element::zone_link(snapshot.zone(a).name.clone(), snapshot.zone(b).name.clone());
        if z.measured_paths > 0 && z.loss >= t.loss_degraded {
            lossy_links.insert((a, b));
            candidates.push(candidate(
                element(),
                FaultKind::Loss,
                loss_severity(t, z.loss),
                z.loss,
                None,
                Test::ZoneLoss {
                    zones: (a, b),
                    at_least: t.loss_degraded,
                },
            ));
        }
        if let Some(rtt) = z.rtt_us {
            let judged = baselines.judge(
                (element(), FaultKind::Delay),
                rtt,
                now,
                t.baseline_ms,
                |base| rtt - base >= delay_threshold(t, base),
            );
            if let Some((base, true)) = judged {
                let excess = rtt - base;
                candidates.push(candidate(
                    element(),
                    FaultKind::Delay,
                    delay_severity(t, excess),
                    excess,
                    Some(base),
                    Test::ZoneDelay {
                        zones: (a, b),
                        base,
                        excess: delay_threshold(t, base),
                    },
                ));
            }
        }
        if let Some(capacity) = z.capacity_bps {
            let judged = baselines.judge(
                (element(), FaultKind::Rate),
                capacity,
                now,
                t.baseline_ms,
                |base| capacity < t.rate_degraded_share * base,
            );
            if let Some((base, true)) = judged {
                candidates.push(candidate(
                    element(),
                    FaultKind::Rate,
                    rate_severity(t, capacity, base),
                    capacity,
                    Some(base),
                    Test::ZoneRate {
                        zones: (a, b),
                        below: t.rate_degraded_share * base,
                    },
                ));
            }
        }
    }
    baselines.forget_old(now);

    // One pass over the fresh paths: evidence and pooled probes of the candidates, and the
    // single paths whose loss nothing else explains.
    let mut by_node: HashMap<NodeId, Vec<usize>> = HashMap::new();
    let mut by_pair: HashMap<(ZoneId, ZoneId), Vec<usize>> = HashMap::new();
    for (i, c) in candidates.iter().enumerate() {
        match c.test {
            Test::NodeLoss { node, .. }
            | Test::NodeDelay { node, .. }
            | Test::NodeRate { node, .. } => by_node.entry(node).or_default().push(i),
            Test::ZoneLoss { zones, .. }
            | Test::ZoneDelay { zones, .. }
            | Test::ZoneRate { zones, .. } => by_pair.entry(zones).or_default().push(i),
            Test::Path => {}
        }
    }
    let mut paths: HashMap<Element, (Candidate, (ZoneId, ZoneId), Pool)> = HashMap::new();
    // Whether `end`'s paths to others than `other` have a window applied at or after `since`:
    // two of them (or its only one), so that its own loss, if it has one, would show on them.
    let spoke_since = |end: NodeId, other: NodeId, since: UnixMs| {
        let (mut others, mut newer) = (0, 0);
        for (peer, p) in snapshot.outgoing(end) {
            if peer == other || peer == end || gone(peer) {
                continue;
            }
            others += 1;
            newer += usize::from(p.last_update.get().is_some_and(|at| at >= since));
        }
        newer >= others.min(2)
    };
    // Whether a path's loss may still turn out to be one of its nodes': it began to lose (its
    // oldest window that lost a probe) after one of them last spoke on its other paths. A lossy
    // node's loss shows first on whichever of its paths has a window while throughput tests hold
    // the others back: in the lab, c3→c4 and a1→a3 were named alone 14–26 s before c3's and
    // a3's own losses, and zone-b–zone-c on c4's path across it beside c4's.
    let may_be_a_nodes = |src: NodeId, dst: NodeId, path: &crate::PathState| {
        path.windows
            .iter()
            .find(|w| w.sent > w.received)
            .is_some_and(|w| !(spoke_since(src, dst, w.at) && spoke_since(dst, src, w.at)))
    };
    // Probes of each zone pair's paths that touch no lossy node: what a single path's loss is
    // set against.
    let mut pair_pools: HashMap<(ZoneId, ZoneId), Pool> = HashMap::new();
    // Probes of each zone link's paths that touch no node that may be losing: whether the link
    // may be losing.
    let mut link_pools: HashMap<(ZoneId, ZoneId), Pool> = HashMap::new();
    for ((src, dst), path) in snapshot.paths() {
        if src == dst || gone(src) || gone(dst) || src.0 as usize >= n || dst.0 as usize >= n {
            continue;
        }
        let fresh = !path.is_stale(now, config);
        let merged = path.merged;
        let loss = if fresh { merged.loss() } else { None };
        let rtt = merged.rtt.map(|r| f64::from(r.p50)).filter(|_| fresh);
        let tput = path.fresh_throughput(now, config).map(|t| t.latest_bps);
        let (zs, zd) = (snapshot.zone_of(src), snapshot.zone_of(dst));
        let pair = unordered(zs, zd);
        let zone_base = model.zone_pair(zs, zd).and_then(|z| z.rtt_us);
        let touches_lossy = suspect_nodes.contains(&src) || suspect_nodes.contains(&dst);
        if loss.is_some() && !touches_lossy {
            pair_pools
                .entry(pair)
                .or_default()
                .add(merged.sent, merged.received);
        }
        if loss.is_some() && zs != zd && !lossy_nodes.contains(&src) && !lossy_nodes.contains(&dst)
        {
            link_pools
                .entry(pair)
                .or_default()
                .add(merged.sent, merged.received);
        }
        for (end, other) in [(src, dst), (dst, src)] {
            for &i in by_node.get(&end).map_or(&[][..], Vec::as_slice) {
                let c = &mut candidates[i];
                let shows = match c.test {
                    // A path to another lossy node speaks for that node, not this one.
                    Test::NodeLoss {
                        at_least,
                        inside_only,
                        ..
                    } if !suspect_nodes.contains(&other) => {
                        if let Some(l) = loss {
                            if !inside_only || zs == zd {
                                c.pool.add(merged.sent, merged.received);
                            }
                            l >= at_least
                        } else {
                            false
                        }
                    }
                    Test::NodeDelay {
                        offset,
                        excess,
                        inside,
                        ..
                    } => match inside.filter(|_| zs == zd) {
                        Some(reference) => {
                            rtt.is_some_and(|rtt| rtt - reference - offset >= excess)
                        }
                        None => rtt.zip(zone_base).is_some_and(|(rtt, base)| {
                            rtt - base - terms(other).rtt_offset_us - offset >= excess
                        }),
                    },
                    Test::NodeRate { egress, below, .. } => {
                        (egress == (end == src)) && tput.is_some_and(|bps| bps < below)
                    }
                    _ => false,
                };
                if shows {
                    c.evidence.push(src, dst);
                }
            }
        }
        for &i in by_pair.get(&pair).map_or(&[][..], Vec::as_slice) {
            let c = &mut candidates[i];
            let shows = match c.test {
                Test::ZoneLoss { at_least, .. } => match loss {
                    Some(l) if !touches_lossy && (l == 0.0 || !may_be_a_nodes(src, dst, path)) => {
                        c.pool.add(merged.sent, merged.received);
                        l >= at_least
                    }
                    _ => false,
                },
                Test::ZoneDelay { base, excess, .. } => rtt.is_some_and(|rtt| {
                    rtt - terms(src).rtt_offset_us - terms(dst).rtt_offset_us - base >= excess
                }),
                Test::ZoneRate { below, .. } => tput.is_some_and(|bps| bps < below),
                _ => false,
            };
            if shows {
                c.evidence.push(src, dst);
            }
        }
        // A single path's loss that its nodes' and its zones' terms do not explain.
        let Some(l) = loss else { continue };
        if l < t.loss_degraded || touches_lossy || lossy_links.contains(&pair) {
            continue;
        }
        let zz = model.zone_pair(zs, zd).map_or(0.0, |z| z.loss);
        let expected = 1.0 - (1.0 - terms(src).loss_out) * (1.0 - zz) * (1.0 - terms(dst).loss_in);
        let mut pool = Pool::default();
        pool.add(merged.sent, merged.received);
        let (low, _) = pool.interval();
        if low < expected + t.loss_degraded {
            continue;
        }
        // Named alone only once both its nodes have spoken since it began to lose.
        if may_be_a_nodes(src, dst, path) {
            continue;
        }
        let element = Element::path(
            snapshot.node(src).name.clone(),
            snapshot.node(dst).name.clone(),
        );
        let (c, _, both) = paths.entry(element.clone()).or_insert_with(|| {
            (
                Candidate {
                    element,
                    kind: FaultKind::Loss,
                    severity: Severity::Degraded,
                    figure: 0.0,
                    reference: None,
                    test: Test::Path,
                    evidence: Evidence::default(),
                    pool: Pool::default(),
                },
                pair,
                Pool::default(),
            )
        });
        both.add(merged.sent, merged.received);
        if l > c.figure {
            c.figure = l;
            c.pool = pool;
            c.severity = loss_severity(t, l);
        }
        c.evidence.push(src, dst);
    }
    // Zone links that may be losing: their model term, or the lost share of their paths that
    // touch no node that may be losing (two lost probes at least).
    for ((a, b), z) in model.zone_pairs() {
        if a == b {
            continue;
        }
        let pooled = link_pools
            .get(&unordered(a, b))
            .copied()
            .unwrap_or_default();
        let pooled = if pooled.lost >= 2 { share(pooled) } else { 0.0 };
        let figure = z.loss.max(pooled);
        if z.measured_paths > 0 && figure >= half {
            let link =
                Element::zone_link(snapshot.zone(a).name.clone(), snapshot.zone(b).name.clone());
            lossy.push((link, figure));
        }
    }
    lossy.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));

    // A path is at fault alone only when it loses clearly more than the other paths of its zone
    // pair (its lower bound above their upper bound by the threshold): a loss they share (a zone
    // link's, while its term is still catching up) is not one path's.
    let single_paths = paths.into_values().filter_map(|(c, pair, both)| {
        let all = pair_pools.get(&pair).copied().unwrap_or_default();
        let others = Pool {
            sent: all.sent.saturating_sub(both.sent),
            lost: all.lost.saturating_sub(both.lost),
        };
        let (low, _) = c.pool.interval();
        (others.sent > 0 && low >= others.interval().1 + t.loss_degraded).then_some(c)
    });

    let name = |id: NodeId| snapshot.node(id).name.clone();
    let untold = untold_rate_tests(&candidates);
    let candidates: Vec<Candidate> = candidates
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !untold.contains(i))
        .map(|(_, c)| c)
        .collect();
    let mut out: Vec<Suspect> = Vec::with_capacity(candidates.len());
    for c in candidates.into_iter().chain(single_paths) {
        // A zone link's (or a zone's) capacity fault needs tests no single node explains: tests
        // that all touch one node are that node's (a slow node's first tests after it slowed,
        // while its cap still counts the faster ones, looked like its zone's capacity). A loss
        // or delay needs no such rule: a lossy node's paths are left out of a zone link's, and a
        // node's delay is judged on its paths inside its zone.
        // Both the fresh tests below the baseline (the evidence) and the tests the capacity was
        // taken over must pass: a node pair's newest test from an earlier cap, no longer
        // explained by that node's lifted cap, stays fresh evidence until the pair is tested
        // again, and beside a new cap's first slow test it named the link (in the lab:
        // zone-a–zone-c beside a4's cap, from a3's 45 minutes before, traced from the polls).
        if let Test::ZoneRate { zones: (a, b), .. } = c.test
            && (c.evidence.count < 2
                || c.evidence.one_node()
                || model
                    .zone_pair(a, b)
                    .is_none_or(|z| z.capacity_tests.count < 2 || z.capacity_tests.one_node()))
        {
            continue;
        }
        let interval = (c.kind == FaultKind::Loss).then(|| c.pool.interval());
        // A loss needs its interval above the threshold: a lost probe or two is no fault (an
        // unreachable node's is its state, judged by the sweep).
        let unreachable = matches!(c.test, Test::NodeLoss { node, .. } if states[node.0 as usize] == NodeState::Unreachable);
        if let Some((low, _)) = interval
            && low < t.loss_degraded
            && !unreachable
        {
            continue;
        }
        // A loss's figure is its pool's lost share, so that it sits inside its interval: the
        // figure that found it (a node's lower median inside its zone, a zone pair's term) only
        // chose what to pool.
        let (figure, severity, probes) = match interval {
            Some(_) if !unreachable && c.pool.sent > 0 => {
                let share = c.pool.lost as f64 / c.pool.sent as f64;
                (share, loss_severity(t, share), c.pool.sent)
            }
            _ => (c.figure, c.severity, 0),
        };
        out.push(Suspect {
            element: c.element,
            kind: c.kind,
            severity,
            figure,
            interval,
            probes,
            reference: c.reference,
            evidence: c
                .evidence
                .paths
                .iter()
                .map(|&(s, d)| (name(s), name(d)))
                .collect(),
            evidence_paths: c.evidence.count,
        });
    }
    out.sort_by(|a, b| (&a.element, a.kind).cmp(&(&b.element, b.kind)));
    let sessionless = snapshot
        .nodes()
        .filter(|&(id, info)| info.registered && gone(id))
        .map(|(_, info)| info.name.clone())
        .collect();
    Look {
        found: out,
        unjudged,
        lossy,
        gone: sessionless,
    }
}

/// Whether `element` is one of `nodes`, a direction of one, or a path with one at an end.
fn touches_any(element: &Element, nodes: &HashSet<NodeName>) -> bool {
    match element {
        Element::Node(n) | Element::Egress(n) | Element::Ingress(n) => nodes.contains(n),
        Element::Path(a, b) => nodes.contains(a) || nodes.contains(b),
        Element::ZoneLink(..) => false,
    }
}

/// One element's fault of one kind, through its hysteresis.
#[derive(Debug, Clone, PartialEq)]
struct Track {
    /// Since when it has been bad without a break.
    bad_since: Option<UnixMs>,
    /// Since when it has been clean, while open.
    clean_since: Option<UnixMs>,
    /// The open fault: what was last seen of it, and since when it has been at fault.
    open: Option<(Suspect, UnixMs)>,
    /// Since when the looks could not judge it, without a break.
    unjudged_since: Option<UnixMs>,
}

/// Faults through their hysteresis, with the baselines they are judged against. Time comes from
/// the caller (the snapshot's clock), so it is tested without waiting.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracker {
    thresholds: FaultThresholds,
    baselines: Baselines,
    tracks: HashMap<(Element, FaultKind), Track>,
    evaluated_at: Option<UnixMs>,
    suspected: Vec<Element>,
}

impl Tracker {
    /// A tracker judging by `thresholds` (checked), from `baselines` (as stored; empty at first).
    pub fn new(thresholds: FaultThresholds, baselines: Baselines) -> Self {
        Self {
            thresholds,
            baselines,
            tracks: HashMap::new(),
            evaluated_at: None,
            suspected: Vec::new(),
        }
    }

    /// The nodes and zone links that the latest look found losing at least half the loss
    /// threshold, the likeliest first, less those with an open loss fault: a loss that may be
    /// on its way to a fault; then those with an open loss or delay fault, bad or not: a fault
    /// that may be on its way to closing. The planner probes both densely and holds back the
    /// tests that would withhold their windows (see [`Suspected`](crate::planner::Suspected)).
    /// A fault's element is suspected for as long as the fault is open, not only once a look
    /// finds it clean: its clearing shows only in windows after it, and tests withheld them. In
    /// the lab a zone link's delay, cleared, still read as most of its delay 45-50 s later, its
    /// paths' windows since the clearing withheld by tests that nothing held back until a look
    /// found it clean; a node whose windows were withheld after its loss was cleared could not
    /// be judged, and its fault closed a hold late.
    pub fn suspected(&self) -> &[Element] {
        &self.suspected
    }

    /// The baselines learnt so far.
    pub fn baselines(&self) -> &Baselines {
        &self.baselines
    }

    /// Looks at `snapshot` at `now` and returns the open faults.
    pub fn update(&mut self, snapshot: &Snapshot, now: UnixMs) -> Faults {
        let losing: HashSet<NodeName> = self
            .tracks
            .iter()
            .filter(|((_, kind), track)| *kind == FaultKind::Loss && track.open.is_some())
            .filter_map(|((element, _), _)| match element {
                Element::Node(name) => Some(name.clone()),
                _ => None,
            })
            .collect();
        let Look {
            found,
            unjudged,
            lossy,
            gone,
        } = look(
            snapshot,
            &self.thresholds,
            &mut self.baselines,
            &losing,
            now,
        );
        // An agent that is gone is not a network fault: its node's faults close now, not a
        // hold later (they would keep the node's label and taint for the hold).
        let gone: HashSet<NodeName> = gone.into_iter().collect();
        self.tracks
            .retain(|(element, _), _| !touches_any(element, &gone));
        let faults = self.apply_look(found, &unjudged, now);
        // Probes judge loss and delay, and tests withhold their windows; a rate is judged on
        // the tests themselves. The elements of open faults come after the losses that may
        // be coming (those with an open loss fault among them already counted here).
        let mut open: Vec<Element> = self
            .tracks
            .iter()
            .filter(|(key, track)| {
                matches!(key.1, FaultKind::Loss | FaultKind::Delay) && track.open.is_some()
            })
            .map(|((e, _), _)| e.clone())
            .collect();
        open.sort();
        open.dedup();
        let mut suspected: Vec<Element> = lossy
            .into_iter()
            .map(|(element, _)| element)
            .filter(|e| !open.contains(e))
            .collect();
        suspected.extend(open);
        self.suspected = suspected;
        faults
    }

    /// Moves every fault through its hysteresis given what is bad at `now`.
    pub fn apply(&mut self, found: Vec<Suspect>, now: UnixMs) -> Faults {
        self.apply_look(found, &[], now)
    }

    /// [`apply`](Self::apply), leaving the faults of `unjudged` elements as they are: a look
    /// that could not judge an element neither opens nor closes its fault, nor breaks its
    /// time bad. For a hold at most: an element unjudged for `hold_ms` without a break counts as
    /// clean from then on, so that its fault closes at most two holds after its last judged
    /// look.
    pub fn apply_look(
        &mut self,
        found: Vec<Suspect>,
        unjudged: &[(Element, FaultKind)],
        now: UnixMs,
    ) -> Faults {
        let t = self.thresholds;
        let mut seen: HashSet<(Element, FaultKind)> = HashSet::with_capacity(found.len());
        for s in found {
            let key = (s.element.clone(), s.kind);
            seen.insert(key.clone());
            let track = self.tracks.entry(key).or_insert(Track {
                bad_since: None,
                clean_since: None,
                open: None,
                unjudged_since: None,
            });
            let bad_since = *track.bad_since.get_or_insert(now);
            track.clean_since = None;
            track.unjudged_since = None;
            match &mut track.open {
                Some((last, _)) => *last = s,
                None if now.since(bad_since) >= t.open_after_ms => {
                    track.open = Some((s, bad_since));
                }
                None => {}
            }
        }
        let unjudged: HashSet<&(Element, FaultKind)> = unjudged.iter().collect();
        self.tracks.retain(|key, track| {
            if seen.contains(key) {
                return true;
            }
            if unjudged.contains(key) {
                let since = *track.unjudged_since.get_or_insert(now);
                if now.since(since) < t.hold_ms {
                    return true;
                }
                // Unjudged for a whole hold: what cannot be judged is no longer claimed, and
                // the look counts as clean.
            } else {
                track.unjudged_since = None;
            }
            track.bad_since = None;
            if track.open.is_some() {
                let clean_since = *track.clean_since.get_or_insert(now);
                if now.since(clean_since) >= t.hold_ms {
                    track.open = None;
                    track.clean_since = None;
                }
            }
            track.open.is_some()
        });
        self.evaluated_at = Some(now);
        self.faults()
    }

    /// The open faults: `down` first, then by element and kind.
    pub fn faults(&self) -> Faults {
        let mut faults: Vec<Fault> = self
            .tracks
            .values()
            .filter_map(|track| {
                let (s, since) = track.open.as_ref()?;
                Some(Fault {
                    element: s.element.clone(),
                    kind: s.kind,
                    severity: s.severity,
                    figure: s.figure,
                    interval: s.interval,
                    probes: s.probes,
                    reference: s.reference,
                    evidence: s.evidence.clone(),
                    evidence_paths: s.evidence_paths,
                    since: *since,
                    clean_since: track.clean_since,
                })
            })
            .collect();
        faults.sort_by(|a, b| {
            (b.severity, &a.element, a.kind).cmp(&(a.severity, &b.element, b.kind))
        });
        Faults {
            faults,
            evaluated_at: self.evaluated_at,
        }
    }
}

#[cfg(test)]
mod tests;
