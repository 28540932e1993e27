//! Durable state: nodes (with each agent's last applied report sequence) and path states.
//!
//! [`Store`] has two implementations, [`SledStore`] on disk and [`MemStore`] in memory, which
//! share the record encoding ([`codec`]) and one test suite. A [`Batch`] is written atomically:
//! the path states a report changed and the sequence number that says it was applied land
//! together or not at all, which is what makes a replayed report apply exactly once.
//! [`Store::commit`] returns only once the batch is durable; the server acknowledges after that.

pub mod codec;
mod memory;
mod sled_store;

pub use memory::MemStore;
pub use sled_store::{DEFAULT_CACHE_BYTES, SledStore};

use zonemesh_domain::NodeName;

use crate::Error;
use zonemesh_engine::{Dirty, PathState, Snapshot, StoredNode, Topology};

/// One path as stored.
pub type StoredPath = (NodeName, NodeName, PathState);

/// Everything a store holds, as loaded at start.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Contents {
    /// Nodes.
    pub nodes: Vec<StoredNode>,
    /// Paths.
    pub paths: Vec<StoredPath>,
}

/// Every outgoing path of one node: the unit the store writes. A report only ever changes its
/// own node's outgoing paths, so one report costs one row, not one record per path.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRow {
    /// The source node.
    pub src: NodeName,
    /// Its paths by destination.
    pub paths: Vec<(NodeName, PathState)>,
}

/// Records to write together.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Batch {
    /// Nodes to (over)write.
    pub nodes: Vec<StoredNode>,
    /// Rows to (over)write.
    pub rows: Vec<StoredRow>,
}

impl Batch {
    /// The records of what changed in `topology` since the last call.
    pub fn from_dirty(topology: &mut Topology) -> Self {
        let dirty = topology.take_dirty();
        Self::from_snapshot(topology.view(), &dirty)
    }

    /// The records of the nodes and rows `dirty` names, as `topology` has them.
    pub fn from_snapshot(topology: &Snapshot, dirty: &Dirty) -> Self {
        Self {
            nodes: dirty
                .nodes
                .iter()
                .map(|id| topology.stored_node(*id))
                .collect(),
            rows: dirty
                .sources
                .iter()
                .map(|&s| StoredRow {
                    src: topology.node(s).name.clone(),
                    paths: topology
                        .outgoing(s)
                        .map(|(d, p)| (topology.node(d).name.clone(), p.clone()))
                        .collect(),
                })
                .collect(),
        }
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.rows.is_empty()
    }

    /// Path records in the batch.
    pub fn path_count(&self) -> usize {
        self.rows.iter().map(|r| r.paths.len()).sum()
    }
}

/// Durable storage of the topology.
pub trait Store: Send + 'static {
    /// Reads everything. Fails (never returns silently empty contents) when a record is
    /// unreadable.
    fn load(&self) -> Result<Contents, Error>;
    /// Writes a batch atomically; returns once it is durable.
    fn commit(&mut self, batch: &Batch) -> Result<(), Error>;
    /// Bytes the store takes (on disk, or encoded in memory).
    fn size_bytes(&self) -> u64;
}

#[cfg(test)]
mod suite {
    //! One suite, run against both implementations.

    use super::*;
    use zonemesh_domain::{Report, UnixMs};
    use zonemesh_engine::testing::{hello, name, sample};
    use zonemesh_engine::{EngineConfig, Topology};

    fn filled() -> Topology {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        let (a, _) = t.register(&hello("a", "z1"), now);
        t.register(&hello("b", "z1"), now);
        t.register(&hello("c", "z2"), now);
        let report = Report {
            sequence: 4,
            paths: vec![
                sample("a", "b", 100.0, 3, Some(2e9)),
                sample("a", "c", 900.0, 0, None),
                sample("a", "d", 100.0, 100, None),
            ],
        };
        t.apply_report(a, &report, now).unwrap();
        t
    }

    pub fn round_trips_a_topology(mut store: impl Store) {
        assert_eq!(store.load().unwrap(), Contents::default());
        let mut t = filled();
        let batch = Batch::from_dirty(&mut t);
        assert_eq!(batch.nodes.len(), 4, "a, b, c and the destination-only d");
        assert_eq!(batch.rows.len(), 1);
        assert_eq!(batch.path_count(), 3);
        store.commit(&batch).unwrap();
        assert!(store.size_bytes() > 0);
        let snapshot = store.load().unwrap();
        let now = UnixMs(1_000_000);
        let restored =
            Topology::restore(EngineConfig::default(), snapshot.nodes, snapshot.paths, now);
        let a = restored.id(&name("a")).unwrap();
        let b = restored.id(&name("b")).unwrap();
        assert_eq!(restored.node(a).applied_seq, 4);
        assert_eq!(
            restored.view().path(a, b),
            t.view()
                .path(t.id(&name("a")).unwrap(), t.id(&name("b")).unwrap())
        );
        assert_eq!(
            restored.view().node_sums(a),
            t.view().node_sums(t.id(&name("a")).unwrap())
        );
        assert_eq!(restored.view().zone_links(now), t.view().zone_links(now));
    }

    pub fn later_batches_overwrite(mut store: impl Store) {
        let mut t = filled();
        store.commit(&Batch::from_dirty(&mut t)).unwrap();
        let now = UnixMs(1_010_000);
        let a = t.id(&name("a")).unwrap();
        let report = Report {
            sequence: 5,
            paths: vec![sample("a", "b", 100.0, 0, None)],
        };
        t.apply_report(a, &report, now).unwrap();
        let batch = Batch::from_dirty(&mut t);
        assert_eq!((batch.nodes.len(), batch.rows.len()), (1, 1));
        store.commit(&batch).unwrap();
        let snapshot = store.load().unwrap();
        assert_eq!(snapshot.nodes.len(), 4);
        let stored_a = snapshot.nodes.iter().find(|n| n.name == name("a")).unwrap();
        assert_eq!(stored_a.applied_seq, 5);
        let (_, _, ab) = snapshot.paths.iter().find(|p| p.1 == name("b")).unwrap();
        assert_eq!(ab.sent_total, 200);
    }

    macro_rules! store_suite {
        ($module:ident, $make:expr) => {
            mod $module {
                #[allow(unused_imports)]
                use super::*;

                #[test]
                fn round_trips_a_topology() {
                    let (_keep, store) = $make;
                    super::round_trips_a_topology(store);
                }

                #[test]
                fn later_batches_overwrite() {
                    let (_keep, store) = $make;
                    super::later_batches_overwrite(store);
                }
            }
        };
    }

    store_suite!(memory, ((), MemStore::default()));
    store_suite!(sled, {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        (dir, store)
    });
}
