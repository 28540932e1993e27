//! Who may do what.
//!
//! Agents authenticate with client certificates only: with a client CA (`--tls-client-ca`),
//! `Ingest` takes a stream only from a certificate naming a node, and only for that node
//! (`PERMISSION_DENIED` names both); without one, Ingest is open (the server warns at start).
//! Queries authenticate as soon as there is a way to: a client CA or a bearer token file
//! (`--tokens-file`). Then
//!
//! - the `Topology` service takes a `scheduler` or `reader` certificate, or
//!   `authorization: Bearer <token>`;
//! - the extender (which remembers jobs) takes `scheduler` credentials only;
//! - everything else is `UNAUTHENTICATED` (gRPC) or 401 (HTTP), and learns nothing else.
//!
//! Health, reflection (the public schema), `/healthz` and `/metrics` (zone-level figures only)
//! stay open for probes and scrapers. Without a client CA or tokens, everything is open: the
//! local demo and tests.
//!
//! The token file has one token a line, `<role> <name> <token>`, with `role` `scheduler` or
//! `reader`; `#` starts a comment (so a token cannot hold one). It is read again when it changes;
//! a file that cannot be parsed keeps the tokens that loaded last, a removed file revokes them all.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use zonemesh_tls::{Identity, Role};

use super::metrics::{Metrics, Reason, Surface};
use super::tls::Peer;

/// What a caller wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Read the topology (every Topology RPC).
    Read,
    /// Schedule through the extender.
    Schedule,
}

/// Why a caller was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No valid credentials.
    Unauthenticated(String),
    /// Valid credentials that do not allow this.
    Forbidden(String),
}

impl Denied {
    /// The gRPC status.
    pub fn status(&self) -> tonic::Status {
        match self {
            Denied::Unauthenticated(m) => tonic::Status::unauthenticated(m.clone()),
            Denied::Forbidden(m) => tonic::Status::permission_denied(m.clone()),
        }
    }

    /// The metric label of the reason.
    pub fn reason(&self) -> Reason {
        match self {
            Denied::Unauthenticated(_) => Reason::Unauthenticated,
            Denied::Forbidden(_) => Reason::Forbidden,
        }
    }
}

/// Why the token file cannot be used; the message names the flag, the file and the line.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// The file cannot be read.
    #[error("--tokens-file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not a token.
    #[error("--tokens-file {}:{line}: {problem}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        problem: TokenLineError,
    },
}

/// What is wrong with one line of the token file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenLineError {
    /// Not three fields.
    #[error("expected `<role> <name> <token>`, found {0} fields")]
    Fields(usize),
    /// A node's token: agents use certificates.
    #[error("role node: agents authenticate with certificates, not tokens")]
    NodeRole,
    /// A role that is not one.
    #[error("role {0:?} is neither scheduler nor reader")]
    UnknownRole(String),
    /// A token too short to be a secret.
    #[error("the token of {0} is shorter than 16 characters")]
    Short(String),
}

/// The SHA-256 digest of a token: what is kept and compared, never the token itself.
type Digest = [u8; 32];

fn digest(token: &[u8]) -> Digest {
    let d = ring::digest::digest(&ring::digest::SHA256, token);
    d.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

/// Bearer tokens, loaded from a file: the digest of each, with its identity.
#[derive(Debug, Default)]
struct Tokens {
    entries: Vec<(Digest, Identity)>,
}

impl Tokens {
    fn parse(path: &Path, text: &str) -> Result<Self, TokensError> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let entry = Self::entry(line).map_err(|problem| TokensError::Line {
                path: path.to_owned(),
                line: i + 1,
                problem,
            })?;
            entries.push(entry);
        }
        Ok(Self { entries })
    }

    fn entry(line: &str) -> Result<(Digest, Identity), TokenLineError> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [role, name, token] = fields[..] else {
            return Err(TokenLineError::Fields(fields.len()));
        };
        let role = match Role::parse(role) {
            Some(Role::Node) => return Err(TokenLineError::NodeRole),
            Some(r) => r,
            None => return Err(TokenLineError::UnknownRole(role.to_owned())),
        };
        if token.len() < 16 {
            return Err(TokenLineError::Short(name.to_owned()));
        }
        let name = name.to_owned();
        Ok((digest(token.as_bytes()), Identity { role, name }))
    }

    /// The identity of `token`. Every entry is compared, each in constant time (`subtle`), and
    /// digests of equal length are compared, so the time taken tells nothing of any token:
    /// neither its bytes nor its length.
    fn lookup(&self, token: &[u8]) -> Option<&Identity> {
        use subtle::ConstantTimeEq as _;
        let presented = digest(token);
        let mut found = None;
        for (d, identity) in &self.entries {
            if bool::from(d.ct_eq(&presented)) {
                found = Some(identity);
            }
        }
        found
    }
}

