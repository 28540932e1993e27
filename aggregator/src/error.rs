//! The aggregator library's one error type.

use zonemesh_proto::WireError;

/// Everything that can go wrong in the engine, the store or the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request or report value was refused at the edge; the message names the field.
    #[error(transparent)]
    InvalidArgument(#[from] WireError),
    /// A request named a node the aggregator does not know.
    #[error("{field}: unknown node {node}")]
    UnknownNode {
        /// The request field that named it.
        field: String,
        /// The node.
        node: String,
    },
    /// A request named a zone the aggregator does not know.
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
    /// The store could not be opened, read or written.
    #[error("store {path}: {action} failed: {source}")]
    Store {
        /// The data directory (or "memory").
        path: String,
        /// What was being done.
        action: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A stored record could not be decoded: the data directory is damaged or from another program.
    #[error("store {path}: record {key:?} is unreadable: {reason}")]
    Corrupt {
        /// The data directory.
        path: String,
        /// The record's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A port could not be bound.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The server's configuration cannot be used (a TLS or token file); the message names the flag.
    #[error("{0}")]
    Config(String),
    /// A limit refused a report or a node (`--max-*`); the message names the flag.
    #[error("{0}")]
    Limit(String),
    /// Something inside the server that is not the caller's fault.
    #[error("internal: {0}")]
    Internal(String),
    /// The engine task has stopped (the server is shutting down).
    #[error("the aggregator is shutting down")]
    ShuttingDown,
}

impl Error {
    /// The gRPC status for this error: INVALID_ARGUMENT for bad input (never retried), NOT_FOUND
    /// for unknown names, FAILED_PRECONDITION for placements that cannot be met, UNAVAILABLE for
    /// trouble that may pass (retried with backoff).
    pub fn status(&self) -> tonic::Status {
        let message = self.to_string();
        match self {
            Self::InvalidArgument(_) => tonic::Status::invalid_argument(message),
            Self::UnknownNode { .. } | Self::UnknownZone { .. } => {
                tonic::Status::not_found(message)
            }
            Self::NoZoneFits { .. } | Self::NotEnoughCapacity { .. } => {
                tonic::Status::failed_precondition(message)
            }
            Self::Limit(_) => tonic::Status::resource_exhausted(message),
            Self::Store { .. }
            | Self::Config(_)
            | Self::Corrupt { .. }
            | Self::Listen { .. }
            | Self::Internal(_)
            | Self::ShuttingDown => tonic::Status::unavailable(message),
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(value: Error) -> Self {
        value.status()
    }
}
