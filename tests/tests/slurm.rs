//! `zonemesh publish --slurm` against a real slurmctld (Debian's 22.05, `topology/tree`, as root
//! without munge: `auth/none`, nodes that do not exist as CLOUD nodes; see
//! /work/shared/notes/slurm.md). The file written from the fleet simulator's tiers loads,
//! `scontrol show topology` lists zonemesh's switches with their nodes under one root, the
//! controller logs no warning, `sbatch --test-only --switches=1 -N <zone size>` lands inside one
//! measured zone, and `--on-change "scontrol reconfigure"` hands a changed file to the running
//! controller. Also: zonemesh's hostlists read back through Slurm's own parser, and the bad
//! inputs of `--slurm` (no slurmctld needed for those).
//!
//! CI installs slurmctld and slurm-client and runs as root: there these tests never skip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use zonemesh_domain::{NodeName, TierGroup, TierZone, Tiers, ZoneName};
use zonemesh_fleet::sim::{self, Control, Counters};
use zonemesh_fleet::topo::{Fleet, FleetSpec};
use zonemesh_publish::slurm::{self, Form, SlurmOptions, hostlist};
use zonemesh_tests::{FakeAgent, binary, is_root, start_aggregator, tool_available, wait_for};

/// Whether slurmctld can run here: root (SlurmUser=root, state files) and the Debian packages.
/// Skips with a message elsewhere, never under CI.
fn slurm_can_run(test: &str) -> bool {
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the slurmctld tests as root; this run is not root"
        );
        eprintln!("{test}: not root, slurmctld cannot run as SlurmUser=root; skipped (CI runs it)");
        return false;
    }
    let install = "apt-get install slurmctld slurm-client";
    // scontrol and sbatch run only with a configuration (SLURM_CONF): found on PATH instead.
    let clients = ["scontrol", "sbatch"].iter().all(|p| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
    });
    assert!(
        clients || std::env::var_os("CI").is_none(),
        "scontrol or sbatch is missing in CI ({install})"
    );
    if !clients {
        eprintln!("{test}: scontrol or sbatch not on PATH ({install}): skipped (CI runs it)");
    }
    clients && tool_available("slurmctld", &["-V"], install)
}

/// A free TCP port on this machine (bound, then released for slurmctld).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Lines of the controller's log that a fresh state directory explains (no state saved yet).
const FRESH_STATE: [&str; 2] = ["state file", "NOTE: Trying backup state save file"];

/// A switch as `scontrol show topology` shows it: level, nodes, child switches.
type Shown = (u32, BTreeSet<String>, Vec<String>);

/// A slurmctld in the foreground (`-D`) on its own port and directory, killed when dropped (also
/// when the test fails).
struct Slurmctld {
    child: Child,
    dir: PathBuf,
}

