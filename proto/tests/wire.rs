//! The wire protocol: every message survives encoding, the descriptor set describes both services,
//! and bad wire values stop at the edge with the field's name.

use prost::Message;
use zonemesh_domain::{
    Element, Fault, FaultKind, Faults, Hello, NodeName, PathSample, ProbePlan, ProbeTarget, Report,
    Severity, ThroughputGrant, UnixMs, Weights, ZoneName,
};
use zonemesh_proto::v1;

fn rtt() -> v1::RttStats {
    v1::RttStats {
        samples: 9,
        min_us: 40.0,
        p50_us: 52.5,
        p90_us: 70.0,
        p99_us: 90.0,
        max_us: 95.0,
        mean_us: 55.0,
        jitter_us: 3.5,
    }
}

fn summary() -> v1::PathSummary {
    v1::PathSummary {
        src: "node-a".into(),
        dst: "node-b".into(),
        window_start_unix_ms: 1_700_000_000_000,
        window_end_unix_ms: 1_700_000_010_000,
        probes_sent: 10,
        probes_received: 9,
        rtt: Some(rtt()),
        throughput: Some(v1::Throughput {
            throughput_bps: 8_000_000.0,
            bytes: 1_000_000,
            duration_us: 1_000_000,
            warmup_us: 500_000,
            streams: 1,
            segments_sent: 700,
            segments_retransmitted: 7,
            exchanges: 32,
            exchange_p50_us: 80.0,
            exchange_mean_us: 95.5,
            exchange_max_us: 410.0,
            exchange_timeout_us: 204_000.0,
        }),
        method: v1::IcmpMode::Raw as i32,
    }
}

fn hello() -> v1::Hello {
    v1::Hello {
        node_name: "node-a".into(),
        zone: "zone-1".into(),
        region: "region-x".into(),
        addresses: vec!["10.1.0.1".into(), "fd00::1".into()],
        agent_version: "0.1.0".into(),
        icmp_mode: v1::IcmpMode::Raw as i32,
        probe_port: 7402,
    }
}

fn figures() -> v1::PathFigures {
    v1::PathFigures {
        latency_provenance: v1::Provenance::Measured as i32,
        latency_age_ms: 1200,
        rtt: Some(rtt()),
        loss_ratio: 0.1,
        loss_upper_95_ratio: 0.4,
        probes_sent: 10,
        probes_received: 9,
        throughput_provenance: v1::Provenance::Estimated as i32,
        throughput_age_ms: 60_000,
        throughput_bps: 1e9,
        throughput_smoothed_bps: 9e8,
        stale: true,
        probes_sent_total: 100,
        probes_received_total: 90,
        retransmit_ratio: Some(0.01),
        message_exchange_p50_us: Some(80.0),
        message_exchange_mean_us: Some(95.5),
    }
}

/// A node's rate fault on the wire.
fn rate_fault() -> v1::Fault {
    v1::Fault {
        element: v1::FaultElement::Node as i32,
        a: "a".into(),
        kind: v1::FaultKind::Rate as i32,
        severity: v1::FaultSeverity::Down as i32,
        figure: 9.5e6,
        reference: 9.5e8,
        evidence: vec![v1::FaultPath {
            src: "a".into(),
            dst: "b".into(),
        }],
        evidence_paths: 3,
        since_unix_ms: 1,
        ..Default::default()
    }
}

fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(message: M) {
    let bytes = message.encode_to_vec();
    let back = M::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(back, message);
}

#[test]
fn every_ingest_message_round_trips() {
    let agent_messages = [
        v1::agent_message::Kind::Hello(hello()),
        v1::agent_message::Kind::Report(v1::Report {
            sequence: 7,
            paths: vec![summary(), summary()],
        }),
    ];
    for kind in agent_messages {
        round_trip(v1::AgentMessage { kind: Some(kind) });
    }
    let aggregator_messages = [
        v1::aggregator_message::Kind::Ack(v1::Ack { sequence: 42 }),
        v1::aggregator_message::Kind::Plan(v1::ProbePlan {
            version: 3,
            window_ms: 10_000,
            targets: vec![v1::ProbeTarget {
                node: "node-b".into(),
                addresses: vec!["10.1.0.2".into()],
                probe_port: 7402,
                interval_ms: 1000,
                train_size: 5,
                train_gap_ms: 20,
                timeout_ms: 1000,
                zone: "zone-a".into(),
            }],
        }),
        v1::aggregator_message::Kind::Grant(v1::ThroughputGrant {
            grant_id: 9,
            peer: "node-b".into(),
            peer_address: "10.1.0.2".into(),
            peer_port: 7402,
            start_unix_ms: 1_700_000_000_000,
            duration_ms: 3000,
            warmup_ms: 1000,
            streams: 1,
            epoch: 2,
        }),
        v1::aggregator_message::Kind::Error(v1::Error {
            code: 3,
            message: "bad".into(),
            field: "paths[0].src".into(),
            sequence: 5,
        }),
    ];
    for kind in aggregator_messages {
        round_trip(v1::AggregatorMessage { kind: Some(kind) });
    }
}

