//! Faults: the node, direction, zone link or path that zonemesh says is at fault, of what kind,
//! how badly and since when (`ListFaults`, `zonemesh faults`), and the thresholds that decide it.

use std::fmt;

use crate::{FieldError, NodeName, UnixMs, ZoneName};

/// Most paths a fault lists as its evidence (it counts them all).
pub const MAX_EVIDENCE: usize = 16;

/// The element at fault.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Element {
    /// A node. Its loss and delay are round trips (ICMP probes), so they have no direction.
    Node(NodeName),
    /// What a node sends: throughput tests have a direction.
    Egress(NodeName),
    /// What a node receives.
    Ingress(NodeName),
    /// The link between two zones (the smaller name first), or a zone's own network (inside
    /// it) when both are the same.
    ZoneLink(ZoneName, ZoneName),
    /// One path between two nodes (the smaller name first; a round trip), where the nodes' and
    /// the zones' terms do not explain what it shows.
    Path(NodeName, NodeName),
}

impl Element {
    /// The zone link between `a` and `b`, in either order.
    pub fn zone_link(a: ZoneName, b: ZoneName) -> Self {
        if a <= b {
            Self::ZoneLink(a, b)
        } else {
            Self::ZoneLink(b, a)
        }
    }

    /// The path between `a` and `b`, in either order.
    pub fn path(a: NodeName, b: NodeName) -> Self {
        if a <= b {
            Self::Path(a, b)
        } else {
            Self::Path(b, a)
        }
    }

    /// What kind of element: `node`, `egress`, `ingress`, `zone-link` or `path`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Node(_) => "node",
            Self::Egress(_) => "egress",
            Self::Ingress(_) => "ingress",
            Self::ZoneLink(..) => "zone-link",
            Self::Path(..) => "path",
        }
    }

    /// Its one or two names: a node, or the two ends.
    pub fn names(&self) -> (&str, Option<&str>) {
        match self {
            Self::Node(n) | Self::Egress(n) | Self::Ingress(n) => (n.as_str(), None),
            Self::ZoneLink(a, b) => (a.as_str(), Some(b.as_str())),
            Self::Path(a, b) => (a.as_str(), Some(b.as_str())),
        }
    }

    /// The node it names, if it is a node or one of its directions.
    pub fn node(&self) -> Option<&NodeName> {
        match self {
            Self::Node(n) | Self::Egress(n) | Self::Ingress(n) => Some(n),
            _ => None,
        }
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Node(n) => write!(f, "node {n}"),
            Self::Egress(n) => write!(f, "egress of {n}"),
            Self::Ingress(n) => write!(f, "ingress of {n}"),
            Self::ZoneLink(a, b) if a == b => write!(f, "inside {a}"),
            Self::ZoneLink(a, b) => write!(f, "zone link {a}–{b}"),
            Self::Path(a, b) => write!(f, "path {a}–{b}"),
        }
    }
}

/// What is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// Packets are lost.
    Loss,
    /// The RTT is above the element's own baseline.
    Delay,
    /// The rate is below what its peers (a node) or its own baseline (a zone link) allow.
    Rate,
}

impl FaultKind {
    /// Every kind, in order.
    pub const ALL: [Self; 3] = [Self::Loss, Self::Delay, Self::Rate];

    /// `loss`, `delay` or `rate`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loss => "loss",
            Self::Delay => "delay",
            Self::Rate => "rate",
        }
    }
}

/// How bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Works, worse than it should.
    Degraded,
    /// As good as gone (the `--fault-*-down` thresholds; a node every probe misses).
    Down,
}

impl Severity {
    /// Every severity, in order.
    pub const ALL: [Self; 2] = [Self::Degraded, Self::Down];

    /// `degraded` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Degraded => "degraded",
            Self::Down => "down",
        }
    }
}

/// One open fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// Where.
    pub element: Element,
    /// What.
    pub kind: FaultKind,
    /// How bad, now.
    pub severity: Severity,
    /// The figure now: a loss ratio (0..1), the RTT above the baseline (µs), or a rate (bit/s).
    pub figure: f64,
    /// A loss's 95 % interval (Wilson, over the probes of the paths behind it).
    pub interval: Option<(f64, f64)>,
    /// A loss's probes, pooled over the paths behind it (the figure is their lost share); 0
    /// otherwise, and for a node every probe misses.
    pub probes: u64,
    /// What the figure is judged against: the baseline RTT (delay, µs), the zone's median cap
    /// (a node's rate, bit/s) or the zone link's baseline capacity (bit/s); none for a loss.
    pub reference: Option<f64>,
    /// Paths that show it, (source, destination), at most [`MAX_EVIDENCE`].
    pub evidence: Vec<(NodeName, NodeName)>,
    /// Paths that show it, in all.
    pub evidence_paths: u32,
    /// Since when the element has been bad (the fault opened a hold-off later).
    pub since: UnixMs,
    /// Since when it has been clean again, while the fault waits out its hold time.
    pub clean_since: Option<UnixMs>,
}

