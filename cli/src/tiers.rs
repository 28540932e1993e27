//! `zonemesh tiers` (the tree with the figures behind every cut) and `zonemesh publish` (the
//! objects the aggregator's publisher writes: `--dry-run` prints them, `--delete` removes
//! everything zonemesh owns from the cluster of the current kubeconfig; `--slurm` writes Slurm's
//! topology file instead, see [`crate::slurm`]).

use std::fmt::Write as _;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use zonemesh_proto::v1;
use zonemesh_publish::{Kind, KueueVersion, Scheduler, Settings};

use crate::failure::{Failure, exit};
use crate::render::{micros, rate};

fn pair(p: &Option<v1::ZonePairFigure>, show: impl Fn(f64) -> String) -> Option<String> {
    p.as_ref()
        .map(|p| format!("{} ({} – {})", show(p.value), p.zone_a, p.zone_b))
}

fn cut_line(c: &v1::CutFigures) -> String {
    let mut parts = Vec::new();
    if let Some(r) = pair(&c.worst_rtt, micros) {
        parts.push(format!("worst RTT {r}"));
    }
    if let Some(t) = pair(&c.lowest_throughput, rate) {
        parts.push(format!("lowest throughput {t}"));
    }
    if c.unmeasured_pairs > 0 {
        parts.push(format!("{} pairs unmeasured", c.unmeasured_pairs));
    }
    if c.stale_pairs > 0 {
        parts.push(format!("{} pairs stale", c.stale_pairs));
    }
    if parts.is_empty() {
        "no pair".into()
    } else {
        parts.join(", ")
    }
}

/// The tiers as a tree: the cluster, its groups, their zones and nodes, and at every level the
/// figures that put the cut there.
pub fn tree(t: &v1::GetTiersResponse, now_ms: i64) -> String {
    let th = t.thresholds.unwrap_or_default();
    let nodes: usize = t.zones.iter().map(|z| z.nodes.len()).sum();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  cluster (tier 3): {nodes} nodes, {} zones, {} groups; {}",
        t.zones.len(),
        t.groups.len(),
        t.cluster.as_ref().map_or("no pair".into(), cut_line)
    );
    let _ = writeln!(
        out,
        "  derived {:.1} s ago; zones join within RTT {} and throughput {}, leave past RTT {} or below {}",
        (now_ms - t.computed_at_unix_ms).max(0) as f64 / 1000.0,
        micros(th.join_rtt_us),
        if th.join_throughput_bps > 0.0 {
            rate(th.join_throughput_bps)
        } else {
            "any".into()
        },
        micros(th.leave_rtt_us),
        if th.leave_throughput_bps > 0.0 {
            rate(th.leave_throughput_bps)
        } else {
            "any".into()
        },
    );
    for (gi, g) in t.groups.iter().enumerate() {
        let last_group = gi + 1 == t.groups.len();
        let (branch, stem) = if last_group {
            ("└─", "   ")
        } else {
            ("├─", "│  ")
        };
        let inside = g.inside.as_ref().map_or("no pair".into(), cut_line);
        let _ = writeln!(
            out,
            "  {branch} {} (tier 2): {}{}",
            g.name,
            if g.zones.len() > 1 {
                inside
            } else {
                "one zone".into()
            },
            if g.held {
                "; held by hysteresis (past a join threshold, within the leave one)"
            } else {
                ""
            }
        );
        if let Some(n) = &g.nearest {
            let _ = writeln!(
                out,
                "  {stem}   apart from {} by {}: {}",
                n.group,
                zonemesh_proto::json::tier_cut(n.cut).to_lowercase(),
                n.figures.as_ref().map_or("no pair".into(), cut_line)
            );
        }
        let zones: Vec<&v1::TierZone> = t.zones.iter().filter(|z| z.group == g.name).collect();
        for (zi, z) in zones.iter().enumerate() {
            let zb = if zi + 1 == zones.len() {
                "└─"
            } else {
                "├─"
            };
            let mut figures = Vec::new();
            if z.rtt_us > 0.0 {
                figures.push(format!("RTT {}", micros(z.rtt_us)));
            }
            if z.throughput_bps > 0.0 {
                figures.push(format!("throughput {}", rate(z.throughput_bps)));
            }
            let _ = writeln!(
                out,
                "  {stem}{zb} {} (tier 1){}{}: {}{}",
                z.name,
                if z.region.is_empty() {
                    String::new()
                } else {
                    format!(", region {}", z.region)
                },
                if figures.is_empty() {
                    String::new()
                } else {
                    format!(", inside {}", figures.join(", "))
                },
                z.nodes.join(", "),
                if z.fresh {
                    ""
                } else {
                    " — STALE: keeps its group"
                }
            );
        }
    }
    out
}

