//! Real Open MPI collectives in the lab: `MPI_Allreduce`, `MPI_Alltoall` and a parameter-server
//! exchange (the C programs in `experiments/mpi/`, built with `mpicc` at run time) under
//! `mpirun`, every rank inside its node's namespace, in the rank order the caller gives.
//!
//! ```no_run
//! use std::time::Duration;
//! use zonemesh_experiments::mpi::{Algorithm, Job, Programs};
//! use zonemesh_lab::{Lab, LabSpec};
//!
//! let lab = Lab::build(LabSpec::new().zone("zone-a", &["a1", "a2", "a3"]))?;
//! let programs = Programs::build()?;
//! let ranks = ["a2", "a1", "a3"].map(String::from);
//! let job = Job::new(&ranks, 256 << 10, Algorithm::Ring);
//! let measured = zonemesh_experiments::mpi::run(&lab, &programs, &job)?;
//! println!("median {:?}", measured.median());
//! # anyhow::Ok(())
//! ```
//!
//! How it launches (the recipe checked by hand in the team's notes, Open MPI 4.1.4):
//! - `mpirun` runs inside the namespace of rank 0's node, in a UTS namespace of its own whose
//!   host name is the node's name. Open MPI always gives the node it runs on the first ranks, so
//!   rank 0's node leads the hostfile, and the hostfile lists the other nodes in rank order with
//!   `slots=<ranks on that node>`: with the default mapping by slot, rank order is hostfile order.
//! - Its "remote shell" (`--mca plm_rsh_agent`) is a script written for the run that maps a host
//!   (address or node name) to its namespace and runs `ip netns exec <ns> unshare --uts sh -c
//!   "hostname <node> && $*"`: Open MPI passes the remote command as shell words.
//! - Every node's Open MPI session directory is its own (`TMPDIR` per node in the run's temporary
//!   directory): all namespaces share one `/tmp`, and daemons that shared a session directory
//!   removed each other's.
//! - `--mca pml ob1 --mca btl tcp,self`: TCP between ranks, also between two ranks of one node
//!   (shared memory is not the network under test). `--mca btl_tcp_if_include eth0 --mca
//!   oob_tcp_if_include eth0`: the lab's interface. `--bind-to none`: every "node" sees the same
//!   cores, and binding would pin every rank to core 0. `--mca mpi_yield_when_idle 1`: waiting
//!   ranks would otherwise spin and starve the link emulator of the machine's cores.
//! - [`Algorithm::Ring`] adds `--mca coll_tuned_use_dynamic_rules 1 --mca
//!   coll_tuned_allreduce_algorithm 4` (without the first the second is silently ignored), so that
//!   rank r sends to rank r + 1 and the rank order is what the run measures.
//! - [`Algorithm::AllToAll`] forces the pairwise exchange (`coll_tuned_alltoall_algorithm 2`),
//!   the schedule the engine's model prices; [`Algorithm::ParameterServer`] is point-to-point
//!   and needs no setting.
//!
//! Every rank reports the address of its `eth0`; a rank that ran anywhere but on its node fails
//! the run. Every process of a run carries a marker in its environment (`ZMLAB_MPI_RUN`), and
//! when the run ends — finished, failed or timed out — every process with that marker is killed
//! (`mpirun` daemonises its remote daemons, which then belong to no process group of ours) and
//! the run's files are removed.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use zonemesh_domain::stats::median_duration;
use zonemesh_lab::Lab;

use crate::collective_time::Collective;

/// The programs' sources: what they share, then each program's name and source.
pub const SOURCES: [(&str, &str); 4] = [
    ("zmlab_mpi.h", include_str!("../mpi/zmlab_mpi.h")),
    ("allreduce.c", include_str!("../mpi/allreduce.c")),
    ("alltoall.c", include_str!("../mpi/alltoall.c")),
    ("ps.c", include_str!("../mpi/ps.c")),
];

/// The environment variable that marks every process of one run.
pub const MARKER: &str = "ZMLAB_MPI_RUN";

