//! `zonemesh-lab`: build a lab and keep it until Ctrl-C, remove what killed labs left behind,
//! measure what the lab itself sustains, and write the accuracy report.
//!
//! ```text
//! zonemesh-lab up --zone zone-a=a1,a2 --zone zone-b=b1 --link zone-a:zone-b:rtt=4ms,jitter=100us \
//!                 --node a2:loss=5% --node b1:rate=100mbit
//! zonemesh-lab cleanup [--prefix zmlab-] [--force]
//! zonemesh-lab bench                       # iperf3 through the link emulator
//! zonemesh-lab accuracy --out docs/ACCURACY.md
//! zonemesh-lab evaluate --seeds 1,2,3 --gradient 4MB --out docs/EVALUATION-v1.md
//! zonemesh-lab evaluate-mpi --scenarios a,b,c,d,e --seeds 1,2,3 --out docs/EVALUATION.md
//! zonemesh-lab calibrate [--cells 1g-zone-loss50] --out docs/ACCURACY.md
//! ```

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use zonemesh_common::flags::{parse_or_exit, usage_error};
use zonemesh_lab::{DEFAULT_PREFIX, Lab, LabSpec};

mod accuracy_report;
mod bench;
mod mpi_report;
mod training_report;

const PROGRAM: &str = "zonemesh-lab";

/// "25MB", "4MiB", "1000000": bytes (MB = 10^6, MiB = 2^20), at least 1 KB.
fn parse_bytes(value: &str) -> Result<usize, String> {
    let v = value.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("{value:?} is not a size such as 25MB"))?;
    let scale = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" => 1 << 20,
        other => {
            return Err(format!(
                "unit {other:?} of {value:?}: use B, KB, KiB, MB or MiB"
            ));
        }
    };
    let bytes = n * scale;
    if bytes < 1_000 {
        return Err(format!("{value:?} is below 1 KB"));
    }
    Ok(bytes)
}

