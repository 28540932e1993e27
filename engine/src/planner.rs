//! The probe plan and the throughput schedule.
//!
//! Like Pingmesh, every node probes every other node of its zone, and between each pair of zones
//! only `inter_zone_pairs` representative pairs are probed (both directions): `k` distinct node
//! pairs whenever the two zones have that many (all of them otherwise), which is what the
//! [model](crate::model) fits a zone pair's terms from. The representatives rotate every
//! `rotate_ms`, walking through the members of each zone in turn, so that every node is covered
//! within `ceil(zone size / inter_zone_pairs)` rotations and every pair within
//! `ceil(A · B / inter_zone_pairs)`. Probes per node therefore grow with the zone size, not with
//! the cluster.
//!
//! Throughput tests are exclusive, as perfSONAR's throughput class: a node is never in two tests
//! at once, at most `max_concurrent` tests run in the whole cluster (a cap on the bandwidth spent
//! on testing), each node spends at most `share` of its time in tests, and a pair is tested again
//! only after `pair_interval_ms`.
//!
//! A test's load is left out of the latency windows of every path of its two nodes, so a test
//! blinds the faults to those paths for a window or two. While the faults suspect a loss, or
//! wait for a fault to close ([`Suspected`]), the paths that would show it get denser trains, and
//! the tests of their nodes wait ([`ThroughputScheduler::keep_quiet`]), for one more
//! `pair_interval_ms` at most.

use std::collections::{HashMap, HashSet};

use zonemesh_domain::{Element, NodeState, ProbePlan, ProbeTarget, ThroughputGrant, UnixMs};

use crate::{NodeId, PairMap, Snapshot};

/// Probe plan settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanConfig {
    /// Length of a report window. Default 10 s.
    pub window_ms: u32,
    /// Time between the starts of two trains to one peer. Default 5 s.
    pub interval_ms: u32,
    /// Probes per train. Default 5 (so one probe per second per peer on average).
    pub train_size: u32,
    /// Gap between the probes of a train. Default 10 ms.
    pub train_gap_ms: u32,
    /// A probe without a reply after this long is lost. Default 1 s.
    pub timeout_ms: u32,
    /// Representative pairs probed between two zones. Default 2.
    pub inter_zone_pairs: usize,
    /// How often the representatives rotate. Default 10 min.
    pub rotate_ms: i64,
    /// Seed of the representatives' starting points.
    pub seed: u64,
    /// A path of a suspect (see [`Suspected`]) is probed with this many times the probes a
    /// train, as far as a train still fits its interval. Default 4; 1 turns it off.
    pub suspect_factor: u32,
    /// At most this many suspects are probed densely at once, the likeliest first. Default 8.
    pub max_suspects: usize,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            window_ms: 10_000,
            interval_ms: 5_000,
            train_size: 5,
            train_gap_ms: 10,
            timeout_ms: 1_000,
            inter_zone_pairs: 2,
            rotate_ms: 600_000,
            seed: 0x5eed,
            suspect_factor: 4,
            max_suspects: 8,
        }
    }
}

/// Throughput test settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThroughputConfig {
    /// Whether throughput tests run at all. Default true.
    pub enabled: bool,
    /// Counted length of a test. Default 3 s.
    pub duration_ms: u32,
    /// Uncounted warm-up before it (as iperf3 -O). Default 1 s.
    pub warmup_ms: u32,
    /// Parallel TCP streams. Default 1.
    pub streams: u32,
    /// A pair is tested again after this long. Default 1 h.
    pub pair_interval_ms: i64,
    /// Most of its time a node spends in tests. Default 0.05 (5 %).
    pub share: f64,
    /// Most tests running at once in the cluster. Default 2.
    pub max_concurrent: usize,
}

impl Default for ThroughputConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            duration_ms: 3_000,
            warmup_ms: 1_000,
            streams: 1,
            pair_interval_ms: 3_600_000,
            share: 0.05,
            max_concurrent: 2,
        }
    }
}

/// Who probes whom: for every planned node, its targets in name order.
pub type Plans = HashMap<NodeId, Vec<NodeId>>;

