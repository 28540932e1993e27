//! Tiers from measurement: zones (tier 1), groups of near zones (tier 2), all nodes (the top
//! tier). A pure function of plain inputs, so that it is tested alone: the zones with their
//! nodes and freshness, a zone-pair figure function, the thresholds, and the previous
//! [`TierState`] (stable names and the hysteresis state); no I/O, time as an argument.
//!
//! Tier 2 is complete-linkage agglomerative clustering over the zone matrix, with hysteresis:
//!
//! 1. Zones start in their previous groups. A group splits only where a pair of its fresh zones
//!    is beyond a *leave* threshold (RTT above `leave_rtt_us`, or throughput below
//!    `leave_throughput_bps`); the largest part keeps the name, and the group's stale zones stay
//!    with it.
//! 2. Then groups (and new zones, alone) merge, nearest first, while *every* pair of fresh zones
//!    between them is within the *join* thresholds (RTT at most `join_rtt_us`, throughput, where
//!    measured, at least `join_throughput_bps`). A pair without an RTT figure never joins.
//! 3. Groups without a name get `group-<n>`, `n` counting up across the state's life: a name is
//!    never given to another group.
//!
//! Consequences, property-tested below: the same figures give the same groups (a derivation is
//! a fixed point of the next); a figure that moves only between its join and leave thresholds
//! never moves a zone; a stale zone keeps its group's name; names never change without a split
//! or a merge. Pairs with a stale zone decide nothing.
//!
//! ```
//! use zonemesh_domain::{NodeName, TierThresholds, UnixMs, ZoneName};
//! use zonemesh_engine::tiers::{LinkFigures, TierState, ZoneInput, derive};
//!
//! let zone = |name: &str, node: &str| ZoneInput {
//!     name: ZoneName::parse("zone", name).unwrap(),
//!     region: None,
//!     nodes: vec![NodeName::parse("node", node).unwrap()],
//!     fresh: true,
//! };
//! let zones = [zone("a", "a1"), zone("b", "b1"), zone("c", "c1")];
//! // a–b 2 ms, a–c 6 ms, b–c 10 ms.
//! let rtt = |i: usize, j: usize| match (i.min(j), i.max(j)) {
//!     (0, 1) => 2_000.0,
//!     (0, 2) => 6_000.0,
//!     _ => 10_000.0,
//! };
//! let figures = |i: usize, j: usize| LinkFigures { rtt_us: Some(rtt(i, j)), throughput_bps: None };
//! let (tiers, state) =
//!     derive(&zones, &figures, &TierThresholds::default(), &TierState::default(), UnixMs(0));
//! assert_eq!(tiers.zones[0].group, tiers.zones[1].group, "a and b are near");
//! assert_ne!(tiers.zones[0].group, tiers.zones[2].group, "c is far");
//! let again = derive(&zones, &figures, &TierThresholds::default(), &state, UnixMs(1)).0;
//! assert_eq!(again.groups, tiers.groups);
//! ```

use std::collections::BTreeMap;

use zonemesh_domain::{
    Cut, CutFigures, GroupLink, NodeName, PairFigure, TierGroup, TierThresholds, TierZone, Tiers,
    UnixMs, ZoneName, ZonePair,
};

/// Prefix of generated group names (`group-1`, `group-2`, ...).
pub const GROUP_PREFIX: &str = "group-";

/// One zone as the derivation sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneInput {
    /// The zone (nodes without a zone are in zone `unknown`, one zone like any other).
    pub name: ZoneName,
    /// Its region, when known.
    pub region: Option<ZoneName>,
    /// Its nodes. A zone without nodes is left out.
    pub nodes: Vec<NodeName>,
    /// Whether its figures are fresh; a stale zone keeps its group.
    pub fresh: bool,
}

/// Figures of an ordered zone pair (`a` to `b`), either may be missing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkFigures {
    /// RTT, µs.
    pub rtt_us: Option<f64>,
    /// Throughput, bit/s.
    pub throughput_bps: Option<f64>,
}

/// What a derivation carries to the next one, and what the store keeps: each zone's group and
/// the number of the next new group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TierState {
    /// Group of each zone.
    pub groups: BTreeMap<ZoneName, ZoneName>,
    /// The next new group is `group-<next_group>` (at least 1).
    pub next_group: u64,
}

impl TierState {
    /// The group names in use.
    pub fn group_names(&self) -> std::collections::BTreeSet<&ZoneName> {
        self.groups.values().collect()
    }
}

