//! The kube-scheduler extender's decisions: which candidate nodes `filter` lets through and the
//! scores `prioritize` gives, over the topology. The Kubernetes JSON of
//! `k8s.io/kube-scheduler/extender/v1` is the server's business; here a pod is its
//! [`ExtenderPod`] metadata and the candidates are names.
//!
//! Gang awareness: the pods of one job carry the label [`JOB_LABEL`] and the job's size in the
//! annotation [`WORKERS_ANNOTATION`]. The first time a job's pod is filtered, [`Jobs`] chooses
//! the job's zones with `Place` (one zone preferred) among the nodes the scheduler offers, and
//! remembers them, and the nodes chosen, until `ttl` passes without a pod of the job; the job's
//! later pods are kept in those zones and its chosen nodes are scored highest.
//!
//! The job's communication, when its pods say it (annotations [`COLLECTIVE_ANNOTATION`],
//! [`BYTES_ANNOTATION`] — a Kubernetes quantity such as `25Mi` — and [`SERVERS_ANNOTATION`]),
//! makes `Place` choose the nodes and the rank order by the job's predicted time; `prioritize`
//! then scores the node of rank `i` highest for the pod whose [`COMPLETION_INDEX`] (label or
//! annotation, as an Indexed Job sets it) is `i`. Bad annotations do not stop the pod: it is
//! placed without the job model and the refusal is returned ([`Filtered::job_model_refused`])
//! for the server to log and count.
//!
//! Never everything filtered out by accident: nodes zonemesh does not know, and every node when
//! zonemesh has no figures yet, pass untouched; DOWN nodes are filtered out unless that would
//! leave nothing, in which case zonemesh's own view is suspect and it stays neutral. Only a job's
//! zone may leave a pod with no node (its later pods then wait for room in the job's zone).

use std::collections::{BTreeMap, HashMap};

use zonemesh_domain::{
    Collective, Job, NodeName, NodeState, PlaceQuery, RankQuery, UnixMs, Weights, ZoneName,
    ZonePolicy,
};

pub use zonemesh_domain::parse_quantity;

use crate::{NodeId, Snapshot};

/// Pod label naming the job a pod belongs to.
pub const JOB_LABEL: &str = "zonemesh.io/job";
/// Pod annotation with the job's number of workers.
pub const WORKERS_ANNOTATION: &str = "zonemesh.io/workers";
/// Pod annotation with the job's collective (`ring`, `hierarchical`, `parameter-server`,
/// `all-to-all`).
pub const COLLECTIVE_ANNOTATION: &str = "zonemesh.io/collective";
/// Pod annotation with the bytes one iteration moves, a Kubernetes quantity (`25Mi`, `4M`).
pub const BYTES_ANNOTATION: &str = "zonemesh.io/bytes-per-iteration";
/// Pod annotation with a parameter-server job's servers.
pub const SERVERS_ANNOTATION: &str = "zonemesh.io/servers";
/// The label (and annotation) an Indexed Job gives each pod: its completion index, the rank.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// `MaxExtenderPriority` of `k8s.io/kube-scheduler/extender/v1`.
pub const MAX_SCORE: i64 = 10;
/// The score of a node zonemesh cannot judge.
pub const NEUTRAL_SCORE: i64 = 5;
/// How long a job's zones are remembered after its last pod was seen. Default 10 min.
pub const DEFAULT_JOB_TTL_MS: i64 = 600_000;

/// The parts of a pod the extender reads (its `metadata`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtenderPod {
    /// Name.
    pub name: String,
    /// Namespace (empty means `default`).
    pub namespace: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
}

/// The answer to `filter`: the candidates that pass, in the order given, and those filtered out
/// with the reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filtered {
    /// Names that pass.
    pub passing: Vec<String>,
    /// Names filtered out, with the reason.
    pub failed: BTreeMap<String, String>,
    /// The pod's job-model annotations, when they were refused (the pod was placed without).
    pub job_model_refused: Option<JobModelRefused>,
}

/// Job-model annotations refused: which one (a fixed label for metrics) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobModelRefused {
    /// `collective`, `bytes_per_iteration` or `servers`.
    pub reason: &'static str,
    /// What is wrong, naming the pod and the annotation.
    pub message: String,
}

/// One candidate's score from `prioritize`: 0..=[`MAX_SCORE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Score {
    /// Node name, as the scheduler gave it.
    pub node: String,
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
    /// The node of each rank, with the job model (empty without).
    pub ranks: Vec<NodeName>,
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

