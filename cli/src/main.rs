//! `zonemesh`: the command line of zonemesh.
//!
//! `zonemesh demo` builds a lab of three zones of three nodes in network namespaces (with delays
//! between the zones, a lossy node and a slow node), starts the aggregator and one agent per node,
//! waits until the matrix is full, prints the zone-to-zone matrix, a ranking and a placement, and
//! keeps serving the query API until Ctrl-C. `zonemesh nodes|zones|path|matrix|rank|place|tiers`
//! query any aggregator (see [`query`]); `zonemesh publish` shows (`--dry-run`) or removes
//! (`--delete`) what the aggregator's publisher writes to Kubernetes (see [`tiers`]), or writes
//! the tiers as Slurm's topology file (`--slurm`, see [`slurm`]). The demo
//! is the `demo` feature (on by default); a build without it has no lab in it.

#[cfg(feature = "demo")]
mod demo;
mod failure;
mod query;
mod render;
mod slurm;
mod tiers;

#[cfg(feature = "demo")]
use std::net::SocketAddr;

use clap::{Parser, Subcommand};
use zonemesh_common::flags::parse_or_exit;
#[cfg(not(feature = "demo"))]
use zonemesh_common::flags::usage_error;

const PROGRAM: &str = "zonemesh";

/// zonemesh: network-aware placement for distributed training.
#[derive(Debug, Parser)]
#[command(name = PROGRAM, version, after_help = failure::EXIT_HELP)]
struct Cli {
    #[command(flatten)]
    connection: query::Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    #[cfg(feature = "demo")]
    /// Run the whole system in a lab on this machine (root: network namespaces with real
    /// delays and impairments; otherwise loopback addresses) and query it.
    Demo {
        /// gRPC address of the aggregator (Ingest, Topology, health, reflection).
        #[arg(long, default_value = "127.0.0.1:7400")]
        listen: SocketAddr,
        /// HTTP address of the aggregator (/metrics, /healthz).
        #[arg(long, default_value = "127.0.0.1:7401")]
        http_listen: SocketAddr,
        /// Stop after printing the results instead of serving until Ctrl-C.
        #[arg(long)]
        no_wait: bool,
        /// Run on loopback addresses even as root (no lab, no impairments).
        #[arg(long)]
        loopback: bool,
    },
    /// Without the demo feature: `zonemesh demo` (whatever its flags) says that this build has no
    /// demo, rather than that there is no such command.
    #[cfg(not(feature = "demo"))]
    #[command(hide = true)]
    Demo {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        _flags: Vec<String>,
    },
    #[command(flatten)]
    Query(query::Query),
}

fn main() {
    let cli: Cli = parse_or_exit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{PROGRAM}: cannot start a runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            #[cfg(feature = "demo")]
            Command::Demo {
                listen,
                http_listen,
                no_wait,
                loopback,
            } => demo::run(demo::Options {
                listen,
                http_listen,
                wait: !no_wait,
                loopback,
            })
            .await
            .map_err(|e| failure::Failure {
                status: failure::exit::FAILURE,
                message: format!("{e:#}"),
            }),
            #[cfg(not(feature = "demo"))]
            Command::Demo { .. } => usage_error(
                PROGRAM,
                "this build of zonemesh has no demo: it was built without the cargo feature \
                 `demo` (on by default)",
            ),
            Command::Query(q) => query::run(&cli.connection, q).await,
        }
    });
    if let Err(e) = result {
        eprintln!("{PROGRAM}: {}", e.message);
        std::process::exit(e.status);
    }
}
