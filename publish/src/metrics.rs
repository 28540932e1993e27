//! The publisher's counters, exposed by the aggregator as `zonemesh_publish_*` (label sets
//! bounded by verbs and outcomes, never by objects or nodes), registered in the aggregator's
//! `prometheus-client` registry by [`PublishMetrics::register`].

use zonemesh_common::label_value;
use zonemesh_common::metrics::Counter;
use zonemesh_common::metrics::prometheus_client::metrics::family::Family;
use zonemesh_common::metrics::prometheus_client::registry::Registry;

label_value! {
    /// The Kubernetes writes the writer counts.
    pub enum Verb {
        /// An object created.
        Create => "create",
        /// An object replaced.
        Update => "update",
        /// An object deleted.
        Delete => "delete",
        /// A node's `zonemesh.io/` labels applied.
        Label => "label",
        /// zonemesh's taint put on a node (or its value or effect changed).
        Taint => "taint",
        /// zonemesh's taint removed from a node.
        Untaint => "untaint",
    }
}

/// The label set of the writes: `verb`.
type VerbLabels = [(&'static str, Verb); 1];

/// The publisher's counters (handles: clones count together).
#[derive(Debug, Default)]
pub struct PublishMetrics {
    /// Publishing rounds that ran to the end.
    pub rounds: Counter,
    /// Rounds skipped because nothing changed.
    pub rounds_unchanged: Counter,
    /// API errors that ended a round (the writer then backs off).
    pub api_errors: Counter,
    /// Objects of zonemesh's names that zonemesh does not own, left untouched.
    pub foreign_objects: Counter,
    /// Writes refused because the object changed underneath (409 Conflict): retried next round.
    pub conflicts: Counter,
    /// Our NetworkTopology found without our weights entry (Diktyo's controller rewrites
    /// `spec.weights`), and written again.
    pub weights_rewritten: Counter,
    /// Tier-1 HyperNodes of Volcano's label discovery that hold nodes of a zonemesh zone
    /// together with nodes of other zones (or part of them).
    pub volcano_overlaps: Counter,
    writes: Family<VerbLabels, Counter>,
}

impl PublishMetrics {
    /// Counts one write.
    pub fn wrote(&self, verb: Verb) {
        self.writes.get_or_create(&[("verb", verb)]).inc();
    }

    /// Writes of `verb`.
    pub fn writes(&self, verb: Verb) -> u64 {
        self.writes.get(&[("verb", verb)]).map_or(0, |c| c.get())
    }

    /// Registers the families in `registry`, every series at 0 from the start. (Names without
    /// `_total` and help texts without their final full stop: the encoder adds both.)
    pub fn register(&self, registry: &mut Registry) {
        for &verb in Verb::ALL {
            drop(self.writes.get_or_create(&[("verb", verb)]));
        }
        registry.register(
            "zonemesh_publish_writes",
            "Kubernetes writes of the publisher, by verb (label: a node's zonemesh.io/ labels; taint, untaint: zonemesh's taint on a node)",
            self.writes.clone(),
        );
        for (name, help, c) in [
            (
                "zonemesh_publish_rounds",
                "Publishing rounds that ran to the end",
                &self.rounds,
            ),
            (
                "zonemesh_publish_rounds_unchanged",
                "Publishing rounds skipped because the tiers did not change",
                &self.rounds_unchanged,
            ),
            (
                "zonemesh_publish_api_errors",
                "Kubernetes API errors that ended a publishing round (the publisher backs off)",
                &self.api_errors,
            ),
            (
                "zonemesh_publish_foreign_objects",
                "Objects with zonemesh's names that zonemesh does not own, left untouched",
                &self.foreign_objects,
            ),
            (
                "zonemesh_publish_conflicts",
                "Writes refused with 409 Conflict (changed underneath), retried next round",
                &self.conflicts,
            ),
            (
                "zonemesh_publish_weights_rewritten",
                "Times zonemesh's NetworkTopology had lost its weights entry (Diktyo's controller) and was written again",
                &self.weights_rewritten,
            ),
            (
                "zonemesh_publish_volcano_overlaps",
                "Tier-1 HyperNodes of Volcano's label discovery that split or mix a zonemesh zone's nodes",
                &self.volcano_overlaps,
            ),
        ] {
            registry.register(name, help, c.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_exposed_from_the_start_by_its_old_name() {
        let metrics = PublishMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.wrote(Verb::Label);
        metrics.conflicts.inc();
        let text = zonemesh_common::metrics::render(&registry);
        for line in [
            "# TYPE zonemesh_publish_writes_total counter",
            "zonemesh_publish_writes_total{verb=\"create\"} 0",
            "zonemesh_publish_writes_total{verb=\"label\"} 1",
            "# HELP zonemesh_publish_conflicts_total Writes refused with 409 Conflict (changed underneath), retried next round.",
            "zonemesh_publish_conflicts_total 1",
            "zonemesh_publish_volcano_overlaps_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} not in\n{text}");
        }
        assert_eq!(metrics.writes(Verb::Label), 1);
        assert_eq!(metrics.writes(Verb::Delete), 0);
    }
}