/// `zonemesh publish`.
#[derive(Debug, Clone, Args)]
pub struct Publish {
    /// Print the objects the publisher would write for the aggregator's current tiers
    /// (--output yaml, json or table); needs no cluster.
    #[arg(long, conflicts_with = "delete")]
    pub dry_run: bool,
    /// Delete every object zonemesh owns, its node labels and its taint from the cluster of the
    /// current kubeconfig (or the in-cluster service account).
    #[arg(long)]
    pub delete: bool,
    /// The schedulers (comma-separated): volcano, kueue, diktyo, and health (the node label
    /// zonemesh.io/network-health from the open faults; with --delete, its taint too).
    #[arg(long = "for", default_value = "volcano,kueue,diktyo,health")]
    pub schedulers: String,
    /// As the aggregator's --publish-name.
    #[arg(long, default_value = "zonemesh")]
    pub name: String,
    /// As the aggregator's --publish-namespace.
    #[arg(long, default_value = "zonemesh")]
    pub namespace: String,
    /// As the aggregator's --publish-weights-name.
    #[arg(long, default_value = "zonemesh")]
    pub weights_name: String,
    /// As the aggregator's --publish-kueue-version.
    #[arg(long, value_enum, default_value = "v1beta2")]
    pub kueue_version: Version,
    /// As the aggregator's --publish-tier-names.
    #[arg(
        long,
        default_value = "zonemesh-zone,zonemesh-zone-group,zonemesh-cluster"
    )]
    pub tier_names: String,
    /// As the aggregator's --publish-diktyo-configmap.
    #[arg(long)]
    pub diktyo_configmap: bool,
    /// `--slurm` and its flags: Slurm's topology file instead of Kubernetes objects.
    #[command(flatten)]
    pub slurm: crate::slurm::SlurmArgs,
}

/// Kueue's API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Version {
    /// kueue.x-k8s.io/v1beta2 (Kueue 0.15 and later).
    V1beta2,
    /// kueue.x-k8s.io/v1beta1 (Kueue 0.14).
    V1beta1,
    /// kueue.x-k8s.io/v1alpha1 (Kueue before 0.14).
    V1alpha1,
}

impl Publish {
    /// The settings, checked (a usage error names the flag).
    pub fn settings(&self) -> Result<Settings, Failure> {
        let usage = |m: String| Failure {
            status: exit::USAGE,
            message: m,
        };
        let schedulers =
            Scheduler::parse_list(&self.schedulers).map_err(|e| usage(format!("--for: {e}")))?;
        if schedulers.is_empty() {
            return Err(usage(
                "--for: name at least one of volcano, kueue, diktyo, health".into(),
            ));
        }
        Settings {
            schedulers,
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            weights_name: self.weights_name.clone(),
            kueue_version: match self.kueue_version {
                Version::V1beta2 => KueueVersion::V1beta2,
                Version::V1beta1 => KueueVersion::V1beta1,
                Version::V1alpha1 => KueueVersion::V1alpha1,
            },
            tier_names: zonemesh_publish::objects::tier_names(&self.tier_names)
                .map_err(|e| usage(e.to_string().replace("--publish-", "--")))?,
            diktyo_configmap: self.diktyo_configmap,
            taint: None,
        }
        .checked()
        .map_err(|e| usage(e.to_string().replace("--publish-", "--")))
    }
}

/// The objects of a dry run: every manifest, then one server-side apply patch per node (with
/// `health`, its label from `faults`).
pub fn dry_run_objects(
    tiers: &zonemesh_domain::Tiers,
    faults: &zonemesh_domain::Faults,
    settings: &Settings,
) -> Vec<Value> {
    let mut d = zonemesh_publish::desired(tiers, settings);
    zonemesh_publish::objects::apply_health(&mut d, tiers, faults, settings, None);
    let mut out: Vec<Value> = d.objects.iter().map(|o| o.manifest.clone()).collect();
    for (node, labels) in &d.node_labels {
        out.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}}));
    }
    out
}

/// A dry run's table: one line per object.
pub fn dry_run_table(objects: &[Value]) -> String {
    let mut out = String::new();
    for o in objects {
        let what = match o["kind"].as_str() {
            Some("HyperNode") => format!(
                "tier {} {}, {} members",
                o["spec"]["tier"],
                o["spec"]["tierName"].as_str().unwrap_or_default(),
                o["spec"]["members"].as_array().map_or(0, Vec::len)
            ),
            Some("Node") => o["metadata"]["labels"]
                .as_object()
                .map(|l| {
                    l.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
            _ => String::new(),
        };
        let ns = o["metadata"]["namespace"]
            .as_str()
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<16} {ns}{}  {what}",
            o["kind"].as_str().unwrap_or_default(),
            o["metadata"]["name"].as_str().unwrap_or_default()
        );
    }
    out
}

/// `zonemesh publish --delete`.
pub async fn delete(settings: Settings) -> Result<String, Failure> {
    let client = kube::Client::try_default().await.map_err(|e| Failure {
        status: exit::UNAVAILABLE,
        message: format!(
            "publish --delete needs a cluster (kubeconfig or in-cluster service account): {e}"
        ),
    })?;
    let kinds: Vec<Kind> = settings
        .schedulers
        .iter()
        .flat_map(|s| Kind::of(*s).iter().copied())
        .collect();
    let health = settings.schedulers.contains(&Scheduler::Health);
    let nodes = health || settings.schedulers.contains(&Scheduler::Kueue);
    let metrics = std::sync::Arc::new(zonemesh_publish::PublishMetrics::default());
    let mut writer = zonemesh_publish::Writer::new(client, settings, metrics);
    let now = zonemesh_domain::UnixMs(zonemesh_common::time::unix_ms());
    let round = writer
        .delete_all(&kinds, nodes, health, now)
        .await
        .map_err(|e| Failure {
            status: match e.code() {
                Some(401 | 403) => exit::NO_PERMISSION,
                Some(_) => exit::FAILURE,
                None => exit::UNAVAILABLE,
            },
            message: format!("publish --delete: {e}"),
        })?;
    Ok(format!(
        "  deleted {} objects ({}); removed zonemesh.io/ labels from {} nodes and the taint {} from {}\n",
        round.deleted.len(),
        round.deleted.join(", "),
        round.labelled.len(),
        zonemesh_publish::health::FAULT_TAINT,
        round.untainted.len()
    ))
}
