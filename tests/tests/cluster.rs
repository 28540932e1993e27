//! Replicas on NATS JetStream (`zonemesh-aggregator --cluster`) with real servers: three
//! nats-server processes on loopback and three aggregator replicas, fed by test agents that
//! reconnect to another replica when theirs fails and send again what was not acknowledged, as
//! the real agent does. Every test checks the promise that matters: what was acknowledged is
//! applied exactly once on every replica, whatever process is SIGKILLed.
//!
//! Each report of a test agent carries one path with 100 probes, of which `seq % 7` are lost, so
//! that a replica's lifetime totals of that path tell whether every report was applied exactly
//! once (a report applied twice or not at all changes them).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::sync::mpsc;
use zonemesh_proto::v1;
use zonemesh_tests::nats::{INSTALL, NatsCluster};
use zonemesh_tests::{Aggregator, start_aggregator, tool_available, wait_for};

/// The stream the replicas share.
const STREAM: &str = "ZONEMESH";

fn nats_available() -> bool {
    tool_available("nats-server", &["--version"], INSTALL)
}

/// The servers, the replicas, and their directories.
struct Setup {
    nats: NatsCluster,
    replicas: Vec<Option<Aggregator>>,
    data: Vec<PathBuf>,
    extra: Vec<String>,
    /// Each replica on a fixed HTTP port it advertises (`--advertise-url`), as `https://` when
    /// `https`.
    advertise: bool,
    https: bool,
    logs: PathBuf,
    _dir: tempfile::TempDir,
}

impl Setup {
    /// Three NATS servers and `replicas` replicas, each started with `extra` flags.
    fn start(replicas: usize, extra: &[&str]) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs)?;
        let nats = NatsCluster::start(3, dir.path(), &logs)?;
        let mut setup = Self {
            nats,
            replicas: Vec::new(),
            data: Vec::new(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            advertise: false,
            https: false,
            logs,
            _dir: dir,
        };
        for i in 0..replicas {
            setup.start_replica(i)?;
        }
        Ok(setup)
    }

    /// Starts replica `i` (again) on its data directory.
    fn start_replica(&mut self, i: usize) -> Result<()> {
        let urls = self.nats.urls();
        self.start_replica_on(i, &urls)
    }

    /// Starts replica `i` (again) on its data directory, reaching the log at `urls`.
    fn start_replica_on(&mut self, i: usize, urls: &str) -> Result<()> {
        while self.replicas.len() <= i {
            self.data
                .push(self._dir.path().join(format!("r{}", self.replicas.len())));
            self.replicas.push(None);
        }
        let name = format!("r{i}");
        let data = self.data[i].display().to_string();
        let mut args = vec![
            "--cluster",
            urls,
            "--cluster-max-mib",
            "128",
            "--replica-name",
            &name,
            "--data-dir",
            &data,
            "--snapshot-interval",
            "2s",
        ];
        let (listen, url);
        if self.advertise {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            listen = format!("127.0.0.1:{port}");
            let scheme = if self.https { "https" } else { "http" };
            url = format!("{scheme}://{listen}");
            args.extend(["--http-listen", &listen, "--advertise-url", &url]);
        }
        args.extend(self.extra.iter().map(String::as_str));
        self.replicas[i] = Some(start_aggregator(&args, &self.logs)?);
        Ok(())
    }

    fn replica(&self, i: usize) -> &Aggregator {
        self.replicas[i].as_ref().expect("running")
    }

    /// The gRPC addresses of the running replicas.
    fn addresses(&self) -> Vec<SocketAddr> {
        self.replicas.iter().flatten().map(|a| a.grpc).collect()
    }

    /// SIGKILLs replica `i`.
    fn kill_replica(&mut self, i: usize) {
        if let Some(r) = self.replicas[i].take() {
            r.kill();
        }
    }

    /// Waits until every running replica has applied the whole log and is ready.
    async fn wait_caught_up(&self, timeout: Duration) -> Result<()> {
        for r in self.replicas.iter().flatten() {
            let http = r.http;
            wait_for("a replica applied the whole log", timeout, || async move {
                let body = zonemesh_tests::http_get(http, "/healthz").ok()?;
                let ready = zonemesh_tests::http_get(http, "/readyz").is_ok();
                (ready && body.contains(" 0 entries behind")).then_some(())
            })
            .await
            .with_context(|| format!("replica at {http}"))?;
        }
        Ok(())
    }
}

/// A test agent: reports one path per report, one report at a time, each until acknowledged;
/// when its replica fails it says hello to the next one and sends again what was not
/// acknowledged, with the same sequence numbers.
struct TestAgent {
    node: String,
    zone: String,
    replicas: Vec<SocketAddr>,
    at: usize,
    stream: Option<(
        mpsc::Sender<v1::AgentMessage>,
        tonic::Streaming<v1::AggregatorMessage>,
    )>,
    /// The highest sequence acknowledged.
    acked: u64,
    reconnects: u32,
    /// The throughput tests it would have run.
    grants: GrantLog,
}

/// The throughput tests an agent would have run, as the real agent decides (`agent/src/lib.rs`:
/// a grant of an older leader than one already received, or read more than 1 s after its start,
/// is skipped).
#[derive(Default)]
struct GrantLog {
    /// (peer, start, end), Unix ms.
    tests: Vec<(String, i64, i64)>,
    /// Grants skipped: late, of an older epoch.
    skipped: (u32, u32),
    newest_epoch: u64,
}

impl GrantLog {
    fn take(&mut self, g: v1::ThroughputGrant) {
        if g.epoch < self.newest_epoch {
            self.skipped.1 += 1;
            return;
        }
        self.newest_epoch = g.epoch;
        if zonemesh_common::time::unix_ms() > g.start_unix_ms + 1_000 {
            self.skipped.0 += 1;
            return;
        }
        let end = g.start_unix_ms + i64::from(g.warmup_ms + g.duration_ms);
        self.tests.push((g.peer, g.start_unix_ms, end));
    }
}

impl TestAgent {
    fn new(node: &str, zone: &str, replicas: Vec<SocketAddr>, first: usize) -> Self {
        Self {
            node: node.into(),
            zone: zone.into(),
            at: first % replicas.len(),
            replicas,
            stream: None,
            acked: 0,
            reconnects: 0,
            grants: GrantLog::default(),
        }
    }

