//! The objects zonemesh writes, built from the tiers alone (pure: no I/O, no clock).
//!
//! - **Volcano** (`topology.volcano.sh/v1alpha1`, cluster-scoped HyperNodes): one per zone (tier
//!   1, `tierName: zonemesh-zone`, its nodes as `Node` members by `exactMatch`), one per group
//!   (tier 2, `zonemesh-zone-group`, its zones' HyperNodes as `HyperNode` members) and one for the
//!   cluster (tier 3, `zonemesh-cluster`, every group); the tier names are settings. The measured figures and the time they were derived go in
//!   annotations (`zonemesh.io/...`): a HyperNode has no field for them.
//! - **Kueue**: node labels `zonemesh.io/zone-group`, `zonemesh.io/zone` and
//!   `zonemesh.io/measured=true` (for a ResourceFlavor's `nodeLabels`), and a `Topology`
//!   (`kueue.x-k8s.io/v1beta2`, `v1beta1` or `v1alpha1`: [`KueueVersion`]) whose levels run
//!   coarsest first:
//!   `zonemesh.io/zone-group`, `zonemesh.io/zone`, `kubernetes.io/hostname`.
//! - **scheduler-plugins** (`networktopology.diktyo.x-k8s.io/v1alpha1`, namespaced): a
//!   NetworkTopology whose one `weights` entry (named by `--publish-weights-name`) holds
//!   region-to-region and zone-to-zone `networkCost` from measured RTT ([`network_cost`]) and
//!   `bandwidthCapacity` from measured throughput in bit/s; the ConfigMap its
//!   `spec.configmapName` names only when [`Settings::diktyo_configmap`] asks for it.
//!
//! Every object carries `app.kubernetes.io/managed-by: zonemesh`: the writer touches nothing else.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use zonemesh_domain::{Faults, Tiers, UnixMs, ZoneName};

use crate::names::object_name;

/// The label on everything zonemesh owns.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "zonemesh");
/// Volcano's own discovery marks its HyperNodes with this label: zonemesh never touches them.
pub const VOLCANO_SOURCE_LABEL: &str = "volcano.sh/network-topology-source";
/// Node label of tier 1.
pub const ZONE_LABEL: &str = "zonemesh.io/zone";
/// Node label of tier 2.
pub const GROUP_LABEL: &str = "zonemesh.io/zone-group";
/// Node label on every node zonemesh publishes (a ResourceFlavor's `nodeLabels` can select it).
pub const MEASURED_LABEL: &str = "zonemesh.io/measured";
/// The prefix of every node label zonemesh sets.
pub const NODE_LABEL_PREFIX: &str = "zonemesh.io/";
/// Kueue's last level.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Volcano tier names by default (DNS-1123 subdomains, as a Job's `highestTierName` must be).
/// Prefixed: Volcano keeps one cluster-wide map from tier name to tier number, so a bare `zone`
/// that another HyperNode source uses at another tier would make `highestTierName: zone` mean
/// something else. `--publish-tier-names` sets others.
pub const TIER_NAMES: [&str; 3] = ["zonemesh-zone", "zonemesh-zone-group", "zonemesh-cluster"];
/// The topology keys NetworkOverhead reads.
pub const REGION_KEY: &str = "topology.kubernetes.io/region";
/// See [`REGION_KEY`].
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";
/// Lowest published cost: NetworkOverhead gives "same zone" 1 and "same node" 0, so another
/// zone must cost more.
pub const MIN_COST: i64 = 2;
/// Highest published cost: a missing entry costs NetworkOverhead's MaxCost, 100.
pub const MAX_COST: i64 = 99;
/// The RTT that costs [`MIN_COST`], µs.
pub const COST_RTT_LOW_US: f64 = 50.0;
/// The RTT that costs [`MAX_COST`], µs.
pub const COST_RTT_HIGH_US: f64 = 100_000.0;

/// Which scheduler to publish for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheduler {
    /// Volcano HyperNodes.
    Volcano,
    /// Kueue Topology and node labels.
    Kueue,
    /// scheduler-plugins' NetworkTopology (Diktyo) and its ConfigMap.
    Diktyo,
    /// Not a scheduler: what every scheduler honours, the faults acted on
    /// ([`health`](crate::health)): the node label `zonemesh.io/network-health` and, with
    /// `--taint-faulty-nodes`, the taint `zonemesh.io/network-fault`.
    Health,
}

