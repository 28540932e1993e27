//! The Ingest service: one bidirectional stream per agent.
//!
//! The first message must be a Hello. Reports are checked here, at the edge: a report that fails
//! (a NaN, more replies than probes, a path of another node, ...) is answered on the stream with
//! an `Error` naming the field and the report's sequence, is never applied and never acknowledged,
//! and the stream stays open. A stream that does not start with a valid Hello is closed with
//! INVALID_ARGUMENT.
//!
//! This is the owner's gRPC edge in both directions: wire messages in become domain
//! [`Command`]s, and what the owner says to an agent (a domain [`Outbound`]) becomes a wire
//! message here ([`to_wire`]); the store's health becomes the gRPC health of
//! `zonemesh.v1.Ingest` ([`follow_store_health`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use zonemesh_domain::{Hello, NodeName};
use zonemesh_proto::v1;

use super::auth::Guard;
use super::health::StoreProblem;
use super::metrics::{Limit, Metrics};
use super::owner::{Command, Logged, Outbound, Owner, Refusal, RefusalKind, budget_permits};
use super::reader::Reader;
use super::tls::Peer;
use crate::cluster::Log;
use crate::cluster::entry::{Entry, agent_subject, message_id};

/// What one agent may send (`--max-report-*` flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IngestLimits {
    /// Most path summaries in one report; a larger report is refused. Default 10,000; at most
    /// the protocol's own cap, [`zonemesh_domain::MAX_PATHS_PER_REPORT`].
    pub max_report_paths: usize,
    /// Largest encoded message, bytes; a larger one ends the stream. Default 16 MiB.
    pub max_report_bytes: usize,
    /// Messages per second one node may send on average, over all its streams; 0 turns the
    /// limit off. Above it the stream is read more slowly (HTTP/2 flow control holds the agent
    /// back) and nothing is lost. Default 10 (an agent sends one report a window, 10 s by
    /// default).
    pub reports_per_second: f64,
    /// Reports a stream may send at once above the rate (an agent's backlog after a
    /// reconnect). Default 120.
    pub report_burst: u32,
}

impl Default for IngestLimits {
    fn default() -> Self {
        Self {
            max_report_paths: 10_000,
            max_report_bytes: super::MAX_MESSAGE_BYTES,
            reports_per_second: 10.0,
            report_burst: 120,
        }
    }
}

/// A token bucket: how long a report must wait to keep a stream under its rate.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(limits: &IngestLimits, now: Instant) -> Self {
        let burst = f64::from(limits.report_burst.max(1));
        Self {
            rate: limits.reports_per_second,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token; `Some(wait)` when the report must wait that long first.
    fn take(&mut self, now: Instant) -> Option<Duration> {
        if self.rate <= 0.0 {
            return None;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst) - 1.0;
        (self.tokens < 0.0).then(|| Duration::from_secs_f64(-self.tokens / self.rate))
    }
}

/// The Ingest service.
#[derive(Debug, Clone)]
pub struct IngestService {
    limits: IngestLimits,
    /// One token bucket per node, kept across its streams: reconnecting buys no new burst.
    buckets: Arc<std::sync::Mutex<std::collections::HashMap<String, Bucket>>>,
    owner: Owner,
    metrics: Arc<Metrics>,
    guard: Arc<Guard>,
    stop: watch::Receiver<bool>,
    /// Where the streams' tasks run: a runtime of their own, so that decoding thousands of
    /// agents' reports never delays a query's turn on the server's runtime.
    runtime: tokio::runtime::Handle,
    /// With `--cluster`: the log every hello, report and departure goes through.
    cluster: Option<Arc<ClusterEdge>>,
}

/// A replica's edge: what it needs to put an agent's messages into the log.
#[derive(Debug)]
pub struct ClusterEdge {
    /// The log.
    pub log: Log,
    /// Snapshots to decide refusals on before anything is written.
    pub reader: Reader,
    /// Makes session ids unique in the cluster.
    pub sessions: SessionIds,
}

/// Session ids that no other replica gives out: a keyed hash (random keys per process) of a
/// counter.
#[derive(Debug, Default)]
pub struct SessionIds {
    keys: std::collections::hash_map::RandomState,
    next: std::sync::atomic::AtomicU64,
}

