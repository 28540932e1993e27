//! The kube-scheduler extender on the aggregator's HTTP port: `POST /extender/filter` and
//! `POST /extender/prioritize` (`urlPrefix: http://<aggregator>:7401/extender`, verbs `filter`
//! and `prioritize`), with the JSON of `k8s.io/kube-scheduler/extender/v1`.
//!
//! The wire types have PascalCase field names (the Go structs have no JSON tags); lowercase and
//! camelCase spellings are accepted on input, as Go's decoder accepts any case. The Pod and Node
//! objects inside are ordinary Kubernetes JSON (camelCase); Node objects are passed back
//! untouched. The decisions are the engine's ([`zonemesh_engine::extender`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use zonemesh_domain::UnixMs;

use super::auth::{Guard, Need};
use super::metrics::{Metrics, Rpc, Surface};
use super::reader::Reader;
use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use zonemesh_engine::Snapshot;
use zonemesh_engine::extender::{BadRequest, ExtenderPod, Jobs};

/// `ExtenderArgs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ExtenderArgs {
    /// The pod being scheduled.
    #[serde(alias = "pod")]
    pub pod: Option<Pod>,
    /// Candidate nodes as full objects (when the extender is not `nodeCacheCapable`).
    #[serde(alias = "nodes")]
    pub nodes: Option<NodeList>,
    /// Candidate node names (when it is).
    #[serde(alias = "nodeNames", alias = "nodenames")]
    pub node_names: Option<Vec<String>>,
}

/// The parts of a `v1.Pod` the extender reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Pod {
    /// Its metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
}

/// The parts of a `metav1.ObjectMeta` the extender reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ObjectMeta {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A `v1.NodeList`; items are kept as they came.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct NodeList {
    /// The nodes.
    #[serde(default)]
    pub items: Vec<Value>,
    /// Everything else of the list (apiVersion, kind, metadata), passed back.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `ExtenderFilterResult`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct FilterResult {
    /// The nodes that pass, as objects (answered when the request sent objects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Value>,
    /// The names of the nodes that pass (answered when the request sent names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_names: Option<Vec<String>>,
    /// Nodes filtered out, with the reason.
    pub failed_nodes: BTreeMap<String, String>,
    /// Nodes filtered out that preemption cannot help (none: zonemesh's reasons can change).
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// A message when the request cannot be answered.
    pub error: String,
}

/// `HostPriority`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct HostPriority {
    /// Node name.
    pub host: String,
    /// 0..=10.
    pub score: i64,
}

impl ExtenderArgs {
    /// The pod as the engine reads it.
    pub fn pod(&self) -> ExtenderPod {
        let meta = self.pod.clone().unwrap_or_default().metadata;
        ExtenderPod {
            name: meta.name,
            namespace: meta.namespace,
            labels: meta.labels,
            annotations: meta.annotations,
        }
    }

    /// The candidate names, in order; the error names what is missing or malformed.
    pub fn candidates(&self) -> Result<Vec<String>, BadRequest> {
        if let Some(names) = &self.node_names {
            return Ok(names.clone());
        }
        let Some(list) = &self.nodes else {
            return Err(BadRequest(
                "neither NodeNames nor Nodes: the request names no candidate nodes".into(),
            ));
        };
        list.items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| BadRequest(format!("Nodes.items[{i}].metadata.name is missing")))
            })
            .collect()
    }
}

/// The `filter` verb: the engine's decision, answered in the form the request came in (names
/// for names; the request's own Node objects, untouched, for objects).
///
/// Job-model annotations that are refused leave the pod placed without the model; the refusal
/// is logged and counted (`zonemesh_extender_job_model_refusals_total{reason}`).
pub fn filter(
    topology: &Snapshot,
    args: &ExtenderArgs,
    jobs: &mut Jobs,
    now: UnixMs,
    metrics: &Metrics,
) -> Result<FilterResult, BadRequest> {
    let names = args.candidates()?;
    let decided = topology.extender_filter(&args.pod(), &names, jobs, now)?;
    if let Some(refused) = &decided.job_model_refused {
        tracing::warn!(reason = refused.reason, "{}", refused.message);
        metrics.job_model_refused(refused.reason);
    }
    let mut result = FilterResult {
        failed_nodes: decided.failed,
        ..FilterResult::default()
    };
    if args.node_names.is_some() {
        result.node_names = Some(decided.passing);
    } else if let Some(list) = &args.nodes {
        let items: Vec<Value> = list
            .items
            .iter()
            .filter(|item| {
                item.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| decided.passing.iter().any(|p| p == n))
            })
            .cloned()
            .collect();
        let out = NodeList {
            items,
            rest: list.rest.clone(),
        };
        result.nodes = Some(serde_json::to_value(out).unwrap_or(Value::Null));
    }
    Ok(result)
}