impl Scheduler {
    /// Its `--publish` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheduler::Volcano => "volcano",
            Scheduler::Kueue => "kueue",
            Scheduler::Diktyo => "diktyo",
            Scheduler::Health => "health",
        }
    }

    /// Parses a `--publish` list (`volcano,kueue,diktyo,health`); the error names the bad entry.
    pub fn parse_list(value: &str) -> Result<Vec<Scheduler>, SettingsError> {
        let mut out = Vec::new();
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let s = match item {
                "volcano" => Scheduler::Volcano,
                "kueue" => Scheduler::Kueue,
                "diktyo" => Scheduler::Diktyo,
                "health" => Scheduler::Health,
                other => return Err(SettingsError::UnknownScheduler(other.to_owned())),
            };
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out.sort();
        Ok(out)
    }
}

/// Settings the publisher cannot use; the message names the `--publish…` flag (or the entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// An entry of a `--publish` list that names no scheduler zonemesh publishes for.
    #[error("{0:?} is none of volcano, kueue, diktyo, health")]
    UnknownScheduler(String),
    /// A name that is not a DNS-1123 subdomain.
    #[error(
        "--publish-name: {0:?} is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')"
    )]
    Name(String),
    /// A namespace that is not a DNS-1123 label.
    #[error("--publish-namespace: {0:?} is not a DNS-1123 label")]
    Namespace(String),
    /// A weights entry name that is empty or too long.
    #[error("--publish-weights-name: {0:?} must be 1 to 253 characters")]
    WeightsName(String),
    /// Taints asked for without the node health they come with.
    #[error("--taint-faulty-nodes: needs health among --publish (the taint comes with its label)")]
    TaintWithoutHealth,
    /// Tier names that are not three distinct DNS-1123 subdomains.
    #[error(
        "--publish-tier-names: {0:?} must be three distinct DNS-1123 subdomains (zone, group, cluster), comma-separated"
    )]
    TierNames(String),
}

/// Parses a `--publish-tier-names` list: three names, comma-separated (checked by
/// [`Settings::checked`]).
pub fn tier_names(value: &str) -> Result<[String; 3], SettingsError> {
    let names: Vec<String> = value.split(',').map(|s| s.trim().to_owned()).collect();
    <[String; 3]>::try_from(names).map_err(|_| SettingsError::TierNames(value.to_owned()))
}

/// Kueue's API version of `Topology`, which depends on the Kueue release:
///
/// | Kueue          | serves Topology as                                   |
/// |----------------|------------------------------------------------------|
/// | 0.9 to 0.13    | `v1alpha1` only                                      |
/// | 0.14           | `v1beta1`                                            |
/// | 0.15 and later | `v1beta2` (and `v1beta1`, deprecated: its CRD warns) |
///
/// No Kueue source read (kueue `apis/kueue/v1beta1/topology_types.go` at 01ed66fdddfa: the
/// marker `deprecatedversion`, no `unservedversion`) says in which release `v1beta1` stops being
/// served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KueueVersion {
    /// `kueue.x-k8s.io/v1beta2` (Kueue 0.15 and later).
    #[default]
    V1beta2,
    /// `kueue.x-k8s.io/v1beta1` (Kueue 0.14; deprecated from 0.15).
    V1beta1,
    /// `kueue.x-k8s.io/v1alpha1` (Kueue before 0.14).
    V1alpha1,
}

impl KueueVersion {
    /// The version part of `apiVersion`.
    pub fn as_str(self) -> &'static str {
        match self {
            KueueVersion::V1beta2 => "v1beta2",
            KueueVersion::V1beta1 => "v1beta1",
            KueueVersion::V1alpha1 => "v1alpha1",
        }
    }

    /// Parses `--publish-kueue-version`; the error names the versions there are.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "v1beta2" => Ok(KueueVersion::V1beta2),
            "v1beta1" => Ok(KueueVersion::V1beta1),
            "v1alpha1" => Ok(KueueVersion::V1alpha1),
            other => Err(format!(
                "{other:?} is none of v1beta2 (Kueue 0.15 and later), v1beta1 (0.14), v1alpha1 (before 0.14)"
            )),
        }
    }
}

