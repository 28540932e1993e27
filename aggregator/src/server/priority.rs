//! Which threads give way when the cores are short: queries before ingest.
//!
//! The owner (applying reports, the sweep), its store writes and the agents' streams run at a
//! lower scheduling priority than the threads that answer queries. On a busy machine — two cores
//! shared by the owner, the ingest runtime, the store writer and the query pool — a query that
//! is ready to run then gets a core ahead of ingest work instead of waiting out its time slice,
//! and ingest takes most of what the queries leave. Ingest never starves: a thread at nice
//! [`BACKGROUND_NICE`] (5) weighs a third of a default thread on a contended core, and gets all
//! of an idle one.
//!
//! Why 5: at 5,000 nodes with agents flooding and a query loop (docs/BENCHMARKS.md, runs side by
//! side), nice 10 cut the queries' p99 most but durable ingest fell to 138–229 k summaries/s,
//! under the 200 k target; nice 5 halved most p99s and kept ingest at 218–256 k.
//!
//! Linux only (a thread's nice value); elsewhere nothing changes.

/// The nice value of the ingest and owner threads (0 is the default; 19 the lowest priority).
pub const BACKGROUND_NICE: i32 = 5;

/// Lowers the calling thread's scheduling priority to [`BACKGROUND_NICE`], never raises it: a
/// thread already nicer (an aggregator started under `nice -n 19`) stays as it is.
///
/// Failure (a sandbox that forbids it) is logged and otherwise ignored: priorities shape the
/// tail latency of queries, not correctness.
pub fn yield_to_queries() {
    // Linux keeps a nice value per thread: `setpriority(PRIO_PROCESS, tid)` changes this one.
    #[cfg(target_os = "linux")]
    if let Err(e) =
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).and_then(|now| {
            if now >= BACKGROUND_NICE {
                return Ok(());
            }
            rustix::process::setpriority_process(Some(rustix::thread::gettid()), BACKGROUND_NICE)
        })
    {
        tracing::debug!(error = %e, "could not lower an ingest thread's priority");
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use rustix::process::getpriority_process;
    use rustix::thread::gettid;

    #[test]
    fn lowers_only_the_calling_thread() {
        let before = getpriority_process(Some(gettid())).expect("own nice value");
        let lowered = std::thread::spawn(|| {
            yield_to_queries();
            getpriority_process(Some(gettid())).expect("the thread's nice value")
        })
        .join()
        .expect("the thread ran");
        assert_eq!(lowered, BACKGROUND_NICE.max(before));
        let after = getpriority_process(Some(gettid())).expect("own nice value");
        assert_eq!(after, before, "only the calling thread is lowered");
    }
}
