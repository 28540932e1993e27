//! `zonemesh demo`: the whole system on one machine.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tonic::transport::Channel;
use zonemesh_lab::demo_cluster::{self, FAST_AGGREGATOR_FLAGS};
use zonemesh_lab::fill::Fill;
use zonemesh_lab::stack::{Stack, StackOptions, wait_full, wait_quiet};
use zonemesh_lab::{Lab, LabSpec};
use zonemesh_proto::v1;

use crate::render;

type Topology = v1::topology_client::TopologyClient<Channel>;

/// How long the demo waits for the matrix to fill before it shows what it has.
const FILL_TIMEOUT: Duration = Duration::from_secs(180);

/// How long no throughput test may have been granted before the demo shows the results: a
/// latency window (the demo's `--window`) and its report after the last test.
const QUIET_FOR: Duration = Duration::from_secs(10);

/// How long the demo waits for the tests to be over.
const QUIET_TIMEOUT: Duration = Duration::from_secs(60);

/// What `zonemesh demo` was asked to do.
#[derive(Debug)]
pub struct Options {
    /// Aggregator gRPC address.
    pub listen: SocketAddr,
    /// Aggregator HTTP address.
    pub http_listen: SocketAddr,
    /// Serve until Ctrl-C after the results.
    pub wait: bool,
    /// Loopback addresses even as root.
    pub loopback: bool,
}

/// The directory of the other zonemesh binaries: beside this one.
fn binaries() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("where is this program")?;
    let dir = exe.parent().context("program directory")?.to_owned();
    for name in ["zonemesh-aggregator", "zonemesh-agent"] {
        if !dir.join(name).is_file() {
            bail!(
                "{name} is not beside {} (build the whole workspace: cargo build --release --locked)",
                exe.display()
            );
        }
    }
    Ok(dir)
}

fn describe(spec: &LabSpec, lab: bool) {
    println!("The cluster: {} zones of 3 nodes.", spec.zones.len());
    if !lab {
        println!("  (on loopback addresses: no delays, loss or rate limits between them)");
        return;
    }
    for ((a, b), link) in &spec.links {
        println!(
            "  {a} <-> {b}: {} round trip (± {} jitter each way)",
            render::micros(link.rtt.as_secs_f64() * 1e6),
            render::micros(link.jitter.as_secs_f64() * 1e6)
        );
    }
    for (node, imp) in &spec.nodes {
        if imp.loss > 0.0 {
            println!(
                "  {node}: drops {} of the packets that reach it",
                render::percent(imp.loss)
            );
        }
        if node == demo_cluster::SLOW_NODE
            && let Some(bps) = imp.egress_bps
        {
            println!(
                "  {node}: its link runs at {} (the others at {})",
                render::rate(bps as f64),
                render::rate(demo_cluster::NODE_RATE_BPS as f64)
            );
        }
    }
}

/// How far the matrix has filled, as it fills: on a terminal one line updated in place (cut to
/// the terminal's width), elsewhere a plain line at each change (to `plain`).
#[derive(Debug)]
struct FillProgress<W: std::io::Write> {
    bar: ProgressBar,
    plain: W,
}

impl FillProgress<std::io::Stdout> {
    /// On standard output: hidden when it is not a terminal (or TERM is dumb).
    fn new() -> Self {
        let progress = Self::on(ProgressDrawTarget::stdout(), std::io::stdout());
        if !progress.bar.is_hidden() {
            progress.bar.enable_steady_tick(Duration::from_millis(120));
        }
        progress
    }
}

