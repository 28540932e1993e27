//! Probe scheduling: trains of probes to every target, spread over the interval, timed out by the
//! scheduler, counted exactly into per-window statistics by one collector task.
//!
//! The network sits behind [`Prober`]; the raw-socket ICMP and TCP probers implement it, and tests
//! implement it with a fake network on tokio's paused clock.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::stats::WindowStats;

/// One peer to probe, as the probe plan describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Peer node name.
    pub node: String,
    /// Time between the starts of two trains.
    pub interval: Duration,
    /// Probes per train.
    pub train_size: u32,
    /// Gap between two probes of a train.
    pub train_gap: Duration,
    /// A probe without a reply after this long is lost.
    pub timeout: Duration,
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
    /// Probe `target` once; `seq` is unique per target.
    fn probe(&self, target: &Target, seq: u64) -> impl Future<Output = Outcome> + Send;
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
    /// Per peer node name.
    pub peers: BTreeMap<String, WindowStats>,
}

/// Probes every target in trains and sends one [`WindowReport`] per `window` to `reports`,
/// until `reports` is closed. A probe counts in the window in which it resolved (reply or timeout),
/// so every probe is counted exactly once.
pub async fn run<P: Prober>(
    prober: Arc<P>,
    targets: Vec<Target>,
    window: Duration,
    reports: mpsc::Sender<WindowReport>,
) {
    let (results, mut results_rx) = mpsc::unbounded_channel::<(usize, Outcome)>();
    let n = targets.len().max(1);
    let mut trains = Vec::with_capacity(targets.len());
    for (i, target) in targets.iter().cloned().enumerate() {
        let prober = prober.clone();
        let results = results.clone();
        // Spread the targets' trains evenly over the interval instead of firing them together.
        let offset = target.interval.mul_f64(i as f64 / n as f64);
        trains.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(Instant::now() + offset, target.interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut seq = 0u64;
            loop {
                ticks.tick().await;
                for k in 0..target.train_size {
                    if k > 0 {
                        tokio::time::sleep(target.train_gap).await;
                    }
                    let (prober, target, results) =
                        (prober.clone(), target.clone(), results.clone());
                    let s = seq;
                    seq += 1;
                    tokio::spawn(async move {
                        let outcome =
                            tokio::time::timeout(target.timeout, prober.probe(&target, s))
                                .await
                                .unwrap_or(Outcome::Lost);
                        let _ = results.send((i, outcome));
                    });
                }
                if results.is_closed() {
                    return;
                }
            }
        }));
    }
    drop(results);

    let mut index = 0;
    let mut start = Instant::now();
    let mut current: Vec<WindowStats> = targets.iter().map(|_| WindowStats::new()).collect();
    let mut window_end = tokio::time::interval_at(start + window, window);
    loop {
        tokio::select! {
            Some((i, outcome)) = results_rx.recv() => match outcome {
                Outcome::Reply(rtt) => current[i].reply(rtt),
                Outcome::Lost => current[i].lost(),
            },
            _ = window_end.tick() => {
                let end = Instant::now();
                let finished = std::mem::replace(
                    &mut current,
                    targets.iter().map(|_| WindowStats::new()).collect(),
                );
                let peers = targets.iter().map(|t| t.node.clone()).zip(finished).collect();
                if reports.send(WindowReport { index, start, end, peers }).await.is_err() {
                    break;
                }
                index += 1;
                start = end;
            }
        }
    }
    for train in trains {
        train.abort();
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
            let rtt = Duration::from_micros(100 + seq);
            tokio::time::sleep(rtt).await;
            Outcome::Reply(rtt)
        }
    }

    fn target(node: &str) -> Target {
        Target {
            node: node.into(),
            interval: Duration::from_secs(1),
            train_size: 5,
            train_gap: Duration::from_millis(10),
            timeout: Duration::from_millis(200),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn trains_are_counted_exactly_per_window() {
        let (tx, mut rx) = mpsc::channel(4);
        let run = tokio::spawn(run(
            Arc::new(FakeNetwork),
            vec![target("b"), target("c")],
            Duration::from_secs(10),
            tx,
        ));
        let first = rx.recv().await.unwrap();
        assert_eq!(first.index, 0);
        assert_eq!(first.end - first.start, Duration::from_secs(10));
        for (peer, stats) in &first.peers {
            // 10 trains of 5 in 10 s; seq 3, 7, ..., 47 are lost: 12 of 50.
            assert_eq!(stats.sent(), 50, "{peer}");
            assert_eq!(stats.received(), 38, "{peer}");
            let rtt = stats.rtt().unwrap();
            // Seq 0..49 replied after 100..149 µs (HDR keeps 3 significant digits).
            assert!(rtt.min_us >= 99.9 && rtt.max_us <= 149.2, "{rtt:?}");
        }
        let second = rx.recv().await.unwrap();
        assert_eq!(second.index, 1);
        assert_eq!(
            second.peers["b"].sent(),
            50,
            "the next window counts the next 10 trains"
        );
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
            vec![target("b")],
            Duration::from_secs(10),
            tx,
        ));
        let w = rx.recv().await.unwrap();
        // The train at 9 s times out at 9.04 s + 200 ms, inside the window.
        assert_eq!((w.peers["b"].sent(), w.peers["b"].received()), (50, 0));
        assert!(w.peers["b"].rtt().is_none());
    }
}
