//! The store's health, written by the owner and read by the edges: `/healthz`, the
//! `zonemesh_store_healthy` gauge and the gRPC health of `zonemesh.v1.Ingest` (NOT_SERVING while
//! the store cannot be written, so that agents and probes see it).

use std::sync::Arc;

use tokio::sync::watch;

/// `None` while store writes succeed; else why they do not (a failed or stalled write).
pub type StoreProblem = Option<Arc<str>>;

/// The store's health: one writer (the owner), any number of readers.
#[derive(Debug, Clone)]
pub struct StoreHealth(Arc<watch::Sender<StoreProblem>>);

impl Default for StoreHealth {
    fn default() -> Self {
        Self(Arc::new(watch::channel(None).0))
    }
}

impl StoreHealth {
    /// Records a problem; true when the store was healthy until now.
    pub fn fail(&self, problem: impl Into<Arc<str>>) -> bool {
        let problem = problem.into();
        let mut first = false;
        self.0.send_modify(|p| {
            first = p.is_none();
            *p = Some(problem);
        });
        first
    }

    /// Records that writes succeed; true when there was a problem until now.
    pub fn recover(&self) -> bool {
        self.0.send_if_modified(|p| p.take().is_some())
    }

    /// The problem now, if any.
    pub fn problem(&self) -> StoreProblem {
        self.0.borrow().clone()
    }

    /// A receiver that hears every change.
    pub fn watch(&self) -> watch::Receiver<StoreProblem> {
        self.0.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_and_the_recovery_are_told_apart_from_repeats() {
        let health = StoreHealth::default();
        let mut seen = health.watch();
        assert!(!health.recover(), "healthy already");
        assert!(health.fail("disk full"));
        assert!(!health.fail("disk still full"), "not the first");
        assert_eq!(health.problem().as_deref(), Some("disk still full"));
        assert!(seen.has_changed().unwrap());
        seen.mark_unchanged();
        assert!(health.recover());
        assert!(seen.has_changed().unwrap());
        assert_eq!(health.problem(), None);
    }
}
