//! The engine's one error type. Every variant names what was wrong: a request field, a node, a
//! zone, or the limit that refused.

use zonemesh_domain::FieldError;

/// What the engine refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A request or report value is not acceptable; the message names the field.
    #[error(transparent)]
    InvalidArgument(#[from] FieldError),
    /// A request named a node the engine does not know.
    #[error("{field}: unknown node {node}")]
    UnknownNode {
        /// The request field that named it.
        field: String,
        /// The node.
        node: String,
    },
    /// A request named a zone the engine does not know.
    #[error("{field}: unknown zone {zone}")]
    UnknownZone {
        /// The request field that named it.
        field: String,
        /// The zone.
        zone: String,
    },
    /// REQUIRE_ONE placement with no zone large enough.
    #[error("no zone can hold {workers} workers: the largest, {zone}, has {capacity} free slots")]
    NoZoneFits {
        /// Workers asked for.
        workers: u32,
        /// The zone with the most free slots.
        zone: String,
        /// Its free slots.
        capacity: u64,
    },
    /// Fewer free slots on READY candidates than workers.
    #[error(
        "not enough capacity: {workers} workers asked, {capacity} free slots on READY candidates \
         ({skipped} candidates skipped as excluded, STALE or DOWN)"
    )]
    NotEnoughCapacity {
        /// Workers asked for.
        workers: u32,
        /// Free slots found.
        capacity: u64,
        /// Candidates left out.
        skipped: usize,
    },
    /// A limit of [`EngineConfig`](crate::EngineConfig) refused a Hello or a report; the message
    /// names the flag that sets it.
    #[error("{message}")]
    Limit {
        /// Which limit.
        limit: crate::LimitHit,
        /// What would have passed it.
        message: String,
    },
}
