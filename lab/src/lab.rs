//! Building and removing a lab.
//!
//! Layout (addresses are the same in every lab: labs never share a namespace):
//!
//! ```text
//!  node namespaces <prefix>_<node>         router namespace <prefix>
//!  ┌──────────────────────┐                ┌──────────────────────────────────────────────┐
//!  │ eth0 10.77.<z>.<10+i>├── veth ────────┤ v<z>n<i> ─┐                                   │
//!  │ default via .1       │                │           bz<z> 10.77.<z>.1/24 (one per zone) │
//!  │ [tbf: egress]        │                │ [tbf on v<z>n<i>: the node's ingress]         │
//!  │ [loss: INPUT]        │                │ [htb on bz<b>: zone links' capacity, a class  │
//!  └──────────────────────┘                │   per source zone's subnet]                   │
//!                                          │ FORWARD bz<a> → bz<b>: loss (statistic),      │
//!                                          │   then NFQUEUE queue(a,b) → link emulator     │
//!                                          │ lo 10.77.0.1: the control address (proxies to │
//!                                          │   services of the host, e.g. the aggregator)  │
//!                                          └──────────────────────────────────────────────┘
//! ```
//!
//! Nodes of one zone share a bridge (no delay between them); traffic between zones is routed
//! by the router namespace, where the delay is applied on the forwarding hop. Nothing is added
//! to the host's own namespace, so the lab's traffic cannot leave it.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::emulator::{Emulator, LinkDelay, queue_number};
use crate::netns::{self, NETNS_DIR, ip_batch, run, run_in, tc_batch};
use crate::spec::LabSpec;

/// Default start of every lab's namespace names; `zonemesh-lab cleanup` removes what is left.
pub const DEFAULT_PREFIX: &str = "zmlab-";
/// The address of the router namespace that every node reaches (services exposed with
/// [`Lab::expose`] listen there).
pub const CONTROL_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// One node of a built lab.
#[derive(Debug, Clone)]
pub struct LabNode {
    /// Node name.
    pub name: String,
    /// Zone name.
    pub zone: String,
    /// Network namespace.
    pub netns: String,
    /// Its address.
    pub address: Ipv4Addr,
    /// The router's end of its veth.
    router_if: String,
}

/// Prefixes of the labs alive in this process (removed on SIGINT/SIGTERM, with the child
/// processes, see [`cleanup_on_signals`]).
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A lab: namespaces, links, impairments, the emulator thread and the proxies. Everything it
/// made goes when it is dropped (processes left inside its namespaces are killed).
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    spec: LabSpec,
    nodes: BTreeMap<String, LabNode>,
    emulator: Option<Emulator>,
    proxies: Vec<Proxy>,
    /// Faults injected while it runs ([`Lab::inject`]), undone by [`Lab::clear`].
    injected: Vec<Injection>,
    removed: bool,
}

/// A fault injected into a running lab ([`Lab::inject`]), on top of what its spec built, until
/// [`Lab::clear`]. Losses are iptables `statistic` drops that spare the control address (an agent
/// keeps its stream to the aggregator: a network fault, not a gone agent).
#[derive(Debug, Clone, PartialEq)]
pub enum Injection {
    /// The node drops this share of what reaches it (INPUT).
    NodeLossIn { node: String, loss: f64 },
    /// The node drops this share of what it sends (OUTPUT).
    NodeLossOut { node: String, loss: f64 },
    /// The node sends at most this rate (`tbf` on its `eth0`; its ingress unchanged).
    NodeEgressRate { node: String, bps: u64 },
    /// The router drops this share of what it forwards between zones `a` and `b`, each way.
    LinkLoss { a: String, b: String, loss: f64 },
    /// The link between zones `a` and `b` gains this much round trip (half each way; the link
    /// must have a delay of its own, whose queue the emulator holds).
    LinkDelay {
        a: String,
        b: String,
        extra: Duration,
    },
    /// Nodes `a` and `b` each drop this share of what comes from the other: one path, both ways.
    PathLoss { a: String, b: String, loss: f64 },
}

