//! What the fuzz targets run (`tests/fuzz`, cargo-fuzz): each function takes arbitrary bytes,
//! returns quietly when they are refused, and panics only on a bug — a panic, a value that
//! should have been refused, or an answer that breaks its own contract. The regression tests
//! (`tests/fuzz-support/tests/fuzz_regressions.rs`) run the same functions over the stored corpus and every input
//! that once failed.

use prost::Message;
use zonemesh_aggregator::server::extender::{self, ExtenderArgs};
use zonemesh_aggregator::store::{Contents, codec};
use zonemesh_domain::{Hello, MatrixQuery, NodeName, PlaceQuery, RankQuery, UnixMs};
use zonemesh_engine::extender::Jobs;
use zonemesh_engine::{EngineConfig, Topology};
use zonemesh_proto::v1;

/// The clock of every fuzzed call.
const NOW: UnixMs = UnixMs(1_800_000_000_000);

/// A small topology to query: two zones, three nodes, measured paths among them.
fn fixture() -> Topology {
    let mut t = Topology::new(EngineConfig::default());
    let nodes = [("a1", "zone-a"), ("a2", "zone-a"), ("b1", "zone-b")];
    for (i, (node, zone)) in nodes.iter().enumerate() {
        let hello = Hello::try_from(v1::Hello {
            node_name: (*node).into(),
            zone: (*zone).into(),
            addresses: vec![format!("192.0.2.{}", i + 1)],
            agent_version: "fuzz".into(),
            icmp_mode: v1::IcmpMode::Raw as i32,
            probe_port: 7402,
            ..Default::default()
        })
        .expect("fixture hello");
        let (id, _) = t.register(&hello, NOW);
        let paths = nodes
            .iter()
            .filter(|(peer, _)| peer != node)
            .map(|(peer, _)| v1::PathSummary {
                src: (*node).into(),
                dst: (*peer).into(),
                window_start_unix_ms: NOW.0 - 10_000,
                window_end_unix_ms: NOW.0,
                probes_sent: 10,
                probes_received: 9,
                rtt: Some(v1::RttStats {
                    samples: 9,
                    min_us: 100.0,
                    p50_us: 120.0,
                    p90_us: 150.0,
                    p99_us: 200.0,
                    max_us: 210.0,
                    mean_us: 130.0,
                    jitter_us: 5.0,
                }),
                ..Default::default()
            })
            .collect();
        let report = zonemesh_proto::convert::report_from_agent(
            &hello.node,
            v1::Report { sequence: 1, paths },
        )
        .expect("fixture report");
        t.apply_report(id, &report, NOW).expect("fixture applies");
    }
    t
}

fn finite(what: &str, v: f64) {
    assert!(v.is_finite(), "{what} is {v}");
}

/// Every query the Topology service answers, on `t`: none may panic, every figure is finite.
fn query_everything(t: &Topology) {
    let nodes = t
        .view()
        .list_nodes(&Default::default(), NOW)
        .expect("list nodes")
        .nodes;
    for n in &nodes {
        finite("node RTT", n.zone_rtt_p50_us);
        finite("node loss", n.zone_loss_ratio);
    }
    let zones = t.view().zone_links(NOW);
    assert!(zones.zones.len() <= t.view().zones().count());
    if let Ok(query) = RankQuery::try_from(v1::RankNodesRequest::default()) {
        let _ = t.view().rank(&query, NOW);
    }
    for workers in [1, 2, 3] {
        if let Ok(query) = PlaceQuery::try_from(v1::PlaceRequest {
            workers,
            ..Default::default()
        }) {
            let _ = t.view().place(&query, NOW);
        }
    }
    if let Ok(query) = MatrixQuery::try_from(v1::GetMatrixRequest::default()) {
        let _ = t.view().matrix(&query, NOW);
    }
}

