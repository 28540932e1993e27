//! Probe scheduling: trains of probes to every target, spread over the interval, timed out by the
//! scheduler, counted exactly into per-window statistics by one collector task.
//!
//! The network sits behind [`Prober`]; the raw-socket ICMP and TCP probers implement it, and tests
//! implement it with a fake network on tokio's paused clock.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zonemesh_domain::{NodeName, ProbeTarget, UnixMs};

use crate::stats::WindowStats;

/// One peer to probe, as the probe plan describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Peer node name.
    pub node: NodeName,
    /// Peer zone (labels the per-zone metrics).
    pub zone: String,
    /// Address probed.
    pub address: IpAddr,
    /// The peer's TCP probe port.
    pub port: u16,
    /// Time between the starts of two trains.
    pub interval: Duration,
    /// Probes per train.
    pub train_size: u32,
    /// Gap between two probes of a train.
    pub train_gap: Duration,
    /// A probe without a reply after this long is lost.
    pub timeout: Duration,
}

impl Target {
    /// The target of a plan entry, probing its first address of a family this node has.
    pub fn from_plan(entry: &ProbeTarget, ours: &[IpAddr]) -> Result<Self, crate::Error> {
        let address = entry
            .addresses
            .iter()
            .copied()
            .find(|a| ours.iter().any(|o| o.is_ipv4() == a.is_ipv4()))
            .ok_or_else(|| crate::Error::TargetFamily {
                node: entry.node.clone(),
                addresses: entry.addresses.clone(),
            })?;
        Ok(Self {
            node: entry.node.clone(),
            zone: entry.zone.as_str().to_owned(),
            address,
            port: entry.probe_port,
            interval: Duration::from_millis(entry.interval_ms.into()),
            train_size: entry.train_size,
            train_gap: Duration::from_millis(entry.train_gap_ms.into()),
            timeout: Duration::from_millis(entry.timeout_ms.into()),
        })
    }
}

/// What to probe: the targets and the report window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Peers.
    pub targets: Vec<Target>,
    /// Length of a report window.
    pub window: Duration,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            targets: Vec::new(),
            window: Duration::from_secs(10),
        }
    }
}

/// What became of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A reply after this round trip.
    Reply(Duration),
    /// No reply (or an error sending it).
    Lost,
}

/// The network seam: sends one probe to a target and waits for its reply. The scheduler applies
/// the timeout, so a prober may wait forever.
pub trait Prober: Send + Sync + 'static {
    /// Probe `target` once; `seq` is unique among the probes in flight.
    fn probe(&self, target: &Target, seq: u64) -> impl Future<Output = Outcome> + Send;
}

/// One peer's share of a window.
#[derive(Debug, Clone)]
pub struct PeerWindow {
    /// The peer's zone.
    pub zone: String,
    /// Its statistics.
    pub stats: WindowStats,
}

/// The statistics of one window, per peer.
#[derive(Debug, Clone)]
pub struct WindowReport {
    /// Window number, from 0.
    pub index: u64,
    /// When the window started.
    pub start: Instant,
    /// When it ended.
    pub end: Instant,
    /// Wall-clock end (the aggregator keeps its own clock; this only labels the window).
    pub end_unix_ms: UnixMs,
    /// Per peer node name; peers without a resolved probe are absent.
    pub peers: BTreeMap<NodeName, PeerWindow>,
}

impl WindowReport {
    /// Wall-clock start; always before [`Self::end_unix_ms`].
    pub fn start_unix_ms(&self) -> UnixMs {
        let length = (self.end - self.start).as_millis().max(1) as i64;
        UnixMs(self.end_unix_ms.0 - length)
    }
}

