//! The Slurm files zonemesh writes from tiers: what goes where (zones, groups, Slurm's unmeasured
//! nodes, unreachable nodes, names Slurm cannot take, block sizes), and that whatever the tiers,
//! the text passes every check of `zonemesh_publish::slurm::check` and places every node once.
//! slurmctld itself reads these files in `tests/tests/slurm.rs`.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use zonemesh_domain::{NodeName, TierGroup, TierZone, Tiers, ZoneName};
use zonemesh_publish::slurm::hostlist::expand;
use zonemesh_publish::slurm::{
    FAULTY, Form, ROOT, SlurmError, SlurmOptions, UNMEASURED, YamlDefault, check, derive, file,
    zone_switch,
};

fn zn(s: &str) -> ZoneName {
    ZoneName::parse("zone", s).unwrap()
}

/// Zones `(name, group, nodes)`.
fn tiers(zones: &[(&str, &str, &[&str])]) -> Tiers {
    let mut groups: BTreeMap<&str, Vec<ZoneName>> = BTreeMap::new();
    for (z, g, _) in zones {
        groups.entry(g).or_default().push(zn(z));
    }
    Tiers {
        zones: zones
            .iter()
            .map(|(z, g, nodes)| TierZone {
                name: zn(z),
                group: zn(g),
                region: None,
                nodes: nodes
                    .iter()
                    .map(|n| NodeName::parse("node", *n).unwrap())
                    .collect(),
                fresh: true,
                rtt_us: Some(100.0),
                throughput_bps: None,
            })
            .collect(),
        groups: groups
            .into_iter()
            .map(|(g, zones)| TierGroup {
                name: zn(g),
                zones,
                inside: Default::default(),
                held: false,
                nearest: None,
            })
            .collect(),
        ..Tiers::default()
    }
}

fn lab() -> Tiers {
    tiers(&[
        ("zone-a", "group-1", &["a1", "a2", "a3"]),
        ("zone-b", "group-1", &["b1", "b2", "b3"]),
        ("zone-c", "group-2", &["c1", "c2", "c3"]),
    ])
}

/// The lines that are not comments.
fn body(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim_start().starts_with('#') && !l.is_empty())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_tree_has_a_leaf_per_zone_a_switch_per_group_and_one_root() {
    let f = file(&lab(), Form::Tree, &SlurmOptions::default()).unwrap();
    assert_eq!(
        body(&f.text),
        [
            "SwitchName=zone-a Nodes=a[1-3]",
            "SwitchName=zone-b Nodes=b[1-3]",
            "SwitchName=zone-c Nodes=c[1-3]",
            "SwitchName=group-1 Switches=zone-a,zone-b",
            "SwitchName=group-2 Switches=zone-c",
            "SwitchName=zonemesh Switches=group-1,group-2",
        ]
    );
    assert!(f.notes.is_empty(), "{:?}", f.notes);
    assert!(f.text.contains("# zone zone-a (group group-1): 3 nodes"));
    // The same tiers, derived later, give the same bytes (nothing of time in the file).
    let mut later = lab();
    later.computed_at = zonemesh_domain::UnixMs(1_900_000_000_000);
    later.zones[0].rtt_us = Some(170.0);
    assert_eq!(
        file(&later, Form::Tree, &SlurmOptions::default())
            .unwrap()
            .text,
        f.text
    );
}

#[test]
fn slurm_nodes_decide_who_is_in_the_file() {
    // b3 is not Slurm's; d1, d2 are Slurm's and unmeasured.
    let options = SlurmOptions {
        slurm_nodes: Some(set(&[
            "a1", "a2", "a3", "b1", "b2", "c1", "c2", "c3", "d1", "d2",
        ])),
        ..SlurmOptions::default()
    };
    let f = file(&lab(), Form::Tree, &options).unwrap();
    assert_eq!(
        body(&f.text),
        [
            "SwitchName=zone-a Nodes=a[1-3]",
            "SwitchName=zone-b Nodes=b[1-2]",
            "SwitchName=zone-c Nodes=c[1-3]",
            "SwitchName=zonemesh-unmeasured Nodes=d[1-2]",
            "SwitchName=group-1 Switches=zone-a,zone-b",
            "SwitchName=group-2 Switches=zone-c",
            "SwitchName=zonemesh Switches=group-1,group-2,zonemesh-unmeasured",
        ]
    );
    let notes = f.notes.join("\n");
    assert!(
        notes.contains("1 node measured by zonemesh but not in --slurm-nodes, left out: b3"),
        "{notes}"
    );
    assert!(
        notes.contains("2 nodes in --slurm-nodes that zonemesh does not measure: in the leaf zonemesh-unmeasured under the root zonemesh: d[1-2]"),
        "{notes}"
    );
    // The notes are in the file too.
    assert!(
        f.text.contains("# - 1 node measured by zonemesh"),
        "{}",
        f.text
    );
}