fn mix(mut x: u64) -> u64 {
    // splitmix64 finaliser: a cheap, well-spread hash for choosing starting points.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Step `t` of the walk through every pair of two zones of `A` and `B` members, as member
/// indices (to be taken modulo the zone sizes): the walk follows the diagonal `(t, t)`, which
/// repeats after `lcm(A, B)` steps, then the diagonal shifted by one in the second zone, and so
/// on. The `gcd(A, B)` shifts reach every class of `(b − a) mod gcd`, so the first `A · B` steps
/// are every pair once; and consecutive steps take consecutive members of both zones, so that
/// `k` steps a rotation cover every node within `ceil(max(A, B) / k)` rotations.
fn walk(t: usize, diagonal: usize) -> (usize, usize) {
    (t, t + t / diagonal)
}

fn hash_str(seed: u64, s: &str) -> u64 {
    s.bytes().fold(mix(seed), |h, b| mix(h ^ u64::from(b)))
}

impl Snapshot {
    /// Nodes that take part in probing: agents that said hello and are not DOWN, by zone, each
    /// zone's members in name order, zones in name order.
    fn probing_members(&self, now: UnixMs) -> Vec<(String, Vec<NodeId>)> {
        let mut zones: Vec<(String, Vec<NodeId>)> = self
            .zones()
            .map(|(_, z)| {
                let mut members: Vec<NodeId> = z
                    .members
                    .iter()
                    .copied()
                    .filter(|m| {
                        self.node(*m).registered && self.state(*m, now).0 != NodeState::Down
                    })
                    .collect();
                members.sort_by(|a, b| self.node(*a).name.cmp(&self.node(*b).name));
                (z.name.to_string(), members)
            })
            .filter(|(_, m)| !m.is_empty())
            .collect();
        zones.sort_by(|a, b| a.0.cmp(&b.0));
        zones
    }

    /// The probe plan at `now` (see the module docs).
    pub fn plan(&self, now: UnixMs) -> Plans {
        let config = &self.config.plan;
        let zones = self.probing_members(now);
        let mut plans: Plans = HashMap::new();
        for (_, members) in &zones {
            for &a in members {
                plans
                    .entry(a)
                    .or_default()
                    .extend(members.iter().copied().filter(|b| *b != a));
            }
        }
        let epoch = if config.rotate_ms > 0 {
            (now.0 / config.rotate_ms).max(0) as usize
        } else {
            0
        };
        let k = config.inter_zone_pairs;
        for (i, (za, ma)) in zones.iter().enumerate() {
            for (zb, mb) in &zones[i + 1..] {
                let pair_seed = hash_str(hash_str(config.seed, za), zb);
                let off_a = (pair_seed % ma.len() as u64) as usize;
                let off_b = (mix(pair_seed) % mb.len() as u64) as usize;
                let (la, lb) = (ma.len(), mb.len());
                let all = la * lb;
                let diagonal = la / gcd(la, lb) * lb;
                for j in 0..k.min(all) {
                    // The j-th pair of this rotation along the walk through every pair (see
                    // `walk`): k consecutive steps are k distinct pairs.
                    let step = (epoch * k + j) % all;
                    let (i, l) = walk(step, diagonal);
                    let a = ma[(off_a + i) % la];
                    let b = mb[(off_b + l) % lb];
                    plans.entry(a).or_default().push(b);
                    plans.entry(b).or_default().push(a);
                }
            }
        }
        for targets in plans.values_mut() {
            targets.sort_by(|a, b| self.node(*a).name.cmp(&self.node(*b).name));
            targets.dedup();
        }
        plans
    }

    /// The probe plan of one node, to send it: its `targets`, each with whether it is probed
    /// densely (see [`Suspected::dense`]).
    pub fn probe_plan(&self, targets: &[(NodeId, bool)], version: u64) -> ProbePlan {
        let c = &self.config.plan;
        let dense_train = dense_train_size(c);
        ProbePlan {
            version,
            window_ms: c.window_ms,
            targets: targets
                .iter()
                .map(|&(t, dense)| {
                    let n = self.node(t);
                    ProbeTarget {
                        node: n.name.clone(),
                        addresses: n.addresses.to_vec(),
                        probe_port: n.probe_port,
                        interval_ms: c.interval_ms,
                        train_size: if dense { dense_train } else { c.train_size },
                        train_gap_ms: c.train_gap_ms,
                        timeout_ms: c.timeout_ms,
                        zone: self.zone(n.zone).name.clone(),
                    }
                })
                .collect(),
        }
    }
}

/// Probes a train to a suspect: `suspect_factor` times a train's, as many as still fit the
/// interval (the last probe's timeout included, as `--probe-interval` requires of every train),
/// at most [`MAX_TRAIN_SIZE`], never fewer than a train's.
pub fn dense_train_size(c: &PlanConfig) -> u32 {
    let fits = c.interval_ms.saturating_sub(c.timeout_ms) / c.train_gap_ms.max(1) + 1;
    c.train_size
        .saturating_mul(c.suspect_factor.max(1))
        .min(fits)
        .min(MAX_TRAIN_SIZE)
        .max(c.train_size)
}

/// Most probes in one train (`--train-size` and a suspect's denser trains).
pub const MAX_TRAIN_SIZE: u32 = 100;

/// Elements whose loss the faults suspect but cannot show yet (see
/// [`faults::Tracker::suspected`](crate::faults::Tracker::suspected)): their paths are probed
/// with denser trains, so that a loss near the threshold shows within the loss window instead of
/// needing several. A loss of twice the 0.5 % threshold needs about 1,000 probes of a node's
/// paths before its 95 % interval clears the threshold; throughput tests withhold windows, and
/// in the localisation lab a node's paths inside its zone held about 400 in a 30 s window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Suspected {
    nodes: HashSet<NodeId>,
    links: HashSet<(crate::ZoneId, crate::ZoneId)>,
}

