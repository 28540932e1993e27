//! The state of one directed path: a sliding window of report windows, lifetime counters and the
//! latest throughput test. Everything is keyed by the aggregator's own clock (`at`), never by the
//! agents' clocks, so that nodes whose clocks differ still age alike.

use zonemesh_domain::{PathSample, ThroughputSample, UnixMs};

/// While throughput tests hold a path's windows back, its last figures stay current for at most
/// this many stale timeouts after they were measured (see [`PathState::current_at`]).
pub const HOLD_STALE_AFTERS: i64 = 2;

/// How paths age and merge; part of [`EngineConfig`](super::EngineConfig).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathConfig {
    /// Report windows older than this leave the sliding window.
    pub window_ms: i64,
    /// At most this many report windows are kept per path, at most [`MAX_WINDOWS`].
    pub max_windows: usize,
    /// A path whose newest sample is older than this is stale.
    pub stale_after_ms: i64,
    /// A throughput figure older than this no longer counts.
    pub throughput_max_age_ms: i64,
    /// Weight of the newest test in the smoothed throughput.
    pub throughput_alpha: f64,
}

impl Default for PathConfig {
    fn default() -> Self {
        Self {
            window_ms: 60_000,
            max_windows: 6,
            stale_after_ms: 30_000,
            throughput_max_age_ms: 3_600_000,
            throughput_alpha: 0.3,
        }
    }
}

/// Report windows a path keeps at most: the sliding window lives inside the path state, with no
/// allocation of its own, so that a path costs the same few hundred bytes whatever it saw.
pub const MAX_WINDOWS: usize = 6;

/// RTT statistics in µs (f32 keeps a path small; µs resolution needs no more).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RttFigures {
    /// Replies behind the figures.
    pub samples: u32,
    /// Smallest.
    pub min: f32,
    /// Median.
    pub p50: f32,
    /// 90th percentile.
    pub p90: f32,
    /// 99th percentile.
    pub p99: f32,
    /// Largest.
    pub max: f32,
    /// Mean.
    pub mean: f32,
    /// Jitter.
    pub jitter: f32,
}

/// One report window as kept in the sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Window {
    /// When the aggregator applied it.
    pub at: UnixMs,
    /// Probes sent.
    pub sent: u32,
    /// Replies received.
    pub received: u32,
    /// RTT statistics of the replies (`samples` 0 when none came back: no `Option`, whose tag
    /// would cost 8 bytes a window).
    rtt: RttFigures,
}

impl Window {
    /// A window of `sent` probes and `received` replies with their RTT statistics.
    pub fn new(at: UnixMs, sent: u32, received: u32, rtt: Option<RttFigures>) -> Self {
        Self {
            at,
            sent,
            received,
            rtt: rtt.filter(|r| r.samples > 0).unwrap_or_default(),
        }
    }

    /// RTT statistics of the replies, if any came back.
    pub fn rtt(&self) -> Option<&RttFigures> {
        (self.rtt.samples > 0).then_some(&self.rtt)
    }
}

/// The sliding window: at most [`MAX_WINDOWS`] report windows, oldest first, held inline.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Windows {
    slots: [Window; MAX_WINDOWS],
    len: u8,
}

impl Windows {
    /// Windows held.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The windows, oldest first.
    pub fn iter(&self) -> std::slice::Iter<'_, Window> {
        self.slots[..self.len()].iter()
    }

    /// The oldest window.
    pub fn first(&self) -> Option<&Window> {
        self.slots[..self.len()].first()
    }

    /// Appends a window, dropping the oldest when all [`MAX_WINDOWS`] are taken.
    pub fn push(&mut self, window: Window) {
        if self.len() == MAX_WINDOWS {
            self.remove_oldest();
        }
        self.slots[self.len()] = window;
        self.len += 1;
    }

    /// Drops the oldest window.
    pub fn remove_oldest(&mut self) {
        if self.len > 0 {
            let len = self.len();
            self.slots.copy_within(1..len, 0);
            self.len -= 1;
        }
    }
}