fn tokio_runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// The zonemesh network lab.
#[derive(Debug, Parser)]
#[command(name = PROGRAM, version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Build a lab, print its nodes and keep it until Ctrl-C.
    Up {
        /// A zone and its nodes: zone=node,node,... (repeat per zone).
        #[arg(long = "zone", required = true)]
        zones: Vec<String>,
        /// A link between two zones: a:b:rtt=4ms,jitter=100us,loss=1%,rate=100mbit (loss from a
        /// to b; rate: the capacity every flow between the zones shares, each way).
        #[arg(long = "link")]
        links: Vec<String>,
        /// Impairments of a node: node:loss=5%,rate=100mbit (both ways), or egress=/ingress= for
        /// one direction.
        #[arg(long = "node")]
        nodes: Vec<String>,
        /// Seed of the jitter.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Measure what the lab sustains: iperf3 through the link emulator, with and without a rate
    /// limit beside it.
    Bench {
        /// Seconds per iperf3 run (after a 1 s warm-up).
        #[arg(long, default_value_t = 10)]
        seconds: u32,
    },
    /// Run the demo cluster with zonemesh, compare its figures with the injected impairments,
    /// iputils ping and iperf3, and write the report.
    Accuracy {
        /// Where the Markdown report goes.
        #[arg(long, default_value = "docs/ACCURACY.md")]
        out: std::path::PathBuf,
    },
    /// Evaluation v1: place a distributed-training job with five strategies (kube-scheduler's default spread,
    /// random, zone-only, zone-then-score, zonemesh) on labs of three zones of four nodes, run it
    /// (ring all-reduce and parameter server over real TCP), and write the report.
    Evaluate {
        /// Where the Markdown report goes (the SVG plot goes beside it).
        #[arg(long, default_value = "docs/EVALUATION-v1.md")]
        out: std::path::PathBuf,
        /// Lab seeds (each one a lab with its own delays and degraded nodes).
        #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
        seeds: Vec<u64>,
        /// Workers per job (2–4: one zone holds four).
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Bytes of a gradient (25MB is about ResNet-50's fp32 gradients).
        #[arg(long, default_value = "4MB", value_parser = parse_bytes)]
        gradient: usize,
        /// Timed iterations per run.
        #[arg(long, default_value_t = 3)]
        iterations: u32,
    },
    /// The evaluation (docs/EVALUATION.md): real Open MPI all-reduce placed by every strategy
    /// (zonemesh's among labels only, random and the others) on the labs of scenarios (a)–(i),
    /// each confirmed against the measured best; one results file per scenario and seed in
    /// --results, then the report written from every results file there.
    EvaluateMpi {
        /// Scenarios (the issues' letters: a to i).
        #[arg(long, value_delimiter = ',', default_value = "a,b,c,d,e,f,g,h,i")]
        scenarios: Vec<String>,
        /// Seeds (each one a lab per scenario).
        #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
        seeds: Vec<u64>,
        /// Strategies: spread, random, zone-then-score, labels, labels-random, zonemesh-today,
        /// zonemesh-predicted, oracle.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "spread,random,zone-then-score,labels,labels-random,zonemesh-today,zonemesh-predicted,oracle"
        )]
        strategies: Vec<String>,
        /// mpiruns per placement, size and algorithm.
        #[arg(long, default_value_t = 5)]
        runs: u32,
        /// Leave out the lab's TCP ring and parameter-server workload.
        #[arg(long)]
        no_tcp: bool,
        /// Keep a scenario and seed whose results file exists instead of running it again.
        #[arg(long)]
        keep_existing: bool,
        /// Only write the report from the results files.
        #[arg(long)]
        report_only: bool,
        /// Directory of the results files (JSON, one per scenario and seed).
        #[arg(long, default_value = "docs/evaluation")]
        results: std::path::PathBuf,
        /// Where the Markdown report goes (its SVG plots beside it).
        #[arg(long, default_value = "docs/EVALUATION.md")]
        out: std::path::PathBuf,
    },
    /// Calibrate the collective model: Open MPI all-reduce between two lab nodes over a grid of
    /// link settings, against the model's prediction over what zonemesh measured; one results
    /// file per cell in --results, then the table written into --out's calibration section.
    Calibrate {
        /// Cells by name (default: the whole grid).
        #[arg(long, value_delimiter = ',')]
        cells: Vec<String>,
        /// mpiruns per size.
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Keep a cell whose results file exists instead of running it again.
        #[arg(long)]
        keep_existing: bool,
        /// Only write the table from the results files.
        #[arg(long)]
        report_only: bool,
        /// Directory of the results files (JSON, one per cell).
        #[arg(long, default_value = "docs/calibration")]
        results: std::path::PathBuf,
        /// The Markdown file whose calibration section is written.
        #[arg(long, default_value = "docs/ACCURACY.md")]
        out: std::path::PathBuf,
    },
    /// Localisation (issue 28): faults injected at random into a running lab, one at a time
    /// and in pairs, and clean spells, each scored against ListFaults; the results file in
    /// --results, then the table written into --out's localisation section.
    Localise {
        /// Seed of the draws (and of the lab): one results file per seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Single injections (they go round the kinds).
        #[arg(long, default_value_t = 30)]
        singles: usize,
        /// Injections of two faults at once.
        #[arg(long, default_value_t = 10)]
        pairs: usize,
        /// Clean spells.
        #[arg(long, default_value_t = 10)]
        clean: usize,
        /// Only these kinds (node-loss-in, node-loss-out, node-rate, link-loss, link-delay,
        /// path-loss; default all).
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
        /// Only write the section from the results files.
        #[arg(long)]
        report_only: bool,
        /// Directory of the results files (JSON, one per seed).
        #[arg(long, default_value = "docs/localisation")]
        results: std::path::PathBuf,
        /// The Markdown file whose localisation section is written.
        #[arg(long, default_value = "docs/ACCURACY.md")]
        out: std::path::PathBuf,
        /// Keep the aggregator's and the agents' logs in this directory (by default they go to
        /// a temporary one, removed at the end). With ZONEMESH_LOG=info,zonemesh_aggregator::server::faults=debug
        /// the aggregator also logs its suspects.
        #[arg(long)]
        logs: Option<std::path::PathBuf>,
    },
    /// Remove lab namespaces (and kill what runs in them) whose names start with --prefix,
    /// except those of labs whose process still runs, unless --force.
    Cleanup {
        /// Namespace name prefix.
        #[arg(long, default_value = DEFAULT_PREFIX)]
        prefix: String,
        /// Also remove labs whose process is alive.
        #[arg(long)]
        force: bool,
    },
}

