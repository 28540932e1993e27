//! Durable state: nodes (with each agent's last applied report sequence), path states, the
//! tiers' state (each zone's group and the next group number), so that a restart changes no tier,
//! and the faults' baselines, so that a restart judges delays against what was learnt.
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

use zonemesh_domain::{NodeName, UnixMs};

use crate::Error;
use zonemesh_engine::faults::Baselines;
use zonemesh_engine::tiers::TierState;
use zonemesh_engine::{Dirty, PathState, Snapshot, StoredNode, Topology};

/// One path as stored.
pub type StoredPath = (NodeName, NodeName, PathState);

/// One stored record: key and value, as [`codec::records`] gives them.
pub type Record = (Vec<u8>, Vec<u8>);

/// Everything a store holds, as loaded at start.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Contents {
    /// Nodes.
    pub nodes: Vec<StoredNode>,
    /// Paths.
    pub paths: Vec<StoredPath>,
    /// The tiers' state, once tiers were derived.
    pub tiers: Option<TierState>,
    /// The faults' baselines, once some were learnt.
    pub baselines: Option<Baselines>,
    /// A replica's place in the replicated log (only with `--cluster`).
    pub cluster: Option<ClusterMeta>,
}

/// A replica's place in the replicated log, stored with the state it describes: the last entry
/// applied, the applier's clock, the nodes in id order (so that a restart gives every node its
/// id back) and the cluster's open sessions. A batch carries the order and the sessions only
/// when they changed (they are large at 5,000 nodes); what is loaded has them all.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ClusterMeta {
    /// The last entry applied.
    pub applied_seq: u64,
    /// The applier's clock (the latest stream timestamp applied).
    pub clock: UnixMs,
    /// Every node, in id order.
    pub node_order: Option<Vec<NodeName>>,
    /// The session each connected node has, by the log, and the replica that holds it.
    pub sessions: Option<Vec<(NodeName, u64, String)>>,
    /// The throughput tests each node takes part in (from the writer's entries), which keep the
    /// windows they load out of the figures.
    pub tests: Option<Vec<NodeTests>>,
}

/// The throughput tests one node takes part in: (start, end) of each.
pub type NodeTests = (NodeName, Vec<(UnixMs, UnixMs)>);

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
    /// The tiers' state to (over)write.
    pub tiers: Option<TierState>,
    /// The faults' baselines to (over)write.
    pub baselines: Option<Baselines>,
    /// The replica's place in the log to (over)write (with `--cluster`).
    pub cluster: Option<ClusterMeta>,
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
            tiers: None,
            baselines: None,
            cluster: None,
        }
    }

    /// Every node and row of `topology`: a whole copy, as a new replica starts from.
    pub fn full(topology: &Snapshot) -> Self {
        let dirty = Dirty {
            nodes: topology.nodes().map(|(id, _)| id).collect(),
            sources: topology.nodes().map(|(id, _)| id).collect(),
        };
        Self::from_snapshot(topology, &dirty)
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
            && self.rows.is_empty()
            && self.tiers.is_none()
            && self.baselines.is_none()
            && self.cluster.is_none()
    }

    /// Path records in the batch.
    pub fn path_count(&self) -> usize {
        self.rows.iter().map(|r| r.paths.len()).sum()
    }
}

impl Contents {
    /// The contents that `records` (keys and values as [`codec::records`] gives them) hold.
    pub fn from_records<'a>(
        records: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        source: &str,
    ) -> Result<Self, Error> {
        let mut contents = Self::default();
        for (key, value) in records {
            codec::decode_into(&mut contents, key, value).map_err(|reason| Error::Corrupt {
                path: source.to_owned(),
                key: String::from_utf8_lossy(key).into_owned(),
                reason,
            })?;
        }
        Ok(contents)
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
    /// Replaces everything the store holds by `records` (a replica starting from a snapshot);
    /// returns once durable.
    fn replace_all(&mut self, records: &[Record]) -> Result<(), Error>;
}

