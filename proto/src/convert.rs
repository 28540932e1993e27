//! Wire ↔ domain: the checked conversions of every `zonemesh.v1` message into the domain types of
//! `zonemesh-domain`, and of the engine's answers back into messages.
//!
//! Only these conversions let wire values in. A refusal is a [`FieldError`] whose field is the
//! path of the offending wire field (`paths[3].rtt.p50_us`).

use std::net::IpAddr;

use zonemesh_domain::{
    Assignment, Bps, Collective, Cut, CutFigures, Element, Fault, FaultKind, Faults, FieldError,
    GroupLink, Hello, IcmpMode, Job, JobBottleneck, MAX_ADDRESSES, MAX_LINKS_PAGE,
    MAX_MATRIX_NODES, MAX_NODES_PAGE, MAX_PATHS_PER_REPORT, MAX_VERSION_BYTES, Matrix, MatrixCell,
    MatrixQuery, MessageExchange, Metric, Micros, NodeName, NodeState, NodeView, Nodes, NodesQuery,
    Page, PairFigure, PathAnswer, PathFigures, PathSample, PlaceAnswer, PlaceQuery, ProbePlan,
    ProbeTarget, Provenance, RankQuery, RankedNode, Ranking, Report, Retransmits, Rtt, RttSummary,
    ThroughputGrant, ThroughputSample, TierGroup, TierThresholds, TierZone, Tiers, UnixMs, Weights,
    ZoneLink, ZoneName, ZonePair, ZonePolicy, ZoneView, Zones, ZonesQuery, node_names,
};

use crate::v1;

/// Checks a wire `IcmpMode`; `field` names it in the error.
pub fn icmp_mode(field: &str, value: i32) -> Result<IcmpMode, FieldError> {
    match v1::IcmpMode::try_from(value) {
        Ok(v1::IcmpMode::Raw) => Ok(IcmpMode::Raw),
        Ok(v1::IcmpMode::Dgram) => Ok(IcmpMode::Dgram),
        Ok(v1::IcmpMode::Tcp) => Ok(IcmpMode::Tcp),
        Ok(v1::IcmpMode::Unspecified) => Err(FieldError::new(field, "must be set")),
        Err(_) => Err(FieldError::new(
            field,
            format!("{value} is not an IcmpMode"),
        )),
    }
}

/// Checks a wire IP address; `field` names it in the error.
fn address(field: &str, value: &str) -> Result<IpAddr, FieldError> {
    value
        .parse()
        .map_err(|_| FieldError::new(field, format!("{value:?} is not an IP address")))
}

/// Checks a list of wire IP addresses; `field` names the list (`addresses` gives
/// `addresses[1]`).
fn addresses(field: &str, values: &[String]) -> Result<Vec<IpAddr>, FieldError> {
    values
        .iter()
        .enumerate()
        .map(|(i, a)| address(&format!("{field}[{i}]"), a))
        .collect()
}

/// Checks a wire TCP port (a `uint32`): 1 to 65535.
fn tcp_port(field: &str, value: u32) -> Result<u16, FieldError> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| FieldError::new(field, format!("{value} is not a TCP port")))
}

impl TryFrom<v1::Hello> for Hello {
    type Error = FieldError;

    fn try_from(wire: v1::Hello) -> Result<Self, FieldError> {
        let node = NodeName::parse("node_name", wire.node_name)?;
        let zone = ZoneName::parse("zone", wire.zone)?;
        let region = ZoneName::parse_optional("region", wire.region)?;
        if wire.addresses.is_empty() {
            return Err(FieldError::new(
                "addresses",
                "at least one address is needed",
            ));
        }
        if wire.addresses.len() > MAX_ADDRESSES {
            return Err(FieldError::new(
                "addresses",
                format!(
                    "{} addresses, at most {MAX_ADDRESSES} allowed",
                    wire.addresses.len()
                ),
            ));
        }
        let addresses = addresses("addresses", &wire.addresses)?;
        if wire.agent_version.len() > MAX_VERSION_BYTES {
            return Err(FieldError::new(
                "agent_version",
                format!("at most {MAX_VERSION_BYTES} bytes allowed"),
            ));
        }
        let icmp_mode = icmp_mode("icmp_mode", wire.icmp_mode)?;
        let probe_port = tcp_port("probe_port", wire.probe_port)?;
        Ok(Self {
            node,
            zone,
            region,
            addresses,
            agent_version: wire.agent_version,
            icmp_mode,
            probe_port,
        })
    }
}
impl TryFrom<v1::RttStats> for Rtt {
    type Error = FieldError;

    fn try_from(wire: v1::RttStats) -> Result<Self, FieldError> {
        if wire.samples == 0 {
            return Err(FieldError::new("samples", "must be at least 1"));
        }
        Self {
            samples: wire.samples,
            min: Micros::parse("min_us", wire.min_us)?,
            p50: Micros::parse("p50_us", wire.p50_us)?,
            p90: Micros::parse("p90_us", wire.p90_us)?,
            p99: Micros::parse("p99_us", wire.p99_us)?,
            max: Micros::parse("max_us", wire.max_us)?,
            mean: Micros::parse("mean_us", wire.mean_us)?,
            jitter: Micros::parse("jitter_us", wire.jitter_us)?,
        }
        .checked()
    }
}

impl TryFrom<v1::Throughput> for ThroughputSample {
    type Error = FieldError;

    fn try_from(wire: v1::Throughput) -> Result<Self, FieldError> {
        let rate = Bps::parse("throughput_bps", wire.throughput_bps)?;
        let mut sample = Self::new(
            rate,
            wire.bytes,
            wire.duration_us,
            wire.warmup_us,
            wire.streams,
        )?;
        sample.retransmits = match (wire.segments_sent, wire.segments_retransmitted) {
            (0, 0) => None,
            (sent, again) => Some(Retransmits::new(sent, again)?),
        };
        sample.exchange = if wire.exchanges == 0 {
            None
        } else {
            let e = MessageExchange::new(
                wire.exchanges,
                Micros::parse("exchange_p50_us", wire.exchange_p50_us)?,
                Micros::parse("exchange_mean_us", wire.exchange_mean_us)?,
                Micros::parse("exchange_max_us", wire.exchange_max_us)?,
            )?;
            let timeout = (wire.exchange_timeout_us != 0.0)
                .then(|| Micros::parse("exchange_timeout_us", wire.exchange_timeout_us))
                .transpose()?;
            Some(e.with_timeout(timeout))
        };
        Ok(sample)
    }
}

