//! What the aggregator tells agents: which peers to probe and when to test throughput.

use std::net::IpAddr;

use crate::{FieldError, NodeName, UnixMs, ZoneName};

/// One peer to probe. [`checked`](Self::checked) says whether it can be probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTarget {
    /// The peer.
    pub node: NodeName,
    /// Its zone (agents label their per-zone metrics with it).
    pub zone: ZoneName,
    /// Its addresses, best first.
    pub addresses: Vec<IpAddr>,
    /// Its TCP probe port.
    pub probe_port: u16,
    /// Time between the starts of two trains, ms.
    pub interval_ms: u32,
    /// Probes per train.
    pub train_size: u32,
    /// Gap between two probes of a train, ms.
    pub train_gap_ms: u32,
    /// A probe without a reply after this long is lost, ms.
    pub timeout_ms: u32,
}

impl ProbeTarget {
    /// Checks that the target can be probed: it has an address, and its trains have an interval,
    /// a probe and a timeout. The error names the field as the wire spells it.
    pub fn checked(self) -> Result<Self, FieldError> {
        if self.addresses.is_empty() {
            return Err(FieldError::new(
                "addresses",
                "at least one address is needed",
            ));
        }
        let at_least_one = [
            ("interval_ms", self.interval_ms),
            ("train_size", self.train_size),
            ("timeout_ms", self.timeout_ms),
        ];
        if let Some((field, _)) = at_least_one.iter().find(|(_, value)| *value == 0) {
            return Err(FieldError::new(*field, "must be at least 1"));
        }
        Ok(self)
    }
}

/// One agent's probe plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    /// Increases with every plan the aggregator sends.
    pub version: u64,
    /// Length of a report window, ms.
    pub window_ms: u32,
    /// Peers to probe.
    pub targets: Vec<ProbeTarget>,
}

/// Permission to measure throughput to one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThroughputGrant {
    /// Identifies the grant in logs.
    pub id: u64,
    /// The peer.
    pub peer: NodeName,
    /// Address of its responder, when it advertised one.
    pub peer_address: Option<IpAddr>,
    /// Port of its responder.
    pub peer_port: u16,
    /// When to start.
    pub start: UnixMs,
    /// Counted length of the transfer, ms.
    pub duration_ms: u32,
    /// Warm-up before counting starts, ms (as iperf3 `-O`).
    pub warmup_ms: u32,
    /// Parallel TCP streams.
    pub streams: u32,
    /// The lease epoch of the leader that decided it (0: a single aggregator).
    pub epoch: u64,
}
