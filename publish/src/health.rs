//! Acting on faults where schedulers look (pure: from the tiers and the open faults alone).
//!
//! - **The label** `zonemesh.io/network-health` on every node of the tiers: `ok`, `degraded` or
//!   `down`, the worst severity of the node's own open faults (its loss, delay, or either
//!   direction's rate). A fault of a zone link or of one path is no node's: it leaves the label
//!   `ok`. Any scheduler can keep pods off with a node affinity on it.
//! - **The taint** `zonemesh.io/network-fault` (value: the severity; effect `NoSchedule`, or
//!   `NoExecute` by flag), only with `--taint-faulty-nodes`, and only where the evidence is
//!   strong enough to act on ([`plan`]): every scheduler honours taints, and Kueue re-places the
//!   pods of a node that gets tainted.
//!
//! The guard rails of the taint, each a reason in [`Held`]:
//!
//! - never on estimated figures alone: the fault must show on measured paths (its evidence);
//! - never when the evidence cannot tell the node from its zone link: the node's zone needs two
//!   other nodes (a node's loss is judged on its paths inside its zone), and no zone link of its
//!   zone may have an open fault of the same kind;
//! - never more than `--max-tainted-nodes` at once (by default 5 % of the nodes, at least one):
//!   nodes tainted already keep theirs first (no taint moves from node to node while the count
//!   is full, nor when the aggregator restarts or another replica takes over: the publisher reads
//!   the taints it finds), then `down` before `degraded`, then the oldest fault;
//! - never in the first `--taint-warm-up` after the aggregator starts, nor while its store is
//!   failing: then the publisher leaves every taint as it is (the caller's part, in
//!   [`run`](crate::run)).
//!
//! [`objects::apply_health`](crate::objects::apply_health) adds both to what the publisher
//! writes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use zonemesh_domain::{Element, FaultKind, Faults, Severity, Tiers, UnixMs, ZoneName};

/// The node label that says how a node's network is.
pub const HEALTH_LABEL: &str = "zonemesh.io/network-health";
/// zonemesh's taint on a node at fault; zonemesh adds and removes no other.
pub const FAULT_TAINT: &str = "zonemesh.io/network-fault";

/// A node's network, as its label says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    /// No open fault of its own.
    Ok,
    /// Its worst open fault is degraded.
    Degraded,
    /// An open fault of its is down.
    Down,
}

impl Health {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::Degraded => "degraded",
            Health::Down => "down",
        }
    }
}

impl From<Severity> for Health {
    fn from(s: Severity) -> Self {
        match s {
            Severity::Degraded => Health::Degraded,
            Severity::Down => Health::Down,
        }
    }
}

/// Every node of `tiers` with its health under `faults`.
pub fn node_health(tiers: &Tiers, faults: &Faults) -> BTreeMap<String, Health> {
    let mut health: BTreeMap<String, Health> = tiers
        .nodes()
        .map(|(_, n)| (n.to_string(), Health::Ok))
        .collect();
    for f in &faults.faults {
        if let Some(h) = f.element.node().and_then(|n| health.get_mut(n.as_str())) {
            *h = (*h).max(f.severity.into());
        }
    }
    health
}

/// The taint's effect (`--taint-effect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaintEffect {
    /// New pods stay off; running ones stay.
    #[default]
    NoSchedule,
    /// Running pods without a toleration are evicted too.
    NoExecute,
}

impl TaintEffect {
    /// The Kubernetes name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }

    /// Parses `--taint-effect`; the error names the effects there are.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "NoSchedule" => Ok(TaintEffect::NoSchedule),
            "NoExecute" => Ok(TaintEffect::NoExecute),
            other => Err(format!("{other:?} is none of NoSchedule, NoExecute")),
        }
    }
}

/// How many nodes may carry the taint at once (`--max-tainted-nodes`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxTainted {
    /// At most this many.
    Nodes(usize),
    /// At most this share of the nodes (0..1], rounded down, and at least one.
    Share(f64),
}

impl Default for MaxTainted {
    fn default() -> Self {
        MaxTainted::Share(0.05)
    }
}

