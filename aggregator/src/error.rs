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
        #[source]
        reason: crate::store::codec::CodecError,
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
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Something inside the server that is not the caller's fault.
    #[error("internal: {0}")]
    Internal(String),
    /// The engine task has stopped (the server is shutting down).
    #[error("the aggregator is shutting down")]
    ShuttingDown,
}

/// A TLS or token file the server cannot use; the message names the flag.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The certificate, key or client CA.
    #[error(transparent)]
    Tls(#[from] crate::server::tls::TlsError),
    /// The bearer token file.
    #[error(transparent)]
    Tokens(#[from] crate::server::auth::TokensError),
    /// `--publish` without a Kubernetes client to publish with.
    #[error("--publish: no Kubernetes client (in-cluster service account or kubeconfig): {0}")]
    Kube(#[source] kube::Error),
}

impl Error {
    /// The gRPC status for this error: INVALID_ARGUMENT for bad input (never retried), NOT_FOUND
    /// for unknown names, FAILED_PRECONDITION for placements that cannot be met, UNAVAILABLE for
    /// trouble that may pass (retried with backoff).
    ///
    /// What waiting will not fix is never UNAVAILABLE, which clients retry: a damaged store is
    /// DATA_LOSS (gRPC's code for unrecoverable corruption), and the server's own configuration
    /// or an internal fault is INTERNAL. Not FAILED_PRECONDITION: that one means "this
    /// placement cannot be met" here, and `zonemesh` turns it into exit status 3.
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
            Self::Corrupt { .. } => tonic::Status::data_loss(message),
            Self::Config(_) | Self::Listen { .. } | Self::Internal(_) => {
                tonic::Status::internal(message)
            }
            // A write that failed (a full disk) may succeed later; the server may be back.
            Self::Store { .. } | Self::ShuttingDown => tonic::Status::unavailable(message),
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(value: Error) -> Self {
        value.status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::CodecError;

    #[test]
    fn only_what_may_pass_is_unavailable() {
        let corrupt = Error::Corrupt {
            path: "/data".into(),
            key: "n/node-a".into(),
            reason: CodecError::UnknownKey,
        };
        let config = Error::Config(ConfigError::Tokens(
            crate::server::auth::TokensError::Read {
                path: "/tokens".into(),
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            },
        ));
        let full_disk = Error::Store {
            path: "/data".into(),
            action: "write",
            source: std::io::Error::other("No space left on device"),
        };
        let cases = [
            (corrupt, tonic::Code::DataLoss),
            (config, tonic::Code::Internal),
            (Error::Internal("a bug".into()), tonic::Code::Internal),
            (full_disk, tonic::Code::Unavailable),
            (Error::ShuttingDown, tonic::Code::Unavailable),
        ];
        for (error, code) in cases {
            let status = error.status();
            assert_eq!(status.code(), code, "{error}");
            assert_eq!(status.message(), error.to_string());
        }
    }
}