#[test]
fn every_topology_message_round_trips() {
    round_trip(v1::ListNodesRequest {
        zone: "z".into(),
        page_size: 10,
        page_token: "20".into(),
    });
    round_trip(v1::ListNodesResponse {
        nodes: vec![v1::Node {
            name: "node-a".into(),
            zone: "z".into(),
            region: "r".into(),
            addresses: vec!["10.0.0.1".into()],
            state: v1::NodeState::Unreachable as i32,
            last_seen_unix_ms: 5,
            agent_version: "1".into(),
            icmp_mode: v1::IcmpMode::Tcp as i32,
            probe_port: 7402,
            zone_rtt_p50_us: 50.0,
            zone_loss_ratio: 0.01,
            zone_throughput_bps: 1e9,
            zone_paths_measured: 3,
            connected: true,
            state_reason: "every probe to it was lost".into(),
            nodes_left_out: vec!["node-b".into()],
            egress_cap_bps: 9.4e8,
            ingress_cap_bps: 1e8,
        }],
        next_page_token: "1".into(),
    });
    round_trip(v1::ListZonesRequest::default());
    round_trip(v1::ListZonesResponse {
        zones: vec![v1::Zone {
            name: "z".into(),
            region: "r".into(),
            nodes: 3,
            ready_nodes: 2,
        }],
        links: vec![v1::ZoneLink {
            src_zone: "z".into(),
            dst_zone: "y".into(),
            figures: Some(figures()),
            measured_paths: 4,
            nodes_left_out: vec!["a2".into()],
            faults: Vec::new(),
        }],
        next_page_token: "1".into(),
    });
    round_trip(v1::GetPathRequest {
        src: "a".into(),
        dst: "b".into(),
    });
    round_trip(v1::GetPathResponse {
        src: "a".into(),
        dst: "b".into(),
        figures: Some(figures()),
        faults: vec![rate_fault()],
    });
    round_trip(v1::ListFaultsResponse {
        faults: vec![rate_fault()],
        evaluated_unix_ms: 2,
    });
    round_trip(v1::GetMatrixRequest {
        metric: v1::Metric::LossRatio as i32,
        nodes: vec!["a".into(), "b".into()],
        zone: String::new(),
        page_size: 1,
        page_token: "1".into(),
    });
    round_trip(v1::GetMatrixResponse {
        metric: v1::Metric::ThroughputBps as i32,
        nodes: vec!["a".into(), "b".into()],
        cells: vec![
            v1::MatrixCell {
                value: 1.5,
                provenance: v1::Provenance::Estimated as i32,
                age_ms: 3,
                stale: false,
            };
            4
        ],
        first_row: 2,
        next_page_token: "4".into(),
    });
    round_trip(v1::RankNodesRequest {
        candidates: vec!["a".into()],
        zone: "z".into(),
        peers: vec!["b".into()],
        weights: Some(v1::Weights {
            loss: Some(2.0),
            delay: None,
            throughput: Some(0.0),
        }),
        limit: 3,
    });
    round_trip(v1::RankNodesResponse {
        nodes: vec![v1::RankedNode {
            node: "a".into(),
            zone: "z".into(),
            score: 0.7,
            state: v1::NodeState::Ready as i32,
            reason: "r".into(),
            rtt_p50_us: 10.0,
            loss_ratio: 0.0,
            throughput_bps: 1e9,
            paths_measured: 2,
            paths_estimated: 1,
            oldest_age_ms: 100,
            nodes_left_out: vec!["b".into()],
        }],
    });
    round_trip(v1::PlaceRequest {
        workers: 4,
        candidates: vec![v1::Candidate {
            node: "a".into(),
            slots: 2,
        }],
        zone_policy: v1::ZonePolicy::RequireOne as i32,
        weights: None,
        exclude: vec!["b".into()],
        collective: v1::Collective::ParameterServer as i32,
        bytes_per_iteration: 25 << 20,
        servers: 2,
        alternatives: 3,
    });
    round_trip(v1::PlaceResponse {
        assignments: vec![v1::Assignment {
            node: "a".into(),
            zone: "z".into(),
            workers: 2,
        }],
        zones: vec!["z".into()],
        worst_rtt_us: 80.0,
        worst_loss_ratio: 0.01,
        bottleneck_throughput_bps: 9e8,
        latency_provenance: v1::Provenance::Measured as i32,
        throughput_provenance: v1::Provenance::Unknown as i32,
        oldest_age_ms: 10,
        explanation: "one zone".into(),
        rank_order: vec!["a".into(), "a".into()],
        predicted_seconds: 0.012,
        bottleneck: Some(v1::Bottleneck {
            kind: v1::BottleneckKind::Link as i32,
            from: "a".into(),
            to: "b".into(),
            why: "the link".into(),
        }),
        prediction_figures: 4,
        estimated_figures: 1,
        alternatives: vec![v1::PlaceAlternative {
            rank_order: vec!["b".into(), "a".into()],
            predicted_seconds: 0.013,
        }],
    });
}

