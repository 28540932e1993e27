//! The time one iteration of a job's collective communication takes on a network, predicted
//! with a latency–bandwidth (α–β) model.
//!
//! The network is what [`Network`] says: for every ordered pair of nodes a [`Link`] (its
//! one-way delay as half the RTT, its loss, the rate a TCP transfer gets on it), each node's own
//! ingress and egress rates, and optionally the capacity shared by everything that crosses from
//! one zone to another. zonemesh's engine answers it from the measured network
//! ([`SnapshotNetwork`](crate::network::SnapshotNetwork)); the lab answers it from the
//! impairments it injected (the oracle). The same functions predict both, so that a prediction
//! error is the model's, not the formula's.
//!
//! Terms, for `n` bytes per iteration and `p` ranks:
//!
//! - **Sending `m` bytes over a link** `a → b` costs `d + α + 8m / r + ρ`: its one-way delay
//!   `d = rtt / 2`, the message's own cost to the hosts' software `α`, the serialisation at the
//!   link's rate `r`, and the expected cost of a loss `ρ`. Of the message's `k = ⌈m / MSS⌉`
//!   segments, a loss among the first `k − 3` is repaired by fast retransmit about a round trip
//!   later; a loss among the last 3 (fewer than the three duplicate acknowledgements fast
//!   retransmit needs follow it) waits for a tail-loss probe; a probe repairs all but the last
//!   segment within a few round trips, and a lost last segment waits out a timeout `T`:
//!   `ρ = (1 − (1 − ℓ)^(k − 1)) · rtt + ℓ · T` ([`TAIL_SEGMENTS`]: calibrated against Open MPI
//!   in `docs/ACCURACY.md`). A link's rate is never above its ends' egress and ingress.
//!
//!   Where each term is measured: `rtt` and `ℓ` by the agents' ICMP probes (round trips), `r`
//!   by the throughput tests of that direction; `α` and `T` by the agents' timed exchanges of a
//!   64-byte message before each throughput test (application to application over TCP):
//!   `α = (median exchange − rtt) / 2`, and, since such a message is all tail,
//!   `T = (mean exchange − median exchange) / ℓ` ([`Link::with_exchanges`]). One path's 64
//!   exchanges rarely meet a loss, so where the model has fitted `T` over every lossy path's
//!   exchanges ([`TailRepair`](crate::model::TailRepair)), that `T` counts on every lossy link
//!   ([`Link::with_tail_repair`]); while those exchanges expect too few losses to say, the
//!   model's `T` is the hosts' retransmission timeout as the agents read it (`TCP_INFO`
//!   `tcpi_rto` after the exchanges). Where none says, `α = 0` and a tail loss costs a round
//!   trip like any other.
//! - **Concurrent flows share** their ends and the zone pair they cross: in each phase a flow's
//!   rate is at most its source's egress and its destination's ingress divided by the flows they
//!   carry in that phase, and the capacity between two zones divided by the flows crossing it in
//!   that direction.
//! - **Ring all-reduce** (ranks in order `0 → 1 → … → p−1 → 0`): `2(p − 1)` steps, each moving
//!   `n / p` bytes over every link of the ring at once. Every rank waits for its predecessor's
//!   chunk, so the steps pace like the ring's mean cycle: the time is the larger of the steps times
//!   the slowest serialisation `8(n / p) / r`, and — because a chunk walks `2(p − 1)` consecutive
//!   links — one trip around the ring (delays, repairs and serialisations) times `2(p − 1) / p`.
//!   A good rank order crosses each zone boundary once in each direction instead of at every
//!   step.
//! - **Hierarchical all-reduce**: the ranks of each zone (in rank order, the first one the zone's
//!   leader) reduce-scatter in a ring inside the zone (`k − 1` steps of `n / k`) and gather to the
//!   leader (incast: `(k − 1) · n / k` bytes into one node); the leaders all-reduce in a ring
//!   across zones (as above, over `n` bytes); each leader then scatters `n / k` to every member
//!   and the zone all-gathers in a ring (`k − 1` steps). The zones work in parallel; the slowest
//!   zone sets the pace of each phase.
//! - **Parameter server** with `s` servers (the first `s` ranks; servers are workers too): the
//!   gradient is sharded, every worker pushes `n / s` to each server and pulls `n / s` back. A
//!   push phase lasts as long as the worst of: a server's incast (`(p − 1) · n / s` bytes through
//!   its ingress), a worker's egress (`n` bytes, less its own shard), and the slowest single
//!   transfer; the pull phase mirrors it.
//! - **All-to-all**, as a pairwise exchange (Open MPI's schedule for large messages): `p − 1`
//!   rounds; in round `k` rank `r` sends `n / (p − 1)` bytes to rank `r + k` (mod `p`), every
//!   rank at once. Each round lasts its slowest transfer (with the sharing above), and the rounds
//!   follow one another, so every round pays its delay: `p − 1` latency terms, not one.
//!
//! The [`Prediction`] names the bottleneck: the link (or node, or zone pair) whose term decided
//! the time, and why.

