//! Read-only views of the matrix: nodes, zones, one path, a matrix.

use zonemesh_domain::{
    FieldError, MAX_LINKS_PAGE, MAX_MATRIX_CELLS_PAGE, MAX_NODES_PAGE, Matrix, MatrixCell,
    MatrixQuery, Metric, NodeName, NodeState, NodeView, Nodes, NodesQuery, PathFigures, Provenance,
    RttSummary, UnixMs, ZoneLink, ZoneName, ZoneView, Zones, ZonesQuery,
};

use super::model::ZoneTerms;
use super::path::{PathState, wilson_upper_95};
use super::{NodeId, Snapshot, Sums, ZoneId};
use crate::Error;

/// Figures of a node pair as ranking and placement see them: the worse of the two directions
/// where measured, else the [model](crate::model)'s estimate from the two nodes' terms and their
/// zone pair's, flagged as estimated.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PairFigures {
    /// Median RTT, µs.
    pub rtt_us: Option<f64>,
    /// Loss ratio.
    pub loss: Option<f64>,
    /// Throughput, bit/s.
    pub tput_bps: Option<f64>,
    /// Where RTT and loss come from.
    pub latency: Provenance,
    /// Where throughput comes from.
    pub throughput: Provenance,
    /// Oldest sample behind the figures.
    pub oldest: Option<UnixMs>,
    /// Median and mean of the pair's timed message exchanges, µs (round trips: either
    /// direction's tests), where measured.
    pub exchange_us: Option<(f64, f64)>,
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

impl Snapshot {
    /// Fresh latency figures of one direction: (median RTT, loss, updated at).
    fn fresh_latency(&self, path: &PathState, now: UnixMs) -> Option<(Option<f64>, f64, UnixMs)> {
        if path.is_stale(now, &self.config.path) {
            return None;
        }
        let loss = path.merged.loss()?;
        Some((
            path.merged.rtt.map(|r| f64::from(r.p50)),
            loss,
            path.last_update.get()?,
        ))
    }

    /// Figures of the pair `a`–`b` (both directions; see [`PairFigures`]).
    pub fn pair(&self, a: NodeId, b: NodeId, now: UnixMs) -> PairFigures {
        let config = &self.config.path;
        let (ab, ba) = (self.path(a, b), self.path(b, a));
        let mut figures = self.round_trip(a, b, ab, ba, now);
        let t_ab = ab.and_then(|p| p.fresh_throughput(now, config));
        let t_ba = ba.and_then(|p| p.fresh_throughput(now, config));
        if t_ab.is_some() || t_ba.is_some() {
            figures.throughput = Provenance::Measured;
            for t in [t_ab, t_ba].into_iter().flatten() {
                figures.tput_bps = min_opt(figures.tput_bps, Some(t.latest_bps));
                figures.oldest = Some(figures.oldest.map_or(t.at, |o| o.min(t.at)));
            }
            return figures;
        }
        let (za, zb) = (self.zone_of(a), self.zone_of(b));
        let model = self.model();
        let (rtt, loss) = (figures.rtt_us, figures.loss);
        let rate = min_opt(
            model.rate_bps(a, za, b, zb, rtt, loss),
            model.rate_bps(b, zb, a, za, rtt, loss),
        );
        if let Some(bps) = rate {
            figures.throughput = Provenance::Estimated;
            figures.tput_bps = Some(bps);
        }
        figures
    }

    /// Figures of the direction `a` → `b`: RTT and loss of the pair (round trips: the worse
    /// direction, as [`Snapshot::pair`]), throughput of `a` → `b` alone — measured; else the
    /// model's estimate of that direction; else, as an estimate, what `b` → `a` measured. A
    /// collective's flows go one way, and a node's egress and ingress may differ.
    pub fn directed(&self, a: NodeId, b: NodeId, now: UnixMs) -> PairFigures {
        let config = &self.config.path;
        let (ab, ba) = (self.path(a, b), self.path(b, a));
        let mut figures = self.round_trip(a, b, ab, ba, now);
        // Exchanges come with throughput tests: as old as a test may be and still count.
        figures.exchange_us = [ab, ba].into_iter().flatten().find_map(|path| {
            path.fresh_throughput(now, config)?;
            let tcp = path.tcp;
            Some((
                f64::from(tcp.exchange_p50_us()?),
                f64::from(tcp.exchange_mean_us()?),
            ))
        });
        if let Some(t) = ab.and_then(|p| p.fresh_throughput(now, config)) {
            figures.throughput = Provenance::Measured;
            figures.tput_bps = Some(t.latest_bps);
            figures.oldest = Some(figures.oldest.map_or(t.at, |o| o.min(t.at)));
            return figures;
        }
        let (za, zb) = (self.zone_of(a), self.zone_of(b));
        let estimate = self
            .model()
            .rate_bps(a, za, b, zb, figures.rtt_us, figures.loss)
            .or_else(|| {
                ba.and_then(|p| p.fresh_throughput(now, config))
                    .map(|t| t.latest_bps)
            });
        if let Some(bps) = estimate {
            figures.throughput = Provenance::Estimated;
            figures.tput_bps = Some(bps);
        }
        figures
    }

