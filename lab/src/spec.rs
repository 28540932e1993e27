//! What a lab is made of: zones of nodes, the links between zones (round-trip delay, jitter,
//! loss, capacity) and the impairments of single nodes (loss, rate limits by direction). Built in code, or parsed from the
//! compact flag syntax of the `zonemesh-lab` command.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// A zone and its nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneSpec {
    /// Zone name (as `topology.kubernetes.io/zone`).
    pub name: String,
    /// Node names, in address order.
    pub nodes: Vec<String>,
}

/// The link between two zones, the same both ways.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkSpec {
    /// Round-trip time added between the zones (half each way).
    pub rtt: Duration,
    /// Each direction's delay varies uniformly by up to this much either side.
    pub jitter: Duration,
    /// Probability that a packet from the first zone to the second is dropped. One direction
    /// only, so that every echo between the zones crosses it exactly once: round-trip loss is
    /// this value.
    pub loss: f64,
    /// Capacity of the link at the hub, bit/s, each direction: everything that crosses from one
    /// zone to the other shares it (`htb` on the router's zone bridges, by source subnet).
    pub rate_bps: Option<u64>,
}

/// Impairments of one node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeSpec {
    /// Probability that a packet arriving at the node is dropped (traffic from the lab's control
    /// address is spared). Every echo to or from the node arrives there exactly once, so
    /// round-trip loss is this value.
    pub loss: f64,
    /// Rate limit of what the node sends, bits per second (`tbf` on its `eth0`).
    pub egress_bps: Option<u64>,
    /// Rate limit of what the node receives, bits per second (`tbf` on the router's end of its
    /// veth).
    pub ingress_bps: Option<u64>,
}

/// A whole lab.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabSpec {
    /// Zones in order; a zone's index is its position.
    pub zones: Vec<ZoneSpec>,
    /// Links between zone pairs, by `(first, second)` zone names; pairs not given have no delay.
    pub links: BTreeMap<(String, String), LinkSpec>,
    /// Impairments by node name.
    pub nodes: BTreeMap<String, NodeSpec>,
    /// Seed of the jitter.
    pub seed: u64,
}

/// A spec that cannot be built, naming what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

fn err<T>(message: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(message.into()))
}

/// Most zones (a zone's index is an octet of its subnet and part of a queue number).
pub const MAX_ZONES: usize = 200;
/// Most nodes in one zone.
pub const MAX_NODES_PER_ZONE: usize = 200;

impl LabSpec {
    /// An empty lab.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a zone with `nodes`.
    pub fn zone(mut self, name: &str, nodes: &[&str]) -> Self {
        self.zones.push(ZoneSpec {
            name: name.into(),
            nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
        });
        self
    }

    /// Sets the link between zones `a` and `b`.
    pub fn link(mut self, a: &str, b: &str, link: LinkSpec) -> Self {
        self.links.insert((a.into(), b.into()), link);
        self
    }

    /// Sets the round-trip delay and jitter between zones `a` and `b` (keeping any loss).
    pub fn delay(self, a: &str, b: &str, rtt: Duration, jitter: Duration) -> Self {
        let kept = self.link_between(a, b);
        self.link(
            a,
            b,
            LinkSpec {
                rtt,
                jitter,
                ..kept
            },
        )
    }

    /// Sets the capacity of the link between zones `a` and `b`, each direction (keeping its
    /// delay and loss).
    pub fn link_rate(self, a: &str, b: &str, bps: u64) -> Self {
        let kept = self.link_between(a, b);
        self.link(
            a,
            b,
            LinkSpec {
                rate_bps: Some(bps),
                ..kept
            },
        )
    }

    /// Makes node `node` drop `loss` of the packets that arrive at it.
    pub fn node_loss(mut self, node: &str, loss: f64) -> Self {
        self.nodes.entry(node.into()).or_default().loss = loss;
        self
    }

    /// Limits node `node`'s link to `bps` bits per second each way.
    pub fn node_rate(self, node: &str, bps: u64) -> Self {
        self.node_egress_rate(node, bps)
            .node_ingress_rate(node, bps)
    }

    /// Limits what node `node` sends to `bps` bits per second.
    pub fn node_egress_rate(mut self, node: &str, bps: u64) -> Self {
        self.nodes.entry(node.into()).or_default().egress_bps = Some(bps);
        self
    }

    /// Limits what node `node` receives to `bps` bits per second.
    pub fn node_ingress_rate(mut self, node: &str, bps: u64) -> Self {
        self.nodes.entry(node.into()).or_default().ingress_bps = Some(bps);
        self
    }

