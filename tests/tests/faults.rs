//! Faults a real cluster has, against the real aggregator: a full disk under sled, clocks that
//! differ between nodes, and figures that go stale. (The aggregator killed and restarted during
//! ingest is `agent_process.rs`; agents that come and go, `fleet.rs`; a node and a zone cut off,
//! `lab_e2e.rs`.)

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use zonemesh_proto::v1;
use zonemesh_tests::{Aggregator, FakeAgent, Process, binary, http_get, lab_can_run, unique};

/// A private mount namespace holding a small tmpfs at `dir`, kept by a `sleep` (at most 15
/// minutes) and removed with it when dropped: the host's mounts are never touched.
struct SmallDisk {
    holder: Process,
    dir: PathBuf,
}

impl SmallDisk {
    fn new(dir: &Path, size: &str, log_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs -o size={size} zonemesh-test-{} \"$0\" && echo mounted && exec sleep 900",
                unique()
            ))
            .arg(dir);
        let holder = Process::spawn(command, "small-disk", log_dir)?;
        holder
            .line("mounted", Duration::from_secs(10))
            .context("mount the small tmpfs")?;
        Ok(Self {
            holder,
            dir: dir.to_owned(),
        })
    }

    /// `path` (inside the tmpfs) as this process sees it, through the holder's root.
    fn host_path(&self, path: &Path) -> PathBuf {
        let inside = path.strip_prefix("/").unwrap_or(path);
        PathBuf::from(format!("/proc/{}/root", self.holder.id())).join(inside)
    }

    /// Starts the aggregator inside the namespace with its data on the tmpfs.
    fn aggregator(&self, log_dir: &Path) -> Result<Aggregator> {
        let program = binary("zonemesh-aggregator");
        let data = self.dir.join("sled");
        let (pid, program, data) = (
            self.holder.id().to_string(),
            program.to_str().context("utf-8 path")?.to_owned(),
            data.to_str().context("utf-8 path")?.to_owned(),
        );
        Aggregator::start(
            Path::new("nsenter"),
            &[
                "-t",
                &pid,
                "-m",
                "--",
                &program,
                "--listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
                "--data-dir",
                &data,
                "--store-cache-mib",
                "8",
                "--max-report-rate",
                "0",
                // Past /healthz's "degraded" (10 s) and the checks made meanwhile.
                "--store-hang-timeout",
                "30s",
            ],
            log_dir,
        )
    }

    /// Fills the tmpfs with a file until the kernel says it is full; returns the file.
    fn fill(&self) -> Result<PathBuf> {
        let filler = self.host_path(&self.dir.join("filler"));
        let mut file = std::fs::File::create(&filler)?;
        let chunk = vec![0u8; 64 * 1024];
        for _ in 0..100_000 {
            match file.write_all(&chunk) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => return Ok(filler), // ENOSPC
                Err(e) => return Err(e).context("fill the tmpfs"),
            }
        }
        anyhow::bail!("the tmpfs never filled")
    }
}

/// `n` paths to destinations named after `round`: every round adds new paths, so that the
/// store must grow (rewriting the same records, sled can reuse its own free space forever).
fn report_paths(round: u64, n: usize) -> Vec<(String, f64, u64, f64)> {
    (0..n)
        .map(|i| (format!("peer-{round}-{i:03}"), 100.0 + i as f64, 0, 1e9))
        .collect()
}

fn as_refs(paths: &[(String, f64, u64, f64)]) -> Vec<(&str, f64, u64, f64)> {
    paths
        .iter()
        .map(|(d, r, l, t)| (d.as_str(), *r, *l, *t))
        .collect()
}

