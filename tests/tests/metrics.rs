//! The aggregator's Prometheus metrics, scraped from a real aggregator fed known figures and
//! read by real parsers: the Python client's exposition parser (`prometheus_client`) and
//! `promtool check metrics` (Prometheus's own linter of names and types). Labels are zones,
//! never nodes or node pairs.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use zonemesh_tests::{
    FakeAgent, http_get, http_get_with, start_aggregator, tool_available, wait_for,
};

/// Runs `program args…` with `input` on its standard input; its output.
fn run_with_stdin(program: &str, args: &[&str], input: &str) -> Result<std::process::Output> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("run {program}"))?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(input.as_bytes())?;
    Ok(child.wait_with_output()?)
}

/// The exposition parsed by `prometheus_client.parser` (the Prometheus text format) or, with
/// `openmetrics`, by `prometheus_client.openmetrics.parser`: family name → (type, samples).
fn parse(text: &str, openmetrics: bool) -> Result<BTreeMap<String, (String, Vec<Value>)>> {
    let parser = if openmetrics {
        "prometheus_client.openmetrics.parser"
    } else {
        "prometheus_client.parser"
    };
    let script = SCRIPT.replace("PARSER", parser);
    const SCRIPT: &str = r#"
import json, sys
from PARSER import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    out[family.name] = [family.type, [
        {"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples]]
json.dump(out, sys.stdout)
"#;
    let out = run_with_stdin("python3", &["-c", &script], text)?;
    ensure!(
        out.status.success(),
        "prometheus_client could not parse /metrics: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: BTreeMap<String, (String, Vec<Value>)> = serde_json::from_slice(&out.stdout)?;
    Ok(parsed)
}

/// The value of the sample `name` whose labels include `labels`.
fn sample(
    families: &BTreeMap<String, (String, Vec<Value>)>,
    name: &str,
    labels: &[(&str, &str)],
) -> Result<f64> {
    families
        .values()
        .flat_map(|(_, samples)| samples)
        .find(|s| {
            s["name"] == name
                && labels
                    .iter()
                    .all(|(k, v)| s["labels"][*k].as_str() == Some(*v))
        })
        .and_then(|s| s["value"].as_f64())
        .with_context(|| format!("no sample {name}{labels:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_metrics_parse_lint_clean_and_carry_the_reported_figures() -> Result<()> {
    if !tool_available(
        "python3",
        &["-c", "import prometheus_client"],
        "pip install prometheus-client",
    ) {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(&["--in-memory"], dir.path())?;
    // zone-a: a1, a2 (100 µs apart); zone-b: b1; 2 ms between the zones; a2 → b1 loses 10 %.
    let mut a1 = FakeAgent::connect(&aggregator, "a1", "zone-a").await?;
    let mut a2 = FakeAgent::connect(&aggregator, "a2", "zone-a").await?;
    let mut b1 = FakeAgent::connect(&aggregator, "b1", "zone-b").await?;
    a1.report(&[("a2", 100.0, 0, 9e9), ("b1", 2_000.0, 0, 4e9)])
        .await?;
    a2.report(&[("a1", 100.0, 0, 9e9), ("b1", 2_000.0, 10, 4e9)])
        .await?;
    b1.report(&[("a1", 2_000.0, 0, 4e9)]).await?;

    let text = wait_for(
        "the zone metrics after a sweep",
        Duration::from_secs(15),
        || async {
            let text = http_get(aggregator.http, "/metrics").ok()?;
            // The sweep after all three reports: both zone-a → zone-b paths in the roll-up.
            text.contains(
                "zonemesh_zone_paths_measured{src_zone=\"zone-a\",dst_zone=\"zone-b\"} 2\n",
            )
            .then_some(text)
        },
    )
    .await?;
    let families = parse(&text, false)?;

    let a_to_b = [("src_zone", "zone-a"), ("dst_zone", "zone-b")];
    let with = |extra: (&'static str, &'static str)| {
        let mut l = a_to_b.to_vec();
        l.push(extra);
        l
    };
    let rtt = sample(
        &families,
        "zonemesh_zone_rtt_seconds",
        &with(("percentile", "50")),
    )?;
    ensure!((rtt - 0.002).abs() < 1e-9, "zone-a → zone-b p50 {rtt}");
    let inside = sample(
        &families,
        "zonemesh_zone_rtt_seconds",
        &[
            ("src_zone", "zone-a"),
            ("dst_zone", "zone-a"),
            ("percentile", "99"),
        ],
    )?;
    ensure!((inside - 0.0001).abs() < 1e-9, "inside zone-a p99 {inside}");
    // Three paths between zone-a and zone-b, one losing 10 %: the zone pair's own loss is what
    // most of its paths show (none), and a2 shows none on its other path: no node's fault either.
    let loss = sample(&families, "zonemesh_zone_loss_ratio", &a_to_b)?;
    ensure!(loss == 0.0, "zone-a → zone-b loss {loss}");
    ensure!(sample(&families, "zonemesh_zone_nodes_left_out", &a_to_b)? == 0.0);
    let bytes = sample(
        &families,
        "zonemesh_zone_throughput_bytes_per_second",
        &a_to_b,
    )?;
    ensure!((bytes - 4e9 / 8.0).abs() < 1.0, "throughput {bytes} B/s");
    ensure!(sample(&families, "zonemesh_zone_paths_measured", &a_to_b)? == 2.0);
    ensure!(
        sample(
            &families,
            "zonemesh_zone_nodes",
            &[("zone", "zone-a"), ("state", "ready")]
        )? == 2.0
    );
    ensure!(sample(&families, "zonemesh_reports_total", &[])? == 3.0);
    ensure!(families["zonemesh_query_seconds"].0 == "histogram");
    ensure!(families["zonemesh_zone_rtt_seconds"].0 == "gauge");

    // Every family is zonemesh's, and no label value is a node: the label sets grow with the
    // zones, never with the nodes or their pairs.
    for (name, (_, samples)) in &families {
        ensure!(name.starts_with("zonemesh_"), "{name}");
        for s in samples {
            for (key, value) in s["labels"].as_object().context("labels")? {
                ensure!(
                    !["a1", "a2", "b1"].contains(&value.as_str().unwrap_or_default()),
                    "{name} has a node as its {key} label"
                );
            }
        }
    }

    // Prometheus's own linter agrees with the names, units and types.
    if tool_available("promtool", &["--version"], "apt-get install prometheus") {
        let out = run_with_stdin("promtool", &["check", "metrics"], &text)?;
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        ensure!(out.status.success(), "promtool check metrics:\n{said}");
    }
    the_dashboard_queries_what_is_exported(&text)?;

    // A scraper that asks for OpenMetrics (Prometheus does, first) gets it, with the same
    // families and figures; one that does not ask (curl, promtool, the parser above) got 0.0.4.
    let (content_type, open) = get_with_accept(
        aggregator.http,
        "/metrics",
        "application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3",
    )?;
    ensure!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    ensure!(open.ends_with("# EOF\n"), "{open}");
    let (plain_type, _) = get_with_accept(aggregator.http, "/metrics", "*/*")?;
    ensure!(
        plain_type == "text/plain; version=0.0.4; charset=utf-8",
        "{plain_type}"
    );
    let open_families = parse(&open, true)?;
    let types = |f: &BTreeMap<String, (String, Vec<Value>)>| {
        f.iter()
            .map(|(name, (kind, _))| (name.clone(), kind.clone()))
            .collect::<Vec<_>>()
    };
    ensure!(types(&open_families) == types(&families), "{open}");
    ensure!(sample(&open_families, "zonemesh_reports_total", &[])? == 3.0);
    let open_loss = sample(&open_families, "zonemesh_zone_loss_ratio", &a_to_b)?;
    ensure!(
        open_loss == loss,
        "OpenMetrics loss {open_loss}, text {loss}"
    );
    Ok(())
}

/// The fault alerts of `deploy/monitoring` (a PrometheusRule whose `spec` is a Prometheus rule
/// file) pass `promtool check rules`, fire as `tests/data/fault-alerts.test.yml` expects
/// (`promtool test rules`), and query only series the aggregator exports.
#[test]
fn the_fault_alerts_check_and_fire_under_promtool() -> Result<()> {
    if !tool_available("promtool", &["--version"], "apt-get install prometheus") {
        return Ok(());
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("../deploy/monitoring/prometheusrule.yaml"))?;
    let spec = manifest
        .split_once("\nspec:\n")
        .context("the PrometheusRule's spec")?
        .1;
    let rules: String = spec
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
        .collect();
    ensure!(rules.starts_with("groups:"), "{rules}");
    let golden = std::fs::read_to_string(root.join("../aggregator/tests/golden/metrics.prom"))?;
    for name in rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("zonemesh_"))
    {
        ensure!(
            golden.lines().any(|l| l.starts_with(&format!("{name}{{"))),
            "the alerts query {name}, which the aggregator does not export"
        );
    }
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("rules.yml"), &rules)?;
    std::fs::copy(
        root.join("data/fault-alerts.test.yml"),
        dir.path().join("test.yml"),
    )?;
    for args in [
        ["check", "rules", "rules.yml"],
        ["test", "rules", "test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(dir.path())
            .output()?;
        ensure!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// GETs `path` with an `Accept` header: the content type and the body.
fn get_with_accept(
    addr: std::net::SocketAddr,
    path: &str,
    accept: &str,
) -> Result<(String, String)> {
    let (head, body) = http_get_with(addr, path, &[("Accept", accept)])?;
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: "))
        .context("content-type")?;
    Ok((content_type.to_owned(), body))
}

/// Every expression of the Grafana dashboard (`deploy/monitoring`) names only metrics this
/// aggregator exported in `text`, and parses as PromQL (promtool, as recording rules).
fn the_dashboard_queries_what_is_exported(text: &str) -> Result<()> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/monitoring/grafana-dashboard.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    ensure!(
        exprs.len() >= 10,
        "{} expressions in the dashboard",
        exprs.len()
    );
    for expr in &exprs {
        let names = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("zonemesh_"));
        for name in names {
            let exported = text
                .lines()
                .any(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']));
            ensure!(
                exported,
                "the dashboard queries {name}, which /metrics lacks: {expr}"
            );
        }
    }
    if Command::new("promtool").arg("--version").output().is_ok() {
        let dir = tempfile::tempdir()?;
        let rules = dir.path().join("rules.yml");
        let mut yaml = String::from("groups:\n  - name: dashboard\n    rules:\n");
        for (i, expr) in exprs.iter().enumerate() {
            // Grafana's variables, as a query would see them.
            let expr = expr
                .replace("$__rate_interval", "1m")
                .replace("$__interval", "1m")
                .replace("$__range", "1h")
                .replace("$zone", ".*");
            yaml += &format!(
                "      - record: dashboard:expr{i}\n        expr: {}\n",
                serde_json::to_string(&expr)?
            );
        }
        std::fs::write(&rules, yaml)?;
        let out = Command::new("promtool")
            .args(["check", "rules"])
            .arg(&rules)
            .output()?;
        ensure!(
            out.status.success(),
            "promtool check rules (the dashboard's expressions):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", Value::String(e)) if !e.is_empty() => out.push(e.clone()),
                    ("query", Value::String(q)) if q.contains("zonemesh_") => {
                        // A template variable: label_values(metric, label).
                        if let Some(inner) = q
                            .strip_prefix("label_values(")
                            .and_then(|r| r.split(',').next())
                        {
                            out.push(inner.trim().to_owned());
                        }
                    }
                    _ => collect_exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_exprs(i, out)),
        _ => {}
    }
}