    /// Says hello to the replica at `self.at`, or the next ones in turn.
    async fn connect(&mut self) -> Result<()> {
        for _ in 0..(3 * self.replicas.len()) {
            let address = self.replicas[self.at];
            match self.hello(address).await {
                Ok(applied) => {
                    self.acked = self.acked.max(applied);
                    return Ok(());
                }
                Err(_) => {
                    self.at = (self.at + 1) % self.replicas.len();
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        }
        bail!("{}: no replica took its hello", self.node)
    }

    async fn hello(&mut self, address: SocketAddr) -> Result<u64> {
        let channel = tonic::transport::Channel::from_shared(format!("http://{address}"))?
            .connect_timeout(Duration::from_secs(2))
            .connect()
            .await?;
        let (tx, rx) = mpsc::channel(16);
        tx.send(v1::AgentMessage {
            kind: Some(v1::agent_message::Kind::Hello(v1::Hello {
                node_name: self.node.clone(),
                zone: self.zone.clone(),
                addresses: vec!["192.0.2.1".into()],
                agent_version: "test".into(),
                icmp_mode: v1::IcmpMode::Raw as i32,
                probe_port: 7402,
                ..Default::default()
            })),
        })
        .await?;
        let mut client = v1::ingest_client::IngestClient::new(channel);
        let mut rx = tokio::time::timeout(
            Duration::from_secs(40),
            client.connect(tokio_stream::wrappers::ReceiverStream::new(rx)),
        )
        .await??
        .into_inner();
        let applied = match tokio::time::timeout(Duration::from_secs(40), rx.message()).await?? {
            Some(v1::AggregatorMessage {
                kind: Some(v1::aggregator_message::Kind::Ack(a)),
            }) => a.sequence,
            other => bail!("the answer to the hello was {other:?}"),
        };
        self.stream = Some((tx, rx));
        Ok(applied)
    }

    /// The report of sequence `seq`.
    fn report(&self, seq: u64) -> v1::AgentMessage {
        let t = zonemesh_common::time::unix_ms();
        let lost = lost(seq);
        v1::AgentMessage {
            kind: Some(v1::agent_message::Kind::Report(v1::Report {
                sequence: seq,
                paths: vec![v1::PathSummary {
                    src: self.node.clone(),
                    dst: peer(&self.node),
                    window_start_unix_ms: t - 1_000,
                    window_end_unix_ms: t,
                    probes_sent: 100,
                    probes_received: 100 - lost,
                    rtt: Some(v1::RttStats {
                        samples: 100 - lost,
                        min_us: 100.0,
                        p50_us: 100.0,
                        p90_us: 100.0,
                        p99_us: 100.0,
                        max_us: 100.0,
                        mean_us: 100.0,
                        jitter_us: 0.0,
                    }),
                    ..Default::default()
                }],
            })),
        }
    }

    /// Sends `seq` until it is acknowledged (reconnecting elsewhere as needed), or `limit` runs
    /// out.
    async fn deliver(&mut self, seq: u64, limit: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + limit;
        while self.acked < seq {
            if tokio::time::Instant::now() > deadline {
                bail!("{}: report {seq} not acknowledged in {limit:?}", self.node);
            }
            if self.stream.is_none() {
                self.connect().await?;
                self.reconnects += 1;
                continue;
            }
            if self.try_send(seq).await.is_err() {
                self.stream = None;
                self.at = (self.at + 1) % self.replicas.len();
            }
        }
        Ok(())
    }

    /// Sends `seq` on the stream and waits (at most 45 s) for an acknowledgement of it.
    async fn try_send(&mut self, seq: u64) -> Result<()> {
        let report = self.report(seq);
        let (tx, rx) = self.stream.as_mut().expect("connected");
        tx.send(report).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(45);
        loop {
            let message = tokio::time::timeout_at(deadline, rx.message()).await??;
            match message.and_then(|m| m.kind) {
                Some(v1::aggregator_message::Kind::Ack(a)) => {
                    self.acked = self.acked.max(a.sequence);
                    if a.sequence >= seq {
                        return Ok(());
                    }
                }
                Some(v1::aggregator_message::Kind::Error(e)) => bail!("refused: {}", e.message),
                Some(v1::aggregator_message::Kind::Grant(g)) => self.grants.take(g),
                Some(_) => {}
                None => bail!("the stream ended"),
            }
        }
    }
}

/// Probes lost in report `seq` (of 100).
fn lost(seq: u64) -> u64 {
    seq % 7
}

/// The one peer a test agent reports.
fn peer(node: &str) -> String {
    format!("{node}-peer")
}

/// What a replica holds of the path of test agent `node` after its reports 1..=`n`: the probes
/// sent and received over its life.
async fn totals(replica: &Aggregator, node: &str) -> Result<(u64, u64)> {
    let mut client = v1::topology_client::TopologyClient::new(replica.channel().await?);
    let answer = client
        .get_path(v1::GetPathRequest {
            src: node.into(),
            dst: peer(node),
        })
        .await?
        .into_inner();
    let f = answer.figures.context("figures")?;
    Ok((f.probes_sent_total, f.probes_received_total))
}

/// The totals reports 1..=`n` make when each is applied exactly once.
fn expected(n: u64) -> (u64, u64) {
    (100 * n, (1..=n).map(|s| 100 - lost(s)).sum())
}

/// Checks that every running replica applied each agent's reports 1..=`n` exactly once.
async fn every_replica_applied_once(setup: &Setup, agents: &[String], n: u64) -> Result<()> {
    for (i, r) in setup.replicas.iter().enumerate() {
        let Some(r) = r else { continue };
        for node in agents {
            let got = totals(r, node).await?;
            assert_eq!(
                got,
                expected(n),
                "replica r{i}: {node}'s reports 1..={n} applied exactly once (sent, received)"
            );
        }
    }
    Ok(())
}

/// Reads the whole stream and counts the reports it holds by node and sequence: each must be
/// there exactly once.
async fn stream_holds_each_report_once(setup: &Setup, agents: &[String], n: u64) -> Result<()> {
    let mut seen: BTreeMap<(String, u64), u32> = BTreeMap::new();
    for (_, entry) in read_stream(setup, None).await? {
        if let Ok(zonemesh_aggregator::cluster::entry::Entry::Report { node, report }) = entry {
            *seen.entry((node.to_string(), report.sequence)).or_default() += 1;
        }
    }
    for node in agents {
        for seq in 1..=n {
            assert_eq!(
                seen.get(&(node.clone(), seq)).copied().unwrap_or(0),
                1,
                "the stream holds {node}'s report {seq} exactly once"
            );
        }
    }
    Ok(())
}

/// Every entry the stream holds (on `subject` only, when given), in order, with its sequence,
/// decoded as the replicas decode it.
async fn read_stream(
    setup: &Setup,
    subject: Option<String>,
) -> Result<
    Vec<(
        u64,
        Result<
            zonemesh_aggregator::cluster::entry::Entry,
            zonemesh_aggregator::cluster::entry::EntryError,
        >,
    )>,
> {
    use tokio_stream::StreamExt;
    let js = async_nats::jetstream::new(nats_client(&setup.nats).await?);
    let stream = js.get_stream(STREAM).await?;
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
            filter_subject: subject.unwrap_or_default(),
            ..Default::default()
        })
        .await?;
    let mut messages = consumer.messages().await?;
    let mut out = Vec::new();
    while let Ok(Some(message)) =
        tokio::time::timeout(Duration::from_secs(3), messages.next()).await
    {
        let message = message?;
        let info = message.info().map_err(|e| anyhow::anyhow!("{e}"))?;
        let (seq, pending) = (info.stream_sequence, info.pending);
        out.push((
            seq,
            zonemesh_aggregator::cluster::entry::Entry::decode(&message.payload),
        ));
        if pending == 0 {
            break;
        }
    }
    Ok(out)
}

/// A NATS client of the test's own (to read the stream, or to write what no replica would).
async fn nats_client(nats: &NatsCluster) -> Result<async_nats::Client> {
    let servers: Vec<async_nats::ServerAddr> = nats
        .url_list()
        .iter()
        .map(|u| u.parse())
        .collect::<std::result::Result<_, _>>()?;
    Ok(async_nats::connect(servers).await?)
}

/// Agents `a0`…, spread over the replicas.
fn agents(setup: &Setup, count: usize) -> Vec<TestAgent> {
    let replicas = setup.addresses();
    (0..count)
        .map(|i| {
            TestAgent::new(
                &format!("a{i}"),
                &format!("zone-{}", i % 2),
                replicas.clone(),
                i,
            )
        })
        .collect()
}