#[test]
fn unreachable_nodes_get_a_leaf_of_their_own_and_no_block() {
    let options = SlurmOptions {
        faulty: set(&["a2", "zz9"]),
        exclude_faulty: true,
        ..SlurmOptions::default()
    };
    let tree = file(&lab(), Form::Tree, &options).unwrap();
    assert_eq!(
        body(&tree.text)[..1],
        ["SwitchName=zone-a Nodes=a[1,3]"],
        "{}",
        tree.text
    );
    assert!(body(&tree.text).contains(&"SwitchName=zonemesh-faulty Nodes=a2"));
    assert!(
        body(&tree.text).contains(&"SwitchName=zonemesh Switches=group-1,group-2,zonemesh-faulty")
    );
    let block = file(&lab(), Form::Block, &options).unwrap();
    assert!(!block.text.contains("Nodes=a2") && !block.text.contains(",a2"));
    assert!(
        block
            .notes
            .iter()
            .any(|n| n.contains("left out of every block") && n.contains("Slurm 26.11")),
        "{:?}",
        block.notes
    );
    // Without the flag the faulty set is ignored.
    let plain = file(
        &lab(),
        Form::Tree,
        &SlurmOptions {
            faulty: set(&["a2"]),
            ..SlurmOptions::default()
        },
    )
    .unwrap();
    assert!(!plain.text.contains(FAULTY));
}

#[test]
fn names_slurm_cannot_take_are_named_and_left_out() {
    let t = tiers(&[
        ("zone-a", "group-1", &["a1", "a2", "default"]),
        ("zone-b", "group-1", &["b1", "n99999999999999999999"]),
    ]);
    let f = file(&t, Form::Tree, &SlurmOptions::default()).unwrap();
    assert_eq!(
        body(&f.text)[..2],
        [
            "SwitchName=zone-a Nodes=a[1-2]",
            "SwitchName=zone-b Nodes=b1"
        ]
    );
    let notes = f.notes.join("\n");
    assert!(
        notes.contains("node default left out: slurm.conf reads NodeName=DEFAULT"),
        "{notes}"
    );
    assert!(
        notes.contains(
            "node n99999999999999999999 left out: Slurm's hostlist parser reads it as another name"
        ),
        "{notes}"
    );
}

#[test]
fn block_sizes_hold_every_block_and_small_zones_are_named() {
    let t = tiers(&[
        ("zone-a", "group-1", &["a1", "a2", "a3", "a4"]),
        ("zone-b", "group-2", &["b1", "b2", "b3", "b4", "b5"]),
        ("zone-c", "group-1", &["c1", "c2", "c3", "c4"]),
        ("zone-d", "group-2", &["d1", "d2"]),
    ]);
    // Default: the smallest zone's size, every zone a block; group-1's zones side by side.
    let f = file(&t, Form::Block, &SlurmOptions::default()).unwrap();
    assert_eq!(
        body(&f.text),
        [
            "BlockName=zone-a Nodes=a[1-4]",
            "BlockName=zone-c Nodes=c[1-4]",
            "BlockName=zone-b Nodes=b[1-5]",
            "BlockName=zone-d Nodes=d[1-2]",
            "BlockSizes=2,4,8",
        ]
    );
    // A base of 4: zone-d is too small, named in the notes (and so on stderr and in comments).
    let four = file(
        &t,
        Form::Block,
        &SlurmOptions {
            block_base: Some(4),
            ..SlurmOptions::default()
        },
    )
    .unwrap();
    assert_eq!(body(&four.text).last(), Some(&"BlockSizes=4,8"));
    assert!(!four.text.contains("BlockName=zone-d"));
    assert!(
        four.text
            .contains("# - block zone-d has 2 nodes, fewer than the base block size 4: its nodes are in no block: d[1-2]"),
        "{}",
        four.text
    );
    // Too large a base for every zone: no file, and the reason.
    let err = file(
        &t,
        Form::Block,
        &SlurmOptions {
            block_base: Some(6),
            ..SlurmOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, SlurmError::NoBlocks { base: 6, .. }), "{err}");
    assert_eq!(
        file(
            &t,
            Form::Block,
            &SlurmOptions {
                block_base: Some(0),
                ..SlurmOptions::default()
            }
        )
        .unwrap_err(),
        SlurmError::ZeroBase
    );
}

