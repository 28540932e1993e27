//! The gRPC services in process: a real server on an ephemeral port, the generated tonic client.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use zonemesh_aggregator::server::{self, Bound, Config};
use zonemesh_engine::EngineConfig;
use zonemesh_proto::v1;
use zonemesh_proto::v1::agent_message::Kind as Up;
use zonemesh_proto::v1::aggregator_message::Kind as Down;

struct Server {
    bound: Bound,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(data_dir: Option<std::path::PathBuf>) -> Self {
        Self::start_with(data_dir, Default::default()).await
    }

    async fn start_with(
        data_dir: Option<std::path::PathBuf>,
        owner: server::owner::OwnerConfig,
    ) -> Self {
        let config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            http_listen: "127.0.0.1:0".parse().unwrap(),
            job_ttl_ms: zonemesh_engine::extender::DEFAULT_JOB_TTL_MS,
            data_dir,
            store_cache_bytes: zonemesh_aggregator::store::DEFAULT_CACHE_BYTES,
            engine: EngineConfig::default(),
            owner,
            cluster: None,
            ingest: Default::default(),
            tls: None,
            allow_plaintext: false,
            tokens_file: None,
            reload_every: std::time::Duration::from_secs(10),
            heap_stats: None,
            tiers: server::tiers::TiersConfig {
                every: Duration::from_millis(100),
                ..Default::default()
            },
            faults: server::faults::FaultsConfig {
                every: Duration::from_millis(100),
                save_every: Duration::from_millis(200),
                ..Default::default()
            },
            publish: None,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let (bound_tx, bound_rx) = oneshot::channel();
        let task = tokio::spawn(async move {
            server::serve(
                config,
                async move {
                    let _ = stopped.await;
                },
                move |b| {
                    let _ = bound_tx.send(b);
                },
            )
            .await
            .expect("server runs");
        });
        let bound = bound_rx.await.expect("server binds");
        Self {
            bound,
            stop: Some(stop),
            task,
        }
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.bound.grpc))
            .unwrap()
            .connect()
            .await
            .unwrap()
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("stops in time")
            .unwrap();
    }
}

fn hello(node: &str, zone: &str) -> v1::AgentMessage {
    v1::AgentMessage {
        kind: Some(Up::Hello(v1::Hello {
            node_name: node.into(),
            zone: zone.into(),
            region: String::new(),
            addresses: vec!["127.0.0.1".into()],
            agent_version: "test".into(),
            icmp_mode: v1::IcmpMode::Raw as i32,
            probe_port: 7402,
        })),
    }
}

fn now_ms() -> i64 {
    zonemesh_common::time::unix_ms()
}

fn summary(src: &str, dst: &str, rtt_us: f64, sent: u64, received: u64) -> v1::PathSummary {
    let t = now_ms();
    v1::PathSummary {
        src: src.into(),
        dst: dst.into(),
        window_start_unix_ms: t - 10_000,
        window_end_unix_ms: t,
        probes_sent: sent,
        probes_received: received,
        rtt: (received > 0).then_some(v1::RttStats {
            samples: received,
            min_us: rtt_us,
            p50_us: rtt_us,
            p90_us: rtt_us,
            p99_us: rtt_us,
            max_us: rtt_us,
            mean_us: rtt_us,
            jitter_us: 0.0,
        }),
        ..Default::default()
    }
}

fn report(sequence: u64, paths: Vec<v1::PathSummary>) -> v1::AgentMessage {
    v1::AgentMessage {
        kind: Some(Up::Report(v1::Report { sequence, paths })),
    }
}

/// One agent's stream: send messages, read what comes back.
struct Agent {
    up: mpsc::Sender<v1::AgentMessage>,
    down: tonic::Streaming<v1::AggregatorMessage>,
}

