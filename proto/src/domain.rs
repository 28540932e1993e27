//! Checked domain types: every value that exists is valid.
//!
//! Wire messages are converted with `TryFrom`; a refusal is a [`WireError`] whose
//! [`field`](WireError::field) is the path of the offending field (`paths[3].rtt.p50_us`), so the
//! aggregator can answer `INVALID_ARGUMENT` with a message that tells the sender what to fix.

use std::fmt;
use std::net::IpAddr;

use crate::v1;

/// The zone of a node whose zone nobody knows: what an agent says when it could not find its own,
/// and where the aggregator puts a node known only as a destination.
pub const UNKNOWN_ZONE: &str = "unknown";

/// Most path summaries one report may carry.
pub const MAX_PATHS_PER_REPORT: usize = 16_384;
/// Largest serialised RTT histogram one path summary may carry.
pub const MAX_HISTOGRAM_BYTES: usize = 64 * 1024;
/// Most addresses one node may advertise.
pub const MAX_ADDRESSES: usize = 16;
/// Longest agent version string.
pub const MAX_VERSION_BYTES: usize = 128;
/// Longest node name (a DNS-1123 subdomain).
pub const MAX_NODE_NAME_BYTES: usize = 253;
/// Longest zone or region name (a Kubernetes label value).
pub const MAX_ZONE_NAME_BYTES: usize = 63;

/// A wire value refused at the edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct WireError {
    field: String,
    problem: String,
}