fn main() {
    let cli: Cli = parse_or_exit();
    if let Err(e) = run(cli) {
        eprintln!("{PROGRAM}: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Cmd::Up {
            zones,
            links,
            nodes,
            seed,
        } => up(&zones, &links, &nodes, seed),
        Cmd::Bench { seconds } => {
            zonemesh_lab::cleanup_on_signals();
            tokio_runtime()?.block_on(bench::bench(seconds))
        }
        Cmd::Accuracy { out } => accuracy(&out),
        Cmd::Evaluate {
            out,
            seeds,
            workers,
            gradient,
            iterations,
        } => {
            if !(2..=4).contains(&workers) {
                usage_error(PROGRAM, "--workers: must be 2, 3 or 4 (a zone holds four)");
            }
            if seeds.is_empty() {
                usage_error(PROGRAM, "--seeds: at least one");
            }
            if iterations == 0 {
                usage_error(PROGRAM, "--iterations: at least 1");
            }
            zonemesh_lab::cleanup_on_signals();
            let plan = zonemesh_experiments::training_evaluation::Plan {
                seeds,
                workers,
                gradient_bytes: gradient,
                iterations,
                collectives: vec![
                    zonemesh_experiments::train::Collective::Ring,
                    zonemesh_experiments::train::Collective::ParameterServer,
                ],
            };
            tokio_runtime()?.block_on(training_report::evaluate(&plan, &out))
        }
        Cmd::EvaluateMpi {
            scenarios,
            seeds,
            strategies,
            runs,
            no_tcp,
            keep_existing,
            report_only,
            results,
            out,
        } => {
            let scenarios = scenarios_flag(&scenarios);
            let strategies = strategies_flag(&strategies);
            if seeds.is_empty() || strategies.is_empty() {
                usage_error(PROGRAM, "--seeds and --strategies: at least one each");
            }
            if runs == 0 {
                usage_error(PROGRAM, "--runs: at least 1");
            }
            let plan = zonemesh_experiments::mpi_evaluation::Plan {
                strategies,
                runs,
                tcp_workload: !no_tcp,
                ..Default::default()
            };
            if !report_only {
                zonemesh_lab::cleanup_on_signals();
                tokio_runtime()?.block_on(mpi_report::run(
                    &plan,
                    &scenarios,
                    &seeds,
                    &results,
                    keep_existing,
                ))?;
            }
            mpi_report::write_report(&results, &out)
        }
        Cmd::Calibrate {
            cells,
            runs,
            keep_existing,
            report_only,
            results,
            out,
        } => {
            let grid = zonemesh_experiments::calibration::cells();
            let chosen: Vec<_> = if cells.is_empty() {
                grid
            } else {
                cells
                    .iter()
                    .map(|name| {
                        grid.iter()
                            .find(|c| &c.name == name)
                            .cloned()
                            .unwrap_or_else(|| {
                                let names: Vec<&str> =
                                    grid.iter().map(|c| c.name.as_str()).collect();
                                usage_error(
                                    PROGRAM,
                                    &format!(
                                        "--cells: no cell {name:?} (cells: {})",
                                        names.join(", ")
                                    ),
                                )
                            })
                    })
                    .collect()
            };
            if runs == 0 {
                usage_error(PROGRAM, "--runs: at least 1");
            }
            if !report_only {
                zonemesh_lab::cleanup_on_signals();
                tokio_runtime()?.block_on(calibrate(&chosen, runs, &results, keep_existing))?;
            }
            let all = zonemesh_experiments::calibration::read_results(&results)?;
            anyhow::ensure!(!all.is_empty(), "no results in {}", results.display());
            let doc = std::fs::read_to_string(&out).unwrap_or_default();
            let section = zonemesh_experiments::calibration::section(&all);
            std::fs::write(
                &out,
                zonemesh_experiments::calibration::splice(
                    &doc,
                    zonemesh_experiments::calibration::HEADING,
                    &section,
                ),
            )?;
            println!("{section}\nwrote {}", out.display());
            Ok(())
        }
        Cmd::Localise {
            seed,
            singles,
            pairs,
            clean,
            kinds,
            report_only,
            results,
            out,
            logs: kept_logs,
        } => {
            use zonemesh_experiments::localisation::{self, Kind, Plan, Timing};
            let kinds: Vec<Kind> = kinds
                .iter()
                .map(|k| {
                    Kind::parse(k).unwrap_or_else(|| {
                        let all: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                        usage_error(
                            PROGRAM,
                            &format!("--kinds: no kind {k:?} (kinds: {})", all.join(", ")),
                        )
                    })
                })
                .collect();
            if !report_only {
                if singles + pairs == 0 {
                    usage_error(PROGRAM, "--singles and --pairs: at least one injection");
                }
                zonemesh_lab::cleanup_on_signals();
                let plan = Plan {
                    seed,
                    singles,
                    pairs,
                    clean,
                    kinds,
                };
                let exe = std::env::current_exe()?;
                let dir = exe.parent().context("binary directory")?.to_owned();
                let logs = kept_logs.clone().unwrap_or_else(|| {
                    std::env::temp_dir().join(format!("zonemesh-localise-{}", std::process::id()))
                });
                std::fs::create_dir_all(&logs)
                    .with_context(|| format!("--logs {}", logs.display()))?;
                std::fs::create_dir_all(&results)?;
                let options = zonemesh_lab::stack::StackOptions::new(&dir, &logs);
                let run = tokio_runtime()?.block_on(localisation::run(
                    seed,
                    4,
                    localisation::trials(&plan),
                    Timing::REPORT,
                    &options,
                    &mut |m| println!("{m}"),
                ))?;
                let path = results.join(format!("seed{seed}.json"));
                std::fs::write(&path, serde_json::to_string_pretty(&run)? + "\n")?;
                println!("wrote {}", path.display());
                if kept_logs.is_some() {
                    println!("logs in {}", logs.display());
                } else {
                    let _ = std::fs::remove_dir_all(&logs);
                }
            }
            let mut all = Vec::new();
            for entry in std::fs::read_dir(&results)
                .with_context(|| format!("reading {}", results.display()))?
            {
                let path = entry?.path();
                if path.extension().is_some_and(|e| e == "json") {
                    let text = std::fs::read_to_string(&path)?;
                    all.push(
                        serde_json::from_str::<localisation::Results>(&text)
                            .with_context(|| format!("reading {}", path.display()))?,
                    );
                }
            }
            anyhow::ensure!(!all.is_empty(), "no results in {}", results.display());
            all.sort_by_key(|r| r.seed);
            let doc = std::fs::read_to_string(&out).unwrap_or_default();
            let section = localisation::section(&all);
            std::fs::write(
                &out,
                zonemesh_experiments::calibration::splice(&doc, localisation::HEADING, &section),
            )?;
            println!("{section}\nwrote {}", out.display());
            Ok(())
        }
        Cmd::Cleanup { prefix, force } => {
            let removed = zonemesh_lab::cleanup(&prefix, force)?;
            for r in &removed {
                println!("removed {} (killed {} processes)", r.netns, r.killed);
            }
            println!("{} namespaces removed", removed.len());
            Ok(())
        }
    }
}

