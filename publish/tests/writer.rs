//! The writer against a recorded API-server conversation (kube-rs's own test pattern: a
//! `tower-test` mock service behind `kube::Client`): every call is checked in order — method,
//! path, query, content type, body — and answered as the API server answers (Status bodies with
//! `code` and `reason`); a missing call or an extra one fails the test.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use zonemesh_domain::{NodeName, TierGroup, TierZone, Tiers, UnixMs, ZoneName, ZonePair};
use zonemesh_publish::{
    Desired, PublishMetrics, Scheduler, Settings, Verb, Writer, desired, objects::Kind,
};

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Check = Box<dyn Fn(&str, &str, &Value) + Send>;

/// One exchange: the call expected and the answer.
struct Step {
    method: Method,
    /// The path, and the query when it matters (`?` included).
    uri: String,
    status: u16,
    reply: Value,
    check: Check,
}

fn step(method: Method, uri: &str, status: u16, reply: Value) -> Step {
    Step {
        method,
        uri: uri.to_owned(),
        status,
        reply,
        check: Box::new(|_, _, _| {}),
    }
}

impl Step {
    fn checking(mut self, check: impl Fn(&str, &str, &Value) + Send + 'static) -> Self {
        self.check = Box::new(check);
        self
    }
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("{reason} (recorded)"), "reason": reason, "code": code})
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"kind": format!("{kind}List"), "apiVersion": "v1",
           "metadata": {"resourceVersion": "100"}, "items": items})
}

const HN: &str = "/apis/topology.volcano.sh/v1alpha1/hypernodes";
const OWNED: &str = "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dzonemesh";

/// Runs the writer's `work` against `steps`; fails on a call out of order, a missing call or an
/// extra one.
async fn converse<T>(
    steps: Vec<Step>,
    settings: Settings,
    work: impl AsyncFnOnce(&mut Writer) -> T,
) -> (T, Arc<PublishMetrics>) {
    let (service, mut handle): (_, Handle) = tower_test::mock::pair();
    let client = Client::new(service, "default");
    let metrics = Arc::new(PublishMetrics::default());
    let server = tokio::spawn(async move {
        let n = steps.len();
        for (i, step) in steps.into_iter().enumerate() {
            let (request, send) =
                tokio::time::timeout(Duration::from_secs(5), handle.next_request())
                    .await
                    .unwrap_or_else(|_| {
                        panic!("call {i} of {n} ({} {}) never came", step.method, step.uri)
                    })
                    .expect("the client is alive");
            // kube writes an empty first parameter (`?&labelSelector=`): the same query.
            let uri = request.uri().to_string().replace("?&", "?");
            assert_eq!(request.method(), step.method, "call {i}: {uri}");
            assert!(
                uri == step.uri
                    || uri.starts_with(&format!("{}?", step.uri))
                    || uri.starts_with(&format!("{}&", step.uri)),
                "call {i}: {uri}, expected {}",
                step.uri
            );
            let content_type = request
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let body: Value = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).unwrap()
            };
            (step.check)(&uri, &content_type, &body);
            send.send_response(
                Response::builder()
                    .status(step.status)
                    .body(Body::from(serde_json::to_vec(&step.reply).unwrap()))
                    .unwrap(),
            );
        }
        // Nothing more: the client goes away without another call.
        if let Ok(Some((extra, _))) =
            tokio::time::timeout(Duration::from_millis(500), handle.next_request()).await
        {
            panic!("an extra call: {} {}", extra.method(), extra.uri());
        }
    });
    let mut writer = Writer::new(client, settings, metrics.clone());
    let out = work(&mut writer).await;
    drop(writer);
    server.await.expect("the conversation went as recorded");
    (out, metrics)
}

fn name(s: &str) -> ZoneName {
    ZoneName::parse("name", s).unwrap()
}

/// zone-a (a1, a2) and zone-b (b1) in group-1; x9 is a node of the cluster zonemesh does not know.
fn tiers() -> Tiers {
    let zone = |z: &str, nodes: &[&str]| TierZone {
        name: name(z),
        group: name("group-1"),
        region: None,
        nodes: nodes
            .iter()
            .map(|n| NodeName::parse("node", *n).unwrap())
            .collect(),
        fresh: true,
        rtt_us: Some(90.0),
        throughput_bps: None,
    };
    Tiers {
        computed_at: UnixMs(1_800_000_000_000),
        zones: vec![zone("zone-a", &["a1", "a2"]), zone("zone-b", &["b1"])],
        groups: vec![TierGroup {
            name: name("group-1"),
            zones: vec![name("zone-a"), name("zone-b")],
            inside: Default::default(),
            held: false,
            nearest: None,
        }],
        pairs: vec![ZonePair {
            a: name("zone-a"),
            b: name("zone-b"),
            rtt_us: Some(1_500.0),
            throughput_bps: Some(9.5e8),
            fresh: true,
        }],
        ..Tiers::default()
    }
}

