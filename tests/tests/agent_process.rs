//! The real aggregator and three real `zonemesh-agent` processes on loopback addresses of their
//! own: the matrix fills, an agent's RTT agrees with iputils `ping` on the same path, and when
//! the aggregator is killed and restarted mid-run the agents reconnect and every acknowledged
//! report is applied exactly once.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use zonemesh_domain::stats::median;
use zonemesh_lab::tools::parse_ping_rtts;
use zonemesh_proto::v1;
use zonemesh_tests::{is_root, loopback_net, start_agent, start_aggregator, wait_for};

/// Probe timing that fills windows quickly.
const AGGREGATOR_FLAGS: [&str; 14] = [
    "--window",
    "1s",
    "--probe-interval",
    "500ms",
    "--probe-timeout",
    "300ms",
    "--train-gap",
    "10ms",
    "--stale-after",
    "10s",
    "--down-after",
    "60s",
    "--throughput-max-concurrent",
    "0",
];

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// iputils `ping` from `src` to `dst`: the median of `count` RTTs, µs.
fn ping_median_us(src: &str, dst: &str, count: u32) -> Result<f64> {
    let out = Command::new("ping")
        .args(["-n", "-c", &count.to_string(), "-i", "0.01", "-I", src, dst])
        .output()
        .context("run iputils ping (Debian package iputils-ping)")?;
    ensure!(
        out.status.success(),
        "ping: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut times = parse_ping_rtts(&String::from_utf8_lossy(&out.stdout));
    ensure!(
        times.len() as u32 >= count * 9 / 10,
        "ping got {} replies",
        times.len()
    );
    median(&mut times).context("no replies")
}

async fn path(
    topology: &mut v1::topology_client::TopologyClient<tonic::transport::Channel>,
    src: &str,
    dst: &str,
) -> Result<v1::PathFigures> {
    Ok(topology
        .get_path(v1::GetPathRequest {
            src: src.into(),
            dst: dst.into(),
        })
        .await?
        .into_inner()
        .figures
        .unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_fill_the_matrix_agree_with_ping_and_survive_an_aggregator_restart()
-> Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("sled");
    let data_arg = data.to_str().context("utf-8 path")?;
    let listen = format!("127.0.0.1:{}", free_port()?);
    let mut flags = vec!["--data-dir", data_arg, "--listen", &listen];
    flags.extend(AGGREGATOR_FLAGS);
    let aggregator = start_aggregator(&flags, dir.path())?;
    let url = format!("http://{listen}");

    let net = loopback_net();
    let nodes = [
        ("n1", "zone-a", 11),
        ("n2", "zone-a", 12),
        ("n3", "zone-b", 13),
    ];
    let mut agents = Vec::new();
    for (node, zone, host) in nodes {
        let address = format!("{net}{host}");
        agents.push(start_agent(
            node,
            &[
                "--zone",
                zone,
                "--address",
                &address,
                "--aggregator",
                &url,
                "--metrics-listen",
                &format!("{address}:0"),
                "--reconnect-max",
                "1s",
            ],
            dir.path(),
        )?);
    }
    if is_root() {
        for a in &agents {
            ensure!(
                a.icmp == "raw",
                "{} measures with {} as root",
                a.node,
                a.icmp
            );
        }
    }

    // The matrix fills: every off-diagonal cell has a figure, the paths inside zone-a measured.
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    let names: Vec<String> = nodes.iter().map(|n| n.0.to_string()).collect();
    wait_for("a full RTT matrix", Duration::from_secs(30), || {
        let mut topology = topology.clone();
        let names = names.clone();
        async move {
            let m = topology
                .get_matrix(v1::GetMatrixRequest {
                    metric: v1::Metric::RttP50Us as i32,
                    nodes: names,
                    zone: String::new(),
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner();
            let n = m.nodes.len();
            let full = (0..n * n).filter(|k| k / n != k % n).all(|k| {
                m.cells[k].provenance != v1::Provenance::Unknown as i32 && m.cells[k].value > 0.0
            });
            full.then_some(())
        }
    })
    .await?;
    for (src, dst) in [("n1", "n2"), ("n2", "n1")] {
        let f = path(&mut topology, src, dst).await?;
        ensure!(
            f.latency_provenance == v1::Provenance::Measured as i32,
            "{src}->{dst} not measured: {f:?}"
        );
    }

    // RTT agrees with iputils ping on the same path, measured at the same time.
    if agents[0].icmp != "tcp" {
        let (src, dst) = (format!("{net}11"), format!("{net}12"));
        let ping_us = ping_median_us(&src, &dst, 200)?;
        let f = path(&mut topology, "n1", "n2").await?;
        let ours = f.rtt.context("n1->n2 RTT")?.p50_us;
        let gap = (ours - ping_us).abs();
        println!("n1->n2 median RTT: zonemesh {ours:.1} µs, ping {ping_us:.1} µs");
        ensure!(
            gap <= 50.0 || gap <= 0.02 * ping_us,
            "n1->n2: zonemesh median {ours:.1} µs, ping {ping_us:.1} µs"
        );
    }

    // The aggregator crashes mid-run and comes back on the same address with the same data.
    let acked_before = agents[0].metric("zonemesh_agent_reports_acknowledged_total")?;
    ensure!(acked_before > 0.0, "n1 had reports acknowledged");
    aggregator.kill();
    // The agents notice, and each holds a report the dead aggregator never acknowledged.
    for a in &agents {
        wait_for(
            &format!(
                "{} to lose the aggregator with a report unacknowledged",
                a.node
            ),
            Duration::from_secs(20),
            || async {
                let cut_off = a.metric("zonemesh_agent_connected").ok()? == 0.0
                    && a.metric("zonemesh_agent_buffered_reports").ok()? >= 1.0;
                cut_off.then_some(())
            },
        )
        .await?;
    }
    let aggregator = start_aggregator(&flags, dir.path())?;
    let mut acked_after_restart = Vec::new();
    for a in &agents {
        let acked = wait_for(
            &format!("{} to reconnect", a.node),
            Duration::from_secs(20),
            || async {
                let reconnected = a.metric("zonemesh_agent_reconnects_total").ok()? >= 1.0
                    && a.metric("zonemesh_agent_connected").ok()? == 1.0
                    && a.metric("zonemesh_agent_buffered_reports").ok()? == 0.0;
                let acked = a.metric("zonemesh_agent_reports_acknowledged_total").ok()?;
                reconnected.then_some(acked)
            },
        )
        .await?;
        acked_after_restart.push(acked);
    }
    // Each agent then reports a fresh window over its new stream, acknowledged by the new
    // aggregator, before it is stopped.
    for (a, before) in agents.iter().zip(acked_after_restart) {
        wait_for(
            &format!("{} to have a new window acknowledged", a.node),
            Duration::from_secs(20),
            || async {
                let acked = a.metric("zonemesh_agent_reports_acknowledged_total").ok()?;
                (acked > before).then_some(())
            },
        )
        .await?;
    }

    // Every agent stops cleanly (flushing its last window); what each one had acknowledged is
    // exactly what the aggregator holds: nothing missing, nothing applied twice.
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    for agent in agents {
        let node = agent.node.clone();
        let totals = tokio::task::spawn_blocking(move || agent.terminate()).await??;
        ensure!(totals.unacknowledged == 0, "{node}: {totals:?}");
        let mut stored = 0;
        for dst in &names {
            if *dst != node {
                stored += path(&mut topology, &node, dst).await?.probes_sent_total;
            }
        }
        println!("{node}: {totals:?}, aggregator holds {stored} probes");
        ensure!(
            stored == totals.probes,
            "{node}: the agent had {} probes acknowledged, the aggregator holds {stored}",
            totals.probes
        );
    }
    Ok(())
}
