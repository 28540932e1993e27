//! What the store keeps: node records, the nodes and sources changed since the last write, and
//! a topology rebuilt from stored records.

use std::net::IpAddr;
use std::sync::Arc;

use zonemesh_domain::{IcmpMode, NodeName, UnixMs, ZoneName};

use crate::path::PathState;
use crate::{EngineConfig, NodeId, Snapshot, Topology};

/// Nodes and outgoing paths changed since the last [`Topology::take_dirty`], for the store.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dirty {
    /// Nodes whose records changed, in id order.
    pub nodes: Vec<NodeId>,
    /// Nodes some of whose outgoing paths changed, in id order.
    pub sources: Vec<NodeId>,
}

impl Dirty {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.sources.is_empty()
    }

    /// What changed in either (a write that failed, and what changed after it).
    pub fn union(mut self, other: Dirty) -> Dirty {
        self.nodes.extend(other.nodes);
        self.nodes.sort_unstable();
        self.nodes.dedup();
        self.sources.extend(other.sources);
        self.sources.sort_unstable();
        self.sources.dedup();
        self
    }
}

impl Topology {
    /// Takes the set of nodes and paths changed since the last call.
    pub fn take_dirty(&mut self) -> Dirty {
        let mut dirty = Dirty {
            nodes: self.dirty_nodes.drain().collect(),
            sources: self.dirty_sources.drain().collect(),
        };
        dirty.nodes.sort_unstable();
        dirty.sources.sort_unstable();
        dirty
    }

    /// Rebuilds a topology from stored records (what the aggregator's store kept).
    pub fn restore(
        config: EngineConfig,
        nodes: Vec<StoredNode>,
        paths: Vec<(NodeName, NodeName, PathState)>,
        now: UnixMs,
    ) -> Self {
        let mut topology = Self::new(config);
        for stored in nodes {
            let id = topology.intern_node(&stored.name);
            topology.place_in_zone(id, &stored.zone, &stored.region);
            topology.snap.registered += usize::from(stored.registered);
            let node = topology.snap.nodes.get_mut(id.0 as usize);
            node.region = stored.region;
            node.addresses = Arc::from(stored.addresses);
            node.agent_version = Arc::from(stored.agent_version);
            node.icmp_mode = stored.icmp_mode;
            node.probe_port = stored.probe_port;
            node.registered = stored.registered;
            node.last_seen = stored.last_seen;
            node.applied_seq = stored.applied_seq;
            node.exchange_timeout_us = stored.exchange_timeout_us;
        }
        // Rows whole: each source's paths sorted and merged into its row at once.
        let mut rows: std::collections::BTreeMap<NodeId, Vec<(NodeId, PathState)>> =
            std::collections::BTreeMap::new();
        for (src, dst, state) in paths {
            let (s, d) = (topology.intern_node(&src), topology.intern_node(&dst));
            rows.entry(s).or_default().push((d, state));
        }
        let config = topology.snap.config.path;
        for (src, mut paths) in rows {
            paths.sort_by_key(|(d, _)| *d);
            paths.dedup_by_key(|(d, _)| *d);
            let dsts: Vec<NodeId> = paths.iter().map(|(d, _)| *d).collect();
            let row = Arc::make_mut(topology.snap.rows.get_mut(src.0 as usize));
            row.add(&dsts);
            let mut newest = None;
            for (d, mut state) in paths {
                state.expire(now, &config);
                if let Some(t) = state.current_at(&config) {
                    newest = Some(newest.map_or(t, |n: UnixMs| n.max(t)));
                }
                let i = row.find(d).expect("added above");
                row.entries[i].state = state;
            }
            topology.snap.path_count += dsts.len();
            topology.snap.nodes.get_mut(src.0 as usize).newest_sample = newest;
        }
        topology.snap.restored_at = Some(now);
        topology.rebuild_sums(now);
        topology.sweep(now);
        topology.dirty_nodes.clear();
        topology.dirty_sources.clear();
        topology
    }
}

impl Snapshot {
    /// The record of a node, as the store keeps it.
    pub fn stored_node(&self, id: NodeId) -> StoredNode {
        let n = self.node(id);
        StoredNode {
            name: n.name.clone(),
            zone: self.zone(n.zone).name.clone(),
            region: n.region.clone(),
            addresses: n.addresses.to_vec(),
            agent_version: n.agent_version.to_string(),
            icmp_mode: n.icmp_mode,
            probe_port: n.probe_port,
            registered: n.registered,
            last_seen: n.last_seen,
            applied_seq: n.applied_seq,
            exchange_timeout_us: n.exchange_timeout_us,
        }
    }
}

/// A node as the store keeps it (names instead of ids, no connection state).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredNode {
    /// Name.
    pub name: NodeName,
    /// Zone.
    pub zone: ZoneName,
    /// Region.
    pub region: Option<ZoneName>,
    /// Addresses.
    pub addresses: Vec<IpAddr>,
    /// Agent version.
    pub agent_version: String,
    /// ICMP mode.
    pub icmp_mode: Option<IcmpMode>,
    /// Probe port.
    pub probe_port: u16,
    /// Whether the agent ever said hello.
    pub registered: bool,
    /// Last message from the agent.
    pub last_seen: Option<UnixMs>,
    /// Highest applied report sequence.
    pub applied_seq: u64,
    /// Its newest test's retransmission timeout, µs.
    pub exchange_timeout_us: Option<f32>,
}