impl FromIterator<Window> for Windows {
    /// The last [`MAX_WINDOWS`] of the windows given, oldest first.
    fn from_iter<I: IntoIterator<Item = Window>>(iter: I) -> Self {
        let mut windows = Self::default();
        for w in iter {
            windows.push(w);
        }
        windows
    }
}

/// A moment that may not have come yet: an `Option<UnixMs>` in the eight bytes of the time
/// ([`i64::MIN`] stands for none), since the `Option`'s tag would cost every path eight bytes more
/// for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct When(i64);

impl When {
    /// None.
    pub const NEVER: Self = Self(i64::MIN);

    /// The moment, if there is one.
    pub fn get(self) -> Option<UnixMs> {
        (self != Self::NEVER).then_some(UnixMs(self.0))
    }
}

impl Default for When {
    fn default() -> Self {
        Self::NEVER
    }
}

impl From<Option<UnixMs>> for When {
    fn from(at: Option<UnixMs>) -> Self {
        at.map_or(Self::NEVER, |t| Self(t.0))
    }
}

impl From<UnixMs> for When {
    fn from(at: UnixMs) -> Self {
        Self(at.0)
    }
}

/// The latest throughput test and the smoothed rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThroughputState {
    /// When the aggregator applied the latest test.
    pub at: UnixMs,
    /// Rate of the latest test, bit/s.
    pub latest_bps: f64,
    /// Exponentially smoothed rate, bit/s.
    pub smoothed_bps: f64,
}

/// A path's [`ThroughputState`], once a test has run: an `Option<ThroughputState>` without its
/// tag (NaN rates stand for none), eight bytes less a path.
#[derive(Debug, Clone, Copy)]
pub struct LastTest(ThroughputState);

impl LastTest {
    /// No test yet.
    pub const NONE: Self = Self(ThroughputState {
        at: UnixMs(0),
        latest_bps: f64::NAN,
        smoothed_bps: f64::NAN,
    });

    /// The figures, once a test has run.
    pub fn get(&self) -> Option<ThroughputState> {
        (!self.0.latest_bps.is_nan()).then_some(self.0)
    }
}

impl Default for LastTest {
    fn default() -> Self {
        Self::NONE
    }
}

impl PartialEq for LastTest {
    /// Equal when both are the same figures or both are none.
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl From<Option<ThroughputState>> for LastTest {
    /// `Some` of a NaN rate stands for none.
    fn from(t: Option<ThroughputState>) -> Self {
        t.map_or(Self::NONE, Self)
    }
}

/// What TCP itself saw in a path's throughput tests, each figure smoothed like the rate: the
/// share of data segments the sender retransmitted, and the median and mean of the timed message
/// exchanges (µs). NaN where no test has read a figure: no `Option`, whose tags would cost every
/// path 12 bytes.
#[derive(Debug, Clone, Copy)]
pub struct TcpFigures {
    retransmit_ratio: f32,
    exchange_p50_us: f32,
    exchange_mean_us: f32,
}

impl Default for TcpFigures {
    fn default() -> Self {
        Self::new(None, None, None)
    }
}

impl PartialEq for TcpFigures {
    /// Equal when every figure is the same number or both are absent.
    fn eq(&self, other: &Self) -> bool {
        let bits = |t: &Self| {
            [t.retransmit_ratio, t.exchange_p50_us, t.exchange_mean_us].map(f32::to_bits)
        };
        bits(self) == bits(other)
    }
}

impl TcpFigures {
    /// The figures given (`None`: never read).
    pub fn new(
        retransmit_ratio: Option<f32>,
        exchange_p50_us: Option<f32>,
        exchange_mean_us: Option<f32>,
    ) -> Self {
        Self {
            retransmit_ratio: retransmit_ratio.unwrap_or(f32::NAN),
            exchange_p50_us: exchange_p50_us.unwrap_or(f32::NAN),
            exchange_mean_us: exchange_mean_us.unwrap_or(f32::NAN),
        }
    }