/// What to publish and under which names.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The schedulers to publish for.
    pub schedulers: Vec<Scheduler>,
    /// Name of the Kueue Topology, the NetworkTopology and its ConfigMap (default `zonemesh`).
    pub name: String,
    /// Namespace of the NetworkTopology and its ConfigMap (default `zonemesh`).
    pub namespace: String,
    /// Name of the NetworkTopology's `weights` entry (default `zonemesh`).
    pub weights_name: String,
    /// Kueue's API version.
    pub kueue_version: KueueVersion,
    /// Volcano `tierName` of tiers 1, 2 and 3 ([`TIER_NAMES`] by default).
    pub tier_names: [String; 3],
    /// Whether to write the ConfigMap that the NetworkTopology's `spec.configmapName` names.
    /// Off by default: scheduler-plugins' networktopology controller skips a NetworkTopology
    /// whose ConfigMap does not exist, and once it exists, rewrites `spec.weights` from netperf
    /// keys the map does not hold (costs 0); NetworkOverhead never reads the map.
    pub diktyo_configmap: bool,
    /// With `health`: taint the nodes at fault (`--taint-faulty-nodes` and its flags); `None`:
    /// no taints.
    pub taint: Option<crate::health::TaintSettings>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            schedulers: vec![Scheduler::Volcano, Scheduler::Kueue, Scheduler::Diktyo],
            name: "zonemesh".into(),
            namespace: "zonemesh".into(),
            weights_name: "zonemesh".into(),
            kueue_version: KueueVersion::default(),
            tier_names: TIER_NAMES.map(String::from),
            diktyo_configmap: false,
            taint: None,
        }
    }
}

impl Settings {
    /// Checks the names: `name` a DNS-1123 subdomain, `namespace` a DNS-1123 label,
    /// `weights_name` not empty. The error names the flag.
    pub fn checked(self) -> Result<Self, SettingsError> {
        if !crate::names::is_dns1123_subdomain(&self.name) {
            return Err(SettingsError::Name(self.name));
        }
        if !crate::names::is_dns1123_label(&self.namespace) {
            return Err(SettingsError::Namespace(self.namespace));
        }
        if self.weights_name.is_empty() || self.weights_name.len() > 253 {
            return Err(SettingsError::WeightsName(self.weights_name));
        }
        let t = &self.tier_names;
        if t.iter().any(|n| !crate::names::is_dns1123_subdomain(n))
            || t[0] == t[1]
            || t[1] == t[2]
            || t[0] == t[2]
        {
            return Err(SettingsError::TierNames(t.join(",")));
        }
        if self.taint.is_some() && !self.schedulers.contains(&Scheduler::Health) {
            return Err(SettingsError::TaintWithoutHealth);
        }
        Ok(self)
    }
}

/// The kinds zonemesh writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `topology.volcano.sh/v1alpha1` HyperNode.
    HyperNode,
    /// `kueue.x-k8s.io` Topology.
    KueueTopology,
    /// `networktopology.diktyo.x-k8s.io/v1alpha1` NetworkTopology.
    NetworkTopology,
    /// The NetworkTopology's ConfigMap.
    ConfigMap,
}

impl Kind {
    /// API group (empty for core).
    pub fn group(self) -> &'static str {
        match self {
            Kind::HyperNode => "topology.volcano.sh",
            Kind::KueueTopology => "kueue.x-k8s.io",
            Kind::NetworkTopology => "networktopology.diktyo.x-k8s.io",
            Kind::ConfigMap => "",
        }
    }

    /// Resource plural.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::HyperNode => "hypernodes",
            Kind::KueueTopology => "topologies",
            Kind::NetworkTopology => "networktopologies",
            Kind::ConfigMap => "configmaps",
        }
    }

    /// `kind`.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::HyperNode => "HyperNode",
            Kind::KueueTopology => "Topology",
            Kind::NetworkTopology => "NetworkTopology",
            Kind::ConfigMap => "ConfigMap",
        }
    }

    /// Whether objects of the kind live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(self, Kind::NetworkTopology | Kind::ConfigMap)
    }

    /// The kinds a scheduler needs.
    pub fn of(scheduler: Scheduler) -> &'static [Kind] {
        match scheduler {
            Scheduler::Volcano => &[Kind::HyperNode],
            Scheduler::Kueue => &[Kind::KueueTopology],
            Scheduler::Diktyo => &[Kind::NetworkTopology, Kind::ConfigMap],
            Scheduler::Health => &[],
        }
    }
}

