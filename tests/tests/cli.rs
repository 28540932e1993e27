//! The `zonemesh` command against a real aggregator: every query as a table and as JSON, the
//! figures it was fed, colour only when asked for or on a terminal, and exit statuses a script
//! can rely on (unreachable, refused, unauthenticated, no placement).

use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use zonemesh_tests::pki::Ca;
use zonemesh_tests::{Aggregator, FakeAgent, binary, start_aggregator};
use zonemesh_tls::Role;

fn zonemesh(aggregator: &str, args: &[&str]) -> Result<Output> {
    Ok(Command::new(binary("zonemesh"))
        .args(args)
        .args(["--aggregator", aggregator])
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS")
        .env_remove("ZONEMESH_TOKEN")
        .env_remove("ZONEMESH_TOKEN_FILE")
        .env_remove("ZONEMESH_TLS_CA")
        .env_remove("ZONEMESH_TLS_CERT")
        .env_remove("ZONEMESH_TLS_KEY")
        .env_remove("ZONEMESH_TLS_SERVER_NAME")
        .output()?)
}

fn ok(out: &Output) -> Result<String> {
    ensure!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout.clone())?)
}

fn json(out: &Output) -> Result<Value> {
    Ok(serde_json::from_str(&ok(out)?)?)
}

/// The string fields `a` and `b` of each object of the JSON array `list` ("" where one is
/// missing); `None` when `list` is no array.
fn string_pairs<'a>(list: &'a Value, a: &str, b: &str) -> Option<Vec<(&'a str, &'a str)>> {
    let field = |v: &'a Value, key: &str| v[key].as_str().unwrap_or("");
    Some(
        list.as_array()?
            .iter()
            .map(|v| (field(v, a), field(v, b)))
            .collect(),
    )
}

/// zone-a: a1, a2, a3 (100 µs apart; a3 loses 20 % toward a1), zone-b: b1, b2; 2 ms between.
/// a3 never reports b2: that path is estimated by the model.
async fn cluster(dir: &std::path::Path, extra: &[&str]) -> Result<(Aggregator, Vec<FakeAgent>)> {
    let mut args = vec!["--in-memory"];
    args.extend(extra);
    let aggregator = start_aggregator(&args, dir)?;
    let nodes = [
        ("a1", "zone-a"),
        ("a2", "zone-a"),
        ("a3", "zone-a"),
        ("b1", "zone-b"),
        ("b2", "zone-b"),
    ];
    let agents = report_mesh(
        &aggregator,
        &nodes,
        |src, dst| u64::from((src, dst) == ("a3", "a1")) * 20,
        |src, dst| (src, dst) == ("a3", "b2"),
    )
    .await?;
    Ok((aggregator, agents))
}

