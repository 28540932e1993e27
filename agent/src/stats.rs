//! Statistics of one peer over one report window: exact probe counts and the round trips,
//! reported as quantiles of an HDR histogram (nanoseconds, 3 significant digits) plus jitter.
//!
//! A window keeps its round trips as plain samples and builds the histogram when it is read: a
//! plan bounds the samples per window (a few dozen per peer), while a histogram of that range
//! takes about 200 KiB, which across 100 peers would be most of the agent's memory.

use std::time::Duration;

use hdrhistogram::Histogram;
use zonemesh_domain::{Micros, Rtt};

/// What one window measured towards one peer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probes {
    /// Probes resolved in the window (answered or timed out).
    pub sent: u64,
    /// Replies; at most `sent`.
    pub received: u64,
    /// RTT statistics of the replies; present exactly when `received > 0`.
    pub rtt: Option<Rtt>,
}

/// Largest RTT the histogram records; longer replies are clamped (a probe times out far sooner).
const MAX_RTT_NS: u64 = 60_000_000_000;

/// One peer's window.
#[derive(Debug, Clone, Default)]
pub struct WindowStats {
    sent: u64,
    /// Round trips of the replies, ns, in arrival order.
    samples: Vec<u64>,
    jitter_sum_ns: u64,
    jitter_n: u64,
}

impl WindowStats {
    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    /// A probe came back after `rtt`.
    pub fn reply(&mut self, rtt: Duration) {
        let ns = (rtt.as_nanos() as u64).clamp(1, MAX_RTT_NS);
        self.sent += 1;
        if let Some(&last) = self.samples.last() {
            self.jitter_sum_ns += last.abs_diff(ns);
            self.jitter_n += 1;
        }
        self.samples.push(ns);
    }

    /// A probe got no reply before its timeout.
    pub fn lost(&mut self) {
        self.sent += 1;
    }

    /// Adds `other`'s probes to this window (to roll peers up into their zone); jitter stays the
    /// mean of each peer's successive differences.
    pub fn add(&mut self, other: &WindowStats) {
        self.sent += other.sent;
        self.samples.extend_from_slice(&other.samples);
        self.jitter_sum_ns += other.jitter_sum_ns;
        self.jitter_n += other.jitter_n;
    }

    /// Probes sent (resolved) in the window.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Replies received in the window.
    pub fn received(&self) -> u64 {
        self.samples.len() as u64
    }

    /// The window's round trips in an HDR histogram (ns, 3 significant digits).
    pub fn histogram(&self) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, MAX_RTT_NS, 3).expect("valid bounds");
        for &ns in &self.samples {
            h.saturating_record(ns);
        }
        h
    }

    /// The RTT statistics, if any reply came.
    pub fn rtt(&self) -> Option<Rtt> {
        if self.samples.is_empty() {
            return None;
        }
        let h = self.histogram();
        let us = |ns: u64| ns as f64 / 1000.0;
        // Quantiles of an HDR histogram are bucket edges; clamp them into [min, max] so the
        // ordering the aggregator checks always holds.
        let (min, max) = (us(h.min()), us(h.max()));
        let q = |p: f64| us(h.value_at_quantile(p)).clamp(min, max);
        let (p50, p90, p99) = (q(0.5), q(0.9), q(0.99));
        let jitter = if self.jitter_n == 0 {
            0.0
        } else {
            self.jitter_sum_ns as f64 / self.jitter_n as f64 / 1000.0
        };
        // Every figure lies in [1 ns, MAX_RTT_NS] (60 s, give or take the histogram's 0.1 %),
        // far inside `Micros`' range (an hour), and the clamps above keep the order
        // `Rtt::checked` asks for.
        let micros = |field: &str, v: f64| Micros::parse(field, v).expect("an RTT of at most 60 s");
        let rtt = Rtt {
            samples: self.received(),
            min: micros("min_us", min),
            p50: micros("p50_us", p50),
            p90: micros("p90_us", p90.max(p50)),
            p99: micros("p99_us", p99.max(p90.max(p50))),
            max: micros("max_us", max),
            mean: micros("mean_us", (h.mean() / 1000.0).clamp(min, max)),
            jitter: micros("jitter_us", jitter),
        };
        Some(rtt.checked().expect("quantiles clamped into order"))
    }

    /// The window's counts and RTT statistics, for its report.
    pub fn probes(&self) -> Probes {
        Probes {
            sent: self.sent(),
            received: self.received(),
            rtt: self.rtt(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_follow_the_replies_and_stay_ordered() {
        let mut w = WindowStats::new();
        for i in 1..=100u64 {
            w.reply(Duration::from_micros(i * 10));
        }
        let r = w.rtt().unwrap();
        assert_eq!(r.samples, 100);
        let near = |m: Micros, us: f64, by: f64| (m.get() - us).abs() < by;
        assert!(near(r.min, 10.0, 0.1) && near(r.max, 1000.0, 1.0), "{r:?}");
        assert!(near(r.p50, 500.0, 1.0), "{r:?}");
        assert!(near(r.p90, 900.0, 1.0), "{r:?}");
        assert!(near(r.jitter, 10.0, 0.1), "{r:?}");
        assert!(r.min <= r.p50 && r.p50 <= r.p90 && r.p90 <= r.p99 && r.p99 <= r.max);
    }

    #[test]
    fn a_window_of_losses_has_counts_but_no_rtt() {
        let mut w = WindowStats::new();
        w.lost();
        w.lost();
        assert_eq!((w.sent(), w.received()), (2, 0));
        assert!(w.rtt().is_none());
    }

    #[test]
    fn extreme_round_trips_stay_valid_statistics() {
        // Clamped to 1 ns and to 60 s (as the histogram rounds it): the statistics exist and
        // keep their order.
        let mut w = WindowStats::new();
        for rtt in [
            Duration::ZERO,
            Duration::from_secs(3600),
            Duration::from_nanos(1),
        ] {
            w.reply(rtt);
        }
        let r = w.rtt().expect("replies came");
        assert_eq!(r.samples, 3);
        assert_eq!(r.min.get(), 0.001);
        assert!((r.max.get() - 60e6).abs() < 0.001 * 60e6, "{r:?}");
        assert_eq!(r.checked(), Ok(r));
    }
}
