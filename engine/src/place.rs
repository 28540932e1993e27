//! `Place`: choose nodes for the workers of a job.
//!
//! The cost of a node pair is the ranking cost ([`Scales::cost`]) of its [pair
//! figures](super::query::PairFigures) — the worse direction, or the model's estimate when
//! unmeasured, or the worst possible cost when nothing is known — with scales taken from the zone roll-ups of
//! the candidates' zones. A set of nodes is as good as its worst pair (then the sum of its pairs),
//! which is what a synchronous all-reduce waits for.
//!
//! 1. One zone when one can hold the job (always under REQUIRE_ONE, which otherwise fails naming
//!    the largest capacity any zone has; by preference under PREFER_ONE). Zones that fit are tried
//!    best roll-up first while the evaluation budget lasts, and the best result wins.
//! 2. Otherwise the fewest zones that can hold it, chosen for the best links between them.
//! 3. Inside the chosen zones a greedy walk starts from the best node and adds, one at a time, the
//!    node that keeps the worst pair lowest, filling its free slots (workers on one node talk
//!    without the network). Several walks (from the next best nodes) run while the budget lasts;
//!    a cost one walk computed serves the later ones, while the budget counts every cost a walk
//!    asks for.
//!
//! Only READY nodes are ever used: DOWN, STALE and excluded nodes are dropped first. A node with
//! no fresh RTT and loss figures (no fresh measured path from it, none inside its zone to or
//! from it) is not placed while the nodes with figures can hold the job.
//!
//! # With a job
//!
//! When the query gives the job's communication ([`Job`]: a collective and its bytes per
//! iteration), the zones are chosen by the same rule — one zone when one can hold the job, else
//! the fewest zones — but among the zones (or zone sets) of that count, at most
//! [`MAX_JOB_POOLS`] while the budget lasts — zones and zone sets by the cost of a lone transfer
//! of the job's chunk over their worst roll-up figures (every set of that count when there are
//! at most [`MAX_ZONE_SETS`], else the sets grown greedily from each zone) — the nodes **and the rank order** are the ones that minimise the job's
//! predicted time per iteration, [`collective::predict`](crate::collective::predict) over the
//! measured network ([`SnapshotNetwork`]). The formulas, one per collective, are in
//! [`collective`](crate::collective):
//!
//! - ring all-reduce: `2(p − 1) · max(8(n/p)/r_min, (1/p) Σ_ring (d + ρ + 8(n/p)/r))`;
//! - hierarchical all-reduce: the sum of its phases (rings inside the zones, gather at each
//!   zone's leader, the leaders' ring over `n`, scatter, rings inside the zones), the slowest zone
//!   setting each phase;
//! - parameter server with `s` servers: push plus pull, each the slowest of a server's incast
//!   (`(p − 1) n / s` through its ingress), a worker's egress and the slowest single transfer;
//! - all-to-all: the slowest of the `p (p − 1)` transfers of `n / (p − 1)`.
//!
//! How the search steers (a surrogate of those formulas, local moves, then exact pricing) is in
//! the `search` module's docs. The answer names the bottleneck, the rank order, how many of the
//! figures behind the prediction were estimated, and up to `alternatives` runner-up placements
//! (other node sets) with their predicted times.

use std::collections::{HashMap, HashSet};

use zonemesh_domain::{
    Assignment, FieldError, Job, JobBottleneck, JobPrediction, NodeName, NodeState,
    PlaceAlternative, PlaceAnswer, PlaceQuery, Provenance, UnixMs, Weights, ZonePolicy,
};

use crate::collective::Bottleneck as NetBottleneck;
use crate::network::{SnapshotNetwork, UNKNOWN_RATE_BPS, UNKNOWN_RTT_US, Usage};
use crate::rank::Scales;
use crate::search::{Found, lone_transfer, polish_best, search};
use crate::{Error, NodeId, Snapshot, ZoneId};

/// A placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// Nodes with their worker counts, in the order they were chosen.
    pub assignments: Vec<(NodeId, u32)>,
    /// Zones used, in the order of the assignments.
    pub zones: Vec<ZoneId>,
    /// Worst pair cost among the chosen nodes.
    pub worst_cost: f64,
    /// Worst median RTT between two chosen nodes, µs.
    pub worst_rtt_us: f64,
    /// Worst loss ratio between two chosen nodes.
    pub worst_loss: f64,
    /// Smallest throughput between two chosen nodes, when any is known.
    pub bottleneck_bps: Option<f64>,
    /// Provenance of the RTT and loss prediction.
    pub latency: Provenance,
    /// Provenance of the throughput prediction.
    pub throughput: Provenance,
    /// Oldest figure behind the prediction.
    pub oldest: Option<UnixMs>,
    /// One line: why these nodes.
    pub explanation: String,
    /// The node of each rank, rank 0 first.
    pub ranks: Vec<NodeId>,
    /// The job's predicted time, when the query gave a job.
    pub job: Option<JobTime>,
    /// Runner-up placements (other node sets) with their predicted times, fastest first.
    pub alternatives: Vec<(Vec<NodeId>, f64)>,
}

/// What decided a job's predicted time, in the snapshot's ids.
#[derive(Debug, Clone, PartialEq)]
pub enum Bottleneck {
    /// Nothing crosses the network.
    None,
    /// The link between two nodes.
    Link {
        /// Sending node.
        from: NodeId,
        /// Receiving node.
        to: NodeId,
    },
    /// A node's own link.
    Node {
        /// The node.
        node: NodeId,
        /// Its receiving side (else its sending side).
        ingress: bool,
    },
    /// The capacity between two zones.
    Zones {
        /// Source zone.
        from: ZoneId,
        /// Destination zone.
        to: ZoneId,
    },
    /// The delays around the ring.
    RingLatency,
}

/// A job's predicted time per iteration on a placement.
#[derive(Debug, Clone, PartialEq)]
pub struct JobTime {
    /// Seconds per iteration.
    pub seconds: f64,
    /// What decided it.
    pub bottleneck: Bottleneck,
    /// One line: why.
    pub why: String,
    /// Figures behind it, and how many were estimated.
    pub usage: Usage,
}

/// Most zones (or zone sets) `Place` with a job searches, best first (see the module docs).
pub const MAX_JOB_POOLS: usize = 4;

/// Most sets of zones `Place` with a job judges by their roll-ups; with more combinations it
/// judges the sets grown greedily from each zone.
pub const MAX_ZONE_SETS: usize = 2_000;

/// Most candidates [`Topology::place_exact_ids`] accepts (it tries every subset).
pub const MAX_EXACT_CANDIDATES: usize = 20;

struct Ctx<'a> {
    topology: &'a Snapshot,
    weights: Weights,
    scales: Scales,
    now: UnixMs,
    budget: usize,
    /// Try every subset instead of the greedy walk (the reference for placement quality).
    exact: bool,
}

