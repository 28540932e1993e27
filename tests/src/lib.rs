//! Harness of the zonemesh integration tests: the real binaries as child processes, killed when
//! dropped (also when a test fails), and clients for them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, bail};

pub mod pki;
pub mod webdriver;
pub use zonemesh_lab::nats;
pub use zonemesh_lab::process::{
    Agent, AgentTotals, Aggregator, Process, field, http_get, http_get_with, http_post, sample,
    unique,
};

/// Path of a workspace binary, built (once per test process) so that it is never older than the
/// code under test: `cargo test -p zonemesh-tests` alone does not rebuild other packages' binaries.
pub fn binary(name: &str) -> PathBuf {
    build("--bin", name).join(name)
}

/// The directory of the stack's two programs, `zonemesh-aggregator` and `zonemesh-agent`, both
/// built: what a lab's `StackOptions` and `demo_cluster::start` take.
pub fn stack_binaries() -> PathBuf {
    binary("zonemesh-agent");
    binary("zonemesh-aggregator")
        .parent()
        .expect("target/<profile>")
        .to_owned()
}

/// A request with curl over HTTPS to `path` on 127.0.0.1:`port`, trusting `ca`, with `client`'s
/// certificate, a bearer `token` and a JSON `body` (a POST) where given: (status, body).
pub fn curl_https(
    port: u16,
    path: &str,
    ca: &Path,
    client: Option<&pki::Files>,
    token: Option<&str>,
    body: Option<&str>,
) -> Result<(u16, String)> {
    use anyhow::Context;
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "--cacert"])
        .arg(ca)
        .args(["-w", "\n%{http_code}"]);
    if let Some(f) = client {
        cmd.arg("--cert").arg(&f.cert).arg("--key").arg(&f.key);
    }
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    if let Some(b) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data", b]);
    }
    cmd.arg(format!("https://127.0.0.1:{port}{path}"));
    let out = cmd.output().context("run curl")?;
    anyhow::ensure!(
        out.status.success(),
        "curl {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    let (body, code) = text.rsplit_once('\n').context("curl output")?;
    Ok((code.trim().parse()?, body.to_owned()))
}

/// Path of a workspace example, built like [`binary`]. It is built for the whole workspace, so
/// with the features that `cargo test --workspace` builds with (examples take the dev-dependencies
/// too), and after that build nothing is compiled again; `cargo run -p <package> --example` would
/// compile most dependencies once more with that one package's features.
pub fn example(name: &str) -> PathBuf {
    build("--example", name).join("examples").join(name)
}

/// Builds one target of the workspace (once per test process); returns `target/<profile>`.
fn build(kind: &str, name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_owned();
    let key = format!("{kind} {name}");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.contains(&key) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "--quiet", "--workspace", kind, name]);
        if dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "cargo build {kind} {name} failed");
        built.push(key);
    }
    dir
}

/// Starts the workspace's `zonemesh-aggregator` with `args` (see [`Aggregator::start`]).
pub fn start_aggregator(args: &[&str], log_dir: &Path) -> Result<Aggregator> {
    Aggregator::start(&binary("zonemesh-aggregator"), args, log_dir)
}

/// Starts the workspace's `zonemesh-agent` for `node` on the host (see [`Agent::start`]).
pub fn start_agent(node: &str, args: &[&str], log_dir: &Path) -> Result<Agent> {
    Agent::start(
        Command::new(binary("zonemesh-agent")),
        None,
        node,
        args,
        log_dir,
    )
}

/// Polls `check` until it returns `Some`, at most `timeout`; fails with `what` otherwise.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // A check that never returns (a query nobody answers) ends the wait at its deadline too.
        if let Ok(Some(v)) = tokio::time::timeout_at(deadline, check()).await {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A /24 inside 127.0.0.0/8 that no other test process or call uses (loopback answers every
/// address of it), as a prefix such as `"127.142.3."`; append the host part.
pub fn loopback_net() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let pid = std::process::id();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!(
        "127.{}.{}.",
        100 + pid % 150,
        (pid / 150 + n * 37) % 250 + 1
    )
}

/// Whether this process runs as root (raw sockets, namespaces).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    })
}

/// Whether a lab test can run: as root, yes; otherwise it says it is skipped and returns false —
/// except under CI (`CI` set), which runs as root and must never skip a lab test, where it fails.
pub fn lab_can_run(test: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs the lab tests as root; this run is not root"
    );
    eprintln!("{test}: not root, the lab cannot be built; skipped (CI runs it as root)");
    false
}

/// Whether `program args…` runs and succeeds here. When it does not, says that what needs it is
/// skipped and returns false — except under CI (`CI` set), which installs every tool (`install`
/// says how) and must never skip a test, where it fails.
pub fn tool_available(program: &str, args: &[&str], install: &str) -> bool {
    let found = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "{program} is missing in CI ({install})"
    );
    if !found {
        eprintln!("{program} not usable here ({install}): skipped (CI runs it)");
    }
    found
}