/// Wire messages into domain types, and what passes into the engine: the first byte chooses
/// the message (an agent's message, or a Place, RankNodes or GetMatrix request), the rest is
/// its protobuf encoding.
pub fn wire_to_domain(data: &[u8]) {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    let mut t = fixture();
    match kind % 4 {
        0 => {
            let Ok(message) = v1::AgentMessage::decode(bytes) else {
                return;
            };
            match message.kind {
                Some(v1::agent_message::Kind::Hello(h)) => {
                    if let Ok(hello) = Hello::try_from(h) {
                        assert!(!hello.node.as_str().is_empty());
                        if t.admit_hello(&hello).is_ok() {
                            t.register(&hello, NOW);
                        }
                    }
                }
                Some(v1::agent_message::Kind::Report(r)) => {
                    let a1 = NodeName::parse("node", "a1").expect("name");
                    if let Ok(report) = zonemesh_proto::convert::report_from_agent(&a1, r) {
                        for p in &report.paths {
                            assert_eq!(p.src, a1, "a report of a1 with another source");
                            assert!(p.received <= p.sent, "more replies than probes passed");
                        }
                        let id = t.id(&a1).expect("a1 is in the fixture");
                        if t.admit_report(id, &report).is_ok() {
                            t.apply_report(id, &report, NOW)
                                .expect("a checked report applies");
                        }
                    }
                }
                None => {}
            }
            t.sweep(UnixMs(NOW.0 + 1_000));
            query_everything(&t);
        }
        1 => {
            if let Ok(request) = v1::PlaceRequest::decode(bytes)
                && let Ok(query) = PlaceQuery::try_from(request)
                && let Ok(answer) = t.view().place(&query, NOW)
            {
                let placed: u32 = answer.assignments.iter().map(|a| a.workers).sum();
                assert_eq!(placed, query.workers, "a placement of another size");
                finite("worst RTT", answer.worst_rtt_us);
            }
        }
        2 => {
            if let Ok(request) = v1::RankNodesRequest::decode(bytes)
                && let Ok(query) = RankQuery::try_from(request)
                && let Ok(answer) = t.view().rank(&query, NOW)
            {
                for n in &answer.nodes {
                    finite("rank score", n.score);
                    assert!((0.0..=1.0).contains(&n.score), "score {}", n.score);
                }
            }
        }
        _ => {
            if let Ok(request) = v1::GetMatrixRequest::decode(bytes)
                && let Ok(query) = MatrixQuery::try_from(request)
            {
                let _ = t.view().matrix(&query, NOW);
            }
        }
    }
}

/// The kube-scheduler extender's JSON: any body parses or is refused, and an answer names only
/// candidates, with scores in 0..=10.
pub fn extender_json(data: &[u8]) {
    let Ok(args) = serde_json::from_slice::<ExtenderArgs>(data) else {
        return;
    };
    let t = fixture();
    let mut jobs = Jobs::new(60_000);
    let mut candidates: Vec<String> = args.node_names.clone().unwrap_or_default();
    if let Some(list) = &args.nodes {
        candidates.extend(list.items.iter().filter_map(|n| {
            n.pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        }));
    }
    if let Ok(result) = extender::filter(
        t.view(),
        &args,
        &mut jobs,
        NOW,
        &zonemesh_aggregator::server::metrics::Metrics::default(),
    ) {
        for name in result.node_names.iter().flatten() {
            assert!(
                candidates.contains(name),
                "filter passed {name}, not a candidate"
            );
        }
        let _ = serde_json::to_vec(&result).expect("the answer serialises");
    }
    if let Ok(priorities) = extender::prioritize(t.view(), &args, &jobs, NOW) {
        for p in &priorities {
            assert!(
                (0..=10).contains(&p.score),
                "score {} of {}",
                p.score,
                p.host
            );
            assert!(
                candidates.contains(&p.host),
                "scored {}, not a candidate",
                p.host
            );
        }
    }
}

/// The store's decoding of its own records: any key and value decode or are refused; a node
/// or tiers record that decodes encodes back to the same value; whatever decodes restores into
/// a topology that answers every query, and a tiers' state derives tiers that keep their own
/// rules (every zone in one group, names never reused).
pub fn store_record(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let at = (split as usize).min(rest.len());
    let (key, value) = rest.split_at(at);
    if let Ok(node) = codec::decode_node(value) {
        let again = codec::decode_node(&codec::encode_node(&node)).expect("re-encoded node");
        assert_eq!(
            again, node,
            "a node record changed through encode and decode"
        );
    }
    if let Ok(state) = codec::decode_tiers(value) {
        let again = codec::decode_tiers(&codec::encode_tiers(&state)).expect("re-encoded tiers");
        assert_eq!(
            again, state,
            "a tiers record changed through encode and decode"
        );
        let (tiers, next) = fixture().view().tiers(&Default::default(), &state, NOW);
        tiers
            .check()
            .expect("tiers from a stored state keep their rules");
        assert!(
            next.next_group >= state.next_group,
            "the group counter went back"
        );
        let _ = zonemesh_proto::v1::GetTiersResponse::from(tiers);
    }
    let mut snapshot = Contents::default();
    if codec::decode_into(&mut snapshot, key, value).is_err() {
        return;
    }
    let mut t = Topology::restore(EngineConfig::default(), snapshot.nodes, snapshot.paths, NOW);
    query_everything(&t);
    t.sweep(UnixMs(NOW.0 + 120_000));
    query_everything(&t);
}