/// A `tbf` of `bps` on `dev` in namespace `ns`. Burst: 4 ms at the rate, at least 16 full
/// frames; the queue holds 100 ms.
fn tbf(ns: &str, dev: &str, bps: u64) -> Result<()> {
    tc_batch(ns, &tbf_line(dev, bps))
}

/// The `tc -batch` line that adds [`tbf`].
fn tbf_line(dev: &str, bps: u64) -> String {
    let burst = (bps / 8 / 250).max(16 * 1514);
    format!("qdisc add dev {dev} root tbf rate {bps}bit burst {burst} latency 100ms\n")
}

/// Sets what `dev` in `ns` sends at most to `bps` (`None`: unlimited); `shaped` says whether a
/// `tbf` is its root qdisc now.
///
/// The old qdisc is deleted and a new one added, never changed in place: a `tbf` changed to a
/// smaller burst keeps the packets it holds, and one queued under the old burst that is larger
/// than the new one (a 64 KiB GSO packet under a burst of 50 kB) can never be sent. It blocks
/// the queue head for as long as the rate stands, and the node goes silent: every `tc qdisc
/// replace` or `change` from 1 Gbit/s to 100 Mbit/s under an iperf3 transfer did that, and none
/// of the same changes deleting first.
fn set_rate(ns: &str, dev: &str, shaped: bool, bps: Option<u64>) -> Result<()> {
    let mut batch = String::new();
    if shaped {
        batch += &format!("qdisc del dev {dev} root\n");
    }
    if let Some(bps) = bps {
        batch += &tbf_line(dev, bps);
    }
    tc_batch(ns, &batch)
}

/// Why a lab cannot be built on this machine, checked before anything is made.
pub fn check_machine() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("the lab needs root (network namespaces, iptables, tc)");
    }
    for (program, package) in [
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("iptables-restore", "iptables"),
    ] {
        let found = std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| dir.join(program).is_file())
        });
        if !found {
            bail!("the lab needs {program}: apt-get install {package}");
        }
    }
    Ok(())
}

