//! `deploy/`: every manifest validates against the current Kubernetes schema (kubernetes-validate,
//! strict) and lints clean (yamllint); the environment variables the manifests set are ones the
//! binaries read; the scheduler profile calls the extender where the aggregator serves it; the
//! Kustomize base lists every manifest; the Dockerfile builds every binary and runs as non-root;
//! the systemd units of `deploy/systemd` pass `systemd-analyze verify` and set only variables the
//! binaries read. CI installs the tools; elsewhere the tests that need them say they were skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use zonemesh_tests::binary;

/// The Kubernetes version the manifests are checked against (kubernetes-validate's newest).
const KUBERNETES: &str = "1.37.0";

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn manifests() -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy())?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name != "kustomization.yaml" && !name.starts_with('.')
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Whether `tool` runs here; in CI it must.
fn available(tool: &str) -> bool {
    zonemesh_tests::tool_available(
        tool,
        &["--version"],
        "pip install kubernetes-validate yamllint",
    )
}

#[test]
fn every_manifest_validates_against_the_kubernetes_schema() -> Result<()> {
    if !available("kubernetes-validate") {
        return Ok(());
    }
    let files = manifests()?;
    ensure!(files.len() >= 5, "{files:?}");
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "-k", KUBERNETES])
        .args(&files)
        .output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "kubernetes-validate:\n{text}");
    ensure!(!text.contains("ERROR") && text.contains("passed"), "{text}");
    Ok(())
}

#[test]
fn every_yaml_file_lints_clean() -> Result<()> {
    if !available("yamllint") {
        return Ok(());
    }
    let out = Command::new("yamllint")
        .args(["--strict", "-c"])
        .arg(deploy().join(".yamllint.yaml"))
        .arg(deploy())
        .output()?;
    ensure!(
        out.status.success(),
        "yamllint:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(())
}

/// The `ZONEMESH_*` names a binary reads, from its `--help` (`[env: NAME=...]`).
fn env_names(program: &str) -> Result<Vec<String>> {
    let out = Command::new(binary(program)).arg("--help").output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .split("[env: ")
        .skip(1)
        .filter_map(|s| s.split(['=', ']']).next().map(str::to_owned))
        .collect())
}

#[test]
fn the_manifests_set_only_variables_the_binaries_read() -> Result<()> {
    for (file, program) in [
        ("agent.yaml", "zonemesh-agent"),
        ("aggregator.yaml", "zonemesh-aggregator"),
        ("tls/agent.yaml", "zonemesh-agent"),
        ("tls/aggregator.yaml", "zonemesh-aggregator"),
        ("tls/aggregator-tokens.yaml", "zonemesh-aggregator"),
        ("cluster/aggregator.yaml", "zonemesh-aggregator"),
        ("cluster/agent.yaml", "zonemesh-agent"),
        ("cluster-tls/aggregator.yaml", "zonemesh-aggregator"),
    ] {
        let known = env_names(program)?;
        ensure!(known.len() > 10, "{program} --help lists {known:?}");
        let text = std::fs::read_to_string(deploy().join(file))?;
        let set: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- name: "))
            .filter(|n| n.starts_with("ZONEMESH_"))
            .collect();
        ensure!(!set.is_empty(), "{file} sets no ZONEMESH_ variable");
        for name in set {
            ensure!(
                known.iter().any(|k| k == name),
                "{file} sets {name}, which {program} does not read"
            );
        }
    }
    Ok(())
}

