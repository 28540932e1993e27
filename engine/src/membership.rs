//! Who is in the topology: nodes and zones by name, registration and departure of agents, the
//! admission limit on agents, and node states.

use std::sync::Arc;

use zonemesh_domain::{Hello, NodeName, NodeState, UnixMs, ZoneName};

use crate::{
    Error, LimitHit, NodeId, NodeInfo, Row, Snapshot, Sums, Topology, UNKNOWN_ZONE, ZoneId,
    ZoneInfo,
};

impl Topology {
    pub(crate) fn intern_zone(&mut self, name: &ZoneName) -> ZoneId {
        if let Some(id) = self.snap.zone_names.get(name) {
            return *id;
        }
        let snap = &mut self.snap;
        let id = ZoneId(snap.zones.len() as u32);
        Arc::make_mut(&mut snap.zones).push(ZoneInfo {
            name: name.clone(),
            region: None,
            members: Vec::new(),
        });
        Arc::make_mut(&mut snap.zone_names).insert(name.clone(), id);
        snap.link_sums.push(Arc::new(Vec::new()));
        id
    }

    pub(crate) fn intern_node(&mut self, name: &NodeName) -> NodeId {
        if let Some(id) = self.snap.names.get(name) {
            return *id;
        }
        let unknown = ZoneName::parse("zone", UNKNOWN_ZONE).expect("valid zone name");
        let zone = self.intern_zone(&unknown);
        let snap = &mut self.snap;
        let id = NodeId(snap.nodes.len() as u32);
        snap.nodes.push(NodeInfo {
            name: name.clone(),
            zone,
            region: None,
            addresses: Arc::new([]),
            agent_version: Arc::from(""),
            icmp_mode: None,
            probe_port: 0,
            registered: false,
            connected: false,
            last_seen: None,
            applied_seq: 0,
            exchange_timeout_us: None,
            unreachable: false,
            newest_sample: None,
        });
        Arc::make_mut(&mut snap.zones)[zone.0 as usize]
            .members
            .push(id);
        Arc::make_mut(&mut snap.names).insert(name.clone(), id);
        snap.rows.push(Arc::new(Row::default()));
        snap.node_sums.push(Sums::default());
        snap.left_sums.push(Sums::default());
        snap.membership_version += 1;
        self.loaded.push(Vec::new());
        self.dirty_nodes.insert(id);
        id
    }

    /// Whether a Hello from `hello.node` fits under `max_nodes` (see
    /// [`Snapshot::admit_hello`]).
    pub fn admit_hello(&self, hello: &Hello) -> Result<(), Error> {
        self.snap.admit_hello(hello)
    }

    /// An agent said hello: records (or updates) its node and marks it connected. Returns the node
    /// and the highest report sequence already applied for it.
    pub fn register(&mut self, hello: &Hello, now: UnixMs) -> (NodeId, u64) {
        let id = self.intern_node(&hello.node);
        let node = self.snap.node(id);
        let membership_changed = !node.registered
            || self.snap.zone(node.zone).name != hello.zone
            || node.addresses[..] != hello.addresses[..]
            || node.probe_port != hello.probe_port;
        self.snap.registered += usize::from(!node.registered);
        let moved = self.place_in_zone(id, &hello.zone, &hello.region);
        let node = self.snap.nodes.get_mut(id.0 as usize);
        node.region.clone_from(&hello.region);
        if node.addresses[..] != hello.addresses[..] {
            node.addresses = Arc::from(hello.addresses.as_slice());
        }
        if *node.agent_version != *hello.agent_version {
            node.agent_version = Arc::from(hello.agent_version.as_str());
        }
        node.icmp_mode = Some(hello.icmp_mode);
        node.probe_port = hello.probe_port;
        node.registered = true;
        node.connected = true;
        node.last_seen = Some(now);
        let applied = node.applied_seq;
        if moved {
            // Every sum this node's paths fed is keyed by zone: rebuild them.
            self.rebuild_sums(now);
        }
        if membership_changed {
            self.snap.membership_version += 1;
        }
        self.dirty_nodes.insert(id);
        (id, applied)
    }

    /// Puts a node in a zone (interning it; the zone takes the node's region if it has none yet),
    /// keeping every zone's members in id order. Returns whether the node moved.
    pub(crate) fn place_in_zone(
        &mut self,
        id: NodeId,
        zone: &ZoneName,
        region: &Option<ZoneName>,
    ) -> bool {
        let zone = self.intern_zone(zone);
        let snap = &mut self.snap;
        if snap.zones[zone.0 as usize].region.is_none() && region.is_some() {
            Arc::make_mut(&mut snap.zones)[zone.0 as usize]
                .region
                .clone_from(region);
        }
        let old = snap.node(id).zone;
        if old == zone {
            return false;
        }
        let zones = Arc::make_mut(&mut snap.zones);
        zones[old.0 as usize].members.retain(|m| *m != id);
        let members = &mut zones[zone.0 as usize].members;
        let at = members.partition_point(|m| *m < id);
        members.insert(at, id);
        snap.nodes.get_mut(id.0 as usize).zone = zone;
        true
    }