/// A fresh prefix for this process: `<base><pid>x<n>`.
fn fresh_prefix(base: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{base}{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl Lab {
    /// Builds `spec` under a fresh prefix (`zmlab-<pid>x<n>`).
    pub fn build(spec: LabSpec) -> Result<Self> {
        Self::build_with_prefix(spec, &fresh_prefix(DEFAULT_PREFIX))
    }

    /// Builds `spec` with namespace names starting with `prefix`. If building fails halfway,
    /// what was made is removed before the error returns.
    pub fn build_with_prefix(spec: LabSpec, prefix: &str) -> Result<Self> {
        spec.validate()?;
        check_machine()?;
        if !netns::list(prefix).is_empty() {
            bail!(
                "namespaces named {prefix}* exist already: remove them with `zonemesh-lab cleanup --prefix {prefix}`"
            );
        }
        let mut nodes = BTreeMap::new();
        for (z, zone) in spec.zones.iter().enumerate() {
            for (i, node) in zone.nodes.iter().enumerate() {
                nodes.insert(
                    node.clone(),
                    LabNode {
                        name: node.clone(),
                        zone: zone.name.clone(),
                        netns: format!("{prefix}_{node}"),
                        address: Ipv4Addr::new(10, 77, z as u8 + 1, i as u8 + 10),
                        router_if: format!("v{}n{}", z + 1, i + 1),
                    },
                );
            }
        }
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(prefix.to_owned());
        let mut lab = Self {
            prefix: prefix.to_owned(),
            spec,
            nodes,
            emulator: None,
            proxies: Vec::new(),
            injected: Vec::new(),
            removed: false,
        };
        // On error `lab` is dropped here, which removes what was made.
        lab.make()
            .with_context(|| format!("building lab {prefix}"))?;
        Ok(lab)
    }

    fn make(&mut self) -> Result<()> {
        let router = self.prefix.clone();
        run("ip", &["netns", "add", &router])?;
        for node in self.nodes.values() {
            run("ip", &["netns", "add", &node.netns])?;
        }
        let mut script = format!("link set lo up\naddr add {CONTROL_ADDRESS}/32 dev lo\n");
        for z in 1..=self.spec.zones.len() {
            script += &format!(
                "link add bz{z} type bridge\nlink set bz{z} up\naddr add 10.77.{z}.1/24 dev bz{z}\n"
            );
        }
        for node in self.nodes.values() {
            let z = self.zone_index(&node.zone) + 1;
            script += &format!(
                "link add {r} type veth peer name eth0 netns {ns}\nlink set {r} master bz{z}\nlink set {r} up\n",
                r = node.router_if,
                ns = node.netns
            );
        }
        ip_batch(Some(&router), &script)?;
        write_sysctl(&self.netns_path(&router), "net/ipv4/ip_forward", "1")?;
        for node in self.nodes.values() {
            let z = self.zone_index(&node.zone) + 1;
            ip_batch(
                Some(&node.netns),
                &format!(
                    "link set lo up\naddr add {}/24 dev eth0\nlink set eth0 up\nroute add default via 10.77.{z}.1\n",
                    node.address
                ),
            )?;
        }

        // Links between zones: loss, then the delay queue, on the router's forwarding hop.
        let mut rules = String::new();
        let mut delays = Vec::new();
        for (a, za) in self.spec.zones.iter().enumerate() {
            for (b, zb) in self.spec.zones.iter().enumerate() {
                if a == b {
                    continue;
                }
                let link = self.spec.link_between(&za.name, &zb.name);
                let forward = self
                    .spec
                    .links
                    .contains_key(&(za.name.clone(), zb.name.clone()));
                if forward && link.loss > 0.0 {
                    rules += &format!(
                        "-A FORWARD -i bz{} -o bz{} -m statistic --mode random --probability {} -j DROP\n",
                        a + 1,
                        b + 1,
                        link.loss
                    );
                }
                if !link.rtt.is_zero() {
                    let queue = queue_number(a, b);
                    rules += &format!(
                        "-A FORWARD -i bz{} -o bz{} -j NFQUEUE --queue-num {queue}\n",
                        a + 1,
                        b + 1
                    );
                    delays.push(LinkDelay {
                        queue,
                        delay: link.rtt / 2,
                        jitter: link.jitter,
                    });
                }
            }
        }
        if !delays.is_empty() {
            // Bound before the rules exist, so no packet meets an unbound queue.
            self.emulator = Some(
                Emulator::start(&self.netns_path(&router), delays, self.spec.seed)
                    .context("starting the link emulator")?,
            );
        }
        if !rules.is_empty() {
            iptables_restore(&router, &rules)?;
        }

        // Node impairments.
        for (name, imp) in &self.spec.nodes {
            let node = &self.nodes[name];
            if imp.loss > 0.0 {
                iptables_restore(
                    &node.netns,
                    &format!(
                        "-A INPUT -i lo -j ACCEPT\n-A INPUT -s {CONTROL_ADDRESS}/32 -j ACCEPT\n-A INPUT -m statistic --mode random --probability {} -j DROP\n",
                        imp.loss
                    ),
                )?;
            }
            // Egress on the node's own end of its veth, ingress on the router's end.
            for (ns, dev, rate) in [
                (node.netns.as_str(), "eth0", imp.egress_bps),
                (router.as_str(), node.router_if.as_str(), imp.ingress_bps),
            ] {
                if let Some(bps) = rate {
                    tbf(ns, dev, bps)?;
                }
            }
        }

        // Zone links' capacity: on the bridge through which the router sends into a zone, one
        // htb class per limited source zone (what the router forwards from that zone's subnet);
        // everything else (traffic inside a zone is bridged and never meets this qdisc, the
        // control address's) goes unshaped.
        for (b, zb) in self.spec.zones.iter().enumerate() {
            let limited: Vec<(usize, u64)> = self
                .spec
                .zones
                .iter()
                .enumerate()
                .filter(|(a, _)| *a != b)
                .filter_map(|(a, za)| {
                    let rate = self.spec.link_between(&za.name, &zb.name).rate_bps?;
                    Some((a, rate))
                })
                .collect();
            if limited.is_empty() {
                continue;
            }
            let dev = format!("bz{}", b + 1);
            let mut batch = format!("qdisc add dev {dev} root handle 1: htb default 0\n");
            for (a, bps) in limited {
                let class = a + 1;
                // The queue holds 100 ms at the rate, as the nodes' tbf does.
                let queue = (bps / 8 / 10).max(16 * 1514);
                batch += &format!(
                    "class add dev {dev} parent 1: classid 1:{class} htb rate {bps}bit ceil {bps}bit\n\
                     qdisc add dev {dev} parent 1:{class} bfifo limit {queue}\n\
                     filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip src 10.77.{class}.0/24 flowid 1:{class}\n"
                );
            }
            tc_batch(&router, &batch)?;
        }
        Ok(())
    }

    fn zone_index(&self, zone: &str) -> usize {
        self.spec
            .zones
            .iter()
            .position(|z| z.name == zone)
            .expect("validated zone")
    }

    fn netns_path(&self, netns: &str) -> String {
        format!("{NETNS_DIR}/{netns}")
    }

    /// The namespace prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The spec it was built from.
    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }

    /// The router namespace.
    pub fn router(&self) -> &str {
        &self.prefix
    }

    /// Node `name`; panics on a name the spec does not have (a test's own mistake).
    pub fn node(&self, name: &str) -> &LabNode {
        self.nodes
            .get(name)
            .unwrap_or_else(|| panic!("the lab has no node {name}"))
    }

    /// Every node, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &LabNode> {
        self.nodes.values()
    }

    /// A command that runs `program` inside `node`'s namespace.
    pub fn command(
        &self,
        node: &str,
        program: impl AsRef<std::ffi::OsStr>,
    ) -> std::process::Command {
        let mut c = std::process::Command::new("ip");
        c.args(["netns", "exec", &self.node(node).netns])
            .arg(program);
        c
    }

    /// Runs `program args` inside `node`'s namespace; its stdout, or an error with its stderr.
    pub fn run(&self, node: &str, program: &str, args: &[&str]) -> Result<String> {
        run_in(&self.node(node).netns, program, args)
    }

    /// Makes the host service at `host` (in the host's namespace, e.g. `127.0.0.1:7400`)
    /// reachable from every node at [`CONTROL_ADDRESS`] on the same port, through a TCP proxy.
    pub fn expose(&mut self, host: SocketAddr) -> Result<SocketAddr> {
        let at = SocketAddr::new(CONTROL_ADDRESS.into(), host.port());
        let listener = in_netns(&self.netns_path(&self.prefix), move || {
            TcpListener::bind(at)
        })?
        .with_context(|| format!("listening on {at} in the router namespace"))?;
        self.proxies.push(Proxy::start(listener, host)?);
        Ok(at)
    }

    /// Cuts `node` off from everything (its link goes down), as a failed NIC or switch port.
    pub fn cut_off(&self, node: &str) -> Result<()> {
        let n = self.node(node);
        run(
            "ip",
            &["-n", &self.prefix, "link", "set", &n.router_if, "down"],
        )?;
        Ok(())
    }

    /// Undoes [`Lab::cut_off`].
    pub fn reconnect(&self, node: &str) -> Result<()> {
        let n = self.node(node);
        run(
            "ip",
            &["-n", &self.prefix, "link", "set", &n.router_if, "up"],
        )?;
        Ok(())
    }

    /// Injects `fault` (see [`Injection`]); an unknown node or zone, or a delay on a link without
    /// a delay queue, is an error and changes nothing.
    pub fn inject(&mut self, fault: &Injection) -> Result<()> {
        self.apply(fault, true)?;
        self.injected.push(fault.clone());
        Ok(())
    }

    /// Undoes every [`Lab::inject`], newest first; the lab is as its spec built it.
    pub fn clear(&mut self) -> Result<()> {
        while let Some(fault) = self.injected.pop() {
            self.apply(&fault, false)?;
        }
        Ok(())
    }

    /// What is injected now.
    pub fn injected(&self) -> &[Injection] {
        &self.injected
    }

    /// Adds (`on`) or removes one injection.
    fn apply(&self, fault: &Injection, on: bool) -> Result<()> {
        let verb = if on { "-I" } else { "-D" };
        let at = if on { " 1" } else { "" };
        let known_node = |n: &str| -> Result<&LabNode> {
            self.nodes
                .get(n)
                .with_context(|| format!("no node {n} in the lab"))
        };
        let known_zone = |z: &str| -> Result<usize> {
            self.spec
                .zones
                .iter()
                .position(|s| s.name == z)
                .with_context(|| format!("no zone {z} in the lab"))
        };
        let drop_rule = |p: f64| format!("-m statistic --mode random --probability {p} -j DROP");
        match fault {
            Injection::NodeLossIn { node, loss } => {
                let n = known_node(node)?;
                iptables_restore(
                    &n.netns,
                    &format!(
                        "{verb} INPUT{at} ! -i lo ! -s {CONTROL_ADDRESS}/32 {}\n",
                        drop_rule(*loss)
                    ),
                )
            }
            Injection::NodeLossOut { node, loss } => {
                let n = known_node(node)?;
                iptables_restore(
                    &n.netns,
                    &format!(
                        "{verb} OUTPUT{at} ! -o lo ! -d {CONTROL_ADDRESS}/32 {}\n",
                        drop_rule(*loss)
                    ),
                )
            }
            Injection::NodeEgressRate { node, bps } => {
                let n = known_node(node)?;
                let own = self.spec.nodes.get(node).and_then(|s| s.egress_bps);
                let capped = self.injected.iter().any(
                    |f| matches!(f, Injection::NodeEgressRate { node: other, .. } if other == node),
                );
                if on {
                    set_rate(&n.netns, "eth0", own.is_some() || capped, Some(*bps))
                } else {
                    set_rate(&n.netns, "eth0", true, own)
                }
            }
            Injection::LinkLoss { a, b, loss } => {
                let (za, zb) = (known_zone(a)? + 1, known_zone(b)? + 1);
                iptables_restore(
                    &self.prefix,
                    &format!(
                        "{verb} FORWARD{at} -i bz{za} -o bz{zb} {d}\n{verb} FORWARD{at} -i bz{zb} -o bz{za} {d}\n",
                        d = drop_rule(*loss)
                    ),
                )
            }
            Injection::LinkDelay { a, b, extra } => {
                let (za, zb) = (known_zone(a)?, known_zone(b)?);
                let emulator = self
                    .emulator
                    .as_ref()
                    .context("the lab delays no link: no delay to add to")?;
                let half = if on { *extra / 2 } else { Duration::ZERO };
                for (x, y) in [(za, zb), (zb, za)] {
                    if !emulator.set_extra_delay(queue_number(x, y), half) {
                        bail!("the link {a}–{b} has no delay of its own to add to");
                    }
                }
                Ok(())
            }
            Injection::PathLoss { a, b, loss } => {
                let (na, nb) = (known_node(a)?, known_node(b)?);
                for (n, from) in [(na, nb), (nb, na)] {
                    iptables_restore(
                        &n.netns,
                        &format!(
                            "{verb} INPUT{at} -s {}/32 {}\n",
                            from.address,
                            drop_rule(*loss)
                        ),
                    )?;
                }
                Ok(())
            }
        }
    }

    /// The emulator's counters (`None` when no link has a delay).
    pub fn emulator(&self) -> Option<&Emulator> {
        self.emulator.as_ref()
    }

    /// Removes everything: proxies and emulator stop, processes inside the namespaces are
    /// killed, the namespaces go. Errors are collected, and the removal goes on past them.
    pub fn remove(&mut self) -> Result<()> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        for p in &mut self.proxies {
            p.stop();
        }
        self.proxies.clear();
        let mut errors = Vec::new();
        if let Some(mut e) = self.emulator.take()
            && let Err(err) = e.stop()
        {
            errors.push(format!("link emulator: {err}"));
        }
        for ns in netns::list(&self.prefix) {
            if let Err(e) = netns::remove(&ns) {
                errors.push(e.to_string());
            }
        }
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| p != &self.prefix);
        if errors.is_empty() {
            Ok(())
        } else {
            bail!("removing lab {}: {}", self.prefix, errors.join("; "))
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("{e}");
        }
    }
}