/// The access policy of one server.
#[derive(Debug)]
pub struct Guard {
    verifies_clients: bool,
    tokens_file: Option<PathBuf>,
    tokens: RwLock<(u64, Arc<Tokens>)>,
    metrics: Arc<Metrics>,
}

fn fingerprint(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl Guard {
    /// A policy; `verifies_clients` when a client CA is configured. Reads the token file.
    pub fn new(
        verifies_clients: bool,
        tokens_file: Option<PathBuf>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, TokensError> {
        let tokens = match &tokens_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| TokensError::Read {
                    path: path.clone(),
                    source,
                })?;
                (fingerprint(&text), Arc::new(Tokens::parse(path, &text)?))
            }
            None => (0, Arc::default()),
        };
        Ok(Self {
            verifies_clients,
            tokens_file,
            tokens: RwLock::new(tokens),
            metrics,
        })
    }

    /// Whether agents must present a node certificate (a client CA is configured).
    pub fn verifies_clients(&self) -> bool {
        self.verifies_clients
    }

    /// Whether callers must authenticate.
    pub fn enabled(&self) -> bool {
        self.verifies_clients || self.tokens_file.is_some()
    }

    /// Reads the token file again if it changed. `Ok(true)` when the tokens were replaced.
    pub fn reload(&self) -> Result<bool, TokensError> {
        let Some(path) = &self.tokens_file else {
            return Ok(false);
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            // Removed: no token is valid any more (queries then need certificates).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => {
                return Err(TokensError::Read {
                    path: path.clone(),
                    source,
                });
            }
        };
        let print = fingerprint(&text);
        if print == self.tokens.read().expect("tokens lock").0 {
            return Ok(false);
        }
        let tokens = Tokens::parse(path, &text)?;
        *self.tokens.write().expect("tokens lock") = (print, Arc::new(tokens));
        Ok(true)
    }

    fn refused(&self, surface: Surface, denied: Denied) -> Denied {
        self.metrics.security.refused(surface, denied.reason());
        denied
    }

    /// The node the agent behind `peer` may report for; `Ok(None)` for any node (no client CA).
    pub fn ingest_node<'p>(&self, peer: Option<&'p Peer>) -> Result<Option<&'p str>, Denied> {
        if !self.verifies_clients {
            return Ok(None);
        }
        match peer.and_then(|p| p.identity.as_ref()) {
            Some(Identity {
                role: Role::Node,
                name,
            }) => Ok(Some(name)),
            Some(other) => Err(self.refused(
                Surface::Ingest,
                Denied::Forbidden(format!(
                    "the client certificate is a {} certificate; Ingest takes node certificates",
                    other.role.as_str()
                )),
            )),
            None => Err(self.refused(
                Surface::Ingest,
                Denied::Unauthenticated(
                    "Ingest needs a client certificate that names the node".into(),
                ),
            )),
        }
    }

    /// May the agent behind `peer` stream reports for `node`?
    pub fn check_ingest(&self, peer: Option<&Peer>, node: &str) -> Result<(), Denied> {
        match self.ingest_node(peer)? {
            Some(name) if name != node => Err(self.refused(
                Surface::Ingest,
                Denied::Forbidden(format!(
                    "hello.node: the client certificate names node {name}, the Hello says {node}"
                )),
            )),
            _ => Ok(()),
        }
    }

    /// May the caller (`peer`, and the value of its `authorization` header) do `need`?
    /// `surface` labels the refusal metric (`query`, `extender`).
    pub fn check(
        &self,
        surface: Surface,
        peer: Option<&Peer>,
        authorization: Option<&[u8]>,
        need: Need,
    ) -> Result<Option<Identity>, Denied> {
        if !self.enabled() {
            return Ok(None);
        }
        let identity = match authorization {
            Some(value) => {
                let token = value
                    .strip_prefix(b"Bearer ")
                    .or_else(|| value.strip_prefix(b"bearer "))
                    .map(|t| t.trim_ascii());
                let tokens = self.tokens.read().expect("tokens lock").1.clone();
                match token.and_then(|t| tokens.lookup(t)) {
                    Some(identity) => identity.clone(),
                    None => {
                        return Err(self.refused(
                            surface,
                            Denied::Unauthenticated(
                                "authorization: not a valid bearer token".into(),
                            ),
                        ));
                    }
                }
            }
            None => match peer.and_then(|p| p.identity.clone()) {
                Some(identity) => identity,
                None => {
                    return Err(self.refused(
                        surface,
                        Denied::Unauthenticated(
                            "credentials required: a client certificate or a bearer token".into(),
                        ),
                    ));
                }
            },
        };
        let allowed = match (identity.role, need) {
            (Role::Scheduler, _) => true,
            (Role::Reader, Need::Read) => true,
            (Role::Reader, Need::Schedule) | (Role::Node, _) => false,
        };
        if allowed {
            Ok(Some(identity))
        } else {
            Err(self.refused(
                surface,
                Denied::Forbidden(format!(
                    "{identity} may not {}",
                    match need {
                        Need::Read => "query the topology",
                        Need::Schedule => "schedule through the extender",
                    }
                )),
            ))
        }
    }
}