fn only(scheduler: Scheduler) -> Settings {
    Settings {
        schedulers: vec![scheduler],
        ..Settings::default()
    }
}

fn want(settings: &Settings) -> Desired {
    desired(&tiers(), settings)
}

/// An object as the API server returns it: the manifest with server metadata.
fn served(manifest: &Value, uid: &str) -> Value {
    let mut v = manifest.clone();
    v["metadata"]["uid"] = uid.into();
    v["metadata"]["resourceVersion"] = "42".into();
    v
}

fn manifest(d: &Desired, name: &str) -> Value {
    d.objects
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no object {name}"))
        .manifest
        .clone()
}

const NOW: UnixMs = UnixMs(1_800_000_000_000);

#[tokio::test]
async fn missing_objects_are_created_changed_ones_replaced_and_stale_owned_ones_deleted() {
    let settings = only(Scheduler::Volcano);
    let d = want(&settings);
    let names: Vec<&str> = d.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "zonemesh-cluster",
            "zonemesh-group-1",
            "zonemesh-zone-a",
            "zonemesh-zone-b"
        ]
    );
    let mut changed = served(&manifest(&d, "zonemesh-zone-a"), "uid-a");
    changed["spec"]["members"] =
        json!([{"type": "Node", "selector": {"exactMatch": {"name": "a1"}}}]);
    let up_to_date = served(&manifest(&d, "zonemesh-cluster"), "uid-c");
    // The name zonemesh gave zone-b before names read once: owned, no longer derived, deleted.
    let mut old = served(&manifest(&d, "zonemesh-zone-b"), "uid-old");
    old["metadata"]["name"] = "zonemesh-zone-zone-b".into();
    let expect_b = manifest(&d, "zonemesh-zone-b");
    let steps = vec![
        step(
            Method::GET,
            &format!("{HN}?{OWNED}"),
            200,
            list("HyperNode", vec![up_to_date, changed.clone(), old]),
        ),
        step(Method::POST, HN, 201, manifest(&d, "zonemesh-group-1")).checking(|_, ct, body| {
            assert_eq!(ct, "application/json");
            assert_eq!(body["metadata"]["name"], "zonemesh-group-1");
            assert_eq!(
                body["metadata"]["labels"]["app.kubernetes.io/managed-by"],
                "zonemesh"
            );
            assert_eq!(body["spec"]["tier"], 2);
            assert_eq!(body["spec"]["members"][0]["type"], "HyperNode");
        }),
        step(Method::PUT, &format!("{HN}/zonemesh-zone-a"), 200, changed).checking(|_, _, body| {
            assert_eq!(
                body["metadata"]["resourceVersion"], "42",
                "optimistic concurrency"
            );
            assert_eq!(body["spec"]["members"].as_array().unwrap().len(), 2);
        }),
        step(Method::POST, HN, 201, expect_b.clone()).checking(move |_, _, body| {
            assert_eq!(body["spec"], expect_b["spec"]);
        }),
        step(
            Method::DELETE,
            &format!("{HN}/zonemesh-zone-zone-b"),
            200,
            status(200, "Success"),
        )
        .checking(|_, _, body| {
            assert_eq!(
                body["preconditions"]["uid"], "uid-old",
                "only the object listed"
            );
        }),
        step(
            Method::GET,
            &format!("{HN}?labelSelector=volcano.sh%2Fnetwork-topology-source"),
            200,
            list("HyperNode", vec![]),
        ),
    ];
    let (round, metrics) = converse(steps, settings, async |w| w.publish(&d, NOW).await).await;
    let round = round.unwrap();
    assert_eq!(round.created, ["zonemesh-group-1", "zonemesh-zone-b"]);
    assert_eq!(round.updated, ["zonemesh-zone-a"]);
    assert_eq!(round.deleted, ["zonemesh-zone-zone-b"]);
    assert_eq!(
        (
            metrics.writes(Verb::Create),
            metrics.writes(Verb::Update),
            metrics.writes(Verb::Delete)
        ),
        (2, 1, 1)
    );
}

#[tokio::test]
async fn nothing_changed_means_no_write_only_the_lists() {
    let settings = only(Scheduler::Volcano);
    let d = want(&settings);
    let items = d
        .objects
        .iter()
        .map(|o| served(&o.manifest, &format!("uid-{}", o.name)))
        .collect();
    let steps = vec![
        step(
            Method::GET,
            &format!("{HN}?{OWNED}"),
            200,
            list("HyperNode", items),
        ),
        step(
            Method::GET,
            &format!("{HN}?labelSelector=volcano.sh%2Fnetwork-topology-source"),
            200,
            list("HyperNode", vec![]),
        ),
    ];
    let (round, metrics) = converse(steps, settings, async |w| w.publish(&d, NOW).await).await;
    assert_eq!(round.unwrap(), Default::default());
    assert_eq!(
        metrics.writes(Verb::Create) + metrics.writes(Verb::Update) + metrics.writes(Verb::Delete),
        0
    );
}