    /// Smoothed share of data segments retransmitted.
    pub fn retransmit_ratio(&self) -> Option<f32> {
        known(self.retransmit_ratio)
    }

    /// Smoothed median message exchange, µs.
    pub fn exchange_p50_us(&self) -> Option<f32> {
        known(self.exchange_p50_us)
    }

    /// Smoothed mean message exchange, µs.
    pub fn exchange_mean_us(&self) -> Option<f32> {
        known(self.exchange_mean_us)
    }

    /// Folds in a test's figures with weight `alpha` (a figure the test did not read keeps its
    /// value).
    fn fold(&mut self, alpha: f64, sample: &ThroughputSample) {
        let smooth = |old: &mut f32, new: Option<f64>| {
            if let Some(new) = new {
                *old = ewma(alpha, known(*old).map(f64::from), new) as f32;
            }
        };
        let exchange = sample.exchange;
        smooth(
            &mut self.retransmit_ratio,
            sample.retransmits.map(|r| r.ratio()),
        );
        smooth(&mut self.exchange_p50_us, exchange.map(|e| e.p50.get()));
        smooth(&mut self.exchange_mean_us, exchange.map(|e| e.mean.get()));
    }
}

/// `v`, unless it is the NaN that stands for none.
pub(crate) fn known(v: f32) -> Option<f32> {
    (!v.is_nan()).then_some(v)
}

/// `alpha · new + (1 − alpha) · old`: exponential smoothing, starting at the first value.
fn ewma(alpha: f64, old: Option<f64>, new: f64) -> f64 {
    old.map_or(new, |old| alpha * new + (1.0 - alpha) * old)
}

/// Figures of the sliding window, recomputed whenever a window arrives or leaves.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Merged {
    /// Probes sent in the sliding window.
    pub sent: u32,
    /// Replies received in the sliding window.
    pub received: u32,
    /// RTT figures of the windows: min of mins, max of maxes, each quantile as the median of the
    /// windows' values and mean and jitter as their mean, both weighted by the windows' replies.
    pub rtt: Option<RttFigures>,
}

impl Merged {
    /// Loss over the sliding window, if any probe was sent.
    pub fn loss(&self) -> Option<f64> {
        (self.sent > 0).then(|| 1.0 - f64::from(self.received) / f64::from(self.sent))
    }
}

/// A directed path.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PathState {
    /// The sliding window, oldest first.
    pub windows: Windows,
    /// Cached figures of `windows`.
    pub merged: Merged,
    /// Probes sent since the path was first seen.
    pub sent_total: u64,
    /// Replies received since the path was first seen.
    pub received_total: u64,
    /// When the newest latency window was applied.
    pub last_update: When,
    /// When the newest window left out under a throughput test arrived (see [`Self::current_at`]).
    pub withheld_at: When,
    /// The throughput figures, once a test has run.
    pub throughput: LastTest,
    /// What TCP saw in the throughput tests.
    pub tcp: TcpFigures,
}

