//! The aggregator's web page (`GET /`, on the JSON API under `/api/`), driven in headless Chromium
//! through chromedriver's W3C WebDriver API (with fantoccini): what the page shows is checked against what the
//! agents reported — the summary, the zone heatmap, a zone's node matrix, the tooltips, the
//! ranking and placement panels, a DOWN node's mark, a link that reopens a view — and the bearer
//! token form of an aggregator that needs credentials.
//!
//! Skipped when Chromium or chromedriver is missing, except under CI (`CI` set), where that fails.
//! `ZONEMESH_CHROMIUM` and `ZONEMESH_CHROMEDRIVER` name other binaries. A screenshot of the
//! page is written to the temporary directory every run, and to `$ZONEMESH_SCREENSHOT` too when
//! that is set and the checks passed (docs/heatmap.png).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use zonemesh_tests::webdriver::{Browser, Tools, WAIT};
use zonemesh_tests::{FakeAgent, http_get, start_aggregator, wait_for};

const READER_TOKEN: &str = "r3ader-t0ken-0123456789";

/// The cluster: two zones; b3 reports once and then its agent goes (DOWN after `--down-after`).
const NODES: [(&str, &str); 6] = [
    ("a1", "zone-a"),
    ("a2", "zone-a"),
    ("a3", "zone-a"),
    ("b1", "zone-b"),
    ("b2", "zone-b"),
    ("b3", "zone-b"),
];