/// Axum middleware: lets a request through when its certificate or bearer token allows `need`;
/// else 401 (with `WWW-Authenticate: Bearer`) or 403, and nothing of the topology. `surface`
/// labels the refusal metric.
pub async fn http_guard(
    guard: Arc<Guard>,
    surface: Surface,
    need: Need,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<Peer>>()
        .map(|c| &c.0);
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let denied = match guard.check(surface, peer, authorization, need) {
        Ok(_) => return next.run(request).await,
        Err(denied) => denied,
    };
    // Read what the client sends (up to 1 MiB) before answering: an HTTP/2 answer that leaves
    // the request body unread ends with a stream reset, which some clients (curl 7.88) report
    // as an error instead of the 401 or 403.
    let drain = axum::body::to_bytes(request.into_body(), 1 << 20);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), drain).await;
    match denied {
        Denied::Unauthenticated(m) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            m + "\n",
        )
            .into_response(),
        Denied::Forbidden(m) => (StatusCode::FORBIDDEN, m + "\n").into_response(),
    }
}

/// Reloads the TLS files and the token file every `every`, until the process ends.
pub fn spawn_reloader(
    tls: Option<Arc<super::tls::Tls>>,
    guard: Arc<Guard>,
    metrics: Arc<Metrics>,
    every: std::time::Duration,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let results = [
                (
                    "TLS files",
                    tls.as_ref()
                        .map(|t| t.reload().map_err(crate::ConfigError::from)),
                ),
                (
                    "token file",
                    Some(guard.reload().map_err(crate::ConfigError::from)),
                ),
            ];
            for (what, result) in results {
                match result {
                    Some(Ok(true)) => {
                        metrics.security.reloads_ok.inc();
                        tracing::info!("{what} reloaded");
                    }
                    Some(Err(e)) => {
                        metrics.security.reloads_failed.inc();
                        tracing::error!(error = %e, "{what} not reloaded; the previous ones stay");
                    }
                    _ => {}
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(identity: Option<Identity>) -> Peer {
        Peer {
            addr: "127.0.0.1:1".parse().unwrap(),
            tls: true,
            identity,
        }
    }

    fn id(role: Role, name: &str) -> Option<Identity> {
        Some(Identity {
            role,
            name: name.into(),
        })
    }

    fn guard(tokens: &str) -> Guard {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, tokens).unwrap();
        Guard::new(true, Some(path), Arc::default()).unwrap()
    }

    #[test]
    fn a_node_certificate_reports_for_its_node_only() {
        let g = guard("");
        assert_eq!(
            g.check_ingest(Some(&peer(id(Role::Node, "a1"))), "a1"),
            Ok(())
        );
        let Err(Denied::Forbidden(m)) = g.check_ingest(Some(&peer(id(Role::Node, "a1"))), "b1")
        else {
            panic!("a1's certificate reported for b1");
        };
        assert!(m.contains("a1") && m.contains("b1"), "{m}");
        assert!(matches!(
            g.check_ingest(Some(&peer(None)), "a1"),
            Err(Denied::Unauthenticated(_))
        ));
        assert!(matches!(
            g.check_ingest(Some(&peer(id(Role::Scheduler, "a1"))), "a1"),
            Err(Denied::Forbidden(_))
        ));
        assert_eq!(g.metrics.security.refusals(Surface::Ingest), 3);
    }

    #[test]
    fn tokens_and_certificates_grant_their_roles() {
        let g = guard(
            "# dashboards\nreader grafana r3ad3r-t0ken-0123456789\nscheduler ks s3hed-t0ken-0123456789\n",
        );
        let none = peer(None);
        let read = |auth: &[u8], need| g.check(Surface::Query, Some(&none), Some(auth), need);
        assert_eq!(
            read(b"Bearer r3ad3r-t0ken-0123456789", Need::Read)
                .unwrap()
                .unwrap()
                .name,
            "grafana"
        );
        assert!(matches!(
            read(b"Bearer r3ad3r-t0ken-0123456789", Need::Schedule),
            Err(Denied::Forbidden(_))
        ));
        assert!(read(b"Bearer s3hed-t0ken-0123456789", Need::Schedule).is_ok());
        assert!(matches!(
            read(b"Bearer s3hed-t0ken-012345678", Need::Read),
            Err(Denied::Unauthenticated(_))
        ));
        assert!(matches!(
            read(b"Basic s3hed-t0ken-0123456789", Need::Read),
            Err(Denied::Unauthenticated(_))
        ));
        assert!(matches!(
            g.check(Surface::Query, Some(&none), None, Need::Read),
            Err(Denied::Unauthenticated(_))
        ));
        let node = peer(id(Role::Node, "a1"));
        assert!(matches!(
            g.check(Surface::Query, Some(&node), None, Need::Read),
            Err(Denied::Forbidden(_))
        ));
        let scheduler = peer(id(Role::Scheduler, "kube-scheduler"));
        assert!(
            g.check(Surface::Extender, Some(&scheduler), None, Need::Schedule)
                .is_ok()
        );
    }

    #[test]
    fn without_a_client_ca_or_tokens_everything_is_open() {
        let g = Guard::new(false, None, Arc::default()).unwrap();
        assert!(!g.enabled());
        assert_eq!(
            g.check(Surface::Query, None, None, Need::Schedule),
            Ok(None)
        );
        assert_eq!(g.check_ingest(None, "a1"), Ok(()));
    }

    #[test]
    fn a_bad_token_file_names_the_line() {
        let path = Path::new("t");
        for (text, line, problem, message) in [
            (
                "reader grafana\n",
                1,
                TokenLineError::Fields(2),
                "--tokens-file t:1: expected `<role> <name> <token>`, found 2 fields",
            ),
            (
                "\nnode a1 0123456789abcdefgh\n",
                2,
                TokenLineError::NodeRole,
                "--tokens-file t:2: role node: agents authenticate with certificates, not tokens",
            ),
            (
                "admin x 0123456789abcdefgh",
                1,
                TokenLineError::UnknownRole("admin".into()),
                "--tokens-file t:1: role \"admin\" is neither scheduler nor reader",
            ),
            (
                "reader x short",
                1,
                TokenLineError::Short("x".into()),
                "--tokens-file t:1: the token of x is shorter than 16 characters",
            ),
        ] {
            let e = Tokens::parse(path, text).unwrap_err();
            assert_eq!(e.to_string(), message, "{text:?}");
            assert!(
                matches!(&e, TokensError::Line { line: l, problem: p, .. } if *l == line && *p == problem),
                "{text:?}: {e:?}"
            );
        }
    }

    #[test]
    fn tokens_reload_when_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "reader a aaaaaaaaaaaaaaaaaaaa\n").unwrap();
        let g = Guard::new(false, Some(path.clone()), Arc::default()).unwrap();
        assert!(!g.reload().unwrap());
        std::fs::write(&path, "reader b bbbbbbbbbbbbbbbbbbbb\n").unwrap();
        assert!(g.reload().unwrap());
        assert!(
            g.check(
                Surface::Query,
                None,
                Some(b"Bearer aaaaaaaaaaaaaaaaaaaa"),
                Need::Read
            )
            .is_err()
        );
        assert!(
            g.check(
                Surface::Query,
                None,
                Some(b"Bearer bbbbbbbbbbbbbbbbbbbb"),
                Need::Read
            )
            .is_ok()
        );
        // A broken file keeps the tokens that loaded.
        std::fs::write(&path, "reader b\n").unwrap();
        assert!(g.reload().is_err());
        assert!(
            g.check(
                Surface::Query,
                None,
                Some(b"Bearer bbbbbbbbbbbbbbbbbbbb"),
                Need::Read
            )
            .is_ok()
        );
        // A removed file revokes every token.
        std::fs::remove_file(&path).unwrap();
        assert!(g.reload().unwrap());
        let bearer: &[u8] = b"Bearer bbbbbbbbbbbbbbbbbbbb";
        assert!(
            g.check(Surface::Query, None, Some(bearer), Need::Read)
                .is_err()
        );
    }
}
