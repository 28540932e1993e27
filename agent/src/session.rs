//! The stream to the aggregator: `Hello`, then the outbox's reports in order; acknowledgements,
//! plans and throughput grants back. Reconnects with jittered exponential backoff; the last plan
//! keeps running meanwhile.
//!
//! This is the agent's wire edge, both ways: the `Hello` and the reports are domain values up to
//! here, converted to `zonemesh.v1` messages as they are sent; plans and grants are converted to
//! domain values as they arrive, and what does not convert is logged with its field and skipped.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use zonemesh_domain::{Hello, ProbePlan, ThroughputGrant};
use zonemesh_proto::convert::probe_plan;
use zonemesh_proto::v1::{self, agent_message, aggregator_message};

use crate::Error;
use crate::metrics::Metrics;
use crate::outbox::{Outbox, Removed};

/// Reports sent on one connection and not yet acknowledged, at most (flow control: the rest wait
/// in the outbox).
const MAX_IN_FLIGHT: usize = 32;
/// How long the aggregator has to answer a `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What the session shares with the rest of the agent.
#[derive(Debug, Clone)]
pub struct Shared {
    /// Unacknowledged reports.
    pub outbox: Arc<Mutex<Outbox>>,
    /// Woken when a report is queued.
    pub queued: Arc<Notify>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
}

impl Shared {
    fn counted(&self, removed: Removed, acked: bool) {
        if acked {
            self.metrics.acked_reports.add(removed.reports);
            self.metrics.acked_probes.add(removed.probes);
        }
    }

    fn update_depth(&self, outbox: &Outbox) {
        self.metrics.buffered.set(outbox.len() as u64);
    }
}

/// What the aggregator asks of the agent besides acknowledgements.
#[derive(Debug)]
pub enum Instruction {
    /// A new probe plan, with the targets that converted.
    Plan(ProbePlan),
    /// A throughput test to run.
    Grant(ThroughputGrant),
}

/// Connection settings.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Aggregator URLs (replicas), in order.
    pub urls: Vec<String>,
    /// TLS; its files are read at every connect, so rotated certificates are used.
    pub tls: zonemesh_tls::ClientTls,
    /// The `Hello` of every stream.
    pub hello: Hello,
    /// Reconnect backoff bounds.
    pub backoff: (Duration, Duration),
}

/// Keeps a stream to the aggregator until `flush` turns true and the outbox is empty (every
/// report acknowledged); then closes the stream cleanly and returns.
pub async fn run(
    config: SessionConfig,
    shared: Shared,
    instructions: mpsc::UnboundedSender<Instruction>,
    mut flush: watch::Receiver<bool>,
) {
    let mut attempt = 0u32;
    // Agents start at a random replica, so that they spread over them.
    let mut at = rand::random::<u32>() as usize;
    let mut failed_in_a_row = 0usize;
    loop {
        let targets = zonemesh_tls::targets(&config.urls).await;
        let target = &targets[at % targets.len()];
        let mut answered = false;
        let result = connection(
            &config,
            target,
            &shared,
            &instructions,
            &mut flush,
            &mut answered,
        )
        .await;
        let Err(e) = result else { return };
        shared.metrics.connected.set(0);
        shared.metrics.reconnects.inc();
        if answered {
            // It was connected: a new round of the replicas, from the next one.
            (attempt, failed_in_a_row) = (0, 0);
        }
        // The next replica at once, until every one has failed in a row; then back off.
        at = at.wrapping_add(1);
        failed_in_a_row += 1;
        let delay = if failed_in_a_row.is_multiple_of(targets.len()) {
            let delay = backoff(config.backoff, attempt);
            attempt = attempt.saturating_add(1);
            delay
        } else {
            config.backoff.0
        };
        tracing::warn!(error = %e, url = %target.url, retry_in = ?delay, "aggregator stream lost");
        tokio::time::sleep(delay).await;
    }
}

/// The delay before reconnect attempt `attempt`: exponential from `min`, capped at `max`, with
/// equal jitter (half fixed, half random) so that agents restarted together spread out.
pub fn backoff((min, max): (Duration, Duration), attempt: u32) -> Duration {
    let cap = min.saturating_mul(1u32 << attempt.min(20)).min(max);
    let half = cap / 2;
    half + half.mul_f64(rand::random::<f64>())
}