/// `namespace/job` of a pod that belongs to a job.
pub fn job_of(pod: &ExtenderPod) -> Option<String> {
    let job = pod.labels.get(JOB_LABEL)?.trim();
    if job.is_empty() {
        return None;
    }
    let ns = if pod.namespace.is_empty() {
        "default"
    } else {
        &pod.namespace
    };
    Some(format!("{ns}/{job}"))
}

/// The job's size from its annotation; `None` when absent.
pub fn workers(pod: &ExtenderPod) -> Result<Option<u32>, BadRequest> {
    let Some(value) = pod.annotations.get(WORKERS_ANNOTATION) else {
        return Ok(None);
    };
    match value.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(BadRequest(format!(
            "pod {}/{}: annotation {WORKERS_ANNOTATION} is {value:?}, not a number of workers (1 or more)",
            pod.namespace, pod.name
        ))),
    }
}

/// The job model from a pod's annotations, for `workers` workers: `None` without a collective
/// annotation; refused with the annotation that is wrong.
pub fn job_model(pod: &ExtenderPod, workers: u32) -> Result<Option<Job>, JobModelRefused> {
    let Some(collective) = pod.annotations.get(COLLECTIVE_ANNOTATION) else {
        return Ok(None);
    };
    let refuse = |reason: &'static str, annotation: &str, why: String| JobModelRefused {
        reason,
        message: format!(
            "pod {}/{}: annotation {annotation}: {why}; placed without the job model",
            pod.namespace, pod.name
        ),
    };
    let servers = match pod.annotations.get(SERVERS_ANNOTATION) {
        None => 0,
        Some(v) => v.trim().parse::<u32>().map_err(|_| {
            refuse(
                "servers",
                SERVERS_ANNOTATION,
                format!("{v:?} is not a number of servers"),
            )
        })?,
    };
    let bytes = match pod.annotations.get(BYTES_ANNOTATION) {
        None => {
            return Err(refuse(
                "bytes_per_iteration",
                BYTES_ANNOTATION,
                "missing (a collective needs its bytes per iteration)".into(),
            ));
        }
        Some(v) => {
            parse_quantity(v).map_err(|e| refuse("bytes_per_iteration", BYTES_ANNOTATION, e))?
        }
    };
    let collective =
        Collective::parse("collective", collective, "servers", servers).map_err(|e| {
            match e.field() {
                "servers" => refuse("servers", SERVERS_ANNOTATION, e.problem().to_owned()),
                _ => refuse("collective", COLLECTIVE_ANNOTATION, e.problem().to_owned()),
            }
        })?;
    Job::checked(collective, bytes, workers)
        .map(Some)
        .map_err(|e| match e.field() {
            "servers" => refuse("servers", SERVERS_ANNOTATION, e.problem().to_owned()),
            _ => refuse(
                "bytes_per_iteration",
                BYTES_ANNOTATION,
                e.problem().to_owned(),
            ),
        })
}

/// The pod's completion index (its rank in an Indexed Job), from its label or annotation.
pub fn completion_index(pod: &ExtenderPod) -> Option<usize> {
    pod.labels
        .get(COMPLETION_INDEX)
        .or_else(|| pod.annotations.get(COMPLETION_INDEX))
        .and_then(|v| v.trim().parse().ok())
}

