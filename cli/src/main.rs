//! `zonemesh`: the command line of zonemesh.
//!
//! `zonemesh demo` builds a lab of three zones of three nodes in network namespaces (with delays
//! between the zones, a lossy node and a slow node), starts the aggregator and one agent per node,
//! waits until the matrix is full, prints the zone-to-zone matrix, a ranking and a placement, and
//! keeps serving the query API until Ctrl-C. `zonemesh nodes|zones|path|matrix|rank|place|tiers`
//! query any aggregator (see [`query`]); `zonemesh publish` shows (`--dry-run`) or removes
//! (`--delete`) what the aggregator's publisher writes to Kubernetes (see [`tiers`]).

mod demo;
mod query;
mod render;
mod tiers;

use std::net::SocketAddr;

use clap::{Parser, Subcommand};
use zonemesh_common::flags::parse_or_exit;

const PROGRAM: &str = "zonemesh";

/// zonemesh: network-aware placement for distributed training.
#[derive(Debug, Parser)]
#[command(name = PROGRAM, version, after_help = query::EXIT_HELP)]
struct Cli {
    #[command(flatten)]
    connection: query::Connection,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
            .map_err(|e| query::Failure {
                status: query::exit::FAILURE,
                message: format!("{e:#}"),
            }),
            Command::Query(q) => query::run(&cli.connection, q).await,
        }
    });
    if let Err(e) = result {
        eprintln!("{PROGRAM}: {}", e.message);
        std::process::exit(e.status);
    }
}
