//! The agents' streams on this aggregator.

use std::collections::HashMap;

use zonemesh_engine::NodeId;

use super::messages::OutboundTx;

/// One agent's stream on this aggregator.
#[derive(Debug)]
pub(super) struct Session {
    /// The session's id.
    pub id: u64,
    /// Where what the aggregator says to the agent goes.
    pub outbound: OutboundTx,
    /// Targets of the last plan sent, each with whether it is probed densely, to send only
    /// changes.
    pub plan: Option<Vec<(NodeId, bool)>>,
}

/// The streams on this aggregator, by node.
pub(super) type Sessions = HashMap<NodeId, Session>;
