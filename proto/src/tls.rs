//! TLS shared by the aggregator, the agent and the CLI: loading PEM files, the identities that
//! certificates carry, and a gRPC channel over rustls whose files are read at every connect, so
//! that a certificate Kubernetes rotates in place is used from the next connection on.
//!
//! # Identities
//!
//! A zonemesh certificate names its holder with one URI subject alternative name:
//!
//! | URI                                 | holder                                    |
//! |-------------------------------------|-------------------------------------------|
//! | `spiffe://<domain>/node/<node>`     | the agent of node `<node>`: Ingest for that node only |
//! | `spiffe://<domain>/scheduler/<name>`| a scheduler: Topology queries and the extender |
//! | `spiffe://<domain>/reader/<name>`   | a dashboard: Topology queries only        |
//!
//! The trust domain is not checked: the client CA the aggregator is given is the trust anchor.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tonic::transport::{Channel, Endpoint, Uri};

/// What a certificate or a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// An agent: reports for its own node.
    Node,
    /// A scheduler: every query, and the extender (which remembers jobs).
    Scheduler,
    /// A dashboard: queries only.
    Reader,
}

impl Role {
    /// The path segment of the role in an identity URI.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Node => "node",
            Role::Scheduler => "scheduler",
            Role::Reader => "reader",
        }
    }

    /// The role named `s` (`node`, `scheduler`, `reader`).
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "node" => Some(Role::Node),
            "scheduler" => Some(Role::Scheduler),
            "reader" => Some(Role::Reader),
            _ => None,
        }
    }
}

/// Who a peer proved to be.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// What it may do.
    pub role: Role,
    /// The node's name for [`Role::Node`], else the client's name.
    pub name: String,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.role.as_str(), self.name)
    }
}

/// The URI subject alternative name of `role` and `name` in trust domain `zonemesh`.
pub fn identity_uri(role: Role, name: &str) -> String {
    format!("spiffe://zonemesh/{}/{name}", role.as_str())
}

/// The identity a URI names, if it is a zonemesh identity URI.
pub fn parse_identity_uri(uri: &str) -> Option<Identity> {
    let rest = uri.strip_prefix("spiffe://")?;
    let (_domain, path) = rest.split_once('/')?;
    let (role, name) = path.split_once('/')?;
    let role = Role::parse(role)?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some(Identity {
        role,
        name: name.to_owned(),
    })
}

/// The identity a DER certificate carries: the first URI SAN that is a zonemesh identity.
/// `Ok(None)` when the certificate has none.
pub fn identity_of(der: &[u8]) -> Result<Option<Identity>, String> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("cannot parse the certificate: {e}"))?;
    let Some(san) = cert
        .subject_alternative_name()
        .map_err(|e| format!("bad subjectAltName: {e}"))?
    else {
        return Ok(None);
    };
    Ok(san.value.general_names.iter().find_map(|name| match name {
        GeneralName::URI(uri) => parse_identity_uri(uri),
        _ => None,
    }))
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{what} {}: {e}", path.display()))
}

/// Every certificate in a PEM file; an error names the file when there is none.
pub fn load_certs(what: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{what} {}: no PEM certificate in the file",
            path.display()
        ));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(what: &str, path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(what, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| format!("{what} {}: {e}", path.display()))
}

/// A root store of every certificate in a PEM file.
pub fn load_roots(what: &str, path: &Path) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in load_certs(what, path)? {
        roots
            .add(cert)
            .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    }
    Ok(roots)
}

/// The ring provider, the only one zonemesh builds with.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// How a client reaches a TLS aggregator. Files are read at every connect.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    /// CA that signed the aggregator's certificate (PEM). `None`: TLS is off.
    pub ca: Option<PathBuf>,
    /// The client's certificate chain (PEM), presented when set.
    pub cert: Option<PathBuf>,
    /// The client's private key (PEM).
    pub key: Option<PathBuf>,
    /// Name expected in the aggregator's certificate; default: the URL's host.
    pub server_name: Option<String>,
}

impl ClientTls {
    /// Checks that the settings go together; the message names the flag (`--{prefix}…`).
    pub fn check(&self, prefix: &str) -> Result<(), String> {
        match (&self.cert, &self.key) {
            (Some(_), None) => return Err(format!("--{prefix}key: required with --{prefix}cert")),
            (None, Some(_)) => return Err(format!("--{prefix}cert: required with --{prefix}key")),
            _ => {}
        }
        if self.ca.is_none() && self.cert.is_some() {
            return Err(format!(
                "--{prefix}ca: required with --{prefix}cert (the CA of the aggregator's certificate)"
            ));
        }
        Ok(())
    }

    /// Whether TLS is on.
    pub fn enabled(&self) -> bool {
        self.ca.is_some()
    }

