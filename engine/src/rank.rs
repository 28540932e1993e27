//! `RankNodes`: the seed paper's ranking made precise.
//!
//! Each candidate gets three figures from its *scoring paths*: the directed paths between it and
//! the job's peers when the query names peers, otherwise the paths between it and the other
//! candidates of its zone (both directions). The figures are the mean median RTT, the mean loss
//! ratio and the mean throughput of those paths; a pair with no fresh measurement in either
//! direction counts with the [model](crate::model)'s estimate, flagged as estimated.
//!
//! Without peers, the figures are the candidate's *own* ([`crate::own`]): the scoring paths leave
//! out those to the zone-mates with a fault of their own in the model, and the answer names them
//! (`nodes_left_out`). A path's loss, delay and rate come from both of its ends, so a lossy or
//! slow neighbour's fault counts against the neighbour, not against every node of its zone; the
//! faulty node's own figures keep its paths to the others, which all show its fault. The score
//! ranks on the figures the answer reports. With peers, the paths to the peers are what the job
//! will use, so their means score as they are and nothing is left out.
//!
//! Each figure is normalised by its largest value among the READY candidates (loss by at least
//! 1 %, so that a single lost probe in a clean zone does not outweigh everything else; RTT by at
//! least 500 µs, so that µs of noise between nodes of one switch do not either), and the
//! cost is `(w_loss·loss + w_delay·rtt + w_tput·(1 − tput)) / (w_loss + w_delay + w_tput)`; the
//! score is `1 − cost`. A candidate without a throughput figure gets its zone's rate in the model
//! (the zone's capacity, else its typical tested rate), and the middle of that term when that is
//! unknown too; one without any RTT (every probe lost) the worst of it.
//!
//! READY candidates with figures come first, best first; then READY candidates without figures,
//! STALE and DOWN ones, each with the reason. Ties break by node name.

use std::collections::HashSet;

use zonemesh_domain::{NodeState, Provenance, RankQuery, RankedNode, Ranking, UnixMs};

use crate::own::Faulty;
use crate::{Error, NodeId, Snapshot};

/// Loss normalisation never divides by less than this.
pub const LOSS_SCALE_FLOOR: f64 = 0.01;
/// RTT normalisation never divides by less than this, µs: inside a zone RTTs of 25 and 35 µs
/// differ by measurement noise, not in anything a training job notices, and dividing by the
/// largest of them alone would let that noise outweigh a tenfold throughput difference.
pub const RTT_SCALE_FLOOR_US: f64 = 500.0;

/// The figures of one candidate over its scoring paths.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeFigures {
    /// Mean median RTT, µs.
    pub rtt_us: Option<f64>,
    /// Mean loss ratio.
    pub loss: Option<f64>,
    /// Mean throughput, bit/s.
    pub tput_bps: Option<f64>,
    /// Scoring paths (or pairs) that were measured.
    pub measured: u32,
    /// Scoring pairs that were estimated.
    pub estimated: u32,
    /// Oldest sample behind the figures.
    pub oldest: Option<UnixMs>,
}

#[derive(Debug, Default)]
struct Acc {
    rtt: f64,
    rtt_n: u32,
    loss: f64,
    loss_n: u32,
    tput: f64,
    tput_n: u32,
    measured: u32,
    estimated: u32,
    oldest: Option<UnixMs>,
}

impl Acc {
    fn finish(self) -> NodeFigures {
        NodeFigures {
            rtt_us: (self.rtt_n > 0).then(|| self.rtt / f64::from(self.rtt_n)),
            loss: (self.loss_n > 0).then(|| self.loss / f64::from(self.loss_n)),
            tput_bps: (self.tput_n > 0).then(|| self.tput / f64::from(self.tput_n)),
            measured: self.measured,
            estimated: self.estimated,
            oldest: self.oldest,
        }
    }

    fn seen(&mut self, at: Option<UnixMs>) {
        if let Some(at) = at {
            self.oldest = Some(self.oldest.map_or(at, |o| o.min(at)));
        }
    }
}

