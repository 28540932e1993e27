//! The measured tiers as Slurm's network topology (pure: the same tiers and options give the same
//! text; no I/O, no clock). `zonemesh publish --slurm` writes it (cli/src/slurm.rs).
//!
//! - tree (`topology.conf`, `TopologyPlugin=topology/tree`): one leaf switch per zone, one switch
//!   per zone group, one root `zonemesh`; Slurm's nodes that zonemesh does not measure in the leaf
//!   `zonemesh-unmeasured` and, with `--exclude-faulty`, the unreachable nodes in the leaf
//!   `zonemesh-faulty`, both under the root;
//! - block (`topology.conf`, `topology/block`, Slurm 23.11 and later): one block per zone that
//!   holds at least the base block size, the blocks of a group next to each other;
//! - yaml (`topology.yaml`, Slurm 25.05 and later): both, as topologies `zonemesh-tree` and
//!   `zonemesh-block`.
//!
//! Every text is checked ([`check`]) before it is handed out: a file that would stop slurmctld or
//! make it warn is never written.
//!
//! ```
//! use zonemesh_domain::{NodeName, TierGroup, TierZone, Tiers, ZoneName};
//! use zonemesh_publish::slurm::{Form, SlurmOptions, file};
//!
//! let name = |s: &str| ZoneName::parse("name", s).unwrap();
//! let zone = |z: &str, nodes: &[&str]| TierZone {
//!     name: name(z),
//!     group: name("group-1"),
//!     region: None,
//!     nodes: nodes.iter().map(|n| NodeName::parse("node", *n).unwrap()).collect(),
//!     fresh: true,
//!     rtt_us: None,
//!     throughput_bps: None,
//! };
//! let tiers = Tiers {
//!     zones: vec![zone("zone-a", &["a1", "a2", "a3"]), zone("zone-b", &["b1", "b2"])],
//!     groups: vec![TierGroup {
//!         name: name("group-1"),
//!         zones: vec![name("zone-a"), name("zone-b")],
//!         inside: Default::default(),
//!         held: false,
//!         nearest: None,
//!     }],
//!     ..Tiers::default()
//! };
//! let out = file(&tiers, Form::Tree, &SlurmOptions::default()).unwrap();
//! let lines: Vec<&str> = out.text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect();
//! assert_eq!(
//!     lines,
//!     [
//!         "SwitchName=zone-a Nodes=a[1-3]",
//!         "SwitchName=zone-b Nodes=b[1-2]",
//!         "SwitchName=group-1 Switches=zone-a,zone-b",
//!         "SwitchName=zonemesh Switches=group-1",
//!     ]
//! );
//! ```

pub mod check;
pub mod hostlist;
pub mod model;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};

use zonemesh_domain::Tiers;

pub use check::{Problem, Severity};
pub use model::{
    Block, Blocks, FAULTY, Form, MAX_SWITCH_NAME, ROOT, SlurmOptions, Switch, Topology, Tree,
    UNMEASURED, YAML_BLOCK, YAML_TREE, YamlDefault,
};

use hostlist::{compress, slurm_can_take};

/// Why no file can be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlurmError {
    /// Nothing to place: no measured node that Slurm knows, and no node of Slurm's.
    #[error("no node to write: {0}")]
    NoNodes(String),
    /// The block form without a block that holds the base size.
    #[error("--slurm block: no block holds the base block size {base}: {why}")]
    NoBlocks {
        /// The base size.
        base: usize,
        /// Which zones were too small.
        why: String,
    },
    /// A base block size of 0.
    #[error("--slurm-block-base: 0 is not a block size (at least 1 node)")]
    ZeroBase,
    /// `--slurm-yaml-default block` without blocks.
    #[error("--slurm-yaml-default block: the file has no zonemesh-block topology ({0})")]
    NoDefault(String),
    /// The text breaks a rule (a bug in zonemesh, or names it cannot map): nothing is written.
    #[error("the {form} file breaks Slurm's rules, so it is not written:\n  {}", .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Refused {
        /// `tree`, `block` or `yaml`.
        form: &'static str,
        /// Every rule broken.
        problems: Vec<Problem>,
    },
}

/// A checked file: its text and what it says about the nodes it moved or left out (also in its
/// comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// The text to write.
    pub text: String,
    /// The notes, for standard error.
    pub notes: Vec<String>,
}

/// Why Slurm cannot take a node name, if it cannot.
pub fn node_name_problem(name: &str) -> Option<&'static str> {
    if name.eq_ignore_ascii_case("default") {
        return Some(
            "slurm.conf reads NodeName=DEFAULT as the defaults of the lines after it, so no node can have this name",
        );
    }
    if !slurm_can_take(name) {
        return Some(
            "Slurm's hostlist parser reads it as another name (a trailing number above 18446744073709551615, or hostlist syntax)",
        );
    }
    None
}