impl Snapshot {
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
        model: Option<Job>,
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
            job: model,
            alternatives: 0,
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
            ranks: if placed.job.is_some() {
                placed
                    .ranks
                    .iter()
                    .map(|n| self.node(*n).name.clone())
                    .collect()
            } else {
                Vec::new()
            },
            expires: UnixMs(now.0 + jobs.ttl_ms),
        };
        jobs.entries.insert(job.to_owned(), placement.clone());
        Some(placement)
    }

    /// The extender's `filter` verb.
    pub fn extender_filter(
        &self,
        pod: &ExtenderPod,
        names: &[String],
        jobs: &mut Jobs,
        now: UnixMs,
    ) -> Result<Filtered, BadRequest> {
        let job = job_of(pod);
        let size = if job.is_some() { workers(pod)? } else { None };
        let (model, job_model_refused) = if job.is_some() {
            match job_model(pod, size.unwrap_or(1)) {
                Ok(model) => (model, None),
                Err(refused) => (None, Some(refused)),
            }
        } else {
            (None, None)
        };
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
                state.is_out().then(|| {
                    failed.insert(
                        names[*i].clone(),
                        format!("zonemesh: {}: {why}", state.as_str()),
                    );
                    *i
                })
            })
            .collect();
        if !names.is_empty() && down.len() == names.len() {
            // Every candidate out (DOWN or UNREACHABLE): zonemesh's view is more likely wrong
            // than the cluster.
            failed.clear();
        }
        if let Some(job) = &job {
            let offered: Vec<NodeId> = known
                .iter()
                .filter(|(i, _)| !failed.contains_key(&names[*i]))
                .map(|(_, id)| *id)
                .collect();
            if let Some(placement) = self.job_placement(jobs, job, size, model, &offered, now) {
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
        jobs.expire(now);
        Ok(Filtered {
            passing,
            failed,
            job_model_refused,
        })
    }

    /// The extender's `prioritize` verb: a score of 0..=10 for every candidate.
    pub fn extender_prioritize(
        &self,
        pod: &ExtenderPod,
        names: &[String],
        jobs: &Jobs,
        now: UnixMs,
    ) -> Vec<Score> {
        let placement = job_of(pod).and_then(|j| jobs.get(&j, now).cloned());
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
        // An Indexed Job's pod of rank i: the node of rank i alone gets the top score.
        let rank_node = placement
            .as_ref()
            .and_then(|p| completion_index(pod).and_then(|i| p.ranks.get(i).cloned()));
        names
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
                        NodeState::Stale | NodeState::Down | NodeState::Unreachable => 0,
                    },
                };
                let score = match &rank_node {
                    Some(n) if n.as_str() == name => MAX_SCORE,
                    Some(_) => score.min(MAX_SCORE - 1),
                    None => score,
                };
                Score {
                    node: name.clone(),
                    score,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{EngineConfig, Topology};

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

    fn pod(job: Option<(&str, &str)>) -> ExtenderPod {
        let mut pod = ExtenderPod {
            name: "w-0".into(),
            namespace: "ml".into(),
            ..ExtenderPod::default()
        };
        pod.labels.insert("app".into(), "trainer".into());
        if let Some((job, workers)) = job {
            pod.labels.insert(JOB_LABEL.into(), job.into());
            pod.annotations
                .insert(WORKERS_ANNOTATION.into(), workers.into());
        }
        pod
    }

    fn names(nodes: &[&str]) -> Vec<String> {
        nodes.iter().map(|n| (*n).to_owned()).collect()
    }

    const ALL: [&str; 9] = [
        "z0-n0", "z0-n1", "z0-n2", "z1-n0", "z1-n1", "z1-n2", "z2-n0", "z2-n1", "z2-n2",
    ];

    #[test]
    fn unreachable_and_down_nodes_are_filtered_with_the_reason() {
        // z2-n0 loses every probe (a network fault); z1-n1's agent is gone.
        let mut t = cluster();
        let gone = t.id(&name("z1-n1")).unwrap();
        force_down(&mut t, gone);
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let r = t
            .view()
            .extender_filter(&pod(None), &names(&ALL), &mut jobs, NOW)
            .unwrap();
        assert_eq!(r.passing.len(), 7, "{:?}", r.failed);
        assert!(!r.passing.contains(&"z2-n0".to_owned()));
        assert!(
            r.failed["z2-n0"].contains("UNREACHABLE: every probe to it was lost"),
            "{:?}",
            r.failed
        );
        assert!(
            r.failed["z1-n1"].contains("DOWN: its agent is gone"),
            "{:?}",
            r.failed
        );
    }

    #[test]
    fn empty_lists_and_unknown_nodes_are_answered_neutrally() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let r = t
            .view()
            .extender_filter(&pod(None), &[], &mut jobs, NOW)
            .unwrap();
        assert!(r.passing.is_empty() && r.failed.is_empty());
        let unknown = names(&["gpu-7", "gpu-8"]);
        let r = t
            .view()
            .extender_filter(&pod(Some(("j", "2"))), &unknown, &mut jobs, NOW);
        assert_eq!(r.unwrap().passing, unknown);
        let scores = t
            .view()
            .extender_prioritize(&pod(None), &unknown, &jobs, NOW);
        assert!(scores.iter().all(|s| s.score == NEUTRAL_SCORE));
    }

    #[test]
    fn with_no_figures_yet_nothing_is_filtered_and_every_score_is_neutral() {
        let mut t = Topology::new(EngineConfig::default());
        for n in ALL {
            t.register(&hello(n, &format!("zone-{}", &n[1..2])), NOW);
        }
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let p = pod(Some(("resnet", "3")));
        let r = t
            .view()
            .extender_filter(&p, &names(&ALL), &mut jobs, NOW)
            .unwrap();
        assert_eq!(r.passing.len(), 9);
        assert!(jobs.is_empty(), "no zone chosen without figures");
        let scores = t.view().extender_prioritize(&p, &names(&ALL), &jobs, NOW);
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
            .view()
            .extender_filter(&pod(None), &names(&["z2-n0"]), &mut jobs, NOW)
            .unwrap();
        assert_eq!(r.passing, ["z2-n0"]);
        assert!(r.failed.is_empty());
    }

    #[test]
    fn a_jobs_pods_are_kept_in_the_zone_its_first_pod_chose() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let p = pod(Some(("resnet", "3")));
        let first = t
            .view()
            .extender_filter(&p, &names(&ALL), &mut jobs, NOW)
            .unwrap();
        assert_eq!(
            first.passing,
            ["z1-n0", "z1-n1", "z1-n2"],
            "the zone with the best links"
        );
        assert!(first.failed["z0-n0"].contains("job ml/resnet runs in zone-1"));
        let placed = jobs.get("ml/resnet", NOW).unwrap().clone();
        assert_eq!(placed.zones.len(), 1);
        // A later pod of the job, offered what is left, stays in zone-1.
        let second = t
            .view()
            .extender_filter(&p, &names(&["z0-n0", "z1-n2", "z2-n1"]), &mut jobs, NOW)
            .unwrap();
        assert_eq!(second.passing, ["z1-n2"]);
        // The nodes chosen for the job score highest.
        let scores = t.view().extender_prioritize(&p, &names(&ALL), &jobs, NOW);
        for s in &scores {
            let chosen = placed.nodes.iter().any(|n| n.as_str() == s.node);
            assert!((0..=MAX_SCORE).contains(&s.score));
            if chosen {
                assert_eq!(s.score, MAX_SCORE, "{s:?}");
            }
        }
        assert_eq!(
            scores.iter().find(|s| s.node == "z2-n0").unwrap().score,
            0,
            "UNREACHABLE"
        );
        // Another namespace's job of the same name is another job.
        let mut other = pod(Some(("resnet", "3")));
        other.namespace = "research".into();
        t.view()
            .extender_filter(&other, &names(&ALL), &mut jobs, NOW)
            .unwrap();
        assert_eq!(jobs.len(), 2);
    }

    #[test]
    fn a_job_larger_than_any_zone_spans_the_fewest_zones() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let r = t
            .view()
            .extender_filter(&pod(Some(("big", "5"))), &names(&ALL), &mut jobs, NOW)
            .unwrap();
        let placed = jobs.get("ml/big", NOW).unwrap();
        assert_eq!(placed.zones.len(), 2, "{placed:?}");
        assert_eq!(placed.nodes.len(), 5);
        assert!(
            r.passing.len() >= 5 && r.passing.len() <= 6,
            "{:?}",
            r.passing
        );
        // A job larger than every node offered is not held to a zone at all.
        let r = t
            .view()
            .extender_filter(&pod(Some(("huge", "40"))), &names(&ALL), &mut jobs, NOW)
            .unwrap();
        assert_eq!(r.passing.len(), 8);
        assert!(jobs.get("ml/huge", NOW).is_none());
    }

    #[test]
    fn a_job_is_forgotten_after_its_ttl_without_pods() {
        let t = cluster();
        let mut jobs = Jobs::new(60_000);
        let p = pod(Some(("resnet", "3")));
        t.view()
            .extender_filter(&p, &names(&ALL), &mut jobs, NOW)
            .unwrap();
        let seen = UnixMs(NOW.0 + 59_000);
        assert!(jobs.get("ml/resnet", seen).is_some());
        // A pod seen renews it...
        t.view()
            .extender_filter(&p, &names(&ALL), &mut jobs, seen)
            .unwrap();
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
                .view()
                .extender_filter(&pod(Some(("j", bad))), &names(&ALL), &mut jobs, NOW)
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
        let scores = t.view().extender_prioritize(
            &pod(None),
            &names(&["z0-n0", "z0-n1", "z0-n2"]),
            &jobs,
            NOW,
        );
        let score = |h: &str| scores.iter().find(|s| s.node == h).unwrap().score;
        assert!(score("z0-n1") < score("z0-n0"), "{scores:?}");
        assert!(scores.iter().all(|s| (0..=MAX_SCORE).contains(&s.score)));
    }

    #[test]
    fn quantities_follow_the_kubernetes_rules() {
        let cases: [(&str, Option<u64>); 14] = [
            ("25Mi", Some(25 << 20)),
            ("4M", Some(4_000_000)),
            ("1Gi", Some(1 << 30)),
            ("1.5Ki", Some(1536)),
            ("1e6", Some(1_000_000)),
            ("2E3", Some(2_000)),
            ("3k", Some(3_000)),
            ("1500m", Some(2)),
            (" 256000 ", Some(256_000)),
            ("+7", Some(7)),
            ("-1Mi", None),
            ("25MB", None),
            ("Mi", None),
            ("1.2.3", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_quantity(text).ok(), want, "{text:?}");
        }
    }

    fn job_pod(index: Option<usize>, annotations: &[(&str, &str)]) -> ExtenderPod {
        let mut pod = pod(Some(("trainer", "3")));
        for (k, v) in annotations {
            pod.annotations.insert((*k).into(), (*v).into());
        }
        if let Some(i) = index {
            pod.labels.insert(COMPLETION_INDEX.into(), i.to_string());
        }
        pod
    }

    #[test]
    fn bad_job_annotations_place_the_pod_without_the_model_and_say_why() {
        let cases = [
            (
                vec![
                    (COLLECTIVE_ANNOTATION, "token-ring"),
                    (BYTES_ANNOTATION, "1Mi"),
                ],
                "collective",
            ),
            (vec![(COLLECTIVE_ANNOTATION, "ring")], "bytes_per_iteration"),
            (
                vec![(COLLECTIVE_ANNOTATION, "ring"), (BYTES_ANNOTATION, "lots")],
                "bytes_per_iteration",
            ),
            (
                vec![(COLLECTIVE_ANNOTATION, "ring"), (BYTES_ANNOTATION, "65Gi")],
                "bytes_per_iteration",
            ),
            (
                vec![(COLLECTIVE_ANNOTATION, "ring"), (BYTES_ANNOTATION, "0")],
                "bytes_per_iteration",
            ),
            (
                vec![
                    (COLLECTIVE_ANNOTATION, "parameter-server"),
                    (BYTES_ANNOTATION, "1Mi"),
                    (SERVERS_ANNOTATION, "4"),
                ],
                "servers",
            ),
            (
                vec![
                    (COLLECTIVE_ANNOTATION, "ring"),
                    (BYTES_ANNOTATION, "1Mi"),
                    (SERVERS_ANNOTATION, "1"),
                ],
                "servers",
            ),
        ];
        let t = cluster();
        for (annotations, reason) in cases {
            let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
            let pod = job_pod(None, &annotations);
            let r = t
                .view()
                .extender_filter(&pod, &names(&ALL), &mut jobs, NOW)
                .unwrap();
            let refused = r.job_model_refused.expect("refused");
            assert_eq!(
                refused.reason, reason,
                "{annotations:?}: {}",
                refused.message
            );
            assert!(refused.message.contains("ml/w-0"), "{}", refused.message);
            // Still placed, in one zone, without the job model.
            let placement = jobs.get("ml/trainer", NOW).expect("placed");
            assert!(placement.ranks.is_empty());
            assert_eq!(placement.zones.len(), 1);
        }
    }

    #[test]
    fn the_pod_of_rank_i_scores_the_node_of_rank_i_highest() {
        let t = cluster();
        let mut jobs = Jobs::new(DEFAULT_JOB_TTL_MS);
        let annotations = [(COLLECTIVE_ANNOTATION, "ring"), (BYTES_ANNOTATION, "25Mi")];
        let r = t
            .view()
            .extender_filter(
                &job_pod(Some(0), &annotations),
                &names(&ALL),
                &mut jobs,
                NOW,
            )
            .unwrap();
        assert_eq!(r.job_model_refused, None);
        let ranks = jobs.get("ml/trainer", NOW).unwrap().ranks.clone();
        assert_eq!(ranks.len(), 3, "three workers, one rank each");
        for (i, node) in ranks.iter().enumerate() {
            let scores = t.view().extender_prioritize(
                &job_pod(Some(i), &annotations),
                &names(&ALL),
                &jobs,
                NOW,
            );
            let top: Vec<&str> = scores
                .iter()
                .filter(|s| s.score == MAX_SCORE)
                .map(|s| s.node.as_str())
                .collect();
            assert_eq!(top, [node.as_str()], "rank {i}: {scores:?}");
        }
        // The index may come as an annotation too.
        let mut pod = job_pod(None, &annotations);
        pod.annotations.insert(COMPLETION_INDEX.into(), "2".into());
        assert_eq!(completion_index(&pod), Some(2));
    }
}