/// An agent for each of `nodes` (name, zone), each of which has reported one window to every
/// other node but those `skip` leaves out: 100 µs inside a zone and 2 ms between, `lost(src,
/// dst)` of its 100 probes lost, 9 Gbit/s.
async fn report_mesh(
    aggregator: &Aggregator,
    nodes: &[(&str, &str)],
    lost: impl Fn(&str, &str) -> u64,
    skip: impl Fn(&str, &str) -> bool,
) -> Result<Vec<FakeAgent>> {
    let mut agents = Vec::new();
    for &(node, zone) in nodes {
        let mut agent = FakeAgent::connect(aggregator, node, zone).await?;
        let paths: Vec<(&str, f64, u64, f64)> = nodes
            .iter()
            .filter(|(peer, _)| *peer != node && !skip(node, peer))
            .map(|&(peer, peer_zone)| {
                let rtt = if peer_zone == zone { 100.0 } else { 2_000.0 };
                (peer, rtt, lost(node, peer), 9e9)
            })
            .collect();
        agent.report(&paths).await?;
        agents.push(agent);
    }
    Ok(agents)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_query_prints_a_table_and_json_with_the_reported_figures() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (aggregator, mut agents) = cluster(dir.path(), &[]).await?;
    let url = format!("http://{}", aggregator.grpc);

    // nodes: JSON with every node READY, a table without colour when piped.
    let nodes = json(&zonemesh(&url, &["nodes", "--output", "json"])?)?;
    let states = string_pairs(&nodes["nodes"], "name", "state").context("nodes")?;
    ensure!(
        states.len() == 5 && states.iter().all(|(_, s)| *s == "READY"),
        "{states:?}"
    );
    let table = ok(&zonemesh(&url, &["nodes"])?)?;
    ensure!(table.contains("a1") && table.contains("READY"), "{table}");
    ensure!(!table.contains('\x1b'), "colour in a pipe: {table:?}");
    let colored = ok(&zonemesh(&url, &["nodes", "--color", "always"])?)?;
    // Dark green (crossterm's 256-colour escape, through comfy-table) around the state only.
    ensure!(colored.contains("\x1b[38;5;2mREADY\x1b["), "{colored:?}");
    let only_b = json(&zonemesh(
        &url,
        &["nodes", "--zone", "zone-b", "-o", "json"],
    )?)?;
    ensure!(
        only_b["nodes"].as_array().map(Vec::len) == Some(2),
        "{only_b}"
    );

    // zones: the zone-a → zone-b link at 2 ms.
    let zones = json(&zonemesh(&url, &["zones", "--output", "json"])?)?;
    let link = zones["links"]
        .as_array()
        .context("links")?
        .iter()
        .find(|l| l["src_zone"] == "zone-a" && l["dst_zone"] == "zone-b")
        .context("zone-a → zone-b")?;
    ensure!(link["figures"]["rtt"]["p50_us"] == 2000.0, "{link}");
    ensure!(ok(&zonemesh(&url, &["zones"])?)?.contains("2.00 ms"));

    // path: a3 → a1 loses 20 %.
    let path = json(&zonemesh(&url, &["path", "a3", "a1", "-o", "json"])?)?;
    let loss = path["figures"]["loss_ratio"].as_f64().context("loss")?;
    ensure!((loss - 0.2).abs() < 1e-9, "{path}");
    ensure!(path["figures"]["latency_provenance"] == "MEASURED");
    let text = ok(&zonemesh(&url, &["path", "a3", "a1"])?)?;
    ensure!(text.contains("20.00 %"), "{text}");

    // path: a3 → b2 was never measured. It shows the model's figures, labelled as an
    // estimate, and none of the measured-only figures as zeros ("min 0 µs, max 0 µs, jitter
    // 0 µs … 0 of 0 probes answered" before).
    let path = json(&zonemesh(&url, &["path", "a3", "b2", "-o", "json"])?)?;
    ensure!(
        path["figures"]["latency_provenance"] == "ESTIMATED",
        "{path}"
    );
    let text = ok(&zonemesh(&url, &["path", "a3", "b2"])?)?;
    ensure!(
        text.contains("p50 2.00 ms") && text.contains("estimated by the model"),
        "{text}"
    );
    for zero in ["0 µs", "0 of 0", "min ", "jitter", "probes answered"] {
        ensure!(!text.contains(zero), "{zero:?} in the estimate:\n{text}");
    }

    // matrix: zone-a's loss, a3 → a1 at 20 %; cut to a narrow terminal, it says so.
    let matrix = json(&zonemesh(
        &url,
        &[
            "matrix", "--zone", "zone-a", "--metric", "loss", "-o", "json",
        ],
    )?)?;
    let names: Vec<&str> = matrix["nodes"]
        .as_array()
        .context("nodes")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let (i, j) = (
        names.iter().position(|n| *n == "a3").context("a3")?,
        names.iter().position(|n| *n == "a1").context("a1")?,
    );
    let cell = matrix["cells"][i][j]["value"].as_f64().context("cell")?;
    ensure!((cell - 0.2).abs() < 1e-9, "{matrix}");
    let narrow = Command::new(binary("zonemesh"))
        .args(["matrix", "--aggregator", &url, "--metric", "rtt"])
        .env("COLUMNS", "40")
        .output()?;
    let narrow = ok(&narrow)?;
    ensure!(narrow.contains("columns fit"), "{narrow}");
    ensure!(
        narrow
            .lines()
            .all(|l| l.chars().count() <= 40 || l.contains("columns fit")),
        "{narrow}"
    );

    // rank: a3 last in zone-a.
    let rank = json(&zonemesh(
        &url,
        &["rank", "--zone", "zone-a", "-o", "json"],
    )?)?;
    let order: Vec<&str> = rank["nodes"]
        .as_array()
        .context("ranking")?
        .iter()
        .filter_map(|n| n["node"].as_str())
        .collect();
    ensure!(order.last() == Some(&"a3"), "{order:?}");

    // place: two workers in one zone, never on the lossy a3.
    let placed = json(&zonemesh(
        &url,
        &["place", "2", "--policy", "require-one", "-o", "json"],
    )?)?;
    let chosen: Vec<&str> = placed["assignments"]
        .as_array()
        .context("assignments")?
        .iter()
        .filter_map(|a| a["node"].as_str())
        .collect();
    ensure!(chosen.len() == 2 && !chosen.contains(&"a3"), "{placed}");
    ensure!(
        placed["zones"].as_array().map(Vec::len) == Some(1),
        "{placed}"
    );
    // place with the job's collective: predicted time, rank order, a hostfile in rank order,
    // torchrun-style node ranks.
    let job = [
        "place",
        "2",
        "--policy",
        "require-one",
        "--collective",
        "ring",
        "--bytes",
        "25Mi",
    ];
    let table = ok(&zonemesh(&url, &job)?)?;
    ensure!(
        table.contains("predicted time per iteration")
            && table.contains("rank order:")
            && table.contains("estimated figures:")
            && table.contains("bottleneck:"),
        "{table}"
    );
    let mut with_json = job.to_vec();
    with_json.extend(["-o", "json"]);
    let placed = json(&zonemesh(&url, &with_json)?)?;
    let order: Vec<&str> = placed["rank_order"]
        .as_array()
        .context("rank_order")?
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    ensure!(order.len() == 2 && !order.contains(&"a3"), "{placed}");
    ensure!(
        placed["predicted_seconds"]
            .as_f64()
            .is_some_and(|s| s > 0.0),
        "{placed}"
    );
    let ranks = placed["node_ranks"].as_array().context("node_ranks")?;
    ensure!(
        ranks.len() == 2 && ranks[1]["node_rank"] == 1 && ranks[1]["host"] == order[1],
        "{placed}"
    );
    let mut with_hostfile = job.to_vec();
    with_hostfile.push("--hostfile");
    let hostfile = ok(&zonemesh(&url, &with_hostfile)?)?;
    ensure!(
        hostfile == format!("{} slots=1\n{} slots=1\n", order[0], order[1]),
        "{hostfile}"
    );

    // nodes: one that is not READY says why. b9 is only a destination of a1's: no agent of its
    // own ever connected.
    agents[0].report(&[("b9", 100.0, 0, 9e9)]).await?;
    let nodes = json(&zonemesh(&url, &["nodes", "-o", "json"])?)?;
    let b9 = nodes["nodes"]
        .as_array()
        .context("nodes")?
        .iter()
        .find(|n| n["name"] == "b9")
        .context("b9")?;
    ensure!(
        b9["state"] == "DOWN" && b9["state_reason"] == "its agent never connected",
        "{b9}"
    );
    let a1 = &nodes["nodes"][0];
    ensure!(a1["name"] == "a1" && a1["state_reason"] == "", "{a1}");
    let table = ok(&zonemesh(&url, &["nodes"])?)?;
    ensure!(
        table.contains("why not ready") && table.contains("its agent never connected"),
        "{table}"
    );
    Ok(())
}

