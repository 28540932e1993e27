//! Statistics of one peer over one report window: exact probe counts and the round trips,
//! reported as quantiles of an HDR histogram (nanoseconds, 3 significant digits) plus jitter.
//!
//! A window keeps its round trips as plain samples and builds the histogram when it is read: a
//! plan bounds the samples per window (a few dozen per peer), while a histogram of that range
//! takes about 200 KiB, which across 100 peers would be most of the agent's memory.

use std::time::Duration;

use hdrhistogram::Histogram;
use zonemesh_proto::v1;

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

    /// The RTT statistics in µs, if any reply came.
    pub fn rtt(&self) -> Option<v1::RttStats> {
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
        Some(v1::RttStats {
            samples: self.received(),
            min_us: min,
            p50_us: p50,
            p90_us: p90.max(p50),
            p99_us: p99.max(p90.max(p50)),
            max_us: max,
            mean_us: (h.mean() / 1000.0).clamp(min, max),
            jitter_us: if self.jitter_n == 0 {
                0.0
            } else {
                self.jitter_sum_ns as f64 / self.jitter_n as f64 / 1000.0
            },
        })
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
        assert!(
            (r.min_us - 10.0).abs() < 0.1 && (r.max_us - 1000.0).abs() < 1.0,
            "{r:?}"
        );
        assert!((r.p50_us - 500.0).abs() < 1.0, "{r:?}");
        assert!((r.p90_us - 900.0).abs() < 1.0, "{r:?}");
        assert!((r.jitter_us - 10.0).abs() < 0.1, "{r:?}");
        assert!(
            r.min_us <= r.p50_us
                && r.p50_us <= r.p90_us
                && r.p90_us <= r.p99_us
                && r.p99_us <= r.max_us
        );
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
    fn the_summary_passes_the_aggregators_checks() {
        let mut w = WindowStats::new();
        for us in [37, 41, 39, 2_000, 40] {
            w.reply(Duration::from_micros(us));
        }
        w.lost();
        let wire = v1::PathSummary {
            src: "a".into(),
            dst: "b".into(),
            window_start_unix_ms: 1,
            window_end_unix_ms: 2,
            probes_sent: w.sent(),
            probes_received: w.received(),
            rtt: w.rtt(),
            ..Default::default()
        };
        zonemesh_domain::PathSample::try_from(wire).expect("valid summary");
    }
}
