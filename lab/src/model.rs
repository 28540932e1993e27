//! The one model of a job's communication time, as the lab's evaluation uses it: for the oracle
//! (the model over the truth the lab injected) and for zonemesh's predicted time of any placement
//! (the model over the figures zonemesh measured).
//!
//! TODO(issue 18): this must be `zonemesh_engine::collective::predict`, the model `Place` uses
//! (one model: the engine's). Until the engine has it, [`predict`] runs the lab's older
//! latency–bandwidth formula ([`crate::train::predict`]) behind the same signature, and every
//! report written with it says so ([`MODEL`]). Swap the body of [`predict`], delete
//! `train::predict`, and nothing else here changes.

use serde::{Deserialize, Serialize};

/// Which model [`predict`] runs (printed in reports).
pub const MODEL: &str = "the lab's latency–bandwidth formula (train::predict), standing in until \
zonemesh_engine::collective lands (TODO issue 18)";

/// One direction of the path between two ranks' nodes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// Round-trip time, µs.
    pub rtt_us: f64,
    /// Loss ratio of this direction.
    pub loss: f64,
    /// Rate, bit/s.
    pub rate_bps: f64,
}

/// Two ranks on one node talk over the node's loopback (Open MPI's TCP transport, as the lab runs
/// it), which no rate limit or loss of the lab touches.
pub const LOOPBACK: Link = Link {
    rtt_us: 20.0,
    loss: 0.0,
    rate_bps: 20e9,
};

/// How the job's ranks communicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Collective {
    /// Ring all-reduce: rank r sends to rank r + 1.
    RingAllReduce,
    /// A parameter server on rank 0's node; every other rank sends it the whole gradient and
    /// receives the sum.
    ParameterServer,
}

/// A prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// Seconds per iteration.
    pub seconds: f64,
}

/// The model's time for one iteration of `collective` over `bytes` with ranks on `ranks` (node
/// indices, in rank order), the zone of a node from `zone_of`, and `link(a, b)` the path from
/// node `a` to node `b` (never called with `a == b`: ranks of one node use [`LOOPBACK`]).
pub fn predict(
    collective: Collective,
    bytes: u64,
    ranks: &[usize],
    zone_of: &dyn Fn(usize) -> usize,
    link: &dyn Fn(usize, usize) -> Link,
) -> Prediction {
    let _ = zone_of;
    let names: Vec<String> = ranks.iter().map(usize::to_string).collect();
    let index = |s: &str| s.parse::<usize>().expect("a rank's node index");
    let figures = |a: &str, b: &str| {
        let (a, b) = (index(a), index(b));
        let l = if a == b { LOOPBACK } else { link(a, b) };
        (l.rtt_us, l.loss, l.rate_bps)
    };
    let c = match collective {
        Collective::RingAllReduce => crate::train::Collective::Ring,
        Collective::ParameterServer => crate::train::Collective::ParameterServer,
    };
    let d = crate::train::predict(c, &names, bytes as usize, figures, |_| f64::INFINITY);
    Prediction {
        seconds: d.as_secs_f64(),
    }
}