fn iptables_restore(netns: &str, rules: &str) -> Result<()> {
    use std::io::Write;
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", netns, "iptables-restore", "--noflush"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("cannot run iptables-restore: apt-get install iptables")?;
    let table = format!("*filter\n{rules}COMMIT\n");
    child
        .stdin
        .take()
        .context("iptables-restore stdin")?
        .write_all(table.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "iptables-restore in {netns}: {}\nrules:\n{table}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs `f` on a thread inside the namespace at `path` and returns its result (sockets it makes
/// stay in that namespace).
pub fn in_netns<T: Send + 'static>(
    path: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let path = path.to_owned();
    std::thread::spawn(move || -> io::Result<T> {
        netns::enter(&path)?;
        Ok(f())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("namespace thread panicked"))?
    .map_err(Into::into)
}

/// Writes a `/proc/sys` value as seen from inside the namespace at `path`.
fn write_sysctl(path: &str, key: &str, value: &str) -> Result<()> {
    let file = format!("/proc/sys/{key}");
    let value = value.to_owned();
    in_netns(path, move || std::fs::write(&file, value))?
        .with_context(|| format!("setting {key} in {path}"))
}

/// A TCP proxy from a listener inside the lab to a service of the host.
#[derive(Debug)]
struct Proxy {
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    fn start(listener: TcpListener, host: SocketAddr) -> Result<Self> {
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (stop2, streams2) = (stop.clone(), streams.clone());
        let thread = std::thread::Builder::new()
            .name("lab-proxy".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((inside, _)) => {
                            // This thread is in the host's namespace: the outgoing socket is too.
                            let Ok(outside) =
                                TcpStream::connect_timeout(&host, Duration::from_secs(2))
                            else {
                                continue;
                            };
                            let _ = inside.set_nonblocking(false);
                            let _ = inside.set_nodelay(true);
                            let _ = outside.set_nodelay(true);
                            let pairs = [
                                (inside.try_clone(), outside.try_clone()),
                                (outside.try_clone(), inside.try_clone()),
                            ];
                            if let Ok(mut list) = streams2.lock() {
                                list.extend(inside.try_clone());
                                list.extend(outside.try_clone());
                            }
                            for pair in pairs {
                                if let (Ok(mut from), Ok(mut to)) = pair {
                                    std::thread::spawn(move || {
                                        let _ = io::copy(&mut from, &mut to);
                                        let _ = to.shutdown(std::net::Shutdown::Write);
                                    });
                                }
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?;
        Ok(Self {
            stop,
            streams,
            thread: Some(thread),
        })
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Ok(list) = self.streams.lock() {
            for s in list.iter() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// Removes every lab of this process, and kills the processes it started (the aggregator runs
/// outside the labs' namespaces), when it gets SIGINT or SIGTERM, then exits (130 or 143).
/// Call once; later calls do nothing. Processes that handle these signals themselves (the demo)
/// drop their labs instead.
pub fn cleanup_on_signals() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
            return;
        };
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                remove_all(&format!("on signal {signal}"));
                std::process::exit(128 + signal);
            }
        });
    });
}

/// Kills every process this process started and removes every lab of it, saying so with `why`
/// (for a process about to exit without dropping its labs).
pub(crate) fn remove_all(why: &str) {
    crate::process::kill_all();
    let prefixes = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    for prefix in prefixes {
        for ns in netns::list(&prefix) {
            let _ = netns::remove(&ns);
        }
        eprintln!("lab {prefix} removed {why}");
    }
}

/// A leftover namespace found by [`cleanup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Namespace name.
    pub netns: String,
    /// Processes killed in it.
    pub killed: usize,
}

/// Removes the namespaces whose names start with `prefix`, except those of labs whose process is
/// still alive (their names carry its pid) unless `force`. Returns what was removed.
pub fn cleanup(prefix: &str, force: bool) -> Result<Vec<Leftover>> {
    let mut removed = Vec::new();
    for ns in netns::list(prefix) {
        let owner = ns
            .strip_prefix(DEFAULT_PREFIX)
            .and_then(|rest| rest.split('x').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if !force && owner.is_some_and(|pid| pid != std::process::id() && netns::alive(pid)) {
            continue;
        }
        let killed = netns::remove(&ns)?;
        removed.push(Leftover { netns: ns, killed });
    }
    Ok(removed)
}
