//! The listeners of both ports: TCP, TLS through rustls when a certificate is configured, and
//! the peer each connection proved to be.
//!
//! Handshakes run in their own tasks (a slow client cannot hold up the accept loop) and finished
//! connections queue for the gRPC or HTTP server. The certificate, key and client CA are read
//! again every `reload_every`; a change that loads replaces the configuration for new
//! connections, one that does not is logged and counted and the last good one stays.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, OtherError, ServerConfig,
    SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use zonemesh_tls::{self as tls, Identity};

use super::metrics::Metrics;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at most on one port; the accept loop waits for a free one.
const MAX_HANDSHAKES: usize = 256;

/// Why the server's TLS files cannot be used, or a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate, key or CA file that cannot be read or used; the message names the flag.
    #[error(transparent)]
    Files(#[from] tls::Error),
    /// A client CA from which no verifier can be built.
    #[error("--tls-client-ca {}: {source}", path.display())]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// rustls's reason.
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
    /// The files could not be read to see whether they changed.
    #[error("--tls-cert/--tls-key/--tls-client-ca: {0}")]
    Unreadable(#[source] io::Error),
    /// A connection that failed before or during its handshake.
    #[error("{0}")]
    Handshake(#[source] io::Error),
    /// A client that did not finish its handshake in time.
    #[error("handshake timed out")]
    HandshakeTimeout,
}

/// The files of the server's TLS configuration.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The server's certificate chain (PEM).
    pub cert: PathBuf,
    /// The server's private key (PEM).
    pub key: PathBuf,
    /// CA whose client certificates are verified (PEM). Without it no client can prove who it
    /// is, and only bearer tokens authenticate queries.
    pub client_ca: Option<PathBuf>,
    /// The trust domain of the client identities (`spiffe://<domain>/…`): a certificate whose
    /// zonemesh identities are all in other domains is refused at the handshake.
    pub trust_domain: String,
}

impl TlsFiles {
    fn fingerprint(&self) -> io::Result<u64> {
        let mut h = DefaultHasher::new();
        for p in [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
        {
            std::fs::read(p)?.hash(&mut h);
        }
        Ok(h.finish())
    }

    fn load(&self) -> Result<ServerConfig, TlsError> {
        let builder = ServerConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(tls::Error::Config)?;
        let builder = match &self.client_ca {
            Some(ca) => {
                let roots = tls::load_roots("--tls-client-ca", ca)?;
                // A client certificate is optional at the handshake: a scheduler may use a
                // bearer token instead. What each service demands is checked per request.
                let webpki =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), tls::provider())
                        .allow_unauthenticated()
                        .build()
                        .map_err(|source| TlsError::ClientCa {
                            path: ca.clone(),
                            source,
                        })?;
                builder.with_client_cert_verifier(Arc::new(InTrustDomain {
                    webpki,
                    domain: self.trust_domain.clone(),
                }))
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(
                tls::load_certs("--tls-cert", &self.cert)?,
                tls::load_key("--tls-key", &self.key)?,
            )
            .map_err(|e| tls::Error::refused("--tls-cert", &self.cert, e))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Client certificates as webpki verifies them against the client CA, and then refused when every
/// zonemesh identity they carry is in another trust domain: a CA that also signs other workloads'
/// or another cluster's certificates does not let those in. Refusing here, in the handshake,
/// sends the client an alert it can report, where a refusal after it would be a reset stream.
#[derive(Debug)]
struct InTrustDomain {
    webpki: Arc<dyn ClientCertVerifier>,
    domain: String,
}

impl ClientCertVerifier for InTrustDomain {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .webpki
            .verify_client_cert(end_entity, intermediates, now)?;
        tls::identity_of(end_entity, &self.domain).map_err(|e| {
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                io::Error::other(e),
            ))))
        })?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// The server's TLS configuration, reloaded from its files.
#[derive(Debug)]
pub struct Tls {
    files: TlsFiles,
    current: RwLock<(u64, Arc<ServerConfig>)>,
    /// Whether plain-text connections are accepted beside TLS on the same ports.
    pub allow_plaintext: bool,
}

impl Tls {
    /// Loads the files; an error names the flag and the file.
    pub fn load(files: TlsFiles, allow_plaintext: bool) -> Result<Self, TlsError> {
        let fingerprint = files.fingerprint().map_err(TlsError::Unreadable)?;
        let config = files.load()?;
        Ok(Self {
            files,
            current: RwLock::new((fingerprint, Arc::new(config))),
            allow_plaintext,
        })
    }

    /// Whether client certificates can be verified.
    pub fn verifies_clients(&self) -> bool {
        self.files.client_ca.is_some()
    }

    fn config(&self) -> Arc<ServerConfig> {
        self.current.read().expect("tls lock").1.clone()
    }

    /// Reads the files again; replaces the configuration if they changed and load.
    /// `Ok(true)` when replaced.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let fingerprint = self.files.fingerprint().map_err(TlsError::Unreadable)?;
        if fingerprint == self.current.read().expect("tls lock").0 {
            return Ok(false);
        }
        let config = self.files.load()?;
        *self.current.write().expect("tls lock") = (fingerprint, Arc::new(config));
        Ok(true)
    }
}