impl Agent {
    async fn connect(channel: Channel, node: &str, zone: &str) -> Result<Self, tonic::Status> {
        let (up, rx) = mpsc::channel(64);
        up.send(hello(node, zone)).await.unwrap();
        let mut client = v1::ingest_client::IngestClient::new(channel);
        let down = client.connect(ReceiverStream::new(rx)).await?.into_inner();
        Ok(Self { up, down })
    }

    async fn send(&self, message: v1::AgentMessage) {
        self.up.send(message).await.unwrap();
    }

    /// The next message that is not a plan or grant.
    async fn next(&mut self) -> Down {
        loop {
            let m = tokio::time::timeout(Duration::from_secs(10), self.down.next())
                .await
                .expect("a message within 10 s")
                .expect("stream open")
                .expect("no error status");
            match m.kind.expect("kind") {
                Down::Plan(_) | Down::Grant(_) => continue,
                other => return other,
            }
        }
    }

    async fn ack(&mut self) -> u64 {
        match self.next().await {
            Down::Ack(a) => a.sequence,
            other => panic!("expected an ack, got {other:?}"),
        }
    }

    async fn plan(&mut self) -> v1::ProbePlan {
        loop {
            let m = tokio::time::timeout(Duration::from_secs(10), self.down.next())
                .await
                .expect("a plan within 10 s")
                .unwrap()
                .unwrap();
            if let Some(Down::Plan(p)) = m.kind {
                return p;
            }
        }
    }
}

