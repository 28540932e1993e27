//! A throw-away PKI for the TLS tests: a CA, and certificates for the aggregator (server) and
//! for nodes, schedulers and readers (clients, with zonemesh identity URIs), written as PEM files.

use std::path::{Path, PathBuf};

use anyhow::Result;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, SanType,
};
use zonemesh_tls::{DEFAULT_TRUST_DOMAIN, Role, identity_uri};

/// A certificate authority.
pub struct Ca {
    cert: Certificate,
    key: KeyPair,
    /// Its certificate, PEM.
    pub cert_pem: String,
}

/// Certificate and key files.
#[derive(Debug, Clone)]
pub struct Files {
    /// Certificate chain (PEM).
    pub cert: PathBuf,
    /// Private key (PEM).
    pub key: PathBuf,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Result<Self> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            cert,
            key,
        })
    }

    /// Writes the CA certificate to `path`.
    pub fn write(&self, path: &Path) -> Result<PathBuf> {
        std::fs::write(path, &self.cert_pem)?;
        Ok(path.to_owned())
    }

    /// Writes the CA's private key to `path` (for tools that sign with it, such as
    /// `deploy/tls/node-certs.sh`).
    pub fn write_key(&self, path: &Path) -> Result<PathBuf> {
        std::fs::write(path, self.key.serialize_pem())?;
        Ok(path.to_owned())
    }

    fn issue(&self, params: CertificateParams, dir: &Path, stem: &str) -> Result<Files> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        let files = Files {
            cert: dir.join(format!("{stem}.crt")),
            key: dir.join(format!("{stem}.key")),
        };
        std::fs::write(&files.cert, cert.pem())?;
        std::fs::write(&files.key, key.serialize_pem())?;
        Ok(files)
    }

    /// A server certificate for `localhost` and 127.0.0.1, in `dir/<stem>.{crt,key}`.
    pub fn server(&self, dir: &Path, stem: &str) -> Result<Files> {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params, dir, stem)
    }

    /// A client certificate naming `role` `name` in zonemesh's trust domain, in
    /// `dir/<role>-<name>.{crt,key}`.
    pub fn client(&self, dir: &Path, role: Role, name: &str) -> Result<Files> {
        self.client_in(DEFAULT_TRUST_DOMAIN, dir, role, name)
    }

    /// A client certificate naming `role` `name` in trust domain `domain`, in
    /// `dir/<domain>-<role>-<name>.{crt,key}` (`dir/<role>-<name>…` in zonemesh's own).
    pub fn client_in(&self, domain: &str, dir: &Path, role: Role, name: &str) -> Result<Files> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .subject_alt_names
            .push(SanType::URI(identity_uri(domain, role, name).try_into()?));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let stem = format!("{}-{name}", role.as_str());
        let stem = if domain == DEFAULT_TRUST_DOMAIN {
            stem
        } else {
            format!("{domain}-{stem}")
        };
        self.issue(params, dir, &stem)
    }
}