impl MaxTainted {
    /// Parses `5%` or `3`; the error says what was wrong.
    pub fn parse(value: &str) -> Result<Self, String> {
        let v = value.trim();
        if let Some(p) = v.strip_suffix('%') {
            return match p.trim().parse::<f64>() {
                Ok(p) if p > 0.0 && p <= 100.0 => Ok(MaxTainted::Share(p / 100.0)),
                _ => Err(format!("{value:?} is no share above 0 % and at most 100 %")),
            };
        }
        match v.parse::<usize>() {
            Ok(n) if n > 0 => Ok(MaxTainted::Nodes(n)),
            _ => Err(format!(
                "{value:?} is neither a count of nodes (1 or more) nor a share (\"5%\"); to taint none, leave out --taint-faulty-nodes"
            )),
        }
    }

    /// The most nodes tainted at once among `nodes`.
    pub fn of(self, nodes: usize) -> usize {
        match self {
            MaxTainted::Nodes(n) => n,
            MaxTainted::Share(s) => ((s * nodes as f64).floor() as usize).max(1),
        }
    }
}

/// The taint's settings (`--taint-faulty-nodes` and its flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaintSettings {
    /// Its effect.
    pub effect: TaintEffect,
    /// How many nodes at once.
    pub max: MaxTainted,
    /// No taint is added or removed this long after the aggregator starts.
    pub warm_up: Duration,
}

impl Default for TaintSettings {
    fn default() -> Self {
        Self {
            effect: TaintEffect::default(),
            max: MaxTainted::default(),
            warm_up: Duration::from_secs(600),
        }
    }
}

/// Why a node with an open fault of its own is not tainted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Held {
    /// No measured path shows the fault.
    Estimated,
    /// Its zone has fewer than three nodes: its paths inside cannot tell it from its zone.
    FewZoneMates,
    /// A zone link of its zone has an open fault of the same kind.
    ZoneLink,
    /// `--max-tainted-nodes` is reached.
    AtMost,
}

impl Held {
    /// What the log says.
    pub fn as_str(self) -> &'static str {
        match self {
            Held::Estimated => "no measured path shows it",
            Held::FewZoneMates => "its zone has fewer than three nodes",
            Held::ZoneLink => "a zone link of its zone has a fault of the same kind",
            Held::AtMost => "--max-tainted-nodes is reached",
        }
    }
}

/// The taint wanted on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    /// Its value: the worst severity (`degraded`, `down`).
    pub value: &'static str,
    /// The kinds of the node's faults that pass the guard rails (`loss`, `rate`), for the
    /// Event.
    pub kinds: Vec<&'static str>,
}

/// What the taint should be on every node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaintPlan {
    /// The nodes to carry zonemesh's taint, with its value.
    pub taint: BTreeMap<String, Taint>,
    /// Nodes with an open fault of their own left untainted, and why.
    pub held: BTreeMap<String, Held>,
}

/// A node's faults that pass the guard rails, taken together.
struct Eligible {
    /// The worst.
    severity: Severity,
    /// The oldest.
    since: UnixMs,
    /// Their kinds.
    kinds: Vec<&'static str>,
}