/// What a run does: the all-reduce with the ring forced or with Open MPI's own choice, the
/// all-to-all, or the parameter-server exchange.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Algorithm {
    /// All-reduce, the ring forced (`coll_tuned_allreduce_algorithm 4`): rank r sends to r + 1.
    Ring,
    /// All-reduce, Open MPI's own choice (4.1's fixed decision table: Rabenseifner's
    /// reduce-scatter and all-gather for these sizes with 4–7 ranks, recursive doubling below
    /// 8 KiB).
    OpenMpiChoice,
    /// `MPI_Alltoall`, the pairwise exchange forced (`coll_tuned_alltoall_algorithm 2`): in round
    /// k rank r sends to r + k and receives from r − k.
    AllToAll,
    /// The parameter-server exchange of `ps.c`: one server, rank 0, which is a worker too.
    ParameterServer,
}

impl Algorithm {
    /// Name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ring => "ring (forced)",
            Self::OpenMpiChoice => "Open MPI's choice",
            Self::AllToAll => "all-to-all (pairwise)",
            Self::ParameterServer => "parameter server",
        }
    }

    /// Short name for files and flags.
    pub fn key(self) -> &'static str {
        match self {
            Self::Ring => "ring",
            Self::OpenMpiChoice => "default",
            Self::AllToAll => "alltoall",
            Self::ParameterServer => "ps",
        }
    }

    /// The collective the run performs, as the predictions price it.
    pub fn collective(self) -> Collective {
        match self {
            Self::Ring | Self::OpenMpiChoice => Collective::RingAllReduce,
            Self::AllToAll => Collective::AllToAll,
            Self::ParameterServer => Collective::ParameterServer,
        }
    }

    /// The collectives `algorithms` are priced as, each once, in their order.
    pub fn collectives(algorithms: &[Self]) -> Vec<Collective> {
        let mut out: Vec<Collective> = Vec::new();
        for a in algorithms {
            if !out.contains(&a.collective()) {
                out.push(a.collective());
            }
        }
        out
    }

    /// The program that runs it (a name of [`SOURCES`] without `.c`).
    fn program(self) -> &'static str {
        match self {
            Self::Ring | Self::OpenMpiChoice => "allreduce",
            Self::AllToAll => "alltoall",
            Self::ParameterServer => "ps",
        }
    }

    /// The program's arguments after bytes, iterations and warm-ups.
    fn extra_args(self) -> &'static [&'static str] {
        match self {
            // One server (the experiments' parameter server).
            Self::ParameterServer => &["1"],
            _ => &[],
        }
    }

    fn mca(self) -> &'static [&'static str] {
        match self {
            Self::Ring => &[
                "--mca",
                "coll_tuned_use_dynamic_rules",
                "1",
                "--mca",
                "coll_tuned_allreduce_algorithm",
                "4",
            ],
            Self::AllToAll => &[
                "--mca",
                "coll_tuned_use_dynamic_rules",
                "1",
                "--mca",
                "coll_tuned_alltoall_algorithm",
                "2",
            ],
            Self::OpenMpiChoice | Self::ParameterServer => &[],
        }
    }
}

/// Whether `mpirun` and `mpicc` are here; the error says what to install.
pub fn check_tools() -> Result<()> {
    for (program, args) in [("mpirun", ["--version"]), ("mpicc", ["--showme:version"])] {
        let ok = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        ensure!(
            ok,
            "{program} is not usable: apt-get install openmpi-bin libopenmpi-dev"
        );
    }
    Ok(())
}

/// The programs, compiled into a temporary directory (removed when dropped).
#[derive(Debug)]
pub struct Programs {
    dir: tempfile::TempDir,
}

