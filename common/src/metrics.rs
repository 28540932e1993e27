//! Prometheus metrics as the aggregator and the agent keep them, on `prometheus-client`: each
//! binary registers its metrics in an explicit [`Registry`] with typed label sets, and
//! [`exposition`] writes the Prometheus text format 0.0.4, or OpenMetrics 1.0 when the scraper's
//! `Accept` header asks for it.
//!
//! ```
//! use prometheus_client::registry::Registry;
//! use zonemesh_common::metrics::{Counter, exposition};
//!
//! let mut registry = Registry::default();
//! let reports = Counter::default();
//! // No `_total` and no final full stop: the encoder adds both.
//! registry.register("zonemesh_reports", "Reports applied", reports.clone());
//! reports.add(3);
//! let (content_type, text) = exposition(&registry, [None]).unwrap();
//! assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
//! assert_eq!(
//!     text.lines().collect::<Vec<_>>(),
//!     [
//!         "# HELP zonemesh_reports_total Reports applied.",
//!         "# TYPE zonemesh_reports_total counter",
//!         "zonemesh_reports_total 3",
//!     ]
//! );
//! ```

use std::sync::atomic::AtomicU64;

pub use prometheus_client;
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::{MetricType, counter, gauge};
pub use prometheus_client::registry::Registry;

/// The content type of OpenMetrics text 1.0 (the crate has no constant for it).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Implements the crate's metric traits for a wrapper (`.0`) of one of its metrics.
#[macro_export]
macro_rules! wrapped_metric {
    ($wrapper:ty, $kind:expr) => {
        impl $crate::metrics::prometheus_client::metrics::TypedMetric for $wrapper {
            const TYPE: $crate::metrics::prometheus_client::metrics::MetricType = $kind;
        }

        impl $crate::metrics::prometheus_client::encoding::EncodeMetric for $wrapper {
            fn encode(
                &self,
                encoder: $crate::metrics::prometheus_client::encoding::MetricEncoder,
            ) -> Result<(), std::fmt::Error> {
                $crate::metrics::prometheus_client::encoding::EncodeMetric::encode(&self.0, encoder)
            }
            fn metric_type(&self) -> $crate::metrics::prometheus_client::metrics::MetricType {
                $kind
            }
        }
    };
}

wrapped_metric!(Counter, MetricType::Counter);
wrapped_metric!(Gauge, MetricType::Gauge);

/// A count that only goes up. A handle: clones count together, so one clone is registered
/// and the other kept where the events happen.
///
/// (A thin wrapper over `prometheus_client`'s counter, kept so that the call sites spell the
/// same thing as before the crate came in: `add(n)` rather than `inc_by(n)`.)
#[derive(Debug, Clone, Default)]
pub struct Counter(counter::Counter<u64, AtomicU64>);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.inc();
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.inc_by(n);
    }
    /// The count.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// A count that goes up and down, printed as an integer (`2`, not `2.0`: scrapers do not
/// care, but people and the tests that read exact lines do). A handle, as [`Counter`].
#[derive(Debug, Clone, Default)]
pub struct Gauge(gauge::Gauge<u64, AtomicU64>);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, v: u64) {
        self.0.set(v);
    }
    /// The value.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// Whether one of the `Accept` header values asks for OpenMetrics text (with a q-value above
/// 0). Prometheus lists it first; curl, promtool and the Python parser send no such header and
/// get the 0.0.4 text.
pub fn wants_openmetrics<'a>(accept: impl IntoIterator<Item = Option<&'a str>>) -> bool {
    accept
        .into_iter()
        .flatten()
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            let q = parts
                .find_map(|p| p.strip_prefix("q="))
                .and_then(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            media.eq_ignore_ascii_case("application/openmetrics-text") && q > 0.0
        })
}

/// The Prometheus text 0.0.4 of `registry` (empty if a value cannot be written in it).
pub fn render(registry: &Registry) -> String {
    exposition(registry, [None])
        .map(|(_, text)| text)
        .unwrap_or_default()
}

/// The exposition of `registry` for a scraper that sent `accept` (the values of its `Accept`
/// headers, `None` for one that is not text): its content type and text.
pub fn exposition<'a>(
    registry: &Registry,
    accept: impl IntoIterator<Item = Option<&'a str>>,
) -> Result<(&'static str, String), std::fmt::Error> {
    let mut body = String::with_capacity(16 * 1024);
    if wants_openmetrics(accept) {
        text::encode(&mut body, registry)?;
        Ok((OPENMETRICS, body))
    } else {
        prometheus_text::encode(&mut body, registry)?;
        Ok((prometheus_text::CONTENT_TYPE, body))
    }
}

