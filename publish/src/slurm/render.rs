//! A [`Topology`] as the text of `topology.conf` (tree or block) or `topology.yaml`.
//!
//! No time and no figure goes into the text: it changes only when the tiers' zones, groups or
//! nodes change, so that it is rewritten (and `scontrol reconfigure` run) only then.

use std::fmt::Write as _;

use super::hostlist::compress;
use super::model::{Blocks, Topology, Tree, YAML_BLOCK, YAML_TREE, YamlDefault};

fn comment_block(out: &mut String, header: &[&str], notes: &[String]) {
    for h in header {
        let _ = writeln!(out, "# {h}");
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "#");
        let _ = writeln!(out, "# Notes:");
        for n in notes {
            let _ = writeln!(out, "# - {n}");
        }
    }
    out.push('\n');
}

fn tree_lines(out: &mut String, tree: &Tree) {
    for s in &tree.switches {
        let _ = writeln!(out, "# {}", s.about);
        if s.switches.is_empty() {
            let _ = writeln!(out, "SwitchName={} Nodes={}", s.name, compress(&s.nodes));
        } else {
            let _ = writeln!(
                out,
                "SwitchName={} Switches={}",
                s.name,
                s.switches.join(",")
            );
        }
    }
}

fn block_lines(out: &mut String, blocks: &Blocks) {
    for b in &blocks.blocks {
        let _ = writeln!(out, "# {}", b.about);
        let _ = writeln!(out, "BlockName={} Nodes={}", b.name, compress(&b.nodes));
    }
    let sizes: Vec<String> = blocks.sizes.iter().map(ToString::to_string).collect();
    let _ = writeln!(out, "BlockSizes={}", sizes.join(","));
}

/// `topology.conf` for `topology/tree`.
pub fn tree_conf(t: &Topology) -> String {
    let mut out = String::new();
    comment_block(
        &mut out,
        &[
            "topology.conf for TopologyPlugin=topology/tree, written by zonemesh",
            "(zonemesh publish --slurm tree) from the measured tiers: one leaf switch per zone,",
            "one switch per zone group, one root. zonemesh rewrites it when the tiers change.",
        ],
        &t.tree_notes,
    );
    tree_lines(&mut out, &t.tree);
    out
}

/// `topology.conf` for `topology/block` (Slurm 23.11 and later); `None` without blocks.
pub fn block_conf(t: &Topology) -> Option<String> {
    let blocks = t.blocks.as_ref()?;
    let mut out = String::new();
    comment_block(
        &mut out,
        &[
            "topology.conf for TopologyPlugin=topology/block (Slurm 23.11 and later), written by",
            "zonemesh (zonemesh publish --slurm block) from the measured tiers: one block per zone,",
            "zones of one group next to each other. zonemesh rewrites it when the tiers change.",
        ],
        &t.block_notes,
    );
    block_lines(&mut out, blocks);
    Some(out)
}

/// A YAML double-quoted scalar (hostlists hold `[` and `,`, which plain YAML would misread).
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// `topology.yaml` (Slurm 25.05 and later): the tree as topology `zonemesh-tree` and, when there
/// are blocks, the block form as `zonemesh-block`; `topology` first in each, as topology.yaml(5)
/// asks.
pub fn yaml(t: &Topology, default: YamlDefault) -> String {
    let mut out = String::new();
    let mut notes: Vec<String> = t.tree_notes.iter().map(|n| format!("tree: {n}")).collect();
    notes.extend(t.block_notes.iter().map(|n| format!("block: {n}")));
    comment_block(
        &mut out,
        &[
            "topology.yaml (Slurm 25.05 and later), written by zonemesh (zonemesh publish --slurm",
            "yaml) from the measured tiers: zonemesh-tree (one leaf switch per zone, one switch per",
            "zone group, one root) and zonemesh-block (one block per zone). A partition picks one",
            "with Topology=. zonemesh rewrites it when the tiers change.",
        ],
        &notes,
    );
    let _ = writeln!(out, "- topology: {YAML_TREE}");
    let _ = writeln!(out, "  cluster_default: {}", default == YamlDefault::Tree);
    let _ = writeln!(out, "  tree:");
    let _ = writeln!(out, "    switches:");
    for s in &t.tree.switches {
        let _ = writeln!(out, "      # {}", s.about);
        let _ = writeln!(out, "      - switch: {}", quoted(&s.name));
        if s.switches.is_empty() {
            let _ = writeln!(out, "        nodes: {}", quoted(&compress(&s.nodes)));
        } else {
            let _ = writeln!(out, "        children: {}", quoted(&s.switches.join(",")));
        }
    }
    if let Some(blocks) = &t.blocks {
        let _ = writeln!(out, "- topology: {YAML_BLOCK}");
        let _ = writeln!(out, "  cluster_default: {}", default == YamlDefault::Block);
        let _ = writeln!(out, "  block:");
        let _ = writeln!(out, "    block_sizes:");
        for s in &blocks.sizes {
            let _ = writeln!(out, "      - {s}");
        }
        let _ = writeln!(out, "    blocks:");
        for b in &blocks.blocks {
            let _ = writeln!(out, "      # {}", b.about);
            let _ = writeln!(out, "      - block: {}", quoted(&b.name));
            let _ = writeln!(out, "        nodes: {}", quoted(&compress(&b.nodes)));
        }
    }
    out
}

/// The tree of a topology as `topology.conf` lines without comments (what the checks read for the
/// tree of `topology.yaml`).
pub fn tree_body(tree: &Tree) -> String {
    let mut out = String::new();
    tree_lines(&mut out, tree);
    out
}

/// The blocks as `topology.conf` lines (what the checks read for the blocks of `topology.yaml`).
pub fn block_body(blocks: &Blocks) -> String {
    let mut out = String::new();
    block_lines(&mut out, blocks);
    out
}