/// A synthetic agent: an `Ingest.Connect` stream that said hello as `node` in `zone`.
#[derive(Debug)]
pub struct FakeAgent {
    /// Messages to the aggregator.
    pub tx: tokio::sync::mpsc::Sender<zonemesh_proto::v1::AgentMessage>,
    /// Messages from it.
    pub rx: tonic::Streaming<zonemesh_proto::v1::AggregatorMessage>,
    sequence: u64,
    node: String,
    /// The highest sequence the aggregator said was applied, in its answer to the hello.
    pub applied: u64,
}

impl FakeAgent {
    /// Connects to `aggregator` and says hello.
    pub async fn connect(aggregator: &Aggregator, node: &str, zone: &str) -> Result<Self> {
        Self::connect_on(aggregator.channel().await?, node, zone).await
    }

    /// Says hello as `node` in `zone` on `channel`. A refusal is a [`tonic::Status`] in the
    /// error's chain.
    pub async fn connect_on(
        channel: tonic::transport::Channel,
        node: &str,
        zone: &str,
    ) -> Result<Self> {
        use zonemesh_proto::v1;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tx.send(v1::AgentMessage {
            kind: Some(v1::agent_message::Kind::Hello(v1::Hello {
                node_name: node.into(),
                zone: zone.into(),
                addresses: vec!["192.0.2.1".into()],
                agent_version: "test".into(),
                icmp_mode: v1::IcmpMode::Raw as i32,
                probe_port: 7402,
                ..Default::default()
            })),
        })
        .await?;
        let mut client = v1::ingest_client::IngestClient::new(channel);
        let mut rx = client
            .connect(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await?
            .into_inner();
        // The answer to the hello: what is applied already.
        let applied = match rx.message().await?.and_then(|m| m.kind) {
            Some(v1::aggregator_message::Kind::Ack(a)) => a.sequence,
            other => bail!("the answer to the hello was {other:?}"),
        };
        Ok(Self {
            tx,
            rx,
            sequence: applied,
            node: node.into(),
            applied,
        })
    }

    /// Reports one window to each `(peer, rtt µs, lost of 100, throughput bit/s)` and waits for
    /// its acknowledgement.
    pub async fn report(&mut self, paths: &[(&str, f64, u64, f64)]) -> Result<()> {
        self.send_report(paths, 0).await?;
        self.wait_ack(self.sequence).await
    }

    /// Sends one report as [`FakeAgent::report`] does, with window times `skew_ms` off this
    /// machine's clock (another node's clock), without waiting; returns its sequence.
    pub async fn send_report(
        &mut self,
        paths: &[(&str, f64, u64, f64)],
        skew_ms: i64,
    ) -> Result<u64> {
        use zonemesh_proto::v1;
        self.sequence += 1;
        let t = zonemesh_common::time::unix_ms() + skew_ms;
        let paths = paths
            .iter()
            .map(|&(dst, rtt, lost, bps)| v1::PathSummary {
                src: self.node.clone(),
                dst: dst.into(),
                window_start_unix_ms: t - 10_000,
                window_end_unix_ms: t,
                probes_sent: 100,
                probes_received: 100 - lost,
                rtt: (lost < 100).then_some(v1::RttStats {
                    samples: 100 - lost,
                    min_us: rtt,
                    p50_us: rtt,
                    p90_us: rtt,
                    p99_us: rtt,
                    max_us: rtt,
                    mean_us: rtt,
                    jitter_us: 0.0,
                }),
                throughput: Some(v1::Throughput {
                    throughput_bps: bps,
                    bytes: (bps / 8.0) as u64,
                    duration_us: 1_000_000,
                    warmup_us: 0,
                    streams: 1,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        self.tx
            .send(v1::AgentMessage {
                kind: Some(v1::agent_message::Kind::Report(v1::Report {
                    sequence: self.sequence,
                    paths,
                })),
            })
            .await?;
        Ok(self.sequence)
    }

    /// Waits for the acknowledgement of `sequence` (or a later one); a refusal is an error.
    pub async fn wait_ack(&mut self, sequence: u64) -> Result<()> {
        use zonemesh_proto::v1;
        loop {
            let m = self
                .rx
                .message()
                .await?
                .ok_or_else(|| anyhow::anyhow!("stream ended"))?;
            match m.kind {
                Some(v1::aggregator_message::Kind::Ack(a)) if a.sequence >= sequence => {
                    return Ok(());
                }
                Some(v1::aggregator_message::Kind::Error(e)) => bail!("refused: {}", e.message),
                _ => {}
            }
        }
    }
}