/// topology.yaml(5) (SchedMD/slurm `doc/man/man5/topology.yaml.5` at 0b755e6c3053, "May 2025"):
/// a list of topologies, `topology` the first attribute of each, unique names, exactly one of
/// `tree`, `block` or `flat`; `switches` of `{switch, children | nodes}`; `block_sizes` and
/// `blocks` of `{block, nodes}`; the first `cluster_default: true` is the default.
#[test]
fn the_yaml_form_holds_both_topologies_as_the_manual_describes() {
    let f = file(&lab(), Form::Yaml, &SlurmOptions::default()).unwrap();
    let items: Vec<&str> = f.text.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(
        items,
        ["- topology: zonemesh-tree", "- topology: zonemesh-block"]
    );
    let defaults: Vec<&str> = f
        .text
        .lines()
        .filter(|l| l.contains("cluster_default"))
        .collect();
    assert_eq!(
        defaults,
        ["  cluster_default: true", "  cluster_default: false"]
    );
    for want in [
        "  tree:\n    switches:\n",
        "      - switch: \"zone-a\"\n        nodes: \"a[1-3]\"\n",
        "      - switch: \"zonemesh\"\n        children: \"group-1,group-2\"\n",
        "  block:\n    block_sizes:\n      - 3\n      - 6\n    blocks:\n",
        "      - block: \"zone-c\"\n        nodes: \"c[1-3]\"\n",
    ] {
        assert!(f.text.contains(want), "{want:?} not in\n{}", f.text);
    }
    let none = file(
        &lab(),
        Form::Yaml,
        &SlurmOptions {
            yaml_default: YamlDefault::None,
            ..SlurmOptions::default()
        },
    )
    .unwrap();
    assert!(!none.text.contains("cluster_default: true"));
    let block = file(
        &lab(),
        Form::Yaml,
        &SlurmOptions {
            yaml_default: YamlDefault::Block,
            ..SlurmOptions::default()
        },
    )
    .unwrap();
    assert!(
        block.text.contains("  block:")
            && block.text.find("cluster_default: true") > block.text.find("zonemesh-block")
    );
}

#[test]
fn switch_names_are_stable_short_and_never_zonemeshs_own() {
    assert_eq!(zone_switch("zone-a"), "zone-a");
    assert_eq!(zone_switch("group-3"), "zone-group-3");
    assert_eq!(zone_switch("zonemesh"), "zone-zonemesh");
    assert_eq!(zone_switch("zonemesh-faulty"), "zone-zonemesh-faulty");
    let long = "z".repeat(62);
    assert_eq!(zone_switch(&long), long, "62 characters fit");
    let long_reserved = format!("group-{}", "1".repeat(57));
    let mapped = zone_switch(&long_reserved);
    assert!(
        mapped.len() <= 64 && mapped.starts_with("zone-"),
        "{mapped}"
    );
    assert_eq!(mapped, zone_switch(&long_reserved), "stable");
    let overflow = zone_switch("rack99999999999999999999");
    assert!(
        overflow.starts_with("zone-") && overflow.len() == 13,
        "{overflow}"
    );
    // A zone called group-1 beside the group group-1, and one called zone-group-1.
    let t = tiers(&[
        ("group-1", "group-1", &["a1"]),
        ("zone-group-1", "group-2", &["b1"]),
    ]);
    let f = file(&t, Form::Tree, &SlurmOptions::default()).unwrap();
    let names: Vec<&str> = body(&f.text)
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names.contains(&"SwitchName=zone-group-1"));
    assert!(names.contains(&"SwitchName=group-1") && names.contains(&"SwitchName=zonemesh"));
}

#[test]
fn nothing_to_place_is_an_error_not_an_empty_file() {
    let err = file(&Tiers::default(), Form::Tree, &SlurmOptions::default()).unwrap_err();
    assert!(matches!(err, SlurmError::NoNodes(_)), "{err}");
    let only_slurm = file(
        &Tiers::default(),
        Form::Tree,
        &SlurmOptions {
            slurm_nodes: Some(set(&["x1", "x2"])),
            ..SlurmOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        body(&only_slurm.text),
        [
            "SwitchName=zonemesh-unmeasured Nodes=x[1-2]",
            "SwitchName=zonemesh Switches=zonemesh-unmeasured"
        ]
    );
}

fn zone_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "zone-[a-e]",
        "group-[0-9]",
        "[A-Za-z0-9][A-Za-z0-9_.-]{0,61}[A-Za-z0-9]",
        Just("zonemesh".to_owned()),
        Just("zonemesh-unmeasured".to_owned()),
        Just("unknown".to_owned()),
    ]
}