/// What `node` reports, as `(peer, RTT µs, lost of 100, throughput bit/s)`: 100 µs and 9.4 Gbit/s
/// inside a zone, 2 ms and 2.5 Gbit/s across; 20 of 100 probes lost on every path of a2 inside
/// zone-a (both directions); b2 never reports b2 → b1, which is then estimated by the model.
fn paths_of(node: &str) -> Vec<(&'static str, f64, u64, f64)> {
    let zone_of = |n: &str| {
        if n.starts_with('a') {
            "zone-a"
        } else {
            "zone-b"
        }
    };
    NODES
        .iter()
        .map(|&(peer, _)| peer)
        .filter(|&peer| peer != node && !(node == "b2" && peer == "b1"))
        .map(|peer| {
            let inside = zone_of(peer) == zone_of(node);
            let lost = if inside && (node == "a2" || peer == "a2") {
                20
            } else {
                0
            };
            if inside {
                (peer, 100.0, lost, 9.4e9)
            } else {
                (peer, 2000.0, lost, 2.5e9)
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_what_the_agents_reported() -> Result<()> {
    let Some(tools) = Tools::find() else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    // Figures and READY states outlive the test (a slow browser start included); DOWN is quick.
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--down-after",
            "1s",
            "--stale-after",
            "5m",
            "--loss-window",
            "5m",
            "--fault-interval",
            "200ms",
            "--fault-open-after",
            "1s",
        ],
        dir.path(),
    )?;
    let http = aggregator.http;

    let mut agents = Vec::new();
    for (node, zone) in NODES {
        agents.push((node, FakeAgent::connect(&aggregator, node, zone).await?));
    }
    for (node, agent) in &mut agents {
        agent.report(&paths_of(node)).await?;
    }
    let (gone, b3) = agents.pop().context("b3's agent")?;
    ensure!(gone == "b3");
    drop(b3);
    wait_for("b3 to turn DOWN", WAIT, || async {
        let nodes: Value = serde_json::from_str(&http_get(http, "/api/nodes").ok()?).ok()?;
        let down = nodes["nodes"]
            .as_array()?
            .iter()
            .any(|n| n["name"] == "b3" && n["state"] == "DOWN");
        down.then_some(())
    })
    .await?;
    // a2's loss is open (its 20 % inside zone-a), and b3, whose agent went, is no fault.
    wait_for("a2's loss fault in /api/faults", WAIT, || async {
        let faults: Value = serde_json::from_str(&http_get(http, "/api/faults").ok()?).ok()?;
        let open = faults["faults"].as_array()?;
        (open.len() == 1 && open[0]["a"] == "a2" && open[0]["kind"] == "LOSS").then_some(())
    })
    .await?;

    let browser = Browser::start(&tools, dir.path()).await?;
    let checked = check_page(&browser, http).await;
    if let Err(e) = &checked {
        eprintln!("{e:#}\naggregator log:\n{}", aggregator.log());
    }
    let saved = browser.screenshot().await.and_then(|png| -> Result<()> {
        let path = std::env::temp_dir().join(format!("zonemesh-web-{}.png", std::process::id()));
        std::fs::write(&path, &png)?;
        eprintln!("screenshot of the page: {}", path.display());
        if let Some(to) = std::env::var_os("ZONEMESH_SCREENSHOT").filter(|_| checked.is_ok()) {
            std::fs::write(&to, &png)
                .with_context(|| format!("write {}", Path::new(&to).display()))?;
        }
        Ok(())
    });
    browser.close().await?;
    checked?;
    saved?;
    drop(agents);
    Ok(())
}

/// A script that returns the node names of the loaded matrix once the page shows the node
/// matrix of `arguments[0]` (and `arguments[1]`, or "") for the metric `arguments[2]`, else null.
const MATRIX_LOADED: &str = "const s = window.zonemesh && window.zonemesh.state;
    return s && s.matrix && s.matrixFor && !s.matrixLoading && s.matrixFor.zone === arguments[0]
      && s.matrixFor.zone2 === arguments[1] && s.matrixFor.metric === arguments[2]
      ? s.matrix.nodes : null;";

/// A script that returns the data-node attributes of the rows `arguments[0]` selects, or null
/// when there are none.
const ROW_NODES: &str = "const rows = document.querySelectorAll(arguments[0]);
    return rows.length ? Array.from(rows, (r) => r.dataset.node) : null;";

/// A script that returns what the zone heatmap marks as chosen: its cells (`src>dst`) and its
/// zone buttons (a row's and a column's for each zone), sorted.
const SELECTED_ZONES: &str = "const t = document.getElementById('zone-table');
    const cells = Array.from(t.querySelectorAll('td.zc.sel'), (c) => c.dataset.src + '>' + c.dataset.dst);
    const buttons = Array.from(t.querySelectorAll('.zone-btn.sel[aria-pressed=\"true\"]'), (b) => b.dataset.zone);
    return { cells: cells.sort(), buttons: buttons.sort() };";

async fn check_page(b: &Browser, http: SocketAddr) -> Result<()> {
    let base = format!("http://{http}/");
    b.goto(&base).await?;

    // The summary: zones, nodes, and nodes by state.
    let summary = b
        .until(
            "the summary",
            "const s = window.zonemesh && window.zonemesh.state;
             return s && s.loaded ? document.getElementById('summary').textContent : null;",
            json!([]),
        )
        .await?;
    let summary = summary.as_str().context("summary text")?;
    for part in ["2 zones", "6 nodes", "5 READY", "0 STALE", "1 DOWN"] {
        ensure!(summary.contains(part), "summary {summary:?} lacks {part:?}");
    }

    // What is at fault: a2's loss, 80 of the 400 probes of its paths inside zone-a (down at the
    // default 20 %), with the paths that show it; nothing else.
    let faults = b
        .until(
            "the faults panel",
            "const rows = document.querySelectorAll('#faults-table tbody tr');
             // A fault's row, then its evidence's.
             return rows.length ? Array.from(rows, (r) => Array.from(r.cells, (c) => c.textContent)) : null;",
            json!([]),
        )
        .await?;
    let rows = faults.as_array().context("rows")?;
    ensure!(rows.len() == 2, "{faults}");
    let cells: Vec<&str> = rows[0]
        .as_array()
        .context("cells")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    ensure!(
        cells[..3] == ["a2", "loss", "down"]
            && cells[3].starts_with("20.0 % (")
            && cells[3].ends_with(" of 400 probes)")
            && cells[4].ends_with(" ago"),
        "{cells:?}"
    );
    let evidence = rows[1][0].as_str().context("the evidence row")?;
    ensure!(
        evidence.starts_with("shown by ") && evidence.contains("a1\u{2192}a2"),
        "{evidence}"
    );

    // The zone heatmap (RTT p50 first): 2 ms from zone-a to zone-b over 3 × 3 measured paths,
    // 100 µs inside zone-a.
    let ab = r#"#zone-heatmap td[data-src="zone-a"][data-dst="zone-b"]"#;
    let rtt: f64 = b
        .attribute(ab, "data-value")
        .await?
        .context("data-value of zone-a → zone-b")?
        .parse()?;
    ensure!((rtt - 2000.0).abs() < 1.0, "zone-a → zone-b: {rtt} µs");
    ensure!(b.attribute(ab, "data-provenance").await?.as_deref() == Some("MEASURED"));
    ensure!(b.attribute(ab, "data-measured-paths").await?.as_deref() == Some("9"));
    let text = b.text(ab).await?;
    ensure!(text == "2.00 ms", "zone-a → zone-b shows {text:?}");
    let text = b
        .text(r#"#zone-heatmap td[data-src="zone-a"][data-dst="zone-a"]"#)
        .await?;
    ensure!(text == "100 \u{b5}s", "zone-a → zone-a shows {text:?}");

    // Hovering the cell shows its figures.
    b.hover(ab).await?;
    let tip = b
        .until_text("#tooltip", "the zone cell's tooltip", |t| {
            t.contains("zone-a \u{2192} zone-b")
        })
        .await?;
    for part in ["2.00 ms", "MEASURED", "measured paths 9", "2.50 Gbit/s"] {
        ensure!(tip.contains(part), "zone tooltip {tip:?} lacks {part:?}");
    }

    // Loss, and zone-a's node matrix: a2's paths lose 20 %, the others nothing. The view is in
    // the URL.
    b.click(r#"#metric option[value="loss"]"#).await?;
    b.click(r#"#zone-heatmap th[scope="row"] .zone-btn[data-zone="zone-a"]"#)
        .await?;
    let nodes = b
        .until(
            "zone-a's loss matrix",
            MATRIX_LOADED,
            json!(["zone-a", "", "loss"]),
        )
        .await?;
    ensure!(nodes == json!(["a1", "a2", "a3"]), "{nodes}");
    for (src, dst, loss) in [
        ("a1", "a2", 0.2),
        ("a2", "a1", 0.2),
        ("a2", "a3", 0.2),
        ("a3", "a2", 0.2),
        ("a1", "a3", 0.0),
        ("a3", "a1", 0.0),
    ] {
        let cell = b
            .script(
                "return window.zonemesh.cellAt(arguments[0], arguments[1]);",
                json!([src, dst]),
            )
            .await?;
        let value = cell["value"].as_f64().context("cell value")?;
        ensure!(
            (value - loss).abs() < 1e-6
                && cell["provenance"] == "MEASURED"
                && cell["stale"] == false,
            "{src} → {dst}: {cell}"
        );
    }
    let url = b.url().await?;
    ensure!(url.ends_with("#zone=zone-a&metric=loss"), "{url}");

    // Hovering a2 → a3 on the canvas shows the path's figures, fetched from /api/path.
    b.hover_cell("a2", "a3").await?;
    let tip = b
        .until_text(
            "#tooltip",
            "a2 → a3's tooltip with the path's figures",
            |t| t.contains("a2 \u{2192} a3") && t.contains("upper bound"),
        )
        .await?;
    for part in ["20.0 %", "MEASURED", "100 \u{b5}s", "9.40 Gbit/s", "probes"] {
        ensure!(tip.contains(part), "path tooltip {tip:?} lacks {part:?}");
    }

    // zone-b: b3 is marked DOWN; b2 → b1 (never reported) is estimated, b1 → b2 measured.
    b.click(r#"#zone-heatmap th[scope="row"] .zone-btn[data-zone="zone-b"]"#)
        .await?;
    b.until(
        "zone-b's matrix",
        MATRIX_LOADED,
        json!(["zone-b", "", "loss"]),
    )
    .await?;
    // The zone heatmap marks the chosen zone, and only it.
    let marked = b.script(SELECTED_ZONES, json!([])).await?;
    ensure!(
        marked == json!({"cells": ["zone-b>zone-b"], "buttons": ["zone-b", "zone-b"]}),
        "zone-b chosen, the zone heatmap marks {marked}"
    );
    let mark = b
        .script("return window.zonemesh.nodeMark('b3');", json!([]))
        .await?;
    ensure!(mark == "DOWN", "b3 is marked {mark}");
    let flag = r#"#node-flags [data-node="b3"]"#;
    ensure!(b.attribute(flag, "data-state").await?.as_deref() == Some("DOWN"));
    let text = b.text(flag).await?;
    ensure!(
        text.contains("b3") && text.contains("DOWN: its agent is gone"),
        "the flag says why: {text:?}"
    );
    let cell = |src: &str, dst: &str| {
        b.script(
            "return window.zonemesh.cellAt(arguments[0], arguments[1]);",
            json!([src, dst]),
        )
    };
    let estimated = cell("b2", "b1").await?;
    ensure!(
        estimated["provenance"] == "ESTIMATED",
        "b2 → b1: {estimated}"
    );
    let measured = cell("b1", "b2").await?;
    ensure!(measured["provenance"] == "MEASURED", "b1 → b2: {measured}");

    // A link opens the same view: both zones, loss.
    b.goto("about:blank").await?;
    b.goto(&format!("{base}#zone=zone-a&zone2=zone-b&metric=loss"))
        .await?;
    let nodes = b
        .until(
            "the two zones' matrix opened from a link",
            MATRIX_LOADED,
            json!(["zone-a", "zone-b", "loss"]),
        )
        .await?;
    ensure!(
        nodes == json!(["a1", "a2", "a3", "b1", "b2", "b3"]),
        "{nodes}"
    );
    let metric = b
        .script("return document.getElementById('metric').value;", json!([]))
        .await?;
    ensure!(metric == "loss", "the metric selector shows {metric}");
    let marked = b.script(SELECTED_ZONES, json!([])).await?;
    ensure!(
        marked
            == json!({"cells": ["zone-a>zone-b"], "buttons": ["zone-a", "zone-a", "zone-b", "zone-b"]}),
        "zone-a and zone-b chosen, the zone heatmap marks {marked}"
    );

    // The auto-refresh (every 10 s) keeps the view.
    let before = b
        .script("return window.zonemesh.state.updatedAt;", json!([]))
        .await?;
    let view = b
        .until(
            "an auto-refresh",
            "const s = window.zonemesh.state;
             return s.updatedAt > arguments[0] && !s.refreshing && !s.matrixLoading
               ? [s.matrixFor.zone, s.matrixFor.zone2, s.matrixFor.metric,
                  document.getElementById('metric').value, location.hash]
               : null;",
            json!([before]),
        )
        .await?;
    ensure!(
        view == json!([
            "zone-a",
            "zone-b",
            "loss",
            "loss",
            "#zone=zone-a&zone2=zone-b&metric=loss"
        ]),
        "after a refresh: {view}"
    );

    // Ranking zone-a: the lossy a2 last.
    b.click(r#"#rank-zone option[value="zone-a"]"#).await?;
    b.clear_and_type("#rank-limit", "10").await?;
    b.click("#rank-button").await?;
    let ranked = b
        .until(
            "the ranking",
            ROW_NODES,
            json!(["#rank-table tbody tr[data-node]"]),
        )
        .await?;
    let ranked = ranked.as_array().context("ranked nodes")?;
    ensure!(
        ranked.len() == 3 && ranked[2] == "a2",
        "ranking of zone-a: {ranked:?}"
    );
    let row = b.text(r#"#rank-table tbody tr[data-node="a2"]"#).await?;
    ensure!(
        row.contains("zone-a") && row.contains("READY") && row.contains("20.0 %"),
        "a2's row: {row:?}"
    );

    // Placing 3 workers in one zone: zone-a's nodes (zone-b has two READY). 4 cannot be in one
    // zone: the 409 and its message are shown in the panel.
    b.clear_and_type("#place-workers", "4").await?;
    b.click(r#"#place-policy option[value="require_one"]"#)
        .await?;
    b.clear_and_type("#place-exclude", "").await?;
    b.click("#place-button").await?;
    let error = b
        .until(
            "the placement's refusal",
            "const e = document.querySelector('#place-result .error');
             return e ? e.textContent : null;",
            json!([]),
        )
        .await?;
    let error = error.as_str().context("error text")?;
    ensure!(error.contains("409 Conflict"), "{error:?}");
    b.clear_and_type("#place-workers", "3").await?;
    b.click("#place-button").await?;
    let placed = b
        .until("the placement", ROW_NODES, json!(["#place-table tbody tr"]))
        .await?;
    let mut placed: Vec<&str> = placed
        .as_array()
        .context("placed nodes")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    placed.sort_unstable();
    ensure!(placed == ["a1", "a2", "a3"], "placed on {placed:?}");
    let result = b.text("#place-result").await?;
    for part in ["zone-a", "100 \u{b5}s", "20.0 %", "9.40 Gbit/s"] {
        ensure!(result.contains(part), "placement {result:?} lacks {part:?}");
    }

    // The same job with its collective and bytes: the predicted time per iteration, what holds
    // it up, the rank order and the runners-up, as `zonemesh place` shows them. A quantity that
    // is not one is refused naming the field.
    b.click(r#"#place-collective option[value="ring"]"#).await?;
    b.clear_and_type("#place-bytes", "25MB").await?;
    b.click("#place-button").await?;
    b.until_text("#place-result", "the refused quantity", |t| {
        t.contains("bytes_per_iteration")
    })
    .await?;
    b.clear_and_type("#place-bytes", "25Mi").await?;
    b.click("#place-button").await?;
    let job = b
        .until_text("#place-result", "the predicted time", |t| {
            t.contains("per iteration") && t.contains("rank order")
        })
        .await?;
    let order = b.text(r#"#place-job dd[data-field="rank_order"]"#).await?;
    let mut ranked: Vec<&str> = order.split(" \u{2192} ").map(str::trim).collect();
    ranked.sort_unstable();
    ensure!(
        ranked == ["a1", "a2", "a3"],
        "rank order {order:?} in {job:?}"
    );
    let why = b.text(r#"#place-job dd[data-field="why"]"#).await?;
    ensure!(
        !why.trim().is_empty() && why != "\u{2013}",
        "bottleneck {why:?}"
    );
    let predicted = b.text(r#"#place-job dd[data-field="predicted"]"#).await?;
    ensure!(
        predicted.ends_with(" per iteration")
            && (predicted.contains("ms") || predicted.contains(" s ")),
        "predicted {predicted:?}"
    );

    // Last, for the screenshot: a tooltip over a2 → b1.
    b.hover_cell("a2", "b1").await?;
    b.until_text("#tooltip", "a2 → b1's tooltip", |t| {
        t.contains("a2 \u{2192} b1") && t.contains("upper bound")
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_asks_for_a_bearer_token_when_the_api_needs_one() -> Result<()> {
    let Some(tools) = Tools::find() else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("reader grafana {READER_TOKEN}\n"))?;
    let tokens = tokens.to_str().context("utf-8 path")?.to_owned();
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--tokens-file",
            &tokens,
            "--stale-after",
            "5m",
            "--loss-window",
            "5m",
        ],
        dir.path(),
    )?;
    // Without a client CA agents report as before; queries need the token.
    let mut a1 = FakeAgent::connect(&aggregator, "a1", "zone-a").await?;
    let mut a2 = FakeAgent::connect(&aggregator, "a2", "zone-a").await?;
    a1.report(&[("a2", 100.0, 0, 9.4e9)]).await?;
    a2.report(&[("a1", 100.0, 0, 9.4e9)]).await?;
    match http_get(aggregator.http, "/api/zones") {
        Ok(body) => bail!("/api/zones answered without credentials: {body}"),
        Err(e) => ensure!(format!("{e:#}").contains("401"), "{e:#}"),
    }

    let browser = Browser::start(&tools, dir.path()).await?;
    let checked: Result<()> = async {
        browser.goto(&format!("http://{}/", aggregator.http)).await?;
        let message = browser
            .until(
                "the token form",
                "const f = document.getElementById('token-form');
                 return f && !f.hidden ? document.getElementById('token-message').textContent : null;",
                json!([]),
            )
            .await?;
        ensure!(
            message.as_str().is_some_and(|m| m.contains("token")),
            "{message}"
        );
        ensure!(browser.displayed("#token-form").await?);

        browser.clear_and_type("#token-input", READER_TOKEN).await?;
        browser.click("#token-save").await?;
        let loaded = "const s = window.zonemesh && window.zonemesh.state;
            return s && s.loaded && !s.needToken ? document.getElementById('summary').textContent : null;";
        let summary = browser
            .until("the summary after the token", loaded, json!([]))
            .await?;
        let summary = summary.as_str().context("summary text")?;
        ensure!(
            summary.contains("1 zone") && summary.contains("2 nodes") && summary.contains("2 READY"),
            "{summary:?}"
        );
        ensure!(!browser.displayed("#token-form").await?);
        let text = browser.text(r#"#zone-heatmap td[data-src="zone-a"][data-dst="zone-a"]"#).await?;
        ensure!(text == "100 \u{b5}s", "zone-a → zone-a shows {text:?}");

        // The token is kept: a reload shows the figures without asking again.
        let stored = browser.script("return localStorage.getItem('zonemesh.token');", json!([])).await?;
        ensure!(stored == READER_TOKEN, "stored token {stored}");
        browser.refresh().await?;
        browser
            .until("the summary after a reload", loaded, json!([]))
            .await?;
        ensure!(!browser.displayed("#token-form").await?);
        Ok(())
    }
    .await;
    if checked.is_err() {
        let path =
            std::env::temp_dir().join(format!("zonemesh-web-token-{}.png", std::process::id()));
        if let Ok(png) = browser.screenshot().await {
            let _ = std::fs::write(&path, png);
            eprintln!("screenshot of the page: {}", path.display());
        }
    }
    browser.close().await?;
    checked
}