    /// RTT and loss of the pair `a`–`b`: the worse of the directions measured fresh, else the
    /// model's estimate of both; throughput left unset. `ab` and `ba` are the pair's paths, as
    /// the caller looked them up.
    fn round_trip(
        &self,
        a: NodeId,
        b: NodeId,
        ab: Option<&PathState>,
        ba: Option<&PathState>,
        now: UnixMs,
    ) -> PairFigures {
        let lat_ab = ab.and_then(|p| self.fresh_latency(p, now));
        let lat_ba = ba.and_then(|p| self.fresh_latency(p, now));
        let mut figures = PairFigures::default();
        if lat_ab.is_some() || lat_ba.is_some() {
            figures.latency = Provenance::Measured;
            for (rtt, loss, at) in [lat_ab, lat_ba].into_iter().flatten() {
                figures.rtt_us = max_opt(figures.rtt_us, rtt);
                figures.loss = max_opt(figures.loss, Some(loss));
                figures.oldest = Some(figures.oldest.map_or(at, |o| o.min(at)));
            }
            return figures;
        }
        let (za, zb) = (self.zone_of(a), self.zone_of(b));
        let model = self.model();
        for e in [model.latency(a, za, b, zb), model.latency(b, zb, a, za)]
            .into_iter()
            .flatten()
        {
            figures.latency = Provenance::Estimated;
            figures.rtt_us = max_opt(figures.rtt_us, Some(e.rtt_us));
            figures.loss = max_opt(figures.loss, Some(e.loss));
            figures.oldest = min_at(figures.oldest, e.oldest);
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

    /// Wire figures of one directed path; estimated by the [model](crate::model) when it has no
    /// fresh samples.
    pub fn path_figures(&self, src: NodeId, dst: NodeId, now: UnixMs) -> PathFigures {
        let config = &self.config.path;
        let mut out = PathFigures::default();
        if let Some(path) = self.path(src, dst) {
            out.probes_sent = u64::from(path.merged.sent);
            out.probes_received = u64::from(path.merged.received);
            out.probes_sent_total = path.sent_total;
            out.probes_received_total = path.received_total;
            out.stale = path.is_stale(now, config);
            if let Some(at) = path.last_update.get() {
                out.latency_provenance = Provenance::Measured;
                out.latency_age_ms = now.since(at);
                out.rtt = path.merged.rtt.map(|r| RttSummary {
                    samples: u64::from(r.samples),
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
                out.loss_upper_95_ratio =
                    wilson_upper_95(u64::from(lost), u64::from(path.merged.sent));
            }
            if let Some(t) = path.throughput.get() {
                out.throughput_provenance = Provenance::Measured;
                out.throughput_age_ms = now.since(t.at);
                out.throughput_bps = t.latest_bps;
                out.throughput_smoothed_bps = t.smoothed_bps;
            }
            out.retransmit_ratio = path.tcp.retransmit_ratio().map(f64::from);
            out.message_exchange_p50_us = path.tcp.exchange_p50_us().map(f64::from);
            out.message_exchange_mean_us = path.tcp.exchange_mean_us().map(f64::from);
        }
        let fresh_latency = !out.stale && out.latency_provenance == Provenance::Measured;
        if fresh_latency && out.throughput_provenance == Provenance::Measured {
            return out;
        }
        let (zs, zd) = (self.zone_of(src), self.zone_of(dst));
        let model = self.model();
        if out.latency_provenance != Provenance::Measured
            && let Some(e) = model.latency(src, zs, dst, zd)
        {
            out.latency_provenance = Provenance::Estimated;
            out.latency_age_ms = e.oldest.map_or(0, |o| now.since(o));
            out.loss_ratio = e.loss;
            out.loss_upper_95_ratio = e.loss;
            out.rtt = Some(RttSummary {
                p50_us: e.rtt_us,
                p90_us: e.rtt_p90_us,
                p99_us: e.rtt_p99_us,
                ..Default::default()
            });
        }
        if out.throughput_provenance != Provenance::Measured {
            let rtt = out.rtt.map(|r| r.p50_us);
            let loss = (out.latency_provenance != Provenance::Unknown).then_some(out.loss_ratio);
            if let Some(bps) = model.rate_bps(src, zs, dst, zd, rtt, loss) {
                out.throughput_provenance = Provenance::Estimated;
                out.throughput_bps = bps;
                out.throughput_smoothed_bps = bps;
            }
        }
        out
    }

    /// `ListNodes`: a page of the nodes (of a zone, or all), by name, each with its own figures
    /// in its zone ([`crate::own`]: leaving out the paths to its faulty zone-mates, named).
    /// Only the page's nodes are described.
    pub fn list_nodes(&self, query: &NodesQuery, now: UnixMs) -> Result<Nodes, Error> {
        let zone = query
            .zone
            .as_ref()
            .map(|z| self.require_zone("zone", z))
            .transpose()?;
        let mut ids: Vec<NodeId> = match zone {
            Some(z) => self.zone(z).members.clone(),
            None => self.nodes().map(|(id, _)| id).collect(),
        };
        ids.sort_by(|a, b| self.node(*a).name.cmp(&self.node(*b).name));
        let (range, next_offset) = query.page.range(ids.len(), MAX_NODES_PAGE);
        let faulty = self.faulty();
        let nodes = ids[range]
            .iter()
            .map(|&id| {
                let n = self.node(id);
                let own = self.own_sums(id, &faulty);
                let sums = &own.sums;
                let (state, why) = self.state(id, now);
                NodeView {
                    name: n.name.clone(),
                    zone: self.zone(n.zone).name.clone(),
                    region: n.region.clone(),
                    addresses: n.addresses.to_vec(),
                    state,
                    state_reason: why,
                    last_seen: n.last_seen,
                    agent_version: n.agent_version.to_string(),
                    icmp_mode: n.icmp_mode,
                    probe_port: n.probe_port,
                    zone_rtt_p50_us: sums.rtt_mean().unwrap_or(0.0),
                    zone_loss_ratio: sums.loss_mean().unwrap_or(0.0),
                    zone_throughput_bps: sums.tput_mean().unwrap_or(0.0),
                    zone_paths_measured: sums.loss_n,
                    nodes_left_out: self.names_of(&own.left_out),
                    connected: n.connected,
                    egress_cap_bps: self.egress_cap_bps(id),
                    ingress_cap_bps: self.ingress_cap_bps(id),
                }
            })
            .collect();
        Ok(Nodes { nodes, next_offset })
    }

    /// Looks a zone up, or fails with NOT_FOUND naming it.
    pub fn require_zone(&self, field: &str, zone: &ZoneName) -> Result<ZoneId, Error> {
        self.zone_id(zone).ok_or_else(|| Error::UnknownZone {
            field: field.to_owned(),
            zone: zone.to_string(),
        })
    }

    /// `ListZones`: every zone with its node counts, and a page of the links (one for every zone
    /// pair with measured paths, by source and destination zone).
    pub fn list_zones(&self, query: &ZonesQuery, now: UnixMs) -> Zones {
        let mut zones = self.zone_links(now);
        let (range, next_offset) = query.page.range(zones.links.len(), MAX_LINKS_PAGE);
        zones.links = zones.links.drain(range).collect();
        zones.next_offset = next_offset;
        zones
    }

    /// Every zone with its node counts, and every link between zones with measured paths. A
    /// link's figures are its zone pair's terms in the [model](crate::model) (RTT between two
    /// typical nodes, the zone pair's own loss, its capacity or typical tested rate), which leave
    /// out the faults of single nodes; `nodes_left_out` names the nodes of its zones whose own
    /// fault they leave out.
    pub fn zone_links(&self, now: UnixMs) -> Zones {
        let mut zones: Vec<ZoneView> = self
            .zones()
            .filter(|(_, z)| !z.members.is_empty())
            .map(|(_, z)| ZoneView {
                name: z.name.clone(),
                region: z.region.clone(),
                nodes: z.members.len() as u32,
                ready_nodes: z
                    .members
                    .iter()
                    .filter(|m| self.state(**m, now).0 == NodeState::Ready)
                    .count() as u32,
            })
            .collect();
        zones.sort_by(|a, b| a.name.cmp(&b.name));
        let mut links: Vec<ZoneLink> = self
            .link_sums
            .iter()
            .enumerate()
            .flat_map(|(a, row)| {
                row.iter()
                    .enumerate()
                    .map(move |(b, s)| ((ZoneId(a as u32), ZoneId(b as u32)), s))
            })
            .filter(|(_, s)| s.loss_n > 0 || s.tput_n > 0)
            .map(|((a, b), s)| {
                let model = self.model();
                let (figures, nodes_left_out) = match model.zone_pair(a, b) {
                    Some(terms) => {
                        let mut left_out: Vec<NodeName> = [a, b]
                            .iter()
                            .take(if a == b { 1 } else { 2 })
                            .flat_map(|z| &self.zone(*z).members)
                            .filter(|n| model.has_own_fault(**n))
                            .map(|n| self.node(*n).name.clone())
                            .collect();
                        left_out.sort();
                        (terms_figures(terms, s, now), left_out)
                    }
                    // Until the writer's first fit: the mean of the measured paths.
                    None => (sums_figures(s, now), Vec::new()),
                };
                ZoneLink {
                    src_zone: self.zone(a).name.clone(),
                    dst_zone: self.zone(b).name.clone(),
                    figures,
                    measured_paths: s.loss_n.max(s.tput_n),
                    nodes_left_out,
                    faults: Vec::new(),
                }
            })
            .collect();
        links.sort_by(|a, b| (&a.src_zone, &a.dst_zone).cmp(&(&b.src_zone, &b.dst_zone)));
        Zones {
            zones,
            links,
            next_offset: None,
        }
    }

    /// `GetMatrix`: a page of rows over every column. Only the page's cells are computed; a page
    /// above [`MAX_MATRIX_CELLS_PAGE`] cells is refused, naming how many rows fit.
    pub fn matrix(&self, query: &MatrixQuery, now: UnixMs) -> Result<Matrix, Error> {
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
        let columns = ids.len().max(1);
        let rows_fit = (MAX_MATRIX_CELLS_PAGE / columns).max(1);
        if query.page.size.saturating_mul(columns) > MAX_MATRIX_CELLS_PAGE {
            return Err(Error::InvalidArgument(FieldError::new(
                "page_size",
                format!(
                    "{} rows of {columns} columns are {} cells, above the {MAX_MATRIX_CELLS_PAGE} \
                     one page of GetMatrix holds: ask for at most {rows_fit} rows and follow \
                     next_page_token, or for fewer nodes (a zone, or `nodes`)",
                    query.page.size,
                    query.page.size.saturating_mul(columns)
                ),
            )));
        }
        let (rows, next_offset) = query.page.range(ids.len(), rows_fit);
        let first_row = rows.start;
        let mut cells = Vec::with_capacity(rows.len() * ids.len());
        for &src in &ids[rows] {
            for &dst in &ids {
                if src == dst {
                    cells.push(MatrixCell::default());
                    continue;
                }
                let f = self.path_figures(src, dst, now);
                let (value, provenance, age) = match query.metric {
                    Metric::ThroughputBps => (
                        f.throughput_bps,
                        f.throughput_provenance,
                        f.throughput_age_ms,
                    ),
                    Metric::LossRatio => (f.loss_ratio, f.latency_provenance, f.latency_age_ms),
                    Metric::RttP99Us => (
                        f.rtt.map_or(0.0, |r| r.p99_us),
                        f.latency_provenance,
                        f.latency_age_ms,
                    ),
                    Metric::RttP50Us => (
                        f.rtt.map_or(0.0, |r| r.p50_us),
                        f.latency_provenance,
                        f.latency_age_ms,
                    ),
                };
                cells.push(MatrixCell {
                    value,
                    provenance,
                    age_ms: age,
                    stale: f.stale,
                });
            }
        }
        Ok(Matrix {
            metric: query.metric,
            nodes: ids.iter().map(|id| self.node(*id).name.clone()).collect(),
            first_row,
            cells,
            next_offset,
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

/// Wire figures of a zone pair's terms in the model, with the counts of its directed roll-up.
fn terms_figures(z: &ZoneTerms, s: &Sums, now: UnixMs) -> PathFigures {
    let throughput = z.capacity_bps.or(z.typical_bps);
    PathFigures {
        latency_provenance: if s.loss_n > 0 {
            Provenance::Measured
        } else {
            Provenance::Unknown
        },
        latency_age_ms: z.oldest.map_or(0, |o| now.since(o)),
        rtt: z.rtt_us.filter(|_| s.rtt_n > 0).map(|base| RttSummary {
            samples: u64::from(s.rtt_n),
            p50_us: base,
            p90_us: base + z.tail_p90_us,
            p99_us: base + z.tail_p99_us,
            ..Default::default()
        }),
        loss_ratio: z.loss,
        throughput_provenance: if s.tput_n > 0 && throughput.is_some() {
            Provenance::Measured
        } else {
            Provenance::Unknown
        },
        throughput_bps: throughput.unwrap_or(0.0),
        throughput_smoothed_bps: throughput.unwrap_or(0.0),
        ..Default::default()
    }
}

/// Wire figures of a roll-up.
fn sums_figures(s: &Sums, now: UnixMs) -> PathFigures {
    PathFigures {
        latency_provenance: if s.loss_n > 0 {
            Provenance::Measured
        } else {
            Provenance::Unknown
        },
        latency_age_ms: s.oldest.map_or(0, |o| now.since(o)),
        rtt: s
            .rtt_mean()
            .zip(s.rtt_tail_means())
            .map(|(p50, (p90, p99))| RttSummary {
                samples: u64::from(s.rtt_n),
                p50_us: p50,
                p90_us: p90,
                p99_us: p99,
                ..Default::default()
            }),
        loss_ratio: s.loss_mean().unwrap_or(0.0),
        throughput_provenance: if s.tput_n > 0 {
            Provenance::Measured
        } else {
            Provenance::Unknown
        },
        throughput_bps: s.tput_mean().unwrap_or(0.0),
        throughput_smoothed_bps: s.tput_mean().unwrap_or(0.0),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use zonemesh_domain::{
        MAX_MATRIX_CELLS_PAGE, MatrixQuery, NodesQuery, Page, UnixMs, ZonesQuery,
    };

    use crate::testing::*;

    #[test]
    fn long_answers_come_in_pages_that_add_up_to_the_whole() {
        let now = UnixMs(1_000_000);
        let t = mesh(5, 5, |_, _| 100.0, |_, _| 0, now);
        let t = t.view();
        // Nodes by name, in pages of 10: 10, 10, 5.
        let mut names = Vec::new();
        let mut page = Page {
            offset: 0,
            size: 10,
        };
        let mut pages = 0;
        loop {
            let answer = t.list_nodes(&NodesQuery { zone: None, page }, now).unwrap();
            pages += 1;
            names.extend(answer.nodes.iter().map(|n| n.name.to_string()));
            match answer.next_offset {
                Some(next) => page.offset = next,
                None => break,
            }
        }
        assert_eq!(pages, 3);
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), 25);
        // Links: 25 zone pairs, in pages of 7.
        let all = t.zone_links(now).links;
        let mut links = Vec::new();
        let mut page = Page { offset: 0, size: 7 };
        loop {
            let answer = t.list_zones(&ZonesQuery { page }, now);
            assert_eq!(answer.zones.len(), 5, "every page holds every zone");
            links.extend(answer.links);
            match answer.next_offset {
                Some(next) => page.offset = next,
                None => break,
            }
        }
        assert_eq!(links, all);
        // A matrix in pages of 4 rows: the rows of the whole, in order.
        let whole = t.matrix(&MatrixQuery::default(), now).unwrap();
        assert_eq!(whole.cells.len(), 25 * 25);
        assert_eq!(whole.next_offset, None);
        let mut cells = Vec::new();
        let mut page = Page { offset: 0, size: 4 };
        loop {
            let answer = t
                .matrix(
                    &MatrixQuery {
                        page,
                        ..MatrixQuery::default()
                    },
                    now,
                )
                .unwrap();
            assert_eq!(answer.first_row, page.offset);
            assert_eq!(answer.nodes, whole.nodes);
            cells.extend(answer.cells);
            match answer.next_offset {
                Some(next) => page.offset = next,
                None => break,
            }
        }
        assert_eq!(cells, whole.cells);
    }

    #[test]
    fn zone_links_leave_a_nodes_own_fault_out_and_say_so() {
        let now = UnixMs(1_000_000);
        // The demo's shape: z0-n1 loses 5 % and adds 300 µs; z1-n2 runs at 100 Mbit/s.
        let t = crate::testing::demo_shape(now);
        let links = t.view().zone_links(now).links;
        assert_eq!(links.len(), 4);
        for link in &links {
            let f = &link.figures;
            let (src, dst) = (link.src_zone.as_str(), link.dst_zone.as_str());
            let rtt = f.rtt.unwrap().p50_us;
            let want_rtt = if src == dst { 50.0 } else { 2_000.0 };
            assert!((rtt - want_rtt).abs() < 1.0, "{src}→{dst}: {rtt}");
            assert_eq!(f.loss_ratio, 0.0, "{src}→{dst}");
            assert_eq!(f.throughput_bps, 1e9, "{src}→{dst}");
            let mut want: Vec<&str> = Vec::new();
            if src == "zone-0" || dst == "zone-0" {
                want.push("z0-n1");
            }
            if src == "zone-1" || dst == "zone-1" {
                want.push("z1-n2");
            }
            let left_out: Vec<&str> = link.nodes_left_out.iter().map(|n| n.as_str()).collect();
            assert_eq!(left_out, want, "{src}→{dst}");
        }
    }

    #[test]
    fn list_nodes_shows_each_nodes_own_figures_and_who_it_left_out() {
        let now = UnixMs(1_000_000);
        // Zone-0 of three: z0-n1 loses 5 % on every path; zone-1 is clean.
        let lossy = |s: &str, d: &str| if s == "z0-n1" || d == "z0-n1" { 5 } else { 0 };
        let t = mesh(2, 3, |_, _| 100.0, lossy, now);
        let nodes = t
            .view()
            .list_nodes(
                &NodesQuery {
                    zone: None,
                    page: Page::default(),
                },
                now,
            )
            .unwrap()
            .nodes;
        for n in &nodes {
            let left_out: Vec<&str> = n.nodes_left_out.iter().map(|m| m.as_str()).collect();
            let (loss, paths, want): (f64, u32, &[&str]) = match n.name.as_str() {
                "z0-n1" => (0.05, 4, &[]),
                "z0-n0" | "z0-n2" => (0.0, 2, &["z0-n1"]),
                _ => (0.0, 4, &[]),
            };
            assert!((n.zone_loss_ratio - loss).abs() < 1e-6, "{n:?}");
            assert_eq!(n.zone_paths_measured, paths, "{}", n.name);
            assert_eq!(left_out, want, "{}", n.name);
        }
    }

    #[test]
    fn list_nodes_gives_a_nodes_own_limits_as_the_model_has_them() {
        let now = UnixMs(1_000_000);
        // The demo's shape: z1-n2 runs at 100 Mbit/s, the others at 1 Gbit/s.
        let t = crate::testing::demo_shape(now);
        let view = t.view();
        let nodes = view
            .list_nodes(
                &NodesQuery {
                    zone: None,
                    page: Page::default(),
                },
                now,
            )
            .unwrap()
            .nodes;
        for n in &nodes {
            let id = view.id(&n.name).unwrap();
            // What Place prices with.
            assert_eq!(n.egress_cap_bps, view.egress_cap_bps(id), "{}", n.name);
            assert_eq!(n.ingress_cap_bps, view.ingress_cap_bps(id), "{}", n.name);
            for cap in [n.egress_cap_bps, n.ingress_cap_bps] {
                if n.name.as_str() == "z1-n2" {
                    let cap = cap.expect("the slow node's limit");
                    assert!((cap - 100e6).abs() < 1e6, "{}: {cap}", n.name);
                } else {
                    assert!(cap.is_none_or(|c| c >= 0.9e9), "{}: {cap:?}", n.name);
                }
            }
        }
    }

    #[test]
    fn a_page_above_the_cap_is_refused_with_what_fits() {
        let now = UnixMs(1_000_000);
        let t = mesh(1, 3, |_, _| 100.0, |_, _| 0, now);
        let too_many = MAX_MATRIX_CELLS_PAGE / 3 + 1;
        let e = t
            .view()
            .matrix(
                &MatrixQuery {
                    page: Page {
                        offset: 0,
                        size: too_many,
                    },
                    ..MatrixQuery::default()
                },
                now,
            )
            .unwrap_err();
        let message = e.to_string();
        assert!(message.starts_with("page_size:"), "{message}");
        assert!(
            message.contains(&format!("at most {} rows", MAX_MATRIX_CELLS_PAGE / 3)),
            "{message}"
        );
        assert!(
            Page {
                offset: 0,
                size: 20_000
            }
            .checked("ListNodes", 10_000)
            .unwrap_err()
            .to_string()
            .contains("at most 10000 and follow next_page_token")
        );
    }
}
