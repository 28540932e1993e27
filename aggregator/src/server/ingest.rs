//! The Ingest service: one bidirectional stream per agent.
//!
//! The first message must be a Hello. Reports are checked here, at the edge: a report that fails
//! (a NaN, more replies than probes, a path of another node, ...) is answered on the stream with
//! an `Error` naming the field and the report's sequence, is never applied and never acknowledged,
//! and the stream stays open. A stream that does not start with a valid Hello is closed with
//! INVALID_ARGUMENT.

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::{ReceiverStream, WatchStream};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use zonemesh_proto::domain::{Hello, Report};
use zonemesh_proto::v1;

use super::core::{Command, Core};
use super::metrics::Metrics;

/// The Ingest service.
#[derive(Debug, Clone)]
pub struct IngestService {
    core: Core,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
}

impl IngestService {
    /// A service that feeds `core`.
    /// Streams end when `stop` turns true.
    pub fn new(core: Core, metrics: Arc<Metrics>, stop: watch::Receiver<bool>) -> Self {
        Self {
            core,
            metrics,
            stop,
        }
    }
}

fn refusal(field: &str, message: String, sequence: u64) -> v1::AggregatorMessage {
    v1::AggregatorMessage {
        kind: Some(v1::aggregator_message::Kind::Error(v1::Error {
            code: tonic::Code::InvalidArgument as i32,
            message,
            field: field.to_owned(),
            sequence,
        })),
    }
}

#[tonic::async_trait]
impl v1::ingest_server::Ingest for IngestService {
    type ConnectStream =
        Pin<Box<dyn Stream<Item = Result<v1::AggregatorMessage, Status>> + Send + 'static>>;

    async fn connect(
        &self,
        request: Request<Streaming<v1::AgentMessage>>,
    ) -> Result<Response<Self::ConnectStream>, Status> {
        let mut inbound = request.into_inner();
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("hello: the stream ended before a Hello"))?;
        let hello = match first.kind {
            Some(v1::agent_message::Kind::Hello(h)) => {
                Hello::try_from(h).map_err(|e| Status::invalid_argument(format!("hello.{e}")))?
            }
            Some(v1::agent_message::Kind::Report(_)) => {
                self.metrics.refused_reports.inc();
                return Err(Status::invalid_argument(
                    "report: sent before hello; the first message of a stream must be a Hello",
                ));
            }
            None => return Err(Status::invalid_argument("kind: empty AgentMessage")),
        };
        let name = hello.node.clone();
        let (outbound, outbound_rx) = mpsc::channel(256);
        let (reply, replied) = oneshot::channel();
        self.core
            .send(Command::Hello {
                hello,
                outbound: outbound.clone(),
                reply,
            })
            .await?;
        let (node, session) = replied
            .await
            .map_err(|_| Status::unavailable("the aggregator is shutting down"))?;

        let core = self.core.clone();
        let metrics = self.metrics.clone();
        let mut stop = self.stop.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    next = inbound.message() => next,
                    // Dropping the inbound half resets the stream, so the connection can close.
                    _ = stop.wait_for(|s| *s) => break,
                };
                let message = match next {
                    Ok(Some(m)) => m,
                    Ok(None) => break,
                    Err(status) => {
                        tracing::debug!(node = %name, %status, "agent stream failed");
                        break;
                    }
                };
                match message.kind {
                    Some(v1::agent_message::Kind::Report(wire)) => {
                        let sequence = wire.sequence;
                        match Report::from_agent(&name, wire) {
                            Ok(report) => {
                                let command = Command::Report {
                                    node,
                                    session,
                                    report,
                                };
                                if core.send(command).await.is_err() {
                                    break;
                                }
                            }
                            Err(e) => {
                                metrics.refused_reports.inc();
                                tracing::warn!(node = %name, sequence, error = %e, "report refused");
                                let _ = outbound
                                    .send(Ok(refusal(
                                        e.field(),
                                        format!("report {sequence}: {e}"),
                                        sequence,
                                    )))
                                    .await;
                            }
                        }
                    }
                    Some(v1::agent_message::Kind::Hello(_)) => {
                        let _ = outbound
                            .send(Ok(refusal(
                                "hello",
                                "a second Hello on one stream; open a new stream instead".into(),
                                0,
                            )))
                            .await;
                    }
                    None => {
                        let _ = outbound
                            .send(Ok(refusal("kind", "empty AgentMessage".into(), 0)))
                            .await;
                    }
                }
            }
            let _ = core.send(Command::Goodbye { node, session }).await;
        });
        // The response stream ends when the server stops, so that graceful shutdown does not
        // wait for agents that never hang up.
        let stopped = WatchStream::new(self.stop.clone())
            .filter(|stop| *stop)
            .map(|_| None);
        let stream = ReceiverStream::new(outbound_rx)
            .map(Some)
            .merge(stopped)
            .take_while(Option::is_some)
            .map(|m| m.expect("take_while keeps Some"));
        Ok(Response::new(Box::pin(stream)))
    }
}
