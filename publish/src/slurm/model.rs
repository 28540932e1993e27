//! What a Slurm topology file holds, before it is text: switches (tree), blocks (block), and
//! what zonemesh says about the nodes it left out or moved.

use std::collections::BTreeSet;

/// The file's form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `topology.conf` for `TopologyPlugin=topology/tree`.
    Tree,
    /// `topology.conf` for `TopologyPlugin=topology/block` (Slurm 23.11 and later).
    Block,
    /// `topology.yaml` (Slurm 25.05 and later): the tree and the block form as two topologies.
    Yaml,
}

impl Form {
    /// The name `--slurm` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Tree => "tree",
            Form::Block => "block",
            Form::Yaml => "yaml",
        }
    }
}

/// Which topology of `topology.yaml` is the cluster default (`cluster_default: true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum YamlDefault {
    /// `zonemesh-tree`.
    #[default]
    Tree,
    /// `zonemesh-block`.
    Block,
    /// Neither: partitions name one with `Topology=`.
    None,
}

/// What to write, besides the tiers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlurmOptions {
    /// The nodes Slurm knows (`--slurm-nodes`); `None`: every measured node, and no others.
    pub slurm_nodes: Option<BTreeSet<String>>,
    /// Nodes to move out of their zone (`--exclude-faulty`: the unreachable ones).
    pub faulty: BTreeSet<String>,
    /// Whether `--exclude-faulty` was given (the file says so even when no node is faulty).
    pub exclude_faulty: bool,
    /// The base block size (`--slurm-block-base`); `None`: the smallest zone's node count.
    pub block_base: Option<usize>,
    /// The cluster default of `topology.yaml`.
    pub yaml_default: YamlDefault,
}

/// A switch of the tree: a leaf (nodes) or a switch of switches, never both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// `SwitchName`.
    pub name: String,
    /// `Nodes` (a leaf), sorted.
    pub nodes: Vec<String>,
    /// `Switches`, in order.
    pub switches: Vec<String>,
    /// One comment line above it: what it stands for.
    pub about: String,
}

/// A block of the block form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// `BlockName`.
    pub name: String,
    /// `Nodes`, sorted.
    pub nodes: Vec<String>,
    /// One comment line above it.
    pub about: String,
}

/// The tree: leaves first, then the groups' switches, the root last.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tree {
    /// Every switch, children before parents.
    pub switches: Vec<Switch>,
}

/// The block form.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Blocks {
    /// `BlockSizes`: the base size, then each higher level twice the one before.
    pub sizes: Vec<usize>,
    /// Blocks, zones of one group next to each other (Slurm pairs neighbouring blocks into the
    /// higher levels).
    pub blocks: Vec<Block>,
}

/// Everything zonemesh derived for Slurm from one tiers answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    /// The tree form.
    pub tree: Tree,
    /// The block form (`None` when no block reaches the base size).
    pub blocks: Option<Blocks>,
    /// Notes on the tree form (nodes moved or left out): comment lines and standard error.
    pub tree_notes: Vec<String>,
    /// Notes on the block form.
    pub block_notes: Vec<String>,
    /// The nodes the file must place (Slurm's, when known): a check finds any in no leaf.
    pub expected_nodes: BTreeSet<String>,
    /// Whether Slurm's node list was given (then an unknown node in the file is a warning).
    pub slurm_nodes_known: bool,
}

/// The root switch.
pub const ROOT: &str = "zonemesh";
/// The leaf of Slurm's nodes that zonemesh does not measure.
pub const UNMEASURED: &str = "zonemesh-unmeasured";
/// The leaf of the nodes `--exclude-faulty` moves out of their zone.
pub const FAULTY: &str = "zonemesh-faulty";
/// The topology names of `topology.yaml`.
pub const YAML_TREE: &str = "zonemesh-tree";
/// See [`YAML_TREE`].
pub const YAML_BLOCK: &str = "zonemesh-block";
/// Longest switch name (topology.conf(5): "cannot be longer than 64 characters").
pub const MAX_SWITCH_NAME: usize = 64;
