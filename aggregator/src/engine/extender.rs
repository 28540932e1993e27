//! The kube-scheduler extender: `filter` and `prioritize` as `k8s.io/kube-scheduler/extender/v1`
//! defines them, over the topology.
//!
//! The wire types have PascalCase field names (the Go structs have no JSON tags); lowercase and
//! camelCase spellings are accepted on input, as Go's decoder accepts any case. The Pod and Node
//! objects inside are ordinary Kubernetes JSON (camelCase); Node objects are passed back
//! untouched.
//!
//! Gang awareness: the pods of one job carry the label [`JOB_LABEL`] and the job's size in the
//! annotation [`WORKERS_ANNOTATION`]. The first time a job's pod is filtered, [`Jobs`] chooses
//! the job's zones with `Place` (one zone preferred) among the nodes the scheduler offers, and
//! remembers them, and the nodes chosen, until `ttl` passes without a pod of the job; the job's
//! later pods are kept in those zones and its chosen nodes are scored highest.
//!
//! Never everything filtered out by accident: nodes zonemesh does not know, and every node when
//! zonemesh has no figures yet, pass untouched; DOWN nodes are filtered out unless that would
//! leave nothing, in which case zonemesh's own view is suspect and it stays neutral. Only a job's
//! zone may leave a pod with no node (its later pods then wait for room in the job's zone).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use zonemesh_proto::domain::{NodeName, UnixMs, Weights, ZoneName};

use super::place::{PlaceQuery, ZonePolicy};
use super::{NodeId, NodeState, RankQuery, Topology};

/// Pod label naming the job a pod belongs to.
pub const JOB_LABEL: &str = "zonemesh.io/job";
/// Pod annotation with the job's number of workers.
pub const WORKERS_ANNOTATION: &str = "zonemesh.io/workers";
/// `MaxExtenderPriority` of `k8s.io/kube-scheduler/extender/v1`.
pub const MAX_SCORE: i64 = 10;
/// The score of a node zonemesh cannot judge.
pub const NEUTRAL_SCORE: i64 = 5;
/// How long a job's zones are remembered after its last pod was seen. Default 10 min.
pub const DEFAULT_JOB_TTL_MS: i64 = 600_000;

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

/// What zonemesh chose for one job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPlacement {
    /// The zones its pods are kept in.
    pub zones: Vec<ZoneName>,
    /// The nodes `Place` chose.
    pub nodes: Vec<NodeName>,
    /// When it is forgotten unless another pod of the job is seen.
    pub expires: UnixMs,
}

/// The jobs zonemesh has placed, by `namespace/job`.
#[derive(Debug, Clone)]
pub struct Jobs {
    entries: HashMap<String, JobPlacement>,
    ttl_ms: i64,
}

impl Jobs {
    /// An empty memory whose entries live `ttl_ms` after the last pod of their job.
    pub fn new(ttl_ms: i64) -> Self {
        Self {
            entries: HashMap::new(),
            ttl_ms,
        }
    }

    /// The placement of `job`, if remembered and not expired at `now`.
    pub fn get(&self, job: &str, now: UnixMs) -> Option<&JobPlacement> {
        self.entries.get(job).filter(|p| p.expires.0 > now.0)
    }

    /// Jobs remembered (expired ones included until the next [`Jobs::expire`]).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets expired jobs.
    pub fn expire(&mut self, now: UnixMs) {
        self.entries.retain(|_, p| p.expires.0 > now.0);
    }
}

