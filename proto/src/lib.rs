//! The zonemesh wire protocol, package `zonemesh.v1`: the public contract.
//!
//! The generated messages, clients and servers live in [`v1`]; [`FILE_DESCRIPTOR_SET`] is the
//! encoded descriptor set for gRPC server reflection. Values cross from the wire into the rest of
//! zonemesh only through the `TryFrom` conversions of [`convert`] into the domain types of
//! `zonemesh-domain`, which refuse NaN, negative or impossible figures and empty names with a
//! [`FieldError`](zonemesh_domain::FieldError) that names the field:
//!
//! ```
//! use zonemesh_domain::PathSample;
//! use zonemesh_proto::v1;
//!
//! let wire = v1::PathSummary {
//!     src: "node-a".into(),
//!     dst: "node-b".into(),
//!     window_start_unix_ms: 1_000,
//!     window_end_unix_ms: 11_000,
//!     probes_sent: 10,
//!     probes_received: 12, // more replies than probes: impossible
//!     ..Default::default()
//! };
//! let err = PathSample::try_from(wire).unwrap_err();
//! assert_eq!(err.field(), "probes_received");
//! ```

pub mod codec;
pub mod convert;
#[cfg(feature = "json")]
pub mod json;

/// Generated code of package `zonemesh.v1`.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    missing_debug_implementations
)]
pub mod v1 {
    tonic::include_proto!("zonemesh.v1");
}

/// Encoded `FileDescriptorSet` of every `zonemesh.v1` file, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("zonemesh_descriptor");

/// Fully qualified names of the services, as reflection lists them.
pub const INGEST_SERVICE: &str = "zonemesh.v1.Ingest";
/// See [`INGEST_SERVICE`].
pub const TOPOLOGY_SERVICE: &str = "zonemesh.v1.Topology";