/// Who is on the other end of a connection.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The remote address.
    pub addr: SocketAddr,
    /// Whether the connection is TLS.
    pub tls: bool,
    /// The zonemesh identity of the client's verified certificate, if it presented one.
    pub identity: Option<Identity>,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// An accepted connection, plain or TLS, with its [`Peer`].
pub struct Conn {
    io: Io,
    peer: Peer,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("peer", &self.peer).finish()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

/// Connections accepted on one port, handshakes done.
#[derive(Debug)]
pub struct Incoming {
    rx: mpsc::Receiver<Conn>,
    local: SocketAddr,
}

impl tokio_stream::Stream for Incoming {
    type Item = io::Result<Conn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx).map(|c| c.map(Ok))
    }
}

impl axum::serve::Listener for Incoming {
    type Io = Conn;
    type Addr = Peer;

    async fn accept(&mut self) -> (Conn, Peer) {
        match self.rx.recv().await {
            Some(conn) => {
                let peer = conn.peer.clone();
                (conn, peer)
            }
            // The accept loop ended (its listener failed): serve nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Peer> {
        Ok(Peer {
            addr: self.local,
            tls: false,
            identity: None,
        })
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Incoming>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, Incoming>) -> Self {
        stream.remote_addr().clone()
    }
}

/// Accepts on `listener` until the returned [`Incoming`] is dropped: TLS when `tls` is set
/// (and plain text beside it only if it allows), else plain text.
pub fn incoming(listener: TcpListener, tls: Option<Arc<Tls>>, metrics: Arc<Metrics>) -> Incoming {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let (tx, rx) = mpsc::channel(128);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    tokio::spawn(async move {
        loop {
            // A slow or silent client holds a slot for at most HANDSHAKE_TIMEOUT.
            let Ok(slot) = handshakes.clone().acquire_owned().await else {
                return;
            };
            let (tcp, addr) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, do not spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = tx.closed() => return,
            };
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY");
            }
            let (tx, tls, metrics) = (tx.clone(), tls.clone(), metrics.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let conn = match tls {
                    None => Ok(plain(tcp, addr)),
                    Some(tls) => {
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&tls, tcp, addr))
                            .await
                            .unwrap_or(Err(TlsError::HandshakeTimeout))
                    }
                };
                match conn {
                    Ok(conn) => {
                        let _ = tx.send(conn).await;
                    }
                    Err(e) => {
                        metrics.security.handshake_failures.inc();
                        tracing::debug!(%addr, error = %e, "TLS handshake failed");
                    }
                }
            });
        }
    });
    Incoming { rx, local }
}

fn plain(tcp: TcpStream, addr: SocketAddr) -> Conn {
    Conn {
        io: Io::Plain(tcp),
        peer: Peer {
            addr,
            tls: false,
            identity: None,
        },
    }
}

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

async fn handshake(tls: &Tls, tcp: TcpStream, addr: SocketAddr) -> Result<Conn, TlsError> {
    if tls.allow_plaintext {
        let mut first = [0u8; 1];
        let n = tcp.peek(&mut first).await.map_err(TlsError::Handshake)?;
        if n == 1 && first[0] != TLS_HANDSHAKE {
            return Ok(plain(tcp, addr));
        }
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    let stream = acceptor.accept(tcp).await.map_err(TlsError::Handshake)?;
    // The verifier has refused certificates whose identities are all in other trust domains.
    let identity = match stream.get_ref().1.peer_certificates() {
        Some([leaf, ..]) => tls::identity_of(leaf, &tls.files.trust_domain)?,
        _ => None,
    };
    Ok(Conn {
        io: Io::Tls(Box::new(stream)),
        peer: Peer {
            addr,
            tls: true,
            identity,
        },
    })
}
