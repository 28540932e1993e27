//! The connection to NATS, the stream and the snapshots' bucket, and appending to the log.

use std::time::Duration;

use async_nats::jetstream::{
    self, context::PublishErrorKind, kv, message::PublishMessage, object_store, stream,
};

use super::entry::{Entry, decision_subject};
use super::{ClusterConfig, LEASE, SNAPSHOTS, STREAM};
use crate::Error;

/// Waits between two tries of an append: from 50 ms, doubling, at most 2 s.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MOST: Duration = Duration::from_secs(2);

/// The replicated log: where entries are appended and from where they are read.
#[derive(Debug, Clone)]
pub struct Log {
    js: jetstream::Context,
    config: ClusterConfig,
}

/// Why a decision was not appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Another leader wrote a decision since this one's view: this replica no longer leads.
    Fenced,
    /// The log did not store it in time.
    Failed(String),
}

/// An error of the cluster, naming the flag a user can fix where there is one.
fn cluster_error(flag: &str, what: impl std::fmt::Display) -> Error {
    Error::Cluster(format!("{flag}: {what}"))
}

impl Log {
    /// Connects to `config.servers`, and creates the stream and the snapshots' bucket when they
    /// do not exist (or updates the stream's retention). Fails with the flag to fix when the
    /// servers cannot be reached within `timeout` or refuse the credentials.
    pub async fn connect(config: &ClusterConfig, timeout: Duration) -> Result<Self, Error> {
        let servers: Vec<async_nats::ServerAddr> = config
            .servers
            .iter()
            .map(|s| {
                s.parse().map_err(|e| {
                    cluster_error("--cluster", format!("{s:?} is not a NATS URL: {e}"))
                })
            })
            .collect::<Result<_, _>>()?;
        let mut options = async_nats::ConnectOptions::new();
        // A user and password in the URLs (`nats://user:pass@host:port`, the deployment's
        // Secret): the client does not take them from there by itself.
        if let Some(server) = servers.iter().find(|s| s.username().is_some()) {
            let user = server.username().unwrap_or_default().to_owned();
            let pass = server.password().unwrap_or_default().to_owned();
            options = options.user_and_password(user, pass);
        }
        let mut options = options
            .name(format!("zonemesh-aggregator {}", config.replica))
            .connection_timeout(timeout)
            // Reconnect forever: the log's servers may all restart; reports wait meanwhile.
            .max_reconnects(None);
        if let Some(ca) = &config.tls_ca {
            if !ca.is_file() {
                return Err(cluster_error(
                    "--cluster-tls-ca",
                    format!("{} is not a readable file", ca.display()),
                ));
            }
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        if let Some(creds) = &config.creds {
            options = options.credentials_file(creds).await.map_err(|e| {
                cluster_error("--cluster-creds", format!("{}: {e}", creds.display()))
            })?;
        }
        let client =
            tokio::time::timeout(timeout, async_nats::connect_with_options(servers, options))
                .await
                .map_err(|_| {
                    cluster_error(
                        "--cluster",
                        format!(
                            "no NATS server of {} answered within {timeout:?}",
                            config.servers.join(",")
                        ),
                    )
                })?
                .map_err(|e| {
                    cluster_error("--cluster", format!("{}: {e}", config.servers.join(",")))
                })?;
        let js = jetstream::new(client);
        let log = Self {
            js,
            config: config.clone(),
        };
        // Replicas starting together race to create the stream and the bucket (and JetStream
        // answers slowly just after the servers start): each try is short, tried again until
        // `timeout`; an error that says what is wrong ends it.
        let started = zonemesh_common::time::Stopwatch::start();
        loop {
            match tokio::time::timeout(Duration::from_secs(3), log.prepare()).await {
                Ok(Ok(())) => return Ok(log),
                Ok(Err(e)) if e.to_string().contains("insufficient storage") => return Err(e),
                Ok(Err(e)) if started.elapsed() >= timeout => return Err(e),
                Err(_) if started.elapsed() >= timeout => {
                    return Err(cluster_error(
                        "--cluster",
                        format!(
                            "JetStream did not answer within {timeout:?} (is it enabled on the servers?)"
                        ),
                    ));
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "preparing the stream; trying again"),
                Err(_) => tracing::debug!("preparing the stream took 3 s; trying again"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The stream (created, or its retention brought to the flags') and the bucket.
    async fn prepare(&self) -> Result<(), Error> {
        let settings = &self.config.stream;
        let wanted = stream::Config {
            name: STREAM.into(),
            subjects: vec![
                format!("{}.>", super::entry::LOG_SUBJECTS),
                format!("{}.>", super::entry::WRITER_SUBJECTS),
            ],
            storage: stream::StorageType::File,
            num_replicas: settings.replicas,
            max_age: settings.max_age,
            max_bytes: settings.max_bytes,
            // JetStream refuses a window longer than the retention.
            duplicate_window: Duration::from_secs(120).min(settings.max_age),
            ..Default::default()
        };
        match self.js.get_stream(STREAM).await {
            Ok(mut existing) => {
                let info = existing
                    .info()
                    .await
                    .map_err(|e| cluster_error("--cluster", format!("stream {STREAM}: {e}")))?;
                let c = &info.config;
                if c.max_age != wanted.max_age || c.max_bytes != wanted.max_bytes {
                    tracing::info!(stream = STREAM, max_age = ?wanted.max_age, max_bytes = wanted.max_bytes, "the stream's retention follows the flags");
                    let updated = stream::Config {
                        num_replicas: c.num_replicas,
                        ..wanted.clone()
                    };
                    self.js
                        .update_stream(updated)
                        .await
                        .map_err(|e| cluster_error("--cluster", format!("stream {STREAM}: {e}")))?;
                }
            }
            Err(_) => {
                self.js.get_or_create_stream(wanted).await.map_err(|e| {
                    let hint = if e.to_string().contains("insufficient storage") {
                        " (--cluster-max-mib asks more than the servers' max_file_store holds)"
                    } else {
                        ""
                    };
                    cluster_error("--cluster", format!("stream {STREAM}: {e}{hint}"))
                })?;
            }
        }
        self.snapshots().await?;
        Ok(())
    }

    /// The snapshots' bucket (created when missing).
    pub async fn snapshots(&self) -> Result<object_store::ObjectStore, Error> {
        match self.js.get_object_store(SNAPSHOTS).await {
            Ok(store) => Ok(store),
            Err(_) => self
                .js
                .create_object_store(object_store::Config {
                    bucket: SNAPSHOTS.into(),
                    description: Some("zonemesh replicas' snapshots".into()),
                    storage: stream::StorageType::File,
                    num_replicas: self.config.stream.replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| cluster_error("--cluster", format!("bucket {SNAPSHOTS}: {e}"))),
        }
    }

    /// The lease's bucket (created when missing): one key, one revision kept, gone after the
    /// TTL unless renewed.
    pub async fn lease(&self) -> Result<kv::Store, Error> {
        match self.js.get_key_value(LEASE).await {
            Ok(store) => Ok(store),
            Err(_) => self
                .js
                .create_key_value(kv::Config {
                    bucket: LEASE.into(),
                    description: "the zonemesh leader's lease".into(),
                    history: 1,
                    max_age: self.config.lease_ttl,
                    storage: stream::StorageType::File,
                    num_replicas: self.config.stream.replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| cluster_error("--cluster", format!("bucket {LEASE}: {e}"))),
        }
    }

    /// Appends a decision of the leader, only if the decision subject's last entry is still
    /// `expected` (`Nats-Expected-Last-Subject-Sequence`): JetStream itself refuses a decision
    /// made on a stale view, after another leader wrote. Returns the decision's sequence. Tried
    /// again (with the same id) within `deadline` through a leader election of the stream.
    pub async fn append_decision(
        &self,
        entry: &Entry,
        id: &str,
        expected: u64,
        deadline: Duration,
    ) -> Result<u64, Decision> {
        let payload = bytes::Bytes::from(entry.encode());
        let started = zonemesh_common::time::Stopwatch::start();
        let mut wait = RETRY_FIRST;
        loop {
            let message = PublishMessage::build()
                .message_id(id)
                .expected_last_subject_sequence(expected)
                .payload(payload.clone());
            let sent = self.js.send_publish(decision_subject(), message).await;
            let acked = match sent {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            match acked {
                Ok(ack) => return Ok(ack.sequence),
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    return Err(Decision::Fenced);
                }
                Err(e) => {
                    if started.elapsed() + wait > deadline {
                        return Err(Decision::Failed(e.to_string()));
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(RETRY_MOST);
                }
            }
        }
    }

    /// The sequence of the last decision in the stream (0: none yet).
    pub async fn last_decision(&self) -> Result<u64, Error> {
        let stream = self
            .js
            .get_stream(STREAM)
            .await
            .map_err(|e| Error::Cluster(format!("stream {STREAM}: {e}")))?;
        match stream
            .get_last_raw_message_by_subject(&decision_subject())
            .await
        {
            Ok(m) => Ok(m.sequence),
            Err(e)
                if e.kind()
                    == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound =>
            {
                Ok(0)
            }
            Err(e) => Err(Error::Cluster(format!("stream {STREAM}: {e}"))),
        }
    }

    /// The JetStream context.
    pub fn context(&self) -> &jetstream::Context {
        &self.js
    }

    /// The replica's settings.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Appends an entry under `subject` with the message id `id`, and returns the sequence the
    /// stream stored it at (the first copy's, when it was a duplicate). Retries with backoff
    /// through a failover of the stream's leader (no responders, timeouts) until the append
    /// deadline; the id makes a retry land once.
    pub async fn append(&self, subject: String, id: &str, payload: Vec<u8>) -> Result<u64, Error> {
        let payload = bytes::Bytes::from(payload);
        let started = zonemesh_common::time::Stopwatch::start();
        let mut wait = RETRY_FIRST;
        loop {
            let message = PublishMessage::build()
                .message_id(id)
                .payload(payload.clone());
            let tried = async {
                self.js
                    .send_publish(subject.clone(), message)
                    .await
                    .map_err(|e| e.to_string())?
                    .await
                    .map_err(|e| e.to_string())
            };
            match tried.await {
                Ok(ack) => return Ok(ack.sequence),
                Err(e) => {
                    if started.elapsed() + wait > self.config.append_deadline {
                        return Err(Error::Cluster(format!(
                            "the log did not store an entry within {:?}: {e}",
                            self.config.append_deadline
                        )));
                    }
                    tracing::debug!(error = %e, ?wait, "append failed; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(RETRY_MOST);
                }
            }
        }
    }

    /// The stream's first and last sequence now.
    pub async fn bounds(&self) -> Result<(u64, u64), Error> {
        let mut stream = self
            .js
            .get_stream(STREAM)
            .await
            .map_err(|e| Error::Cluster(format!("stream {STREAM}: {e}")))?;
        let info = stream
            .info()
            .await
            .map_err(|e| Error::Cluster(format!("stream {STREAM}: {e}")))?;
        Ok((info.state.first_sequence, info.state.last_sequence))
    }
}