/// One ranked candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The node.
    pub node: NodeId,
    /// Its state.
    pub state: NodeState,
    /// Why it ranks where it does, when not READY with figures.
    pub reason: String,
    /// The figures behind the score.
    pub figures: NodeFigures,
    /// The zone-mates with a fault of their own whose paths the figures leave out, by id.
    pub left_out: Vec<NodeId>,
    /// 0 (best) .. 1 (worst); see the module docs.
    pub cost: f64,
}

impl Ranked {
    fn class(&self) -> u8 {
        match self.state {
            NodeState::Ready if self.figures.loss.is_some() => 0,
            NodeState::Ready => 1,
            NodeState::Stale => 2,
            NodeState::Unreachable => 3,
            NodeState::Down => 4,
        }
    }
}

/// Normalisation scales of one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scales {
    /// Largest RTT, µs.
    pub rtt_us: f64,
    /// Largest loss (at least [`LOSS_SCALE_FLOOR`]).
    pub loss: f64,
    /// Largest throughput, bit/s (0 when none is known).
    pub tput_bps: f64,
}

impl Scales {
    /// The scales over a set of figures.
    pub fn over<'a>(
        figures: impl Iterator<Item = (Option<f64>, Option<f64>, Option<f64>)> + 'a,
    ) -> Self {
        let mut s = Self {
            rtt_us: RTT_SCALE_FLOOR_US,
            loss: LOSS_SCALE_FLOOR,
            tput_bps: 0.0,
        };
        for (rtt, loss, tput) in figures {
            s.rtt_us = s.rtt_us.max(rtt.unwrap_or(0.0));
            s.loss = s.loss.max(loss.unwrap_or(0.0));
            s.tput_bps = s.tput_bps.max(tput.unwrap_or(0.0));
        }
        s
    }

    /// The weighted, normalised cost of one set of figures (see the module docs).
    pub fn cost(
        &self,
        weights: &zonemesh_domain::Weights,
        rtt: Option<f64>,
        loss: Option<f64>,
        tput: Option<f64>,
    ) -> f64 {
        let d = rtt.map_or(1.0, |r| r / self.rtt_us);
        let l = loss.map_or(1.0, |l| l / self.loss);
        let t = if self.tput_bps > 0.0 {
            tput.map_or(0.5, |t| 1.0 - t / self.tput_bps)
        } else {
            0.0
        };
        (weights.loss * l + weights.delay * d + weights.throughput * t) / weights.total()
    }
}