    /// The lowest rate limit on the way from node `src` to node `dst`: the sender's egress, the
    /// receiver's ingress and, between zones, the zone link's capacity (`None`: unlimited).
    pub fn path_rate_bps(&self, src: &str, dst: &str) -> Option<u64> {
        let node = |n: &str| self.nodes.get(n).copied().unwrap_or_default();
        let link = match (self.zone_of(src), self.zone_of(dst)) {
            (Some(a), Some(b)) if a != b => self.link_between(a, b).rate_bps,
            _ => None,
        };
        [node(src).egress_bps, node(dst).ingress_bps, link]
            .into_iter()
            .flatten()
            .min()
    }

    /// The link between `a` and `b` in whichever order it was given (default: none).
    pub fn link_between(&self, a: &str, b: &str) -> LinkSpec {
        self.links
            .get(&(a.to_owned(), b.to_owned()))
            .or_else(|| self.links.get(&(b.to_owned(), a.to_owned())))
            .copied()
            .unwrap_or_default()
    }

    /// The zone of `node`.
    pub fn zone_of(&self, node: &str) -> Option<&str> {
        self.zones
            .iter()
            .find(|z| z.nodes.iter().any(|n| n == node))
            .map(|z| z.name.as_str())
    }

    /// Every node in zone order.
    pub fn all_nodes(&self) -> impl Iterator<Item = &str> {
        self.zones
            .iter()
            .flat_map(|z| z.nodes.iter().map(String::as_str))
    }

    /// Checks the spec; the error names the zone, node or link that is wrong.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.zones.is_empty() {
            return err("a lab needs at least one zone");
        }
        if self.zones.len() > MAX_ZONES {
            return err(format!("{} zones: at most {MAX_ZONES}", self.zones.len()));
        }
        let mut seen = BTreeMap::new();
        for z in &self.zones {
            check_name("zone", &z.name)?;
            if self.zones.iter().filter(|o| o.name == z.name).count() > 1 {
                return err(format!("zone {}: given twice", z.name));
            }
            if z.nodes.is_empty() || z.nodes.len() > MAX_NODES_PER_ZONE {
                return err(format!(
                    "zone {}: {} nodes (1 to {MAX_NODES_PER_ZONE})",
                    z.name,
                    z.nodes.len()
                ));
            }
            for n in &z.nodes {
                check_name("node", n)?;
                if let Some(other) = seen.insert(n.as_str(), z.name.as_str()) {
                    return err(format!("node {n}: in zones {other} and {}", z.name));
                }
            }
        }
        for ((a, b), link) in &self.links {
            for zone in [a, b] {
                if !self.zones.iter().any(|z| &z.name == zone) {
                    return err(format!("link {a}-{b}: no zone {zone}"));
                }
            }
            if a == b {
                return err(format!(
                    "link {a}-{b}: a zone's own nodes share a bridge; links join two zones"
                ));
            }
            if self.links.contains_key(&(b.clone(), a.clone())) {
                return err(format!("link {a}-{b}: given in both orders"));
            }
            if !(0.0..1.0).contains(&link.loss) {
                return err(format!("link {a}-{b}: loss {} is not in [0, 1)", link.loss));
            }
            if link.jitter > link.rtt / 2 {
                return err(format!(
                    "link {a}-{b}: jitter {:?} is more than the one-way delay {:?}",
                    link.jitter,
                    link.rtt / 2
                ));
            }
            if link.rtt > Duration::from_secs(10) {
                return err(format!("link {a}-{b}: rtt {:?} is over 10 s", link.rtt));
            }
            if link.rate_bps.is_some_and(|r| r < 8_000) {
                return err(format!("link {a}-{b}: rate below 8 kbit/s"));
            }
        }
        for (node, spec) in &self.nodes {
            if !seen.contains_key(node.as_str()) {
                return err(format!("node {node}: impaired but in no zone"));
            }
            if !(0.0..1.0).contains(&spec.loss) {
                return err(format!("node {node}: loss {} is not in [0, 1)", spec.loss));
            }
            for (direction, rate) in [("egress", spec.egress_bps), ("ingress", spec.ingress_bps)] {
                if rate.is_some_and(|r| r < 8_000) {
                    return err(format!("node {node}: {direction} rate below 8 kbit/s"));
                }
            }
        }
        Ok(())
    }
}

fn check_name(what: &str, name: &str) -> Result<(), SpecError> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        err(format!(
            "{what} {name:?}: use 1 to 40 lowercase letters, digits and inner dashes"
        ))
    }
}