/// Each agent delivers its reports `from..=to`, all at once.
async fn deliver_all(agents: &mut [TestAgent], from: u64, to: u64) -> Result<()> {
    let runs = agents.iter_mut().map(|a| async move {
        for seq in from..=to {
            a.deliver(seq, Duration::from_secs(90)).await?;
        }
        anyhow::Ok(())
    });
    for result in futures_util::future::join_all(runs).await {
        result?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_reports_survive_sigkill_of_the_log_leader_and_land_once() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(3, &[])?;
    let mut agents = agents(&setup, 6);
    let names: Vec<String> = agents.iter().map(|a| a.node.clone()).collect();
    deliver_all(&mut agents, 1, 10).await?;
    let leader = setup
        .nats
        .leader_of(STREAM)
        .context("the stream has a leader")?;
    let kill = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        setup.nats.kill(leader);
        let started = zonemesh_common::time::Stopwatch::start();
        (leader, started)
    };
    let (deliver, (killed, started)) = tokio::join!(deliver_all(&mut agents, 11, 200), kill);
    deliver?;
    println!(
        "log leader n{killed} SIGKILLed during ingest: every report acknowledged {:.1} s later; reconnects {}",
        started.elapsed().as_secs_f64(),
        agents.iter().map(|a| a.reconnects).sum::<u32>()
    );
    setup.nats.restart(killed)?;
    setup.wait_caught_up(Duration::from_secs(60)).await?;
    every_replica_applied_once(&setup, &names, 200).await?;
    stream_holds_each_report_once(&setup, &names, 200).await?;
    Ok(())
}

