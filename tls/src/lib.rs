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
//! The aggregator trusts one domain (`--trust-domain`, [`DEFAULT_TRUST_DOMAIN`] by default): a
//! certificate its client CA signed whose zonemesh identities are all in other domains is refused
//! at the handshake, so a CA shared with other workloads or clusters does not let theirs in.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tonic::transport::{Channel, Endpoint, Uri};

/// What went wrong with a TLS setting, a PEM file or a certificate; the message names the flag
/// or the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A trust domain that SPIFFE would not spell so.
    #[error("a trust domain cannot be empty")]
    EmptyTrustDomain,
    /// A character a trust domain cannot hold.
    #[error(
        "{domain}: {bad:?} is not allowed in a trust domain (lower-case letters, digits, '.', '-' and '_')"
    )]
    TrustDomainCharacter {
        /// The domain given.
        domain: String,
        /// The first character it cannot hold.
        bad: char,
    },
    /// A certificate that is not X.509 DER, or whose subjectAltName cannot be read.
    #[error("{what}: {reason}")]
    Certificate {
        /// What could not be read ("cannot parse the certificate", "bad subjectAltName").
        what: &'static str,
        /// The parser's complaint.
        reason: String,
    },
    /// Every zonemesh identity the certificate carries is in another trust domain.
    #[error("the certificate names {uri}, outside trust domain {trust_domain}")]
    ForeignTrustDomain {
        /// The first foreign identity URI.
        uri: String,
        /// The domain trusted.
        trust_domain: String,
    },
    /// A file could not be read.
    #[error("{what} {}: {source}", path.display())]
    Read {
        /// The flag (or the role of the file).
        what: String,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file that holds no PEM of the kind wanted, or broken PEM.
    #[error("{what} {}: {reason}", path.display())]
    Pem {
        /// The flag (or the role of the file).
        what: String,
        /// The file.
        path: PathBuf,
        /// What is wrong ("no PEM certificate in the file", the PEM parser's complaint).
        reason: String,
    },
    /// rustls refused a certificate, key or CA that did parse.
    #[error("{what} {}: {source}", path.display())]
    Refused {
        /// The flag (or the role of the file).
        what: String,
        /// The file.
        path: PathBuf,
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// Settings that do not go together, or a setting the URL contradicts.
    #[error("--{flag}: {reason}")]
    Flag {
        /// The flag, without its dashes.
        flag: String,
        /// What is wrong.
        reason: String,
    },
    /// A client configuration asked for while TLS is off.
    #[error("TLS is off: no CA file")]
    Off,
    /// rustls cannot build a configuration with its safe defaults (the provider lacks them).
    #[error("TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

impl Error {
    fn read(what: &str, path: &Path, source: std::io::Error) -> Self {
        Error::Read {
            what: what.to_owned(),
            path: path.to_owned(),
            source,
        }
    }

    fn pem(what: &str, path: &Path, reason: impl fmt::Display) -> Self {
        Error::Pem {
            what: what.to_owned(),
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }

    /// rustls refused the file `path` given as `what`.
    pub fn refused(what: &str, path: &Path, source: rustls::Error) -> Self {
        Error::Refused {
            what: what.to_owned(),
            path: path.to_owned(),
            source,
        }
    }

    fn flag(flag: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Flag {
            flag: flag.into(),
            reason: reason.into(),
        }
    }
}

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

/// The trust domain of the identities zonemesh issues, and the one the aggregator trusts unless
/// told otherwise.
pub const DEFAULT_TRUST_DOMAIN: &str = "zonemesh";

/// Checks that `domain` is a trust domain as SPIFFE spells one: lower-case letters, digits, `.`,
/// `-` and `_`.
pub fn check_trust_domain(domain: &str) -> Result<(), Error> {
    if domain.is_empty() {
        return Err(Error::EmptyTrustDomain);
    }
    match domain
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '.' | '-' | '_'))
    {
        Some(bad) => Err(Error::TrustDomainCharacter {
            domain: domain.to_owned(),
            bad,
        }),
        None => Ok(()),
    }
}

/// The URI subject alternative name of `role` and `name` in trust domain `domain`.
pub fn identity_uri(domain: &str, role: Role, name: &str) -> String {
    format!("spiffe://{domain}/{}/{name}", role.as_str())
}

/// The trust domain and the identity a URI names, if it is a zonemesh identity URI.
pub fn parse_identity_uri(uri: &str) -> Option<(&str, Identity)> {
    let rest = uri.strip_prefix("spiffe://")?;
    let (domain, path) = rest.split_once('/')?;
    let (role, name) = path.split_once('/')?;
    let role = Role::parse(role)?;
    if domain.is_empty() || name.is_empty() || name.contains('/') {
        return None;
    }
    Some((
        domain,
        Identity {
            role,
            name: name.to_owned(),
        },
    ))
}

/// The identity a DER certificate carries in `trust_domain`: its first URI SAN that is a zonemesh
/// identity in that domain. `Ok(None)` when it carries no zonemesh identity at all; an error when
/// every one it carries is in another domain.
pub fn identity_of(der: &[u8], trust_domain: &str) -> Result<Option<Identity>, Error> {
    use x509_parser::extensions::GeneralName;
    let unreadable = |what| {
        move |e: x509_parser::nom::Err<_>| Error::Certificate {
            what,
            reason: e.to_string(),
        }
    };
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(unreadable("cannot parse the certificate"))?;
    let Some(san) = cert
        .subject_alternative_name()
        .map_err(|e| Error::Certificate {
            what: "bad subjectAltName",
            reason: e.to_string(),
        })?
    else {
        return Ok(None);
    };
    let mut foreign = None;
    for name in &san.value.general_names {
        let GeneralName::URI(uri) = name else {
            continue;
        };
        match parse_identity_uri(uri) {
            Some((domain, identity)) if domain == trust_domain => return Ok(Some(identity)),
            Some(_) => foreign = foreign.or(Some(*uri)),
            None => {}
        }
    }
    match foreign {
        Some(uri) => Err(Error::ForeignTrustDomain {
            uri: uri.to_owned(),
            trust_domain: trust_domain.to_owned(),
        }),
        None => Ok(None),
    }
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::read(what, path, e))
}