use std::fmt;

/// TCP payload per segment on an Ethernet path, bytes.
pub const MSS_BYTES: f64 = 1448.0;

/// The collective and the job are domain types: `Place` takes them in its query.
pub use zonemesh_domain::{Collective, Job};

/// Segments at a message's end whose loss waits for a timeout rather than fast retransmit: the
/// last one. (Fewer than three duplicate acknowledgements follow any of the last three, RFC 5681,
/// but a tail-loss probe repairs the others within a few round trips; charging all three the
/// timeout the exchanges measure predicted Open MPI worse than charging none, the last one alone
/// better: `docs/ACCURACY.md`, "Calibration of the collective model".)
pub const TAIL_SEGMENTS: f64 = 1.0;

/// One direction between two nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Round-trip time, µs.
    pub rtt_us: f64,
    /// Loss ratio, 0..=1.
    pub loss: f64,
    /// The rate one TCP transfer gets, bit/s.
    pub rate_bps: f64,
    /// What a message costs the two hosts' software beyond the wire, one way, µs (the α of an
    /// α–β model); 0 when unknown.
    pub message_us: f64,
    /// How long a loss among a message's last [`TAIL_SEGMENTS`] takes to repair, µs (a tail-loss
    /// probe or a retransmission timeout, not fast retransmit); `None` when unknown, and then a
    /// round trip, as any other loss.
    pub tail_repair_us: Option<f64>,
}

impl Link {
    /// A link of its wire figures alone: no per-message cost, every loss repaired in a round
    /// trip.
    pub const fn wire(rtt_us: f64, loss: f64, rate_bps: f64) -> Self {
        Self {
            rtt_us,
            loss,
            rate_bps,
            message_us: 0.0,
            tail_repair_us: None,
        }
    }

    /// The link with what timed exchanges of a small message between its ends say (their median
    /// and mean round trip, µs, application to application): a message's own cost is half of
    /// what the median adds to the link's round trip; and since a message that short is all
    /// tail, the mean's excess over the median, divided by the chance that an exchange met a
    /// loss (the round-trip loss), is what repairing a tail loss takes.
    pub fn with_exchanges(mut self, p50_us: f64, mean_us: f64) -> Self {
        if !(p50_us.is_finite() && mean_us.is_finite()) {
            return self;
        }
        let rtt = self.rtt_us.max(0.0);
        self.message_us = ((p50_us - rtt) / 2.0).max(0.0);
        self.tail_repair_us = (self.loss > 0.0 && mean_us > p50_us)
            .then(|| ((mean_us - p50_us) / self.loss).clamp(rtt, MAX_TAIL_REPAIR_US));
        self
    }

    /// The link with a tail repair of `us` (the model's [`TailRepair`](crate::model::TailRepair):
    /// fitted over every lossy path's exchanges, or the hosts' retransmission timeout) in place
    /// of what its own exchanges said; at least a round trip. A link without loss has nothing to
    /// repair.
    pub fn with_tail_repair(mut self, us: f64) -> Self {
        if self.loss > 0.0 && us.is_finite() {
            self.tail_repair_us = Some(us.clamp(self.rtt_us.max(0.0), MAX_TAIL_REPAIR_US));
        }
        self
    }

    /// What sending `bytes` over the link costs beside its serialisation, seconds: the one-way
    /// delay, the message's own cost, and the expected repair of a loss (see the module docs).
    pub fn latency_s(&self, bytes: f64) -> f64 {
        let rtt = self.rtt_us.max(0.0) / 1e6;
        let kept = 1.0 - self.loss.clamp(0.0, 1.0);
        let segments = (bytes.max(0.0) / MSS_BYTES).ceil();
        let repair = match self.tail_repair_us {
            None => (1.0 - kept.powf(segments)) * rtt,
            Some(tail) => {
                let last = segments.min(TAIL_SEGMENTS);
                (1.0 - kept.powf(segments - last)) * rtt + (1.0 - kept.powf(last)) * tail / 1e6
            }
        };
        rtt / 2.0 + self.message_us.max(0.0) / 1e6 + repair
    }
}

