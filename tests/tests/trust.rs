//! Trust: mutual TLS between agents and the aggregator, node identity, authenticated queries and
//! extender calls, credentials reloaded from disk, and the abuse limits — against the real
//! aggregator (and a real agent) over real TLS.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use tonic::transport::Channel;
use zonemesh_proto::v1;
use zonemesh_tests::pki::{Ca, Files};
use zonemesh_tests::{FakeAgent, loopback_net, start_agent, start_aggregator, wait_for};
use zonemesh_tls::{ClientTls, Role, connect};

const READER_TOKEN: &str = "r3ader-t0ken-0123456789";
const SCHEDULER_TOKEN: &str = "sched-t0ken-0123456789ab";

/// A TLS aggregator with a client CA and tokens, and the PKI around it.
struct Secured {
    dir: tempfile::TempDir,
    ca: Ca,
    ca_file: PathBuf,
    client_ca_file: PathBuf,
    aggregator: zonemesh_tests::Aggregator,
}

impl Secured {
    fn start(extra: &[&str]) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let ca = Ca::new("zonemesh test CA")?;
        let ca_file = ca.write(&dir.path().join("ca.crt"))?;
        let client_ca_file = ca.write(&dir.path().join("client-ca.crt"))?;
        let server = ca.server(dir.path(), "aggregator")?;
        let tokens = dir.path().join("tokens");
        std::fs::write(
            &tokens,
            format!("reader grafana {READER_TOKEN}\nscheduler kube-scheduler {SCHEDULER_TOKEN}\n"),
        )?;
        let (cert, key, client, tokens) = (
            path(&server.cert)?,
            path(&server.key)?,
            path(&client_ca_file)?,
            path(&tokens)?,
        );
        let mut args = vec![
            "--in-memory",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &client,
            "--tokens-file",
            &tokens,
            "--credential-reload",
            "200ms",
        ];
        args.extend(extra);
        let aggregator = start_aggregator(&args, dir.path())?;
        Ok(Self {
            dir,
            ca,
            ca_file,
            client_ca_file,
            aggregator,
        })
    }

    fn url(&self) -> String {
        format!("https://{}", self.aggregator.grpc)
    }

    fn tls(&self, client: Option<&Files>) -> ClientTls {
        ClientTls {
            ca: Some(self.ca_file.clone()),
            cert: client.map(|f| f.cert.clone()),
            key: client.map(|f| f.key.clone()),
            server_name: None,
        }
    }

    async fn channel(&self, client: Option<&Files>) -> Result<Channel> {
        connect(&self.url(), &self.tls(client), Duration::from_secs(5))
            .await
            .map_err(anyhow::Error::msg)
    }

    fn client(&self, role: Role, name: &str) -> Result<Files> {
        self.ca.client(self.dir.path(), role, name)
    }

    /// `curl` over HTTPS to the aggregator's HTTP port: (status, body).
    fn curl(
        &self,
        path: &str,
        body: Option<&str>,
        client: Option<&Files>,
        token: Option<&str>,
    ) -> Result<(u16, String)> {
        zonemesh_tests::curl_https(
            self.aggregator.http.port(),
            path,
            &self.ca_file,
            client,
            token,
            body,
        )
    }

    fn metric(&self, line_prefix: &str) -> Result<f64> {
        let (code, text) = self.curl("/metrics", None, None, None)?;
        ensure!(code == 200, "/metrics: {code}");
        metric_value(&text, line_prefix)
    }
}

fn metric_value(text: &str, series: &str) -> Result<f64> {
    zonemesh_tests::sample(text, series).with_context(|| format!("no {series} in the metrics"))
}

/// Replaces a file at once (write aside, rename), as Kubernetes swaps a Secret's files: a reload
/// never reads half a file.
fn replace_file(path: &Path, contents: &str) -> Result<()> {
    let aside = path.with_extension("new");
    std::fs::write(&aside, contents)?;
    std::fs::rename(&aside, path)?;
    Ok(())
}

fn path(p: &Path) -> Result<String> {
    p.to_str().map(str::to_owned).context("utf-8 path")
}