impl Ctx<'_> {
    fn pair_cost(&self, a: NodeId, b: NodeId) -> f64 {
        let p = self.topology.pair(a, b, self.now);
        self.scales
            .cost(&self.weights, p.rtt_us, p.loss, p.tput_bps)
    }

    fn zone_cost(&self, a: ZoneId, b: ZoneId) -> f64 {
        match self.topology.roll_up(a, b) {
            Some(s) if s.loss_n > 0 => {
                self.scales
                    .cost(&self.weights, s.rtt_mean(), s.loss_mean(), s.tput_mean())
            }
            _ => self.scales.cost(&self.weights, None, None, None),
        }
    }

    fn node_cost(&self, n: NodeId) -> f64 {
        let s = self.topology.node_sums(n);
        if s.loss_n == 0 {
            return self.scales.cost(&self.weights, None, None, None);
        }
        self.scales
            .cost(&self.weights, s.rtt_mean(), s.loss_mean(), s.tput_mean())
    }

    fn name(&self, n: NodeId) -> &NodeName {
        &self.topology.node(n).name
    }

    /// Greedy choice of nodes among `candidates` for `workers` workers, from each of several
    /// starting nodes (best first) while the budget lasts. Returns (assignments, worst, sum) or None if they cannot hold
    /// the job.
    fn greedy(&mut self, candidates: &[(NodeId, u32)], workers: u32) -> Option<Choice> {
        let capacity: u64 = candidates.iter().map(|c| u64::from(c.1)).sum();
        if capacity < u64::from(workers) {
            return None;
        }
        if self.exact {
            return Some(self.exhaustive(candidates, workers as usize));
        }
        let mut order: Vec<(f64, NodeId, u32)> = candidates
            .iter()
            .map(|&(n, s)| (self.node_cost(n), n, s))
            .collect();
        order.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| self.name(a.1).cmp(self.name(b.1)))
        });
        // Three starting nodes at least; more while a quarter of the budget covers them (every
        // candidate, when the candidates are few).
        let per_seed = order
            .len()
            .saturating_mul(order.len().min(workers as usize));
        let seeds = (self.budget / 4 / per_seed.max(1)).max(3).min(order.len());
        let mut costs = PairCosts::new(order.len(), workers as usize);
        let mut best: Option<Choice> = None;
        for seed in 0..seeds {
            if seed > 0 && self.budget == 0 {
                break;
            }
            let choice = self.greedy_from(&order, &mut costs, seed, workers);
            if best.as_ref().is_none_or(|b| choice.better_than(b)) {
                best = Some(choice);
            }
        }
        best
    }

    fn greedy_from(
        &mut self,
        order: &[(f64, NodeId, u32)],
        costs: &mut PairCosts,
        seed: usize,
        workers: u32,
    ) -> Choice {
        let k = order.len();
        let mut worst = vec![0.0f64; k];
        let mut sum = vec![0.0f64; k];
        let mut used = vec![false; k];
        let mut choice = Choice::default();
        let mut remaining = workers;
        let mut next = seed;
        loop {
            used[next] = true;
            let (_, node, slots) = order[next];
            let take = slots.min(remaining);
            choice.assignments.push((node, take));
            choice.worst = choice.worst.max(worst[next]);
            choice.sum += sum[next];
            remaining -= take;
            if remaining == 0 {
                return choice;
            }
            for i in 0..k {
                if !used[i] {
                    let c = costs.get(i, next, || self.pair_cost(order[i].1, node));
                    worst[i] = worst[i].max(c);
                    sum[i] += c;
                }
            }
            self.budget = self.budget.saturating_sub(k);
            next = (0..k)
                .filter(|i| !used[*i])
                .min_by(|&a, &b| {
                    let ka = choice.worst.max(worst[a]);
                    let kb = choice.worst.max(worst[b]);
                    ka.total_cmp(&kb)
                        .then(sum[a].total_cmp(&sum[b]))
                        .then_with(|| self.name(order[a].1).cmp(self.name(order[b].1)))
                })
                .expect("capacity was checked: a node is left");
        }
    }
}

impl Ctx<'_> {
    /// The best `k` of `candidates` (one slot each) by (worst pair, sum of pairs), trying every
    /// subset of that size.
    fn exhaustive(&self, candidates: &[(NodeId, u32)], k: usize) -> Choice {
        let n = candidates.len();
        let cost: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i == j {
                            0.0
                        } else {
                            self.pair_cost(candidates[i].0, candidates[j].0)
                        }
                    })
                    .collect()
            })
            .collect();
        let mut best = Choice {
            worst: f64::INFINITY,
            ..Choice::default()
        };
        let mut pick: Vec<usize> = (0..k).collect();
        loop {
            let (mut worst, mut sum) = (0.0f64, 0.0f64);
            for (x, &a) in pick.iter().enumerate() {
                for &b in &pick[x + 1..] {
                    worst = worst.max(cost[a][b]);
                    sum += cost[a][b];
                }
            }
            let choice = Choice {
                assignments: pick.iter().map(|&i| (candidates[i].0, 1)).collect(),
                worst,
                sum,
            };
            if choice.better_than(&best) {
                best = choice;
            }
            // The next k-subset in lexicographic order.
            let Some(i) = (0..k).rev().find(|&i| pick[i] < n - k + i) else {
                return best;
            };
            pick[i] += 1;
            for j in i + 1..k {
                pick[j] = pick[j - 1] + 1;
            }
        }
    }
}

/// Most pair costs [`PairCosts`] keeps for one pool (8 MiB): a walk over a larger pool or for more
/// workers computes each cost as it asks, as before the cache.
pub const MAX_CACHED_PAIR_COSTS: usize = 1 << 20;

/// The pair costs a pool's greedy walks ask for, each computed once however many walks ask: by
/// the node just added (its place in the greedy's order), a row of its costs to the others,
/// filled as they are asked for (NaN until then). The walks of one pool mostly add the same good
/// nodes, so the later walks find most of their costs here. Memory is a row of the pool per node
/// added: with `k` candidates and `workers` workers, up to `k · min(k, workers)` costs, so a pool
/// whose walks could ask for more than [`MAX_CACHED_PAIR_COSTS`] keeps none. The budget still
/// counts every cost a walk asks for, so the walks and the choice are the same as when each cost
/// was computed anew.
struct PairCosts {
    k: usize,
    /// Empty when the pool is too large to keep its costs.
    rows: Vec<Option<Box<[f64]>>>,
}

impl PairCosts {
    /// For `k` candidates whose walks add at most `added` nodes each.
    fn new(k: usize, added: usize) -> Self {
        let keep = k.saturating_mul(added.min(k)) <= MAX_CACHED_PAIR_COSTS;
        Self {
            k,
            rows: if keep { vec![None; k] } else { Vec::new() },
        }
    }

    /// The cost of the candidate at place `i` to the one just added at place `added`, computed
    /// by `compute` the first time.
    fn get(&mut self, i: usize, added: usize, compute: impl FnOnce() -> f64) -> f64 {
        let k = self.k;
        let Some(row) = self.rows.get_mut(added) else {
            return compute();
        };
        let row = row.get_or_insert_with(|| vec![f64::NAN; k].into_boxed_slice());
        if row[i].is_nan() {
            row[i] = compute();
        }
        row[i]
    }
}

#[derive(Debug, Clone, Default)]
struct Choice {
    assignments: Vec<(NodeId, u32)>,
    worst: f64,
    sum: f64,
}

impl Choice {
    fn better_than(&self, other: &Choice) -> bool {
        (self.worst, self.sum) < (other.worst, other.sum)
    }
}

impl Snapshot {
    /// Places a job (see the module docs).
    pub fn place_ids(&self, query: &PlaceQuery, now: UnixMs) -> Result<Placement, Error> {
        self.place_with(query, now, false)
    }