/// The longest tail repair [`Link::with_exchanges`] infers, µs: Linux's largest retransmission
/// timeout (`TCP_RTO_MAX`, 120 s) would be a connection in trouble, not a cost to plan with.
const MAX_TAIL_REPAIR_US: f64 = 60e6;

/// The network a prediction runs on. Nodes are indices chosen by the caller.
pub trait Network {
    /// The link from `a` to `b` (for two ranks on one host, the host's loopback).
    fn link(&self, a: usize, b: usize) -> Link;
    /// Whether `a` and `b` are on one host: a flow between them uses neither node's own link nor
    /// any zone capacity, only its link's delay and rate. By default, the same index.
    fn same_host(&self, a: usize, b: usize) -> bool {
        a == b
    }
    /// The zone of `a` (any index; equal zones are equal numbers).
    fn zone(&self, a: usize) -> usize;
    /// What `a` can send in all, bit/s (`f64::INFINITY` when unknown).
    fn egress_bps(&self, a: usize) -> f64;
    /// What `a` can receive in all, bit/s.
    fn ingress_bps(&self, a: usize) -> f64;
    /// What everything crossing from zone `za` to zone `zb` shares, bit/s, if known.
    fn zone_capacity_bps(&self, za: usize, zb: usize) -> Option<f64>;
}

/// What decided a prediction.
#[derive(Debug, Clone, PartialEq)]
pub enum Bottleneck {
    /// Nothing moved (one rank, or nothing to send).
    None,
    /// A link's transfer: the ranks' nodes at both ends.
    Link {
        /// Sending node.
        from: usize,
        /// Receiving node.
        to: usize,
    },
    /// A node's own link, shared by the flows it sends or receives at once.
    Node {
        /// The node.
        node: usize,
        /// Whether its receiving side (else its sending side).
        ingress: bool,
    },
    /// The capacity between two zones, shared by the flows crossing it.
    Zones {
        /// Source zone.
        from: usize,
        /// Destination zone.
        to: usize,
    },
    /// The delays around the ring, not any one link's rate.
    RingLatency,
}

/// A predicted iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// Seconds per iteration of the collective.
    pub seconds: f64,
    /// What decided it.
    pub bottleneck: Bottleneck,
    /// One line: why that is the bottleneck (the term and its figures).
    pub why: String,
}

impl fmt::Display for Prediction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} ms: {}", self.seconds * 1e3, self.why)
    }
}

/// One flow of a phase: `bytes` from node `from` to node `to`.
#[derive(Debug, Clone, Copy)]
struct Flow {
    from: usize,
    to: usize,
    bytes: f64,
}

/// What one flow of a phase costs.
#[derive(Debug, Clone)]
struct FlowTime {
    /// One-way delay plus the expected repair of a loss, seconds.
    delay: f64,
    /// Serialisation at the flow's share of the rates it passes, seconds.
    serial: f64,
    bottleneck: Bottleneck,
    /// What the line saying why is made of, formatted only for the flow that decides.
    why: Why,
}

/// The figures behind a flow's bottleneck, for its one line of why.
#[derive(Debug, Clone, Copy)]
enum Why {
    Link {
        rate: f64,
        rtt_us: f64,
        loss: f64,
        tail_repair_us: Option<f64>,
    },
    Egress {
        bps: f64,
        flows: u32,
    },
    Ingress {
        bps: f64,
        flows: u32,
    },
    Zones {
        flows: u32,
    },
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Why::Link {
                rate,
                rtt_us,
                loss,
                tail_repair_us,
            } => {
                write!(
                    f,
                    "the link at {:.0} Mbit/s, RTT {:.0} µs, loss {:.2} %",
                    rate / 1e6,
                    rtt_us,
                    loss * 100.0
                )?;
                match tail_repair_us {
                    Some(us) => write!(f, ", a lost last segment waits {:.0} ms", us / 1e3),
                    None => Ok(()),
                }
            }
            Why::Egress { bps, flows } => write!(
                f,
                "the sender's own link, {:.0} Mbit/s shared by {flows} flow(s)",
                bps / 1e6
            ),
            Why::Ingress { bps, flows } => write!(
                f,
                "the receiver's own link, {:.0} Mbit/s shared by {flows} flow(s)",
                bps / 1e6
            ),
            Why::Zones { flows } => {
                write!(f, "the capacity between the zones, shared by {flows} flows")
            }
        }
    }
}

