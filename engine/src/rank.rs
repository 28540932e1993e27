//! `RankNodes`: the seed paper's ranking made precise.
//!
//! Each candidate gets three figures from its *scoring paths*: the directed paths between it and
//! the job's peers when the query names peers, otherwise the paths between it and the other
//! candidates of its zone (both directions). The figures are the mean median RTT, the mean loss
//! ratio and the mean throughput of those paths; a pair with no fresh measurement in either
//! direction counts with the zone-to-zone roll-up, flagged as estimated.
//!
//! Without peers, loss and RTT are scored as each candidate's *own share* of its paths' figures:
//! a path's loss or delay adds up from both of its ends (`L(x, y) ≈ o(x) + o(y)`), so a fault of
//! the candidate shows on every one of its paths while a fault of one neighbour shows on one. With
//! `n ≥ 3` scored candidates in a zone, each with the mean `m(x)` over its pairs, the additive
//! model gives `T = Σ m / 2` and `o(x) = ((n − 1)·m(x) − T) / (n − 2)` (at least 0): exact when
//! the model holds, computed from the running sums without reading a path. So the neighbours of a
//! lossy node are not ranked down with it. Throughput is not additive (a path runs at its
//! slower end) and stays the mean. The answer reports the measured means; the share only scores.
//! With peers, the paths to the peers are what the job will use, so their means score as they are.
//!
//! Each figure is normalised by its largest value among the READY candidates (loss by at least
//! 1 %, so that a single lost probe in a clean zone does not outweigh everything else; RTT by at
//! least 500 µs, so that µs of noise between nodes of one switch do not either), and the
//! cost is `(w_loss·loss + w_delay·rtt + w_tput·(1 − tput)) / (w_loss + w_delay + w_tput)`; the
//! score is `1 − cost`. A candidate without a throughput figure gets the middle of that term, one
//! without any RTT (every probe lost) the worst of it.
//!
//! READY candidates with figures come first, best first; then READY candidates without figures,
//! STALE and DOWN ones, each with the reason. Ties break by node name.

use std::collections::HashSet;

use zonemesh_domain::{NodeState, Provenance, RankQuery, RankedNode, Ranking, UnixMs};

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
    /// 0 (best) .. 1 (worst); see the module docs.
    pub cost: f64,
}

