//! The stored records: protobuf messages (prost) with a version in the meta record, so that the
//! format can grow the way the wire protocol does (fields added, never renumbered). Decoding
//! checks every value again: a damaged record is an error, never a silently wrong figure.

use prost::Message;
use zonemesh_domain::{IcmpMode, NodeName, UnixMs, ZoneName};
use zonemesh_proto::v1;

use zonemesh_engine::faults::{Baseline, Baselines};
use zonemesh_engine::path::{RttFigures, TcpFigures, ThroughputState, Window};
use zonemesh_engine::tiers::{GROUP_PREFIX, TierState};
use zonemesh_engine::{PathState, StoredNode};

/// Key of the meta record.
pub const META_KEY: &[u8] = b"meta/format";
/// Value of the meta record for this format.
pub const FORMAT: &[u8] = b"zonemesh-store-1";
/// Prefix of node keys (`n/<name>`).
pub const NODE_PREFIX: &[u8] = b"n/";
/// Prefix of row keys (`r/<src>`: every outgoing path of a node).
pub const ROW_PREFIX: &[u8] = b"r/";
/// Key of the tiers' state (one record: each zone's group and the next group number).
pub const TIERS_KEY: &[u8] = b"t/state";
/// Key of the faults' baselines (one record: what each element's delay, and each zone link's
/// capacity, is judged against).
pub const BASELINES_KEY: &[u8] = b"f/baselines";
/// Key of a replica's place in the replicated log: the last entry applied and the applier's
/// clock (only with `--cluster`).
pub const CLUSTER_KEY: &[u8] = b"c/log";
/// Key of the nodes in id order (only with `--cluster`; written when a node is added).
pub const NODE_ORDER_KEY: &[u8] = b"c/nodes";
/// Key of the cluster's open sessions (only with `--cluster`; written when one opens or ends).
pub const SESSIONS_KEY: &[u8] = b"c/sessions";
/// Key of the throughput tests nodes take part in (only with `--cluster`; written when one is
/// noted).
pub const TESTS_KEY: &[u8] = b"c/tests";

#[derive(Clone, PartialEq, Message)]
struct NodeRecord {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    zone: String,
    #[prost(string, tag = "3")]
    region: String,
    #[prost(string, repeated, tag = "4")]
    addresses: Vec<String>,
    #[prost(string, tag = "5")]
    agent_version: String,
    #[prost(int32, tag = "6")]
    icmp_mode: i32,
    #[prost(uint32, tag = "7")]
    probe_port: u32,
    #[prost(bool, tag = "8")]
    registered: bool,
    #[prost(int64, optional, tag = "9")]
    last_seen_unix_ms: Option<i64>,
    #[prost(uint64, tag = "10")]
    applied_seq: u64,
    /// Absent in records written before the agents read it.
    #[prost(float, optional, tag = "11")]
    exchange_timeout_us: Option<f32>,
}

#[derive(Clone, PartialEq, Message)]
struct RttRecord {
    #[prost(uint64, tag = "1")]
    samples: u64,
    #[prost(float, repeated, tag = "2")]
    min_p50_p90_p99_max_mean_jitter_us: Vec<f32>,
}

#[derive(Clone, PartialEq, Message)]
struct WindowRecord {
    #[prost(int64, tag = "1")]
    at_unix_ms: i64,
    #[prost(uint64, tag = "2")]
    sent: u64,
    #[prost(uint64, tag = "3")]
    received: u64,
    #[prost(message, optional, tag = "4")]
    rtt: Option<RttRecord>,
}

#[derive(Clone, PartialEq, Message)]
struct ThroughputRecord {
    #[prost(int64, tag = "1")]
    at_unix_ms: i64,
    #[prost(double, tag = "2")]
    latest_bps: f64,
    #[prost(double, tag = "3")]
    smoothed_bps: f64,
    /// Absent in records written before the tests read them.
    #[prost(float, optional, tag = "4")]
    retransmit_ratio: Option<f32>,
    #[prost(float, optional, tag = "5")]
    exchange_p50_us: Option<f32>,
    #[prost(float, optional, tag = "6")]
    exchange_mean_us: Option<f32>,
}