impl<W: std::io::Write> FillProgress<W> {
    /// Draws on `target` unless it is hidden; then writes plain lines to `plain`.
    fn on(target: ProgressDrawTarget, plain: W) -> Self {
        let bar = ProgressBar::with_draw_target(None, target);
        if !bar.is_hidden() {
            bar.set_style(
                ProgressStyle::with_template("  {spinner} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
        }
        Self { bar, plain }
    }

    fn show(&mut self, f: &Fill) {
        if self.bar.is_hidden() {
            let _ = writeln!(self.plain, "  {f}");
        } else {
            self.bar.set_message(f.to_string());
        }
    }

    /// Removes the line in place, leaving `last` as a plain line.
    fn finish(&mut self, last: Option<&Fill>) {
        if !self.bar.is_hidden() {
            self.bar.finish_and_clear();
            if let Some(f) = last {
                let _ = writeln!(self.plain, "  {f}");
            }
        }
    }
}

/// Runs the demo.
pub async fn run(options: Options) -> Result<()> {
    let dir = binaries()?;
    let spec = demo_cluster::spec();
    let use_lab = !options.loopback
        && match zonemesh_lab::check_machine() {
            Ok(()) => true,
            Err(e) => {
                println!("No lab: {e:#}. The agents run on loopback addresses instead.");
                false
            }
        };
    let data = tempfile::Builder::new()
        .prefix("zonemesh-demo-")
        .tempdir()
        .context("a temporary directory for sled")?;
    let options_stack = stack_options(&options, &dir, data.path())?;

    describe(&spec, use_lab);
    let mut lab = if use_lab {
        println!("Building the lab (network namespaces, bridges, the link emulator)…");
        Some(Lab::build(spec.clone())?)
    } else {
        None
    };
    println!(
        "Starting the aggregator (sled in {}) and 9 agents…",
        data.path().display()
    );
    let stack = match lab.as_mut() {
        Some(lab) => Stack::start(lab, &options_stack)?,
        None => Stack::start_loopback(&spec, &options_stack)?,
    };
    let methods: std::collections::BTreeSet<&str> =
        stack.agents.values().map(|a| a.icmp.as_str()).collect();
    println!(
        "  aggregator on {} (agents reach it at {}); agents measure with {}",
        stack.aggregator.grpc,
        stack.agent_url,
        methods.into_iter().collect::<Vec<_>>().join(", ")
    );

    let mut topology = stack.topology().await?;
    if !measure(&mut topology, &stack, &spec).await {
        println!("Interrupted; removing the lab.");
        return Ok(());
    }
    show_results(&mut topology).await?;
    if !options.wait {
        return Ok(());
    }
    serve_until_ctrl_c(&stack).await?;
    println!("\nStopping the agents and the aggregator, removing the lab…");
    drop(topology);
    stop(stack).await;
    if let Some(mut lab) = lab {
        lab.remove()?;
    }
    println!("Done.");
    Ok(())
}

/// The stack as the demo runs it: the binaries in `dir`, sled and logs in `data`, the demo
/// cluster's aggregator flags, and the addresses asked for (which must be free).
fn stack_options(options: &Options, dir: &Path, data: &Path) -> Result<StackOptions> {
    let mut stack = StackOptions::new(dir, data);
    stack.listen = options.listen;
    stack.http_listen = options.http_listen;
    stack.data_dir = Some(data.join("sled"));
    stack.aggregator_flags = FAST_AGGREGATOR_FLAGS.iter().map(|s| (*s).into()).collect();
    for addr in [options.listen, options.http_listen] {
        if std::net::TcpListener::bind(addr).is_err() {
            bail!("{addr} is in use: pass --listen / --http-listen with free addresses");
        }
    }
    Ok(stack)
}

/// Waits, showing the progress, until the matrix is full (or [`FILL_TIMEOUT`] has passed: then
/// the results show what there is), and then until the throughput tests that filled it are over
/// (at most [`QUIET_TIMEOUT`]): while a node is under a test its latency windows are left out, so
/// right after the fill a node's own figures could still be missing and a loss still unjudged.
/// False when Ctrl-C came first.
async fn measure(topology: &mut Topology, stack: &Stack, spec: &LabSpec) -> bool {
    println!("Measuring until the matrix is full (throughput tests run two at a time)…");
    let started = std::time::Instant::now();
    let mut progress = FillProgress::new();
    let filled = tokio::select! {
        f = wait_full(topology, spec, FILL_TIMEOUT, |f| progress.show(f)) => Some(f),
        _ = tokio::signal::ctrl_c() => None,
    };
    progress.finish(filled.as_ref().and_then(|f| f.as_ref().ok()));
    match filled {
        None => return false,
        Some(Ok(_)) => println!("Full after {:.0} s.", started.elapsed().as_secs_f64()),
        Some(Err(e)) => println!("{e:#}; showing what there is."),
    }
    println!("Waiting until the throughput tests that filled it are over…");
    let quiet = tokio::select! {
        q = wait_quiet(&stack.aggregator, QUIET_FOR, QUIET_TIMEOUT) => Some(q),
        _ = tokio::signal::ctrl_c() => None,
    };
    match quiet {
        None => return false,
        Some(Ok(())) => println!("No test for {} s.", QUIET_FOR.as_secs()),
        Some(Err(e)) => println!("{e:#}; showing what there is."),
    }
    true
}

/// The zone-to-zone matrix, the ranking, the faults and two placements, as the demo prints them.
async fn show_results(topology: &mut Topology) -> Result<()> {
    println!("\nZone to zone (ListZones):");
    let zones = topology
        .list_zones(v1::ListZonesRequest::default())
        .await?
        .into_inner();
    print!("{}", render::zones(&zones, &render::Style::plain()));

    println!("\nEvery node ranked (RankNodes):");
    let ranking = topology
        .rank_nodes(v1::RankNodesRequest::default())
        .await?
        .into_inner();
    print!("{}", render::ranking(&ranking, &render::Style::plain()));

    println!("\nWhat is at fault (ListFaults):");
    let faults = topology
        .list_faults(v1::ListFaultsRequest {})
        .await?
        .into_inner();
    print!("{}", render::faults(&faults, &render::Style::plain()));

    println!("\nA 3-worker job (Place, one zone preferred):");
    show_placement(
        topology,
        v1::PlaceRequest {
            workers: 3,
            zone_policy: v1::ZonePolicy::PreferOne as i32,
            ..Default::default()
        },
    )
    .await;

    println!("\nA 4-worker ring all-reduce of 25 MiB (Place with the job's collective):");
    show_placement(
        topology,
        v1::PlaceRequest {
            workers: 4,
            zone_policy: v1::ZonePolicy::PreferOne as i32,
            collective: v1::Collective::Ring as i32,
            bytes_per_iteration: 25 << 20,
            alternatives: 2,
            ..Default::default()
        },
    )
    .await;

    println!(
        "\nThe Slurm topology.conf zonemesh writes for this cluster (zonemesh publish --slurm tree):"
    );
    let tiers = topology
        .get_tiers(v1::GetTiersRequest {})
        .await?
        .into_inner();
    print!("{}", slurm_tree(tiers));
    Ok(())
}

/// The tree `zonemesh publish --slurm tree` writes for `tiers`, indented, or why there is none.
fn slurm_tree(tiers: v1::GetTiersResponse) -> String {
    use zonemesh_publish::slurm::{Form, SlurmOptions, file};
    let text = match zonemesh_domain::Tiers::try_from(tiers) {
        Ok(t) => match file(&t, Form::Tree, &SlurmOptions::default()) {
            Ok(f) => f.text,
            Err(e) => format!("no file: {e}\n"),
        },
        Err(e) => format!("no file: the tiers are invalid: {e}\n"),
    };
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_owned()
            } else {
                format!("  {l}\n")
            }
        })
        .collect()
}