/// Defines a label value type: an enum whose variants print as the given strings, with `ALL`
/// (every variant, to create each series at start so that it shows at 0) and `as_str`.
/// (By hand because the crate's derive prints the variant's name and cannot rename it.)
#[macro_export]
macro_rules! label_value {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in order.
            pub const ALL: &[$name] = &[$($name::$variant),+];

            /// The label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl $crate::metrics::prometheus_client::encoding::EncodeLabelValue for $name {
            fn encode(
                &self,
                encoder: &mut $crate::metrics::prometheus_client::encoding::LabelValueEncoder<'_>,
            ) -> Result<(), std::fmt::Error> {
                std::fmt::Write::write_str(encoder, self.as_str())
            }
        }
    };
}

/// Compares an exposition with the `golden` one family by family: the same comment lines (help
/// and type), the same series, and the same value text for each, except that a series for which
/// `float(series)` holds may print its value differently if it is the same number (`0` and
/// `0.0`). The order of lines does not count. Panics naming the first difference (a test
/// helper: the aggregator's and the agent's golden expositions).
pub fn assert_same_exposition(text: &str, golden: &str, float: impl Fn(&str) -> bool) {
    use std::collections::{BTreeMap, BTreeSet};
    let lines = |text: &'_ str| {
        let mut comments = BTreeSet::new();
        let mut samples = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with('#') {
                comments.insert(line.to_owned());
            } else if let Some((series, value)) = line.rsplit_once(' ') {
                let twice = samples.insert(series.to_owned(), value.to_owned());
                assert!(twice.is_none(), "{series} twice");
            }
        }
        (comments, samples)
    };
    let (got_comments, got) = lines(text);
    let (want_comments, want) = lines(golden);
    assert_eq!(got_comments, want_comments, "{text}");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{text}"
    );
    for (series, value) in &want {
        let ours = &got[series];
        let same = float(series) && ours.parse::<f64>().ok() == value.parse::<f64>().ok();
        assert!(ours == value || same, "{series}: {ours}, was {value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_only_when_asked() {
        let prometheus = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,\
                          application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;\
                          escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert!(wants_openmetrics([Some(prometheus)]));
        assert!(!wants_openmetrics([None]));
        assert!(!wants_openmetrics([Some("*/*")]));
        assert!(!wants_openmetrics([Some("text/plain; version=0.0.4")]));
        assert!(!wants_openmetrics([Some(
            "application/openmetrics-text; q=0"
        )]));
        assert!(wants_openmetrics([
            Some("text/plain"),
            Some("Application/OpenMetrics-Text")
        ]));

        let mut registry = Registry::default();
        let c = Counter::default();
        registry.register("zonemesh_things", "Things", c.clone());
        c.inc();
        let (ct, body) = exposition(&registry, [Some(prometheus)]).unwrap();
        assert_eq!(ct, OPENMETRICS);
        assert_eq!(
            body,
            "# HELP zonemesh_things Things.\n# TYPE zonemesh_things counter\n\
             zonemesh_things_total 1\n# EOF\n"
        );
    }

    label_value! {
        /// A test label.
        enum Fruit { Apple => "apple", BloodOrange => "blood_orange" }
    }

    #[derive(Debug, Clone, PartialEq, Eq, Hash, prometheus_client::encoding::EncodeLabelSet)]
    struct FruitLabels {
        fruit: Fruit,
    }

    #[test]
    fn label_values_print_their_text_and_gauges_print_integers() {
        use prometheus_client::metrics::family::Family;
        let mut registry = Registry::default();
        let family = Family::<FruitLabels, Gauge>::default();
        registry.register("zonemesh_fruit", "Fruit", family.clone());
        for fruit in Fruit::ALL {
            drop(family.get_or_create(&FruitLabels { fruit: *fruit }));
        }
        family
            .get_or_create(&FruitLabels {
                fruit: Fruit::BloodOrange,
            })
            .set(2);
        let (_, body) = exposition(&registry, [None]).unwrap();
        assert!(
            body.contains("zonemesh_fruit{fruit=\"apple\"} 0\n"),
            "{body}"
        );
        assert!(
            body.contains("zonemesh_fruit{fruit=\"blood_orange\"} 2\n"),
            "{body}"
        );
    }
}
