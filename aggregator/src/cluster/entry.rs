//! What the replicated log holds: one entry per hello, report, departure, and the leader's
//! decisions (a takeover, a throughput test), as protobuf (prost) records. A report travels as the agent's own wire message, checked again
//! when it is read back, so that every replica applies exactly what the receiving replica
//! checked. An entry that does not decode is an [`EntryError`]: every replica logs, counts and
//! skips it alike.

use prost::Message;
use zonemesh_domain::{FieldError, Hello, NodeName, Report, UnixMs};
use zonemesh_engine::tiers::TierState;
use zonemesh_proto::v1;

use crate::store::codec::{decode_tiers, encode_tiers};

/// Subject prefix of agents' entries: `zonemesh.log.<zone>.<kind>`.
pub const LOG_SUBJECTS: &str = "zonemesh.log";
/// Subject prefix of the leader's entries: `zonemesh.writer.<kind>`.
pub const WRITER_SUBJECTS: &str = "zonemesh.writer";

#[derive(Clone, PartialEq, Message)]
struct EntryRecord {
    #[prost(oneof = "Kind", tags = "1, 2, 3, 4, 5, 6, 7")]
    kind: Option<Kind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Kind {
    #[prost(message, tag = "1")]
    Hello(HelloRecord),
    #[prost(message, tag = "2")]
    Report(ReportRecord),
    #[prost(message, tag = "3")]
    Goodbye(GoodbyeRecord),
    #[prost(message, tag = "4")]
    Test(TestRecord),
    #[prost(message, tag = "5")]
    Takeover(TakeoverRecord),
    #[prost(message, tag = "6")]
    Heartbeat(HeartbeatRecord),
    #[prost(message, tag = "7")]
    Tiers(TiersRecord),
}

#[derive(Clone, PartialEq, Message)]
struct TiersRecord {
    #[prost(uint64, tag = "1")]
    epoch: u64,
    /// The state as the store keeps it (`store::codec::encode_tiers`).
    #[prost(bytes = "vec", tag = "2")]
    state: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct HeartbeatRecord {
    #[prost(string, tag = "1")]
    replica: String,
    #[prost(uint64, tag = "2")]
    beat: u64,
}

#[derive(Clone, PartialEq, Message)]
struct HelloRecord {
    #[prost(message, optional, tag = "1")]
    hello: Option<v1::Hello>,
    #[prost(uint64, tag = "2")]
    session: u64,
    #[prost(string, tag = "3")]
    replica: String,
}

#[derive(Clone, PartialEq, Message)]
struct ReportRecord {
    #[prost(string, tag = "1")]
    node: String,
    #[prost(message, optional, tag = "2")]
    report: Option<v1::Report>,
}

#[derive(Clone, PartialEq, Message)]
struct GoodbyeRecord {
    #[prost(string, tag = "1")]
    node: String,
    #[prost(uint64, tag = "2")]
    session: u64,
}

#[derive(Clone, PartialEq, Message)]
struct TestRecord {
    #[prost(string, tag = "1")]
    src: String,
    #[prost(string, tag = "2")]
    dst: String,
    #[prost(int64, tag = "3")]
    from_unix_ms: i64,
    #[prost(int64, tag = "4")]
    until_unix_ms: i64,
    #[prost(uint64, tag = "5")]
    epoch: u64,
    #[prost(uint64, tag = "6")]
    id: u64,
}

#[derive(Clone, PartialEq, Message)]
struct TakeoverRecord {
    #[prost(uint64, tag = "1")]
    epoch: u64,
    #[prost(string, tag = "2")]
    replica: String,
}

/// One entry of the log.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// An agent said hello to `replica`, which opened `session` for it.
    Hello {
        /// The checked hello.
        hello: Hello,
        /// The session's id, unique in the cluster.
        session: u64,
        /// The replica that holds the session.
        replica: String,
    },
    /// A checked report of `node`.
    Report {
        /// The reporting node.
        node: NodeName,
        /// Its report.
        report: Report,
    },
    /// The stream of `session` ended.
    Goodbye {
        /// The node.
        node: NodeName,
        /// The session that ended.
        session: u64,
    },
    /// The leader of `epoch` granted `src` a throughput test towards `dst` from `from` to
    /// `until`: the replica that holds `src`'s stream relays the grant, and every replica keeps
    /// the windows the test loads out of the figures and its nodes busy in its scheduler.
    Test {
        /// The sender.
        src: NodeName,
        /// The receiver.
        dst: NodeName,
        /// Start.
        from: UnixMs,
        /// End.
        until: UnixMs,
        /// The lease epoch of the leader that granted it.
        epoch: u64,
        /// The grant's id.
        id: u64,
    },
    /// `replica` is alive: its `beat`-th heartbeat since it started. The sessions of a replica
    /// whose heartbeats stop end on every replica alike.
    Heartbeat {
        /// The replica.
        replica: String,
        /// Its heartbeats since it started, this one included.
        beat: u64,
    },
    /// The leader of `epoch` decided the tiers' groups (each zone's group and the next group
    /// number): every replica draws its tiers from them (`zonemesh_engine::tiers::render`).
    Tiers {
        /// The lease epoch of the leader that decided.
        epoch: u64,
        /// The decided state.
        state: TierState,
    },
    /// `replica` holds the lease at `epoch` and decides from here on; decisions of older epochs
    /// are dropped.
    Takeover {
        /// The lease's revision when it was acquired.
        epoch: u64,
        /// The new leader.
        replica: String,
    },
}

/// An entry that does not decode, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// Not a protobuf entry at all.
    #[error("not an entry: {0}")]
    Decode(String),
    /// No kind set (an entry of a newer version, or garbage that happened to decode).
    #[error("an entry of no known kind")]
    Empty,
    /// A field failed its check.
    #[error(transparent)]
    Field(#[from] FieldError),
}

impl Entry {
    /// The entry as stored in the log.
    pub fn encode(&self) -> Vec<u8> {
        let kind = match self {
            Entry::Hello {
                hello,
                session,
                replica,
            } => Kind::Hello(HelloRecord {
                hello: Some(v1::Hello::from(hello.clone())),
                session: *session,
                replica: replica.clone(),
            }),
            Entry::Report { node, report } => Kind::Report(ReportRecord {
                node: node.to_string(),
                report: Some(v1::Report::from(report.clone())),
            }),
            Entry::Goodbye { node, session } => Kind::Goodbye(GoodbyeRecord {
                node: node.to_string(),
                session: *session,
            }),
            Entry::Test {
                src,
                dst,
                from,
                until,
                epoch,
                id,
            } => Kind::Test(TestRecord {
                src: src.to_string(),
                dst: dst.to_string(),
                from_unix_ms: from.0,
                until_unix_ms: until.0,
                epoch: *epoch,
                id: *id,
            }),
            Entry::Takeover { epoch, replica } => Kind::Takeover(TakeoverRecord {
                epoch: *epoch,
                replica: replica.clone(),
            }),
            Entry::Heartbeat { replica, beat } => Kind::Heartbeat(HeartbeatRecord {
                replica: replica.clone(),
                beat: *beat,
            }),
            Entry::Tiers { epoch, state } => Kind::Tiers(TiersRecord {
                epoch: *epoch,
                state: encode_tiers(state),
            }),
        };
        EntryRecord { kind: Some(kind) }.encode_to_vec()
    }