/// The `prioritize` verb: a score of 0..=10 for every candidate.
pub fn prioritize(
    topology: &Snapshot,
    args: &ExtenderArgs,
    jobs: &Jobs,
    now: UnixMs,
) -> Result<Vec<HostPriority>, BadRequest> {
    let names = args.candidates()?;
    Ok(topology
        .extender_prioritize(&args.pod(), &names, jobs, now)
        .into_iter()
        .map(|s| HostPriority {
            host: s.node,
            score: s.score,
        })
        .collect())
}

/// One `filter` call on its way to the job memory's writer.
struct FilterCall {
    args: ExtenderArgs,
    reply: oneshot::Sender<Result<FilterResult, BadRequest>>,
}

/// The extender's state. The memory of placed jobs has one writer, a thread that answers the
/// `filter` calls one at a time on the latest snapshot, so that two pods of one job filtered at
/// once always get the same zone; `prioritize` reads the memory that thread publishes, on the
/// query pool.
#[derive(Clone)]
pub struct Extender {
    reader: Reader,
    /// A replica answers only while it is caught up with the log.
    gate: Option<Arc<crate::cluster::Progress>>,
    metrics: Arc<Metrics>,
    filters: mpsc::Sender<FilterCall>,
    jobs: Arc<ArcSwap<Jobs>>,
    /// To the leader, on a replica that does not lead.
    forward: super::forward::Forwarder,
    job_ttl_ms: i64,
}

impl std::fmt::Debug for Extender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extender")
            .field("jobs", &self.jobs.load().len())
            .finish_non_exhaustive()
    }
}

impl Extender {
    /// An extender over `reader` that remembers jobs for `job_ttl_ms` after their last pod. A
    /// replica's `gate` makes it answer 503 (the scheduler goes on without it) while it lags.
    pub fn new(
        reader: Reader,
        metrics: Arc<Metrics>,
        job_ttl_ms: i64,
        gate: Option<Arc<crate::cluster::Progress>>,
    ) -> Self {
        let (filters, mut calls) = mpsc::channel::<FilterCall>(1024);
        let jobs = Arc::new(ArcSwap::from_pointee(Jobs::new(job_ttl_ms)));
        let (published, snapshots) = (jobs.clone(), reader.clone());
        let counted = metrics.clone();
        let writer = move || {
            let mut memory = Jobs::new(job_ttl_ms);
            while let Some(call) = calls.blocking_recv() {
                let answer = filter(
                    &snapshots.snapshot(),
                    &call.args,
                    &mut memory,
                    snapshots.now(),
                    &counted,
                );
                published.store(Arc::new(memory.clone()));
                let _ = call.reply.send(answer);
            }
        };
        // The thread ends when the last sender (this extender's clones) is gone.
        if let Err(e) = std::thread::Builder::new()
            .name("zonemesh-jobs".into())
            .spawn(writer)
        {
            tracing::error!(error = %e, "the extender's job memory thread did not start; filter calls will fail");
        }
        Self {
            reader,
            gate,
            metrics,
            filters,
            jobs,
            forward: super::forward::Forwarder::default(),
            job_ttl_ms,
        }
    }

    /// Forwards to the leader with `forward` (a leader that advertises `https://`).
    pub fn forwarding_with(mut self, forward: super::forward::Forwarder) -> Self {
        self.forward = forward;
        self
    }

