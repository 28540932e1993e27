//! Small statistics that several crates need: the median and quantiles of a sample, and the
//! Wilson score interval of a ratio. One definition each, so that the engine, the lab and the
//! tests compute a median or a loss interval the same way.
//!
//! ```
//! use zonemesh_domain::stats::{median, quantile, wilson};
//!
//! assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
//! assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
//! assert_eq!(quantile(&mut [1.0, 2.0, 3.0, 4.0, 5.0], 0.9), Some(5.0));
//! let (lo, hi) = wilson(5, 100, 1.96);
//! assert!(lo < 0.05 && 0.05 < hi);
//! ```

/// z for a two-sided 95 % interval.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// Median of `v` (the mean of the two middle values when their count is even); `None` when `v`
/// is empty. Reorders `v`. NaN sorts above every number (`f64::total_cmp`).
pub fn median(v: &mut [f64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (_, &mut hi, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return Some(hi);
    }
    let lo = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo + hi) / 2.0)
}

/// Lower median of `v` (the smaller middle value when their count is even): what more than half
/// of the values reach. `None` when empty. Reorders `v`.
pub fn lower_median(v: &mut [f64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (_, &mut m, _) = v.select_nth_unstable_by((n - 1) / 2, f64::total_cmp);
    Some(m)
}

/// The `q` quantile of `v` (0 ≤ q ≤ 1) by the nearest-rank method: the smallest value with at
/// least a share `q` of the values at or below it (`q` = 0 gives the minimum). `None` when `v` is
/// empty. Reorders `v`.
pub fn quantile(v: &mut [f64], q: f64) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    let (_, &mut x, _) = v.select_nth_unstable_by(rank.clamp(1, n) - 1, f64::total_cmp);
    Some(x)
}

/// The median of durations (the mean of the two middle ones when their count is even); zero
/// when there are none.
pub fn median_duration(times: &[std::time::Duration]) -> std::time::Duration {
    let mut v = times.to_vec();
    v.sort();
    match v.len() {
        0 => std::time::Duration::ZERO,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

/// The Wilson score interval `(low, high)` of a ratio from `k` of `n` trials at `z` standard
/// deviations ([`Z_95`] for 95 %, 3.29 for 99.9 %). With no trials it is `(0, 1)`; at the ends
/// the bounds are exact (`k` = 0 gives a low of 0, `k` ≥ `n` a high of 1).
pub fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    if k >= n {
        return (wilson_bound(n, n, z, -1.0), 1.0);
    }
    let lo = if k == 0 {
        0.0
    } else {
        wilson_bound(k, n, z, -1.0).max(0.0)
    };
    (lo, wilson_bound(k, n, z, 1.0).min(1.0))
}

/// One end of the interval: `side` −1 for the low end, +1 for the high end.
fn wilson_bound(k: u64, n: u64, z: f64, side: f64) -> f64 {
    let n = n as f64;
    let p = k as f64 / n;
    let denom = 1.0 + z * z / n;
    let centre = p + z * z / (2.0 * n);
    let spread = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    (centre + side * spread) / denom
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_quantiles_of_small_samples() {
        // (values, median, lower median, p90)
        type Case<'a> = (&'a [f64], Option<f64>, Option<f64>, Option<f64>);
        let cases: &[Case] = &[
            (&[], None, None, None),
            (&[7.0], Some(7.0), Some(7.0), Some(7.0)),
            (&[2.0, 1.0], Some(1.5), Some(1.0), Some(2.0)),
            (&[5.0, 1.0, 3.0], Some(3.0), Some(3.0), Some(5.0)),
            (&[4.0, 3.0, 2.0, 1.0], Some(2.5), Some(2.0), Some(4.0)),
        ];
        for (values, m, lm, p90) in cases {
            assert_eq!(median(&mut values.to_vec()), *m, "median of {values:?}");
            assert_eq!(
                lower_median(&mut values.to_vec()),
                *lm,
                "lower median of {values:?}"
            );
            assert_eq!(
                quantile(&mut values.to_vec(), 0.9),
                *p90,
                "p90 of {values:?}"
            );
        }
        let mut hundred: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(quantile(&mut hundred, 0.0), Some(1.0));
        assert_eq!(quantile(&mut hundred, 0.5), Some(50.0));
        assert_eq!(quantile(&mut hundred, 0.99), Some(99.0));
        assert_eq!(quantile(&mut hundred, 1.0), Some(100.0));
    }

    #[test]
    fn durations_have_a_median() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        assert_eq!(median_duration(&[]), Duration::ZERO);
        assert_eq!(median_duration(&[ms(3), ms(1), ms(2)]), ms(2));
        assert_eq!(
            median_duration(&[ms(4), ms(1), ms(2), ms(3)]),
            ms(2) + ms(1) / 2
        );
    }

    #[test]
    fn wilson_intervals_match_known_values() {
        // Known values (Newcombe 1998, table I, 95 %): 81/263 → 0.2553–0.3662; 15/148 →
        // 0.0624–0.1605; 0/20 → 0–0.1611; 1/29 → 0.0061–0.1718.
        let cases = [
            (81, 263, 0.2553, 0.3662),
            (15, 148, 0.0624, 0.1605),
            (0, 20, 0.0, 0.1611),
            (1, 29, 0.0061, 0.1718),
        ];
        for (k, n, lo, hi) in cases {
            let (l, h) = wilson(k, n, Z_95);
            assert!(
                (l - lo).abs() < 5e-4 && (h - hi).abs() < 5e-4,
                "{k}/{n}: {l} – {h}"
            );
        }
        assert_eq!(wilson(0, 0, Z_95), (0.0, 1.0));
        assert_eq!(wilson(10, 10, Z_95).1, 1.0);
        assert!(wilson(10, 10, Z_95).0 > 0.69);
    }
}