impl Suspected {
    /// The first `max` of `elements` (the likeliest first) that are nodes or links between two
    /// zones of `snapshot`; others (and unknown names) are left out.
    pub fn new(snapshot: &Snapshot, elements: &[Element], max: usize) -> Self {
        let mut s = Self::default();
        for e in elements {
            if s.nodes.len() + s.links.len() >= max {
                break;
            }
            match e {
                Element::Node(name) => {
                    if let Some(id) = snapshot.id(name) {
                        s.nodes.insert(id);
                    }
                }
                Element::ZoneLink(a, b) if a != b => {
                    if let (Some(a), Some(b)) = (snapshot.zone_id(a), snapshot.zone_id(b)) {
                        s.links.insert((a.min(b), a.max(b)));
                    }
                }
                _ => {}
            }
        }
        s
    }

    /// Whether none is suspected.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.links.is_empty()
    }

    /// The nodes whose throughput tests would withhold the windows that show the suspects' loss:
    /// each suspect node and its peers in `plans`, and the nodes of each planned pair across a
    /// suspect zone link.
    pub fn quiet(&self, snapshot: &Snapshot, plans: &Plans) -> HashSet<NodeId> {
        let mut quiet = HashSet::new();
        if self.is_empty() {
            return quiet;
        }
        for (&node, targets) in plans {
            for &target in targets {
                if self.dense(snapshot, node, target) {
                    quiet.insert(node);
                    quiet.insert(target);
                }
            }
        }
        quiet
    }

    /// Whether the path from `a` to `b` is probed densely: it touches a suspect node, or it
    /// crosses a suspect zone link.
    pub fn dense(&self, snapshot: &Snapshot, a: NodeId, b: NodeId) -> bool {
        if self.nodes.contains(&a) || self.nodes.contains(&b) {
            return true;
        }
        let (za, zb) = (snapshot.zone_of(a), snapshot.zone_of(b));
        za != zb && self.links.contains(&(za.min(zb), za.max(zb)))
    }
}

/// Permission for `src` to measure throughput to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Identifies the grant.
    pub id: u64,
    /// The node that sends.
    pub src: NodeId,
    /// The node whose responder receives.
    pub dst: NodeId,
    /// When to start.
    pub start: UnixMs,
    /// When both nodes are free again.
    pub until: UnixMs,
}

/// Hands out throughput slots (see the module docs). Holds only in-memory bookkeeping: after a
/// restart the last test of each pair is taken from the stored paths.
#[derive(Debug, Clone, Default)]
pub struct ThroughputScheduler {
    busy_until: HashMap<NodeId, UnixMs>,
    rested_at: HashMap<NodeId, UnixMs>,
    granted: PairMap<(NodeId, NodeId), UnixMs>,
    next_id: u64,
    cursor: usize,
    quiet: HashSet<NodeId>,
}

/// How long a test takes (warm-up and measured part), and how long its nodes rest after it so
/// that tests take at most `share` of a node's time, ms.
fn test_and_rest_ms(c: &ThroughputConfig) -> (i64, i64) {
    let test_ms = i64::from(c.warmup_ms) + i64::from(c.duration_ms);
    let rest_ms = if c.share > 0.0 && c.share < 1.0 {
        (test_ms as f64 * (1.0 / c.share - 1.0)) as i64
    } else {
        0
    };
    (test_ms, rest_ms)
}

