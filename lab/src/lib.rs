//! The zonemesh network lab: a cluster of zones and nodes on one Linux machine, built from
//! network namespaces, veth pairs and one bridge per zone, with the impairments a real network
//! has — delay and jitter between zones, random loss, rate limits — set by the test.
//!
//! This kernel has no `netem`, so delay comes from [`emulator`], a user-space link emulator on
//! the router namespace's forwarding hop (NFQUEUE); loss from iptables' `statistic` match; rate
//! limits from `tbf`. Every lab has a unique name prefix and removes everything it made when it
//! is dropped (also when a test panics), on SIGINT/SIGTERM once [`cleanup_on_signals`] is called,
//! and `zonemesh-lab cleanup` removes what a killed process left. Building one needs root.
//!
//! What is measured in a lab (accuracy, the placement evaluations) and the `zonemesh-lab` command
//! live in `zonemesh-experiments`, which depends on this crate and never the other way.
//!
//! ```no_run
//! use std::time::Duration;
//! use zonemesh_lab::{Lab, LabSpec};
//!
//! let spec = LabSpec::new()
//!     .zone("zone-a", &["a1", "a2"])
//!     .zone("zone-b", &["b1"])
//!     .delay("zone-a", "zone-b", Duration::from_millis(4), Duration::ZERO)
//!     .node_loss("a2", 0.05)
//!     .node_rate("b1", 100_000_000);
//! let lab = Lab::build(spec)?;
//! let b1 = lab.node("b1").address.to_string();
//! let out = lab.run("a1", "ping", &["-c", "3", "-q", &b1])?;
//! println!("{out}");
//! # anyhow::Ok(())
//! ```

pub mod demo_cluster;
pub mod emulator;
pub mod fill;
mod lab;
pub mod nats;
pub mod netns;
pub mod process;
pub mod spec;
pub mod stack;
pub mod tools;
pub mod watchdog;

pub use lab::{
    CONTROL_ADDRESS, DEFAULT_PREFIX, Injection, Lab, LabNode, Leftover, check_machine, cleanup,
    cleanup_on_signals, in_netns,
};
pub use spec::{LabSpec, LinkSpec, NodeSpec, SpecError, ZoneSpec};
pub use watchdog::Watchdog;
