//! The web view as the cluster grows (issue 10: "usable at 1,000 nodes: zone view first, a zone's
//! nodes on demand"), measured side by side in one run at 200 and 1,000 nodes (100 a zone): the
//! real aggregator, in memory, fed by the fleet simulator at the plan's pace, and the page loaded
//! in headless Chromium through WebDriver while the simulator keeps reporting.
//!
//! For each size it prints
//! - what the page asks the aggregator for: `/api/zones` and `/api/nodes` when it loads, then
//!   `/api/matrix` of one zone, of two zones, or of every node: the bytes and the server's time
//!   (median of 5 requests, timed by curl);
//! - in the page (`performance.now()`, median of 5): from navigation until the zone heatmap is
//!   drawn, and from choosing a view (one zone, two zones, every node) until its node heatmap is
//!   drawn, the frame after it included;
//! - the page's JavaScript heap after the zone views and after the all-nodes view.
//!
//! `cargo bench -p zonemesh-tests --bench web` (needs `chromium` and `chromium-driver`);
//! `ZONEMESH_BENCH_SIZES=200,1000,5000` measures other sizes (the all-nodes view is measured up to
//! 1,000 nodes: at 5,000 it is 25 million cells); `nodes/zones` sets the zones too
//! (`ZONEMESH_BENCH_SIZES=2000/200`: 200 zones of 10, a zone heatmap of 40,000 cells).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;
use zonemesh_domain::stats::median;
use zonemesh_fleet::sim::{self, Control, Counters};
use zonemesh_fleet::topo::{Fleet, FleetSpec};
use zonemesh_tests::webdriver::{Browser, Tools};
use zonemesh_tests::{http_get, sample, start_aggregator, wait_for};

/// Nodes a zone, as in the scale benchmark.
const NODES_PER_ZONE: usize = 100;
/// Measurements of each figure; the median is printed.
const REPEAT: usize = 5;
/// The largest cluster whose all-nodes view is measured.
const ALL_NODES_UP_TO: usize = 1_000;

/// An async WebDriver script: sets the URL hash to `arguments[0]` (after a hash without a node
/// view, so that every measurement starts from the zone view), and answers with the milliseconds
/// until the page has drawn the node heatmap that hash asks for, and the frame after it.
const TIME_VIEW: &str = "const [hash, done] = arguments;
  const want = new URLSearchParams(hash.slice(1));
  const s = window.zonemesh.state;
  const reached = () => {
    const f = s.matrixFor;
    return !s.matrixLoading && s.matrix && f && f.zone === (want.get('zone') || '')
      && f.zone2 === (want.get('zone2') || '') && f.all === (want.get('all') === '1')
      && f.metric === want.get('metric');
  };
  const watch = (t0) => {
    if (s.matrixError) return done({ error: s.matrixError });
    if (reached()) {
      return requestAnimationFrame(() => done({ ms: performance.now() - t0, nodes: s.matrix.nodes.length }));
    }
    requestAnimationFrame(() => watch(t0));
  };
  location.hash = '#metric=' + want.get('metric');
  const cleared = () => {
    if (s.matrixFor || s.matrixLoading) return requestAnimationFrame(cleared);
    const t0 = performance.now();
    location.hash = hash;
    requestAnimationFrame(() => watch(t0));
  };
  requestAnimationFrame(cleared);";

/// An async WebDriver script: the milliseconds from navigation until the page has its zones and
/// nodes and has drawn the zone heatmap, and the heatmap's cell count.
const TIME_LOAD: &str = "const done = arguments[arguments.length - 1];
  const watch = () => {
    const s = window.zonemesh && window.zonemesh.state;
    const cells = document.querySelectorAll('#zone-heatmap td[data-src]').length;
    if (s && s.loaded && cells > 0) {
      return requestAnimationFrame(() => done({ ms: performance.now(), cells }));
    }
    requestAnimationFrame(watch);
  };
  watch();";

/// A node heatmap the page is asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum View {
    OneZone,
    TwoZones,
    Every,
}

impl View {
    const ALL: [View; 3] = [View::OneZone, View::TwoZones, View::Every];

    fn label(self) -> &'static str {
        match self {
            View::OneZone => "one zone",
            View::TwoZones => "two zones",
            View::Every => "every node",
        }
    }
}

/// The figures of one cluster size.
#[derive(Debug, Default)]
struct Figures {
    nodes: usize,
    zones: usize,
    paths: u64,
    /// (what, bytes, server ms)
    api: Vec<(String, usize, f64)>,
    load_ms: f64,
    zone_cells: u64,
    /// For each [`View`] in order: (nodes shown, ms), if measured.
    views: Vec<Option<(u64, f64)>>,
    heap_mib: f64,
    heap_all_mib: Option<f64>,
}