/// Once ingest is quiet, every running replica lists the same nodes in the same states, and
/// every path's RTT and loss (measured, or the model's estimate) agree within 1 % — each
/// replica fits its model on its own schedule, so this is waited for (at most 30 s).
async fn replicas_agree(setup: &Setup) -> Result<()> {
    let mut last = String::new();
    for _ in 0..60 {
        match disagreement(setup).await? {
            None => return Ok(()),
            Some(why) => last = why,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("the replicas did not converge in 30 s: {last}")
}

/// What two replicas disagree on, if anything.
async fn disagreement(setup: &Setup) -> Result<Option<String>> {
    let mut views = Vec::new();
    for r in setup.replicas.iter().flatten() {
        let mut client = v1::topology_client::TopologyClient::new(r.channel().await?);
        let mut nodes: Vec<(String, i32)> = client
            .list_nodes(v1::ListNodesRequest::default())
            .await?
            .into_inner()
            .nodes
            .into_iter()
            .map(|n| (n.name, n.state))
            .collect();
        nodes.sort();
        let mut cells = Vec::new();
        for metric in [v1::Metric::RttP50Us, v1::Metric::LossRatio] {
            let m = client
                .get_matrix(v1::GetMatrixRequest {
                    metric: metric as i32,
                    ..Default::default()
                })
                .await?
                .into_inner();
            cells.push((
                m.nodes,
                m.cells.into_iter().map(|c| c.value).collect::<Vec<_>>(),
            ));
        }
        views.push((r.grpc, nodes, cells));
    }
    let (first, rest) = views.split_first().context("a replica runs")?;
    for (at, nodes, cells) in rest {
        if nodes != &first.1 {
            return Ok(Some(format!(
                "replica {at} lists {nodes:?}, {} {:?}",
                first.0, first.1
            )));
        }
        for ((names, values), (names0, values0)) in cells.iter().zip(&first.2) {
            if names != names0 {
                return Ok(Some(format!(
                    "replica {at}: the matrix's nodes {names:?} against {names0:?}"
                )));
            }
            for (k, (v, v0)) in values.iter().zip(values0).enumerate() {
                if (v - v0).abs() > 0.01 * v0.abs().max(v.abs()) + 1e-12 {
                    let n = names.len();
                    return Ok(Some(format!(
                        "replica {at}: path {} -> {}: {v} against {v0} at {}",
                        names[k / n],
                        names[k % n],
                        first.0
                    )));
                }
            }
        }
    }
    Ok(None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_sigkilled_during_ingest_hands_its_agents_over_and_catches_up() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(3, &[])?;
    let mut agents = agents(&setup, 6);
    let names: Vec<String> = agents.iter().map(|a| a.node.clone()).collect();
    deliver_all(&mut agents, 1, 10).await?;
    let before: u32 = agents.iter().map(|a| a.reconnects).sum();
    let victim = setup.replica(1).pid();
    let kill = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::process::Command::new("kill")
            .args(["-KILL", &victim.to_string()])
            .status()
    };
    let (deliver, killed) = tokio::join!(deliver_all(&mut agents, 11, 200), kill);
    killed?;
    deliver?;
    setup.kill_replica(1); // reaps it
    let moved = agents.iter().map(|a| a.reconnects).sum::<u32>() - before;
    assert!(
        moved >= 2,
        "the agents of the killed replica said hello elsewhere ({moved})"
    );
    setup.start_replica(1)?;
    setup.wait_caught_up(Duration::from_secs(60)).await?;
    assert!(
        setup
            .replica(1)
            .log()
            .contains("starting from the checkpoint"),
        "the restarted replica starts from its checkpoint: {}",
        setup.replica(1).log()
    );
    every_replica_applied_once(&setup, &names, 200).await?;
    stream_holds_each_report_once(&setup, &names, 200).await?;
    replicas_agree(&setup).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_replica_after_the_retention_passed_starts_from_a_snapshot() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    // The log keeps 4 s; snapshots every 2 s.
    let mut setup = Setup::start(2, &["--cluster-retention", "4s"])?;
    let mut agents = agents(&setup, 4);
    let names: Vec<String> = agents.iter().map(|a| a.node.clone()).collect();
    deliver_all(&mut agents, 1, 12).await?;
    // Quiet until the retention has dropped every entry, and a snapshot holds them all.
    let nats = &setup.nats;
    let state = wait_for(
        "the retention dropped the first entries",
        Duration::from_secs(30),
        || async {
            (0..nats.len())
                .find_map(|i| nats.stream(i, STREAM))
                .filter(|s| s.first > 1)
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    setup.data.push(setup._dir.path().join("r2"));
    setup.replicas.push(None);
    setup.start_replica(2)?;
    setup.wait_caught_up(Duration::from_secs(60)).await?;
    let log = setup.replica(2).log();
    assert!(
        log.contains("starting from the newest snapshot"),
        "the log held entries from {} only; the new replica starts from a snapshot: {log}",
        state.first
    );
    every_replica_applied_once(&setup, &names, 12).await?;
    replicas_agree(&setup).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_acknowledged_is_lost_when_every_log_server_is_sigkilled_at_once() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(3, &[])?;
    let mut agents = agents(&setup, 4);
    let names: Vec<String> = agents.iter().map(|a| a.node.clone()).collect();
    deliver_all(&mut agents, 1, 10).await?;
    let nats = &mut setup.nats;
    let outage = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        for i in 0..nats.len() {
            nats.kill(i);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        for i in 0..nats.len() {
            nats.restart(i)?;
        }
        for i in 0..nats.len() {
            nats.wait_healthy(i)?;
        }
        anyhow::Ok(())
    };
    let (deliver, outage) = tokio::join!(deliver_all(&mut agents, 11, 200), outage);
    outage?;
    deliver?;
    setup.wait_caught_up(Duration::from_secs(60)).await?;
    every_replica_applied_once(&setup, &names, 200).await?;
    stream_holds_each_report_once(&setup, &names, 200).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_asked_again_elsewhere_are_answered_while_a_replica_dies() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(3, &[])?;
    let mut agents = agents(&setup, 4);
    deliver_all(&mut agents, 1, 5).await?;
    setup.wait_caught_up(Duration::from_secs(30)).await?;
    let replicas = setup.addresses();
    let victim = setup.replica(1).pid();
    const QUERIES: usize = 2_000;
    let (mut answered, mut retried) = (0usize, 0usize);
    for q in 0..QUERIES {
        if q == QUERIES / 4 {
            std::process::Command::new("kill")
                .args(["-KILL", &victim.to_string()])
                .status()?;
        }
        // A client that asks the next replica when one fails (as `zonemesh` does).
        for attempt in 0..replicas.len() {
            let address = replicas[(q + attempt) % replicas.len()];
            let asked = async {
                let channel = tonic::transport::Channel::from_shared(format!("http://{address}"))?
                    .connect_timeout(Duration::from_millis(500))
                    .connect()
                    .await?;
                let mut client = v1::topology_client::TopologyClient::new(channel);
                let mut request = tonic::Request::new(v1::RankNodesRequest {
                    limit: 10,
                    ..Default::default()
                });
                request.set_timeout(Duration::from_secs(2));
                client.rank_nodes(request).await?;
                anyhow::Ok(())
            };
            if asked.await.is_ok() {
                answered += 1;
                break;
            }
            retried += 1;
        }
    }
    setup.kill_replica(1);
    let share = answered as f64 / QUERIES as f64;
    println!(
        "queries answered while a replica was SIGKILLed: {answered} of {QUERIES} ({:.2} %), {retried} asked again elsewhere",
        100.0 * share
    );
    assert!(
        share >= 0.999,
        "at least 99.9 % answered: {answered} of {QUERIES}"
    );
    assert!(retried > 0, "the dead replica's share was asked elsewhere");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_cluster_flag_fails_at_start_and_an_unreadable_entry_is_skipped_alike() -> Result<()>
{
    if !nats_available() {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let aggregator = zonemesh_tests::binary("zonemesh-aggregator");
    // Not a NATS URL: a usage error (64) naming the flag, before anything opens.
    let out = std::process::Command::new(&aggregator)
        .args(["--in-memory", "--cluster", "http://127.0.0.1:4222"])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("--cluster"), "{stderr}");
    // Advertising https:// needs a certificate to serve and a CA to reach the leader with; an
    // http:// one with TLS only cannot be reached in the clear.
    let pki = zonemesh_tests::pki::Ca::new("flags CA")?;
    let ca = pki.write(&dir.path().join("ca.crt"))?;
    let server = pki.server(dir.path(), "server")?;
    let tls: [&std::ffi::OsStr; 4] = [
        "--tls-cert".as_ref(),
        server.cert.as_os_str(),
        "--tls-key".as_ref(),
        server.key.as_os_str(),
    ];
    let cases: [(&[&std::ffi::OsStr], &str, &str); 4] = [
        (&[], "https://127.0.0.1:1", "--tls-cert"),
        (&tls, "https://127.0.0.1:1", "--peer-ca"),
        (&tls, "http://127.0.0.1:1", "use https://"),
        (
            &["--peer-ca".as_ref(), ca.as_os_str()],
            "ftp://x",
            "--advertise-url",
        ),
    ];
    for (flags, url, named) in cases {
        let out = std::process::Command::new(&aggregator)
            .args(["--in-memory", "--cluster", "nats://127.0.0.1:4222"])
            .args(flags)
            .args(["--advertise-url", url])
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{url}: {stderr}");
        assert!(stderr.contains(named), "{url}: {stderr}");
    }
    // Nobody listens there: a clear error at start naming the flag, exit status 1.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let started = zonemesh_common::time::Stopwatch::start();
    let out = std::process::Command::new(&aggregator)
        .args([
            "--in-memory",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(["--cluster", &format!("nats://127.0.0.1:{closed}")])
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--cluster"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "it says so soon"
    );
    drop(dir);

    // An entry that does not decode: every replica logs, counts and skips it, and goes on.
    let setup = Setup::start(2, &[])?;
    let mut agents = agents(&setup, 2);
    let names: Vec<String> = agents.iter().map(|a| a.node.clone()).collect();
    deliver_all(&mut agents, 1, 3).await?;
    let client = nats_client(&setup.nats).await?;
    let js = async_nats::jetstream::new(client);
    js.publish(
        "zonemesh.log.zone-0.report",
        b"\xff\xfe not an entry".to_vec().into(),
    )
    .await?
    .await?;
    deliver_all(&mut agents, 4, 6).await?;
    setup.wait_caught_up(Duration::from_secs(30)).await?;
    every_replica_applied_once(&setup, &names, 6).await?;
    for r in setup.replicas.iter().flatten() {
        let metrics = zonemesh_tests::http_get(r.http, "/metrics")?;
        assert!(
            metrics
                .lines()
                .any(|l| l == "zonemesh_cluster_unreadable_entries_total 1"),
            "counted once on every replica: {}",
            metrics
                .lines()
                .filter(|l| l.contains("cluster"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(r.log().contains("does not decode"), "logged");
    }
    Ok(())
}

/// The NATS configuration `deploy/cluster/nats.yaml` ships, run for real (one server, on
/// loopback ports): a replica with the aggregators' user and password creates the stream and
/// the bucket, appends, reads and snapshots, and becomes ready; a client without them is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_nats_configuration_lets_aggregators_in_and_no_one_else() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let manifest = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/cluster/nats.yaml"),
    )?;
    // The ConfigMap's nats.conf, as it is, with loopback ports, a store of the test's, and
    // without the routes to the other pods.
    let conf: String = manifest
        .split("nats.conf: |\n")
        .nth(1)
        .context("nats.conf in the ConfigMap")?
        .lines()
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", &l[4..]))
        .collect();
    let dir = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let http = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let start = conf.find("cluster {").context("a cluster block")?;
    let end = start + conf[start..].find("\n}\n").context("its end")? + 3;
    let conf = format!("{}{}", &conf[..start], &conf[end..])
        .replace("0.0.0.0:4222", &format!("127.0.0.1:{port}"))
        .replace("0.0.0.0:8222", &format!("127.0.0.1:{http}"))
        .replace(
            "store_dir: /data",
            &format!("store_dir: {}", dir.path().join("js").display()),
        )
        .replace("max_file_store: 64GB", "max_file_store: 1GB");
    let path = dir.path().join("nats.conf");
    std::fs::write(&path, &conf)?;
    let mut command = std::process::Command::new("nats-server");
    command
        .arg("-c")
        .arg(&path)
        .env("POD_NAME", "nats-test")
        .env("AGGREGATOR_PASSWORD", "s3cret-test");
    let _server = zonemesh_tests::Process::spawn(command, "nats-shipped", dir.path())?;
    let url = format!("nats://127.0.0.1:{port}");
    wait_for("the server listens", Duration::from_secs(10), || async {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(|_| ())
    })
    .await?;
    // No user: refused.
    let anonymous = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .connect(url.as_str())
        .await;
    assert!(
        anonymous.is_err(),
        "a client without the aggregators' user is refused"
    );
    // The aggregators' user: a replica works end to end.
    let cluster = format!("nats://aggregator:s3cret-test@127.0.0.1:{port}");
    let data = dir.path().join("r0").display().to_string();
    let replica = start_aggregator(
        &[
            "--cluster",
            &cluster,
            "--cluster-replicas",
            "1",
            "--cluster-max-mib",
            "64",
            "--replica-name",
            "r0",
            "--data-dir",
            &data,
            "--snapshot-interval",
            "1s",
        ],
        dir.path(),
    )?;
    let mut agent = TestAgent::new("a0", "zone-0", vec![replica.grpc], 0);
    for seq in 1..=3 {
        agent.deliver(seq, Duration::from_secs(30)).await?;
    }
    let http_addr = replica.http;
    wait_for(
        "a snapshot written under the shipped permissions",
        Duration::from_secs(20),
        || {
            let log = replica.log();
            async move { log.contains("snapshot written").then_some(()) }
        },
    )
    .await?;
    assert!(zonemesh_tests::http_get(http_addr, "/readyz")?.contains("ready"));
    assert_eq!(totals(&replica, "a0").await?, expected(3));
    // The lease's bucket is within the permissions too: the one replica takes it.
    wait_for(
        "the replica holds the lease",
        Duration::from_secs(20),
        || async move { (leader_gauge(http_addr) == Some(1.0)).then_some(()) },
    )
    .await?;
    Ok(())
}

/// Real agents given every replica (`--aggregator a,b`): each connects to one; when that one is
/// SIGKILLed it says hello to the other and its reports go on being acknowledged there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_agents_move_to_another_replica_when_theirs_dies() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(
        2,
        &[
            "--window",
            "1s",
            "--probe-interval",
            "500ms",
            "--probe-timeout",
            "300ms",
        ],
    )?;
    let urls: Vec<String> = setup
        .addresses()
        .iter()
        .map(|a| format!("http://{a}"))
        .collect();
    let aggregator = urls.join(",");
    let net = zonemesh_tests::loopback_net();
    let mut agents = Vec::new();
    for (node, host) in [("n1", 11), ("n2", 12)] {
        let address = format!("{net}{host}");
        agents.push(zonemesh_tests::start_agent(
            node,
            &[
                "--zone",
                "zone-a",
                "--address",
                &address,
                "--aggregator",
                &aggregator,
                "--metrics-listen",
                &format!("{address}:0"),
                "--reconnect-min",
                "100ms",
                "--reconnect-max",
                "1s",
            ],
            &setup.logs,
        )?);
    }
    let acked = |a: &zonemesh_tests::Agent| a.metric("zonemesh_agent_reports_acknowledged_total");
    let connected_to = |a: &zonemesh_tests::Agent| -> Option<String> {
        a.log()
            .lines()
            .rev()
            .find(|l| l.contains("connected to the aggregator"))
            .and_then(|l| urls.iter().find(|u| l.contains(u.as_str())).cloned())
    };
    let first = wait_for(
        "n1 connected and acknowledged",
        Duration::from_secs(30),
        || {
            let (n, url) = (acked(&agents[0]).unwrap_or(0.0), connected_to(&agents[0]));
            async move { (n >= 1.0).then_some(url).flatten() }
        },
    )
    .await?;
    let victim = urls.iter().position(|u| *u == first).expect("one of them");
    let before = acked(&agents[0])?;
    let plan_before = agents[0].metric("zonemesh_agent_plan_version")?;
    setup.kill_replica(victim);
    let moved = wait_for(
        "n1 said hello to the other replica",
        Duration::from_secs(30),
        || {
            let url = connected_to(&agents[0]).filter(|u| *u != first);
            async move { url }
        },
    )
    .await?;
    wait_for(
        "n1's reports acknowledged by the other replica",
        Duration::from_secs(30),
        || {
            let n = acked(&agents[0]).unwrap_or(0.0);
            async move { (n > before + 1.0).then_some(()) }
        },
    )
    .await?;
    // The other replica's plan has a higher version than the first one's: versions never go
    // back when an agent moves.
    let plan_after = wait_for(
        "n1 holds the other replica's plan",
        Duration::from_secs(15),
        || {
            let v = agents[0]
                .metric("zonemesh_agent_plan_version")
                .unwrap_or(0.0);
            async move { (v != plan_before).then_some(v) }
        },
    )
    .await?;
    anyhow::ensure!(
        plan_after > plan_before,
        "plan version went from {plan_before} to {plan_after}"
    );
    println!("n1 moved from {first} to {moved} when its replica was SIGKILLed");
    Ok(())
}

/// A replica's `zonemesh_leader` gauge (`None`: it does not answer).
fn leader_gauge(http: SocketAddr) -> Option<f64> {
    let text = zonemesh_tests::http_get(http, "/metrics").ok()?;
    zonemesh_tests::sample(&text, "zonemesh_leader")
}

/// The replicas that say they lead, by index.
fn leaders(setup: &Setup) -> Vec<usize> {
    setup
        .replicas
        .iter()
        .enumerate()
        .filter(|(_, r)| r.as_ref().and_then(|r| leader_gauge(r.http)) == Some(1.0))
        .map(|(i, _)| i)
        .collect()
}

/// Waits until exactly one running replica leads; returns it.
async fn one_leader(setup: &Setup, timeout: Duration) -> Result<usize> {
    wait_for("exactly one replica leads", timeout, || {
        let l = leaders(setup);
        async move { (l.len() == 1).then(|| l[0]) }
    })
    .await
}

/// The leader's decisions in the stream, in order: (sequence, epoch, a takeover?).
async fn decisions(setup: &Setup) -> Result<Vec<(u64, u64, bool)>> {
    use zonemesh_aggregator::cluster::entry::{Entry, decision_subject};
    let mut out = Vec::new();
    for (seq, entry) in read_stream(setup, Some(decision_subject())).await? {
        match entry {
            Ok(Entry::Takeover { epoch, .. }) => out.push((seq, epoch, true)),
            Ok(Entry::Test { epoch, .. } | Entry::Tiers { epoch, .. }) => {
                out.push((seq, epoch, false))
            }
            other => bail!("not a decision on the decision subject: {other:?}"),
        }
    }
    Ok(out)
}

/// No decision in the log is of an epoch older than a takeover before it: whatever a deposed
/// leader tried to decide was refused by JetStream itself.
fn fenced(decisions: &[(u64, u64, bool)]) -> Result<()> {
    let mut epoch = 0;
    for &(seq, e, takeover) in decisions {
        if takeover {
            anyhow::ensure!(
                e > epoch,
                "takeover at {seq} of epoch {e} after epoch {epoch}"
            );
            epoch = e;
        } else {
            anyhow::ensure!(
                e == epoch,
                "decision at {seq} of epoch {e} while epoch {epoch} leads"
            );
        }
    }
    Ok(())
}

/// Agents that report on every replica, so that the leader has throughput tests to grant.
async fn keep_reporting(
    mut agents: Vec<TestAgent>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<Vec<TestAgent>> {
    let mut seq = 1;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        deliver_all(&mut agents, seq, seq).await?;
        seq += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(agents)
}

/// The lease: exactly one replica leads; SIGKILLed, another leads within the TTL and 5 s, with
/// a takeover in the log, and every decision in the log is of the epoch that led when it was
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_replica_leads_within_the_ttl_when_the_leader_is_sigkilled() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(
        3,
        &["--lease-ttl", "3s", "--throughput-max-concurrent", "2"],
    )?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reporting = tokio::spawn(keep_reporting(agents(&setup, 6), stop.clone()));
    let first = one_leader(&setup, Duration::from_secs(30)).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    setup.kill_replica(first);
    let killed = zonemesh_common::time::Stopwatch::start();
    let next = one_leader(&setup, Duration::from_secs(3 + 5)).await?;
    let takeover = killed.elapsed();
    println!(
        "the leader r{first} SIGKILLed: r{next} leads {:.2} s later (lease TTL 3 s)",
        takeover.as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reporting.await??;
    let log = decisions(&setup).await?;
    let takeovers = log.iter().filter(|d| d.2).count();
    let tests = log.len() - takeovers;
    println!("decisions in the log: {takeovers} takeovers, {tests} throughput tests");
    anyhow::ensure!(takeovers >= 2, "{log:?}");
    fenced(&log)
}

/// A leader SIGSTOPped past its TTL, then SIGCONTed: another replica has taken over meanwhile;
/// the old one learns that it lost the lease, and none of its late decisions is in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_paused_past_its_ttl_learns_it_lost_the_lease_and_decides_nothing() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let setup = Setup::start(
        3,
        &["--lease-ttl", "2s", "--throughput-max-concurrent", "2"],
    )?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reporting = tokio::spawn(keep_reporting(agents(&setup, 6), stop.clone()));
    let first = one_leader(&setup, Duration::from_secs(30)).await?;
    let paused = setup.replica(first);
    let pid = paused.pid().to_string();
    let http = paused.http;
    std::process::Command::new("kill")
        .args(["-STOP", &pid])
        .status()?;
    // While it sleeps another replica takes over (its own gauge still says 1: it is frozen).
    let next = wait_for("another replica leads", Duration::from_secs(15), || {
        let l: Vec<usize> = leaders(&setup)
            .into_iter()
            .filter(|i| *i != first)
            .collect();
        async move { (l.len() == 1).then(|| l[0]) }
    })
    .await;
    std::process::Command::new("kill")
        .args(["-CONT", &pid])
        .status()?;
    let next = next?;
    wait_for(
        "the paused leader steps down",
        Duration::from_secs(10),
        || async move { (leader_gauge(http) == Some(0.0)).then_some(()) },
    )
    .await?;
    println!("r{first} paused past its TTL: r{next} took over; r{first} stepped down once resumed");
    tokio::time::sleep(Duration::from_secs(3)).await;
    anyhow::ensure!(
        leaders(&setup) == vec![next],
        "leaders: {:?}",
        leaders(&setup)
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reporting.await??;
    fenced(&decisions(&setup).await?)
}

/// Throughput tests quick and frequent enough to be granted many times in a test.
const FREQUENT_TESTS: [&str; 12] = [
    "--throughput-interval",
    "2s",
    "--throughput-duration",
    "500ms",
    "--throughput-warmup",
    "0s",
    "--throughput-share",
    "0.5",
    "--throughput-max-concurrent",
    "3",
    "--lease-ttl",
    "3s",
];

/// Pairs of tests (by the agents' own logs) that share a node and overlap in time.
fn overlaps(agents: &[TestAgent]) -> Vec<String> {
    let mut by_node: BTreeMap<&str, Vec<(i64, i64, &str)>> = BTreeMap::new();
    for a in agents {
        for (peer, start, end) in &a.grants.tests {
            by_node
                .entry(&a.node)
                .or_default()
                .push((*start, *end, peer));
            by_node
                .entry(peer)
                .or_default()
                .push((*start, *end, &a.node));
        }
    }
    let mut found = Vec::new();
    for (node, mut tests) in by_node {
        tests.sort();
        for w in tests.windows(2) {
            if w[1].0 < w[0].1 {
                found.push(format!("{node}: {:?} and {:?}", w[0], w[1]));
            }
        }
    }
    found
}

/// Grants across failovers: the leader replica SIGKILLed, then the NATS server that leads the
/// stream; by every agent's own log of the tests it would run, no two tests that share a node
/// ever overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_throughput_tests_of_a_node_overlap_across_failovers() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(3, &FREQUENT_TESTS)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reporting = tokio::spawn(keep_reporting(agents(&setup, 6), stop.clone()));
    let first = one_leader(&setup, Duration::from_secs(30)).await?;
    tokio::time::sleep(Duration::from_secs(8)).await;
    setup.kill_replica(first);
    let first_kill = zonemesh_common::time::unix_ms();
    let killed = zonemesh_common::time::Stopwatch::start();
    let next = one_leader(&setup, Duration::from_secs(3 + 5)).await?;
    let takeover = killed.elapsed();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let log_leader = setup
        .nats
        .leader_of(STREAM)
        .context("the stream's leader")?;
    setup.nats.kill(log_leader);
    let second_kill = zonemesh_common::time::unix_ms();
    // The stream's new leader takes 4–9 s to be elected, the replicas' consumers then resume
    // (a stuck one is made again after 3 s without entries; before that watchdog, up to 50 s),
    // and the lease may pass to another replica meanwhile: grants resume well within a minute.
    tokio::time::sleep(Duration::from_secs(60)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let agents = reporting.await??;
    let tests: usize = agents.iter().map(|a| a.grants.tests.len()).sum();
    let late: u32 = agents.iter().map(|a| a.grants.skipped.0).sum();
    let stale: u32 = agents.iter().map(|a| a.grants.skipped.1).sum();
    let found = overlaps(&agents);
    println!(
        "leader r{first} SIGKILLed: r{next} led {:.2} s later (TTL 3 s); log leader n{log_leader} SIGKILLed; \
         agents ran {tests} throughput tests, skipped {late} late and {stale} of an older leader; overlaps: {}",
        takeover.as_secs_f64(),
        found.len()
    );
    // Tests before the first kill, between the kills and after the second: grants went on
    // through both failovers.
    let starts: Vec<i64> = agents
        .iter()
        .flat_map(|a| a.grants.tests.iter().map(|t| t.1))
        .collect();
    let phases = [
        starts.iter().filter(|s| **s < first_kill).count(),
        starts
            .iter()
            .filter(|s| (first_kill..second_kill).contains(*s))
            .count(),
        starts.iter().filter(|s| **s >= second_kill).count(),
    ];
    println!("throughput tests before, between and after the kills: {phases:?}");
    anyhow::ensure!(
        phases.iter().all(|n| *n > 0),
        "throughput tests before, between and after the kills: {phases:?}"
    );
    anyhow::ensure!(found.is_empty(), "overlapping tests: {found:?}");
    setup.nats.restart(log_leader)?;
    fenced(&decisions(&setup).await?)
}

/// A TCP forwarder on loopback that a test can cut: the partition of one replica from the log.
struct Cuttable {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Cuttable {
    async fn start(target: SocketAddr) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, o) = (cut.clone(), open.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if c.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: the connection is reset
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                o.lock().expect("lock").push(task);
            }
        });
        Ok(Self {
            port,
            cut,
            open,
            accept,
        })
    }

    /// Drops every connection through it and refuses new ones (`true`), or lets them through.
    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::SeqCst);
        if cut {
            for task in self.open.lock().expect("lock").drain(..) {
                task.abort();
            }
        }
    }
}