async fn connection(
    config: &SessionConfig,
    target: &zonemesh_tls::Target,
    shared: &Shared,
    instructions: &mpsc::UnboundedSender<Instruction>,
    flush: &mut watch::Receiver<bool>,
    answered: &mut bool,
) -> Result<(), Error> {
    let tls = target.tls(&config.tls);
    let channel = zonemesh_tls::connect(&target.url, &tls, Duration::from_secs(5)).await?;
    let mut client = v1::ingest_client::IngestClient::new(channel);
    let (tx, rx) = mpsc::channel::<v1::AgentMessage>(MAX_IN_FLIGHT + 2);
    let send = |tx: &mpsc::Sender<v1::AgentMessage>, kind| {
        let tx = tx.clone();
        async move {
            tx.send(v1::AgentMessage { kind: Some(kind) })
                .await
                .map_err(|_| Error::Stream("stream closed"))
        }
    };
    let hello = v1::Hello::from(config.hello.clone());
    send(&tx, agent_message::Kind::Hello(hello)).await?;
    let mut inbound = client
        .connect(ReceiverStream::new(rx))
        .await
        .map_err(|status| Error::Rpc {
            what: "Ingest.Connect: ",
            status,
        })?
        .into_inner();

    let first = tokio::time::timeout(HELLO_TIMEOUT, inbound.next())
        .await
        .map_err(|_| Error::Stream("no answer to Hello"))?
        .ok_or(Error::Stream("stream ended before the answer to Hello"))?
        .map_err(|status| Error::Rpc {
            what: "Hello: ",
            status,
        })?;
    let applied = match first.kind {
        Some(aggregator_message::Kind::Ack(ack)) => ack.sequence,
        Some(aggregator_message::Kind::Error(e)) => {
            return Err(Error::HelloRefused {
                message: e.message,
                field: e.field,
            });
        }
        other => return Err(Error::HelloAnswer(format!("{other:?}"))),
    };
    {
        let mut outbox = shared.outbox.lock().expect("outbox lock");
        let removed = outbox.connected(applied);
        shared.counted(removed, true);
        shared.update_depth(&outbox);
    }
    *answered = true;
    shared.metrics.connected.set(1);
    tracing::info!(url = %target.url, applied, "connected to the aggregator");

    loop {
        // Send what is due, at most MAX_IN_FLIGHT unacknowledged.
        loop {
            let next = {
                let mut outbox = shared.outbox.lock().expect("outbox lock");
                if outbox.in_flight() >= MAX_IN_FLIGHT {
                    None
                } else {
                    outbox.next_to_send()
                }
            };
            let Some(report) = next else { break };
            send(&tx, agent_message::Kind::Report(v1::Report::from(report))).await?;
        }
        let done = *flush.borrow() && shared.outbox.lock().expect("outbox lock").is_empty();
        if done {
            // Half-close: the aggregator sees the end of the stream as a goodbye.
            drop(tx);
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                while let Some(Ok(_)) = inbound.next().await {}
            })
            .await;
            shared.metrics.connected.set(0);
            return Ok(());
        }
        tokio::select! {
            message = inbound.next() => match message {
                Some(Ok(m)) => handle(m, shared, instructions),
                Some(Err(status)) => return Err(Error::Rpc { what: "", status }),
                None => return Err(Error::Stream("the aggregator ended the stream")),
            },
            () = shared.queued.notified() => {}
            _ = flush.changed() => {}
        }
    }
}