#[test]
fn the_scheduler_profile_calls_the_extender_where_the_aggregator_serves_it() -> Result<()> {
    let text = std::fs::read_to_string(deploy().join("scheduler.yaml"))?;
    let value = |key: &str| -> Result<String> {
        text.lines()
            .find_map(|l| {
                l.trim()
                    .trim_start_matches("- ")
                    .strip_prefix(&format!("{key}: "))
            })
            .map(|v| v.trim().to_owned())
            .with_context(|| format!("{key} in scheduler.yaml"))
    };
    let url = value("urlPrefix")?;
    ensure!(
        url == "http://zonemesh-aggregator.zonemesh.svc:7401/extender",
        "urlPrefix {url}: the aggregator's Service, HTTP port, /extender"
    );
    ensure!(value("filterVerb")? == "filter" && value("prioritizeVerb")? == "prioritize");
    ensure!(value("nodeCacheCapable")? == "true");
    ensure!(
        value("weight")?.parse::<i64>()? > 0,
        "weight must be positive"
    );
    ensure!(value("percentageOfNodesToScore")? == "100");
    ensure!(value("schedulerName")? == "zonemesh-scheduler");
    // The port in the URL is the aggregator's HTTP port in its manifest.
    let aggregator = std::fs::read_to_string(deploy().join("aggregator.yaml"))?;
    ensure!(aggregator.contains("value: 0.0.0.0:7401") && aggregator.contains("port: 7401"));
    Ok(())
}

#[test]
fn the_kustomize_base_lists_every_manifest() -> Result<()> {
    let text = std::fs::read_to_string(deploy().join("kustomization.yaml"))?;
    for file in manifests()? {
        let name = file.file_name().and_then(|n| n.to_str()).context("name")?;
        ensure!(
            text.contains(&format!("- {name}")),
            "kustomization.yaml misses {name}"
        );
    }
    Ok(())
}

#[test]
fn the_dockerfile_builds_every_binary_and_runs_as_non_root() -> Result<()> {
    let text = std::fs::read_to_string(deploy().join("Dockerfile"))?;
    for bin in ["zonemesh-agent", "zonemesh-aggregator", "zonemesh"] {
        ensure!(
            text.contains(&format!("/src/target/release/{bin} "))
                || text.contains(&format!("/src/target/release/{bin}\n")),
            "Dockerfile does not copy {bin}"
        );
    }
    ensure!(text.contains("--locked"));
    ensure!(text.contains("USER 65532:65532"));
    ensure!(text.contains("setcap cap_net_raw+ep /usr/local/bin/zonemesh-agent"));
    ensure!(
        text.matches("\nFROM ").count() + usize::from(text.starts_with("FROM ")) >= 2,
        "multi-stage"
    );
    Ok(())
}

/// The `- ` list items right under `key:` in `text` (one level of a YAML list).
fn list_under(text: &str, key: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| l.trim() != format!("{key}:"));
    lines.next();
    lines
        .map_while(|l| l.trim().strip_prefix("- "))
        .map(|v| v.trim_matches('"').to_owned())
        .collect()
}