impl FlowTime {
    fn total(&self) -> f64 {
        self.delay + self.serial
    }
}

/// Whether a flow stays on one host (two ranks on one node): it uses neither end's own link nor
/// any zone capacity.
fn on_one_host(net: &dyn Network, f: &Flow) -> bool {
    net.same_host(f.from, f.to)
}

/// What each of a set of concurrent flows costs: its link's delay and repair, and its
/// serialisation at its link's rate, shared at its ends and across zone pairs (see the module
/// docs).
fn flow_times(net: &dyn Network, flows: &[Flow]) -> Vec<FlowTime> {
    use std::collections::HashMap;
    let mut out: HashMap<usize, u32> = HashMap::new();
    let mut into: HashMap<usize, u32> = HashMap::new();
    let mut across: HashMap<(usize, usize), u32> = HashMap::new();
    for f in flows {
        if on_one_host(net, f) {
            continue;
        }
        *out.entry(f.from).or_default() += 1;
        *into.entry(f.to).or_default() += 1;
        let (za, zb) = (net.zone(f.from), net.zone(f.to));
        if za != zb {
            *across.entry((za, zb)).or_default() += 1;
        }
    }
    flows
        .iter()
        .map(|f| {
            let link = net.link(f.from, f.to);
            let local = on_one_host(net, f);
            let (egress, ingress) = if local {
                (f64::INFINITY, f64::INFINITY)
            } else {
                (
                    net.egress_bps(f.from) / f64::from(out[&f.from]),
                    net.ingress_bps(f.to) / f64::from(into[&f.to]),
                )
            };
            let (za, zb) = (net.zone(f.from), net.zone(f.to));
            let zone_share = if za == zb || local {
                f64::INFINITY
            } else {
                net.zone_capacity_bps(za, zb)
                    .map_or(f64::INFINITY, |c| c / f64::from(across[&(za, zb)]))
            };
            let rate = link
                .rate_bps
                .min(egress)
                .min(ingress)
                .min(zone_share)
                .max(1.0);
            let (bottleneck, why) = if rate >= link.rate_bps {
                (
                    Bottleneck::Link {
                        from: f.from,
                        to: f.to,
                    },
                    Why::Link {
                        rate,
                        rtt_us: link.rtt_us,
                        loss: link.loss,
                        tail_repair_us: link.tail_repair_us,
                    },
                )
            } else if rate >= egress {
                (
                    Bottleneck::Node {
                        node: f.from,
                        ingress: false,
                    },
                    Why::Egress {
                        bps: net.egress_bps(f.from),
                        flows: out[&f.from],
                    },
                )
            } else if rate >= ingress {
                (
                    Bottleneck::Node {
                        node: f.to,
                        ingress: true,
                    },
                    Why::Ingress {
                        bps: net.ingress_bps(f.to),
                        flows: into[&f.to],
                    },
                )
            } else {
                (
                    Bottleneck::Zones { from: za, to: zb },
                    Why::Zones {
                        flows: across[&(za, zb)],
                    },
                )
            };
            FlowTime {
                delay: link.latency_s(f.bytes),
                serial: f.bytes.max(0.0) * 8.0 / rate,
                bottleneck,
                why,
            }
        })
        .collect()
}

/// The time of a set of concurrent flows that each must arrive whole: the slowest flow.
fn phase(net: &dyn Network, flows: &[Flow]) -> (f64, Bottleneck, String) {
    let slowest =
        flow_times(net, flows)
            .into_iter()
            .fold(None::<FlowTime>, |worst, f| match worst {
                Some(w) if f.total() <= w.total() => Some(w),
                _ if f.total() > 0.0 => Some(f),
                w => w,
            });
    match slowest {
        Some(f) => (f.total(), f.bottleneck, f.why.to_string()),
        None => (0.0, Bottleneck::None, String::new()),
    }
}