impl Drop for Cuttable {
    fn drop(&mut self) {
        self.accept.abort();
        self.set_cut(true);
    }
}

/// The leader cut off from every NATS server (its connections dropped, new ones refused) past
/// its TTL: it learns that it lost the lease and steps down, another replica takes over, and
/// once the partition heals none of its decisions from before is applied anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_log_steps_down_and_decides_nothing() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(0, &FREQUENT_TESTS)?;
    // r0 reaches the log through forwarders the test can cut; it starts alone, so it leads.
    let mut proxies = Vec::new();
    for url in setup.nats.url_list() {
        let port: u16 = url.rsplit(':').next().context("port")?.parse()?;
        proxies.push(Cuttable::start(SocketAddr::from(([127, 0, 0, 1], port))).await?);
    }
    let through: Vec<String> = proxies
        .iter()
        .map(|p| format!("nats://127.0.0.1:{}", p.port))
        .collect();
    setup.start_replica_on(0, &through.join(","))?;
    wait_for("r0 leads", Duration::from_secs(30), || {
        let l = leaders(&setup);
        async move { (l == vec![0]).then_some(()) }
    })
    .await?;
    setup.start_replica(1)?;
    setup.start_replica(2)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reporting = tokio::spawn(keep_reporting(agents(&setup, 6), stop.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let r0 = setup.replica(0).http;
    for p in &proxies {
        p.set_cut(true);
    }
    let cut = zonemesh_common::time::Stopwatch::start();
    wait_for(
        "r0 steps down, cut off",
        Duration::from_secs(10),
        || async move { (leader_gauge(r0) == Some(0.0)).then_some(()) },
    )
    .await
    .with_context(|| format!("r0's log: {}", setup.replica(0).log()))?;
    let stepped_down = cut.elapsed();
    let next = wait_for("another replica leads", Duration::from_secs(3 + 5), || {
        let l: Vec<usize> = leaders(&setup).into_iter().filter(|i| *i != 0).collect();
        async move { (l.len() == 1).then(|| l[0]) }
    })
    .await?;
    let took_over = cut.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    for p in &proxies {
        p.set_cut(false);
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    println!(
        "r0 cut off from the log: stepped down after {:.2} s, r{next} led after {:.2} s (TTL 3 s)",
        stepped_down.as_secs_f64(),
        took_over.as_secs_f64()
    );
    anyhow::ensure!(
        leaders(&setup) == vec![next],
        "leaders: {:?}",
        leaders(&setup)
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let agents = reporting.await??;
    let found = overlaps(&agents);
    anyhow::ensure!(found.is_empty(), "overlapping tests: {found:?}");
    fenced(&decisions(&setup).await?)
}

/// Whether each running replica lists `node` as connected.
async fn connected_on_each(setup: &Setup, node: &str) -> Result<Vec<bool>> {
    let mut out = Vec::new();
    for r in setup.replicas.iter().flatten() {
        let mut client = v1::topology_client::TopologyClient::new(r.channel().await?);
        let nodes = client
            .list_nodes(v1::ListNodesRequest::default())
            .await?
            .into_inner()
            .nodes;
        out.push(nodes.iter().any(|n| n.name == node && n.connected));
    }
    Ok(out)
}

/// Sessions cluster-wide: an agent connected to a replica that dies for good is listed as
/// connected on every replica until that replica's heartbeats stop, then as gone on every
/// replica alike (about five heartbeats, 10 s), so the leader grants it nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_of_a_replica_whose_heartbeats_stop_end_on_every_replica() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(3, &[])?;
    // The agent knows only r2.
    let mut agent = TestAgent::new("lonely", "zone-0", vec![setup.replica(2).grpc], 0);
    agent.deliver(1, Duration::from_secs(30)).await?;
    setup.wait_caught_up(Duration::from_secs(30)).await?;
    anyhow::ensure!(
        connected_on_each(&setup, "lonely").await? == vec![true; 3],
        "connected everywhere while r2 lives"
    );
    setup.kill_replica(2);
    let killed = zonemesh_common::time::Stopwatch::start();
    let setup = &setup;
    wait_for(
        "every replica ends the dead replica's session",
        Duration::from_secs(30),
        || async move {
            let c = connected_on_each(setup, "lonely").await.ok()?;
            (c == vec![false; 2]).then_some(())
        },
    )
    .await?;
    println!(
        "r2 SIGKILLed: its agent's session ended on both other replicas {:.1} s later",
        killed.elapsed().as_secs_f64()
    );
    drop(agent);
    Ok(())
}

/// The job of a pod, as kube-scheduler sends it to the extender (`ExtenderArgs`).
fn filter_body(pod: &str, job: &str, workers: u32, nodes: &[&str]) -> String {
    serde_json::json!({
        "Pod": {"metadata": {"name": pod, "namespace": "ml",
                             "labels": {"zonemesh.io/job": job},
                             "annotations": {"zonemesh.io/workers": workers.to_string()}}},
        "Nodes": null,
        "NodeNames": nodes,
    })
    .to_string()
}

/// Extender calls on any replica reach the leader's job memory: a job's first pod, offered only
/// its pods, spread over every replica and offered both zones, all keep it in zone-a (a
/// replica answering from a memory of its own would choose the better zone-b).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extender_calls_on_any_replica_keep_a_job_in_one_zone() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = advertising(vec!["--lease-ttl".into(), "3s".into()], false)?;
    let replica = setup.replica(0).grpc;
    let connect = move |_: &str| async move {
        Ok(
            tonic::transport::Channel::from_shared(format!("http://{replica}"))?
                .connect()
                .await?,
        )
    };
    let post =
        |http: SocketAddr, path: &str, body: &str| zonemesh_tests::http_post(http, path, body);
    one_job_in_one_zone(&mut setup, connect, post).await
}

/// The same over TLS, client certificates required: a follower verifies the leader's
/// certificate (`--peer-ca`) and presents its own scheduler identity (`--peer-cert`), and no call
/// falls back to a follower's own memory (`zonemesh_extender_leaderless_total` stays 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extender_calls_over_tls_are_forwarded_to_the_leader_as_a_scheduler() -> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    use zonemesh_tests::pki::Ca;
    use zonemesh_tls::Role;
    let pki = tempfile::tempdir()?;
    let ca = Ca::new("zonemesh cluster test CA")?;
    let ca_file = ca.write(&pki.path().join("ca.crt"))?;
    let server = ca.server(pki.path(), "aggregator")?;
    let peer = ca.client(pki.path(), Role::Scheduler, "zonemesh-aggregator")?;
    let scheduler = ca.client(pki.path(), Role::Scheduler, "kube-scheduler")?;
    let flags: Vec<String> = [
        "--lease-ttl".as_ref(),
        "3s".as_ref(),
        "--tls-cert".as_ref(),
        server.cert.as_os_str(),
        "--tls-key".as_ref(),
        server.key.as_os_str(),
        "--tls-client-ca".as_ref(),
        ca_file.as_os_str(),
        // The tests' own helpers read /metrics and /healthz in the clear.
        "--allow-plaintext".as_ref(),
        "--peer-ca".as_ref(),
        ca_file.as_os_str(),
        "--peer-cert".as_ref(),
        peer.cert.as_os_str(),
        "--peer-key".as_ref(),
        peer.key.as_os_str(),
    ]
    .iter()
    .map(|s: &&std::ffi::OsStr| s.to_string_lossy().into_owned())
    .collect();
    let mut setup = advertising(flags, true)?;
    let replica = setup.replica(0).grpc;
    let (dir, ca_for_agents) = (pki.path().to_owned(), ca_file.clone());
    let ca = std::sync::Arc::new(ca);
    let connect = move |node: &str| {
        let files = ca.client(&dir, Role::Node, node);
        let ca_file = ca_for_agents.clone();
        async move {
            let files = files?;
            let tls = zonemesh_tls::ClientTls {
                ca: Some(ca_file),
                cert: Some(files.cert),
                key: Some(files.key),
                server_name: None,
            };
            zonemesh_tls::connect(&format!("https://{replica}"), &tls, Duration::from_secs(5))
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
        }
    };
    let post = move |http: SocketAddr, path: &str, body: &str| {
        curl_post(http, path, body, &ca_file, &scheduler)
    };
    one_job_in_one_zone(&mut setup, connect, post).await?;
    for r in setup.replicas.iter().flatten() {
        let text = zonemesh_tests::http_get(r.http, "/metrics")?;
        let fallbacks = zonemesh_tests::sample(&text, "zonemesh_extender_leaderless_total");
        anyhow::ensure!(
            fallbacks == Some(0.0),
            "replica at {}: zonemesh_extender_leaderless_total {fallbacks:?}",
            r.http
        );
    }
    println!("over TLS with client certificates: no call answered from a follower's own memory");
    Ok(())
}

