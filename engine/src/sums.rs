//! Running sums of path figures: per node over its paths inside its zone, per zone pair over
//! the paths between them. Each path remembers what it added ([`Contribution`]) so that it can be
//! taken out exactly when its figures change.

use zonemesh_domain::UnixMs;

use crate::path::{PathConfig, PathState, When, known};

/// Running sums of path figures (for a node's intra-zone paths or a zone pair).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sums {
    /// Sum of median RTTs, µs.
    pub rtt: f64,
    /// Sum of 90th percentile RTTs, µs (same paths as `rtt`).
    pub rtt_p90: f64,
    /// Sum of 99th percentile RTTs, µs (same paths as `rtt`).
    pub rtt_p99: f64,
    /// Paths in `rtt`.
    pub rtt_n: u32,
    /// Sum of loss ratios.
    pub loss: f64,
    /// Paths in `loss`.
    pub loss_n: u32,
    /// Sum of latest throughputs, bit/s.
    pub tput: f64,
    /// Paths in `tput`.
    pub tput_n: u32,
    /// Oldest update among the paths counted (conservative between sweeps).
    pub oldest: Option<UnixMs>,
}

impl Sums {
    pub(crate) fn add(&mut self, c: &Contribution, sign: f64) {
        let step = |n: &mut u32| {
            if sign > 0.0 {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
            }
        };
        if let Some([p50, p90, p99]) = c.rtt() {
            self.rtt += sign * f64::from(p50);
            self.rtt_p90 += sign * f64::from(p90);
            self.rtt_p99 += sign * f64::from(p99);
            step(&mut self.rtt_n);
        }
        if let Some(l) = c.loss() {
            self.loss += sign * f64::from(l);
            step(&mut self.loss_n);
        }
        if let Some(t) = c.tput() {
            self.tput += sign * f64::from(t);
            step(&mut self.tput_n);
        }
        if sign > 0.0
            && let Some(at) = c.at()
        {
            self.oldest = Some(self.oldest.map_or(at, |o| o.min(at)));
        }
    }

    /// These sums without `part`, sums over some of the same paths: each figure's sum and count
    /// less the part's (where the part counts any), and a sum whose count is 0 at 0 (what was
    /// taken out leaves rounding behind). `oldest` stays as it is: it is conservative.
    pub(crate) fn without(&self, part: &Sums) -> Sums {
        let mut s = *self;
        if part.rtt_n > 0 {
            s.rtt -= part.rtt;
            s.rtt_p90 -= part.rtt_p90;
            s.rtt_p99 -= part.rtt_p99;
            s.rtt_n = s.rtt_n.saturating_sub(part.rtt_n);
        }
        if part.loss_n > 0 {
            s.loss -= part.loss;
            s.loss_n = s.loss_n.saturating_sub(part.loss_n);
        }
        if part.tput_n > 0 {
            s.tput -= part.tput;
            s.tput_n = s.tput_n.saturating_sub(part.tput_n);
        }
        if s.rtt_n == 0 {
            (s.rtt, s.rtt_p90, s.rtt_p99) = (0.0, 0.0, 0.0);
        }
        if s.loss_n == 0 {
            s.loss = 0.0;
        }
        if s.tput_n == 0 {
            s.tput = 0.0;
        }
        s
    }

    /// Mean median RTT, µs.
    pub fn rtt_mean(&self) -> Option<f64> {
        (self.rtt_n > 0).then(|| (self.rtt / f64::from(self.rtt_n)).max(0.0))
    }
    /// Mean 90th and 99th percentile RTTs, µs.
    pub fn rtt_tail_means(&self) -> Option<(f64, f64)> {
        (self.rtt_n > 0).then(|| {
            let n = f64::from(self.rtt_n);
            ((self.rtt_p90 / n).max(0.0), (self.rtt_p99 / n).max(0.0))
        })
    }
    /// Mean loss ratio.
    pub fn loss_mean(&self) -> Option<f64> {
        (self.loss_n > 0).then(|| (self.loss / f64::from(self.loss_n)).clamp(0.0, 1.0))
    }
    /// Mean throughput, bit/s.
    pub fn tput_mean(&self) -> Option<f64> {
        (self.tput_n > 0).then(|| (self.tput / f64::from(self.tput_n)).max(0.0))
    }
}

/// What one path adds to the sums, remembered so that it can be taken out exactly.
///
/// Each figure is NaN where the path adds none: no `Option`, whose tags would cost every path
/// twelve bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Contribution {
    /// RTT p50, p90, p99, µs (f32 as the path keeps them: what is added is taken out exactly).
    rtt: [f32; 3],
    loss: f32,
    tput: f32,
    /// When the path's latency figures were last updated.
    at: When,
}

impl Default for Contribution {
    fn default() -> Self {
        Self::new(None, None, None, When::NEVER)
    }
}

impl PartialEq for Contribution {
    /// Equal when every figure is equal or both are absent, as `Option`s compare.
    fn eq(&self, other: &Self) -> bool {
        let figures = |c: &Self| [c.rtt[0], c.rtt[1], c.rtt[2], c.loss, c.tput];
        let same = |(a, b): (f32, f32)| a == b || (a.is_nan() && b.is_nan());
        figures(self).into_iter().zip(figures(other)).all(same) && self.at == other.at
    }
}

impl Contribution {
    fn new(rtt: Option<[f32; 3]>, loss: Option<f32>, tput: Option<f32>, at: When) -> Self {
        Self {
            rtt: rtt.unwrap_or([f32::NAN; 3]),
            loss: loss.unwrap_or(f32::NAN),
            tput: tput.unwrap_or(f32::NAN),
            at,
        }
    }

    /// RTT p50, p90 and p99, µs, if the path adds them.
    pub(crate) fn rtt(&self) -> Option<[f32; 3]> {
        (!self.rtt[0].is_nan()).then_some(self.rtt)
    }

    /// Loss ratio, if the path adds one.
    pub(crate) fn loss(&self) -> Option<f32> {
        known(self.loss)
    }

    /// Latest throughput, bit/s, if the path adds one.
    pub(crate) fn tput(&self) -> Option<f32> {
        known(self.tput)
    }

    /// When the path's latency figures were last updated.
    pub(crate) fn at(&self) -> Option<UnixMs> {
        self.at.get()
    }

    pub(crate) fn of(path: &PathState, now: UnixMs, config: &PathConfig) -> Self {
        let tput = path
            .fresh_throughput(now, config)
            .map(|t| t.latest_bps as f32);
        if path.is_stale(now, config) {
            return Self::new(None, None, tput, When::NEVER);
        }
        Self::new(
            path.merged.rtt.map(|r| [r.p50, r.p90, r.p99]),
            path.merged.loss().map(|l| l as f32),
            tput,
            path.last_update,
        )
    }
}
