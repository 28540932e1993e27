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
    /// The replicated log (`--cluster`) cannot be reached or used; the message names the flag
    /// to fix when one can.
    #[error("cluster: {0}")]
    Cluster(String),
    /// Not answered now, for a reason that passes (the aggregator is starting; the topology
    /// changed under a paged answer): the message says what.
    #[error("{0}; try again")]
    TryAgain(String),
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
    /// The files a replica reaches an `https://` leader with.
    #[error("--peer-ca/--peer-cert/--peer-key: {0}")]
    Peer(#[source] zonemesh_tls::Error),
    /// `--publish` without a Kubernetes client to publish with.
    #[error("--publish: no Kubernetes client (in-cluster service account or kubeconfig): {0}")]
    Kube(#[source] kube::Error),
}

/// How an error is answered at every edge. [`Kind::codes`] is the one table from a kind to the
/// gRPC code and the HTTP status; the gRPC services, the web API and the extender all answer
/// through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bad input: never retried.
    InvalidArgument,
    /// An unknown node or zone.
    NotFound,
    /// A placement that cannot be met (`zonemesh` turns it into exit status 3).
    FailedPrecondition,
    /// Over a limit.
    ResourceExhausted,
    /// A damaged store: retrying changes nothing.
    DataLoss,
    /// The server's own configuration or fault: retrying changes nothing.
    Internal,
    /// Trouble that may pass (a store write that failed, a server shutting down): retried with
    /// backoff.
    Unavailable,
}

impl Kind {
    /// The gRPC code and the HTTP status of this kind.
    ///
    /// What waiting will not fix is never UNAVAILABLE (503), which clients retry: a damaged store
    /// is DATA_LOSS (gRPC's code for unrecoverable corruption), and the server's own
    /// configuration or an internal fault is INTERNAL; over HTTP both are 500. Not
    /// FAILED_PRECONDITION: that one means "this placement cannot be met" here.
    pub const fn codes(self) -> (tonic::Code, axum::http::StatusCode) {
        use axum::http::StatusCode as H;
        use tonic::Code as G;
        match self {
            Self::InvalidArgument => (G::InvalidArgument, H::BAD_REQUEST),
            Self::NotFound => (G::NotFound, H::NOT_FOUND),
            Self::FailedPrecondition => (G::FailedPrecondition, H::CONFLICT),
            Self::ResourceExhausted => (G::ResourceExhausted, H::TOO_MANY_REQUESTS),
            Self::DataLoss => (G::DataLoss, H::INTERNAL_SERVER_ERROR),
            Self::Internal => (G::Internal, H::INTERNAL_SERVER_ERROR),
            Self::Unavailable => (G::Unavailable, H::SERVICE_UNAVAILABLE),
        }
    }

    /// The gRPC code.
    pub const fn grpc(self) -> tonic::Code {
        self.codes().0
    }

    /// The HTTP status.
    pub const fn http(self) -> axum::http::StatusCode {
        self.codes().1
    }
}

impl Error {
    /// How this error is answered: INVALID_ARGUMENT for bad input, NOT_FOUND for unknown names,
    /// FAILED_PRECONDITION for placements that cannot be met, UNAVAILABLE for trouble that may
    /// pass; see [`Kind::codes`].
    pub fn kind(&self) -> Kind {
        match self {
            Self::InvalidArgument(_) | Self::Engine(EngineError::InvalidArgument(_)) => {
                Kind::InvalidArgument
            }
            Self::Engine(EngineError::UnknownNode { .. } | EngineError::UnknownZone { .. }) => {
                Kind::NotFound
            }
            Self::Engine(
                EngineError::NoZoneFits { .. } | EngineError::NotEnoughCapacity { .. },
            ) => Kind::FailedPrecondition,
            Self::Engine(EngineError::Limit { .. }) => Kind::ResourceExhausted,
            Self::Corrupt { .. } => Kind::DataLoss,
            Self::Config(_) | Self::Listen { .. } | Self::Internal(_) => Kind::Internal,
            // A write that failed (a full disk) may succeed later; the server may be back.
            Self::Store { .. } | Self::ShuttingDown | Self::TryAgain(_) | Self::Cluster(_) => {
                Kind::Unavailable
            }
        }
    }

    /// The gRPC status for this error, its message the error's.
    pub fn status(&self) -> tonic::Status {
        tonic::Status::new(self.kind().grpc(), self.to_string())
    }

    /// The HTTP status for this error.
    pub fn http_status(&self) -> axum::http::StatusCode {
        self.kind().http()
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
        use axum::http::StatusCode as H;
        let cases = [
            (corrupt, tonic::Code::DataLoss, H::INTERNAL_SERVER_ERROR),
            (config, tonic::Code::Internal, H::INTERNAL_SERVER_ERROR),
            (
                Error::Internal("a bug".into()),
                tonic::Code::Internal,
                H::INTERNAL_SERVER_ERROR,
            ),
            (full_disk, tonic::Code::Unavailable, H::SERVICE_UNAVAILABLE),
            (
                Error::ShuttingDown,
                tonic::Code::Unavailable,
                H::SERVICE_UNAVAILABLE,
            ),
            (
                Error::InvalidArgument(zonemesh_domain::FieldError::new("zone", "empty")),
                tonic::Code::InvalidArgument,
                H::BAD_REQUEST,
            ),
        ];
        for (error, code, http) in cases {
            let status = error.status();
            assert_eq!(status.code(), code, "{error}");
            assert_eq!(status.message(), error.to_string());
            assert_eq!(error.http_status(), http, "{error}");
        }
    }
}