#[test]
fn checked_types_round_trip_through_the_wire() {
    let report = Report::try_from(v1::Report {
        sequence: 1,
        paths: vec![summary()],
    })
    .expect("valid report");
    let timeout = report.paths[0].throughput.and_then(|t| t.exchange?.timeout);
    assert_eq!(timeout.map(|t| t.get()), Some(204_000.0), "{report:?}");
    let wire = v1::Report::from(report.clone());
    assert_eq!(Report::try_from(wire).expect("still valid"), report);

    let hello_checked = Hello::try_from(hello()).expect("valid hello");
    assert_eq!(v1::Hello::from(hello_checked), hello());
}

#[test]
fn faults_round_trip_and_bad_ones_name_the_field() {
    let node = |n: &str| NodeName::parse("node", n).unwrap();
    let zone = |z: &str| ZoneName::parse("zone", z).unwrap();
    let faults = Faults {
        faults: vec![
            Fault {
                element: Element::Node(node("a2")),
                kind: FaultKind::Loss,
                severity: Severity::Degraded,
                figure: 0.05,
                interval: Some((0.04, 0.06)),
                probes: 1_800,
                reference: None,
                evidence: vec![(node("a1"), node("a2"))],
                evidence_paths: 6,
                since: UnixMs(1_000),
                clean_since: Some(UnixMs(2_000)),
            },
            Fault {
                element: Element::zone_link(zone("zone-b"), zone("zone-a")),
                kind: FaultKind::Delay,
                severity: Severity::Down,
                figure: 900.0,
                interval: None,
                probes: 0,
                reference: Some(2_000.0),
                evidence: vec![],
                evidence_paths: 4,
                since: UnixMs(1_500),
                clean_since: None,
            },
        ],
        evaluated_at: Some(UnixMs(3_000)),
    };
    let wire = v1::ListFaultsResponse::from(faults.clone());
    assert_eq!(Faults::try_from(wire.clone()).unwrap(), faults);
    let mut bad = wire;
    bad.faults[1].evidence = vec![v1::FaultPath {
        src: "a1".into(),
        dst: String::new(),
    }];
    let e = Faults::try_from(bad.clone()).unwrap_err().to_string();
    assert!(e.contains("faults[1].evidence.dst"), "{e}");
    bad.faults[0].severity = 7;
    let e = Faults::try_from(bad).unwrap_err().to_string();
    assert!(e.contains("faults[0].severity"), "{e}");
}

fn probe_target(node: &str, zone: &str, addresses: &[&str]) -> ProbeTarget {
    ProbeTarget {
        node: NodeName::parse("node", node).unwrap(),
        zone: ZoneName::parse("zone", zone).unwrap(),
        addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
        probe_port: 7402,
        interval_ms: 1000,
        train_size: 5,
        train_gap_ms: 20,
        timeout_ms: 1000,
    }
}

