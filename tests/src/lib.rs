//! Harness of the zonemesh integration tests: the real binaries as child processes, killed when
//! dropped (also when a test fails), and clients for them.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tonic::transport::Channel;

/// Path of a workspace binary, built (once per test process) so that it is never older than the
/// code under test: `cargo test -p zonemesh-tests` alone does not rebuild other packages' binaries.
pub fn binary(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_owned();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "--quiet", "--workspace", "--bin", name]);
        if dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "cargo build --bin {name} failed");
        built.push(name.to_owned());
    }
    dir.join(name)
}

/// A running `zonemesh-aggregator`.
#[derive(Debug)]
pub struct Aggregator {
    child: Child,
    /// gRPC address.
    pub grpc: SocketAddr,
    /// HTTP address.
    pub http: SocketAddr,
    stderr: PathBuf,
}

impl Aggregator {
    /// Starts the aggregator with `args` (plus ephemeral loopback ports unless given) and waits
    /// until it listens.
    pub fn start(args: &[&str], log_dir: &Path) -> Result<Self> {
        let mut all: Vec<&str> = Vec::new();
        if !args.contains(&"--listen") {
            all.extend(["--listen", "127.0.0.1:0"]);
        }
        if !args.contains(&"--http-listen") {
            all.extend(["--http-listen", "127.0.0.1:0"]);
        }
        all.extend(args);
        let stderr = log_dir.join(format!("aggregator-{}.log", unique()));
        let mut child = Command::new(binary("zonemesh-aggregator"))
            .args(&all)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .context("spawn zonemesh-aggregator")?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("zonemesh-aggregator listening ") {
                        let field = |key: &str| -> Result<SocketAddr> {
                            let v = rest
                                .split_whitespace()
                                .find_map(|kv| kv.strip_prefix(key))
                                .context("address in the listening line")?;
                            Ok(v.parse()?)
                        };
                        return Ok(Self {
                            grpc: field("grpc=")?,
                            http: field("http=")?,
                            child,
                            stderr,
                        });
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!(
                        "zonemesh-aggregator did not start: {}",
                        std::fs::read_to_string(&stderr).unwrap_or_default()
                    );
                }
            }
        }
    }

    /// A gRPC channel to it.
    pub async fn channel(&self) -> Result<Channel> {
        Ok(Channel::from_shared(format!("http://{}", self.grpc))?
            .connect()
            .await?)
    }

    /// Kills it with SIGKILL, as a crash would.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops it with SIGTERM and waits (at most 30 s) for it to exit; returns its exit code.
    pub fn terminate(mut self) -> Result<Option<i32>> {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status.code());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("zonemesh-aggregator did not stop within 30 s of SIGTERM")
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Aggregator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A name part unique to this process and call.
pub fn unique() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Polls `check` until it returns `Some`, at most `timeout`; fails with `what` otherwise.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