impl PathState {
    /// Folds one sample in, applied at `now`. A sample measured `under_load` (during a
    /// throughput test of one of the path's nodes) counts in the lifetime totals only.
    pub fn apply(
        &mut self,
        sample: &PathSample,
        now: UnixMs,
        config: &PathConfig,
        under_load: bool,
    ) {
        self.sent_total = self.sent_total.saturating_add(sample.sent);
        self.received_total = self.received_total.saturating_add(sample.received);
        if sample.sent > 0 && !under_load {
            // A window's counts fit in u32: a window of an hour at 10,000 probes/s is 36 million.
            let count = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
            self.windows.push(Window::new(
                now,
                count(sample.sent),
                count(sample.received),
                sample.rtt.map(|r| RttFigures {
                    samples: count(r.samples),
                    min: r.min.get() as f32,
                    p50: r.p50.get() as f32,
                    p90: r.p90.get() as f32,
                    p99: r.p99.get() as f32,
                    max: r.max.get() as f32,
                    mean: r.mean.get() as f32,
                    jitter: r.jitter.get() as f32,
                }),
            ));
            self.last_update = self.last_update.get().map_or(now, |t| t.max(now)).into();
        }
        if sample.sent > 0 && under_load {
            self.withheld_at = self.withheld_at.get().map_or(now, |t| t.max(now)).into();
        }
        if let Some(t) = sample.throughput {
            let rate = t.rate.get();
            let alpha = config.throughput_alpha;
            let smoothed = ewma(alpha, self.throughput.get().map(|p| p.smoothed_bps), rate);
            self.throughput = Some(ThroughputState {
                at: now,
                latest_bps: rate,
                smoothed_bps: smoothed,
            })
            .into();
            self.tcp.fold(alpha, &t);
        }
        self.expire(now, config);
    }

    /// Drops windows that left the sliding window and recomputes the merged figures. Returns
    /// whether anything changed.
    pub fn expire(&mut self, now: UnixMs, config: &PathConfig) -> bool {
        let before = self.windows.len();
        let horizon = now.0 - config.window_ms;
        // Keep the newest window even when old, so that a stale path still shows its last figures.
        while self.windows.len() > 1 && self.windows.first().is_some_and(|w| w.at.0 < horizon) {
            self.windows.remove_oldest();
        }
        while self.windows.len() > config.max_windows.clamp(1, MAX_WINDOWS) {
            self.windows.remove_oldest();
        }
        let merged = merge(&self.windows);
        let changed = self.windows.len() != before || merged != self.merged;
        self.merged = merged;
        changed
    }

    /// Until when the figures are current: when the newest window was applied or, while
    /// throughput tests hold the path's windows back (zonemesh's own load, not the path's), when
    /// the newest withheld window arrived. The agent measured then; it was the test that kept
    /// the window out. Held figures are at most [`HOLD_STALE_AFTERS`] stale timeouts older than
    /// that, so a path that is always under test still goes stale. `None`: never measured.
    pub fn current_at(&self, config: &PathConfig) -> Option<UnixMs> {
        let applied = self.last_update.get()?;
        let hold = HOLD_STALE_AFTERS * config.stale_after_ms;
        Some(match self.withheld_at.get() {
            Some(w) if w.0 > applied.0 => UnixMs(w.0.min(applied.0.saturating_add(hold))),
            _ => applied,
        })
    }

    /// Whether the figures are older than the stale timeout (see [`Self::current_at`]), or there
    /// are none.
    pub fn is_stale(&self, now: UnixMs, config: &PathConfig) -> bool {
        self.current_at(config)
            .is_none_or(|t| now.since(t) > config.stale_after_ms)
    }

    /// The throughput figures, unless too old to count.
    pub fn fresh_throughput(&self, now: UnixMs, config: &PathConfig) -> Option<ThroughputState> {
        self.throughput
            .get()
            .filter(|t| now.since(t.at) <= config.throughput_max_age_ms)
    }
}

fn merge(windows: &Windows) -> Merged {
    let mut merged = Merged::default();
    let mut weight = 0.0f64;
    let (mut mean, mut jitter) = (0.0f64, 0.0f64);
    let mut min = f32::INFINITY;
    let mut max = 0.0f32;
    let mut samples = 0u32;
    for w in windows.iter() {
        merged.sent = merged.sent.saturating_add(w.sent);
        merged.received = merged.received.saturating_add(w.received);
        if let Some(r) = w.rtt() {
            let k = f64::from(r.samples);
            weight += k;
            samples = samples.saturating_add(r.samples);
            mean += k * f64::from(r.mean);
            jitter += k * f64::from(r.jitter);
            min = min.min(r.min);
            max = max.max(r.max);
        }
    }
    if weight > 0.0 {
        let quantile = |q: fn(&RttFigures) -> f32| {
            weighted_median(
                windows
                    .iter()
                    .filter_map(Window::rtt)
                    .map(|r| (q(r), r.samples)),
            )
        };
        merged.rtt = Some(RttFigures {
            samples,
            min,
            p50: quantile(|r| r.p50),
            p90: quantile(|r| r.p90),
            p99: quantile(|r| r.p99),
            max,
            mean: (mean / weight) as f32,
            jitter: (jitter / weight) as f32,
        });
    }
    merged
}