impl TryFrom<v1::PathSummary> for PathSample {
    type Error = FieldError;

    fn try_from(wire: v1::PathSummary) -> Result<Self, FieldError> {
        let src = NodeName::parse("src", wire.src)?;
        let dst = NodeName::parse("dst", wire.dst)?;
        if src == dst {
            return Err(FieldError::new(
                "dst",
                format!("{dst} is the source itself"),
            ));
        }
        let window_start = UnixMs::parse("window_start_unix_ms", wire.window_start_unix_ms)?;
        let window_end = UnixMs::parse("window_end_unix_ms", wire.window_end_unix_ms)?;
        if window_end <= window_start {
            return Err(FieldError::new(
                "window_end_unix_ms",
                format!(
                    "{} is not after window_start_unix_ms {}",
                    window_end.0, window_start.0
                ),
            ));
        }
        if wire.probes_received > wire.probes_sent {
            return Err(FieldError::new(
                "probes_received",
                format!(
                    "{} replies to {} probes is impossible",
                    wire.probes_received, wire.probes_sent
                ),
            ));
        }
        let rtt = match (wire.rtt, wire.probes_received) {
            (None, 0) => None,
            (Some(_), 0) => {
                return Err(FieldError::new(
                    "rtt",
                    "present although no reply was received",
                ));
            }
            (None, _) => {
                return Err(FieldError::new(
                    "rtt",
                    "missing although replies were received",
                ));
            }
            (Some(stats), received) => {
                let rtt = Rtt::try_from(stats).map_err(|e| e.within("rtt"))?;
                if rtt.samples > received {
                    return Err(FieldError::new(
                        "rtt.samples",
                        format!("{} is more than probes_received {received}", rtt.samples),
                    ));
                }
                Some(rtt)
            }
        };
        let throughput = wire
            .throughput
            .map(ThroughputSample::try_from)
            .transpose()
            .map_err(|e| e.within("throughput"))?;
        let method = match wire.method {
            0 => None,
            m => Some(icmp_mode("method", m)?),
        };
        Ok(Self {
            src,
            dst,
            window_start,
            window_end,
            sent: wire.probes_sent,
            received: wire.probes_received,
            rtt,
            throughput,
            method,
        })
    }
}
impl TryFrom<v1::Report> for Report {
    type Error = FieldError;