impl Ranked {
    fn class(&self) -> u8 {
        match self.state {
            NodeState::Ready if self.figures.loss.is_some() => 0,
            NodeState::Ready => 1,
            NodeState::Stale => 2,
            NodeState::Down => 3,
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
                acc.seen(path.last_update);
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

    /// The figures of candidate `c` over its scoring paths.
    fn candidate_figures(
        &self,
        c: NodeId,
        peers: &[NodeId],
        zone_mates: Option<&[NodeId]>,
        now: UnixMs,
    ) -> NodeFigures {
        let mut figures = match zone_mates {
            // The whole zone is among the candidates: the running sums are exactly the answer.
            None if peers.is_empty() => {
                let s = self.node_sums(c);
                NodeFigures {
                    rtt_us: s.rtt_mean(),
                    loss: s.loss_mean(),
                    tput_bps: s.tput_mean(),
                    measured: s.loss_n,
                    estimated: 0,
                    oldest: s.oldest,
                }
            }
            _ => {
                let mut acc = Acc::default();
                let others = if peers.is_empty() {
                    zone_mates.unwrap_or(&[])
                } else {
                    peers
                };
                for &p in others.iter().filter(|p| **p != c) {
                    self.accumulate_pair(&mut acc, c, p, now);
                }
                acc.finish()
            }
        };
        if figures.tput_bps.is_none() {
            let z = self.zone_of(c);
            figures.tput_bps = self.roll_up(z, z).and_then(|s| s.tput_mean());
        }
        figures
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

        // Per zone: the candidates in it, unless they are the whole zone (then the sums serve).
        let mut by_zone: std::collections::HashMap<crate::ZoneId, Vec<NodeId>> =
            std::collections::HashMap::new();
        if peers.is_empty() {
            for &c in &candidates {
                by_zone.entry(self.zone_of(c)).or_default().push(c);
            }
            by_zone.retain(|z, members| members.len() < self.zone(*z).members.len());
        }

        let mut ranked: Vec<Ranked> = candidates
            .iter()
            .map(|&c| {
                let mates = by_zone.get(&self.zone_of(c)).map(Vec::as_slice);
                let figures = self.candidate_figures(c, &peers, mates, now);
                let (state, why) = self.state(c, now);
                let reason = match state {
                    NodeState::Ready if figures.loss.is_none() => "no measurements yet".to_owned(),
                    NodeState::Ready => String::new(),
                    NodeState::Stale => format!("STALE: {why}"),
                    NodeState::Down => format!("DOWN: {why}"),
                };
                Ranked {
                    node: c,
                    state,
                    reason,
                    figures,
                    cost: 1.0,
                }
            })
            .collect();

        // What scores: (rtt, loss, throughput) per candidate.
        let mut scored: Vec<(Option<f64>, Option<f64>, Option<f64>)> = ranked
            .iter()
            .map(|r| (r.figures.rtt_us, r.figures.loss, r.figures.tput_bps))
            .collect();
        if peers.is_empty() {
            self.own_shares(&ranked, &mut scored);
        }
        let scales = Scales::over(
            ranked
                .iter()
                .zip(&scored)
                .filter(|(r, _)| r.class() == 0)
                .map(|(_, s)| *s),
        );
        for (r, (rtt, loss, tput)) in ranked.iter_mut().zip(&scored) {
            if r.figures.loss.is_some() {
                r.cost = scales.cost(&query.weights, *rtt, *loss, *tput);
            }
        }
        ranked.sort_by(|a, b| {
            a.class()
                .cmp(&b.class())
                .then(a.cost.total_cmp(&b.cost))
                .then_with(|| self.node(a.node).name.cmp(&self.node(b.node).name))
        });
        if query.limit > 0 {
            ranked.truncate(query.limit);
        }
        Ok(ranked)
    }

    /// Replaces the loss and RTT of `scored` by each candidate's own share within its zone (see
    /// the module docs); zones with fewer than three scored candidates keep their means.
    fn own_shares(
        &self,
        ranked: &[Ranked],
        scored: &mut [(Option<f64>, Option<f64>, Option<f64>)],
    ) {
        let mut by_zone: std::collections::HashMap<crate::ZoneId, Vec<usize>> =
            std::collections::HashMap::new();
        for (i, r) in ranked.iter().enumerate() {
            if r.figures.loss.is_some() && r.figures.rtt_us.is_some() {
                by_zone.entry(self.zone_of(r.node)).or_default().push(i);
            }
        }
        for members in by_zone.values().filter(|m| m.len() >= 3) {
            let n = members.len() as f64;
            let share = |mean: f64, total: f64| (((n - 1.0) * mean - total) / (n - 2.0)).max(0.0);
            let loss_total = members.iter().filter_map(|&i| scored[i].1).sum::<f64>() / 2.0;
            let rtt_total = members.iter().filter_map(|&i| scored[i].0).sum::<f64>() / 2.0;
            for &i in members {
                let (rtt, loss, _) = &mut scored[i];
                *loss = loss.map(|m| share(m, loss_total));
                *rtt = rtt.map(|m| share(m, rtt_total));
            }
        }
    }

    /// `RankNodes`.
    pub fn rank(&self, query: &RankQuery, now: UnixMs) -> Result<Ranking, Error> {
        let nodes = self
            .rank_ids(query, now)?
            .into_iter()
            .map(|r| RankedNode {
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
        // The measured means are what the answer reports: z0-n0 did lose probes to z0-n1.
        let n0 = ranked
            .iter()
            .find(|r| t.node(r.node).name.as_str() == "z0-n0")
            .unwrap();
        assert!(n0.figures.loss.unwrap() > 0.02, "{:?}", n0.figures);
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
    fn own_shares_undo_the_additive_model_exactly() {
        // Pair losses o(x) + o(y) for o = (0, 5 %, 0, 1 %): the shares recover o from the means.
        let now = UnixMs(1_000_000);
        let own = |n: &str| match n {
            "z0-n1" => 5,
            "z0-n3" => 1,
            _ => 0,
        };
        let t = mesh(1, 4, flat_rtt, |s, d| own(s) + own(d), now);
        let ranked = t.view().rank_ids(&RankQuery::default(), now).unwrap();
        let mut scored: Vec<_> = ranked
            .iter()
            .map(|r| (r.figures.rtt_us, r.figures.loss, r.figures.tput_bps))
            .collect();
        t.view().own_shares(&ranked, &mut scored);
        for (r, (_, loss, _)) in ranked.iter().zip(&scored) {
            let expected = f64::from(own(t.node(r.node).name.as_str()) as u32) / 100.0;
            assert!(
                (loss.unwrap() - expected).abs() < 1e-9,
                "{}: {loss:?}",
                t.node(r.node).name
            );
        }
        assert_eq!(names(&t, &ranked), ["z0-n0", "z0-n2", "z0-n3", "z0-n1"]);
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
