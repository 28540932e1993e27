//! The binaries' two ways of reading a clock, and the only places outside tests that read one
//! (the aggregator's and the agent's `clippy.toml` forbid `SystemTime::now` and
//! `Instant::now` elsewhere):
//!
//! - [`unix_ms`]: the wall clock, in milliseconds since the Unix epoch, for what is stamped with
//!   a date (windows, reports, records);
//! - [`Stopwatch`]: elapsed time on the monotonic clock, for durations (timeouts, latencies,
//!   rates), which a wall clock step must not bend.
//!
//! Kernel timestamps (`SO_TIMESTAMPNS` on received probes) come from the socket, not from here.
//! Timers that tests drive on tokio's paused clock use `tokio::time::Instant`, which is not
//! forbidden.
//!
//! ```
//! use zonemesh_common::time::{Stopwatch, unix_ms};
//!
//! let watch = Stopwatch::start();
//! assert!(unix_ms() > 1_600_000_000_000);
//! assert!(watch.elapsed() < std::time::Duration::from_secs(60));
//! ```

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch by the wall clock (0 if the clock reads before 1970).
#[allow(clippy::disallowed_methods)] // the one wall-clock read
pub fn unix_ms() -> i64 {
    unix_time().as_millis() as i64
}

/// The time since the Unix epoch by the wall clock, to the nanosecond (zero if the clock reads
/// before 1970).
#[allow(clippy::disallowed_methods)] // the one wall-clock read
pub fn unix_time() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

/// A point on the monotonic clock, to measure how long something took or how long is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stopwatch(Instant);

impl Stopwatch {
    /// Starts timing now.
    #[allow(clippy::disallowed_methods)] // the one monotonic-clock read
    pub fn start() -> Self {
        Self(Instant::now())
    }

    /// Time since [`Stopwatch::start`].
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }

    /// The instant it started, for APIs that take an `Instant` (deadlines, socket timeouts).
    pub fn instant(&self) -> Instant {
        self.0
    }
}

/// The monotonic clock's reading now, for code that keeps deadlines as `Instant`s.
#[allow(clippy::disallowed_methods)] // the one monotonic-clock read
pub fn monotonic_now() -> Instant {
    Instant::now()
}