impl Fault {
    /// Whether it explains what the directed path `src → dst` (in zones `zs` and `zd`) shows: a
    /// fault of either node (the sender's egress, the receiver's ingress), of their zones' link,
    /// or of the path itself.
    pub fn explains_path(
        &self,
        src: &NodeName,
        dst: &NodeName,
        zs: &ZoneName,
        zd: &ZoneName,
    ) -> bool {
        match &self.element {
            Element::Node(n) => n == src || n == dst,
            Element::Egress(n) => n == src,
            Element::Ingress(n) => n == dst,
            Element::ZoneLink(..) => self.is_zone_link(zs, zd),
            Element::Path(a, b) => (a == src && b == dst) || (a == dst && b == src),
        }
    }

    /// Whether it is the link between zones `a` and `b` (either order; a zone's own network
    /// when they are the same).
    pub fn is_zone_link(&self, a: &ZoneName, b: &ZoneName) -> bool {
        matches!(&self.element, Element::ZoneLink(x, y) if (x == a && y == b) || (x == b && y == a))
    }
}

/// `ListFaults`: the open faults, by element and kind.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Faults {
    /// The faults.
    pub faults: Vec<Fault>,
    /// When the network was last looked at; `None` before the first look.
    pub evaluated_at: Option<UnixMs>,
}

/// When an element is at fault, and how long a fault takes to open and to close.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultThresholds {
    /// A loss at least this is a fault (0..1). Default 0.5 %.
    pub loss_degraded: f64,
    /// A loss at least this is a `down` fault. Default 20 %.
    pub loss_down: f64,
    /// An RTT this far above the element's baseline is a fault, µs, (or the share
    /// `delay_ratio` of the baseline, whichever is more). Default 100 µs.
    pub delay_degraded_us: f64,
    /// The share of the baseline an RTT must rise by to be a fault. Default 0.25.
    pub delay_ratio: f64,
    /// An RTT this far above the baseline is a `down` fault, µs. Default 10 ms.
    pub delay_down_us: f64,
    /// A rate below this share of its reference is a fault. Default 0.5.
    pub rate_degraded_share: f64,
    /// A rate below this share of its reference is a `down` fault. Default 0.1.
    pub rate_down_share: f64,
    /// How long an element must be bad before its fault opens, ms. Default 30 s.
    pub open_after_ms: i64,
    /// How long an element must be clean before its fault closes, and the least time between
    /// two openings of a fault of one element (a flapping element), ms. Default 2 min.
    pub hold_ms: i64,
    /// How long an element's figures are learnt before its delay (and a zone link's rate) is
    /// judged against them, ms. Default 2 h.
    pub baseline_ms: i64,
}

impl Default for FaultThresholds {
    fn default() -> Self {
        Self {
            loss_degraded: 0.005,
            loss_down: 0.2,
            delay_degraded_us: 100.0,
            delay_ratio: 0.25,
            delay_down_us: 10_000.0,
            rate_degraded_share: 0.5,
            rate_down_share: 0.1,
            open_after_ms: 30_000,
            hold_ms: 120_000,
            baseline_ms: 2 * 3_600_000,
        }
    }
}

