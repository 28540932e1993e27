//! Read-only views of the matrix (nodes, zones, one path, a matrix) and the checked forms of the
//! query requests. Views answer with the wire types: they are the public contract anyway.

use zonemesh_proto::WireError;
use zonemesh_proto::domain::{NodeName, UnixMs, Weights, ZoneName, node_names};
use zonemesh_proto::v1;

use super::path::{PathState, wilson_upper_95};
use super::{NodeId, Sums, Topology, ZoneId};
use crate::Error;

/// Figures of a node pair as ranking and placement see them: the worse of the two directions
/// where measured, else the zone-to-zone roll-up, flagged as estimated.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PairFigures {
    /// Median RTT, µs.
    pub rtt_us: Option<f64>,
    /// Loss ratio.
    pub loss: Option<f64>,
    /// Throughput, bit/s.
    pub tput_bps: Option<f64>,
    /// Where RTT and loss come from.
    pub latency: v1::Provenance,
    /// Where throughput comes from.
    pub throughput: v1::Provenance,
    /// Oldest sample behind the figures.
    pub oldest: Option<UnixMs>,
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl Topology {
    /// Fresh latency figures of one direction: (median RTT, loss, updated at).
    fn fresh_latency(&self, path: &PathState, now: UnixMs) -> Option<(Option<f64>, f64, UnixMs)> {
        if path.is_stale(now, &self.config.path) {
            return None;
        }
        let loss = path.merged.loss()?;
        Some((
            path.merged.rtt.map(|r| f64::from(r.p50)),
            loss,
            path.last_update?,
        ))
    }

    /// Figures of the pair `a`–`b` (both directions; see [`PairFigures`]).
    pub fn pair(&self, a: NodeId, b: NodeId, now: UnixMs) -> PairFigures {
        let config = &self.config.path;
        let ab = self.path(a, b);
        let ba = self.path(b, a);
        let lat_ab = ab.and_then(|p| self.fresh_latency(p, now));
        let lat_ba = ba.and_then(|p| self.fresh_latency(p, now));
        let mut figures = PairFigures::default();
        if lat_ab.is_some() || lat_ba.is_some() {
            figures.latency = v1::Provenance::Measured;
            for (rtt, loss, at) in [lat_ab, lat_ba].into_iter().flatten() {
                figures.rtt_us = max_opt(figures.rtt_us, rtt);
                figures.loss = max_opt(figures.loss, Some(loss));
                figures.oldest = Some(figures.oldest.map_or(at, |o| o.min(at)));
            }
        }
        let t_ab = ab.and_then(|p| p.fresh_throughput(now, config));
        let t_ba = ba.and_then(|p| p.fresh_throughput(now, config));
        if t_ab.is_some() || t_ba.is_some() {
            figures.throughput = v1::Provenance::Measured;
            for t in [t_ab, t_ba].into_iter().flatten() {
                figures.tput_bps = min_opt(figures.tput_bps, Some(t.latest_bps));
                figures.oldest = Some(figures.oldest.map_or(t.at, |o| o.min(t.at)));
            }
        }
        if figures.latency == v1::Provenance::Measured
            && figures.throughput == v1::Provenance::Measured
        {
            return figures;
        }
        let (za, zb) = (self.zone_of(a), self.zone_of(b));
        let roll = self.roll_up(za, zb);
        if figures.latency != v1::Provenance::Measured
            && let Some(r) = roll.filter(|r| r.loss_n > 0)
        {
            figures.latency = v1::Provenance::Estimated;
            figures.rtt_us = r.rtt_mean();
            figures.loss = r.loss_mean();
            figures.oldest = min_at(figures.oldest, r.oldest);
        }
        if figures.throughput != v1::Provenance::Measured
            && let Some(r) = roll.filter(|r| r.tput_n > 0)
        {
            figures.throughput = v1::Provenance::Estimated;
            figures.tput_bps = r.tput_mean();
        }
        figures
    }

    /// The roll-up of the paths between two zones in either direction (both when both measured).
    pub fn roll_up(&self, a: ZoneId, b: ZoneId) -> Option<Sums> {
        let ab = self.link_sums(a, b).copied();
        let ba = if a == b {
            None
        } else {
            self.link_sums(b, a).copied()
        };
        match (ab, ba) {
            (None, None) => None,
            (Some(s), None) | (None, Some(s)) => Some(s),
            (Some(x), Some(y)) => Some(Sums {
                rtt: x.rtt + y.rtt,
                rtt_p90: x.rtt_p90 + y.rtt_p90,
                rtt_p99: x.rtt_p99 + y.rtt_p99,
                rtt_n: x.rtt_n + y.rtt_n,
                loss: x.loss + y.loss,
                loss_n: x.loss_n + y.loss_n,
                tput: x.tput + y.tput,
                tput_n: x.tput_n + y.tput_n,
                oldest: min_at(x.oldest, y.oldest),
            }),
        }
    }

    /// Wire figures of one directed path; estimated from the roll-up when it has no fresh samples.
    pub fn path_figures(&self, src: NodeId, dst: NodeId, now: UnixMs) -> v1::PathFigures {
        let config = &self.config.path;
        let mut out = v1::PathFigures::default();
        if let Some(path) = self.path(src, dst) {
            out.probes_sent = path.merged.sent;
            out.probes_received = path.merged.received;
            out.probes_sent_total = path.sent_total;
            out.probes_received_total = path.received_total;
            out.stale = path.is_stale(now, config);
            if let Some(at) = path.last_update {
                out.latency_provenance = v1::Provenance::Measured as i32;
                out.latency_age_ms = now.since(at);
                out.rtt = path.merged.rtt.map(|r| v1::RttStats {
                    samples: r.samples,
                    min_us: f64::from(r.min),
                    p50_us: f64::from(r.p50),
                    p90_us: f64::from(r.p90),
                    p99_us: f64::from(r.p99),
                    max_us: f64::from(r.max),
                    mean_us: f64::from(r.mean),
                    jitter_us: f64::from(r.jitter),
                });
                let lost = path.merged.sent - path.merged.received;
                out.loss_ratio = path.merged.loss().unwrap_or(0.0);
                out.loss_upper_95_ratio = wilson_upper_95(lost, path.merged.sent);
            }
            if let Some(t) = path.throughput {
                out.throughput_provenance = v1::Provenance::Measured as i32;
                out.throughput_age_ms = now.since(t.at);
                out.throughput_bps = t.latest_bps;
                out.throughput_smoothed_bps = t.smoothed_bps;
            }
        }
        let fresh_latency = !out.stale && out.latency_provenance == v1::Provenance::Measured as i32;
        if fresh_latency && out.throughput_provenance == v1::Provenance::Measured as i32 {
            return out;
        }
        let roll = self.roll_up(self.zone_of(src), self.zone_of(dst));
        if out.latency_provenance != v1::Provenance::Measured as i32
            && let Some(r) = roll.filter(|r| r.loss_n > 0)
        {
            out.latency_provenance = v1::Provenance::Estimated as i32;
            out.latency_age_ms = r.oldest.map_or(0, |o| now.since(o));
            out.loss_ratio = r.loss_mean().unwrap_or(0.0);
            out.loss_upper_95_ratio = out.loss_ratio;
            out.rtt = r
                .rtt_mean()
                .zip(r.rtt_tail_means())
                .map(|(p50, (p90, p99))| v1::RttStats {
                    p50_us: p50,
                    p90_us: p90,
                    p99_us: p99,
                    ..Default::default()
                });
        }
        if out.throughput_provenance != v1::Provenance::Measured as i32
            && let Some(t) = roll.and_then(|r| r.tput_mean())
        {
            out.throughput_provenance = v1::Provenance::Estimated as i32;
            out.throughput_bps = t;
            out.throughput_smoothed_bps = t;
        }
        out
    }

    /// `ListNodes`.
    pub fn list_nodes(&self, zone: Option<&ZoneName>, now: UnixMs) -> Result<Vec<v1::Node>, Error> {
        let zone = zone.map(|z| self.require_zone("zone", z)).transpose()?;
        let mut nodes: Vec<v1::Node> = self
            .nodes()
            .filter(|(id, _)| zone.is_none_or(|z| self.zone_of(*id) == z))
            .map(|(id, n)| {
                let sums = self.node_sums(id);
                let (state, why) = self.state(id, now);
                v1::Node {
                    name: n.name.to_string(),
                    zone: self.zone(n.zone).name.to_string(),
                    region: n
                        .region
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    addresses: n.addresses.iter().map(ToString::to_string).collect(),
                    state: state.wire() as i32,
                    state_reason: why.to_owned(),
                    last_seen_unix_ms: n.last_seen.map_or(0, |t| t.0),
                    agent_version: n.agent_version.clone(),
                    icmp_mode: n.icmp_mode.map_or(0, |m| v1::IcmpMode::from(m) as i32),
                    probe_port: u32::from(n.probe_port),
                    zone_rtt_p50_us: sums.rtt_mean().unwrap_or(0.0),
                    zone_loss_ratio: sums.loss_mean().unwrap_or(0.0),
                    zone_throughput_bps: sums.tput_mean().unwrap_or(0.0),
                    zone_paths_measured: sums.loss_n,
                    connected: n.connected,
                }
            })
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }

    /// Looks a zone up, or fails with NOT_FOUND naming it.
    pub fn require_zone(&self, field: &str, zone: &ZoneName) -> Result<ZoneId, Error> {
        self.zone_id(zone).ok_or_else(|| Error::UnknownZone {
            field: field.to_owned(),
            zone: zone.to_string(),
        })
    }

    /// `ListZones`: zones with node counts, and a link for every zone pair with measured paths.
    pub fn list_zones(&self, now: UnixMs) -> v1::ListZonesResponse {
        let mut zones: Vec<v1::Zone> = self
            .zones()
            .filter(|(_, z)| !z.members.is_empty())
            .map(|(_, z)| v1::Zone {
                name: z.name.to_string(),
                region: z
                    .region
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                nodes: z.members.len() as u32,
                ready_nodes: z
                    .members
                    .iter()
                    .filter(|m| self.state(**m, now).0 == super::NodeState::Ready)
                    .count() as u32,
            })
            .collect();
        zones.sort_by(|a, b| a.name.cmp(&b.name));
        let mut links: Vec<v1::ZoneLink> = self
            .link_sums
            .iter()
            .filter(|(_, s)| s.loss_n > 0 || s.tput_n > 0)
            .map(|((a, b), s)| v1::ZoneLink {
                src_zone: self.zone(*a).name.to_string(),
                dst_zone: self.zone(*b).name.to_string(),
                figures: Some(sums_figures(s, now)),
                measured_paths: s.loss_n.max(s.tput_n),
            })
            .collect();
        links.sort_by(|a, b| (&a.src_zone, &a.dst_zone).cmp(&(&b.src_zone, &b.dst_zone)));
        v1::ListZonesResponse { zones, links }
    }

    /// `GetMatrix`.
    pub fn matrix(&self, query: &MatrixQuery, now: UnixMs) -> Result<v1::GetMatrixResponse, Error> {
        let ids: Vec<NodeId> = if !query.nodes.is_empty() {
            query
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| self.require(&format!("nodes[{i}]"), n))
                .collect::<Result<_, _>>()?
        } else if let Some(zone) = &query.zone {
            self.zone(self.require_zone("zone", zone)?).members.clone()
        } else {
            self.nodes().map(|(id, _)| id).collect()
        };
        let mut cells = Vec::with_capacity(ids.len() * ids.len());
        for &src in &ids {
            for &dst in &ids {
                if src == dst {
                    cells.push(v1::MatrixCell::default());
                    continue;
                }
                let f = self.path_figures(src, dst, now);
                let (value, provenance, age) = match query.metric {
                    v1::Metric::ThroughputBps => (
                        f.throughput_bps,
                        f.throughput_provenance,
                        f.throughput_age_ms,
                    ),
                    v1::Metric::LossRatio => (f.loss_ratio, f.latency_provenance, f.latency_age_ms),
                    v1::Metric::RttP99Us => (
                        f.rtt.map_or(0.0, |r| r.p99_us),
                        f.latency_provenance,
                        f.latency_age_ms,
                    ),
                    v1::Metric::RttP50Us | v1::Metric::Unspecified => (
                        f.rtt.map_or(0.0, |r| r.p50_us),
                        f.latency_provenance,
                        f.latency_age_ms,
                    ),
                };
                cells.push(v1::MatrixCell {
                    value,
                    provenance,
                    age_ms: age,
                    stale: f.stale,
                });
            }
        }
        Ok(v1::GetMatrixResponse {
            metric: query.metric as i32,
            nodes: ids
                .iter()
                .map(|id| self.node(*id).name.to_string())
                .collect(),
            cells,
        })
    }
}

