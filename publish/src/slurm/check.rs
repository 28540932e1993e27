//! The rules a topology file is checked against before it is written, read back from the text
//! itself (the same text that is written), so that nothing zonemesh writes can stop or confuse a
//! controller.
//!
//! `topology/tree`: what slurmctld 22.05.8 does with each mistake, checked by running it
//! (`/work/shared/notes/slurm.md`; `tests/tests/slurm.rs` runs it again on what zonemesh writes):
//!
//! - **fatal** (the controller exits, and a fatal `scontrol reconfigure` kills the running one):
//!   an unknown key, a duplicate `SwitchName`, a switch with both `Nodes` and `Switches`, an
//!   unknown child switch, a cycle;
//! - **warnings**: a node in two leaves, a node in no leaf, an unknown node name, no switch that
//!   reaches every node (more than one root), an empty file.
//!
//! zonemesh refuses both kinds, and also what slurmctld accepts silently but its manual forbids
//! or that would make the tree mean something else: a switch name over 64 characters
//! (topology.conf(5)), a switch under two parents, a leaf without nodes, a name Slurm's hostlist
//! parser reads as another name ([`slurm_can_take`]).
//!
//! `topology/block` (no Slurm on these machines has it): the rules of topology.conf(5) as of
//! Slurm 26.11 (SchedMD/slurm `doc/man/man5/topology.conf.5` at 033ad9c067bd): the keys
//! `BlockName`, `Nodes` and `BlockSizes` only; every block named, names unique; "Each block must
//! have at least the planning base block size count of nodes"; "Successive BlockSizes must be a
//! power of two larger than the prior values". The manual says nothing of nodes in no block, so
//! those are allowed; a node in two blocks is refused (zonemesh's own rule: a node has one zone).

use std::collections::{BTreeMap, BTreeSet};

use super::hostlist::{expand, slurm_can_take};
use super::model::MAX_SWITCH_NAME;

/// How bad a problem is for slurmctld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// slurmctld exits (or zonemesh's own rule, which it holds as strictly).
    Fatal,
    /// slurmctld logs a warning and runs with a topology that means something else.
    Warning,
}

/// One rule a file breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Fatal or a warning.
    pub severity: Severity,
    /// Line number (1-based), 0 for the file as a whole.
    pub line: usize,
    /// What is wrong, naming the switch, block or node.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.severity {
            Severity::Fatal => "fatal to slurmctld",
            Severity::Warning => "a slurmctld warning",
        };
        if self.line > 0 {
            write!(f, "line {}: {} ({what})", self.line, self.message)
        } else {
            write!(f, "{} ({what})", self.message)
        }
    }
}

#[derive(Debug, Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn fatal(&mut self, line: usize, message: String) {
        self.0.push(Problem {
            severity: Severity::Fatal,
            line,
            message,
        });
    }
    fn warning(&mut self, line: usize, message: String) {
        self.0.push(Problem {
            severity: Severity::Warning,
            line,
            message,
        });
    }
}

/// One line's `key=value` pairs, keys lower-cased (Slurm's keys are case-insensitive).
fn pairs(line: &str) -> Vec<(String, String)> {
    line.split_whitespace()
        .map(|token| match token.split_once('=') {
            Some((k, v)) => (k.to_ascii_lowercase(), v.to_owned()),
            None => (token.to_ascii_lowercase(), String::new()),
        })
        .collect()
}

/// The non-comment lines with their numbers.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let l = l.split('#').next().unwrap_or("").trim();
        (!l.is_empty()).then_some((i + 1, l))
    })
}

/// The names of a hostlist value, or the problem with it.
fn names(p: &mut Problems, line: usize, key: &str, value: &str) -> Vec<String> {
    match expand(value) {
        Ok(names) if names.is_empty() => {
            p.fatal(line, format!("{key}= is empty"));
            Vec::new()
        }
        Ok(names) => {
            for n in &names {
                if !slurm_can_take(n) {
                    p.fatal(
                        line,
                        format!("{key}: Slurm's hostlist parser reads {n:?} as another name"),
                    );
                }
            }
            names
        }
        Err(e) => {
            p.fatal(line, format!("{key}: {e}"));
            Vec::new()
        }
    }
}