#[tokio::test]
async fn a_foreign_object_of_our_name_is_left_alone_counted_and_reported() {
    let settings = only(Scheduler::Volcano);
    let d = want(&settings);
    let mut others: Vec<Value> = d
        .objects
        .iter()
        .filter(|o| o.name != "zonemesh-cluster")
        .map(|o| served(&o.manifest, "u"))
        .collect();
    others.sort_by_key(|o| o["metadata"]["name"].as_str().unwrap().to_owned());
    let foreign = json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "zonemesh-cluster", "uid": "uid-theirs", "resourceVersion": "7",
                     "labels": {"team": "network"}},
        "spec": {"tier": 3, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-1"}}}]}});
    let steps = vec![
        step(
            Method::GET,
            &format!("{HN}?{OWNED}"),
            200,
            list("HyperNode", others),
        ),
        step(Method::POST, HN, 409, status(409, "AlreadyExists")),
        step(Method::GET, &format!("{HN}/zonemesh-cluster"), 200, foreign),
        step(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/default/events",
            201,
            json!({}),
        )
        .checking(|_, _, body| {
            assert_eq!(body["reason"], "ForeignObject");
            assert_eq!(body["type"], "Warning");
            assert_eq!(body["regarding"]["kind"], "HyperNode");
            assert_eq!(body["regarding"]["name"], "zonemesh-cluster");
            assert_eq!(body["regarding"]["uid"], "uid-theirs");
            assert_eq!(body["reportingController"], "zonemesh.io/publisher");
            assert!(body["eventTime"].is_string());
        }),
        step(
            Method::GET,
            &format!("{HN}?labelSelector=volcano.sh%2Fnetwork-topology-source"),
            200,
            list("HyperNode", vec![]),
        ),
    ];
    let (round, metrics) = converse(steps, settings, async |w| w.publish(&d, NOW).await).await;
    let round = round.unwrap();
    assert_eq!(round.foreign, ["zonemesh-cluster"]);
    assert!(
        round.updated.is_empty() && round.deleted.is_empty(),
        "never overwritten"
    );
    assert_eq!(metrics.foreign_objects.get(), 1);
}

#[tokio::test]
async fn forbidden_ends_the_round_with_the_code_and_writes_nothing() {
    let settings = only(Scheduler::Volcano);
    let d = want(&settings);
    let steps = vec![step(
        Method::GET,
        &format!("{HN}?{OWNED}"),
        403,
        status(403, "Forbidden"),
    )];
    let (result, _) = converse(steps, settings, async |w| w.publish(&d, NOW).await).await;
    let err = result.unwrap_err();
    assert_eq!(err.code(), Some(403));
    assert!(err.to_string().contains("list hypernodes"), "{err}");
}

#[tokio::test]
async fn a_conflict_on_replace_is_counted_and_left_for_the_next_round() {
    let settings = only(Scheduler::Volcano);
    let d = want(&settings);
    let mut items: Vec<Value> = d.objects.iter().map(|o| served(&o.manifest, "u")).collect();
    items[0]["metadata"]["annotations"]["zonemesh.io/measured-at"] = "2020-01-01T00:00:00Z".into();
    let steps = vec![
        step(
            Method::GET,
            &format!("{HN}?{OWNED}"),
            200,
            list("HyperNode", items),
        ),
        step(
            Method::PUT,
            &format!("{HN}/zonemesh-cluster"),
            409,
            status(409, "Conflict"),
        ),
        step(
            Method::GET,
            &format!("{HN}?labelSelector=volcano.sh%2Fnetwork-topology-source"),
            200,
            list("HyperNode", vec![]),
        ),
    ];
    let (round, metrics) = converse(steps, settings, async |w| w.publish(&d, NOW).await).await;
    assert_eq!(round.unwrap().conflicts, ["zonemesh-cluster"]);
    assert_eq!(metrics.conflicts.get(), 1);
}