fn min_at(a: Option<UnixMs>, b: Option<UnixMs>) -> Option<UnixMs> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Wire figures of a roll-up.
fn sums_figures(s: &Sums, now: UnixMs) -> v1::PathFigures {
    v1::PathFigures {
        latency_provenance: if s.loss_n > 0 {
            v1::Provenance::Measured as i32
        } else {
            v1::Provenance::Unknown as i32
        },
        latency_age_ms: s.oldest.map_or(0, |o| now.since(o)),
        rtt: s
            .rtt_mean()
            .zip(s.rtt_tail_means())
            .map(|(p50, (p90, p99))| v1::RttStats {
                samples: u64::from(s.rtt_n),
                p50_us: p50,
                p90_us: p90,
                p99_us: p99,
                ..Default::default()
            }),
        loss_ratio: s.loss_mean().unwrap_or(0.0),
        throughput_provenance: if s.tput_n > 0 {
            v1::Provenance::Measured as i32
        } else {
            v1::Provenance::Unknown as i32
        },
        throughput_bps: s.tput_mean().unwrap_or(0.0),
        throughput_smoothed_bps: s.tput_mean().unwrap_or(0.0),
        ..Default::default()
    }
}

/// A checked `GetMatrix` request.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixQuery {
    /// The metric.
    pub metric: v1::Metric,
    /// Rows and columns; empty for a zone (or everything).
    pub nodes: Vec<NodeName>,
    /// The zone when `nodes` is empty.
    pub zone: Option<ZoneName>,
}