fn grant(peer_address: Option<&str>) -> ThroughputGrant {
    ThroughputGrant {
        id: 9,
        peer: NodeName::parse("peer", "node-b").unwrap(),
        peer_address: peer_address.map(|a| a.parse().unwrap()),
        peer_port: 7402,
        start: UnixMs(1_700_000_000_000),
        duration_ms: 3000,
        warmup_ms: 1000,
        streams: 4,
        epoch: 7,
    }
}

#[test]
fn plans_and_grants_round_trip_through_the_wire() {
    let plans = [
        ProbePlan {
            version: 0,
            window_ms: 0,
            targets: vec![],
        },
        ProbePlan {
            version: 3,
            window_ms: 10_000,
            targets: vec![
                probe_target("node-b", "zone-a", &["10.1.0.2"]),
                probe_target("node-c", "Zone_B", &["fd00::3", "10.1.0.3"]),
            ],
        },
        ProbePlan {
            version: u64::MAX,
            window_ms: u32::MAX,
            targets: vec![ProbeTarget {
                probe_port: u16::MAX,
                interval_ms: u32::MAX,
                train_size: 1,
                train_gap_ms: 0,
                timeout_ms: 1,
                ..probe_target("c", "z", &["::1"])
            }],
        },
    ];
    for plan in plans {
        let wire = v1::ProbePlan::from(plan.clone());
        round_trip(wire.clone());
        assert_eq!(ProbePlan::try_from(wire), Ok(plan));
    }
    let grants = [
        grant(Some("10.1.0.2")),
        grant(Some("fd00::2")),
        grant(None),
        ThroughputGrant {
            start: UnixMs(0),
            duration_ms: 0,
            warmup_ms: 0,
            streams: 0,
            ..grant(Some("10.1.0.2"))
        },
    ];
    for g in grants {
        let wire = v1::ThroughputGrant::from(g.clone());
        round_trip(wire.clone());
        assert_eq!(ThroughputGrant::try_from(wire), Ok(g));
    }
}

/// One bad value per case, in the second of two targets: the whole plan is refused naming the
/// field, and `probe_plan` keeps the first target.
#[test]
fn bad_plan_targets_are_refused_with_the_field_name() {
    type Edit = fn(&mut v1::ProbeTarget);
    let cases: &[(&str, Edit)] = &[
        ("targets[1].node", |t| t.node.clear()),
        ("targets[1].node", |t| t.node = "Node_C".into()),
        ("targets[1].zone", |t| t.zone.clear()),
        ("targets[1].zone", |t| t.zone = "zone one".into()),
        ("targets[1].addresses", |t| t.addresses.clear()),
        ("targets[1].addresses[1]", |t| {
            t.addresses[1] = "10.1.0".into()
        }),
        ("targets[1].probe_port", |t| t.probe_port = 0),
        ("targets[1].probe_port", |t| t.probe_port = 70_000),
        ("targets[1].interval_ms", |t| t.interval_ms = 0),
        ("targets[1].train_size", |t| t.train_size = 0),
        ("targets[1].timeout_ms", |t| t.timeout_ms = 0),
    ];
    let good = probe_target("node-b", "zone-a", &["10.1.0.2"]);
    for (field, edit) in cases {
        let mut bad = v1::ProbeTarget::from(probe_target("node-c", "zone-a", &["10.1.0.3", "::3"]));
        edit(&mut bad);
        let wire = v1::ProbePlan {
            version: 4,
            window_ms: 10_000,
            targets: vec![good.clone().into(), bad],
        };
        let err = ProbePlan::try_from(wire.clone()).expect_err(field);
        assert_eq!(err.field(), *field, "case {field}: {err}");

        let (plan, refused) = zonemesh_proto::convert::probe_plan(wire);
        assert_eq!((plan.version, plan.window_ms), (4, 10_000));
        assert_eq!(plan.targets, std::slice::from_ref(&good), "case {field}");
        let refused: Vec<&str> = refused.iter().map(|e| e.field()).collect();
        assert_eq!(refused, [*field]);
    }
}

