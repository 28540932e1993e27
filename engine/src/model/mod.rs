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
//!   tested elsewhere): a node tested only against a slow node is not slow. Only its tests of the
//!   last pair interval before its newest count, so a link that got slower shows within a cycle.
//!   A zone pair's capacity is the most a test between the zones achieved that neither end's cap
//!   explains; unknown when every test is explained by its nodes (the zones' link did not limit
//!   anything seen). It too counts only the pair's tests of the last pair interval before its
//!   newest, and none that a newer test between the zones beat (the link carried more since: a
//!   node's slow test from before its cap was lifted is not the link's).
//! - **Loss penalty** on the rate: Mathis's limit `MSS / RTT · √(3/2) / √ℓ` scaled by a factor
//!   calibrated on the measured lossy paths whose throughput test loss held back (the median of
//!   measured rate over Mathis's, over the tests their ends' caps do not explain; a lossy path's
//!   test never sets a zone pair's capacity). Mathis alone overpredicted the cost of 2 % loss up
//!   to 27× on the lab's paths (docs/EVALUATION.md, seed 3), and a factor taken from tests a
//!   1 Gbit/s link held back (20 µs inside a zone) predicted a few Mbit/s at a few milliseconds
//!   where TCP reached 900. So a test calibrates only where Mathis's limit at its RTT and loss is
//!   below its ends' caps: where it is above them, the caps bind first, even when the test ran
//!   somewhat below them. With fewer than [`MIN_CALIBRATION_PATHS`] such paths the penalty is
//!   unknown and the rate is the caps alone (a lossy node's own tests already carry its loss
//!   into its caps).
//! - **Tail repair**: what a lost last segment of a message costs, `T` of
//!   [`collective`](crate::collective). Each throughput test times 64 exchanges of a small
//!   message; one that met a loss waits for a timeout, so a path's exchanges take longer on
//!   average (mean over median) the more it loses: `excess ≈ e₀ + ℓ · T`, with `e₀` what the
//!   hosts' scheduling adds on a clean path. Over every fresh test with timed exchanges (`T` is
//!   the hosts' TCP stacks' timeout, the same on every path), `T = Σ (excess − e₀) / Σ ℓ` over
//!   the tests of lossy paths (at least [`CALIBRATION_MIN_LOSS`]), `e₀` the median excess of the
//!   others, once at least [`MIN_CALIBRATION_PATHS`] lossy paths timed exchanges and expect
//!   enough losses (below). One path's own tests rarely say it: at 1 % loss, one test in two of
//!   its 64 exchanges meets no loss at all. Nor do a few paths' together: until the lossy tests
//!   expect [`MIN_EXPECTED_LOST_EXCHANGES`] lost exchanges (`64 · Σ ℓ`), `T` is the median,
//!   over the nodes that sent a fresh test, of the retransmission timeout their tests'
//!   connections read after the exchanges (Linux `TCP_INFO` `tcpi_rto`,
//!   [`NodeInfo::exchange_timeout_us`](crate::NodeInfo)): what a lost message with nothing
//!   behind it waits for, as each host's kernel has it. The same when a single lossy test would
//!   be the whole fit. Agents that read no timeout leave the exchanges' fit as it was. (Fitted
//!   over the few lossy tests of a node losing 1 % that had run when the (f) CI lab placed (4–7
//!   in the runs logged), `T` went from run to run between 424 ms and, by `Place`'s own
//!   prediction, about a round trip; priced so, the gray node was chosen in one run in two,
//!   4.5× slower than the best.) The timeout is one figure for every link, as the exchanges'
//!   fit is: a timeout read on a long path carries that path's round trip.
//!   (A least-squares slope of the excess over the loss was tried first: on the lab's (f)
//!   results, the probes' loss figures for one node's 1 % spread from 1 to 2.5 %, and the slope
//!   came out negative on one seed of three.)
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

use zonemesh_domain::UnixMs;
use zonemesh_domain::stats::{lower_median, median};

use crate::collective::MSS_BYTES;
use crate::{NodeId, PairMap, Snapshot, ZoneId};

pub mod holdout;
#[cfg(test)]
mod tests;

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

