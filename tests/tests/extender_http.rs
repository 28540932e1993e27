//! The kube-scheduler extender of the real aggregator, over HTTP, with bodies shaped exactly as
//! kube-scheduler sends them (`ExtenderArgs` from Go's encoder: PascalCase, `null` for the list
//! it does not send, full Pod and Node objects inside).

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use zonemesh_tests::{FakeAgent, http_get, http_post, start_aggregator};

/// A pod as the API server stores it (what kube-scheduler passes on).
fn pod(name: &str, job: Option<(&str, &str)>) -> Value {
    let mut labels = json!({ "app.kubernetes.io/name": "trainer" });
    let mut annotations = json!({ "kubectl.kubernetes.io/last-applied-configuration": "{}" });
    if let Some((job, workers)) = job {
        labels["zonemesh.io/job"] = json!(job);
        annotations["zonemesh.io/workers"] = json!(workers);
    }
    json!({
        "metadata": {
            "name": name, "namespace": "ml", "uid": "6b1f5c6e-0d1e-4c36-9a5b-2b7d7f1c0a11",
            "resourceVersion": "48213", "creationTimestamp": "2026-12-03T08:00:00Z",
            "labels": labels, "annotations": annotations,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "resnet",
                                 "uid": "0c7d", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "containers": [{"name": "worker", "image": "registry.example/trainer:1.4",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "schedulerName": "zonemesh-scheduler", "restartPolicy": "Never",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort"}
    })
}

fn node(name: &str, zone: &str) -> Value {
    json!({
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "9",
                     "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {"capacity": {"cpu": "32", "nvidia.com/gpu": "8"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extender_keeps_a_jobs_pods_in_its_zone_and_answers_as_kube_scheduler_expects()
-> Result<()> {
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(&["--in-memory"], dir.path())?;
    let http = aggregator.http;

    // No data yet: a neutral answer, nothing filtered out.
    let all = ["a1", "a2", "a3", "b1", "b2", "b3"];
    let body = json!({"Pod": pod("w-0", Some(("resnet", "3"))), "Nodes": null, "NodeNames": all});
    let (status, text) = http_post(http, "/extender/filter", &body.to_string())?;
    ensure!(status == 200, "{status}: {text}");
    let answer: Value = serde_json::from_str(&text)?;
    ensure!(names(&answer["NodeNames"]) == all, "{answer}");
    ensure!(answer["Error"] == "", "{answer}");

    // Two zones of three: zone-a has a node that loses 10 %, zone-b is clean.
    let mut agents = Vec::new();
    for n in all {
        let zone = if n.starts_with('a') {
            "zone-a"
        } else {
            "zone-b"
        };
        agents.push((n, FakeAgent::connect(&aggregator, n, zone).await?));
    }
    for (n, agent) in &mut agents {
        let mates: Vec<(&str, f64, u64, f64)> = all
            .iter()
            .filter(|m| **m != *n && m[..1] == n[..1])
            .map(|m| {
                let lost = if *n == "a2" || *m == "a2" { 10 } else { 0 };
                (*m, 40.0, lost, 9.4e8)
            })
            .collect();
        agent.report(&mates).await?;
    }

    // The job's first pod: its zone is chosen, the other zone filtered out with a reason.
    let (status, text) = http_post(http, "/extender/filter", &body.to_string())?;
    ensure!(status == 200, "{status}: {text}");
    let answer: Value = serde_json::from_str(&text)?;
    ensure!(
        names(&answer["NodeNames"]) == ["b1", "b2", "b3"],
        "{answer}"
    );
    let reason = answer["FailedNodes"]["a1"]
        .as_str()
        .context("a1 has a reason")?;
    ensure!(reason.contains("job ml/resnet runs in zone-b"), "{reason}");
    ensure!(answer.get("Nodes").is_none_or(Value::is_null), "{answer}");

    // A later pod of the job, sent as full Node objects (not nodeCacheCapable): the zone holds,
    // and the objects come back as they were.
    let list = json!({"metadata": {"resourceVersion": "77"},
                      "items": [node("a1", "zone-a"), node("b2", "zone-b"), node("gpu-x", "zone-z")]});
    let body2 = json!({"Pod": pod("w-1", Some(("resnet", "3"))), "Nodes": list, "NodeNames": null});
    let (status, text) = http_post(http, "/extender/filter", &body2.to_string())?;
    ensure!(status == 200, "{status}: {text}");
    let answer: Value = serde_json::from_str(&text)?;
    ensure!(
        answer["Nodes"]["items"] == json!([node("b2", "zone-b")]),
        "{answer}"
    );
    ensure!(
        answer.get("NodeNames").is_none_or(Value::is_null),
        "{answer}"
    );

    // Prioritize: a bare HostPriorityList, scores 0..10, the job's nodes on top.
    let (status, text) = http_post(http, "/extender/prioritize", &body.to_string())?;
    ensure!(status == 200, "{status}: {text}");
    let scores: Value = serde_json::from_str(&text)?;
    let list = scores.as_array().context("a JSON array")?;
    ensure!(list.len() == all.len(), "{scores}");
    for s in list {
        let score = s["Score"].as_i64().context("Score")?;
        ensure!((0..=10).contains(&score), "{s}");
        if s["Host"].as_str().is_some_and(|h| h.starts_with('b')) {
            ensure!(score == 10, "{s}");
        }
    }
    // A pod of no job: scored by the ranking; the lossy node lowest in its zone.
    let plain = json!({"Pod": pod("web", None), "Nodes": null, "NodeNames": ["a1", "a2", "a3"]});
    let (_, text) = http_post(http, "/extender/prioritize", &plain.to_string())?;
    let scores: Value = serde_json::from_str(&text)?;
    let score = |h: &str| {
        scores
            .as_array()
            .and_then(|a| a.iter().find(|s| s["Host"] == h))
            .and_then(|s| s["Score"].as_i64())
            .unwrap_or(-1)
    };
    ensure!(
        score("a2") < score("a1") && score("a2") < score("a3"),
        "{scores}"
    );

    // Lowercase field names, as Go's decoder accepts them too.
    let lower = json!({"pod": pod("w-2", None), "nodenames": ["b1"]});
    let (status, text) = http_post(http, "/extender/filter", &lower.to_string())?;
    ensure!(
        status == 200 && text.contains("\"NodeNames\":[\"b1\"]"),
        "{text}"
    );

    // An empty list is answered with an empty list, not null.
    let empty = json!({"Pod": pod("w-3", None), "Nodes": null, "NodeNames": []});
    let (_, text) = http_post(http, "/extender/filter", &empty.to_string())?;
    ensure!(text.contains("\"NodeNames\":[]"), "{text}");

    // Bad input: not JSON is a 400 that says so; a bad annotation is an Error naming it.
    let (status, text) = http_post(http, "/extender/filter", "{not json")?;
    ensure!(
        status == 400 && text.contains("ExtenderArgs"),
        "{status}: {text}"
    );
    let bad = json!({"Pod": pod("w-4", Some(("other", "lots"))), "NodeNames": ["b1"]});
    let (status, text) = http_post(http, "/extender/filter", &bad.to_string())?;
    let answer: Value = serde_json::from_str(&text)?;
    ensure!(
        status == 200
            && answer["Error"]
                .as_str()
                .is_some_and(|e| e.contains("zonemesh.io/workers")),
        "{answer}"
    );

    // The verbs are timed in /metrics.
    let metrics = http_get(http, "/metrics")?;
    ensure!(
        metrics.contains("zonemesh_query_seconds_count{rpc=\"ExtenderFilter\"}"),
        "{metrics}"
    );
    Ok(())
}