#[tokio::test]
async fn volcano_discovery_splitting_a_zone_is_warned_about_once() {
    let settings = only(Scheduler::Volcano);
    let d = want(&settings);
    let items: Vec<Value> = d.objects.iter().map(|o| served(&o.manifest, "u")).collect();
    let discovered = json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "hypernode-rack-tier1-abcde", "labels": {"volcano.sh/network-topology-source": "label"}},
        "spec": {"tier": 1, "members": [
            {"type": "Node", "selector": {"exactMatch": {"name": "a1"}}},
            {"type": "Node", "selector": {"exactMatch": {"name": "b1"}}}]}});
    let round = |items: Vec<Value>, event: bool| {
        let mut steps = vec![
            step(
                Method::GET,
                &format!("{HN}?{OWNED}"),
                200,
                list("HyperNode", items),
            ),
            step(
                Method::GET,
                &format!("{HN}?labelSelector=volcano.sh%2Fnetwork-topology-source"),
                200,
                list("HyperNode", vec![discovered.clone()]),
            ),
        ];
        if event {
            // a1 of zone-a and b1 of zone-b: both zonemesh zones are cut differently.
            for zone in ["zonemesh-zone-a", "zonemesh-zone-b"] {
                steps.push(
                    step(
                        Method::POST,
                        "/apis/events.k8s.io/v1/namespaces/default/events",
                        201,
                        json!({}),
                    )
                    .checking(move |_, _, body| {
                        assert_eq!(body["reason"], "DiscoveryOverlap");
                        assert_eq!(body["regarding"]["name"], zone);
                    }),
                );
            }
        }
        steps
    };
    let d2 = d.clone();
    let items2 = items.clone();
    let (_, metrics) = converse(
        round(items, true)
            .into_iter()
            .chain(round(items2, false))
            .collect(),
        settings,
        async move |w| {
            w.publish(&d2, NOW).await.unwrap();
            w.publish(&d2, NOW).await.unwrap();
        },
    )
    .await;
    assert_eq!(metrics.volcano_overlaps.get(), 2);
}

#[tokio::test]
async fn node_labels_are_applied_only_where_they_differ() {
    let settings = only(Scheduler::Kueue);
    let d = want(&settings);
    let topology = manifest(&d, "zonemesh");
    assert_eq!(topology["apiVersion"], "kueue.x-k8s.io/v1beta2");
    let meta = |name: &str, labels: Value| {
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
               "metadata": {"name": name, "labels": labels}})
    };
    let a1 = json!({"zonemesh.io/zone": "zone-a", "zonemesh.io/zone-group": "group-1",
                    "zonemesh.io/measured": "true", "kubernetes.io/hostname": "a1"});
    let nodes = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "5"},
        "items": [meta("a1", a1), meta("a2", json!({"kubernetes.io/hostname": "a2"})),
                  meta("x9", json!({"zonemesh.io/zone": "old", "team": "ml"}))]});
    let apply = |node: &'static str, labels: Value| {
        step(
            Method::PATCH,
            &format!("/api/v1/nodes/{node}"),
            200,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}),
        )
        .checking(move |uri, ct, body| {
            assert_eq!(ct, "application/apply-patch+yaml");
            assert!(uri.contains("fieldManager=zonemesh"), "{uri}");
            assert!(
                !uri.contains("force"),
                "never forced over another manager: {uri}"
            );
            assert_eq!(body["metadata"]["labels"], labels);
        })
    };
    let steps = vec![
        step(
            Method::GET,
            &format!("/apis/kueue.x-k8s.io/v1beta2/topologies?{OWNED}"),
            200,
            list("Topology", vec![]),
        ),
        step(
            Method::POST,
            "/apis/kueue.x-k8s.io/v1beta2/topologies",
            201,
            topology,
        ),
        step(Method::GET, "/api/v1/nodes", 200, nodes),
        apply(
            "a2",
            json!({"zonemesh.io/zone": "zone-a", "zonemesh.io/zone-group": "group-1", "zonemesh.io/measured": "true"}),
        ),
        // Not in the tiers: zonemesh's labels go (an apply without them), "team" is not ours.
        apply("x9", json!({})),
    ];
    let (round, metrics) = converse(steps, settings, async |w| w.publish(&d, NOW).await).await;
    assert_eq!(round.unwrap().labelled, ["a2", "x9"]);
    assert_eq!(metrics.writes(Verb::Label), 2);
}