/// Parses a duration such as `4ms`, `250us`, `1.5ms` or `2s` (humantime's syntax); a bare
/// number is refused, since a link's delay has no obvious unit.
pub fn parse_duration(s: &str) -> Result<Duration, SpecError> {
    if s.parse::<f64>().is_ok() {
        return err(format!("{s:?}: give a unit (us, ms or s)"));
    }
    humantime::parse_duration(s).or_else(|e| err(format!("{s:?} is not a duration: {e}")))
}

/// Parses a rate such as `100mbit`, `1gbit` or `500kbit`.
pub fn parse_rate(s: &str) -> Result<u64, SpecError> {
    let (number, scale) = if let Some(n) = s.strip_suffix("gbit") {
        (n, 1e9)
    } else if let Some(n) = s.strip_suffix("mbit") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix("kbit") {
        (n, 1e3)
    } else {
        return err(format!("{s:?}: give a unit (kbit, mbit or gbit)"));
    };
    match number.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok((v * scale) as u64),
        _ => err(format!("{s:?} is not a rate")),
    }
}

fn parse_loss(s: &str) -> Result<f64, SpecError> {
    let v = if let Some(p) = s.strip_suffix('%') {
        p.parse::<f64>().map(|p| p / 100.0)
    } else {
        s.parse::<f64>()
    };
    match v {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => err(format!(
            "{s:?} is not a loss (a fraction below 1 or a percentage)"
        )),
    }
}

/// `key=value,key=value` into pairs; the error names `what`.
fn settings<'a>(what: &str, s: &'a str) -> Result<Vec<(&'a str, &'a str)>, SpecError> {
    s.split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            kv.split_once('=')
                .ok_or_else(|| SpecError(format!("{what}: {kv:?} is not key=value")))
        })
        .collect()
}

impl LabSpec {
    /// Adds a zone from `name=node,node,...`.
    pub fn parse_zone(self, s: &str) -> Result<Self, SpecError> {
        let (name, nodes) = s
            .split_once('=')
            .ok_or_else(|| SpecError(format!("--zone {s:?}: write zone=node,node,...")))?;
        let nodes: Vec<&str> = nodes.split(',').filter(|n| !n.is_empty()).collect();
        Ok(self.zone(name, &nodes))
    }

    /// Adds a link from `a:b:rtt=4ms,jitter=100us,loss=1%,rate=100mbit`.
    pub fn parse_link(self, s: &str) -> Result<Self, SpecError> {
        let mut parts = s.splitn(3, ':');
        let (Some(a), Some(b)) = (parts.next(), parts.next()) else {
            return err(format!(
                "--link {s:?}: write zone:zone:rtt=4ms,jitter=100us,loss=1%"
            ));
        };
        let mut link = LinkSpec::default();
        for (k, v) in settings(&format!("--link {s:?}"), parts.next().unwrap_or(""))? {
            match k {
                "rtt" => link.rtt = parse_duration(v)?,
                "jitter" => link.jitter = parse_duration(v)?,
                "loss" => link.loss = parse_loss(v)?,
                "rate" => link.rate_bps = Some(parse_rate(v)?),
                _ => {
                    return err(format!(
                        "--link {s:?}: unknown setting {k} (rtt, jitter, loss, rate)"
                    ));
                }
            }
        }
        Ok(self.link(a, b, link))
    }

