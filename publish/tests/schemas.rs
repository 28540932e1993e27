//! Every object zonemesh writes, checked against the rules of its CRD's published schema, written
//! here by hand (no API server can run on these machines). The versions read (through the search
//! tool's stored copies of the projects' files; see /work/notes/issue19-research.md):
//!
//! - HyperNode `topology.volcano.sh/v1alpha1`: volcano-sh/volcano
//!   `config/crd/volcano/bases/topology.volcano.sh_hypernodes.yaml` at commit 178acf02f7b6
//!   (controller-gen v0.18.0; the markers of volcano-sh/apis PR #207, Dec 2025, the strictest
//!   version), and the website's `hypernode.md` (daafdb755bef) and
//!   `network_topology_aware_scheduling.md` (0b30336405ca) for the rules that are documentation,
//!   not CEL (HyperNode members by `exactMatch` only, no mixed member types, one parent, no cycles).
//! - Kueue `Topology`: kubernetes-sigs/kueue `apis/kueue/v1beta2/topology_types.go` at 1f6b5c71c122
//!   and `apis/kueue/v1beta1/topology_types.go` at e03267fdbcff; `ResourceFlavor`:
//!   `apis/kueue/v1beta2/resourceflavor_types.go` at 38aefec9a72d.
//! - NetworkTopology `networktopology.diktyo.x-k8s.io/v1alpha1`: kubernetes-sigs/scheduler-plugins
//!   `manifests/networktopology/crd.yaml` at df958ed1dc94 (controller-gen v0.14.0); the plugin's
//!   lookups in `pkg/networkaware/networkoverhead/networkoverhead.go` at 321447b493ba.
//! - Names, label keys and values: kubernetes/apimachinery `pkg/util/validation/validation.go`.
//! - Kueue `v1alpha1` Topology (Kueue before 0.14): the same `spec.levels` rules as v1beta1 (the
//!   issue's validation against the CRDs); `v1beta1` at 01ed66fdddfa carries
//!   `deprecatedversion` and no `unservedversion`.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use serde_json::Value;
use zonemesh_domain::{
    CutFigures, NodeName, PairFigure, TierGroup, TierZone, Tiers, UnixMs, ZoneName, ZonePair,
};
use zonemesh_publish::names::{
    is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name,
};
use zonemesh_publish::objects::{
    Kind, KueueVersion, MAX_COST, MIN_COST, Scheduler, Settings, desired, resource_flavor_example,
    zone_hypernode,
};

type Check = Result<(), String>;

fn fail<T>(what: impl Into<String>) -> Result<T, String> {
    Err(what.into())
}

fn string<'a>(v: &'a Value, path: &str) -> Result<&'a str, String> {
    v.as_str()
        .ok_or_else(|| format!("{path}: not a string: {v}"))
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a serde_json::Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{path}: not an object: {v}"))
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, String> {
    v.as_array()
        .ok_or_else(|| format!("{path}: not an array: {v}"))
}

/// Fields outside `allowed` would be pruned by the API server (or refused under strict field
/// validation): zonemesh writes none.
fn only_fields(v: &Value, path: &str, allowed: &[&str]) -> Check {
    for k in object(v, path)?.keys() {
        if !allowed.contains(&k.as_str()) {
            return fail(format!("{path}.{k}: not in the schema"));
        }
    }
    Ok(())
}