    /// On a replica that does not lead, the answer for a call to `path`: the leader's, forwarded
    /// (its job memory is the one that counts), or, while no leader is known, the answer of an
    /// extender without figures (every candidate passes, every score 0), counted. `None`: answer
    /// here (this replica leads, or runs alone; or the leader did not answer, and this replica's
    /// own memory is the best left).
    async fn elsewhere(
        &self,
        verb: Rpc,
        path: &str,
        headers: &axum::http::HeaderMap,
        body: &axum::body::Bytes,
    ) -> Option<Response> {
        let gate = self.gate.as_ref()?;
        if gate.leading().is_some() {
            return None;
        }
        let Some(url) = gate.leader_url() else {
            gate.leaderless();
            let empty = zonemesh_engine::Topology::new(self.reader.snapshot().config().clone());
            let (empty, metrics) = (empty.snapshot(), self.metrics.clone());
            let ttl = self.job_ttl_ms;
            return Some(match verb {
                Rpc::ExtenderFilter => {
                    self.run(verb, body, |args| async move {
                        Ok(filter(
                            &empty,
                            &args,
                            &mut Jobs::new(ttl),
                            UnixMs(0),
                            &metrics,
                        ))
                    })
                    .await
                }
                _ => {
                    self.run(verb, body, |args| async move {
                        Ok(prioritize(&empty, &args, &Jobs::new(ttl), UnixMs(0)))
                    })
                    .await
                }
            });
        };
        let authorization = headers.get(axum::http::header::AUTHORIZATION).cloned();
        match self
            .forward
            .post(&url, path, body.clone(), authorization)
            .await
        {
            Ok(answer) => Some(answer),
            Err(e) => {
                tracing::warn!(leader = %url, error = %e, "an extender call not forwarded to the leader; answered here");
                gate.leaderless();
                None
            }
        }
    }

    /// Its routes, for the callers `guard` lets schedule.
    pub fn router(self, guard: Arc<Guard>) -> Router {
        Router::new()
            .route("/extender/filter", post(filter_verb))
            .route("/extender/prioritize", post(prioritize_verb))
            .with_state(self)
            .layer(axum::middleware::from_fn(move |request, next| {
                super::auth::http_guard(
                    guard.clone(),
                    Surface::Extender,
                    Need::Schedule,
                    request,
                    next,
                )
            }))
    }

    /// Parses the body, runs `answer` and records the call.
    async fn run<T: serde::Serialize + Send + 'static, F>(
        &self,
        verb: Rpc,
        body: &[u8],
        answer: impl FnOnce(ExtenderArgs) -> F,
    ) -> Response
    where
        F: std::future::Future<Output = Result<Result<T, BadRequest>, crate::Error>>,
    {
        let started = zonemesh_common::time::Stopwatch::start();
        let args: ExtenderArgs = match serde_json::from_slice(body) {
            Ok(a) => a,
            Err(e) => {
                self.metrics
                    .observe_query(verb, started.elapsed().as_secs_f64(), false);
                return (
                    StatusCode::BAD_REQUEST,
                    format!(
                        "{}: the body is not ExtenderArgs JSON: {e}\n",
                        verb.as_str()
                    ),
                )
                    .into_response();
            }
        };
        let result = match self.gate.as_ref().and_then(|g| g.why_unready()) {
            Some(why) => Err(crate::Error::TryAgain(why)),
            None => answer(args).await,
        };
        let ok = matches!(result, Ok(Ok(_)));
        self.metrics
            .observe_query(verb, started.elapsed().as_secs_f64(), ok);
        match result {
            Ok(Ok(answer)) => Json(answer).into_response(),
            Ok(Err(bad)) => {
                tracing::warn!(verb = verb.as_str(), "extender request refused: {bad}");
                (StatusCode::BAD_REQUEST, format!("zonemesh: {bad}\n")).into_response()
            }
            // Only what may pass is 503 (the scheduler retries); see `crate::ErrorKind`.
            Err(e) => (e.http_status(), format!("{e}\n")).into_response(),
        }
    }
}

async fn filter_verb(
    State(x): State<Extender>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(answer) = x
        .elsewhere(Rpc::ExtenderFilter, "/extender/filter", &headers, &body)
        .await
    {
        return answer;
    }
    let filters = x.filters.clone();
    x.run(Rpc::ExtenderFilter, &body, |args| async move {
        let (reply, answer) = oneshot::channel();
        filters
            .send(FilterCall { args, reply })
            .await
            .map_err(|_| crate::Error::ShuttingDown)?;
        let answer = answer.await.map_err(|_| crate::Error::ShuttingDown)?;
        // A request the verb cannot answer is an `Error` in the result, as the protocol has it.
        Ok(Ok(answer.unwrap_or_else(|bad| FilterResult {
            error: format!("zonemesh: {bad}"),
            ..Default::default()
        })))
    })
    .await
}