/// A fuzz target's function.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name.
pub const TARGETS: [(&str, Target); 3] = [
    ("wire_to_domain", wire_to_domain),
    ("extender_json", extender_json),
    ("store_record", store_record),
];

/// Valid inputs of each target, to start the fuzzer from (`examples/fuzz_seeds.rs` writes them
/// as a seed corpus) and to run in the regression tests: (target, name, bytes).
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut seeds = Vec::new();
    let mut wire = |name: &str, kind: u8, bytes: Vec<u8>| {
        let mut data = vec![kind];
        data.extend(bytes);
        seeds.push(("wire_to_domain", name.to_owned(), data));
    };
    let report = v1::Report {
        sequence: 2,
        paths: vec![v1::PathSummary {
            src: "a1".into(),
            dst: "c1".into(),
            window_start_unix_ms: NOW.0 - 10_000,
            window_end_unix_ms: NOW.0,
            probes_sent: 10,
            probes_received: 10,
            rtt: Some(v1::RttStats {
                samples: 10,
                min_us: 90.0,
                p50_us: 100.0,
                p90_us: 110.0,
                p99_us: 120.0,
                max_us: 130.0,
                mean_us: 101.0,
                jitter_us: 2.0,
            }),
            throughput: Some(v1::Throughput {
                throughput_bps: 9.4e9,
                bytes: 3_525_000_000,
                duration_us: 3_000_000,
                warmup_us: 1_000_000,
                streams: 1,
                segments_sent: 2_434_000,
                segments_retransmitted: 12,
                exchanges: 64,
                exchange_p50_us: 40.0,
                exchange_mean_us: 55.0,
                exchange_max_us: 300.0,
                exchange_timeout_us: 204_000.0,
            }),
            ..Default::default()
        }],
    };
    let message = |kind| v1::AgentMessage { kind: Some(kind) }.encode_to_vec();
    wire(
        "report",
        0,
        message(v1::agent_message::Kind::Report(report)),
    );
    wire(
        "hello",
        0,
        message(v1::agent_message::Kind::Hello(v1::Hello {
            node_name: "c1".into(),
            zone: "zone-c".into(),
            addresses: vec!["192.0.2.9".into()],
            probe_port: 7402,
            ..Default::default()
        })),
    );
    wire(
        "place",
        1,
        v1::PlaceRequest {
            workers: 2,
            ..Default::default()
        }
        .encode_to_vec(),
    );
    wire("rank", 2, v1::RankNodesRequest::default().encode_to_vec());
    wire("matrix", 3, v1::GetMatrixRequest::default().encode_to_vec());

    let pod = serde_json::json!({
        "metadata": {"name": "w0", "namespace": "ml",
                     "labels": {"zonemesh.io/job": "resnet"},
                     "annotations": {"zonemesh.io/workers": "2"}},
        "spec": {"schedulerName": "zonemesh-scheduler"}
    });
    let bodies = [
        (
            "names",
            serde_json::json!({"Pod": pod, "NodeNames": ["a1", "a2", "b1", "x9"], "Nodes": null}),
        ),
        (
            "objects",
            serde_json::json!({"Pod": pod, "Nodes": {"kind": "NodeList", "items": [
            {"metadata": {"name": "a1"}}, {"metadata": {"name": "b1"}}]}}),
        ),
        (
            "no-job",
            serde_json::json!({"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["b1"]}),
        ),
    ];
    for (name, body) in bodies {
        seeds.push((
            "extender_json",
            name.to_owned(),
            body.to_string().into_bytes(),
        ));
    }

    let mut t = fixture();
    let batch = zonemesh_aggregator::store::Batch::from_dirty(&mut t);
    let mut record = |name: String, key: Vec<u8>, value: Vec<u8>| {
        let mut data = vec![u8::try_from(key.len()).expect("short key")];
        data.extend(key);
        data.extend(value);
        seeds.push(("store_record", name, data));
    };
    for node in &batch.nodes {
        record(
            format!("node-{}", node.name),
            codec::node_key(&node.name),
            codec::encode_node(node),
        );
    }
    for row in &batch.rows {
        record(
            format!("row-{}", row.src),
            codec::row_key(&row.src),
            codec::encode_row(row),
        );
    }
    let (_, state) = t
        .view()
        .tiers(&Default::default(), &Default::default(), NOW);
    record(
        "tiers".into(),
        codec::TIERS_KEY.to_vec(),
        codec::encode_tiers(&state),
    );
    seeds
}
