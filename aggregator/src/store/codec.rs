//! The stored records: protobuf messages (prost) with a version in the meta record, so that the
//! format can grow the way the wire protocol does (fields added, never renumbered). Decoding
//! checks every value again: a damaged record is an error, never a silently wrong figure.

use prost::Message;
use zonemesh_domain::{IcmpMode, NodeName, UnixMs, ZoneName};
use zonemesh_proto::v1;

use zonemesh_engine::path::{RttFigures, ThroughputState, Window};
use zonemesh_engine::{PathState, StoredNode};

/// Key of the meta record.
pub const META_KEY: &[u8] = b"meta/format";
/// Value of the meta record for this format.
pub const FORMAT: &[u8] = b"zonemesh-store-1";
/// Prefix of node keys (`n/<name>`).
pub const NODE_PREFIX: &[u8] = b"n/";
/// Prefix of row keys (`r/<src>`: every outgoing path of a node).
pub const ROW_PREFIX: &[u8] = b"r/";

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
    }
    .encode_to_vec()
}

/// Decodes a node; the error says what is wrong.
pub fn decode_node(bytes: &[u8]) -> Result<StoredNode, String> {
    let r = NodeRecord::decode(bytes).map_err(|e| e.to_string())?;
    let e = |e: zonemesh_domain::FieldError| e.to_string();
    Ok(StoredNode {
        name: NodeName::parse("name", r.name).map_err(e)?,
        zone: ZoneName::parse("zone", r.zone).map_err(e)?,
        region: ZoneName::parse_optional("region", r.region).map_err(e)?,
        addresses: r
            .addresses
            .iter()
            .map(|a| {
                a.parse()
                    .map_err(|_| format!("addresses: {a:?} is not an IP address"))
            })
            .collect::<Result<_, _>>()?,
        agent_version: r.agent_version,
        icmp_mode: match v1::IcmpMode::try_from(r.icmp_mode) {
            Ok(v1::IcmpMode::Unspecified) => None,
            Ok(v1::IcmpMode::Raw) => Some(IcmpMode::Raw),
            Ok(v1::IcmpMode::Dgram) => Some(IcmpMode::Dgram),
            Ok(v1::IcmpMode::Tcp) => Some(IcmpMode::Tcp),
            Err(_) => return Err(format!("icmp_mode: {} is not an IcmpMode", r.icmp_mode)),
        },
        probe_port: u16::try_from(r.probe_port)
            .map_err(|_| format!("probe_port: {} is not a port", r.probe_port))?,
        registered: r.registered,
        last_seen: r.last_seen_unix_ms.map(UnixMs),
        applied_seq: r.applied_seq,
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
pub fn decode_row(src: &NodeName, bytes: &[u8]) -> Result<Vec<super::StoredPath>, String> {
    let row = RowRecord::decode(bytes).map_err(|e| e.to_string())?;
    row.paths
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let dst = NodeName::parse("dst", p.dst).map_err(|e| format!("paths[{i}].{e}"))?;
            let path = path_state(p.path.unwrap_or_default())
                .map_err(|e| format!("paths[{i}] ({dst}): {e}"))?;
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
        last_update_unix_ms: path.last_update.map(|t| t.0),
        throughput: path.throughput.map(|t| ThroughputRecord {
            at_unix_ms: t.at.0,
            latest_bps: t.latest_bps,
            smoothed_bps: t.smoothed_bps,
        }),
        withheld_unix_ms: path.withheld_at.map(|t| t.0),
    }
}

/// A window's count as the engine keeps it (u32: far above any window's probes).
fn count(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A path state from its record (the merged figures are recomputed by the engine on restore).
fn path_state(r: PathRecord) -> Result<PathState, String> {
    let mut windows = Vec::with_capacity(r.windows.len());
    for (i, w) in r.windows.into_iter().enumerate() {
        if w.received > w.sent {
            return Err(format!(
                "windows[{i}]: {} replies to {} probes",
                w.received, w.sent
            ));
        }
        let rtt = match w.rtt {
            None => None,
            Some(rtt) => {
                let v = &rtt.min_p50_p90_p99_max_mean_jitter_us;
                if v.len() != 7 || v.iter().any(|x| !x.is_finite() || *x < 0.0) {
                    return Err(format!("windows[{i}].rtt: {v:?} is not 7 figures >= 0"));
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
    let throughput = match r.throughput {
        None => None,
        Some(t)
            if t.latest_bps.is_finite()
                && t.latest_bps >= 0.0
                && t.smoothed_bps.is_finite()
                && t.smoothed_bps >= 0.0 =>
        {
            Some(ThroughputState {
                at: UnixMs(t.at_unix_ms),
                latest_bps: t.latest_bps,
                smoothed_bps: t.smoothed_bps,
            })
        }
        Some(t) => {
            return Err(format!(
                "throughput: {} / {} bit/s",
                t.latest_bps, t.smoothed_bps
            ));
        }
    };
    if r.received_total > r.sent_total {
        return Err(format!(
            "received_total {} is above sent_total {}",
            r.received_total, r.sent_total
        ));
    }
    Ok(PathState {
        windows: windows.into_iter().collect(),
        merged: Default::default(),
        sent_total: r.sent_total,
        received_total: r.received_total,
        last_update: r.last_update_unix_ms.map(UnixMs),
        withheld_at: r.withheld_unix_ms.map(UnixMs),
        throughput,
    })
}

/// Decodes one stored key/value pair into the snapshot being built.
pub fn decode_into(snapshot: &mut super::Contents, key: &[u8], value: &[u8]) -> Result<(), String> {
    if key == META_KEY {
        return if value == FORMAT {
            Ok(())
        } else {
            Err(format!(
                "format {:?}, this aggregator reads {:?}",
                String::from_utf8_lossy(value),
                String::from_utf8_lossy(FORMAT)
            ))
        };
    }
    if key.starts_with(NODE_PREFIX) {
        snapshot.nodes.push(decode_node(value)?);
    } else if let Some(src) = key.strip_prefix(ROW_PREFIX) {
        let src = std::str::from_utf8(src).map_err(|_| "key is not UTF-8".to_owned())?;
        let src = NodeName::parse("key", src).map_err(|e| e.to_string())?;
        snapshot.paths.extend(decode_row(&src, value)?);
    } else {
        return Err("unknown key".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_records_are_refused_with_a_reason() {
        assert!(decode_node(b"\xff\xff\xff").is_err());
        let bad_name = NodeRecord {
            name: "Not A Name".into(),
            zone: "z".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert!(decode_node(&bad_name).unwrap_err().contains("name"));
        let impossible = PathRecord {
            sent_total: 1,
            received_total: 2,
            ..Default::default()
        }
        .encode_to_vec();
        assert!(
            path_state(PathRecord::decode(impossible.as_slice()).unwrap())
                .unwrap_err()
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
                .contains("paths[0] (b): windows[0].rtt")
        );
        let mut snapshot = super::super::Contents::default();
        assert!(decode_into(&mut snapshot, META_KEY, b"other").is_err());
        assert!(decode_into(&mut snapshot, b"x/y", b"").is_err());
    }
}
