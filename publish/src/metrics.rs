//! The publisher's counters, exposed by the aggregator as `zonemesh_publish_*` (label sets
//! bounded by verbs and outcomes, never by objects or nodes).

use zonemesh_common::prom::{Counter, Exposition};

/// Verbs the writer counts.
pub const VERBS: [&str; 4] = ["create", "update", "delete", "label"];

/// The publisher's counters.
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
    writes: [Counter; VERBS.len()],
}

impl PublishMetrics {
    /// Counts one write.
    pub fn wrote(&self, verb: &str) {
        if let Some(i) = VERBS.iter().position(|v| *v == verb) {
            self.writes[i].inc();
        }
    }

    /// Writes of `verb`.
    pub fn writes(&self, verb: &str) -> u64 {
        VERBS
            .iter()
            .position(|v| *v == verb)
            .map_or(0, |i| self.writes[i].get())
    }

    /// The families, into an exposition.
    pub fn render(&self, e: &mut Exposition) {
        for (verb, c) in VERBS.iter().zip(&self.writes) {
            e.counter(
                "zonemesh_publish_writes_total",
                "Kubernetes writes of the publisher, by verb (label: a node's zonemesh.io/ labels).",
                &[("verb", verb)],
                c.get(),
            );
        }
        for (name, help, c) in [
            (
                "zonemesh_publish_rounds_total",
                "Publishing rounds that ran to the end.",
                &self.rounds,
            ),
            (
                "zonemesh_publish_rounds_unchanged_total",
                "Publishing rounds skipped because the tiers did not change.",
                &self.rounds_unchanged,
            ),
            (
                "zonemesh_publish_api_errors_total",
                "Kubernetes API errors that ended a publishing round (the publisher backs off).",
                &self.api_errors,
            ),
            (
                "zonemesh_publish_foreign_objects_total",
                "Objects with zonemesh's names that zonemesh does not own, left untouched.",
                &self.foreign_objects,
            ),
            (
                "zonemesh_publish_conflicts_total",
                "Writes refused with 409 Conflict (changed underneath), retried next round.",
                &self.conflicts,
            ),
            (
                "zonemesh_publish_weights_rewritten_total",
                "Times zonemesh's NetworkTopology had lost its weights entry (Diktyo's controller) and was written again.",
                &self.weights_rewritten,
            ),
            (
                "zonemesh_publish_volcano_overlaps_total",
                "Tier-1 HyperNodes of Volcano's label discovery that split or mix a zonemesh zone's nodes.",
                &self.volcano_overlaps,
            ),
        ] {
            e.counter(name, help, &[], c.get());
        }
    }
}
