//! The one error of the domain types.

/// A value refused at the edge: [`field`](FieldError::field) is the path of the offending field
/// (`paths[3].rtt.p50_us`), so that the refusal tells the sender what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct FieldError {
    field: String,
    problem: String,
}

impl FieldError {
    /// A refusal of `field` because of `problem`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// Path of the offending field, such as `paths[2].probes_received`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong with it.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// The same error seen from an enclosing message: `rtt.p50_us` inside `paths[2]` becomes
    /// `paths[2].rtt.p50_us`.
    pub fn within(mut self, parent: &str) -> Self {
        self.field = if self.field.is_empty() {
            parent.to_owned()
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }
}