impl Snapshot {
    /// Resolves a list of names to ids, refusing unknown ones and dropping repeats.
    pub(crate) fn resolve(
        &self,
        field: &str,
        names: &[zonemesh_domain::NodeName],
    ) -> Result<Vec<NodeId>, Error> {
        let mut seen = HashSet::with_capacity(names.len());
        let mut ids = Vec::with_capacity(names.len());
        for (i, n) in names.iter().enumerate() {
            let id = self.require(&format!("{field}[{i}]"), n)?;
            if seen.insert(id) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Adds the figures of the pair `c`–`p` (both directions) to an accumulator.
    fn accumulate_pair(&self, acc: &mut Acc, c: NodeId, p: NodeId, now: UnixMs) {
        let config = &self.config.path;
        let mut latency_measured = false;
        for (src, dst) in [(c, p), (p, c)] {
            let Some(path) = self.path(src, dst) else {
                continue;
            };
            if !path.is_stale(now, config)
                && let Some(loss) = path.merged.loss()
            {
                latency_measured = true;
                acc.measured += 1;
                acc.loss += loss;
                acc.loss_n += 1;
                if let Some(r) = path.merged.rtt {
                    acc.rtt += f64::from(r.p50);
                    acc.rtt_n += 1;
                }
                acc.seen(path.last_update.get());
            }
            if let Some(t) = path.fresh_throughput(now, config) {
                acc.tput += t.latest_bps;
                acc.tput_n += 1;
            }
        }
        if !latency_measured {
            let pair = self.pair(c, p, now);
            if pair.latency == Provenance::Estimated {
                acc.estimated += 1;
                if let Some(l) = pair.loss {
                    acc.loss += l;
                    acc.loss_n += 1;
                }
                if let Some(r) = pair.rtt_us {
                    acc.rtt += r;
                    acc.rtt_n += 1;
                }
                acc.seen(pair.oldest);
            }
        }
    }

    /// The figures of candidate `c` over its scoring paths, and the faulty zone-mates they leave
    /// out (see the module docs); for a candidate scored on its own figures those are left to
    /// the caller, for the candidates it returns ([`Snapshot::left_out`]).
    fn candidate_figures(
        &self,
        c: NodeId,
        peers: &[NodeId],
        zone_mates: Option<&[NodeId]>,
        faulty: &Faulty,
        now: UnixMs,
    ) -> (NodeFigures, Vec<NodeId>) {
        let (mut figures, left_out) = match zone_mates {
            // The whole zone is among the candidates: the running sums are exactly the answer.
            // (The faulty zone-mates they leave out are named by `rank_ids`, for the nodes it
            // returns.)
            None if peers.is_empty() => {
                let s = self.own_figures(c);
                let figures = NodeFigures {
                    rtt_us: s.rtt_mean(),
                    loss: s.loss_mean(),
                    tput_bps: s.tput_mean(),
                    measured: s.loss_n,
                    estimated: 0,
                    oldest: s.oldest,
                };
                (figures, Vec::new())
            }
            None => {
                let mut acc = Acc::default();
                for &p in peers.iter().filter(|p| **p != c) {
                    self.accumulate_pair(&mut acc, c, p, now);
                }
                (acc.finish(), Vec::new())
            }
            Some(mates) => {
                let zone = self.zone_of(c);
                let others: Vec<NodeId> = mates.iter().copied().filter(|p| *p != c).collect();
                let (clean, mut left_out): (Vec<NodeId>, Vec<NodeId>) =
                    others.iter().partition(|p| !faulty.contains(zone, **p));
                left_out.sort();
                let mut acc = Acc::default();
                for &p in &clean {
                    self.accumulate_pair(&mut acc, c, p, now);
                }
                if left_out.is_empty() || acc.measured + acc.estimated > 0 {
                    (acc.finish(), left_out)
                } else {
                    // Only faulty neighbours to score on: their paths are all there is.
                    let mut acc = Acc::default();
                    for &p in &others {
                        self.accumulate_pair(&mut acc, c, p, now);
                    }
                    (acc.finish(), Vec::new())
                }
            }
        };
        if figures.tput_bps.is_none() {
            let z = self.zone_of(c);
            figures.tput_bps = match self.model().zone_pair(z, z) {
                Some(terms) => terms.capacity_bps.or(terms.typical_bps),
                // Until the writer's first fit: the mean of the zone's tested paths.
                None => self.roll_up(z, z).and_then(|s| s.tput_mean()),
            };
        }
        (figures, left_out)
    }

    /// Ranks the candidates of a query (see the module docs).
    pub fn rank_ids(&self, query: &RankQuery, now: UnixMs) -> Result<Vec<Ranked>, Error> {
        let candidates: Vec<NodeId> = if !query.candidates.is_empty() {
            self.resolve("candidates", &query.candidates)?
        } else if let Some(zone) = &query.zone {
            self.zone(self.require_zone("zone", zone)?).members.clone()
        } else {
            self.nodes()
                .filter(|(_, n)| n.registered)
                .map(|(id, _)| id)
                .collect()
        };
        let peers = self.resolve("peers", &query.peers)?;

        // Per zone id: the candidates in it, unless they are the whole zone (then the sums serve
        // and the list is left empty).
        let mut by_zone: Vec<Vec<NodeId>> = Vec::new();
        if peers.is_empty() {
            by_zone.resize_with(self.zones.len(), Vec::new);
            for &c in &candidates {
                by_zone[self.zone_of(c).0 as usize].push(c);
            }
            for (z, members) in by_zone.iter_mut().enumerate() {
                if members.len() == self.zones[z].members.len() {
                    *members = Vec::new();
                }
            }
        }

        let faulty = if peers.is_empty() {
            self.faulty()
        } else {
            Faulty::default()
        };
        // A candidate's zone-mates among the candidates, when they are not its whole zone.
        let mates_of = |c: NodeId| {
            by_zone
                .get(self.zone_of(c).0 as usize)
                .filter(|m| !m.is_empty())
                .map(Vec::as_slice)
        };
        let mut ranked: Vec<Ranked> = candidates
            .iter()
            .map(|&c| {
                let mates = mates_of(c);
                let (figures, left_out) = self.candidate_figures(c, &peers, mates, &faulty, now);
                let (state, why) = self.state(c, now);
                let reason = match state {
                    NodeState::Ready if figures.loss.is_none() => "no measurements yet".to_owned(),
                    NodeState::Ready => String::new(),
                    NodeState::Stale => format!("STALE: {why}"),
                    NodeState::Down | NodeState::Unreachable => {
                        format!("{}: {why}", state.as_str())
                    }
                };
                Ranked {
                    node: c,
                    state,
                    reason,
                    figures,
                    left_out,
                    cost: 1.0,
                }
            })
            .collect();

        // The figures the answer reports are what scores.
        let scales = Scales::over(
            ranked
                .iter()
                .filter(|r| r.class() == 0)
                .map(|r| (r.figures.rtt_us, r.figures.loss, r.figures.tput_bps)),
        );
        for r in &mut ranked {
            if r.figures.loss.is_some() {
                let f = r.figures;
                r.cost = scales.cost(&query.weights, f.rtt_us, f.loss, f.tput_bps);
            }
        }
        // Order small keys, not the candidates themselves; with a limit, only the best `limit`
        // (names are unique, so the order is total and the same as sorting all of them).
        let mut keys: Vec<(u8, f64, u32)> = ranked
            .iter()
            .enumerate()
            .map(|(i, r)| (r.class(), r.cost, i as u32))
            .collect();
        let order = |a: &(u8, f64, u32), b: &(u8, f64, u32)| {
            a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then_with(|| {
                let name = |k: &(u8, f64, u32)| &self.node(ranked[k.2 as usize].node).name;
                name(a).cmp(name(b))
            })
        };
        if query.limit > 0 && query.limit < keys.len() {
            keys.select_nth_unstable_by(query.limit - 1, order);
            keys.truncate(query.limit);
        }
        keys.sort_unstable_by(order);
        let mut slots: Vec<Option<Ranked>> = ranked.into_iter().map(Some).collect();
        Ok(keys
            .iter()
            .map(|k| {
                let mut r = slots[k.2 as usize].take().expect("each key once");
                // A node scored on its own figures: who they leave out, now that it is returned.
                if peers.is_empty() && mates_of(r.node).is_none() {
                    r.left_out = self.left_out(r.node, &faulty);
                }
                r
            })
            .collect())
    }

    /// The names of `ids`, sorted.
    pub(crate) fn names_of(&self, ids: &[NodeId]) -> Vec<zonemesh_domain::NodeName> {
        let mut names: Vec<_> = ids.iter().map(|id| self.node(*id).name.clone()).collect();
        names.sort();
        names
    }

    /// `RankNodes`.
    pub fn rank(&self, query: &RankQuery, now: UnixMs) -> Result<Ranking, Error> {
        let nodes = self
            .rank_ids(query, now)?
            .into_iter()
            .map(|r| RankedNode {
                nodes_left_out: self.names_of(&r.left_out),
                node: self.node(r.node).name.clone(),
                zone: self.zone(self.zone_of(r.node)).name.clone(),
                score: (1.0 - r.cost).clamp(0.0, 1.0),
                state: r.state,
                reason: r.reason,
                rtt_p50_us: r.figures.rtt_us.unwrap_or(0.0),
                loss_ratio: r.figures.loss.unwrap_or(0.0),
                throughput_bps: r.figures.tput_bps.unwrap_or(0.0),
                paths_measured: r.figures.measured,
                paths_estimated: r.figures.estimated,
                oldest_age_ms: r.figures.oldest.map_or(0, |o| now.since(o)),
            })
            .collect();
        Ok(Ranking { nodes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topology;
    use crate::testing::*;

    fn zone_of(n: &str) -> &str {
        &n[..2]
    }

    /// 100 µs inside a zone, 5 ms between zones, whoever the nodes are.
    fn flat_rtt(src: &str, dst: &str) -> f64 {
        if zone_of(src) == zone_of(dst) {
            100.0
        } else {
            5_000.0
        }
    }

    fn rtt(src: &str, dst: &str) -> f64 {
        let base = if zone_of(src) == zone_of(dst) {
            100.0
        } else {
            5_000.0
        };
        if src == "z0-n2" || dst == "z0-n2" {
            base * 3.0
        } else {
            base
        }
    }

    fn names(t: &Topology, ranked: &[Ranked]) -> Vec<String> {
        ranked
            .iter()
            .map(|r| t.node(r.node).name.to_string())
            .collect()
    }

    #[test]
    fn the_slow_and_the_lossy_node_rank_last_in_their_zone() {
        let now = UnixMs(1_000_000);
        let lossy = |s: &str, d: &str| if s == "z0-n1" || d == "z0-n1" { 20 } else { 0 };
        let t = mesh(2, 4, rtt, lossy, now);
        let zone = zonemesh_domain::ZoneName::parse("zone", "zone-0").unwrap();
        let query = RankQuery {
            zone: Some(zone),
            ..RankQuery::default()
        };
        let ranked = t.view().rank_ids(&query, now).unwrap();
        let order = names(&t, &ranked);
        assert_eq!(&order[2..], ["z0-n2", "z0-n1"], "{order:?}");
        assert!(ranked.windows(2).all(|w| w[0].cost <= w[1].cost));
        // The same zone given as explicit candidates takes the exact path, and agrees.
        let explicit = RankQuery {
            candidates: (0..4).map(|i| name(&format!("z0-n{i}"))).collect(),
            ..RankQuery::default()
        };
        assert_eq!(
            names(&t, &t.view().rank_ids(&explicit, now).unwrap()),
            order
        );
    }

    #[test]
    fn a_lossy_nodes_neighbours_are_not_ranked_down_with_it() {
        // Three zones of three: z0-n1 drops 5 % of what reaches it, z1-n2 runs at a tenth of
        // the others' rate, zone-2 is clean (the lab scenario of `zonemesh demo`).
        let now = UnixMs(1_000_000);
        let lossy = |s: &str, d: &str| if s == "z0-n1" || d == "z0-n1" { 5 } else { 0 };
        let tput = |s: &str, d: &str| {
            if s == "z1-n2" || d == "z1-n2" {
                1e8
            } else {
                1e9
            }
        };
        // Noise of a few µs favours the slow node: it must not outweigh a tenfold throughput.
        let noisy_rtt =
            |s: &str, d: &str| match (zone_of(s) == zone_of(d), s == "z1-n2" || d == "z1-n2") {
                (false, _) => 5_000.0,
                (true, false) => 30.0,
                (true, true) => 20.0,
            };
        let t = mesh_with_throughput(3, 3, noisy_rtt, lossy, tput, now);
        let ranked = t.view().rank_ids(&RankQuery::default(), now).unwrap();
        let order = names(&t, &ranked);
        assert_eq!(&order[7..], ["z1-n2", "z0-n1"], "{order:?}");
        // The answer reports each node's own figures: z0-n0's paths to z0-n1 lost probes, and
        // count against z0-n1, named; b's nodes run at their own rate, not the mean with z1-n2.
        let find = |n: &str| {
            ranked
                .iter()
                .find(|r| t.node(r.node).name.as_str() == n)
                .unwrap()
        };
        let left_out = |r: &Ranked| -> Vec<String> {
            r.left_out
                .iter()
                .map(|id| t.node(*id).name.to_string())
                .collect()
        };
        for (n, bad) in [
            ("z0-n0", "z0-n1"),
            ("z0-n2", "z0-n1"),
            ("z1-n0", "z1-n2"),
            ("z1-n1", "z1-n2"),
        ] {
            let r = find(n);
            assert_eq!(r.figures.loss, Some(0.0), "{n}: {:?}", r.figures);
            assert_eq!(r.figures.tput_bps, Some(1e9), "{n}: {:?}", r.figures);
            assert_eq!(r.figures.measured, 2, "{n}");
            assert_eq!(left_out(r), [bad], "{n}");
        }
        // The faulty nodes keep their own fault.
        let (lossy, slow) = (find("z0-n1"), find("z1-n2"));
        assert!(
            (lossy.figures.loss.unwrap() - 0.05).abs() < 1e-6,
            "{lossy:?}"
        );
        assert!(lossy.left_out.is_empty());
        assert_eq!(slow.figures.tput_bps, Some(1e8), "{slow:?}");
        assert!(slow.left_out.is_empty());
        // The innocent nodes score as well as the clean zone's.
        let best = ranked[0].cost;
        for n in ["z0-n0", "z0-n2", "z1-n0", "z1-n1"] {
            assert!(find(n).cost - best < 0.01, "{n}: {order:?}");
        }
        // With peers the paths to them score as measured: next to the lossy node is worse.
        let query = RankQuery {
            candidates: vec![name("z0-n0"), name("z2-n0")],
            peers: vec![name("z0-n1")],
            ..RankQuery::default()
        };
        let with_peer = t.view().rank_ids(&query, now).unwrap();
        assert!(with_peer.iter().all(|r| r.figures.loss.unwrap() > 0.02));
    }

    #[test]
    fn each_node_reports_and_scores_on_its_own_loss() {
        // Pair losses o(x) + o(y) for o = (0, 5 %, 0, 1 %, 0): leaving out the paths to the two
        // faulty nodes, each node's figures are its own o, and rank it.
        let now = UnixMs(1_000_000);
        let own = |n: &str| match n {
            "z0-n1" => 5,
            "z0-n3" => 1,
            _ => 0,
        };
        let t = mesh(1, 5, flat_rtt, |s, d| own(s) + own(d), now);
        let check = |ranked: &[Ranked], order: &[&str]| {
            for r in ranked {
                let n = t.node(r.node).name.as_str();
                let expected = own(n) as f64 / 100.0;
                assert!(
                    (r.figures.loss.unwrap() - expected).abs() < 1e-6,
                    "{n}: {:?}",
                    r.figures
                );
                let left_out: Vec<&str> = r
                    .left_out
                    .iter()
                    .map(|id| t.node(*id).name.as_str())
                    .collect();
                let want: &[&str] = match n {
                    "z0-n1" => &["z0-n3"],
                    "z0-n3" => &["z0-n1"],
                    _ => &["z0-n1", "z0-n3"],
                };
                assert_eq!(left_out, want, "{n}");
            }
            assert_eq!(names(&t, ranked), order);
        };
        // The whole zone, from the running sums.
        check(
            &t.view().rank_ids(&RankQuery::default(), now).unwrap(),
            &["z0-n0", "z0-n2", "z0-n4", "z0-n3", "z0-n1"],
        );
        // Four of its nodes as candidates, from their paths to each other.
        let explicit = RankQuery {
            candidates: ["z0-n3", "z0-n2", "z0-n1", "z0-n0"].map(name).to_vec(),
            ..RankQuery::default()
        };
        check(
            &t.view().rank_ids(&explicit, now).unwrap(),
            &["z0-n0", "z0-n2", "z0-n3", "z0-n1"],
        );
        // The answer names what it left out.
        let answer = t.view().rank(&RankQuery::default(), now).unwrap();
        let first = &answer.nodes[0];
        assert_eq!(first.node.as_str(), "z0-n0");
        assert_eq!(first.nodes_left_out, [name("z0-n1"), name("z0-n3")]);
        assert!(first.loss_ratio < 1e-9, "{first:?}");
    }

    #[test]
    fn a_subset_of_a_zone_leaves_its_faulty_candidates_out() {
        // Candidates z0-n0..2 of a zone of four: z0-n0's paths to the lossy z0-n1 are left out,
        // its path to z0-n2 is what scores; z0-n3 is no candidate and scores nothing.
        let now = UnixMs(1_000_000);
        let lossy = |s: &str, d: &str| if s == "z0-n1" || d == "z0-n1" { 5 } else { 0 };
        let t = mesh(1, 4, flat_rtt, lossy, now);
        let query = RankQuery {
            candidates: ["z0-n0", "z0-n1", "z0-n2"].map(name).to_vec(),
            ..RankQuery::default()
        };
        let ranked = t.view().rank(&query, now).unwrap().nodes;
        let row = |n: &str| ranked.iter().find(|r| r.node.as_str() == n).unwrap();
        for n in ["z0-n0", "z0-n2"] {
            assert_eq!(row(n).loss_ratio, 0.0, "{n}");
            assert_eq!(row(n).paths_measured, 2, "{n}: one pair, both ways");
            assert_eq!(row(n).nodes_left_out, [name("z0-n1")], "{n}");
        }
        assert!((row("z0-n1").loss_ratio - 0.05).abs() < 1e-6);
        assert!(row("z0-n1").nodes_left_out.is_empty());
        assert_eq!(ranked.last().unwrap().node.as_str(), "z0-n1");
    }

    #[test]
    fn peers_pull_candidates_towards_their_zone() {
        let now = UnixMs(1_000_000);
        let t = mesh(2, 3, rtt, |_, _| 0, now);
        let query = RankQuery {
            candidates: vec![name("z1-n0"), name("z0-n0")],
            peers: vec![name("z0-n1")],
            ..RankQuery::default()
        };
        let ranked = t.view().rank_ids(&query, now).unwrap();
        assert_eq!(names(&t, &ranked), ["z0-n0", "z1-n0"]);
        assert_eq!(ranked[0].figures.measured, 2);
    }

    #[test]
    fn down_and_stale_nodes_rank_last_with_a_reason() {
        let now = UnixMs(1_000_000);
        let mut t = mesh(1, 3, rtt, |_, _| 0, now);
        let down = t.id(&name("z0-n0")).unwrap();
        t.disconnect(down, now);
        let later = UnixMs(now.0 + 31_000);
        let ranked = t.view().rank_ids(&RankQuery::default(), later).unwrap();
        let last = ranked.last().unwrap();
        assert_eq!(last.node, down);
        assert!(last.reason.starts_with("DOWN"), "{}", last.reason);
        assert!(
            ranked
                .iter()
                .all(|r| r.reason.starts_with("STALE") || r.node == down)
        );
    }

    #[test]
    fn unknown_names_are_refused_with_the_field() {
        let now = UnixMs(1_000_000);
        let t = mesh(1, 2, rtt, |_, _| 0, now);
        let query = RankQuery {
            peers: vec![name("z0-n0"), name("nope")],
            ..RankQuery::default()
        };
        let err = t.view().rank_ids(&query, now).unwrap_err();
        assert_eq!(err.to_string(), "peers[1]: unknown node nope");
    }

    #[test]
    fn ties_break_by_name_and_answers_repeat() {
        let now = UnixMs(1_000_000);
        let t = mesh(1, 5, |_, _| 100.0, |_, _| 0, now);
        let first = t.view().rank_ids(&RankQuery::default(), now).unwrap();
        assert_eq!(
            names(&t, &first),
            ["z0-n0", "z0-n1", "z0-n2", "z0-n3", "z0-n4"]
        );
        assert_eq!(
            first,
            t.view().rank_ids(&RankQuery::default(), now).unwrap()
        );
    }
}
