//! What the zonemesh binaries (`zonemesh-aggregator`, `zonemesh-agent`, `zonemesh`, the lab and
//! the fleet simulator) share: flag values and exit statuses ([`flags`]), logging, and the
//! Prometheus exposition of the aggregator and the agent ([`metrics`]).
//!
//! ```
//! use std::time::Duration;
//!
//! assert_eq!(zonemesh_common::flags::parse_duration("250ms"), Ok(Duration::from_millis(250)));
//! assert!(zonemesh_common::flags::parse_duration("10x").is_err());
//! ```

pub mod flags;
pub mod metrics;
pub mod time;