#[tokio::test]
async fn diktyo_rewriting_our_weights_is_detected_reported_and_undone() {
    let settings = only(Scheduler::Diktyo);
    let d = want(&settings);
    let mut nt = served(&manifest(&d, "zonemesh"), "uid-nt");
    nt["spec"]["weights"] = json!([{"name": "UserDefined", "topologyList": []},
                                   {"name": "NetperfCosts", "topologyList": []}]);
    // No ConfigMap is desired (it would invite Diktyo's controller): one zonemesh wrote before
    // is deleted, with its uid as precondition.
    assert!(!d.objects.iter().any(|o| o.kind == Kind::ConfigMap));
    let cm = desired(
        &tiers(),
        &Settings {
            diktyo_configmap: true,
            ..settings.clone()
        },
    )
    .objects
    .into_iter()
    .find(|o| o.kind == Kind::ConfigMap)
    .unwrap()
    .manifest;
    let nts =
        "/apis/networktopology.diktyo.x-k8s.io/v1alpha1/namespaces/zonemesh/networktopologies";
    let steps = vec![
        step(
            Method::GET,
            &format!("{nts}?{OWNED}"),
            200,
            list("NetworkTopology", vec![nt.clone()]),
        ),
        step(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/zonemesh/events",
            201,
            json!({}),
        )
        .checking(|_, _, body| {
            assert_eq!(body["reason"], "WeightsRewritten");
            assert_eq!(body["regarding"]["namespace"], "zonemesh");
        }),
        step(Method::PUT, &format!("{nts}/zonemesh"), 200, nt).checking(|_, _, body| {
            assert_eq!(body["spec"]["weights"][0]["name"], "zonemesh");
            let zones = &body["spec"]["weights"][0]["topologyList"][0];
            assert_eq!(zones["topologyKey"], "topology.kubernetes.io/zone");
            let cost = &zones["originList"][0]["costList"][0];
            assert_eq!(cost["destination"], "zone-b");
            assert_eq!(cost["networkCost"], 45, "1.5 ms");
            assert_eq!(cost["bandwidthCapacity"], "950M");
        }),
        step(
            Method::GET,
            &format!("/api/v1/namespaces/zonemesh/configmaps?{OWNED}"),
            200,
            list("ConfigMap", vec![served(&cm, "uid-cm")]),
        ),
        step(
            Method::DELETE,
            "/api/v1/namespaces/zonemesh/configmaps/zonemesh",
            200,
            status(200, "Success"),
        )
        .checking(|_, _, body| assert_eq!(body["preconditions"]["uid"], "uid-cm")),
    ];
    let (round, metrics) = converse(steps, settings, async |w| w.publish(&d, NOW).await).await;
    let round = round.unwrap();
    assert_eq!(round.updated, ["zonemesh"]);
    assert_eq!(round.deleted, ["zonemesh"], "the old ConfigMap");
    assert_eq!(metrics.weights_rewritten.get(), 1);
}

#[tokio::test]
async fn delete_removes_only_what_zonemesh_owns() {
    let settings = only(Scheduler::Volcano);
    let owned = json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "zonemesh-zone-a", "uid": "uid-1", "resourceVersion": "3",
                     "labels": {"app.kubernetes.io/managed-by": "zonemesh"}},
        "spec": {"tier": 1}});
    // A server that ignored the selector: the writer still leaves others' objects alone.
    let theirs = json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "rack-1", "uid": "uid-2", "labels": {"volcano.sh/network-topology-source": "label"}},
        "spec": {"tier": 1}});
    let steps = vec![
        step(
            Method::GET,
            &format!("{HN}?{OWNED}"),
            200,
            list("HyperNode", vec![owned, theirs]),
        ),
        step(
            Method::DELETE,
            &format!("{HN}/zonemesh-zone-a"),
            200,
            status(200, "Success"),
        )
        .checking(|_, _, body| assert_eq!(body["preconditions"]["uid"], "uid-1")),
    ];
    let (round, _) = converse(steps, settings, async |w| {
        w.delete_all(&[Kind::HyperNode], false, false, NOW).await
    })
    .await;
    assert_eq!(round.unwrap().deleted, ["zonemesh-zone-a"]);
}

/// An API server that answers every call as if the cluster held nothing yet (lists empty,
/// creates and replaces echoed), counting the calls.
fn counting_server(mut handle: Handle) -> Arc<std::sync::atomic::AtomicUsize> {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let method = request.method().clone();
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let (status, reply) = if method == Method::GET {
                (200, list("HyperNode", vec![]))
            } else if bytes.is_empty() {
                (200, status(200, "Success"))
            } else {
                let mut v: Value = serde_json::from_slice(&bytes).unwrap();
                v["metadata"]["uid"] = "uid-new".into();
                (201, v)
            };
            send.send_response(
                Response::builder()
                    .status(status)
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
        }
    });
    calls
}

/// Two replicas' publishers, each with its own API conversation: only the one whose replica
/// leads calls the API server, before a failover and after it (when the new leader publishes
/// afresh and the old one stops).
#[tokio::test]
async fn only_the_leader_publishes_before_and_after_a_failover() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let leader = Arc::new(AtomicUsize::new(0));
    let (tiers_tx, _) = tokio::sync::watch::channel(Some(Arc::new(tiers())));
    let mut calls = Vec::new();
    for replica in 0..2 {
        let (service, handle): (_, Handle) = tower_test::mock::pair();
        calls.push(counting_server(handle));
        let metrics = Arc::new(PublishMetrics::default());
        let settings = only(Scheduler::Volcano);
        let writer = Writer::new(
            Client::new(service, "default"),
            settings.clone(),
            metrics.clone(),
        );
        let leads = leader.clone();
        let inputs = zonemesh_publish::run::Inputs {
            tiers: tiers_tx.subscribe(),
            faults: tokio::sync::watch::channel(Arc::default()).1,
        };
        tokio::spawn(zonemesh_publish::run::run(
            writer,
            settings,
            inputs,
            Duration::from_millis(20),
            || NOW,
            move || leads.load(Ordering::SeqCst) == replica,
            || true,
            metrics,
        ));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = (
        calls[0].load(Ordering::SeqCst),
        calls[1].load(Ordering::SeqCst),
    );
    assert!(before.0 > 0, "the leader published nothing");
    assert_eq!(before.1, 0, "the follower called the API server");
    leader.store(1, Ordering::SeqCst);
    // A round the old leader had begun may finish; then it calls nothing more.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let old = calls[0].load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        calls[0].load(Ordering::SeqCst),
        old,
        "the old leader went on publishing"
    );
    assert!(
        calls[1].load(Ordering::SeqCst) > 0,
        "the new leader published nothing"
    );
    drop(tiers_tx);
}