/// Largest matrix side `GetMatrix` answers (the answer grows with its square).
pub const MAX_MATRIX_NODES: usize = 2_000;

impl TryFrom<v1::GetMatrixRequest> for MatrixQuery {
    type Error = WireError;

    fn try_from(wire: v1::GetMatrixRequest) -> Result<Self, WireError> {
        let metric = v1::Metric::try_from(wire.metric)
            .map_err(|_| WireError::new("metric", format!("{} is not a Metric", wire.metric)))?;
        if wire.nodes.len() > MAX_MATRIX_NODES {
            return Err(WireError::new(
                "nodes",
                format!(
                    "{} nodes, at most {MAX_MATRIX_NODES} allowed",
                    wire.nodes.len()
                ),
            ));
        }
        Ok(Self {
            metric,
            nodes: node_names("nodes", wire.nodes)?,
            zone: ZoneName::parse_optional("zone", wire.zone)?,
        })
    }
}

/// A checked `RankNodes` request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RankQuery {
    /// Nodes to rank; empty for the zone (or every node).
    pub candidates: Vec<NodeName>,
    /// The zone to rank when `candidates` is empty.
    pub zone: Option<ZoneName>,
    /// Nodes the job already runs on.
    pub peers: Vec<NodeName>,
    /// Cost weights.
    pub weights: Weights,
    /// At most this many answers; 0 for all.
    pub limit: usize,
}

impl TryFrom<v1::RankNodesRequest> for RankQuery {
    type Error = WireError;

    fn try_from(wire: v1::RankNodesRequest) -> Result<Self, WireError> {
        Ok(Self {
            candidates: node_names("candidates", wire.candidates)?,
            zone: ZoneName::parse_optional("zone", wire.zone)?,
            peers: node_names("peers", wire.peers)?,
            weights: Weights::from_wire(wire.weights)?,
            limit: wire.limit as usize,
        })
    }
}
