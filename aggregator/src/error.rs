//! The aggregator library's one error type.

use zonemesh_domain::FieldError;
use zonemesh_engine::Error as EngineError;

/// Everything that can go wrong in the engine, the store or the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request or report value was refused at the edge; the message names the field.
    #[error(transparent)]
    InvalidArgument(#[from] FieldError),
    /// The engine refused a request or a report (an unknown node or zone, a placement that
    /// cannot be met, a limit); the message names what was wrong.
    #[error(transparent)]
    Engine(#[from] zonemesh_engine::Error),
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
            Self::InvalidArgument(_) | Self::Engine(EngineError::InvalidArgument(_)) => {
                tonic::Status::invalid_argument(message)
            }
            Self::Engine(EngineError::UnknownNode { .. } | EngineError::UnknownZone { .. }) => {
                tonic::Status::not_found(message)
            }
            Self::Engine(
                EngineError::NoZoneFits { .. } | EngineError::NotEnoughCapacity { .. },
            ) => tonic::Status::failed_precondition(message),
            Self::Engine(EngineError::Limit { .. }) => tonic::Status::resource_exhausted(message),
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