/// The taints for `faults` on the nodes of `tiers`, within the guard rails (see the module
/// documentation); `tainted` are the nodes that carry zonemesh's taint now.
pub fn plan(
    tiers: &Tiers,
    faults: &Faults,
    max: MaxTainted,
    tainted: &BTreeSet<String>,
) -> TaintPlan {
    let zone_of: BTreeMap<&str, (&ZoneName, usize)> = tiers
        .nodes()
        .map(|(z, n)| (n.as_str(), (&z.name, z.nodes.len())))
        .collect();
    let link_kinds: BTreeSet<(&ZoneName, FaultKind)> = faults
        .faults
        .iter()
        .filter_map(|f| match &f.element {
            Element::ZoneLink(a, b) => Some([(a, f.kind), (b, f.kind)]),
            _ => None,
        })
        .flatten()
        .collect();
    // Per node: the worst severity, the oldest since and the kinds that pass; or why not.
    let mut eligible: BTreeMap<&str, Eligible> = BTreeMap::new();
    let mut held: BTreeMap<String, Held> = BTreeMap::new();
    for f in &faults.faults {
        let Some(node) = f.element.node() else {
            continue;
        };
        let Some(&(zone, zone_nodes)) = zone_of.get(node.as_str()) else {
            continue;
        };
        let why = if f.evidence_paths == 0 {
            Some(Held::Estimated)
        } else if zone_nodes < 3 {
            Some(Held::FewZoneMates)
        } else if link_kinds.contains(&(zone, f.kind)) {
            Some(Held::ZoneLink)
        } else {
            None
        };
        match why {
            Some(why) => {
                let e = held.entry(node.to_string()).or_insert(why);
                *e = (*e).min(why);
            }
            None => {
                let e = eligible.entry(node.as_str()).or_insert(Eligible {
                    severity: f.severity,
                    since: f.since,
                    kinds: Vec::new(),
                });
                e.severity = e.severity.max(f.severity);
                e.since = e.since.min(f.since);
                if !e.kinds.contains(&f.kind.as_str()) {
                    e.kinds.push(f.kind.as_str());
                }
            }
        }
    }
    let mut order: Vec<(&str, Eligible)> = eligible.into_iter().collect();
    // The tainted first, then down before degraded, then the oldest.
    order.sort_by_key(|(node, e)| {
        (
            !tainted.contains(*node),
            std::cmp::Reverse(e.severity),
            e.since,
            *node,
        )
    });
    let room = max.of(zone_of.len());
    let mut out = TaintPlan::default();
    for (
        i,
        (
            node,
            Eligible {
                severity,
                mut kinds,
                ..
            },
        ),
    ) in order.into_iter().enumerate()
    {
        held.remove(node);
        if i >= room {
            held.insert(node.to_owned(), Held::AtMost);
            continue;
        }
        kinds.sort_unstable();
        out.taint.insert(
            node.to_owned(),
            Taint {
                value: Health::from(severity).as_str(),
                kinds,
            },
        );
    }
    out.held = held;
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use zonemesh_domain::{Fault, NodeName, TierZone};

    pub(crate) fn zone(name: &str, nodes: &[&str]) -> TierZone {
        TierZone {
            name: ZoneName::parse("zone", name).unwrap(),
            group: ZoneName::parse("group", "group-1").unwrap(),
            region: None,
            nodes: nodes
                .iter()
                .map(|n| NodeName::parse("node", *n).unwrap())
                .collect(),
            fresh: true,
            rtt_us: None,
            throughput_bps: None,
        }
    }

    pub(crate) fn tiers() -> Tiers {
        Tiers {
            zones: vec![
                zone("zone-a", &["a1", "a2", "a3"]),
                zone("zone-b", &["b1", "b2", "b3"]),
                zone("zone-c", &["c1", "c2"]),
            ],
            ..Tiers::default()
        }
    }

    pub(crate) fn node(n: &str) -> NodeName {
        NodeName::parse("node", n).unwrap()
    }

    pub(crate) fn fault(
        element: Element,
        kind: FaultKind,
        severity: Severity,
        since: i64,
    ) -> Fault {
        Fault {
            element,
            kind,
            severity,
            figure: 0.05,
            interval: None,
            probes: 0,
            reference: None,
            evidence: vec![],
            evidence_paths: 4,
            since: UnixMs(since),
            clean_since: None,
        }
    }

    pub(crate) fn faults(faults: Vec<Fault>) -> Faults {
        Faults {
            faults,
            evaluated_at: Some(UnixMs(1)),
        }
    }

    #[test]
    fn every_node_is_labelled_with_its_own_worst_fault_and_no_one_elses() {
        let f = faults(vec![
            fault(
                Element::Node(node("a2")),
                FaultKind::Loss,
                Severity::Degraded,
                1,
            ),
            fault(
                Element::Egress(node("b3")),
                FaultKind::Rate,
                Severity::Degraded,
                1,
            ),
            fault(
                Element::Ingress(node("b3")),
                FaultKind::Rate,
                Severity::Down,
                1,
            ),
            fault(
                Element::zone_link(
                    ZoneName::parse("zone", "zone-a").unwrap(),
                    ZoneName::parse("zone", "zone-c").unwrap(),
                ),
                FaultKind::Loss,
                Severity::Down,
                1,
            ),
            fault(
                Element::path(node("c1"), node("c2")),
                FaultKind::Loss,
                Severity::Down,
                1,
            ),
            // A node the tiers do not hold gets no label.
            fault(
                Element::Node(node("x9")),
                FaultKind::Loss,
                Severity::Down,
                1,
            ),
        ]);
        let h = node_health(&tiers(), &f);
        let got: Vec<(&str, &str)> = h.iter().map(|(n, h)| (n.as_str(), h.as_str())).collect();
        assert_eq!(
            got,
            [
                ("a1", "ok"),
                ("a2", "degraded"),
                ("a3", "ok"),
                ("b1", "ok"),
                ("b2", "ok"),
                ("b3", "down"),
                ("c1", "ok"),
                ("c2", "ok"),
            ]
        );
    }

    #[test]
    fn the_guard_rails_hold_back_what_cannot_be_told_from_a_zone_or_was_not_measured() {
        let za = ZoneName::parse("zone", "zone-a").unwrap();
        let zb = ZoneName::parse("zone", "zone-b").unwrap();
        let mut unmeasured = fault(
            Element::Node(node("b1")),
            FaultKind::Delay,
            Severity::Down,
            1,
        );
        unmeasured.evidence_paths = 0;
        let f = faults(vec![
            // a2's loss beside a loss of zone-a's link: the paths cannot tell them apart.
            fault(
                Element::Node(node("a2")),
                FaultKind::Loss,
                Severity::Down,
                1,
            ),
            fault(
                Element::zone_link(za.clone(), zb.clone()),
                FaultKind::Loss,
                Severity::Degraded,
                1,
            ),
            // a3's rate is no loss: the link's loss does not hold it.
            fault(
                Element::Egress(node("a3")),
                FaultKind::Rate,
                Severity::Degraded,
                5,
            ),
            unmeasured,
            // zone-c has two nodes: c1 has one zone-mate only.
            fault(
                Element::Node(node("c1")),
                FaultKind::Loss,
                Severity::Down,
                1,
            ),
        ]);
        let p = plan(&tiers(), &f, MaxTainted::Nodes(10), &BTreeSet::new());
        assert_eq!(p.taint.keys().collect::<Vec<_>>(), ["a3"]);
        assert_eq!(
            p.taint["a3"],
            Taint {
                value: "degraded",
                kinds: vec!["rate"]
            }
        );
        assert_eq!(
            p.held,
            BTreeMap::from([
                ("a2".to_owned(), Held::ZoneLink),
                ("b1".to_owned(), Held::Estimated),
                ("c1".to_owned(), Held::FewZoneMates),
            ])
        );
    }

    #[test]
    fn at_most_the_maximum_is_tainted_keeping_the_tainted_then_down_then_oldest() {
        let f = faults(vec![
            fault(
                Element::Node(node("a1")),
                FaultKind::Loss,
                Severity::Degraded,
                10,
            ),
            fault(
                Element::Node(node("a2")),
                FaultKind::Loss,
                Severity::Degraded,
                5,
            ),
            fault(
                Element::Node(node("b1")),
                FaultKind::Delay,
                Severity::Down,
                20,
            ),
            fault(
                Element::Ingress(node("b1")),
                FaultKind::Rate,
                Severity::Degraded,
                3,
            ),
        ]);
        let none = BTreeSet::new();
        // 5 % of 8 nodes rounds down to 0: at least one.
        let p = plan(&tiers(), &f, MaxTainted::default(), &none);
        assert_eq!(p.taint.keys().collect::<Vec<_>>(), ["b1"], "down first");
        assert_eq!(p.taint["b1"].kinds, ["delay", "rate"]);
        assert_eq!(p.taint["b1"].value, "down");
        assert_eq!(p.held.len(), 2);
        assert!(p.held.values().all(|h| *h == Held::AtMost));
        let p = plan(&tiers(), &f, MaxTainted::Nodes(2), &none);
        assert_eq!(
            p.taint.keys().collect::<Vec<_>>(),
            ["a2", "b1"],
            "then the oldest"
        );
        // A node tainted already keeps it: the taint does not move while the count is full.
        let p = plan(
            &tiers(),
            &f,
            MaxTainted::Nodes(1),
            &BTreeSet::from(["a1".to_owned()]),
        );
        assert_eq!(p.taint.keys().collect::<Vec<_>>(), ["a1"]);
    }

    #[test]
    fn the_flags_parse_and_say_what_was_wrong() {
        assert_eq!(MaxTainted::parse("5%"), Ok(MaxTainted::Share(0.05)));
        assert_eq!(MaxTainted::parse("3"), Ok(MaxTainted::Nodes(3)));
        assert_eq!(MaxTainted::Share(0.05).of(100), 5);
        assert_eq!(MaxTainted::Share(0.05).of(10), 1);
        for bad in ["0", "0%", "120%", "-1", "five", ""] {
            let e = MaxTainted::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert_eq!(TaintEffect::parse("NoExecute"), Ok(TaintEffect::NoExecute));
        assert!(
            TaintEffect::parse("PreferNoSchedule")
                .unwrap_err()
                .contains("none of NoSchedule, NoExecute")
        );
    }
}