/// FNV-1a, 32 bits: a stable hash for names that need one.
fn hash8(s: &str) -> String {
    let h = s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{h:08x}")
}

/// Names zonemesh's own switches and groups use: a zone never gets one as is.
fn reserved(name: &str) -> bool {
    [ROOT, UNMEASURED, FAULTY].contains(&name)
        || name
            .strip_prefix("group-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn usable(name: &str) -> bool {
    name.chars().count() <= MAX_SWITCH_NAME && slurm_can_take(name)
}

/// The leaf switch (and block) of a zone: the zone's own name; `zone-<name>` when that is one of
/// zonemesh's own names (`zonemesh`, `zonemesh-unmeasured`, `zonemesh-faulty`, `group-<n>`);
/// `zone-<hash>` when neither is a name Slurm reads back within 64 characters. Depends on the
/// zone's name alone, so it is stable.
pub fn zone_switch(zone: &str) -> String {
    if !reserved(zone) && usable(zone) {
        return zone.to_owned();
    }
    let prefixed = format!("zone-{zone}");
    if !reserved(&prefixed) && usable(&prefixed) {
        return prefixed;
    }
    format!("zone-{}", hash8(zone))
}

/// The switch of a group: its name (`group-<n>`), or `group-<hash>` when Slurm could not take it.
pub fn group_switch(group: &str) -> String {
    if usable(group) && ![ROOT, UNMEASURED, FAULTY].contains(&group) {
        group.to_owned()
    } else {
        format!("group-{}", hash8(group))
    }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// Derives both forms from the tiers (nothing checked yet: [`file`] checks).
pub fn derive(tiers: &Tiers, options: &SlurmOptions) -> Result<Topology, SlurmError> {
    if options.block_base == Some(0) {
        return Err(SlurmError::ZeroBase);
    }
    let mut notes: Vec<String> = Vec::new();
    let measured: BTreeSet<String> = tiers.nodes().map(|(_, n)| n.to_string()).collect();
    let in_slurm = |n: &str| options.slurm_nodes.as_ref().is_none_or(|s| s.contains(n));

    // Measured nodes Slurm cannot take, or does not know: left out.
    let mut cannot: Vec<(String, &'static str)> = Vec::new();
    for n in &measured {
        if let Some(why) = node_name_problem(n)
            && in_slurm(n)
        {
            cannot.push((n.clone(), why));
        }
    }
    for (n, why) in &cannot {
        notes.push(format!("node {n} left out: {why}"));
    }
    let cannot: BTreeSet<&str> = cannot.iter().map(|(n, _)| n.as_str()).collect();
    let not_in_slurm: Vec<&str> = measured
        .iter()
        .map(String::as_str)
        .filter(|n| !in_slurm(n))
        .collect();
    if !not_in_slurm.is_empty() {
        notes.push(format!(
            "{} measured by zonemesh but not in --slurm-nodes, left out: {}",
            plural(not_in_slurm.len(), "node"),
            compress(&not_in_slurm)
        ));
    }
    let placeable = |n: &str| in_slurm(n) && !cannot.contains(n);
    let faulty: BTreeSet<&str> = if options.exclude_faulty {
        options
            .faulty
            .iter()
            .map(String::as_str)
            .filter(|n| measured.contains(*n) && placeable(n))
            .collect()
    } else {
        BTreeSet::new()
    };
    let unmeasured: Vec<String> = options
        .slurm_nodes
        .iter()
        .flatten()
        .filter(|n| !measured.contains(*n) && node_name_problem(n).is_none())
        .cloned()
        .collect();

    // Zones in group order (groups by name, zones by name within), as the file lists them.
    let mut group_of: BTreeMap<&str, &str> = BTreeMap::new();
    for g in &tiers.groups {
        for z in &g.zones {
            group_of.insert(z.as_str(), g.name.as_str());
        }
    }
    let mut zones: Vec<&zonemesh_domain::TierZone> = tiers.zones.iter().collect();
    zones.sort_by(|a, b| {
        (a.group.as_str(), a.name.as_str()).cmp(&(b.group.as_str(), b.name.as_str()))
    });

    // Leaf names: a mapped name that two zones would share falls back to its hash.
    let mut leaf: BTreeMap<&str, String> = zones
        .iter()
        .map(|z| (z.name.as_str(), zone_switch(z.name.as_str())))
        .collect();
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for name in leaf.values() {
        *count.entry(name.clone()).or_default() += 1;
    }
    for (zone, name) in leaf.iter_mut() {
        if count[name] > 1 && name != zone {
            *name = format!("zone-{}", hash8(zone));
        }
    }

    let mut tree = Tree::default();
    let mut block_candidates: Vec<Block> = Vec::new();
    let mut empty_zones: Vec<&str> = Vec::new();
    for z in &zones {
        let nodes: Vec<String> = z
            .nodes
            .iter()
            .map(|n| n.to_string())
            .filter(|n| placeable(n) && !faulty.contains(n.as_str()))
            .collect();
        let name = leaf[z.name.as_str()].clone();
        let about = format!(
            "zone {} (group {}){}: {}",
            z.name,
            z.group,
            if z.name.as_str() == zonemesh_domain::UNKNOWN_ZONE {
                ", the nodes whose agent named no zone"
            } else {
                ""
            },
            plural(nodes.len(), "node")
        );
        if nodes.is_empty() {
            empty_zones.push(z.name.as_str());
            continue;
        }
        block_candidates.push(Block {
            name: name.clone(),
            nodes: nodes.clone(),
            about: about.clone(),
        });
        tree.switches.push(Switch {
            name,
            nodes,
            switches: Vec::new(),
            about,
        });
    }
    if !empty_zones.is_empty() {
        notes.push(format!(
            "no node of zone {} is left to list: no switch for it",
            empty_zones.join(", ")
        ));
    }
    let mut root_children: Vec<String> = Vec::new();
    let mut groups: Vec<(&str, Vec<String>, Vec<&str>)> = Vec::new();
    let mut group_names: Vec<&str> = tiers.groups.iter().map(|g| g.name.as_str()).collect();
    // A zone without a group (tiers always give one) still gets its leaf under the root.
    for z in &zones {
        if !group_of.contains_key(z.name.as_str())
            && tree
                .switches
                .iter()
                .any(|s| s.name == leaf[z.name.as_str()])
        {
            root_children.push(leaf[z.name.as_str()].clone());
        }
    }
    group_names.sort();
    for g in group_names {
        let group = tiers
            .groups
            .iter()
            .find(|x| x.name.as_str() == g)
            .expect("listed");
        let mut zs: Vec<&str> = group.zones.iter().map(|z| z.as_str()).collect();
        zs.sort();
        let children: Vec<String> = zs
            .iter()
            .filter_map(|z| leaf.get(z))
            .filter(|name| tree.switches.iter().any(|s| &s.name == *name))
            .cloned()
            .collect();
        if !children.is_empty() {
            groups.push((g, children, zs));
        }
    }
    let mut extra = Vec::new();
    if !unmeasured.is_empty() {
        notes.push(format!(
            "{} in --slurm-nodes that zonemesh does not measure: in the leaf {UNMEASURED} under the root {ROOT}: {}",
            plural(unmeasured.len(), "node"),
            compress(&unmeasured)
        ));
        extra.push(Switch {
            name: UNMEASURED.into(),
            nodes: unmeasured.clone(),
            switches: Vec::new(),
            about: format!(
                "Slurm's nodes that zonemesh does not measure: {}",
                plural(unmeasured.len(), "node")
            ),
        });
    }
    let faulty_nodes: Vec<String> = faulty.iter().map(|s| (*s).to_owned()).collect();
    let mut tree_notes = notes.clone();
    let mut block_notes = notes;
    if !faulty_nodes.is_empty() {
        tree_notes.push(format!(
            "{} unreachable (DOWN in zonemesh), moved out of their zones by --exclude-faulty into the leaf {FAULTY} under the root {ROOT}: {}",
            plural(faulty_nodes.len(), "node"),
            compress(&faulty_nodes)
        ));
        block_notes.push(format!(
            "{} unreachable (DOWN in zonemesh), left out of every block by --exclude-faulty: {} (topology.conf(5) of Slurm 26.11 asks only that each block hold at least the base block size; it does not ask that every node be in a block)",
            plural(faulty_nodes.len(), "node"),
            compress(&faulty_nodes)
        ));
        extra.push(Switch {
            name: FAULTY.into(),
            nodes: faulty_nodes.clone(),
            switches: Vec::new(),
            about: format!(
                "unreachable nodes (--exclude-faulty): {}; a job asking for one switch never gets them",
                plural(faulty_nodes.len(), "node")
            ),
        });
    } else if options.exclude_faulty {
        tree_notes.push("--exclude-faulty: no node is unreachable".into());
        block_notes.push("--exclude-faulty: no node is unreachable".into());
    }
    for s in &extra {
        root_children.push(s.name.clone());
    }
    tree.switches.extend(extra);
    let mut group_switches = Vec::new();
    for (g, children, zs) in groups {
        let name = group_switch(g);
        group_switches.push(name.clone());
        tree.switches.push(Switch {
            name,
            nodes: Vec::new(),
            switches: children,
            about: format!("zone group {g}: zones {}", zs.join(", ")),
        });
    }
    group_switches.extend(root_children);
    if group_switches.is_empty() {
        return Err(SlurmError::NoNodes(if measured.is_empty() {
            "the aggregator has measured no node yet, and --slurm-nodes names none".into()
        } else {
            "every measured node was left out (see above)".into()
        }));
    }
    tree.switches.push(Switch {
        name: ROOT.into(),
        nodes: Vec::new(),
        switches: group_switches,
        about: "the root: every zone group".into(),
    });

    // Blocks: zones in group order, then Slurm's unmeasured nodes; the base size the smallest
    // zone's (or --slurm-block-base).
    let smallest = block_candidates.iter().map(|b| b.nodes.len()).min();
    if !unmeasured.is_empty() {
        block_candidates.push(Block {
            name: UNMEASURED.into(),
            nodes: unmeasured.clone(),
            about: format!(
                "Slurm's nodes that zonemesh does not measure: {}",
                plural(unmeasured.len(), "node")
            ),
        });
    }
    let blocks = match options.block_base.or(smallest) {
        None => {
            block_notes.push("no zone has a node to list: no block".into());
            None
        }
        Some(base) => {
            let (kept, small): (Vec<Block>, Vec<Block>) = block_candidates
                .into_iter()
                .partition(|b| b.nodes.len() >= base);
            for b in &small {
                block_notes.push(format!(
                    "block {} has {}, fewer than the base block size {base}: its nodes are in no block: {}",
                    b.name,
                    plural(b.nodes.len(), "node"),
                    compress(&b.nodes)
                ));
            }
            if kept.is_empty() {
                None
            } else {
                let mut sizes = vec![base];
                let mut k = 2;
                while k <= kept.len() {
                    sizes.push(base * k);
                    k *= 2;
                }
                Some(Blocks {
                    sizes,
                    blocks: kept,
                })
            }
        }
    };

    let expected_nodes: BTreeSet<String> = match &options.slurm_nodes {
        Some(s) => s
            .iter()
            .filter(|n| node_name_problem(n).is_none())
            .cloned()
            .collect(),
        None => measured.iter().filter(|n| placeable(n)).cloned().collect(),
    };
    Ok(Topology {
        tree,
        blocks,
        tree_notes,
        block_notes,
        expected_nodes,
        slurm_nodes_known: options.slurm_nodes.is_some(),
    })
}

fn refused(form: &'static str, problems: Vec<Problem>) -> Result<(), SlurmError> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(SlurmError::Refused { form, problems })
    }
}

/// The checked text of `form` for `tiers`: derived, rendered, and read back against every rule of
/// [`check`]; an error rather than a file that breaks one.
pub fn file(tiers: &Tiers, form: Form, options: &SlurmOptions) -> Result<File, SlurmError> {
    let t = derive(tiers, options)?;
    match form {
        Form::Tree => {
            let text = render::tree_conf(&t);
            refused("tree", check::tree(&text, &t.expected_nodes))?;
            Ok(File {
                text,
                notes: t.tree_notes,
            })
        }
        Form::Block => {
            let Some(text) = render::block_conf(&t) else {
                return Err(SlurmError::NoBlocks {
                    base: options.block_base.unwrap_or(0),
                    why: t.block_notes.join("; "),
                });
            };
            refused("block", check::block(&text, &t.expected_nodes))?;
            Ok(File {
                text,
                notes: t.block_notes,
            })
        }
        Form::Yaml => {
            if options.yaml_default == YamlDefault::Block && t.blocks.is_none() {
                return Err(SlurmError::NoDefault(t.block_notes.join("; ")));
            }
            // topology.yaml(5), May 2025: names unique, `topology` first, exactly one of
            // tree/block/flat each (by construction), the first `cluster_default: true` wins (at
            // most one is written); the tree's and the blocks' own rules as in topology.conf.
            let mut problems = check::tree(&render::tree_body(&t.tree), &t.expected_nodes);
            if let Some(b) = &t.blocks {
                problems.extend(check::block(&render::block_body(b), &t.expected_nodes));
            }
            refused("yaml", problems)?;
            let mut notes: Vec<String> =
                t.tree_notes.iter().map(|n| format!("tree: {n}")).collect();
            notes.extend(t.block_notes.iter().map(|n| format!("block: {n}")));
            Ok(File {
                text: render::yaml(&t, options.yaml_default),
                notes,
            })
        }
    }
}
