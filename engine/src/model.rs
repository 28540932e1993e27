//! One model of the measured network: what belongs to each node, fitted apart from what belongs
//! to each zone pair, from the fresh measured paths. Every estimate of a pair nobody measured —
//! [`Snapshot::pair`], [`Snapshot::path_figures`], [`Snapshot::matrix`], ranking and placement
//! through them, [`Snapshot::zone_pair_terms`] and the tiers — comes from it.
//!
//! # The terms
//!
//! For a directed path `a → b` between zones `Z(a)` and `Z(b)`:
//!
//! - **RTT** `rtt(a → b) ≈ base(Z(a), Z(b)) + off(a) + off(b)`: the zone pair's base RTT (one per
//!   unordered zone pair: a probe is a round trip) and each node's own offset (a slow host stack,
//!   a queue on its link). Offsets are normalised so that the median node of each zone has offset
//!   0: a zone pair's base is the RTT between two typical nodes of its zones.
//! - **Loss**, additive after `−ln(1 − ℓ)` (loss composes multiplicatively along a path):
//!   `1 − ℓ(a → b) ≈ (1 − out(a)) · (1 − zz(Z(a), Z(b))) · (1 − in(b))`: the loss of probes `a`
//!   sends (`out`), of probes `b` is sent (`in`), and the zone pair's own loss. A node's term is the
//!   lower median over its paths, so it is the node's only when most of its paths show it; the
//!   median of each zone's node terms moves to the zone's own (inside-the-zone) term, so a loss
//!   every node of a zone shows is the zone's, and one node's loss never is.
//! - **Throughput caps**: a node's egress (`out`) and ingress (`in`) cap is the most it achieved
//!   sending (receiving) in a throughput test, leaving out the tests its peer explains (the peer
//!   never did better than about this figure with anyone else, while this node did or was never
//!   tested elsewhere): a node tested only against a slow node is not slow. A zone pair's capacity
//!   is the most a test between the zones achieved that neither end's cap explains; unknown when
//!   every test is explained by its nodes (the zones' link did not limit anything seen).
//! - **Loss penalty** on the rate: Mathis's limit `MSS / RTT · √(3/2) / √ℓ` scaled by a factor
//!   calibrated on the measured paths that have both loss and a throughput figure (the median of
//!   measured rate over Mathis's). Mathis alone overpredicted the cost of 2 % loss up to 27× on the
//!   lab's paths (docs/EVALUATION.md, seed 3); with fewer than [`MIN_CALIBRATION_PATHS`] such paths
//!   the penalty is unknown and the rate is the caps alone (a lossy node's own tests already
//!   carry its loss into its caps).
//!
//! # Estimates
//!
//! An unmeasured directed path `a → b` is estimated from its two nodes' terms and its zone pair's
//! ([`Model::latency`], [`Model::rate_bps`]); a node the model has no terms for counts as a
//! typical node of its zone. With no terms for the zone pair there is no estimate. Estimates are
//! flagged [`Provenance::Estimated`](zonemesh_domain::Provenance) wherever they are shown. The
//! rate of a path is `min(egress(a), ingress(b), capacity(Z(a), Z(b)), penalty(rtt, loss))` over
//! the terms that are known (the zone pair's typical rate when none is).
//!
//! For the placement's network adapter, the snapshot exposes the node caps and zone capacities:
//! [`Snapshot::egress_cap_bps`], [`Snapshot::ingress_cap_bps`] and
//! [`Snapshot::zone_capacity_bps`]; [`Snapshot::estimated_rate_bps`] gives a link's model rate.
//!
//! # The fit
//!
//! Alternating medians (a robust decomposition): node terms from the residuals of their paths,
//! the per-zone normalisation, then the zone-pair terms from theirs, over the paths with fresh
//! latency figures: until no RTT offset moves by [`CONVERGED_US`] (at most [`MAX_ITERATIONS`]
//! rounds), and [`ITERATIONS`] rounds for loss. Its cost is linear in the paths (a few selections of a
//! node's residuals per iteration; 65 ms at 500,000 paths); the writer runs it at the end of a
//! sweep pass, at most once per millisecond per [`MODEL_PATHS_PER_MS`](crate::MODEL_PATHS_PER_MS)
//! paths and at least every [`EngineConfig::model_every_ms`](crate::EngineConfig::model_every_ms),
//! and the snapshot shares it ([`Snapshot::model`]), so readers never fit.
//!
//! ```
//! use zonemesh_domain::{Hello, IcmpMode, Micros, NodeName, PathSample, Report, Rtt, UnixMs, ZoneName};
//! use zonemesh_engine::{EngineConfig, Topology};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let now = UnixMs(1_000_000);
//! let nodes = ["a1", "a2", "a3", "b1", "b2", "b3"];
//! let mut t = Topology::new(EngineConfig::default());
//! for n in nodes {
//!     t.register(&Hello {
//!         node: NodeName::parse("node", n)?,
//!         zone: ZoneName::parse("zone", &n[..1])?,
//!         region: None,
//!         addresses: vec!["192.0.2.1".parse()?],
//!         agent_version: "example".into(),
//!         icmp_mode: IcmpMode::Raw,
//!         probe_port: 7402,
//!     }, now);
//! }
//! // Zones a and b are 2 ms apart, 50 µs inside; a2 adds 300 µs to its paths and loses 5 %.
//! // Every path is measured but a3 → b1 and b1 → a3.
//! for (seq, src) in nodes.iter().enumerate() {
//!     let mut paths = Vec::new();
//!     for dst in nodes.iter().filter(|d| *d != src && (*src, **d) != ("a3", "b1")
//!                                       && (*src, **d) != ("b1", "a3")) {
//!         let bad = *src == "a2" || *dst == "a2";
//!         let base = if src[..1] == dst[..1] { 50.0 } else { 2_000.0 };
//!         let us = Micros::parse("rtt", base + if bad { 300.0 } else { 0.0 })?;
//!         let rtt = Rtt { samples: 95, min: us, p50: us, p90: us, p99: us, max: us, mean: us,
//!                         jitter: Micros::ZERO };
//!         paths.push(PathSample {
//!             src: NodeName::parse("src", *src)?,
//!             dst: NodeName::parse("dst", *dst)?,
//!             window_start: UnixMs(now.0 - 10_000),
//!             window_end: now,
//!             sent: 100,
//!             received: if bad { 95 } else { 100 },
//!             rtt: Some(rtt.checked()?),
//!             throughput: None,
//!             method: Some(IcmpMode::Raw),
//!         });
//!     }
//!     let id = t.id(&NodeName::parse("src", *src)?).expect("registered");
//!     t.apply_report(id, &Report { sequence: seq as u64 + 1, paths }, now)?;
//! }
//! t.sweep(now); // the writer fits the model at the end of a sweep pass
//!
//! let snapshot = t.view();
//! let id = |n: &str| t.id(&NodeName::parse("node", n).unwrap()).unwrap();
//! let (a2, a3, b1) = (id("a2"), id("a3"), id("b1"));
//! let (za, zb) = (snapshot.zone_of(a2), snapshot.zone_of(b1));
//! let zone = snapshot.model().zone_pair(za, zb).expect("measured");
//! assert!((zone.rtt_us.unwrap() - 2_000.0).abs() < 1.0);
//! assert_eq!(zone.loss, 0.0, "a2's loss stays on a2");
//! // The pair nobody measured: from a3's and b1's terms and the zone pair's.
//! let pair = snapshot.pair(a3, b1, now);
//! assert_eq!(pair.latency, zonemesh_domain::Provenance::Estimated);
//! assert!((pair.rtt_us.unwrap() - 2_000.0).abs() < 1.0);
//! assert_eq!(pair.loss, Some(0.0));
//! let lossy = snapshot.model().latency(a2, za, b1, zb).expect("zone pair known");
//! assert!((lossy.rtt_us - 2_300.0).abs() < 1.0 && (lossy.loss - 0.05).abs() < 1e-9);
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::net::IpAddr;