/// Bytes and median time of `GET path` with curl (the all-nodes matrix takes longer than the
/// harness's HTTP client waits).
fn api_figure(http: SocketAddr, path: &str) -> Result<(usize, f64)> {
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..REPEAT {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "--fail",
                "--max-time",
                "120",
                "-o",
                "/dev/null",
                "-w",
            ])
            .arg("%{size_download} %{time_total}")
            .arg(format!("http://{http}{path}"))
            .output()
            .context("run curl")?;
        let text = String::from_utf8_lossy(&out.stdout);
        ensure!(
            out.status.success(),
            "GET {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (size, seconds) = text
            .trim()
            .split_once(' ')
            .with_context(|| format!("curl printed {text:?}"))?;
        bytes = size.parse()?;
        times.push(seconds.parse::<f64>()? * 1e3);
    }
    Ok((bytes, median(&mut times).context("no timings")?))
}

async fn measure(tools: &Tools, (nodes, zones): (usize, usize)) -> Result<Figures> {
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--window",
            "2s",
            "--probe-interval",
            "1s",
            "--probe-timeout",
            "500ms",
        ],
        dir.path(),
    )?;
    let http = aggregator.http;
    let fleet = Arc::new(Fleet::new(FleetSpec {
        nodes,
        zones,
        bad_share: 0.02,
        seed: 1,
    }));
    let channels = vec![aggregator.channel().await?, aggregator.channel().await?];
    let control = Arc::new(Control::new());
    let counters = Arc::new(Counters::default());
    let simulator = tokio::spawn(sim::run(
        fleet.clone(),
        channels,
        control.clone(),
        counters.clone(),
    ));

    // Every node READY, and the paths' count settled (unchanged for 3 s).
    let ready = "zonemesh_nodes{state=\"ready\"}";
    let mut last = (0.0, Instant::now());
    let paths = wait_for(
        "every node READY and the paths settled",
        Duration::from_secs(180),
        || {
            let scrape = http_get(http, "/metrics").unwrap_or_default();
            let all_ready = sample(&scrape, ready) == Some(nodes as f64);
            let paths = sample(&scrape, "zonemesh_paths").unwrap_or(0.0);
            if paths != last.0 {
                last = (paths, Instant::now());
            }
            let settled = all_ready && last.1.elapsed() >= Duration::from_secs(3);
            async move { settled.then_some(paths) }
        },
    )
    .await
    .with_context(|| format!("{nodes} nodes: {counters:?}"))?;

    let mut figures = Figures {
        nodes,
        zones,
        paths: paths as u64,
        ..Default::default()
    };
    let (z0, z1) = (Fleet::zone_name(0), Fleet::zone_name(zones.min(2) - 1));
    let mut requests = vec![
        ("zones (at load)".to_owned(), "/api/zones".to_owned()),
        ("nodes (at load)".to_owned(), "/api/nodes".to_owned()),
        (
            format!("matrix of {z0}"),
            format!("/api/matrix?metric=rtt&zone={z0}"),
        ),
    ];
    if nodes <= ALL_NODES_UP_TO {
        requests.push((
            "matrix of every node".to_owned(),
            "/api/matrix?metric=rtt".to_owned(),
        ));
    }
    for (what, path) in requests {
        let (bytes, ms) = api_figure(http, &path)?;
        figures.api.push((what, bytes, ms));
    }

    let browser = Browser::start(tools, dir.path()).await?;
    browser.set_script_timeout(Duration::from_secs(120)).await?;
    let mut loads = Vec::new();
    for _ in 0..REPEAT {
        browser.goto("about:blank").await?;
        browser.goto(&format!("http://{http}/#metric=rtt")).await?;
        let at = browser.script_async(TIME_LOAD, vec![]).await?;
        loads.push(at["ms"].as_f64().with_context(|| format!("load: {at}"))?);
        figures.zone_cells = at["cells"].as_u64().unwrap_or(0);
    }
    figures.load_ms = median(&mut loads).context("no load timings")?;
    ensure!(
        figures.zone_cells == (zones * zones) as u64,
        "the zone heatmap has {} cells for {zones} zones",
        figures.zone_cells
    );
    // Measurements only: the page's own refresh every few seconds would land in some of them.
    browser
        .script(
            "document.getElementById('auto-refresh').checked = false;",
            json!([]),
        )
        .await?;

    // The views, from the zone view each time; (nodes shown, ms), or None where not measured.
    let two = (zones >= 2).then(|| format!("#zone={z0}&zone2={z1}&metric=rtt"));
    let every = (nodes <= ALL_NODES_UP_TO).then(|| "#all=1&metric=rtt".to_owned());
    for (view, hash) in [
        (View::OneZone, Some(format!("#zone={z0}&metric=rtt"))),
        (View::TwoZones, two),
        (View::Every, every),
    ] {
        if view == View::Every {
            figures.heap_mib = heap_mib(&browser).await?;
        }
        let Some(hash) = hash else {
            figures.views.push(None);
            continue;
        };
        let mut times = Vec::new();
        let mut shown = 0;
        for _ in 0..REPEAT {
            let at = browser.script_async(TIME_VIEW, vec![json!(hash)]).await?;
            if let Some(e) = at["error"].as_str() {
                bail!("{}: the page says {e}", view.label());
            }
            times.push(
                at["ms"]
                    .as_f64()
                    .with_context(|| format!("{}: {at}", view.label()))?,
            );
            shown = at["nodes"].as_u64().unwrap_or(0);
        }
        ensure!(shown > 0, "{}: no nodes shown", view.label());
        let ms = median(&mut times).context("no view timings")?;
        figures.views.push(Some((shown, ms)));
    }
    if nodes <= ALL_NODES_UP_TO {
        figures.heap_all_mib = Some(heap_mib(&browser).await?);
    }
    browser.close().await?;

    control.stop();
    tokio::time::timeout(Duration::from_secs(60), simulator)
        .await
        .context("the simulator did not stop")???;
    ensure!(
        counters.errors.load(Ordering::Relaxed) == 0,
        "the aggregator refused reports: {counters:?}"
    );
    Ok(figures)
}