    /// A rustls client configuration from the files as they are now.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, String> {
        let ca = self.ca.as_deref().ok_or("TLS is off: no CA file")?;
        let roots = load_roots("CA", ca)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let mut config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(load_certs("certificate", cert)?, load_key("key", key)?)
                .map_err(|e| format!("certificate {}: {e}", cert.display()))?,
            _ => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

/// The client TLS flags of the agent and the CLI.
#[cfg(feature = "cli")]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// CA of the aggregator's certificate (PEM); turns TLS on (use an https:// URL).
    #[arg(global = true, long, env = "ZONEMESH_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate chain (PEM), presented to the aggregator.
    #[arg(global = true, long, env = "ZONEMESH_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// Client private key (PEM).
    #[arg(global = true, long, env = "ZONEMESH_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Name expected in the aggregator's certificate (default: the URL's host).
    #[arg(global = true, long, env = "ZONEMESH_TLS_SERVER_NAME")]
    pub tls_server_name: Option<String>,
}

#[cfg(feature = "cli")]
impl TlsArgs {
    /// The checked settings; errors name the flag. The files are read at every connect.
    pub fn client_tls(&self, url: &str) -> Result<ClientTls, String> {
        let tls = ClientTls {
            ca: self.tls_ca.clone(),
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            server_name: self.tls_server_name.clone(),
        };
        tls.check("tls-")?;
        let https = url.starts_with("https://");
        if https != tls.enabled() {
            return Err(if https {
                format!("--tls-ca: required for {url}")
            } else {
                format!("--aggregator: {url} is http://, but --tls-ca turns TLS on (use https://)")
            });
        }
        if tls.enabled() {
            // Read them once now, so that a wrong path fails at start and names its flag.
            tls.client_config()?;
        }
        Ok(tls)
    }
}

/// A gRPC channel to `url` (`http://` or `https://host:port`), over TLS when `tls` is enabled.
pub async fn connect(
    url: &str,
    tls: &ClientTls,
    connect_timeout: Duration,
) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| format!("{url}: {e}"))?
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(10));
    let https = endpoint.uri().scheme_str() == Some("https");
    if !tls.enabled() {
        if https {
            return Err(format!("{url}: https:// needs a CA file (--tls-ca)"));
        }
        return endpoint
            .connect()
            .await
            .map_err(|e| format!("connect to {url}: {}", error_chain(&e)));
    }
    let host = endpoint
        .uri()
        .host()
        .ok_or_else(|| format!("{url}: no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let name = tls.server_name.clone().unwrap_or_else(|| host.clone());
    let server_name =
        ServerName::try_from(name.clone()).map_err(|e| format!("server name {name:?}: {e}"))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls.client_config()?));
    let service = tower::service_fn(move |uri: Uri| {
        let connector = connector.clone();
        let server_name = server_name.clone();
        async move {
            let host = uri.host().unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port = uri.port_u16().unwrap_or(443);
            let tcp = tokio::net::TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            let stream = connector.connect(server_name, tcp).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    endpoint
        .connect_with_connector(service)
        .await
        .map_err(|e| format!("connect to {url}: {}", error_chain(&e)))
}

/// An error and its sources on one line (tonic's own message is often just "transport error").
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let line = s.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_uris_round_trip() {
        for role in [Role::Node, Role::Scheduler, Role::Reader] {
            let uri = identity_uri(role, "a-1.example");
            assert_eq!(
                parse_identity_uri(&uri),
                Some(Identity {
                    role,
                    name: "a-1.example".into()
                })
            );
        }
        assert_eq!(
            parse_identity_uri("spiffe://cluster.local/node/b1").map(|i| i.name),
            Some("b1".into())
        );
    }

    #[test]
    fn other_uris_are_no_identity() {
        for uri in [
            "https://zonemesh/node/a1",
            "spiffe://zonemesh/admin/a1",
            "spiffe://zonemesh/node/",
            "spiffe://zonemesh/node/a/b",
            "spiffe://zonemesh",
        ] {
            assert_eq!(parse_identity_uri(uri), None, "{uri}");
        }
    }

    #[test]
    fn client_settings_name_the_missing_flag() {
        let only_cert = ClientTls {
            ca: Some("ca.pem".into()),
            cert: Some("c.pem".into()),
            ..Default::default()
        };
        assert!(
            only_cert
                .check("tls-")
                .unwrap_err()
                .starts_with("--tls-key")
        );
        let no_ca = ClientTls {
            cert: Some("c.pem".into()),
            key: Some("k.pem".into()),
            ..Default::default()
        };
        assert!(no_ca.check("tls-").unwrap_err().starts_with("--tls-ca"));
    }
}
