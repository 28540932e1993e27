//! What agents say: who they are (`Hello`) and what they measured (`Report` of `PathSample`s).

use std::net::IpAddr;

use crate::{Bps, FieldError, LossRatio, Micros, NodeName, UnixMs, ZoneName};

/// Most path summaries one report may carry.
pub const MAX_PATHS_PER_REPORT: usize = 16_384;
/// Most addresses one node may advertise.
pub const MAX_ADDRESSES: usize = 16;
/// Longest agent version string.
pub const MAX_VERSION_BYTES: usize = 128;

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
    /// The flag spelling: `raw`, `dgram` or `tcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Dgram => "dgram",
            Self::Tcp => "tcp",
        }
    }
}

/// Who an agent is: a checked `Hello`.
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

/// RTT statistics of a window: checked `RttStats`, ordered `min <= p50 <= p90 <= p99 <= max`.
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

impl Rtt {
    /// Checks the rules between the fields: at least one sample, `min <= p50 <= p90 <= p99 <=
    /// max`, and the mean between min and max. Errors name the wire field (`p90_us`).
    pub fn checked(self) -> Result<Self, FieldError> {
        if self.samples == 0 {
            return Err(FieldError::new("samples", "must be at least 1"));
        }
        let order = [
            ("p50_us", self.min, self.p50),
            ("p90_us", self.p50, self.p90),
            ("p99_us", self.p90, self.p99),
            ("max_us", self.p99, self.max),
        ];
        for (field, below, value) in order {
            if value < below {
                return Err(FieldError::new(
                    field,
                    format!(
                        "{} is below the quantile before it ({})",
                        value.get(),
                        below.get()
                    ),
                ));
            }
        }
        if self.mean < self.min || self.mean > self.max {
            return Err(FieldError::new(
                "mean_us",
                format!(
                    "{} is outside [min_us, max_us] = [{}, {}]",
                    self.mean.get(),
                    self.min.get(),
                    self.max.get()
                ),
            ));
        }
        Ok(self)
    }
}

/// One throughput test: checked `Throughput`.
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
    /// The sender's TCP counters over the whole test, when the agent could read them.
    pub retransmits: Option<Retransmits>,
    /// Timed exchanges of a small message before the transfer, when the peer's responder
    /// answered them.
    pub exchange: Option<MessageExchange>,
}

/// The sender's TCP counters over a throughput test, summed over its streams (Linux `TCP_INFO`:
/// `tcpi_data_segs_out` and `tcpi_total_retrans`). They have a direction, unlike ICMP loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retransmits {
    /// Data segments sent, retransmissions included; at least 1.
    pub segments_sent: u64,
    /// Segments sent again; at most `segments_sent`.
    pub retransmitted: u64,
}

impl Retransmits {
    /// Checks the counters. Errors name the wire field.
    pub fn new(segments_sent: u64, retransmitted: u64) -> Result<Self, FieldError> {
        if segments_sent == 0 {
            return Err(FieldError::new("segments_sent", "must be at least 1"));
        }
        if retransmitted > segments_sent {
            return Err(FieldError::new(
                "segments_retransmitted",
                format!("{retransmitted} is above segments_sent ({segments_sent})"),
            ));
        }
        Ok(Self {
            segments_sent,
            retransmitted,
        })
    }

    /// The share of data segments sent again.
    pub fn ratio(&self) -> f64 {
        self.retransmitted as f64 / self.segments_sent as f64
    }
}

/// Timed request–response exchanges of a small message over one TCP connection between two
/// agents, application to application: beside the kernel-timestamped ICMP round trip, what one
/// message costs the hosts' software (the α of an α–β model) and, under loss, what recovering a
/// lost last segment costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageExchange {
    /// Exchanges timed; at least 1.
    pub count: u32,
    /// Median exchange.
    pub p50: Micros,
    /// Mean exchange (a lost and recovered message counts with its recovery).
    pub mean: Micros,
    /// Slowest exchange.
    pub max: Micros,
    /// The connection's retransmission timeout after the exchanges, as the sender's kernel had
    /// it (Linux `TCP_INFO` `tcpi_rto`): how long a lost message with nothing sent behind it
    /// waits before it is sent again. `None` when not read.
    pub timeout: Option<Micros>,
}

impl MessageExchange {
    /// Checks the figures: `p50 <= max` and `mean <= max`. Errors name the wire field.
    pub fn new(count: u32, p50: Micros, mean: Micros, max: Micros) -> Result<Self, FieldError> {
        if count == 0 {
            return Err(FieldError::new("exchanges", "must be at least 1"));
        }
        if p50 > max {
            return Err(FieldError::new(
                "exchange_p50_us",
                format!("{} is above exchange_max_us ({})", p50.get(), max.get()),
            ));
        }
        if mean > max {
            return Err(FieldError::new(
                "exchange_mean_us",
                format!("{} is above exchange_max_us ({})", mean.get(), max.get()),
            ));
        }
        Ok(Self {
            count,
            p50,
            mean,
            max,
            timeout: None,
        })
    }

    /// The exchanges with their connection's retransmission timeout, if read (the wire's 0
    /// stands for none, and a kernel never reports 0).
    pub fn with_timeout(self, timeout: Option<Micros>) -> Self {
        Self { timeout, ..self }
    }
}

impl ThroughputSample {
    /// Checks a test's figures: a duration and a stream at least, and a rate that follows from
    /// bytes and duration (1 % slack for rounding by the sender). Errors name the wire field.
    pub fn new(
        rate: Bps,
        bytes: u64,
        duration_us: u64,
        warmup_us: u64,
        streams: u32,
    ) -> Result<Self, FieldError> {
        if duration_us == 0 {
            return Err(FieldError::new("duration_us", "must be at least 1"));
        }
        if streams == 0 {
            return Err(FieldError::new("streams", "must be at least 1"));
        }
        let implied = bytes as f64 * 8.0 / (duration_us as f64 / 1e6);
        if (implied - rate.get()).abs() > 0.01 * implied.max(rate.get()) + 1.0 {
            return Err(FieldError::new(
                "throughput_bps",
                format!(
                    "{} does not match bytes and duration_us, which give {implied:.0}",
                    rate.get()
                ),
            ));
        }
        Ok(Self {
            rate,
            bytes,
            duration_us,
            warmup_us,
            streams,
            retransmits: None,
            exchange: None,
        })
    }
}

/// What one agent measured on one directed path in one window: checked `PathSummary`.
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
    /// A throughput test that ended in the window.
    pub throughput: Option<ThroughputSample>,
    /// How the probes were sent (`None` when the agent did not say).
    pub method: Option<IcmpMode>,
}

impl PathSample {
    /// The loss ratio of the window, if any probe was sent.
    pub fn loss(&self) -> Option<LossRatio> {
        LossRatio::of_counts(self.sent, self.received)
    }
}

/// A batch of path samples from one agent: checked `Report`.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Per-agent sequence number, at least 1.
    pub sequence: u64,
    /// The samples.
    pub paths: Vec<PathSample>,
}

impl Report {
    /// The report, if every sample's source is `node`: an agent reports only its own paths.
    pub fn only_from(self, node: &NodeName) -> Result<Self, FieldError> {
        if let Some(i) = self.paths.iter().position(|p| &p.src != node) {
            return Err(FieldError::new(
                format!("paths[{i}].src"),
                format!(
                    "{} is not the reporting node {node}; an agent reports only its own paths",
                    self.paths[i].src
                ),
            ));
        }
        Ok(self)
    }
}