#[cfg(test)]
mod suite {
    //! One suite, run against both implementations.

    use super::*;
    use zonemesh_domain::{Report, UnixMs};
    use zonemesh_engine::testing::{SampleBuilder, hello, name, sample};
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
                // Its test timed exchanges and read the connection's retransmission timeout.
                SampleBuilder::new(&name("a"), &name("b"), 100.0)
                    .probes(100, 3)
                    .throughput(2e9, 250_000_000)
                    .exchange(100.0, 130.0)
                    .exchange_timeout(204_000.0)
                    .build(),
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
        assert_eq!(restored.node(a).exchange_timeout_us, Some(204_000.0));
        assert_eq!(
            restored.view().path(a, b),
            t.view()
                .path(t.id(&name("a")).unwrap(), t.id(&name("b")).unwrap())
        );
        assert_eq!(
            restored.view().node_sums(a),
            t.view().node_sums(t.id(&name("a")).unwrap())
        );
        // A restored topology has swept, which fits the model the zone links are shown from.
        t.fit_model(now);
        assert_eq!(restored.view().zone_links(now), t.view().zone_links(now));
        assert_eq!(
            restored.view().model().tail_repair(),
            t.view().model().tail_repair()
        );
        assert!(restored.view().model().tail_repair().is_some());
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

    pub fn keeps_the_tiers_state(mut store: impl Store) {
        let mut t = filled();
        let now = UnixMs(1_000_000);
        let (_, state) = t
            .view()
            .tiers(&Default::default(), &TierState::default(), now);
        assert_eq!(state.groups.len(), 2, "z1 and z2 (d is only a destination)");
        let mut batch = Batch::from_dirty(&mut t);
        batch.tiers = Some(state.clone());
        store.commit(&batch).unwrap();
        assert_eq!(store.load().unwrap().tiers.as_ref(), Some(&state));
        // A later batch without tiers leaves them; one with tiers replaces them.
        store.commit(&Batch::default()).unwrap();
        assert_eq!(store.load().unwrap().tiers.as_ref(), Some(&state));
        let mut moved = state.clone();
        moved.next_group += 5;
        store
            .commit(&Batch {
                tiers: Some(moved.clone()),
                ..Batch::default()
            })
            .unwrap();
        let snapshot = store.load().unwrap();
        assert_eq!(snapshot.tiers, Some(moved));
        assert_eq!(snapshot.nodes.len(), 4, "the rest untouched");
    }

    pub fn keeps_the_baselines(mut store: impl Store) {
        use zonemesh_domain::{Element, FaultKind, ZoneName};
        use zonemesh_engine::faults::{Baseline, Baselines};
        let at = |ms| UnixMs(ms);
        let baselines = Baselines::from_entries([
            (
                Element::Node(name("a1")),
                FaultKind::Delay,
                Baseline {
                    value: -12.5,
                    first_seen: at(1_000),
                    updated: at(2_000),
                    seen: at(3_000),
                    samples: 40,
                },
            ),
            (
                Element::zone_link(
                    ZoneName::parse("z", "zone-b").unwrap(),
                    ZoneName::parse("z", "zone-a").unwrap(),
                ),
                FaultKind::Rate,
                Baseline {
                    value: 100e6,
                    first_seen: at(1_000),
                    updated: at(1_000),
                    seen: at(3_000),
                    samples: 2,
                },
            ),
        ]);
        store
            .commit(&Batch {
                baselines: Some(baselines.clone()),
                ..Batch::default()
            })
            .unwrap();
        // A later batch without baselines leaves them.
        store.commit(&Batch::default()).unwrap();
        assert_eq!(store.load().unwrap().baselines, Some(baselines));
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

                #[test]
                fn keeps_the_tiers_state() {
                    let (_keep, store) = $make;
                    super::keeps_the_tiers_state(store);
                }

                #[test]
                fn keeps_the_baselines() {
                    let (_keep, store) = $make;
                    super::keeps_the_baselines(store);
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