    /// Places a job as [`place_ids`](Self::place_ids) does — same candidates, same zone choice —
    /// but chooses the nodes inside the zones by trying every subset: the optimum that the greedy
    /// walk is measured against. Exponential: at most [`MAX_EXACT_CANDIDATES`] usable candidates,
    /// one slot each.
    pub fn place_exact_ids(&self, query: &PlaceQuery, now: UnixMs) -> Result<Placement, Error> {
        if let Some((i, _)) = query.candidates.iter().enumerate().find(|(_, c)| c.1 != 1) {
            return Err(Error::InvalidArgument(FieldError::new(
                format!("candidates[{i}].slots"),
                "the exact placement takes one slot per node",
            )));
        }
        self.place_with(query, now, true)
    }

    fn place_with(&self, query: &PlaceQuery, now: UnixMs, exact: bool) -> Result<Placement, Error> {
        let (usable, skipped) = self.usable(query, now, exact)?;
        let (usable, unmeasured) = self.prefer_measured(usable, query.workers, now);

        let mut by_zone: HashMap<ZoneId, Vec<(NodeId, u32)>> = HashMap::new();
        for &(n, s) in &usable {
            by_zone.entry(self.zone_of(n)).or_default().push((n, s));
        }
        let zone_ids: Vec<ZoneId> = by_zone.keys().copied().collect();
        let scales = Scales::over(zone_ids.iter().flat_map(|&a| {
            zone_ids.iter().filter_map(move |&b| {
                self.roll_up(a, b)
                    .filter(|s| s.loss_n > 0)
                    .map(|s| (s.rtt_mean(), s.loss_mean(), s.tput_mean()))
            })
        }));
        let mut ctx = Ctx {
            topology: self,
            weights: query.weights,
            scales,
            now,
            budget: if exact {
                usize::MAX
            } else {
                self.config.place_budget
            },
            exact,
        };
        let mut by_quality = zone_ids.clone();
        by_quality.sort_by(|a, b| {
            ctx.zone_cost(*a, *a)
                .total_cmp(&ctx.zone_cost(*b, *b))
                .then_with(|| self.zone(*a).name.cmp(&self.zone(*b).name))
        });
        let pools = ZonePools {
            by_zone,
            ids: zone_ids,
            by_quality,
        };

        if let Some(job) = query.job.filter(|_| !exact) {
            let pools = self.job_pools(&ctx, query, &job, &usable, &pools)?;
            return Ok(self.place_job(&mut ctx, query, &job, pools, skipped, unmeasured));
        }
        let (choice, why) = self.choose(&mut ctx, query, &usable, &pools)?;
        let mut placement = self.describe(&ctx, choice, why, skipped + unmeasured);
        placement.ranks = placement
            .assignments
            .iter()
            .flat_map(|&(n, w)| std::iter::repeat_n(n, w as usize))
            .collect();
        Ok(placement)
    }

    /// The candidates a placement may use (the query's, or every registered node with one
    /// slot), without the excluded and those not READY, and how many were left out. Refuses a
    /// candidate listed twice, too many for the exact placement, and too little capacity.
    fn usable(
        &self,
        query: &PlaceQuery,
        now: UnixMs,
        exact: bool,
    ) -> Result<(Vec<(NodeId, u32)>, usize), Error> {
        let exclude: HashSet<NodeId> = self
            .resolve("exclude", &query.exclude)?
            .into_iter()
            .collect();
        let offered: Vec<(NodeId, u32)> = if query.candidates.is_empty() {
            self.nodes()
                .filter(|(_, n)| n.registered)
                .map(|(id, _)| (id, 1))
                .collect()
        } else {
            let mut seen = HashSet::new();
            let mut offered = Vec::new();
            for (i, (name, slots)) in query.candidates.iter().enumerate() {
                let id = self.require(&format!("candidates[{i}].node"), name)?;
                if !seen.insert(id) {
                    return Err(Error::InvalidArgument(FieldError::new(
                        format!("candidates[{i}].node"),
                        format!("{name} is listed twice"),
                    )));
                }
                offered.push((id, *slots));
            }
            offered
        };
        let mut skipped = 0usize;
        let usable: Vec<(NodeId, u32)> = offered
            .into_iter()
            .filter(|(id, _)| {
                let ok = !exclude.contains(id) && self.state(*id, now).0 == NodeState::Ready;
                skipped += usize::from(!ok);
                ok
            })
            .collect();
        if exact && usable.len() > MAX_EXACT_CANDIDATES {
            return Err(Error::InvalidArgument(FieldError::new(
                "candidates",
                format!(
                    "{} usable candidates, the exact placement takes at most {MAX_EXACT_CANDIDATES}",
                    usable.len()
                ),
            )));
        }
        let capacity: u64 = usable.iter().map(|c| u64::from(c.1)).sum();
        if capacity < u64::from(query.workers) {
            return Err(Error::NotEnoughCapacity {
                workers: query.workers,
                capacity,
                skipped,
            });
        }
        Ok((usable, skipped))
    }

    /// The pools a job's search tries, each with why: every usable node under policy ANY; else
    /// each zone that can hold the job, by the job's cost over its roll-up figures; else (unless
    /// one zone is required) the zone sets the job's estimate prefers.
    fn job_pools(
        &self,
        ctx: &Ctx<'_>,
        query: &PlaceQuery,
        job: &Job,
        usable: &[(NodeId, u32)],
        zones: &ZonePools,
    ) -> Result<Vec<Pool>, Error> {
        let (by_zone, zone_ids, zones_by_quality) = (&zones.by_zone, &zones.ids, &zones.by_quality);
        let cap = |z: &ZoneId| zones.capacity(z);
        let name = |z: &ZoneId| &self.zone(*z).name;
        let fitting = zones.fitting(query.workers);
        let pools: Vec<Pool> = if query.policy == ZonePolicy::Any {
            vec![(usable.to_vec(), "any nodes (policy ANY)".to_owned())]
        } else if !fitting.is_empty() {
            // The zones by the job's cost of a lone transfer over their roll-up figures.
            let mut fitting = fitting.clone();
            fitting.sort_by(|a, b| {
                self.job_zone_estimate(&[*a], job, query.workers)
                    .total_cmp(&self.job_zone_estimate(&[*b], job, query.workers))
                    .then_with(|| name(a).cmp(name(b)))
            });
            fitting
                .iter()
                .map(|z| {
                    let why = format!(
                        "one zone, {}, of {} that can hold {} workers",
                        name(z),
                        fitting.len(),
                        query.workers
                    );
                    (by_zone[z].clone(), why)
                })
                .collect()
        } else if query.policy == ZonePolicy::RequireOne {
            return Err(self.no_zone_fits(zone_ids, &cap, query.workers));
        } else {
            self.job_zone_sets(ctx, zones_by_quality, &cap, job, query.workers)
                .into_iter()
                .map(|zones| {
                    let why = format!(
                        "no zone can hold {} workers (largest holds {}): {} zones, {}",
                        query.workers,
                        zone_ids.iter().map(cap).max().unwrap_or(0),
                        zones.len(),
                        zones
                            .iter()
                            .map(|z| name(z).as_str())
                            .collect::<Vec<_>>()
                            .join(" + ")
                    );
                    (zones.iter().flat_map(|z| by_zone[z].clone()).collect(), why)
                })
                .collect()
        };
        Ok(pools)
    }