async fn ingest_health(aggregator: &Aggregator) -> Result<i32> {
    let mut health =
        tonic_health::pb::health_client::HealthClient::new(aggregator.channel().await?);
    Ok(health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "zonemesh.v1.Ingest".into(),
        })
        .await?
        .into_inner()
        .status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_holds_acknowledgements_says_so_and_loses_nothing() -> Result<()> {
    if !lab_can_run("a_full_disk_holds_acknowledgements_says_so_and_loses_nothing") {
        return Ok(());
    }
    let logs = tempfile::tempdir()?;
    let disk = SmallDisk::new(&logs.path().join("disk"), "24m", logs.path())?;
    let mut aggregator = disk.aggregator(logs.path())?;
    let mut round = 0;
    let mut next_paths = move || {
        round += 1;
        report_paths(round, 300)
    };
    // Every report sent, by sequence: what an agent's outbox keeps until it is acknowledged.
    let mut outbox: BTreeMap<u64, Vec<(String, f64, u64, f64)>> = BTreeMap::new();

    let mut agent = FakeAgent::connect(&aggregator, "a1", "zone-a").await?;
    let mut acknowledged = 0;
    for _ in 0..5 {
        let paths = next_paths();
        acknowledged = agent.send_report(&as_refs(&paths), 0).await?;
        outbox.insert(acknowledged, paths);
        agent.wait_ack(acknowledged).await?;
    }
    let filler = disk.fill()?;

    // With the disk full, reports are taken but, once the store cannot write them, not
    // acknowledged, and the aggregator says why. (sled may still have room in its last segment
    // for the first few.)
    let mut body = String::new();
    'reports: for _ in 0..200 {
        let paths = next_paths();
        let sequence = agent.send_report(&as_refs(&paths), 0).await?;
        outbox.insert(sequence, paths);
        // Until this report is acknowledged (written) or /healthz says the store is failing;
        // a slow write on a busy machine is neither, so it waits (at most 30 s).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            body = http_get(aggregator.http, "/healthz")?;
            if body.starts_with("degraded") {
                break 'reports;
            }
            let ack = tokio::time::timeout(Duration::from_millis(500), agent.wait_ack(sequence));
            if ack.await.is_ok() {
                acknowledged = sequence;
                break;
            }
            ensure!(
                tokio::time::Instant::now() < deadline,
                "report {sequence} neither acknowledged nor /healthz degraded in 30 s; the aggregator's log:\n{}",
                aggregator.log()
            );
        }
    }
    ensure!(
        body.starts_with("degraded"),
        "200 reports written to a full disk; /healthz: {body}\n{}",
        aggregator.log()
    );
    let mut sent = Vec::new();
    for _ in 0..3 {
        let paths = next_paths();
        let sequence = agent.send_report(&as_refs(&paths), 0).await?;
        outbox.insert(sequence, paths);
        sent.push(sequence);
    }
    eprintln!("/healthz with the disk full: {body}");
    // The write failed for want of space, or sled hung in its flush (seen about once in six
    // runs on a full tmpfs, and then it never returns): either way the reason is given.
    let hung = body.contains("a store write has not finished");
    ensure!(
        hung || body.contains("No space left on device") || body.contains("os error 28"),
        "{body}"
    );
    let metrics = http_get(aggregator.http, "/metrics")?;
    ensure!(
        metrics.contains("\nzonemesh_store_healthy 0\n"),
        "{metrics}"
    );
    ensure!(
        ingest_health(&aggregator).await?
            == tonic_health::pb::health_check_response::ServingStatus::NotServing as i32
    );
    // Held, not lost: no acknowledgement of the new reports arrives while the disk is full.
    let early = tokio::time::timeout(Duration::from_secs(3), agent.wait_ack(sent[2])).await;
    ensure!(
        early.is_err(),
        "a report was acknowledged while the disk was full"
    );
    // Queries still work from memory.
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    topology.list_nodes(v1::ListNodesRequest::default()).await?;

    // Space again.
    std::fs::remove_file(&filler)?;
    let last = *sent.last().context("sent")?;
    if hung {
        // A hung write never returns: the aggregator gives up on it (--store-hang-timeout) and
        // exits, and is started again as its supervisor would. What it acknowledged is on disk;
        // the agent sends the rest again, as zonemesh-agent's outbox does.
        let code = aggregator.wait_exit(Duration::from_secs(60))?;
        let log = aggregator.log();
        ensure!(
            code == Some(1) && log.contains("has not returned in"),
            "exit code {code:?} after a hung store write; the aggregator's log:\n{log}"
        );
        aggregator = disk.aggregator(logs.path())?;
        agent = FakeAgent::connect(&aggregator, "a1", "zone-a").await?;
        ensure!(
            agent.applied >= acknowledged,
            "applied after the restart: {}, acknowledged before it: {acknowledged}",
            agent.applied
        );
        for (_, paths) in outbox.range(agent.applied + 1..) {
            agent.send_report(&as_refs(paths), 0).await?;
        }
    }
    // The held (or sent again) reports are written and acknowledged, and the health recovers.
    tokio::time::timeout(Duration::from_secs(30), agent.wait_ack(last))
        .await
        .with_context(|| {
            format!(
                "no acknowledgement after the disk had space again; the aggregator's log:\n{}",
                aggregator.log()
            )
        })??;
    let body = http_get(aggregator.http, "/healthz")?;
    ensure!(body == "ok\n", "{body}");
    ensure!(
        ingest_health(&aggregator).await?
            == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    // A restart finds every acknowledged report: the hello's answer says all are applied.
    drop(agent);
    aggregator.terminate()?;
    let aggregator = disk.aggregator(logs.path())?;
    let agent = FakeAgent::connect(&aggregator, "a1", "zone-a").await?;
    ensure!(
        agent.applied == last,
        "applied after the restart: {}, acknowledged before it: {last}",
        agent.applied
    );
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    let last_paths = outbox.get(&last).context("the last report")?;
    let path = topology
        .get_path(v1::GetPathRequest {
            src: "a1".into(),
            dst: last_paths.last().context("paths")?.0.clone(),
        })
        .await?
        .into_inner();
    ensure!(path.figures.is_some(), "{path:?}");
    Ok(())
}

