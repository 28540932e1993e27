//! The owner's settings and their defaults.

use std::sync::Arc;
use std::time::Duration;

use super::super::clock::{Clock, WallClock};

/// Paths one step of the sweep visits (about a millisecond): a query waits for at most one
/// step, where a whole pass over 500,000 paths takes tens of milliseconds.
pub const SWEEP_STEP_PATHS: usize = 16_384;

/// Path summaries in decoded reports that may wait to be applied and made durable at once: the
/// ingest budget. Past it, streams stop reading (HTTP/2 flow control then holds their agents
/// back), so that a flood of reports costs bounded memory. It counts summaries, not reports, so
/// that it bounds the same memory whatever size agents give their reports: 102,400 summaries
/// (a window of 1,024 agents of 100 peers) are about 30 MB decoded.
pub const INGEST_BUDGET_PATHS: usize = 102_400;

/// A report's place in the ingest budget: a permit per summary (one for a report of none, at
/// most the whole budget).
pub fn budget_permits(paths: usize) -> u32 {
    paths.clamp(1, INGEST_BUDGET_PATHS) as u32
}

/// How long a store write may run before the store counts as unhealthy (a commit takes
/// milliseconds; see [`OwnerConfig::store_stall`]).
pub const STORE_STALL: Duration = Duration::from_secs(10);

/// How long a store write may run before the owner gives up on the store
/// ([`OwnerConfig::store_hang`]).
pub const STORE_HANG: Duration = Duration::from_secs(60);

/// How long after its start a replica still relays a throughput grant of the leader's: an agent
/// that starts later would still be sending when its nodes' next test may start (the scheduler
/// keeps nodes busy 2 s past a test's end).
pub const RELAY_SLACK_MS: i64 = 1_000;

/// Paths up to which the owner fits the model itself (about 1.3 ms of work at 10,000 paths).
pub const MODEL_ON_OWNER_PATHS: usize = 10_000;

/// Settings of the owner.
#[derive(Debug, Clone)]
pub struct OwnerConfig {
    /// How often to sweep, re-plan and grant throughput slots.
    pub tick: Duration,
    /// Commands handled before the owner looks at queries and finished writes again.
    pub batch_commands: usize,
    /// Fault injection for tests: every store write takes at least this long, which widens the
    /// window in which a crash finds reports applied in memory but not yet durable.
    pub commit_delay: Duration,
    /// Queries answered at once; default: the cores.
    pub query_threads: usize,
    /// Write the store on the owner itself instead of a blocking thread (tests on a paused
    /// clock, where a write must finish before the next command is looked at).
    pub inline_writes: bool,
    /// Topologies of at most this many paths get the model fitted on the owner at the end of the
    /// sweep pass, as an embedded engine does (cheap: about 130 ns a path), so that the figures
    /// published with the pass are the model's; larger ones on the blocking pool. Default
    /// [`MODEL_ON_OWNER_PATHS`].
    pub model_on_owner_paths: usize,
    /// A store write still running after this long makes the store unhealthy (`/healthz`
    /// degraded, Ingest NOT_SERVING) until it finishes: a disk can hang a write instead of
    /// failing it (sled 0.34 has been seen waiting forever in a flush on a full tmpfs), and a
    /// write that never returns must not look like a slow one. Default [`STORE_STALL`].
    pub store_stall: Duration,
    /// A store write still running after this long stops the owner with
    /// [`Ended::StoreHung`](super::Ended::StoreHung), and the server with an error, so that a
    /// supervisor restarts the process: sled cannot be opened again in a process while a hung
    /// write holds its lock. Everything acknowledged is on disk; agents send what was not
    /// acknowledged again. Default [`STORE_HANG`].
    pub store_hang: Duration,
    /// The clock.
    pub clock: Arc<dyn Clock>,
}

impl Default for OwnerConfig {
    fn default() -> Self {
        Self {
            tick: Duration::from_secs(1),
            batch_commands: 256,
            commit_delay: Duration::ZERO,
            query_threads: std::thread::available_parallelism().map_or(2, usize::from),
            inline_writes: false,
            model_on_owner_paths: MODEL_ON_OWNER_PATHS,
            store_stall: STORE_STALL,
            store_hang: STORE_HANG,
            clock: Arc::new(WallClock),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_takes_a_place_in_the_budget_per_summary() {
        assert_eq!(budget_permits(32), 32);
        assert_eq!(budget_permits(0), 1, "an empty report still waits its turn");
        assert_eq!(
            budget_permits(INGEST_BUDGET_PATHS + 1),
            INGEST_BUDGET_PATHS as u32,
            "a report larger than the budget takes all of it, and still goes through"
        );
    }
}