#[derive(Clone, PartialEq, Message)]
struct RowPath {
    #[prost(string, tag = "1")]
    dst: String,
    #[prost(message, optional, tag = "2")]
    path: Option<PathRecord>,
}

#[derive(Clone, PartialEq, Message)]
struct RowRecord {
    #[prost(message, repeated, tag = "1")]
    paths: Vec<RowPath>,
}

#[derive(Clone, PartialEq, Message)]
struct PathRecord {
    #[prost(message, repeated, tag = "1")]
    windows: Vec<WindowRecord>,
    #[prost(uint64, tag = "2")]
    sent_total: u64,
    #[prost(uint64, tag = "3")]
    received_total: u64,
    #[prost(int64, optional, tag = "4")]
    last_update_unix_ms: Option<i64>,
    #[prost(message, optional, tag = "5")]
    throughput: Option<ThroughputRecord>,
    #[prost(int64, optional, tag = "6")]
    withheld_unix_ms: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct ZoneGroupRecord {
    #[prost(string, tag = "1")]
    zone: String,
    #[prost(string, tag = "2")]
    group: String,
}

#[derive(Clone, PartialEq, Message)]
struct TiersRecord {
    #[prost(message, repeated, tag = "1")]
    zones: Vec<ZoneGroupRecord>,
    #[prost(uint64, tag = "2")]
    next_group: u64,
}

#[derive(Clone, PartialEq, Message)]
struct BaselineRecord {
    /// A `zonemesh.v1.FaultElement`.
    #[prost(int32, tag = "1")]
    element: i32,
    #[prost(string, tag = "2")]
    a: String,
    #[prost(string, tag = "3")]
    b: String,
    /// A `zonemesh.v1.FaultKind`.
    #[prost(int32, tag = "4")]
    kind: i32,
    #[prost(double, tag = "5")]
    value: f64,
    #[prost(int64, tag = "6")]
    first_seen_unix_ms: i64,
    #[prost(int64, tag = "7")]
    updated_unix_ms: i64,
    #[prost(int64, tag = "8")]
    seen_unix_ms: i64,
    #[prost(uint32, tag = "9")]
    samples: u32,
}

#[derive(Clone, PartialEq, Message)]
struct BaselinesRecord {
    #[prost(message, repeated, tag = "1")]
    baselines: Vec<BaselineRecord>,
}

#[derive(Clone, PartialEq, Message)]
struct SessionRecord {
    #[prost(string, tag = "1")]
    node: String,
    #[prost(uint64, tag = "2")]
    session: u64,
    #[prost(string, tag = "3")]
    replica: String,
}

#[derive(Clone, PartialEq, Message)]
struct ClusterRecord {
    #[prost(uint64, tag = "1")]
    applied_seq: u64,
    #[prost(int64, tag = "2")]
    clock_unix_ms: i64,
}

#[derive(Clone, PartialEq, Message)]
struct NodeOrderRecord {
    #[prost(string, repeated, tag = "1")]
    nodes: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeTestsRecord {
    #[prost(string, tag = "1")]
    node: String,
    /// Start and end of each test, Unix ms, in pairs.
    #[prost(int64, repeated, tag = "2")]
    from_until_unix_ms: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct TestsRecord {
    #[prost(message, repeated, tag = "1")]
    nodes: Vec<NodeTestsRecord>,
}

#[derive(Clone, PartialEq, Message)]
struct SessionsRecord {
    #[prost(message, repeated, tag = "1")]
    sessions: Vec<SessionRecord>,
}

/// The records of a replica's place in the log: always the last entry and the clock; the node
/// order and the sessions when given.
fn cluster_records(meta: &super::ClusterMeta, out: &mut Vec<super::Record>) {
    let place = ClusterRecord {
        applied_seq: meta.applied_seq,
        clock_unix_ms: meta.clock.0,
    };
    out.push((CLUSTER_KEY.to_vec(), place.encode_to_vec()));
    if let Some(order) = &meta.node_order {
        let nodes = order.iter().map(ToString::to_string).collect();
        out.push((
            NODE_ORDER_KEY.to_vec(),
            NodeOrderRecord { nodes }.encode_to_vec(),
        ));
    }
    if let Some(sessions) = &meta.sessions {
        let sessions = sessions
            .iter()
            .map(|(node, session, replica)| SessionRecord {
                node: node.to_string(),
                session: *session,
                replica: replica.clone(),
            })
            .collect();
        out.push((
            SESSIONS_KEY.to_vec(),
            SessionsRecord { sessions }.encode_to_vec(),
        ));
    }
}

/// Decodes one of the cluster's records into `meta`.
fn decode_cluster_into(
    meta: &mut super::ClusterMeta,
    key: &[u8],
    value: &[u8],
) -> Result<(), CodecError> {
    if key == CLUSTER_KEY {
        let r = ClusterRecord::decode(value)?;
        meta.applied_seq = r.applied_seq;
        meta.clock = UnixMs(r.clock_unix_ms);
    } else if key == NODE_ORDER_KEY {
        let r = NodeOrderRecord::decode(value)?;
        let order = r
            .nodes
            .into_iter()
            .enumerate()
            .map(|(i, n)| NodeName::parse(&format!("nodes[{i}]"), n))
            .collect::<Result<_, _>>()?;
        meta.node_order = Some(order);
    } else if key == TESTS_KEY {
        let r = TestsRecord::decode(value)?;
        let mut tests = Vec::with_capacity(r.nodes.len());
        for (i, n) in r.nodes.into_iter().enumerate() {
            let node = NodeName::parse(&format!("nodes[{i}].node"), n.node)?;
            if n.from_until_unix_ms.len() % 2 != 0 {
                return Err(CodecError::Invalid(format!(
                    "nodes[{i}].from_until_unix_ms: an odd count, not pairs"
                )));
            }
            let pairs = n
                .from_until_unix_ms
                .chunks(2)
                .map(|p| (UnixMs(p[0]), UnixMs(p[1])))
                .collect();
            tests.push((node, pairs));
        }
        meta.tests = Some(tests);
    } else {
        let r = SessionsRecord::decode(value)?;
        let sessions = r
            .sessions
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                Ok((
                    NodeName::parse(&format!("sessions[{i}].node"), s.node)?,
                    s.session,
                    s.replica,
                ))
            })
            .collect::<Result<_, CodecError>>()?;
        meta.sessions = Some(sessions);
    }
    Ok(())
}

/// Every record a batch writes, as key and value (the meta record first).
pub fn records(batch: &super::Batch) -> Vec<super::Record> {
    let mut out = Vec::with_capacity(2 + batch.nodes.len() + batch.rows.len());
    out.push((META_KEY.to_vec(), FORMAT.to_vec()));
    for node in &batch.nodes {
        out.push((node_key(&node.name), encode_node(node)));
    }
    for row in &batch.rows {
        out.push((row_key(&row.src), encode_row(row)));
    }
    if let Some(tiers) = &batch.tiers {
        out.push((TIERS_KEY.to_vec(), encode_tiers(tiers)));
    }
    if let Some(baselines) = &batch.baselines {
        out.push((BASELINES_KEY.to_vec(), encode_baselines(baselines)));
    }
    if let Some(cluster) = &batch.cluster {
        cluster_records(cluster, &mut out);
    }
    out
}

/// Encodes the faults' baselines.
pub fn encode_baselines(baselines: &Baselines) -> Vec<u8> {
    BaselinesRecord {
        baselines: baselines
            .entries()
            .into_iter()
            .map(|(element, kind, b)| {
                let (element, a, b_name) = zonemesh_proto::convert::fault_element(element);
                BaselineRecord {
                    element: element as i32,
                    a,
                    b: b_name,
                    kind: zonemesh_proto::convert::fault_kind(kind) as i32,
                    value: b.value,
                    first_seen_unix_ms: b.first_seen.0,
                    updated_unix_ms: b.updated.0,
                    seen_unix_ms: b.seen.0,
                    samples: b.samples,
                }
            })
            .collect(),
    }
    .encode_to_vec()
}

/// Decodes the faults' baselines: known elements and kinds, valid names, finite figures, times
/// in order, each element's kind once.
pub fn decode_baselines(bytes: &[u8]) -> Result<Baselines, CodecError> {
    let r = BaselinesRecord::decode(bytes)?;
    let mut entries = Vec::with_capacity(r.baselines.len());
    let mut seen = std::collections::HashSet::new();
    for (i, b) in r.baselines.into_iter().enumerate() {
        let within = |e: zonemesh_domain::FieldError| e.within(&format!("baselines[{i}]"));
        let element =
            zonemesh_proto::convert::element_from_wire(b.element, b.a, b.b).map_err(within)?;
        let kind = zonemesh_proto::convert::fault_kind_from_wire("kind", b.kind).map_err(within)?;
        if !b.value.is_finite() {
            return Err(CodecError::Invalid(format!(
                "baselines[{i}].value: {} is not a figure",
                b.value
            )));
        }
        if !(0 <= b.first_seen_unix_ms
            && b.first_seen_unix_ms <= b.updated_unix_ms
            && b.updated_unix_ms <= b.seen_unix_ms)
        {
            return Err(CodecError::Invalid(format!(
                "baselines[{i}]: first seen {}, updated {}, seen {} are not in order",
                b.first_seen_unix_ms, b.updated_unix_ms, b.seen_unix_ms
            )));
        }
        if !seen.insert((element.clone(), kind)) {
            return Err(CodecError::Invalid(format!(
                "baselines[{i}]: {element} {} is listed twice",
                kind.as_str()
            )));
        }
        entries.push((
            element,
            kind,
            Baseline {
                value: b.value,
                first_seen: UnixMs(b.first_seen_unix_ms),
                updated: UnixMs(b.updated_unix_ms),
                seen: UnixMs(b.seen_unix_ms),
                samples: b.samples,
            },
        ));
    }
    Ok(Baselines::from_entries(entries))
}

/// Largest group number a stored state may have reached (2^53: far more groups than any
/// cluster makes in its life, and no counter near overflow).
pub const MAX_GROUP_NUMBER: u64 = 1 << 53;

/// Encodes the tiers' state.
pub fn encode_tiers(state: &TierState) -> Vec<u8> {
    TiersRecord {
        zones: state
            .groups
            .iter()
            .map(|(zone, group)| ZoneGroupRecord {
                zone: zone.to_string(),
                group: group.to_string(),
            })
            .collect(),
        next_group: state.next_group,
    }
    .encode_to_vec()
}

/// Decodes the tiers' state: valid names, each zone once, and a next group number above every
/// generated name in use (so that no name is ever given twice).
pub fn decode_tiers(bytes: &[u8]) -> Result<TierState, CodecError> {
    let r = TiersRecord::decode(bytes)?;
    if r.next_group > MAX_GROUP_NUMBER {
        return Err(CodecError::Invalid(format!(
            "next_group {} is above {MAX_GROUP_NUMBER}: not a count of groups",
            r.next_group
        )));
    }
    let mut state = TierState {
        groups: Default::default(),
        next_group: r.next_group,
    };
    for (i, z) in r.zones.into_iter().enumerate() {
        let zone = ZoneName::parse(&format!("zones[{i}].zone"), z.zone)?;
        let group = ZoneName::parse(&format!("zones[{i}].group"), z.group)?;
        if let Some(n) = group
            .as_str()
            .strip_prefix(GROUP_PREFIX)
            .and_then(|n| n.parse::<u64>().ok())
            && n >= state.next_group
        {
            return Err(CodecError::Invalid(format!(
                "zones[{i}].group: {group} is not below next_group {}",
                state.next_group
            )));
        }
        if state.groups.insert(zone.clone(), group).is_some() {
            return Err(CodecError::Invalid(format!(
                "zones[{i}].zone: {zone} is listed twice"
            )));
        }
    }
    Ok(state)
}

/// The key of a node record.
pub fn node_key(name: &NodeName) -> Vec<u8> {
    [NODE_PREFIX, name.as_str().as_bytes()].concat()
}

/// The key of a row.
pub fn row_key(src: &NodeName) -> Vec<u8> {
    [ROW_PREFIX, src.as_str().as_bytes()].concat()
}

/// Encodes a node.
pub fn encode_node(node: &StoredNode) -> Vec<u8> {
    NodeRecord {
        name: node.name.to_string(),
        zone: node.zone.to_string(),
        region: node
            .region
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        addresses: node.addresses.iter().map(ToString::to_string).collect(),
        agent_version: node.agent_version.clone(),
        icmp_mode: node.icmp_mode.map_or(0, |m| v1::IcmpMode::from(m) as i32),
        probe_port: u32::from(node.probe_port),
        registered: node.registered,
        last_seen_unix_ms: node.last_seen.map(|t| t.0),
        applied_seq: node.applied_seq,
        exchange_timeout_us: node.exchange_timeout_us,
    }
    .encode_to_vec()
}

/// Why a stored record cannot be read: the store is damaged or was written by another program.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    /// The bytes are not the record's protobuf.
    #[error("not a record: {0}")]
    Decode(#[from] prost::DecodeError),
    /// A name or figure that the domain refuses; the message names the field.
    #[error(transparent)]
    Field(#[from] zonemesh_domain::FieldError),
    /// A stored value out of its range; the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// One path of a row; `source` says what is wrong with it.
    #[error("paths[{index}] ({dst}): {source}")]
    Path {
        /// Its place in the row.
        index: usize,
        /// Its destination.
        dst: String,
        /// What is wrong.
        #[source]
        source: Box<CodecError>,
    },
    /// A path's destination that is not a node name.
    #[error("paths[{index}].{source}")]
    Destination {
        /// Its place in the row.
        index: usize,
        /// What is wrong with the name.
        #[source]
        source: zonemesh_domain::FieldError,
    },
    /// The store's format marker is another program's or another version's.
    #[error("format {found:?}, this aggregator reads {expected:?}")]
    Format {
        /// The marker found.
        found: String,
        /// The marker this aggregator writes.
        expected: String,
    },
    /// Records without a format marker.
    #[error("records without a format marker: not a zonemesh store")]
    NoFormat,
    /// A key that is not UTF-8.
    #[error("key is not UTF-8")]
    KeyNotUtf8,
    /// A key of no record zonemesh writes.
    #[error("unknown key")]
    UnknownKey,
}

impl CodecError {
    /// The marker `found` where [`FORMAT`] was expected.
    pub fn format(found: &[u8]) -> Self {
        CodecError::Format {
            found: String::from_utf8_lossy(found).into_owned(),
            expected: String::from_utf8_lossy(FORMAT).into_owned(),
        }
    }
}

/// Decodes a node; the error says what is wrong.
pub fn decode_node(bytes: &[u8]) -> Result<StoredNode, CodecError> {
    let r = NodeRecord::decode(bytes)?;
    Ok(StoredNode {
        name: NodeName::parse("name", r.name)?,
        zone: ZoneName::parse("zone", r.zone)?,
        region: ZoneName::parse_optional("region", r.region)?,
        addresses: r
            .addresses
            .iter()
            .map(|a| {
                a.parse().map_err(|_| {
                    CodecError::Invalid(format!("addresses: {a:?} is not an IP address"))
                })
            })
            .collect::<Result<_, _>>()?,
        agent_version: r.agent_version,
        icmp_mode: match v1::IcmpMode::try_from(r.icmp_mode) {
            Ok(v1::IcmpMode::Unspecified) => None,
            Ok(v1::IcmpMode::Raw) => Some(IcmpMode::Raw),
            Ok(v1::IcmpMode::Dgram) => Some(IcmpMode::Dgram),
            Ok(v1::IcmpMode::Tcp) => Some(IcmpMode::Tcp),
            Err(_) => {
                return Err(CodecError::Invalid(format!(
                    "icmp_mode: {} is not an IcmpMode",
                    r.icmp_mode
                )));
            }
        },
        probe_port: u16::try_from(r.probe_port).map_err(|_| {
            CodecError::Invalid(format!("probe_port: {} is not a port", r.probe_port))
        })?,
        registered: r.registered,
        last_seen: r.last_seen_unix_ms.map(UnixMs),
        applied_seq: r.applied_seq,
        exchange_timeout_us: match r.exchange_timeout_us {
            Some(us) if !(us.is_finite() && us >= 0.0) => {
                return Err(CodecError::Invalid(format!(
                    "exchange_timeout_us: {us} is not a duration"
                )));
            }
            us => us,
        },
    })
}

/// Encodes a row.
pub fn encode_row(row: &super::StoredRow) -> Vec<u8> {
    RowRecord {
        paths: row
            .paths
            .iter()
            .map(|(dst, p)| RowPath {
                dst: dst.to_string(),
                path: Some(path_record(p)),
            })
            .collect(),
    }
    .encode_to_vec()
}

/// Decodes a row into its paths.
pub fn decode_row(src: &NodeName, bytes: &[u8]) -> Result<Vec<super::StoredPath>, CodecError> {
    let row = RowRecord::decode(bytes)?;
    row.paths
        .into_iter()
        .enumerate()
        .map(|(index, p)| {
            let dst = NodeName::parse("dst", p.dst)
                .map_err(|source| CodecError::Destination { index, source })?;
            let path = path_state(p.path.unwrap_or_default()).map_err(|e| CodecError::Path {
                index,
                dst: dst.to_string(),
                source: Box::new(e),
            })?;
            Ok((src.clone(), dst, path))
        })
        .collect()
}

fn path_record(path: &PathState) -> PathRecord {
    PathRecord {
        windows: path
            .windows
            .iter()
            .map(|w| WindowRecord {
                at_unix_ms: w.at.0,
                sent: u64::from(w.sent),
                received: u64::from(w.received),
                rtt: w.rtt().map(|r| RttRecord {
                    samples: u64::from(r.samples),
                    min_p50_p90_p99_max_mean_jitter_us: vec![
                        r.min, r.p50, r.p90, r.p99, r.max, r.mean, r.jitter,
                    ],
                }),
            })
            .collect(),
        sent_total: path.sent_total,
        received_total: path.received_total,
        last_update_unix_ms: path.last_update.get().map(|t| t.0),
        throughput: path.throughput.get().map(|t| ThroughputRecord {
            at_unix_ms: t.at.0,
            latest_bps: t.latest_bps,
            smoothed_bps: t.smoothed_bps,
            retransmit_ratio: path.tcp.retransmit_ratio(),
            exchange_p50_us: path.tcp.exchange_p50_us(),
            exchange_mean_us: path.tcp.exchange_mean_us(),
        }),
        withheld_unix_ms: path.withheld_at.get().map(|t| t.0),
    }
}

/// A window's count as the engine keeps it (u32: far above any window's probes).
fn count(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A path state from its record (the merged figures are recomputed by the engine on restore).
fn path_state(r: PathRecord) -> Result<PathState, CodecError> {
    let mut windows = Vec::with_capacity(r.windows.len());
    for (i, w) in r.windows.into_iter().enumerate() {
        if w.received > w.sent {
            return Err(CodecError::Invalid(format!(
                "windows[{i}]: {} replies to {} probes",
                w.received, w.sent
            )));
        }
        let rtt = match w.rtt {
            None => None,
            Some(rtt) => {
                let v = &rtt.min_p50_p90_p99_max_mean_jitter_us;
                if v.len() != 7 || v.iter().any(|x| !x.is_finite() || *x < 0.0) {
                    return Err(CodecError::Invalid(format!(
                        "windows[{i}].rtt: {v:?} is not 7 figures >= 0"
                    )));
                }
                Some(RttFigures {
                    samples: count(rtt.samples),
                    min: v[0],
                    p50: v[1],
                    p90: v[2],
                    p99: v[3],
                    max: v[4],
                    mean: v[5],
                    jitter: v[6],
                })
            }
        };
        windows.push(Window::new(
            UnixMs(w.at_unix_ms),
            count(w.sent),
            count(w.received),
            rtt,
        ));
    }
    let mut tcp = TcpFigures::default();
    let throughput = match r.throughput {
        None => None,
        Some(t)
            if t.latest_bps.is_finite()
                && t.latest_bps >= 0.0
                && t.smoothed_bps.is_finite()
                && t.smoothed_bps >= 0.0 =>
        {
            let figure = |name: &str, v: Option<f32>, most: f32| match v {
                Some(x) if !(0.0..=most).contains(&x) => {
                    Err(CodecError::Invalid(format!("throughput {name}: {x}")))
                }
                _ => Ok(v),
            };
            tcp = TcpFigures::new(
                figure("retransmit_ratio", t.retransmit_ratio, 1.0)?,
                figure("exchange_p50_us", t.exchange_p50_us, f32::MAX)?,
                figure("exchange_mean_us", t.exchange_mean_us, f32::MAX)?,
            );
            Some(ThroughputState {
                at: UnixMs(t.at_unix_ms),
                latest_bps: t.latest_bps,
                smoothed_bps: t.smoothed_bps,
            })
        }
        Some(t) => {
            return Err(CodecError::Invalid(format!(
                "throughput: {} / {} bit/s",
                t.latest_bps, t.smoothed_bps
            )));
        }
    };
    if r.received_total > r.sent_total {
        return Err(CodecError::Invalid(format!(
            "received_total {} is above sent_total {}",
            r.received_total, r.sent_total
        )));
    }
    Ok(PathState {
        windows: windows.into_iter().collect(),
        merged: Default::default(),
        sent_total: r.sent_total,
        received_total: r.received_total,
        last_update: r.last_update_unix_ms.map(UnixMs).into(),
        withheld_at: r.withheld_unix_ms.map(UnixMs).into(),
        throughput: throughput.into(),
        tcp,
    })
}

/// Decodes one stored key/value pair into the snapshot being built.
pub fn decode_into(
    snapshot: &mut super::Contents,
    key: &[u8],
    value: &[u8],
) -> Result<(), CodecError> {
    if key == META_KEY {
        return if value == FORMAT {
            Ok(())
        } else {
            Err(CodecError::format(value))
        };
    }
    if key.starts_with(NODE_PREFIX) {
        snapshot.nodes.push(decode_node(value)?);
    } else if key == TIERS_KEY {
        snapshot.tiers = Some(decode_tiers(value)?);
    } else if key == BASELINES_KEY {
        snapshot.baselines = Some(decode_baselines(value)?);
    } else if [CLUSTER_KEY, NODE_ORDER_KEY, SESSIONS_KEY, TESTS_KEY].contains(&key) {
        decode_cluster_into(snapshot.cluster.get_or_insert_default(), key, value)?;
    } else if let Some(src) = key.strip_prefix(ROW_PREFIX) {
        let src = std::str::from_utf8(src).map_err(|_| CodecError::KeyNotUtf8)?;
        let src = NodeName::parse("key", src)?;
        snapshot.paths.extend(decode_row(&src, value)?);
    } else {
        return Err(CodecError::UnknownKey);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_baselines_are_refused_by_field() {
        let record = |element: i32, a: &str, kind: i32, value: f64, first_seen: i64| {
            BaselinesRecord {
                baselines: vec![BaselineRecord {
                    element,
                    a: a.into(),
                    b: String::new(),
                    kind,
                    value,
                    first_seen_unix_ms: first_seen,
                    updated_unix_ms: 2_000,
                    seen_unix_ms: 3_000,
                    samples: 1,
                }],
            }
            .encode_to_vec()
        };
        let node = v1::FaultElement::Node as i32;
        let delay = v1::FaultKind::Delay as i32;
        assert!(decode_baselines(&record(node, "a1", delay, 5.0, 1_000)).is_ok());
        let err = |bytes: Vec<u8>| decode_baselines(&bytes).unwrap_err().to_string();
        assert!(err(record(9, "a1", delay, 5.0, 1_000)).contains("baselines[0].element"));
        assert!(err(record(node, "A_1", delay, 5.0, 1_000)).contains("baselines[0].a"));
        assert!(err(record(node, "a1", 0, 5.0, 1_000)).contains("baselines[0].kind"));
        assert!(err(record(node, "a1", delay, f64::NAN, 1_000)).contains("baselines[0].value"));
        assert!(err(record(node, "a1", delay, 5.0, 2_500)).contains("not in order"));
        let mut twice =
            BaselinesRecord::decode(&record(node, "a1", delay, 5.0, 1_000)[..]).unwrap();
        twice.baselines.push(twice.baselines[0].clone());
        assert!(err(twice.encode_to_vec()).contains("listed twice"));
    }

    #[test]
    fn damaged_records_are_refused_with_a_reason() {
        assert!(decode_node(b"\xff\xff\xff").is_err());
        let bad_name = NodeRecord {
            name: "Not A Name".into(),
            zone: "z".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert!(
            decode_node(&bad_name)
                .unwrap_err()
                .to_string()
                .contains("name")
        );
        let node = |timeout: Option<f32>| {
            NodeRecord {
                name: "a".into(),
                zone: "z".into(),
                exchange_timeout_us: timeout,
                ..Default::default()
            }
            .encode_to_vec()
        };
        assert_eq!(
            decode_node(&node(Some(204_000.0)))
                .unwrap()
                .exchange_timeout_us,
            Some(204_000.0)
        );
        assert_eq!(decode_node(&node(None)).unwrap().exchange_timeout_us, None);
        let err = decode_node(&node(Some(-1.0))).unwrap_err().to_string();
        assert!(err.contains("exchange_timeout_us"), "{err}");
        let impossible = PathRecord {
            sent_total: 1,
            received_total: 2,
            ..Default::default()
        }
        .encode_to_vec();
        assert!(
            path_state(PathRecord::decode(impossible.as_slice()).unwrap())
                .unwrap_err()
                .to_string()
                .contains("received_total")
        );
        let nan = PathRecord {
            windows: vec![WindowRecord {
                at_unix_ms: 1,
                sent: 1,
                received: 1,
                rtt: Some(RttRecord {
                    samples: 1,
                    min_p50_p90_p99_max_mean_jitter_us: vec![f32::NAN; 7],
                }),
            }],
            ..Default::default()
        };
        let row = RowRecord {
            paths: vec![RowPath {
                dst: "b".into(),
                path: Some(nan),
            }],
        }
        .encode_to_vec();
        let src = NodeName::parse("src", "a").unwrap();
        assert!(
            decode_row(&src, &row)
                .unwrap_err()
                .to_string()
                .contains("paths[0] (b): windows[0].rtt")
        );
        let group = |zone: &str, group: &str| ZoneGroupRecord {
            zone: zone.into(),
            group: group.into(),
        };
        let reused = TiersRecord {
            zones: vec![group("zone-a", "group-3")],
            next_group: 3,
        };
        assert!(
            decode_tiers(&reused.encode_to_vec())
                .unwrap_err()
                .to_string()
                .contains("next_group")
        );
        let twice = TiersRecord {
            zones: vec![group("zone-a", "group-1"), group("zone-a", "group-2")],
            next_group: 3,
        };
        assert!(
            decode_tiers(&twice.encode_to_vec())
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        let bad = TiersRecord {
            zones: vec![group("zone a", "group-1")],
            next_group: 3,
        };
        assert!(
            decode_tiers(&bad.encode_to_vec())
                .unwrap_err()
                .to_string()
                .contains("zones[0].zone")
        );
        let mut snapshot = super::super::Contents::default();
        assert!(decode_into(&mut snapshot, META_KEY, b"other").is_err());
        assert!(decode_into(&mut snapshot, b"x/y", b"").is_err());
    }

    #[test]
    fn a_paths_tcp_figures_round_trip_and_older_records_read_without_them() {
        let state = PathState {
            throughput: Some(ThroughputState {
                at: UnixMs(5),
                latest_bps: 1e9,
                smoothed_bps: 9e8,
            })
            .into(),
            tcp: TcpFigures::new(Some(0.0125), Some(81.5), Some(140.25)),
            ..Default::default()
        };
        assert_eq!(path_state(path_record(&state)).unwrap(), state);
        let mut older = path_record(&state);
        let t = older.throughput.as_mut().unwrap();
        (t.retransmit_ratio, t.exchange_p50_us, t.exchange_mean_us) = (None, None, None);
        let read = path_state(PathRecord::decode(older.encode_to_vec().as_slice()).unwrap());
        let read = read.unwrap();
        assert_eq!(read.throughput.get().unwrap().smoothed_bps, 9e8);
        assert_eq!(read.tcp, TcpFigures::default());
        let mut bad = path_record(&state);
        bad.throughput.as_mut().unwrap().retransmit_ratio = Some(1.5);
        let err = path_state(bad).unwrap_err().to_string();
        assert!(err.contains("retransmit_ratio"), "{err}");
    }
}
