//! zonemesh's domain types: every value that exists is valid.
//!
//! Names ([`NodeName`], [`ZoneName`]) and figures ([`Micros`], [`LossRatio`], [`Bps`],
//! [`UnixMs`]) are checked once, where they enter, and refused with a [`FieldError`] that names
//! the offending field; inside zonemesh a value that exists is valid. The crate also holds what
//! agents report ([`Hello`], [`Report`]), what schedulers ask ([`RankQuery`], [`PlaceQuery`],
//! [`MatrixQuery`]) and what the engine answers ([`Ranking`], [`PlaceAnswer`], ...). It has no wire,
//! server or runtime code: the wire crate (`zonemesh-proto`) converts to and from these types, and
//! the engine (`zonemesh-engine`) takes and gives them.
//!
//! ```
//! use zonemesh_domain::{FieldError, Micros, NodeName, Weights};
//!
//! let node = NodeName::parse("node", "worker-1.example")?;
//! assert_eq!(node.as_str(), "worker-1.example");
//!
//! let err = NodeName::parse("candidates[2]", "Worker_1").unwrap_err();
//! assert_eq!(err.field(), "candidates[2]");
//!
//! assert!(Micros::parse("rtt.p50_us", f64::NAN).is_err());
//! let weights = Weights::checked(Some(2.0), None, None)?;
//! assert_eq!((weights.loss, weights.delay), (2.0, 1.0));
//! # Ok::<(), FieldError>(())
//! ```

mod answer;
mod error;
mod faults;
mod job;
mod names;
mod plan;
mod query;
mod report;
pub mod stats;
mod tiers;
mod units;

pub use answer::{
    Assignment, JobBottleneck, JobPrediction, Matrix, MatrixCell, NodeState, NodeView, Nodes,
    PathAnswer, PathFigures, PlaceAlternative, PlaceAnswer, Provenance, RankedNode, Ranking,
    RttSummary, ZoneLink, ZoneView, Zones,
};
pub use error::FieldError;
pub use faults::{Element, Fault, FaultKind, FaultThresholds, Faults, MAX_EVIDENCE, Severity};
pub use job::{Collective, Job, MAX_BYTES_PER_ITERATION, parse_quantity};
pub use names::{
    MAX_NODE_NAME_BYTES, MAX_ZONE_NAME_BYTES, NodeName, UNKNOWN_ZONE, ZoneName, node_names,
};
pub use plan::{ProbePlan, ProbeTarget, ThroughputGrant};
pub use query::{
    MAX_ALTERNATIVES, MAX_LINKS_PAGE, MAX_MATRIX_CELLS_PAGE, MAX_MATRIX_NODES, MAX_NODES_PAGE,
    MAX_WORKERS, MatrixQuery, Metric, NodesQuery, Page, PlaceQuery, RankQuery, Weights, ZonePolicy,
    ZonesQuery,
};
pub use report::{
    Hello, IcmpMode, MAX_ADDRESSES, MAX_PATHS_PER_REPORT, MAX_VERSION_BYTES, MessageExchange,
    PathSample, Report, Retransmits, Rtt, ThroughputSample,
};
pub use tiers::{
    Cut, CutFigures, GroupLink, PairFigure, TierGroup, TierThresholds, TierZone, Tiers, ZonePair,
};
pub use units::{Bps, LossRatio, Micros, UnixMs};