/// One object to write: its identity and its whole manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// Kind.
    pub kind: Kind,
    /// `apiVersion`.
    pub api_version: String,
    /// Name.
    pub name: String,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// The manifest (`apiVersion`, `kind`, `metadata`, `spec` or `data`).
    pub manifest: Value,
}

/// Everything zonemesh would write for some tiers (and, for `health`, the open faults).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Desired {
    /// Objects, in writing order (by kind, then name).
    pub objects: Vec<Object>,
    /// The `zonemesh.io/` labels of each node (Kueue; `health` adds
    /// [`HEALTH_LABEL`](crate::health::HEALTH_LABEL) with [`apply_health`]).
    pub node_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// The kinds this configuration manages (objects of them that are not desired are deleted).
    pub kinds: Vec<Kind>,
    /// Whether node labels are managed.
    pub labels_nodes: bool,
    /// The nodes to carry zonemesh's taint; every other node's is removed. `None`: taints are
    /// left as they are (not asked for, or not to be changed now).
    pub taints: Option<BTreeMap<String, crate::health::Taint>>,
    /// The taint's effect.
    pub taint_effect: crate::health::TaintEffect,
}

/// The NetworkOverhead cost of an RTT: `2 + 97 · ln(rtt / 50 µs) / ln(2000)`, rounded and held
/// in 2..=99. Logarithmic, so that 100 µs (11) and 200 µs (20) stay apart and 2 ms (49) is
/// still told from 10 ms (70); 50 µs and less cost 2, 100 ms and more 99.
pub fn network_cost(rtt_us: f64) -> i64 {
    if rtt_us.is_nan() || rtt_us <= COST_RTT_LOW_US {
        return MIN_COST;
    }
    let span = (MAX_COST - MIN_COST) as f64;
    let x = (rtt_us / COST_RTT_LOW_US).ln() / (COST_RTT_HIGH_US / COST_RTT_LOW_US).ln();
    (MIN_COST + (span * x).round() as i64).clamp(MIN_COST, MAX_COST)
}

/// A throughput as a canonical Kubernetes quantity in bit/s, to the Mbit/s (`956M`, `10G`);
/// `None` below 0.5 Mbit/s.
pub fn bandwidth_quantity(bps: f64) -> Option<String> {
    let mut v = (bps / 1e6).round();
    if v.is_nan() || v < 1.0 || !v.is_finite() {
        return None;
    }
    let mut suffix = 0;
    const SUFFIXES: [&str; 4] = ["M", "G", "T", "P"];
    while suffix + 1 < SUFFIXES.len() && v % 1000.0 == 0.0 {
        v /= 1000.0;
        suffix += 1;
    }
    Some(format!("{}{}", v as u64, SUFFIXES[suffix]))
}

/// Whether a zone's name could be read as one of zonemesh's other HyperNodes' (`group-<...>`,
/// `cluster`) or as another zone's mapped name (`zone-` followed by such a name).
fn zone_name_reserved(zone: &str) -> bool {
    zone.starts_with("group-")
        || zone == "cluster"
        || zone.strip_prefix("zone-").is_some_and(zone_name_reserved)
}

/// Name of a zone's HyperNode: `zonemesh-<zone>` (zone `zone-a` gives `zonemesh-zone-a`, read
/// once); `zonemesh-zone-<zone>` for a zone whose name is `cluster`, starts with `group-`, or is
/// `zone-` before such a name, so that no zone takes a group's or the cluster's name and no two
/// zones share one. Depends on the zone's name alone. (Before, every zone was
/// `zonemesh-zone-<zone>`: the writer deletes those old objects, which zonemesh owns, as no
/// longer derived.)
pub fn zone_hypernode(zone: &ZoneName) -> String {
    let prefix = if zone_name_reserved(zone.as_str()) {
        "zonemesh-zone-"
    } else {
        "zonemesh-"
    };
    object_name(prefix, zone.as_str())
}