use zonemesh_domain::stats::{lower_median, median};
use zonemesh_domain::{
    Bps, Hello, IcmpMode, Micros, NodeName, PathSample, Report, Rtt, ThroughputSample, UnixMs,
    ZoneName,
};

use crate::collective::MSS_BYTES;
use crate::{EngineConfig, Error, NodeId, PairMap, Snapshot, Topology, ZoneId};

/// Rounds of the loss fit (medians of mostly-zero residuals settle in two or three).
pub const ITERATIONS: usize = 5;

/// Most rounds of the RTT fit; it stops earlier once no offset moves by [`CONVERGED_US`].
pub const MAX_ITERATIONS: usize = 30;

/// The RTT fit has converged when no node's offset moved more than this in a round, µs.
pub const CONVERGED_US: f64 = 0.1;

/// Measured lossy paths with a throughput figure needed to calibrate the loss penalty.
pub const MIN_CALIBRATION_PATHS: usize = 2;

/// Loss at or above which a measured path calibrates the loss penalty (one probe in a hundred
/// more than noise).
pub const CALIBRATION_MIN_LOSS: f64 = 0.005;

/// A test is explained by its peer when the peer's best figure with anyone else is at most this
/// factor above it.
const EXPLAINED: f64 = 1.1;

/// A node whose own loss (out or in) reaches this has a fault of its own.
pub const FAULT_LOSS: f64 = 0.005;

/// A node whose own RTT offset reaches this, µs, has a fault of its own.
pub const FAULT_RTT_US: f64 = 100.0;

/// A node whose egress or ingress cap is below this share of its zone's median cap has a fault
/// of its own.
pub const FAULT_RATE_SHARE: f64 = 0.5;

/// Loss ratios are clamped below 1 before `−ln(1 − ℓ)`.
const MAX_LOSS: f64 = 0.999;

/// What belongs to one node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeTerms {
    /// RTT the node adds to each of its paths beyond its zone's median node, µs (may be negative).
    pub rtt_offset_us: f64,
    /// Loss of the probes it sends, 0..1.
    pub loss_out: f64,
    /// Loss of the probes it is sent, 0..1.
    pub loss_in: f64,
    /// Most it sent in a throughput test its peers do not explain, bit/s.
    pub egress_bps: Option<f64>,
    /// Most it received in a throughput test its peers do not explain, bit/s.
    pub ingress_bps: Option<f64>,
    /// Measured paths (either direction) behind the latency terms.
    pub paths: u32,
    /// Whether the node has a fault of its own (see [`Model::has_own_fault`]).
    pub own_fault: bool,
}

/// What belongs to one zone pair (unordered; inside one zone when both are the same).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ZoneTerms {
    /// Base RTT between two typical nodes of the zones, µs; `None` when no path between them has
    /// an RTT (every probe lost).
    pub rtt_us: Option<f64>,
    /// Median of the paths' 90th percentile above their median, µs.
    pub tail_p90_us: f64,
    /// Median of the paths' 99th percentile above their median, µs.
    pub tail_p99_us: f64,
    /// The zone pair's own loss, 0..1.
    pub loss: f64,
    /// Capacity between the zones, bit/s, when a test between them shows one (see the module docs).
    pub capacity_bps: Option<f64>,
    /// Median rate of the throughput tests between the zones' nodes without a fault of their own
    /// (of all its tests when none is without), bit/s: the rate of a path whose nodes and zone
    /// pair have no cap known.
    pub typical_bps: Option<f64>,
    /// Measured directed paths behind the latency terms.
    pub measured_paths: u32,
    /// Measured directed paths with a throughput figure.
    pub throughput_paths: u32,
    /// Oldest sample behind the terms.
    pub oldest: Option<UnixMs>,
}

/// The loss penalty's calibration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossPenalty {
    /// Measured rate over Mathis's limit, median over the calibrating paths.
    pub factor: f64,
    /// Paths it was calibrated on.
    pub paths: usize,
}

impl LossPenalty {
    /// The rate `loss` allows on a path of `rtt_us`, bit/s (`None` without loss or RTT).
    pub fn rate_bps(&self, rtt_us: f64, loss: f64) -> Option<f64> {
        mathis_bps(rtt_us, loss).map(|m| m * self.factor)
    }
}

/// Mathis's limit for one TCP flow, bit/s: `MSS / RTT · √(3/2) / √ℓ`.
pub fn mathis_bps(rtt_us: f64, loss: f64) -> Option<f64> {
    (rtt_us > 0.0 && loss > 0.0)
        .then(|| MSS_BYTES * 8.0 / (rtt_us / 1e6) * (1.5f64).sqrt() / loss.min(1.0).sqrt())
}

/// An estimated directed path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyEstimate {
    /// Median RTT, µs.
    pub rtt_us: f64,
    /// 90th percentile RTT, µs.
    pub rtt_p90_us: f64,
    /// 99th percentile RTT, µs.
    pub rtt_p99_us: f64,
    /// Loss ratio.
    pub loss: f64,
    /// Oldest sample behind the zone pair's terms.
    pub oldest: Option<UnixMs>,
}

/// The fitted model (see the module docs). Cheap to share: a snapshot holds it in an `Arc`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Model {
    fitted_at: Option<UnixMs>,
    /// By node id; nodes registered after the fit have none.
    nodes: Vec<NodeTerms>,
    /// By unordered zone pair (smaller id first).
    zones: PairMap<(ZoneId, ZoneId), ZoneTerms>,
    penalty: Option<LossPenalty>,
    /// Rounds the RTT fit took.
    rounds: usize,
}

fn key(a: ZoneId, b: ZoneId) -> (ZoneId, ZoneId) {
    if a <= b { (a, b) } else { (b, a) }
}

/// One measured directed path as the fit sees it.
#[derive(Debug, Clone, Copy)]
struct Obs {
    src: u32,
    dst: u32,
    /// Index of the zone pair.
    pair: u32,
    /// Median RTT, µs (NaN: no reply).
    rtt: f64,
    /// `−ln(1 − ℓ)`.
    loss: f64,
}

/// Compressed lists of observation indices by node or zone pair.
struct Index {
    start: Vec<u32>,
    items: Vec<u32>,
}

impl Index {
    fn build(groups: usize, entries: impl Iterator<Item = (usize, u32)> + Clone) -> Self {
        let mut count = vec![0u32; groups + 1];
        for (g, _) in entries.clone() {
            count[g + 1] += 1;
        }
        for i in 0..groups {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        let mut items = vec![0u32; count[groups] as usize];
        for (g, item) in entries {
            items[fill[g] as usize] = item;
            fill[g] += 1;
        }
        Self {
            start: count,
            items,
        }
    }

    fn of(&self, g: usize) -> &[u32] {
        &self.items[self.start[g] as usize..self.start[g + 1] as usize]
    }
}

/// A throughput test as the cap fit sees it.
#[derive(Debug, Clone, Copy)]
struct Test {
    src: usize,
    dst: usize,
    pair: usize,
    bps: f64,
}

/// The best two figures of a node in one direction, with the peers that gave them.
#[derive(Debug, Clone, Copy, Default)]
struct Top2 {
    best: Option<(f64, usize)>,
    second: Option<f64>,
}

impl Top2 {
    fn push(&mut self, bps: f64, peer: usize) {
        match self.best {
            Some((b, _)) if bps <= b => {
                self.second = Some(self.second.map_or(bps, |s| s.max(bps)));
            }
            Some((b, _)) => {
                self.second = Some(b);
                self.best = Some((bps, peer));
            }
            None => self.best = Some((bps, peer)),
        }
    }

