//! How far the matrix of a lab's cluster has filled, counted for a person who watches it fill.
//!
//! What the aggregator shows goes back and forth while it fills: a figure withheld while a
//! throughput test loads its path, a node not READY while its windows are busy, a zone pair
//! without figures for a while. A progress line that printed that would go backwards ("nodes
//! ready 9/9", then "4/9"). So [`Fill`] keeps two things: the latest [`Reading`] (what is true
//! now, which decides when the matrix is full) and everything readings have shown so far (what
//! the line counts, which only grows). A node or zone link that was had and is missing now is
//! named in words beside its count.
//!
//! ```
//! use zonemesh_lab::fill::{Fill, Reading, Size};
//!
//! let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect();
//! let size = Size { nodes: 2, paths: 2, zone_links: 0 };
//! let mut fill = Fill::new(size);
//! fill.observe(Reading { ready: names(&["a1", "a2"]), ..Reading::default() });
//! fill.observe(Reading { ready: names(&["a1"]), ..Reading::default() });
//! assert!(fill.to_string().contains("nodes ready 2/2 (a2 not ready now)"));
//! ```

use std::collections::BTreeSet;
use std::fmt;

use crate::LabSpec;

/// A directed pair of names: source and destination node, or source and destination zone.
pub type Pair = (String, String);

/// What one reading of the aggregator shows now, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// Nodes whose agent is connected.
    pub connected: BTreeSet<String>,
    /// Nodes that are READY.
    pub ready: BTreeSet<String>,
    /// Directed pairs inside zones with a measured RTT.
    pub rtt: BTreeSet<Pair>,
    /// Directed pairs inside zones with a measured throughput.
    pub throughput: BTreeSet<Pair>,
    /// Directed zone pairs with figures (measured or estimated).
    pub zone_links: BTreeSet<Pair>,
}

impl Reading {
    /// Adds what `other` shows.
    fn extend(&mut self, other: &Reading) {
        self.connected.extend(other.connected.iter().cloned());
        self.ready.extend(other.ready.iter().cloned());
        self.rtt.extend(other.rtt.iter().cloned());
        self.throughput.extend(other.throughput.iter().cloned());
        self.zone_links.extend(other.zone_links.iter().cloned());
    }
}

/// What a full reading holds: the cluster's size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Size {
    /// Nodes.
    pub nodes: usize,
    /// Directed pairs inside zones.
    pub paths: usize,
    /// Directed zone pairs.
    pub zone_links: usize,
}

impl Size {
    /// The size of the cluster `spec`.
    pub fn of(spec: &LabSpec) -> Self {
        let z = spec.zones.len();
        Self {
            nodes: spec.all_nodes().count(),
            paths: spec
                .zones
                .iter()
                .map(|z| z.nodes.len())
                .map(|n| n * n.saturating_sub(1))
                .sum(),
            zone_links: z * z.saturating_sub(1),
        }
    }
}

/// How far the matrix has filled: the latest reading, and all that readings have shown so far.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Fill {
    /// The cluster's size.
    pub size: Size,
    /// The latest reading.
    pub now: Reading,
    /// Everything any reading has shown (never shrinks).
    pub seen: Reading,
}

impl Fill {
    /// Nothing read yet, of a cluster of `size`.
    pub fn new(size: Size) -> Self {
        Self {
            size,
            ..Self::default()
        }
    }

    /// Takes a new reading in.
    pub fn observe(&mut self, reading: Reading) {
        self.seen.extend(&reading);
        self.now = reading;
    }

    /// Every pair inside every zone has RTT and throughput now, every zone pair has figures, and
    /// every node is READY.
    pub fn is_full(&self) -> bool {
        let (now, size) = (&self.now, &self.size);
        size.paths > 0
            && now.rtt.len() == size.paths
            && now.throughput.len() == size.paths
            && now.zone_links.len() == size.zone_links
            && now.ready.len() == size.nodes
    }
}

impl Fill {
    /// Every pair inside every zone has had RTT and throughput, every zone pair figures, and
    /// every node is READY now: full over time, where a path under a throughput test at the
    /// moment (its windows are left out) would keep [`Fill::is_full`] from ever holding.
    pub fn has_seen_all(&self) -> bool {
        let (seen, size) = (&self.seen, &self.size);
        size.paths > 0
            && seen.rtt.len() == size.paths
            && seen.throughput.len() == size.paths
            && seen.zone_links.len() == size.zone_links
            && self.now.ready.len() == size.nodes
    }
}

/// How many names [`missing`] spells out before it counts the rest.
const NAMED: usize = 3;

/// What was had (`seen`) and is not now, in words: " (a2 not ready now)",
/// " (a1, a2, b1 and 2 more not ready now)"; empty when nothing is missing.
fn missing<T: Ord>(
    seen: &BTreeSet<T>,
    now: &BTreeSet<T>,
    name: impl Fn(&T) -> String,
    state: &str,
) -> String {
    let gone: Vec<String> = seen.difference(now).map(name).collect();
    if gone.is_empty() {
        return String::new();
    }
    let mut names = gone[..gone.len().min(NAMED)].join(", ");
    if gone.len() > NAMED {
        names += &format!(" and {} more", gone.len() - NAMED);
    }
    format!(" ({names} {state} now)")
}