#[derive(Debug)]
struct SwitchLine {
    line: usize,
    nodes: Vec<String>,
    switches: Vec<String>,
}

/// Checks a `topology/tree` file. `nodes`: the nodes that must each be in exactly one leaf, and
/// the only ones a leaf may hold.
pub fn tree(text: &str, nodes: &BTreeSet<String>) -> Vec<Problem> {
    let mut p = Problems::default();
    let mut switches: BTreeMap<String, SwitchLine> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (line, l) in lines(text) {
        let kv = pairs(l);
        let Some((first, name)) = kv.first() else {
            continue;
        };
        if first != "switchname" {
            p.fatal(
                line,
                format!("{first:?}: a line must start with SwitchName="),
            );
            continue;
        }
        if name.is_empty() {
            p.fatal(line, "SwitchName= without a name".into());
            continue;
        }
        if name.chars().count() > MAX_SWITCH_NAME {
            p.fatal(
                line,
                format!(
                    "SwitchName {name}: {} characters, topology.conf(5) allows {MAX_SWITCH_NAME}",
                    name.chars().count()
                ),
            );
        }
        if !slurm_can_take(name) {
            p.fatal(
                line,
                format!("SwitchName {name:?}: Slurm's hostlist parser reads it as another name"),
            );
        }
        let mut s = SwitchLine {
            line,
            nodes: Vec::new(),
            switches: Vec::new(),
        };
        let (mut has_nodes, mut has_switches) = (false, false);
        for (k, v) in &kv[1..] {
            match k.as_str() {
                "nodes" => {
                    has_nodes = true;
                    s.nodes = names(&mut p, line, "Nodes", v);
                }
                "switches" => {
                    has_switches = true;
                    s.switches = names(&mut p, line, "Switches", v);
                }
                "linkspeed" => {}
                other => p.fatal(line, format!("unknown key {other:?} (switch {name})")),
            }
        }
        if has_nodes && has_switches {
            p.fatal(line, format!("switch {name} has both Nodes= and Switches="));
        }
        if !has_nodes && !has_switches {
            p.fatal(
                line,
                format!("switch {name} has neither Nodes= nor Switches="),
            );
        }
        if let Some(first) = switches.get(name) {
            p.fatal(
                line,
                format!("duplicate SwitchName {name} (first on line {})", first.line),
            );
            continue;
        }
        order.push(name.clone());
        switches.insert(name.clone(), s);
    }
    if switches.is_empty() {
        p.warning(0, "no switch: the file is empty".into());
        return p.0;
    }
    // Children: each known, each under one parent.
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    for name in &order {
        let s = &switches[name];
        for child in &s.switches {
            if !switches.contains_key(child) {
                p.fatal(
                    s.line,
                    format!("switch {name}: unknown child switch {child}"),
                );
            } else if let Some(other) = parent.insert(child, name) {
                p.fatal(
                    s.line,
                    format!("switch {child} is under two parents, {other} and {name}"),
                );
            }
        }
    }
    // Cycles, by depth-first search from every switch.
    let mut state: BTreeMap<&str, u8> = BTreeMap::new(); // 1 on the path, 2 done
    fn visit<'a>(
        name: &'a str,
        switches: &'a BTreeMap<String, SwitchLine>,
        state: &mut BTreeMap<&'a str, u8>,
        p: &mut Problems,
    ) {
        match state.get(name) {
            Some(2) => return,
            Some(1) => {
                p.fatal(
                    switches[name].line,
                    format!("switch {name} is its own descendant (a cycle)"),
                );
                return;
            }
            _ => {}
        }
        state.insert(name, 1);
        for child in &switches[name].switches {
            if switches.contains_key(child.as_str()) {
                visit(child, switches, state, p);
            }
        }
        state.insert(name, 2);
    }
    for name in &order {
        visit(name, &switches, &mut state, &mut p);
    }
    // Nodes: every leaf's nodes known, each node in one leaf, every expected node in a leaf.
    let mut leaf_of: BTreeMap<&str, &str> = BTreeMap::new();
    for name in &order {
        let s = &switches[name];
        for n in &s.nodes {
            if !nodes.contains(n) {
                p.warning(
                    s.line,
                    format!("switch {name}: node {n} is not a node of the cluster"),
                );
            }
            if let Some(other) = leaf_of.insert(n, name) {
                p.warning(
                    s.line,
                    format!("node {n} is in two leaves, {other} and {name}"),
                );
            }
        }
    }
    let missing: Vec<&str> = nodes
        .iter()
        .map(String::as_str)
        .filter(|n| !leaf_of.contains_key(n))
        .collect();
    if !missing.is_empty() {
        p.warning(
            0,
            format!(
                "{} nodes in no leaf: {}",
                missing.len(),
                super::hostlist::compress(&missing)
            ),
        );
    }
    // One root that reaches every node.
    let roots: Vec<&String> = order
        .iter()
        .filter(|n| !parent.contains_key(n.as_str()))
        .collect();
    if roots.len() != 1 {
        p.warning(
            0,
            format!(
                "{} switches without a parent ({}): no switch reaches all nodes",
                roots.len(),
                roots
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    } else if !p.0.iter().any(|x| x.severity == Severity::Fatal) {
        // Only without cycles and unknown children: then the descent ends.
        let mut reached: BTreeSet<&str> = BTreeSet::new();
        let mut stack = vec![roots[0].as_str()];
        while let Some(s) = stack.pop() {
            let s = &switches[s];
            reached.extend(s.nodes.iter().map(String::as_str));
            stack.extend(s.switches.iter().map(String::as_str));
        }
        if leaf_of.keys().any(|n| !reached.contains(n)) {
            p.warning(
                0,
                format!("the root {} does not reach every node", roots[0]),
            );
        }
    }
    p.0
}

/// Checks `BlockSizes`: positive, each a power of two (twice or more) times the one before.
fn block_sizes(p: &mut Problems, line: usize, value: &str) -> Vec<usize> {
    let sizes: Vec<usize> = match value
        .split(',')
        .map(str::parse::<usize>)
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(s) if !s.is_empty() && s.iter().all(|x| *x > 0) => s,
        _ => {
            p.fatal(
                line,
                format!("BlockSizes={value}: not a list of positive numbers"),
            );
            return Vec::new();
        }
    };
    for w in sizes.windows(2) {
        let ok = w[1] > w[0] && w[1] % w[0] == 0 && (w[1] / w[0]).is_power_of_two();
        if !ok {
            p.fatal(
                line,
                format!(
                    "BlockSizes={value}: {} is not a power of two larger than {} (topology.conf(5))",
                    w[1], w[0]
                ),
            );
        }
    }
    sizes
}