#[test]
fn bad_grants_are_refused_with_the_field_name() {
    type Edit = fn(&mut v1::ThroughputGrant);
    let cases: &[(&str, Edit)] = &[
        ("peer", |g| g.peer.clear()),
        ("peer", |g| g.peer = "Node_B".into()),
        ("peer_address", |g| g.peer_address = "node-b".into()),
        ("peer_port", |g| g.peer_port = 0),
        ("peer_port", |g| g.peer_port = 65_536),
        ("start_unix_ms", |g| g.start_unix_ms = -1),
    ];
    for (field, edit) in cases {
        let mut bad = v1::ThroughputGrant::from(grant(Some("10.1.0.2")));
        edit(&mut bad);
        let err = ThroughputGrant::try_from(bad).expect_err(field);
        assert_eq!(err.field(), *field, "case {field}: {err}");
    }
}

#[test]
fn descriptor_set_lists_both_services() {
    let set = prost_types::FileDescriptorSet::decode(zonemesh_proto::FILE_DESCRIPTOR_SET)
        .expect("descriptor set decodes");
    let services: Vec<String> = set
        .file
        .iter()
        .flat_map(|f| {
            let package = f.package().to_owned();
            f.service
                .iter()
                .map(move |s| format!("{package}.{}", s.name()))
        })
        .collect();
    assert!(
        services.contains(&zonemesh_proto::INGEST_SERVICE.to_owned()),
        "{services:?}"
    );
    assert!(
        services.contains(&zonemesh_proto::TOPOLOGY_SERVICE.to_owned()),
        "{services:?}"
    );
    let topology = set
        .file
        .iter()
        .flat_map(|f| f.service.iter())
        .find(|s| s.name() == "Topology")
        .expect("Topology");
    let methods: Vec<&str> = topology.method.iter().map(|m| m.name()).collect();
    assert_eq!(
        methods,
        [
            "ListNodes",
            "ListZones",
            "GetPath",
            "GetMatrix",
            "RankNodes",
            "Place",
            "GetTiers",
            "ListFaults"
        ]
    );
}

/// One bad value per case: the error must name exactly this field.
#[test]
fn bad_path_summaries_are_refused_with_the_field_name() {
    type Edit = fn(&mut v1::PathSummary);
    let cases: &[(&str, Edit)] = &[
        ("paths[0].src", |s| s.src.clear()),
        ("paths[0].dst", |s| s.dst = "Node_B".into()),
        ("paths[0].dst", |s| s.dst = s.src.clone()),
        ("paths[0].window_start_unix_ms", |s| {
            s.window_start_unix_ms = -1
        }),
        ("paths[0].window_end_unix_ms", |s| {
            s.window_end_unix_ms = s.window_start_unix_ms
        }),
        ("paths[0].probes_received", |s| s.probes_received = 11),
        ("paths[0].rtt", |s| s.rtt = None),
        ("paths[0].rtt", |s| s.probes_received = 0),
        ("paths[0].rtt.p50_us", |s| {
            s.rtt.as_mut().unwrap().p50_us = f64::NAN
        }),
        ("paths[0].rtt.min_us", |s| {
            s.rtt.as_mut().unwrap().min_us = -3.0
        }),
        ("paths[0].rtt.max_us", |s| {
            s.rtt.as_mut().unwrap().max_us = f64::INFINITY
        }),
        ("paths[0].rtt.p90_us", |s| {
            s.rtt.as_mut().unwrap().p90_us = 41.0
        }),
        ("paths[0].rtt.mean_us", |s| {
            s.rtt.as_mut().unwrap().mean_us = 99.0
        }),
        ("paths[0].rtt.samples", |s| {
            s.rtt.as_mut().unwrap().samples = 0
        }),
        ("paths[0].rtt.samples", |s| {
            s.rtt.as_mut().unwrap().samples = 10
        }),
        ("paths[0].rtt.jitter_us", |s| {
            s.rtt.as_mut().unwrap().jitter_us = f64::NAN
        }),
        ("paths[0].throughput.throughput_bps", |s| {
            s.throughput.as_mut().unwrap().throughput_bps = f64::NAN
        }),
        ("paths[0].throughput.throughput_bps", |s| {
            s.throughput.as_mut().unwrap().throughput_bps = 1.0
        }),
        ("paths[0].throughput.duration_us", |s| {
            s.throughput.as_mut().unwrap().duration_us = 0
        }),
        ("paths[0].throughput.streams", |s| {
            s.throughput.as_mut().unwrap().streams = 0
        }),
        ("paths[0].throughput.segments_sent", |s| {
            s.throughput.as_mut().unwrap().segments_sent = 0
        }),
        ("paths[0].throughput.segments_retransmitted", |s| {
            s.throughput.as_mut().unwrap().segments_retransmitted = 701
        }),
        ("paths[0].throughput.exchange_p50_us", |s| {
            s.throughput.as_mut().unwrap().exchange_p50_us = f64::INFINITY
        }),
        ("paths[0].throughput.exchange_p50_us", |s| {
            s.throughput.as_mut().unwrap().exchange_p50_us = 500.0
        }),
        ("paths[0].throughput.exchange_mean_us", |s| {
            s.throughput.as_mut().unwrap().exchange_mean_us = -1.0
        }),
        ("paths[0].throughput.exchange_mean_us", |s| {
            s.throughput.as_mut().unwrap().exchange_mean_us = 411.0
        }),
        ("paths[0].throughput.exchange_timeout_us", |s| {
            s.throughput.as_mut().unwrap().exchange_timeout_us = f64::NAN
        }),
        ("paths[0].throughput.exchange_timeout_us", |s| {
            s.throughput.as_mut().unwrap().exchange_timeout_us = -5.0
        }),
        ("paths[0].method", |s| s.method = 99),
    ];
    for (field, edit) in cases {
        let mut bad = summary();
        edit(&mut bad);
        let err = Report::try_from(v1::Report {
            sequence: 1,
            paths: vec![bad],
        })
        .expect_err(field);
        assert_eq!(err.field(), *field, "case {field}: {err}");
        assert!(err.to_string().starts_with(field), "{err}");
    }
}