/// The figures of an unordered pair, both directions combined (worst RTT, lowest throughput).
#[derive(Debug, Clone, Copy, Default)]
struct Pair {
    rtt: Option<f64>,
    tput: Option<f64>,
    /// Both zones fresh: only then do the figures decide.
    fresh: bool,
}

fn usable(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite() && *x >= 0.0)
}

fn worse_max(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn worse_min(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl Pair {
    /// Within the join thresholds: an RTT at most `join_rtt_us`, a throughput (where measured)
    /// at least `join_throughput_bps`.
    fn joins(&self, t: &TierThresholds) -> bool {
        self.rtt.is_some_and(|r| r <= t.join_rtt_us)
            && self.tput.is_none_or(|x| x >= t.join_throughput_bps)
    }

    /// Not beyond a leave threshold (a missing figure is not beyond).
    fn holds(&self, t: &TierThresholds) -> bool {
        self.rtt.is_none_or(|r| r <= t.leave_rtt_us)
            && self.tput.is_none_or(|x| x >= t.leave_throughput_bps)
    }
}

/// The zone matrix, by position in name order.
struct Matrix {
    n: usize,
    pairs: Vec<Pair>,
    fresh: Vec<bool>,
}

impl Matrix {
    fn get(&self, a: usize, b: usize) -> &Pair {
        &self.pairs[a * self.n + b]
    }
}

/// Complete linkage between two clusters.
#[derive(Debug, Clone, Copy)]
struct Link {
    /// Worst RTT among their fresh pairs.
    rtt: Option<f64>,
    /// Every fresh pair joins.
    ok: bool,
    /// At least one fresh pair.
    any: bool,
}

impl Link {
    fn between(m: &Matrix, x: &[usize], y: &[usize], t: &TierThresholds) -> Self {
        let mut link = Link {
            rtt: None,
            ok: true,
            any: false,
        };
        for &a in x {
            for &b in y {
                let p = m.get(a, b);
                if !p.fresh {
                    continue;
                }
                link.any = true;
                link.ok &= p.joins(t);
                link.rtt = worse_max(link.rtt, p.rtt);
            }
        }
        link
    }

    fn merge(self, other: Link) -> Link {
        Link {
            rtt: worse_max(self.rtt, other.rtt),
            ok: self.ok && other.ok,
            any: self.any || other.any,
        }
    }
}

#[derive(Debug, Clone)]
struct Cluster {
    /// Zone positions, ascending.
    zones: Vec<usize>,
    name: Option<ZoneName>,
    /// Holds a stale zone.
    stale: bool,
}

impl Cluster {
    fn new(zones: Vec<usize>, name: Option<ZoneName>, m: &Matrix) -> Self {
        let mut zones = zones;
        zones.sort_unstable();
        let stale = zones.iter().any(|z| !m.fresh[*z]);
        Self { zones, name, stale }
    }

    fn first(&self) -> usize {
        self.zones[0]
    }
}

/// Splits a previous group where a pair of its fresh zones no longer holds: complete linkage
/// under the leave thresholds; the largest part (then the one with the first zone) keeps the name
/// and the stale zones.
fn split(members: Vec<usize>, name: ZoneName, m: &Matrix, t: &TierThresholds) -> Vec<Cluster> {
    let (fresh, stale): (Vec<usize>, Vec<usize>) = members.iter().partition(|z| m.fresh[**z]);
    let all_hold = fresh
        .iter()
        .enumerate()
        .all(|(i, a)| fresh[i + 1..].iter().all(|b| m.get(*a, *b).holds(t)));
    if all_hold {
        return vec![Cluster::new(members, Some(name), m)];
    }
    let mut parts: Vec<Vec<usize>> = fresh.iter().map(|z| vec![*z]).collect();
    loop {
        let mut best: Option<(f64, usize, usize)> = None;
        for i in 0..parts.len() {
            for j in i + 1..parts.len() {
                let mut worst = 0.0_f64;
                let mut hold = true;
                for a in &parts[i] {
                    for b in &parts[j] {
                        let p = m.get(*a, *b);
                        hold &= p.holds(t);
                        worst = worst.max(p.rtt.unwrap_or(0.0));
                    }
                }
                if hold && best.is_none_or(|(w, _, _)| worst < w) {
                    best = Some((worst, i, j));
                }
            }
        }
        let Some((_, i, j)) = best else { break };
        let moved = parts.remove(j);
        parts[i].extend(moved);
        parts[i].sort_unstable();
    }
    // Largest first, then by first zone: the first part keeps the name.
    parts.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
    let mut out = Vec::with_capacity(parts.len());
    for (i, mut part) in parts.into_iter().enumerate() {
        if i == 0 {
            part.extend(&stale);
            out.push(Cluster::new(part, Some(name.clone()), m));
        } else {
            out.push(Cluster::new(part, None, m));
        }
    }
    out
}

/// The figures among a set of pairs.
fn cut_figures(
    m: &Matrix,
    names: &[&ZoneName],
    pairs: impl Iterator<Item = (usize, usize)>,
) -> CutFigures {
    let mut out = CutFigures::default();
    for (a, b) in pairs {
        let (a, b) = (a.min(b), a.max(b));
        let p = m.get(a, b);
        if !p.fresh {
            out.stale_pairs += 1;
            continue;
        }
        let figure = |value| PairFigure {
            a: names[a].clone(),
            b: names[b].clone(),
            value,
        };
        match p.rtt {
            None => out.unmeasured_pairs += 1,
            Some(r) if out.worst_rtt.as_ref().is_none_or(|w| r > w.value) => {
                out.worst_rtt = Some(figure(r));
            }
            Some(_) => {}
        }
        if let Some(x) = p.tput
            && out.lowest_throughput.as_ref().is_none_or(|w| x < w.value)
        {
            out.lowest_throughput = Some(figure(x));
        }
    }
    out
}

fn cross(x: &[usize], y: &[usize]) -> impl Iterator<Item = (usize, usize)> {
    x.iter().flat_map(move |a| y.iter().map(move |b| (*a, *b)))
}

fn within(x: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
    x.iter()
        .enumerate()
        .flat_map(move |(i, a)| x[i + 1..].iter().map(move |b| (*a, *b)))
}

fn group_name(n: u64) -> ZoneName {
    ZoneName::parse("group", format!("{GROUP_PREFIX}{n}")).expect("group-<n> is a label value")
}

/// Derives the tiers from the zones, their figures (`figures(i, j)` for the ordered pair
/// `zones[i]` → `zones[j]`; `figures(i, i)` gives a zone's inside figures) and the previous state.
/// Returns the tiers and the state for the next derivation.
///
/// 1. The previous groups, split where they no longer hold; new zones alone.
/// 2. Merge, nearest first, while every fresh pair between two clusters joins.
/// 3. Names for new groups, in the order of their first zone; never one in use.
/// 4. The tree, with the figures behind every cut.
///
/// The tiers are exactly what [`render`] draws from the returned state: a replica that only
/// applies another's decisions draws the same tree from the same figures.
pub fn derive(
    zones: &[ZoneInput],
    figures: &dyn Fn(usize, usize) -> LinkFigures,
    thresholds: &TierThresholds,
    previous: &TierState,
    now: UnixMs,
) -> (Tiers, TierState) {
    let t = thresholds;
    let (order, m) = matrix(zones, figures);
    let names: Vec<&ZoneName> = order.iter().map(|i| &zones[*i].name).collect();
    let clusters = previous_clusters(&names, previous, &m, t);
    let mut clusters = merge_nearest(clusters, &m, t);
    let next = name_new_groups(&mut clusters, previous.next_group);
    let state = TierState {
        groups: clusters
            .iter()
            .flat_map(|c| {
                let group = c.name.as_ref().expect("every cluster is named");
                c.zones.iter().map(|z| (names[*z].clone(), group.clone()))
            })
            .collect(),
        next_group: next,
    };
    let tiers = tree(zones, figures, t, &order, &m, &clusters, now);
    (tiers, state)
}

/// The tiers with the groups `decided` gives, nothing split or merged: what a replica that does
/// not decide shows. A zone the state does not name yet stands alone, under the name the next
/// new group would get. `render(…, &derive(…).1, …)` is `derive(…).0`.
pub fn render(
    zones: &[ZoneInput],
    figures: &dyn Fn(usize, usize) -> LinkFigures,
    thresholds: &TierThresholds,
    decided: &TierState,
    now: UnixMs,
) -> Tiers {
    let (order, m) = matrix(zones, figures);
    let mut by_group: BTreeMap<&ZoneName, Vec<usize>> = BTreeMap::new();
    let mut clusters = Vec::new();
    for (z, i) in order.iter().enumerate() {
        match decided.groups.get(&zones[*i].name) {
            Some(g) => by_group.entry(g).or_default().push(z),
            None => clusters.push(Cluster::new(vec![z], None, &m)),
        }
    }
    clusters.extend(
        by_group
            .into_iter()
            .map(|(g, members)| Cluster::new(members, Some(g.clone()), &m)),
    );
    name_new_groups(&mut clusters, decided.next_group);
    tree(zones, figures, thresholds, &order, &m, &clusters, now)
}

/// Step 4: the tree of named `clusters` over the zones in `order`, with the figures behind
/// every cut.
fn tree(
    zones: &[ZoneInput],
    figures: &dyn Fn(usize, usize) -> LinkFigures,
    t: &TierThresholds,
    order: &[usize],
    m: &Matrix,
    clusters: &[Cluster],
    now: UnixMs,
) -> Tiers {
    let n = order.len();
    let names: Vec<&ZoneName> = order.iter().map(|i| &zones[*i].name).collect();
    let mut group_of: Vec<Option<&ZoneName>> = vec![None; n];
    for c in clusters {
        for z in &c.zones {
            group_of[*z] = c.name.as_ref();
        }
    }
    let tier_zones: Vec<TierZone> = (0..n)
        .map(|z| {
            let input = &zones[order[z]];
            let inside = figures(order[z], order[z]);
            let mut nodes = input.nodes.clone();
            nodes.sort();
            nodes.dedup();
            TierZone {
                name: input.name.clone(),
                group: group_of[z].expect("every zone is in a cluster").clone(),
                region: input.region.clone(),
                nodes,
                fresh: input.fresh,
                rtt_us: usable(inside.rtt_us),
                throughput_bps: usable(inside.throughput_bps),
            }
        })
        .collect();
    let mut groups: Vec<TierGroup> = clusters
        .iter()
        .map(|c| tier_group(c, clusters, m, &names, t))
        .collect();
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    let all: Vec<usize> = (0..n).collect();
    Tiers {
        computed_at: now,
        thresholds: *t,
        zones: tier_zones,
        groups,
        cluster: cut_figures(m, &names, within(&all)),
        pairs: within(&all)
            .filter_map(|(a, b)| {
                let p = m.get(a, b);
                (p.rtt.is_some() || p.tput.is_some()).then(|| ZonePair {
                    a: names[a].clone(),
                    b: names[b].clone(),
                    rtt_us: p.rtt,
                    throughput_bps: p.tput,
                    fresh: p.fresh,
                })
            })
            .collect(),
    }
}

/// The zones with nodes in name order (a repeated name counts once: the first), as indices into
/// `zones`, and the matrix of their pairs' figures (the worse direction of each).
fn matrix(
    zones: &[ZoneInput],
    figures: &dyn Fn(usize, usize) -> LinkFigures,
) -> (Vec<usize>, Matrix) {
    // Zones with nodes, in name order (a repeated name counts once: the first).
    let mut order: Vec<usize> = (0..zones.len())
        .filter(|i| !zones[*i].nodes.is_empty())
        .collect();
    order.sort_by(|a, b| zones[*a].name.cmp(&zones[*b].name).then(a.cmp(b)));
    order.dedup_by(|a, b| zones[*a].name == zones[*b].name);
    let n = order.len();
    let fresh: Vec<bool> = order.iter().map(|i| zones[*i].fresh).collect();
    let mut pairs = vec![Pair::default(); n * n];
    for a in 0..n {
        for b in a + 1..n {
            let (ab, ba) = (figures(order[a], order[b]), figures(order[b], order[a]));
            let p = Pair {
                rtt: worse_max(usable(ab.rtt_us), usable(ba.rtt_us)),
                tput: worse_min(usable(ab.throughput_bps), usable(ba.throughput_bps)),
                fresh: fresh[a] && fresh[b],
            };
            pairs[a * n + b] = p;
            pairs[b * n + a] = p;
        }
    }
    (order, Matrix { n, pairs, fresh })
}

/// Step 1: the previous groups, split where they no longer hold; new zones alone.
fn previous_clusters(
    names: &[&ZoneName],
    previous: &TierState,
    m: &Matrix,
    t: &TierThresholds,
) -> Vec<Cluster> {
    let mut previous_groups: BTreeMap<&ZoneName, Vec<usize>> = BTreeMap::new();
    let mut clusters = Vec::new();
    for (z, name) in names.iter().enumerate() {
        match previous.groups.get(*name) {
            Some(g) => previous_groups.entry(g).or_default().push(z),
            None => clusters.push(Cluster::new(vec![z], None, m)),
        }
    }
    for (g, members) in previous_groups {
        clusters.extend(split(members, g.clone(), m, t));
    }

    clusters
}

/// Step 2: merges clusters, nearest first, while every fresh pair between two clusters joins.
fn merge_nearest(mut clusters: Vec<Cluster>, m: &Matrix, t: &TierThresholds) -> Vec<Cluster> {
    let k = clusters.len();
    let mut alive = vec![true; k];
    let mut links = vec![
        Link {
            rtt: None,
            ok: false,
            any: false
        };
        k * k
    ];
    for x in 0..k {
        for y in x + 1..k {
            let l = Link::between(m, &clusters[x].zones, &clusters[y].zones, t);
            links[x * k + y] = l;
            links[y * k + x] = l;
        }
    }
    loop {
        let mut best: Option<(f64, usize, usize, usize, usize)> = None;
        for x in (0..k).filter(|x| alive[*x]) {
            for y in (x + 1..k).filter(|y| alive[*y]) {
                let l = links[x * k + y];
                if !(l.ok && l.any) || (clusters[x].stale && clusters[y].stale) {
                    continue;
                }
                let rtt = l.rtt.unwrap_or(0.0);
                let (fx, fy) = (clusters[x].first(), clusters[y].first());
                let key = (rtt, fx.min(fy), fx.max(fy));
                if best.is_none_or(|(r, a, b, _, _)| key < (r, a, b)) {
                    best = Some((key.0, key.1, key.2, x, y));
                }
            }
        }
        let Some((_, _, _, x, y)) = best else { break };
        // The name that survives: a stale zone's group first, then the larger, then the first.
        let rank = |c: &Cluster| (!c.stale, std::cmp::Reverse(c.zones.len()), c.first());
        let name = {
            let mut named: Vec<&Cluster> = [&clusters[x], &clusters[y]]
                .into_iter()
                .filter(|c| c.name.is_some())
                .collect();
            named.sort_by_key(|c| rank(c));
            named.first().and_then(|c| c.name.clone())
        };
        let moved = std::mem::take(&mut clusters[y].zones);
        let mut zones_xy = std::mem::take(&mut clusters[x].zones);
        zones_xy.extend(moved);
        clusters[x] = Cluster::new(zones_xy, name, m);
        alive[y] = false;
        for z in (0..k).filter(|z| alive[*z] && *z != x) {
            let l = links[x * k + z].merge(links[y * k + z]);
            links[x * k + z] = l;
            links[z * k + x] = l;
        }
    }
    clusters
        .into_iter()
        .zip(alive)
        .filter_map(|(c, a)| a.then_some(c))
        .collect()
}

/// Step 3: names for new groups, in the order of their first zone, never one in use, from
/// `next_group` on. Returns the next number to use.
fn name_new_groups(clusters: &mut [Cluster], next_group: u64) -> u64 {
    clusters.sort_by_key(Cluster::first);
    let mut next = next_group.max(1);
    let in_use: std::collections::BTreeSet<ZoneName> =
        clusters.iter().filter_map(|c| c.name.clone()).collect();
    for c in clusters.iter_mut().filter(|c| c.name.is_none()) {
        let mut name = group_name(next);
        next = next.saturating_add(1);
        while in_use.contains(&name) {
            name = group_name(next);
            next = next.saturating_add(1);
        }
        c.name = Some(name);
    }

    next
}

/// A group of the tree: its zones, its inside figures, whether a pair inside no longer joins
/// (held by hysteresis), and its nearest other group with the figures and reason of the cut.
fn tier_group(
    c: &Cluster,
    clusters: &[Cluster],
    m: &Matrix,
    names: &[&ZoneName],
    t: &TierThresholds,
) -> TierGroup {
    let held = within(&c.zones).any(|(a, b)| {
        let p = m.get(a, b);
        p.fresh && !p.joins(t)
    });
    let nearest = clusters
        .iter()
        .filter(|o| o.name != c.name)
        .map(|o| {
            let figures = cut_figures(m, names, cross(&c.zones, &o.zones));
            (o, figures)
        })
        .min_by(|(oa, fa), (ob, fb)| {
            let w = |f: &CutFigures| f.worst_rtt.as_ref().map_or(f64::INFINITY, |w| w.value);
            w(fa).total_cmp(&w(fb)).then(oa.name.cmp(&ob.name))
        })
        .map(|(o, figures)| {
            let fresh_pairs = cross(&c.zones, &o.zones).any(|(a, b)| m.get(a, b).fresh);
            let cut = if !fresh_pairs {
                Cut::Stale
            } else if figures.unmeasured_pairs > 0 {
                Cut::Unmeasured
            } else if figures
                .worst_rtt
                .as_ref()
                .is_some_and(|w| w.value > t.join_rtt_us)
            {
                Cut::Rtt
            } else if figures
                .lowest_throughput
                .as_ref()
                .is_some_and(|w| w.value < t.join_throughput_bps)
            {
                Cut::Throughput
            } else {
                // Every fresh pair joins: both hold a stale zone, which keeps its group.
                Cut::Stale
            };
            GroupLink {
                group: o.name.clone().expect("named"),
                figures,
                cut,
            }
        });
    TierGroup {
        name: c.name.clone().expect("named"),
        zones: c.zones.iter().map(|z| names[*z].clone()).collect(),
        inside: cut_figures(m, names, within(&c.zones)),
        held,
        nearest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn zone(name: &str, fresh: bool) -> ZoneInput {
        ZoneInput {
            name: ZoneName::parse("zone", name).unwrap(),
            region: None,
            nodes: vec![NodeName::parse("node", format!("{name}-n1")).unwrap()],
            fresh,
        }
    }

    fn zones(n: usize) -> Vec<ZoneInput> {
        (0..n).map(|i| zone(&format!("z{i:02}"), true)).collect()
    }

    /// A symmetric matrix of (RTT, throughput) by zone index.
    #[derive(Debug, Clone)]
    struct Figures {
        n: usize,
        cells: Vec<(Option<f64>, Option<f64>)>,
    }

    impl Figures {
        fn get(&self, i: usize, j: usize) -> LinkFigures {
            let (a, b) = (i.min(j), i.max(j));
            let (rtt, tput) = self.cells[a * self.n + b];
            LinkFigures {
                rtt_us: rtt,
                throughput_bps: tput,
            }
        }
    }

    fn thresholds() -> TierThresholds {
        TierThresholds::default()
    }

    fn run(zones: &[ZoneInput], f: &Figures, state: &TierState) -> (Tiers, TierState) {
        derive(zones, &|i, j| f.get(i, j), &thresholds(), state, UnixMs(1))
    }

    fn groups(state: &TierState) -> Vec<Vec<String>> {
        let mut by: BTreeMap<&ZoneName, Vec<String>> = BTreeMap::new();
        for (z, g) in &state.groups {
            by.entry(g).or_default().push(z.to_string());
        }
        let mut out: Vec<Vec<String>> = by.into_values().collect();
        out.sort();
        out
    }

    fn lab(a_b: f64, a_c: f64, b_c: f64) -> Figures {
        let mut cells = vec![(None, None); 9];
        cells[1] = (Some(a_b), Some(9e8));
        cells[2] = (Some(a_c), Some(9e8));
        cells[5] = (Some(b_c), Some(9e8));
        Figures { n: 3, cells }
    }

    #[test]
    fn near_zones_share_a_group_and_the_far_one_is_cut_off_by_its_rtt() {
        let zs = zones(3);
        let (tiers, state) = run(&zs, &lab(2_000.0, 6_000.0, 10_000.0), &TierState::default());
        tiers.check().unwrap();
        assert_eq!(groups(&state), [vec!["z00", "z01"], vec!["z02"]]);
        assert_eq!(state.next_group, 3);
        let ab = tiers.group(&tiers.zones[0].group).unwrap();
        assert_eq!(ab.name, "group-1");
        assert_eq!(ab.inside.worst_rtt.as_ref().unwrap().value, 2_000.0);
        assert!(!ab.held);
        let nearest = ab.nearest.as_ref().unwrap();
        assert_eq!(nearest.group, "group-2");
        assert_eq!(nearest.cut, Cut::Rtt);
        let w = nearest.figures.worst_rtt.as_ref().unwrap();
        assert_eq!(
            (w.a.as_str(), w.b.as_str(), w.value),
            ("z01", "z02", 10_000.0)
        );
        assert_eq!(tiers.cluster.worst_rtt.as_ref().unwrap().value, 10_000.0);
    }

    #[test]
    fn a_pair_in_the_band_holds_an_old_group_but_does_not_make_a_new_one() {
        let zs = zones(3);
        let band = lab(3_500.0, 9_000.0, 9_000.0);
        let (_, fresh_start) = run(&zs, &band, &TierState::default());
        assert_eq!(
            groups(&fresh_start).len(),
            3,
            "3.5 ms is past the join threshold"
        );
        let (_, joined) = run(&zs, &lab(2_000.0, 9_000.0, 9_000.0), &TierState::default());
        let (tiers, held) = run(&zs, &band, &joined);
        assert_eq!(held, joined, "3.5 ms is within the leave threshold");
        assert!(
            tiers
                .group(&ZoneName::parse("g", "group-1").unwrap())
                .unwrap()
                .held
        );
        let (_, split) = run(&zs, &lab(4_500.0, 9_000.0, 9_000.0), &joined);
        assert_eq!(groups(&split), [vec!["z00"], vec!["z01"], vec!["z02"]]);
        assert_eq!(
            split.groups[&zs[0].name], "group-1",
            "the first zone keeps the name"
        );
        assert_eq!(
            split.groups[&zs[1].name], "group-3",
            "a new name, never group-2 again"
        );
    }

    #[test]
    fn throughput_below_the_threshold_keeps_zones_apart() {
        let zs = zones(2);
        let f = Figures {
            n: 2,
            cells: vec![
                (None, None),
                (Some(500.0), Some(50e6)),
                (None, None),
                (None, None),
            ],
        };
        let (tiers, state) = run(&zs, &f, &TierState::default());
        assert_eq!(groups(&state).len(), 2);
        assert_eq!(
            tiers.groups[0].nearest.as_ref().unwrap().cut,
            Cut::Throughput
        );
    }

    #[test]
    fn unmeasured_pairs_never_join_and_the_unknown_zone_is_a_zone() {
        let mut zs = zones(1);
        zs.push(zone("unknown", true));
        let f = Figures {
            n: 2,
            cells: vec![(None, None); 4],
        };
        let (tiers, _) = run(&zs, &f, &TierState::default());
        assert_eq!(tiers.groups.len(), 2);
        assert_eq!(
            tiers.groups[0].nearest.as_ref().unwrap().cut,
            Cut::Unmeasured
        );
        assert!(tiers.zones.iter().any(|z| z.name == "unknown"));
    }

    #[test]
    fn zones_without_nodes_are_left_out_and_leave_the_state() {
        let mut zs = zones(2);
        let (_, state) = run(&zs, &lab(1.0, 1.0, 1.0), &TierState::default());
        zs[1].nodes.clear();
        let (tiers, state) = run(&zs, &lab(1.0, 1.0, 1.0), &state);
        assert_eq!(tiers.zones.len(), 1);
        assert_eq!(state.groups.len(), 1);
    }

    /// Zones on a few sites: near within a site, far between sites, with some pairs unmeasured.
    fn figures_strategy(n: usize) -> impl Strategy<Value = Figures> {
        (
            proptest::collection::vec(0..3usize, n),
            proptest::collection::vec(
                (
                    100.0..2_800.0f64,
                    2_500.0..12_000.0f64,
                    0..20u8,
                    50e6..2e9f64,
                ),
                n * n,
            ),
        )
            .prop_map(move |(site, noise)| {
                let mut cells = vec![(None, None); n * n];
                for a in 0..n {
                    for b in a + 1..n {
                        let (near, far, roll, tput) = noise[a * n + b];
                        let rtt = if site[a] == site[b] { near } else { far };
                        cells[a * n + b] = match roll {
                            0 => (None, None),
                            1..=5 => (Some(rtt), Some(tput)),
                            _ => (Some(rtt), None),
                        };
                    }
                }
                Figures { n, cells }
            })
    }

    /// Region of a value relative to two thresholds: 0 within join, 1 in the band, 2 beyond leave.
    fn rtt_region(v: f64, t: &TierThresholds) -> u8 {
        if v <= t.join_rtt_us {
            0
        } else if v <= t.leave_rtt_us {
            1
        } else {
            2
        }
    }

    fn tput_region(v: f64, t: &TierThresholds) -> u8 {
        if v >= t.join_throughput_bps {
            0
        } else if v >= t.leave_throughput_bps {
            1
        } else {
            2
        }
    }

    /// A figure that jitters without crossing towards the other side of the band: within join ->
    /// anywhere up to leave; in the band -> in the band; beyond leave -> anywhere past join.
    fn jitter(f: &Figures, unit: &[f64]) -> Figures {
        let t = thresholds();
        let mut out = f.clone();
        for (i, cell) in out.cells.iter_mut().enumerate() {
            let u = unit[i % unit.len()];
            let lerp = |lo: f64, hi: f64| lo + (hi - lo) * u;
            if let Some(r) = cell.0.as_mut() {
                *r = match rtt_region(*r, &t) {
                    0 => lerp(0.0, t.leave_rtt_us),
                    1 => lerp(t.join_rtt_us + 1.0, t.leave_rtt_us),
                    _ => lerp(t.join_rtt_us + 1.0, 20_000.0),
                };
            }
            if let Some(x) = cell.1.as_mut() {
                *x = match tput_region(*x, &t) {
                    0 => lerp(t.leave_throughput_bps, 4e9),
                    1 => lerp(t.leave_throughput_bps, t.join_throughput_bps - 1.0),
                    _ => lerp(0.0, t.join_throughput_bps - 1.0),
                };
            }
        }
        out
    }

    proptest! {
        #[test]
        fn every_zone_is_in_one_group_and_a_derivation_is_its_own_fixed_point(
            f in figures_strategy(7),
        ) {
            let zs = zones(7);
            let (tiers, state) = run(&zs, &f, &TierState::default());
            prop_assert!(tiers.check().is_ok(), "{:?}", tiers.check());
            prop_assert_eq!(state.groups.len(), 7);
            let (again, state2) = run(&zs, &f, &state);
            prop_assert_eq!(&state2, &state);
            prop_assert_eq!(&again.groups, &tiers.groups);
            // Complete linkage: every pair inside a fresh group joins.
            let t = thresholds();
            for g in &tiers.groups {
                if let Some(w) = &g.inside.worst_rtt {
                    prop_assert!(w.value <= t.join_rtt_us);
                }
                prop_assert_eq!(g.inside.unmeasured_pairs, 0);
            }
        }

        #[test]
        fn figures_jittering_within_the_thresholds_never_move_a_zone(
            f in figures_strategy(7),
            units in proptest::collection::vec(proptest::collection::vec(0.0..=1.0f64, 49), 3),
        ) {
            let zs = zones(7);
            let (_, first) = run(&zs, &f, &TierState::default());
            let mut state = first.clone();
            for unit in &units {
                let (tiers, next) = run(&zs, &jitter(&f, unit), &state);
                prop_assert_eq!(&next, &first, "{:?}", tiers.groups);
                state = next;
            }
        }

        #[test]
        fn rendering_a_derived_state_draws_the_derived_tree_and_a_stale_decision_holds(
            f in figures_strategy(6),
            g in figures_strategy(6),
            unknown in 0..6usize,
        ) {
            let zs = zones(6);
            let t = thresholds();
            let (_, first) = run(&zs, &f, &TierState::default());
            // A later derivation from new figures, and what a replica applying it draws.
            let (tiers, second) = run(&zs, &g, &first);
            let drawn = render(&zs, &|i, j| g.get(i, j), &t, &second, UnixMs(1));
            prop_assert_eq!(&drawn, &tiers);
            // A replica whose last decision is older draws the decided groups, however far the
            // figures moved, and a zone the decision does not name stands alone.
            let mut decided = first.clone();
            decided.groups.remove(&zs[unknown].name);
            let held = render(&zs, &|i, j| g.get(i, j), &t, &decided, UnixMs(1));
            prop_assert!(held.check().is_ok(), "{:?}", held.check());
            for z in &held.zones {
                match decided.groups.get(&z.name) {
                    Some(group) => prop_assert_eq!(&z.group, group),
                    None => {
                        prop_assert!(!decided.group_names().contains(&z.group));
                        prop_assert_eq!(held.group(&z.group).unwrap().zones.len(), 1);
                    }
                }
            }
        }

        #[test]
        fn a_stale_zone_keeps_its_group_whatever_its_figures(
            f in figures_strategy(6),
            g in figures_strategy(6),
            stale in proptest::collection::vec(any::<bool>(), 6),
        ) {
            let zs = zones(6);
            let (_, first) = run(&zs, &f, &TierState::default());
            let mut later = zs.clone();
            for (z, s) in later.iter_mut().zip(&stale) {
                z.fresh = !s;
            }
            let (tiers, second) = run(&later, &g, &first);
            prop_assert!(tiers.check().is_ok());
            for (z, s) in zs.iter().zip(&stale) {
                if *s {
                    prop_assert_eq!(&second.groups[&z.name], &first.groups[&z.name]);
                }
            }
            // New names only come from the counter: never a name given before.
            for name in second.group_names() {
                if !first.group_names().contains(name) {
                    let n: u64 = name.as_str()[GROUP_PREFIX.len()..].parse().unwrap();
                    prop_assert!(n >= first.next_group);
                }
            }
        }
    }
}