/// What `Place` answers to `request`, or why it placed nothing.
async fn show_placement(topology: &mut Topology, request: v1::PlaceRequest) {
    match topology.place(request).await {
        Ok(p) => print!("{}", render::placement(&p.into_inner())),
        Err(s) => println!("  no placement: {}", s.message()),
    }
}

/// Prints how to query the running system, then waits for Ctrl-C.
async fn serve_until_ctrl_c(stack: &Stack) -> Result<()> {
    let grpc = stack.aggregator.grpc;
    println!("\nThe query API stays up on {grpc} until Ctrl-C. Try:");
    for (method, body) in [
        ("ListZones", ""),
        ("ListNodes", ""),
        ("ListFaults", ""),
        ("GetPath", r#"{"src":"a1","dst":"c1"}"#),
        (
            "GetMatrix",
            r#"{"metric":"METRIC_RTT_P50_US","zone":"zone-a"}"#,
        ),
        ("RankNodes", r#"{"zone":"zone-b"}"#),
        (
            "Place",
            r#"{"workers":4,"zone_policy":"ZONE_POLICY_PREFER_ONE"}"#,
        ),
        (
            "Place",
            r#"{"workers":4,"collective":"COLLECTIVE_RING","bytes_per_iteration":26214400}"#,
        ),
    ] {
        let data = if body.is_empty() {
            String::new()
        } else {
            format!("-d '{body}' ")
        };
        println!("  grpcurl -plaintext {data}{grpc} zonemesh.v1.Topology/{method}");
    }
    println!("  curl http://{}/metrics", stack.aggregator.http);
    tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")
}

/// Stops the agents (all at once) and then the aggregator.
async fn stop(stack: Stack) {
    let Stack {
        aggregator, agents, ..
    } = stack;
    let stops: Vec<_> = agents
        .into_values()
        .map(|a| tokio::task::spawn_blocking(move || a.terminate()))
        .collect();
    for s in stops {
        let _ = s.await;
    }
    let _ = tokio::task::spawn_blocking(move || aggregator.terminate()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use zonemesh_lab::fill::{Reading, Size};

    /// A terminal that records what is done to it.
    #[derive(Debug, Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Recorder {
        fn push(&self, op: String) -> std::io::Result<()> {
            self.0.lock().unwrap().push(op);
            Ok(())
        }
        fn ops(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl indicatif::TermLike for Recorder {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
            self.push(format!("up {n}"))
        }
        fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
            self.push(format!("down {n}"))
        }
        fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
            self.push(format!("right {n}"))
        }
        fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
            self.push(format!("left {n}"))
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.push(format!("line {s}"))
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.push(format!("str {s}"))
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.push("clear".into())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Three readings of a zone of three nodes: one agent, then all three and two paths
    /// measured, then all six paths.
    fn fills() -> [Fill; 3] {
        let nodes = ["a1", "a2", "a3"].map(String::from);
        let paths: Vec<(String, String)> = nodes
            .iter()
            .flat_map(|a| nodes.iter().map(move |b| (a.clone(), b.clone())))
            .filter(|(a, b)| a != b)
            .collect();
        let mut fill = Fill::new(Size {
            nodes: 3,
            paths: 6,
            zone_links: 0,
        });
        [(1, 0), (3, 2), (3, 6)].map(|(connected, rtt)| {
            fill.observe(Reading {
                connected: nodes[..connected].iter().cloned().collect(),
                rtt: paths[..rtt].iter().cloned().collect(),
                ..Reading::default()
            });
            fill.clone()
        })
    }

    /// On a terminal the progress is one line redrawn in place: no new line while it fills, the
    /// latest figures on it, and the last reading left as one plain line at the end.
    #[test]
    fn on_a_terminal_progress_is_one_line_redrawn_in_place() {
        let terminal = Recorder::default();
        let target = ProgressDrawTarget::term_like(Box::new(terminal.clone()));
        let mut progress = FillProgress::on(target, Vec::new());
        for f in &fills() {
            progress.show(f);
        }
        let ops = terminal.ops();
        assert!(
            !ops.iter().any(|op| op.starts_with("line ")),
            "a new line on the terminal: {ops:?}"
        );
        let drawn: Vec<&String> = ops
            .iter()
            .filter(|op| op.starts_with("str ") && op.contains("agents connected"))
            .collect();
        assert!(
            drawn.len() == fills().len() && drawn.last().unwrap().contains("RTT 6/6"),
            "{ops:?}"
        );
        assert!(
            ops.iter().any(|op| op == "clear"),
            "never redrawn in place: {ops:?}"
        );
        assert!(progress.plain.is_empty(), "plain lines on a terminal");
        let last = fills()[2].clone();
        progress.finish(Some(&last));
        assert_eq!(
            String::from_utf8(progress.plain).unwrap(),
            format!("  {last}\n")
        );
    }

    /// Elsewhere (a pipe, a file, a dumb terminal), one plain line per reading.
    #[test]
    fn elsewhere_progress_is_plain_lines() {
        let mut progress = FillProgress::on(ProgressDrawTarget::hidden(), Vec::new());
        for f in &fills() {
            progress.show(f);
        }
        progress.finish(Some(&fills()[2]));
        let text = String::from_utf8(progress.plain).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].contains("agents connected 1/3"), "{text}");
        assert!(lines[2].contains("RTT 6/6"), "{text}");
        assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
    }
}