#[test]
fn bad_hellos_are_refused_with_the_field_name() {
    type Edit = fn(&mut v1::Hello);
    let cases: &[(&str, Edit)] = &[
        ("node_name", |h| h.node_name.clear()),
        ("node_name", |h| h.node_name = "-a".into()),
        ("node_name", |h| h.node_name = "a".repeat(254)),
        ("zone", |h| h.zone.clear()),
        ("zone", |h| h.zone = "zone one".into()),
        ("region", |h| h.region = "r/1".into()),
        ("addresses", |h| h.addresses.clear()),
        ("addresses[1]", |h| h.addresses[1] = "not-an-ip".into()),
        ("agent_version", |h| h.agent_version = "v".repeat(500)),
        ("icmp_mode", |h| h.icmp_mode = 0),
        ("icmp_mode", |h| h.icmp_mode = 17),
        ("probe_port", |h| h.probe_port = 0),
        ("probe_port", |h| h.probe_port = 70_000),
    ];
    for (field, edit) in cases {
        let mut bad = hello();
        edit(&mut bad);
        let err = Hello::try_from(bad).expect_err(field);
        assert_eq!(err.field(), *field, "case {field}: {err}");
    }
}

#[test]
fn reports_are_refused_for_sequence_size_and_foreign_sources() {
    let err = Report::try_from(v1::Report {
        sequence: 0,
        paths: vec![],
    })
    .unwrap_err();
    assert_eq!(err.field(), "sequence");

    let err = Report::try_from(v1::Report {
        sequence: 1,
        paths: vec![summary(); zonemesh_domain::MAX_PATHS_PER_REPORT + 1],
    })
    .unwrap_err();
    assert_eq!(err.field(), "paths");

    let me = NodeName::parse("node", "node-b").unwrap();
    let err = zonemesh_proto::convert::report_from_agent(
        &me,
        v1::Report {
            sequence: 1,
            paths: vec![summary()],
        },
    )
    .unwrap_err();
    assert_eq!(err.field(), "paths[0].src");
    assert!(err.problem().contains("node-b"), "{err}");
}

#[test]
fn weights_default_and_refuse_bad_values() {
    assert_eq!(
        zonemesh_proto::convert::weights(None).unwrap(),
        Weights::DEFAULT
    );
    let partial = zonemesh_proto::convert::weights(Some(v1::Weights {
        loss: Some(3.0),
        ..Default::default()
    }))
    .unwrap();
    assert_eq!(partial.loss, 3.0);
    assert_eq!(partial.delay, Weights::DEFAULT.delay);
    for (field, wire) in [
        (
            "weights.loss",
            v1::Weights {
                loss: Some(f64::NAN),
                ..Default::default()
            },
        ),
        (
            "weights.delay",
            v1::Weights {
                delay: Some(-1.0),
                ..Default::default()
            },
        ),
        (
            "weights",
            v1::Weights {
                loss: Some(0.0),
                delay: Some(0.0),
                throughput: Some(0.0),
            },
        ),
    ] {
        assert_eq!(
            zonemesh_proto::convert::weights(Some(wire))
                .unwrap_err()
                .field(),
            field
        );
    }
}