impl Slurmctld {
    /// Writes slurm.conf (nodes `nodes` as CLOUD nodes, `topology/tree`) into `dir`, where
    /// topology.conf must already be, and starts the controller; waits (at most 20 s) until
    /// `scontrol ping` says it is up.
    fn start(dir: &Path, nodes: &str) -> Result<Self> {
        for sub in ["state", "run", "log"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let port = free_port()?;
        let d = dir.display();
        let conf = format!(
            "ClusterName=zm\nSlurmctldHost=localhost\nSlurmctldPort={port}\nSlurmUser=root\n\
             AuthType=auth/none\nCredType=cred/none\nStateSaveLocation={d}/state\n\
             SlurmctldPidFile={d}/run/slurmctld.pid\nSlurmctldLogFile={d}/log/slurmctld.log\n\
             MailProg=/bin/true\nResumeProgram=/bin/true\nSuspendProgram=/bin/true\n\
             SuspendTime=300\nPrivateData=cloud\nTopologyPlugin=topology/tree\n\
             NodeName={nodes} CPUs=1 State=CLOUD\n\
             PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
        );
        std::fs::write(dir.join("slurm.conf"), conf)?;
        let child = Command::new("slurmctld")
            .args(["-D", "-f"])
            .arg(dir.join("slurm.conf"))
            .env("SLURM_CONF", dir.join("slurm.conf"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("log/stdout"))?)
            .stderr(std::fs::File::create(dir.join("log/stderr"))?)
            .spawn()
            .context("start slurmctld")?;
        let mut ctl = Self {
            child,
            dir: dir.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = ctl.child.try_wait()? {
                bail!(
                    "slurmctld exited with {status}:\n{}\n{}",
                    ctl.log(),
                    std::fs::read_to_string(dir.join("log/stderr")).unwrap_or_default()
                );
            }
            if ctl.up()? {
                return Ok(ctl);
            }
            ensure!(
                Instant::now() < deadline,
                "slurmctld not up after 20 s:\n{}",
                ctl.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// `program args` with this controller's SLURM_CONF.
    fn run(&self, program: &str, args: &[&str]) -> Result<Output> {
        Ok(Command::new(program)
            .args(args)
            .env("SLURM_CONF", self.conf())
            .stdin(Stdio::null())
            .output()?)
    }

    fn up(&self) -> Result<bool> {
        let out = self.run("scontrol", &["ping"])?;
        Ok(String::from_utf8_lossy(&out.stdout).contains("is UP"))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log/slurmctld.log")).unwrap_or_default()
    }

    /// The log's warnings and errors, but those of a fresh state directory. (An empty log would
    /// complain of nothing: the controller must have said that it runs.)
    fn complaints(&self) -> Vec<String> {
        let log = self.log();
        if !log.contains("Running as primary controller") {
            return vec![format!("the log does not say the controller runs: {log:?}")];
        }
        log.lines()
            .filter(|l| {
                let low = l.to_ascii_lowercase();
                (low.contains("warning") || low.contains("error") || low.contains("fatal"))
                    && !FRESH_STATE.iter().any(|f| l.contains(f))
            })
            .map(str::to_owned)
            .collect()
    }

    /// `scontrol show topology` as switch name -> (level, nodes, child switches), the hostlists
    /// expanded by Slurm itself.
    fn topology(&self) -> Result<BTreeMap<String, Shown>> {
        let out = self.run("scontrol", &["show", "topology"])?;
        ensure!(out.status.success(), "scontrol show topology: {out:?}");
        let mut switches = BTreeMap::new();
        for line in String::from_utf8(out.stdout)?.lines() {
            let field = |key: &str| {
                line.split_whitespace()
                    .find_map(|t| t.strip_prefix(key))
                    .unwrap_or("")
                    .to_owned()
            };
            let name = field("SwitchName=");
            if name.is_empty() {
                continue;
            }
            let nodes = self.hostnames(&field("Nodes="))?;
            let children: Vec<String> = field("Switches=")
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            switches.insert(name, (field("Level=").parse()?, nodes, children));
        }
        Ok(switches)
    }

    /// Slurm's own expansion of a hostlist (`scontrol show hostnames`).
    fn hostnames(&self, list: &str) -> Result<BTreeSet<String>> {
        if list.is_empty() {
            return Ok(BTreeSet::new());
        }
        let out = self.run("scontrol", &["show", "hostnames", list])?;
        ensure!(
            out.status.success(),
            "scontrol show hostnames {list}: {out:?}"
        );
        Ok(String::from_utf8(out.stdout)?
            .lines()
            .map(str::to_owned)
            .collect())
    }

    /// The nodes `sbatch --test-only args` would start on, or its refusal.
    fn test_only(&self, args: &[&str]) -> Result<std::result::Result<BTreeSet<String>, String>> {
        let mut all = vec!["--test-only"];
        all.extend(args);
        all.extend(["--wrap", "true"]);
        let out = self.run("sbatch", &all)?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Ok(Err(text));
        }
        let nodes = text
            .split(" on nodes ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .with_context(|| format!("no nodes in {text:?}"))?;
        Ok(Ok(self.hostnames(nodes)?))
    }
}

impl Drop for Slurmctld {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn zonemesh(aggregator: &str, args: &[&str], slurm_conf: Option<&Path>) -> Result<Output> {
    let mut c = Command::new(binary("zonemesh"));
    c.args(args).args(["--aggregator", aggregator]);
    c.env_remove("ZONEMESH_TOKEN").env_remove("ZONEMESH_TLS_CA");
    if let Some(conf) = slurm_conf {
        c.env("SLURM_CONF", conf);
    }
    Ok(c.output()?)
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The aggregator's tiers as zone -> nodes, with the zone's group, once every zone pair is
/// measured (at most 90 s).
async fn settled_tiers(url: &str, zones: usize, nodes: usize) -> Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = zonemesh(url, &["tiers", "--output", "json"], None)?;
        if out.status.success() {
            let t: Value = serde_json::from_slice(&out.stdout)?;
            let listed: usize = t["zones"]
                .as_array()
                .map(|z| {
                    z.iter()
                        .map(|z| z["nodes"].as_array().map_or(0, Vec::len))
                        .sum()
                })
                .unwrap_or(0);
            let unmeasured = t["cluster"]["unmeasured_pairs"].as_u64().unwrap_or(0);
            if t["zones"].as_array().map(Vec::len) == Some(zones)
                && listed == nodes
                && unmeasured == 0
            {
                return Ok(t);
            }
        }
        ensure!(
            Instant::now() < deadline,
            "the tiers never settled: {out:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn zone_nodes(tiers: &Value) -> BTreeMap<String, BTreeSet<String>> {
    tiers["zones"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|z| {
            (
                z["name"].as_str().unwrap_or_default().to_owned(),
                z["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slurmctld_loads_the_tree_written_from_the_fleets_tiers_and_places_jobs_by_it() -> Result<()>
{
    if !slurm_can_run("slurm fleet") {
        return Ok(());
    }
    let logs = tempfile::tempdir()?;
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--window",
            "2s",
            "--probe-interval",
            "1s",
            "--probe-timeout",
            "500ms",
            "--tier-interval",
            "200ms",
        ],
        logs.path(),
    )?;
    let url = format!("http://{}", aggregator.grpc);
    // 20 nodes in 4 zones of 5 (z00-n0000 .. z03-n0019): names that need zero padding.
    let fleet = Arc::new(Fleet::new(FleetSpec {
        nodes: 20,
        zones: 4,
        bad_share: 0.0,
        seed: 29,
    }));
    let control = Arc::new(Control::new());
    let counters = Arc::new(Counters::default());
    let task = tokio::spawn(sim::run(
        fleet.clone(),
        vec![aggregator.channel().await?],
        control.clone(),
        counters.clone(),
    ));
    wait_for("every agent planned", Duration::from_secs(60), || async {
        (counters.planned.load(Ordering::Relaxed) == 20).then_some(())
    })
    .await?;
    let tiers = settled_tiers(&url, 4, 20).await?;
    let zones = zone_nodes(&tiers);
    println!("tiers: {}", serde_json::to_string(&tiers["groups"])?);

    // Slurm knows the fleet's nodes and three spares zonemesh does not measure.
    let dir = tempfile::tempdir()?;
    let topology = dir.path().join("topology.conf");
    let fleet_names: Vec<&str> = fleet.nodes.iter().map(|n| n.name.as_str()).collect();
    let slurm_nodes = format!("{},spare[1-3]", hostlist::compress(&fleet_names));
    let nodes_file = dir.path().join("nodes");
    std::fs::write(&nodes_file, format!("# sinfo -h -N -o %N\n{slurm_nodes}\n"))?;
    let nodes_arg = nodes_file.to_str().context("path")?.to_owned();
    let topology_arg = topology.to_str().context("path")?.to_owned();
    let write = |extra: &[&str], conf: Option<&Path>| {
        let mut args = vec![
            "publish",
            "--slurm",
            "tree",
            "--file",
            &topology_arg,
            "--slurm-nodes",
            &nodes_arg,
            "--exclude-faulty",
        ];
        args.extend(extra);
        zonemesh(&url, &args, conf)
    };
    let out = write(&[], None)?;
    let (stdout, stderr) = text(&out);
    ensure!(out.status.success(), "{stdout}{stderr}");
    ensure!(stdout.contains("wrote"), "{stdout}");
    ensure!(
        stderr.contains("3 nodes in --slurm-nodes that zonemesh does not measure: in the leaf zonemesh-unmeasured under the root zonemesh: spare[1-3]"),
        "{stderr}"
    );
    let written = std::fs::read_to_string(&topology)?;
    println!("{written}");
    ensure!(
        written.contains("Nodes=z00-n[0000-0004]"),
        "zero-padded hostlists: {written}"
    );
    // The tiers did not move while the file was written.
    ensure!(
        zone_nodes(&settled_tiers(&url, 4, 20).await?) == zones,
        "the zones changed"
    );

    let ctl = Slurmctld::start(dir.path(), &slurm_nodes)?;
    let shown = ctl.topology()?;
    let show = ctl.run("scontrol", &["show", "topology"])?;
    println!("{}", String::from_utf8_lossy(&show.stdout));
    // Every measured zone is a leaf with exactly its nodes; the spares in their own leaf.
    for (zone, nodes) in &zones {
        let leaf = slurm::zone_switch(zone);
        let (level, have, children) = shown
            .get(&leaf)
            .with_context(|| format!("no switch {leaf} in {shown:?}"))?;
        ensure!(
            *level == 0 && children.is_empty() && have == nodes,
            "{leaf}: {have:?}"
        );
    }
    ensure!(
        shown[slurm::UNMEASURED].1 == ["spare1", "spare2", "spare3"].map(String::from).into(),
        "{shown:?}"
    );
    // One root that holds every node; every other switch under exactly one parent.
    let all: BTreeSet<String> = ctl.hostnames(&slurm_nodes)?;
    let roots: Vec<&String> = shown
        .keys()
        .filter(|s| !shown.values().any(|(_, _, c)| c.contains(s)))
        .collect();
    ensure!(roots == [&slurm::ROOT.to_owned()], "roots {roots:?}");
    ensure!(shown[slurm::ROOT].1 == all, "the root lacks nodes");
    let groups = tiers["groups"].as_array().context("groups")?;
    ensure!(
        shown.len() == zones.len() + groups.len() + 2,
        "switches {:?}",
        shown.keys()
    );
    ensure!(ctl.complaints().is_empty(), "{:#?}", ctl.complaints());

    // Placement: a job of the largest zone's size on one switch lands inside one measured zone;
    // one node more fits on no leaf.
    let largest = zones.values().map(BTreeSet::len).max().context("zones")?;
    let n = largest.to_string();
    let placed = ctl
        .test_only(&["--switches=1", "-N", &n])?
        .map_err(anyhow::Error::msg)?;
    println!("sbatch --test-only --switches=1 -N {n}: {placed:?}");
    ensure!(
        placed.len() == largest && zones.values().any(|z| placed.is_subset(z)),
        "{placed:?} is not inside one zone of {zones:?}"
    );
    let more = (largest + 1).to_string();
    let refused = ctl.test_only(&["--switches=1", "-N", &more])?;
    ensure!(refused.is_err(), "-N {more} on one switch: {refused:?}");

    // The same tiers again: nothing written, no command run.
    let out = write(&["--on-change", "scontrol reconfigure"], Some(&ctl.conf()))?;
    let (stdout, stderr) = text(&out);
    ensure!(
        out.status.success() && stdout.contains("unchanged"),
        "{stdout}{stderr}"
    );
    ensure!(!stderr.contains("--on-change"), "{stderr}");

    // spare3's agent starts, in zone-00: the file changes (spare3 moves from the unmeasured
    // leaf to zone-00's), `scontrol reconfigure` hands it to the running controller, which lists
    // spare3 under zone-00 and still warns about nothing.
    let first = &zones["zone-00"];
    let mut spare = FakeAgent::connect(&aggregator, "spare3", "zone-00").await?;
    let paths: Vec<(&str, f64, u64, f64)> =
        first.iter().map(|n| (n.as_str(), 100.0, 0, 9e9)).collect();
    spare.report(&paths).await?;
    let moved = settled_tiers(&url, 4, 21).await?;
    ensure!(
        zone_nodes(&moved)["zone-00"].contains("spare3"),
        "{moved:#}"
    );
    let out = write(&["--on-change", "scontrol reconfigure"], Some(&ctl.conf()))?;
    let (stdout, stderr) = text(&out);
    ensure!(
        out.status.success() && stdout.contains("wrote"),
        "{stdout}{stderr}"
    );
    ensure!(
        stderr.contains("--on-change `scontrol reconfigure` exited with status 0"),
        "{stderr}"
    );
    let leaf = slurm::zone_switch("zone-00");
    let reloaded = wait_for("the reconfigured topology", Duration::from_secs(20), || {
        let t = ctl.topology().ok();
        let leaf = leaf.clone();
        async move { t.filter(|t| t.get(&leaf).is_some_and(|(_, n, _)| n.contains("spare3"))) }
    })
    .await?;
    ensure!(ctl.up()?, "the controller is down after reconfigure");
    ensure!(
        reloaded[slurm::UNMEASURED].1 == ["spare1", "spare2"].map(String::from).into(),
        "{reloaded:?}"
    );
    ensure!(ctl.complaints().is_empty(), "{:#?}", ctl.complaints());
    drop(spare);

    control.stop();
    tokio::time::timeout(Duration::from_secs(60), task).await???;
    Ok(())
}

fn zn(s: &str) -> ZoneName {
    ZoneName::parse("zone", s).unwrap()
}

/// Every kind of leaf at once, from tiers built here: zones whose names are zonemesh's own
/// (`group-7`, `zonemesh`), zero-padded node names, an unreachable node, Slurm's unmeasured nodes
/// and a node Slurm cannot take. slurmctld loads it without a warning, and zonemesh's hostlists
/// read back through Slurm's own parser.
#[test]
fn slurmctld_loads_every_kind_of_leaf_and_reads_zonemeshs_hostlists() -> Result<()> {
    if !slurm_can_run("slurm leaves") {
        return Ok(());
    }
    let zone = |name: &str, group: &str, nodes: &[&str]| TierZone {
        name: zn(name),
        group: zn(group),
        region: None,
        nodes: nodes
            .iter()
            .map(|n| NodeName::parse("node", *n).unwrap())
            .collect(),
        fresh: true,
        rtt_us: None,
        throughput_bps: None,
    };
    let tiers = Tiers {
        zones: vec![
            zone(
                "group-7",
                "group-1",
                &["node08", "node09", "node10", "node11"],
            ),
            zone("zonemesh", "group-1", &["n9", "n10", "default"]),
            zone("rack.b", "group-2", &["r1.b", "r2.b", "r3.b"]),
        ],
        groups: vec![
            TierGroup {
                name: zn("group-1"),
                zones: vec![zn("group-7"), zn("zonemesh")],
                inside: Default::default(),
                held: false,
                nearest: None,
            },
            TierGroup {
                name: zn("group-2"),
                zones: vec![zn("rack.b")],
                inside: Default::default(),
                held: false,
                nearest: None,
            },
        ],
        ..Tiers::default()
    };
    let slurm_nodes = "node[08-11],n[9-10],r1.b,r2.b,r3.b,login[1-2]";
    let options = SlurmOptions {
        slurm_nodes: Some(hostlist::expand(slurm_nodes)?.into_iter().collect()),
        faulty: ["node09".to_owned()].into(),
        exclude_faulty: true,
        ..SlurmOptions::default()
    };
    let file = slurm::file(&tiers, Form::Tree, &options)?;
    println!("{}", file.text);
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("topology.conf"), &file.text)?;
    let ctl = Slurmctld::start(dir.path(), slurm_nodes)?;
    let shown = ctl.topology()?;
    let set = |s: &[&str]| -> BTreeSet<String> { s.iter().map(|x| (*x).to_owned()).collect() };
    let want: [(&str, BTreeSet<String>); 5] = [
        ("zone-group-7", set(&["node08", "node10", "node11"])),
        ("zone-zonemesh", set(&["n9", "n10"])),
        ("rack.b", set(&["r1.b", "r2.b", "r3.b"])),
        (slurm::FAULTY, set(&["node09"])),
        (slurm::UNMEASURED, set(&["login1", "login2"])),
    ];
    for (leaf, nodes) in &want {
        ensure!(
            shown.get(*leaf).map(|s| &s.1) == Some(nodes),
            "{leaf}: {:?}",
            shown.get(*leaf)
        );
    }
    ensure!(
        shown[slurm::ROOT].1 == ctl.hostnames(slurm_nodes)?,
        "{shown:?}"
    );
    ensure!(ctl.complaints().is_empty(), "{:#?}", ctl.complaints());
    // `default` (no Slurm node can have that name) is in no leaf, and the notes name it.
    ensure!(
        !shown[slurm::ROOT].1.contains("default")
            && file.notes.iter().any(|n| n.ends_with("left out: default")),
        "{:?}",
        file.notes
    );

    // zonemesh's compressed hostlists, expanded by Slurm: the same names.
    let cases: [&[&str]; 6] = [
        &["n8", "n9", "n10", "n11"],
        &["n08", "n09", "n10", "n011"],
        &["z00-n0000", "z00-n0001", "z00-n0009", "z00-n0010"],
        &["n1", "n01", "n001", "n2"],
        &["a1.x", "a2.x", "b7", "c"],
        &["x99", "x100", "x0100", "x101"],
    ];
    for names in cases {
        let text = hostlist::compress(names);
        let back = ctl.hostnames(&text)?;
        ensure!(back == set(names), "{names:?} -> {text} -> {back:?}");
    }
    let many: Vec<String> = (0..3000).map(|i| format!("gpu{i:05}")).collect();
    let text = hostlist::compress(&many);
    ensure!(text == "gpu[00000-02999]", "{text}");
    ensure!(ctl.hostnames(&text)?.len() == 3000);
    Ok(())
}

/// Bad input gets a clear message naming the flag or the node: an unknown form, a --file whose
/// directory does not exist, a node name Slurm cannot take, a failing --on-change (the file stays
/// written). And the yaml form reads as YAML. No slurmctld needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_message() -> Result<()> {
    let logs = tempfile::tempdir()?;
    let aggregator = start_aggregator(&["--in-memory", "--tier-interval", "200ms"], logs.path())?;
    let url = format!("http://{}", aggregator.grpc);
    let nodes = [
        ("a1", "zone-a"),
        ("a2", "zone-a"),
        ("default", "zone-a"),
        ("b1", "zone-b"),
        ("b2", "zone-b"),
    ];
    let mut agents = Vec::new();
    for (node, zone) in nodes {
        let mut agent = FakeAgent::connect(&aggregator, node, zone).await?;
        let paths: Vec<(&str, f64, u64, f64)> = nodes
            .iter()
            .filter(|(peer, _)| *peer != node)
            .map(|(peer, z)| (*peer, if *z == zone { 100.0 } else { 2_000.0 }, 0, 9e9))
            .collect();
        agent.report(&paths).await?;
        agents.push(agent);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = zonemesh(&url, &["tiers", "-o", "json"], None)?;
        let t: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if t["zones"].as_array().map(Vec::len) == Some(2) {
            break;
        }
        ensure!(Instant::now() < deadline, "no tiers: {out:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An unknown form: a usage error that lists the forms.
    let out = zonemesh(&url, &["publish", "--slurm", "torus"], None)?;
    let (_, stderr) = text(&out);
    ensure!(out.status.code() == Some(64), "{out:?}");
    ensure!(
        stderr.contains("invalid value 'torus' for '--slurm <SLURM>'")
            && stderr.contains("tree, block, yaml"),
        "{stderr}"
    );
    // A --file whose directory does not exist: nothing asked, nothing written.
    let out = zonemesh(
        &url,
        &[
            "publish",
            "--slurm",
            "tree",
            "--file",
            "/nonexistent/slurm/topology.conf",
        ],
        None,
    )?;
    let (_, stderr) = text(&out);
    ensure!(out.status.code() == Some(64), "{out:?}");
    ensure!(
        stderr.contains(
            "--file /nonexistent/slurm/topology.conf: the directory /nonexistent/slurm does not exist"
        ),
        "{stderr}"
    );
    // A node Slurm cannot take: named, left out, the rest written.
    let out = zonemesh(&url, &["publish", "--slurm", "tree"], None)?;
    let (stdout, stderr) = text(&out);
    ensure!(out.status.success(), "{stderr}");
    ensure!(
        stderr.contains("zonemesh: node default left out: slurm.conf reads NodeName=DEFAULT"),
        "{stderr}"
    );
    ensure!(
        stdout.contains("SwitchName=zone-a Nodes=a[1-2]\n") && !stdout.contains("Nodes=default"),
        "{stdout}"
    );
    ensure!(
        stdout.contains("# - node default left out"),
        "said in the file too"
    );
    // A bad --slurm-nodes hostlist names the flag.
    let out = zonemesh(
        &url,
        &["publish", "--slurm", "tree", "--slurm-nodes", "a[1-2"],
        None,
    )?;
    ensure!(out.status.code() == Some(64), "{out:?}");
    ensure!(
        text(&out)
            .1
            .contains("--slurm-nodes: \"a[1-2\": unbalanced brackets"),
        "{out:?}"
    );
    // A failing --on-change: its status logged, the file written, exit status 1.
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("topology.conf");
    let file_arg = file.to_str().context("path")?;
    let out = zonemesh(
        &url,
        &[
            "publish",
            "--slurm",
            "tree",
            "--file",
            file_arg,
            "--on-change",
            "echo reconfiguring; exit 3",
        ],
        None,
    )?;
    let (stdout, stderr) = text(&out);
    ensure!(out.status.code() == Some(1), "{out:?}");
    ensure!(
        stdout.contains("reconfiguring"),
        "the command ran: {stdout}"
    );
    ensure!(
        stderr.contains("--on-change `echo reconfiguring; exit 3` exited with status 3")
            && stderr.contains("stays written"),
        "{stderr}"
    );
    ensure!(std::fs::read_to_string(&file)?.contains("SwitchName=zonemesh Switches=group-1"));
    // --dry-run with --file writes nothing.
    let other = dir.path().join("other.conf");
    let out = zonemesh(
        &url,
        &[
            "publish",
            "--slurm",
            "tree",
            "--dry-run",
            "--file",
            other.to_str().context("path")?,
        ],
        None,
    )?;
    ensure!(out.status.success() && !other.exists(), "{out:?}");
    // --slurm block with a base no zone reaches.
    let out = zonemesh(
        &url,
        &["publish", "--slurm", "block", "--slurm-block-base", "8"],
        None,
    )?;
    ensure!(out.status.code() == Some(1), "{out:?}");
    ensure!(
        text(&out)
            .1
            .contains("no block holds the base block size 8"),
        "{out:?}"
    );

    // The yaml form reads as YAML with the structure topology.yaml(5) describes.
    let out = zonemesh(&url, &["publish", "--slurm", "yaml"], None)?;
    ensure!(out.status.success(), "{out:?}");
    if tool_available("python3", &["-c", "import yaml"], "pip install pyyaml") {
        let mut child = Command::new("python3")
            .args([
                "-c",
                "import sys, yaml, json; d = yaml.safe_load(sys.stdin); print(json.dumps([[list(t.keys()), t] for t in d]))",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        use std::io::Write as _;
        child
            .stdin
            .take()
            .context("stdin")?
            .write_all(&out.stdout)?;
        let parsed: Value = serde_json::from_slice(&child.wait_with_output()?.stdout)?;
        let list = parsed.as_array().context("a list")?;
        ensure!(list.len() == 2, "{parsed:#}");
        ensure!(
            list[0][0][0] == "topology" && list[1][0][0] == "topology",
            "topology first"
        );
        ensure!(list[0][1]["topology"] == "zonemesh-tree" && list[0][1]["cluster_default"] == true);
        ensure!(
            list[1][1]["topology"] == "zonemesh-block" && list[1][1]["cluster_default"] == false
        );
        let switches = list[0][1]["tree"]["switches"]
            .as_array()
            .context("switches")?;
        ensure!(
            switches
                .iter()
                .any(|s| s["switch"] == "zone-a" && s["nodes"] == "a[1-2]"),
            "{parsed:#}"
        );
        ensure!(
            list[1][1]["block"]["block_sizes"] == serde_json::json!([2, 4]),
            "{parsed:#}"
        );
    }
    drop(agents);
    Ok(())
}