#[test]
fn the_tls_component_wires_certificates_to_the_paths_the_binaries_read() -> Result<()> {
    let tls = deploy().join("tls");
    let read = |f: &str| std::fs::read_to_string(tls.join(f));
    let (certs, scheduler, aggregator, agent) = (
        read("cert-manager.yaml")?,
        read("scheduler.yaml")?,
        read("aggregator.yaml")?,
        read("agent.yaml")?,
    );
    // The scheduler calls the extender over HTTPS at a name the server certificate carries,
    // with the client certificate cert-manager issues it, mounted where tlsConfig looks.
    let url = scheduler
        .lines()
        .find_map(|l| l.trim().strip_prefix("- urlPrefix: "))
        .context("urlPrefix")?;
    let host = url
        .strip_prefix("https://")
        .and_then(|r| r.split(':').next())
        .with_context(|| format!("{url} is not https://"))?;
    ensure!(
        list_under(&certs, "dnsNames").iter().any(|d| d == host),
        "the server certificate does not name {host}"
    );
    ensure!(url.ends_with(":7401/extender"), "{url}");
    let uris = list_under(&certs, "uris");
    // ... in the domain the aggregator trusts.
    let trust_domain = aggregator
        .lines()
        .skip_while(|l| l.trim() != "- name: ZONEMESH_TRUST_DOMAIN")
        .nth(1)
        .and_then(|l| l.trim().strip_prefix("value: "))
        .context("aggregator.yaml sets no ZONEMESH_TRUST_DOMAIN")?;
    ensure!(
        uris.iter().any(
            |u| zonemesh_tls::parse_identity_uri(u).is_some_and(|(domain, i)| {
                domain == trust_domain && i.role == zonemesh_tls::Role::Scheduler
            })
        ),
        "no scheduler identity in trust domain {trust_domain} among {uris:?}"
    );
    let node_certs = read("node-certs.sh")?;
    ensure!(
        node_certs.contains(&format!("\ndomain={trust_domain}\n")),
        "node-certs.sh does not default to trust domain {trust_domain}"
    );
    ensure!(scheduler.contains("enableHTTPS: true"));
    for key in ["certFile", "keyFile", "caFile"] {
        let path = scheduler
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
            .with_context(|| format!("tlsConfig.{key}"))?;
        ensure!(
            path.starts_with("/etc/zonemesh-tls/")
                && scheduler.contains("mountPath: /etc/zonemesh-tls"),
            "{key} {path} is not in the mounted Secret"
        );
    }
    // The aggregator and the agents point their TLS variables at files inside their mounts.
    for (file, text, mount) in [
        ("aggregator.yaml", &aggregator, "/etc/zonemesh-tls/"),
        ("agent.yaml", &agent, "/etc/zonemesh/pki/"),
    ] {
        let mut lines = text.lines();
        let mut seen = 0;
        while let Some(line) = lines.next() {
            if let Some(name) = line.trim().strip_prefix("- name: ZONEMESH_TLS_") {
                let value = lines
                    .next()
                    .and_then(|l| l.trim().strip_prefix("value: "))
                    .with_context(|| format!("{file}: ZONEMESH_TLS_{name} has no value"))?;
                ensure!(
                    value.starts_with(mount),
                    "{file}: ZONEMESH_TLS_{name}={value}"
                );
                seen += 1;
            }
        }
        ensure!(seen == 3, "{file}: {seen} TLS variables");
        ensure!(
            text.contains(&format!("mountPath: {}", mount.trim_end_matches('/'))),
            "{file} does not mount {mount}"
        );
    }
    ensure!(
        agent.contains("value: https://"),
        "the agents do not use https://"
    );
    // Probes cannot present client certificates: they use /healthz, which stays open.
    ensure!(aggregator.contains("path: /healthz") && aggregator.contains("scheme: HTTPS"));
    Ok(())
}

/// The publish components: `deploy/publish/<scheduler>/`.
const PUBLISH: [&str; 4] = ["volcano", "kueue", "diktyo", "health"];
/// The components whose admission policy limits what the aggregator changes on a Node.
const ADMISSION: [(&str, &str); 2] = [
    ("kueue", "zonemesh-node-labels-only"),
    ("health", "zonemesh-node-health-only"),
];

#[test]
fn the_publish_components_validate_against_the_kubernetes_schema() -> Result<()> {
    if !available("kubernetes-validate") {
        return Ok(());
    }
    let mut files = Vec::new();
    for c in PUBLISH {
        files.push(deploy().join("publish").join(c).join("rbac.yaml"));
    }
    for (c, _) in ADMISSION {
        files.push(deploy().join("publish").join(c).join("admission.yaml"));
    }
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "-k", KUBERNETES])
        .args(&files)
        .output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "kubernetes-validate:\n{text}");
    for (_, policy) in ADMISSION {
        ensure!(
            text.contains(&format!("validatingadmissionpolicy/{policy}"))
                && text.contains(&format!("validatingadmissionpolicybinding/{policy}")),
            "{text}"
        );
    }
    Ok(())
}

