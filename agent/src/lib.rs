//! The zonemesh agent's testable core: probe scheduling, windowing and statistics, driven through
//! the [`probe::Prober`] trait so that tests run them against a fake network on tokio's paused
//! clock. The sockets (ICMP, TCP) and the `zonemesh-agent` binary come on top of this (issue 4).
//!
//! ```
//! use std::time::Duration;
//! use zonemesh_agent::stats::WindowStats;
//!
//! let mut w = WindowStats::new();
//! for us in [100, 120, 110] {
//!     w.reply(Duration::from_micros(us));
//! }
//! w.lost();
//! assert_eq!((w.sent(), w.received()), (4, 3));
//! let rtt = w.rtt().unwrap();
//! assert_eq!(rtt.samples, 3);
//! assert!((rtt.p50_us - 110.0).abs() < 1.0);
//! ```

pub mod probe;
pub mod stats;
