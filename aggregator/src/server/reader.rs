//! The readers' side of the owner: queries answered from the latest published snapshot, on a
//! pool of blocking threads sized to the cores; never on the owner, never waiting for it.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::Semaphore;
use zonemesh_domain::UnixMs;
use zonemesh_engine::Snapshot;

use super::clock::Clock;
use crate::Error;

/// Answers queries from the latest published snapshot.
#[derive(Clone)]
pub struct Reader {
    published: Arc<ArcSwap<Snapshot>>,
    pool: Arc<Semaphore>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("threads", &self.pool.available_permits())
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// A reader of what `published` holds, running at most `threads` queries at once.
    pub fn new(published: Arc<ArcSwap<Snapshot>>, threads: usize, clock: Arc<dyn Clock>) -> Self {
        Self {
            published,
            pool: Arc::new(Semaphore::new(threads.max(1))),
            clock,
        }
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.published.load_full()
    }

    /// The time now, by the aggregator's clock.
    pub fn now(&self) -> UnixMs {
        self.clock.now()
    }

    /// Runs `f` on the latest snapshot, on the query pool, and returns its answer.
    pub async fn query<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Snapshot, UnixMs) -> T + Send + 'static,
    ) -> Result<T, Error> {
        let permit = self
            .pool
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::ShuttingDown)?;
        let snapshot = self.snapshot();
        let now = self.now();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f(&snapshot, now)
        })
        .await
        .map_err(|e| Error::Internal(format!("a query panicked: {e}")))
    }
}
