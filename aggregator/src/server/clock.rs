//! The aggregator's time: its `now` comes from a [`Clock`] only, so that tests can drive it.
//! Windows, staleness and ages use it at apply time, never the agents' clocks.

use std::fmt;

use zonemesh_domain::UnixMs;

/// The time.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The time now.
    fn now(&self) -> UnixMs;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> UnixMs {
        UnixMs(zonemesh_common::time::unix_ms())
    }
}