/// POSTs `body` to `path` over HTTPS with curl, as the client of `client`: (status, body).
fn curl_post(
    http: SocketAddr,
    path: &str,
    body: &str,
    ca: &std::path::Path,
    client: &zonemesh_tests::pki::Files,
) -> Result<(u16, String)> {
    zonemesh_tests::curl_https(http.port(), path, ca, Some(client), None, Some(body))
}

/// Three NATS servers and three replicas that advertise their HTTP ports (as `https://` when
/// `https`), each started with `extra`.
fn advertising(extra: Vec<String>, https: bool) -> Result<Setup> {
    let dir = tempfile::tempdir()?;
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs)?;
    let mut setup = Setup {
        nats: NatsCluster::start(3, dir.path(), &logs)?,
        replicas: Vec::new(),
        data: Vec::new(),
        extra,
        advertise: true,
        https,
        logs,
        _dir: dir,
    };
    for i in 0..3 {
        setup.start_replica(i)?;
    }
    Ok(setup)
}

/// Agents of two zones report to replica 0 (`connect` gives each node its channel); then one
/// job's first pod is offered zone-a only, on a follower, and 32 more pods, offered both zones,
/// go to the replicas in turn (`post`): every answer keeps the job in zone-a.
async fn one_job_in_one_zone<C, F>(
    setup: &mut Setup,
    connect: C,
    post: impl Fn(SocketAddr, &str, &str) -> Result<(u16, String)> + Clone + Send + 'static,
) -> Result<()>
where
    C: Fn(&str) -> F,
    F: std::future::Future<Output = Result<tonic::transport::Channel>>,
{
    let leader = one_leader(setup, Duration::from_secs(30)).await?;
    // Two zones of three; a2 loses 10 %: zone-b is the better one.
    let all = ["a1", "a2", "a3", "b1", "b2", "b3"];
    let mut agents = Vec::new();
    for n in all {
        let zone = if n.starts_with('a') {
            "zone-a"
        } else {
            "zone-b"
        };
        let channel = connect(n).await?;
        agents.push((
            n,
            zonemesh_tests::FakeAgent::connect_on(channel, n, zone).await?,
        ));
    }
    for (n, agent) in &mut agents {
        let mates: Vec<(&str, f64, u64, f64)> = all
            .iter()
            .filter(|m| **m != *n && m[..1] == n[..1])
            .map(|m| {
                (
                    *m,
                    40.0,
                    if *n == "a2" || *m == "a2" { 10 } else { 0 },
                    9.4e8,
                )
            })
            .collect();
        agent.report(&mates).await?;
    }
    setup.wait_caught_up(Duration::from_secs(30)).await?;
    // Followers learn where the leader answers at their next lease tick (a second).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let https: Vec<SocketAddr> = setup.replicas.iter().flatten().map(|r| r.http).collect();
    let follower = https[(leader + 1) % 3];
    let (status, text) = post(
        follower,
        "/extender/filter",
        &filter_body("w-0", "resnet", 3, &["a1", "a2", "a3"]),
    )?;
    anyhow::ensure!(status == 200, "{status}: {text}");
    let mut calls = Vec::new();
    for i in 1..=32 {
        let http = https[i % 3];
        let post = post.clone();
        calls.push(tokio::task::spawn_blocking(move || {
            post(
                http,
                "/extender/filter",
                &filter_body(&format!("w-{i}"), "resnet", 3, &all),
            )
        }));
    }
    for (i, call) in calls.into_iter().enumerate() {
        let (status, text) = call.await??;
        anyhow::ensure!(status == 200, "call {i}: {status}: {text}");
        let answer: serde_json::Value = serde_json::from_str(&text)?;
        let names: Vec<&str> = answer["NodeNames"]
            .as_array()
            .context("NodeNames")?
            .iter()
            .filter_map(|n| n.as_str())
            .collect();
        anyhow::ensure!(
            !names.is_empty() && names.iter().all(|n| n.starts_with('a')),
            "call {i} on replica {}: {names:?} ({text})",
            (i + 1) % 3
        );
    }
    println!("33 filter calls for one job over 3 replicas (leader r{leader}): all kept in zone-a");
    Ok(())
}