impl fmt::Display for Fill {
    /// One line for a person: every count is of what zonemesh has had so far (it never goes
    /// back); a node or zone link had before and missing now is named beside its count.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (seen, now, size) = (&self.seen, &self.now, &self.size);
        let node = |n: &String| n.clone();
        let link = |(a, b): &Pair| format!("{a}→{b}");
        write!(
            f,
            "agents connected {}/{}{} · nodes ready {}/{}{} · paths in zones measured: RTT {}/{}, \
             throughput {}/{} · zone links {}/{}{}",
            seen.connected.len(),
            size.nodes,
            missing(&seen.connected, &now.connected, node, "not connected"),
            seen.ready.len(),
            size.nodes,
            missing(&seen.ready, &now.ready, node, "not ready"),
            seen.rtt.len(),
            size.paths,
            seen.throughput.len(),
            size.paths,
            seen.zone_links.len(),
            size.zone_links,
            missing(&seen.zone_links, &now.zone_links, link, "without figures"),
        )
    }
}

impl fmt::Debug for Fill {
    /// The counts now and so far, for logs (the names would fill a screen).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts = |r: &Reading| {
            format!(
                "connected {}, ready {}, RTT {}, throughput {}, zone links {}",
                r.connected.len(),
                r.ready.len(),
                r.rtt.len(),
                r.throughput.len(),
                r.zone_links.len()
            )
        };
        f.debug_struct("Fill")
            .field("size", &self.size)
            .field("now", &format_args!("{}", counts(&self.now)))
            .field("seen", &format_args!("{}", counts(&self.seen)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: [&str; 9] = ["a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2", "c3"];
    const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

    /// The demo cluster's size: 9 nodes, 18 directed pairs inside zones, 6 zone links.
    const DEMO: Size = Size {
        nodes: 9,
        paths: 18,
        zone_links: 6,
    };

    /// The directed pairs inside the demo's zones.
    fn paths() -> Vec<Pair> {
        let mut out = Vec::new();
        for a in NODES {
            for b in NODES {
                if a != b && a[..1] == b[..1] {
                    out.push((a.to_owned(), b.to_owned()));
                }
            }
        }
        out
    }

    fn zone_links() -> Vec<Pair> {
        let mut out = Vec::new();
        for a in ZONES {
            for b in ZONES {
                if a != b {
                    out.push((a.to_owned(), b.to_owned()));
                }
            }
        }
        out
    }

    /// A reading in counts: the first `connected` and `ready` nodes, the first `rtt` and
    /// `throughput` paths and the first `links` zone links.
    #[derive(Clone, Copy)]
    struct Shown {
        connected: usize,
        ready: usize,
        rtt: usize,
        throughput: usize,
        links: usize,
    }

    fn reading(s: Shown) -> Reading {
        let first = |n: usize| NODES[..n].iter().map(|s| (*s).to_owned()).collect();
        Reading {
            connected: first(s.connected),
            ready: first(s.ready),
            rtt: paths().into_iter().take(s.rtt).collect(),
            throughput: paths().into_iter().take(s.throughput).collect(),
            zone_links: zone_links().into_iter().take(s.links).collect(),
        }
    }

    /// The counts a line shows: connected, ready, RTT, throughput, zone links.
    fn counts(line: &str) -> [usize; 5] {
        let after = |label: &str| -> usize {
            let at = line
                .find(label)
                .unwrap_or_else(|| panic!("{label} in {line}"));
            let rest = &line[at + label.len()..];
            rest[..rest.find('/').unwrap()].parse().unwrap()
        };
        [
            after("agents connected "),
            after("nodes ready "),
            after("RTT "),
            after("throughput "),
            after("zone links "),
        ]
    }

    /// Sequences of readings as the aggregator gave them, and the counts the line must print
    /// after each: what was had stays counted.
    #[test]
    fn every_count_on_the_line_only_moves_forward() {
        let shown = |connected, ready, rtt, throughput, links| Shown {
            connected,
            ready,
            rtt,
            throughput,
            links,
        };
        type Case = (&'static str, Vec<Shown>, Vec<[usize; 5]>);
        let cases: Vec<Case> = vec![
            (
                "filling without setbacks",
                vec![
                    shown(3, 0, 0, 0, 0),
                    shown(9, 4, 10, 2, 2),
                    shown(9, 9, 18, 18, 6),
                ],
                vec![[3, 0, 0, 0, 0], [9, 4, 10, 2, 2], [9, 9, 18, 18, 6]],
            ),
            (
                // As a new user saw it: "nodes ready 9/9" fell to "4/9" and "zone links 4/6" to
                // "0/6" while the throughput tests ran, then came back.
                "readiness and zone figures lapse under throughput tests",
                vec![
                    shown(9, 9, 18, 6, 4),
                    shown(9, 4, 12, 8, 0),
                    shown(9, 9, 18, 18, 6),
                ],
                vec![[9, 9, 18, 6, 4], [9, 9, 18, 8, 4], [9, 9, 18, 18, 6]],
            ),
            (
                "an agent reconnects",
                vec![
                    shown(9, 9, 18, 18, 6),
                    shown(8, 8, 18, 18, 6),
                    shown(9, 9, 18, 18, 6),
                ],
                vec![[9, 9, 18, 18, 6], [9, 9, 18, 18, 6], [9, 9, 18, 18, 6]],
            ),
            (
                "an aggregator that restarts and shows nothing for a while",
                vec![
                    shown(9, 6, 14, 3, 6),
                    shown(0, 0, 0, 0, 0),
                    shown(2, 0, 0, 0, 0),
                ],
                vec![[9, 6, 14, 3, 6], [9, 6, 14, 3, 6], [9, 6, 14, 3, 6]],
            ),
        ];
        for (what, readings, want) in cases {
            let mut fill = Fill::new(DEMO);
            let printed: Vec<[usize; 5]> = readings
                .into_iter()
                .map(|s| {
                    fill.observe(reading(s));
                    counts(&fill.to_string())
                })
                .collect();
            assert_eq!(printed, want, "{what}");
            for pair in printed.windows(2) {
                assert!(
                    (0..5).all(|i| pair[1][i] >= pair[0][i]),
                    "{what}: {pair:?} went back"
                );
            }
        }
    }

    /// A node or zone link that was had and is missing now is named, not uncounted.
    #[test]
    fn what_is_lost_later_is_said_in_words() {
        let full = reading(Shown {
            connected: 9,
            ready: 9,
            rtt: 18,
            throughput: 18,
            links: 6,
        });
        let without = |f: &dyn Fn(&mut Reading)| {
            let mut r = full.clone();
            f(&mut r);
            r
        };
        // (what, the later reading, what the line says, whether it names anything lost)
        type Case<'a> = (&'a str, Reading, &'a [&'a str], bool);
        let cases: Vec<Case> = vec![
            (
                "nothing lost",
                full.clone(),
                &["nodes ready 9/9 ·", "zone links 6/6"],
                false,
            ),
            (
                "a2 not READY",
                without(&|r| {
                    r.ready.remove("a2");
                }),
                &["nodes ready 9/9 (a2 not ready now) ·"],
                true,
            ),
            (
                "five nodes not READY",
                without(&|r| {
                    for n in ["a1", "a3", "b2", "c1", "c3"] {
                        r.ready.remove(n);
                    }
                }),
                &["nodes ready 9/9 (a1, a3, b2 and 2 more not ready now)"],
                true,
            ),
            (
                "b1's agent gone",
                without(&|r| {
                    r.connected.remove("b1");
                }),
                &["agents connected 9/9 (b1 not connected now) · nodes ready 9/9 ·"],
                true,
            ),
            (
                "a zone link without figures",
                without(&|r| {
                    r.zone_links
                        .remove(&("zone-a".to_owned(), "zone-c".to_owned()));
                }),
                &["zone links 6/6 (zone-a→zone-c without figures now)"],
                true,
            ),
            (
                // Figures withheld under a throughput test are routine: the paths' counts say
                // what was measured and nothing more.
                "paths without figures",
                without(&|r| {
                    r.throughput.clear();
                }),
                &["RTT 18/18, throughput 18/18 · zone links 6/6"],
                false,
            ),
        ];
        for (what, later, want, names_lost) in cases {
            let mut fill = Fill::new(DEMO);
            fill.observe(full.clone());
            fill.observe(later);
            let line = fill.to_string();
            for w in want {
                assert!(line.contains(w), "{what}: {line:?} lacks {w:?}");
            }
            assert_eq!(line.contains(" now)"), names_lost, "{what}: {line}");
        }
    }

    /// Full is about now: a node that lapsed holds the wait until it is READY again.
    #[test]
    fn full_means_full_now() {
        let full = Shown {
            connected: 9,
            ready: 9,
            rtt: 18,
            throughput: 18,
            links: 6,
        };
        let mut fill = Fill::new(DEMO);
        fill.observe(reading(full));
        assert!(fill.is_full());
        fill.observe(reading(Shown { ready: 8, ..full }));
        assert!(!fill.is_full(), "{fill}");
        fill.observe(reading(Shown {
            throughput: 17,
            ..full
        }));
        assert!(!fill.is_full(), "{fill}");
        fill.observe(reading(full));
        assert!(fill.is_full());
        assert!(
            !Fill::new(Size::default()).is_full(),
            "an empty cluster is never full"
        );
    }

    #[test]
    fn the_size_of_a_cluster() {
        let spec = LabSpec::new()
            .zone("zone-a", &["a1", "a2", "a3"])
            .zone("zone-b", &["b1", "b2"])
            .zone("zone-c", &["c1"]);
        assert_eq!(
            Size::of(&spec),
            Size {
                nodes: 6,
                paths: 6 + 2,
                zone_links: 6
            }
        );
    }
}