/// Probes the current plan's targets in trains and sends one [`WindowReport`] per window to
/// `reports`. A new plan replaces the trains of changed targets at once; probes in flight still
/// count. A probe counts in the window in which it resolved (reply or timeout), so every probe is
/// counted exactly once. When `stop` completes, the current (partial) window is sent and `run`
/// returns; it also returns when `reports` is closed.
pub async fn run<P: Prober>(
    prober: Arc<P>,
    mut plan: watch::Receiver<Plan>,
    reports: mpsc::Sender<WindowReport>,
    stop: impl Future<Output = ()>,
) {
    let (results, mut results_rx) = mpsc::unbounded_channel::<(NodeName, Outcome)>();
    let mut trains = Trains {
        prober,
        seq: Arc::new(AtomicU64::new(0)),
        results,
        running: BTreeMap::new(),
        zones: BTreeMap::new(),
    };
    let mut current = plan.borrow_and_update().clone();
    trains.apply(&current);
    let mut index = 0;
    let mut start = Instant::now();
    let mut window_end = start + current.window;
    let mut peers: BTreeMap<NodeName, PeerWindow> = BTreeMap::new();
    let mut plan_open = true;
    tokio::pin!(stop);

    loop {
        let mut stopping = false;
        tokio::select! {
            Some((node, outcome)) = results_rx.recv() => {
                let zone = trains.zones.get(&node).cloned().unwrap_or_default();
                let peer = peers
                    .entry(node)
                    .or_insert_with(|| PeerWindow { zone, stats: WindowStats::new() });
                match outcome {
                    Outcome::Reply(rtt) => peer.stats.reply(rtt),
                    Outcome::Lost => peer.stats.lost(),
                }
                continue;
            }
            changed = plan.changed(), if plan_open => {
                if changed.is_err() {
                    plan_open = false;
                } else {
                    current = plan.borrow_and_update().clone();
                    trains.apply(&current);
                    // The open window takes the new length (it closes at once if that has passed).
                    window_end = start + current.window;
                }
                continue;
            }
            _ = tokio::time::sleep_until(window_end) => {}
            _ = &mut stop => stopping = true,
        }
        let end = Instant::now();
        let report = WindowReport {
            index,
            start,
            end,
            end_unix_ms: UnixMs(zonemesh_common::time::unix_ms()),
            peers: std::mem::take(&mut peers),
        };
        if reports.send(report).await.is_err() || stopping {
            break;
        }
        index += 1;
        start = end;
        window_end = start + current.window;
    }
}

/// The running trains, one task per target.
struct Trains<P> {
    prober: Arc<P>,
    seq: Arc<AtomicU64>,
    results: mpsc::UnboundedSender<(NodeName, Outcome)>,
    running: BTreeMap<NodeName, (Target, JoinHandle<()>)>,
    /// Zone of every peer ever in a plan (results of removed targets may still arrive).
    zones: BTreeMap<NodeName, String>,
}

impl<P: Prober> Trains<P> {
    /// Keeps the trains of unchanged targets, stops the others and starts the new ones.
    fn apply(&mut self, plan: &Plan) {
        self.running.retain(|node, (target, handle)| {
            let keep = plan.targets.iter().any(|t| t == target && t.node == *node);
            if !keep {
                handle.abort();
            }
            keep
        });
        let n = plan.targets.len().max(1);
        let now = Instant::now();
        for (i, target) in plan.targets.iter().enumerate() {
            self.zones.insert(target.node.clone(), target.zone.clone());
            if self.running.contains_key(&target.node) {
                continue;
            }
            let handle = tokio::spawn(trains_to(
                self.prober.clone(),
                target.clone(),
                now + slot_offset(target.interval, i, n),
                self.seq.clone(),
                self.results.clone(),
            ));
            self.running
                .insert(target.node.clone(), (target.clone(), handle));
        }
    }
}

impl<P> Drop for Trains<P> {
    fn drop(&mut self) {
        for (_, handle) in self.running.values() {
            handle.abort();
        }
    }
}

/// Trains start on a grid of this step, so that the agent wakes at most this often to send,
/// however many peers it has.
pub const SLOT: Duration = Duration::from_millis(50);

/// When the trains to target `i` of `n` start, after the plan is applied: spread evenly over the
/// interval instead of fired together, rounded down to the [`SLOT`] grid.
///
/// Why a grid: every wake-up costs the agent a context switch, which on small VMs costs more than
/// the probe itself; with 100 peers at one probe a second, 20 wake-ups a second instead of 100
/// are what keeps the agent under 1 % of a core (docs/BENCHMARKS.md). The probes of one slot go
/// out back to back, a few µs each, well inside the RTT between two nodes, so their replies are
/// still timestamped as they arrive.
pub fn slot_offset(interval: Duration, i: usize, n: usize) -> Duration {
    let even = interval.mul_f64(i as f64 / n.max(1) as f64);
    let step = SLOT.as_nanos();
    Duration::from_nanos((even.as_nanos() / step * step) as u64)
}

