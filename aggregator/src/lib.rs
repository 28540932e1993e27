//! The zonemesh aggregator: where measurements become placement decisions.
//!
//! It runs the engine (`zonemesh-engine`: the zone-aware topology matrix, ranking, placement and
//! the probe planner) behind a server. The [`store`] keeps the engine's state durable (sled, or
//! memory). The [`server`] serves it over gRPC and HTTP.
//!
//! The engine itself is the crate `zonemesh-engine`; a scheduler that embeds zonemesh depends on
//! that alone.

pub mod cluster;
mod error;
pub mod server;
pub mod store;

pub use error::{ConfigError, Error, Kind as ErrorKind};