/// ObjectMeta as the API server validates it: the name (a DNS-1123 subdomain for every custom
/// resource and ConfigMap), the namespace (a DNS-1123 label), label keys and values, annotation
/// keys and their total size (256 KiB).
fn check_metadata(o: &Value, namespaced: bool) -> Check {
    let m = &o["metadata"];
    let name = string(&m["name"], "metadata.name")?;
    if !is_dns1123_subdomain(name) {
        return fail(format!(
            "metadata.name {name:?} is not a DNS-1123 subdomain"
        ));
    }
    match (namespaced, m.get("namespace")) {
        (true, Some(ns)) if is_dns1123_label(string(ns, "metadata.namespace")?) => {}
        (true, other) => return fail(format!("metadata.namespace {other:?}")),
        (false, None) => {}
        (false, Some(ns)) => return fail(format!("a cluster-scoped object with namespace {ns}")),
    }
    if let Some(labels) = m.get("labels") {
        for (k, v) in object(labels, "metadata.labels")? {
            let v = string(v, "label value")?;
            if !is_qualified_name(k) || !is_label_value(v) {
                return fail(format!("label {k}={v}"));
            }
        }
    }
    if m["labels"]["app.kubernetes.io/managed-by"] != "zonemesh" {
        return fail("not labelled app.kubernetes.io/managed-by=zonemesh");
    }
    if let Some(annotations) = m.get("annotations") {
        let mut total = 0;
        for (k, v) in object(annotations, "metadata.annotations")? {
            if !is_qualified_name(&k.to_ascii_lowercase()) {
                return fail(format!("annotation key {k}"));
            }
            total += k.len() + string(v, "annotation value")?.len();
        }
        if total > 256 * 1024 {
            return fail(format!("annotations take {total} bytes"));
        }
    }
    Ok(())
}

/// HyperNode (volcano 178acf02).
fn check_hypernode(o: &Value) -> Check {
    check_metadata(o, false)?;
    only_fields(o, "", &["apiVersion", "kind", "metadata", "spec"])?;
    let spec = &o["spec"];
    only_fields(spec, "spec", &["tier", "tierName", "members"])?;
    // spec.tier: integer, required, minimum 0.
    let tier = spec["tier"].as_i64().ok_or("spec.tier: required integer")?;
    if tier < 0 {
        return fail("spec.tier: minimum 0");
    }
    // spec.tierName: string, maxLength 253. zonemesh's names must also be usable as a Job's
    // networkTopology.highestTierName, a DNS-1123 subdomain.
    if let Some(t) = spec.get("tierName") {
        let t = string(t, "spec.tierName")?;
        if t.len() > 253 || !is_dns1123_subdomain(t) {
            return fail(format!("spec.tierName {t:?}"));
        }
    }
    if let Some(members) = spec.get("members") {
        let members = array(members, "spec.members")?;
        // minItems: 1.
        if members.is_empty() {
            return fail("spec.members: minItems 1");
        }
        let mut types = BTreeSet::new();
        for (i, m) in members.iter().enumerate() {
            let at = format!("spec.members[{i}]");
            only_fields(m, &at, &["type", "selector"])?;
            // type: required, enum Node | HyperNode.
            let t = string(&m["type"], &format!("{at}.type"))?;
            if !["Node", "HyperNode"].contains(&t) {
                return fail(format!("{at}.type {t:?} is not in the enum"));
            }
            types.insert(t);
            if let Some(sel) = m.get("selector") {
                let at = format!("{at}.selector");
                only_fields(sel, &at, &["exactMatch", "regexMatch", "labelMatch"])?;
                let has = |k: &str| sel.get(k).is_some();
                // CEL: has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)
                if !(has("exactMatch") || has("regexMatch") || has("labelMatch")) {
                    return fail(format!(
                        "{at}: Either ExactMatch or RegexMatch or LabelMatch must be specified"
                    ));
                }
                // CEL: (has(exactMatch)?1:0) + (has(regexMatch)?1:0) + (has(labelMatch)?1:0) <= 1
                let n = ["exactMatch", "regexMatch", "labelMatch"]
                    .iter()
                    .filter(|k| has(k))
                    .count();
                if n > 1 {
                    return fail(format!(
                        "{at}: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
                    ));
                }
                if let Some(e) = sel.get("exactMatch") {
                    only_fields(e, &format!("{at}.exactMatch"), &["name"])?;
                    // name: required, 1..=253, DNS-1123 subdomain pattern.
                    let name = string(&e["name"], &format!("{at}.exactMatch.name"))?;
                    if name.is_empty() || name.len() > 253 || !is_dns1123_subdomain(name) {
                        return fail(format!("{at}.exactMatch.name {name:?}"));
                    }
                }
                // Documentation (website hypernode.md): HyperNode members use exactMatch only.
                if t == "HyperNode" && !has("exactMatch") {
                    return fail(format!("{at}: a HyperNode member must use exactMatch"));
                }
            }
        }
        // Documentation: a leaf (Node members) has no HyperNode members.
        if types.len() > 1 {
            return fail("spec.members: Node and HyperNode members mixed");
        }
    }
    Ok(())
}

