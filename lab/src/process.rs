//! The zonemesh binaries as child processes: killed when dropped (also when a test or the demo
//! fails), their stdout lines on a channel, their logs in files. Agents may run inside a lab
//! node's network namespace.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tonic::transport::Channel;

/// Process ids of the children alive (killed by [`kill_all`] on SIGINT/SIGTERM, when no drop runs:
/// the aggregator lives outside the lab's namespaces, so removing those leaves it running).
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Kills every child process still alive (see [`crate::cleanup_on_signals`]).
pub fn kill_all() {
    for pid in LIVE.lock().map(|l| l.clone()).unwrap_or_default() {
        if let Ok(pid) = i32::try_from(pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// A child process whose stdout lines arrive on a channel and whose stderr goes to a file; killed
/// when dropped.
#[derive(Debug)]
pub struct Process {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: PathBuf,
}

impl Process {
    /// Starts `command`, logging its stderr to a file in `log_dir` named after `label`.
    pub fn spawn(mut command: Command, label: &str, log_dir: &Path) -> Result<Self> {
        let stderr = log_dir.join(format!("{label}-{}.log", unique()));
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .with_context(|| format!("spawn {label} ({command:?})"))?;
        if let Ok(mut live) = LIVE.lock() {
            live.push(child.id());
        }
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            lines,
            stderr,
        })
    }

    /// Waits (at most `timeout`) for a stdout line starting with `prefix`; returns the rest.
    pub fn line(&self, prefix: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return Ok(rest.to_owned());
                    }
                }
                Err(_) => bail!("no line {prefix:?} within {timeout:?}; log: {}", self.log()),
            }
        }
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits (at most 30 s) for it to exit; returns its exit code.
    pub fn terminate(&mut self) -> Result<Option<i32>> {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        self.wait_exit(Duration::from_secs(30))
            .with_context(|| format!("process {pid} did not stop within 30 s of SIGTERM"))
    }

    /// Waits (at most `timeout`) for it to exit by itself; returns its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Option<i32>> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status.code());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!(
            "process {} did not exit within {timeout:?}",
            self.child.id()
        )
    }

    /// Kills it with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Ok(mut live) = LIVE.lock() {
            let id = self.child.id();
            live.retain(|&p| p != id);
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Value of `key=` in a line of `key=value` words.
pub fn field(line: &str, key: &str) -> Result<String> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_owned)
        .with_context(|| format!("{key}= in {line:?}"))
}