/// `up`: the lab the flags describe (a flag that does not parse is a usage error), kept until
/// Ctrl-C, with the link emulator's counters every ten seconds while it works.
fn up(zones: &[String], links: &[String], nodes: &[String], seed: u64) -> Result<()> {
    let mut spec = LabSpec {
        seed,
        ..LabSpec::new()
    };
    for z in zones {
        spec = spec
            .parse_zone(z)
            .unwrap_or_else(|e| usage_error(PROGRAM, &e.0));
    }
    for l in links {
        spec = spec
            .parse_link(l)
            .unwrap_or_else(|e| usage_error(PROGRAM, &e.0));
    }
    for n in nodes {
        spec = spec
            .parse_node(n)
            .unwrap_or_else(|e| usage_error(PROGRAM, &e.0));
    }
    if let Err(e) = spec.validate() {
        usage_error(PROGRAM, &e.0);
    }
    zonemesh_lab::cleanup_on_signals();
    let lab = Lab::build(spec)?;
    println!(
        "lab {} is up (router namespace {})",
        lab.prefix(),
        lab.router()
    );
    for n in lab.nodes() {
        println!(
            "  {:<12} {:<12} {:<15} ip netns exec {} …",
            n.name, n.zone, n.address, n.netns
        );
    }
    println!("Ctrl-C removes it.");
    let mut last = 0;
    loop {
        std::thread::sleep(std::time::Duration::from_secs(10));
        if let Some(e) = lab.emulator() {
            use std::sync::atomic::Ordering::Relaxed;
            let c = &e.counters;
            let released = c.released.load(Relaxed);
            if released != last {
                last = released;
                println!(
                    "link emulator: {released} packets released, on average {:.1} µs late and {:.1} µs early, at most {} held at once",
                    c.late_ns.load(Relaxed) as f64 / released.max(1) as f64 / 1e3,
                    c.early_ns.load(Relaxed) as f64 / released.max(1) as f64 / 1e3,
                    c.peak_held.load(Relaxed)
                );
            }
        }
    }
}