impl SessionIds {
    /// A new id, never 0.
    pub fn next(&self) -> u64 {
        use std::hash::BuildHasher;
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.keys.hash_one(n).max(1)
    }
}

impl IngestService {
    /// A service that feeds `owner`, for the agents `guard` lets in.
    /// Streams end when `stop` turns true.
    pub fn new(
        owner: Owner,
        metrics: Arc<Metrics>,
        guard: Arc<Guard>,
        limits: IngestLimits,
        stop: watch::Receiver<bool>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self {
            limits,
            buckets: Arc::default(),
            owner,
            metrics,
            guard,
            stop,
            runtime,
            cluster: None,
        }
    }

    /// A replica's service: hellos, reports and departures go through `edge`'s log.
    pub fn replicated(mut self, edge: Arc<ClusterEdge>) -> Self {
        self.cluster = Some(edge);
        self
    }
}

/// What the owner (or this edge) says to an agent, as the wire says it. A refusal becomes an
/// `Error` message naming the field and the report (the stream stays open); an end becomes the
/// stream's final status.
pub fn to_wire(outbound: Outbound) -> Result<v1::AggregatorMessage, Status> {
    use v1::aggregator_message::Kind;
    let kind = match outbound {
        Outbound::Ack { sequence } => Kind::Ack(v1::Ack { sequence }),
        Outbound::Refused(r) => Kind::Error(v1::Error {
            code: code(r.kind) as i32,
            message: r.message,
            field: r.field,
            sequence: r.sequence,
        }),
        Outbound::Plan(plan) => Kind::Plan(plan.into()),
        Outbound::Grant(grant) => Kind::Grant(grant.into()),
        Outbound::End(r) => return Err(Status::new(code(r.kind), r.message)),
    };
    Ok(v1::AggregatorMessage { kind: Some(kind) })
}

/// The gRPC code of a refusal (through the one table, `crate::ErrorKind`).
fn code(kind: RefusalKind) -> tonic::Code {
    match kind {
        RefusalKind::Invalid => crate::ErrorKind::InvalidArgument.grpc(),
        RefusalKind::OverLimit => crate::ErrorKind::ResourceExhausted.grpc(),
        RefusalKind::Unavailable => crate::ErrorKind::Unavailable.grpc(),
    }
}

/// A refusal of this edge's own: `field` of report `sequence` (0: none).
fn refusal(kind: RefusalKind, field: &str, message: String, sequence: u64) -> Outbound {
    Outbound::Refused(Refusal {
        kind,
        field: field.to_owned(),
        message,
        sequence,
    })
}

/// Keeps the gRPC health of `zonemesh.v1.Ingest` in step with the store's: NOT_SERVING while the
/// store cannot be written (acknowledgements are held), SERVING otherwise. Ends with the owner.
pub fn follow_store_health(
    mut store: watch::Receiver<StoreProblem>,
    health: tonic_health::server::HealthReporter,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let healthy = store.borrow_and_update().is_none();
            if healthy {
                health
                    .set_serving::<v1::ingest_server::IngestServer<IngestService>>()
                    .await;
            } else {
                health
                    .set_not_serving::<v1::ingest_server::IngestServer<IngestService>>()
                    .await;
            }
            if store.changed().await.is_err() {
                return;
            }
        }
    })
}

#[tonic::async_trait]
impl v1::ingest_server::Ingest for IngestService {
    type ConnectStream =
        Pin<Box<dyn Stream<Item = Result<v1::AggregatorMessage, Status>> + Send + 'static>>;