#[test]
fn names_follow_kubernetes_rules() {
    for good in ["a", "node-1", "ip-10-0-0-1.ec2.internal"] {
        NodeName::parse("n", good).unwrap();
    }
    for bad in ["", "A", "node_1", "node-", ".node", "nöde"] {
        assert!(NodeName::parse("n", bad).is_err(), "{bad:?}");
    }
    for good in ["us-east-1a", "Zone_A", "z.1"] {
        ZoneName::parse("z", good).unwrap();
    }
    let loss = PathSample::try_from(summary()).unwrap().loss().unwrap();
    assert!((loss.get() - 0.1).abs() < 1e-12);
}
#[test]
fn bad_place_requests_name_the_field() {
    let cases = [
        (
            "workers",
            v1::PlaceRequest {
                workers: 0,
                ..Default::default()
            },
        ),
        (
            "candidates[0].slots",
            v1::PlaceRequest {
                workers: 1,
                candidates: vec![v1::Candidate {
                    node: "a".into(),
                    slots: 0,
                }],
                ..Default::default()
            },
        ),
        (
            "zone_policy",
            v1::PlaceRequest {
                workers: 1,
                zone_policy: 9,
                ..Default::default()
            },
        ),
        (
            "exclude[0]",
            v1::PlaceRequest {
                workers: 1,
                exclude: vec![String::new()],
                ..Default::default()
            },
        ),
    ];
    let job = |collective: i32, bytes: u64, servers: u32| v1::PlaceRequest {
        workers: 4,
        collective,
        bytes_per_iteration: bytes,
        servers,
        ..Default::default()
    };
    let ring = v1::Collective::Ring as i32;
    let ps = v1::Collective::ParameterServer as i32;
    let job_cases = [
        ("collective", job(17, 1_000, 0)),
        ("bytes_per_iteration", job(ring, 0, 0)),
        ("bytes_per_iteration", job(ring, (64 << 30) + 1, 0)),
        ("bytes_per_iteration", job(0, 1_000, 0)),
        ("servers", job(ps, 1_000, 5)),
        ("servers", job(ring, 1_000, 1)),
        ("servers", job(0, 0, 1)),
        (
            "alternatives",
            v1::PlaceRequest {
                alternatives: 17,
                ..job(ring, 1_000, 0)
            },
        ),
    ];
    for (field, wire) in cases.into_iter().chain(job_cases) {
        assert_eq!(
            zonemesh_domain::PlaceQuery::try_from(wire)
                .unwrap_err()
                .field(),
            field
        );
    }
}

