//! The writer: puts [`Desired`] into a cluster through kube-rs, touching only what zonemesh owns.
//!
//! One round, per kind in a fixed order (HyperNode, Topology, NetworkTopology, ConfigMap):
//!
//! 1. LIST the kind with `labelSelector=app.kubernetes.io/managed-by=zonemesh`: that is what
//!    zonemesh owns. Server-side apply is not used for whole objects, because an apply to a
//!    same-named object of someone else's merges into it and adopts it.
//! 2. A desired object zonemesh does not own is CREATEd. 409 AlreadyExists means a foreign object
//!    of that name: it is logged, counted and reported as a Kubernetes Event, and left alone.
//! 3. An owned object whose labels, annotations or spec (data) differ is REPLACEd with the listed
//!    `resourceVersion`; 409 Conflict (changed underneath) is counted and retried next round.
//!    An owned NetworkTopology without zonemesh's `weights` entry was rewritten by Diktyo's
//!    controller: that is logged, counted and reported, and the object is written again.
//! 4. An owned object no longer desired is DELETEd with its `uid` as precondition, so that a
//!    same-named successor is never deleted.
//! 5. Nodes (Kueue, health): LIST nodes (metadata only, unless taints are managed); a node whose
//!    `zonemesh.io/` labels differ gets a server-side apply of exactly those labels (field
//!    manager `zonemesh`), which removes the ones zonemesh set before and no longer wants and
//!    never touches other labels. Only listed nodes are patched (an apply would create a missing
//!    one).
//! 6. Taints (`--taint-faulty-nodes`), in the same pass and before the node's labels: a node
//!    whose taint `zonemesh.io/network-fault` is not what [`Desired::taints`] says gets its whole
//!    `spec.taints` written back by a merge patch that carries the listed `resourceVersion`
//!    (read-modify-write: a node changed since the list answers 409 Conflict, retried next
//!    round), with zonemesh's taint added, changed or removed and every other taint as it was.
//!    Each taint and untaint is an Event on the Node.
//!
//! Nothing unchanged is written. HyperNodes labelled `volcano.sh/network-topology-source` are
//! never touched; tier-1 ones that split or mix a zonemesh zone's nodes are warned about. Any
//! other API error (403 included) ends the round with [`PublishError`]; the caller backs off.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use serde_json::{Value, json};
use zonemesh_domain::UnixMs;

use crate::health::{FAULT_TAINT, Taint, TaintEffect};
use crate::metrics::{PublishMetrics, Verb};
use crate::objects::{
    Desired, Kind, MANAGED_BY, NODE_LABEL_PREFIX, Object, Settings, VOLCANO_SOURCE_LABEL,
    ZONE_LABEL,
};

/// The field manager of zonemesh's node label applies.
pub const FIELD_MANAGER: &str = "zonemesh";
/// `reportingController` of zonemesh's Events.
pub const CONTROLLER: &str = "zonemesh.io/publisher";

/// An API error that ended a round.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The API server refused (403 names missing RBAC).
    #[error("{action} {what}: the API server answered {code} {reason}: {message}")]
    Api {
        /// What was being done (`list`, `create`, ...).
        action: &'static str,
        /// The object or kind.
        what: String,
        /// HTTP status from the body.
        code: u16,
        /// Reason (`Forbidden`, ...).
        reason: String,
        /// Message.
        message: String,
    },
    /// No answer (connection, TLS, timeout).
    #[error("{action} {what}: {source}")]
    Client {
        /// What was being done.
        action: &'static str,
        /// The object or kind.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

impl PublishError {
    fn new(action: &'static str, what: impl Into<String>, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => PublishError::Api {
                action,
                what: what.into(),
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
            },
            other => PublishError::Client {
                action,
                what: what.into(),
                source: other,
            },
        }
    }

    /// The HTTP status, for an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            PublishError::Api { code, .. } => Some(*code),
            PublishError::Client { .. } => None,
        }
    }
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// What a round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Round {
    /// Objects created.
    pub created: Vec<String>,
    /// Objects replaced.
    pub updated: Vec<String>,
    /// Objects deleted.
    pub deleted: Vec<String>,
    /// Nodes whose labels were applied.
    pub labelled: Vec<String>,
    /// Nodes that got zonemesh's taint (or a new value or effect of it).
    pub tainted: Vec<String>,
    /// Nodes whose zonemesh taint was removed.
    pub untainted: Vec<String>,
    /// Nodes that carry zonemesh's taint after the round (when taints are managed).
    pub carrying: Vec<String>,
    /// Names held by objects zonemesh does not own.
    pub foreign: Vec<String>,
    /// Writes refused with 409 Conflict.
    pub conflicts: Vec<String>,
}