/// The admission policies, evaluated by cel-python (a CEL implementation of its own) on the
/// Node updates the publisher makes (its labels, its taint: allowed) and on others (another
/// taint, a cordon, another label, an annotation: denied); the two policies hold the same rules.
#[test]
fn the_admission_policies_let_zonemesh_change_only_its_labels_and_its_taint() -> Result<()> {
    if !zonemesh_tests::tool_available(
        "python3",
        &["-c", "import celpy, yaml"],
        "pip install cel-python pyyaml",
    ) {
        return Ok(());
    }
    let script = deploy().join("../tests/data/admission-cel.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(
            ADMISSION
                .iter()
                .map(|(c, _)| deploy().join("publish").join(c).join("admission.yaml")),
        )
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    ensure!(out.status.success(), "admission-cel.py:\n{text}");
    ensure!(
        text.lines().filter(|l| l.starts_with("ok")).count() >= 2 * 13,
        "{text}"
    );
    let rules = |c: &str| -> Result<String> {
        let text =
            std::fs::read_to_string(deploy().join("publish").join(c).join("admission.yaml"))?;
        let start = text.find("  validations:").context("validations")?;
        let end = text[start..]
            .find("\n---")
            .context("one policy, then its binding")?;
        Ok(text[start..start + end].to_owned())
    };
    ensure!(
        rules("kueue")? == rules("health")?,
        "the policies' rules differ"
    );
    Ok(())
}

/// `verbs: [...]` of the rule whose `resources` line names `resource`, in a manifest's text.
fn verbs(text: &str, resource: &str) -> Option<Vec<String>> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.contains(&format!("resources: [\"{resource}\"]")));
    lines.next()?;
    let line = lines
        .next()?
        .trim()
        .strip_prefix("verbs: [")?
        .strip_suffix(']')?;
    Some(
        line.split(',')
            .map(|v| v.trim().trim_matches('"').to_owned())
            .collect(),
    )
}

#[test]
fn each_publish_component_turns_its_scheduler_on_and_grants_exactly_the_verbs_used() -> Result<()> {
    let help = Command::new(binary("zonemesh-aggregator"))
        .arg("--help")
        .output()?;
    let help = String::from_utf8_lossy(&help.stdout);
    ensure!(
        help.contains("--publish <PUBLISH>") && help.contains("[env: ZONEMESH_PUBLISH="),
        "{help}"
    );
    // What the writer calls (publish/src/writer.rs): on its kinds list, get (a taken name),
    // create, update (replace), delete; on nodes list and patch (apply); Events create.
    let objects = vec!["get", "list", "create", "update", "delete"];
    // Per component: each resource and its verbs.
    type Rules<'a> = Vec<(&'a str, Vec<&'a str>)>;
    let expected: [(&str, Rules); 4] = [
        (
            "volcano",
            vec![("hypernodes", objects.clone()), ("events", vec!["create"])],
        ),
        (
            "kueue",
            vec![
                ("topologies", objects.clone()),
                ("nodes", vec!["list", "patch"]),
                ("events", vec!["create"]),
            ],
        ),
        (
            "diktyo",
            vec![
                ("networktopologies", objects.clone()),
                ("configmaps", objects.clone()),
                ("events", vec!["create"]),
            ],
        ),
        (
            "health",
            vec![("nodes", vec!["list", "patch"]), ("events", vec!["create"])],
        ),
    ];
    for (component, rules) in expected {
        let dir = deploy().join("publish").join(component);
        let kustomization = std::fs::read_to_string(dir.join("kustomization.yaml"))?;
        let flag = kustomization
            .lines()
            .find_map(|l| l.trim().strip_prefix("value: --publish="))
            .with_context(|| format!("{component}: no --publish= in its kustomization"))?;
        ensure!(
            zonemesh_publish::Scheduler::parse_list(flag)?
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                == [component],
            "{component}: --publish={flag}"
        );
        ensure!(kustomization.contains("path: /spec/template/spec/automountServiceAccountToken"));
        let rbac = std::fs::read_to_string(dir.join("rbac.yaml"))?;
        let granted = rbac.matches("verbs: [").count();
        ensure!(
            granted == rules.len(),
            "{component}: {granted} rules for {} resources",
            rules.len()
        );
        for (resource, want) in rules {
            let have = verbs(&rbac, resource)
                .with_context(|| format!("{component}: no rule for {resource}"))?;
            ensure!(
                have == want,
                "{component}: {resource} gets {have:?}, the writer uses {want:?}"
            );
        }
        ensure!(
            rbac.contains("name: zonemesh-aggregator\n    namespace: zonemesh"),
            "{component}: bound to the aggregator's ServiceAccount"
        );
    }
    // The admission policies name the account the components bind.
    for (c, _) in ADMISSION {
        let policy =
            std::fs::read_to_string(deploy().join("publish").join(c).join("admission.yaml"))?;
        ensure!(policy.contains("system:serviceaccount:zonemesh:zonemesh-aggregator"));
        ensure!(policy.matches("startsWith('zonemesh.io/')").count() == 2);
    }
    Ok(())
}