/// Time between a grant and the start it names, so that the grant reaches the agent first.
const GRANT_LEAD_MS: i64 = 200;
/// Time after a test's end before its nodes are free: the report takes a moment to arrive.
const GRANT_SLACK_MS: i64 = 2_000;

impl ThroughputScheduler {
    /// From now on, pairs touching `nodes` (see [`Suspected::quiet`]) are not tested, unless a
    /// pair was never tested or is a whole `pair_interval_ms` overdue: a suspect's loss shows in
    /// the windows a test would withhold, and no pair waits for more than one extra interval.
    pub fn keep_quiet(&mut self, nodes: HashSet<NodeId>) {
        self.quiet = nodes;
    }

    /// Grants that may start now. `connected` says whose agents can be told.
    pub fn schedule(
        &mut self,
        topology: &Snapshot,
        plans: &Plans,
        connected: &dyn Fn(NodeId) -> bool,
        now: UnixMs,
    ) -> Vec<Grant> {
        let c = topology.config().throughput;
        if !c.enabled || c.max_concurrent == 0 {
            return Vec::new();
        }
        let busy = |s: &Self, n: NodeId| {
            s.busy_until.get(&n).is_some_and(|t| *t > now)
                || s.rested_at.get(&n).is_some_and(|t| *t > now)
        };
        let mut active = self.busy_until.values().filter(|t| **t > now).count() / 2;
        let mut sources: Vec<NodeId> = plans.keys().copied().filter(|n| connected(*n)).collect();
        sources.sort_unstable();
        let mut grants = Vec::new();
        if sources.is_empty() {
            return grants;
        }
        let (test_ms, rest_ms) = test_and_rest_ms(&c);
        for step in 0..sources.len() {
            if active >= c.max_concurrent {
                break;
            }
            let src = sources[(self.cursor + step) % sources.len()];
            if busy(self, src) {
                continue;
            }
            let last = |s: &Self, dst: NodeId| -> Option<UnixMs> {
                let stored = topology
                    .path(src, dst)
                    .and_then(|p| p.throughput.get())
                    .map(|t| t.at);
                s.granted.get(&(src, dst)).copied().max(stored)
            };
            let waits = |s: &Self, d: NodeId| s.quiet.contains(&src) || s.quiet.contains(&d);
            let due = plans[&src]
                .iter()
                .copied()
                .filter(|d| {
                    let interval = if waits(self, *d) {
                        2 * c.pair_interval_ms
                    } else {
                        c.pair_interval_ms
                    };
                    connected(*d)
                        && !busy(self, *d)
                        && topology.state(*d, now).0 == NodeState::Ready
                        && last(self, *d).is_none_or(|t| now.since(t) >= interval)
                })
                .min_by_key(|d| (last(self, *d), *d));
            let Some(dst) = due else { continue };
            self.next_id += 1;
            let start = UnixMs(now.0 + GRANT_LEAD_MS);
            let until = UnixMs(start.0 + test_ms + GRANT_SLACK_MS);
            for n in [src, dst] {
                self.busy_until.insert(n, until);
                self.rested_at.insert(n, UnixMs(until.0 + rest_ms));
            }
            self.granted.insert((src, dst), now);
            grants.push(Grant {
                id: self.next_id,
                src,
                dst,
                start,
                until,
            });
            active += 1;
        }
        self.cursor = (self.cursor + 1) % sources.len();
        grants
    }

    /// Keeps the bookkeeping of a grant another scheduler made (the leader's, read from a
    /// replicated log), so that this one, should it decide next, never overlaps it. Recording a
    /// grant this scheduler made itself changes nothing.
    pub fn record(&mut self, topology: &Snapshot, grant: &Grant) {
        let c = topology.config().throughput;
        let (_, rest_ms) = test_and_rest_ms(&c);
        for n in [grant.src, grant.dst] {
            let busy = self.busy_until.entry(n).or_insert(grant.until);
            *busy = (*busy).max(grant.until);
            let rested = self
                .rested_at
                .entry(n)
                .or_insert(UnixMs(grant.until.0 + rest_ms));
            *rested = (*rested).max(UnixMs(grant.until.0 + rest_ms));
        }
        let issued = UnixMs(grant.start.0 - GRANT_LEAD_MS);
        let granted = self.granted.entry((grant.src, grant.dst)).or_insert(issued);
        *granted = (*granted).max(issued);
        self.next_id = self.next_id.max(grant.id);
    }