/// The value at which half the weight lies below and half above (the lower one on a tie).
///
/// A quantile of the whole sliding window cannot be recomputed from the windows' quantiles; the
/// weighted median of them is the estimate that one disturbed window (a burst of cross traffic,
/// a descheduled agent) cannot move, where a weighted mean moves by a sixth of the disturbance
/// when six windows are kept.
fn weighted_median(weighted: impl Iterator<Item = (f32, u32)>) -> f32 {
    let mut values: [(f32, u64); MAX_WINDOWS] = [(0.0, 0); MAX_WINDOWS];
    let mut n = 0;
    for (v, k) in values_in(weighted) {
        values[n] = (v, k);
        n += 1;
    }
    let values = &mut values[..n];
    values.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: u64 = values.iter().map(|&(_, k)| k).sum();
    let mut below = 0u64;
    for &(v, k) in values.iter() {
        below += k;
        if 2 * below >= total {
            return v;
        }
    }
    0.0
}

/// The weighted values with a weight, at most [`MAX_WINDOWS`] of them (one per window).
fn values_in(values: impl Iterator<Item = (f32, u32)>) -> impl Iterator<Item = (f32, u64)> {
    values
        .filter(|&(_, k)| k > 0)
        .take(MAX_WINDOWS)
        .map(|(v, k)| (v, u64::from(k)))
}