impl Programs {
    /// Compiles every program of [`SOURCES`] with `mpicc -O2`.
    pub fn build() -> Result<Self> {
        check_tools()?;
        let dir = tempfile::Builder::new()
            .prefix("zmlab-mpi-program-")
            .tempdir()
            .context("temporary directory for the MPI programs")?;
        for (name, source) in SOURCES {
            std::fs::write(dir.path().join(name), source)?;
        }
        for (name, _) in SOURCES {
            let Some(program) = name.strip_suffix(".c") else {
                continue;
            };
            let out = Command::new("mpicc")
                .arg("-O2")
                .arg("-o")
                .arg(dir.path().join(program))
                .arg(dir.path().join(name))
                .stdin(Stdio::null())
                .output()
                .context("running mpicc")?;
            ensure!(
                out.status.success(),
                "mpicc {name} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(Self { dir })
    }

    /// Where the binary that runs `algorithm` is.
    pub fn binary(&self, algorithm: Algorithm) -> PathBuf {
        self.dir.path().join(algorithm.program())
    }

    /// The temporary directory they live in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// One `mpirun`.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Node of every rank, in rank order. A node may hold several ranks, next to each other.
    pub ranks: Vec<String>,
    /// Bytes per iteration: the all-reduced buffer, what a rank sends in the all-to-all, the
    /// gradient pushed to the servers (floats: a multiple of 4).
    pub bytes: usize,
    /// Timed iterations.
    pub iterations: u32,
    /// Untimed iterations before them.
    pub warmup: u32,
    /// What it runs.
    pub algorithm: Algorithm,
    /// The whole run (start-up included) must end within this, or it is killed and fails.
    pub timeout: Duration,
}

impl Job {
    /// A job of 10 timed iterations after 2 warm-ups, at most 120 s.
    pub fn new(ranks: &[String], bytes: usize, algorithm: Algorithm) -> Self {
        Self {
            ranks: ranks.to_vec(),
            bytes,
            iterations: 10,
            warmup: 2,
            algorithm,
            timeout: Duration::from_secs(120),
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Every timed iteration (the slowest rank's time of it), in order.
    pub iterations: Vec<Duration>,
    /// The whole `mpirun`, start-up included.
    pub wall: Duration,
}

impl Measured {
    /// Median of the timed iterations.
    pub fn median(&self) -> Duration {
        median_duration(&self.iterations)
    }
}

/// The nodes of `ranks` in order with their rank counts; fails when a node's ranks are not next
/// to each other (a hostfile cannot say that).
pub fn hosts(ranks: &[String]) -> Result<Vec<(String, u32)>> {
    let mut hosts: Vec<(String, u32)> = Vec::new();
    for node in ranks {
        match hosts.last_mut() {
            Some((last, n)) if last == node => *n += 1,
            _ => {
                ensure!(
                    !hosts.iter().any(|(h, _)| h == node),
                    "node {node}'s ranks are not next to each other in {ranks:?}: a hostfile \
                     gives a node's ranks consecutive numbers"
                );
                hosts.push((node.clone(), 1));
            }
        }
    }
    Ok(hosts)
}

/// The remote-shell script for the nodes `hosts` of `lab`, keeping session directories under
/// `tmp`.
fn agent_script(lab: &Lab, hosts: &[(String, u32)], tmp: &Path) -> String {
    let mut cases = String::new();
    for (name, _) in hosts {
        let node = lab.node(name);
        cases += &format!(
            "  {}|{}) ns={}; name={} ;;\n",
            node.address, node.name, node.netns, node.name
        );
    }
    format!(
        "#!/bin/sh\n\
# Open MPI's remote shell for one zonemesh lab run: enters the host's network namespace.\n\
# Called as: <agent> [options] <host> <remote shell words...>\n\
while [ $# -gt 0 ]; do case \"$1\" in -*) shift;; *) break;; esac; done\n\
host=$1; shift\n\
case \"$host\" in\n{cases}  *) echo \"zonemesh-lab mpi agent: unknown host '$host'\" >&2; exit 255 ;;\nesac\n\
TMPDIR={tmp}/$name\n\
mkdir -p \"$TMPDIR\" && export TMPDIR\n\
exec ip netns exec \"$ns\" unshare --uts sh -c \"hostname $name && $*\"\n",
        tmp = tmp.display()
    )
}

/// Runs `job` in `lab`: one rank per entry of `job.ranks`, inside that node's namespace.
pub fn run(lab: &Lab, programs: &Programs, job: &Job) -> Result<Measured> {
    ensure!(!job.ranks.is_empty(), "an MPI job needs at least one rank");
    ensure!(
        job.bytes >= 4 && job.bytes.is_multiple_of(4),
        "{} bytes: the programs move floats, give a multiple of 4",
        job.bytes
    );
    ensure!(job.iterations >= 1, "at least one timed iteration");
    for node in &job.ranks {
        ensure!(
            lab.nodes().any(|n| &n.name == node),
            "the lab has no node {node}"
        );
    }
    let hosts = hosts(&job.ranks)?;
    let run_dir = RunDir::new()?;
    let tmp = run_dir.path().join("tmp");
    let agent = run_dir.path().join("agent.sh");
    std::fs::write(&agent, agent_script(lab, &hosts, &tmp))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755))?;
    }
    let hostfile = run_dir.path().join("hostfile");
    let lines: String = hosts
        .iter()
        .map(|(h, n)| format!("{} slots={n}\n", lab.node(h).address))
        .collect();
    std::fs::write(&hostfile, lines)?;
    let first = lab.node(&hosts[0].0);
    let own_tmp = tmp.join(&first.name);
    std::fs::create_dir_all(&own_tmp)?;

    let np = job.ranks.len().to_string();
    let (bytes, iterations, warmup) = (
        job.bytes.to_string(),
        job.iterations.to_string(),
        job.warmup.to_string(),
    );
    let mut command = Command::new("ip");
    command
        .args([
            "netns",
            "exec",
            &first.netns,
            "unshare",
            "--uts",
            "sh",
            "-c",
        ])
        .arg("hostname \"$0\" && exec \"$@\"")
        .arg(&first.name)
        .arg("mpirun")
        .args(["--allow-run-as-root", "--bind-to", "none"])
        .arg("--mca")
        .arg("plm_rsh_agent")
        .arg(&agent)
        .args([
            "--mca",
            "plm_rsh_no_tree_spawn",
            "1",
            "--mca",
            "pml",
            "ob1",
            "--mca",
            "btl",
            "tcp,self",
            "--mca",
            "btl_tcp_if_include",
            "eth0",
            "--mca",
            "oob_tcp_if_include",
            "eth0",
            "--mca",
            "mpi_yield_when_idle",
            "1",
        ])
        .args(job.algorithm.mca())
        .args(["-np", &np, "--hostfile"])
        .arg(&hostfile)
        .arg(programs.binary(job.algorithm))
        .args([&bytes, &iterations, &warmup])
        .args(job.algorithm.extra_args())
        .env("TMPDIR", &own_tmp)
        .env(MARKER, &run_dir.marker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command
        .spawn()
        .context("cannot run ip netns exec … mpirun")?;
    let stdout = drain(child.stdout.take().context("mpirun stdout")?);
    let stderr = drain(child.stderr.take().context("mpirun stderr")?);
    let deadline = started + job.timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = started.elapsed();
    // Daemons and ranks first: until they are gone the pipes stay open.
    run_dir.kill_processes();
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let what = || {
        format!(
            "mpirun of {} B over {:?} ({})",
            job.bytes,
            job.ranks,
            job.algorithm.as_str()
        )
    };
    let Some(status) = status else {
        bail!(
            "{} did not end within {:?} and was killed; stderr: {}",
            what(),
            job.timeout,
            tail(&stderr)
        );
    };
    ensure!(
        status.success(),
        "{} failed ({status}); stderr: {}",
        what(),
        tail(&stderr)
    );
    let expected: Vec<(String, String)> = job
        .ranks
        .iter()
        .map(|n| (n.clone(), lab.node(n).address.to_string()))
        .collect();
    let iterations = parse(&expected, job.iterations, &stdout)
        .with_context(|| format!("{}: unexpected output; stderr: {}", what(), tail(&stderr)))?;
    Ok(Measured { iterations, wall })
}

/// The last lines of `text` (an error message's worth).
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(12)..].join(" | ")
}

fn drain(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Checks the rank lines against the intended nodes (`expected`: node and address of every rank)
/// and returns the timed iterations.
fn parse(expected: &[(String, String)], timed: u32, stdout: &str) -> Result<Vec<Duration>> {
    let mut ranks: BTreeMap<usize, String> = BTreeMap::new();
    let mut iterations = Vec::new();
    let mut check = None;
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("output line {line:?}"))?;
        match v["type"].as_str() {
            Some("rank") => {
                let rank = v["rank"].as_u64().context("rank")? as usize;
                let addrs = v["ifaddrs"].as_str().context("ifaddrs")?.to_owned();
                ranks.insert(rank, addrs);
            }
            Some("iter") => {
                let s = v["seconds"].as_f64().context("seconds")?;
                ensure!(s.is_finite() && s >= 0.0, "iteration time {s}");
                iterations.push(Duration::from_secs_f64(s));
            }
            Some("summary") => check = v["check"].as_str().map(str::to_owned),
            _ => {}
        }
    }
    ensure!(
        ranks.len() == expected.len(),
        "{} ranks reported where they ran, {} expected",
        ranks.len(),
        expected.len()
    );
    let mut wrong = Vec::new();
    for (rank, (node, address)) in expected.iter().enumerate() {
        let want = format!("eth0={address}");
        match ranks.get(&rank) {
            Some(got) if *got == want => {}
            got => wrong.push(format!(
                "rank {rank} should run on {node} ({want}), ran at {got:?}"
            )),
        }
    }
    ensure!(
        wrong.is_empty(),
        "RANKS ON THE WRONG NODES: {}",
        wrong.join("; ")
    );
    ensure!(
        iterations.len() == timed as usize,
        "{} timed iterations reported, {timed} asked for",
        iterations.len()
    );
    ensure!(
        check.as_deref() == Some("ok"),
        "the program's result check said {check:?}"
    );
    Ok(iterations)
}

