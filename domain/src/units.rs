//! Figures with their units: finite, not negative, within range.

use std::fmt;

use crate::FieldError;

/// Why `value` is not a figure in `[0, max]`.
#[cold]
fn refuse(field: &str, value: f64, max: f64) -> FieldError {
    let problem = if !value.is_finite() {
        format!("{value} is not a finite number")
    } else if value < 0.0 {
        format!("{value} is negative")
    } else {
        format!("{value} is above the largest possible value {max}")
    };
    FieldError::new(field, problem)
}

macro_rules! figure_type {
    ($(#[$doc:meta])* $name:ident, $unit:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
        pub struct $name(f64);

        impl $name {
            /// Zero.
            pub const ZERO: Self = Self(0.0);

            /// Checks that `value` is finite and within range; `field` names it in the error.
            // Inlined where it is called (every figure of every report passes here): the check
            // is one comparison, and the refusal is out of line.
            #[inline]
            pub fn parse(field: &str, value: f64) -> Result<Self, FieldError> {
                if (0.0..=$max).contains(&value) {
                    Ok(Self(value))
                } else {
                    Err(refuse(field, value, $max))
                }
            }

            /// The value, in
            #[doc = $unit]
            pub fn get(self) -> f64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} {}", self.0, $unit)
            }
        }
    };
}

figure_type!(
    /// A duration in microseconds: finite, not negative, at most an hour.
    Micros,
    "µs",
    3_600_000_000.0
);
figure_type!(
    /// A fraction of probes lost: finite, between 0 and 1.
    LossRatio,
    "(ratio)",
    1.0
);
figure_type!(
    /// A rate in bits per second: finite, not negative, at most 10 Tbit/s.
    Bps,
    "bit/s",
    1.0e13
);

impl LossRatio {
    /// The share of `sent` probes that got no reply, if any was sent (`received` is capped at
    /// `sent`).
    pub fn of_counts(sent: u64, received: u64) -> Option<Self> {
        (sent > 0).then(|| Self(1.0 - received.min(sent) as f64 / sent as f64))
    }
}

/// Milliseconds since the Unix epoch, not negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct UnixMs(pub i64);

impl UnixMs {
    /// Checks that `value` is not negative; `field` names it in the error.
    pub fn parse(field: &str, value: i64) -> Result<Self, FieldError> {
        if value < 0 {
            return Err(FieldError::new(field, format!("{value} is before 1970")));
        }
        Ok(Self(value))
    }

    /// Milliseconds elapsed from `earlier` to `self`, 0 if `earlier` is later.
    pub fn since(self, earlier: UnixMs) -> i64 {
        (self.0 - earlier.0).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_within_range_pass_and_the_others_are_refused_saying_why() {
        for ok in [0.0, -0.0, 1e-9, 3_600_000_000.0] {
            assert_eq!(Micros::parse("rtt", ok).map(Micros::get), Ok(ok));
        }
        let problems = [
            (f64::NAN, "NaN is not a finite number"),
            (f64::INFINITY, "inf is not a finite number"),
            (-1.0, "-1 is negative"),
            (
                3_600_000_001.0,
                "3600000001 is above the largest possible value 3600000000",
            ),
        ];
        for (value, problem) in problems {
            let err = Micros::parse("paths[0].rtt.p50_us", value).unwrap_err();
            assert_eq!(err.field(), "paths[0].rtt.p50_us");
            assert_eq!(err.problem(), problem);
        }
        assert_eq!(LossRatio::parse("loss", 1.0).map(LossRatio::get), Ok(1.0));
        assert!(LossRatio::parse("loss", 1.000_001).is_err());
        assert!(Bps::parse("rate", 1.0e13 + 1e6).is_err());
    }
}