    /// A report entry from the wire message the agent sent (already checked at the edge),
    /// encoded from it as it is (the same bytes as [`Entry::encode`] of the checked report,
    /// without a copy of the message or a conversion back).
    pub fn encode_report(node: &NodeName, wire: &v1::Report) -> Vec<u8> {
        use prost::encoding::{WireType, encode_key, encode_varint, message, string};
        let node = node.to_string();
        let inner_len = string::encoded_len(1, &node) + message::encoded_len(2, wire);
        let mut out = Vec::with_capacity(inner_len + 8);
        encode_key(2, WireType::LengthDelimited, &mut out);
        encode_varint(inner_len as u64, &mut out);
        string::encode(1, &node, &mut out);
        message::encode(2, wire, &mut out);
        out
    }

    /// An entry read from the log, checked as the edge checks what agents send.
    pub fn decode(bytes: &[u8]) -> Result<Self, EntryError> {
        let record = EntryRecord::decode(bytes).map_err(|e| EntryError::Decode(e.to_string()))?;
        Ok(match record.kind.ok_or(EntryError::Empty)? {
            Kind::Hello(h) => Entry::Hello {
                hello: Hello::try_from(h.hello.ok_or_else(|| FieldError::new("hello", "missing"))?)
                    .map_err(|e| e.within("hello"))?,
                session: h.session,
                replica: h.replica,
            },
            Kind::Report(r) => {
                let node = NodeName::parse("node", r.node)?;
                let wire = r
                    .report
                    .ok_or_else(|| FieldError::new("report", "missing"))?;
                let report = zonemesh_proto::convert::report_from_agent(&node, wire)
                    .map_err(|e| e.within("report"))?;
                Entry::Report { node, report }
            }
            Kind::Goodbye(g) => Entry::Goodbye {
                node: NodeName::parse("node", g.node)?,
                session: g.session,
            },
            Kind::Test(t) => Entry::Test {
                src: NodeName::parse("src", t.src)?,
                dst: NodeName::parse("dst", t.dst)?,
                from: UnixMs(t.from_unix_ms),
                until: UnixMs(t.until_unix_ms),
                epoch: t.epoch,
                id: t.id,
            },
            Kind::Takeover(t) => Entry::Takeover {
                epoch: t.epoch,
                replica: t.replica,
            },
            Kind::Heartbeat(h) => Entry::Heartbeat {
                replica: h.replica,
                beat: h.beat,
            },
            Kind::Tiers(t) => Entry::Tiers {
                epoch: t.epoch,
                state: decode_tiers(&t.state)
                    .map_err(|e| FieldError::new("tiers.state", e.to_string()))?,
            },
        })
    }
}

/// The `Nats-Msg-Id` of an entry, so that a resend (after a failover, or a retried publish) is
/// stored once: a report by node and sequence, a hello and a departure by node and session.
pub fn message_id(kind: &str, node: &NodeName, number: u64) -> String {
    format!("{kind}/{node}/{number}")
}

/// The subject of an agent's entry of `kind` (`hello`, `report`, `bye`) from a node in `zone`:
/// one subject per zone, so that a consumer can follow some zones only. A zone name may hold
/// dots, which separate subject tokens: they become `~`, which no zone name holds.
pub fn agent_subject(zone: &str, kind: &str) -> String {
    format!("{LOG_SUBJECTS}.{}.{kind}", zone.replace('.', "~"))
}

/// The one subject of the leader's decisions (fenced: each is written with the subject's
/// expected last sequence).
pub fn decision_subject() -> String {
    writer_subject("decision")
}

/// The subject of the leader's entries of `kind`.
pub fn writer_subject(kind: &str) -> String {
    format!("{WRITER_SUBJECTS}.{kind}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use zonemesh_engine::testing::{hello, name, sample};

    #[test]
    fn every_kind_round_trips() {
        let entries = [
            Entry::Hello {
                hello: hello("a", "zone.a"),
                session: 7,
                replica: "aggregator-1".into(),
            },
            Entry::Report {
                node: name("a"),
                report: Report {
                    sequence: 3,
                    paths: vec![
                        sample("a", "b", 123.456, 3, Some(9.5e8)),
                        sample("a", "c", 2_000.0, 100, None),
                    ],
                },
            },
            Entry::Goodbye {
                node: name("a"),
                session: 7,
            },
            Entry::Test {
                src: name("a"),
                dst: name("b"),
                from: UnixMs(1_000),
                until: UnixMs(6_000),
                epoch: 4,
                id: 17,
            },
            Entry::Takeover {
                epoch: 4,
                replica: "r1".into(),
            },
            Entry::Heartbeat {
                replica: "r2".into(),
                beat: 12,
            },
            Entry::Tiers {
                epoch: 4,
                state: TierState {
                    groups: [("zone.a", "group-1"), ("zone.b", "group-1")]
                        .into_iter()
                        .map(|(z, g)| {
                            (
                                zonemesh_domain::ZoneName::parse("zone", z).unwrap(),
                                zonemesh_domain::ZoneName::parse("group", g).unwrap(),
                            )
                        })
                        .collect(),
                    next_group: 2,
                },
            },
        ];
        for entry in entries {
            assert_eq!(Entry::decode(&entry.encode()).unwrap(), entry);
        }
    }

    #[test]
    fn a_report_encoded_from_the_wire_is_the_entry_of_the_report() {
        let report = Report {
            sequence: 12,
            paths: vec![sample("a", "b", 77.0, 1, Some(1e9))],
        };
        let entry = Entry::Report {
            node: name("a"),
            report: report.clone(),
        };
        let wire = v1::Report::from(report);
        assert_eq!(Entry::encode_report(&name("a"), &wire), entry.encode());
        assert_eq!(
            Entry::decode(&Entry::encode_report(&name("a"), &wire)).unwrap(),
            entry
        );
    }

    #[test]
    fn what_does_not_decode_says_why() {
        assert!(matches!(
            Entry::decode(b"\xff\xff\xff"),
            Err(EntryError::Decode(_))
        ));
        assert_eq!(Entry::decode(b""), Err(EntryError::Empty));
        // A report of another node's paths is refused as the edge refuses it.
        let bad = Entry::Report {
            node: name("b"),
            report: Report {
                sequence: 1,
                paths: vec![sample("a", "b", 100.0, 0, None)],
            },
        };
        let err = Entry::decode(&bad.encode()).unwrap_err();
        assert!(err.to_string().starts_with("report.paths[0].src"), "{err}");
    }

    #[test]
    fn subjects_and_ids() {
        assert_eq!(
            agent_subject("eu.west-1", "report"),
            "zonemesh.log.eu~west-1.report"
        );
        assert_eq!(decision_subject(), "zonemesh.writer.decision");
        assert_eq!(message_id("r", &name("a"), 9), "r/a/9");
    }
}