#[test]
fn a_job_reaches_the_domain_with_its_servers() {
    let q = zonemesh_domain::PlaceQuery::try_from(v1::PlaceRequest {
        workers: 4,
        collective: v1::Collective::ParameterServer as i32,
        bytes_per_iteration: 64 << 30,
        servers: 4,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        q.job,
        Some(zonemesh_domain::Job {
            collective: zonemesh_domain::Collective::ParameterServer { servers: 4 },
            bytes_per_iteration: 64 << 30,
        })
    );
    let none = zonemesh_domain::PlaceQuery::try_from(v1::PlaceRequest {
        workers: 4,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(none.job, None, "unspecified keeps today's placement");
}

fn tiers() -> v1::GetTiersResponse {
    let figure = |a: &str, b: &str, value| v1::ZonePairFigure {
        zone_a: a.into(),
        zone_b: b.into(),
        value,
    };
    v1::GetTiersResponse {
        computed_at_unix_ms: 1_000,
        thresholds: Some(zonemesh_domain::TierThresholds::default().into()),
        zones: vec![
            v1::TierZone {
                name: "zone-a".into(),
                group: "group-1".into(),
                nodes: vec!["a1".into(), "a2".into()],
                fresh: true,
                rtt_us: 80.0,
                throughput_bps: 9e8,
                region: "eu-west".into(),
            },
            v1::TierZone {
                name: "zone-b".into(),
                group: "group-2".into(),
                nodes: vec!["b1".into()],
                fresh: false,
                ..Default::default()
            },
        ],
        groups: vec![
            v1::TierGroup {
                name: "group-1".into(),
                zones: vec!["zone-a".into()],
                inside: Some(v1::CutFigures::default()),
                held: false,
                nearest: Some(v1::TierGroupLink {
                    group: "group-2".into(),
                    figures: Some(v1::CutFigures {
                        worst_rtt: Some(figure("zone-a", "zone-b", 6_000.0)),
                        lowest_throughput: Some(figure("zone-a", "zone-b", 9e8)),
                        ..Default::default()
                    }),
                    cut: v1::TierCut::Rtt as i32,
                }),
            },
            v1::TierGroup {
                name: "group-2".into(),
                zones: vec!["zone-b".into()],
                inside: Some(v1::CutFigures::default()),
                ..Default::default()
            },
        ],
        cluster: Some(v1::CutFigures {
            worst_rtt: Some(figure("zone-a", "zone-b", 6_000.0)),
            ..Default::default()
        }),
        pairs: vec![v1::TierZonePair {
            zone_a: "zone-a".into(),
            zone_b: "zone-b".into(),
            rtt_us: 6_000.0,
            throughput_bps: 9e8,
            fresh: false,
        }],
    }
}

#[test]
fn tiers_round_trip_through_the_wire_and_their_domain_type() {
    round_trip(tiers());
    let domain = zonemesh_domain::Tiers::try_from(tiers()).expect("valid tiers");
    assert_eq!(domain.zones[0].rtt_us, Some(80.0));
    assert_eq!(domain.zones[1].rtt_us, None, "0 is unknown");
    assert_eq!(v1::GetTiersResponse::from(domain), tiers());
}

#[test]
fn bad_tiers_are_refused_with_the_field_name() {
    type Spoil = Box<dyn Fn(&mut v1::GetTiersResponse)>;
    let cases: Vec<(Spoil, &str)> = vec![
        (
            Box::new(|t| t.zones[1].nodes[0] = "B_1".into()),
            "zones[1].nodes[0]",
        ),
        (
            Box::new(|t| t.zones[1].nodes[0] = "a1".into()),
            "zones[1].nodes[0]",
        ),
        (
            Box::new(|t| t.zones[0].group = "group-2".into()),
            "zones[0].group",
        ),
        (Box::new(|t| t.groups[1].zones.clear()), "zones[1].group"),
        (
            Box::new(|t| t.zones[0].rtt_us = f64::NAN),
            "zones[0].rtt_us",
        ),
        (
            Box::new(|t| t.groups[0].nearest.as_mut().unwrap().cut = 0),
            "groups[0].nearest.cut",
        ),
        (
            Box::new(|t| {
                let c = t.cluster.as_mut().unwrap().worst_rtt.as_mut().unwrap();
                c.value = -1.0;
            }),
            "cluster.worst_rtt.value",
        ),
        (
            Box::new(|t| t.thresholds.as_mut().unwrap().leave_rtt_us = 1.0),
            "thresholds.leave_rtt_us",
        ),
    ];
    for (spoil, field) in cases {
        let mut t = tiers();
        spoil(&mut t);
        let err = zonemesh_domain::Tiers::try_from(t).unwrap_err();
        assert_eq!(err.field(), field, "{err}");
    }
}

/// Field 8 of `PathSummary` (`rtt_histogram`, reserved) from an agent of an older build: the
/// summary still decodes, the bytes are skipped, and the domain sample is what it would be
/// without them.
#[test]
fn a_summary_with_the_reserved_histogram_field_still_decodes() {
    let plain = summary().encode_to_vec();
    // Field 8, wire type 2 (length-delimited), three bytes.
    let mut old = plain.clone();
    old.extend_from_slice(&[8 << 3 | 2, 3, 1, 2, 3]);
    let decoded = v1::PathSummary::decode(old.as_slice()).expect("decodes");
    assert_eq!(decoded, summary());
    assert_eq!(
        PathSample::try_from(decoded.clone()).unwrap(),
        PathSample::try_from(summary()).unwrap()
    );
    assert_eq!(decoded.encode_to_vec(), plain, "the old bytes are not kept");
}
