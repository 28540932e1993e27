//! The zonemesh aggregator: where measurements become placement decisions.
//!
//! The [`engine`] is plain code without I/O — the zone-aware topology matrix, ranking, placement
//! and the probe planner — and can be embedded in any Rust scheduler. The [`store`] keeps its
//! state durable (sled, or memory). The [`server`] serves it over gRPC and HTTP.
//!
//! Build a topology from samples, rank nodes and place a job:
//!
//! ```
//! use zonemesh_aggregator::engine::{EngineConfig, PlaceQuery, RankQuery, Topology};
//! use zonemesh_proto::domain::{Hello, NodeName, Report, UnixMs};
//! use zonemesh_proto::v1;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let now = UnixMs(1_700_000_000_000);
//! let mut topology = Topology::new(EngineConfig::default());
//! let nodes = [("a1", "zone-a"), ("a2", "zone-a"), ("a3", "zone-a"), ("b1", "zone-b")];
//! for (node, zone) in nodes {
//!     let hello = Hello::try_from(v1::Hello {
//!         node_name: node.into(),
//!         zone: zone.into(),
//!         addresses: vec!["127.0.0.1".into()],
//!         icmp_mode: v1::IcmpMode::Raw as i32,
//!         probe_port: 7402,
//!         ..Default::default()
//!     })?;
//!     topology.register(&hello, now);
//! }
//! // Every node reports a window of 10 probes to every other: a3 is slow, zone-b is far.
//! for (seq, (src, src_zone)) in nodes.iter().enumerate() {
//!     let paths = nodes
//!         .iter()
//!         .filter(|(dst, _)| dst != src)
//!         .map(|(dst, dst_zone)| {
//!             let rtt = if src_zone != dst_zone { 2_000.0 }
//!                 else if *src == "a3" || *dst == "a3" { 400.0 } else { 50.0 };
//!             v1::PathSummary {
//!                 src: (*src).into(),
//!                 dst: (*dst).into(),
//!                 window_start_unix_ms: now.0 - 10_000,
//!                 window_end_unix_ms: now.0,
//!                 probes_sent: 10,
//!                 probes_received: 10,
//!                 rtt: Some(v1::RttStats {
//!                     samples: 10, min_us: rtt, p50_us: rtt, p90_us: rtt, p99_us: rtt,
//!                     max_us: rtt, mean_us: rtt, jitter_us: 0.0,
//!                 }),
//!                 ..Default::default()
//!             }
//!         })
//!         .collect();
//!     let wire = v1::Report { sequence: seq as u64 + 1, paths };
//!     let name = NodeName::parse("node", *src)?;
//!     let node = topology.id(&name).expect("registered");
//!     let report = Report::from_agent(&name, wire)?;
//!     topology.apply_report(node, &report, now)?;
//! }
//!
//! let ranking = topology.rank(&RankQuery::default(), now)?;
//! assert_eq!(ranking.nodes.last().unwrap().node, "b1", "alone in its zone: no figures");
//!
//! let placement = topology.place(&PlaceQuery { workers: 2, ..PlaceQuery::default() }, now)?;
//! let mut chosen: Vec<_> = placement.assignments.iter().map(|a| a.node.as_str()).collect();
//! chosen.sort();
//! assert_eq!(chosen, ["a1", "a2"]);
//! assert_eq!(placement.zones, ["zone-a"]);
//! assert_eq!(placement.worst_rtt_us, 50.0);
//! # Ok(())
//! # }
//! ```

pub mod engine;
mod error;
pub mod fuzz;
pub mod server;
pub mod store;

pub use error::Error;