/// Name of a group's HyperNode.
pub fn group_hypernode(group: &ZoneName) -> String {
    object_name("zonemesh-", group.as_str())
}

/// Name of the cluster's HyperNode.
pub const CLUSTER_HYPERNODE: &str = "zonemesh-cluster";

fn rfc3339(t: UnixMs) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(t.0)
        .map(|ts| ts.to_string())
        .unwrap_or_default()
}

fn labels() -> Value {
    json!({ MANAGED_BY.0: MANAGED_BY.1 })
}

fn figure(v: f64) -> String {
    format!("{v:.0}")
}

fn hypernode(
    name: &str,
    tier: usize,
    tier_name: &str,
    members: Vec<Value>,
    annotations: Value,
) -> Object {
    Object {
        kind: Kind::HyperNode,
        api_version: "topology.volcano.sh/v1alpha1".into(),
        name: name.to_owned(),
        namespace: None,
        manifest: json!({
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name, "labels": labels(), "annotations": annotations},
            "spec": {"tier": tier, "tierName": tier_name, "members": members},
        }),
    }
}

fn member(kind: &str, name: &str) -> Value {
    json!({"type": kind, "selector": {"exactMatch": {"name": name}}})
}

fn volcano(tiers: &Tiers, settings: &Settings) -> Vec<Object> {
    let tier_name = |tier: usize| settings.tier_names[tier - 1].as_str();
    let at = rfc3339(tiers.computed_at);
    let mut out = Vec::new();
    for z in &tiers.zones {
        let mut a = serde_json::Map::new();
        a.insert("zonemesh.io/measured-at".into(), at.clone().into());
        a.insert("zonemesh.io/zone".into(), z.name.as_str().into());
        a.insert("zonemesh.io/fresh".into(), z.fresh.to_string().into());
        if let Some(r) = z.rtt_us {
            a.insert("zonemesh.io/rtt-us".into(), figure(r).into());
        }
        if let Some(t) = z.throughput_bps {
            a.insert("zonemesh.io/throughput-bps".into(), figure(t).into());
        }
        let members = z.nodes.iter().map(|n| member("Node", n.as_str())).collect();
        out.push(hypernode(
            &zone_hypernode(&z.name),
            1,
            tier_name(1),
            members,
            Value::Object(a),
        ));
    }
    for g in &tiers.groups {
        let mut a = serde_json::Map::new();
        a.insert("zonemesh.io/measured-at".into(), at.clone().into());
        a.insert("zonemesh.io/zone-group".into(), g.name.as_str().into());
        a.insert("zonemesh.io/held".into(), g.held.to_string().into());
        if let Some(w) = &g.inside.worst_rtt {
            a.insert("zonemesh.io/worst-rtt-us".into(), figure(w.value).into());
        }
        if let Some(w) = &g.inside.lowest_throughput {
            a.insert(
                "zonemesh.io/lowest-throughput-bps".into(),
                figure(w.value).into(),
            );
        }
        if let Some(n) = &g.nearest {
            a.insert("zonemesh.io/nearest-group".into(), n.group.as_str().into());
            a.insert("zonemesh.io/nearest-cut".into(), n.cut.as_str().into());
            if let Some(w) = &n.figures.worst_rtt {
                a.insert("zonemesh.io/nearest-rtt-us".into(), figure(w.value).into());
            }
        }
        let mut zones: Vec<String> = g.zones.iter().map(zone_hypernode).collect();
        zones.sort();
        let members = zones.iter().map(|z| member("HyperNode", z)).collect();
        out.push(hypernode(
            &group_hypernode(&g.name),
            2,
            tier_name(2),
            members,
            Value::Object(a),
        ));
    }
    if !tiers.groups.is_empty() {
        let mut a = serde_json::Map::new();
        a.insert("zonemesh.io/measured-at".into(), at.into());
        if let Some(w) = &tiers.cluster.worst_rtt {
            a.insert("zonemesh.io/worst-rtt-us".into(), figure(w.value).into());
        }
        let mut groups: Vec<String> = tiers
            .groups
            .iter()
            .map(|g| group_hypernode(&g.name))
            .collect();
        groups.sort();
        let members = groups.iter().map(|g| member("HyperNode", g)).collect();
        out.push(hypernode(
            CLUSTER_HYPERNODE,
            3,
            tier_name(3),
            members,
            Value::Object(a),
        ));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn kueue(settings: &Settings) -> Object {
    let api_version = format!("kueue.x-k8s.io/{}", settings.kueue_version.as_str());
    Object {
        kind: Kind::KueueTopology,
        api_version: api_version.clone(),
        name: settings.name.clone(),
        namespace: None,
        manifest: json!({
            "apiVersion": api_version,
            "kind": "Topology",
            "metadata": {"name": settings.name, "labels": labels()},
            "spec": {"levels": [
                {"nodeLabel": GROUP_LABEL},
                {"nodeLabel": ZONE_LABEL},
                {"nodeLabel": HOSTNAME_LABEL},
            ]},
        }),
    }
}

/// An example ResourceFlavor for the Kueue Topology (zonemesh does not write it: it is the
/// user's, and immutable once it names a topology).
pub fn resource_flavor_example(settings: &Settings) -> Value {
    json!({
        "apiVersion": format!("kueue.x-k8s.io/{}", settings.kueue_version.as_str()),
        "kind": "ResourceFlavor",
        "metadata": {"name": format!("{}-tas", settings.name)},
        "spec": {
            "nodeLabels": {MEASURED_LABEL: "true"},
            "topologyName": settings.name,
        },
    })
}

fn node_labels(tiers: &Tiers) -> BTreeMap<String, BTreeMap<String, String>> {
    tiers
        .nodes()
        .map(|(zone, node)| {
            let labels = BTreeMap::from([
                (GROUP_LABEL.to_owned(), zone.group.to_string()),
                (ZONE_LABEL.to_owned(), zone.name.to_string()),
                (MEASURED_LABEL.to_owned(), "true".to_owned()),
            ]);
            (node.to_string(), labels)
        })
        .collect()
}

/// Per origin, per destination: (RTT µs, throughput bit/s).
type Costs = BTreeMap<String, BTreeMap<String, (Option<f64>, Option<f64>)>>;

fn cost_entries(origins: &Costs) -> Vec<Value> {
    origins
        .iter()
        .map(|(origin, dests)| {
            let costs: Vec<Value> = dests
                .iter()
                .filter_map(|(dest, (rtt, tput))| {
                    let rtt = (*rtt)?;
                    let mut c = serde_json::Map::new();
                    c.insert("destination".into(), dest.as_str().into());
                    c.insert("networkCost".into(), network_cost(rtt).into());
                    if let Some(q) = tput.and_then(bandwidth_quantity) {
                        c.insert("bandwidthCapacity".into(), q.into());
                    }
                    Some(Value::Object(c))
                })
                .collect();
            json!({"origin": origin, "costList": costs})
        })
        .collect()
}

fn diktyo(tiers: &Tiers, settings: &Settings) -> Vec<Object> {
    // Zone to zone, both ways, from every pair with an RTT.
    let mut zones: Costs = BTreeMap::new();
    // Region to region: the worst RTT and the lowest throughput among their zones' pairs.
    let mut regions: Costs = BTreeMap::new();
    let region_of: BTreeMap<&ZoneName, Option<&ZoneName>> = tiers
        .zones
        .iter()
        .map(|z| (&z.name, z.region.as_ref()))
        .collect();
    for z in &tiers.zones {
        zones.entry(z.name.to_string()).or_default();
    }
    for p in &tiers.pairs {
        if p.rtt_us.is_none() {
            continue;
        }
        for (a, b) in [(&p.a, &p.b), (&p.b, &p.a)] {
            zones
                .entry(a.to_string())
                .or_default()
                .insert(b.to_string(), (p.rtt_us, p.throughput_bps));
        }
        if let (Some(Some(ra)), Some(Some(rb))) = (region_of.get(&p.a), region_of.get(&p.b))
            && ra != rb
        {
            for (a, b) in [(ra, rb), (rb, ra)] {
                let e = regions
                    .entry(a.to_string())
                    .or_default()
                    .entry(b.to_string())
                    .or_insert((None, None));
                e.0 = Some(e.0.map_or(p.rtt_us.unwrap_or(0.0), |r: f64| {
                    r.max(p.rtt_us.unwrap_or(0.0))
                }));
                e.1 = match (e.1, p.throughput_bps) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, None) => x,
                    (None, y) => y,
                };
            }
        }
    }
    // Sorted by topologyKey (region < zone) and origin: NetworkOverhead searches them by
    // binary search.
    let mut topology_list = Vec::new();
    if !regions.is_empty() {
        topology_list
            .push(json!({"topologyKey": REGION_KEY, "originList": cost_entries(&regions)}));
    }
    topology_list.push(json!({"topologyKey": ZONE_KEY, "originList": cost_entries(&zones)}));
    let nt = Object {
        kind: Kind::NetworkTopology,
        api_version: "networktopology.diktyo.x-k8s.io/v1alpha1".into(),
        name: settings.name.clone(),
        namespace: Some(settings.namespace.clone()),
        manifest: json!({
            "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
            "kind": "NetworkTopology",
            "metadata": {
                "name": settings.name, "namespace": settings.namespace, "labels": labels(),
                "annotations": {"zonemesh.io/measured-at": rfc3339(tiers.computed_at)},
            },
            "spec": {
                "configmapName": settings.name,
                "weights": [{"name": settings.weights_name, "topologyList": topology_list}],
            },
        }),
    };
    let cm = Object {
        kind: Kind::ConfigMap,
        api_version: "v1".into(),
        name: settings.name.clone(),
        namespace: Some(settings.namespace.clone()),
        manifest: json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": settings.name, "namespace": settings.namespace, "labels": labels()},
            "data": {
                "scale": "networkCost = 2 + 97 * ln(rtt / 50us) / ln(2000), rounded, held in 2..99 \
                          (same zone costs 1 in NetworkOverhead, a missing entry 100); \
                          bandwidthCapacity in bit/s from measured throughput",
                "source": "zonemesh: measured RTT and throughput between zones",
            },
        }),
    };
    if settings.diktyo_configmap {
        vec![nt, cm]
    } else {
        vec![nt]
    }
}