    /// The best figure with anyone but `peer`.
    fn without(&self, peer: usize) -> Option<f64> {
        match self.best {
            Some((_, p)) if p == peer => self.second,
            Some((b, _)) => Some(b),
            None => None,
        }
    }
}

impl Model {
    /// Fits the model to the fresh measured paths of `snapshot` at `now`.
    pub fn fit(snapshot: &Snapshot, now: UnixMs) -> Self {
        Self::fit_without(snapshot, now, &|_, _| false)
    }

    /// Fits the model leaving out the directed paths `held_out` says (to measure its error on
    /// them: [`holdout`]).
    pub fn fit_without(
        snapshot: &Snapshot,
        now: UnixMs,
        held_out: &dyn Fn(NodeId, NodeId) -> bool,
    ) -> Self {
        let config = &snapshot.config().path;
        let n = snapshot.nodes().len();
        let zone_of: Vec<ZoneId> = snapshot.nodes().map(|(_, info)| info.zone).collect();
        let mut pair_index: PairMap<(ZoneId, ZoneId), u32> = PairMap::default();
        let mut pairs: Vec<(ZoneId, ZoneId)> = Vec::new();
        let mut obs: Vec<Obs> = Vec::new();
        let mut tails: Vec<(u32, f64, f64)> = Vec::new();
        let mut oldest: Vec<Option<UnixMs>> = Vec::new();
        let mut tests: Vec<Test> = Vec::new();
        let mut calibration: Vec<f64> = Vec::new();
        for ((src, dst), path) in snapshot.paths() {
            if src == dst || held_out(src, dst) {
                continue;
            }
            let (s, d) = (src.0 as usize, dst.0 as usize);
            if s >= n || d >= n {
                continue;
            }
            let k = key(zone_of[s], zone_of[d]);
            let pair = *pair_index.entry(k).or_insert_with(|| {
                pairs.push(k);
                oldest.push(None);
                (pairs.len() - 1) as u32
            });
            let fresh_loss = (!path.is_stale(now, config))
                .then(|| path.merged.loss())
                .flatten();
            let tput = path.fresh_throughput(now, config).map(|t| t.latest_bps);
            if let Some(loss) = fresh_loss {
                let rtt = path.merged.rtt.map_or(f64::NAN, |r| f64::from(r.p50));
                if let Some(r) = path.merged.rtt {
                    tails.push((
                        pair,
                        f64::from(r.p90 - r.p50).max(0.0),
                        f64::from(r.p99 - r.p50).max(0.0),
                    ));
                }
                obs.push(Obs {
                    src: src.0,
                    dst: dst.0,
                    pair,
                    rtt,
                    loss: -(1.0 - loss.min(MAX_LOSS)).ln(),
                });
                let at = path.last_update;
                let o = &mut oldest[pair as usize];
                *o = match (*o, at) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
                if let Some(bps) = tput
                    && loss >= CALIBRATION_MIN_LOSS
                    && let Some(m) = mathis_bps(rtt, loss)
                {
                    calibration.push(bps / m);
                }
            }
            if let Some(bps) = tput {
                tests.push(Test {
                    src: s,
                    dst: d,
                    pair: pair as usize,
                    bps,
                });
            }
        }

        let zone_count = snapshot.zones().len();
        let mut nodes = vec![NodeTerms::default(); n];
        let mut zone_terms = vec![ZoneTerms::default(); pairs.len()];

        // Indexes: paths touching each node, paths into each node, paths from each node, paths of
        // each zone pair.
        let touching = Index::build(
            n,
            obs.iter()
                .enumerate()
                .flat_map(|(i, o)| [(o.src as usize, i as u32), (o.dst as usize, i as u32)]),
        );
        let from = Index::build(
            n,
            obs.iter()
                .enumerate()
                .map(|(i, o)| (o.src as usize, i as u32)),
        );
        let into = Index::build(
            n,
            obs.iter()
                .enumerate()
                .map(|(i, o)| (o.dst as usize, i as u32)),
        );
        let by_pair = Index::build(
            pairs.len(),
            obs.iter()
                .enumerate()
                .map(|(i, o)| (o.pair as usize, i as u32)),
        );
        let members: Vec<Vec<usize>> = {
            let mut m = vec![Vec::new(); zone_count];
            for (i, z) in zone_of.iter().enumerate() {
                if !touching.of(i).is_empty() {
                    m[z.0 as usize].push(i);
                }
            }
            m
        };
        for (i, terms) in nodes.iter_mut().enumerate() {
            terms.paths = touching.of(i).len() as u32;
        }

        let mut scratch: Vec<f64> = Vec::new();

        // RTT: bases from the current offsets, then offsets (normalised per zone), until the
        // offsets move less than CONVERGED_US; then the bases once more.
        let mut off = vec![0.0f64; n];
        let mut base = vec![0.0f64; pairs.len()];
        let fit_bases = |base: &mut [f64], off: &[f64], scratch: &mut Vec<f64>| {
            for (p, b) in base.iter_mut().enumerate() {
                scratch.clear();
                scratch.extend(by_pair.of(p).iter().filter_map(|&k| {
                    let o = &obs[k as usize];
                    (!o.rtt.is_nan()).then(|| o.rtt - off[o.src as usize] - off[o.dst as usize])
                }));
                *b = median(scratch).unwrap_or(f64::NAN);
            }
        };
        let mut rounds = 0;
        while rounds < MAX_ITERATIONS {
            rounds += 1;
            fit_bases(&mut base, &off, &mut scratch);
            let mut moved = 0.0f64;
            // In place (Gauss–Seidel): each node sees its peers' newest offsets.
            for i in 0..n {
                scratch.clear();
                scratch.extend(touching.of(i).iter().filter_map(|&k| {
                    let p = &obs[k as usize];
                    let other = if p.src as usize == i { p.dst } else { p.src };
                    let b = base[p.pair as usize];
                    (!p.rtt.is_nan() && !b.is_nan()).then(|| p.rtt - b - off[other as usize])
                }));
                let new = median(&mut scratch).unwrap_or(0.0);
                moved = moved.max((new - off[i]).abs());
                off[i] = new;
            }
            for zone in &members {
                scratch.clear();
                scratch.extend(zone.iter().map(|&i| off[i]));
                let m = median(&mut scratch).unwrap_or(0.0);
                for &i in zone {
                    off[i] -= m;
                }
            }
            if moved < CONVERGED_US {
                break;
            }
        }
        fit_bases(&mut base, &off, &mut scratch);

        // Loss: outgoing and incoming node terms, the per-zone normalisation, then zone terms.
        let mut out = vec![0.0f64; n];
        let mut inn = vec![0.0f64; n];
        let mut zz = vec![0.0f64; pairs.len()];
        if obs.iter().any(|o| o.loss > 0.0) {
            for _ in 0..ITERATIONS {
                for (i, t) in out.iter_mut().enumerate() {
                    scratch.clear();
                    scratch.extend(from.of(i).iter().map(|&k| {
                        let o = &obs[k as usize];
                        o.loss - zz[o.pair as usize] - inn[o.dst as usize]
                    }));
                    *t = lower_median(&mut scratch).unwrap_or(0.0).max(0.0);
                }
                for (i, t) in inn.iter_mut().enumerate() {
                    scratch.clear();
                    scratch.extend(into.of(i).iter().map(|&k| {
                        let o = &obs[k as usize];
                        o.loss - zz[o.pair as usize] - out[o.src as usize]
                    }));
                    *t = lower_median(&mut scratch).unwrap_or(0.0).max(0.0);
                }
                for zone in &members {
                    for terms in [&mut out, &mut inn] {
                        scratch.clear();
                        scratch.extend(zone.iter().map(|&i| terms[i]));
                        let m = lower_median(&mut scratch).unwrap_or(0.0);
                        for &i in zone {
                            terms[i] = (terms[i] - m).max(0.0);
                        }
                    }
                }
                for (p, z) in zz.iter_mut().enumerate() {
                    scratch.clear();
                    scratch.extend(by_pair.of(p).iter().map(|&k| {
                        let o = &obs[k as usize];
                        o.loss - out[o.src as usize] - inn[o.dst as usize]
                    }));
                    *z = lower_median(&mut scratch).unwrap_or(0.0).max(0.0);
                }
            }
        }

        for (i, t) in nodes.iter_mut().enumerate() {
            t.rtt_offset_us = off[i];
            t.loss_out = 1.0 - (-out[i]).exp();
            t.loss_in = 1.0 - (-inn[i]).exp();
        }
        let mut tail_lists: Vec<(Vec<f64>, Vec<f64>)> = vec![Default::default(); pairs.len()];
        for (p, t90, t99) in tails {
            tail_lists[p as usize].0.push(t90);
            tail_lists[p as usize].1.push(t99);
        }
        for (p, terms) in zone_terms.iter_mut().enumerate() {
            terms.rtt_us = (!base[p].is_nan()).then_some(base[p].max(0.0));
            terms.loss = 1.0 - (-zz[p]).exp();
            terms.measured_paths = by_pair.of(p).len() as u32;
            terms.oldest = oldest[p];
            terms.tail_p90_us = median(&mut tail_lists[p].0).unwrap_or(0.0);
            terms.tail_p99_us = median(&mut tail_lists[p].1).unwrap_or(0.0);
        }

        fit_caps(&tests, &mut nodes, &mut zone_terms);
        mark_faults(&mut nodes, &members);
        fit_typical(&tests, &nodes, &mut zone_terms);

        let penalty = (calibration.len() >= MIN_CALIBRATION_PATHS).then(|| LossPenalty {
            paths: calibration.len(),
            factor: median(&mut calibration).unwrap_or(1.0),
        });
        Self {
            fitted_at: Some(now),
            nodes,
            zones: pairs
                .into_iter()
                .zip(zone_terms)
                .filter(|(_, t)| t.measured_paths > 0 || t.throughput_paths > 0)
                .collect(),
            penalty,
            rounds,
        }
    }