/// A ring all-reduce over `nodes` in order, moving `bytes` in all (see the module docs). Each
/// rank waits for its predecessor's chunk and for its own send: in steady state a step lasts the
/// slower of the slowest serialisation and the mean of (delay + serialisation) around the ring.
fn ring(net: &dyn Network, nodes: &[usize], bytes: f64) -> (f64, Bottleneck, String) {
    let p = nodes.len();
    if p < 2 || bytes <= 0.0 {
        return (0.0, Bottleneck::None, "nothing crosses the network".into());
    }
    let chunk = bytes / p as f64;
    let flows: Vec<Flow> = (0..p)
        .map(|i| Flow {
            from: nodes[i],
            to: nodes[(i + 1) % p],
            bytes: chunk,
        })
        .collect();
    let times = flow_times(net, &flows);
    let steps = 2.0 * (p - 1) as f64;
    let slowest = times
        .iter()
        .max_by(|a, b| a.serial.total_cmp(&b.serial))
        .expect("two flows at least");
    let around: f64 = times.iter().map(FlowTime::total).sum();
    let delays: f64 = times.iter().map(|t| t.delay).sum();
    let bandwidth = steps * slowest.serial;
    let latency = steps / p as f64 * around;
    // A trip around the ring holds every flow's serialisation too, so with equal links its
    // bound passes the slowest link's by the delays alone: the delays are named the bottleneck
    // only when they are most of a trip.
    if latency > bandwidth && delays > around - delays {
        (
            latency,
            Bottleneck::RingLatency,
            format!(
                "the delays around the ring: {:.2} ms a trip, {:.1} trips",
                around * 1e3,
                steps / p as f64
            ),
        )
    } else {
        (
            latency.max(bandwidth),
            slowest.bottleneck.clone(),
            format!(
                "{steps} steps of {:.0} kB, each bound by {}",
                chunk / 1e3,
                slowest.why
            ),
        )
    }
}

/// Predicts one iteration of `job` over the ranks `ranks` (nodes of `net`, in rank order).
pub fn predict(job: &Job, ranks: &[usize], net: &dyn Network) -> Prediction {
    let p = ranks.len();
    let n = job.bytes_per_iteration as f64;
    let (seconds, bottleneck, why) = if p < 2 || n <= 0.0 {
        (0.0, Bottleneck::None, "nothing crosses the network".into())
    } else {
        match job.collective {
            Collective::RingAllReduce => ring(net, ranks, n),
            Collective::HierarchicalAllReduce => hierarchical(net, ranks, n),
            Collective::ParameterServer { servers } => {
                parameter_server(net, ranks, n, (servers as usize).clamp(1, p))
            }
            Collective::AllToAll => all_to_all(net, ranks, n),
        }
    };
    Prediction {
        seconds,
        bottleneck,
        why,
    }
}

/// A pairwise-exchange all-to-all over `ranks` (see the module docs): `p − 1` rounds one after
/// another; the bottleneck named is the slowest round's.
fn all_to_all(net: &dyn Network, ranks: &[usize], n: f64) -> (f64, Bottleneck, String) {
    let p = ranks.len();
    let each = n / (p - 1) as f64;
    let mut total = 0.0;
    let mut worst = (0.0, Bottleneck::None, String::new());
    let mut flows = Vec::with_capacity(p);
    for k in 1..p {
        flows.clear();
        flows.extend((0..p).map(|i| Flow {
            from: ranks[i],
            to: ranks[(i + k) % p],
            bytes: each,
        }));
        let (t, bottleneck, why) = phase(net, &flows);
        total += t;
        if t > worst.0 {
            worst = (t, bottleneck, why);
        }
    }
    let (slowest, bottleneck, why) = worst;
    (
        total,
        bottleneck,
        format!(
            "{} exchange rounds of {:.0} kB; the slowest ({:.2} ms) bound by {why}",
            p - 1,
            each / 1e3,
            slowest * 1e3
        ),
    )
}