/// The replicated deployment: `deploy/cluster/` (docs/replicated.md).
#[test]
fn the_cluster_component_validates_and_wires_replicas_log_and_extender() -> Result<()> {
    let dir = deploy().join("cluster");
    let read = |name: &str| std::fs::read_to_string(dir.join(name));
    let kustomization = read("kustomization.yaml")?;
    ensure!(kustomization.contains("kind: Component"), "{kustomization}");
    for entry in std::fs::read_dir(&dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name != "kustomization.yaml" {
            ensure!(
                kustomization.contains(&name),
                "kustomization.yaml misses {name}"
            );
        }
    }
    if available("kubernetes-validate") {
        let out = Command::new("kubernetes-validate")
            .args(["--strict", "-k", KUBERNETES])
            .arg(dir.join("nats.yaml"))
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        ensure!(out.status.success() && !text.contains("ERROR"), "{text}");
    }
    let nats = read("nats.yaml")?;
    ensure!(
        nats.contains("sync_interval: always"),
        "every write synced before its ack"
    );
    ensure!(nats.contains("replicas: 3") && nats.contains("kind: PodDisruptionBudget"));
    // The replicas: three, ready on /readyz, on the three NATS servers' client port.
    let aggregator = read("aggregator.yaml")?;
    ensure!(aggregator.contains("replicas: 3"), "{aggregator}");
    ensure!(
        aggregator.contains("path: /readyz"),
        "readiness is the replica's"
    );
    for i in 0..3 {
        let server = format!("zonemesh-nats-{i}.zonemesh-nats.zonemesh.svc:4222");
        ensure!(aggregator.contains(&server), "--cluster names {server}");
        ensure!(nats.contains(&format!(
            "nats-route://zonemesh-nats-{i}.zonemesh-nats.zonemesh.svc:6222"
        )));
    }
    ensure!(nats.contains("containerPort: 4222") && nats.contains("port: 4222"));
    // No replica is named the writer (a lease elects the leader), and the scheduler keeps the
    // base's extender URL: the Service of every ready replica (followers forward to the leader).
    ensure!(!aggregator.contains("WRITER"), "{aggregator}");
    ensure!(
        !kustomization.contains("scheduler.yaml") && !kustomization.contains("extender.yaml"),
        "{kustomization}"
    );
    let base = std::fs::read_to_string(deploy().join("scheduler.yaml"))?;
    ensure!(
        base.contains("urlPrefix: http://zonemesh-aggregator.zonemesh.svc:7401/extender"),
        "{base}"
    );
    ensure!(
        aggregator.contains("value: http://$(POD_IP):7401"),
        "{aggregator}"
    );
    // Agents reach every replica through the headless Service.
    ensure!(read("agent.yaml")?.contains("zonemesh-aggregator-headless.zonemesh.svc:7400"));
    Ok(())
}