    async fn connect(
        &self,
        request: Request<Streaming<v1::AgentMessage>>,
    ) -> Result<Response<Self::ConnectStream>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        // With a client CA, a peer without a node certificate is refused before it can send
        // anything, whatever it would say.
        self.guard
            .ingest_node(peer.as_ref())
            .map_err(|d| d.status())?;
        let mut inbound = request.into_inner();
        let hello = self.hello(&mut inbound).await?;
        self.guard
            .check_ingest(peer.as_ref(), hello.node.as_str())
            .map_err(|d| {
                tracing::warn!(node = %hello.node, peer = ?peer, "agent refused: {d:?}");
                d.status()
            })?;
        let name = hello.node.clone();
        let zone = hello.zone.to_string();
        let logged = match &self.cluster {
            Some(edge) => Some(log_hello(edge, &hello).await?),
            None => None,
        };
        let (outbound, outbound_rx) = mpsc::channel::<Outbound>(256);
        let (reply, replied) = oneshot::channel();
        self.owner
            .send(Command::Hello {
                hello,
                outbound: outbound.clone(),
                reply,
                logged,
            })
            .await?;
        let (node, session) = replied
            .await
            .map_err(|_| Status::unavailable("the aggregator is shutting down"))??;
        let task = StreamTask {
            owner: self.owner.clone(),
            metrics: self.metrics.clone(),
            stop: self.stop.clone(),
            limits: self.limits,
            buckets: self.buckets.clone(),
            name,
            zone,
            node,
            session,
            outbound,
            cluster: self.cluster.clone(),
        };
        self.runtime.spawn(task.run(inbound));
        // The response stream ends when the server stops, so that graceful shutdown does not
        // wait for agents that never hang up, and when the session is over (every sender of
        // `outbound` dropped: the stream task ended and its last acks went out), so that an agent
        // whose stream the server closed learns it and reconnects.
        let stopped = WatchStream::new(self.stop.clone())
            .filter(|stop| *stop)
            .map(|_| None);
        let stream = AnswerFirst::new(outbound_rx)
            .map(|o| Some(to_wire(o)))
            .chain(tokio_stream::once(None))
            .merge(stopped)
            .take_while(Option::is_some)
            .map(|m| m.expect("take_while keeps Some"));
        Ok(Response::new(Box::pin(stream)))
    }
}

/// One agent's messages with the answer to its hello first. The session takes plans and grants
/// as soon as it is registered, but the hello's ack waits for a durable write, and an agent
/// must hear that ack before anything else. Until it goes out, a plan replaces the plan held
/// and a grant the grant held (the owner counts a plan as sent once it is in the channel, so
/// neither is ever dropped); refusals wait in order, at most as many as the channel holds, and
/// more are dropped (only a client that sends reports before its hello is answered meets that,
/// and those reports stay unacknowledged). Only the stream's end passes at once.
struct AnswerFirst {
    rx: mpsc::Receiver<Outbound>,
    answered: bool,
    held: std::collections::VecDeque<Outbound>,
}

impl AnswerFirst {
    fn new(rx: mpsc::Receiver<Outbound>) -> Self {
        Self {
            rx,
            answered: false,
            held: std::collections::VecDeque::new(),
        }
    }

    /// Keeps `o` until the hello is answered.
    fn hold(&mut self, o: Outbound) {
        let same = |h: &Outbound| {
            matches!(
                (h, &o),
                (Outbound::Plan(_), Outbound::Plan(_)) | (Outbound::Grant(_), Outbound::Grant(_))
            )
        };
        if let Some(slot) = self.held.iter_mut().find(|h| same(h)) {
            *slot = o;
        } else if !matches!(o, Outbound::Refused(_)) || self.held.len() < self.rx.max_capacity() {
            self.held.push_back(o);
        }
    }
}

impl Stream for AnswerFirst {
    type Item = Outbound;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Outbound>> {
        use std::task::Poll;
        if self.answered
            && let Some(o) = self.held.pop_front()
        {
            return Poll::Ready(Some(o));
        }
        loop {
            match std::task::ready!(self.rx.poll_recv(cx)) {
                Some(o @ Outbound::Ack { .. }) => {
                    self.answered = true;
                    return Poll::Ready(Some(o));
                }
                Some(o @ Outbound::End(_)) => return Poll::Ready(Some(o)),
                Some(o) if !self.answered => self.hold(o),
                other => return Poll::Ready(other),
            }
        }
    }
}

/// A replica puts the hello in the log (refused first, as a single aggregator refuses it, over
/// `--max-nodes`), with a new session; answered once applied.
async fn log_hello(edge: &ClusterEdge, hello: &Hello) -> Result<Logged, Status> {
    edge.reader
        .snapshot()
        .admit_hello(hello)
        .map_err(|e| crate::Error::from(e).status())?;
    let session = edge.sessions.next();
    let entry = Entry::Hello {
        hello: hello.clone(),
        session,
        replica: edge.log.config().replica.clone(),
    };
    let seq = edge
        .log
        .append(
            agent_subject(hello.zone.as_str(), "hello"),
            &message_id("h", &hello.node, session),
            entry.encode(),
        )
        .await
        .map_err(|e| e.status())?;
    Ok(Logged { seq, session })
}