/// The faults as ListFaults answers them when a2 loses `figure` (measured on four paths).
fn a2_loses(severity: zonemesh_domain::Severity, figure: f64) -> zonemesh_domain::Faults {
    use zonemesh_domain::{Element, Fault, FaultKind, Faults};
    Faults {
        faults: vec![Fault {
            element: Element::Node(NodeName::parse("node", "a2").unwrap()),
            kind: FaultKind::Loss,
            severity,
            figure,
            interval: Some((figure * 0.8, figure * 1.2)),
            probes: 1_200,
            reference: None,
            evidence: vec![],
            evidence_paths: 4,
            since: NOW,
            clean_since: None,
        }],
        evaluated_at: Some(NOW),
    }
}

/// The tiers with a zone of three nodes (a node's fault can be told from its zone's only there):
/// zone-a (a1, a2, a3) and zone-b (b1).
fn three_node_zone() -> Tiers {
    let mut t = tiers();
    t.zones[0]
        .nodes
        .push(NodeName::parse("node", "a3").unwrap());
    t
}

#[tokio::test]
async fn taints_follow_the_faults_by_conditional_writes_that_keep_every_other_taint() {
    use std::collections::BTreeSet;
    use zonemesh_domain::Severity;
    use zonemesh_publish::health::{MaxTainted, TaintSettings};

    let settings = Settings {
        schedulers: vec![Scheduler::Health],
        taint: Some(TaintSettings {
            max: MaxTainted::Nodes(1),
            ..TaintSettings::default()
        }),
        ..Settings::default()
    };
    let t = three_node_zone();
    let faults = a2_loses(Severity::Degraded, 0.05);
    let mut d = desired(&t, &settings);
    let plan = zonemesh_publish::objects::apply_health(
        &mut d,
        &t,
        &faults,
        &settings,
        Some(&BTreeSet::new()),
    )
    .unwrap();
    assert_eq!(plan.taint.keys().collect::<Vec<_>>(), ["a2"]);

    let ours = |value: &str| json!({"key": "zonemesh.io/network-fault", "value": value, "effect": "NoSchedule"});
    let gpu = json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"});
    let cordon = json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"});
    let node = |name: &str, rv: &str, labels: Value, taints: Value| {
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": rv, "labels": labels},
               "spec": {"taints": taints}})
    };
    let ok = json!({"zonemesh.io/network-health": "ok"});
    let nodes = list(
        "Node",
        vec![
            // a1 carries a taint of zonemesh's from before, beside someone else's.
            node(
                "a1",
                "5",
                ok.clone(),
                json!([ours("degraded"), gpu.clone()]),
            ),
            // a2 is cordoned and not yet tainted by zonemesh.
            node("a2", "7", ok.clone(), json!([cordon.clone()])),
            node("a3", "8", ok.clone(), json!([])),
            // b1's taint is to go, but b1 changed since the list: 409.
            node("b1", "9", ok.clone(), json!([ours("down")])),
        ],
    );
    let taint_patch = |node: &'static str, rv: &'static str, taints: Value| {
        step(
            Method::PATCH,
            &format!("/api/v1/nodes/{node}"),
            200,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}),
        )
        .checking(move |_, ct, body| {
            assert_eq!(ct, "application/merge-patch+json");
            assert_eq!(
                body["metadata"]["resourceVersion"], rv,
                "conditional on what was read"
            );
            assert_eq!(body["spec"]["taints"], taints, "every other taint kept");
        })
    };
    let event = |node: &'static str, type_: &'static str, reason: &'static str| {
        step(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/default/events",
            201,
            json!({}),
        )
        .checking(move |_, _, body| {
            assert_eq!(body["regarding"]["kind"], "Node");
            assert_eq!(body["regarding"]["name"], node);
            assert_eq!(body["regarding"]["uid"], format!("uid-{node}"));
            assert_eq!(body["type"], type_);
            assert_eq!(body["reason"], reason);
            assert_eq!(body["reportingController"], "zonemesh.io/publisher");
        })
    };
    let mut conflict = step(
        Method::PATCH,
        "/api/v1/nodes/b1",
        409,
        status(409, "Conflict"),
    );
    conflict = conflict.checking(|_, _, body| assert_eq!(body["spec"]["taints"], json!([])));
    let steps = vec![
        step(Method::GET, "/api/v1/nodes", 200, nodes),
        taint_patch("a1", "5", json!([gpu])),
        event("a1", "Normal", "NetworkFaultCleared"),
        taint_patch("a2", "7", json!([cordon, ours("degraded")])),
        event("a2", "Warning", "NetworkFault"),
        // Its label after its taint (the label's apply needs no resourceVersion).
        step(
            Method::PATCH,
            "/api/v1/nodes/a2",
            200,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a2"}}),
        )
        .checking(|_, ct, body| {
            assert_eq!(ct, "application/apply-patch+yaml");
            assert_eq!(
                body["metadata"]["labels"],
                json!({"zonemesh.io/network-health": "degraded"})
            );
        }),
        conflict,
    ];
    let (round, metrics) = converse(steps, settings, async |w| w.publish(&d, NOW).await).await;
    let round = round.unwrap();
    assert_eq!(round.tainted, ["a2"]);
    assert_eq!(round.untainted, ["a1"]);
    assert_eq!(round.conflicts, ["b1"]);
    assert_eq!(
        round.carrying,
        ["a2", "b1"],
        "b1 keeps its taint till next round"
    );
    assert_eq!(metrics.writes(Verb::Taint), 1);
    assert_eq!(metrics.writes(Verb::Untaint), 1);
    assert_eq!(metrics.writes(Verb::Label), 1);
    assert_eq!(metrics.conflicts.get(), 1);
}

