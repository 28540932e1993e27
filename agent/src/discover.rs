//! How the agent learns its node's zone and region when it is not told.
//!
//! In order: the `--zone` flag (or `ZONEMESH_ZONE`); the pod's own label
//! `topology.kubernetes.io/zone`, which clusters with the `PodTopologyLabels` admission plugin
//! (beta and on by default since Kubernetes 1.35) copy from the node at binding, handed in by the
//! downward API as `ZONEMESH_POD_ZONE`; then the Node object itself, read from the API server with
//! the pod's service-account token (`GET /api/v1/nodes/<node>`, which the DaemonSet's ClusterRole
//! allows). When all three come back empty the zone stays unknown and the agent says so.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
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

/// How long one GET may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// `metadata.labels` of node `node`, read from the API server.
pub async fn node_labels(api: &KubeApi, node: &str) -> Result<BTreeMap<String, String>, Error> {
    let body = tokio::time::timeout(TIMEOUT, get(api, &format!("/api/v1/nodes/{node}")))
        .await
        .map_err(|_| Error::KubeTimeout {
            url: api.url.clone(),
            after: TIMEOUT,
        })??;
    let answer = |reason: String| Error::KubeAnswer {
        node: node.to_owned(),
        reason,
    };
    let value: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| answer(format!("the answer is not JSON: {e}")))?;
    if value.get("kind").and_then(|k| k.as_str()) != Some("Node") {
        return Err(answer("the answer is not a Node object".into()));
    }
    Ok(value
        .pointer("/metadata/labels")
        .and_then(|l| l.as_object())
        .map(|l| {
            l.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default())
}

async fn get(api: &KubeApi, path: &str) -> Result<Vec<u8>, Error> {
    let url = || api.url.clone();
    let address = |reason: String| Error::KubeAddress { url: url(), reason };
    let uri: hyper::Uri = format!("{}{path}", api.url.trim_end_matches('/'))
        .parse()
        .map_err(|e| address(format!("not a URL: {e}")))?;
    let host = uri
        .host()
        .ok_or_else(|| address("no host".into()))?
        .to_owned();
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let io = |what| {
        move |source| Error::KubeIo {
            url: url(),
            what,
            source,
        }
    };
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(io(""))?;
    let mut request = hyper::Request::get(uri.path())
        .header(hyper::header::HOST, format!("{host}:{port}"))
        .header(hyper::header::ACCEPT, "application/json");
    if let Some(token) = &api.token {
        request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|source| Error::KubeRequest { url: url(), source })?;
    let http = |source| Error::KubeHttp { url: url(), source };
    let response = if https {
        let ca = api.ca_pem.as_deref().ok_or_else(|| Error::KubeCa {
            url: url(),
            reason: "https needs the cluster's CA certificate".into(),
        })?;
        let connector = tls_connector(&api.url, ca)?;
        let name = rustls_pki_types::ServerName::try_from(host.clone())
            .map_err(|e| address(format!("{host}: {e}")))?;
        let tls = connector.connect(name, tcp).await.map_err(io("TLS: "))?;
        send(TokioIo::new(tls), request).await.map_err(http)?
    } else {
        send(TokioIo::new(tcp), request).await.map_err(http)?
    };
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.map_err(http)?.to_bytes();
    if !parts.status.is_success() {
        return Err(Error::KubeStatus {
            url: format!("{}{path}", api.url),
            status: parts.status,
            body: String::from_utf8_lossy(&bytes).chars().take(200).collect(),
        });
    }
    Ok(bytes.to_vec())
}

async fn send<T>(
    io: TokioIo<T>,
    request: hyper::Request<Empty<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(connection);
    sender.send_request(request).await
}

/// A TLS connector to the API server `url` trusting the cluster's CA (PEM).
fn tls_connector(url: &str, ca_pem: &[u8]) -> Result<tokio_rustls::TlsConnector, Error> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let bad = |reason: String| Error::KubeCa {
        url: url.to_owned(),
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| bad(format!("CA certificate: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(bad("CA file holds no certificate".into()));
    }
    let config = rustls::ClientConfig::builder_with_provider(zonemesh_tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(zonemesh_tls::Error::Config)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
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