fn handle(
    message: v1::AggregatorMessage,
    shared: &Shared,
    instructions: &mpsc::UnboundedSender<Instruction>,
) {
    match message.kind {
        Some(aggregator_message::Kind::Ack(ack)) => {
            let mut outbox = shared.outbox.lock().expect("outbox lock");
            let removed = outbox.ack(ack.sequence);
            shared.counted(removed, true);
            shared.update_depth(&outbox);
        }
        Some(aggregator_message::Kind::Plan(wire)) => {
            let (plan, refused) = probe_plan(wire);
            for e in refused {
                tracing::warn!(
                    version = plan.version,
                    field = e.field(),
                    "probe plan: {e}; not probed"
                );
            }
            let _ = instructions.send(Instruction::Plan(plan));
        }
        Some(aggregator_message::Kind::Grant(wire)) => {
            let id = wire.grant_id;
            match ThroughputGrant::try_from(wire) {
                Ok(grant) => {
                    let _ = instructions.send(Instruction::Grant(grant));
                }
                Err(e) => {
                    tracing::warn!(
                        grant = id,
                        field = e.field(),
                        "throughput grant: {e}; skipped"
                    );
                }
            }
        }
        Some(aggregator_message::Kind::Error(e)) => {
            tracing::error!(code = e.code, field = %e.field, sequence = e.sequence, "aggregator refused: {}", e.message);
            if e.sequence != 0 {
                let mut outbox = shared.outbox.lock().expect("outbox lock");
                let removed = outbox.refuse(e.sequence);
                shared.metrics.refused_reports.add(removed.reports);
                shared.update_depth(&outbox);
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_bounds_with_jitter() {
        let bounds = (Duration::from_millis(200), Duration::from_secs(30));
        for attempt in 0..40 {
            let cap = Duration::from_millis(200)
                .saturating_mul(1 << attempt.min(20))
                .min(Duration::from_secs(30));
            let d = backoff(bounds, attempt);
            assert!(d >= cap / 2 && d <= cap, "{attempt}: {d:?} outside {cap:?}");
        }
        let spread: std::collections::BTreeSet<_> = (0..20).map(|_| backoff(bounds, 5)).collect();
        assert!(spread.len() > 10, "jitter spreads reconnects");
    }

    fn target(node: &str, address: &str) -> v1::ProbeTarget {
        v1::ProbeTarget {
            node: node.into(),
            addresses: vec![address.into()],
            probe_port: 7402,
            interval_ms: 1000,
            train_size: 5,
            train_gap_ms: 20,
            timeout_ms: 1000,
            zone: "zone-b".into(),
        }
    }

    fn grant(peer: &str) -> v1::ThroughputGrant {
        v1::ThroughputGrant {
            grant_id: 3,
            peer: peer.into(),
            peer_address: "10.0.0.2".into(),
            peer_port: 7402,
            start_unix_ms: 1_700_000_000_000,
            duration_ms: 1000,
            warmup_ms: 0,
            streams: 1,
            epoch: 0,
        }
    }

    #[test]
    fn plans_and_grants_arrive_as_domain_values_without_what_does_not_convert() {
        let shared = Shared {
            outbox: Arc::new(Mutex::new(Outbox::new(4))),
            queued: Arc::new(Notify::new()),
            metrics: Arc::new(Metrics::new("a", "zone-a", zonemesh_domain::IcmpMode::Raw)),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let message = |kind| v1::AggregatorMessage { kind: Some(kind) };

        let plan = v1::ProbePlan {
            version: 7,
            window_ms: 10_000,
            targets: vec![
                target("b", "10.0.0.2"),
                target("c", "10.0.0"),
                target("d", "10.0.0.4"),
            ],
        };
        handle(message(aggregator_message::Kind::Plan(plan)), &shared, &tx);
        let Ok(Instruction::Plan(plan)) = rx.try_recv() else {
            panic!("a plan, with the targets that convert");
        };
        assert_eq!((plan.version, plan.window_ms), (7, 10_000));
        let nodes: Vec<&str> = plan.targets.iter().map(|t| t.node.as_str()).collect();
        assert_eq!(nodes, ["b", "d"], "c's address is no address: c is skipped");

        handle(
            message(aggregator_message::Kind::Grant(grant("Node_B"))),
            &shared,
            &tx,
        );
        assert!(rx.try_recv().is_err(), "a grant for a bad name is skipped");
        handle(
            message(aggregator_message::Kind::Grant(grant("b"))),
            &shared,
            &tx,
        );
        let Ok(Instruction::Grant(g)) = rx.try_recv() else {
            panic!("a grant");
        };
        assert_eq!((g.id, g.peer.as_str()), (3, "b"));
        assert_eq!(g.peer_address, Some("10.0.0.2".parse().unwrap()));
    }
}
