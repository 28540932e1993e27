//! Open MPI all-reduce in the lab (root and Open MPI; CI has both and never skips): ranks land on
//! the nodes given, in the order given, the lab's links shape what MPI measures, and a run that
//! hangs is killed with everything it started.

use std::time::Duration;

use anyhow::{Result, ensure};
use zonemesh_lab::mpi::{self, Algorithm, AllReduce, Job};
use zonemesh_lab::{Lab, LabSpec, cleanup_on_signals};
use zonemesh_tests::{lab_can_run, tool_available};

const INSTALL: &str = "apt-get install openmpi-bin libopenmpi-dev";

fn mpi_can_run(test: &str) -> bool {
    lab_can_run(test)
        && tool_available("mpirun", &["--version"], INSTALL)
        && tool_available("mpicc", &["--showme:version"], INSTALL)
}

/// One lab test at a time: they time runs on two cores, and each checks that no process of a
/// run of this process is left.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn ranks_run_on_their_nodes_and_feel_the_links() -> Result<()> {
    if !mpi_can_run("mpi") {
        return Ok(());
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cleanup_on_signals();
    let lab = Lab::build(
        LabSpec::new()
            .zone("zone-a", &["a1", "a2", "a3"])
            .zone("zone-b", &["b1"])
            .delay("zone-a", "zone-b", Duration::from_millis(4), Duration::ZERO)
            .node_rate("b1", 100_000_000),
    )?;
    let program = AllReduce::build()?;
    // Rank order unlike address order, rank 0 not the first node, and two ranks on one node:
    // `run` fails unless every rank reports its node's address.
    for ranks in [
        names(&["a3", "a1", "a2"]),
        names(&["a2", "a2", "a3"]),
        names(&["a1", "b1", "a3", "a2"]),
    ] {
        for algorithm in [Algorithm::Ring, Algorithm::OpenMpiChoice] {
            let mut job = Job::new(&ranks, 64 << 10, algorithm);
            job.iterations = 3;
            let m = mpi::run(&lab, &program, &job)?;
            println!(
                "{ranks:?} {}: {:?} (wall {:?})",
                algorithm.as_str(),
                m.iterations,
                m.wall
            );
            ensure!(m.iterations.len() == 3, "{m:?}");
            ensure!(mpi::leftovers().is_empty(), "processes left after a run");
        }
    }
    // 1 MiB around a ring of three: 2 · 2/3 MiB through b1's 100 Mbit/s is at least 112 ms; the
    // same ring without b1 runs at 1 Gbit/s and more (no rate limit inside zone-a).
    let ring = |ranks: &[&str]| -> Result<Duration> {
        let mut job = Job::new(&names(ranks), 1 << 20, Algorithm::Ring);
        job.iterations = 3;
        job.warmup = 1;
        Ok(mpi::run(&lab, &program, &job)?.median())
    };
    let slow = ring(&["a1", "b1", "a2"])?;
    let fast = ring(&["a1", "a3", "a2"])?;
    println!("1 MiB ring with b1: {slow:?}, without: {fast:?}");
    ensure!(
        slow >= Duration::from_millis(105),
        "a ring through 100 Mbit/s took {slow:?}"
    );
    ensure!(slow > fast * 3, "with b1 {slow:?}, without {fast:?}");
    Ok(())
}

#[test]
fn a_run_past_its_time_is_killed_with_all_it_started() -> Result<()> {
    if !mpi_can_run("mpi") {
        return Ok(());
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cleanup_on_signals();
    let lab = Lab::build(
        LabSpec::new()
            .zone("zone-a", &["a1", "a2"])
            .node_rate("a2", 10_000_000),
    )?;
    let program = AllReduce::build()?;
    // 16 MiB through 10 Mbit/s: 13 s an iteration, far past the 4 s allowed.
    let mut job = Job::new(&names(&["a1", "a2"]), 16 << 20, Algorithm::Ring);
    job.timeout = Duration::from_secs(4);
    // While it runs, mpirun, the remote daemon and both ranks carry the run's marker (which is
    // how they are all found and killed).
    let watcher = std::thread::spawn(|| {
        let deadline = std::time::Instant::now() + Duration::from_secs(4);
        let mut most = 0;
        while std::time::Instant::now() < deadline && most < 4 {
            most = most.max(mpi::leftovers().len());
            std::thread::sleep(Duration::from_millis(50));
        }
        most
    });
    let started = std::time::Instant::now();
    let e = mpi::run(&lab, &program, &job).unwrap_err().to_string();
    let seen = watcher.join().expect("watcher");
    ensure!(
        seen >= 4,
        "at most {seen} marked processes seen during the run"
    );
    ensure!(e.contains("did not end within 4s"), "{e}");
    ensure!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?} to give up",
        started.elapsed()
    );
    ensure!(
        mpi::leftovers().is_empty(),
        "processes {:?} left",
        mpi::leftovers()
    );
    let runs: Vec<_> = std::fs::read_dir(std::env::temp_dir())?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("zmlab-mpi-run-")
        })
        .collect();
    ensure!(runs.is_empty(), "run directories left: {runs:?}");
    Ok(())
}