/// Lost exchanges the lossy paths' tests must together expect (their loss times
/// [`EXCHANGES_PER_TEST`], summed) before their exchanges price the tail repair rather than the
/// connections' retransmission timeout: with 8 expected, all of them meeting no loss has a
/// chance of e⁻⁸ (0.03 %), and the count that prices the repair is known to about a third.
pub const MIN_EXPECTED_LOST_EXCHANGES: f64 = 8.0;

/// Exchanges a throughput test times (the agent's `EXCHANGES`). A test on a long path times fewer
/// (they end at half the warm-up), so on such paths this overcounts the losses expected.
pub const EXCHANGES_PER_TEST: f64 = 64.0;

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
    /// The tests [`ZoneTerms::capacity_bps`] was taken over.
    pub capacity_tests: CapacityTests,
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

/// The tests a zone pair's capacity was taken over (those of its last interval that neither
/// end's cap explains, no newer test beat and loss did not hold back): how many, and whether one
/// node touches them all (then they are that node's, not the zones' link's).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CapacityTests {
    /// How many.
    pub count: u32,
    /// The nodes (ids) that every one of them touches.
    common: [Option<u32>; 2],
}

impl CapacityTests {
    fn add(&mut self, src: usize, dst: usize) {
        let ends = [src as u32, dst as u32];
        if self.count == 0 {
            self.common = ends.map(Some);
        } else {
            for c in &mut self.common {
                if c.is_some_and(|n| !ends.contains(&n)) {
                    *c = None;
                }
            }
        }
        self.count += 1;
    }

    /// Whether one node touches every test (true of a single test).
    pub fn one_node(&self) -> bool {
        self.count > 0 && self.common.iter().any(Option::is_some)
    }
}

/// What repairing a lost last segment takes, fitted from the tests' timed exchanges, or, while
/// they expected too few losses to say, the connections' retransmission timeout (see the module
/// docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailRepair {
    /// The repair, µs (at least 0: lossy paths whose exchanges took no longer than clean ones'
    /// say that a loss cost them nothing beyond a round trip).
    pub us: f64,
    /// Tests with timed exchanges behind it; when [`TailRepair::from_timeouts`], the nodes whose
    /// timeouts it is the median of.
    pub tests: usize,
    /// Tests on paths losing at least [`CALIBRATION_MIN_LOSS`] that timed exchanges.
    pub lossy_tests: usize,
    /// Whether it is the nodes' median retransmission timeout (the lossy tests expected fewer
    /// than [`MIN_EXPECTED_LOST_EXCHANGES`] lost exchanges) rather than their exchanges' excess.
    pub from_timeouts: bool,
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
    tail_repair: Option<TailRepair>,
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

/// A throughput test as the cap fit sees it, with its path's fresh RTT and loss (`NaN` and 0
/// when the path has none).
#[derive(Debug, Clone, Copy)]
struct Test {
    src: usize,
    dst: usize,
    pair: usize,
    bps: f64,
    /// When it was applied.
    at: UnixMs,
    rtt_us: f64,
    loss: f64,
    /// Mean over median of its timed exchanges, µs, where it timed them.
    exchange_excess_us: Option<f64>,
}