/// `zonemesh faults`: a node that loses 10 % of the probes on every path of its is named, and
/// nothing else, as a table and as JSON, with its figure, interval and evidence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_name_a_lossy_node_as_a_table_and_json() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--fault-interval",
            "1s",
            "--fault-open-after",
            "0s",
        ],
        dir.path(),
    )?;
    let url = format!("http://{}", aggregator.grpc);
    let nodes = [
        ("a1", "zone-a"),
        ("a2", "zone-a"),
        ("a3", "zone-a"),
        ("b1", "zone-b"),
        ("b2", "zone-b"),
        ("b3", "zone-b"),
    ];
    // a2 loses 10 of every 100 probes, on each of its paths both ways.
    let _agents = report_mesh(
        &aggregator,
        &nodes,
        |src, dst| u64::from(src == "a2" || dst == "a2") * 10,
        |_, _| false,
    )
    .await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let answer = loop {
        let answer = json(&zonemesh(&url, &["faults", "--output", "json"])?)?;
        if answer["faults"].as_array().is_some_and(|f| !f.is_empty()) {
            break answer;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "no fault named in a minute: {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let faults = answer["faults"].as_array().context("faults")?;
    ensure!(faults.len() == 1, "{answer}");
    let fault = &faults[0];
    ensure!(
        (
            fault["element"].as_str(),
            fault["a"].as_str(),
            fault["kind"].as_str()
        ) == (Some("NODE"), Some("a2"), Some("LOSS")),
        "{fault}"
    );
    ensure!(fault["severity"] == "DEGRADED", "{fault}");
    // Judged on its four paths inside zone-a, 40 of 400 probes lost; every path of its shows it.
    let figure = fault["figure"].as_f64().context("figure")?;
    ensure!((figure - 0.1).abs() < 1e-9, "{fault}");
    ensure!(fault["probes"] == 400, "{fault}");
    let (low, high) = (
        fault["figure_low"].as_f64().context("figure_low")?,
        fault["figure_high"].as_f64().context("figure_high")?,
    );
    ensure!(low < figure && figure < high && low > 0.005, "{fault}");
    ensure!(fault["evidence_paths"] == 10, "{fault}");
    ensure!(answer["evaluated_unix_ms"].as_i64() > Some(0), "{answer}");
    let table = ok(&zonemesh(&url, &["faults"])?)?;
    for expected in ["a2", "loss", "degraded", "10.00 %", "of 400 probes"] {
        ensure!(table.contains(expected), "{expected:?} missing: {table}");
    }
    // A path of a2's names the fault that explains it; a clean path names none.
    let path = json(&zonemesh(&url, &["path", "a1", "a2", "-o", "json"])?)?;
    let explained = string_pairs(&path["faults"], "a", "kind").context("a1 → a2 names no fault")?;
    ensure!(explained == [("a2", "LOSS")], "{path}");
    let text = ok(&zonemesh(&url, &["path", "a1", "a2"])?)?;
    ensure!(text.contains("at fault   a2: loss, degraded"), "{text}");
    let clean = json(&zonemesh(&url, &["path", "b1", "b2", "-o", "json"])?)?;
    ensure!(clean.get("faults").is_none(), "{clean}");
    // The metric counts it by kind and severity, and nothing else.
    let metrics = zonemesh_tests::http_get(aggregator.http, "/metrics")?;
    let open: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("zonemesh_faults{") && !l.ends_with(" 0"))
        .collect();
    ensure!(
        open == [r#"zonemesh_faults{kind="loss",severity="degraded"} 1"#],
        "{open:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_statuses_tell_scripts_what_went_wrong() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "reader ops r3ader-t0ken-0123456789\n")?;
    let tokens_arg = tokens.to_str().context("utf-8")?;
    let (aggregator, _agents) = cluster(dir.path(), &["--tokens-file", tokens_arg]).await?;
    let url = format!("http://{}", aggregator.grpc);
    let status = |out: Output| out.status.code();

    // Credentials: none → 77, a wrong one → 77, the right one → 0.
    ensure!(status(zonemesh(&url, &["zones"])?) == Some(77));
    ensure!(
        status(zonemesh(
            &url,
            &["zones", "--token", "wrong-token-0123456789"]
        )?) == Some(77)
    );
    let with = |args: &[&str]| -> Result<Output> {
        let mut all = args.to_vec();
        all.extend(["--token", "r3ader-t0ken-0123456789"]);
        zonemesh(&url, &all)
    };
    ensure!(status(with(&["zones"])?) == Some(0));
    // The token from a file works the same.
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "r3ader-t0ken-0123456789\n")?;
    let out = zonemesh(
        &url,
        &[
            "nodes",
            "--token-file",
            token_file.to_str().context("utf-8")?,
        ],
    )?;
    ensure!(status(out) == Some(0));
    // Refused by the aggregator: an unknown node → 65, and the message names it.
    let out = with(&["path", "a1", "nope"])?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(
        status(out) == Some(65) && stderr.contains("nope"),
        "{stderr}"
    );
    // No placement possible → 3.
    ensure!(status(with(&["place", "4", "--policy", "require-one"])?) == Some(3));
    // A wrong flag → 64, before any connection (also with nobody listening).
    ensure!(status(with(&["matrix", "--metric", "jitter"])?) == Some(64));
    ensure!(status(with(&["place", "many"])?) == Some(64));
    ensure!(status(with(&["place", "2", "--collective", "ring"])?) == Some(64));
    ensure!(
        status(with(&[
            "place",
            "2",
            "--collective",
            "ring",
            "--bytes",
            "25MB"
        ])?) == Some(64)
    );
    // Refused by the aggregator, naming the field: 65.
    let out = with(&["place", "2", "--collective", "ring", "--bytes", "65Gi"])?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(
        status(out) == Some(65) && stderr.contains("bytes_per_iteration"),
        "{stderr}"
    );
    // Nobody listening → 69.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let out = zonemesh(&format!("http://{closed}"), &["zones", "--timeout", "2s"])?;
    ensure!(status(out) == Some(69));
    let out = zonemesh(
        &format!("http://{closed}"),
        &["matrix", "--metric", "jitter"],
    )?;
    ensure!(status(out) == Some(64));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_speaks_mutual_tls() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = Ca::new("cli test CA")?;
    let ca_file = ca.write(&dir.path().join("ca.crt"))?;
    let server = ca.server(dir.path(), "aggregator")?;
    let reader = ca.client(dir.path(), Role::Reader, "laptop")?;
    let path = |p: &std::path::Path| p.to_str().map(str::to_owned).context("utf-8");
    let (ca_arg, cert, key) = (path(&ca_file)?, path(&server.cert)?, path(&server.key)?);
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &ca_arg,
        ],
        dir.path(),
    )?;
    let url = format!("https://localhost:{}", aggregator.grpc.port());
    let (rc, rk) = (path(&reader.cert)?, path(&reader.key)?);
    let out = zonemesh(
        &url,
        &[
            "zones",
            "--tls-ca",
            &ca_arg,
            "--tls-cert",
            &rc,
            "--tls-key",
            &rk,
        ],
    )?;
    ok(&out)?;
    // Without the client certificate the aggregator does not answer (77); without a CA the
    // https:// URL is a usage error (64).
    let out = zonemesh(&url, &["zones", "--tls-ca", &ca_arg])?;
    ensure!(out.status.code() == Some(77), "{:?}", out.status);
    let out = zonemesh(&url, &["zones"])?;
    ensure!(out.status.code() == Some(64), "{:?}", out.status);
    // Certificates of another CA: the aggregator refuses the client's, the client refuses the
    // aggregator's. Both are credentials (77), which trying again will not fix, not an
    // unreachable aggregator (69), and the message says which side.
    let stranger = Ca::new("another CA")?;
    let other_dir = dir.path().join("other");
    std::fs::create_dir_all(&other_dir)?;
    let other_ca = path(&stranger.write(&other_dir.join("ca.crt"))?)?;
    let impostor = stranger.client(&other_dir, Role::Reader, "laptop")?;
    let (ic, ik) = (path(&impostor.cert)?, path(&impostor.key)?);
    let out = zonemesh(
        &url,
        &[
            "zones",
            "--tls-ca",
            &ca_arg,
            "--tls-cert",
            &ic,
            "--tls-key",
            &ik,
        ],
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.code() == Some(77), "{:?} {stderr}", out.status);
    ensure!(
        stderr.contains("refused this client's certificate"),
        "{stderr}"
    );
    let out = zonemesh(
        &url,
        &[
            "zones",
            "--tls-ca",
            &other_ca,
            "--tls-cert",
            &rc,
            "--tls-key",
            &rk,
        ],
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.code() == Some(77), "{:?} {stderr}", out.status);
    ensure!(
        stderr.contains("server's certificate is not trusted"),
        "{stderr}"
    );
    // A stopped aggregator is unreachable (69), with the same credentials.
    let port = aggregator.grpc.port();
    drop(aggregator);
    let out = zonemesh(
        &format!("https://localhost:{port}"),
        &[
            "zones",
            "--tls-ca",
            &ca_arg,
            "--tls-cert",
            &rc,
            "--tls-key",
            &rk,
        ],
    )?;
    ensure!(out.status.code() == Some(69), "{:?}", out.status);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiers_print_as_a_tree_and_publish_dry_run_prints_the_objects() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (aggregator, _agents) = cluster(dir.path(), &["--tier-interval", "200ms"]).await?;
    let url = format!("http://{}", aggregator.grpc);
    // zone-a and zone-b are 2 ms apart: within the default join threshold (3 ms), one group.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let tiers = loop {
        let t = json(&zonemesh(&url, &["tiers", "--output", "json"])?)?;
        if t["groups"].as_array().is_some_and(|g| g.len() == 1)
            && t["zones"][1]["group"] == "group-1"
        {
            break t;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "never one group: {t:#}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    ensure!(
        tiers["groups"][0]["zones"] == serde_json::json!(["zone-a", "zone-b"]),
        "{tiers:#}"
    );
    ensure!(
        tiers["groups"][0]["inside"]["worst_rtt"]["value"] == 2_000.0,
        "{tiers:#}"
    );
    let tree = ok(&zonemesh(&url, &["tiers"])?)?;
    for line in [
        "cluster (tier 3): 5 nodes, 2 zones, 1 groups",
        "group-1 (tier 2): worst RTT 2.00 ms (zone-a – zone-b)",
        "zone-a (tier 1), inside RTT 100 µs",
        "a1, a2, a3",
    ] {
        ensure!(tree.contains(line), "{line:?} not in\n{tree}");
    }

    // The dry run: JSON, and the same objects as YAML that a YAML parser reads back.
    let list = json(&zonemesh(
        &url,
        &["publish", "--dry-run", "--output", "json"],
    )?)?;
    let items = list["items"].as_array().context("items")?;
    let kinds: Vec<&str> = items.iter().filter_map(|o| o["kind"].as_str()).collect();
    ensure!(
        kinds.iter().filter(|k| **k == "HyperNode").count() == 4
            && kinds.contains(&"Topology")
            && kinds.contains(&"NetworkTopology")
            && !kinds.contains(&"ConfigMap")
            && kinds.iter().filter(|k| **k == "Node").count() == 5,
        "{kinds:?}"
    );
    // Names read once, tier names prefixed; the ConfigMap only when asked for.
    let names: Vec<&str> = items
        .iter()
        .filter(|o| o["kind"] == "HyperNode")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    ensure!(
        names
            == [
                "zonemesh-cluster",
                "zonemesh-group-1",
                "zonemesh-zone-a",
                "zonemesh-zone-b"
            ],
        "{names:?}"
    );
    ensure!(
        items
            .iter()
            .any(|o| o["spec"]["tierName"] == "zonemesh-zone-group"),
        "{items:?}"
    );
    let with_cm = json(&zonemesh(
        &url,
        &[
            "publish",
            "--dry-run",
            "--for",
            "diktyo",
            "--diktyo-configmap",
            "-o",
            "json",
        ],
    )?)?;
    ensure!(
        with_cm["items"]
            .as_array()
            .is_some_and(|i| i.iter().any(|o| o["kind"] == "ConfigMap")),
        "{with_cm:#}"
    );
    let yaml = ok(&zonemesh(&url, &["publish", "--dry-run", "-o", "yaml"])?)?;
    ensure!(
        yaml.starts_with("---\napiVersion: \"topology.volcano.sh/v1alpha1\""),
        "{yaml}"
    );
    if zonemesh_tests::tool_available("python3", &["-c", "import yaml"], "pip install pyyaml") {
        let mut child = Command::new("python3")
            .args([
                "-c",
                "import sys, yaml, json; print(json.dumps(list(yaml.safe_load_all(sys.stdin))))",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        use std::io::Write as _;
        child
            .stdin
            .take()
            .context("stdin")?
            .write_all(yaml.as_bytes())?;
        let parsed: Value = serde_json::from_slice(&child.wait_with_output()?.stdout)?;
        ensure!(
            &parsed == list["items"].as_array().map(|_| &list["items"]).unwrap(),
            "YAML and JSON differ"
        );
    }
    let only = json(&zonemesh(
        &url,
        &[
            "publish",
            "--dry-run",
            "--for",
            "kueue",
            "-o",
            "json",
            "--kueue-version",
            "v1beta1",
        ],
    )?)?;
    ensure!(
        only["items"][0]["apiVersion"] == "kueue.x-k8s.io/v1beta1",
        "{only:#}"
    );
    let alpha = json(&zonemesh(
        &url,
        &[
            "publish",
            "--dry-run",
            "--for",
            "kueue",
            "-o",
            "json",
            "--kueue-version",
            "v1alpha1",
        ],
    )?)?;
    ensure!(
        alpha["items"][0]["apiVersion"] == "kueue.x-k8s.io/v1alpha1",
        "{alpha:#}"
    );

    // Publishing itself is the aggregator's; a wrong scheduler is a usage error.
    let status = |out: Output| out.status.code();
    ensure!(status(zonemesh(&url, &["publish"])?) == Some(64));
    ensure!(status(zonemesh(&url, &["publish", "--dry-run", "--for", "slurm"])?) == Some(64));
    ensure!(
        status(zonemesh(
            &url,
            &["publish", "--dry-run", "--namespace", "Zonemesh"]
        )?) == Some(64)
    );
    ensure!(
        status(zonemesh(
            &url,
            &["publish", "--dry-run", "--tier-names", "zone,zone,cluster"]
        )?) == Some(64)
    );
    Ok(())
}