    /// A grant as its agent gets it.
    pub fn describe(topology: &Snapshot, grant: &Grant) -> ThroughputGrant {
        let c = topology.config().throughput;
        let dst = topology.node(grant.dst);
        ThroughputGrant {
            id: grant.id,
            peer: dst.name.clone(),
            peer_address: dst.addresses.first().copied(),
            peer_port: dst.probe_port,
            start: grant.start,
            duration_ms: c.duration_ms,
            warmup_ms: c.warmup_ms,
            streams: c.streams,
            epoch: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{EngineConfig, Topology};
    use zonemesh_domain::ZoneName;

    fn cluster(zones: usize, per_zone: usize, now: UnixMs) -> Topology {
        let mut t = Topology::new(EngineConfig::default());
        for z in 0..zones {
            for n in 0..per_zone {
                t.register(&hello(&format!("z{z}-n{n}"), &format!("zone-{z}")), now);
            }
        }
        t
    }

    #[test]
    fn full_mesh_inside_zones_and_few_pairs_between() {
        let now = UnixMs(1_000_000);
        let t = cluster(3, 4, now);
        let plans = t.view().plan(now);
        let a = t.id(&name("z0-n0")).unwrap();
        let intra: Vec<_> = plans[&a]
            .iter()
            .filter(|d| t.view().zone_of(**d) == t.view().zone_of(a))
            .collect();
        assert_eq!(intra.len(), 3);
        let inter: usize = plans
            .iter()
            .map(|(s, ts)| {
                ts.iter()
                    .filter(|d| t.view().zone_of(**d) != t.view().zone_of(*s))
                    .count()
            })
            .sum();
        // 3 zone pairs x 2 representative pairs x 2 directions.
        assert_eq!(inter, 12);
        assert!(!plans[&a].contains(&a));
    }

    #[test]
    fn a_suspects_trains_are_denser_as_far_as_they_fit_the_interval() {
        let c = PlanConfig::default();
        assert_eq!(
            dense_train_size(&c),
            20,
            "5 × 4: 190 ms and a 1 s timeout in 5 s"
        );
        // The lab's: 10 probes 10 ms apart every second, a 500 ms timeout: 40 fit (890 ms).
        let lab = PlanConfig {
            interval_ms: 1_000,
            train_size: 10,
            timeout_ms: 500,
            ..c
        };
        assert_eq!(dense_train_size(&lab), 40);
        // Only 51 fit in 1 s with a 500 ms timeout; never more than 100, never fewer than a train.
        assert_eq!(
            dense_train_size(&PlanConfig {
                suspect_factor: 8,
                ..lab
            }),
            51
        );
        let long = PlanConfig {
            interval_ms: 60_000,
            suspect_factor: 50,
            ..c
        };
        assert_eq!(dense_train_size(&long), MAX_TRAIN_SIZE);
        let full = PlanConfig {
            interval_ms: 1_000,
            timeout_ms: 1_000,
            ..c
        };
        assert_eq!(dense_train_size(&full), c.train_size);
        assert_eq!(
            dense_train_size(&PlanConfig {
                suspect_factor: 1,
                ..c
            }),
            5,
            "off"
        );
    }

    #[test]
    fn a_suspect_nodes_paths_and_a_suspect_links_are_probed_densely() {
        let now = UnixMs(1_000_000);
        let t = cluster(3, 3, now);
        let view = t.view();
        let id = |n: &str| t.id(&name(n)).unwrap();
        let zone = |z: &str| ZoneName::parse("zone", z).unwrap();
        let suspected = Suspected::new(
            view,
            &[
                Element::Node(name("z0-n1")),
                Element::zone_link(zone("zone-2"), zone("zone-1")),
                Element::Node(name("z2-n0")),
            ],
            2,
        );
        let dense = |a: &str, b: &str| suspected.dense(view, id(a), id(b));
        // The node's paths, both ways, inside its zone and out of it.
        assert!(dense("z0-n1", "z0-n0") && dense("z0-n2", "z0-n1") && dense("z1-n0", "z0-n1"));
        // The link's paths, both ways, and no other.
        assert!(dense("z1-n2", "z2-n1") && dense("z2-n0", "z1-n0"));
        assert!(!dense("z0-n0", "z0-n2") && !dense("z0-n0", "z1-n0") && !dense("z1-n0", "z1-n1"));
        // The third suspect is beyond `max`.
        assert!(!dense("z2-n0", "z2-n1"));
        // A plan says so target by target.
        let plan = view.probe_plan(&[(id("z0-n0"), false), (id("z0-n1"), true)], 1);
        let sizes: Vec<u32> = plan.targets.iter().map(|t| t.train_size).collect();
        assert_eq!(sizes, [5, 20]);
        assert!(plan.targets.iter().all(|t| t.interval_ms == 5_000));
    }

    #[test]
    fn a_suspects_tests_wait_for_one_more_interval_at_most() {
        let t0 = UnixMs(10_000_000);
        let t = cluster(2, 4, t0);
        let view = t.view();
        let plans = view.plan(t0);
        let interval = t.config().throughput.pair_interval_ms;
        let suspect = t.id(&name("z0-n1")).unwrap();
        let quiet = Suspected::new(view, &[Element::Node(name("z0-n1"))], 8).quiet(view, &plans);
        assert!(quiet.contains(&suspect));
        assert!(
            plans[&suspect].iter().all(|p| quiet.contains(p)),
            "its peers"
        );
        assert!(
            quiet.len() < 8,
            "zone-1's nodes off its planned pairs test on: {quiet:?}"
        );
        let is_quiet = |g: &Grant| quiet.contains(&g.src) || quiet.contains(&g.dst);
        let mut s = ThroughputScheduler::default();
        s.keep_quiet(quiet.clone());
        let mut tests = |from: i64, to: i64| -> Vec<Grant> {
            (t0.0 + from..t0.0 + to)
                .step_by(1_000)
                .flat_map(|ms| s.schedule(view, &plans, &|_| true, UnixMs(ms)))
                .collect()
        };
        // Every pair is tested once, quiet or not: a pair never tested does not wait.
        let all: usize = plans.values().map(Vec::len).sum();
        assert_eq!(tests(0, interval / 2).len(), all);
        // In the next interval the quiet pairs wait and the others are tested again.
        let second = tests(interval / 2, interval * 3 / 2);
        let loud = plans
            .iter()
            .flat_map(|(s, ts)| ts.iter().map(move |d| (*s, *d)))
            .filter(|(s, d)| !quiet.contains(s) && !quiet.contains(d))
            .count();
        assert!(loud > 0);
        assert_eq!(second.len(), loud, "{second:?}");
        assert!(!second.iter().any(is_quiet), "{second:?}");
        // One interval overdue, they are tested all the same.
        let third = tests(interval * 3 / 2, interval * 5 / 2);
        assert_eq!(third.iter().filter(|g| is_quiet(g)).count(), all - loud);
    }

    /// A node every probe misses is a network fault: its peers go on probing it (to see it come
    /// back) while a node whose agent is gone leaves the plan.
    #[test]
    fn an_unreachable_node_stays_in_the_plan_and_a_gone_one_leaves_it() {
        let now = UnixMs(1_000_000);
        let mut t = mesh(
            2,
            3,
            |_, _| 100.0,
            |_, d| if d == "z0-n1" { 100 } else { 0 },
            now,
        );
        t.sweep(now);
        let (lost, gone) = (t.id(&name("z0-n1")).unwrap(), t.id(&name("z0-n2")).unwrap());
        force_down(&mut t, gone);
        t.sweep(now);
        assert_eq!(t.view().state(lost, now).0, NodeState::Unreachable);
        assert_eq!(t.view().state(gone, now).0, NodeState::Down);
        let plans = t.view().plan(now);
        let a = t.id(&name("z0-n0")).unwrap();
        assert!(plans[&a].contains(&lost), "{:?}", plans[&a]);
        assert!(!plans[&a].contains(&gone), "{:?}", plans[&a]);
        assert!(plans.contains_key(&lost) && !plans.contains_key(&gone));
    }

    #[test]
    fn rotation_covers_every_node_between_zones() {
        let t = cluster(2, 5, UnixMs(0));
        let rotate = t.config().plan.rotate_ms;
        let mut covered = HashSet::new();
        for epoch in 0..3 {
            let plans = t.view().plan(UnixMs(epoch * rotate));
            for (s, ts) in &plans {
                if ts
                    .iter()
                    .any(|d| t.view().zone_of(*d) != t.view().zone_of(*s))
                {
                    covered.insert(*s);
                }
            }
        }
        assert_eq!(covered.len(), 10, "ceil(5 / 2) = 3 rotations cover all");
    }

    /// The distinct node pairs planned between zone-0 and zone-1.
    fn pairs_between(t: &Topology, now: UnixMs) -> HashSet<(NodeId, NodeId)> {
        let view = t.view();
        let zone = |n: NodeId| view.zone(view.zone_of(n)).name.to_string();
        view.plan(now)
            .iter()
            .flat_map(|(s, ts)| ts.iter().map(move |d| (*s, *d)))
            .filter(|(s, d)| zone(*s) == "zone-0" && zone(*d) == "zone-1")
            .collect()
    }

    #[test]
    fn k_inter_zone_pairs_are_k_distinct_pairs_whenever_the_zones_have_that_many() {
        // The case first: two zones of two, k = 4, used to probe the diagonal's 2 pairs.
        for (a, b) in [
            (2usize, 2usize),
            (1, 3),
            (3, 3),
            (2, 4),
            (4, 6),
            (5, 3),
            (6, 6),
            (7, 1),
        ] {
            for k in 1..=10 {
                let mut t = Topology::new(EngineConfig::default());
                for (z, size) in [(0, a), (1, b)] {
                    for n in 0..size {
                        t.register(
                            &hello(&format!("z{z}-n{n}"), &format!("zone-{z}")),
                            UnixMs(0),
                        );
                    }
                }
                let mut config = t.config().clone();
                config.plan.inter_zone_pairs = k;
                let t = Topology {
                    snap: Snapshot {
                        config: std::sync::Arc::new(config),
                        ..t.snap.clone()
                    },
                    ..t
                };
                let rotate = t.config().plan.rotate_ms;
                let mut ever = HashSet::new();
                let mut covered = HashSet::new();
                let rotations = (a * b).div_ceil(k);
                for epoch in 0..rotations as i64 {
                    let pairs = pairs_between(&t, UnixMs(epoch * rotate));
                    assert_eq!(
                        pairs.len(),
                        k.min(a * b),
                        "zones of {a} and {b}, k = {k}, rotation {epoch}"
                    );
                    if epoch < a.max(b).div_ceil(k) as i64 {
                        covered.extend(pairs.iter().flat_map(|(s, d)| [*s, *d]));
                    }
                    ever.extend(pairs);
                }
                assert_eq!(
                    covered.len(),
                    a + b,
                    "every node within ceil(max / k) rotations"
                );
                assert_eq!(
                    ever.len(),
                    a * b,
                    "every pair within ceil(A·B / k) rotations"
                );
            }
        }
    }

    #[test]
    fn probes_per_node_stay_under_three_percent_of_full_mesh_at_5000_nodes() {
        let t = cluster(50, 100, UnixMs(0));
        let plans = t.view().plan(UnixMs(0));
        let total: usize = plans.values().map(Vec::len).sum();
        let full = 5000 * 4999;
        let share = total as f64 / full as f64;
        assert!(share < 0.03, "{share}");
        assert!(share > 0.019, "intra-zone full mesh alone is ~2 %: {share}");
    }

    #[test]
    fn throughput_tests_never_overlap_on_a_node_and_respect_the_cap() {
        let now = UnixMs(10_000_000);
        let t = cluster(1, 6, now);
        let plans = t.view().plan(now);
        let mut s = ThroughputScheduler::default();
        let grants = s.schedule(t.view(), &plans, &|_| true, now);
        assert_eq!(grants.len(), 2, "max_concurrent is 2");
        let nodes: HashSet<NodeId> = grants.iter().flat_map(|g| [g.src, g.dst]).collect();
        assert_eq!(nodes.len(), 4, "no node in two tests");
        // Nothing more while they run, and the rest period (5 % share) keeps them out after.
        assert_eq!(
            s.schedule(t.view(), &plans, &|_| true, UnixMs(now.0 + 1_000))
                .len(),
            0
        );
        let later = s.schedule(t.view(), &plans, &|_| true, UnixMs(grants[0].until.0 + 1));
        let again: HashSet<NodeId> = later.iter().flat_map(|g| [g.src, g.dst]).collect();
        assert!(again.is_disjoint(&nodes), "{later:?}");
        assert!(
            s.schedule(t.view(), &plans, &|_| false, now).is_empty(),
            "nobody connected"
        );
    }
}