/// Everything to write for `tiers` under `settings`.
pub fn desired(tiers: &Tiers, settings: &Settings) -> Desired {
    let mut out = Desired::default();
    for s in &settings.schedulers {
        out.kinds.extend(Kind::of(*s));
        match s {
            Scheduler::Volcano => out.objects.extend(volcano(tiers, settings)),
            Scheduler::Kueue => {
                out.objects.push(kueue(settings));
                out.node_labels = node_labels(tiers);
                out.labels_nodes = true;
            }
            Scheduler::Diktyo => out.objects.extend(diktyo(tiers, settings)),
            // The labels need the faults: `apply_health`.
            Scheduler::Health => out.labels_nodes = true,
        }
    }
    out.kinds.sort();
    out.objects
        .sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    out
}

/// Adds what `health` publishes to `d` (nothing without it among the settings' targets): every
/// node's label and, when taints are asked for and `tainted` (the nodes that carry zonemesh's
/// taint now) is given, the taints of [`plan`](crate::health::plan), which it returns. Without `tainted` the taints
/// are left as they are (warming up, or the store failing).
pub fn apply_health(
    d: &mut Desired,
    tiers: &Tiers,
    faults: &Faults,
    settings: &Settings,
    tainted: Option<&BTreeSet<String>>,
) -> Option<crate::health::TaintPlan> {
    if !settings.schedulers.contains(&Scheduler::Health) {
        return None;
    }
    for (node, health) in crate::health::node_health(tiers, faults) {
        d.node_labels.entry(node).or_default().insert(
            crate::health::HEALTH_LABEL.to_owned(),
            health.as_str().to_owned(),
        );
    }
    let taint = settings.taint?;
    d.taint_effect = taint.effect;
    let plan = crate::health::plan(tiers, faults, taint.max, tainted?);
    d.taints = Some(plan.taint.clone());
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_scale_keeps_small_differences_apart_within_2_to_99() {
        let table: Vec<(f64, i64)> = [
            10.0, 50.0, 100.0, 200.0, 500.0, 1_000.0, 2_000.0, 10_000.0, 1e5, 1e7,
        ]
        .iter()
        .map(|r| (*r, network_cost(*r)))
        .collect();
        assert_eq!(
            table.iter().map(|t| t.1).collect::<Vec<_>>(),
            [2, 2, 11, 20, 31, 40, 49, 70, 99, 99]
        );
        assert_eq!(network_cost(f64::NAN), MIN_COST);
        assert!(network_cost(120.0) < network_cost(180.0), "sub-ms apart");
    }

    #[test]
    fn bandwidth_is_a_canonical_quantity_in_bits() {
        assert_eq!(bandwidth_quantity(956.4e6).as_deref(), Some("956M"));
        assert_eq!(bandwidth_quantity(10e9).as_deref(), Some("10G"));
        assert_eq!(bandwidth_quantity(1e12).as_deref(), Some("1T"));
        assert_eq!(bandwidth_quantity(0.2e6), None);
    }

    #[test]
    fn publish_lists_parse_and_refuse_unknown_schedulers() {
        assert_eq!(
            Scheduler::parse_list("kueue, volcano,kueue").unwrap(),
            [Scheduler::Volcano, Scheduler::Kueue]
        );
        assert_eq!(
            Scheduler::parse_list("volcano,slurm").unwrap_err(),
            SettingsError::UnknownScheduler("slurm".into())
        );
        assert_eq!(
            Scheduler::parse_list("slurm").unwrap_err().to_string(),
            "\"slurm\" is none of volcano, kueue, diktyo, health"
        );
        assert_eq!(
            Scheduler::parse_list("health,kueue").unwrap(),
            [Scheduler::Kueue, Scheduler::Health]
        );
        assert!(Scheduler::parse_list("").unwrap().is_empty());
        let taint_alone = Settings {
            schedulers: vec![Scheduler::Kueue],
            taint: Some(crate::health::TaintSettings::default()),
            ..Settings::default()
        };
        assert_eq!(
            taint_alone.checked().unwrap_err().to_string(),
            "--taint-faulty-nodes: needs health among --publish (the taint comes with its label)"
        );
    }

    /// `apply_health` on the tiers and faults of `health`'s own tests.
    mod health {
        use std::collections::BTreeSet;

        use zonemesh_domain::{Element, FaultKind, Severity};

        use super::super::*;
        use crate::health::tests::{fault, faults, node, tiers};

        #[test]
        fn apply_labels_every_node_and_leaves_taints_alone_until_it_may_change_them() {
            let f = faults(vec![fault(
                Element::Node(node("a2")),
                FaultKind::Loss,
                Severity::Down,
                1,
            )]);
            let mut settings = Settings {
                schedulers: vec![Scheduler::Kueue],
                ..Settings::default()
            };
            let mut d = Desired::default();
            assert_eq!(apply_health(&mut d, &tiers(), &f, &settings, None), None);
            assert!(d.node_labels.is_empty(), "no health among the targets");
            settings.schedulers.push(Scheduler::Health);
            apply_health(&mut d, &tiers(), &f, &settings, Some(&BTreeSet::new()));
            assert_eq!(d.node_labels.len(), 8);
            assert_eq!(d.node_labels["a2"][crate::health::HEALTH_LABEL], "down");
            assert_eq!(d.taints, None, "taints not asked for");
            settings.taint = Some(crate::health::TaintSettings::default());
            let mut d = Desired::default();
            assert_eq!(apply_health(&mut d, &tiers(), &f, &settings, None), None);
            assert_eq!(d.taints, None, "warming up: taints stay as they are");
            let p = apply_health(&mut d, &tiers(), &f, &settings, Some(&BTreeSet::new())).unwrap();
            assert_eq!(d.taints, Some(p.taint));
            assert_eq!(d.taints.unwrap().keys().collect::<Vec<_>>(), ["a2"]);
        }
    }
}