fn hierarchical(net: &dyn Network, ranks: &[usize], n: f64) -> (f64, Bottleneck, String) {
    // Zones in the order their first rank appears; members in rank order.
    let mut zones: Vec<(usize, Vec<usize>)> = Vec::new();
    for &r in ranks {
        let z = net.zone(r);
        match zones.iter_mut().find(|(zone, _)| *zone == z) {
            Some((_, members)) => members.push(r),
            None => zones.push((z, vec![r])),
        }
    }
    let mut total = 0.0;
    let mut worst = (0.0, Bottleneck::None, String::new());
    let mut note = |t: f64, b: Bottleneck, why: String, total: &mut f64| {
        *total += t;
        if t > worst.0 {
            worst = (t, b, why);
        }
    };
    // 1. Reduce-scatter in each zone's ring, then gather at the leader; zones in parallel.
    let inside = |bytes_of: &dyn Fn(usize) -> f64| {
        let mut slowest = (0.0, Bottleneck::None, String::new());
        for (_, members) in &zones {
            let k = members.len();
            if k < 2 {
                continue;
            }
            let chunk = n / k as f64;
            let flows: Vec<Flow> = (0..k)
                .map(|i| Flow {
                    from: members[i],
                    to: members[(i + 1) % k],
                    bytes: chunk,
                })
                .collect();
            let (step, b, why) = phase(net, &flows);
            let t = (k - 1) as f64 * step + bytes_of(k);
            if t > slowest.0 {
                slowest = (t, b, why);
            }
        }
        slowest
    };
    let (t, b, why) = inside(&|_| 0.0);
    note(t, b, format!("inside a zone: {why}"), &mut total);
    let gather = |to_leader: bool| {
        let flows: Vec<Flow> = zones
            .iter()
            .filter(|(_, m)| m.len() > 1)
            .flat_map(|(_, m)| {
                let k = m.len() as f64;
                m[1..].iter().map(move |&w| {
                    let (from, to) = if to_leader { (w, m[0]) } else { (m[0], w) };
                    Flow {
                        from,
                        to,
                        bytes: n / k,
                    }
                })
            })
            .collect();
        phase(net, &flows)
    };
    let (t, b, why) = gather(true);
    note(
        t,
        b,
        format!("gathering at a zone's leader: {why}"),
        &mut total,
    );
    // 2. The leaders' ring across zones.
    let leaders: Vec<usize> = zones.iter().map(|(_, m)| m[0]).collect();
    let (t, b, why) = ring(net, &leaders, n);
    note(t, b, format!("across zones: {why}"), &mut total);
    // 3. Scatter from each leader, then all-gather inside each zone.
    let (t, b, why) = gather(false);
    note(
        t,
        b,
        format!("scattering from a zone's leader: {why}"),
        &mut total,
    );
    let (t, b, why) = inside(&|_| 0.0);
    note(t, b, format!("inside a zone: {why}"), &mut total);
    (total, worst.1, worst.2)
}

