//! The search behind `Place` with a job: which nodes of a pool, and in which rank order, make
//! the job's predicted time per iteration ([`collective::predict`]) smallest.
//!
//! Pricing every candidate with `predict` is too slow for 64 ranks among hundreds of nodes, so
//! the search steers by a surrogate and prices only its results exactly:
//!
//! 1. Each link gets the cost of a lone transfer of the collective's chunk over it (one-way
//!    delay, expected repair of a loss, serialisation at the link's rate: `collective`'s terms
//!    without the sharing at a node's own link, which step 3 adds per node). Each node's
//!    quality is its mean cost to up to [`QUALITY_PEERS`] pool nodes of its zone; the best nodes
//!    are kept until they hold the workers with a margin ([`keep_slots`]).
//! 2. Starting from the best node of each zone (and the best overall), a greedy build: for a
//!    ring (and the rings inside a hierarchical all-reduce) the nearest next node from the chain's
//!    tail, and (from the first [`INSERTION_STARTS`], in pools of at most [`INSERTION_UP_TO`]
//!    kept nodes) cheapest insertion into the ring; for a
//!    parameter server or an all-to-all the node whose worst link to the chosen is lowest. A
//!    node takes as many workers as it has slots, up to those left.
//! 3. Local search on the surrogate of the collective's time with the chain's links alone:
//!    - ring and hierarchical: `2(p − 1) · max(max serialisation, Σ link cost / p)` — the ring's
//!      two bounds in `collective`; moves: replace a chosen node by an unchosen one, reverse a
//!      segment of the order (2-opt; links are taken as symmetric, as the snapshot's pair
//!      figures are);
//!    - parameter server: twice the worst of a link between a server and another chosen node
//!      and a node's own link (its model cap) carrying a server's incast or a worker's pushes at
//!      once; moves: replace a node, swap a server with a worker;
//!    - all-to-all (a pairwise exchange of `p − 1` rounds): the largest row — a node's costs to
//!      every other chosen node summed, since the node is in every round — and a node's own
//!      link carrying all its sends; moves: replace a node. (The rounds depend on the rank
//!      order, which step 5 chooses: swaps, and every order among a few nodes.)
//! 4. Every result is priced with `predict` over the same network, and for a hierarchical
//!    all-reduce each zone's leader (its first rank) is chosen by `predict`.
//! 5. The best over every pool searched is polished with moves valued by `predict` itself
//!    ([`polish_best`]: replace a node, swap two), which catches what the surrogate misses
//!    (sharing, a hierarchical all-reduce's phases).
//!
//! The work is bounded: pair figures read (the caller's budget), at most [`SEEDS`] starts (every
//! node of a pool of at most [`ALL_STARTS_UP_TO`]), [`PASSES`] improving passes each, and
//! [`EXACT_TRY_FLOWS`] flows' worth of exact moves.

use zonemesh_domain::{Collective, Job};

use crate::collective::{Link, Network, Prediction, predict};
use crate::network::{SnapshotNetwork, Usage};

/// Pool nodes of its zone a node's quality is averaged over.
pub const QUALITY_PEERS: usize = 8;
/// Most greedy starts per pool.
pub const SEEDS: usize = 4;
/// Starts a ring is also built from by cheapest insertion (every start in a small pool).
pub const INSERTION_STARTS: usize = 2;
/// Pools of at most this many kept nodes get the insertion builds (they cost `p² k`).
pub const INSERTION_UP_TO: usize = 48;
/// Pools of at most this many kept nodes are started from every node.
pub const ALL_STARTS_UP_TO: usize = 16;
/// Most improving passes of the local search per start.
pub const PASSES: usize = 12;

/// A placement found for a job: ranks as network node indices, priced exactly.
#[derive(Debug, Clone)]
pub struct Found {
    /// Network node of each rank, rank 0 first.
    pub ranks: Vec<usize>,
    /// `predict` over the network.
    pub prediction: Prediction,
    /// Figures behind the prediction.
    pub usage: Usage,
}

/// Slots kept after the quality cut for `workers` workers: the workers and a quarter as many
/// again (at least 8 more), so that replacements have somewhere to come from.
pub fn keep_slots(workers: u32) -> u64 {
    u64::from(workers) + u64::from((workers / 4).max(8))
}

/// Nodes of a zone tried as its leader in a hierarchical all-reduce, best quality first.
pub const LEADER_TRIES: usize = 3;

/// What one lone transfer of `bytes` costs over `link`: (delay + repair + serialisation,
/// serialisation), seconds.
pub fn lone_transfer(link: Link, bytes: f64) -> (f64, f64) {
    let serial = bytes.max(0.0) * 8.0 / link.rate_bps.max(1.0);
    (link.latency_s(bytes) + serial, serial)
}