    /// Adds node impairments from `node:loss=5%,rate=100mbit` (`rate` both ways; `egress` and
    /// `ingress` one way).
    pub fn parse_node(mut self, s: &str) -> Result<Self, SpecError> {
        let (node, rest) = s
            .split_once(':')
            .ok_or_else(|| SpecError(format!("--node {s:?}: write node:loss=5%,rate=100mbit")))?;
        let spec = self.nodes.entry(node.into()).or_default();
        for (k, v) in settings(&format!("--node {s:?}"), rest)? {
            match k {
                "loss" => spec.loss = parse_loss(v)?,
                "rate" => {
                    let r = Some(parse_rate(v)?);
                    (spec.egress_bps, spec.ingress_bps) = (r, r);
                }
                "egress" => spec.egress_bps = Some(parse_rate(v)?),
                "ingress" => spec.ingress_bps = Some(parse_rate(v)?),
                _ => {
                    return err(format!(
                        "--node {s:?}: unknown setting {k} (loss, rate, egress, ingress)"
                    ));
                }
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_zones() -> LabSpec {
        LabSpec::new()
            .zone("zone-a", &["a1", "a2"])
            .zone("zone-b", &["b1"])
            .zone("zone-c", &["c1"])
    }

    #[test]
    fn flags_build_the_same_lab_as_code() {
        let parsed = LabSpec::new()
            .parse_zone("zone-a=a1,a2")
            .and_then(|s| s.parse_zone("zone-b=b1"))
            .and_then(|s| s.parse_zone("zone-c=c1"))
            .and_then(|s| s.parse_link("zone-a:zone-b:rtt=4ms,jitter=100us,loss=1%,rate=200mbit"))
            .and_then(|s| s.parse_node("a2:loss=0.05,rate=100mbit"))
            .and_then(|s| s.parse_node("b1:egress=50mbit"))
            .unwrap();
        let built = three_zones()
            .link(
                "zone-a",
                "zone-b",
                LinkSpec {
                    rtt: Duration::from_millis(4),
                    jitter: Duration::from_micros(100),
                    loss: 0.01,
                    rate_bps: Some(200_000_000),
                },
            )
            .node_loss("a2", 0.05)
            .node_rate("a2", 100_000_000)
            .node_egress_rate("b1", 50_000_000);
        assert_eq!(parsed, built);
        // The lowest limit on the way: the sender's egress, the receiver's ingress, the zone
        // link between them.
        assert_eq!(parsed.path_rate_bps("b1", "a1"), Some(50_000_000));
        assert_eq!(parsed.path_rate_bps("a1", "b1"), Some(200_000_000));
        assert_eq!(parsed.path_rate_bps("a1", "a2"), Some(100_000_000));
        assert_eq!(parsed.path_rate_bps("c1", "a1"), None);
        parsed.validate().unwrap();
        assert_eq!(
            parsed.link_between("zone-b", "zone-a").rtt,
            Duration::from_millis(4)
        );
        assert_eq!(parsed.zone_of("b1"), Some("zone-b"));
    }

    #[test]
    fn every_mistake_names_what_is_wrong() {
        let cases: Vec<(LabSpec, &str)> = vec![
            (LabSpec::new(), "at least one zone"),
            (
                three_zones().zone("zone-a", &["x"]),
                "zone zone-a: given twice",
            ),
            (three_zones().zone("zone-d", &["a1"]), "node a1: in zones"),
            (three_zones().zone("Zone", &["x"]), "zone \"Zone\""),
            (three_zones().zone("zone-d", &[]), "zone zone-d: 0 nodes"),
            (
                three_zones().delay("zone-a", "zone-x", Duration::from_millis(1), Duration::ZERO),
                "link zone-a-zone-x: no zone zone-x",
            ),
            (
                three_zones().delay(
                    "zone-a",
                    "zone-b",
                    Duration::from_millis(1),
                    Duration::from_millis(1),
                ),
                "jitter",
            ),
            (
                three_zones()
                    .delay("zone-a", "zone-b", Duration::from_millis(1), Duration::ZERO)
                    .delay("zone-b", "zone-a", Duration::from_millis(1), Duration::ZERO),
                "both orders",
            ),
            (
                three_zones().node_loss("zz", 0.1),
                "node zz: impaired but in no zone",
            ),
            (three_zones().node_loss("a1", 1.5), "node a1: loss 1.5"),
            (three_zones().node_rate("a1", 10), "node a1: egress rate"),
            (
                three_zones().node_ingress_rate("a1", 10),
                "node a1: ingress rate",
            ),
            (
                three_zones().link_rate("zone-a", "zone-b", 10),
                "link zone-a-zone-b: rate",
            ),
        ];
        for (spec, expected) in cases {
            let e = spec.validate().expect_err(expected).to_string();
            assert!(e.contains(expected), "{e:?} should contain {expected:?}");
        }
        for (bad, expected) in [
            ("zone-a:zone-b:rtt=4", "give a unit"),
            ("zone-a:zone-b:delay=4ms", "unknown setting delay"),
            ("zone-a", "write zone:zone"),
            ("zone-a:zone-b:loss=150%", "not a loss"),
            ("zone-a:zone-b:rate=fast", "give a unit"),
        ] {
            let e = three_zones().parse_link(bad).expect_err(bad).to_string();
            assert!(e.contains(expected), "{e}");
        }
        let e = three_zones()
            .parse_node("a1:rate=fast")
            .unwrap_err()
            .to_string();
        assert!(e.contains("give a unit"), "{e}");
        let e = three_zones()
            .parse_node("a1:speed=1gbit")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown setting speed"), "{e}");
    }

    #[test]
    fn units_parse() {
        assert_eq!(
            parse_duration("1.5ms").unwrap(),
            Duration::from_micros(1500)
        );
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("2.5mbit").unwrap(), 2_500_000);
        assert!((parse_loss("2%").unwrap() - 0.02).abs() < 1e-12);
    }
}