/// Checks a `topology/block` file. `nodes`: the cluster's nodes (a block may hold no other).
pub fn block(text: &str, nodes: &BTreeSet<String>) -> Vec<Problem> {
    let mut p = Problems::default();
    let mut sizes: Option<(usize, Vec<usize>)> = None;
    let mut blocks: Vec<(usize, String, Vec<String>)> = Vec::new();
    for (line, l) in lines(text) {
        let kv = pairs(l);
        let Some((first, value)) = kv.first() else {
            continue;
        };
        match first.as_str() {
            "blocksizes" => {
                if kv.len() > 1 {
                    p.fatal(line, format!("unknown key {:?} after BlockSizes", kv[1].0));
                }
                if let Some((other, _)) = &sizes {
                    p.fatal(line, format!("BlockSizes twice (first on line {other})"));
                }
                sizes = Some((line, block_sizes(&mut p, line, value)));
            }
            "blockname" => {
                if value.is_empty() {
                    p.fatal(line, "BlockName= without a name".into());
                    continue;
                }
                let mut members = None;
                for (k, v) in &kv[1..] {
                    match k.as_str() {
                        "nodes" => members = Some(names(&mut p, line, "Nodes", v)),
                        other => p.fatal(line, format!("unknown key {other:?} (block {value})")),
                    }
                }
                let Some(members) = members else {
                    p.fatal(line, format!("block {value} has no Nodes="));
                    continue;
                };
                if let Some((first, _, _)) = blocks.iter().find(|b| b.1 == *value) {
                    p.fatal(
                        line,
                        format!("duplicate BlockName {value} (first on line {first})"),
                    );
                    continue;
                }
                blocks.push((line, value.clone(), members));
            }
            other => p.fatal(
                line,
                format!("{other:?}: a line must start with BlockName= or BlockSizes="),
            ),
        }
    }
    if blocks.is_empty() {
        p.warning(0, "no block: the file is empty".into());
        return p.0;
    }
    let base = sizes.as_ref().and_then(|(_, s)| s.first().copied());
    let mut block_of: BTreeMap<&str, &str> = BTreeMap::new();
    for (line, name, members) in &blocks {
        if let Some(base) = base
            && members.len() < base
        {
            p.fatal(
                *line,
                format!(
                    "block {name} holds {} nodes, fewer than the base block size {base} (topology.conf(5): each block must have at least the base size)",
                    members.len()
                ),
            );
        }
        for n in members {
            if !nodes.contains(n) {
                p.warning(
                    *line,
                    format!("block {name}: node {n} is not a node of the cluster"),
                );
            }
            if let Some(other) = block_of.insert(n, name) {
                p.fatal(
                    *line,
                    format!("node {n} is in two blocks, {other} and {name}"),
                );
            }
        }
    }
    p.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn verdict(problems: &[Problem]) -> Option<Severity> {
        problems.iter().map(|p| p.severity).min()
    }

    const GOOD_TREE: &str = "# a comment\nSwitchName=zone-a Nodes=a[1-3]\nSwitchName=zone-b Nodes=b[1-3] # trailing\nSwitchName=group-1 Switches=zone-a,zone-b\nSwitchName=zonemesh Switches=group-1\n";

    /// Each of slurmctld's fatal errors and warnings, as slurm.md records them, and zonemesh's own
    /// rules, is found; a good file passes.
    #[test]
    fn every_rule_of_the_tree_is_checked() {
        let nodes = set(&["a1", "a2", "a3", "b1", "b2", "b3"]);
        assert_eq!(tree(GOOD_TREE, &nodes), []);
        let cases: [(&str, &str, Severity, &str); 14] = [
            (
                "unknown key",
                "SwitchName=s Nodes=a[1-3],b[1-3] Speed=1\n",
                Severity::Fatal,
                "unknown key \"speed\"",
            ),
            (
                "duplicate",
                "SwitchName=s Nodes=a[1-3]\nSwitchName=s Nodes=b[1-3]\n",
                Severity::Fatal,
                "duplicate SwitchName s",
            ),
            (
                "both",
                "SwitchName=s Nodes=a[1-3],b[1-3] Switches=t\nSwitchName=t Nodes=a1\n",
                Severity::Fatal,
                "both Nodes= and Switches=",
            ),
            (
                "unknown child",
                "SwitchName=a Nodes=a[1-3],b[1-3]\nSwitchName=r Switches=a,x\n",
                Severity::Fatal,
                "unknown child switch x",
            ),
            (
                "cycle",
                "SwitchName=a Nodes=a[1-3],b[1-3]\nSwitchName=x Switches=y\nSwitchName=y Switches=x\nSwitchName=r Switches=a\n",
                Severity::Fatal,
                "a cycle",
            ),
            (
                "long name",
                &format!("SwitchName={} Nodes=a[1-3],b[1-3]\n", "s".repeat(65)),
                Severity::Fatal,
                "65 characters",
            ),
            (
                "two parents",
                "SwitchName=a Nodes=a[1-3],b[1-3]\nSwitchName=x Switches=a\nSwitchName=y Switches=a\nSwitchName=r Switches=x,y\n",
                Severity::Fatal,
                "under two parents",
            ),
            (
                "bad hostlist",
                "SwitchName=a Nodes=a[1-3]x,b[1-3]\n",
                Severity::Fatal,
                "after a bracket",
            ),
            (
                "mangled name",
                "SwitchName=a Nodes=a[1-3],b[1-3],n99999999999999999999\n",
                Severity::Fatal,
                "reads \"n99999999999999999999\" as another name",
            ),
            (
                "two leaves",
                "SwitchName=a Nodes=a[1-3],b1\nSwitchName=b Nodes=b[1-3]\nSwitchName=r Switches=a,b\n",
                Severity::Warning,
                "node b1 is in two leaves",
            ),
            (
                "no leaf",
                "SwitchName=a Nodes=a[1-3],b[1-2]\n",
                Severity::Warning,
                "1 nodes in no leaf: b3",
            ),
            (
                "unknown node",
                "SwitchName=a Nodes=a[1-4],b[1-3]\n",
                Severity::Warning,
                "node a4 is not a node of the cluster",
            ),
            (
                "two roots",
                "SwitchName=a Nodes=a[1-3]\nSwitchName=b Nodes=b[1-3]\n",
                Severity::Warning,
                "2 switches without a parent",
            ),
            (
                "empty",
                "# nothing\n",
                Severity::Warning,
                "the file is empty",
            ),
        ];
        for (what, text, severity, says) in cases {
            let problems = tree(text, &nodes);
            assert_eq!(verdict(&problems), Some(severity), "{what}: {problems:?}");
            assert!(
                problems.iter().any(|p| p.to_string().contains(says)),
                "{what}: {says:?} not in {problems:?}"
            );
        }
    }

    #[test]
    fn every_rule_of_the_block_form_is_checked() {
        let nodes = set(&["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"]);
        let good = "BlockName=zone-a Nodes=a[1-4]\nBlockName=zone-b Nodes=b[1-4]\nBlockSizes=4,8\n";
        assert_eq!(block(good, &nodes), []);
        assert_eq!(
            block("BlockName=a Nodes=a[1-4]\nBlockSizes=2,8,32\n", &nodes),
            []
        );
        let cases: [(&str, &str, Severity, &str); 9] = [
            (
                "too small",
                "BlockName=a Nodes=a[1-3]\nBlockName=b Nodes=b[1-4]\nBlockSizes=4\n",
                Severity::Fatal,
                "block a holds 3 nodes, fewer than the base block size 4",
            ),
            (
                "not a power of two",
                "BlockName=a Nodes=a[1-4]\nBlockSizes=4,12\n",
                Severity::Fatal,
                "12 is not a power of two larger than 4",
            ),
            (
                "not larger",
                "BlockName=a Nodes=a[1-4]\nBlockSizes=4,4\n",
                Severity::Fatal,
                "4 is not a power of two larger than 4",
            ),
            (
                "not a number",
                "BlockName=a Nodes=a[1-4]\nBlockSizes=four\n",
                Severity::Fatal,
                "not a list of positive numbers",
            ),
            (
                "unknown key",
                "BlockName=a Nodes=a[1-4] Switches=x\n",
                Severity::Fatal,
                "unknown key \"switches\"",
            ),
            (
                "duplicate",
                "BlockName=a Nodes=a[1-4]\nBlockName=a Nodes=b[1-4]\n",
                Severity::Fatal,
                "duplicate BlockName a",
            ),
            (
                "two blocks",
                "BlockName=a Nodes=a[1-4]\nBlockName=b Nodes=a4,b[1-3]\n",
                Severity::Fatal,
                "node a4 is in two blocks",
            ),
            (
                "a switch line",
                "SwitchName=a Nodes=a[1-4]\n",
                Severity::Fatal,
                "must start with BlockName= or BlockSizes=",
            ),
            (
                "unknown node",
                "BlockName=a Nodes=a[1-5]\n",
                Severity::Warning,
                "node a5 is not a node of the cluster",
            ),
        ];
        for (what, text, severity, says) in cases {
            let problems = block(text, &nodes);
            assert_eq!(verdict(&problems), Some(severity), "{what}: {problems:?}");
            assert!(
                problems.iter().any(|p| p.to_string().contains(says)),
                "{what}: {says:?} not in {problems:?}"
            );
        }
    }
}