impl IngestService {
    /// The stream's first message, which must be a valid Hello.
    async fn hello(&self, inbound: &mut Streaming<v1::AgentMessage>) -> Result<Hello, Status> {
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("hello: the stream ended before a Hello"))?;
        match first.kind {
            Some(v1::agent_message::Kind::Hello(h)) => {
                Hello::try_from(h).map_err(|e| Status::invalid_argument(format!("hello.{e}")))
            }
            Some(v1::agent_message::Kind::Report(_)) => {
                self.metrics.refused_reports.inc();
                Err(Status::invalid_argument(
                    "report: sent before hello; the first message of a stream must be a Hello",
                ))
            }
            None => Err(Status::invalid_argument("kind: empty AgentMessage")),
        }
    }
}

/// One agent's stream after its hello: reads its messages (paced by its node's token bucket),
/// checks each report, hands it to the owner within the ingest budget, and refuses what fails.
struct StreamTask {
    owner: Owner,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
    limits: IngestLimits,
    buckets: Arc<std::sync::Mutex<std::collections::HashMap<String, Bucket>>>,
    /// The node's name (its token bucket's key is the name's text).
    name: NodeName,
    /// The node's zone (its entries' subject).
    zone: String,
    node: zonemesh_engine::NodeId,
    session: u64,
    outbound: mpsc::Sender<Outbound>,
    /// With `--cluster`: the log.
    cluster: Option<Arc<ClusterEdge>>,
}

impl StreamTask {
    async fn run(mut self, mut inbound: Streaming<v1::AgentMessage>) {
        loop {
            let next = tokio::select! {
                next = inbound.message() => next,
                // Dropping the inbound half resets the stream, so the connection can close.
                _ = self.stop.wait_for(|s| *s) => break,
            };
            let message = match next {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(status) => {
                    self.failed(&status).await;
                    break;
                }
            };
            // Every message takes a token, refused ones too.
            if !self.pace().await || !self.handle(message).await {
                break;
            }
        }
        let (node, session) = (self.node, self.session);
        if let Some(edge) = &self.cluster {
            // Best effort, and not waited for: a replica that dies leaves its sessions to be
            // replaced by the agents' next hellos elsewhere.
            let (edge, name, zone) = (edge.clone(), self.name.clone(), self.zone.clone());
            tokio::spawn(async move {
                let entry = Entry::Goodbye {
                    node: name.clone(),
                    session,
                };
                let id = message_id("g", &name, session);
                if let Err(e) = edge
                    .log
                    .append(agent_subject(&zone, "bye"), &id, entry.encode())
                    .await
                {
                    tracing::warn!(node = %name, error = %e, "the departure did not reach the log");
                }
            });
        }
        let _ = self.owner.send(Command::Goodbye { node, session }).await;
    }

    /// The stream failed; a message above `--max-report-bytes` is told to the agent.
    async fn failed(&self, status: &Status) {
        if status.code() == tonic::Code::OutOfRange {
            // tonic's answer to a message above max_decoding_message_size. The agent learns why
            // its stream ends.
            self.metrics.security.limit_hit(Limit::ReportBytes);
            tracing::warn!(node = %self.name, %status, "report above --max-report-bytes; stream closed");
            let why = Refusal {
                kind: RefusalKind::OverLimit,
                field: String::new(),
                message: format!(
                    "a message above --max-report-bytes ({}): {}; stream closed",
                    self.limits.max_report_bytes,
                    status.message()
                ),
                sequence: 0,
            };
            let _ = self.outbound.send(Outbound::End(why)).await;
        } else {
            tracing::debug!(node = %self.name, %status, "agent stream failed");
        }
    }