    /// Rounds the RTT fit took (at most [`MAX_ITERATIONS`]).
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// When it was fitted (`None`: never, an empty model).
    pub fn fitted_at(&self) -> Option<UnixMs> {
        self.fitted_at
    }

    /// A node's terms, if the fit knew the node.
    pub fn node(&self, id: NodeId) -> Option<&NodeTerms> {
        self.nodes.get(id.0 as usize)
    }

    /// Every node's terms, by node id.
    pub fn nodes(&self) -> &[NodeTerms] {
        &self.nodes
    }

    /// The terms of the zone pair `a`–`b` (either order), if any path between them is measured.
    pub fn zone_pair(&self, a: ZoneId, b: ZoneId) -> Option<&ZoneTerms> {
        self.zones.get(&key(a, b))
    }

    /// Whether node `id` has a fault of its own that the zone terms leave out: its own loss (out or
    /// in) of at least [`FAULT_LOSS`], an RTT offset of at least [`FAULT_RTT_US`], or an egress or
    /// ingress cap below [`FAULT_RATE_SHARE`] of its zone's median.
    pub fn has_own_fault(&self, id: NodeId) -> bool {
        self.node(id).is_some_and(|t| t.own_fault)
    }

    /// The loss penalty's calibration, when enough lossy paths had a throughput figure.
    pub fn loss_penalty(&self) -> Option<LossPenalty> {
        self.penalty
    }

    /// The estimated RTT and loss of the directed path `src → dst` (in zones `zs`, `zd`), or
    /// `None` when the zone pair has no RTT terms.
    pub fn latency(
        &self,
        src: NodeId,
        zs: ZoneId,
        dst: NodeId,
        zd: ZoneId,
    ) -> Option<LatencyEstimate> {
        let zone = self.zone_pair(zs, zd)?;
        let base = zone.rtt_us?;
        let (a, b) = (
            self.node(src).copied().unwrap_or_default(),
            self.node(dst).copied().unwrap_or_default(),
        );
        let rtt = (base + a.rtt_offset_us + b.rtt_offset_us).max(0.0);
        let loss = 1.0 - (1.0 - a.loss_out) * (1.0 - zone.loss) * (1.0 - b.loss_in);
        Some(LatencyEstimate {
            rtt_us: rtt,
            rtt_p90_us: rtt + zone.tail_p90_us,
            rtt_p99_us: rtt + zone.tail_p99_us,
            loss: loss.clamp(0.0, 1.0),
            oldest: zone.oldest,
        })
    }

    /// The model's rate of the directed path `src → dst` with RTT `rtt_us` and loss `loss` (its
    /// measured figures or the estimate's): the lowest of the known caps, zone capacity and loss
    /// penalty; the zone pair's typical rate when none is known; `None` without either.
    pub fn rate_bps(
        &self,
        src: NodeId,
        zs: ZoneId,
        dst: NodeId,
        zd: ZoneId,
        rtt_us: Option<f64>,
        loss: Option<f64>,
    ) -> Option<f64> {
        let penalty = self
            .penalty
            .zip(rtt_us.zip(loss))
            .and_then(|(p, (rtt, loss))| p.rate_bps(rtt, loss));
        [
            self.node(src).and_then(|t| t.egress_bps),
            self.node(dst).and_then(|t| t.ingress_bps),
            self.zone_pair(zs, zd).and_then(|z| z.capacity_bps),
            penalty,
        ]
        .into_iter()
        .flatten()
        .reduce(f64::min)
        .or_else(|| self.zone_pair(zs, zd).and_then(|z| z.typical_bps))
    }
}

/// Marks the nodes with a fault of their own: loss of at least [`FAULT_LOSS`], an RTT offset of
/// at least [`FAULT_RTT_US`], or a cap below [`FAULT_RATE_SHARE`] of its zone's median.
fn mark_faults(nodes: &mut [NodeTerms], members: &[Vec<usize>]) {
    let mut scratch = Vec::new();
    for zone in members {
        let mut median_cap = |cap: fn(&NodeTerms) -> Option<f64>| {
            scratch.clear();
            scratch.extend(zone.iter().filter_map(|&i| cap(&nodes[i])));
            median(&mut scratch)
        };
        let egress = median_cap(|t| t.egress_bps);
        let ingress = median_cap(|t| t.ingress_bps);
        let below = |cap: Option<f64>, median: Option<f64>| {
            cap.zip(median)
                .is_some_and(|(c, m)| c < FAULT_RATE_SHARE * m)
        };
        for &i in zone {
            let t = &mut nodes[i];
            t.own_fault = t.loss_out >= FAULT_LOSS
                || t.loss_in >= FAULT_LOSS
                || t.rtt_offset_us >= FAULT_RTT_US
                || below(t.egress_bps, egress)
                || below(t.ingress_bps, ingress);
        }
    }
}

/// Each zone pair's typical rate: the median of its tests between nodes without a fault of their
/// own (of all its tests when every one has such a node).
fn fit_typical(tests: &[Test], nodes: &[NodeTerms], zones: &mut [ZoneTerms]) {
    let mut clean: Vec<Vec<f64>> = vec![Vec::new(); zones.len()];
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); zones.len()];
    for t in tests {
        all[t.pair].push(t.bps);
        if !nodes[t.src].own_fault && !nodes[t.dst].own_fault {
            clean[t.pair].push(t.bps);
        }
    }
    for ((z, mut clean), mut all) in zones.iter_mut().zip(clean).zip(all) {
        z.typical_bps = median(&mut clean).or_else(|| median(&mut all));
    }
}