/// The race CI met: the owner pushed the new session's plan at its next tick while the hello's
/// ack still waited for its write, and the agent took the plan for the hello's answer. Writes
/// here take a second and the owner ticks every 20 ms, so every plan is ready long before the
/// ack.
#[tokio::test]
async fn the_first_message_to_an_agent_is_the_ack_of_its_hello_even_when_writes_are_slow() {
    let server = Server::start_with(
        None,
        server::owner::OwnerConfig {
            tick: Duration::from_millis(20),
            commit_delay: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await;
    let channel = server.channel().await;
    let mut agents = Vec::new();
    for node in ["node-a", "node-b", "node-c"] {
        let mut agent = Agent::connect(channel.clone(), node, "zone-1")
            .await
            .unwrap();
        let first = tokio::time::timeout(Duration::from_secs(10), agent.down.next())
            .await
            .expect("an answer within 10 s")
            .expect("stream open")
            .expect("no error status");
        assert!(
            matches!(first.kind, Some(Down::Ack(_))),
            "{node}: the first message was {first:?}"
        );
        // The plan held meanwhile follows (`plan` fails without one within 10 s).
        agent.plan().await;
        agents.push(agent);
    }
    server.stop().await;
}

#[tokio::test]
async fn agents_register_report_and_are_acknowledged_and_queried() {
    let server = Server::start(None).await;
    let channel = server.channel().await;
    let mut a = Agent::connect(channel.clone(), "node-a", "zone-1")
        .await
        .unwrap();
    assert_eq!(
        a.ack().await,
        0,
        "the hello is answered with the applied sequence"
    );
    let mut b = Agent::connect(channel.clone(), "node-b", "zone-1")
        .await
        .unwrap();
    assert_eq!(b.ack().await, 0);
    let plan = a.plan().await;
    assert!(plan.targets.iter().any(|t| t.node == "node-b"), "{plan:?}");

    a.send(report(1, vec![summary("node-a", "node-b", 120.0, 10, 9)]))
        .await;
    assert_eq!(a.ack().await, 1);
    b.send(report(1, vec![summary("node-b", "node-a", 80.0, 10, 10)]))
        .await;
    assert_eq!(b.ack().await, 1);
    // A replay is acknowledged again and applied once.
    a.send(report(1, vec![summary("node-a", "node-b", 120.0, 10, 9)]))
        .await;
    assert_eq!(a.ack().await, 1);

    let mut topology = v1::topology_client::TopologyClient::new(channel.clone());
    let path = topology
        .get_path(v1::GetPathRequest {
            src: "node-a".into(),
            dst: "node-b".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let f = path.figures.unwrap();
    assert_eq!(f.probes_sent_total, 10, "the replay was not applied");
    assert_eq!(f.latency_provenance, v1::Provenance::Measured as i32);
    assert!((f.loss_ratio - 0.1).abs() < 1e-9);
    assert_eq!(f.rtt.unwrap().p50_us, 120.0);

    let nodes = topology
        .list_nodes(v1::ListNodesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .nodes;
    assert_eq!(nodes.len(), 2);
    assert!(
        nodes
            .iter()
            .all(|n| n.state == v1::NodeState::Ready as i32 && n.connected)
    );

    let zones = topology
        .list_zones(v1::ListZonesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(zones.zones.len(), 1);
    assert_eq!(zones.links[0].measured_paths, 2);

    let ranked = topology
        .rank_nodes(v1::RankNodesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ranked.nodes.len(), 2);

    let matrix = topology
        .get_matrix(v1::GetMatrixRequest {
            metric: v1::Metric::RttP50Us as i32,
            zone: "zone-1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(matrix.nodes, ["node-a", "node-b"]);
    assert_eq!(matrix.cells[1].value, 120.0);
    assert_eq!(matrix.cells[2].value, 80.0);

    let placed = topology
        .place(v1::PlaceRequest {
            workers: 2,
            zone_policy: v1::ZonePolicy::RequireOne as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(placed.zones, ["zone-1"]);
    assert_eq!(placed.worst_rtt_us, 120.0);
    assert!((placed.worst_loss_ratio - 0.1).abs() < 1e-9);
    assert_eq!(placed.predicted_seconds, 0.0, "no job, no prediction");

    // With the job's collective, the answer carries its predicted time and rank order.
    let job = topology
        .place(v1::PlaceRequest {
            workers: 2,
            zone_policy: v1::ZonePolicy::RequireOne as i32,
            collective: v1::Collective::Ring as i32,
            bytes_per_iteration: 25 << 20,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(job.rank_order.len(), 2);
    assert!(job.predicted_seconds > 0.0, "{job:?}");
    let bottleneck = job.bottleneck.expect("a bottleneck");
    assert!(!bottleneck.why.is_empty());
    // A ring of two: the pair's round trip and the rate of each direction.
    assert_eq!(job.prediction_figures, 3);
    server.stop().await;
}

#[tokio::test]
async fn bad_input_is_refused_with_the_field_and_changes_nothing() {
    let server = Server::start(None).await;
    let channel = server.channel().await;

    // A report before the hello closes the stream with INVALID_ARGUMENT.
    let (up, rx) = mpsc::channel(4);
    up.send(report(1, vec![summary("x", "y", 1.0, 1, 1)]))
        .await
        .unwrap();
    let status = v1::ingest_client::IngestClient::new(channel.clone())
        .connect(ReceiverStream::new(rx))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().starts_with("report: sent before hello"),
        "{}",
        status.message()
    );

    // A bad hello names its field.
    let (up, rx) = mpsc::channel(4);
    let mut bad = hello("node-a", "zone-1");
    if let Some(Up::Hello(h)) = &mut bad.kind {
        h.addresses = vec!["300.1.1.1".into()];
    }
    up.send(bad).await.unwrap();
    let status = v1::ingest_client::IngestClient::new(channel.clone())
        .connect(ReceiverStream::new(rx))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().starts_with("hello.addresses[0]"),
        "{}",
        status.message()
    );

    let mut a = Agent::connect(channel.clone(), "node-a", "zone-1")
        .await
        .unwrap();
    a.ack().await;
    let mut b = Agent::connect(channel.clone(), "node-b", "zone-1")
        .await
        .unwrap();
    b.ack().await;
    a.send(report(1, vec![summary("node-a", "node-b", 100.0, 10, 10)]))
        .await;
    assert_eq!(a.ack().await, 1);

    let mut nan = summary("node-a", "node-b", 100.0, 10, 10);
    nan.rtt.as_mut().unwrap().p50_us = f64::NAN;
    let mut negative = summary("node-a", "node-b", 100.0, 10, 10);
    negative.rtt.as_mut().unwrap().min_us = -1.0;
    let mut empty_dst = summary("node-a", "node-b", 100.0, 10, 10);
    empty_dst.dst.clear();
    let cases: Vec<(&str, Vec<v1::PathSummary>)> = vec![
        (
            "paths[1].src",
            vec![
                summary("node-a", "node-b", 100.0, 10, 10),
                summary("node-b", "node-a", 100.0, 10, 10),
            ],
        ),
        (
            "paths[0].probes_received",
            vec![summary("node-a", "node-b", 100.0, 10, 11)],
        ),
        ("paths[0].rtt.p50_us", vec![nan]),
        ("paths[0].rtt.min_us", vec![negative]),
        ("paths[0].dst", vec![empty_dst]),
        (
            "paths",
            vec![summary("node-a", "node-b", 1.0, 1, 1); zonemesh_domain::MAX_PATHS_PER_REPORT + 1],
        ),
    ];
    for (i, (field, paths)) in cases.into_iter().enumerate() {
        let sequence = 10 + i as u64;
        a.send(report(sequence, paths)).await;
        match a.next().await {
            Down::Error(e) => {
                assert_eq!(e.code, tonic::Code::InvalidArgument as i32);
                assert_eq!(e.field, field, "{}", e.message);
                assert_eq!(e.sequence, sequence);
            }
            other => panic!("{field}: expected an error, got {other:?}"),
        }
    }
    // The stream is still usable and nothing stored changed.
    a.send(report(2, vec![])).await;
    assert_eq!(a.ack().await, 2);
    let mut topology = v1::topology_client::TopologyClient::new(channel.clone());
    let f = topology
        .get_path(v1::GetPathRequest {
            src: "node-a".into(),
            dst: "node-b".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .figures
        .unwrap();
    assert_eq!(f.probes_sent_total, 10);
    let none = topology
        .get_path(v1::GetPathRequest {
            src: "node-b".into(),
            dst: "node-a".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .figures
        .unwrap();
    assert_eq!(
        none.probes_sent_total, 0,
        "paths[1].src case applied nothing"
    );

    // Unknown names are NOT_FOUND naming them; bad ones INVALID_ARGUMENT naming the field.
    let status = topology
        .get_path(v1::GetPathRequest {
            src: "node-a".into(),
            dst: "ghost".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(status.message(), "dst: unknown node ghost");
    let status = topology
        .rank_nodes(v1::RankNodesRequest {
            candidates: vec!["node-a".into(), "Bad Name".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().starts_with("candidates[1]"),
        "{}",
        status.message()
    );
    let status = topology
        .place(v1::PlaceRequest {
            workers: 1,
            weights: Some(v1::Weights {
                loss: Some(f64::NAN),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().starts_with("weights.loss"),
        "{}",
        status.message()
    );
    let status = topology
        .place(v1::PlaceRequest {
            workers: 3,
            zone_policy: v1::ZonePolicy::RequireOne as i32,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    for (field, request) in [
        (
            "collective",
            v1::PlaceRequest {
                workers: 1,
                collective: 42,
                bytes_per_iteration: 1,
                ..Default::default()
            },
        ),
        (
            "bytes_per_iteration",
            v1::PlaceRequest {
                workers: 1,
                collective: v1::Collective::Ring as i32,
                bytes_per_iteration: (64 << 30) + 1,
                ..Default::default()
            },
        ),
        (
            "servers",
            v1::PlaceRequest {
                workers: 1,
                collective: v1::Collective::ParameterServer as i32,
                bytes_per_iteration: 1,
                servers: 2,
                ..Default::default()
            },
        ),
    ] {
        let status = topology.place(request).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(
            status.message().starts_with(field),
            "{field}: {}",
            status.message()
        );
    }
    let status = topology
        .list_nodes(v1::ListNodesRequest {
            zone: "nowhere".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(status.message(), "zone: unknown zone nowhere");
    server.stop().await;
}

#[tokio::test]
async fn a_restarted_server_has_the_matrix_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Some(dir.path().to_owned())).await;
    let channel = server.channel().await;
    let mut a = Agent::connect(channel.clone(), "node-a", "zone-1")
        .await
        .unwrap();
    a.ack().await;
    let mut c = Agent::connect(channel.clone(), "node-c", "zone-2")
        .await
        .unwrap();
    c.ack().await;
    a.send(report(7, vec![summary("node-a", "node-c", 900.0, 10, 10)]))
        .await;
    assert_eq!(a.ack().await, 7);
    let before = v1::topology_client::TopologyClient::new(channel)
        .list_zones(v1::ListZonesRequest::default())
        .await
        .unwrap()
        .into_inner();
    drop((a, c));
    server.stop().await;

    let server = Server::start(Some(dir.path().to_owned())).await;
    let channel = server.channel().await;
    let mut after = v1::topology_client::TopologyClient::new(channel.clone())
        .list_zones(v1::ListZonesRequest::default())
        .await
        .unwrap()
        .into_inner();
    // Ages moved on; everything else is as it was.
    for link in after.links.iter_mut() {
        let f = link.figures.as_mut().unwrap();
        let b = before
            .links
            .iter()
            .find(|l| l.src_zone == link.src_zone)
            .unwrap();
        f.latency_age_ms = b.figures.as_ref().unwrap().latency_age_ms;
    }
    assert_eq!(after.links, before.links);
    let mut a = Agent::connect(channel, "node-a", "zone-1").await.unwrap();
    assert_eq!(a.ack().await, 7, "the applied sequence survived");
    server.stop().await;
}

/// `GetTiers` until `done` holds (10 s at most).
async fn tiers_until(
    channel: &Channel,
    done: impl Fn(&zonemesh_domain::Tiers) -> bool,
) -> zonemesh_domain::Tiers {
    let mut client = v1::topology_client::TopologyClient::new(channel.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let wire = client
            .get_tiers(v1::GetTiersRequest {})
            .await
            .unwrap()
            .into_inner();
        let tiers = zonemesh_domain::Tiers::try_from(wire).expect("valid tiers");
        if done(&tiers) {
            return tiers;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "tiers never got there: {tiers:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn groups_of(tiers: &zonemesh_domain::Tiers) -> Vec<(String, String)> {
    tiers
        .zones
        .iter()
        .map(|z| (z.name.to_string(), z.group.to_string()))
        .collect()
}

#[tokio::test]
async fn tier_names_and_groups_survive_a_restart_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Some(dir.path().to_owned())).await;
    let channel = server.channel().await;
    let mut agents = Vec::new();
    for (node, zone) in [
        ("node-a", "zone-1"),
        ("node-b", "zone-2"),
        ("node-c", "zone-3"),
    ] {
        let mut agent = Agent::connect(channel.clone(), node, zone).await.unwrap();
        agent.ack().await;
        agents.push(agent);
    }
    // Three far zones first: three groups, named in zone order.
    agents[0]
        .send(report(
            1,
            vec![
                summary("node-a", "node-b", 8_000.0, 10, 10),
                summary("node-a", "node-c", 8_000.0, 10, 10),
            ],
        ))
        .await;
    agents[1]
        .send(report(
            1,
            vec![summary("node-b", "node-c", 8_000.0, 10, 10)],
        ))
        .await;
    let apart = tiers_until(&channel, |t| {
        t.groups.len() == 3 && t.cluster.unmeasured_pairs == 0
    })
    .await;
    assert_eq!(
        groups_of(&apart),
        [
            ("zone-1".into(), "group-1".into()),
            ("zone-2".into(), "group-2".into()),
            ("zone-3".into(), "group-3".into()),
        ]
    );
    // zone-1 and zone-2 come near (the median of the windows by replies): one group, which
    // keeps the first zone's name; zone-3 keeps group-3, which a derivation from nothing would
    // call group-2.
    agents[0]
        .send(report(
            2,
            vec![summary("node-a", "node-b", 1_000.0, 100, 100)],
        ))
        .await;
    let near = tiers_until(&channel, |t| t.groups.len() == 2).await;
    let expected: Vec<(String, String)> = vec![
        ("zone-1".into(), "group-1".into()),
        ("zone-2".into(), "group-1".into()),
        ("zone-3".into(), "group-3".into()),
    ];
    assert_eq!(groups_of(&near), expected);
    // Every report acknowledged; the tiers' state goes with the next write (at the latest the
    // one of the orderly stop).
    for (agent, last) in agents.iter_mut().zip([2, 1]) {
        while agent.ack().await < last {}
    }
    drop(agents);
    server.stop().await;

    let server = Server::start(Some(dir.path().to_owned())).await;
    let channel = server.channel().await;
    let restored = tiers_until(&channel, |_| true).await;
    assert_eq!(groups_of(&restored), expected, "{restored:#?}");
    assert_eq!(
        restored.groups, near.groups,
        "the same tree, figures included"
    );
    // And it stays so: later derivations from the restored state change nothing.
    let later = tiers_until(&channel, |t| t.computed_at > restored.computed_at).await;
    assert_eq!(groups_of(&later), expected);
    server.stop().await;
}

/// A node that may be losing (6 of 1,000 probes on each of its paths out, 0.3 % of its paths'
/// probes inside its zone: too few to show a fault) is probed densely: every plan that targets it
/// has four times the probes a train, and its own plan has them to every peer.
#[tokio::test]
async fn a_suspect_nodes_paths_are_probed_densely() {
    let server = Server::start(None).await;
    let channel = server.channel().await;
    let names = ["node-a", "node-b", "node-c", "node-d"];
    let mut agents = Vec::new();
    for n in names {
        let mut agent = Agent::connect(channel.clone(), n, "zone-1").await.unwrap();
        assert_eq!(agent.ack().await, 0);
        agents.push(agent);
    }
    for (agent, src) in agents.iter_mut().zip(names) {
        let lost = if src == "node-a" { 6 } else { 0 };
        let paths = names
            .iter()
            .filter(|d| **d != src)
            .map(|dst| summary(src, dst, 100.0, 1_000, 1_000 - lost))
            .collect();
        agent.send(report(1, paths)).await;
        assert_eq!(agent.ack().await, 1);
    }
    let trains = |plan: &v1::ProbePlan| -> Vec<(String, u32)> {
        plan.targets
            .iter()
            .map(|t| (t.node.clone(), t.train_size))
            .collect()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut b_plan = agents[1].plan().await;
    while trains(&b_plan)
        != [
            ("node-a".into(), 20),
            ("node-c".into(), 5),
            ("node-d".into(), 5),
        ]
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "node-b's plan never probed node-a densely: {b_plan:?}"
        );
        b_plan = agents[1].plan().await;
    }
    let mut a_plan = agents[0].plan().await;
    while a_plan.targets.len() != 3 || trains(&a_plan).iter().any(|(_, size)| *size != 20) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "node-a's plan: {a_plan:?}"
        );
        a_plan = agents[0].plan().await;
    }
    // No fault: the suspicion alone changed the plans.
    let faults = v1::topology_client::TopologyClient::new(channel)
        .list_faults(v1::ListFaultsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(faults.faults.is_empty(), "{faults:?}");
    // The suspect is counted where Prometheus looks.
    let http = server.bound.http;
    let metrics =
        tokio::task::spawn_blocking(move || zonemesh_lab::process::http_get(http, "/metrics"))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(
        zonemesh_lab::process::sample(&metrics, "zonemesh_fault_suspects"),
        Some(1.0),
        "{metrics}"
    );
    server.stop().await;
}