    /// Without a job: the nodes, and why: under policy ANY the greedy choice over every usable
    /// node; else the best greedy choice of the zones that can hold the job, as many as the
    /// budget allows (at least one); else (unless one zone is required) the fewest zones with
    /// the best links between them.
    fn choose(
        &self,
        ctx: &mut Ctx<'_>,
        query: &PlaceQuery,
        usable: &[(NodeId, u32)],
        zones: &ZonePools,
    ) -> Result<(Choice, String), Error> {
        let (by_zone, zone_ids, zones_by_quality) = (&zones.by_zone, &zones.ids, &zones.by_quality);
        let cap = |z: &ZoneId| zones.capacity(z);
        let name = |z: &ZoneId| &self.zone(*z).name;
        let fitting = zones.fitting(query.workers);
        let (choice, why) = if query.policy == ZonePolicy::Any {
            let choice = ctx.greedy(usable, query.workers).expect("capacity checked");
            (choice, "any nodes (policy ANY)".to_owned())
        } else if !fitting.is_empty() {
            let mut best: Option<(Choice, ZoneId)> = None;
            let mut tried = 0;
            for &z in &fitting {
                if tried > 0 && ctx.budget == 0 {
                    break;
                }
                tried += 1;
                let choice = ctx.greedy(&by_zone[&z], query.workers).expect("zone fits");
                if best.as_ref().is_none_or(|(b, _)| choice.better_than(b)) {
                    best = Some((choice, z));
                }
            }
            let (choice, zone) = best.expect("at least one zone tried");
            let why = format!(
                "one zone, {zone}: the best of {tried} tried of {} that can hold {} workers",
                fitting.len(),
                query.workers,
                zone = name(&zone)
            );
            (choice, why)
        } else if query.policy == ZonePolicy::RequireOne {
            return Err(self.no_zone_fits(zone_ids, &cap, query.workers));
        } else {
            let zones = self.fewest_zones(ctx, zones_by_quality, &cap, query.workers);
            let pool: Vec<(NodeId, u32)> = zones.iter().flat_map(|z| by_zone[z].clone()).collect();
            let choice = ctx
                .greedy(&pool, query.workers)
                .expect("zones hold the job");
            let why = format!(
                "no zone can hold {} workers (largest holds {}): the {} zones with the best links between them",
                query.workers,
                zone_ids.iter().map(cap).max().unwrap_or(0),
                zones.len()
            );
            (choice, why)
        };
        Ok((choice, why))
    }

    /// The usable nodes with fresh RTT and loss figures, when they can hold `workers`, and how
    /// many were left out; else every usable node.
    fn prefer_measured(
        &self,
        usable: Vec<(NodeId, u32)>,
        workers: u32,
        now: UnixMs,
    ) -> (Vec<(NodeId, u32)>, usize) {
        let (measured, unmeasured): (Vec<_>, Vec<_>) = usable
            .iter()
            .copied()
            .partition(|&(n, _)| self.has_fresh_figures(n, now));
        let held: u64 = measured.iter().map(|c| u64::from(c.1)).sum();
        if unmeasured.is_empty() || held < u64::from(workers) {
            (usable, 0)
        } else {
            (measured, unmeasured.len())
        }
    }

    /// Whether a node has a fresh measured RTT and loss: on a path inside its zone (either
    /// direction), or on a path it measured.
    pub fn has_fresh_figures(&self, n: NodeId, now: UnixMs) -> bool {
        self.node_sums(n).loss_n > 0
            || self
                .outgoing(n)
                .any(|(_, p)| !p.is_stale(now, &self.config.path) && p.merged.loss().is_some())
    }

    fn no_zone_fits(&self, zones: &[ZoneId], cap: &dyn Fn(&ZoneId) -> u64, workers: u32) -> Error {
        let name = |z: &ZoneId| &self.zone(*z).name;
        let largest = zones
            .iter()
            .max_by(|a, b| cap(a).cmp(&cap(b)).then_with(|| name(b).cmp(name(a))))
            .expect("capacity is not zero, so a zone has nodes");
        Error::NoZoneFits {
            workers,
            zone: name(largest).to_string(),
            capacity: cap(largest),
        }
    }

    /// Places a job with a job model: searches the pools (best first) while the budget lasts,
    /// at least one (see the module docs).
    fn place_job(
        &self,
        ctx: &mut Ctx<'_>,
        query: &PlaceQuery,
        job: &Job,
        pools: Vec<Pool>,
        skipped: usize,
        unmeasured: usize,
    ) -> Placement {
        let mut results: Vec<(Vec<NodeId>, Found, usize)> = Vec::new();
        let mut tried = 0;
        let total = pools.len();
        for (index, (pool, _)) in pools.iter().enumerate() {
            if tried > 0 && (ctx.budget == 0 || tried >= MAX_JOB_POOLS) {
                break;
            }
            tried += 1;
            let ids: Vec<NodeId> = pool.iter().map(|c| c.0).collect();
            let slots: Vec<u32> = pool.iter().map(|c| c.1).collect();
            let net = SnapshotNetwork::new(self, ids.clone(), ctx.now);
            for found in search(
                &net,
                &slots,
                query.workers,
                job,
                query.alternatives as usize,
                &mut ctx.budget,
            ) {
                let ranks: Vec<NodeId> = found.ranks.iter().map(|&i| ids[i]).collect();
                let found = Found {
                    prediction: crate::collective::Prediction {
                        bottleneck: to_ids(&ids, found.prediction.bottleneck.clone()),
                        ..found.prediction
                    },
                    ..found
                };
                results.push((ranks, found, index));
            }
        }
        results.sort_by(|a, b| a.1.prediction.seconds.total_cmp(&b.1.prediction.seconds));
        let mut distinct: Vec<(Vec<NodeId>, Found, usize)> = Vec::new();
        for r in results {
            let mut set = r.0.clone();
            set.sort();
            set.dedup();
            let seen = distinct.iter().any(|d| {
                let mut other = d.0.clone();
                other.sort();
                other.dedup();
                other == set
            });
            if !seen {
                distinct.push(r);
            }
        }
        // Polish the best with exact moves over its pool.
        if let Some((ranks, found, pool)) = distinct.first_mut() {
            let (nodes, _) = &pools[*pool];
            let ids: Vec<NodeId> = nodes.iter().map(|c| c.0).collect();
            let slots: Vec<u32> = nodes.iter().map(|c| c.1).collect();
            let net = SnapshotNetwork::new(self, ids.clone(), ctx.now);
            let local: Vec<usize> = ranks
                .iter()
                .map(|n| ids.iter().position(|i| i == n).expect("from the pool"))
                .collect();
            let polished = polish_best(&net, job, local, &slots, query.workers);
            if polished.prediction.seconds <= found.prediction.seconds {
                *ranks = polished.ranks.iter().map(|&i| ids[i]).collect();
                *found = Found {
                    prediction: crate::collective::Prediction {
                        bottleneck: to_ids(&ids, polished.prediction.bottleneck.clone()),
                        ..polished.prediction
                    },
                    ..polished
                };
            }
        }
        let mut distinct = distinct.into_iter();
        let (ranks, best, pool) = distinct.next().expect("a pool holds the job");
        let alternatives: Vec<(Vec<NodeId>, f64)> = distinct
            .take(query.alternatives as usize)
            .map(|(ranks, f, _)| (ranks, f.prediction.seconds))
            .collect();
        let mut assignments: Vec<(NodeId, u32)> = Vec::new();
        for &n in &ranks {
            match assignments.last_mut() {
                Some((last, w)) if *last == n => *w += 1,
                _ => assignments.push((n, 1)),
            }
        }
        let worst = assignments
            .iter()
            .enumerate()
            .flat_map(|(i, a)| assignments[i + 1..].iter().map(move |b| (a.0, b.0)))
            .map(|(a, b)| ctx.pair_cost(a, b))
            .fold(0.0, f64::max);
        let p = &best.prediction;
        let bottleneck = match p.bottleneck {
            NetBottleneck::None => Bottleneck::None,
            NetBottleneck::Link { from, to } => Bottleneck::Link {
                from: NodeId(from as u32),
                to: NodeId(to as u32),
            },
            NetBottleneck::Node { node, ingress } => Bottleneck::Node {
                node: NodeId(node as u32),
                ingress,
            },
            NetBottleneck::Zones { from, to } => Bottleneck::Zones {
                from: ZoneId(from as u32),
                to: ZoneId(to as u32),
            },
            NetBottleneck::RingLatency => Bottleneck::RingLatency,
        };
        let why = format!(
            "{}; {} of {} bytes: predicted {:.3} ms per iteration, bound by {} ({} of {} figures estimated; best of {tried} pools tried of {total})",
            pools[pool].1,
            job.collective,
            job.bytes_per_iteration,
            p.seconds * 1e3,
            p.why,
            best.usage.estimated,
            best.usage.figures,
        );
        let choice = Choice {
            assignments,
            worst,
            sum: 0.0,
        };
        let mut placement = self.describe(ctx, choice, why, skipped + unmeasured);
        placement.job = Some(JobTime {
            seconds: p.seconds,
            bottleneck,
            why: p.why.clone(),
            usage: best.usage,
        });
        placement.ranks = ranks;
        placement.alternatives = alternatives;
        placement
    }