/// Node caps and zone capacities from the throughput tests (see the module docs).
fn fit_caps(tests: &[Test], nodes: &mut [NodeTerms], zones: &mut [ZoneTerms]) {
    let n = nodes.len();
    let mut out_top = vec![Top2::default(); n];
    let mut in_top = vec![Top2::default(); n];
    for t in tests {
        out_top[t.src].push(t.bps, t.dst);
        in_top[t.dst].push(t.bps, t.src);
        zones[t.pair].throughput_paths += 1;
    }
    let explained = |others: Option<f64>, bps: f64| others.is_some_and(|o| o <= bps * EXPLAINED);
    for t in tests {
        // Counts for the sender's egress unless the receiver is known slow at this figure while
        // the sender is not (never tested elsewhere, or faster elsewhere).
        let by_receiver = explained(in_top[t.dst].without(t.src), t.bps);
        let sender_slow = explained(out_top[t.src].without(t.dst), t.bps);
        if !by_receiver || sender_slow {
            let e = &mut nodes[t.src].egress_bps;
            *e = Some(e.map_or(t.bps, |v| v.max(t.bps)));
        }
        let by_sender = explained(out_top[t.src].without(t.dst), t.bps);
        let receiver_slow = explained(in_top[t.dst].without(t.src), t.bps);
        if !by_sender || receiver_slow {
            let i = &mut nodes[t.dst].ingress_bps;
            *i = Some(i.map_or(t.bps, |v| v.max(t.bps)));
        }
    }
    for t in tests {
        let at_most = |cap: Option<f64>| cap.is_some_and(|c| c <= t.bps * EXPLAINED);
        if at_most(nodes[t.src].egress_bps) || at_most(nodes[t.dst].ingress_bps) {
            continue;
        }
        let c = &mut zones[t.pair].capacity_bps;
        *c = Some(c.map_or(t.bps, |v| v.max(t.bps)));
    }
}

impl Snapshot {
    /// The model fitted by the writer (see [`crate::model`]); empty until the first fit.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// What node `id` can send, bit/s, as the model has it (its egress cap), if known.
    pub fn egress_cap_bps(&self, id: NodeId) -> Option<f64> {
        self.model.node(id).and_then(|t| t.egress_bps)
    }

    /// What node `id` can receive, bit/s, as the model has it (its ingress cap), if known.
    pub fn ingress_cap_bps(&self, id: NodeId) -> Option<f64> {
        self.model.node(id).and_then(|t| t.ingress_bps)
    }

    /// The capacity between zones `a` and `b` (either order; inside one zone when equal),
    /// bit/s, when a throughput test between them shows one the nodes do not explain.
    pub fn zone_capacity_bps(&self, a: ZoneId, b: ZoneId) -> Option<f64> {
        self.model.zone_pair(a, b).and_then(|z| z.capacity_bps)
    }

    /// The model's rate of the directed path `src → dst`, given its RTT and loss (measured or
    /// estimated; see [`Model::rate_bps`]).
    pub fn estimated_rate_bps(
        &self,
        src: NodeId,
        dst: NodeId,
        rtt_us: Option<f64>,
        loss: Option<f64>,
    ) -> Option<f64> {
        self.model
            .rate_bps(src, self.zone_of(src), dst, self.zone_of(dst), rtt_us, loss)
    }
}

/// One directed path's figures as recorded elsewhere (the lab's accuracy run), to fit the model
/// on: see [`topology_of`].
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredPath {
    /// Source node.
    pub src: NodeName,
    /// Its zone.
    pub src_zone: ZoneName,
    /// Destination node.
    pub dst: NodeName,
    /// Its zone.
    pub dst_zone: ZoneName,
    /// Median RTT, µs.
    pub rtt_p50_us: f64,
    /// Probes sent.
    pub sent: u64,
    /// Replies received.
    pub received: u64,
    /// Goodput of its latest throughput test, bit/s, if it had one.
    pub throughput_bps: Option<f64>,
}

/// A topology holding `paths` as one window each, measured at `now` and swept (so its model is
/// fitted): to measure the model's error ([`holdout`]) on figures recorded elsewhere.
pub fn topology_of(paths: &[MeasuredPath], now: UnixMs) -> Result<Topology, Error> {
    let mut t = Topology::new(EngineConfig::default());
    for p in paths {
        for (node, zone) in [(&p.src, &p.src_zone), (&p.dst, &p.dst_zone)] {
            if t.id(node).is_none() {
                t.register(
                    &Hello {
                        node: node.clone(),
                        zone: zone.clone(),
                        region: None,
                        addresses: vec![IpAddr::from([127, 0, 0, 1])],
                        agent_version: "recorded".into(),
                        icmp_mode: IcmpMode::Raw,
                        probe_port: 0,
                    },
                    now,
                );
            }
        }
    }
    let mut by_src: std::collections::BTreeMap<&NodeName, Vec<PathSample>> = Default::default();
    for p in paths {
        let us = Micros::parse("rtt_p50_us", p.rtt_p50_us)?;
        let rtt = Rtt {
            samples: p.received,
            min: us,
            p50: us,
            p90: us,
            p99: us,
            max: us,
            mean: us,
            jitter: Micros::ZERO,
        };
        by_src.entry(&p.src).or_default().push(PathSample {
            src: p.src.clone(),
            dst: p.dst.clone(),
            window_start: UnixMs(now.0 - 10_000),
            window_end: now,
            sent: p.sent,
            received: p.received.min(p.sent),
            rtt: (p.received > 0).then_some(rtt),
            throughput: p
                .throughput_bps
                .filter(|bps| *bps > 0.0)
                .map(|bps| {
                    let bytes = (bps / 8.0).round() as u64;
                    ThroughputSample::new(
                        Bps::parse("throughput_bps", bps)?,
                        bytes,
                        1_000_000,
                        0,
                        1,
                    )
                })
                .transpose()?,
            method: Some(IcmpMode::Raw),
        });
    }
    for (src, samples) in by_src {
        let id = t.id(src).expect("registered above");
        t.apply_report(
            id,
            &Report {
                sequence: 1,
                paths: samples,
            },
            now,
        )?;
    }
    t.sweep(now);
    Ok(t)
}

/// The model's error on measured paths it did not see (see [`holdout`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HoldoutError {
    /// Directed paths predicted.
    pub paths: usize,
    /// Relative RTT errors `|predicted − measured| / measured`, sorted.
    pub rtt_relative: Vec<f64>,
    /// Absolute loss errors `|predicted − measured|`, sorted.
    pub loss_absolute: Vec<f64>,
    /// Held-out paths whose zone pair kept no terms (not predicted).
    pub unpredicted: usize,
    /// The same errors of the estimate zonemesh made before the model: the mean of the other
    /// measured paths between the two zones (the zone roll-up), sorted.
    pub roll_up_rtt_relative: Vec<f64>,
    /// Absolute loss errors of the roll-up mean, sorted.
    pub roll_up_loss_absolute: Vec<f64>,
    /// Relative rate errors `|predicted − measured| / measured` of the held-out paths with a
    /// fresh throughput test: the model's rate ([`Model::rate_bps`]: node caps, zone capacity,
    /// loss penalty) at the path's estimated RTT and loss, against the test's goodput. Sorted.
    pub rate_relative: Vec<f64>,
    /// Held-out paths with a throughput test the model gave no rate for.
    pub rate_unpredicted: usize,
    /// Every rate compared (in the order predicted): which path, the model's rate and the
    /// test's, so that a large error can be traced to its path.
    pub rates: Vec<RateCheck>,
}

/// One held-out path's rate: the model's prediction beside its own throughput test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateCheck {
    /// The path's source.
    pub src: NodeId,
    /// The path's destination.
    pub dst: NodeId,
    /// The model's rate, bit/s.
    pub predicted_bps: f64,
    /// The test's goodput, bit/s.
    pub measured_bps: f64,
    /// The estimated loss the rate was computed at.
    pub loss: f64,
}