#[tokio::test]
async fn delete_removes_zonemeshs_taint_and_labels_and_nothing_else() {
    let settings = only(Scheduler::Health);
    let nodes = list(
        "Node",
        vec![json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "a1", "uid": "uid-a1", "resourceVersion": "3",
                         "labels": {"zonemesh.io/network-health": "down", "team": "ml"}},
            "spec": {"taints": [{"key": "zonemesh.io/network-fault", "value": "down", "effect": "NoExecute"},
                                {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}})],
    );
    let steps = vec![
        step(Method::GET, "/api/v1/nodes", 200, nodes),
        step(
            Method::PATCH,
            "/api/v1/nodes/a1",
            200,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a1"}}),
        )
        .checking(|_, _, body| {
            assert_eq!(
                body["spec"]["taints"],
                json!([{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])
            );
        }),
        step(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/default/events",
            201,
            json!({}),
        ),
        step(
            Method::PATCH,
            "/api/v1/nodes/a1",
            200,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a1"}}),
        )
        .checking(|_, ct, body| {
            assert_eq!(ct, "application/apply-patch+yaml");
            assert_eq!(body["metadata"]["labels"], json!({}));
        }),
    ];
    let (round, _) = converse(steps, settings, async |w| {
        w.delete_all(&[], true, true, NOW).await
    })
    .await;
    let round = round.unwrap();
    assert_eq!(
        (round.untainted, round.labelled),
        (vec!["a1".to_owned()], vec!["a1".to_owned()])
    );
}

/// What [`node_server`] was asked: node lists, label applies, and the node of each taint write.
#[derive(Default)]
struct NodeCalls {
    lists: std::sync::atomic::AtomicUsize,
    labels: std::sync::atomic::AtomicUsize,
    taints: std::sync::Mutex<Vec<String>>,
}

impl NodeCalls {
    fn lists(&self) -> usize {
        self.lists.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn labels(&self) -> usize {
        self.labels.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn taint_writes(&self) -> Vec<String> {
        self.taints.lock().unwrap().clone()
    }
}

/// An API server of the nodes a1, a2, a3 and b1: every list answers each node's `spec.taints`
/// as `taints_of` says, every patch is echoed, and the calls are recorded.
fn node_server(mut handle: Handle, taints_of: fn(&str) -> Value) -> Arc<NodeCalls> {
    use std::sync::atomic::Ordering;
    let calls = Arc::new(NodeCalls::default());
    let seen = calls.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let ct = request
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let reply = if request.method() == Method::GET {
                seen.lists.fetch_add(1, Ordering::SeqCst);
                let node = |n: &str| {
                    json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": n, "uid": format!("uid-{n}"), "resourceVersion": "1"},
                    "spec": {"taints": taints_of(n)}})
                };
                list("Node", ["a1", "a2", "a3", "b1"].map(node).to_vec())
            } else {
                if ct == "application/apply-patch+yaml" {
                    seen.labels.fetch_add(1, Ordering::SeqCst);
                } else if ct == "application/merge-patch+json" {
                    let node = request.uri().path().rsplit('/').next().unwrap();
                    seen.taints.lock().unwrap().push(node.to_owned());
                }
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}})
            };
            send.send_response(
                Response::builder()
                    .status(200)
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
        }
    });
    calls
}