/// A hello as `node` in zone-a over `channel`, if it connected: whether it was taken.
async fn hello_over(channel: Result<Channel>, node: &str) -> Result<()> {
    FakeAgent::connect_on(channel?, node, "zone-a")
        .await
        .map(|_| ())
}

/// The gRPC status in an error's chain.
fn status_of(e: &anyhow::Error) -> Option<&tonic::Status> {
    e.chain().find_map(|c| c.downcast_ref::<tonic::Status>())
}

fn expect_code<T: std::fmt::Debug>(
    what: &str,
    result: Result<T>,
    code: tonic::Code,
) -> Result<String> {
    match result {
        Ok(v) => bail!("{what}: accepted ({v:?}), expected {code:?}"),
        Err(e) => match status_of(&e) {
            Some(s) if s.code() == code => Ok(s.message().to_owned()),
            _ => bail!("{what}: expected {code:?}, got {e:#}"),
        },
    }
}

async fn list_nodes(channel: Channel, token: Option<&str>) -> Result<Vec<v1::Node>> {
    let header: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>> = token
        .map(|t| format!("Bearer {t}").parse())
        .transpose()
        .context("token header")?;
    let mut client = v1::topology_client::TopologyClient::with_interceptor(
        channel,
        move |mut request: tonic::Request<()>| {
            if let Some(h) = &header {
                request.metadata_mut().insert("authorization", h.clone());
            }
            Ok(request)
        },
    );
    Ok(client
        .list_nodes(v1::ListNodesRequest::default())
        .await?
        .into_inner()
        .nodes)
}

/// The nodes whose agents are connected now.
async fn connected_nodes(channel: Channel) -> Result<Vec<String>> {
    Ok(list_nodes(channel, None)
        .await?
        .into_iter()
        .filter(|n| n.connected)
        .map(|n| n.name)
        .collect())
}