    /// The job's cost of a lone transfer of its chunk over the worst roll-up among `zones` (each
    /// zone's own, and between every two): how a zone set is judged before it is searched.
    ///
    /// The roll-up, not the model's zone-pair terms, on purpose: this only orders the pools the
    /// budget lets the search try, and a pool is as good as the nodes in it. The roll-up counts
    /// the zone's lossy and slow nodes, so a zone that is mostly faulty is tried late; the
    /// model's terms leave node faults out (they belong to the nodes) and would rank it with the
    /// clean ones. Inside the pools tried, the model decides (`predict` over the network).
    fn job_zone_estimate(&self, zones: &[ZoneId], job: &Job, workers: u32) -> f64 {
        let chunk = job.bytes_per_iteration as f64 / f64::from(workers.max(1));
        let mut worst = 0.0f64;
        for (i, &a) in zones.iter().enumerate() {
            for &b in &zones[i..] {
                let cost = self
                    .roll_up(a, b)
                    .filter(|s| s.loss_n > 0)
                    .map_or(f64::INFINITY, |s| {
                        let link = crate::collective::Link::wire(
                            s.rtt_mean().unwrap_or(UNKNOWN_RTT_US),
                            s.loss_mean().unwrap_or(0.0),
                            s.tput_mean().unwrap_or(UNKNOWN_RATE_BPS),
                        );
                        lone_transfer(link, chunk).0
                    });
                worst = worst.max(cost);
            }
        }
        worst
    }

    /// The sets of the fewest zones whose capacity holds `workers`, by
    /// [`job_zone_estimate`](Self::job_zone_estimate), best first: every such set when there are
    /// at most [`MAX_ZONE_SETS`] combinations, else one grown greedily from each zone for the
    /// best links between them.
    fn job_zone_sets(
        &self,
        ctx: &Ctx<'_>,
        zones: &[ZoneId],
        cap: &dyn Fn(&ZoneId) -> u64,
        job: &Job,
        workers: u32,
    ) -> Vec<Vec<ZoneId>> {
        let need = u64::from(workers);
        let count = fewest_count(zones, cap, need);
        let combinations = (0..count).fold(1u128, |c, i| {
            c * (zones.len() - i) as u128 / (i + 1) as u128
        });
        let mut sets: Vec<Vec<ZoneId>> = if combinations <= MAX_ZONE_SETS as u128 {
            let mut out = Vec::new();
            let mut pick: Vec<usize> = (0..count).collect();
            loop {
                let set: Vec<ZoneId> = pick.iter().map(|&i| zones[i]).collect();
                if set.iter().map(cap).sum::<u64>() >= need {
                    out.push(set);
                }
                let Some(x) = (0..count)
                    .rev()
                    .find(|&x| pick[x] < zones.len() - count + x)
                else {
                    break;
                };
                pick[x] += 1;
                for y in x + 1..count {
                    pick[y] = pick[y - 1] + 1;
                }
            }
            out
        } else {
            self.zone_sets(ctx, zones, cap, workers)
                .into_iter()
                .map(|(_, set)| set)
                .collect()
        };
        let mut keyed: Vec<(f64, Vec<ZoneId>)> = sets
            .drain(..)
            .map(|set| (self.job_zone_estimate(&set, job, workers), set))
            .collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out: Vec<Vec<ZoneId>> = Vec::new();
        for (_, set) in keyed {
            let mut sorted = set.clone();
            sorted.sort();
            if !out.iter().any(|o| {
                let mut x = o.clone();
                x.sort();
                x == sorted
            }) {
                out.push(set);
            }
        }
        if out.is_empty() {
            out.push(zones.to_vec());
        }
        out
    }

    /// The fewest zones whose capacity holds `workers`, picked for the best links between them.
    fn fewest_zones(
        &self,
        ctx: &Ctx<'_>,
        zones: &[ZoneId],
        cap: &dyn Fn(&ZoneId) -> u64,
        workers: u32,
    ) -> Vec<ZoneId> {
        let mut best: Option<(f64, Vec<ZoneId>)> = None;
        for (worst, chosen) in self.zone_sets(ctx, zones, cap, workers) {
            if best.as_ref().is_none_or(|(w, _)| worst < *w) {
                best = Some((worst, chosen));
            }
        }
        best.map(|(_, z)| z).unwrap_or_else(|| zones.to_vec())
    }

    /// From each zone, the fewest zones holding `workers` grown greedily for the best links,
    /// with the worst link among them.
    fn zone_sets(
        &self,
        ctx: &Ctx<'_>,
        zones: &[ZoneId],
        cap: &dyn Fn(&ZoneId) -> u64,
        workers: u32,
    ) -> Vec<(f64, Vec<ZoneId>)> {
        let need = u64::from(workers);
        let count = fewest_count(zones, cap, need);
        let mut sets = Vec::new();
        for &seed in zones {
            let mut chosen = vec![seed];
            let mut held = cap(&seed);
            let mut worst = ctx.zone_cost(seed, seed);
            while held < need {
                let left = count - chosen.len();
                let pick = zones
                    .iter()
                    .filter(|z| !chosen.contains(z))
                    .filter(|z| {
                        // Still reachable within `count` zones after taking z?
                        let mut rest: Vec<u64> = zones
                            .iter()
                            .filter(|o| !chosen.contains(o) && o != z)
                            .map(cap)
                            .collect();
                        rest.sort_unstable_by(|a, b| b.cmp(a));
                        held + cap(z) + rest.iter().take(left - 1).sum::<u64>() >= need
                    })
                    .map(|z| {
                        let link = chosen
                            .iter()
                            .map(|c| ctx.zone_cost(*c, *z))
                            .fold(ctx.zone_cost(*z, *z), f64::max);
                        (link, *z)
                    })
                    .min_by(|a, b| a.0.total_cmp(&b.0));
                let Some((link, z)) = pick else { break };
                worst = worst.max(link);
                held += cap(&z);
                chosen.push(z);
            }
            if held >= need {
                sets.push((worst, chosen));
            }
        }
        sets
    }