/// A request the extender cannot answer, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest(pub String);

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The candidate names of a request, in order; the error names what is missing or malformed.
fn candidates(args: &ExtenderArgs) -> Result<Vec<String>, BadRequest> {
    if let Some(names) = &args.node_names {
        return Ok(names.clone());
    }
    let Some(list) = &args.nodes else {
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

/// `namespace/job` of a pod that belongs to a job.
fn job_of(pod: &Pod) -> Option<String> {
    let job = pod.metadata.labels.get(JOB_LABEL)?.trim();
    if job.is_empty() {
        return None;
    }
    let ns = if pod.metadata.namespace.is_empty() {
        "default"
    } else {
        &pod.metadata.namespace
    };
    Some(format!("{ns}/{job}"))
}

/// The job's size from its annotation; `None` when absent.
fn workers(pod: &Pod) -> Result<Option<u32>, BadRequest> {
    let Some(value) = pod.metadata.annotations.get(WORKERS_ANNOTATION) else {
        return Ok(None);
    };
    match value.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(BadRequest(format!(
            "pod {}/{}: annotation {WORKERS_ANNOTATION} is {value:?}, not a number of workers (1 or more)",
            pod.metadata.namespace, pod.metadata.name
        ))),
    }
}

impl Topology {
    /// The node of a candidate name, if zonemesh knows it.
    fn known(&self, name: &str) -> Option<NodeId> {
        NodeName::parse("node", name)
            .ok()
            .and_then(|n| self.id(&n))
            .filter(|id| self.node(*id).registered)
    }

    /// The job's placement: remembered, or chosen now among `offered` (the candidates zonemesh
    /// knows and that are not DOWN) and remembered. `None` when `Place` cannot choose (no
    /// figures yet, or fewer nodes than workers): the job is then not held to a zone.
    fn job_placement(
        &self,
        jobs: &mut Jobs,
        job: &str,
        workers: Option<u32>,
        offered: &[NodeId],
        now: UnixMs,
    ) -> Option<JobPlacement> {
        if let Some(p) = jobs.entries.get_mut(job).filter(|p| p.expires.0 > now.0) {
            p.expires = UnixMs(now.0 + jobs.ttl_ms);
            return Some(p.clone());
        }
        let query = PlaceQuery {
            workers: workers.unwrap_or(1).min(offered.len().max(1) as u32),
            candidates: offered
                .iter()
                .map(|id| (self.node(*id).name.clone(), 1))
                .collect(),
            policy: ZonePolicy::PreferOne,
            weights: Weights::default(),
            exclude: Vec::new(),
        };
        if offered.is_empty() || workers.is_some_and(|w| w as usize > offered.len()) {
            return None;
        }
        let placed = self.place_ids(&query, now).ok()?;
        if placed.worst_rtt_us <= 0.0 && placed.assignments.len() > 1 {
            // No figures between the chosen nodes: nothing to hold the job to.
            return None;
        }
        let placement = JobPlacement {
            zones: placed
                .zones
                .iter()
                .map(|z| self.zone(*z).name.clone())
                .collect(),
            nodes: placed
                .assignments
                .iter()
                .map(|(n, _)| self.node(*n).name.clone())
                .collect(),
            expires: UnixMs(now.0 + jobs.ttl_ms),
        };
        jobs.entries.insert(job.to_owned(), placement.clone());
        Some(placement)
    }

    /// The extender's `filter` verb.
    pub fn extender_filter(
        &self,
        args: &ExtenderArgs,
        jobs: &mut Jobs,
        now: UnixMs,
    ) -> Result<FilterResult, BadRequest> {
        let names = candidates(args)?;
        let pod = args.pod.clone().unwrap_or_default();
        let job = job_of(&pod);
        let size = if job.is_some() { workers(&pod)? } else { None };
        let mut failed = BTreeMap::new();

        let known: Vec<(usize, NodeId)> = names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| self.known(n).map(|id| (i, id)))
            .collect();
        let down: Vec<usize> = known
            .iter()
            .filter_map(|(i, id)| {
                let (state, why) = self.state(*id, now);
                (state == NodeState::Down).then(|| {
                    failed.insert(names[*i].clone(), format!("zonemesh: DOWN: {why}"));
                    *i
                })
            })
            .collect();
        if !names.is_empty() && down.len() == names.len() {
            // Every candidate DOWN: zonemesh's view is more likely wrong than the cluster.
            failed.clear();
        }
        if let Some(job) = &job {
            let offered: Vec<NodeId> = known
                .iter()
                .filter(|(i, _)| !failed.contains_key(&names[*i]))
                .map(|(_, id)| *id)
                .collect();
            if let Some(placement) = self.job_placement(jobs, job, size, &offered, now) {
                let zones: Vec<&str> = placement.zones.iter().map(ZoneName::as_str).collect();
                for (i, name) in names.iter().enumerate() {
                    if failed.contains_key(name) {
                        continue;
                    }
                    let zone = known
                        .iter()
                        .find(|(k, _)| *k == i)
                        .map(|(_, id)| self.zone(self.zone_of(*id)).name.as_str());
                    if !zone.is_some_and(|z| zones.contains(&z)) {
                        let why = match zone {
                            Some(z) => {
                                format!("zonemesh: job {job} runs in {}, not {z}", zones.join(", "))
                            }
                            None => format!(
                                "zonemesh: job {job} runs in {}, and zonemesh does not know this node's zone",
                                zones.join(", ")
                            ),
                        };
                        failed.insert(name.clone(), why);
                    }
                }
            }
        }

        let passing: Vec<String> = names
            .iter()
            .filter(|n| !failed.contains_key(*n))
            .cloned()
            .collect();
        let mut result = FilterResult {
            failed_nodes: failed,
            ..FilterResult::default()
        };
        if args.node_names.is_some() {
            result.node_names = Some(passing);
        } else if let Some(list) = &args.nodes {
            let items: Vec<Value> = list
                .items
                .iter()
                .filter(|item| {
                    item.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .is_some_and(|n| passing.iter().any(|p| p == n))
                })
                .cloned()
                .collect();
            let out = NodeList {
                items,
                rest: list.rest.clone(),
            };
            result.nodes = Some(serde_json::to_value(out).unwrap_or(Value::Null));
        }
        jobs.expire(now);
        Ok(result)
    }

    /// The extender's `prioritize` verb: a score of 0..=10 for every candidate.
    pub fn extender_prioritize(
        &self,
        args: &ExtenderArgs,
        jobs: &Jobs,
        now: UnixMs,
    ) -> Result<Vec<HostPriority>, BadRequest> {
        let names = candidates(args)?;
        let pod = args.pod.clone().unwrap_or_default();
        let placement = job_of(&pod).and_then(|j| jobs.get(&j, now).cloned());
        let known: Vec<NodeName> = names
            .iter()
            .filter(|n| self.known(n).is_some())
            .filter_map(|n| NodeName::parse("node", n.as_str()).ok())
            .collect();
        let query = RankQuery {
            candidates: known,
            peers: placement
                .as_ref()
                .map(|p| p.nodes.clone())
                .unwrap_or_default(),
            ..RankQuery::default()
        };
        let ranked = if query.candidates.is_empty() {
            Vec::new()
        } else {
            self.rank_ids(&query, now).unwrap_or_default()
        };
        let scored = ranked.iter().any(|r| r.figures.loss.is_some());
        Ok(names
            .iter()
            .map(|name| {
                let chosen = placement
                    .as_ref()
                    .is_some_and(|p| p.nodes.iter().any(|n| n.as_str() == name));
                let rank = ranked
                    .iter()
                    .find(|r| self.node(r.node).name.as_str() == name.as_str());
                let score = match rank {
                    _ if chosen => MAX_SCORE,
                    None => NEUTRAL_SCORE,
                    Some(_) if !scored => NEUTRAL_SCORE,
                    Some(r) => match r.state {
                        NodeState::Ready if r.figures.loss.is_some() => {
                            ((1.0 - r.cost) * MAX_SCORE as f64)
                                .round()
                                .clamp(0.0, MAX_SCORE as f64) as i64
                        }
                        NodeState::Ready => NEUTRAL_SCORE,
                        NodeState::Stale | NodeState::Down => 0,
                    },
                };
                HostPriority {
                    host: name.clone(),
                    score,
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::EngineConfig;
    use super::super::testing::*;
    use super::*;
    use serde_json::json;

    const NOW: UnixMs = UnixMs(1_000_000);

    /// Three zones of three: zone-0 has a lossy node (10 %), zone-2 slower links and a DOWN node
    /// (every probe to z2-n0 is lost), zone-1 is the best.
    fn cluster() -> Topology {
        let rtt = |s: &str, d: &str| match (s[..2] == d[..2], &s[..2]) {
            (false, _) => 4_000.0,
            (true, "z2") => 300.0,
            (true, _) => 50.0,
        };
        let loss = |s: &str, d: &str| {
            if d == "z2-n0" {
                100
            } else {
                u64::from(s == "z0-n1" || d == "z0-n1") * 10
            }
        };
        mesh(3, 3, rtt, loss, NOW)
    }

    fn later() -> UnixMs {
        NOW
    }

    /// A body as kube-scheduler sends it to a `nodeCacheCapable` extender.
    fn by_names(pod: Value, nodes: &[&str]) -> ExtenderArgs {
        serde_json::from_value(json!({ "Pod": pod, "Nodes": null, "NodeNames": nodes })).unwrap()
    }

    fn pod(job: Option<(&str, &str)>) -> Value {
        let mut labels = json!({ "app": "trainer" });
        let mut annotations = json!({});
        if let Some((job, workers)) = job {
            labels[JOB_LABEL] = json!(job);
            annotations[WORKERS_ANNOTATION] = json!(workers);
        }
        json!({
            "metadata": { "name": "w-0", "namespace": "ml", "labels": labels, "annotations": annotations,
                          "uid": "1f5c" },
            "spec": { "containers": [{ "name": "w", "image": "trainer:1" }], "schedulerName": "zonemesh" },
            "status": { "phase": "Pending" }
        })
    }

    const ALL: [&str; 9] = [
        "z0-n0", "z0-n1", "z0-n2", "z1-n0", "z1-n1", "z1-n2", "z2-n0", "z2-n1", "z2-n2",
    ];

    #[test]
    fn down_nodes_are_filtered_with_the_reason_and_names_are_answered_with_names() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let r = t
            .extender_filter(&by_names(pod(None), &ALL), &mut jobs, later())
            .unwrap();
        let names = r.node_names.unwrap();
        assert_eq!(names.len(), 8);
        assert!(!names.contains(&"z2-n0".to_owned()));
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
            "pod": pod(None),
            "nodes": {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                      "items": [node("z1-n0"), node("z2-n0"), node("elsewhere")]}
        }))
        .unwrap();
        let r = t.extender_filter(&args, &mut jobs, later()).unwrap();
        assert!(r.node_names.is_none());
        let nodes = r.nodes.unwrap();
        assert_eq!(nodes["kind"], "NodeList");
        let items = nodes["items"].as_array().unwrap();
        // The unknown node passes: zonemesh has nothing to say about it.
        assert_eq!(items, &vec![node("z1-n0"), node("elsewhere")]);
    }

    #[test]
    fn empty_lists_and_unknown_nodes_are_answered_neutrally() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let r = t
            .extender_filter(&by_names(pod(None), &[]), &mut jobs, later())
            .unwrap();
        assert_eq!(r.node_names, Some(vec![]));
        let unknown = ["gpu-7", "gpu-8"];
        let r = t.extender_filter(
            &by_names(pod(Some(("j", "2"))), &unknown),
            &mut jobs,
            later(),
        );
        assert_eq!(r.unwrap().node_names.unwrap(), unknown);
        let scores = t
            .extender_prioritize(&by_names(pod(None), &unknown), &jobs, later())
            .unwrap();
        assert!(scores.iter().all(|s| s.score == NEUTRAL_SCORE));
        let e = t
            .extender_filter(&ExtenderArgs::default(), &mut jobs, later())
            .unwrap_err();
        assert!(e.0.contains("NodeNames"), "{e}");
    }

    #[test]
    fn with_no_figures_yet_nothing_is_filtered_and_every_score_is_neutral() {
        let mut t = Topology::new(EngineConfig::default());
        for n in ALL {
            t.register(&hello(n, &format!("zone-{}", &n[1..2])), NOW);
        }
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let args = by_names(pod(Some(("resnet", "3"))), &ALL);
        let r = t.extender_filter(&args, &mut jobs, NOW).unwrap();
        assert_eq!(r.node_names.unwrap().len(), 9);
        assert!(jobs.is_empty(), "no zone chosen without figures");
        let scores = t.extender_prioritize(&args, &jobs, NOW).unwrap();
        assert!(
            scores.iter().all(|s| s.score == NEUTRAL_SCORE),
            "{scores:?}"
        );
    }

    #[test]
    fn when_every_candidate_is_down_zonemesh_stays_neutral() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let r = t
            .extender_filter(&by_names(pod(None), &["z2-n0"]), &mut jobs, later())
            .unwrap();
        assert_eq!(r.node_names.unwrap(), ["z2-n0"]);
        assert!(r.failed_nodes.is_empty());
    }

    #[test]
    fn a_jobs_pods_are_kept_in_the_zone_its_first_pod_chose() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let args = by_names(pod(Some(("resnet", "3"))), &ALL);
        let first = t.extender_filter(&args, &mut jobs, later()).unwrap();
        let kept = first.node_names.unwrap();
        assert_eq!(
            kept,
            ["z1-n0", "z1-n1", "z1-n2"],
            "the zone with the best links"
        );
        assert!(first.failed_nodes["z0-n0"].contains("job ml/resnet runs in zone-1"));
        let placed = jobs.get("ml/resnet", later()).unwrap().clone();
        assert_eq!(placed.zones.len(), 1);
        // A later pod of the job, offered what is left, stays in zone-1.
        let second = t
            .extender_filter(
                &by_names(pod(Some(("resnet", "3"))), &["z0-n0", "z1-n2", "z2-n1"]),
                &mut jobs,
                later(),
            )
            .unwrap();
        assert_eq!(second.node_names.unwrap(), ["z1-n2"]);
        // The nodes chosen for the job score highest.
        let scores = t.extender_prioritize(&args, &jobs, later()).unwrap();
        for s in &scores {
            let chosen = placed.nodes.iter().any(|n| n.as_str() == s.host);
            assert!((0..=MAX_SCORE).contains(&s.score));
            if chosen {
                assert_eq!(s.score, MAX_SCORE, "{s:?}");
            }
        }
        assert_eq!(
            scores.iter().find(|s| s.host == "z2-n0").unwrap().score,
            0,
            "DOWN"
        );
        // Another namespace's job of the same name is another job.
        let mut other = pod(Some(("resnet", "3")));
        other["metadata"]["namespace"] = json!("research");
        t.extender_filter(&by_names(other, &ALL), &mut jobs, later())
            .unwrap();
        assert_eq!(jobs.len(), 2);
    }

    #[test]
    fn a_job_larger_than_any_zone_spans_the_fewest_zones() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let r = t
            .extender_filter(&by_names(pod(Some(("big", "5"))), &ALL), &mut jobs, later())
            .unwrap();
        let placed = jobs.get("ml/big", later()).unwrap();
        assert_eq!(placed.zones.len(), 2, "{placed:?}");
        assert_eq!(placed.nodes.len(), 5);
        let kept = r.node_names.unwrap();
        assert!(kept.len() >= 5 && kept.len() <= 6, "{kept:?}");
        // A job larger than every node offered is not held to a zone at all.
        let r = t
            .extender_filter(
                &by_names(pod(Some(("huge", "40"))), &ALL),
                &mut jobs,
                later(),
            )
            .unwrap();
        assert_eq!(r.node_names.unwrap().len(), 8);
        assert!(jobs.get("ml/huge", later()).is_none());
    }

    #[test]
    fn a_job_is_forgotten_after_its_ttl_without_pods() {
        let t = cluster();
        let mut jobs = Jobs::new(60_000);
        let args = by_names(pod(Some(("resnet", "3"))), &ALL);
        t.extender_filter(&args, &mut jobs, later()).unwrap();
        let seen = UnixMs(later().0 + 59_000);
        assert!(jobs.get("ml/resnet", seen).is_some());
        // A pod seen renews it...
        t.extender_filter(&args, &mut jobs, seen).unwrap();
        assert!(jobs.get("ml/resnet", UnixMs(seen.0 + 59_000)).is_some());
        // ...and a minute of silence ends it.
        let gone = UnixMs(seen.0 + 60_001);
        assert!(jobs.get("ml/resnet", gone).is_none());
        jobs.expire(gone);
        assert!(jobs.is_empty());
    }

    #[test]
    fn a_bad_workers_annotation_names_itself() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        for bad in ["three", "0", "-2", ""] {
            let e = t
                .extender_filter(&by_names(pod(Some(("j", bad))), &ALL), &mut jobs, later())
                .unwrap_err();
            assert!(
                e.0.contains(WORKERS_ANNOTATION) && e.0.contains("ml/w-0"),
                "{e}"
            );
        }
    }

    #[test]
    fn scores_follow_the_ranking_inside_zero_to_ten() {
        let t = cluster();
        let jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let scores = t
            .extender_prioritize(
                &by_names(pod(None), &["z0-n0", "z0-n1", "z0-n2"]),
                &jobs,
                later(),
            )
            .unwrap();
        let score = |h: &str| scores.iter().find(|s| s.host == h).unwrap().score;
        assert!(score("z0-n1") < score("z0-n0"), "{scores:?}");
        assert!(scores.iter().all(|s| (0..=MAX_SCORE).contains(&s.score)));
        let wire = serde_json::to_value(&scores[0]).unwrap();
        assert!(
            wire.get("Host").is_some() && wire.get("Score").is_some(),
            "{wire}"
        );
    }
}
