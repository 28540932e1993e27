//! The agent's cost while it probes 100 peers at one probe per second each (issue 4's target:
//! under 1 % of one core and under 25 MiB resident), beside iputils `ping` sending the same 100
//! probes per second, measured over the same minute.
//!
//! `cargo bench -p zonemesh-tests --bench agent` (run as root for raw ICMP sockets; without root
//! the agent falls back to TCP-connect probes and ping may be refused).
//!
//! The 100 peers are loopback addresses of one /24 that answer ICMP (and, without a responder,
//! refuse TCP at once); they are registered with the real aggregator through `Ingest` streams so
//! that its plan gives the agent exactly those 100 targets.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use zonemesh_lab::process::{cpu_seconds, status_kib};
use zonemesh_proto::v1;
use zonemesh_tests::{loopback_net, start_agent, start_aggregator};

const PEERS: u32 = 100;
/// How long the measurement runs, unless `ZONEMESH_BENCH_SECONDS` says otherwise.
const MEASURE: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--window",
            "10s",
            "--probe-interval",
            "1s",
            "--train-size",
            "1",
            "--probe-timeout",
            "500ms",
            "--throughput-max-concurrent",
            "0",
        ],
        dir.path(),
    )?;
    let net = loopback_net();
    // Keep the peers' streams open for the whole run.
    let mut peers = Vec::new();
    for i in 1..=PEERS {
        let (tx, rx) = mpsc::channel(4);
        tx.send(v1::AgentMessage {
            kind: Some(v1::agent_message::Kind::Hello(v1::Hello {
                node_name: format!("peer-{i:03}"),
                zone: "bench".into(),
                addresses: vec![format!("{net}{i}")],
                agent_version: "bench".into(),
                icmp_mode: v1::IcmpMode::Raw as i32,
                probe_port: 7402,
                ..Default::default()
            })),
        })
        .await?;
        let mut client = v1::ingest_client::IngestClient::new(aggregator.channel().await?);
        let stream = client.connect(ReceiverStream::new(rx)).await?.into_inner();
        peers.push((tx, stream));
    }
    let address = format!("{net}200");
    let url = format!("http://{}", aggregator.grpc);
    let agent = start_agent(
        "bench-agent",
        &[
            "--zone",
            "bench",
            "--address",
            &address,
            "--aggregator",
            &url,
        ],
        dir.path(),
    )?;
    let pid = agent.pid();
    // Warm-up: the plan arrives within a second; the first window closes after 10 s.
    let started = Instant::now();
    while agent
        .metric("zonemesh_agent_peers{peer_zone=\"bench\"}")
        .unwrap_or(0.0)
        < f64::from(PEERS)
    {
        ensure!(
            started.elapsed() < Duration::from_secs(40),
            "the agent never probed {PEERS} peers: {}",
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let ping = Command::new("ping")
        .args(["-n", "-q", "-i", "0.01", "-I", &address, &format!("{net}1")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let ping_pid = ping.as_ref().ok().map(std::process::Child::id);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let sent0 = agent.metric("zonemesh_agent_probes_sent_total{peer_zone=\"bench\"}")?;
    let cpu0 = cpu_seconds(pid)?;
    let ping_cpu0 = ping_pid.map(cpu_seconds).transpose()?;
    let t0 = Instant::now();
    let measure = std::env::var("ZONEMESH_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(MEASURE, Duration::from_secs);
    println!("measuring agent pid {pid} for {measure:?}");
    tokio::time::sleep(measure).await;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid)? - cpu0;
    let ping_cpu = match (ping_pid, ping_cpu0) {
        (Some(p), Some(c0)) => Some(cpu_seconds(p)? - c0),
        _ => None,
    };
    let sent = agent.metric("zonemesh_agent_probes_sent_total{peer_zone=\"bench\"}")? - sent0;
    let rss = status_kib(pid, "VmRSS:")? / 1024.0;
    let hwm = status_kib(pid, "VmHWM:")? / 1024.0;
    if let Ok(mut p) = ping {
        let _ = p.kill();
        let _ = p.wait();
    }

    println!(
        "agent: {} probes to {PEERS} peers, measured over {wall:.1} s (window counts lag by up to one 10 s window)",
        agent.icmp
    );
    println!(
        "  probes resolved in the window counter: {sent:.0} ({:.1}/s)",
        sent / wall
    );
    println!(
        "  agent CPU: {:.3} % of one core ({cpu:.2} s)",
        100.0 * cpu / wall
    );
    if let Some(p) = ping_cpu {
        println!(
            "  iputils ping -i 0.01 (100 probes/s to one peer), same minute: {:.3} % of one core",
            100.0 * p / wall
        );
        if p > 0.0 {
            println!("  ratio agent / ping: {:.2}", cpu / p);
        }
    }
    println!("  agent RSS: {rss:.1} MiB now, {hwm:.1} MiB peak");
    drop(peers);
    Ok(())
}