/// The trains to one target, forever: `train_size` probes `train_gap` apart every `interval`,
/// the first at `first`. Each probe runs in its own task under the target's timeout.
async fn trains_to<P: Prober>(
    prober: Arc<P>,
    target: Target,
    first: Instant,
    seq: Arc<AtomicU64>,
    results: mpsc::UnboundedSender<(NodeName, Outcome)>,
) {
    let mut ticks = tokio::time::interval_at(first, target.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let target = Arc::new(target);
    loop {
        ticks.tick().await;
        for k in 0..target.train_size {
            if k > 0 {
                tokio::time::sleep(target.train_gap).await;
            }
            let (prober, target, results) = (prober.clone(), target.clone(), results.clone());
            let s = seq.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let outcome = tokio::time::timeout(target.timeout, prober.probe(&target, s))
                    .await
                    .unwrap_or(Outcome::Lost);
                let _ = results.send((target.node.clone(), outcome));
            });
        }
        if results.is_closed() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies after 100 µs + seq µs; every fourth probe never comes back.
    struct FakeNetwork;

    impl Prober for FakeNetwork {
        async fn probe(&self, _target: &Target, seq: u64) -> Outcome {
            if seq % 4 == 3 {
                std::future::pending::<()>().await;
            }
            let rtt = Duration::from_micros(100 + seq % 50);
            tokio::time::sleep(rtt).await;
            Outcome::Reply(rtt)
        }
    }

    fn name(node: &str) -> NodeName {
        NodeName::parse("node", node).unwrap()
    }

    /// Peer `node`'s share of window `w`.
    fn peer<'a>(w: &'a WindowReport, node: &str) -> &'a PeerWindow {
        &w.peers[&name(node)]
    }

    fn target(node: &str) -> Target {
        Target {
            node: name(node),
            zone: format!("zone-{node}"),
            address: "127.0.0.1".parse().unwrap(),
            port: 7402,
            interval: Duration::from_secs(1),
            train_size: 5,
            train_gap: Duration::from_millis(10),
            timeout: Duration::from_millis(200),
        }
    }

    fn plan(targets: Vec<Target>) -> watch::Receiver<Plan> {
        let (tx, rx) = watch::channel(Plan {
            targets,
            window: Duration::from_secs(10),
        });
        // Keep the sender alive for the test's duration: a closed plan keeps the last one.
        std::mem::forget(tx);
        rx
    }

    #[test]
    fn a_plan_entry_is_probed_on_its_first_address_of_our_family() {
        let entry = ProbeTarget {
            node: name("b"),
            zone: zonemesh_domain::ZoneName::parse("zone", "zone-b").unwrap(),
            addresses: vec!["fd00::2".parse().unwrap(), "10.0.0.2".parse().unwrap()],
            probe_port: 7402,
            interval_ms: 1000,
            train_size: 5,
            train_gap_ms: 10,
            timeout_ms: 200,
        };
        let v4: [IpAddr; 1] = ["10.0.0.1".parse().unwrap()];
        let t = Target::from_plan(&entry, &v4).unwrap();
        assert_eq!(
            t,
            Target {
                zone: "zone-b".into(),
                address: "10.0.0.2".parse().unwrap(),
                ..target("b")
            }
        );
        let dual: [IpAddr; 2] = ["fd00::1".parse().unwrap(), "10.0.0.1".parse().unwrap()];
        assert_eq!(
            Target::from_plan(&entry, &dual).unwrap().address,
            entry.addresses[0],
            "best first"
        );
        let v6_only = ProbeTarget {
            addresses: vec!["fd00::2".parse().unwrap()],
            ..entry
        };
        let err = Target::from_plan(&v6_only, &v4).unwrap_err();
        assert!(matches!(err, crate::Error::TargetFamily { .. }), "{err}");
    }

    #[test]
    fn trains_start_spread_over_the_interval_on_the_slot_grid() {
        let second = Duration::from_secs(1);
        let offsets: Vec<Duration> = (0..100).map(|i| slot_offset(second, i, 100)).collect();
        assert!(offsets.iter().all(|o| o.as_nanos() % SLOT.as_nanos() == 0));
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        let slots: std::collections::BTreeSet<_> = offsets.iter().collect();
        // 100 peers a second share the 20 slots of 50 ms, five in each.
        assert_eq!(slots.len(), 20);
        assert_eq!(offsets.iter().filter(|o| o.is_zero()).count(), 5);
        // Few peers keep slots of their own.
        assert_eq!(
            (0..2)
                .map(|i| slot_offset(second, i, 2))
                .collect::<Vec<_>>(),
            [Duration::ZERO, Duration::from_millis(500)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn trains_are_counted_exactly_per_window() {
        let (tx, mut rx) = mpsc::channel(4);
        let run = tokio::spawn(run(
            Arc::new(FakeNetwork),
            plan(vec![target("b"), target("c")]),
            tx,
            std::future::pending(),
        ));
        let first = rx.recv().await.unwrap();
        assert_eq!(first.index, 0);
        assert_eq!(first.end - first.start, Duration::from_secs(10));
        assert!(first.start_unix_ms() < first.end_unix_ms);
        let mut lost = 0;
        for (peer, w) in &first.peers {
            assert_eq!(w.zone, format!("zone-{peer}"));
            // 10 trains of 5 per peer in 10 s.
            assert_eq!(w.stats.sent(), 50, "{peer}");
            lost += w.stats.sent() - w.stats.received();
            let rtt = w.stats.rtt().unwrap();
            assert!(rtt.min.get() >= 99.9 && rtt.max.get() <= 149.2, "{rtt:?}");
        }
        // One in four of the 100 probes (one sequence space for all targets) never came back.
        assert_eq!(lost, 25);
        let second = rx.recv().await.unwrap();
        assert_eq!(second.index, 1);
        assert_eq!(peer(&second, "b").stats.sent(), 50, "the next 10 trains");
        drop(rx);
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_never_answers_is_all_loss() {
        struct Silent;
        impl Prober for Silent {
            async fn probe(&self, _: &Target, _: u64) -> Outcome {
                std::future::pending().await
            }
        }
        let (tx, mut rx) = mpsc::channel(1);
        tokio::spawn(run(
            Arc::new(Silent),
            plan(vec![target("b")]),
            tx,
            std::future::pending(),
        ));
        let w = rx.recv().await.unwrap();
        // The train at 9 s times out at 9.04 s + 200 ms, inside the window.
        let b = &peer(&w, "b").stats;
        assert_eq!((b.sent(), b.received()), (50, 0));
        assert!(b.rtt().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_plan_replaces_the_targets_without_losing_counts() {
        let (plan_tx, plan_rx) = watch::channel(Plan {
            targets: vec![target("b")],
            window: Duration::from_secs(10),
        });
        let (tx, mut rx) = mpsc::channel(4);
        tokio::spawn(run(
            Arc::new(FakeNetwork),
            plan_rx,
            tx,
            std::future::pending(),
        ));
        // Trains at 0..=4 s go to b, then the plan switches to c (its first train at once).
        tokio::time::sleep(Duration::from_millis(4500)).await;
        let mut c = target("c");
        c.train_size = 1;
        plan_tx.send_replace(Plan {
            targets: vec![c],
            window: Duration::from_secs(10),
        });
        let w = rx.recv().await.unwrap();
        assert_eq!(
            peer(&w, "b").stats.sent(),
            25,
            "five trains of five reached b"
        );
        // c: one probe a second from 4.5 s: at 4.5, 5.5, ..., 9.5 s.
        assert_eq!(peer(&w, "c").stats.sent(), 6);
        let w = rx.recv().await.unwrap();
        assert!(!w.peers.contains_key(&name("b")));
        assert_eq!(peer(&w, "c").stats.sent(), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_sends_the_partial_window() {
        let (tx, mut rx) = mpsc::channel(4);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(run(
            Arc::new(FakeNetwork),
            plan(vec![target("b")]),
            tx,
            async {
                let _ = stop_rx.await;
            },
        ));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        stop_tx.send(()).unwrap();
        let w = rx.recv().await.unwrap();
        assert_eq!(w.end - w.start, Duration::from_millis(2500));
        // Trains at 0, 1 and 2 s, all resolved by 2.25 s.
        assert_eq!(peer(&w, "b").stats.sent(), 15);
        run.await.unwrap();
        assert!(
            rx.recv().await.is_none(),
            "nothing after the partial window"
        );
    }
}