/// A run's temporary directory and marker; its processes are killed and its files removed when
/// dropped.
#[derive(Debug)]
struct RunDir {
    dir: tempfile::TempDir,
    marker: String,
}

impl RunDir {
    fn new() -> Result<Self> {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = tempfile::Builder::new()
            .prefix("zmlab-mpi-run-")
            .tempdir()
            .context("temporary directory for an MPI run")?;
        Ok(Self {
            dir,
            marker: format!(
                "{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
        })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Kills every process that carries this run's marker, until none is left (bounded: 5 s).
    fn kill_processes(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let pids = marked(&self.marker, false);
            if pids.is_empty() || Instant::now() >= deadline {
                if !pids.is_empty() {
                    eprintln!(
                        "MPI run {}: processes {pids:?} survived SIGKILL for 5 s",
                        self.marker
                    );
                }
                return;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        self.kill_processes();
    }
}

/// Processes of MPI runs of this process that are still there (none once [`run`] returned).
pub fn leftovers() -> Vec<i32> {
    marked(&format!("{}-", std::process::id()), true)
}

/// Processes (other than this one) whose environment has `ZMLAB_MPI_RUN=<marker>` (or, with
/// `prefix`, a marker that starts with `marker`).
fn marked(marker: &str, prefix: bool) -> Vec<i32> {
    let needle = format!("{MARKER}={marker}");
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0).any(|var| {
                    if prefix {
                        var.starts_with(needle.as_bytes())
                    } else {
                        var == needle.as_bytes()
                    }
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_hostfile_groups_a_nodes_ranks_and_refuses_scattered_ones() {
        assert_eq!(
            hosts(&names(&["b1", "a1", "a1", "c2"])).unwrap(),
            vec![("b1".into(), 1), ("a1".into(), 2), ("c2".into(), 1)]
        );
        let e = hosts(&names(&["a1", "b1", "a1"])).unwrap_err().to_string();
        assert!(
            e.contains("node a1's ranks are not next to each other"),
            "{e}"
        );
    }

    #[test]
    fn a_rank_on_another_node_fails_the_run_loudly() {
        let expected: Vec<(String, String)> = [("a2", "10.77.1.11"), ("b1", "10.77.2.10")]
            .iter()
            .map(|(n, a)| ((*n).to_owned(), (*a).to_owned()))
            .collect();
        let rank = |r: u32, addr: &str| {
            format!(
                "{{\"type\":\"rank\",\"rank\":{r},\"size\":2,\"host\":\"x\",\"ifaddrs\":\"eth0={addr}\",\"pid\":1}}\n"
            )
        };
        let rest = "{\"type\":\"iter\",\"i\":0,\"seconds\":0.002}\n{\"type\":\"summary\",\"check\":\"ok\"}\n";
        let good = rank(0, "10.77.1.11") + &rank(1, "10.77.2.10") + rest;
        assert_eq!(
            parse(&expected, 1, &good).unwrap(),
            vec![Duration::from_millis(2)]
        );
        let swapped = rank(0, "10.77.2.10") + &rank(1, "10.77.1.11") + rest;
        let e = parse(&expected, 1, &swapped).unwrap_err().to_string();
        assert!(e.contains("RANKS ON THE WRONG NODES"), "{e}");
        assert!(
            e.contains("rank 0 should run on a2 (eth0=10.77.1.11)"),
            "{e}"
        );
        let e = parse(&expected, 2, &good).unwrap_err().to_string();
        assert!(
            e.contains("1 timed iterations reported, 2 asked for"),
            "{e}"
        );
        let bad_sum = good.replace("\"ok\"", "\"FAIL\"");
        assert!(parse(&expected, 1, &bad_sum).is_err());
    }
}