/// The bytes of one transfer the collective's time mostly depends on.
fn chunk(job: &Job, workers: u32) -> f64 {
    let n = job.bytes_per_iteration as f64;
    let p = f64::from(workers.max(1));
    match job.collective {
        Collective::RingAllReduce | Collective::HierarchicalAllReduce => n / p,
        Collective::ParameterServer { servers } => n / f64::from(servers.clamp(1, workers.max(1))),
        Collective::AllToAll => n / (p - 1.0).max(1.0),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Ring,
    Servers(u32),
    AllPairs,
}

/// Link costs among the kept nodes (local indices).
struct Costs {
    k: usize,
    total: Vec<f64>,
    serial: Vec<f64>,
    /// Per node, one chunk through its own link (its slower cap of the two), seconds; 0 when
    /// the model has no cap for it.
    own: Vec<f64>,
}

impl Costs {
    fn t(&self, a: usize, b: usize) -> f64 {
        self.total[a * self.k + b]
    }
    fn s(&self, a: usize, b: usize) -> f64 {
        self.serial[a * self.k + b]
    }
}

/// A candidate: kept-local nodes in rank order with their workers.
#[derive(Clone, Debug, PartialEq)]
struct State {
    order: Vec<usize>,
    take: Vec<u32>,
}

struct Ctx {
    costs: Costs,
    slots: Vec<u32>,
    shape: Shape,
    workers: u32,
}

impl Ctx {
    /// The surrogate of the collective's time (see the module docs).
    fn score(&self, s: &State) -> f64 {
        let k = s.order.len();
        if k < 2 {
            return 0.0;
        }
        let c = &self.costs;
        match self.shape {
            Shape::Ring => {
                let (mut sum, mut max_serial) = (0.0f64, 0.0f64);
                for i in 0..k {
                    let (a, b) = (s.order[i], s.order[(i + 1) % k]);
                    sum += c.t(a, b);
                    max_serial = max_serial.max(c.s(a, b));
                }
                let p = f64::from(self.workers);
                let steps = 2.0 * (p - 1.0);
                (steps * max_serial).max(steps / p * sum)
            }
            Shape::Servers(servers) => {
                let mut left = servers;
                let mut worst = 0.0f64;
                for (x, &a) in s.order.iter().enumerate() {
                    if left == 0 {
                        break;
                    }
                    left = left.saturating_sub(s.take[x]);
                    for &b in &s.order {
                        if b != a {
                            worst = worst.max(c.t(a, b));
                        }
                    }
                }
                2.0 * worst.max(self.worst_own(s, usize::MAX))
            }
            // A pairwise exchange: p − 1 rounds, one after another, each as slow as its slowest
            // transfer; their sum is at least the mean transfer of every ordered pair times
            // the rounds (2 · Σ pair cost / k over k nodes), and a node's own link carries all
            // its sends over the rounds.
            Shape::AllPairs => {
                let rows = self.rows_without(s, usize::MAX);
                rows.into_iter()
                    .fold(0.0, f64::max)
                    .max(self.worst_own(s, usize::MAX))
            }
        }
    }

    /// The greedy build from `start` (see the module docs).
    fn build(&self, start: usize, quality: &[f64]) -> State {
        let k = self.costs.k;
        let mut used = vec![false; k];
        let mut state = State {
            order: Vec::new(),
            take: Vec::new(),
        };
        let mut worst_to_chosen = vec![0.0f64; k];
        let mut remaining = self.workers;
        let mut next = start;
        loop {
            used[next] = true;
            let take = self.slots[next].min(remaining);
            state.order.push(next);
            state.take.push(take);
            remaining -= take;
            if remaining == 0 {
                return state;
            }
            for (i, w) in worst_to_chosen.iter_mut().enumerate() {
                *w = w.max(self.costs.t(next, i));
            }
            let tail = next;
            let key = |i: usize| match self.shape {
                Shape::Ring => self.costs.t(tail, i),
                _ => worst_to_chosen[i],
            };
            next = (0..k)
                .filter(|&i| !used[i])
                .min_by(|&a, &b| {
                    key(a)
                        .total_cmp(&key(b))
                        .then(quality[a].total_cmp(&quality[b]))
                        .then(a.cmp(&b))
                })
                .expect("the kept nodes hold the workers");
        }
    }

    /// The sum of the counted pairs' costs of a bottleneck objective.
    fn pair_sum(&self, s: &State) -> f64 {
        let servers = self.server_positions(s);
        let mut sum = 0.0;
        for a in 0..s.order.len() {
            for b in a + 1..s.order.len() {
                if self.counts(&servers, a, b) {
                    sum += self.costs.t(s.order[a], s.order[b]);
                }
            }
        }
        sum
    }

    /// The slowest serialisation over the links of the ring `order`.
    fn ring_max_serial(&self, order: &[usize]) -> f64 {
        let n = order.len();
        (0..n)
            .map(|i| self.costs.s(order[i], order[(i + 1) % n]))
            .fold(0.0, f64::max)
    }

    /// The ring's value from its link-cost sum and its slowest serialisation.
    fn ring_value(&self, sum: f64, max_serial: f64) -> f64 {
        let p = f64::from(self.workers);
        let steps = 2.0 * (p - 1.0);
        (steps * max_serial).max(steps / p * sum)
    }

    /// Whether the pair of positions `x`, `z` of `s` counts in a bottleneck objective (all pairs,
    /// or those with a server's position).
    fn counts(&self, servers: &[bool], x: usize, z: usize) -> bool {
        match self.shape {
            Shape::Servers(_) => servers[x] || servers[z],
            _ => true,
        }
    }

    /// How long the chunks through the own link of `node`, put at position `x` of `s`, take
    /// when they pass it at once: an all-to-all rank sends to every rank off its node; a
    /// parameter server's ranks take from every rank off their node (incast), and its workers
    /// send to every server off theirs. The rest of `s` stays as it is.
    fn own_term(&self, s: &State, x: usize, node: usize) -> f64 {
        let p = f64::from(self.workers);
        let t = f64::from(s.take[x]);
        let flows = match self.shape {
            Shape::Ring => return 0.0,
            Shape::AllPairs => t * (p - t),
            Shape::Servers(servers) => {
                let before: u32 = s.take[..x].iter().sum();
                let served = f64::from(servers.saturating_sub(before).min(s.take[x]));
                (served * (p - t)).max(t * (f64::from(servers) - served))
            }
        };
        flows * self.costs.own[node]
    }

    /// The largest [`own_term`](Self::own_term) of `s`'s nodes, leaving out position `skip`.
    fn worst_own(&self, s: &State, skip: usize) -> f64 {
        (0..s.order.len())
            .filter(|&x| x != skip)
            .map(|x| self.own_term(s, x, s.order[x]))
            .fold(0.0, f64::max)
    }

    /// Which positions hold a server's ranks (the first `servers` ranks).
    fn server_positions(&self, s: &State) -> Vec<bool> {
        let Shape::Servers(servers) = self.shape else {
            return vec![true; s.order.len()];
        };
        let mut left = servers;
        s.take
            .iter()
            .map(|t| {
                let server = left > 0;
                left = left.saturating_sub(*t);
                server
            })
            .collect()
    }

    /// A ring built by cheapest insertion from `start`: each step puts the node, and the place
    /// between two neighbours, that keep the ring's value (then its sum) lowest.
    fn build_by_insertion(&self, start: usize) -> State {
        let k = self.costs.k;
        let c = &self.costs;
        let mut state = State {
            order: vec![start],
            take: vec![self.slots[start].min(self.workers)],
        };
        let mut used = vec![false; k];
        used[start] = true;
        let mut remaining = self.workers - state.take[0];
        while remaining > 0 {
            let n = state.order.len();
            let (mut sum, mut max_serial) = (0.0f64, 0.0f64);
            if n > 1 {
                for i in 0..n {
                    let (a, b) = (state.order[i], state.order[(i + 1) % n]);
                    sum += c.t(a, b);
                    max_serial = max_serial.max(c.s(a, b));
                }
            }
            let mut best: Option<(f64, f64, usize, usize)> = None;
            for y in (0..k).filter(|&y| !used[y]) {
                for j in 0..n {
                    let (u, v) = (state.order[j], state.order[(j + 1) % n]);
                    let (new_sum, new_max) = if n == 1 {
                        (2.0 * c.t(u, y), c.s(u, y))
                    } else {
                        let rest = if c.s(u, v) < max_serial {
                            max_serial
                        } else {
                            (0..n)
                                .filter(|&i| i != j)
                                .map(|i| c.s(state.order[i], state.order[(i + 1) % n]))
                                .fold(0.0, f64::max)
                        };
                        (
                            sum - c.t(u, v) + c.t(u, y) + c.t(y, v),
                            rest.max(c.s(u, y)).max(c.s(y, v)),
                        )
                    };
                    let value = self.ring_value(new_sum, new_max);
                    if best.is_none_or(|(bv, bs, ..)| (value, new_sum) < (bv, bs)) {
                        best = Some((value, new_sum, y, j));
                    }
                }
            }
            let (_, _, y, j) = best.expect("the kept nodes hold the workers");
            let take = self.slots[y].min(remaining);
            state.order.insert(j + 1, y);
            state.take.insert(j + 1, take);
            used[y] = true;
            remaining -= take;
        }
        state
    }

    /// Improving moves until none is left or [`PASSES`] are done. Moves are valued
    /// incrementally: a ring's sum changes by its two replaced links; a bottleneck objective is
    /// the worst pair without the moved position, and the moved node's pairs.
    fn improve(&self, mut state: State) -> (State, f64) {
        let mut best = self.score(&state);
        for _ in 0..PASSES {
            if state.order.len() < 2 {
                break;
            }
            let mut chosen = vec![false; self.costs.k];
            for &n in &state.order {
                chosen[n] = true;
            }
            let improved = match self.shape {
                Shape::Ring => self.improve_ring(&mut state, &mut chosen, &mut best),
                Shape::Servers(_) | Shape::AllPairs => {
                    self.improve_pairs(&mut state, &mut chosen, &mut best)
                }
            };
            if !improved {
                break;
            }
        }
        let score = self.score(&state);
        (state, score)
    }

    /// One pass of a ring's moves: replacement, 2-opt, or-opt. True when one was taken.
    fn improve_ring(&self, state: &mut State, chosen: &mut [bool], best: &mut f64) -> bool {
        let n = state.order.len();
        let mut ring = self.ring_totals(&state.order);
        let mut improved = self.ring_replace(state, chosen, best, &mut ring);
        improved |= self.ring_two_opt(state, best, &mut ring);
        if n > 2 {
            improved |= self.ring_or_opt(state, chosen, best, &mut ring);
        }
        improved
    }

    /// A ring's sum of link costs and its slowest link's serialisation.
    fn ring_totals(&self, order: &[usize]) -> RingTotals {
        let c = &self.costs;
        let n = order.len();
        let (mut sum, mut max_serial) = (0.0f64, 0.0f64);
        for i in 0..n {
            let (a, b) = (order[i], order[(i + 1) % n]);
            sum += c.t(a, b);
            max_serial = max_serial.max(c.s(a, b));
        }
        RingTotals { sum, max_serial }
    }

    /// Replacement: the node at x by a spare node y; links prev–x and x–next become prev–y,
    /// y–next.
    fn ring_replace(
        &self,
        state: &mut State,
        chosen: &mut [bool],
        best: &mut f64,
        ring: &mut RingTotals,
    ) -> bool {
        let (c, k, n) = (&self.costs, self.costs.k, state.order.len());
        let mut improved = false;
        for x in 0..n {
            for y in 0..k {
                if chosen[y] || self.slots[y] < state.take[x] {
                    continue;
                }
                let old = state.order[x];
                let prev = state.order[(x + n - 1) % n];
                let next = state.order[(x + 1) % n];
                let new_sum =
                    ring.sum - c.t(prev, old) - c.t(old, next) + c.t(prev, y) + c.t(y, next);
                let gone = c.s(prev, old).max(c.s(old, next));
                state.order[x] = y;
                let new_max = if gone < ring.max_serial {
                    ring.max_serial.max(c.s(prev, y)).max(c.s(y, next))
                } else {
                    self.ring_max_serial(&state.order)
                };
                let value = self.ring_value(new_sum, new_max);
                if accept(value, new_sum, *best, ring.sum) {
                    *best = value;
                    ring.sum = new_sum;
                    ring.max_serial = new_max;
                    chosen[old] = false;
                    chosen[y] = true;
                    improved = true;
                } else {
                    state.order[x] = old;
                }
            }
        }
        improved
    }

    /// 2-opt: reverses positions i..=j; links prev–o[i] and o[j]–next become prev–o[j] and
    /// o[i]–next (links are symmetric).
    fn ring_two_opt(&self, state: &mut State, best: &mut f64, ring: &mut RingTotals) -> bool {
        let (c, n) = (&self.costs, state.order.len());
        let mut improved = false;
        for i in 0..n {
            for j in i + 1..n {
                if j - i + 1 >= n - 1 {
                    continue;
                }
                let prev = state.order[(i + n - 1) % n];
                let next = state.order[(j + 1) % n];
                let (oi, oj) = (state.order[i], state.order[j]);
                let new_sum =
                    ring.sum - c.t(prev, oi) - c.t(oj, next) + c.t(prev, oj) + c.t(oi, next);
                let gone = c.s(prev, oi).max(c.s(oj, next));
                state.order[i..=j].reverse();
                state.take[i..=j].reverse();
                let new_max = if gone < ring.max_serial {
                    ring.max_serial.max(c.s(prev, oj)).max(c.s(oi, next))
                } else {
                    self.ring_max_serial(&state.order)
                };
                let value = self.ring_value(new_sum, new_max);
                if accept(value, new_sum, *best, ring.sum) {
                    *best = value;
                    ring.sum = new_sum;
                    ring.max_serial = new_max;
                    improved = true;
                } else {
                    state.order[i..=j].reverse();
                    state.take[i..=j].reverse();
                }
            }
        }
        improved
    }

    /// Or-opt: takes out the node at x and puts it, or a spare node, between any two neighbours
    /// of what is left; a move is valued exactly only when its bound (the new sum, the new links'
    /// serialisation) could beat the best.
    fn ring_or_opt(
        &self,
        state: &mut State,
        chosen: &mut [bool],
        best: &mut f64,
        ring: &mut RingTotals,
    ) -> bool {
        let (c, k, n) = (&self.costs, self.costs.k, state.order.len());
        let mut improved = false;
        let p = f64::from(self.workers);
        let steps = 2.0 * (p - 1.0);
        let mut x = 0;
        while x < n {
            let ox = state.order[x];
            let tx = state.take[x];
            let a = state.order[(x + n - 1) % n];
            let b = state.order[(x + 1) % n];
            let rest: Vec<usize> = (1..n).map(|d| state.order[(x + d) % n]).collect();
            let rest_take: Vec<u32> = (1..n).map(|d| state.take[(x + d) % n]).collect();
            let base = ring.sum - c.t(a, ox) - c.t(ox, b) + c.t(a, b);
            let mut moved = false;
            'candidates: for y in (0..k).filter(|&y| y == ox || (!chosen[y] && self.slots[y] >= tx))
            {
                for j in 0..rest.len() {
                    let (u, v) = (rest[j], rest[(j + 1) % rest.len()]);
                    let new_sum = base - c.t(u, v) + c.t(u, y) + c.t(y, v);
                    let bound = (steps / p * new_sum).max(steps * c.s(u, y).max(c.s(y, v)));
                    if bound > *best * (1.0 + 1e-12)
                        || (!better(bound, *best) && !better(new_sum, ring.sum))
                    {
                        continue;
                    }
                    let mut order = rest[..=j].to_vec();
                    order.push(y);
                    order.extend_from_slice(&rest[j + 1..]);
                    let mut take = rest_take[..=j].to_vec();
                    take.push(tx);
                    take.extend_from_slice(&rest_take[j + 1..]);
                    let trial = State { order, take };
                    let value = self.score(&trial);
                    if accept(value, new_sum, *best, ring.sum) {
                        *best = value;
                        chosen[ox] = false;
                        chosen[y] = true;
                        *state = trial;
                        *ring = self.ring_totals(&state.order);
                        improved = true;
                        moved = true;
                        break 'candidates;
                    }
                }
            }
            if !moved {
                x += 1;
            }
        }
        improved
    }

    /// Each position's row of an all-to-all: the sum of its pairs' costs to the other positions,
    /// leaving out position `skip` (its own row is 0). A pairwise exchange puts each node in
    /// every round, sending to one other node each time, so the rounds' sum is at least every
    /// row.
    fn rows_without(&self, s: &State, skip: usize) -> Vec<f64> {
        let n = s.order.len();
        let mut rows = vec![0.0; n];
        for a in 0..n {
            for b in a + 1..n {
                if a != skip && b != skip {
                    let t = self.costs.t(s.order[a], s.order[b]);
                    rows[a] += t;
                    rows[b] += t;
                }
            }
        }
        rows
    }

    /// One pass for the bottleneck objectives (parameter server, all-to-all): replace each
    /// position by a spare node; for a parameter server, also swap servers and workers. True
    /// when a move was taken.
    fn improve_pairs(&self, state: &mut State, chosen: &mut [bool], best: &mut f64) -> bool {
        let (c, k, n) = (&self.costs, self.costs.k, state.order.len());
        let mut improved = false;
        let factor = if matches!(self.shape, Shape::Servers(_)) {
            2.0
        } else {
            1.0
        };
        let mut sum = self.pair_sum(state);
        for x in 0..n {
            let servers = self.server_positions(state);
            // The worst counted pair without position x, and their sum.
            let (mut without, mut sum_without) = (0.0f64, 0.0f64);
            for a in 0..n {
                for b in a + 1..n {
                    if a != x && b != x && self.counts(&servers, a, b) {
                        let t = c.t(state.order[a], state.order[b]);
                        without = without.max(t);
                        sum_without += t;
                    }
                }
            }
            let own_without = self.worst_own(state, x);
            let rows = match self.shape {
                Shape::AllPairs => self.rows_without(state, x),
                _ => Vec::new(),
            };
            for y in 0..k {
                if chosen[y] || self.slots[y] < state.take[x] {
                    continue;
                }
                let (with, new_sum) = (0..n)
                    .filter(|&z| z != x && self.counts(&servers, x, z))
                    .map(|z| c.t(y, state.order[z]))
                    .fold((without, sum_without), |(w, s), t| (w.max(t), s + t));
                let own = own_without.max(self.own_term(state, x, y));
                let value = match self.shape {
                    // Every row with y in x's place, and y's own row.
                    Shape::AllPairs => (0..n)
                        .filter(|&z| z != x)
                        .map(|z| rows[z] + c.t(y, state.order[z]))
                        .fold(new_sum - sum_without, f64::max)
                        .max(own),
                    _ => factor * with.max(own),
                };
                if accept(value, new_sum, *best, sum) {
                    *best = value;
                    sum = new_sum;
                    chosen[state.order[x]] = false;
                    chosen[y] = true;
                    state.order[x] = y;
                    improved = true;
                }
            }
        }
        if let Shape::Servers(servers) = self.shape {
            let server_nodes = (servers as usize).min(n);
            for x in 0..server_nodes {
                for z in server_nodes..n {
                    state.order.swap(x, z);
                    state.take.swap(x, z);
                    let value = self.score(state);
                    let new_sum = self.pair_sum(state);
                    if accept(value, new_sum, *best, sum) {
                        *best = value;
                        sum = new_sum;
                        improved = true;
                    } else {
                        state.order.swap(x, z);
                        state.take.swap(x, z);
                    }
                }
            }
        }
        improved
    }
}

/// A ring's running figures while moves are tried.
#[derive(Debug, Clone, Copy)]
struct RingTotals {
    /// The sum of its links' costs.
    sum: f64,
    /// Its slowest link's serialisation.
    max_serial: f64,
}

/// `new` is better than `old` beyond rounding.
fn better(new: f64, old: f64) -> bool {
    new < old * (1.0 - 1e-9)
}

/// Lexicographic: the objective, then the sum of the counted links' costs, so that a move that
/// removes one of several links at the bottleneck is taken (a plateau otherwise).
fn accept(value: f64, sum: f64, best: f64, best_sum: f64) -> bool {
    better(value, best) || (value <= best * (1.0 + 1e-12) && better(sum, best_sum))
}

/// Searches `net`'s nodes (with `slots` free slots each, holding `workers` in all) for the
/// placements of `job` with the smallest predicted time, and up to about twice `alternatives`
/// runner-ups (the best with one node replaced); spends at most about `budget` pair figures (at
/// least the ones one answer needs). Results are priced by `predict`, fastest first, one per
/// node set.
pub fn search(
    net: &SnapshotNetwork<'_>,
    slots: &[u32],
    workers: u32,
    job: &Job,
    alternatives: usize,
    budget: &mut usize,
) -> Vec<Found> {
    let pool = net.nodes().len();
    let bytes = chunk(job, workers);
    let shape = match job.collective {
        Collective::RingAllReduce | Collective::HierarchicalAllReduce => Shape::Ring,
        Collective::ParameterServer { servers } => Shape::Servers(servers.clamp(1, workers)),
        Collective::AllToAll => Shape::AllPairs,
    };
    // 1. Quality: mean lone-transfer cost to a few pool nodes of the node's zone.
    let (by_zone, quality) = quality(net, bytes, budget);
    let mut by_quality: Vec<usize> = (0..pool).collect();
    by_quality.sort_by(|&a, &b| quality[a].total_cmp(&quality[b]).then(a.cmp(&b)));
    let mut kept = Vec::new();
    let mut held = 0u64;
    for &i in &by_quality {
        if held >= keep_slots(workers) {
            break;
        }
        kept.push(i);
        held += u64::from(slots[i]);
    }
    // 2. Link costs among the kept nodes.
    let k = kept.len();
    let costs = link_costs(net, &kept, bytes, budget);
    let ctx = Ctx {
        costs,
        slots: kept.iter().map(|&i| slots[i]).collect(),
        shape,
        workers,
    };
    let local_quality: Vec<f64> = kept.iter().map(|&i| quality[i]).collect();
    let starts = starts(net, &kept, &by_zone, &local_quality);
    // 3. Build and improve from each start.
    let mut states: Vec<(State, f64)> = Vec::new();
    let mut builds: Vec<State> = starts
        .iter()
        .map(|&start| ctx.build(start, &local_quality))
        .collect();
    if shape == Shape::Ring && k <= INSERTION_UP_TO {
        builds.extend(
            starts
                .iter()
                .take(INSERTION_STARTS.max(if k <= ALL_STARTS_UP_TO { k } else { 0 }))
                .map(|&start| ctx.build_by_insertion(start)),
        );
    }
    for build in builds {
        let (state, score) = ctx.improve(build);
        if !states
            .iter()
            .any(|(s, _)| same_nodes(&s.order, &state.order))
        {
            states.push((state, score));
        }
    }
    states.sort_by(|a, b| a.1.total_cmp(&b.1));
    if alternatives > 0 {
        runner_ups(&ctx, &mut states, starts.len() + 2 * alternatives);
    }
    // 4. Price every result exactly.
    let mut found: Vec<Found> = states
        .into_iter()
        .map(|(state, _)| {
            let ranks: Vec<usize> = state
                .order
                .iter()
                .zip(&state.take)
                .flat_map(|(&n, &t)| std::iter::repeat_n(kept[n], t as usize))
                .collect();
            price(net, job, ranks)
        })
        .collect();
    if job.collective == Collective::HierarchicalAllReduce {
        for f in &mut found {
            *f = choose_leaders(net, job, std::mem::take(&mut f.ranks), &quality);
        }
    }
    found.sort_by(|a, b| a.prediction.seconds.total_cmp(&b.prediction.seconds));
    found
}

/// Zones of the pool (each with its nodes), and each node's quality: its mean lone-transfer cost
/// of `bytes` to a few pool nodes of its zone ([`QUALITY_PEERS`]; any pool nodes for a node alone
/// in its zone). Spends the pairs it reads from `budget`.
fn quality(
    net: &SnapshotNetwork<'_>,
    bytes: f64,
    budget: &mut usize,
) -> (Vec<(usize, Vec<usize>)>, Vec<f64>) {
    let pool = net.nodes().len();
    let mut by_zone: Vec<(usize, Vec<usize>)> = Vec::new();
    for i in 0..pool {
        let z = net.zone(i);
        match by_zone.iter_mut().find(|(zone, _)| *zone == z) {
            Some((_, members)) => members.push(i),
            None => by_zone.push((z, vec![i])),
        }
    }
    let mut quality = vec![0.0f64; pool];
    if pool > 1 {
        for (_, members) in &by_zone {
            for (x, &i) in members.iter().enumerate() {
                let peers: Vec<usize> = if members.len() > 1 {
                    (1..members.len())
                        .map(|d| members[(x + d) % members.len()])
                        .take(QUALITY_PEERS)
                        .collect()
                } else {
                    (1..pool)
                        .map(|d| (i + d) % pool)
                        .take(QUALITY_PEERS)
                        .collect()
                };
                let sum: f64 = peers
                    .iter()
                    .map(|&j| lone_transfer(net.link(i, j), bytes).0)
                    .sum();
                quality[i] = sum / peers.len() as f64;
                *budget = budget.saturating_sub(peers.len());
            }
        }
    }
    (by_zone, quality)
}

/// The cost matrix of the `kept` nodes: each pair's lone transfer of `bytes` (total and
/// serialisation) and each node's own-link time. Spends the pairs it reads from `budget`.
fn link_costs(net: &SnapshotNetwork<'_>, kept: &[usize], bytes: f64, budget: &mut usize) -> Costs {
    let k = kept.len();
    let mut costs = Costs {
        k,
        total: vec![0.0; k * k],
        serial: vec![0.0; k * k],
        own: kept
            .iter()
            .map(|&i| {
                let cap = net.egress_bps(i).min(net.ingress_bps(i));
                if cap.is_finite() {
                    bytes * 8.0 / cap.max(1.0)
                } else {
                    0.0
                }
            })
            .collect(),
    };
    for a in 0..k {
        for b in a + 1..k {
            let (t, s) = lone_transfer(net.link(kept[a], kept[b]), bytes);
            for (x, y) in [(a, b), (b, a)] {
                costs.total[x * k + y] = t;
                costs.serial[x * k + y] = s;
            }
        }
    }
    *budget = budget.saturating_sub(k * k.saturating_sub(1) / 2);
    costs
}

/// Where the builds start (indices into `kept`): the best kept node overall and of each zone, at
/// least two; every kept node when there are few. Best first, at most [`SEEDS`] (or
/// [`ALL_STARTS_UP_TO`]).
fn starts(
    net: &SnapshotNetwork<'_>,
    kept: &[usize],
    by_zone: &[(usize, Vec<usize>)],
    local_quality: &[f64],
) -> Vec<usize> {
    let k = kept.len();
    let mut starts: Vec<usize> = vec![0];
    for (z, _) in by_zone {
        if let Some(first) = (0..k).find(|&x| net.zone(kept[x]) == *z)
            && !starts.contains(&first)
        {
            starts.push(first);
        }
    }
    if starts.len() < 2 && k > 1 {
        starts.push(1);
    }
    if k <= ALL_STARTS_UP_TO {
        starts = (0..k).collect();
    }
    starts.sort_by(|a, b| local_quality[*a].total_cmp(&local_quality[*b]));
    starts.truncate(SEEDS.max(ALL_STARTS_UP_TO));
    starts
}

/// Runner-ups: the best of `states` (sorted, best first) with one node replaced, the best
/// replacements first, added until `states` holds `limit`.
fn runner_ups(ctx: &Ctx, states: &mut Vec<(State, f64)>, limit: usize) {
    let k = ctx.costs.k;
    let Some((best, _)) = states.first().cloned() else {
        return;
    };
    let mut neighbours: Vec<(State, f64)> = Vec::new();
    for x in 0..best.order.len() {
        for y in (0..k).filter(|y| !best.order.contains(y)) {
            if ctx.slots[y] < best.take[x] {
                continue;
            }
            let mut n = best.clone();
            n.order[x] = y;
            let score = ctx.score(&n);
            neighbours.push((n, score));
        }
    }
    neighbours.sort_by(|a, b| a.1.total_cmp(&b.1));
    for n in neighbours {
        if states.len() >= limit {
            break;
        }
        if !states.iter().any(|(s, _)| same_nodes(&s.order, &n.0.order)) {
            states.push(n);
        }
    }
}

/// Exact moves on the best result: the `predict` calls allowed are this many flows' worth (a
/// prediction costs about its flows), at least [`EXACT_TRIES_MIN`].
pub const EXACT_TRY_FLOWS: usize = 8_192;
/// The fewest exact moves tried.
pub const EXACT_TRIES_MIN: usize = 4;

/// Polishes the best result found (network node indices) with exact moves, drawing replacements
/// from the network's other nodes, and prices it.
pub fn polish_best(
    net: &SnapshotNetwork<'_>,
    job: &Job,
    ranks: Vec<usize>,
    slots: &[u32],
    workers: u32,
) -> Found {
    let p = workers.max(1) as usize;
    let flows = match job.collective {
        Collective::RingAllReduce => p,
        Collective::HierarchicalAllReduce => 4 * p,
        Collective::ParameterServer { servers } => 2 * servers as usize * p,
        Collective::AllToAll => p * p.saturating_sub(1),
    };
    let tries = (EXACT_TRY_FLOWS / flows.max(1)).max(EXACT_TRIES_MIN);
    let spare: Vec<usize> = (0..net.nodes().len())
        .filter(|n| !ranks.contains(n))
        .collect();
    let mut ranks = polish(net, job, ranks, &spare, slots, tries);
    if job.collective == Collective::AllToAll {
        ranks = best_exchange_order(net, job, ranks);
    }
    price(net, job, ranks)
}

/// Nodes up to which a pairwise exchange's every order is tried (`(n − 1)!` predictions).
pub const EXCHANGE_ORDERS_UP_TO: usize = 6;

/// A pairwise exchange's rounds pair rank `r` with `r + k`: among few nodes, every order of them
/// (the first node fixed: a rotation is the same exchange), the fastest by `predict`.
fn best_exchange_order(net: &SnapshotNetwork<'_>, job: &Job, ranks: Vec<usize>) -> Vec<usize> {
    let order = node_order(&ranks);
    if order.len() < 3 || order.len() > EXCHANGE_ORDERS_UP_TO {
        return ranks;
    }
    expand(&exchange_best(net, job, &order).1)
}

/// A rank order as nodes with their consecutive ranks.
fn node_order(ranks: &[usize]) -> Vec<(usize, u32)> {
    let mut order: Vec<(usize, u32)> = Vec::new();
    for &r in ranks {
        match order.last_mut() {
            Some((n, t)) if *n == r => *t += 1,
            _ => order.push((r, 1)),
        }
    }
    order
}

/// The ranks of a node-level order.
fn expand(order: &[(usize, u32)]) -> Vec<usize> {
    order
        .iter()
        .flat_map(|&(n, t)| std::iter::repeat_n(n, t as usize))
        .collect()
}

/// The fastest order of `order`'s nodes for a pairwise exchange (the first node fixed), and its
/// time: `(n − 1)!` predictions.
fn exchange_best(
    net: &SnapshotNetwork<'_>,
    job: &Job,
    order: &[(usize, u32)],
) -> (f64, Vec<(usize, u32)>) {
    let mut best = (predict(job, &expand(order), net).seconds, order.to_vec());
    if order.len() < 3 {
        return best;
    }
    let mut rest = order[1..].to_vec();
    permute(&mut rest, 0, &mut |tail| {
        let mut candidate = vec![order[0]];
        candidate.extend_from_slice(tail);
        let t = predict(job, &expand(&candidate), net).seconds;
        if t < best.0 * (1.0 - 1e-9) {
            best = (t, candidate);
        }
    });
    best
}

/// Calls `visit` with every order of `items[k..]` (items before `k` fixed).
fn permute<T: Copy>(items: &mut [T], k: usize, visit: &mut dyn FnMut(&[T])) {
    if k + 1 >= items.len() {
        visit(items);
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permute(items, k + 1, visit);
        items.swap(k, i);
    }
}

/// First-improvement moves valued by `predict`: replace a node by a spare one with the slots for
/// its workers, then swap two nodes' places; until none improves or `tries` are spent.
fn polish(
    net: &SnapshotNetwork<'_>,
    job: &Job,
    ranks: Vec<usize>,
    spare: &[usize],
    slots: &[u32],
    mut tries: usize,
) -> Vec<usize> {
    // Node-level order with each node's workers.
    let mut order = node_order(&ranks);
    // Among few nodes, a pairwise exchange's replacement is valued in its best order.
    let exchange = job.collective == Collective::AllToAll
        && (3..=EXCHANGE_ORDERS_UP_TO).contains(&order.len());
    let mut spare = spare.to_vec();
    let mut best = predict(job, &ranks, net).seconds;
    'outer: while tries > 0 {
        for x in 0..order.len() {
            for s in 0..spare.len() {
                if slots[spare[s]] < order[x].1 {
                    continue;
                }
                if tries == 0 {
                    break 'outer;
                }
                tries -= 1;
                let old = order[x].0;
                let mut candidate = order.clone();
                candidate[x].0 = spare[s];
                let (t, candidate) = if exchange {
                    exchange_best(net, job, &candidate)
                } else {
                    (predict(job, &expand(&candidate), net).seconds, candidate)
                };
                if t < best * (1.0 - 1e-9) {
                    best = t;
                    order = candidate;
                    spare[s] = old;
                    continue 'outer;
                }
            }
        }
        // Swap two nodes' places: a ring's order, and a pairwise exchange's rounds (which
        // pairs of ranks share a round).
        for i in 0..order.len() {
            for j in i + 1..order.len() {
                if tries == 0 {
                    break 'outer;
                }
                tries -= 1;
                order.swap(i, j);
                let t = predict(job, &expand(&order), net).seconds;
                if t < best * (1.0 - 1e-9) {
                    best = t;
                    continue 'outer;
                }
                order.swap(i, j);
            }
        }
        break;
    }
    expand(&order)
}