/// Every certificate in a PEM file; an error names the file when there is none.
pub fn load_certs(what: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let pem = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::pem(what, path, e))?;
    if certs.is_empty() {
        return Err(Error::pem(what, path, "no PEM certificate in the file"));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(what: &str, path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    let pem = read(what, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| Error::pem(what, path, e))
}

/// A root store of every certificate in a PEM file.
pub fn load_roots(what: &str, path: &Path) -> Result<rustls::RootCertStore, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in load_certs(what, path)? {
        roots.add(cert).map_err(|e| Error::refused(what, path, e))?;
    }
    Ok(roots)
}

/// The ring provider, the only one zonemesh builds with.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// How a client reaches a TLS aggregator. Files are read at every connect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    pub fn check(&self, prefix: &str) -> Result<(), Error> {
        match (&self.cert, &self.key) {
            (Some(_), None) => {
                return Err(Error::flag(
                    format!("{prefix}key"),
                    format!("required with --{prefix}cert"),
                ));
            }
            (None, Some(_)) => {
                return Err(Error::flag(
                    format!("{prefix}cert"),
                    format!("required with --{prefix}key"),
                ));
            }
            _ => {}
        }
        if self.ca.is_none() && self.cert.is_some() {
            return Err(Error::flag(
                format!("{prefix}ca"),
                format!("required with --{prefix}cert (the CA of the aggregator's certificate)"),
            ));
        }
        Ok(())
    }

    /// Whether TLS is on.
    pub fn enabled(&self) -> bool {
        self.ca.is_some()
    }

    /// A rustls client configuration from the files as they are now.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, Error> {
        let ca = self.ca.as_deref().ok_or(Error::Off)?;
        let roots = load_roots("CA", ca)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(Error::Config)?
            .with_root_certificates(roots);
        let mut config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(load_certs("certificate", cert)?, load_key("key", key)?)
                .map_err(|e| Error::refused("certificate", cert, e))?,
            _ => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