impl Test {
    /// Whether the path lost enough for its test to say something about loss.
    fn lossy(&self) -> bool {
        self.loss >= CALIBRATION_MIN_LOSS
    }
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
    /// them: [`holdout::holdout`]).
    pub fn fit_without(
        snapshot: &Snapshot,
        now: UnixMs,
        held_out: &dyn Fn(NodeId, NodeId) -> bool,
    ) -> Self {
        let n = snapshot.nodes().len();
        let zone_of: Vec<ZoneId> = snapshot.nodes().map(|(_, info)| info.zone).collect();
        let Inputs {
            obs,
            pairs,
            tails,
            oldest,
            tests,
        } = Inputs::gather(snapshot, now, held_out, &zone_of);
        let index = Indexes::build(&obs, &zone_of, pairs.len(), snapshot.zones().len());

        let mut nodes = vec![NodeTerms::default(); n];
        for (i, terms) in nodes.iter_mut().enumerate() {
            terms.paths = index.touching.of(i).len() as u32;
        }
        let (off, base, rounds) = fit_rtt(&obs, &index, n, pairs.len());
        let (out, inn, zz) = fit_loss(&obs, &index, n, pairs.len());
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
        let mut zone_terms = vec![ZoneTerms::default(); pairs.len()];
        for (p, terms) in zone_terms.iter_mut().enumerate() {
            terms.rtt_us = (!base[p].is_nan()).then_some(base[p].max(0.0));
            terms.loss = 1.0 - (-zz[p]).exp();
            terms.measured_paths = index.by_pair.of(p).len() as u32;
            terms.oldest = oldest[p];
            terms.tail_p90_us = median(&mut tail_lists[p].0).unwrap_or(0.0);
            terms.tail_p99_us = median(&mut tail_lists[p].1).unwrap_or(0.0);
        }

        fit_caps(
            &tests,
            snapshot.config().throughput.pair_interval_ms,
            &mut nodes,
            &mut zone_terms,
        );
        mark_faults(&mut nodes, &index.members);
        fit_typical(&tests, &nodes, &mut zone_terms);

        let mut calibration = loss_limited(&tests, &nodes);
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
            tail_repair: fit_tail_repair(&tests, tested_nodes_timeouts(snapshot, &tests, n)),
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

    /// Every zone pair with terms (the smaller id first), in no order.
    pub fn zone_pairs(&self) -> impl Iterator<Item = ((ZoneId, ZoneId), &ZoneTerms)> {
        self.zones.iter().map(|(k, t)| (*k, t))
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

    /// What repairing a lost last segment takes: fitted over the lossy paths' timed exchanges
    /// when they say enough, else the tested hosts' retransmission timeout; `None` when neither
    /// is known.
    pub fn tail_repair(&self) -> Option<TailRepair> {
        self.tail_repair
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

/// What the fit works on, gathered from the fresh measured paths.
struct Inputs {
    /// One observation per measured directed path with fresh RTT and loss.
    obs: Vec<Obs>,
    /// The zone pairs seen, by index.
    pairs: Vec<(ZoneId, ZoneId)>,
    /// (zone pair, p90 − p50, p99 − p50) per path with an RTT.
    tails: Vec<(u32, f64, f64)>,
    /// The oldest update per zone pair.
    oldest: Vec<Option<UnixMs>>,
    /// Fresh throughput tests.
    tests: Vec<Test>,
}

impl Inputs {
    /// Gathers the fresh paths of `snapshot` at `now`, leaving out those `held_out` names.
    fn gather(
        snapshot: &Snapshot,
        now: UnixMs,
        held_out: &dyn Fn(NodeId, NodeId) -> bool,
        zone_of: &[ZoneId],
    ) -> Self {
        let n = zone_of.len();
        let config = &snapshot.config().path;
        let mut pair_index: PairMap<(ZoneId, ZoneId), u32> = PairMap::default();
        let mut pairs: Vec<(ZoneId, ZoneId)> = Vec::new();
        let mut obs: Vec<Obs> = Vec::new();
        let mut tails: Vec<(u32, f64, f64)> = Vec::new();
        let mut oldest: Vec<Option<UnixMs>> = Vec::new();
        let mut tests: Vec<Test> = Vec::new();
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
            let tput = path.fresh_throughput(now, config);
            let rtt = path.merged.rtt.map_or(f64::NAN, |r| f64::from(r.p50));
            if let Some(loss) = fresh_loss {
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
                let at = path.last_update.get();
                let o = &mut oldest[pair as usize];
                *o = match (*o, at) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
            }
            if let Some(t) = tput {
                tests.push(Test {
                    src: s,
                    dst: d,
                    pair: pair as usize,
                    bps: t.latest_bps,
                    at: t.at,
                    rtt_us: rtt,
                    loss: fresh_loss.unwrap_or(0.0),
                    exchange_excess_us: fresh_loss.and(
                        path.tcp
                            .exchange_p50_us()
                            .zip(path.tcp.exchange_mean_us())
                            .map(|(p50, mean)| f64::from(mean) - f64::from(p50)),
                    ),
                });
            }
        }

        Self {
            obs,
            pairs,
            tails,
            oldest,
            tests,
        }
    }
}

/// The observations indexed by node and by zone pair, and each zone's nodes that have any.
struct Indexes {
    /// Paths touching each node.
    touching: Index,
    /// Paths from each node.
    from: Index,
    /// Paths into each node.
    into: Index,
    /// Paths of each zone pair.
    by_pair: Index,
    /// Each zone's nodes with at least one observation.
    members: Vec<Vec<usize>>,
}

impl Indexes {
    fn build(obs: &[Obs], zone_of: &[ZoneId], pairs: usize, zone_count: usize) -> Self {
        let n = zone_of.len();
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
            pairs,
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
        Self {
            touching,
            from,
            into,
            by_pair,
            members,
        }
    }
}

/// The RTT fit: zone-pair bases from the current node offsets, then the offsets (normalised per
/// zone), until the offsets move less than [`CONVERGED_US`] (at most [`MAX_ITERATIONS`] rounds);
/// then the bases once more. Returns (offsets, bases, rounds).
fn fit_rtt(obs: &[Obs], index: &Indexes, n: usize, pairs: usize) -> (Vec<f64>, Vec<f64>, usize) {
    let Indexes {
        touching,
        by_pair,
        members,
        ..
    } = index;
    let mut scratch: Vec<f64> = Vec::new();
    // RTT: bases from the current offsets, then offsets (normalised per zone), until the
    // offsets move less than CONVERGED_US; then the bases once more.
    let mut off = vec![0.0f64; n];
    let mut base = vec![0.0f64; pairs];
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
        for zone in members {
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

    (off, base, rounds)
}

/// The loss fit on `−ln(1 − ℓ)`: outgoing and incoming node terms, the per-zone normalisation,
/// then zone-pair terms, [`ITERATIONS`] times. Returns (out, in, zone pair).
fn fit_loss(
    obs: &[Obs],
    index: &Indexes,
    n: usize,
    pairs: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let Indexes {
        from,
        into,
        by_pair,
        members,
        ..
    } = index;
    let mut scratch: Vec<f64> = Vec::new();
    // Loss: outgoing and incoming node terms, the per-zone normalisation, then zone terms.
    let mut out = vec![0.0f64; n];
    let mut inn = vec![0.0f64; n];
    let mut zz = vec![0.0f64; pairs];
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
            for zone in members {
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

    (out, inn, zz)
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

/// Node caps and zone capacities from the throughput tests (see the module docs). A node's cap
/// counts only its tests of the last `recent_ms` (the pairs' test interval) before its newest
/// one in that direction: every pair is tested again within it, so a node whose link got slower
/// shows it once its pairs come round, instead of keeping a faster figure until that ages out.
fn fit_caps(tests: &[Test], recent_ms: i64, nodes: &mut [NodeTerms], zones: &mut [ZoneTerms]) {
    let n = nodes.len();
    let (mut newest_out, mut newest_in) = (vec![UnixMs(i64::MIN); n], vec![UnixMs(i64::MIN); n]);
    for t in tests {
        newest_out[t.src] = newest_out[t.src].max(t.at);
        newest_in[t.dst] = newest_in[t.dst].max(t.at);
    }
    let current_out = |t: &Test| newest_out[t.src].since(t.at) <= recent_ms;
    let current_in = |t: &Test| newest_in[t.dst].since(t.at) <= recent_ms;
    let mut out_top = vec![Top2::default(); n];
    let mut in_top = vec![Top2::default(); n];
    for t in tests {
        if current_out(t) {
            out_top[t.src].push(t.bps, t.dst);
        }
        if current_in(t) {
            in_top[t.dst].push(t.bps, t.src);
        }
        zones[t.pair].throughput_paths += 1;
    }
    let explained = |others: Option<f64>, bps: f64| others.is_some_and(|o| o <= bps * EXPLAINED);
    for t in tests {
        // Counts for the sender's egress unless the receiver is known slow at this figure while
        // the sender is not (never tested elsewhere, or faster elsewhere).
        let by_receiver = explained(in_top[t.dst].without(t.src), t.bps);
        let sender_slow = explained(out_top[t.src].without(t.dst), t.bps);
        if current_out(t) && (!by_receiver || sender_slow) {
            let e = &mut nodes[t.src].egress_bps;
            *e = Some(e.map_or(t.bps, |v| v.max(t.bps)));
        }
        let by_sender = explained(out_top[t.src].without(t.dst), t.bps);
        let receiver_slow = explained(in_top[t.dst].without(t.src), t.bps);
        if current_in(t) && (!by_sender || receiver_slow) {
            let i = &mut nodes[t.dst].ingress_bps;
            *i = Some(i.map_or(t.bps, |v| v.max(t.bps)));
        }
    }
    // A lossy path's test speaks for its loss (`loss_limited`), not for its zones' link. And as
    // for a node's cap, a zone pair counts only its tests of the last `recent_ms` before its
    // newest: a pair the plan no longer tests keeps its last figure for the throughput's
    // maximum age, and a slow node's test from before its cap was lifted, no longer explained by
    // that node's cap, held the zone link's capacity at the node's old rate (in the lab, for
    // half an hour, after a rate cap came and went).
    // Nor does a test that a newer test across the same zones beat: the link carried more
    // since. The node's cap no longer explains its last slow test from before the lift (its
    // newer tests are fast), and that test alone, within the interval, set the zones' capacity:
    // in the lab, a rate fault "inside zone-a" beside a2's cap, after a4's cap was lifted.
    let mut newest_pair = vec![UnixMs(i64::MIN); zones.len()];
    for t in tests {
        newest_pair[t.pair] = newest_pair[t.pair].max(t.at);
    }
    let beaten = beaten_by_newer(tests);
    for (t, _) in tests.iter().zip(beaten).filter(|&(t, beaten)| {
        !beaten
            && !t.lossy()
            && newest_pair[t.pair].since(t.at) <= recent_ms
            && !explained_by_caps(t, nodes)
    }) {
        let z = &mut zones[t.pair];
        z.capacity_bps = Some(z.capacity_bps.map_or(t.bps, |v| v.max(t.bps)));
        z.capacity_tests.add(t.src, t.dst);
    }
}

/// Per test, whether a newer test across the same zone pair ran faster than [`EXPLAINED`]
/// times its figure. Each pair's tests newest first, with the fastest of those strictly newer.
fn beaten_by_newer(tests: &[Test]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..tests.len()).collect();
    order.sort_unstable_by_key(|&i| (tests[i].pair, std::cmp::Reverse(tests[i].at)));
    let mut beaten = vec![false; tests.len()];
    for pair in order.chunk_by(|&a, &b| tests[a].pair == tests[b].pair) {
        let mut newer = f64::NEG_INFINITY;
        for at_once in pair.chunk_by(|&a, &b| tests[a].at == tests[b].at) {
            for &i in at_once {
                beaten[i] = newer > tests[i].bps * EXPLAINED;
            }
            for &i in at_once {
                newer = newer.max(tests[i].bps);
            }
        }
    }
    beaten
}

/// Whether a test ran at about the cap of its sender's egress or its receiver's ingress: what its
/// ends achieve elsewhere already accounts for it.
fn explained_by_caps(t: &Test, nodes: &[NodeTerms]) -> bool {
    let at_most = |cap: Option<f64>| cap.is_some_and(|c| c <= t.bps * EXPLAINED);
    at_most(nodes[t.src].egress_bps) || at_most(nodes[t.dst].ingress_bps)
}

/// Measured rate over Mathis's limit, for each lossy path whose test its ends' caps do not
/// explain and whose loss could have held it back: the paths where loss, not a link, held TCP
/// back. A lossy node's tests inside a fast zone run near its caps (a 1 Gbit/s link binds long
/// before 5 % loss at 20 µs does), and a factor taken from them says nothing about loss: carried
/// to a path of a few milliseconds it predicted a few Mbit/s where TCP reached 900
/// (docs/ACCURACY.md, "Reading the model's rate errors"). Such a test need not run at its caps
/// within [`EXPLAINED`] to be theirs: the lab's 2 % node took tests of 836 Mbit/s beside its
/// ingress cap of 936 at 20 µs, and a factor of 0.085 from them priced 6 ms paths through it at
/// 1.4 Mbit/s (a ring of 16 MiB predicted at 127 s that ran 298 ms).
fn loss_limited(tests: &[Test], nodes: &[NodeTerms]) -> Vec<f64> {
    tests
        .iter()
        .filter(|t| t.lossy() && !explained_by_caps(t, nodes))
        .filter_map(|t| {
            let mathis = mathis_bps(t.rtt_us, t.loss)?;
            loss_could_limit(t, mathis, nodes).then(|| t.bps / mathis)
        })
        .collect()
}

/// Whether loss could have held a test back: Mathis's limit at its RTT and loss is below what
/// its sender's egress and its receiver's ingress carry (where they are known). Where the limit
/// is above them, the caps bound the test before loss can, so its rate says nothing about loss.
fn loss_could_limit(t: &Test, mathis_bps: f64, nodes: &[NodeTerms]) -> bool {
    let below = |cap: Option<f64>| cap.is_none_or(|c| mathis_bps < c);
    below(nodes[t.src].egress_bps) && below(nodes[t.dst].ingress_bps)
}

/// The tail repair: what the lossy paths' tests' exchanges took above the clean ones' median,
/// per unit of their loss (see the module docs), once at least [`MIN_CALIBRATION_PATHS`] lossy
/// tests timed them and they expected at least [`MIN_EXPECTED_LOST_EXCHANGES`] lost exchanges
/// (or no node read a timeout: agents from before the timeouts); else the median of the tested
/// nodes' retransmission `timeouts`, if any; else `None`.
fn fit_tail_repair(tests: &[Test], mut timeouts: Vec<f64>) -> Option<TailRepair> {
    let timed = tests
        .iter()
        .filter_map(|t| Some((t.loss, t.exchange_excess_us?)));
    let lossy: Vec<(f64, f64)> = timed
        .clone()
        .filter(|(loss, _)| *loss >= CALIBRATION_MIN_LOSS)
        .collect();
    let loss: f64 = lossy.iter().map(|(l, _)| l).sum();
    let enough = loss * EXCHANGES_PER_TEST >= MIN_EXPECTED_LOST_EXCHANGES || timeouts.is_empty();
    if enough && lossy.len() >= MIN_CALIBRATION_PATHS {
        let mut clean_excess: Vec<f64> = timed
            .filter(|(loss, _)| *loss < CALIBRATION_MIN_LOSS)
            .map(|(_, e)| e)
            .collect();
        let baseline = median(&mut clean_excess).unwrap_or(0.0);
        let excess: f64 = lossy.iter().map(|(_, e)| e - baseline).sum();
        let us = excess / loss;
        if us.is_finite() {
            return Some(TailRepair {
                us: us.max(0.0),
                tests: lossy.len() + clean_excess.len(),
                lossy_tests: lossy.len(),
                from_timeouts: false,
            });
        }
    }
    // Too few losses expected, or one very lossy test alone: the hosts' timeout, if read.
    let us = median(&mut timeouts)?;
    Some(TailRepair {
        us,
        tests: timeouts.len(),
        lossy_tests: lossy.len(),
        from_timeouts: true,
    })
}

/// The retransmission timeouts of the nodes that sent one of the fresh `tests` (of `n` nodes),
/// µs: each such node's newest ([`NodeInfo::exchange_timeout_us`](crate::NodeInfo)). A node
/// gone quiet keeps its figure but no longer counts, so that the median follows the hosts of
/// now.
fn tested_nodes_timeouts(snapshot: &Snapshot, tests: &[Test], n: usize) -> Vec<f64> {
    let mut tested = vec![false; n];
    for t in tests {
        tested[t.src] = true;
    }
    snapshot
        .nodes()
        .filter(|(id, _)| tested.get(id.0 as usize) == Some(&true))
        .filter_map(|(_, info)| info.exchange_timeout_us.map(f64::from))
        .collect()
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
