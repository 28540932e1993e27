//! A job's communication per iteration, as `Place` takes it: which collective, how many bytes.

use std::fmt;

use crate::FieldError;

/// Most bytes one iteration may move (64 GiB): above it a figure is a unit mistake, not a job.
pub const MAX_BYTES_PER_ITERATION: u64 = 64 << 30;

/// The collective a job runs every iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collective {
    /// Ring all-reduce over the ranks in order.
    RingAllReduce,
    /// Reduce inside each zone, all-reduce across zones, broadcast inside each zone.
    HierarchicalAllReduce,
    /// Parameter servers on the first `servers` ranks (at least 1, at most the ranks).
    ParameterServer {
        /// How many of the ranks hold a shard.
        servers: u32,
    },
    /// Every rank sends to every other.
    AllToAll,
}

impl Collective {
    /// The names users write, in the order the wire numbers them.
    pub const NAMES: [&'static str; 4] = ["ring", "hierarchical", "parameter-server", "all-to-all"];

    /// The lower-case name users write (`ring`, `hierarchical`, `parameter-server`,
    /// `all-to-all`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::RingAllReduce => "ring",
            Self::HierarchicalAllReduce => "hierarchical",
            Self::ParameterServer { .. } => "parameter-server",
            Self::AllToAll => "all-to-all",
        }
    }

    /// Reads a collective by the name users write, with its servers (0 for the default of one
    /// server; refused with any other collective). Errors name `field` or `servers_field`.
    pub fn parse(
        field: &str,
        name: &str,
        servers_field: &str,
        servers: u32,
    ) -> Result<Self, FieldError> {
        let collective = match name.trim().to_ascii_lowercase().as_str() {
            "ring" => Self::RingAllReduce,
            "hierarchical" => Self::HierarchicalAllReduce,
            "parameter-server" | "ps" => Self::ParameterServer {
                servers: servers.max(1),
            },
            "all-to-all" => Self::AllToAll,
            other => {
                return Err(FieldError::new(
                    field,
                    format!(
                        "{other:?} is not a collective (one of {})",
                        Self::NAMES.join(", ")
                    ),
                ));
            }
        };
        if servers > 0 && !matches!(collective, Self::ParameterServer { .. }) {
            return Err(FieldError::new(
                servers_field,
                format!(
                    "{servers} servers, but only a parameter-server collective has servers (this is {})",
                    collective.as_str()
                ),
            ));
        }
        Ok(collective)
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ParameterServer { servers } => write!(f, "parameter-server ({servers} servers)"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// Parses a Kubernetes quantity (`resource.Quantity`) as a whole number: a decimal number,
/// optionally with an exponent (`1e6`) or a suffix, binary (`Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`)
/// or decimal (`m`, `k`, `M`, `G`, `T`, `P`, `E`); a fraction is rounded up, as `Value()` does.
pub fn parse_quantity(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let number_end = t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '+' || *c == '-'))
        .map_or(t.len(), |(i, _)| i);
    let (number, suffix) = t.split_at(number_end);
    let bad = || format!("{text:?} is not a Kubernetes quantity (such as 25Mi, 4M or 1e6)");
    if number.is_empty() || number.starts_with('-') || number.matches('.').count() > 1 {
        return Err(bad());
    }
    let number = number.strip_prefix('+').unwrap_or(number);
    if number.is_empty() || number == "." || number.contains(['+', '-']) {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let multiplier: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().map_err(|_| bad())?;
            10f64.powi(exp)
        }
        _ => return Err(bad()),
    };
    let bytes = (value * multiplier).ceil();
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// One job's communication per iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// The collective.
    pub collective: Collective,
    /// The gradient size; for all-to-all, the bytes each rank sends in all.
    pub bytes_per_iteration: u64,
}

impl Job {
    /// Checks a job for `workers` workers: at least one byte and at most
    /// [`MAX_BYTES_PER_ITERATION`], at most as many servers as workers. Errors name
    /// `bytes_per_iteration` and `servers`.
    pub fn checked(
        collective: Collective,
        bytes_per_iteration: u64,
        workers: u32,
    ) -> Result<Self, FieldError> {
        if bytes_per_iteration == 0 {
            return Err(FieldError::new(
                "bytes_per_iteration",
                format!("must be at least 1 with a collective ({collective})"),
            ));
        }
        if bytes_per_iteration > MAX_BYTES_PER_ITERATION {
            return Err(FieldError::new(
                "bytes_per_iteration",
                format!(
                    "{bytes_per_iteration} bytes, at most {MAX_BYTES_PER_ITERATION} (64 GiB) allowed"
                ),
            ));
        }
        if let Collective::ParameterServer { servers } = collective {
            if servers == 0 {
                return Err(FieldError::new("servers", "must be at least 1"));
            }
            if servers > workers {
                return Err(FieldError::new(
                    "servers",
                    format!(
                        "{servers} servers for {workers} workers: servers are workers' nodes, at most one per worker"
                    ),
                ));
            }
        }
        Ok(Self {
            collective,
            bytes_per_iteration,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_jobs_are_refused_naming_the_field() {
        let cases: [(&str, u32, u64, u32, &str); 6] = [
            ("token-ring", 0, 1, 4, "collective"),
            ("ring", 2, 1, 4, "servers"),
            ("ring", 0, 0, 4, "bytes_per_iteration"),
            (
                "ring",
                0,
                MAX_BYTES_PER_ITERATION + 1,
                4,
                "bytes_per_iteration",
            ),
            ("parameter-server", 5, 1, 4, "servers"),
            ("all-to-all", 1, 1, 4, "servers"),
        ];
        for (name, servers, bytes, workers, field) in cases {
            let err = Collective::parse("collective", name, "servers", servers)
                .and_then(|c| Job::checked(c, bytes, workers))
                .unwrap_err();
            assert_eq!(err.field(), field, "{name} {servers} {bytes}: {err}");
        }
    }

    #[test]
    fn good_jobs_pass_and_a_parameter_server_has_one_server_by_default() {
        let c = Collective::parse("collective", "parameter-server", "servers", 0).unwrap();
        assert_eq!(c, Collective::ParameterServer { servers: 1 });
        let job = Job::checked(c, MAX_BYTES_PER_ITERATION, 1).unwrap();
        assert_eq!(job.bytes_per_iteration, 64 << 30);
        for name in Collective::NAMES {
            let c = Collective::parse("collective", name, "servers", 0).unwrap();
            assert_eq!(c.as_str(), name);
        }
    }
}