    fn try_from(wire: v1::Report) -> Result<Self, FieldError> {
        if wire.sequence == 0 {
            return Err(FieldError::new("sequence", "must be at least 1"));
        }
        if wire.paths.len() > MAX_PATHS_PER_REPORT {
            return Err(FieldError::new(
                "paths",
                format!(
                    "{} summaries in one report, at most {MAX_PATHS_PER_REPORT} allowed",
                    wire.paths.len()
                ),
            ));
        }
        let paths = wire
            .paths
            .into_iter()
            .enumerate()
            .map(|(i, p)| PathSample::try_from(p).map_err(|e| e.within(&format!("paths[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            sequence: wire.sequence,
            paths,
        })
    }
}
impl From<IcmpMode> for v1::IcmpMode {
    fn from(value: IcmpMode) -> Self {
        match value {
            IcmpMode::Raw => v1::IcmpMode::Raw,
            IcmpMode::Dgram => v1::IcmpMode::Dgram,
            IcmpMode::Tcp => v1::IcmpMode::Tcp,
        }
    }
}
impl From<Hello> for v1::Hello {
    fn from(value: Hello) -> Self {
        Self {
            node_name: value.node.into(),
            zone: value.zone.into(),
            region: value.region.map(String::from).unwrap_or_default(),
            addresses: value.addresses.iter().map(ToString::to_string).collect(),
            agent_version: value.agent_version,
            icmp_mode: v1::IcmpMode::from(value.icmp_mode) as i32,
            probe_port: u32::from(value.probe_port),
        }
    }
}
impl From<Rtt> for v1::RttStats {
    fn from(value: Rtt) -> Self {
        Self {
            samples: value.samples,
            min_us: value.min.get(),
            p50_us: value.p50.get(),
            p90_us: value.p90.get(),
            p99_us: value.p99.get(),
            max_us: value.max.get(),
            mean_us: value.mean.get(),
            jitter_us: value.jitter.get(),
        }
    }
}
impl From<ThroughputSample> for v1::Throughput {
    fn from(value: ThroughputSample) -> Self {
        Self {
            throughput_bps: value.rate.get(),
            bytes: value.bytes,
            duration_us: value.duration_us,
            warmup_us: value.warmup_us,
            streams: value.streams,
            segments_sent: value.retransmits.map_or(0, |r| r.segments_sent),
            segments_retransmitted: value.retransmits.map_or(0, |r| r.retransmitted),
            exchanges: value.exchange.map_or(0, |e| e.count),
            exchange_p50_us: value.exchange.map_or(0.0, |e| e.p50.get()),
            exchange_mean_us: value.exchange.map_or(0.0, |e| e.mean.get()),
            exchange_max_us: value.exchange.map_or(0.0, |e| e.max.get()),
            exchange_timeout_us: value
                .exchange
                .and_then(|e| e.timeout)
                .map_or(0.0, Micros::get),
        }
    }
}
impl From<PathSample> for v1::PathSummary {
    fn from(value: PathSample) -> Self {
        Self {
            src: value.src.into(),
            dst: value.dst.into(),
            window_start_unix_ms: value.window_start.0,
            window_end_unix_ms: value.window_end.0,
            probes_sent: value.sent,
            probes_received: value.received,
            rtt: value.rtt.map(Into::into),
            throughput: value.throughput.map(Into::into),
            method: value.method.map_or(0, |m| v1::IcmpMode::from(m) as i32),
        }
    }
}
impl From<Report> for v1::Report {
    fn from(value: Report) -> Self {
        Self {
            sequence: value.sequence,
            paths: value.paths.into_iter().map(Into::into).collect(),
        }
    }
}

/// Checks a wire report from the agent of `node`: every sample's source must be that node.
pub fn report_from_agent(node: &NodeName, wire: v1::Report) -> Result<Report, FieldError> {
    Report::try_from(wire)?.only_from(node)
}

/// Checks wire weights; `None` gives the defaults.
pub fn weights(wire: Option<v1::Weights>) -> Result<Weights, FieldError> {
    match wire {
        None => Ok(Weights::DEFAULT),
        Some(w) => Weights::checked(w.loss, w.delay, w.throughput),
    }
}

impl From<Weights> for v1::Weights {
    fn from(value: Weights) -> Self {
        Self {
            loss: Some(value.loss),
            delay: Some(value.delay),
            throughput: Some(value.throughput),
        }
    }
}

/// Checks a wire `Metric`; unspecified is the median RTT.
pub fn metric(field: &str, value: i32) -> Result<Metric, FieldError> {
    match v1::Metric::try_from(value) {
        Ok(v1::Metric::RttP50Us | v1::Metric::Unspecified) => Ok(Metric::RttP50Us),
        Ok(v1::Metric::RttP99Us) => Ok(Metric::RttP99Us),
        Ok(v1::Metric::LossRatio) => Ok(Metric::LossRatio),
        Ok(v1::Metric::ThroughputBps) => Ok(Metric::ThroughputBps),
        Err(_) => Err(FieldError::new(field, format!("{value} is not a Metric"))),
    }
}

impl From<Metric> for v1::Metric {
    fn from(value: Metric) -> Self {
        match value {
            Metric::RttP50Us => v1::Metric::RttP50Us,
            Metric::RttP99Us => v1::Metric::RttP99Us,
            Metric::LossRatio => v1::Metric::LossRatio,
            Metric::ThroughputBps => v1::Metric::ThroughputBps,
        }
    }
}

/// Reads a `page_token` (opaque to clients: the offset of the page's first item).
fn page(size: u32, token: &str) -> Result<Page, FieldError> {
    let offset = if token.is_empty() {
        0
    } else {
        token.parse::<usize>().map_err(|_| {
            FieldError::new(
                "page_token",
                format!("{token:?} is not a next_page_token of this RPC"),
            )
        })?
    };
    Ok(Page {
        offset,
        size: size as usize,
    })
}

/// The `next_page_token` of an answer: empty on the last page.
pub fn next_page_token(next: Option<usize>) -> String {
    next.map(|o| o.to_string()).unwrap_or_default()
}

impl TryFrom<v1::ListNodesRequest> for NodesQuery {
    type Error = FieldError;

    fn try_from(wire: v1::ListNodesRequest) -> Result<Self, FieldError> {
        Ok(Self {
            zone: ZoneName::parse_optional("zone", wire.zone)?,
            page: page(wire.page_size, &wire.page_token)?.checked("ListNodes", MAX_NODES_PAGE)?,
        })
    }
}

impl TryFrom<v1::ListZonesRequest> for ZonesQuery {
    type Error = FieldError;

    fn try_from(wire: v1::ListZonesRequest) -> Result<Self, FieldError> {
        Ok(Self {
            page: page(wire.page_size, &wire.page_token)?.checked("ListZones", MAX_LINKS_PAGE)?,
        })
    }
}

impl TryFrom<v1::GetMatrixRequest> for MatrixQuery {
    type Error = FieldError;

    fn try_from(wire: v1::GetMatrixRequest) -> Result<Self, FieldError> {
        let metric = metric("metric", wire.metric)?;
        if wire.nodes.len() > MAX_MATRIX_NODES {
            return Err(FieldError::new(
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
            // Rows; the engine checks the cells against MAX_MATRIX_CELLS_PAGE once it knows the
            // columns.
            page: page(wire.page_size, &wire.page_token)?,
        })
    }
}

impl TryFrom<v1::RankNodesRequest> for RankQuery {
    type Error = FieldError;

    fn try_from(wire: v1::RankNodesRequest) -> Result<Self, FieldError> {
        Ok(Self {
            candidates: node_names("candidates", wire.candidates)?,
            zone: ZoneName::parse_optional("zone", wire.zone)?,
            peers: node_names("peers", wire.peers)?,
            weights: weights(wire.weights)?,
            limit: wire.limit as usize,
        })
    }
}

impl TryFrom<v1::PlaceRequest> for PlaceQuery {
    type Error = FieldError;

    fn try_from(wire: v1::PlaceRequest) -> Result<Self, FieldError> {
        let candidates = wire
            .candidates
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                Ok((
                    NodeName::parse(&format!("candidates[{i}].node"), c.node)?,
                    c.slots,
                ))
            })
            .collect::<Result<Vec<_>, FieldError>>()?;
        let policy = match v1::ZonePolicy::try_from(wire.zone_policy) {
            Ok(v1::ZonePolicy::RequireOne) => ZonePolicy::RequireOne,
            Ok(v1::ZonePolicy::PreferOne | v1::ZonePolicy::Unspecified) => ZonePolicy::PreferOne,
            Ok(v1::ZonePolicy::Any) => ZonePolicy::Any,
            Err(_) => {
                return Err(FieldError::new(
                    "zone_policy",
                    format!("{} is not a ZonePolicy", wire.zone_policy),
                ));
            }
        };
        let job = job(
            wire.collective,
            wire.bytes_per_iteration,
            wire.servers,
            wire.workers,
        )?;
        PlaceQuery {
            workers: wire.workers,
            candidates,
            policy,
            weights: weights(wire.weights)?,
            exclude: node_names("exclude", wire.exclude)?,
            job,
            alternatives: wire.alternatives,
        }
        .check()
    }
}

/// Checks a request's job: its collective (unspecified: no job, and then no bytes and no
/// servers), its bytes and its servers. Errors name `collective`, `bytes_per_iteration` or
/// `servers`.
pub fn job(
    collective: i32,
    bytes_per_iteration: u64,
    servers: u32,
    workers: u32,
) -> Result<Option<Job>, FieldError> {
    let name = match v1::Collective::try_from(collective) {
        Ok(v1::Collective::Unspecified) => {
            if bytes_per_iteration != 0 {
                return Err(FieldError::new(
                    "bytes_per_iteration",
                    "given without a collective: set collective too",
                ));
            }
            if servers != 0 {
                return Err(FieldError::new(
                    "servers",
                    "given without a collective: set collective PARAMETER_SERVER",
                ));
            }
            return Ok(None);
        }
        Ok(v1::Collective::Ring) => "ring",
        Ok(v1::Collective::Hierarchical) => "hierarchical",
        Ok(v1::Collective::ParameterServer) => "parameter-server",
        Ok(v1::Collective::AllToAll) => "all-to-all",
        Err(_) => {
            return Err(FieldError::new(
                "collective",
                format!("{collective} is not a Collective"),
            ));
        }
    };
    let collective = Collective::parse("collective", name, "servers", servers)?;
    Job::checked(collective, bytes_per_iteration, workers).map(Some)
}

impl From<Collective> for v1::Collective {
    fn from(value: Collective) -> Self {
        match value {
            Collective::RingAllReduce => v1::Collective::Ring,
            Collective::HierarchicalAllReduce => v1::Collective::Hierarchical,
            Collective::ParameterServer { .. } => v1::Collective::ParameterServer,
            Collective::AllToAll => v1::Collective::AllToAll,
        }
    }
}

impl From<ZonePolicy> for v1::ZonePolicy {
    fn from(value: ZonePolicy) -> Self {
        match value {
            ZonePolicy::RequireOne => v1::ZonePolicy::RequireOne,
            ZonePolicy::PreferOne => v1::ZonePolicy::PreferOne,
            ZonePolicy::Any => v1::ZonePolicy::Any,
        }
    }
}

// The engine's answers, into messages.

impl From<Provenance> for v1::Provenance {
    fn from(value: Provenance) -> Self {
        match value {
            Provenance::Measured => v1::Provenance::Measured,
            Provenance::Estimated => v1::Provenance::Estimated,
            Provenance::Unknown => v1::Provenance::Unknown,
        }
    }
}

impl From<NodeState> for v1::NodeState {
    fn from(value: NodeState) -> Self {
        match value {
            NodeState::Ready => v1::NodeState::Ready,
            NodeState::Stale => v1::NodeState::Stale,
            NodeState::Down => v1::NodeState::Down,
            NodeState::Unreachable => v1::NodeState::Unreachable,
        }
    }
}

fn provenance(p: Provenance) -> i32 {
    v1::Provenance::from(p) as i32
}

impl From<RttSummary> for v1::RttStats {
    fn from(r: RttSummary) -> Self {
        Self {
            samples: r.samples,
            min_us: r.min_us,
            p50_us: r.p50_us,
            p90_us: r.p90_us,
            p99_us: r.p99_us,
            max_us: r.max_us,
            mean_us: r.mean_us,
            jitter_us: r.jitter_us,
        }
    }
}

impl From<PathFigures> for v1::PathFigures {
    fn from(f: PathFigures) -> Self {
        Self {
            latency_provenance: provenance(f.latency_provenance),
            latency_age_ms: f.latency_age_ms,
            rtt: f.rtt.map(Into::into),
            loss_ratio: f.loss_ratio,
            loss_upper_95_ratio: f.loss_upper_95_ratio,
            probes_sent: f.probes_sent,
            probes_received: f.probes_received,
            throughput_provenance: provenance(f.throughput_provenance),
            throughput_age_ms: f.throughput_age_ms,
            throughput_bps: f.throughput_bps,
            throughput_smoothed_bps: f.throughput_smoothed_bps,
            stale: f.stale,
            probes_sent_total: f.probes_sent_total,
            probes_received_total: f.probes_received_total,
            retransmit_ratio: f.retransmit_ratio,
            message_exchange_p50_us: f.message_exchange_p50_us,
            message_exchange_mean_us: f.message_exchange_mean_us,
        }
    }
}

fn optional_name(name: Option<ZoneName>) -> String {
    name.map(String::from).unwrap_or_default()
}

impl From<NodeView> for v1::Node {
    fn from(n: NodeView) -> Self {
        Self {
            name: n.name.into(),
            zone: n.zone.into(),
            region: optional_name(n.region),
            addresses: n.addresses.iter().map(ToString::to_string).collect(),
            state: v1::NodeState::from(n.state) as i32,
            state_reason: n.state_reason.to_owned(),
            last_seen_unix_ms: n.last_seen.map_or(0, |t| t.0),
            agent_version: n.agent_version,
            icmp_mode: n.icmp_mode.map_or(0, |m| v1::IcmpMode::from(m) as i32),
            probe_port: u32::from(n.probe_port),
            zone_rtt_p50_us: n.zone_rtt_p50_us,
            zone_loss_ratio: n.zone_loss_ratio,
            zone_throughput_bps: n.zone_throughput_bps,
            zone_paths_measured: n.zone_paths_measured,
            connected: n.connected,
            nodes_left_out: n.nodes_left_out.into_iter().map(Into::into).collect(),
            egress_cap_bps: n.egress_cap_bps.unwrap_or(0.0),
            ingress_cap_bps: n.ingress_cap_bps.unwrap_or(0.0),
        }
    }
}

impl From<ZoneView> for v1::Zone {
    fn from(z: ZoneView) -> Self {
        Self {
            name: z.name.into(),
            region: optional_name(z.region),
            nodes: z.nodes,
            ready_nodes: z.ready_nodes,
        }
    }
}

impl From<ZoneLink> for v1::ZoneLink {
    fn from(l: ZoneLink) -> Self {
        Self {
            src_zone: l.src_zone.into(),
            dst_zone: l.dst_zone.into(),
            figures: Some(l.figures.into()),
            measured_paths: l.measured_paths,
            nodes_left_out: l.nodes_left_out.into_iter().map(Into::into).collect(),
            faults: l.faults.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<Zones> for v1::ListZonesResponse {
    fn from(z: Zones) -> Self {
        Self {
            zones: z.zones.into_iter().map(Into::into).collect(),
            links: z.links.into_iter().map(Into::into).collect(),
            next_page_token: next_page_token(z.next_offset),
        }
    }
}

impl From<Nodes> for v1::ListNodesResponse {
    fn from(n: Nodes) -> Self {
        Self {
            nodes: n.nodes.into_iter().map(Into::into).collect(),
            next_page_token: next_page_token(n.next_offset),
        }
    }
}

impl From<PathAnswer> for v1::GetPathResponse {
    fn from(p: PathAnswer) -> Self {
        Self {
            src: p.src.into(),
            dst: p.dst.into(),
            figures: Some(p.figures.into()),
            faults: p.faults.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<MatrixCell> for v1::MatrixCell {
    fn from(c: MatrixCell) -> Self {
        Self {
            value: c.value,
            provenance: provenance(c.provenance),
            age_ms: c.age_ms,
            stale: c.stale,
        }
    }
}

impl From<Matrix> for v1::GetMatrixResponse {
    fn from(m: Matrix) -> Self {
        Self {
            metric: v1::Metric::from(m.metric) as i32,
            nodes: m.nodes.into_iter().map(String::from).collect(),
            cells: m.cells.into_iter().map(Into::into).collect(),
            first_row: u32::try_from(m.first_row).unwrap_or(u32::MAX),
            next_page_token: next_page_token(m.next_offset),
        }
    }
}

impl From<RankedNode> for v1::RankedNode {
    fn from(r: RankedNode) -> Self {
        Self {
            node: r.node.into(),
            zone: r.zone.into(),
            score: r.score,
            state: v1::NodeState::from(r.state) as i32,
            reason: r.reason,
            rtt_p50_us: r.rtt_p50_us,
            loss_ratio: r.loss_ratio,
            throughput_bps: r.throughput_bps,
            paths_measured: r.paths_measured,
            paths_estimated: r.paths_estimated,
            oldest_age_ms: r.oldest_age_ms,
            nodes_left_out: r.nodes_left_out.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<Ranking> for v1::RankNodesResponse {
    fn from(r: Ranking) -> Self {
        Self {
            nodes: r.nodes.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<Assignment> for v1::Assignment {
    fn from(a: Assignment) -> Self {
        Self {
            node: a.node.into(),
            zone: a.zone.into(),
            workers: a.workers,
        }
    }
}

impl From<PlaceAnswer> for v1::PlaceResponse {
    fn from(p: PlaceAnswer) -> Self {
        Self {
            assignments: p.assignments.into_iter().map(Into::into).collect(),
            zones: p.zones.into_iter().map(String::from).collect(),
            worst_rtt_us: p.worst_rtt_us,
            worst_loss_ratio: p.worst_loss_ratio,
            bottleneck_throughput_bps: p.bottleneck_throughput_bps.unwrap_or(0.0),
            latency_provenance: provenance(p.latency_provenance),
            throughput_provenance: provenance(p.throughput_provenance),
            oldest_age_ms: p.oldest_age_ms,
            explanation: p.explanation,
            rank_order: p.ranks.into_iter().map(String::from).collect(),
            predicted_seconds: p.prediction.as_ref().map_or(0.0, |j| j.seconds),
            bottleneck: p
                .prediction
                .as_ref()
                .map(|j| bottleneck(&j.bottleneck, &j.why)),
            prediction_figures: p.prediction.as_ref().map_or(0, |j| j.figures),
            estimated_figures: p.prediction.as_ref().map_or(0, |j| j.estimated_figures),
            alternatives: p
                .alternatives
                .into_iter()
                .map(|a| v1::PlaceAlternative {
                    rank_order: a.ranks.into_iter().map(String::from).collect(),
                    predicted_seconds: a.seconds,
                })
                .collect(),
        }
    }
}

fn bottleneck(b: &JobBottleneck, why: &str) -> v1::Bottleneck {
    use v1::BottleneckKind as K;
    let (kind, from, to) = match b {
        JobBottleneck::None => (K::None, String::new(), String::new()),
        JobBottleneck::Link { from, to } => (K::Link, from.to_string(), to.to_string()),
        JobBottleneck::Node {
            node,
            ingress: false,
        } => (K::NodeEgress, node.to_string(), String::new()),
        JobBottleneck::Node {
            node,
            ingress: true,
        } => (K::NodeIngress, String::new(), node.to_string()),
        JobBottleneck::Zones { from, to } => (K::Zones, from.to_string(), to.to_string()),
        JobBottleneck::RingLatency => (K::RingLatency, String::new(), String::new()),
    };
    v1::Bottleneck {
        kind: kind as i32,
        from,
        to,
        why: why.to_owned(),
    }
}

impl From<ProbeTarget> for v1::ProbeTarget {
    fn from(t: ProbeTarget) -> Self {
        Self {
            node: t.node.into(),
            addresses: t.addresses.iter().map(ToString::to_string).collect(),
            probe_port: u32::from(t.probe_port),
            interval_ms: t.interval_ms,
            train_size: t.train_size,
            train_gap_ms: t.train_gap_ms,
            timeout_ms: t.timeout_ms,
            zone: t.zone.into(),
        }
    }
}

impl From<ProbePlan> for v1::ProbePlan {
    fn from(p: ProbePlan) -> Self {
        Self {
            version: p.version,
            window_ms: p.window_ms,
            targets: p.targets.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<ThroughputGrant> for v1::ThroughputGrant {
    fn from(g: ThroughputGrant) -> Self {
        Self {
            grant_id: g.id,
            peer: g.peer.into(),
            peer_address: g.peer_address.map(|a| a.to_string()).unwrap_or_default(),
            peer_port: u32::from(g.peer_port),
            start_unix_ms: g.start.0,
            duration_ms: g.duration_ms,
            warmup_ms: g.warmup_ms,
            streams: g.streams,
            epoch: g.epoch,
        }
    }
}

impl TryFrom<v1::ProbeTarget> for ProbeTarget {
    type Error = FieldError;

    fn try_from(wire: v1::ProbeTarget) -> Result<Self, FieldError> {
        Self {
            node: NodeName::parse("node", wire.node)?,
            zone: ZoneName::parse("zone", wire.zone)?,
            addresses: addresses("addresses", &wire.addresses)?,
            probe_port: tcp_port("probe_port", wire.probe_port)?,
            interval_ms: wire.interval_ms,
            train_size: wire.train_size,
            train_gap_ms: wire.train_gap_ms,
            timeout_ms: wire.timeout_ms,
        }
        .checked()
    }
}

/// Reads a plan target by target: the plan of the targets that convert, and the refusals of the
/// others, each naming its field within the plan (`targets[3].addresses[0]`). An agent probes
/// the peers of a plan it can probe rather than none of them.
pub fn probe_plan(wire: v1::ProbePlan) -> (ProbePlan, Vec<FieldError>) {
    let mut targets = Vec::with_capacity(wire.targets.len());
    let mut refused = Vec::new();
    for (i, t) in wire.targets.into_iter().enumerate() {
        match ProbeTarget::try_from(t) {
            Ok(t) => targets.push(t),
            Err(e) => refused.push(e.within(&format!("targets[{i}]"))),
        }
    }
    let plan = ProbePlan {
        version: wire.version,
        window_ms: wire.window_ms,
        targets,
    };
    (plan, refused)
}

impl TryFrom<v1::ProbePlan> for ProbePlan {
    type Error = FieldError;

    /// Every target must convert ([`probe_plan`] keeps those that do).
    fn try_from(wire: v1::ProbePlan) -> Result<Self, FieldError> {
        let (plan, refused) = probe_plan(wire);
        match refused.into_iter().next() {
            Some(first) => Err(first),
            None => Ok(plan),
        }
    }
}

impl TryFrom<v1::ThroughputGrant> for ThroughputGrant {
    type Error = FieldError;

    /// An empty `peer_address` is none (the peer advertised none).
    fn try_from(wire: v1::ThroughputGrant) -> Result<Self, FieldError> {
        let peer = NodeName::parse("peer", wire.peer)?;
        let peer_address = match wire.peer_address.as_str() {
            "" => None,
            a => Some(address("peer_address", a)?),
        };
        Ok(Self {
            id: wire.grant_id,
            peer,
            peer_address,
            peer_port: tcp_port("peer_port", wire.peer_port)?,
            start: UnixMs::parse("start_unix_ms", wire.start_unix_ms)?,
            duration_ms: wire.duration_ms,
            warmup_ms: wire.warmup_ms,
            streams: wire.streams,
            epoch: wire.epoch,
        })
    }
}

// The tiers, both ways: out of the aggregator, and back in where a client acts on them (the
// publisher's dry run), checked like any wire value.

impl From<TierThresholds> for v1::TierThresholds {
    fn from(t: TierThresholds) -> Self {
        Self {
            join_rtt_us: t.join_rtt_us,
            leave_rtt_us: t.leave_rtt_us,
            join_throughput_bps: t.join_throughput_bps,
            leave_throughput_bps: t.leave_throughput_bps,
        }
    }
}

impl From<PairFigure> for v1::ZonePairFigure {
    fn from(p: PairFigure) -> Self {
        Self {
            zone_a: p.a.into(),
            zone_b: p.b.into(),
            value: p.value,
        }
    }
}

impl From<CutFigures> for v1::CutFigures {
    fn from(c: CutFigures) -> Self {
        Self {
            worst_rtt: c.worst_rtt.map(Into::into),
            lowest_throughput: c.lowest_throughput.map(Into::into),
            unmeasured_pairs: c.unmeasured_pairs,
            stale_pairs: c.stale_pairs,
        }
    }
}

impl From<Cut> for v1::TierCut {
    fn from(c: Cut) -> Self {
        match c {
            Cut::Rtt => v1::TierCut::Rtt,
            Cut::Throughput => v1::TierCut::Throughput,
            Cut::Unmeasured => v1::TierCut::Unmeasured,
            Cut::Stale => v1::TierCut::Stale,
        }
    }
}

impl From<Faults> for v1::ListFaultsResponse {
    fn from(f: Faults) -> Self {
        Self {
            faults: f.faults.into_iter().map(v1::Fault::from).collect(),
            evaluated_unix_ms: f.evaluated_at.map_or(0, |t| t.0),
        }
    }
}

impl TryFrom<v1::ListFaultsResponse> for Faults {
    type Error = FieldError;

    /// Checks an answer of `ListFaults` (a client reading faults); the errors name the field.
    fn try_from(r: v1::ListFaultsResponse) -> Result<Self, FieldError> {
        let faults = r
            .faults
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let at = |e: FieldError| e.within(&format!("faults[{i}]"));
                let node = |v: String, field: &str| NodeName::parse(field, v);
                let evidence = f
                    .evidence
                    .into_iter()
                    .map(|p| Ok((node(p.src, "src")?, node(p.dst, "dst")?)))
                    .collect::<Result<Vec<_>, FieldError>>()
                    .map_err(|e| at(e.within("evidence")))?;
                let loss = f.kind == v1::FaultKind::Loss as i32 && f.figure_high > 0.0;
                Ok(Fault {
                    element: element_from_wire(f.element, f.a, f.b).map_err(at)?,
                    kind: fault_kind_from_wire("kind", f.kind).map_err(at)?,
                    severity: match v1::FaultSeverity::try_from(f.severity) {
                        Ok(v1::FaultSeverity::Degraded) => zonemesh_domain::Severity::Degraded,
                        Ok(v1::FaultSeverity::Down) => zonemesh_domain::Severity::Down,
                        _ => {
                            return Err(at(FieldError::new(
                                "severity",
                                format!("{} is no FaultSeverity", f.severity),
                            )));
                        }
                    },
                    figure: f.figure,
                    interval: loss.then_some((f.figure_low, f.figure_high)),
                    probes: f.probes,
                    reference: (f.reference != 0.0).then_some(f.reference),
                    evidence,
                    evidence_paths: f.evidence_paths,
                    since: UnixMs(f.since_unix_ms),
                    clean_since: (f.clean_since_unix_ms != 0)
                        .then_some(UnixMs(f.clean_since_unix_ms)),
                })
            })
            .collect::<Result<Vec<_>, FieldError>>()?;
        Ok(Faults {
            faults,
            evaluated_at: (r.evaluated_unix_ms != 0).then_some(UnixMs(r.evaluated_unix_ms)),
        })
    }
}

/// A fault's element on the wire: its kind and its one or two names (`b` empty for a node).
pub fn fault_element(e: Element) -> (v1::FaultElement, String, String) {
    match e {
        Element::Node(n) => (v1::FaultElement::Node, n.into(), String::new()),
        Element::Egress(n) => (v1::FaultElement::Egress, n.into(), String::new()),
        Element::Ingress(n) => (v1::FaultElement::Ingress, n.into(), String::new()),
        Element::ZoneLink(a, b) => (v1::FaultElement::ZoneLink, a.into(), b.into()),
        Element::Path(a, b) => (v1::FaultElement::Path, a.into(), b.into()),
    }
}

/// Checks a wire fault element (`element`, `a`, `b`); the errors name those fields.
pub fn element_from_wire(element: i32, a: String, b: String) -> Result<Element, FieldError> {
    let node = |v: String| NodeName::parse("a", v);
    match v1::FaultElement::try_from(element) {
        Ok(v1::FaultElement::Node) => Ok(Element::Node(node(a)?)),
        Ok(v1::FaultElement::Egress) => Ok(Element::Egress(node(a)?)),
        Ok(v1::FaultElement::Ingress) => Ok(Element::Ingress(node(a)?)),
        Ok(v1::FaultElement::ZoneLink) => Ok(Element::zone_link(
            ZoneName::parse("a", a)?,
            ZoneName::parse("b", b)?,
        )),
        Ok(v1::FaultElement::Path) => Ok(Element::path(
            NodeName::parse("a", a)?,
            NodeName::parse("b", b)?,
        )),
        Ok(v1::FaultElement::Unspecified) => Err(FieldError::new("element", "must be set")),
        Err(_) => Err(FieldError::new(
            "element",
            format!("{element} is not a FaultElement"),
        )),
    }
}

/// A fault kind on the wire.
pub fn fault_kind(k: FaultKind) -> v1::FaultKind {
    match k {
        FaultKind::Loss => v1::FaultKind::Loss,
        FaultKind::Delay => v1::FaultKind::Delay,
        FaultKind::Rate => v1::FaultKind::Rate,
    }
}

/// Checks a wire fault kind; `field` names it in the error.
pub fn fault_kind_from_wire(field: &str, value: i32) -> Result<FaultKind, FieldError> {
    match v1::FaultKind::try_from(value) {
        Ok(v1::FaultKind::Loss) => Ok(FaultKind::Loss),
        Ok(v1::FaultKind::Delay) => Ok(FaultKind::Delay),
        Ok(v1::FaultKind::Rate) => Ok(FaultKind::Rate),
        Ok(v1::FaultKind::Unspecified) => Err(FieldError::new(field, "must be set")),
        Err(_) => Err(FieldError::new(
            field,
            format!("{value} is not a FaultKind"),
        )),
    }
}

impl From<Fault> for v1::Fault {
    fn from(f: Fault) -> Self {
        let (element, a, b) = fault_element(f.element);
        let (figure_low, figure_high) = f.interval.unwrap_or((0.0, 0.0));
        Self {
            element: element as i32,
            a,
            b,
            kind: fault_kind(f.kind) as i32,
            severity: match f.severity {
                zonemesh_domain::Severity::Degraded => v1::FaultSeverity::Degraded,
                zonemesh_domain::Severity::Down => v1::FaultSeverity::Down,
            } as i32,
            figure: f.figure,
            figure_low,
            figure_high,
            reference: f.reference.unwrap_or(0.0),
            evidence: f
                .evidence
                .into_iter()
                .map(|(src, dst)| v1::FaultPath {
                    src: src.into(),
                    dst: dst.into(),
                })
                .collect(),
            evidence_paths: f.evidence_paths,
            since_unix_ms: f.since.0,
            clean_since_unix_ms: f.clean_since.map_or(0, |t| t.0),
            probes: f.probes,
        }
    }
}

impl From<Tiers> for v1::GetTiersResponse {
    fn from(t: Tiers) -> Self {
        Self {
            computed_at_unix_ms: t.computed_at.0,
            thresholds: Some(t.thresholds.into()),
            zones: t
                .zones
                .into_iter()
                .map(|z| v1::TierZone {
                    name: z.name.into(),
                    group: z.group.into(),
                    nodes: z.nodes.into_iter().map(String::from).collect(),
                    fresh: z.fresh,
                    rtt_us: z.rtt_us.unwrap_or(0.0),
                    throughput_bps: z.throughput_bps.unwrap_or(0.0),
                    region: optional_name(z.region),
                })
                .collect(),
            groups: t
                .groups
                .into_iter()
                .map(|g| v1::TierGroup {
                    name: g.name.into(),
                    zones: g.zones.into_iter().map(String::from).collect(),
                    inside: Some(g.inside.into()),
                    held: g.held,
                    nearest: g.nearest.map(|l| v1::TierGroupLink {
                        group: l.group.into(),
                        figures: Some(l.figures.into()),
                        cut: v1::TierCut::from(l.cut) as i32,
                    }),
                })
                .collect(),
            cluster: Some(t.cluster.into()),
            pairs: t
                .pairs
                .into_iter()
                .map(|p| v1::TierZonePair {
                    zone_a: p.a.into(),
                    zone_b: p.b.into(),
                    rtt_us: p.rtt_us.unwrap_or(0.0),
                    throughput_bps: p.throughput_bps.unwrap_or(0.0),
                    fresh: p.fresh,
                })
                .collect(),
        }
    }
}

fn figure(field: &str, value: f64) -> Result<f64, FieldError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(FieldError::new(
            field,
            format!("{value} is not a figure >= 0"),
        ))
    }
}

fn known(field: &str, value: f64) -> Result<Option<f64>, FieldError> {
    figure(field, value).map(|v| (v > 0.0).then_some(v))
}

impl TryFrom<v1::ZonePairFigure> for PairFigure {
    type Error = FieldError;

    fn try_from(p: v1::ZonePairFigure) -> Result<Self, FieldError> {
        Ok(Self {
            a: ZoneName::parse("zone_a", p.zone_a)?,
            b: ZoneName::parse("zone_b", p.zone_b)?,
            value: figure("value", p.value)?,
        })
    }
}

impl TryFrom<v1::CutFigures> for CutFigures {
    type Error = FieldError;

    fn try_from(c: v1::CutFigures) -> Result<Self, FieldError> {
        Ok(Self {
            worst_rtt: c
                .worst_rtt
                .map(|p| PairFigure::try_from(p).map_err(|e| e.within("worst_rtt")))
                .transpose()?,
            lowest_throughput: c
                .lowest_throughput
                .map(|p| PairFigure::try_from(p).map_err(|e| e.within("lowest_throughput")))
                .transpose()?,
            unmeasured_pairs: c.unmeasured_pairs,
            stale_pairs: c.stale_pairs,
        })
    }
}

fn cut_figures(field: &str, c: Option<v1::CutFigures>) -> Result<CutFigures, FieldError> {
    CutFigures::try_from(c.unwrap_or_default()).map_err(|e| e.within(field))
}

impl TryFrom<v1::GetTiersResponse> for Tiers {
    type Error = FieldError;

    /// Checks every name and figure, and that every zone and node is in exactly one place
    /// ([`Tiers::check`]): the publisher names Kubernetes objects after them.
    fn try_from(t: v1::GetTiersResponse) -> Result<Self, FieldError> {
        let th = t.thresholds.unwrap_or_default();
        let thresholds = TierThresholds {
            join_rtt_us: th.join_rtt_us,
            leave_rtt_us: th.leave_rtt_us,
            join_throughput_bps: th.join_throughput_bps,
            leave_throughput_bps: th.leave_throughput_bps,
        }
        .checked()
        .map_err(|e| e.within("thresholds"))?;
        let zones = t
            .zones
            .into_iter()
            .enumerate()
            .map(|(i, z)| {
                let at = format!("zones[{i}]");
                Ok(TierZone {
                    name: ZoneName::parse("name", z.name).map_err(|e| e.within(&at))?,
                    group: ZoneName::parse("group", z.group).map_err(|e| e.within(&at))?,
                    region: ZoneName::parse_optional("region", z.region)
                        .map_err(|e| e.within(&at))?,
                    nodes: node_names("nodes", z.nodes).map_err(|e| e.within(&at))?,
                    fresh: z.fresh,
                    rtt_us: known("rtt_us", z.rtt_us).map_err(|e| e.within(&at))?,
                    throughput_bps: known("throughput_bps", z.throughput_bps)
                        .map_err(|e| e.within(&at))?,
                })
            })
            .collect::<Result<Vec<_>, FieldError>>()?;
        let groups = t
            .groups
            .into_iter()
            .enumerate()
            .map(|(i, g)| {
                let at = format!("groups[{i}]");
                let zones = g
                    .zones
                    .into_iter()
                    .enumerate()
                    .map(|(j, z)| ZoneName::parse(&format!("zones[{j}]"), z))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.within(&at))?;
                let nearest = g
                    .nearest
                    .map(|l| {
                        let cut = match v1::TierCut::try_from(l.cut) {
                            Ok(v1::TierCut::Rtt) => Cut::Rtt,
                            Ok(v1::TierCut::Throughput) => Cut::Throughput,
                            Ok(v1::TierCut::Unmeasured) => Cut::Unmeasured,
                            Ok(v1::TierCut::Stale) => Cut::Stale,
                            _ => {
                                return Err(FieldError::new(
                                    "cut",
                                    format!("{} is not a TierCut", l.cut),
                                ));
                            }
                        };
                        Ok(GroupLink {
                            group: ZoneName::parse("group", l.group)?,
                            figures: cut_figures("figures", l.figures)?,
                            cut,
                        })
                    })
                    .transpose()
                    .map_err(|e| e.within(&format!("{at}.nearest")))?;
                Ok(TierGroup {
                    name: ZoneName::parse("name", g.name).map_err(|e| e.within(&at))?,
                    zones,
                    inside: cut_figures("inside", g.inside).map_err(|e| e.within(&at))?,
                    held: g.held,
                    nearest,
                })
            })
            .collect::<Result<Vec<_>, FieldError>>()?;
        let tiers = Tiers {
            computed_at: UnixMs(t.computed_at_unix_ms),
            thresholds,
            zones,
            groups,
            cluster: cut_figures("cluster", t.cluster)?,
            pairs: t
                .pairs
                .into_iter()
                .enumerate()
                .map(|(i, p)| {
                    let at = format!("pairs[{i}]");
                    Ok(ZonePair {
                        a: ZoneName::parse("zone_a", p.zone_a).map_err(|e| e.within(&at))?,
                        b: ZoneName::parse("zone_b", p.zone_b).map_err(|e| e.within(&at))?,
                        rtt_us: known("rtt_us", p.rtt_us).map_err(|e| e.within(&at))?,
                        throughput_bps: known("throughput_bps", p.throughput_bps)
                            .map_err(|e| e.within(&at))?,
                        fresh: p.fresh,
                    })
                })
                .collect::<Result<Vec<_>, FieldError>>()?,
        };
        tiers.check()?;
        Ok(tiers)
    }
}