/// Replicas with TLS: `deploy/cluster-tls/` advertises https:// and gives each replica a scheduler
/// identity from the tls component's CA, at the paths its flags name.
#[test]
fn the_cluster_tls_component_forwards_over_https_as_a_scheduler() -> Result<()> {
    let dir = deploy().join("cluster-tls");
    let read = |name: &str| std::fs::read_to_string(dir.join(name));
    let kustomization = read("kustomization.yaml")?;
    ensure!(kustomization.contains("kind: Component"), "{kustomization}");
    for name in ["cert-manager.yaml", "aggregator.yaml"] {
        ensure!(
            kustomization.contains(name),
            "kustomization.yaml misses {name}"
        );
    }
    let certificate = read("cert-manager.yaml")?;
    let identity = zonemesh_tls::identity_uri(
        "zonemesh",
        zonemesh_tls::Role::Scheduler,
        "zonemesh-aggregator",
    );
    ensure!(
        certificate.contains(&format!("- {identity}")),
        "{certificate}"
    );
    ensure!(certificate.contains("- client auth") && !certificate.contains("server auth"));
    ensure!(certificate.contains("secretName: zonemesh-aggregator-peer-tls"));
    // The issuer and the CA file are the tls component's.
    let tls = std::fs::read_to_string(deploy().join("tls/cert-manager.yaml"))?;
    ensure!(certificate.contains("name: zonemesh-ca") && tls.contains("name: zonemesh-ca"));
    let tls_aggregator = std::fs::read_to_string(deploy().join("tls/aggregator.yaml"))?;
    let aggregator = read("aggregator.yaml")?;
    ensure!(tls_aggregator.contains("value: /etc/zonemesh-tls/ca.crt"));
    let value_of = |name: &str| {
        let at = aggregator.find(&format!("- name: {name}"))?;
        aggregator[at..]
            .lines()
            .nth(1)?
            .trim()
            .strip_prefix("value: ")
            .map(str::to_owned)
    };
    // The pod's DNS name, which the aggregator's certificate covers (its IP is not in it).
    let url = "https://$(ZONEMESH_REPLICA_NAME).zonemesh-aggregator-headless.zonemesh.svc:7401";
    ensure!(value_of("ZONEMESH_ADVERTISE_URL").as_deref() == Some(url));
    ensure!(tls.contains("- \"*.zonemesh-aggregator-headless.zonemesh.svc\""));
    let cluster = std::fs::read_to_string(deploy().join("cluster/aggregator.yaml"))?;
    let name_at = cluster.find("- name: ZONEMESH_REPLICA_NAME");
    let url_at = cluster.find("- name: ZONEMESH_ADVERTISE_URL");
    ensure!(
        name_at.is_some() && name_at < url_at,
        "the replica's name is defined before the URL that uses it"
    );
    ensure!(value_of("ZONEMESH_PEER_CA").as_deref() == Some("/etc/zonemesh-tls/ca.crt"));
    ensure!(value_of("ZONEMESH_PEER_CERT").as_deref() == Some("/etc/zonemesh-peer/tls.crt"));
    ensure!(value_of("ZONEMESH_PEER_KEY").as_deref() == Some("/etc/zonemesh-peer/tls.key"));
    ensure!(
        aggregator.contains("mountPath: /etc/zonemesh-peer")
            && aggregator.contains("secretName: zonemesh-aggregator-peer-tls"),
        "{aggregator}"
    );
    Ok(())
}

/// The `ZONEMESH_*` names of `zonemesh publish` (its `--help`).
fn publish_env_names() -> Result<Vec<String>> {
    let out = Command::new(binary("zonemesh"))
        .args(["publish", "--help"])
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .split("[env: ")
        .skip(1)
        .filter_map(|s| s.split(['=', ']']).next().map(str::to_owned))
        .collect())
}

