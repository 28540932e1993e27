//! How the agent learns its node's zone and region when it is not told.
//!
//! In order: the `--zone` flag (or `ZONEMESH_ZONE`); the pod's own label
//! `topology.kubernetes.io/zone`, which clusters with the `PodTopologyLabels` admission plugin
//! (beta and on by default since Kubernetes 1.35) copy from the node at binding, handed in by the
//! downward API as `ZONEMESH_POD_ZONE`; then the Node object itself, read from the API server with
//! the pod's service-account token (`GET /api/v1/nodes/<node>`, which the DaemonSet's ClusterRole
//! allows) through kube-rs, as the publisher talks to the API server. When all three come back
//! empty the zone stays unknown and the agent says so.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::{Api, Client};
use zonemesh_domain::ZoneName;

use crate::Error;

/// Where the zone came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--zone` or `ZONEMESH_ZONE`.
    Flag,
    /// The pod's topology label (downward API).
    PodLabel,
    /// The Node object from the API server.
    NodeObject,
    /// Nowhere: "unknown".
    Unknown,
}

impl Source {
    /// For the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Flag => "flag",
            Self::PodLabel => "pod label",
            Self::NodeObject => "node object",
            Self::Unknown => "unknown",
        }
    }
}

/// How to reach the API server.
#[derive(Debug, Clone)]
pub struct KubeApi {
    /// `https://host:port` (or `http://` for `kubectl proxy`).
    pub url: String,
    /// The bearer token, if any.
    pub token: Option<String>,
    /// PEM of the CA that signed the API server's certificate (required for https).
    pub ca_pem: Option<Vec<u8>>,
}

/// Labels that name the zone and region.
#[derive(Debug, Clone)]
pub struct Labels {
    /// Zone label key (default `topology.kubernetes.io/zone`).
    pub zone: String,
    /// Region label key (default `topology.kubernetes.io/region`).
    pub region: String,
}

/// How long the read of the Node object may take, connection included.
const TIMEOUT: Duration = Duration::from_secs(5);

/// `metadata.labels` of node `node`, read from the API server.
pub async fn node_labels(api: &KubeApi, node: &str) -> Result<BTreeMap<String, String>, Error> {
    let nodes: Api<Node> = Api::all(client(api)?);
    let url = format!("{}/api/v1/nodes/{node}", api.url.trim_end_matches('/'));
    let found = tokio::time::timeout(TIMEOUT, nodes.get(node))
        .await
        .map_err(|_| Error::KubeTimeout {
            url: api.url.clone(),
            after: TIMEOUT,
        })?
        .map_err(|e| refused(&url, node, e))?;
    Ok(found.metadata.labels.unwrap_or_default())
}

/// A client of the API server `api` that asks once: an error comes back as it came, not retried
/// behind the timeout.
fn client(api: &KubeApi) -> Result<Client, Error> {
    let address = |reason: String| Error::KubeAddress {
        url: api.url.clone(),
        reason,
    };
    let uri: http::Uri = api
        .url
        .parse()
        .map_err(|e| address(format!("not a URL: {e}")))?;
    if uri.host().is_none() {
        return Err(address("no host".into()));
    }
    let https = uri.scheme_str() == Some("https");
    let mut config = kube::Config::new(uri);
    if https {
        let ca = api.ca_pem.as_deref().ok_or_else(|| Error::KubeCa {
            url: api.url.clone(),
            reason: "https needs the cluster's CA certificate".into(),
        })?;
        config.root_cert = Some(certificates(&api.url, ca)?);
    }
    config.auth_info.token = api.token.clone().map(Into::into);
    config.default_retry = false;
    Client::try_from(config).map_err(|e| Error::KubeClient {
        url: api.url.clone(),
        reason: zonemesh_tls::error_chain(&e),
    })
}

/// The certificates (DER) of the cluster's CA file (PEM).
fn certificates(url: &str, ca_pem: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let bad = |reason: String| Error::KubeCa {
        url: url.to_owned(),
        reason,
    };
    let certificates = CertificateDer::pem_slice_iter(ca_pem)
        .map(|c| {
            c.map(|c| c.to_vec())
                .map_err(|e| bad(format!("CA certificate: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if certificates.is_empty() {
        return Err(bad("CA file holds no certificate".into()));
    }
    Ok(certificates)
}

/// The agent's error for kube's answer to the GET of `url` (node `node`).
fn refused(url: &str, node: &str, e: kube::Error) -> Error {
    match e {
        kube::Error::Api(status) => Error::KubeStatus {
            url: url.to_owned(),
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.chars().take(200).collect(),
        },
        kube::Error::SerdeError(e) => Error::KubeAnswer {
            node: node.to_owned(),
            reason: format!("the answer is not a Node object: {e}"),
        },
        other => Error::KubeRequest {
            url: url.to_owned(),
            reason: zonemesh_tls::error_chain(&other),
        },
    }
}

/// The zone and region of this node and where the zone came from. `flag` and `pod_label` are
/// what the configuration holds; `api` is consulted only when both are empty.
pub async fn zone(
    node: &str,
    flag: (Option<ZoneName>, Option<ZoneName>),
    pod_label: (Option<ZoneName>, Option<ZoneName>),
    api: Option<&KubeApi>,
    labels: &Labels,
) -> (Option<ZoneName>, Option<ZoneName>, Source) {
    let region = flag.1.clone().or(pod_label.1.clone());
    if let Some(z) = flag.0 {
        return (Some(z), region, Source::Flag);
    }
    if let Some(z) = pod_label.0 {
        return (Some(z), region, Source::PodLabel);
    }
    let Some(api) = api else {
        return (None, region, Source::Unknown);
    };
    match node_labels(api, node).await {
        Ok(found) => {
            let read = |key: &str| {
                found
                    .get(key)
                    .and_then(|v| ZoneName::parse_optional(key, v.clone()).ok().flatten())
            };
            let zone = read(&labels.zone);
            let region = region.or_else(|| read(&labels.region));
            if zone.is_none() {
                tracing::warn!(node, label = %labels.zone, "the node object has no zone label");
            }
            let source = if zone.is_some() {
                Source::NodeObject
            } else {
                Source::Unknown
            };
            (zone, region, source)
        }
        Err(e) => {
            tracing::warn!(node, error = %e, "cannot read this node's labels from the API server");
            (None, region, Source::Unknown)
        }
    }
}
