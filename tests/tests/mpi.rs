//! Open MPI all-reduce in the lab (root and Open MPI; CI has both and never skips): ranks land on
//! the nodes given, in the order given, the lab's links shape what MPI measures, a run that hangs
//! is killed with everything it started — and issue 18's "done when": on one seed of scenario
//! (b), zonemesh's predicted-time placement runs at least 1.2× faster than the label-only one —
//! and issue 27's CI case on scenario (f): near the confirmed best, and its predicted time within
//! 35 % of what it measures.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use zonemesh_experiments::collective_time::Collective;
use zonemesh_experiments::mpi::{self, Algorithm, Job, Programs};
use zonemesh_experiments::mpi_evaluation::{self, LabResult, Plan, Strategy};
use zonemesh_experiments::scenarios::{Scenario, Setup};
use zonemesh_lab::stack::StackOptions;
use zonemesh_lab::{Lab, LabSpec, Watchdog, cleanup_on_signals};
use zonemesh_tests::{lab_can_run, stack_binaries, tool_available};

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
    let program = Programs::build()?;
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

/// The all-to-all and the parameter-server programs (issue 27's scenario (g)) run on the nodes
/// given, check their results, and feel a thin zone link: what 2 MiB a rank makes cross
/// 100 Mbit/s at the hub cannot take under 200 ms on either program, and the same job inside a
/// zone (1 Gbit/s nodes) runs over three times faster.
#[test]
fn all_to_all_and_the_parameter_server_feel_a_thin_zone_link() -> Result<()> {
    if !mpi_can_run("mpi") {
        return Ok(());
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cleanup_on_signals();
    let lab = Lab::build(
        LabSpec::new()
            .zone("zone-a", &["a1", "a2"])
            .zone("zone-b", &["b1", "b2"])
            .link_rate("zone-a", "zone-b", 100_000_000)
            .node_rate("a1", 1_000_000_000)
            .node_rate("a2", 1_000_000_000)
            .node_rate("b1", 1_000_000_000)
            .node_rate("b2", 1_000_000_000),
    )?;
    let programs = Programs::build()?;
    let time = |algorithm: Algorithm, ranks: &[&str]| -> Result<Duration> {
        let mut job = Job::new(&names(ranks), 2 << 20, algorithm);
        job.iterations = 3;
        job.warmup = 1;
        let m = mpi::run(&lab, &programs, &job)?;
        ensure!(mpi::leftovers().is_empty(), "processes left after a run");
        println!("{} on {ranks:?}: {:?}", algorithm.as_str(), m.iterations);
        Ok(m.median())
    };
    for algorithm in [Algorithm::AllToAll, Algorithm::ParameterServer] {
        // Across: all-to-all sends 2/3 MiB from each of a1, a2 to each of b1, b2 and back (each
        // way 8/3 MiB, 22 Mbit, through the thin link: 224 ms); the parameter server on a1
        // receives 2 MiB from each of b1 and b2 and sends them the sum back (each way 34 Mbit:
        // 335 ms, twice).
        let across = time(algorithm, &["a1", "b1", "a2", "b2"])?;
        // Inside zone-a at 1 Gbit/s, two ranks a node.
        let inside = time(algorithm, &["a1", "a1", "a2", "a2"])?;
        ensure!(
            across >= Duration::from_millis(200),
            "{}: across the thin link {across:?}",
            algorithm.as_str()
        );
        ensure!(
            across > inside * 3,
            "{}: across {across:?}, inside {inside:?}",
            algorithm.as_str()
        );
    }
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
    let program = Programs::build()?;
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

/// The collective the CI's evaluation labs place for.
const RING: Collective = Collective::RingAllReduce;

/// The size the CI's evaluation labs run at.
const CI_BYTES: u64 = 256 << 10;

/// One lab of `scenario` on `seed`, evaluated as the CI does: `strategies` at [`CI_BYTES`],
/// forced ring, three runs of each set, the model's two best sets beside them and the fastest
/// set confirmed against zonemesh's; on a runtime of its own, one lab test at a time.
fn evaluate_ci_lab(
    scenario: Scenario,
    seed: u64,
    strategies: Vec<Strategy>,
) -> Result<(Setup, LabResult)> {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cleanup_on_signals();
    let dir = stack_binaries();
    let logs = tempfile::tempdir()?;
    // A few minutes each; a lab stuck anywhere ends with where it was and its logs' tails.
    let watchdog = Watchdog::start(
        &format!("the MPI lab of {scenario:?} seed {seed}"),
        Duration::from_secs(20 * 60),
        Some(logs.path()),
    );
    let program = Programs::build()?;
    let setup = Setup::new(scenario, seed);
    let plan = Plan {
        strategies,
        sizes: vec![CI_BYTES],
        algorithms: vec![Algorithm::Ring],
        runs: 3,
        choice_runs: 0,
        tcp_workload: false,
        model_sets: 2,
        confirm: true,
    };
    let result = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(mpi_evaluation::evaluate_lab(
            &setup,
            &plan,
            &program,
            &StackOptions::new(&dir, logs.path()),
            &mut |m| {
                watchdog.stage(m);
                eprintln!("{m}")
            },
        ))?;
    Ok((setup, result))
}

/// Issue 18's "done when", on scenario (b) seed 1 (six workers, zones of four; the first seed of
/// the evaluation) at 256 KiB, forced ring. Noise is handled as the training test handles it: each
/// placement runs three times (20 timed iterations each), and each placement's best run (lowest
/// mean iteration) is compared; every run's time is printed, so a failure shows the spread.
///
/// The prediction is printed here but judged in the (f) test: six ranks on two cores make this
/// run the machine's CPU as much as the lab's links (part 2 of issue 27: CPU contention must not
/// pass for network cost). The same code (eb1b1c6) that measured under 11.1 ms here at its CI
/// run read 13.0 ms on 2026-12-06 against Place's 7.2 ms, and so did this one (12.5–15.4 ms);
/// (f) runs three ranks.
#[test]
fn zonemesh_predicted_time_beats_labels_on_scenario_b() -> Result<()> {
    if !mpi_can_run("mpi") {
        return Ok(());
    }
    let strategies = vec![Strategy::LabelsOnly, Strategy::ZonemeshPredicted];
    let (_, result) = evaluate_ci_lab(Scenario::B, 1, strategies)?;
    let bytes = CI_BYTES;
    let best = |s: Strategy| -> Result<f64> {
        let p = result.placement(s, bytes, RING).context("a placement")?;
        ensure!(
            p.failure.is_none(),
            "{} did not place: {:?}",
            s.as_str(),
            p.failure
        );
        let r = result
            .mpi(&p.ranks, bytes, Algorithm::Ring)
            .context("its runs")?;
        ensure!(
            r.failures.is_empty() && r.runs.len() == 3,
            "{} on {:?}: runs failed: {:?}",
            s.as_str(),
            p.ranks,
            r.failures
        );
        let times = mpi_evaluation::run_times(r);
        println!(
            "{} on {:?}: runs' mean iterations {times:?} s",
            s.as_str(),
            p.ranks
        );
        Ok(times.iter().copied().fold(f64::INFINITY, f64::min))
    };
    let labels = best(Strategy::LabelsOnly)?;
    let zonemesh = best(Strategy::ZonemeshPredicted)?;
    let predicted = mpi_evaluation::prediction(&result, Strategy::ZonemeshPredicted, bytes, RING)
        .context("Place's predicted time")?;
    println!("labels only {labels:.4} s, zonemesh {zonemesh:.4} s (predicted {predicted:.4} s)");
    // The model's two best sets ran too, and the fastest set ran again beside zonemesh's.
    let ran = |ranks: &[String]| result.mpi(ranks, bytes, Algorithm::Ring).is_some();
    ensure!(
        result.candidates.len() == 2 && result.candidates.iter().all(|c| ran(&c.ranks)),
        "the model's best sets: {:?}",
        result.candidates
    );
    let regret =
        mpi_evaluation::regret(&result, bytes, Algorithm::Ring).context("the confirmed best")?;
    let c = result
        .confirmation(bytes, Algorithm::Ring)
        .context("a confirmation")?;
    ensure!(
        c.best == c.zonemesh || (c.best_runs.len() == 3 && c.zonemesh_runs.len() == 3),
        "confirming runs: {c:?}"
    );
    println!(
        "the confirmed best {:?}: {:.4} s; zonemesh {:.4} s beside it ({:+.0} %{})",
        regret.best,
        regret.best_time,
        regret.zonemesh_time,
        regret.ratio() * 100.0,
        if regret.overturned {
            ", overturned"
        } else {
            ""
        }
    );
    ensure!(
        labels >= 1.2 * zonemesh,
        "zonemesh predicted-time ran {zonemesh:.4} s at best, labels only {labels:.4} s: \
         {:.2}×, not 1.2×",
        labels / zonemesh
    );
    println!(
        "zonemesh predicted {predicted:.4} s and measured {zonemesh:.4} s at best: off by {:.0} % \
         (six ranks on two cores; judged in the (f) test)",
        (predicted - zonemesh).abs() / zonemesh * 100.0
    );
    Ok(())
}

/// Issue 27's CI case: scenario (f) seed 1, a gray failure (a node of the one zone that fits the
/// job drops 1 % of what reaches it; its throughput test hardly shows it), at 256 KiB, forced
/// ring. zonemesh's set runs within 1.3× of the confirmed best (the fastest of every set run,
/// rerun beside zonemesh's), and Place's prediction is within 35 % of what zonemesh's set
/// measured.
#[test]
fn zonemesh_runs_near_the_confirmed_best_beside_a_gray_failure_on_scenario_f() -> Result<()> {
    if !mpi_can_run("mpi") {
        return Ok(());
    }
    let (setup, result) = evaluate_ci_lab(Scenario::F, 1, vec![Strategy::ZonemeshPredicted])?;
    let bytes = CI_BYTES;
    let placed = result
        .placement(Strategy::ZonemeshPredicted, bytes, RING)
        .context("zonemesh's placement")?;
    ensure!(
        placed.failure.is_none(),
        "no placement: {:?}",
        placed.failure
    );
    let runs = result
        .mpi(&placed.ranks, bytes, Algorithm::Ring)
        .context("its runs")?;
    ensure!(
        runs.failures.is_empty() && runs.runs.len() == 3,
        "runs failed: {:?}",
        runs.failures
    );
    let times = mpi_evaluation::run_times(runs);
    let measured = times.iter().copied().fold(f64::INFINITY, f64::min);
    let predicted = mpi_evaluation::prediction(&result, Strategy::ZonemeshPredicted, bytes, RING)
        .context("Place's predicted time")?;
    let regret =
        mpi_evaluation::regret(&result, bytes, Algorithm::Ring).context("the confirmed best")?;
    println!(
        "gray node {} ({:.1} %); zonemesh on {:?}{}: runs' mean iterations {times:?} s, predicted \
         {predicted:.4} s; the confirmed best {:?}: {:.4} s, zonemesh {:.4} s beside it ({:+.0} %)",
        setup.lossy,
        setup.loss * 100.0,
        placed.ranks,
        if placed.ranks.contains(&setup.lossy) {
            ", the gray node among them"
        } else {
            ""
        },
        regret.best,
        regret.best_time,
        regret.zonemesh_time,
        regret.ratio() * 100.0,
    );
    ensure!(
        regret.zonemesh_time <= 1.3 * regret.best_time,
        "zonemesh {:.4} s against the confirmed best's {:.4} s: {:.2}×, not within 1.3×",
        regret.zonemesh_time,
        regret.best_time,
        regret.zonemesh_time / regret.best_time
    );
    ensure!(
        (predicted - measured).abs() <= 0.35 * measured,
        "zonemesh predicted {predicted:.4} s and measured {measured:.4} s at best: off by {:.0} %",
        (predicted - measured).abs() / measured * 100.0
    );
    Ok(())
}