fn node_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-c][0-9]{1,3}",
        "n0[0-9]{1,2}",
        "[a-z]{1,4}-[0-9]{1,2}\\.[a-z]{2}",
        Just("default".to_owned()),
        Just("n99999999999999999999".to_owned()),
    ]
}

prop_compose! {
    fn any_tiers()(
        zones in proptest::collection::btree_map(zone_name(), (0..4u8, proptest::collection::btree_set(node_name(), 1..6)), 1..6),
    ) -> Tiers {
        // A node belongs to one zone: the first zone that lists it keeps it.
        let mut seen = BTreeSet::new();
        let list: Vec<(String, String, Vec<String>)> = zones.into_iter().map(|(z, (g, nodes))| {
            let nodes: Vec<String> = nodes.into_iter().filter(|n| seen.insert(n.clone())).collect();
            (z, format!("group-{g}"), nodes)
        }).filter(|(_, _, n)| !n.is_empty()).collect();
        let borrowed: Vec<(&str, &str, Vec<&str>)> = list.iter().map(|(z, g, n)| (z.as_str(), g.as_str(), n.iter().map(String::as_str).collect())).collect();
        let refs: Vec<(&str, &str, &[&str])> = borrowed.iter().map(|(z, g, n)| (*z, *g, n.as_slice())).collect();
        tiers(&refs)
    }
}

proptest! {
    /// Whatever the zones, groups and names: the tree passes every check, every node it places is
    /// in exactly one leaf under the one root, and the unreachable ones only in zonemesh-faulty.
    #[test]
    fn any_tiers_give_a_tree_slurm_takes(
        t in any_tiers(),
        faulty_share in 0..3usize,
        slurm_extra in proptest::collection::btree_set("x[0-9]{1,2}", 0..4),
    ) {
        let measured: Vec<String> = t.nodes().map(|(_, n)| n.to_string()).collect();
        let faulty: BTreeSet<String> = measured.iter().step_by(faulty_share + 2).cloned().collect();
        let mut slurm: BTreeSet<String> = measured.iter().skip(1).cloned().collect();
        slurm.extend(slurm_extra);
        for slurm_nodes in [None, Some(slurm)] {
            let options = SlurmOptions {
                slurm_nodes: slurm_nodes.clone(),
                faulty: faulty.clone(),
                exclude_faulty: true,
                ..SlurmOptions::default()
            };
            let f = match file(&t, Form::Tree, &options) {
                Ok(f) => f,
                Err(SlurmError::NoNodes(_)) => continue,
                Err(e) => { prop_assert!(false, "{e}"); unreachable!() }
            };
            let topo = derive(&t, &options).unwrap();
            prop_assert_eq!(check::tree(&f.text, &topo.expected_nodes), vec![]);
            let mut placed = BTreeMap::new();
            for line in body(&f.text) {
                let (name, rest) = line.split_once(' ').unwrap();
                if let Some(nodes) = rest.strip_prefix("Nodes=") {
                    for n in expand(nodes).unwrap() {
                        prop_assert!(placed.insert(n.clone(), name.to_owned()).is_none(), "{} twice", n);
                        if faulty.contains(&n) && measured.contains(&n) {
                            prop_assert_eq!(name, format!("SwitchName={FAULTY}"));
                        }
                    }
                }
                prop_assert!(name.len() <= "SwitchName=".len() + 64, "{}", name);
            }
            let placed: BTreeSet<String> = placed.into_keys().collect();
            prop_assert_eq!(&placed, &topo.expected_nodes);
            let root_line = format!("SwitchName={ROOT} ");
            prop_assert!(body(&f.text).last().unwrap().starts_with(&root_line));
            if let Some(s) = &slurm_nodes {
                prop_assert!(placed.is_subset(s));
                if s.iter().any(|n| !measured.contains(n)) {
                    prop_assert!(f.text.contains(UNMEASURED));
                }
            }
            // The block and yaml forms of the same tiers pass their checks too.
            match file(&t, Form::Block, &options) {
                Ok(_) | Err(SlurmError::NoBlocks { .. }) => {}
                Err(e) => prop_assert!(false, "block: {}", e),
            }
            prop_assert!(file(&t, Form::Yaml, &options).is_ok());
        }
    }
}