/// One report from every agent but `skip`, to each other node, at its own clock; acknowledged.
async fn report_round(
    agents: &mut [(FakeAgent, &str, i64)],
    nodes: &[&str],
    skip: Option<&str>,
) -> Result<()> {
    for (agent, node, skew) in agents.iter_mut() {
        if Some(*node) == skip {
            continue;
        }
        let peers: Vec<(&str, f64, u64, f64)> = nodes
            .iter()
            .filter(|p| *p != node)
            .map(|p| (*p, 150.0, 0, 1e9))
            .collect();
        let sequence = agent.send_report(&peers, *skew).await?;
        agent.wait_ack(sequence).await?;
    }
    Ok(())
}

async fn place(aggregator: &Aggregator, workers: u32) -> Result<Vec<String>> {
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    let answer = topology
        .place(v1::PlaceRequest {
            workers,
            zone_policy: v1::ZonePolicy::PreferOne as i32,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(answer.assignments.into_iter().map(|a| a.node).collect())
}

async fn node_state(aggregator: &Aggregator, node: &str) -> Result<v1::NodeState> {
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    let nodes = topology
        .list_nodes(v1::ListNodesRequest::default())
        .await?
        .into_inner()
        .nodes;
    let n = nodes
        .iter()
        .find(|n| n.name == node)
        .with_context(|| format!("{node} is not listed"))?;
    Ok(n.state())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_clocks_change_nothing_and_stale_nodes_are_never_placed() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let aggregator = zonemesh_tests::start_aggregator(
        &["--in-memory", "--window", "1s", "--stale-after", "3s"],
        dir.path(),
    )?;
    // a1's clock is an hour ahead, a2's an hour behind, a3's right.
    let skews = [("a1", 3_600_000), ("a2", -3_600_000), ("a3", 0)];
    let mut agents = Vec::new();
    for (node, skew) in skews {
        agents.push((
            FakeAgent::connect(&aggregator, node, "zone-a").await?,
            node,
            skew,
        ));
    }
    let names: Vec<&str> = skews.iter().map(|(n, _)| *n).collect();
    report_round(&mut agents, &names, None).await?;

    // Figures are what was measured, fresh, whatever the agents' clocks said.
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    for (src, dst) in [("a1", "a2"), ("a2", "a3"), ("a3", "a1")] {
        let figures = topology
            .get_path(v1::GetPathRequest {
                src: src.into(),
                dst: dst.into(),
            })
            .await?
            .into_inner()
            .figures
            .context("figures")?;
        ensure!(
            figures.latency_provenance() == v1::Provenance::Measured,
            "{src}→{dst}: {figures:?}"
        );
        let rtt = figures.rtt.context("rtt")?;
        ensure!(rtt.p50_us == 150.0, "{src}→{dst}: p50 {}", rtt.p50_us);
        ensure!(
            (0..5_000).contains(&figures.latency_age_ms),
            "{src}→{dst}: age {} ms",
            figures.latency_age_ms
        );
    }
    for (node, _) in skews {
        ensure!(
            node_state(&aggregator, node).await? == v1::NodeState::Ready,
            "{node} is not READY"
        );
    }
    let mut chosen = place(&aggregator, 3).await?;
    chosen.sort();
    ensure!(chosen == ["a1", "a2", "a3"], "{chosen:?}");

    // a2's agent keeps its stream open but stops reporting: once its figures are older than
    // --stale-after it is STALE, and no placement uses it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        report_round(&mut agents, &names, Some("a2")).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        if node_state(&aggregator, "a2").await? == v1::NodeState::Stale {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "a2 did not turn STALE within 20 s of its last report"
        );
    }
    for (node, _) in [("a1", ()), ("a3", ())] {
        ensure!(node_state(&aggregator, node).await? == v1::NodeState::Ready);
    }
    let chosen = place(&aggregator, 2).await?;
    ensure!(!chosen.contains(&"a2".to_owned()), "{chosen:?}");
    ensure!(chosen.len() == 2, "{chosen:?}");
    // Three workers no longer fit on READY nodes: refused rather than placed on a2.
    match place(&aggregator, 3).await {
        Ok(chosen) => ensure!(!chosen.contains(&"a2".to_owned()), "{chosen:?}"),
        Err(e) => ensure!(
            e.chain()
                .filter_map(|c| c.downcast_ref::<tonic::Status>())
                .any(|s| s.code() == tonic::Code::FailedPrecondition),
            "{e:#}"
        ),
    }
    Ok(())
}

/// A store write that never returns stops the aggregator with a clear error and exit code 1
/// instead of holding acknowledgements forever: the fault injection makes every write take 60 s,
/// the hang timeout is 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_write_that_hangs_stops_the_aggregator_with_the_reason() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("sled");
    let mut aggregator = zonemesh_tests::start_aggregator(
        &[
            "--data-dir",
            data.to_str().context("utf-8 path")?,
            "--fault-commit-delay",
            "60s",
            "--store-hang-timeout",
            "2s",
        ],
        dir.path(),
    )?;
    // The hello's node record is the first write. (Its acknowledgement never comes, so the
    // connection is left to itself.)
    let channel = aggregator.channel().await?;
    let hello = tokio::spawn(async move { FakeAgent::connect_on(channel, "a1", "zone-a").await });
    let code = aggregator.wait_exit(Duration::from_secs(30))?;
    let log = aggregator.log();
    ensure!(code == Some(1), "exit code {code:?}; log:\n{log}");
    ensure!(
        log.contains(&format!("store {}: write failed", data.display()))
            && log.contains("has not returned in 2 s"),
        "{log}"
    );
    hello.abort();
    Ok(())
}