impl HoldoutError {
    /// The `q` quantile (0..=1, nearest rank) of sorted errors; 0 when there are none.
    pub fn quantile(sorted: &[f64], q: f64) -> f64 {
        if sorted.is_empty() {
            return 0.0;
        }
        let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted[i]
    }

    /// One line: paths, median and p90 relative RTT error, median and p90 absolute loss error,
    /// the model's and the roll-up mean's; the rate error of the paths with a throughput test.
    pub fn summary(&self) -> String {
        let q = |v: &[f64], p: f64| 100.0 * Self::quantile(v, p);
        let rate = if self.rate_relative.is_empty() {
            format!(
                "no held-out path had a throughput test ({} without a rate)",
                self.rate_unpredicted
            )
        } else {
            format!(
                "rate error on {} tested paths ({} without a rate) median {:.1} %, p90 {:.1} %",
                self.rate_relative.len(),
                self.rate_unpredicted,
                q(&self.rate_relative, 0.5),
                q(&self.rate_relative, 0.9),
            )
        };
        format!(
            "{} held-out inter-zone paths ({} unpredicted): RTT error median {:.2} %, p90 {:.2} %; \
             loss error median {:.3} pp, p90 {:.3} pp (zone roll-up mean: RTT {:.2} %, {:.2} %; \
             loss {:.3} pp, {:.3} pp); {rate}",
            self.paths,
            self.unpredicted,
            q(&self.rtt_relative, 0.5),
            q(&self.rtt_relative, 0.9),
            q(&self.loss_absolute, 0.5),
            q(&self.loss_absolute, 0.9),
            q(&self.roll_up_rtt_relative, 0.5),
            q(&self.roll_up_rtt_relative, 0.9),
            q(&self.roll_up_loss_absolute, 0.5),
            q(&self.roll_up_loss_absolute, 0.9),
        )
    }
}