    fn describe(&self, ctx: &Ctx<'_>, choice: Choice, why: String, skipped: usize) -> Placement {
        let now = ctx.now;
        let nodes: Vec<NodeId> = choice.assignments.iter().map(|a| a.0).collect();
        let mut worst_rtt = 0.0f64;
        let mut worst_loss = 0.0f64;
        let mut bottleneck: Option<f64> = None;
        let mut latency = Provenance::Measured;
        let mut throughput = Provenance::Measured;
        let mut oldest: Option<UnixMs> = None;
        // Provenance orders measured, estimated, unknown: the worst figure sets the whole.
        let demote = |current: &mut Provenance, p: Provenance| *current = (*current).max(p);
        for (i, &a) in nodes.iter().enumerate() {
            for &b in &nodes[i + 1..] {
                let p = self.pair(a, b, now);
                demote(&mut latency, p.latency);
                demote(&mut throughput, p.throughput);
                worst_rtt = worst_rtt.max(p.rtt_us.unwrap_or(0.0));
                worst_loss = worst_loss.max(p.loss.unwrap_or(0.0));
                if let Some(t) = p.tput_bps {
                    bottleneck = Some(bottleneck.map_or(t, |b| b.min(t)));
                }
                if let Some(at) = p.oldest {
                    oldest = Some(oldest.map_or(at, |o| o.min(at)));
                }
            }
        }
        if nodes.len() < 2 {
            latency = Provenance::Unknown;
            throughput = Provenance::Unknown;
        }
        let mut zones: Vec<ZoneId> = Vec::new();
        for &n in &nodes {
            let z = self.zone_of(n);
            if !zones.contains(&z) {
                zones.push(z);
            }
        }
        let mut explanation = format!(
            "{} on {} node(s); worst pair {:.0} µs, loss {:.2} %",
            why,
            nodes.len(),
            worst_rtt,
            worst_loss * 100.0
        );
        if latency != Provenance::Measured {
            explanation.push_str(&format!(" ({} figures)", provenance_word(latency)));
        }
        if skipped > 0 {
            explanation.push_str(&format!(
                "; {skipped} candidate(s) skipped (excluded, STALE, DOWN or without fresh figures)"
            ));
        }
        Placement {
            assignments: choice.assignments,
            zones,
            worst_cost: choice.worst,
            worst_rtt_us: worst_rtt,
            worst_loss,
            bottleneck_bps: bottleneck,
            latency,
            throughput,
            oldest,
            explanation,
            ranks: Vec::new(),
            job: None,
            alternatives: Vec::new(),
        }
    }

    /// `Place`.
    pub fn place(&self, query: &PlaceQuery, now: UnixMs) -> Result<PlaceAnswer, Error> {
        let p = self.place_ids(query, now)?;
        Ok(PlaceAnswer {
            assignments: p
                .assignments
                .iter()
                .map(|&(n, w)| Assignment {
                    node: self.node(n).name.clone(),
                    zone: self.zone(self.zone_of(n)).name.clone(),
                    workers: w,
                })
                .collect(),
            zones: p.zones.iter().map(|z| self.zone(*z).name.clone()).collect(),
            worst_rtt_us: p.worst_rtt_us,
            worst_loss_ratio: p.worst_loss,
            bottleneck_throughput_bps: p.bottleneck_bps,
            latency_provenance: p.latency,
            throughput_provenance: p.throughput,
            oldest_age_ms: p.oldest.map_or(0, |o| now.since(o)),
            explanation: p.explanation,
            ranks: p.ranks.iter().map(|&n| self.node(n).name.clone()).collect(),
            prediction: p.job.map(|j| JobPrediction {
                seconds: j.seconds,
                bottleneck: match j.bottleneck {
                    Bottleneck::None => JobBottleneck::None,
                    Bottleneck::Link { from, to } => JobBottleneck::Link {
                        from: self.node(from).name.clone(),
                        to: self.node(to).name.clone(),
                    },
                    Bottleneck::Node { node, ingress } => JobBottleneck::Node {
                        node: self.node(node).name.clone(),
                        ingress,
                    },
                    Bottleneck::Zones { from, to } => JobBottleneck::Zones {
                        from: self.zone(from).name.clone(),
                        to: self.zone(to).name.clone(),
                    },
                    Bottleneck::RingLatency => JobBottleneck::RingLatency,
                },
                why: j.why,
                figures: j.usage.figures,
                estimated_figures: j.usage.estimated,
            }),
            alternatives: p
                .alternatives
                .iter()
                .map(|(ranks, seconds)| PlaceAlternative {
                    ranks: ranks.iter().map(|&n| self.node(n).name.clone()).collect(),
                    seconds: *seconds,
                })
                .collect(),
        })
    }
}

/// A bottleneck over a pool's network, with the snapshot's node ids for the pool's indices.
fn to_ids(ids: &[NodeId], b: NetBottleneck) -> NetBottleneck {
    match b {
        NetBottleneck::Link { from, to } => NetBottleneck::Link {
            from: ids[from].0 as usize,
            to: ids[to].0 as usize,
        },
        NetBottleneck::Node { node, ingress } => NetBottleneck::Node {
            node: ids[node].0 as usize,
            ingress,
        },
        other => other,
    }
}

/// How many zones at least hold `need` slots.
fn fewest_count(zones: &[ZoneId], cap: &dyn Fn(&ZoneId) -> u64, need: u64) -> usize {
    let mut caps: Vec<u64> = zones.iter().map(cap).collect();
    caps.sort_unstable_by(|a, b| b.cmp(a));
    let mut count = 0;
    let mut total = 0;
    while total < need && count < caps.len() {
        total += caps[count];
        count += 1;
    }
    count
}

fn provenance_word(p: Provenance) -> &'static str {
    match p {
        Provenance::Measured => "measured",
        Provenance::Estimated => "partly estimated",
        Provenance::Unknown => "partly unknown",
    }
}

/// Nodes a job's search may use (with their slots), and why they were chosen.
type Pool = (Vec<(NodeId, u32)>, String);

/// The usable nodes by zone, the zones, and the zones best first by their inside figures.
struct ZonePools {
    by_zone: HashMap<ZoneId, Vec<(NodeId, u32)>>,
    ids: Vec<ZoneId>,
    by_quality: Vec<ZoneId>,
}

impl ZonePools {
    /// Workers zone `z` can hold.
    fn capacity(&self, z: &ZoneId) -> u64 {
        self.by_zone[z].iter().map(|c| u64::from(c.1)).sum()
    }