/// The client TLS flags of the agent and the CLI.
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

impl TlsArgs {
    /// The checked settings; errors name the flag. The files are read at every connect.
    pub fn client_tls(&self, url: &str) -> Result<ClientTls, Error> {
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
                Error::flag("tls-ca", format!("required for {url}"))
            } else {
                Error::flag(
                    "aggregator",
                    format!("{url} is http://, but --tls-ca turns TLS on (use https://)"),
                )
            });
        }
        if tls.enabled() {
            // Read them once now, so that a wrong path fails at start and names its flag.
            tls.client_config()?;
        }
        Ok(tls)
    }
}

/// Why [`connect`] failed: the text to show, and whether credentials were the problem (a CA that
/// does not sign the server's certificate, or a client certificate the server refused), which
/// waiting and trying again will not fix.
#[derive(Debug)]
pub struct ConnectError {
    message: String,
    credentials: bool,
}

impl ConnectError {
    fn new(message: String) -> Self {
        Self {
            message,
            credentials: false,
        }
    }

    fn of(url: &str, e: &(dyn std::error::Error + 'static)) -> Self {
        match credential_failure(e) {
            Some(why) => Self {
                message: format!("connect to {url}: {why}"),
                credentials: true,
            },
            None => Self::new(format!("connect to {url}: {}", error_chain(e))),
        }
    }

    /// The TLS handshake failed over a certificate, on either side.
    pub fn is_credentials(&self) -> bool {
        self.credentials
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConnectError {}

impl From<ConnectError> for String {
    fn from(e: ConnectError) -> Self {
        e.message
    }
}

/// What a TLS failure among `e` and its sources says about certificates, if it was about them:
/// the server refused this client's certificate (an alert), or this client does not trust the
/// server's. `None` for every other failure (refused connections, timeouts, protocol errors).
pub fn credential_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(e);
    while let Some(err) = next {
        // io::Error's source() skips the error it wraps, so look inside it too.
        let inner = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        for candidate in [Some(err), inner].into_iter().flatten() {
            if let Some(why) = certificate_problem(candidate) {
                return Some(why);
            }
        }
        next = err.source();
    }
    None
}

/// The alerts a server sends when it does not accept the client's certificate.
const CERTIFICATE_ALERTS: [rustls::AlertDescription; 8] = {
    use rustls::AlertDescription as A;
    [
        A::BadCertificate,
        A::UnsupportedCertificate,
        A::CertificateRevoked,
        A::CertificateExpired,
        A::CertificateUnknown,
        A::UnknownCA,
        A::AccessDenied,
        A::CertificateRequired,
    ]
};

fn certificate_problem(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let refused = |alert: &dyn fmt::Debug| {
        format!("the server refused this client's certificate (--tls-cert): {alert:?}")
    };
    let untrusted = |why: &dyn fmt::Display| {
        format!("the server's certificate is not trusted (--tls-ca, --tls-server-name): {why}")
    };
    match e.downcast_ref::<rustls::Error>() {
        Some(rustls::Error::AlertReceived(alert)) if CERTIFICATE_ALERTS.contains(alert) => {
            return Some(refused(alert));
        }
        Some(err @ rustls::Error::InvalidCertificate(_)) => return Some(untrusted(err)),
        Some(_) => return None,
        None => {}
    }
    // tokio-rustls hands some of rustls' errors on as their text only (an io::Error of kind
    // InvalidData around a string): recognise the texts rustls itself writes for those errors.
    let text = e.to_string();
    if let Some(alert) = CERTIFICATE_ALERTS
        .iter()
        .find(|a| text == rustls::Error::AlertReceived(**a).to_string())
    {
        return Some(refused(alert));
    }
    let invalid =
        rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding).to_string();
    let prefix = invalid.split(':').next().unwrap_or(&invalid);
    text.starts_with(&format!("{prefix}:"))
        .then(|| untrusted(&text))
}

/// A gRPC channel to `url` (`http://` or `https://host:port`), over TLS when `tls` is enabled.
pub async fn connect(
    url: &str,
    tls: &ClientTls,
    connect_timeout: Duration,
) -> Result<Channel, ConnectError> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| ConnectError::new(format!("{url}: {e}")))?
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(10));
    let https = endpoint.uri().scheme_str() == Some("https");
    if !tls.enabled() {
        if https {
            return Err(ConnectError::new(format!(
                "{url}: https:// needs a CA file (--tls-ca)"
            )));
        }
        return endpoint
            .connect()
            .await
            .map_err(|e| ConnectError::of(url, &e));
    }
    let host = endpoint
        .uri()
        .host()
        .ok_or_else(|| ConnectError::new(format!("{url}: no host")))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let name = tls.server_name.clone().unwrap_or_else(|| host.clone());
    let server_name = ServerName::try_from(name.clone())
        .map_err(|e| ConnectError::new(format!("server name {name:?}: {e}")))?;
    let config = tls
        .client_config()
        .map_err(|e| ConnectError::new(e.to_string()))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let presents_certificate = tls.cert.is_some();
    let verdict_limit = connect_timeout.min(VERDICT_WAIT);
    let service = tower::service_fn(move |uri: Uri| {
        let connector = connector.clone();
        let server_name = server_name.clone();
        async move {
            let host = uri.host().unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port = uri.port_u16().unwrap_or(443);
            let tcp = tokio::net::TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            let mut stream = connector.connect(server_name, tcp).await?;
            let tls13 =
                stream.get_ref().1.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
            if presents_certificate && tls13 {
                await_verdict(&mut stream, verdict_limit).await?;
            }
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    endpoint
        .connect_with_connector(service)
        .await
        .map_err(|e| ConnectError::of(url, &e))
}

/// How long [`connect`] waits for the server's first record after a TLS 1.3 handshake.
const VERDICT_WAIT: Duration = Duration::from_secs(1);

/// With TLS 1.3 the server judges the client's certificate after the client's side of the
/// handshake is done, and its verdict is the first record it sends: an alert, or its HTTP/2
/// settings (an HTTP/2 server speaks first). Waiting for that record, at most `limit`, turns a
/// refused certificate into an error of the connection that names the alert; without the wait
/// the client writes its first request into a closed connection and sees only a broken pipe.
/// The record is taken into rustls, which keeps its plaintext for HTTP/2 to read as usual.
/// A server that stays silent for `limit` is not an error.
async fn await_verdict(
    stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    limit: Duration,
) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    let first_record = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let (tcp, conn) = stream.get_mut();
            if !conn.wants_read() {
                return Ok(()); // plaintext is waiting: the server accepted us
            }
            tcp.readable().await?;
            let n = match tcp.try_read(&mut buf) {
                Ok(0) => {
                    return Err(Error::new(
                        ErrorKind::UnexpectedEof,
                        "the server closed the connection after the TLS handshake",
                    ));
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            let mut data = &buf[..n];
            while !data.is_empty() {
                conn.read_tls(&mut data)?;
                conn.process_new_packets()
                    .map_err(|e| Error::new(ErrorKind::InvalidData, e))?;
            }
        }
    };
    tokio::time::timeout(limit, first_record)
        .await
        .unwrap_or(Ok(()))
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
    fn certificate_failures_are_told_from_other_failures() {
        use rustls::{AlertDescription, CertificateError};
        use std::io::{Error, ErrorKind};
        let wrapped = |e: Error| tonic::Status::from_error(Box::new(e));
        let refused = rustls::Error::AlertReceived(AlertDescription::UnknownCA);
        // The typed error, and the text tokio-rustls sometimes passes on instead.
        for e in [
            Error::new(ErrorKind::InvalidData, refused.clone()),
            Error::new(ErrorKind::InvalidData, refused.to_string()),
        ] {
            let why = credential_failure(&wrapped(e)).expect("a refused certificate");
            assert!(why.contains("refused this client's certificate") && why.contains("UnknownCA"));
        }
        let untrusted = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        for e in [
            Error::new(ErrorKind::InvalidData, untrusted.clone()),
            Error::new(ErrorKind::InvalidData, untrusted.to_string()),
        ] {
            let why = credential_failure(&wrapped(e)).expect("an untrusted server");
            assert!(why.contains("not trusted"), "{why}");
        }
        // Not about certificates: a broken pipe, another alert, a refused connection.
        for e in [
            Error::new(
                ErrorKind::BrokenPipe,
                "stream closed because of a broken pipe",
            ),
            Error::new(
                ErrorKind::InvalidData,
                rustls::Error::AlertReceived(AlertDescription::HandshakeFailure),
            ),
            Error::from(ErrorKind::ConnectionRefused),
        ] {
            assert_eq!(credential_failure(&wrapped(e)), None);
        }
    }

    #[test]
    fn identity_uris_round_trip() {
        for role in [Role::Node, Role::Scheduler, Role::Reader] {
            let uri = identity_uri(DEFAULT_TRUST_DOMAIN, role, "a-1.example");
            assert_eq!(
                parse_identity_uri(&uri),
                Some((
                    DEFAULT_TRUST_DOMAIN,
                    Identity {
                        role,
                        name: "a-1.example".into()
                    }
                ))
            );
        }
        assert_eq!(
            parse_identity_uri("spiffe://cluster.local/node/b1"),
            Some((
                "cluster.local",
                Identity {
                    role: Role::Node,
                    name: "b1".into()
                }
            ))
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
            "spiffe:///node/a1",
        ] {
            assert_eq!(parse_identity_uri(uri), None, "{uri}");
        }
    }

    /// A self-signed certificate whose subject alternative names are these URIs.
    fn certificate_naming(uris: &[&str]) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        for uri in uris {
            params
                .subject_alt_names
                .push(rcgen::SanType::URI((*uri).try_into().unwrap()));
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_certificate_proves_an_identity_in_the_trust_domain_only() {
        let node = |name: &str| Identity {
            role: Role::Node,
            name: name.into(),
        };
        let ours = certificate_naming(&["spiffe://zonemesh/node/a1"]);
        assert_eq!(identity_of(&ours, "zonemesh").unwrap(), Some(node("a1")));
        // Another domain's identity is refused, and the error names it.
        let err = identity_of(&ours, "prod.example").unwrap_err();
        assert!(
            matches!(&err, Error::ForeignTrustDomain { uri, trust_domain }
                if uri == "spiffe://zonemesh/node/a1" && trust_domain == "prod.example"),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "the certificate names spiffe://zonemesh/node/a1, outside trust domain prod.example"
        );
        // Among several, the one in the trust domain counts, wherever it stands.
        let both = certificate_naming(&["spiffe://other/node/b1", "spiffe://zonemesh/node/a1"]);
        assert_eq!(identity_of(&both, "zonemesh").unwrap(), Some(node("a1")));
        assert_eq!(identity_of(&both, "other").unwrap(), Some(node("b1")));
        // No zonemesh identity at all (a workload's SPIFFE ID, no URI): no identity, no refusal.
        let workload = certificate_naming(&["spiffe://zonemesh/ns/default/sa/grafana"]);
        assert_eq!(identity_of(&workload, "zonemesh").unwrap(), None);
        assert_eq!(
            identity_of(&certificate_naming(&[]), "zonemesh").unwrap(),
            None
        );
        assert!(matches!(
            identity_of(b"not DER", "zonemesh"),
            Err(Error::Certificate { .. })
        ));
    }

    #[test]
    fn trust_domains_are_spelled_as_spiffe_spells_them() {
        for ok in ["zonemesh", "cluster.local", "prod-eu_1.example"] {
            assert!(check_trust_domain(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Zonemesh", "zone mesh", "zonemesh/node", "zonemesh:443"] {
            assert!(check_trust_domain(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn client_settings_name_the_missing_flag() {
        let only_cert = ClientTls {
            ca: Some("ca.pem".into()),
            cert: Some("c.pem".into()),
            ..Default::default()
        };
        assert_eq!(
            only_cert.check("tls-").unwrap_err().to_string(),
            "--tls-key: required with --tls-cert"
        );
        let no_ca = ClientTls {
            cert: Some("c.pem".into()),
            key: Some("k.pem".into()),
            ..Default::default()
        };
        let err = no_ca.check("tls-").unwrap_err();
        assert!(
            matches!(&err, Error::Flag { flag, .. } if flag == "tls-ca"),
            "{err}"
        );
    }
}

/// One address of an aggregator to connect to: a URL, and the name its certificate must carry
/// when that is not the URL's host (an address a name resolved to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL to connect to.
    pub url: String,
    /// The name the certificate is checked against, when it is not the URL's host.
    pub server_name: Option<String>,
}

impl Target {
    /// `tls` for this target: its server name unless one was given.
    pub fn tls(&self, tls: &ClientTls) -> ClientTls {
        ClientTls {
            server_name: tls.server_name.clone().or_else(|| self.server_name.clone()),
            ..tls.clone()
        }
    }
}

/// The addresses behind `urls` (several aggregators, or names that resolve to several, such as a
/// headless Kubernetes Service), in order and each once: a name that resolves to more than one
/// address gives one target per address, checked against the name; a name that resolves to one
/// (or not at all now) stays as it is, so that connecting resolves it again.
pub async fn targets(urls: &[String]) -> Vec<Target> {
    let mut out: Vec<Target> = Vec::new();
    for url in urls {
        let as_is = Target {
            url: url.clone(),
            server_name: None,
        };
        let Ok(uri) = url.parse::<Uri>() else {
            out.push(as_is);
            continue;
        };
        let (Some(host), Some(scheme)) = (uri.host(), uri.scheme_str()) else {
            out.push(as_is);
            continue;
        };
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare.parse::<std::net::IpAddr>().is_ok() {
            out.push(as_is);
            continue;
        }
        let mut addresses: Vec<std::net::SocketAddr> =
            match tokio::net::lookup_host((bare, port)).await {
                Ok(found) => found.collect(),
                Err(_) => Vec::new(),
            };
        addresses.dedup();
        if addresses.len() <= 1 {
            out.push(as_is);
            continue;
        }
        for address in addresses {
            out.push(Target {
                url: format!("{scheme}://{address}"),
                server_name: Some(bare.to_owned()),
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|t| seen.insert(t.url.clone()));
    out
}

#[cfg(test)]
mod targets_tests {
    use super::*;

    #[tokio::test]
    async fn several_urls_and_a_name_of_several_addresses_give_every_address() {
        let urls = vec![
            "http://127.0.0.1:7400".to_owned(),
            "http://[::1]:7400".to_owned(),
            "http://127.0.0.1:7400".to_owned(),
        ];
        let found = targets(&urls).await;
        assert_eq!(
            found.iter().map(|t| t.url.as_str()).collect::<Vec<_>>(),
            ["http://127.0.0.1:7400", "http://[::1]:7400"],
            "in order, each once"
        );
        // `localhost` resolves to one or two loopback addresses here; each is a target checked
        // against the name when there are two.
        let local = targets(&["https://localhost:7400".to_owned()]).await;
        assert!(!local.is_empty());
        if local.len() > 1 {
            assert!(
                local
                    .iter()
                    .all(|t| t.server_name.as_deref() == Some("localhost"))
            );
        }
        let tls = ClientTls {
            server_name: Some("given".into()),
            ..ClientTls::default()
        };
        let t = Target {
            url: "https://10.0.0.1:7400".into(),
            server_name: Some("resolved".into()),
        };
        assert_eq!(
            t.tls(&tls).server_name.as_deref(),
            Some("given"),
            "a flag wins"
        );
        assert_eq!(
            t.tls(&ClientTls::default()).server_name.as_deref(),
            Some("resolved")
        );
    }
}