async fn prioritize_verb(
    State(x): State<Extender>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(answer) = x
        .elsewhere(
            Rpc::ExtenderPrioritize,
            "/extender/prioritize",
            &headers,
            &body,
        )
        .await
    {
        return answer;
    }
    let (reader, jobs) = (x.reader.clone(), x.jobs.clone());
    x.run(Rpc::ExtenderPrioritize, &body, |args| async move {
        reader
            .query(move |snapshot, now| prioritize(snapshot, &args, &jobs.load(), now))
            .await
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use zonemesh_domain::{Hello, IcmpMode, NodeName, ZoneName};
    use zonemesh_engine::extender::DEFAULT_JOB_TTL_MS;
    use zonemesh_engine::{EngineConfig, Topology};

    const NOW: UnixMs = UnixMs(1_000_000);

    /// Two zones, z2-n0 DOWN (its agent gone long ago), no figures needed for what is tested.
    fn cluster() -> Topology {
        let mut t = Topology::new(EngineConfig::default());
        for n in ["z1-n0", "z2-n0", "z2-n1"] {
            let hello = Hello {
                node: NodeName::parse("node", n).unwrap(),
                zone: ZoneName::parse("zone", &n[..2]).unwrap(),
                region: None,
                addresses: vec!["127.0.0.1".parse().unwrap()],
                agent_version: "test".into(),
                icmp_mode: IcmpMode::Raw,
                probe_port: 7402,
            };
            let (id, _) = t.register(&hello, UnixMs(0));
            if n == "z2-n0" {
                t.disconnect(id, UnixMs(0));
            }
        }
        t
    }

    fn pod() -> Value {
        json!({
            "metadata": { "name": "w-0", "namespace": "ml", "labels": { "app": "trainer" }, "uid": "1f5c" },
            "spec": { "containers": [{ "name": "w", "image": "trainer:1" }], "schedulerName": "zonemesh" },
            "status": { "phase": "Pending" }
        })
    }

    #[test]
    fn names_are_answered_with_names_in_pascal_case() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let args: ExtenderArgs = serde_json::from_value(
            json!({ "Pod": pod(), "Nodes": null, "NodeNames": ["z1-n0", "z2-n0"] }),
        )
        .unwrap();
        let r = filter(t.view(), &args, &mut jobs, NOW, &Metrics::default()).unwrap();
        assert_eq!(r.node_names.as_deref(), Some(&["z1-n0".to_owned()][..]));
        assert!(
            r.failed_nodes["z2-n0"].contains("DOWN"),
            "{:?}",
            r.failed_nodes
        );
        assert!(r.nodes.is_none() && r.error.is_empty());
        // PascalCase on the wire, as kube-scheduler reads it.
        let wire = serde_json::to_value(FilterResult {
            node_names: Some(vec![]),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            wire,
            json!({"NodeNames": [], "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""})
        );
        let scores = prioritize(t.view(), &args, &jobs, NOW).unwrap();
        let wire = serde_json::to_value(&scores[0]).unwrap();
        assert!(
            wire.get("Host").is_some() && wire.get("Score").is_some(),
            "{wire}"
        );
    }

    #[test]
    fn full_node_objects_come_back_untouched_and_lowercase_input_is_read() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let node = |n: &str| {
            json!({"metadata": {"name": n, "labels": {"topology.kubernetes.io/zone": "x"}},
                   "status": {"allocatable": {"cpu": "8"}}})
        };
        let args: ExtenderArgs = serde_json::from_value(json!({
            "pod": pod(),
            "nodes": {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                      "items": [node("z1-n0"), node("z2-n0"), node("elsewhere")]}
        }))
        .unwrap();
        let r = filter(t.view(), &args, &mut jobs, NOW, &Metrics::default()).unwrap();
        assert!(r.node_names.is_none());
        let nodes = r.nodes.unwrap();
        assert_eq!(nodes["kind"], "NodeList");
        let items = nodes["items"].as_array().unwrap();
        // The unknown node passes: zonemesh has nothing to say about it.
        assert_eq!(items, &vec![node("z1-n0"), node("elsewhere")]);
    }

    #[test]
    fn a_request_without_candidates_names_what_is_missing() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let e = filter(
            t.view(),
            &ExtenderArgs::default(),
            &mut jobs,
            NOW,
            &Metrics::default(),
        )
        .unwrap_err();
        assert!(e.0.contains("NodeNames"), "{e}");
        let args: ExtenderArgs =
            serde_json::from_value(json!({ "Nodes": { "items": [ { "metadata": {} } ] } }))
                .unwrap();
        let e = prioritize(t.view(), &args, &jobs, NOW).unwrap_err();
        assert!(e.0.contains("Nodes.items[0].metadata.name"), "{e}");
    }

    #[test]
    fn refused_job_annotations_are_counted_by_reason_and_the_pod_still_placed() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let metrics = Metrics::default();
        let mut with_job = pod();
        with_job["metadata"]["labels"]["zonemesh.io/job"] = json!("trainer");
        with_job["metadata"]["annotations"] = json!({
            "zonemesh.io/workers": "1",
            "zonemesh.io/collective": "ring",
            "zonemesh.io/bytes-per-iteration": "25 megabytes",
        });
        let args: ExtenderArgs =
            serde_json::from_value(json!({ "Pod": with_job, "NodeNames": ["z1-n0", "z2-n1"] }))
                .unwrap();
        let r = filter(t.view(), &args, &mut jobs, NOW, &metrics).unwrap();
        assert!(r.error.is_empty(), "{}", r.error);
        assert!(!r.node_names.unwrap().is_empty());
        assert_eq!(metrics.job_model_refusals("bytes_per_iteration"), 1);
        assert_eq!(metrics.job_model_refusals("collective"), 0);
        assert!(
            zonemesh_common::metrics::render(metrics.registry()).contains(
                "zonemesh_extender_job_model_refusals_total{reason=\"bytes_per_iteration\"} 1"
            ),
            "{}",
            zonemesh_common::metrics::render(metrics.registry())
        );
    }

    /// A clock that stands still.
    #[derive(Debug)]
    struct Still(UnixMs);

    impl super::super::clock::Clock for Still {
        fn now(&self) -> UnixMs {
            self.0
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn filter_calls_for_one_job_at_once_keep_it_in_one_zone() {
        // Two zones alike; each call offers one zone only. Two writers of the job memory would
        // let the first pod of each zone choose its own zone.
        let now = UnixMs(1_000_000);
        let t = zonemesh_engine::testing::mesh(2, 4, |_, _| 100.0, |_, _| 0, now);
        let reader = Reader::new(
            Arc::new(ArcSwap::from_pointee(t.snapshot())),
            2,
            Arc::new(Still(now)),
        );
        let extender = Extender::new(
            reader,
            Arc::new(Metrics::default()),
            DEFAULT_JOB_TTL_MS,
            None,
        );
        let pod = json!({ "metadata": { "name": "w", "namespace": "ml",
            "labels": { "zonemesh.io/job": "resnet" }, "annotations": { "zonemesh.io/workers": "2" } } });
        let mut calls = Vec::new();
        for i in 0..32 {
            let zone = i % 2;
            let names: Vec<String> = (0..4).map(|n| format!("z{zone}-n{n}")).collect();
            let body = serde_json::to_vec(&json!({ "Pod": pod, "NodeNames": names })).unwrap();
            let x = extender.clone();
            calls.push(tokio::spawn(async move {
                filter_verb(State(x), Default::default(), axum::body::Bytes::from(body)).await
            }));
        }
        let mut passed: Vec<String> = Vec::new();
        for call in calls {
            let response = call.await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            let result: serde_json::Value = serde_json::from_slice(&body).unwrap();
            passed.extend(
                result["NodeNames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap().to_owned()),
            );
        }
        let zones: std::collections::BTreeSet<&str> = passed.iter().map(|n| &n[..2]).collect();
        assert_eq!(
            zones.len(),
            1,
            "every pod of the job kept in one zone: {passed:?}"
        );
        assert_eq!(
            passed.len(),
            16 * 4,
            "the job's zone was offered whole 16 times"
        );
    }
}