/// The resource of a kind at an API version.
pub fn resource(kind: Kind, api_version: &str) -> ApiResource {
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    ApiResource {
        group: kind.group().to_owned(),
        version: version.to_owned(),
        api_version: api_version.to_owned(),
        kind: kind.kind().to_owned(),
        plural: kind.plural().to_owned(),
    }
}

fn nodes_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Node".into(),
        plural: "nodes".into(),
    }
}

/// The API version zonemesh uses for a kind.
pub fn api_version(kind: Kind, settings: &Settings) -> String {
    match kind {
        Kind::HyperNode => "topology.volcano.sh/v1alpha1".into(),
        Kind::KueueTopology => format!("kueue.x-k8s.io/{}", settings.kueue_version.as_str()),
        Kind::NetworkTopology => "networktopology.diktyo.x-k8s.io/v1alpha1".into(),
        Kind::ConfigMap => "v1".into(),
    }
}

fn owned_selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}

fn is_owned(o: &DynamicObject) -> bool {
    o.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.get(MANAGED_BY.0).map(String::as_str) == Some(MANAGED_BY.1))
}

fn volcano_sourced(o: &DynamicObject) -> bool {
    o.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(VOLCANO_SOURCE_LABEL))
}

/// Whether `current` already is what `desired` says: every desired label and annotation with its
/// value, and the same `spec` (or `data`).
fn up_to_date(current: &DynamicObject, desired: &Object) -> bool {
    let meta = &desired.manifest["metadata"];
    let has_all = |want: &Value, have: &Option<BTreeMap<String, String>>| {
        want.as_object().is_none_or(|want| {
            want.iter().all(|(k, v)| {
                have.as_ref()
                    .and_then(|h| h.get(k))
                    .is_some_and(|h| Some(h.as_str()) == v.as_str())
            })
        })
    };
    let body = if desired.kind == Kind::ConfigMap {
        "data"
    } else {
        "spec"
    };
    has_all(&meta["labels"], &current.metadata.labels)
        && has_all(&meta["annotations"], &current.metadata.annotations)
        && current.data.get(body) == desired.manifest.get(body)
}

fn dynamic(desired: &Object, ar: &ApiResource) -> Result<DynamicObject, PublishError> {
    let mut o: DynamicObject =
        serde_json::from_value(desired.manifest.clone()).map_err(|e| PublishError::Client {
            action: "encode",
            what: desired.name.clone(),
            source: kube::Error::SerdeError(e),
        })?;
    o.types = Some(kube::api::TypeMeta {
        api_version: ar.api_version.clone(),
        kind: ar.kind.clone(),
    });
    Ok(o)
}

/// The writer. Keeps what it has reported as Events, so that a lasting condition is reported
/// once, not every round.
pub struct Writer {
    client: Client,
    settings: Settings,
    metrics: Arc<PublishMetrics>,
    reported: HashSet<String>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("settings", &self.settings)
            .field("reported", &self.reported)
            .finish_non_exhaustive()
    }
}

impl Writer {
    /// A writer over `client` (in the aggregator: the in-cluster service account).
    pub fn new(client: Client, settings: Settings, metrics: Arc<PublishMetrics>) -> Self {
        Self {
            client,
            settings,
            metrics,
            reported: HashSet::new(),
        }
    }