fn parameter_server(
    net: &dyn Network,
    ranks: &[usize],
    n: f64,
    servers: usize,
) -> (f64, Bottleneck, String) {
    let shard = n / servers as f64;
    let flows = |push: bool| -> Vec<Flow> {
        ranks[..servers]
            .iter()
            .flat_map(|&s| {
                ranks.iter().filter(move |&&w| w != s).map(move |&w| {
                    let (from, to) = if push { (w, s) } else { (s, w) };
                    Flow {
                        from,
                        to,
                        bytes: shard,
                    }
                })
            })
            .collect()
    };
    let (push, b_push, why_push) = phase(net, &flows(true));
    let (pull, b_pull, why_pull) = phase(net, &flows(false));
    let (bottleneck, why) = if push >= pull {
        (b_push, format!("pushing gradients: {why_push}"))
    } else {
        (b_pull, format!("pulling parameters: {why_pull}"))
    };
    (push + pull, bottleneck, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes `0..n`; zone of a node from `zones`; every link `rtt_us`, no loss, `rate` bit/s,
    /// with exceptions.
    struct Flat {
        zones: Vec<usize>,
        rtt_us: f64,
        rate: f64,
        slow: Option<(usize, f64)>,
        lossy: Option<(usize, f64)>,
        far: Option<(usize, usize, f64)>,
        /// What a lost last segment costs on every lossy link, µs.
        tail_repair_us: Option<f64>,
    }

    impl Flat {
        fn new(zones: &[usize]) -> Self {
            Self {
                zones: zones.to_vec(),
                rtt_us: 100.0,
                rate: 1e9,
                slow: None,
                lossy: None,
                far: None,
                tail_repair_us: None,
            }
        }
    }

    impl Network for Flat {
        fn link(&self, a: usize, b: usize) -> Link {
            let (za, zb) = (self.zones[a], self.zones[b]);
            let rtt_us = match self.far {
                Some((x, y, rtt)) if (za, zb) == (x, y) || (za, zb) == (y, x) => rtt,
                _ if za != zb => 2_000.0,
                _ => self.rtt_us,
            };
            let loss = match self.lossy {
                Some((node, loss)) if node == a || node == b => loss,
                _ => 0.0,
            };
            let link = Link::wire(rtt_us, loss, self.rate);
            match self.tail_repair_us {
                Some(us) => link.with_tail_repair(us),
                None => link,
            }
        }
        fn zone(&self, a: usize) -> usize {
            self.zones[a]
        }
        fn egress_bps(&self, a: usize) -> f64 {
            match self.slow {
                Some((n, r)) if n == a => r,
                _ => self.rate,
            }
        }
        fn ingress_bps(&self, a: usize) -> f64 {
            self.egress_bps(a)
        }
        fn zone_capacity_bps(&self, _: usize, _: usize) -> Option<f64> {
            None
        }
    }

    fn ring_job(bytes: u64) -> Job {
        Job {
            collective: Collective::RingAllReduce,
            bytes_per_iteration: bytes,
        }
    }

    #[test]
    fn a_ring_is_bound_by_its_slowest_link_or_by_its_delays() {
        let net = Flat::new(&[0, 0, 0, 0]);
        let t = predict(&ring_job(4_000_000), &[0, 1, 2, 3], &net);
        // 6 steps of 1 MB at 1 Gbit/s (8 ms) and half an RTT each: a uniform ring's two bounds
        // are one.
        assert!((t.seconds - 6.0 * (0.008 + 0.00005)).abs() < 1e-6, "{t}");
        let slow = Flat {
            slow: Some((2, 1e8)),
            ..Flat::new(&[0, 0, 0, 0])
        };
        let s = predict(&ring_job(4_000_000), &[0, 1, 2, 3], &slow);
        assert!(s.seconds > 9.0 * t.seconds, "{s}");
        assert!(
            matches!(s.bottleneck, Bottleneck::Node { node: 2, .. }),
            "{s}"
        );
        // Small chunks over two long links: the delays around the ring decide.
        let far = Flat {
            far: Some((0, 1, 10_000.0)),
            ..Flat::new(&[0, 0, 1, 1])
        };
        let f = predict(&ring_job(40_000), &[0, 1, 2, 3], &far);
        assert_eq!(f.bottleneck, Bottleneck::RingLatency, "{f}");
        let trip = 2.0 * (0.005 + 0.000_08) + 2.0 * (0.000_05 + 0.000_08);
        assert!((f.seconds - 1.5 * trip).abs() < 1e-6, "{f}");
    }

    #[test]
    fn a_good_rank_order_crosses_each_zone_boundary_once() {
        let net = Flat::new(&[0, 0, 1, 1]);
        let grouped = predict(&ring_job(256_000), &[0, 1, 2, 3], &net);
        let interleaved = predict(&ring_job(256_000), &[0, 2, 1, 3], &net);
        assert!(
            interleaved.seconds > grouped.seconds * 1.3,
            "{grouped} / {interleaved}"
        );
    }

    #[test]
    fn timed_exchanges_give_a_message_its_own_cost_and_a_tail_loss_its_repair() {
        let wire = Link::wire(100.0, 0.05, 1e9);
        // Exchanges 20 µs over the round trip at the median; 5 % of them met a loss and waited
        // 200 ms: the mean is 10 ms over the median.
        let timed = wire.with_exchanges(120.0, 120.0 + 0.05 * 200_000.0);
        assert_eq!(timed.message_us, 10.0);
        assert!((timed.tail_repair_us.unwrap() - 200_000.0).abs() < 1e-6);
        // One segment is all tail: 50 µs of delay, 10 µs of its own, 5 % of 200 ms.
        let one = timed.latency_s(1_000.0);
        assert!((one - (50e-6 + 10e-6 + 0.05 * 0.2)).abs() < 1e-9, "{one}");
        // Ten segments: the first nine repaired in a round trip, the last in 200 ms.
        let ten = timed.latency_s(10.0 * MSS_BYTES);
        let body = (1.0 - 0.95f64.powi(9)) * 100e-6;
        let tail = 0.05 * 0.2;
        assert!((ten - (60e-6 + body + tail)).abs() < 1e-9, "{ten}");
        // Without exchanges every loss costs a round trip, as before.
        let plain = wire.latency_s(10.0 * MSS_BYTES);
        assert!((plain - (50e-6 + (1.0 - 0.95f64.powi(10)) * 100e-6)).abs() < 1e-12);
        // No loss: nothing to repair, whatever the mean says; exchanges under the ICMP round
        // trip: no cost of their own.
        let clean = Link::wire(100.0, 0.0, 1e9).with_exchanges(80.0, 500.0);
        assert_eq!((clean.message_us, clean.tail_repair_us), (0.0, None));
        assert_eq!(wire.with_exchanges(f64::NAN, 1.0), wire);
    }

    #[test]
    fn a_lossy_links_why_says_what_a_lost_tail_costs() {
        let lossy = Flat {
            lossy: Some((1, 0.05)),
            ..Flat::new(&[0, 0])
        };
        let plain = predict(&ring_job(4_000_000), &[0, 1], &lossy);
        assert!(
            matches!(plain.bottleneck, Bottleneck::Link { .. }),
            "{plain}"
        );
        assert!(plain.why.ends_with("loss 5.00 %"), "{plain}");
        let repaired = Flat {
            tail_repair_us: Some(200_000.0),
            ..lossy
        };
        let r = predict(&ring_job(4_000_000), &[0, 1], &repaired);
        assert!(
            r.why
                .ends_with("loss 5.00 %, a lost last segment waits 200 ms"),
            "{r}"
        );
        assert!(r.seconds > plain.seconds, "{plain} / {r}");
    }

    #[test]
    fn loss_costs_a_round_trip_per_repaired_transfer() {
        let clean = Flat::new(&[0, 0, 0, 0]);
        let lossy = Flat {
            lossy: Some((1, 0.05)),
            ..Flat::new(&[0, 0, 0, 0])
        };
        let c = predict(&ring_job(4_000_000), &[0, 1, 2, 3], &clean);
        let l = predict(&ring_job(4_000_000), &[0, 1, 2, 3], &lossy);
        // 1 MB is 691 segments: at 5 % both of node 1's transfers almost surely lose one and
        // take a round trip more, which the ring's mean cycle spreads over its four links.
        assert!(
            (l.seconds - c.seconds - 1.5 * 2.0 * 100e-6).abs() < 1e-6,
            "{c} / {l}"
        );
    }

    #[test]
    fn a_parameter_server_is_bound_by_its_incast() {
        let net = Flat::new(&[0, 0, 0, 0]);
        let job = Job {
            collective: Collective::ParameterServer { servers: 1 },
            bytes_per_iteration: 4_000_000,
        };
        let one = predict(&job, &[0, 1, 2, 3], &net);
        // Three gradients in and out over the server's 1 Gbit/s: 2 * 3 * 32 ms, plus delays.
        assert!(
            (one.seconds - 2.0 * (0.096 + 0.00005)).abs() < 1e-6,
            "{one}"
        );
        assert_eq!(
            one.bottleneck,
            Bottleneck::Node {
                node: 0,
                ingress: true
            }
        );
        let two = Job {
            collective: Collective::ParameterServer { servers: 2 },
            ..job
        };
        assert!(predict(&two, &[0, 1, 2, 3], &net).seconds < one.seconds);
    }

    #[test]
    fn hierarchical_all_reduce_crosses_zones_once_per_zone() {
        let net = Flat {
            far: Some((0, 1, 20_000.0)),
            ..Flat::new(&[0, 0, 0, 1, 1, 1])
        };
        let job = |collective| Job {
            collective,
            bytes_per_iteration: 256_000,
        };
        let ranks = [0, 1, 2, 3, 4, 5];
        let h = predict(&job(Collective::HierarchicalAllReduce), &ranks, &net);
        let r = predict(&job(Collective::RingAllReduce), &ranks, &net);
        assert!(h.seconds < r.seconds, "{h} / {r}");
        let a = predict(&job(Collective::AllToAll), &ranks, &net);
        assert!(a.seconds > 0.010, "a far flow at least: {a}");
    }

    #[test]
    fn all_to_all_pays_a_delay_in_every_one_of_its_rounds() {
        // Six ranks, 20 ms between the two zones, tiny messages: the delays decide. Every one
        // of the 5 rounds of the pairwise exchange has a flow across the zones (rank r sends to
        // r + k), so the time is about 5 one-way delays of 10 ms, not one.
        let net = Flat {
            far: Some((0, 1, 20_000.0)),
            ..Flat::new(&[0, 0, 0, 1, 1, 1])
        };
        let job = Job {
            collective: Collective::AllToAll,
            bytes_per_iteration: 6_000,
        };
        let a = predict(&job, &[0, 1, 2, 3, 4, 5], &net);
        assert!(
            a.seconds > 5.0 * 0.010 && a.seconds < 5.0 * 0.012,
            "five rounds of a 10 ms one-way delay: {a}"
        );
        assert!(a.why.starts_with("5 exchange rounds"), "{}", a.why);
        // Inside one zone the same exchange is five short rounds.
        let near = predict(&job, &[0, 1, 2], &net);
        assert!(near.seconds < 0.005, "{near}");
    }

    #[test]
    fn one_rank_or_nothing_to_send_costs_nothing() {
        let net = Flat::new(&[0, 0]);
        assert_eq!(predict(&ring_job(1_000), &[0], &net).seconds, 0.0);
        assert_eq!(predict(&ring_job(0), &[0, 1], &net).seconds, 0.0);
    }
}