impl FaultThresholds {
    /// Checks the thresholds: figures in range, no `down` threshold milder than its `degraded`
    /// one, and a hold time and a baseline learning time above 0. The error names the field.
    pub fn checked(self) -> Result<Self, FieldError> {
        let in_unit = |field: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v <= 1.0 {
                Ok(())
            } else {
                Err(FieldError::new(
                    field,
                    format!("{v} is not a share in (0, 1]"),
                ))
            }
        };
        in_unit("loss_degraded", self.loss_degraded)?;
        in_unit("loss_down", self.loss_down)?;
        in_unit("rate_degraded_share", self.rate_degraded_share)?;
        in_unit("rate_down_share", self.rate_down_share)?;
        for (field, v) in [
            ("delay_degraded_us", self.delay_degraded_us),
            ("delay_down_us", self.delay_down_us),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(FieldError::new(field, format!("{v} µs is not above 0")));
            }
        }
        if !(self.delay_ratio.is_finite() && self.delay_ratio >= 0.0) {
            return Err(FieldError::new(
                "delay_ratio",
                format!("{} is not a share >= 0", self.delay_ratio),
            ));
        }
        if self.loss_down < self.loss_degraded {
            return Err(FieldError::new(
                "loss_down",
                format!(
                    "{} is below loss_degraded {}: a loss would be down before it is degraded",
                    self.loss_down, self.loss_degraded
                ),
            ));
        }
        if self.delay_down_us < self.delay_degraded_us {
            return Err(FieldError::new(
                "delay_down_us",
                format!(
                    "{} µs is below delay_degraded_us {} µs: a delay would be down before it is degraded",
                    self.delay_down_us, self.delay_degraded_us
                ),
            ));
        }
        if self.rate_down_share > self.rate_degraded_share {
            return Err(FieldError::new(
                "rate_down_share",
                format!(
                    "{} is above rate_degraded_share {}: a rate would be down before it is degraded",
                    self.rate_down_share, self.rate_degraded_share
                ),
            ));
        }
        if self.open_after_ms < 0 {
            return Err(FieldError::new(
                "open_after_ms",
                format!("{} ms is below 0", self.open_after_ms),
            ));
        }
        if self.hold_ms <= 0 {
            return Err(FieldError::new(
                "hold_ms",
                format!(
                    "{} ms: a fault must stay clean for some time before it closes",
                    self.hold_ms
                ),
            ));
        }
        if self.baseline_ms <= 0 {
            return Err(FieldError::new(
                "baseline_ms",
                format!(
                    "{} ms: a baseline must be learnt for some time before a delay is judged against it",
                    self.baseline_ms
                ),
            ));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_their_own_check() {
        assert_eq!(
            FaultThresholds::default().checked(),
            Ok(FaultThresholds::default())
        );
    }

    #[test]
    fn contradicting_thresholds_are_refused_by_field() {
        let d = FaultThresholds::default();
        let field = |t: FaultThresholds| t.checked().unwrap_err().field().to_owned();
        assert_eq!(
            field(FaultThresholds {
                loss_down: 0.001,
                ..d
            }),
            "loss_down"
        );
        assert_eq!(
            field(FaultThresholds {
                delay_down_us: 50.0,
                ..d
            }),
            "delay_down_us"
        );
        assert_eq!(
            field(FaultThresholds {
                rate_down_share: 0.9,
                ..d
            }),
            "rate_down_share"
        );
        assert_eq!(field(FaultThresholds { hold_ms: 0, ..d }), "hold_ms");
        assert_eq!(
            field(FaultThresholds {
                baseline_ms: 0,
                ..d
            }),
            "baseline_ms"
        );
        assert_eq!(
            field(FaultThresholds {
                loss_degraded: 1.5,
                ..d
            }),
            "loss_degraded"
        );
        assert_eq!(
            field(FaultThresholds {
                open_after_ms: -1,
                ..d
            }),
            "open_after_ms"
        );
    }

    #[test]
    fn a_fault_explains_the_paths_it_lies_on() {
        let n = |s: &str| NodeName::parse("n", s).unwrap();
        let z = |s: &str| ZoneName::parse("z", s).unwrap();
        let fault = |element| Fault {
            element,
            kind: FaultKind::Loss,
            severity: Severity::Degraded,
            figure: 0.02,
            interval: None,
            probes: 0,
            reference: None,
            evidence: vec![],
            evidence_paths: 0,
            since: UnixMs(0),
            clean_since: None,
        };
        let (a1, b1, a2) = (n("a1"), n("b1"), n("a2"));
        let (za, zb) = (z("zone-a"), z("zone-b"));
        let on = |f: &Fault| f.explains_path(&a1, &b1, &za, &zb);
        assert!(on(&fault(Element::Node(b1.clone()))));
        assert!(on(&fault(Element::Egress(a1.clone()))));
        assert!(!on(&fault(Element::Ingress(a1.clone()))), "a1 sends on it");
        assert!(on(&fault(Element::zone_link(zb.clone(), za.clone()))));
        assert!(!on(&fault(Element::zone_link(za.clone(), za.clone()))));
        assert!(on(&fault(Element::path(b1.clone(), a1.clone()))));
        assert!(!on(&fault(Element::path(a2, a1.clone()))));
        assert!(fault(Element::zone_link(zb.clone(), za.clone())).is_zone_link(&za, &zb));
    }

    #[test]
    fn elements_name_their_ends_in_one_order() {
        let (a, b) = (
            NodeName::parse("a", "a1").unwrap(),
            NodeName::parse("b", "b1").unwrap(),
        );
        assert_eq!(
            Element::path(b.clone(), a.clone()),
            Element::path(a.clone(), b.clone())
        );
        assert_eq!(Element::path(b, a).to_string(), "path a1–b1");
        let z = |s: &str| ZoneName::parse("z", s).unwrap();
        assert_eq!(
            Element::zone_link(z("zone-b"), z("zone-a")).to_string(),
            "zone link zone-a–zone-b"
        );
        assert_eq!(
            Element::zone_link(z("zone-a"), z("zone-a")).to_string(),
            "inside zone-a"
        );
    }
}