/// Measures the model's error on measured inter-zone paths: the node pairs measured between each
/// two zones are split in two halves (alternately, by node names); the model is fitted without
/// each half and predicts it. Zone pairs with one measured node pair are left out (holding it out
/// would leave the zone pair without terms). Two fits in all.
pub fn holdout(snapshot: &Snapshot, now: UnixMs) -> HoldoutError {
    let config = &snapshot.config().path;
    // Measured inter-zone node pairs (unordered) by zone pair.
    let mut by_zones: HashMap<(ZoneId, ZoneId), Vec<(NodeId, NodeId)>> = HashMap::new();
    for ((src, dst), path) in snapshot.paths() {
        let (zs, zd) = (snapshot.zone_of(src), snapshot.zone_of(dst));
        if zs == zd || path.is_stale(now, config) || path.merged.loss().is_none() {
            continue;
        }
        let pair = if src < dst { (src, dst) } else { (dst, src) };
        by_zones.entry(key(zs, zd)).or_default().push(pair);
    }
    let mut fold: PairMap<(NodeId, NodeId), usize> = PairMap::default();
    for pairs in by_zones.values_mut() {
        pairs.sort_by(|a, b| {
            let names = |p: &(NodeId, NodeId)| (&snapshot.node(p.0).name, &snapshot.node(p.1).name);
            names(a).cmp(&names(b))
        });
        pairs.dedup();
        if pairs.len() < 2 {
            continue;
        }
        for (i, p) in pairs.iter().enumerate() {
            fold.insert(*p, i % 2);
        }
    }
    let fold_of = |a: NodeId, b: NodeId| fold.get(&if a < b { (a, b) } else { (b, a) }).copied();
    let mut error = HoldoutError::default();
    for k in 0..2 {
        let model = Model::fit_without(snapshot, now, &|a, b| fold_of(a, b) == Some(k));
        // The roll-up of what the fit saw: (sum RTT, paths with RTT, sum loss, paths) by zones.
        let mut roll: HashMap<(ZoneId, ZoneId), (f64, u32, f64, u32)> = HashMap::new();
        for ((src, dst), path) in snapshot.paths() {
            let (zs, zd) = (snapshot.zone_of(src), snapshot.zone_of(dst));
            if fold_of(src, dst) == Some(k) || zs == zd || path.is_stale(now, config) {
                continue;
            }
            let Some(loss) = path.merged.loss() else {
                continue;
            };
            let r = roll.entry(key(zs, zd)).or_default();
            if let Some(rtt) = path.merged.rtt {
                r.0 += f64::from(rtt.p50);
                r.1 += 1;
            }
            r.2 += loss;
            r.3 += 1;
        }
        for ((src, dst), path) in snapshot.paths() {
            if fold_of(src, dst) != Some(k) || path.is_stale(now, config) {
                continue;
            }
            let Some(loss) = path.merged.loss() else {
                continue;
            };
            let (zs, zd) = (snapshot.zone_of(src), snapshot.zone_of(dst));
            let Some(estimate) = model.latency(src, zs, dst, zd) else {
                error.unpredicted += 1;
                continue;
            };
            error.paths += 1;
            if let Some(r) = path.merged.rtt {
                let measured = f64::from(r.p50);
                if measured > 0.0 {
                    error
                        .rtt_relative
                        .push((estimate.rtt_us - measured).abs() / measured);
                }
            }
            error.loss_absolute.push((estimate.loss - loss).abs());
            if let Some(test) = path.fresh_throughput(now, config)
                && test.latest_bps > 0.0
            {
                let rate =
                    model.rate_bps(src, zs, dst, zd, Some(estimate.rtt_us), Some(estimate.loss));
                match rate {
                    Some(bps) => {
                        error
                            .rate_relative
                            .push((bps - test.latest_bps).abs() / test.latest_bps);
                        error.rates.push(RateCheck {
                            src,
                            dst,
                            predicted_bps: bps,
                            measured_bps: test.latest_bps,
                            loss: estimate.loss,
                        });
                    }
                    None => error.rate_unpredicted += 1,
                }
            }
            if let Some(&(rtt_sum, rtt_n, loss_sum, loss_n)) = roll.get(&key(zs, zd)) {
                if let Some(r) = path.merged.rtt
                    && rtt_n > 0
                    && r.p50 > 0.0
                {
                    let measured = f64::from(r.p50);
                    let mean = rtt_sum / f64::from(rtt_n);
                    error
                        .roll_up_rtt_relative
                        .push((mean - measured).abs() / measured);
                }
                if loss_n > 0 {
                    let mean = loss_sum / f64::from(loss_n);
                    error.roll_up_loss_absolute.push((mean - loss).abs());
                }
            }
        }
    }
    error.roll_up_rtt_relative.sort_by(f64::total_cmp);
    error.roll_up_loss_absolute.sort_by(f64::total_cmp);
    error.rtt_relative.sort_by(f64::total_cmp);
    error.loss_absolute.sort_by(f64::total_cmp);
    error.rate_relative.sort_by(f64::total_cmp);
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn zone(n: &str) -> u8 {
        n.as_bytes()[1]
    }

    #[test]
    fn medians_of_odd_even_and_empty_lists() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(lower_median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(
            lower_median(&mut [0.05, 0.0]),
            Some(0.0),
            "half is not most"
        );
    }

    #[test]
    fn offsets_and_bases_come_apart() {
        let now = UnixMs(1_000_000);
        // Three zones of four; bases 80 µs inside, 1, 3 and 7 ms between; every node its own
        // offset (n0 +0, n1 +40, n2 +120, n3 +400 µs).
        let off = |n: &str| [0.0, 40.0, 120.0, 400.0][usize::from(n.as_bytes()[4] - b'0')];
        let base = |a: u8, b: u8| match (a.min(b), a.max(b)) {
            (x, y) if x == y => 80.0,
            (b'0', b'1') => 1_000.0,
            (b'0', b'2') => 3_000.0,
            _ => 7_000.0,
        };
        let t = mesh(
            3,
            4,
            |s, d| base(zone(s), zone(d)) + off(s) + off(d),
            |_, _| 0,
            now,
        );
        let snap = t.view();
        let model = snap.model();
        assert_eq!(model.fitted_at(), Some(now));
        // The median node of each zone is between n1 and n2: offsets relative to 80 µs.
        let mid = (40.0 + 120.0) / 2.0;
        for (id, info) in snap.nodes() {
            let terms = model.node(id).unwrap();
            let want = off(info.name.as_str()) - mid;
            assert!(
                (terms.rtt_offset_us - want).abs() < 1.0,
                "{}: {} want {want}",
                info.name,
                terms.rtt_offset_us
            );
            assert_eq!((terms.loss_out, terms.loss_in), (0.0, 0.0));
        }
        let z: Vec<ZoneId> = snap
            .zones()
            .filter(|(_, info)| !info.members.is_empty())
            .map(|(z, _)| z)
            .collect();
        let rtt = |a: usize, b: usize| model.zone_pair(z[a], z[b]).unwrap().rtt_us.unwrap();
        assert!(
            (rtt(0, 0) - (80.0 + 2.0 * mid)).abs() < 1.0,
            "{}",
            rtt(0, 0)
        );
        assert!((rtt(0, 1) - (1_000.0 + 2.0 * mid)).abs() < 1.0);
        assert!((rtt(2, 1) - (7_000.0 + 2.0 * mid)).abs() < 1.0);
        // Every path is predicted within a microsecond.
        for ((s, d), p) in snap.paths() {
            let e = model
                .latency(s, snap.zone_of(s), d, snap.zone_of(d))
                .unwrap();
            let measured = f64::from(p.merged.rtt.unwrap().p50);
            assert!((e.rtt_us - measured).abs() < 1.0, "{e:?} {measured}");
        }
    }

    #[test]
    fn a_lossy_node_keeps_its_loss_and_its_zone_stays_clean() {
        let now = UnixMs(1_000_000);
        // Three zones of three (the lab's demo shape): z0-n1 loses 5 % of what reaches it.
        let lossy = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
        let t = mesh(
            3,
            3,
            |s, d| if zone(s) == zone(d) { 50.0 } else { 2_000.0 },
            |s, d| if lossy(s, d) { 5 } else { 0 },
            now,
        );
        let snap = t.view();
        let model = snap.model();
        for (id, info) in snap.nodes() {
            let terms = model.node(id).unwrap();
            if info.name == "z0-n1" {
                assert!((terms.loss_out - 0.05).abs() < 1e-9, "{terms:?}");
                assert!((terms.loss_in - 0.05).abs() < 1e-9, "{terms:?}");
            } else {
                assert_eq!((terms.loss_out, terms.loss_in), (0.0, 0.0), "{}", info.name);
            }
        }
        for ((za, zb), terms) in &model.zones {
            assert_eq!(terms.loss, 0.0, "{za:?}-{zb:?}");
        }
    }

    #[test]
    fn a_loss_every_node_of_a_zone_shows_is_the_zones() {
        let now = UnixMs(1_000_000);
        // Inside zone 0 every path loses 3 %; its paths to other zones lose nothing.
        let t = mesh(
            2,
            4,
            |s, d| if zone(s) == zone(d) { 50.0 } else { 2_000.0 },
            |s, d| u64::from(zone(s) == b'0' && zone(d) == b'0') * 3,
            now,
        );
        let snap = t.view();
        let model = snap.model();
        let z0 = snap.zone_of(t.id(&name("z0-n0")).unwrap());
        let z1 = snap.zone_of(t.id(&name("z1-n0")).unwrap());
        assert!((model.zone_pair(z0, z0).unwrap().loss - 0.03).abs() < 1e-9);
        assert_eq!(model.zone_pair(z0, z1).unwrap().loss, 0.0);
        assert!(
            model
                .nodes()
                .iter()
                .all(|t| t.loss_out == 0.0 && t.loss_in == 0.0)
        );
    }

    #[test]
    fn a_node_tested_only_against_a_slow_node_is_not_slow() {
        let now = UnixMs(1_000_000);
        // z0-n2 runs at 100 Mbit/s; zone 0 ↔ zone 1 at 400 Mbit/s; everything else at 1 Gbit/s.
        let t = mesh_with_throughput(
            2,
            3,
            |_, _| 100.0,
            |_, _| 0,
            |s, d| {
                if s == "z0-n2" || d == "z0-n2" {
                    100e6
                } else if zone(s) != zone(d) {
                    400e6
                } else {
                    1e9
                }
            },
            now,
        );
        let snap = t.view();
        let id = |n: &str| t.id(&name(n)).unwrap();
        assert_eq!(snap.egress_cap_bps(id("z0-n2")), Some(100e6));
        assert_eq!(snap.ingress_cap_bps(id("z0-n2")), Some(100e6));
        assert_eq!(snap.egress_cap_bps(id("z0-n0")), Some(1e9));
        assert_eq!(snap.ingress_cap_bps(id("z1-n1")), Some(1e9));
        let (z0, z1) = (snap.zone_of(id("z0-n0")), snap.zone_of(id("z1-n0")));
        assert_eq!(snap.zone_capacity_bps(z0, z1), Some(400e6));
        assert_eq!(snap.zone_capacity_bps(z0, z0), None, "the nodes explain it");
        assert_eq!(
            snap.estimated_rate_bps(id("z0-n0"), id("z1-n1"), Some(100.0), Some(0.0)),
            Some(400e6)
        );
        assert_eq!(
            snap.estimated_rate_bps(id("z1-n1"), id("z0-n2"), Some(100.0), Some(0.0)),
            Some(100e6)
        );
    }

    #[test]
    fn the_loss_penalty_is_calibrated_on_measured_lossy_paths() {
        let now = UnixMs(1_000_000);
        // z0-n1 loses 2 % and still reaches 900 Mbit/s at 10 ms: 90× Mathis's 10 Mbit/s.
        let lossy = |s: &str, d: &str| s == "z0-n1" || d == "z0-n1";
        let t = mesh_with_throughput(
            1,
            4,
            |_, _| 10_000.0,
            |s, d| if lossy(s, d) { 2 } else { 0 },
            |s, d| if lossy(s, d) { 900e6 } else { 1e9 },
            now,
        );
        let penalty = t.view().model().loss_penalty().unwrap();
        assert_eq!(penalty.paths, 6);
        let mathis = mathis_bps(10_000.0, 0.02).unwrap();
        assert!((mathis - 10.03e6).abs() < 0.01e6, "{mathis}");
        assert!((penalty.factor - 900e6 / mathis).abs() < 1e-6);
        assert!((penalty.rate_bps(10_000.0, 0.02).unwrap() - 900e6).abs() < 1.0);
        assert!(
            penalty.rate_bps(10_000.0, 0.08).unwrap() < 500e6,
            "4× the loss, half the rate"
        );
        // Without lossy paths with a throughput figure, no penalty at all.
        let clean = mesh(1, 3, |_, _| 100.0, |_, _| 0, now);
        assert_eq!(clean.view().model().loss_penalty(), None);
    }

    /// The upper end of the lab's zero-loss interval: every path without injected loss, pooled,
    /// 0 of 2,402 probes lost, 95 % Wilson interval 0.00–0.16 % (docs/ACCURACY.md).
    const LAB_ZERO_LOSS_UPPER: f64 = 0.0016;

    #[test]
    fn held_out_inter_zone_paths_are_predicted_within_five_percent() {
        let now = UnixMs(1_000_000);
        for seed in 0..4 {
            // Eight zones of twelve, four representative pairs between two zones.
            let (t, _) = synthetic(8, 12, 4, seed, now);
            let error = holdout(t.view(), now);
            println!("seed {seed}: {}", error.summary());
            assert!(error.paths >= 28 * 4 * 2, "{}", error.paths);
            let median = HoldoutError::quantile(&error.rtt_relative, 0.5);
            assert!(median <= 0.05, "seed {seed}: {}", error.summary());
            // Every probed inter-zone path has a throughput test: the nodes' caps fitted from
            // the other paths predict it.
            assert_eq!(error.rate_relative.len(), error.paths);
            let rate = HoldoutError::quantile(&error.rate_relative, 0.5);
            assert!(rate <= 0.05, "seed {seed}: {}", error.summary());
        }
    }

    #[test]
    fn held_out_rates_come_from_the_nodes_caps_and_the_zone_pairs_capacity() {
        let now = UnixMs(1_000_000);
        // z1-n2 runs at 100 Mbit/s; zone 0 ↔ zone 2 carries 400 Mbit/s; the rest 1 Gbit/s.
        let cap = |n: &str| -> f64 { if n == "z1-n2" { 100e6 } else { 1e9 } };
        let t = mesh_with_throughput(
            3,
            4,
            |s, d| if zone(s) == zone(d) { 50.0 } else { 2_000.0 },
            |_, _| 0,
            |s, d| {
                let zones = [zone(s), zone(d)];
                let across = if zones.contains(&b'0') && zones.contains(&b'2') {
                    400e6
                } else {
                    f64::INFINITY
                };
                cap(s).min(cap(d)).min(across)
            },
            now,
        );
        let error = holdout(t.view(), now);
        println!("{}", error.summary());
        // Three zone pairs of 16 node pairs each, both directions, all tested.
        assert_eq!(error.rate_relative.len(), 3 * 16 * 2, "{}", error.summary());
        assert_eq!(error.rate_unpredicted, 0);
        let worst = HoldoutError::quantile(&error.rate_relative, 1.0);
        assert!(worst < 1e-9, "{}", error.summary());
    }

    #[test]
    fn a_model_fitted_elsewhere_is_installed_unless_a_later_fit_is_in_place() {
        let now = UnixMs(1_000_000);
        let mut t = mesh(2, 3, |_, _| 100.0, |_, _| 0, now);
        assert_eq!(
            t.view().model().fitted_at(),
            Some(now),
            "fitted by the sweep"
        );
        t.fit_models_elsewhere();
        let later = UnixMs(now.0 + 60_000);
        t.sweep(later);
        assert_eq!(
            t.view().model().fitted_at(),
            Some(now),
            "the sweep leaves it"
        );
        assert!(t.model_due(later));
        let fitted = std::sync::Arc::new(Model::fit(&t.snapshot(), later));
        assert!(t.install_model(fitted.clone()));
        assert_eq!(t.view().model().fitted_at(), Some(later));
        let older = std::sync::Arc::new(Model::fit(&t.snapshot(), now));
        assert!(
            !t.install_model(older),
            "an older fit never replaces a newer one"
        );
        assert_eq!(t.view().model().fitted_at(), Some(later));
    }

    #[test]
    fn a_lossy_node_never_lifts_another_nodes_estimated_loss() {
        let now = UnixMs(1_000_000);
        let mut lossy_seen = 0;
        let mut clean_estimates = 0;
        for seed in 0..12 {
            let (t, truth) = synthetic(4, 10, 2, seed, now);
            let snap = t.view();
            let lossy: Vec<NodeId> = truth
                .lossy
                .iter()
                .map(|(n, _)| t.id(&name(n)).unwrap())
                .collect();
            lossy_seen += lossy.len();
            for (a, _) in snap.nodes() {
                for (b, _) in snap.nodes() {
                    if a >= b || snap.path(a, b).is_some() || snap.path(b, a).is_some() {
                        continue;
                    }
                    let pair = snap.pair(a, b, now);
                    assert_eq!(pair.latency, zonemesh_domain::Provenance::Estimated);
                    let loss = pair.loss.unwrap();
                    let (na, nb) = (&snap.node(a).name, &snap.node(b).name);
                    if lossy.contains(&a) || lossy.contains(&b) {
                        assert!(loss >= 0.01, "seed {seed}: {na}–{nb} lost its node's fault");
                    } else {
                        clean_estimates += 1;
                        assert!(
                            loss <= LAB_ZERO_LOSS_UPPER,
                            "seed {seed}: {na}–{nb} estimated at {loss} ({:?} lossy)",
                            truth.lossy
                        );
                    }
                    let figures = snap.path_figures(a, b, now);
                    assert_eq!(figures.loss_ratio, {
                        let z = (snap.zone_of(a), snap.zone_of(b));
                        snap.model().latency(a, z.0, b, z.1).unwrap().loss
                    });
                }
            }
        }
        assert!(lossy_seen >= 3, "the seeds hold {lossy_seen} lossy nodes");
        assert!(clean_estimates > 1_000, "{clean_estimates}");
    }

    /// Every path the lab's accuracy run measured (docs/ACCURACY.md's table: the demo cluster,
    /// zones a, b, c of three nodes, two node pairs probed between two zones, a2 losing 5 %).
    fn lab_paths() -> Vec<MeasuredPath> {
        let doc = include_str!("../../docs/ACCURACY.md");
        let node = |s: &str| NodeName::parse("node", s).unwrap();
        let zone = |s: &str| ZoneName::parse("zone", format!("zone-{}", &s[..1])).unwrap();
        doc.lines()
            .skip_while(|l| !l.starts_with("## RTT and loss"))
            // The RTT table ends where the model's section (with its table of held-out rates) begins.
            .take_while(|l| !l.starts_with("## The model of paths"))
            .filter(|l| l.starts_with("| ") && l.contains(" → "))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let (src, dst) = cells[1].split_once(" → ").unwrap();
                let us: f64 = cells[3].trim_end_matches(" µs").parse().unwrap();
                // "8.00 % (150)": the loss and the probes sent.
                let (loss, sent) = cells[7].split_once(" % (").unwrap();
                let sent: u64 = sent.trim_end_matches(')').parse().unwrap();
                let lost = (loss.parse::<f64>().unwrap() / 100.0 * sent as f64).round() as u64;
                MeasuredPath {
                    src: node(src),
                    src_zone: zone(src),
                    dst: node(dst),
                    dst_zone: zone(dst),
                    rtt_p50_us: us,
                    sent,
                    received: sent - lost,
                    throughput_bps: None,
                }
            })
            .collect()
    }

    #[test]
    fn on_the_labs_measured_paths_the_model_predicts_the_held_out_ones() {
        let now = UnixMs(1_000_000);
        let paths = lab_paths();
        assert_eq!(paths.len(), 30, "the table of docs/ACCURACY.md");
        let t = topology_of(&paths, now).unwrap();
        let error = holdout(t.view(), now);
        println!("lab, 2026-12-04: {}", error.summary());
        assert_eq!(
            error.paths, 12,
            "two node pairs a zone pair, both directions, three zone pairs"
        );
        let median = HoldoutError::quantile(&error.rtt_relative, 0.5);
        assert!(median <= 0.05, "{}", error.summary());
        // a2's 5 % stays on a2: no pair between other nodes is estimated lossy.
        let snap = t.view();
        let a2 = t.id(&name("a2")).unwrap();
        let mut estimated = 0;
        for (a, _) in snap.nodes() {
            for (b, _) in snap.nodes() {
                if a >= b || snap.path(a, b).is_some() || snap.path(b, a).is_some() {
                    continue;
                }
                estimated += 1;
                let loss = snap.pair(a, b, now).loss.unwrap();
                if a == a2 || b == a2 {
                    assert!(loss >= 0.03, "{loss}");
                } else {
                    assert!(
                        loss <= LAB_ZERO_LOSS_UPPER,
                        "{}–{}: {loss}",
                        snap.node(a).name,
                        snap.node(b).name
                    );
                }
            }
        }
        assert_eq!(
            estimated,
            36 - 9 - 6,
            "every pair but the 9 inside zones and 6 between"
        );
    }
}