/// The rules across HyperNodes (website docs): every HyperNode member exists, one parent each, a
/// member's tier below its parent's, no cycles (implied by the tiers).
fn check_hypernode_tree(objects: &[&Value]) -> Check {
    let tiers: BTreeMap<&str, i64> = objects
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap(),
                o["spec"]["tier"].as_i64().unwrap(),
            )
        })
        .collect();
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut node_parent: BTreeMap<&str, &str> = BTreeMap::new();
    for o in objects {
        let name = o["metadata"]["name"].as_str().unwrap();
        for m in o["spec"]["members"].as_array().into_iter().flatten() {
            let child = m["selector"]["exactMatch"]["name"].as_str().unwrap();
            let parents = if m["type"] == "HyperNode" {
                &mut parent
            } else {
                &mut node_parent
            };
            if let Some(other) = parents.insert(child, name) {
                return fail(format!("{child} has two parents: {other} and {name}"));
            }
            if m["type"] == "HyperNode" {
                let Some(t) = tiers.get(child) else {
                    return fail(format!("{name} names a missing HyperNode {child}"));
                };
                if *t >= tiers[name] {
                    return fail(format!(
                        "{child} (tier {t}) under {name} (tier {})",
                        tiers[name]
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Kueue Topology (v1beta2 1f6b5c71, v1beta1 e03267fd: the same rules).
fn check_kueue_topology(o: &Value) -> Check {
    check_metadata(o, false)?;
    only_fields(&o["spec"], "spec", &["levels"])?;
    let levels = array(&o["spec"]["levels"], "spec.levels")?;
    // MinItems 1, MaxItems 16.
    if levels.is_empty() || levels.len() > 16 {
        return fail(format!(
            "spec.levels: {} items, 1..=16 allowed",
            levels.len()
        ));
    }
    let pattern_ok = |s: &str| is_qualified_name(s);
    let mut labels = Vec::new();
    for (i, l) in levels.iter().enumerate() {
        only_fields(l, &format!("spec.levels[{i}]"), &["nodeLabel"])?;
        let label = string(&l["nodeLabel"], "nodeLabel")?;
        // MinLength 1, MaxLength 316, a qualified name (the pattern; the 63-character name part
        // is checked too, which the pattern does not).
        if label.is_empty() || label.len() > 316 || !pattern_ok(label) {
            return fail(format!("spec.levels[{i}].nodeLabel {label:?}"));
        }
        labels.push(label);
    }
    // CEL: size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0 — "must be unique".
    if labels.iter().collect::<BTreeSet<_>>().len() != labels.len() {
        return fail("spec.levels: must be unique");
    }
    // CEL: hostname only at the lowest level.
    if labels.contains(&"kubernetes.io/hostname")
        && labels.last() != Some(&"kubernetes.io/hostname")
    {
        return fail(
            "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        );
    }
    Ok(())
}

/// Kueue ResourceFlavor (v1beta2 38aefec9), the example zonemesh documents.
fn check_resource_flavor(o: &Value) -> Check {
    let spec = &o["spec"];
    let labels = object(&spec["nodeLabels"], "spec.nodeLabels")?;
    // MaxProperties 8; the webhook validates them as labels.
    if labels.len() > 8 {
        return fail("spec.nodeLabels: at most 8");
    }
    for (k, v) in labels {
        if !is_qualified_name(k) || !is_label_value(string(v, "nodeLabels value")?) {
            return fail(format!("spec.nodeLabels {k}"));
        }
    }
    // CEL: !has(self.topologyName) || self.nodeLabels.size() >= 1
    if spec.get("topologyName").is_some() && labels.is_empty() {
        return fail("at least one nodeLabel is required when topology is set");
    }
    let t = string(&spec["topologyName"], "spec.topologyName")?;
    if t.len() > 253 || !is_dns1123_subdomain(t) {
        return fail("spec.topologyName: DNS-1123 subdomain");
    }
    Ok(())
}

/// Kubernetes quantity (the CRD's pattern).
fn is_quantity(s: &str) -> bool {
    let body = s.trim_start_matches(['+', '-']);
    let digits_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(digits_end);
    let number_ok = !number.is_empty()
        && number.matches('.').count() <= 1
        && number != "."
        && number
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.');
    let suffix_ok = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    );
    number_ok && suffix_ok
}

/// NetworkTopology (scheduler-plugins df958ed1) and what NetworkOverhead needs of it.
fn check_network_topology(o: &Value, settings: &Settings, zones: &BTreeSet<String>) -> Check {
    check_metadata(o, true)?;
    only_fields(o, "", &["apiVersion", "kind", "metadata", "spec"])?;
    let spec = &o["spec"];
    only_fields(spec, "spec", &["configmapName", "weights"])?;
    // required: configmapName (string), weights (array).
    string(&spec["configmapName"], "spec.configmapName")?;
    let weights = array(&spec["weights"], "spec.weights")?;
    let ours: Vec<&Value> = weights
        .iter()
        .filter(|w| w["name"] == settings.weights_name.as_str())
        .collect();
    if ours.len() != 1 {
        return fail("exactly one weights entry named --publish-weights-name");
    }
    for (wi, w) in weights.iter().enumerate() {
        only_fields(w, &format!("weights[{wi}]"), &["name", "topologyList"])?;
        string(&w["name"], "weights.name")?;
        let list = array(&w["topologyList"], "topologyList")?;
        let keys: Vec<&str> = list
            .iter()
            .map(|t| t["topologyKey"].as_str().unwrap_or(""))
            .collect();
        // NetworkOverhead searches topologyList by binary search on topologyKey.
        if !keys.is_sorted() {
            return fail(format!("topologyList not sorted: {keys:?}"));
        }
        for t in list {
            only_fields(t, "topologyList[]", &["topologyKey", "originList"])?;
            let key = string(&t["topologyKey"], "topologyKey")?;
            // The keys NetworkOverhead reads.
            if ![
                "topology.kubernetes.io/region",
                "topology.kubernetes.io/zone",
            ]
            .contains(&key)
            {
                return fail(format!("topologyKey {key:?} is never read"));
            }
            let origins = array(&t["originList"], "originList")?;
            let names: Vec<&str> = origins
                .iter()
                .map(|x| x["origin"].as_str().unwrap_or(""))
                .collect();
            if !names.is_sorted() {
                return fail(format!("originList not sorted: {names:?}"));
            }
            for origin in origins {
                only_fields(origin, "originList[]", &["origin", "costList"])?;
                let from = string(&origin["origin"], "origin")?;
                if key.ends_with("/zone") && !zones.contains(from) {
                    return fail(format!("origin {from} is no zone"));
                }
                for c in origin["costList"].as_array().into_iter().flatten() {
                    only_fields(
                        c,
                        "costList[]",
                        &[
                            "destination",
                            "networkCost",
                            "bandwidthCapacity",
                            "bandwidthAllocated",
                        ],
                    )?;
                    let to = string(&c["destination"], "destination")?;
                    if to == from {
                        return fail(format!(
                            "a cost from {from} to itself (same zone is the plugin's 1)"
                        ));
                    }
                    // networkCost: integer (int64), minimum 0; zonemesh's scale: 2..=99.
                    let cost = c["networkCost"]
                        .as_i64()
                        .ok_or("networkCost: required integer")?;
                    if !(MIN_COST..=MAX_COST).contains(&cost) {
                        return fail(format!(
                            "networkCost {cost} outside {MIN_COST}..={MAX_COST}"
                        ));
                    }
                    if let Some(b) = c.get("bandwidthCapacity") {
                        let q = string(b, "bandwidthCapacity")?;
                        if !is_quantity(q) {
                            return fail(format!("bandwidthCapacity {q:?} is not a quantity"));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The ConfigMap of `spec.configmapName`.
fn check_config_map(o: &Value) -> Check {
    check_metadata(o, true)?;
    for k in object(&o["data"], "data")?.keys() {
        let ok = !k.is_empty()
            && k.len() <= 253
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && k != "."
            && k != ".."
            && !k.starts_with("..");
        if !ok {
            return fail(format!("data key {k:?}"));
        }
    }
    Ok(())
}

fn check_everything(tiers: &Tiers, settings: &Settings) -> Check {
    let d = desired(tiers, settings);
    let zones: BTreeSet<String> = tiers.zones.iter().map(|z| z.name.to_string()).collect();
    let hypernodes: Vec<&Value> = d
        .objects
        .iter()
        .filter(|o| o.kind == Kind::HyperNode)
        .map(|o| &o.manifest)
        .collect();
    for o in &d.objects {
        let m = &o.manifest;
        if m["apiVersion"] != o.api_version.as_str()
            || m["kind"] != o.kind.kind()
            || m["metadata"]["name"] != o.name.as_str()
        {
            return fail(format!("{}: identity and manifest disagree", o.name));
        }
        match o.kind {
            Kind::HyperNode => check_hypernode(m),
            Kind::KueueTopology => check_kueue_topology(m),
            Kind::NetworkTopology => check_network_topology(m, settings, &zones),
            Kind::ConfigMap => check_config_map(m),
        }
        .map_err(|e| format!("{} {}: {e}", o.kind.kind(), o.name))?;
        if o.kind == Kind::NetworkTopology {
            // configmapName is required by the CRD; the ConfigMap itself only when asked for
            // (its existence makes Diktyo's controller rewrite the weights).
            let cm = m["spec"]["configmapName"].as_str().unwrap();
            let written = d
                .objects
                .iter()
                .any(|x| x.kind == Kind::ConfigMap && x.name == cm && x.namespace == o.namespace);
            if written != settings.diktyo_configmap {
                return fail(format!(
                    "ConfigMap {cm} written: {written}, asked for: {}",
                    settings.diktyo_configmap
                ));
            }
        }
        if o.kind == Kind::HyperNode {
            // tierName: the settings' name of its tier (prefixed by default, so that another
            // HyperNode source's `zone` cannot clash in Volcano's one map of tier names).
            let tier = m["spec"]["tier"].as_i64().unwrap() as usize;
            if m["spec"]["tierName"] != settings.tier_names[tier - 1].as_str() {
                return fail(format!("{}: tierName {}", o.name, m["spec"]["tierName"]));
            }
        }
        if o.kind == Kind::KueueTopology
            && m["apiVersion"] != format!("kueue.x-k8s.io/{}", settings.kueue_version.as_str())
        {
            return fail(format!("Topology apiVersion {}", m["apiVersion"]));
        }
    }
    check_hypernode_tree(&hypernodes)?;
    // Every node at every level (Kueue), only zonemesh.io/ keys, valid values.
    if settings.schedulers.contains(&Scheduler::Kueue) {
        for (_, node) in tiers.nodes() {
            let labels = d
                .node_labels
                .get(node.as_str())
                .ok_or(format!("{node} unlabelled"))?;
            for (k, v) in labels {
                if !k.starts_with("zonemesh.io/") || !is_qualified_name(k) || !is_label_value(v) {
                    return fail(format!("{node}: label {k}={v}"));
                }
            }
            if labels.len() != 3 {
                return fail(format!("{node}: {labels:?}"));
            }
        }
    }
    // Distinct zones never share a HyperNode.
    let names: BTreeSet<&str> = hypernodes
        .iter()
        .map(|h| h["metadata"]["name"].as_str().unwrap())
        .collect();
    if names.len() != hypernodes.len() {
        return fail("two HyperNodes of one name");
    }
    Ok(())
}

/// A zone name: any label value (upper case, `_` and `.` included), up to 63; and names that
/// look like zonemesh's other HyperNodes' (`group-1`, `cluster`) or like another zone's mapped
/// name (`zone-group-1`).
fn zone_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,10}[a-z0-9]",
        "[A-Za-z0-9][A-Za-z0-9_.-]{0,61}[A-Za-z0-9]",
        Just("unknown".to_owned()),
        "(zone-){0,2}(group-[1-3]|cluster|[a-c])",
    ]
}

prop_compose! {
    fn tiers()(
        names in proptest::collection::btree_set(zone_name(), 1..6),
        groups in proptest::collection::vec(1..4u64, 6),
        rtts in proptest::collection::vec(proptest::option::of(1.0..200_000.0f64), 36),
        tputs in proptest::collection::vec(proptest::option::of(1e5..1e11f64), 36),
        regions in proptest::collection::vec(proptest::option::of(0..3u8), 6),
    ) -> Tiers {
        let names: Vec<ZoneName> = names.iter().map(|n| ZoneName::parse("zone", n.clone()).unwrap()).collect();
        let group = |i: usize| ZoneName::parse("group", format!("group-{}", groups[i])).unwrap();
        let zones: Vec<TierZone> = names.iter().enumerate().map(|(i, n)| TierZone {
            name: n.clone(),
            group: group(i),
            region: regions[i].map(|r| ZoneName::parse("region", format!("region-{r}")).unwrap()),
            nodes: (0..3).map(|k| NodeName::parse("node", format!("n{i}-{k}.example")).unwrap()).collect(),
            fresh: true,
            rtt_us: rtts[i],
            throughput_bps: tputs[i],
        }).collect();
        let mut by_group: BTreeMap<ZoneName, Vec<ZoneName>> = BTreeMap::new();
        for z in &zones {
            by_group.entry(z.group.clone()).or_default().push(z.name.clone());
        }
        let groups = by_group.into_iter().map(|(name, zones)| TierGroup {
            name, zones, inside: CutFigures::default(), held: false, nearest: None,
        }).collect();
        let mut pairs = Vec::new();
        for a in 0..names.len() {
            for b in a + 1..names.len() {
                pairs.push(ZonePair {
                    a: names[a].clone(), b: names[b].clone(),
                    rtt_us: rtts[a * 6 + b], throughput_bps: tputs[a * 6 + b], fresh: true,
                });
            }
        }
        Tiers {
            computed_at: UnixMs(1_800_000_000_000),
            zones, groups, pairs,
            cluster: CutFigures {
                worst_rtt: Some(PairFigure { a: names[0].clone(), b: names[0].clone(), value: 5.0 }),
                ..CutFigures::default()
            },
            ..Tiers::default()
        }
    }
}

proptest! {
    #[test]
    fn every_object_follows_its_crd_schema_and_kubernetes_naming(t in tiers()) {
        t.check().unwrap();
        for kueue_version in [KueueVersion::V1beta2, KueueVersion::V1beta1, KueueVersion::V1alpha1] {
            for diktyo_configmap in [false, true] {
                let settings = Settings { kueue_version, diktyo_configmap, ..Settings::default() };
                if let Err(e) = check_everything(&t, &settings) {
                    prop_assert!(false, "{e}");
                }
            }
        }
        let custom = Settings {
            tier_names: ["rack", "pod", "dc"].map(String::from),
            ..Settings::default()
        };
        if let Err(e) = check_everything(&t, &custom.checked().unwrap()) {
            prop_assert!(false, "{e}");
        }
    }
}

#[test]
fn the_resource_flavor_example_follows_its_schema() {
    check_resource_flavor(&resource_flavor_example(&Settings::default())).unwrap();
}

/// The checks are not vacuous: objects broken the ways the schemas forbid are refused.
#[test]
fn the_checks_refuse_what_the_schemas_refuse() {
    let settings = Settings::default();
    let t = tiers()
        .new_tree(&mut proptest::test_runner::TestRunner::deterministic())
        .unwrap()
        .current();
    let d = desired(&t, &settings);
    let hn = d
        .objects
        .iter()
        .find(|o| o.kind == Kind::HyperNode && o.manifest["spec"]["tier"] == 1)
        .unwrap()
        .manifest
        .clone();
    check_hypernode(&hn).unwrap();
    let spoil = |f: &dyn Fn(&mut Value)| {
        let mut v = hn.clone();
        f(&mut v);
        v
    };
    for bad in [
        spoil(&|v| {
            v["spec"]["members"][0]["selector"]["regexMatch"] =
                serde_json::json!({"pattern": "a.*"})
        }),
        spoil(&|v| v["spec"]["members"][0]["selector"] = serde_json::json!({})),
        spoil(&|v| v["spec"]["members"][0]["type"] = "Rack".into()),
        spoil(&|v| v["spec"]["members"] = serde_json::json!([])),
        spoil(&|v| v["spec"]["tier"] = (-1).into()),
        spoil(&|v| v["spec"]["tierName"] = "Zone Group".into()),
        spoil(&|v| v["metadata"]["name"] = "Zone_A".into()),
        spoil(&|v| v["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "someone".into()),
        spoil(&|v| v["spec"]["members"][0]["selector"]["exactMatch"]["name"] = "".into()),
        spoil(&|v| v["spec"]["extra"] = 1.into()),
    ] {
        assert!(check_hypernode(&bad).is_err(), "{bad:#}");
    }
    let topo = d
        .objects
        .iter()
        .find(|o| o.kind == Kind::KueueTopology)
        .unwrap()
        .manifest
        .clone();
    check_kueue_topology(&topo).unwrap();
    let mut hostname_first = topo.clone();
    hostname_first["spec"]["levels"]
        .as_array_mut()
        .unwrap()
        .reverse();
    assert!(check_kueue_topology(&hostname_first).is_err());
    let mut twice = topo.clone();
    twice["spec"]["levels"][1] = twice["spec"]["levels"][0].clone();
    assert!(check_kueue_topology(&twice).is_err());
    let mut none = topo;
    none["spec"]["levels"] = serde_json::json!([]);
    assert!(check_kueue_topology(&none).is_err());
    let mut flavor = resource_flavor_example(&settings);
    flavor["spec"]["nodeLabels"] = serde_json::json!({});
    assert!(check_resource_flavor(&flavor).is_err());
    let zones: BTreeSet<String> = t.zones.iter().map(|z| z.name.to_string()).collect();
    let nt = d
        .objects
        .iter()
        .find(|o| o.kind == Kind::NetworkTopology)
        .unwrap()
        .manifest
        .clone();
    check_network_topology(&nt, &settings, &zones).unwrap();
    let mut unsorted = nt.clone();
    unsorted["spec"]["weights"][0]["topologyList"] = serde_json::json!([
        {"topologyKey": "topology.kubernetes.io/zone", "originList": []},
        {"topologyKey": "topology.kubernetes.io/region", "originList": []}]);
    assert!(check_network_topology(&unsorted, &settings, &zones).is_err());
    let mut renamed = nt;
    renamed["spec"]["configmapName"] = serde_json::Value::Null;
    assert!(check_network_topology(&renamed, &settings, &zones).is_err());
    assert!(
        is_quantity("956M")
            && is_quantity("1Gi")
            && is_quantity("0.5")
            && !is_quantity("fast")
            && !is_quantity("1MB")
    );
}

/// Issue 29's findings, as cases: no ConfigMap unless asked for, Kueue v1alpha1, prefixed tier
/// names that a flag can change (three distinct DNS-1123 subdomains), and HyperNode names that
/// read once without two zones (or a zone and a group) ever sharing one.
#[test]
fn the_publisher_writes_what_the_schedulers_controllers_expect() {
    let t = tiers()
        .new_tree(&mut proptest::test_runner::TestRunner::deterministic())
        .unwrap()
        .current();
    let kinds = |settings: &Settings| -> Vec<Kind> {
        desired(&t, settings)
            .objects
            .iter()
            .map(|o| o.kind)
            .collect()
    };
    let plain = Settings::default();
    assert!(!kinds(&plain).contains(&Kind::ConfigMap));
    assert!(kinds(&plain).contains(&Kind::NetworkTopology));
    // Kind::of still lists ConfigMap: an old ConfigMap zonemesh owns is deleted (migration).
    assert!(desired(&t, &plain).kinds.contains(&Kind::ConfigMap));
    let with_cm = Settings {
        diktyo_configmap: true,
        ..Settings::default()
    };
    assert!(kinds(&with_cm).contains(&Kind::ConfigMap));

    let alpha = Settings {
        kueue_version: KueueVersion::V1alpha1,
        ..Settings::default()
    };
    let topo = desired(&t, &alpha)
        .objects
        .into_iter()
        .find(|o| o.kind == Kind::KueueTopology)
        .unwrap();
    assert_eq!(topo.manifest["apiVersion"], "kueue.x-k8s.io/v1alpha1");
    assert_eq!(KueueVersion::parse("v1alpha1"), Ok(KueueVersion::V1alpha1));
    assert!(
        KueueVersion::parse("v1")
            .unwrap_err()
            .contains("v1alpha1 (before 0.14)")
    );

    let names: BTreeSet<String> = desired(&t, &plain)
        .objects
        .iter()
        .filter(|o| o.kind == Kind::HyperNode)
        .map(|o| o.manifest["spec"]["tierName"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["zonemesh-cluster", "zonemesh-zone", "zonemesh-zone-group"]
            .map(String::from)
            .into()
    );
    for bad in ["zone,zone,cluster", "a,b", "Zone,b,c", "a,b,c,d", "a,,c"] {
        let s = Settings {
            tier_names: match zonemesh_publish::objects::tier_names(bad) {
                Ok(n) => n,
                Err(_) => continue,
            },
            ..Settings::default()
        };
        assert!(s.checked().is_err(), "{bad} accepted");
    }
    assert!(zonemesh_publish::objects::tier_names("a,b").is_err());

    let zone = |z: &str| zone_hypernode(&ZoneName::parse("zone", z).unwrap());
    for (z, name) in [
        ("zone-a", "zonemesh-zone-a"),
        ("eu-west-1a", "zonemesh-eu-west-1a"),
        ("group-1", "zonemesh-zone-group-1"),
        ("cluster", "zonemesh-zone-cluster"),
        ("zone-group-1", "zonemesh-zone-zone-group-1"),
        ("zone-cluster", "zonemesh-zone-zone-cluster"),
    ] {
        assert_eq!(zone(z), name, "{z}");
    }
    let all: Vec<String> = [
        "zone-a",
        "a",
        "group-1",
        "zone-group-1",
        "zone-zone-group-1",
        "cluster",
        "zone-cluster",
    ]
    .iter()
    .map(|z| zone(z))
    .chain(["zonemesh-group-1".into(), "zonemesh-cluster".into()])
    .collect();
    let distinct: BTreeSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "{all:?}");
}