    fn api(&self, kind: Kind) -> Api<DynamicObject> {
        let ar = resource(kind, &api_version(kind, &self.settings));
        if kind.namespaced() {
            Api::namespaced_with(self.client.clone(), &self.settings.namespace, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        }
    }

    /// What zonemesh owns of `kind`, by name.
    async fn owned(&self, kind: Kind) -> Result<BTreeMap<String, DynamicObject>, PublishError> {
        let list = self
            .api(kind)
            .list(&ListParams::default().labels(&owned_selector()))
            .await
            .map_err(|e| PublishError::new("list", kind.plural(), e))?;
        Ok(list
            .items
            .into_iter()
            // The server filtered by label; this guards against a server that did not.
            .filter(|o| is_owned(o) && !volcano_sourced(o))
            .filter_map(|o| Some((o.metadata.name.clone()?, o)))
            .collect())
    }

    /// One round: makes the cluster hold `desired` (see the module documentation).
    pub async fn publish(&mut self, desired: &Desired, now: UnixMs) -> Result<Round, PublishError> {
        let mut round = Round::default();
        for &kind in &desired.kinds {
            let mut owned = self.owned(kind).await?;
            let api = self.api(kind);
            let ar = resource(kind, &api_version(kind, &self.settings));
            for object in desired.objects.iter().filter(|o| o.kind == kind) {
                match owned.remove(&object.name) {
                    Some(current) => {
                        if kind == Kind::NetworkTopology {
                            self.check_weights(&current, now).await;
                        }
                        if up_to_date(&current, object) {
                            continue;
                        }
                        let mut body = dynamic(object, &ar)?;
                        body.metadata.resource_version = current.metadata.resource_version.clone();
                        match api
                            .replace(&object.name, &PostParams::default(), &body)
                            .await
                        {
                            Ok(_) => {
                                self.metrics.wrote(Verb::Update);
                                tracing::info!(kind = kind.kind(), name = %object.name, "updated");
                                round.updated.push(object.name.clone());
                            }
                            Err(e) if code(&e) == Some(409) => {
                                self.metrics.conflicts.inc();
                                tracing::info!(kind = kind.kind(), name = %object.name, "changed underneath; written again next round");
                                round.conflicts.push(object.name.clone());
                            }
                            Err(e) => return Err(PublishError::new("update", &object.name, e)),
                        }
                    }
                    None => {
                        let body = dynamic(object, &ar)?;
                        match api.create(&PostParams::default(), &body).await {
                            Ok(_) => {
                                self.metrics.wrote(Verb::Create);
                                tracing::info!(kind = kind.kind(), name = %object.name, "created");
                                round.created.push(object.name.clone());
                            }
                            Err(e) if code(&e) == Some(409) => {
                                self.foreign(kind, object, now).await;
                                round.foreign.push(object.name.clone());
                            }
                            Err(e) => return Err(PublishError::new("create", &object.name, e)),
                        }
                    }
                }
            }
            for (name, stale) in owned {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: stale.metadata.uid.clone(),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(&name, &dp).await {
                    Ok(_) => {
                        self.metrics.wrote(Verb::Delete);
                        tracing::info!(kind = kind.kind(), %name, "deleted: no longer derived");
                        round.deleted.push(name);
                    }
                    Err(e) if matches!(code(&e), Some(404) | Some(409)) => {}
                    Err(e) => return Err(PublishError::new("delete", &name, e)),
                }
            }
            if kind == Kind::HyperNode {
                self.check_volcano_discovery(desired, now).await?;
            }
        }
        if desired.labels_nodes || desired.taints.is_some() {
            self.nodes(desired, now, &mut round).await?;
        }
        self.metrics.rounds.inc();
        Ok(round)
    }

    /// The nodes that carry zonemesh's taint now, as the API server lists them (what a round
    /// that may change taints starts from when no round of this writer has looked: after a
    /// restart, or once a replica takes the lease over).
    pub async fn carrying(&self) -> Result<BTreeSet<String>, PublishError> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &nodes_resource());
        let nodes = api
            .list(&ListParams::default())
            .await
            .map_err(|e| PublishError::new("list", "nodes", e))?;
        Ok(nodes
            .items
            .into_iter()
            .filter(|n| {
                n.data["spec"]["taints"]
                    .as_array()
                    .is_some_and(|taints| taints.iter().any(|t| t["key"] == FAULT_TAINT))
            })
            .filter_map(|n| n.metadata.name)
            .collect())
    }

    /// Deletes everything zonemesh owns of `kinds`; with `nodes`, removes its node labels, and
    /// with `taints` its taint.
    pub async fn delete_all(
        &mut self,
        kinds: &[Kind],
        nodes: bool,
        taints: bool,
        now: UnixMs,
    ) -> Result<Round, PublishError> {
        let desired = Desired {
            kinds: kinds.to_vec(),
            labels_nodes: nodes,
            taints: taints.then(BTreeMap::new),
            ..Desired::default()
        };
        self.publish(&desired, now).await
    }

    /// Steps 5 and 6: every node's taint, then its labels.
    async fn nodes(
        &mut self,
        desired: &Desired,
        now: UnixMs,
        round: &mut Round,
    ) -> Result<(), PublishError> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &nodes_resource());
        let list = |e| PublishError::new("list", "nodes", e);
        // Taints are in the spec: the whole nodes then; labels alone need their metadata only.
        let nodes: Vec<(ObjectMeta, Option<Vec<Value>>)> = if desired.taints.is_some() {
            api.list(&ListParams::default())
                .await
                .map_err(list)?
                .items
                .into_iter()
                .map(|n| {
                    let taints = n.data["spec"]["taints"].as_array().cloned();
                    (n.metadata, Some(taints.unwrap_or_default()))
                })
                .collect()
        } else {
            api.list_metadata(&ListParams::default())
                .await
                .map_err(list)?
                .items
                .into_iter()
                .map(|n| (n.metadata, None))
                .collect()
        };
        for (meta, taints) in nodes {
            let Some(name) = meta.name.clone() else {
                continue;
            };
            if let (Some(want), Some(taints)) = (&desired.taints, taints) {
                let taint = want.get(&name);
                self.taint_node(
                    &api,
                    &meta,
                    &taints,
                    taint,
                    desired.taint_effect,
                    now,
                    round,
                )
                .await?;
            }
            if desired.labels_nodes {
                let labels = meta.labels.unwrap_or_default();
                self.label_node(&api, name, labels, &desired.node_labels, round)
                    .await?;
            }
        }
        Ok(())
    }

    /// Makes zonemesh's taint on one node `want` (none: removed), every other taint as it was.
    #[allow(clippy::too_many_arguments)]
    async fn taint_node(
        &mut self,
        api: &Api<DynamicObject>,
        meta: &ObjectMeta,
        taints: &[Value],
        want: Option<&Taint>,
        effect: TaintEffect,
        now: UnixMs,
        round: &mut Round,
    ) -> Result<(), PublishError> {
        let name = meta.name.clone().unwrap_or_default();
        let ours = taints.iter().find(|t| t["key"] == FAULT_TAINT);
        let wanted =
            want.map(|t| json!({"key": FAULT_TAINT, "value": t.value, "effect": effect.as_str()}));
        let same = match (ours, &wanted) {
            (None, None) => true,
            (Some(o), Some(w)) => o["value"] == w["value"] && o["effect"] == w["effect"],
            _ => false,
        };
        if same {
            if ours.is_some() {
                round.carrying.push(name);
            }
            return Ok(());
        }
        let mut new: Vec<Value> = taints
            .iter()
            .filter(|t| t["key"] != FAULT_TAINT)
            .cloned()
            .collect();
        new.extend(wanted.clone());
        // The listed resourceVersion makes the write conditional: a node changed since (another
        // controller's taint) answers 409, and its taints are read again next round.
        let patch = json!({
            "metadata": {"resourceVersion": meta.resource_version},
            "spec": {"taints": new},
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if code(&e) == Some(409) => {
                self.metrics.conflicts.inc();
                tracing::info!(node = %name, "changed underneath; its taint is written next round");
                if ours.is_some() {
                    round.carrying.push(name.clone());
                }
                round.conflicts.push(name);
                return Ok(());
            }
            Err(e) if code(&e) == Some(404) => return Ok(()),
            Err(e) => return Err(PublishError::new("taint", &name, e)),
        }
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(name.clone()),
            uid: meta.uid.clone(),
            ..ObjectReference::default()
        };
        let (type_, action, reason, note) = match want {
            Some(t) => {
                self.metrics.wrote(Verb::Taint);
                tracing::warn!(node = %name, value = t.value, effect = effect.as_str(), kinds = ?t.kinds, "tainted: a network fault of the node's own");
                round.tainted.push(name.clone());
                round.carrying.push(name.clone());
                let note = format!(
                    "zonemesh tainted the node {FAULT_TAINT}={}:{}: its own network fault ({}); `zonemesh faults` names the evidence",
                    t.value,
                    effect.as_str(),
                    t.kinds.join(", ")
                );
                ("Warning", "Taint", "NetworkFault", note)
            }
            None => {
                self.metrics.wrote(Verb::Untaint);
                tracing::info!(node = %name, "untainted: no fault of the node's own to act on");
                round.untainted.push(name.clone());
                let note = format!(
                    "zonemesh removed its taint {FAULT_TAINT}: no open fault of the node's own to act on, or told to remove its taints"
                );
                ("Normal", "Untaint", "NetworkFaultCleared", note)
            }
        };
        self.event(regarding, "default", type_, action, reason, &note, now)
            .await;
        Ok(())
    }

    /// Applies the `zonemesh.io/` labels `wanted` gives one node (`labels`: all it has now).
    async fn label_node(
        &mut self,
        api: &Api<DynamicObject>,
        name: String,
        labels: BTreeMap<String, String>,
        wanted: &BTreeMap<String, BTreeMap<String, String>>,
        round: &mut Round,
    ) -> Result<(), PublishError> {
        let empty = BTreeMap::new();
        let have: BTreeMap<String, String> = labels
            .into_iter()
            .filter(|(k, _)| k.starts_with(NODE_LABEL_PREFIX))
            .collect();
        let want = wanted.get(&name).unwrap_or(&empty);
        if &have == want {
            return Ok(());
        }
        let patch = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": want},
        });
        let pp = PatchParams::apply(FIELD_MANAGER);
        match api.patch(&name, &pp, &Patch::Apply(&patch)).await {
            Ok(_) => {
                self.metrics.wrote(Verb::Label);
                round.labelled.push(name);
            }
            Err(e) if code(&e) == Some(409) => {
                // Another field manager owns one of these labels with another value.
                self.metrics.conflicts.inc();
                tracing::warn!(node = %name, error = %e, "a zonemesh.io/ label of this node is another manager's; left as it is");
                round.conflicts.push(name);
            }
            Err(e) if code(&e) == Some(404) => {}
            Err(e) => return Err(PublishError::new("label", &name, e)),
        }
        Ok(())
    }

    /// A name taken by an object zonemesh does not own: logged, counted and reported once
    /// while it lasts (every round meets it again).
    async fn foreign(&mut self, kind: Kind, object: &Object, now: UnixMs) {
        if !self
            .reported
            .insert(format!("ForeignObject/{}/{}", kind.kind(), object.name))
        {
            tracing::debug!(kind = kind.kind(), name = %object.name, "still not zonemesh's");
            return;
        }
        self.metrics.foreign_objects.inc();
        let current = self.api(kind).get(&object.name).await.ok();
        let volcano = current.as_ref().is_some_and(volcano_sourced);
        tracing::warn!(
            kind = kind.kind(),
            name = %object.name,
            volcano_discovery = volcano,
            "an object of this name exists and is not zonemesh's (no label {}={}); left untouched",
            MANAGED_BY.0,
            MANAGED_BY.1
        );
        let note = format!(
            "{} {} exists and is not managed by zonemesh; zonemesh leaves it untouched and does not publish this object",
            kind.kind(),
            object.name
        );
        let uid = current.and_then(|c| c.metadata.uid);
        self.warn(kind, object, uid, "ForeignObject", &note, now)
            .await;
    }

    async fn check_weights(&mut self, current: &DynamicObject, now: UnixMs) {
        let ours = current.data["spec"]["weights"].as_array().is_some_and(|w| {
            w.iter()
                .any(|e| e["name"] == self.settings.weights_name.as_str())
        });
        let name = current.metadata.name.clone().unwrap_or_default();
        let key = format!("WeightsRewritten/{name}");
        if ours {
            self.reported.remove(&key);
            return;
        }
        self.metrics.weights_rewritten.inc();
        tracing::warn!(
            %name,
            weights = %self.settings.weights_name,
            "our NetworkTopology lost its weights entry (Diktyo's networktopology-controller keeps only UserDefined and NetperfCosts when the ConfigMap exists); writing it again"
        );
        let object = Object {
            kind: Kind::NetworkTopology,
            api_version: api_version(Kind::NetworkTopology, &self.settings),
            name: name.clone(),
            namespace: Some(self.settings.namespace.clone()),
            manifest: Value::Null,
        };
        let note = format!(
            "spec.weights lost the entry {:?} (another controller rewrote it); zonemesh writes it again",
            self.settings.weights_name
        );
        if self.reported.insert(key) {
            self.warn(
                Kind::NetworkTopology,
                &object,
                current.metadata.uid.clone(),
                "WeightsRewritten",
                &note,
                now,
            )
            .await;
        }
    }

    /// Warns when a tier-1 HyperNode of Volcano's label discovery holds some but not all nodes of
    /// a zonemesh zone, or nodes of several zonemesh zones.
    async fn check_volcano_discovery(
        &mut self,
        desired: &Desired,
        now: UnixMs,
    ) -> Result<(), PublishError> {
        let ours: Vec<(&Object, BTreeSet<String>)> = desired
            .objects
            .iter()
            .filter(|o| o.kind == Kind::HyperNode && o.manifest["spec"]["tier"] == 1)
            .map(|o| (o, members(&o.manifest)))
            .collect();
        if ours.is_empty() {
            return Ok(());
        }
        let discovered = self
            .api(Kind::HyperNode)
            .list(&ListParams::default().labels(VOLCANO_SOURCE_LABEL))
            .await
            .map_err(|e| PublishError::new("list", "hypernodes (Volcano discovery)", e))?;
        for hn in discovered.items {
            if hn.data["spec"]["tier"] != 1 {
                continue;
            }
            let theirs = members(&hn.data);
            let name = hn.metadata.name.clone().unwrap_or_default();
            for (object, zone_nodes) in &ours {
                let shared = theirs.intersection(zone_nodes).count();
                if shared == 0 || (theirs == *zone_nodes) {
                    continue;
                }
                let key = format!("VolcanoOverlap/{name}/{}", object.name);
                if !self.reported.insert(key) {
                    continue;
                }
                self.metrics.volcano_overlaps.inc();
                let zone = object.manifest["metadata"]["annotations"][ZONE_LABEL]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                tracing::warn!(
                    volcano_hypernode = %name,
                    zonemesh_hypernode = %object.name,
                    shared,
                    "Volcano's label discovery puts {shared} nodes of zonemesh zone {zone} in another tier-1 HyperNode, with a different set of nodes: a job's hard tier limit may mean different nodes in the two trees"
                );
                let note = format!(
                    "tier-1 HyperNode {name} (Volcano label discovery) holds {shared} nodes of zonemesh's {} with a different node set",
                    object.name
                );
                self.warn(
                    Kind::HyperNode,
                    object,
                    None,
                    "DiscoveryOverlap",
                    &note,
                    now,
                )
                .await;
            }
        }
        Ok(())
    }

    /// Reports a Warning Event about `object` (events.k8s.io/v1; a cluster-scoped object's
    /// Events go to namespace `default`). A failure is logged, never fatal.
    async fn warn(
        &self,
        kind: Kind,
        object: &Object,
        uid: Option<String>,
        reason: &str,
        note: &str,
        now: UnixMs,
    ) {
        let regarding = ObjectReference {
            api_version: Some(object.api_version.clone()),
            kind: Some(kind.kind().into()),
            name: Some(object.name.clone()),
            namespace: object.namespace.clone(),
            uid,
            ..ObjectReference::default()
        };
        let namespace = object.namespace.as_deref().unwrap_or("default");
        self.event(
            regarding, namespace, "Warning", "Publish", reason, note, now,
        )
        .await;
    }

    /// Reports an Event of `type_` about `regarding` in `namespace`. A failure is logged, never
    /// fatal.
    #[allow(clippy::too_many_arguments)]
    async fn event(
        &self,
        regarding: ObjectReference,
        namespace: &str,
        type_: &str,
        action: &str,
        reason: &str,
        note: &str,
        now: UnixMs,
    ) {
        let time = k8s_openapi::jiff::Timestamp::from_millisecond(now.0).unwrap_or_default();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or("zonemesh"),
                    now.0.max(0)
                )),
                namespace: Some(namespace.to_owned()),
                labels: Some(BTreeMap::from([(MANAGED_BY.0.into(), MANAGED_BY.1.into())])),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(time)),
            action: Some(action.into()),
            reason: Some(reason.into()),
            note: Some(note.chars().take(1000).collect()),
            type_: Some(type_.into()),
            reporting_controller: Some(CONTROLLER.into()),
            reporting_instance: Some(
                std::env::var("POD_NAME").unwrap_or_else(|_| "zonemesh".into()),
            ),
            regarding: Some(regarding),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(error = %e, reason, "could not report an Event");
        }
    }
}

fn members(manifest: &Value) -> BTreeSet<String> {
    manifest["spec"]["members"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["type"] == "Node")
                .filter_map(|m| m["selector"]["exactMatch"]["name"].as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
