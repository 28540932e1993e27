//! `zonemesh-agent`: probes this node's peers and streams the results to the aggregator.
//!
//! Configuration comes from flags or the environment variables in
//! [`zonemesh_agent::config::env`], and is checked before any socket opens: bad configuration
//! exits with status 64 and a message that names the flag. Then the RTT method is chosen (the
//! choice goes into the log and the `Hello`), the responder and metrics ports are bound, and one
//! line on stdout says the agent runs.

use zonemesh_agent::config::Cli;
use zonemesh_agent::{Sockets, icmp, tcp};
use zonemesh_common::flags::{init_logging, parse_or_exit, usage_error};

const PROGRAM: &str = "zonemesh-agent";

fn fail(message: &str) -> ! {
    eprintln!("{PROGRAM}: {message}");
    std::process::exit(1);
}

fn main() {
    let cli: Cli = parse_or_exit();
    let mut config = cli
        .config()
        .unwrap_or_else(|e| usage_error(PROGRAM, &e.to_string()));
    init_logging(PROGRAM, cli.log_format, &cli.log);
    let mode = icmp::choose_mode(config.icmp, config.addresses[0])
        .unwrap_or_else(|e| usage_error(PROGRAM, &e.to_string()));
    tracing::info!(mode = mode.as_str(), choice = ?config.icmp, "RTT and loss method");
    let responders =
        tcp::bind_responder(&config.addresses, config.probe_port, config.socket_buffer)
            .unwrap_or_else(|e| {
                fail(&format!(
                    "--probe-port {}: cannot listen: {e}",
                    config.probe_port
                ))
            });
    let metrics = std::net::TcpListener::bind(config.metrics_listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .unwrap_or_else(|e| fail(&format!("--metrics-listen {}: {e}", config.metrics_listen)));
    let metrics_addr = metrics.local_addr().unwrap_or(config.metrics_listen);

    // Bulk transfers, the responder and the metrics endpoint get a thread of their own.
    let bulk = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start a runtime: {e}")));
    let bulk_handle = bulk.handle().clone();
    std::thread::Builder::new()
        .name("bulk".into())
        .spawn(move || bulk.block_on(std::future::pending::<()>()))
        .unwrap_or_else(|e| fail(&format!("cannot start a thread: {e}")));
    // The probes run on this thread alone (see `icmp` on why one thread times them best).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start a runtime: {e}")));
    runtime.block_on(async {
        let (zone, region, source) = zonemesh_agent::discover::zone(
            config.node.as_str(),
            (config.zone.clone(), config.region.clone()),
            config.pod_zone.clone(),
            config.kube_api.as_ref(),
            &config.labels,
        )
        .await;
        match &zone {
            Some(z) => tracing::info!(zone = %z, source = source.as_str(), "zone"),
            None => tracing::warn!(
                "this node's zone is unknown (no --zone, no pod label, no zone label on the node object): it is reported in zone \"unknown\", and placement cannot keep jobs in its zone"
            ),
        }
        (config.zone, config.region) = (zone, region);
        println!(
            "zonemesh-agent running node={} icmp={} probe_port={} metrics={metrics_addr}",
            config.node,
            mode.as_str(),
            config.probe_port
        );
        let sockets = Sockets {
            responders,
            metrics,
        };
        let stopped =
            zonemesh_agent::run(config, mode, sockets, bulk_handle, shutdown_signal()).await;
        println!(
            "zonemesh-agent stopped acknowledged_reports={} acknowledged_probes={} unacknowledged_reports={}",
            stopped.acknowledged_reports,
            stopped.acknowledged_probes,
            stopped.unacknowledged_reports
        );
    });
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