/// CPU seconds (user + system) a process has used so far (`/proc/<pid>/stat`).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may contain spaces); utime and
    // stime are the 12th and 13th of them. Ticks are 1/100 s (`sysconf(_SC_CLK_TCK)` on Linux).
    let rest = stat.rsplit_once(')').context("stat format")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields
        .get(11..13)
        .context("utime and stime")?
        .iter()
        .map(|f| f.parse::<f64>())
        .sum::<Result<f64, _>>()?;
    Ok(ticks / 100.0)
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS:`, `VmHWM:`).
pub fn status_kib(pid: u32, key: &str) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim().strip_suffix("kB"))
        .with_context(|| format!("{key} in /proc/{pid}/status"))?
        .trim()
        .parse()
        .context("status value")
}

/// A running `zonemesh-aggregator`.
#[derive(Debug)]
pub struct Aggregator {
    process: Process,
    /// gRPC address.
    pub grpc: SocketAddr,
    /// HTTP address.
    pub http: SocketAddr,
}

impl Aggregator {
    /// Starts the aggregator at `program` with `args` (plus ephemeral loopback ports unless
    /// given) and waits until it listens.
    pub fn start(program: &Path, args: &[&str], log_dir: &Path) -> Result<Self> {
        let mut all: Vec<&str> = Vec::new();
        if !args.contains(&"--listen") {
            all.extend(["--listen", "127.0.0.1:0"]);
        }
        if !args.contains(&"--http-listen") {
            all.extend(["--http-listen", "127.0.0.1:0"]);
        }
        all.extend(args);
        let mut command = Command::new(program);
        command.args(&all);
        let process = Process::spawn(command, "zonemesh-aggregator", log_dir)?;
        let line = process
            .line("zonemesh-aggregator listening ", Duration::from_secs(30))
            .context("zonemesh-aggregator did not start")?;
        Ok(Self {
            grpc: field(&line, "grpc")?.parse()?,
            http: field(&line, "http")?.parse()?,
            process,
        })
    }

    /// A gRPC channel to it.
    pub async fn channel(&self) -> Result<Channel> {
        Ok(Channel::from_shared(format!("http://{}", self.grpc))?
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await?)
    }

    /// Kills it with SIGKILL, as a crash would.
    pub fn kill(mut self) {
        self.process.kill();
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Stops it with SIGTERM and waits (at most 30 s) for it to exit; returns its exit code.
    pub fn terminate(mut self) -> Result<Option<i32>> {
        self.process.terminate()
    }

    /// Waits (at most `timeout`) for it to exit by itself; returns its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Option<i32>> {
        self.process.wait_exit(timeout)
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// A running `zonemesh-agent`.
#[derive(Debug)]
pub struct Agent {
    process: Process,
    /// Its node name.
    pub node: String,
    /// The RTT method it chose (`raw`, `dgram` or `tcp`).
    pub icmp: String,
    /// Its Prometheus endpoint.
    pub metrics: SocketAddr,
    /// The network namespace it runs in, if not the host's.
    pub netns: Option<String>,
}

/// What an agent printed when it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentTotals {
    /// Reports acknowledged.
    pub reports: u64,
    /// Probes in acknowledged reports.
    pub probes: u64,
    /// Reports never acknowledged.
    pub unacknowledged: u64,
}

impl Agent {
    /// Starts an agent for `node` with `args` (plus `--node` and a loopback metrics port unless
    /// given) and waits until it runs. `command` is the agent's program, or a command that runs
    /// it (such as `ip netns exec <netns> zonemesh-agent`, in which case `netns` names the
    /// namespace, where its metrics endpoint is then reached).
    pub fn start(
        mut command: Command,
        netns: Option<&str>,
        node: &str,
        args: &[&str],
        log_dir: &Path,
    ) -> Result<Self> {
        let mut all: Vec<&str> = vec!["--node", node];
        if !args.contains(&"--metrics-listen") {
            all.extend(["--metrics-listen", "127.0.0.1:0"]);
        }
        all.extend(args);
        command.args(&all);
        let process = Process::spawn(command, &format!("zonemesh-agent-{node}"), log_dir)?;
        let line = process
            .line("zonemesh-agent running ", Duration::from_secs(30))
            .with_context(|| format!("zonemesh-agent {node} did not start"))?;
        Ok(Self {
            node: node.to_owned(),
            icmp: field(&line, "icmp")?,
            metrics: field(&line, "metrics")?.parse()?,
            netns: netns.map(str::to_owned),
            process,
        })
    }

    /// Scrapes its `/metrics` and returns the value of the sample `name` (with its labels, as
    /// written, e.g. `zonemesh_agent_connected`).
    pub fn metric(&self, name: &str) -> Result<f64> {
        let text = match &self.netns {
            None => http_get(self.metrics, "/metrics")?,
            Some(ns) => {
                let (addr, path) = (self.metrics, format!("{}/{ns}", crate::netns::NETNS_DIR));
                // The connection is made from inside the agent's namespace.
                crate::in_netns(&path, move || http_get(addr, "/metrics"))??
            }
        };
        sample(&text, name).with_context(|| format!("{name} in /metrics of {}", self.node))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// Stops it with SIGTERM; it flushes its last window. Returns what it printed on the way out.
    pub fn terminate(mut self) -> Result<AgentTotals> {
        let code = self.process.terminate()?;
        anyhow::ensure!(
            code == Some(0),
            "{} exited with {code:?}: {}",
            self.node,
            self.log()
        );
        let line = self
            .process
            .line("zonemesh-agent stopped ", Duration::from_secs(5))?;
        Ok(AgentTotals {
            reports: field(&line, "acknowledged_reports")?.parse()?,
            probes: field(&line, "acknowledged_probes")?.parse()?,
            unacknowledged: field(&line, "unacknowledged_reports")?.parse()?,
        })
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// GET `path` from `addr` over plain HTTP/1.1; returns the body of a 200 answer.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    http_get_with(addr, path, &[]).map(|(_, body)| body)
}

/// GET `path` from `addr` with more `headers` (name, value); the status line and headers of a
/// 200 answer (as sent), and its body.
pub fn http_get_with(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(String, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").context("HTTP answer")?;
    anyhow::ensure!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    Ok((head.to_owned(), body.to_owned()))
}

/// The value of the sample `series` (a metric's name with its labels, as written, e.g.
/// `zonemesh_nodes{state="ready"}`) in a Prometheus text exposition, if it is there.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// POSTs `body` (JSON) to `path` of `addr` over plain HTTP/1.1; returns the status code and the
/// body of the answer.
pub fn http_post(addr: SocketAddr, path: &str, body: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").context("HTTP answer")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("HTTP status")?;
    Ok((status, body.to_owned()))
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