/// A replica's tier-2 groups: (name, zones).
async fn groups(replica: &Aggregator) -> Result<Vec<(String, Vec<String>)>> {
    let mut client = v1::topology_client::TopologyClient::new(replica.channel().await?);
    let tiers = client.get_tiers(v1::GetTiersRequest {}).await?.into_inner();
    let mut out: Vec<_> = tiers
        .groups
        .into_iter()
        .map(|g| {
            let mut zones = g.zones;
            zones.sort();
            (g.name, zones)
        })
        .collect();
    out.sort();
    Ok(out)
}

type Groups = Vec<(String, Vec<String>)>;

/// Waits until every replica in `which` shows the same tier-2 groups, and `want` holds for them;
/// returns them.
async fn groups_agree(
    setup: &Setup,
    which: &[usize],
    what: &str,
    want: impl Fn(&Groups) -> bool,
    timeout: Duration,
) -> Result<Groups> {
    let want = &want;
    let result = wait_for(&format!("{what} on {which:?}"), timeout, || async move {
        let first = groups(setup.replica(which[0])).await.ok()?;
        for i in &which[1..] {
            if groups(setup.replica(*i)).await.ok()? != first {
                return None;
            }
        }
        want(&first).then_some(first)
    })
    .await;
    if result.is_err() {
        for i in which {
            println!("r{i}: {:?}", groups(setup.replica(*i)).await);
        }
    }
    result
}