/// Upper end of the 95 % Wilson score interval of a loss ratio from `lost` of `sent` probes.
pub fn wilson_upper_95(lost: u64, sent: u64) -> f64 {
    zonemesh_domain::stats::wilson(lost, sent, zonemesh_domain::stats::Z_95).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{SampleBuilder, name};

    fn sample(sent: u64, received: u64, p50: f64) -> PathSample {
        SampleBuilder::new(&name("a"), &name("b"), p50)
            .probes(sent, sent - received)
            .window(UnixMs(1), 1)
            .spread(0.5, 1.0, 1.0, 2.0)
            .build()
    }

    #[test]
    fn tcp_figures_are_smoothed_like_the_rate_and_a_test_without_them_keeps_them() {
        use zonemesh_domain::{Bps, MessageExchange, Micros, Retransmits};
        let config = PathConfig::default();
        let test = |retransmitted: u64, p50: f64, mean: f64| {
            let mut t =
                ThroughputSample::new(Bps::parse("r", 8e6).unwrap(), 1_000_000, 1_000_000, 0, 1)
                    .unwrap();
            t.retransmits = Some(Retransmits::new(1_000, retransmitted).unwrap());
            let us = |v| Micros::parse("e", v).unwrap();
            t.exchange = Some(MessageExchange::new(8, us(p50), us(mean), us(1_000.0)).unwrap());
            t
        };
        let with = |t: ThroughputSample| {
            let mut s = sample(10, 10, 100.0);
            s.throughput = Some(t);
            s
        };
        let mut path = PathState::default();
        assert_eq!(path.tcp.retransmit_ratio(), None);
        path.apply(&with(test(20, 100.0, 200.0)), UnixMs(0), &config, false);
        assert_eq!(path.tcp.retransmit_ratio(), Some(0.02));
        assert_eq!(path.tcp.exchange_p50_us(), Some(100.0));
        path.apply(&with(test(0, 200.0, 200.0)), UnixMs(1), &config, false);
        // 0.3 of the new test, 0.7 of what was.
        let close = |a: Option<f32>, b: f32| (a.unwrap() - b).abs() < 1e-5;
        assert!(close(path.tcp.retransmit_ratio(), 0.014));
        assert!(close(path.tcp.exchange_p50_us(), 130.0));
        assert!(close(path.tcp.exchange_mean_us(), 200.0));
        let bare = ThroughputSample::new(Bps::parse("r", 8e6).unwrap(), 1_000_000, 1_000_000, 0, 1);
        let before = path.tcp;
        path.apply(&with(bare.unwrap()), UnixMs(2), &config, false);
        assert_eq!(path.tcp, before);
    }

    #[test]
    fn windows_slide_out_by_age_and_count() {
        let config = PathConfig::default();
        let mut path = PathState::default();
        path.apply(&sample(10, 10, 100.0), UnixMs(0), &config, false);
        path.apply(&sample(10, 5, 300.0), UnixMs(10_000), &config, false);
        assert_eq!(path.merged.sent, 20);
        assert_eq!(path.merged.received, 15);
        // Weighted by replies: 10 replies at 100 µs outweigh 5 at 300 µs for the median, and the
        // mean is (10 * 100 + 5 * 300) / 15.
        let rtt = path.merged.rtt.unwrap();
        assert_eq!(rtt.p50, 100.0);
        assert!((rtt.mean - 166.666_67).abs() < 0.01, "{}", rtt.mean);
        path.apply(&sample(10, 10, 100.0), UnixMs(65_000), &config, false);
        assert_eq!(path.windows.len(), 2, "the window at 0 is older than 60 s");
        assert_eq!(path.sent_total, 30);
        for i in 0..10 {
            path.apply(&sample(1, 1, 1.0), UnixMs(66_000 + i), &config, false);
        }
        assert_eq!(path.windows.len(), config.max_windows);
    }

    #[test]
    fn one_disturbed_window_does_not_move_the_quantiles() {
        let config = PathConfig::default();
        let mut path = PathState::default();
        for (i, p50) in [2_050.0, 2_060.0, 2_400.0, 2_055.0, 2_045.0, 2_052.0]
            .into_iter()
            .enumerate()
        {
            path.apply(
                &sample(50, 50, p50),
                UnixMs(i as i64 * 5_000),
                &config,
                false,
            );
        }
        let rtt = path.merged.rtt.unwrap();
        assert_eq!(
            rtt.p50, 2_052.0,
            "the median of six windows, the lower middle one"
        );
        assert_eq!(rtt.p99, 2_052.0);
        assert!(
            rtt.mean > 2_100.0,
            "the mean still shows the burst: {}",
            rtt.mean
        );
        assert_eq!(rtt.max, 4_800.0);
    }

    #[test]
    fn weighted_median_follows_the_weights() {
        assert_eq!(
            weighted_median([(1.0, 1), (2.0, 1), (3.0, 5)].into_iter()),
            3.0
        );
        assert_eq!(weighted_median([(3.0, 1), (1.0, 1)].into_iter()), 1.0);
        assert_eq!(weighted_median([(7.0, 0), (5.0, 2)].into_iter()), 5.0);
        assert_eq!(weighted_median(std::iter::empty()), 0.0);
    }

    #[test]
    fn a_window_of_total_loss_has_no_rtt_but_counts() {
        let config = PathConfig::default();
        let mut path = PathState::default();
        path.apply(&sample(10, 0, 0.0), UnixMs(0), &config, false);
        assert_eq!(path.merged.loss(), Some(1.0));
        assert!(path.merged.rtt.is_none());
        assert!(!path.is_stale(UnixMs(30_000), &config));
        assert!(path.is_stale(UnixMs(30_001), &config));
    }

    #[test]
    fn wilson_bounds_contain_the_estimate() {
        assert!((wilson_upper_95(0, 100) - 0.037).abs() < 0.001);
        assert!(wilson_upper_95(50, 100) > 0.5);
        assert_eq!(wilson_upper_95(0, 0), 1.0);
        assert_eq!(wilson_upper_95(10, 10), 1.0);
    }
}
