//! What schedulers ask: checked forms of the queries (rank, place, matrix) and their weights.

use crate::{FieldError, Job, NodeName, ZoneName};

/// Weights of loss, delay and throughput in a cost.
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

    /// Checks weights given in part: a missing weight takes its default; each must be a finite
    /// number not below 0, and one at least above 0. Errors name `weights.<field>`.
    pub fn checked(
        loss: Option<f64>,
        delay: Option<f64>,
        throughput: Option<f64>,
    ) -> Result<Self, FieldError> {
        let one = |field: &str, value: Option<f64>, default: f64| -> Result<f64, FieldError> {
            match value {
                None => Ok(default),
                Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
                Some(v) => Err(FieldError::new(
                    format!("weights.{field}"),
                    format!("{v} is not a finite number >= 0"),
                )),
            }
        };
        let weights = Self {
            loss: one("loss", loss, Self::DEFAULT.loss)?,
            delay: one("delay", delay, Self::DEFAULT.delay)?,
            throughput: one("throughput", throughput, Self::DEFAULT.throughput)?,
        };
        if weights.total() <= 0.0 {
            return Err(FieldError::new(
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

/// The metric of a matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Metric {
    /// Median RTT, µs.
    #[default]
    RttP50Us,
    /// 99th percentile RTT, µs.
    RttP99Us,
    /// Loss ratio.
    LossRatio,
    /// Throughput, bit/s.
    ThroughputBps,
}

/// Most nodes a `GetMatrix` request may name (rows and columns).
pub const MAX_MATRIX_NODES: usize = 2_000;

/// Most nodes one page of `ListNodes` holds (about 1.5 MB encoded).
pub const MAX_NODES_PAGE: usize = 10_000;
/// Most zone links one page of `ListZones` holds (about 1.1 MB encoded).
pub const MAX_LINKS_PAGE: usize = 10_000;
/// Most cells one page of `GetMatrix` holds (about 2 MB encoded): every answer stays under the
/// 4 MiB that grpcurl and grpcio accept by default.
pub const MAX_MATRIX_CELLS_PAGE: usize = 100_000;

/// A page of a long answer (`page_size` and `page_token` of AIP-158): up to `size` items from
/// `offset`; `size` 0 asks for the largest page the answer allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Page {
    /// The first item.
    pub offset: usize,
    /// Items asked for; 0 for the most a page holds.
    pub size: usize,
}

impl Page {
    /// Checks a page of an answer `rpc` whose pages hold at most `max` items; errors name
    /// `page_size` and say how to ask for less.
    pub fn checked(self, rpc: &str, max: usize) -> Result<Self, FieldError> {
        if self.size > max {
            return Err(FieldError::new(
                "page_size",
                format!(
                    "{} is above {max}, the most one page of {rpc} holds: ask for at most {max} \
                     and follow next_page_token",
                    self.size
                ),
            ));
        }
        Ok(self)
    }

    /// The items of this page out of `total`, at most `max` of them: the range, and the offset
    /// of the next page if there is one.
    pub fn range(&self, total: usize, max: usize) -> (std::ops::Range<usize>, Option<usize>) {
        let size = if self.size == 0 {
            max
        } else {
            self.size.min(max)
        };
        let start = self.offset.min(total);
        let end = start.saturating_add(size.max(1)).min(total);
        (start..end, (end < total).then_some(end))
    }
}

/// A checked `GetMatrix` request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MatrixQuery {
    /// The metric.
    pub metric: Metric,
    /// Rows and columns; empty for a zone (or everything).
    pub nodes: Vec<NodeName>,
    /// The zone when `nodes` is empty.
    pub zone: Option<ZoneName>,
    /// The rows of this page (every column is in every page).
    pub page: Page,
}

/// A checked `ListNodes` request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodesQuery {
    /// Only the nodes of this zone.
    pub zone: Option<ZoneName>,
    /// The nodes of this page, by name.
    pub page: Page,
}

/// A checked `ListZones` request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZonesQuery {
    /// The links of this page (every zone is in every page).
    pub page: Page,
}

/// A checked `RankNodes` request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RankQuery {
    /// Nodes to rank; empty for the zone (or every node).
    pub candidates: Vec<NodeName>,
    /// The zone to rank when `candidates` is empty.
    pub zone: Option<ZoneName>,
    /// Nodes the job already runs on.
    pub peers: Vec<NodeName>,
    /// Cost weights.
    pub weights: Weights,
    /// At most this many answers; 0 for all.
    pub limit: usize,
}

/// Most workers one `Place` may ask for.
pub const MAX_WORKERS: u32 = 100_000;

/// Most alternatives one `Place` may ask for.
pub const MAX_ALTERNATIVES: u32 = 16;

/// How strictly a placement keeps to one zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum ZonePolicy {
    /// One zone or fail.
    RequireOne,
    /// One zone when one can hold the job.
    #[default]
    PreferOne,
    /// Any nodes; only the figures count.
    Any,
}

/// A checked `Place` request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlaceQuery {
    /// Workers to place; at least 1.
    pub workers: u32,
    /// Candidates with their free slots (each at least 1); empty for every READY node, one slot.
    pub candidates: Vec<(NodeName, u32)>,
    /// Zone policy.
    pub policy: ZonePolicy,
    /// Cost weights.
    pub weights: Weights,
    /// Nodes never to use.
    pub exclude: Vec<NodeName>,
    /// The job's communication: with one, `Place` chooses the nodes and the rank order that
    /// minimise its predicted time per iteration; without, the worst pair decides.
    pub job: Option<Job>,
    /// How many runner-up placements to describe with their predicted times (with a job), at
    /// most [`MAX_ALTERNATIVES`].
    pub alternatives: u32,
}

impl PlaceQuery {
    /// Checks the parts of a placement request that do not depend on the wire: the number of
    /// workers and every candidate's slots.
    pub fn check(self) -> Result<Self, FieldError> {
        if self.workers == 0 {
            return Err(FieldError::new("workers", "must be at least 1"));
        }
        if self.workers > MAX_WORKERS {
            return Err(FieldError::new(
                "workers",
                format!("{} workers, at most {MAX_WORKERS} allowed", self.workers),
            ));
        }
        if let Some(i) = self.candidates.iter().position(|c| c.1 == 0) {
            return Err(FieldError::new(
                format!("candidates[{i}].slots"),
                "must be at least 1",
            ));
        }
        if let Some(job) = self.job {
            Job::checked(job.collective, job.bytes_per_iteration, self.workers)?;
        }
        if self.alternatives > MAX_ALTERNATIVES {
            return Err(FieldError::new(
                "alternatives",
                format!(
                    "{} alternatives, at most {MAX_ALTERNATIVES} allowed",
                    self.alternatives
                ),
            ));
        }
        if self.alternatives > 0 && self.job.is_none() {
            return Err(FieldError::new(
                "alternatives",
                "alternatives are ranked by predicted time: give a collective",
            ));
        }
        Ok(self)
    }
}