/// `accuracy`: writes the report to `out`, keeping the sections written by hand (the
/// window-quantile figures) of the report there.
fn accuracy(out: &std::path::Path) -> Result<()> {
    zonemesh_lab::cleanup_on_signals();
    let mut text = tokio_runtime()?.block_on(accuracy_report::accuracy())?;
    if let Ok(old) = std::fs::read_to_string(out)
        && let Some(at) = old.find(accuracy_report::KEPT_SECTION)
    {
        text.push('\n');
        text.push_str(&old[at..]);
    }
    std::fs::write(out, text)?;
    println!("wrote {}", out.display());
    Ok(())
}

/// `calibrate`: runs `cells`, writing each one's results file into `results`.
async fn calibrate(
    cells: &[zonemesh_experiments::calibration::Cell],
    runs: u32,
    results: &std::path::Path,
    keep_existing: bool,
) -> Result<()> {
    use zonemesh_experiments::calibration;
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("binary directory")?.to_owned();
    let logs = std::env::temp_dir().join(format!("zonemesh-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&logs)?;
    std::fs::create_dir_all(results)?;
    let options = zonemesh_lab::stack::StackOptions::new(&dir, &logs);
    let program = zonemesh_experiments::mpi::Programs::build()?;
    for cell in cells {
        let path = results.join(calibration::file_name(cell));
        if keep_existing && path.exists() {
            println!("{}: kept {}", cell.name, path.display());
            continue;
        }
        let result =
            calibration::run_cell(cell, &program, &options, runs, &mut |m| println!("{m}"))
                .await
                .with_context(|| format!("{} (logs in {})", cell.name, logs.display()))?;
        std::fs::write(&path, serde_json::to_string_pretty(&result)? + "\n")?;
        println!("{}: wrote {}", cell.name, path.display());
    }
    let _ = std::fs::remove_dir_all(&logs);
    Ok(())
}

/// `--scenarios`: the issue's letters (a usage error otherwise).
fn scenarios_flag(letters: &[String]) -> Vec<zonemesh_experiments::scenarios::Scenario> {
    letters
        .iter()
        .map(|s| {
            zonemesh_experiments::scenarios::Scenario::from_letter(s).unwrap_or_else(|| {
                usage_error(PROGRAM, &format!("--scenarios: no scenario {s:?} (a to i)"))
            })
        })
        .collect()
}

/// `--strategies`: their keys (a usage error otherwise).
fn strategies_flag(keys: &[String]) -> Vec<zonemesh_experiments::mpi_evaluation::Strategy> {
    keys.iter()
        .map(|s| {
            zonemesh_experiments::mpi_evaluation::Strategy::from_key(s).unwrap_or_else(|| {
                usage_error(PROGRAM, &format!("--strategies: no strategy {s:?}"))
            })
        })
        .collect()
}