fn same_nodes(a: &[usize], b: &[usize]) -> bool {
    let mut x = a.to_vec();
    let mut y = b.to_vec();
    x.sort_unstable();
    y.sort_unstable();
    x == y
}

/// `predict` over `net` with the figures it used.
pub fn price(net: &SnapshotNetwork<'_>, job: &Job, ranks: Vec<usize>) -> Found {
    net.forget_usage();
    let prediction = predict(job, &ranks, net);
    Found {
        ranks,
        prediction,
        usage: net.usage(),
    }
}

/// For a hierarchical all-reduce: each zone's leader is its first rank. Zone by zone, tries its
/// [`LEADER_TRIES`] best nodes (by quality) first, rotating the zone's ranks, and keeps the
/// fastest.
fn choose_leaders(
    net: &SnapshotNetwork<'_>,
    job: &Job,
    ranks: Vec<usize>,
    quality: &[f64],
) -> Found {
    let mut best = price(net, job, ranks);
    let mut zones: Vec<usize> = Vec::new();
    for &r in &best.ranks {
        if !zones.contains(&net.zone(r)) {
            zones.push(net.zone(r));
        }
    }
    for z in zones {
        let positions: Vec<usize> = (0..best.ranks.len())
            .filter(|&i| net.zone(best.ranks[i]) == z)
            .collect();
        let members: Vec<usize> = positions.iter().map(|&i| best.ranks[i]).collect();
        let mut shifts: Vec<usize> = (1..members.len())
            .filter(|&s| members[s] != members[s - 1])
            .collect();
        shifts.sort_by(|a, b| quality[members[*a]].total_cmp(&quality[members[*b]]));
        shifts.truncate(LEADER_TRIES);
        for shift in shifts {
            let mut ranks = best.ranks.clone();
            for (x, &i) in positions.iter().enumerate() {
                ranks[i] = members[(x + shift) % members.len()];
            }
            let trial = price(net, job, ranks);
            if trial.prediction.seconds < best.prediction.seconds * (1.0 - 1e-9) {
                best = trial;
            }
        }
    }
    // Price the winner last, so that its usage is its own.
    let ranks = std::mem::take(&mut best.ranks);
    price(net, job, ranks)
}