/// Agents in zone-a and zone-b that measure every other at 100 µs, reporting to `replica`.
async fn near_zones(replica: &Aggregator) -> Result<()> {
    let all = ["a1", "a2", "b1", "b2"];
    for n in all {
        let zone = if n.starts_with('a') {
            "zone-a"
        } else {
            "zone-b"
        };
        let mut agent = zonemesh_tests::FakeAgent::connect(replica, n, zone).await?;
        let peers: Vec<(&str, f64, u64, f64)> = all
            .iter()
            .filter(|m| **m != n)
            .map(|m| (*m, 100.0, 0, 9.4e8))
            .collect();
        agent.report(&peers).await?;
    }
    Ok(())
}

/// Tier decisions are the leader's: a follower shows the groups the leader decided whatever its
/// own thresholds say; a new leader goes on from the groups decided last (a split keeps the
/// name and counts new names on); a replica started later shows them too; every tiers decision
/// in the log is of the epoch that led when it was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_shows_the_tiers_its_leader_decided_and_a_new_leader_goes_on_from_them()
-> Result<()> {
    if !nats_available() {
        return Ok(());
    }
    let mut setup = Setup::start(1, &["--lease-ttl", "3s", "--tier-interval", "1s"])?;
    anyhow::ensure!(one_leader(&setup, Duration::from_secs(30)).await? == 0);
    setup.start_replica(1)?;
    // r2 would keep zones 100 µs apart in separate groups, were it to decide.
    let strict = ["--tier-join-rtt", "50us", "--tier-leave-rtt", "60us"];
    setup.extra.extend(strict.iter().map(|s| s.to_string()));
    setup.start_replica(2)?;
    setup.extra.truncate(setup.extra.len() - strict.len());
    near_zones(setup.replica(0)).await?;
    let together = |g: &Groups| g.len() == 1 && g[0].1 == ["zone-a", "zone-b"];
    let first = groups_agree(
        &setup,
        &[0, 1, 2],
        "zone-a and zone-b together",
        together,
        Duration::from_secs(60),
    )
    .await?;
    println!("r0 leads; r0, r1 and the strict r2 show {first:?}");

    // Only the strict replica is left: it leads, and splits the group it was handed.
    setup.kill_replica(0);
    setup.kill_replica(1);
    anyhow::ensure!(one_leader(&setup, Duration::from_secs(30)).await? == 2);
    near_zones(setup.replica(2)).await?;
    let kept = first[0].0.clone();
    let apart = |g: &Groups| {
        g.len() == 2
            && g.iter()
                .any(|(name, zones)| *name == kept && zones == &["zone-a"])
    };
    let split = groups_agree(
        &setup,
        &[2],
        "zone-a alone in its old group",
        apart,
        Duration::from_secs(60),
    )
    .await?;
    println!("r2 leads and splits them: {split:?}");

    // r1 comes back with the default thresholds (by which the zones would join): it shows the
    // leader's groups, and keeps showing them over several of its tier intervals.
    setup.start_replica(1)?;
    groups_agree(
        &setup,
        &[1, 2],
        "the split groups",
        |g| *g == split,
        Duration::from_secs(60),
    )
    .await?;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        anyhow::ensure!(
            groups(setup.replica(1)).await? == groups(setup.replica(2)).await?,
            "r1 left the leader's groups"
        );
    }
    let log = decisions(&setup).await?;
    let tiers = read_stream(
        &setup,
        Some(zonemesh_aggregator::cluster::entry::decision_subject()),
    )
    .await?
    .into_iter()
    .filter(|(_, e)| {
        matches!(
            e,
            Ok(zonemesh_aggregator::cluster::entry::Entry::Tiers { .. })
        )
    })
    .count();
    println!("tiers decisions in the log: {tiers}");
    anyhow::ensure!(tiers >= 2, "{log:?}");
    fenced(&log)
}
