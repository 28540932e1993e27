//! Prometheus text exposition shared by the zonemesh binaries: counters, gauges, and a writer
//! that emits each family's `# HELP` and `# TYPE` once and escapes label values.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// A monotonically increasing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
    /// The value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Builds one exposition. Samples of a family must be written together.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
    family: String,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Self {
        Self::default()
    }

    /// A counter sample.
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        self.sample(name, "counter", help, labels, value as f64);
    }

    /// A gauge sample.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        self.sample(name, "gauge", help, labels, value);
    }

    fn sample(&mut self, name: &str, kind: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        if self.family != name {
            let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            self.family = name.to_owned();
        }
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.out, "{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// The text.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_introduced_once_and_labels_escaped() {
        let mut e = Exposition::new();
        e.counter("a_total", "A.", &[("zone", "x\"y")], 3);
        e.counter("a_total", "A.", &[("zone", "z")], 4);
        e.gauge("b", "B.", &[], 0.5);
        let text = e.finish();
        assert_eq!(text.matches("# TYPE a_total counter").count(), 1);
        assert!(text.contains("a_total{zone=\"x\\\"y\"} 3\n"), "{text}");
        assert!(text.contains("# TYPE b gauge\nb 0.5\n"), "{text}");
    }
}