/// Runs the publisher task over `service` (rounds every 20 ms) on the tiers of
/// [`three_node_zone`] and `faults`, its store as `healthy` says; the tiers close when the
/// returned sender is dropped.
fn spawn_publisher(
    service: tower_test::mock::Mock<Request<Body>, Response<Body>>,
    settings: Settings,
    faults: zonemesh_domain::Faults,
    healthy: impl Fn() -> bool + Send + 'static,
) -> (
    tokio::sync::watch::Sender<Option<Arc<Tiers>>>,
    Arc<PublishMetrics>,
) {
    let metrics = Arc::new(PublishMetrics::default());
    let writer = Writer::new(
        Client::new(service, "default"),
        settings.clone(),
        metrics.clone(),
    );
    let (tiers_tx, tiers_rx) = tokio::sync::watch::channel(Some(Arc::new(three_node_zone())));
    // The faults stay as they are: the task reads the last value sent.
    let faults_rx = tokio::sync::watch::channel(Arc::new(faults)).1;
    tokio::spawn(zonemesh_publish::run::run(
        writer,
        settings,
        zonemesh_publish::run::Inputs {
            tiers: tiers_rx,
            faults: faults_rx,
        },
        Duration::from_millis(20),
        || NOW,
        || true,
        healthy,
        metrics.clone(),
    ));
    (tiers_tx, metrics)
}

/// The run task changes taints only once its warm-up is over and while the store is healthy;
/// its labels go out from the first round.
#[tokio::test]
async fn taints_wait_for_the_warm_up_and_a_healthy_store() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use zonemesh_domain::Severity;
    use zonemesh_publish::health::TaintSettings;

    let (service, handle): (_, Handle) = tower_test::mock::pair();
    // Every node untainted.
    let calls = node_server(handle, |_| json!([]));
    let settings = Settings {
        schedulers: vec![Scheduler::Health],
        taint: Some(TaintSettings {
            warm_up: Duration::from_millis(400),
            ..TaintSettings::default()
        }),
        ..Settings::default()
    };
    let healthy = Arc::new(AtomicBool::new(true));
    let h = healthy.clone();
    let (tiers_tx, metrics) = spawn_publisher(
        service,
        settings,
        a2_loses(Severity::Down, 0.3),
        move || h.load(Ordering::SeqCst),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(calls.labels() > 0, "the labels wait for nothing");
    assert_eq!(calls.taint_writes().len(), 0, "a taint during the warm-up");
    // Past the warm-up, but the store fails: still none.
    healthy.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        calls.taint_writes().len(),
        0,
        "a taint while the store fails"
    );
    healthy.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !calls.taint_writes().is_empty(),
        "no taint once warmed up and healthy"
    );
    assert!(metrics.writes(Verb::Taint) > 0);
    drop(tiers_tx);
}

/// A publisher that starts (an aggregator restarted, or a replica that took the lease over)
/// with the count of taints full keeps the taint it finds on a node: it reads the nodes' taints
/// before its first round that may change them, instead of moving the taint to a node whose
/// fault ranks higher.
#[tokio::test]
async fn a_restarted_publisher_keeps_the_taints_it_finds_while_the_count_is_full() {
    use zonemesh_domain::Severity;
    use zonemesh_publish::health::{MaxTainted, TaintSettings};

    let (service, handle): (_, Handle) = tower_test::mock::pair();
    // a2 carries zonemesh's taint (degraded) from before the restart.
    let calls = node_server(handle, |n| {
        if n == "a2" {
            json!([{"key": "zonemesh.io/network-fault", "value": "degraded", "effect": "NoSchedule"}])
        } else {
            json!([])
        }
    });
    let settings = Settings {
        schedulers: vec![Scheduler::Health],
        taint: Some(TaintSettings {
            max: MaxTainted::Nodes(1),
            warm_up: Duration::ZERO,
            ..TaintSettings::default()
        }),
        ..Settings::default()
    };
    // a2's degraded loss is older; a3 is down since now: without what the nodes carry, a3
    // ranks first for the one taint allowed.
    let mut faults = a2_loses(Severity::Degraded, 0.05);
    faults.faults[0].since = UnixMs(NOW.0 - 60_000);
    let mut a3 = a2_loses(Severity::Down, 0.3).faults.remove(0);
    a3.element = zonemesh_domain::Element::Node(NodeName::parse("node", "a3").unwrap());
    faults.faults.push(a3);
    let (tiers_tx, metrics) = spawn_publisher(service, settings, faults, || true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(calls.lists() >= 2, "no round listed the nodes");
    assert!(calls.labels() > 0, "no round labelled the nodes");
    assert_eq!(
        calls.taint_writes(),
        Vec::<String>::new(),
        "a taint moved off a2 (it carried zonemesh's taint when the publisher started)"
    );
    assert_eq!(metrics.writes(Verb::Taint), 0);
    drop(tiers_tx);
}