impl WireError {
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

fn check_name(
    field: &str,
    value: &str,
    max: usize,
    allowed: impl Fn(char) -> bool,
) -> Result<(), WireError> {
    if value.is_empty() {
        return Err(WireError::new(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(WireError::new(
            field,
            format!("is {} bytes long, at most {max} allowed", value.len()),
        ));
    }
    if let Some(bad) = value.chars().find(|c| !allowed(*c)) {
        return Err(WireError::new(
            field,
            format!("{value:?} contains {bad:?}, which is not allowed"),
        ));
    }
    let first_last_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_last_ok(value.chars().next()) || !first_last_ok(value.chars().last()) {
        return Err(WireError::new(
            field,
            format!("{value:?} must start and end with a letter or digit"),
        ));
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $max:expr, $allowed:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Checks `value`; `field` names it in the error.
            pub fn parse(field: &str, value: impl Into<String>) -> Result<Self, WireError> {
                let value = value.into();
                check_name(field, &value, $max, $allowed)?;
                Ok(Self(value))
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
            type Error = WireError;
            fn try_from(value: &str) -> Result<Self, WireError> {
                Self::parse("", value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
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

macro_rules! figure_type {
    ($(#[$doc:meta])* $name:ident, $unit:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
        pub struct $name(f64);

        impl $name {
            /// Zero.
            pub const ZERO: Self = Self(0.0);

            /// Checks that `value` is finite and within range; `field` names it in the error.
            pub fn parse(field: &str, value: f64) -> Result<Self, WireError> {
                if !value.is_finite() {
                    return Err(WireError::new(field, format!("{value} is not a finite number")));
                }
                if value < 0.0 {
                    return Err(WireError::new(field, format!("{value} is negative")));
                }
                if value > $max {
                    return Err(WireError::new(
                        field,
                        format!("{value} is above the largest possible value {}", $max),
                    ));
                }
                Ok(Self(value))
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

impl ZoneName {
    /// Checks an optional zone or region name: empty means none.
    pub fn parse_optional(field: &str, value: String) -> Result<Option<Self>, WireError> {
        if value.is_empty() {
            Ok(None)
        } else {
            Self::parse(field, value).map(Some)
        }
    }
}

/// Milliseconds since the Unix epoch, not negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct UnixMs(pub i64);

impl UnixMs {
    /// Checks that `value` is not negative; `field` names it in the error.
    pub fn parse(field: &str, value: i64) -> Result<Self, WireError> {
        if value < 0 {
            return Err(WireError::new(field, format!("{value} is before 1970")));
        }
        Ok(Self(value))
    }

    /// Milliseconds elapsed from `earlier` to `self`, 0 if `earlier` is later.
    pub fn since(self, earlier: UnixMs) -> i64 {
        (self.0 - earlier.0).max(0)
    }
}

/// How an agent measures RTT and loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcmpMode {
    /// ICMP echo over a raw socket.
    Raw,
    /// ICMP echo over an unprivileged datagram socket.
    Dgram,
    /// TCP connect round trips.
    Tcp,
}

impl IcmpMode {
    fn parse(field: &str, value: i32) -> Result<Self, WireError> {
        match v1::IcmpMode::try_from(value) {
            Ok(v1::IcmpMode::Raw) => Ok(Self::Raw),
            Ok(v1::IcmpMode::Dgram) => Ok(Self::Dgram),
            Ok(v1::IcmpMode::Tcp) => Ok(Self::Tcp),
            Ok(v1::IcmpMode::Unspecified) => Err(WireError::new(field, "must be set")),
            Err(_) => Err(WireError::new(field, format!("{value} is not an IcmpMode"))),
        }
    }

    /// The flag spelling: `raw`, `dgram` or `tcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Dgram => "dgram",
            Self::Tcp => "tcp",
        }
    }
}

impl From<IcmpMode> for v1::IcmpMode {
    fn from(value: IcmpMode) -> Self {
        match value {
            IcmpMode::Raw => v1::IcmpMode::Raw,
            IcmpMode::Dgram => v1::IcmpMode::Dgram,
            IcmpMode::Tcp => v1::IcmpMode::Tcp,
        }
    }
}

/// Who an agent is: a checked [`v1::Hello`].
#[derive(Debug, Clone, PartialEq)]
pub struct Hello {
    /// The agent's node.
    pub node: NodeName,
    /// The node's zone.
    pub zone: ZoneName,
    /// The node's region, when known.
    pub region: Option<ZoneName>,
    /// Addresses peers probe, best first; never empty.
    pub addresses: Vec<IpAddr>,
    /// Agent software version.
    pub agent_version: String,
    /// How the agent measures RTT and loss.
    pub icmp_mode: IcmpMode,
    /// Port of the agent's TCP responder.
    pub probe_port: u16,
}

impl TryFrom<v1::Hello> for Hello {
    type Error = WireError;

    fn try_from(wire: v1::Hello) -> Result<Self, WireError> {
        let node = NodeName::parse("node_name", wire.node_name)?;
        let zone = ZoneName::parse("zone", wire.zone)?;
        let region = ZoneName::parse_optional("region", wire.region)?;
        if wire.addresses.is_empty() {
            return Err(WireError::new(
                "addresses",
                "at least one address is needed",
            ));
        }
        if wire.addresses.len() > MAX_ADDRESSES {
            return Err(WireError::new(
                "addresses",
                format!(
                    "{} addresses, at most {MAX_ADDRESSES} allowed",
                    wire.addresses.len()
                ),
            ));
        }
        let addresses = wire
            .addresses
            .iter()
            .enumerate()
            .map(|(i, a)| {
                a.parse::<IpAddr>().map_err(|_| {
                    WireError::new(
                        format!("addresses[{i}]"),
                        format!("{a:?} is not an IP address"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if wire.agent_version.len() > MAX_VERSION_BYTES {
            return Err(WireError::new(
                "agent_version",
                format!("at most {MAX_VERSION_BYTES} bytes allowed"),
            ));
        }
        let icmp_mode = IcmpMode::parse("icmp_mode", wire.icmp_mode)?;
        let probe_port = u16::try_from(wire.probe_port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| {
                WireError::new(
                    "probe_port",
                    format!("{} is not a TCP port", wire.probe_port),
                )
            })?;
        Ok(Self {
            node,
            zone,
            region,
            addresses,
            agent_version: wire.agent_version,
            icmp_mode,
            probe_port,
        })
    }
}

impl From<Hello> for v1::Hello {
    fn from(value: Hello) -> Self {
        Self {
            node_name: value.node.into(),
            zone: value.zone.into(),
            region: value.region.map(String::from).unwrap_or_default(),
            addresses: value.addresses.iter().map(ToString::to_string).collect(),
            agent_version: value.agent_version,
            icmp_mode: v1::IcmpMode::from(value.icmp_mode) as i32,
            probe_port: u32::from(value.probe_port),
        }
    }
}

/// RTT statistics of a window: checked [`v1::RttStats`], ordered `min <= p50 <= p90 <= p99 <= max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rtt {
    /// Replies behind the statistics; at least 1.
    pub samples: u64,
    /// Smallest.
    pub min: Micros,
    /// Median.
    pub p50: Micros,
    /// 90th percentile.
    pub p90: Micros,
    /// 99th percentile.
    pub p99: Micros,
    /// Largest.
    pub max: Micros,
    /// Mean, between min and max.
    pub mean: Micros,
    /// Mean difference of consecutive round trips.
    pub jitter: Micros,
}

impl TryFrom<v1::RttStats> for Rtt {
    type Error = WireError;

    fn try_from(wire: v1::RttStats) -> Result<Self, WireError> {
        if wire.samples == 0 {
            return Err(WireError::new("samples", "must be at least 1"));
        }
        let rtt = Self {
            samples: wire.samples,
            min: Micros::parse("min_us", wire.min_us)?,
            p50: Micros::parse("p50_us", wire.p50_us)?,
            p90: Micros::parse("p90_us", wire.p90_us)?,
            p99: Micros::parse("p99_us", wire.p99_us)?,
            max: Micros::parse("max_us", wire.max_us)?,
            mean: Micros::parse("mean_us", wire.mean_us)?,
            jitter: Micros::parse("jitter_us", wire.jitter_us)?,
        };
        let order = [
            ("p50_us", rtt.min, rtt.p50),
            ("p90_us", rtt.p50, rtt.p90),
            ("p99_us", rtt.p90, rtt.p99),
            ("max_us", rtt.p99, rtt.max),
        ];
        for (field, below, value) in order {
            if value < below {
                return Err(WireError::new(
                    field,
                    format!(
                        "{} is below the quantile before it ({})",
                        value.get(),
                        below.get()
                    ),
                ));
            }
        }
        if rtt.mean < rtt.min || rtt.mean > rtt.max {
            return Err(WireError::new(
                "mean_us",
                format!(
                    "{} is outside [min_us, max_us] = [{}, {}]",
                    rtt.mean.get(),
                    rtt.min.get(),
                    rtt.max.get()
                ),
            ));
        }
        Ok(rtt)
    }
}

impl From<Rtt> for v1::RttStats {
    fn from(value: Rtt) -> Self {
        Self {
            samples: value.samples,
            min_us: value.min.get(),
            p50_us: value.p50.get(),
            p90_us: value.p90.get(),
            p99_us: value.p99.get(),
            max_us: value.max.get(),
            mean_us: value.mean.get(),
            jitter_us: value.jitter.get(),
        }
    }
}

/// One throughput test: checked [`v1::Throughput`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThroughputSample {
    /// Goodput of the counted part.
    pub rate: Bps,
    /// Bytes of the counted part.
    pub bytes: u64,
    /// Length of the counted part, µs; at least 1.
    pub duration_us: u64,
    /// Length of the uncounted warm-up, µs.
    pub warmup_us: u64,
    /// Parallel streams; at least 1.
    pub streams: u32,
}

impl TryFrom<v1::Throughput> for ThroughputSample {
    type Error = WireError;

    fn try_from(wire: v1::Throughput) -> Result<Self, WireError> {
        let rate = Bps::parse("throughput_bps", wire.throughput_bps)?;
        if wire.duration_us == 0 {
            return Err(WireError::new("duration_us", "must be at least 1"));
        }
        if wire.streams == 0 {
            return Err(WireError::new("streams", "must be at least 1"));
        }
        // The rate must follow from bytes and duration (1 % slack for rounding by the sender).
        let implied = wire.bytes as f64 * 8.0 / (wire.duration_us as f64 / 1e6);
        if (implied - rate.get()).abs() > 0.01 * implied.max(rate.get()) + 1.0 {
            return Err(WireError::new(
                "throughput_bps",
                format!(
                    "{} does not match bytes and duration_us, which give {implied:.0}",
                    rate.get()
                ),
            ));
        }
        Ok(Self {
            rate,
            bytes: wire.bytes,
            duration_us: wire.duration_us,
            warmup_us: wire.warmup_us,
            streams: wire.streams,
        })
    }
}

impl From<ThroughputSample> for v1::Throughput {
    fn from(value: ThroughputSample) -> Self {
        Self {
            throughput_bps: value.rate.get(),
            bytes: value.bytes,
            duration_us: value.duration_us,
            warmup_us: value.warmup_us,
            streams: value.streams,
        }
    }
}

/// What one agent measured on one directed path in one window: checked [`v1::PathSummary`].
#[derive(Debug, Clone, PartialEq)]
pub struct PathSample {
    /// Source (the reporting node).
    pub src: NodeName,
    /// Destination; never the source.
    pub dst: NodeName,
    /// Window start.
    pub window_start: UnixMs,
    /// Window end, after the start.
    pub window_end: UnixMs,
    /// Probes sent.
    pub sent: u64,
    /// Replies received; at most `sent`.
    pub received: u64,
    /// RTT statistics; present exactly when `received > 0`.
    pub rtt: Option<Rtt>,
    /// Serialised HdrHistogram (V2) of the window's RTTs in ns, if the agent sent it.
    pub histogram: Option<Vec<u8>>,
    /// A throughput test that ended in the window.
    pub throughput: Option<ThroughputSample>,
    /// How the probes were sent (`None` when the agent did not say).
    pub method: Option<IcmpMode>,
}

impl PathSample {
    /// The loss ratio of the window, if any probe was sent.
    pub fn loss(&self) -> Option<LossRatio> {
        (self.sent > 0).then(|| LossRatio(1.0 - self.received as f64 / self.sent as f64))
    }
}

impl TryFrom<v1::PathSummary> for PathSample {
    type Error = WireError;

    fn try_from(wire: v1::PathSummary) -> Result<Self, WireError> {
        let src = NodeName::parse("src", wire.src)?;
        let dst = NodeName::parse("dst", wire.dst)?;
        if src == dst {
            return Err(WireError::new("dst", format!("{dst} is the source itself")));
        }
        let window_start = UnixMs::parse("window_start_unix_ms", wire.window_start_unix_ms)?;
        let window_end = UnixMs::parse("window_end_unix_ms", wire.window_end_unix_ms)?;
        if window_end <= window_start {
            return Err(WireError::new(
                "window_end_unix_ms",
                format!(
                    "{} is not after window_start_unix_ms {}",
                    window_end.0, window_start.0
                ),
            ));
        }
        if wire.probes_received > wire.probes_sent {
            return Err(WireError::new(
                "probes_received",
                format!(
                    "{} replies to {} probes is impossible",
                    wire.probes_received, wire.probes_sent
                ),
            ));
        }
        let rtt = match (wire.rtt, wire.probes_received) {
            (None, 0) => None,
            (Some(_), 0) => {
                return Err(WireError::new(
                    "rtt",
                    "present although no reply was received",
                ));
            }
            (None, _) => {
                return Err(WireError::new(
                    "rtt",
                    "missing although replies were received",
                ));
            }
            (Some(stats), received) => {
                let rtt = Rtt::try_from(stats).map_err(|e| e.within("rtt"))?;
                if rtt.samples > received {
                    return Err(WireError::new(
                        "rtt.samples",
                        format!("{} is more than probes_received {received}", rtt.samples),
                    ));
                }
                Some(rtt)
            }
        };
        if wire.rtt_histogram.len() > MAX_HISTOGRAM_BYTES {
            return Err(WireError::new(
                "rtt_histogram",
                format!(
                    "{} bytes, at most {MAX_HISTOGRAM_BYTES} allowed",
                    wire.rtt_histogram.len()
                ),
            ));
        }
        let histogram = (!wire.rtt_histogram.is_empty()).then_some(wire.rtt_histogram);
        let throughput = wire
            .throughput
            .map(ThroughputSample::try_from)
            .transpose()
            .map_err(|e| e.within("throughput"))?;
        let method = match wire.method {
            0 => None,
            m => Some(IcmpMode::parse("method", m)?),
        };
        Ok(Self {
            src,
            dst,
            window_start,
            window_end,
            sent: wire.probes_sent,
            received: wire.probes_received,
            rtt,
            histogram,
            throughput,
            method,
        })
    }
}

impl From<PathSample> for v1::PathSummary {
    fn from(value: PathSample) -> Self {
        Self {
            src: value.src.into(),
            dst: value.dst.into(),
            window_start_unix_ms: value.window_start.0,
            window_end_unix_ms: value.window_end.0,
            probes_sent: value.sent,
            probes_received: value.received,
            rtt: value.rtt.map(Into::into),
            rtt_histogram: value.histogram.unwrap_or_default(),
            throughput: value.throughput.map(Into::into),
            method: value.method.map_or(0, |m| v1::IcmpMode::from(m) as i32),
        }
    }
}

/// A batch of path samples from one agent: checked [`v1::Report`].
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Per-agent sequence number, at least 1.
    pub sequence: u64,
    /// The samples.
    pub paths: Vec<PathSample>,
}

impl Report {
    /// Checks a wire report from the agent of `node`: every sample's source must be that node.
    pub fn from_agent(node: &NodeName, wire: v1::Report) -> Result<Self, WireError> {
        let report = Self::try_from(wire)?;
        if let Some(i) = report.paths.iter().position(|p| &p.src != node) {
            return Err(WireError::new(
                format!("paths[{i}].src"),
                format!(
                    "{} is not the reporting node {node}; an agent reports only its own paths",
                    report.paths[i].src
                ),
            ));
        }
        Ok(report)
    }
}

impl TryFrom<v1::Report> for Report {
    type Error = WireError;

    fn try_from(wire: v1::Report) -> Result<Self, WireError> {
        if wire.sequence == 0 {
            return Err(WireError::new("sequence", "must be at least 1"));
        }
        if wire.paths.len() > MAX_PATHS_PER_REPORT {
            return Err(WireError::new(
                "paths",
                format!(
                    "{} summaries in one report, at most {MAX_PATHS_PER_REPORT} allowed",
                    wire.paths.len()
                ),
            ));
        }
        let paths = wire
            .paths
            .into_iter()
            .enumerate()
            .map(|(i, p)| PathSample::try_from(p).map_err(|e| e.within(&format!("paths[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            sequence: wire.sequence,
            paths,
        })
    }
}

impl From<Report> for v1::Report {
    fn from(value: Report) -> Self {
        Self {
            sequence: value.sequence,
            paths: value.paths.into_iter().map(Into::into).collect(),
        }
    }
}

/// Weights of loss, delay and throughput in a cost: checked [`v1::Weights`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Weight of the loss ratio.
    pub loss: f64,
    /// Weight of the median RTT.
    pub delay: f64,
    /// Weight of the lack of throughput.
    pub throughput: f64,
}

impl Weights {
    /// The documented defaults: loss 1.0, delay 1.0, throughput 0.5.
    pub const DEFAULT: Self = Self {
        loss: 1.0,
        delay: 1.0,
        throughput: 0.5,
    };

    /// Checks wire weights; `None` gives the defaults.
    pub fn from_wire(wire: Option<v1::Weights>) -> Result<Self, WireError> {
        let Some(wire) = wire else {
            return Ok(Self::DEFAULT);
        };
        let one = |field: &str, value: Option<f64>, default: f64| -> Result<f64, WireError> {
            match value {
                None => Ok(default),
                Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
                Some(v) => Err(WireError::new(
                    format!("weights.{field}"),
                    format!("{v} is not a finite number >= 0"),
                )),
            }
        };
        let weights = Self {
            loss: one("loss", wire.loss, Self::DEFAULT.loss)?,
            delay: one("delay", wire.delay, Self::DEFAULT.delay)?,
            throughput: one("throughput", wire.throughput, Self::DEFAULT.throughput)?,
        };
        if weights.loss + weights.delay + weights.throughput <= 0.0 {
            return Err(WireError::new(
                "weights",
                "at least one weight must be above 0",
            ));
        }
        Ok(weights)
    }

    /// Sum of the three weights.
    pub fn total(&self) -> f64 {
        self.loss + self.delay + self.throughput
    }
}

impl Default for Weights {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl From<Weights> for v1::Weights {
    fn from(value: Weights) -> Self {
        Self {
            loss: Some(value.loss),
            delay: Some(value.delay),
            throughput: Some(value.throughput),
        }
    }
}

/// Parses a list of node names from a request field (`candidates`, `peers`, `exclude`).
pub fn node_names(field: &str, names: Vec<String>) -> Result<Vec<NodeName>, WireError> {
    names
        .into_iter()
        .enumerate()
        .map(|(i, n)| NodeName::parse(&format!("{field}[{i}]"), n))
        .collect()
}