fn extender_body() -> String {
    serde_json::json!({
        "Pod": {"metadata": {"name": "w0", "namespace": "ml"}, "spec": {}},
        "NodeNames": ["a1"],
        "Nodes": null
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_certified_agents_report_and_only_for_their_node() -> Result<()> {
    let s = Secured::start(&[])?;
    let a1 = s.client(Role::Node, "a1")?;

    // A certificate for a1 reports for a1.
    let mut agent = FakeAgent::connect_on(s.channel(Some(&a1)).await?, "a1", "zone-a").await?;
    agent.report(&[("b1", 200.0, 0, 1e9)]).await?;

    // The same certificate cannot speak for b1.
    let message = expect_code(
        "a1's certificate saying hello as b1",
        FakeAgent::connect_on(s.channel(Some(&a1)).await?, "b1", "zone-a").await,
        tonic::Code::PermissionDenied,
    )?;
    ensure!(
        message.contains("a1") && message.contains("b1"),
        "{message}"
    );

    // TLS without a client certificate cannot register.
    expect_code(
        "an agent without a certificate",
        FakeAgent::connect_on(s.channel(None).await?, "a1", "zone-a").await,
        tonic::Code::Unauthenticated,
    )?;

    // A scheduler's certificate is not a node's.
    let scheduler = s.client(Role::Scheduler, "kube-scheduler")?;
    expect_code(
        "a scheduler certificate saying hello",
        FakeAgent::connect_on(s.channel(Some(&scheduler)).await?, "a1", "zone-a").await,
        tonic::Code::PermissionDenied,
    )?;

    // A certificate from another CA fails the handshake: no stream at all.
    let stranger_ca = Ca::new("someone else")?;
    let forged = stranger_ca.client(s.dir.path(), Role::Node, "a1")?;
    let forged_result = hello_over(s.channel(Some(&forged)).await, "a1").await;
    ensure!(
        forged_result.is_err(),
        "a certificate from another CA was accepted"
    );

    // Plain text to a TLS port is refused.
    let plain = Channel::from_shared(format!("http://{}", s.aggregator.grpc))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5));
    let plain_result = hello_over(plain.connect().await.map_err(Into::into), "a1").await;
    ensure!(plain_result.is_err(), "plain text was accepted");

    // The only agent connected is a1: the refused ones left nothing.
    let connected = connected_nodes(s.channel(Some(&scheduler)).await?).await?;
    ensure!(connected == ["a1"], "connected nodes {connected:?}");

    ensure!(
        s.metric("zonemesh_auth_refusals_total{surface=\"ingest\",reason=\"forbidden\"}")? >= 2.0
    );
    ensure!(
        s.metric("zonemesh_auth_refusals_total{surface=\"ingest\",reason=\"unauthenticated\"}")?
            >= 1.0
    );
    ensure!(s.metric("zonemesh_tls_handshake_failures_total")? >= 2.0);
    Ok(())
}

/// A client CA may sign more than zonemesh's certificates (a cluster-wide CA, or one shared with
/// another cluster): only identities in the aggregator's trust domain count, and a certificate
/// whose identities are all elsewhere is refused at the handshake, where its client learns why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_identities_in_the_trust_domain_count() -> Result<()> {
    let s = Secured::start(&["--trust-domain", "prod.example"])?;
    let dir = s.dir.path();

    // In the aggregator's domain a node certificate reports, and a reader's queries.
    let a1 = s.ca.client_in("prod.example", dir, Role::Node, "a1")?;
    let mut agent = FakeAgent::connect_on(s.channel(Some(&a1)).await?, "a1", "zone-a").await?;
    agent.report(&[("b1", 200.0, 0, 1e9)]).await?;
    let reader =
        s.ca.client_in("prod.example", dir, Role::Reader, "grafana")?;
    let listed: Vec<String> = list_nodes(s.channel(Some(&reader)).await?, None)
        .await?
        .into_iter()
        .map(|n| n.name)
        .collect();
    ensure!(listed.contains(&"a1".to_owned()), "{listed:?}");

    // The same CA's certificates in other domains (zonemesh's default one among them).
    let failures = s.metric("zonemesh_tls_handshake_failures_total")?;
    for (domain, role, name) in [
        ("zonemesh", Role::Node, "a2"),
        ("staging.example", Role::Scheduler, "kube-scheduler"),
    ] {
        let files = s.ca.client_in(domain, dir, role, name)?;
        match connect(&s.url(), &s.tls(Some(&files)), Duration::from_secs(5)).await {
            Ok(_) => bail!("a {} certificate of {domain} connected", role.as_str()),
            Err(e) => ensure!(
                e.is_credentials() && e.to_string().contains("refused this client's certificate"),
                "{domain}: {e}"
            ),
        }
    }
    ensure!(s.metric("zonemesh_tls_handshake_failures_total")? >= failures + 2.0);
    let connected = connected_nodes(s.channel(Some(&reader)).await?).await?;
    ensure!(connected == ["a1"], "connected nodes {connected:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_and_the_extender_need_credentials() -> Result<()> {
    let s = Secured::start(&[])?;
    let a1 = s.client(Role::Node, "a1")?;
    let mut agent = FakeAgent::connect_on(s.channel(Some(&a1)).await?, "a1", "zone-a").await?;
    agent.report(&[("b1", 200.0, 0, 1e9)]).await?;

    // gRPC: nothing without credentials, nothing with a bad token, nothing for a node.
    expect_code(
        "ListNodes without credentials",
        list_nodes(s.channel(None).await?, None).await,
        tonic::Code::Unauthenticated,
    )?;
    expect_code(
        "ListNodes with a wrong token",
        list_nodes(s.channel(None).await?, Some("not-a-token-0123456789")).await,
        tonic::Code::Unauthenticated,
    )?;
    expect_code(
        "ListNodes with a node certificate",
        list_nodes(s.channel(Some(&a1)).await?, None).await,
        tonic::Code::PermissionDenied,
    )?;
    // Readers and schedulers, by token or certificate, see the topology.
    let reader = s.client(Role::Reader, "dashboard")?;
    let scheduler = s.client(Role::Scheduler, "kube-scheduler")?;
    for (what, channel, token) in [
        ("reader token", s.channel(None).await?, Some(READER_TOKEN)),
        (
            "scheduler token",
            s.channel(None).await?,
            Some(SCHEDULER_TOKEN),
        ),
        ("reader certificate", s.channel(Some(&reader)).await?, None),
        (
            "scheduler certificate",
            s.channel(Some(&scheduler)).await?,
            None,
        ),
    ] {
        let nodes = list_nodes(channel, token).await.context(what)?;
        ensure!(nodes.iter().any(|n| n.name == "a1"), "{what}: {nodes:?}");
    }

    // The extender: 401 without credentials, 403 for a reader, 200 for a scheduler.
    let body = extender_body();
    // Every time: over HTTP/2 a refusal that left the body unread used to end in a stream reset.
    for _ in 0..20 {
        let (code, text) = s.curl("/extender/filter", Some(&body), None, None)?;
        ensure!(code == 401 && !text.contains("a1"), "{code} {text}");
    }
    let (code, _) = s.curl(
        "/extender/filter",
        Some(&body),
        None,
        Some("not-a-token-0123456789"),
    )?;
    ensure!(code == 401, "bad token: {code}");
    for _ in 0..10 {
        let (code, _) = s.curl("/extender/filter", Some(&body), None, Some(READER_TOKEN))?;
        ensure!(code == 403, "reader token: {code}");
    }
    let (code, _) = s.curl("/extender/filter", Some(&body), Some(&reader), None)?;
    ensure!(code == 403, "reader certificate: {code}");
    for (what, client, token) in [
        ("scheduler token", None, Some(SCHEDULER_TOKEN)),
        ("scheduler certificate", Some(&scheduler), None),
    ] {
        let (code, text) = s.curl("/extender/filter", Some(&body), client, token)?;
        ensure!(code == 200, "{what}: {code} {text}");
        let answer: serde_json::Value = serde_json::from_str(&text)?;
        ensure!(
            answer["NodeNames"] == serde_json::json!(["a1"]),
            "{what}: {text}"
        );
    }
    // Probes and scrapers need no credentials.
    let (code, _) = s.curl("/healthz", None, None, None)?;
    ensure!(code == 200);
    ensure!(
        s.metric("zonemesh_auth_refusals_total{surface=\"query\",reason=\"unauthenticated\"}")?
            >= 2.0
    );
    ensure!(
        s.metric("zonemesh_auth_refusals_total{surface=\"extender\",reason=\"forbidden\"}")? >= 2.0
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_reload_from_disk() -> Result<()> {
    let s = Secured::start(&[])?;
    // Rotate the client CA in place, as Kubernetes updates a mounted Secret.
    let next_ca = Ca::new("next CA")?;
    let old = s.client(Role::Node, "a1")?;
    let new = next_ca.client(s.dir.path(), Role::Node, "b1")?;
    replace_file(&s.client_ca_file, &next_ca.cert_pem)?;
    wait_for(
        "the new CA's certificate to be accepted",
        Duration::from_secs(15),
        || async {
            let channel = s.channel(Some(&new)).await.ok()?;
            FakeAgent::connect_on(channel, "b1", "zone-b").await.ok()
        },
    )
    .await?;
    let old_result = hello_over(s.channel(Some(&old)).await, "a1").await;
    ensure!(old_result.is_err(), "the old CA's certificate still works");

    // Tokens too: a new token works, the old one no longer does.
    replace_file(
        &s.dir.path().join("tokens"),
        "reader grafana n3w-r3ader-t0ken-0123456789\n",
    )?;
    wait_for(
        "the new token to be accepted",
        Duration::from_secs(15),
        || async {
            let channel = s.channel(None).await.ok()?;
            list_nodes(channel, Some("n3w-r3ader-t0ken-0123456789"))
                .await
                .ok()
        },
    )
    .await?;
    expect_code(
        "the old token",
        list_nodes(s.channel(None).await?, Some(READER_TOKEN)).await,
        tonic::Code::Unauthenticated,
    )?;

    // A broken file is refused and counted; what loaded last stays in force.
    let failed = "zonemesh_credential_reloads_total{result=\"error\"}";
    let before = s.metric(failed)?;
    replace_file(&s.client_ca_file, "not a certificate\n")?;
    wait_for(
        "the failed reload to be counted",
        Duration::from_secs(15),
        || async { (s.metric(failed).ok()? > before).then_some(()) },
    )
    .await?;
    FakeAgent::connect_on(s.channel(Some(&new)).await?, "b1", "zone-b").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_agent_reports_over_mutual_tls() -> Result<()> {
    let s = Secured::start(&[])?;
    let n1 = s.client(Role::Node, "n1")?;
    let (ca, cert, key) = (path(&s.ca_file)?, path(&n1.cert)?, path(&n1.key)?);
    let url = s.url();
    // An address of its own in loopback, so that the default probe port is free.
    let address = format!("{}11", loopback_net());
    let metrics = format!("{address}:0");
    let _agent = start_agent(
        "n1",
        &[
            "--zone",
            "zone-a",
            "--address",
            &address,
            "--icmp",
            "tcp",
            "--aggregator",
            &url,
            "--tls-ca",
            &ca,
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--metrics-listen",
            &metrics,
        ],
        s.dir.path(),
    )?;
    let scheduler = s.client(Role::Scheduler, "kube-scheduler")?;
    wait_for(
        "n1 to connect over mutual TLS",
        Duration::from_secs(30),
        || async {
            let channel = s.channel(Some(&scheduler)).await.ok()?;
            let nodes = list_nodes(channel, None).await.ok()?;
            nodes
                .iter()
                .any(|n| n.name == "n1" && n.connected)
                .then_some(())
        },
    )
    .await?;

    // An agent whose certificate another CA signed never connects, and its log says why.
    let stranger_dir = s.dir.path().join("stranger");
    std::fs::create_dir_all(&stranger_dir)?;
    let n2 = Ca::new("another CA")?.client(&stranger_dir, Role::Node, "n2")?;
    let (cert, key) = (path(&n2.cert)?, path(&n2.key)?);
    let address = format!("{}12", loopback_net());
    let metrics = format!("{address}:0");
    let impostor = start_agent(
        "n2",
        &[
            "--zone",
            "zone-a",
            "--address",
            &address,
            "--icmp",
            "tcp",
            "--aggregator",
            &url,
            "--tls-ca",
            &ca,
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--metrics-listen",
            &metrics,
        ],
        s.dir.path(),
    )?;
    wait_for(
        "n2's log to say that its certificate was refused",
        Duration::from_secs(30),
        || async {
            impostor
                .log()
                .contains("the server refused this client's certificate")
                .then_some(())
        },
    )
    .await?;
    let channel = s.channel(Some(&scheduler)).await?;
    let nodes = list_nodes(channel, None).await?;
    ensure!(!nodes.iter().any(|n| n.name == "n2"), "{nodes:?}");
    // A log written to a file (or read with kubectl logs) has no terminal colour codes.
    let log = impostor.log();
    ensure!(
        !log.contains('\u{1b}'),
        "colour codes in a log file:\n{log}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abuse_limits_bite_are_counted_and_lose_nothing_acknowledged() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(
        &[
            "--in-memory",
            "--max-nodes",
            "4",
            "--max-report-paths",
            "2",
            "--max-report-rate",
            "4",
            "--report-burst",
            "2",
            "--max-report-bytes",
            "4096",
        ],
        dir.path(),
    )?;
    let metric = |name: &str| -> Result<f64> {
        metric_value(
            &zonemesh_tests::http_get(aggregator.http, "/metrics")?,
            name,
        )
    };
    let mut a1 = FakeAgent::connect(&aggregator, "a1", "zone-a").await?;
    // Too many paths in one report.
    let e = a1
        .report(&[
            ("b1", 100.0, 0, 1e9),
            ("b2", 100.0, 0, 1e9),
            ("b3", 100.0, 0, 1e9),
        ])
        .await
        .expect_err("a report of 3 paths passed --max-report-paths 2");
    ensure!(e.to_string().contains("--max-report-paths"), "{e}");
    // Destinations count as nodes: a1, b1, b2 fit; a report adding b3 and b4 does not.
    a1.report(&[("b1", 100.0, 0, 1e9), ("b2", 100.0, 0, 1e9)])
        .await?;
    let e = a1
        .report(&[("b3", 100.0, 0, 1e9), ("b4", 100.0, 0, 1e9)])
        .await
        .expect_err("a report passed --max-nodes");
    ensure!(e.to_string().contains("--max-nodes"), "{e}");
    // Names that were only destinations do not keep agents out: --max-nodes counts agents
    // that said hello, so three more fit and the fifth does not.
    let mut agents = Vec::new();
    for node in ["b1", "c1", "c2"] {
        agents.push(FakeAgent::connect(&aggregator, node, "zone-c").await?);
    }
    expect_code(
        "a fifth agent",
        FakeAgent::connect(&aggregator, "c3", "zone-c").await,
        tonic::Code::ResourceExhausted,
    )?;
    // Above the rate, reports wait and are all acknowledged.
    for _ in 0..8 {
        a1.report(&[("b1", 100.0, 0, 1e9)]).await?;
    }
    // Also when an agent pipelines a backlog (as after a reconnect) and the stream is read
    // slowly for half a minute: the connection holds and every report is acknowledged.
    let mut last = 0;
    for _ in 0..120 {
        last = a1.send_report(&[("b1", 100.0, 0, 1e9)], 0).await?;
    }
    tokio::time::timeout(Duration::from_secs(60), a1.wait_ack(last))
        .await
        .context("the pipelined backlog was not acknowledged within 60 s")??;
    // A message above --max-report-bytes (100 paths, about 10 kB) closes its agent's stream and
    // only that one: a1 goes on reporting.
    let far: Vec<String> = (0..100).map(|i| format!("far-away-node-{i:03}")).collect();
    let big: Vec<(&str, f64, u64, f64)> = far.iter().map(|n| (n.as_str(), 100.0, 0, 1e9)).collect();
    let mut b1 = agents.remove(0);
    let refused = tokio::time::timeout(Duration::from_secs(10), b1.report(&big))
        .await
        .context("a report above --max-report-bytes neither acknowledged nor refused in 10 s")?;
    let why = refused
        .err()
        .context("a report above --max-report-bytes was acknowledged")?;
    let status = status_of(&why).with_context(|| format!("no gRPC status: {why:#}"))?;
    ensure!(
        status.code() == tonic::Code::ResourceExhausted
            && status.message().contains("--max-report-bytes"),
        "{status:?}"
    );
    a1.report(&[("b1", 100.0, 0, 1e9)]).await?;
    ensure!(metric("zonemesh_limit_hits_total{limit=\"report_bytes\"}")? == 1.0);
    ensure!(metric("zonemesh_limit_hits_total{limit=\"report_rate\"}")? >= 1.0);
    ensure!(metric("zonemesh_limit_hits_total{limit=\"report_paths\"}")? == 1.0);
    ensure!(metric("zonemesh_limit_hits_total{limit=\"nodes\"}")? == 2.0);
    // 1 + 8 + 120 + 1 reports applied; the three refused were not.
    ensure!(metric("zonemesh_reports_total")? == 130.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_certificate_script_makes_certificates_the_aggregator_accepts() -> Result<()> {
    if !zonemesh_tests::tool_available("openssl", &["version"], "apt-get install openssl") {
        return Ok(());
    }
    let s = Secured::start(&[])?;
    let key = s.ca.write_key(&s.dir.path().join("ca.key"))?;
    let out = s.dir.path().join("node-certs");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/tls/node-certs.sh");
    let run = Command::new("bash")
        .arg(&script)
        .arg("--ca-cert")
        .arg(&s.ca_file)
        .arg("--ca-key")
        .arg(&key)
        .arg("--out")
        .arg(&out)
        .args(["--days", "30", "gpu-node-1", "gpu-node-2"])
        .output()?;
    ensure!(
        run.status.success(),
        "node-certs.sh: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let files = |node: &str| Files {
        cert: out.join(node).join("tls.crt"),
        key: out.join(node).join("tls.key"),
    };
    // The agent's CA file from the script verifies the aggregator, and the aggregator takes the
    // certificate for its own node only.
    let tls = |node: &str| ClientTls {
        ca: Some(out.join(node).join("ca.crt")),
        cert: Some(files(node).cert),
        key: Some(files(node).key),
        server_name: None,
    };
    let channel = connect(&s.url(), &tls("gpu-node-1"), Duration::from_secs(5))
        .await
        .map_err(anyhow::Error::msg)?;
    let mut agent = FakeAgent::connect_on(channel, "gpu-node-1", "zone-a").await?;
    agent.report(&[("gpu-node-2", 80.0, 0, 1e9)]).await?;
    let channel = connect(&s.url(), &tls("gpu-node-2"), Duration::from_secs(5))
        .await
        .map_err(anyhow::Error::msg)?;
    expect_code(
        "gpu-node-2's certificate saying hello as gpu-node-1",
        FakeAgent::connect_on(channel, "gpu-node-1", "zone-a").await,
        tonic::Code::PermissionDenied,
    )?;
    // A name Kubernetes would not accept is refused by the script, which names it.
    let bad = Command::new("bash")
        .arg(&script)
        .arg("--ca-cert")
        .arg(&s.ca_file)
        .arg("--ca-key")
        .arg(&key)
        .arg("--out")
        .arg(&out)
        .arg("Node_A")
        .output()?;
    ensure!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    ensure!(stderr.contains("Node_A"), "{stderr}");
    Ok(())
}

#[test]
fn unusable_security_limit_and_fault_flags_exit_64_naming_the_flag() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "reader grafana short\n")?;
    let missing = dir.path().join("missing.pem");
    let (tokens, missing) = (path(&tokens)?, path(&missing)?);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--max-report-rate=-1"], "--max-report-rate"),
        (vec!["--max-report-paths", "20000"], "--max-report-paths"),
        (vec!["--max-nodes", "1"], "--max-nodes"),
        (
            vec!["--tls-cert", &missing, "--tls-key", &missing],
            "--tls-cert",
        ),
        (vec!["--tokens-file", &tokens], "--tokens-file"),
        (vec!["--tls-client-ca", &missing], "--tls-cert"),
        (vec!["--trust-domain", "Zonemesh"], "--trust-domain"),
        (vec!["--trust-domain", ""], "--trust-domain"),
        (vec!["--publish", "volcano,slurm"], "--publish"),
        (
            vec!["--publish", "kueue", "--publish-kueue-version", "v1"],
            "--publish-kueue-version",
        ),
        (
            vec!["--publish", "diktyo", "--publish-namespace", "Zonemesh"],
            "--publish-namespace",
        ),
        (
            vec!["--publish", "volcano", "--publish-name", "a_b"],
            "--publish-name",
        ),
        (
            vec!["--tier-join-rtt", "5ms", "--tier-leave-rtt", "4ms"],
            "--tier-leave-rtt",
        ),
        (
            vec!["--tier-join-throughput", "fast"],
            "--tier-join-throughput",
        ),
        (
            vec!["--fault-loss", "5%", "--fault-loss-down", "1%"],
            "--fault-loss-down",
        ),
        (
            vec!["--fault-delay", "5ms", "--fault-delay-down", "1ms"],
            "--fault-delay-down",
        ),
        (
            vec![
                "--fault-rate-share",
                "20%",
                "--fault-rate-down-share",
                "50%",
            ],
            "--fault-rate-down-share",
        ),
        (vec!["--fault-hold", "0s"], "--fault-hold"),
        (
            vec!["--suspect-probe-factor", "0"],
            "--suspect-probe-factor",
        ),
        (vec!["--fault-baseline", "0"], "--fault-baseline"),
        (vec!["--fault-loss", "150%"], "--fault-loss"),
        (vec!["--fault-loss", "lots"], "--fault-loss"),
        (vec!["--taint-faulty-nodes"], "--taint-faulty-nodes"),
        (
            vec!["--publish", "kueue", "--taint-faulty-nodes"],
            "--taint-faulty-nodes",
        ),
        (
            vec![
                "--publish",
                "health",
                "--taint-faulty-nodes",
                "--max-tainted-nodes",
                "0",
            ],
            "--max-tainted-nodes",
        ),
        (
            vec![
                "--publish",
                "health",
                "--taint-faulty-nodes",
                "--taint-effect",
                "PreferNoSchedule",
            ],
            "--taint-effect",
        ),
    ];
    for (args, flag) in cases {
        let out = Command::new(zonemesh_tests::binary("zonemesh-aggregator"))
            .args([
                "--in-memory",
                "--listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
            ])
            .args(&args)
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(
            out.status.code() == Some(64) && stderr.contains(flag),
            "{args:?}: exit {:?}, {stderr}",
            out.status.code()
        );
    }
    Ok(())
}