    /// Waits as long as the node's token bucket says (`--max-report-rate`); false when the
    /// server stops meanwhile.
    async fn pace(&mut self) -> bool {
        if self.limits.reports_per_second <= 0.0 {
            return true;
        }
        let now = zonemesh_common::time::monotonic_now();
        let wait = self
            .buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(self.name.to_string())
            .or_insert_with(|| Bucket::new(&self.limits, now))
            .take(now);
        if let Some(wait) = wait {
            self.metrics.security.limit_hit(Limit::ReportRate);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.stop.wait_for(|s| *s) => return false,
            }
        }
        true
    }

    /// One message after the hello; false when the stream must end.
    async fn handle(&self, message: v1::AgentMessage) -> bool {
        let refused = match message.kind {
            Some(v1::agent_message::Kind::Report(wire)) => return self.report(wire).await,
            Some(v1::agent_message::Kind::Hello(_)) => refusal(
                RefusalKind::Invalid,
                "hello",
                "a second Hello on one stream; open a new stream instead".into(),
                0,
            ),
            None => refusal(RefusalKind::Invalid, "kind", "empty AgentMessage".into(), 0),
        };
        let _ = self.outbound.send(refused).await;
        true
    }

    /// A report: refused over `--max-report-paths` or when a field fails its check; else handed
    /// to the owner once the ingest budget has room. False when the owner is gone.
    async fn report(&self, wire: v1::Report) -> bool {
        let (limits, metrics, name) = (&self.limits, &self.metrics, &self.name);
        let sequence = wire.sequence;
        // Above the protocol's own cap the conversion below refuses it as invalid.
        if wire.paths.len() > limits.max_report_paths
            && wire.paths.len() <= zonemesh_domain::MAX_PATHS_PER_REPORT
        {
            metrics.security.limit_hit(Limit::ReportPaths);
            metrics.refused_reports.inc();
            tracing::warn!(node = %name, sequence, paths = wire.paths.len(), "report refused: too many paths");
            let message = format!(
                "report {sequence}: {} paths, more than the {} of --max-report-paths",
                wire.paths.len(),
                limits.max_report_paths
            );
            let refused = refusal(RefusalKind::OverLimit, "paths", message, sequence);
            let _ = self.outbound.send(refused).await;
            return true;
        }
        // A replica stores the message as it came, once it has passed the checks below.
        let entry = self
            .cluster
            .as_ref()
            .map(|_| Entry::encode_report(name, &wire));
        let report = match zonemesh_proto::convert::report_from_agent(name, wire) {
            Ok(report) => report,
            Err(e) => {
                metrics.refused_reports.inc();
                tracing::warn!(node = %name, sequence, error = %e, "report refused");
                let refused = refusal(
                    RefusalKind::Invalid,
                    e.field(),
                    format!("report {sequence}: {e}"),
                    sequence,
                );
                let _ = self.outbound.send(refused).await;
                return true;
            }
        };
        // Room in the ingest budget first: while the owner is behind, streams stop reading and
        // HTTP/2 flow control holds the agents.
        let permits = budget_permits(report.paths.len());
        let permit = match self.owner.budget().try_acquire_many_owned(permits) {
            Ok(p) => p,
            Err(_) => {
                metrics.ingest_budget_waits.inc();
                match self.owner.budget().acquire_many_owned(permits).await {
                    Ok(p) => p,
                    Err(_) => return false,
                }
            }
        };
        let command = match (&self.cluster, entry) {
            (Some(edge), Some(entry)) => match self.log_report(edge, &report, entry).await {
                Ok(log_seq) => Command::AckAfter {
                    log_seq,
                    session: self.session,
                    outbound: self.outbound.clone(),
                    sequence: report.sequence,
                    permit: Some(permit),
                },
                Err(refusal) => {
                    let end = matches!(refusal, Outbound::End(_));
                    let _ = self.outbound.send(refusal).await;
                    return !end;
                }
            },
            _ => Command::Report {
                node: self.node,
                session: self.session,
                report,
                permit: Some(permit),
            },
        };
        self.owner.send(command).await.is_ok()
    }

    /// A replica refuses a report over the engine's limits (as a single aggregator does, before
    /// anything is written), else puts it in the log: the entry's sequence, or what to tell the
    /// agent (a refusal, or the end of the stream when the log cannot be written).
    async fn log_report(
        &self,
        edge: &ClusterEdge,
        report: &zonemesh_domain::Report,
        entry: Vec<u8>,
    ) -> Result<u64, Outbound> {
        let sequence = report.sequence;
        if let Err(e) = edge.reader.snapshot().admit_report(self.node, report) {
            if let zonemesh_engine::Error::Limit { limit, .. } = &e {
                self.metrics.security.limit_hit(*limit);
            }
            self.metrics.refused_reports.inc();
            tracing::warn!(node = %self.name, sequence, "report refused: {e}");
            return Err(refusal(
                RefusalKind::OverLimit,
                "paths",
                e.to_string(),
                sequence,
            ));
        }
        let id = message_id("r", &self.name, sequence);
        edge.log
            .append(agent_subject(&self.zone, "report"), &id, entry)
            .await
            .map_err(|e| {
                tracing::warn!(node = %self.name, sequence, error = %e, "the log did not take a report; closing the stream");
                Outbound::End(Refusal {
                    kind: RefusalKind::Unavailable,
                    field: String::new(),
                    message: format!("{e}; reconnect (to another replica)"),
                    sequence,
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::health::StoreHealth;

    /// The race CI caught: a plan pushed to a session whose hello's ack still waited for its
    /// write went out first, and the agent (as zonemesh-agent does) took it for a refused hello.
    #[tokio::test]
    async fn the_hellos_ack_goes_out_before_anything_pushed_while_it_waited() {
        use zonemesh_domain::{NodeName, ProbePlan, ThroughputGrant, UnixMs};
        let plan = |version| {
            Outbound::Plan(ProbePlan {
                version,
                window_ms: 10_000,
                targets: vec![],
            })
        };
        let grant = |id| {
            Outbound::Grant(ThroughputGrant {
                id,
                peer: NodeName::parse("peer", "b1").unwrap(),
                peer_address: None,
                peer_port: 7402,
                start: UnixMs(0),
                duration_ms: 1000,
                warmup_ms: 0,
                streams: 1,
                epoch: 0,
            })
        };
        let refused = |sequence| {
            Outbound::Refused(Refusal {
                kind: RefusalKind::Invalid,
                field: "paths".into(),
                message: "bad".into(),
                sequence,
            })
        };
        let (tx, rx) = mpsc::channel(8);
        for o in [
            plan(1),
            refused(4),
            grant(7),
            plan(2),
            grant(8),
            refused(5),
            Outbound::Ack { sequence: 3 },
            plan(3),
        ] {
            tx.send(o).await.unwrap();
        }
        drop(tx);
        let sent: Vec<Outbound> = AnswerFirst::new(rx).collect().await;
        assert_eq!(
            sent,
            [
                Outbound::Ack { sequence: 3 },
                plan(2),
                refused(4),
                grant(8),
                refused(5),
                plan(3),
            ]
        );

        // Only the stream's end is not held; nothing held outlives the session.
        let (tx, rx) = mpsc::channel(8);
        let end = Outbound::End(Refusal {
            kind: RefusalKind::OverLimit,
            field: String::new(),
            message: "too big".into(),
            sequence: 0,
        });
        tx.send(plan(1)).await.unwrap();
        tx.send(end.clone()).await.unwrap();
        drop(tx);
        let sent: Vec<Outbound> = AnswerFirst::new(rx).collect().await;
        assert_eq!(sent, [end]);

        // Closed before the ack: what was held goes with the session.
        let (tx, rx) = mpsc::channel(8);
        tx.send(plan(1)).await.unwrap();
        tx.send(refused(1)).await.unwrap();
        drop(tx);
        let sent: Vec<Outbound> = AnswerFirst::new(rx).collect().await;
        assert_eq!(sent, []);

        // Held refusals stop at the channel's size; a plan and a grant still take their slots.
        let (tx, rx) = mpsc::channel(2);
        let mut first = AnswerFirst::new(rx);
        for o in [refused(1), refused(2), refused(3), plan(1), grant(1)] {
            tx.send(o).await.unwrap();
            assert!(
                poll_once(&mut first).await.is_pending(),
                "nothing goes out before the ack, and the stream stays open"
            );
        }
        // A reader waiting for the next message is woken by the ack.
        let reader = tokio::spawn(async move {
            let mut sent = Vec::new();
            while let Some(o) = first.next().await {
                sent.push(o);
            }
            sent
        });
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!reader.is_finished());
        tx.send(Outbound::Ack { sequence: 0 }).await.unwrap();
        drop(tx);
        let sent = tokio::time::timeout(Duration::from_secs(10), reader)
            .await
            .expect("the ack wakes the reader")
            .unwrap();
        assert_eq!(
            sent,
            [
                Outbound::Ack { sequence: 0 },
                refused(1),
                refused(2),
                plan(1),
                grant(1)
            ]
        );
    }

    /// Polls `stream` once.
    async fn poll_once(stream: &mut AnswerFirst) -> std::task::Poll<Option<Outbound>> {
        std::future::poll_fn(|cx| std::task::Poll::Ready(Pin::new(&mut *stream).poll_next(cx)))
            .await
    }

    #[test]
    fn what_the_owner_says_becomes_the_wire_message() {
        use v1::aggregator_message::Kind;
        let refused = |kind| Refusal {
            kind,
            field: "paths[2].rtt.p50_us".into(),
            message: "report 7: not a number".into(),
            sequence: 7,
        };
        let ack = to_wire(Outbound::Ack { sequence: 41 }).unwrap();
        assert_eq!(ack.kind, Some(Kind::Ack(v1::Ack { sequence: 41 })));
        for (kind, code) in [
            (RefusalKind::Invalid, tonic::Code::InvalidArgument),
            (RefusalKind::OverLimit, tonic::Code::ResourceExhausted),
        ] {
            let wire = to_wire(Outbound::Refused(refused(kind))).unwrap();
            let Some(Kind::Error(e)) = wire.kind else {
                panic!("a refusal is an Error message: {wire:?}");
            };
            assert_eq!(
                (e.code, e.field.as_str(), e.sequence),
                (code as i32, "paths[2].rtt.p50_us", 7)
            );
            assert_eq!(e.message, "report 7: not a number");
        }
        let end = to_wire(Outbound::End(refused(RefusalKind::OverLimit))).unwrap_err();
        assert_eq!(end.code(), tonic::Code::ResourceExhausted);
        assert_eq!(end.message(), "report 7: not a number");
    }

    #[tokio::test]
    async fn the_ingest_health_follows_the_store() {
        use tonic_health::pb::health_check_response::ServingStatus;
        use tonic_health::pb::health_server::Health as _;
        let store = StoreHealth::default();
        let reporter = tonic_health::server::HealthReporter::new();
        let service = tonic_health::server::HealthService::from_health_reporter(reporter.clone());
        let _follower = follow_store_health(store.watch(), reporter);
        let status = || async {
            let request = tonic::Request::new(tonic_health::pb::HealthCheckRequest {
                service: "zonemesh.v1.Ingest".into(),
            });
            service
                .check(request)
                .await
                .map_or(ServingStatus::Unknown as i32, |a| a.into_inner().status)
        };
        let wait_for = |want: ServingStatus| async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while status().await != want as i32 {
                assert!(tokio::time::Instant::now() < deadline, "never {want:?}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        wait_for(ServingStatus::Serving).await;
        store.fail("a store write has not finished in 10 s");
        wait_for(ServingStatus::NotServing).await;
        store.recover();
        wait_for(ServingStatus::Serving).await;
    }

    #[test]
    fn the_bucket_lets_a_burst_through_then_holds_to_the_rate() {
        let limits = IngestLimits {
            reports_per_second: 2.0,
            report_burst: 3,
            ..IngestLimits::default()
        };
        let t0 = zonemesh_common::time::monotonic_now();
        let mut bucket = Bucket::new(&limits, t0);
        for _ in 0..3 {
            assert_eq!(bucket.take(t0), None);
        }
        let wait = bucket.take(t0).expect("the fourth report waits");
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-9, "{wait:?}");
        // Sent after its wait, the next one waits another half second.
        let t1 = t0 + wait;
        let wait = bucket.take(t1).expect("still at the rate");
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-9, "{wait:?}");
        // Idle for long, the bucket refills only to the burst.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.take(t2), None);
        }
        assert!(bucket.take(t2).is_some());
    }

    #[test]
    fn a_zero_rate_never_waits() {
        let limits = IngestLimits {
            reports_per_second: 0.0,
            ..IngestLimits::default()
        };
        let t0 = zonemesh_common::time::monotonic_now();
        let mut bucket = Bucket::new(&limits, t0);
        assert!((0..10_000).all(|_| bucket.take(t0).is_none()));
    }
}