/// The page's JavaScript heap in use, MiB, after a garbage collection (Chromium runs with
/// `--expose-gc`).
async fn heap_mib(browser: &Browser) -> Result<f64> {
    let bytes = browser
        .script(
            "if (!window.gc) return null; window.gc(); return performance.memory.usedJSHeapSize;",
            json!([]),
        )
        .await?;
    let bytes = bytes
        .as_f64()
        .context("no window.gc: Chromium did not take --js-flags=--expose-gc")?;
    Ok(bytes / (1 << 20) as f64)
}

fn print(all: &[Figures]) {
    let header: Vec<String> = all
        .iter()
        .map(|f| format!("{} nodes, {} zones", f.nodes, f.zones))
        .collect();
    println!("\n| what | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(all.len()));
    let row = |what: &str, cell: &dyn Fn(&Figures) -> String| {
        let cells: Vec<String> = all.iter().map(cell).collect();
        println!("| {what} | {} |", cells.join(" | "));
    };
    row("paths measured", &|f| f.paths.to_string());
    for (i, (what, _, _)) in all[0].api.iter().enumerate() {
        row(&format!("GET {what}: bytes, server ms"), &|f| {
            f.api.get(i).map_or("—".into(), |(_, b, ms)| {
                format!("{} kB, {ms:.1} ms", b / 1000)
            })
        });
    }
    row("page: navigation → zone heatmap drawn", &|f| {
        format!("{:.0} ms ({} cells)", f.load_ms, f.zone_cells)
    });
    for (i, view) in View::ALL.iter().enumerate() {
        row(
            &format!("page: choose {} → its node heatmap drawn", view.label()),
            &|f| {
                f.views
                    .get(i)
                    .copied()
                    .flatten()
                    .map_or("—".into(), |(n, ms)| format!("{ms:.0} ms ({n} nodes)"))
            },
        );
    }
    row("page: JS heap after the zone views", &|f| {
        format!("{:.1} MiB", f.heap_mib)
    });
    row("page: JS heap after every node's view", &|f| {
        f.heap_all_mib.map_or("—".into(), |m| format!("{m:.1} MiB"))
    });
    let one_zone = |f: &Figures| f.views.first().copied().flatten().map_or(f64::NAN, |v| v.1);
    if let (Some(first), Some(last)) = (all.first(), all.last()) {
        println!(
            "\n{:.1}× the nodes: page load {:.2}×, one zone's view {:.2}×",
            last.nodes as f64 / first.nodes as f64,
            last.load_ms / first.load_ms,
            one_zone(last) / one_zone(first)
        );
    }
}

/// `1000` (100 nodes a zone) or `2000/200` (nodes/zones, at least one node a zone).
fn parse_size(text: &str) -> Result<(usize, usize)> {
    let text = text.trim();
    let (nodes, zones) = match text.split_once('/') {
        Some((n, z)) => (n.trim().parse::<usize>()?, z.trim().parse::<usize>()?),
        None => {
            let n = text.parse::<usize>()?;
            ensure!(
                n >= NODES_PER_ZONE && n % NODES_PER_ZONE == 0,
                "{n} is not a multiple of {NODES_PER_ZONE} nodes; give nodes/zones"
            );
            (n, n / NODES_PER_ZONE)
        }
    };
    ensure!(
        zones >= 1 && nodes >= zones,
        "{text}: at least one zone and one node a zone"
    );
    Ok((nodes, zones))
}

#[tokio::main]
async fn main() -> Result<()> {
    let Some(tools) = Tools::find() else {
        bail!("this benchmark needs chromium and chromedriver");
    };
    let sizes: Vec<(usize, usize)> = match std::env::var("ZONEMESH_BENCH_SIZES") {
        Ok(s) => s
            .split(',')
            .map(parse_size)
            .collect::<Result<_>>()
            .context("ZONEMESH_BENCH_SIZES: node counts (or nodes/zones) separated by commas")?,
        Err(_) => vec![(200, 2), (1_000, 10)],
    };
    let mut all = Vec::new();
    for (nodes, zones) in sizes {
        eprintln!("measuring {nodes} nodes in {zones} zones …");
        all.push(measure(&tools, (nodes, zones)).await?);
    }
    print(&all);
    Ok(())
}
