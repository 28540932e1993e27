//! Network namespaces and the commands that configure them (`ip`, `iptables`, `tc` from
//! iproute2 and iptables), and leftover removal by name prefix.

use std::io;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Where `ip netns add` puts its namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Moves the calling thread into the network namespace at `path` (for good: use a thread of
/// its own). Sockets it opens afterwards belong to that namespace, wherever they are used.
pub fn enter(path: &str) -> io::Result<()> {
    let file = std::fs::File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {path}: {e}")))?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| io::Error::other(format!("setns {path}: {e}")))
}

/// Runs `program args`, failing with its stderr (and the command line) when it fails.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!("cannot run {program}: install it (Debian: apt-get install iproute2 iptables)")
        })?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `program args` inside namespace `netns`.
pub fn run_in(netns: &str, program: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["netns", "exec", netns, program];
    all.extend(args);
    run("ip", &all)
}

/// Runs each line of `script` through `ip -n <netns> -batch -` (one process for many commands).
pub fn ip_batch(netns: Option<&str>, script: &str) -> Result<()> {
    batch("ip", netns, script)
}

/// Runs each line of `script` through `tc -n <netns> -batch -`.
pub fn tc_batch(netns: &str, script: &str) -> Result<()> {
    batch("tc", Some(netns), script)
}

/// `program` (`ip` or `tc`, both of iproute2) with `-batch -`, the lines of `script` on its
/// standard input.
fn batch(program: &str, netns: Option<&str>, script: &str) -> Result<()> {
    use std::io::Write;
    let mut args = Vec::new();
    if let Some(ns) = netns {
        args.extend(["-n", ns]);
    }
    args.extend(["-batch", "-"]);
    let mut child = Command::new(program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {program}: install iproute2"))?;
    child
        .stdin
        .take()
        .with_context(|| format!("{program} stdin"))?
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "{program} {}: {}\n{script}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The network namespaces whose names start with `prefix`.
pub fn list(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The processes inside namespace `netns`.
pub fn pids(netns: &str) -> Vec<i32> {
    run("ip", &["netns", "pids", netns])
        .map(|out| {
            out.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills every process in `netns` and deletes it. Returns how many processes were killed.
pub fn remove(netns: &str) -> Result<usize> {
    let mut killed = 0;
    // Bounded: a process that survives SIGKILL for a second is a kernel matter, not ours.
    for _ in 0..20 {
        let pids = pids(netns);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
            {
                killed += 1;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    run("ip", &["netns", "del", netns])?;
    Ok(killed)
}

/// Whether process `pid` is alive.
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}