    /// The zones that can hold `workers`, best first.
    fn fitting(&self, workers: u32) -> Vec<ZoneId> {
        self.by_quality
            .iter()
            .copied()
            .filter(|z| self.capacity(z) >= u64::from(workers))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topology;
    use crate::testing::*;
    use proptest::prelude::*;

    fn zone(n: &str) -> &str {
        &n[..2]
    }

    /// zone-1 is the tightest zone; zone-0 has one slow node; zones are 2 ms apart.
    fn rtt(s: &str, d: &str) -> f64 {
        if zone(s) != zone(d) {
            return 2_000.0;
        }
        match zone(s) {
            "z1" => 50.0,
            _ if s == "z0-n0" || d == "z0-n0" => 400.0,
            _ => 80.0,
        }
    }

    #[test]
    fn a_job_that_fits_goes_to_the_best_zone() {
        let now = UnixMs(1_000_000);
        let t = mesh(3, 3, rtt, |_, _| 0, now);
        let query = PlaceQuery {
            workers: 3,
            ..PlaceQuery::default()
        };
        let p = t.view().place(&query, now).unwrap();
        assert_eq!(p.zones, ["zone-1"]);
        assert_eq!(p.assignments.len(), 3);
        assert_eq!(p.worst_rtt_us, 50.0);
        assert_eq!(p.latency_provenance, Provenance::Measured);
        // Two workers in zone-0 avoid its slow node.
        let zone0 = PlaceQuery {
            workers: 2,
            candidates: (0..3).map(|i| (name(&format!("z0-n{i}")), 1)).collect(),
            ..PlaceQuery::default()
        };
        let p = t.view().place_ids(&zone0, now).unwrap();
        let chosen: Vec<&str> = p
            .assignments
            .iter()
            .map(|a| t.node(a.0).name.as_str())
            .collect();
        assert!(!chosen.contains(&"z0-n0"), "{chosen:?}");
    }

    #[test]
    fn a_job_larger_than_any_zone_spans_the_fewest_zones() {
        let now = UnixMs(1_000_000);
        // zone-2 is far from the others.
        let t = mesh(
            3,
            3,
            |s, d| {
                let (a, b) = (zone(s), zone(d));
                if a == b {
                    60.0
                } else if a == "z2" || b == "z2" {
                    9_000.0
                } else {
                    1_000.0
                }
            },
            |_, _| 0,
            now,
        );
        let p = t
            .view()
            .place_ids(
                &PlaceQuery {
                    workers: 5,
                    ..PlaceQuery::default()
                },
                now,
            )
            .unwrap();
        let mut zones: Vec<String> = p
            .zones
            .iter()
            .map(|z| t.view().zone(*z).name.to_string())
            .collect();
        zones.sort();
        assert_eq!(zones, ["zone-0", "zone-1"]);
        assert_eq!(p.worst_rtt_us, 1_000.0);

        let err = t
            .view()
            .place_ids(
                &PlaceQuery {
                    workers: 5,
                    policy: ZonePolicy::RequireOne,
                    ..PlaceQuery::default()
                },
                now,
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no zone can hold 5 workers: the largest, zone-0, has 3 free slots"
        );
    }

    #[test]
    fn slots_let_workers_share_a_node() {
        let now = UnixMs(1_000_000);
        let t = mesh(1, 3, rtt, |_, _| 0, now);
        let query = PlaceQuery {
            workers: 4,
            candidates: vec![(name("z0-n1"), 3), (name("z0-n2"), 3)],
            ..PlaceQuery::default()
        };
        let p = t.view().place_ids(&query, now).unwrap();
        assert_eq!(p.assignments.iter().map(|a| a.1).sum::<u32>(), 4);
        assert_eq!(p.assignments.len(), 2);
        let too_many = PlaceQuery {
            workers: 7,
            ..query
        };
        assert!(matches!(
            t.view().place_ids(&too_many, now),
            Err(Error::NotEnoughCapacity {
                workers: 7,
                capacity: 6,
                ..
            })
        ));
    }

    #[test]
    fn unknown_and_duplicate_candidates_are_refused() {
        let now = UnixMs(1_000_000);
        let t = mesh(1, 2, rtt, |_, _| 0, now);
        let unknown = PlaceQuery {
            workers: 1,
            candidates: vec![(name("z0-n0"), 1), (name("ghost"), 1)],
            ..PlaceQuery::default()
        };
        assert_eq!(
            t.view().place_ids(&unknown, now).unwrap_err().to_string(),
            "candidates[1].node: unknown node ghost"
        );
        let twice = PlaceQuery {
            workers: 1,
            candidates: vec![(name("z0-n0"), 1), (name("z0-n0"), 1)],
            ..PlaceQuery::default()
        };
        assert!(
            t.view()
                .place_ids(&twice, now)
                .unwrap_err()
                .to_string()
                .contains("listed twice")
        );
    }

    /// The demo's cluster: three zones of three, 2 ms between zone-0 and zone-1, 6 ms to
    /// zone-2; z0-n1 loses 5 % of its packets, z1-n2 runs at 95.6 Mbit/s (every other path at
    /// 956 Mbit/s); z2-n3 joined zone-2 and has no figures yet.
    fn demo_cluster(now: UnixMs) -> Topology {
        let mut t = mesh_with_throughput(
            3,
            3,
            |s, d| match (zone(s), zone(d)) {
                (a, b) if a == b => 100.0,
                ("z2", _) | (_, "z2") => 6_000.0,
                _ => 2_000.0,
            },
            |s, d| if s == "z0-n1" || d == "z0-n1" { 5 } else { 0 },
            |s, d| {
                if s == "z1-n2" || d == "z1-n2" {
                    95.6e6
                } else {
                    956e6
                }
            },
            now,
        );
        t.register(&hello("z2-n3", "zone-2"), now);
        t
    }

    fn ring(bytes: u64) -> Option<Job> {
        Some(Job {
            collective: zonemesh_domain::Collective::RingAllReduce,
            bytes_per_iteration: bytes,
        })
    }

    #[test]
    fn a_job_avoids_the_lossy_and_the_slow_node_and_crosses_zones_once() {
        let now = UnixMs(1_000_000);
        let t = demo_cluster(now);
        let query = PlaceQuery {
            workers: 4,
            exclude: ["z2-n0", "z2-n1", "z2-n2", "z2-n3"].map(name).to_vec(),
            job: ring(25 << 20),
            alternatives: 3,
            ..PlaceQuery::default()
        };
        let p = t.view().place(&query, now).unwrap();
        let ranks: Vec<&str> = p.ranks.iter().map(NodeName::as_str).collect();
        let mut chosen = ranks.clone();
        chosen.sort();
        assert_eq!(
            chosen,
            ["z0-n0", "z0-n2", "z1-n0", "z1-n1"],
            "{}",
            p.explanation
        );
        // A ring in zone order crosses between the zones twice, not four times.
        let crossings = (0..4)
            .filter(|&i| ranks[i][..2] != ranks[(i + 1) % 4][..2])
            .count();
        assert_eq!(crossings, 2, "{ranks:?}");
        let job = p.prediction.expect("a job gives a prediction");
        assert!(job.seconds > 0.0);
        assert_eq!(job.estimated_figures, 0, "every pair is measured");
        assert_eq!(
            job.figures, 8,
            "four links of the ring, RTT and loss plus rate each"
        );
        assert!(!p.alternatives.is_empty() && p.alternatives.len() <= 3);
        for a in &p.alternatives {
            assert!(a.seconds >= job.seconds, "{} < {}", a.seconds, job.seconds);
        }
        // Without the job model, the worst pair decides and the slow node is as good as any.
        let old = t
            .view()
            .place(
                &PlaceQuery {
                    job: None,
                    alternatives: 0,
                    ..query
                },
                now,
            )
            .unwrap();
        assert!(old.prediction.is_none());
        assert_eq!(old.ranks.len(), 4);
    }

    #[test]
    fn a_node_without_figures_is_not_placed_while_others_can_hold_the_job() {
        let now = UnixMs(1_000_000);
        let t = demo_cluster(now);
        for job in [None, ring(1 << 20)] {
            let query = PlaceQuery {
                workers: 4,
                job,
                ..PlaceQuery::default()
            };
            let p = t.view().place(&query, now).unwrap();
            assert!(
                !p.ranks.iter().any(|n| n.as_str() == "z2-n3"),
                "{:?}: {}",
                p.ranks,
                p.explanation
            );
            assert!(
                p.explanation.contains("without fresh figures"),
                "{}",
                p.explanation
            );
        }
        // When only the nodes without figures can hold the job, they are used.
        let all = PlaceQuery {
            workers: 10,
            job: ring(1 << 20),
            ..PlaceQuery::default()
        };
        assert_eq!(t.view().place(&all, now).unwrap().ranks.len(), 10);
    }

    #[test]
    fn a_parameter_server_avoids_the_slow_node_as_a_server() {
        let now = UnixMs(1_000_000);
        let t = demo_cluster(now);
        let query = PlaceQuery {
            workers: 3,
            candidates: ["z1-n0", "z1-n1", "z1-n2"].map(|n| (name(n), 1)).to_vec(),
            job: Some(Job {
                collective: zonemesh_domain::Collective::ParameterServer { servers: 1 },
                bytes_per_iteration: 4 << 20,
            }),
            ..PlaceQuery::default()
        };
        let p = t.view().place(&query, now).unwrap();
        assert_eq!(p.ranks.len(), 3);
        assert_ne!(
            p.ranks[0].as_str(),
            "z1-n2",
            "the slow node would be the incast"
        );
        assert!(matches!(
            p.prediction.unwrap().bottleneck,
            JobBottleneck::Link { .. }
        ));
    }

    fn random_topology(
        zones: usize,
        per_zone: usize,
        seed: u64,
        down: &[usize],
    ) -> (Topology, UnixMs) {
        let now = UnixMs(1_000_000);
        let h = move |s: &str, d: &str| {
            let mut x = seed;
            for b in s.bytes().chain(d.bytes()) {
                x = (x ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            }
            x
        };
        let mut t = mesh(
            zones,
            per_zone,
            |s, d| {
                let base = if zone(s) == zone(d) { 50.0 } else { 1_000.0 };
                base + (h(s, d) % 500) as f64
            },
            |s, d| h(d, s) % 4,
            now,
        );
        for &i in down {
            let z = i % zones;
            let n = (i / zones) % per_zone;
            if let Some(id) = t.id(&name(&format!("z{z}-n{n}"))) {
                force_down(&mut t, id);
            }
        }
        (t, now)
    }

    #[test]
    fn pair_costs_are_kept_only_while_the_pool_is_small_enough() {
        // How many times three asks for the same cost compute it.
        let computed = |costs: &mut PairCosts| {
            let mut calls = 0;
            for _ in 0..3 {
                let cost = costs.get(5, 7, || {
                    calls += 1;
                    1.5
                });
                assert_eq!(cost, 1.5);
            }
            calls
        };
        assert_eq!(
            computed(&mut PairCosts::new(100, 64)),
            1,
            "computed once, kept"
        );
        // 5,000 candidates for 2,500 workers could ask for 12.5 M costs: none is kept.
        let mut large = PairCosts::new(5_000, 2_500);
        assert_eq!(computed(&mut large), 3, "computed each time");
        assert!(large.rows.is_empty());
        // 64 workers among 5,000: 320,000 costs at most, kept.
        assert_eq!(PairCosts::new(5_000, 64).rows.len(), 5_000);
    }

    /// A pair is priced by the same figures both ways round, bit for bit (the worse direction's
    /// delay and loss, the slower direction's rate): on random meshes, and on a synthetic cluster
    /// where one path in five inside a zone has a throughput test (often one direction only) and
    /// zones are joined by two pairs (the rest is the model's estimate).
    #[test]
    fn a_pairs_figures_are_the_same_both_ways_round() {
        let bits = |p: &crate::query::PairFigures| {
            [p.rtt_us, p.loss, p.tput_bps].map(|f| f.map(f64::to_bits))
        };
        let check = |t: &Snapshot, now: UnixMs| {
            let ids: Vec<NodeId> = t.nodes().map(|(id, _)| id).collect();
            let mut estimated = 0;
            for &a in &ids {
                for &b in ids.iter().filter(|b| **b != a) {
                    let (ab, ba) = (t.pair(a, b, now), t.pair(b, a, now));
                    assert_eq!(bits(&ab), bits(&ba), "{a:?} {b:?}: {ab:?} {ba:?}");
                    estimated += usize::from(ab.latency == Provenance::Estimated);
                }
            }
            estimated
        };
        for seed in 0..4 {
            let (t, now) = random_topology(3, 4, seed, &[]);
            check(t.view(), now);
            let now = UnixMs(1_000_000);
            let (mut t, _) = crate::testing::synthetic(3, 5, 2, seed, now);
            t.fit_model(now);
            assert!(check(t.view(), now) > 0, "some pairs are the model's");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn placements_keep_the_rules(
            zones in 1usize..4,
            per_zone in 1usize..5,
            seed in any::<u64>(),
            workers in 1u32..10,
            down in proptest::collection::vec(0usize..16, 0..3),
            excluded in proptest::collection::vec(0usize..16, 0..3),
            slots in proptest::collection::vec(1u32..4, 16),
            policy in prop_oneof![
                Just(ZonePolicy::RequireOne),
                Just(ZonePolicy::PreferOne),
                Just(ZonePolicy::Any),
            ],
        ) {
            let (t, now) = random_topology(zones, per_zone, seed, &down);
            let all: Vec<NodeName> = t.view().nodes().map(|(_, n)| n.name.clone()).collect();
            let exclude: Vec<NodeName> = excluded.iter().map(|i| all[i % all.len()].clone()).collect();
            let candidates: Vec<(NodeName, u32)> =
                all.iter().enumerate().map(|(i, n)| (n.clone(), slots[i % slots.len()])).collect();
            let query = PlaceQuery {
                workers,
                candidates: candidates.clone(),
                policy,
                weights: Weights::DEFAULT,
                exclude: exclude.clone(),
                job: None,
                alternatives: 0,
            };
            let first = t.view().place_ids(&query, now);
            let again = t.view().place_ids(&query, now);
            prop_assert_eq!(
                first.as_ref().map_err(ToString::to_string),
                again.as_ref().map_err(ToString::to_string),
                "the same input gives the same answer"
            );
            match first {
                Ok(p) => {
                    prop_assert_eq!(p.assignments.iter().map(|a| a.1).sum::<u32>(), workers);
                    for (node, w) in &p.assignments {
                        let name = &t.node(*node).name;
                        prop_assert!(t.view().state(*node, now).0 == NodeState::Ready, "{} is not READY", name);
                        prop_assert!(!exclude.contains(name), "{} is excluded", name);
                        let slots = candidates.iter().find(|c| &c.0 == name).unwrap().1;
                        prop_assert!(*w <= slots, "{} workers on {} with {} slots", w, name, slots);
                    }
                    let distinct: HashSet<NodeId> = p.assignments.iter().map(|a| a.0).collect();
                    prop_assert_eq!(distinct.len(), p.assignments.len());
                    if policy == ZonePolicy::RequireOne {
                        prop_assert_eq!(p.zones.len(), 1);
                    }
                }
                Err(Error::NoZoneFits { .. }) => prop_assert_eq!(policy, ZonePolicy::RequireOne),
                Err(Error::NotEnoughCapacity { .. }) => {}
                Err(e) => prop_assert!(false, "unexpected error {}", e),
            }
        }
    }
}