/// deploy/systemd: each unit and environment file sets only variables its binary reads; the
/// agent runs with CAP_NET_RAW and nothing else, both daemons restart on failure and read their
/// flags from an environment file, the timer starts the Slurm writer; and systemd itself
/// (`systemd-analyze verify`, with the units pointed at the built binaries) finds nothing wrong.
#[test]
fn the_systemd_units_run_the_binaries_with_the_variables_they_read() -> Result<()> {
    let dir = deploy().join("systemd");
    let read = |f: &str| std::fs::read_to_string(dir.join(f));
    let agent_unit = read("zonemesh-agent.service")?;
    let aggregator_unit = read("zonemesh-aggregator.service")?;
    let slurm_unit = read("zonemesh-slurm-topology.service")?;
    let timer = read("zonemesh-slurm-topology.timer")?;
    let set_in = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.strip_prefix("Environment=").unwrap_or(l))
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim_start_matches('#')))
            .filter(|k| k.starts_with("ZONEMESH_"))
            .map(str::to_owned)
            .collect()
    };
    let publish = publish_env_names()?;
    ensure!(
        publish.iter().any(|n| n == "ZONEMESH_SLURM_FILE"),
        "zonemesh publish --help lists {publish:?}"
    );
    for (texts, known, what) in [
        (
            vec![agent_unit.clone(), read("agent.env")?],
            env_names("zonemesh-agent")?,
            "zonemesh-agent",
        ),
        (
            vec![aggregator_unit.clone(), read("aggregator.env")?],
            env_names("zonemesh-aggregator")?,
            "zonemesh-aggregator",
        ),
        (
            vec![slurm_unit.clone(), read("slurm-topology.env")?],
            publish.clone(),
            "zonemesh publish",
        ),
    ] {
        let mut names = Vec::new();
        for t in &texts {
            names.extend(set_in(t));
        }
        ensure!(names.len() >= 2, "{what}: {names:?}");
        for n in names {
            ensure!(known.contains(&n), "{what} does not read {n}");
        }
    }
    // Without Kubernetes the agent's zone comes from its flag's variable.
    ensure!(set_in(&read("agent.env")?).contains(&"ZONEMESH_ZONE".to_owned()));
    for line in [
        "AmbientCapabilities=CAP_NET_RAW",
        "CapabilityBoundingSet=CAP_NET_RAW",
        "Restart=on-failure",
        "EnvironmentFile=/etc/zonemesh/agent.env",
        "ExecStart=/usr/local/bin/zonemesh-agent",
    ] {
        ensure!(
            agent_unit.lines().any(|l| l == line),
            "agent unit: no {line}"
        );
    }
    ensure!(
        agent_unit
            .lines()
            .filter(|l| l.starts_with("AmbientCapabilities=")
                || l.starts_with("CapabilityBoundingSet="))
            .all(|l| l.ends_with("=CAP_NET_RAW")),
        "the agent gets CAP_NET_RAW only"
    );
    for line in [
        "Restart=on-failure",
        "EnvironmentFile=/etc/zonemesh/aggregator.env",
        "CapabilityBoundingSet=",
    ] {
        ensure!(
            aggregator_unit.lines().any(|l| l == line),
            "aggregator unit: no {line}"
        );
    }
    ensure!(slurm_unit.contains("ExecStart=/usr/local/bin/zonemesh publish"));
    ensure!(timer.contains("[Timer]") && timer.contains("OnUnitActiveSec="));

    if !zonemesh_tests::tool_available("systemd-analyze", &["--version"], "apt-get install systemd")
    {
        return Ok(());
    }
    let bin = binary("zonemesh-agent")
        .parent()
        .context("binary directory")?
        .to_owned();
    binary("zonemesh-aggregator");
    binary("zonemesh");
    let tmp = tempfile::tempdir()?;
    let mut units = Vec::new();
    for f in std::fs::read_dir(&dir)? {
        let path = f?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if name.ends_with(".service") || name.ends_with(".timer") {
            let text = std::fs::read_to_string(&path)?
                .replace("/usr/local/bin/", &format!("{}/", bin.display()));
            std::fs::write(tmp.path().join(&name), text)?;
            units.push(tmp.path().join(&name));
        }
    }
    ensure!(units.len() == 4, "{units:?}");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&units)
        .output()?;
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    ensure!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
    Ok(())
}
