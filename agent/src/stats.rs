//! Statistics of one peer over one report window: exact probe counts and an HDR histogram of the
//! round trips (nanoseconds, 3 significant digits), reported as quantiles plus jitter.

use std::time::Duration;

use hdrhistogram::Histogram;
use zonemesh_proto::v1;

/// Largest RTT the histogram records; longer replies are clamped (a probe times out far sooner).
const MAX_RTT_NS: u64 = 60_000_000_000;

/// One peer's window.
#[derive(Debug, Clone)]
pub struct WindowStats {
    sent: u64,
    received: u64,
    histogram: Histogram<u64>,
    last: Option<u64>,
    jitter_sum_ns: u64,
    jitter_n: u64,
}

impl Default for WindowStats {
    fn default() -> Self {
        Self::new()
    }
}

impl WindowStats {
    /// An empty window.
    pub fn new() -> Self {
        Self {
            sent: 0,
            received: 0,
            histogram: Histogram::new_with_bounds(1, MAX_RTT_NS, 3).expect("valid bounds"),
            last: None,
            jitter_sum_ns: 0,
            jitter_n: 0,
        }
    }

    /// A probe came back after `rtt`.
    pub fn reply(&mut self, rtt: Duration) {
        let ns = (rtt.as_nanos() as u64).clamp(1, MAX_RTT_NS);
        self.sent += 1;
        self.received += 1;
        self.histogram.saturating_record(ns);
        if let Some(last) = self.last {
            self.jitter_sum_ns += last.abs_diff(ns);
            self.jitter_n += 1;
        }
        self.last = Some(ns);
    }

    /// A probe got no reply before its timeout.
    pub fn lost(&mut self) {
        self.sent += 1;
    }

    /// Probes sent (resolved) in the window.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Replies received in the window.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The RTT statistics in µs, if any reply came.
    pub fn rtt(&self) -> Option<v1::RttStats> {
        if self.received == 0 {
            return None;
        }
        let h = &self.histogram;
        let us = |ns: u64| ns as f64 / 1000.0;
        // Quantiles of an HDR histogram are bucket edges; clamp them into [min, max] so the
        // ordering the aggregator checks always holds.
        let (min, max) = (us(h.min()), us(h.max()));
        let q = |p: f64| us(h.value_at_quantile(p)).clamp(min, max);
        let (p50, p90, p99) = (q(0.5), q(0.9), q(0.99));
        Some(v1::RttStats {
            samples: self.received,
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
        zonemesh_proto::domain::PathSample::try_from(wire).expect("valid summary");
    }
}
