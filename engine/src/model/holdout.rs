//! The model's error on measured paths it was not fitted on: [`holdout`] fits the model without
//! each held-out inter-zone path in turn and compares its estimate (RTT, loss, and the rate of a
//! path with a throughput test of its own) with the measurement. [`topology_of`] builds a
//! topology from paths recorded elsewhere ([`MeasuredPath`]: the lab's accuracy run), so that the
//! same harness scores the lab. The engine's tests, the aggregator's `engine` bench and the lab
//! use it.

use std::collections::HashMap;
use std::net::IpAddr;

use zonemesh_domain::{
    Bps, Hello, IcmpMode, Micros, NodeName, PathSample, Report, Rtt, ThroughputSample, UnixMs,
    ZoneName,
};

use super::{Model, key};
use crate::{EngineConfig, Error, NodeId, PairMap, Snapshot, Topology, ZoneId};

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
        zonemesh_domain::stats::quantile(&mut sorted.to_vec(), q).unwrap_or(0.0)
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