    /// The node's agent still has a session (a replica restored from its checkpoint learns which
    /// from the log): connected again, as it was.
    pub fn resume(&mut self, id: NodeId) {
        self.snap.nodes.get_mut(id.0 as usize).connected = true;
    }

    /// The agent's stream closed. The node stays READY until `down_after_ms` passes.
    pub fn disconnect(&mut self, id: NodeId, now: UnixMs) {
        let node = self.snap.nodes.get_mut(id.0 as usize);
        node.connected = false;
        node.last_seen = Some(node.last_seen.map_or(now, |t| t.max(now)));
        self.dirty_nodes.insert(id);
    }
}

impl Snapshot {
    /// Whether a Hello from `hello.node` fits under [`EngineConfig`](crate::EngineConfig)'s
    /// `max_nodes` registered nodes.
    ///
    /// Only nodes whose agents said hello count here, so that names an agent reported as
    /// destinations (bounded by [`Topology::admit_report`]) can never lock real agents out.
    pub fn admit_hello(&self, hello: &Hello) -> Result<(), Error> {
        let snap = self;
        if snap
            .id(&hello.node)
            .is_some_and(|id| snap.node(id).registered)
        {
            return Ok(());
        }
        let registered = self.registered;
        if registered < snap.config.max_nodes {
            return Ok(());
        }
        Err(Error::Limit {
            limit: LimitHit::Nodes,
            message: format!(
                "hello.node: {} would be agent {} of at most {} (--max-nodes)",
                hello.node,
                registered + 1,
                snap.config.max_nodes
            ),
        })
    }

    /// The state of a node at `now`, with the reason when it is not READY.
    pub fn state(&self, id: NodeId, now: UnixMs) -> (NodeState, &'static str) {
        let node = self.node(id);
        if !node.registered {
            return (NodeState::Down, "its agent never connected");
        }
        let last_seen = node.last_seen.max(self.restored_at);
        if !node.connected && last_seen.is_none_or(|t| now.since(t) > self.config.down_after_ms) {
            return (NodeState::Down, "its agent is gone");
        }
        // A network fault only while the agent has a session: a node whose agent is gone (a
        // rollout, a drained or rebooting node) is reported as READY until --down-after, then
        // DOWN, whatever its probes meet meanwhile.
        if node.unreachable && node.connected {
            return (NodeState::Unreachable, "every probe to it was lost");
        }
        match node.newest_sample {
            Some(t) if now.since(t) > self.config.path.stale_after_ms => {
                (NodeState::Stale, "its measurements are stale")
            }
            _ => (NodeState::Ready, ""),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::*;
    use crate::*;
    use zonemesh_domain::*;

    #[test]
    fn gone_agents_turn_down_after_the_timeout() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        let (a, _) = t.register(&hello("a", "z1"), now);
        t.disconnect(a, now);
        assert_eq!(
            t.view().state(a, UnixMs(now.0 + 30_000)).0,
            NodeState::Ready
        );
        assert_eq!(t.view().state(a, UnixMs(now.0 + 30_001)).0, NodeState::Down);
    }

    #[test]
    fn a_node_every_probe_to_which_is_lost_is_down() {
        let now = UnixMs(1_000_000);
        let t = mesh(
            1,
            3,
            |_, _| 50.0,
            |_, d| if d == "z0-n2" { 100 } else { 0 },
            now,
        );
        let c = t.id(&name("z0-n2")).unwrap();
        assert_eq!(
            t.view().state(c, now),
            (NodeState::Unreachable, "every probe to it was lost")
        );
        let a = t.id(&name("z0-n0")).unwrap();
        assert_eq!(t.view().state(a, now).0, NodeState::Ready);
        // Its agent's stream ends: no session, so no longer a network fault; DOWN once
        // --down-after has passed.
        let mut t = t;
        t.disconnect(c, now);
        assert_eq!(t.view().state(c, now).0, NodeState::Ready);
        let after = UnixMs(now.0 + t.config().down_after_ms + 1);
        assert_eq!(t.view().state(c, after).0, NodeState::Down);
    }

    #[test]
    fn moving_a_node_to_another_zone_rekeys_its_sums() {
        let now = UnixMs(1_000_000);
        let mut t = mesh(2, 2, |_, _| 80.0, |_, _| 0, now);
        let a = t.id(&name("z0-n0")).unwrap();
        assert_eq!(t.view().node_sums(a).rtt_n, 2);
        t.register(&hello("z0-n0", "zone-1"), now);
        assert_eq!(
            t.view().node_sums(a).rtt_n,
            4,
            "now with the two nodes of zone-1"
        );
        assert_eq!(t.view().zone(t.view().zone_of(a)).members.len(), 3);
    }
}
