//! Node, zone and region names, checked as Kubernetes checks them.

use std::fmt;
use std::sync::Arc;

use crate::FieldError;

/// The zone of a node whose zone nobody knows: what an agent says when it could not find its own,
/// and where the aggregator puts a node known only as a destination.
pub const UNKNOWN_ZONE: &str = "unknown";
/// Longest node name (a DNS-1123 subdomain).
pub const MAX_NODE_NAME_BYTES: usize = 253;
/// Longest zone or region name (a Kubernetes label value).
pub const MAX_ZONE_NAME_BYTES: usize = 63;

fn check_name(
    field: &str,
    value: &str,
    max: usize,
    allowed: impl Fn(char) -> bool,
) -> Result<(), FieldError> {
    if value.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(FieldError::new(
            field,
            format!("is {} bytes long, at most {max} allowed", value.len()),
        ));
    }
    if let Some(bad) = value.chars().find(|c| !allowed(*c)) {
        return Err(FieldError::new(
            field,
            format!("{value:?} contains {bad:?}, which is not allowed"),
        ));
    }
    let first_last_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_last_ok(value.chars().next()) || !first_last_ok(value.chars().last()) {
        return Err(FieldError::new(
            field,
            format!("{value:?} must start and end with a letter or digit"),
        ));
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $max:expr, $allowed:expr) => {
        $(#[$doc])*
        ///
        /// Copies share the text (names are copied into every answer and every table).
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Checks `value`; `field` names it in the error.
            pub fn parse(field: &str, value: impl Into<String>) -> Result<Self, FieldError> {
                let value = value.into();
                check_name(field, &value, $max, $allowed)?;
                Ok(Self(Arc::from(value)))
            }

            /// The name as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = FieldError;
            fn try_from(value: &str) -> Result<Self, FieldError> {
                Self::parse("", value)
            }
        }

        impl From<$name> for String {
            // A copy of the text (an `Arc<str>` cannot give its buffer away), without the
            // formatting machinery that `to_string` goes through.
            fn from(value: $name) -> String {
                String::from(&*value.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// A Kubernetes node name: a DNS-1123 subdomain (lower-case letters, digits, `-` and `.`).
    NodeName,
    MAX_NODE_NAME_BYTES,
    |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'
);

name_type!(
    /// A zone or region name: a Kubernetes label value (letters, digits, `-`, `_` and `.`).
    ZoneName,
    MAX_ZONE_NAME_BYTES,
    |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
);

impl ZoneName {
    /// Checks an optional zone or region name: empty means none.
    pub fn parse_optional(field: &str, value: String) -> Result<Option<Self>, FieldError> {
        if value.is_empty() {
            Ok(None)
        } else {
            Self::parse(field, value).map(Some)
        }
    }
}

/// Parses a list of node names from a request field (`candidates`, `peers`, `exclude`).
pub fn node_names(field: &str, names: Vec<String>) -> Result<Vec<NodeName>, FieldError> {
    names
        .into_iter()
        .enumerate()
        .map(|(i, n)| NodeName::parse(&format!("{field}[{i}]"), n))
        .collect()
}
