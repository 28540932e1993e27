//! The applier: reads the log in order from where the replica's state ends and hands the owner
//! batches of entries, each with its sequence and the stream's timestamp; meanwhile it keeps the
//! log's head (its last sequence) up to date, so that the replica knows how far behind it is.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use tokio_stream::StreamExt;
use zonemesh_domain::UnixMs;

use super::entry::Entry;
use super::{Log, Progress, STREAM};
use crate::server::owner::{Command, LogItem, Owner};

/// Entries handed to the owner at once, at most.
const BATCH: usize = 256;
/// How often the head poller asks the stream for its last sequence.
const HEAD_EVERY: Duration = Duration::from_millis(500);
/// A consumer that delivers nothing this long while the log's head is past what it delivered is
/// taken for stuck and made again. (After the SIGKILL of the stream's leader server, the client's
/// own recovery of an ordered consumer was seen to take 14 to 51 s.)
const STALLED: Duration = Duration::from_secs(3);

/// Feeds the owner every entry after `applied`, in order, until the owner stops. A broken
/// consumer (a server down, the log's leader moving) is recreated from the next entry.
pub async fn run(log: Log, applied: u64, owner: Owner, progress: Arc<Progress>) {
    let poller = tokio::spawn(poll_head(log.clone(), progress.clone()));
    let mut next = applied + 1;
    loop {
        match follow(&log, next, &owner, &progress).await {
            Ok(Some(last)) => next = last + 1,
            Ok(None) => break, // the owner stopped
            Err((last, e)) => {
                next = last.map_or(next, |l| l + 1);
                tracing::warn!(error = %e, next, "reading the log failed; reading again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    poller.abort();
}

/// Reads from `next` until the consumer breaks; returns the last sequence handed over.
async fn follow(
    log: &Log,
    next: u64,
    owner: &Owner,
    progress: &Progress,
) -> Result<Option<u64>, (Option<u64>, String)> {
    let stream = log
        .context()
        .get_stream(STREAM)
        .await
        .map_err(|e| (None, e.to_string()))?;
    let consumer = stream
        .create_consumer(pull::OrderedConfig {
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: next,
            },
            ..Default::default()
        })
        .await
        .map_err(|e| (None, e.to_string()))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| (None, e.to_string()))?;
    let mut batch: Vec<LogItem> = Vec::new();
    let mut last = None;
    let mut received = next - 1;
    loop {
        let message = match tokio::time::timeout(STALLED, messages.next()).await {
            Ok(Some(message)) => message,
            Ok(None) => break,
            Err(_) if progress.head() > received => {
                return Err((
                    last,
                    format!(
                        "no entry for {STALLED:?} while the log holds up to {}",
                        progress.head()
                    ),
                ));
            }
            Err(_) => continue,
        };
        let message = message.map_err(|e| (last, e.to_string()))?;
        let info = message.info().map_err(|e| (last, e.to_string()))?;
        let seq = info.stream_sequence;
        received = seq;
        let at = UnixMs((info.published.unix_timestamp_nanos() / 1_000_000) as i64);
        progress.head_at(seq + info.pending, zonemesh_common::time::unix_ms());
        let entry = Entry::decode(&message.payload);
        if let Err(e) = &entry {
            tracing::warn!(seq, error = %e, subject = %message.subject, "an entry of the log does not decode; skipped");
        }
        batch.push(LogItem { seq, at, entry });
        if info.pending == 0 || batch.len() >= BATCH {
            if owner
                .send(Command::Apply(std::mem::take(&mut batch)))
                .await
                .is_err()
            {
                return Ok(None);
            }
            last = Some(seq);
        }
    }
    if !batch.is_empty() {
        let seq = batch.last().map(|i| i.seq);
        if owner.send(Command::Apply(batch)).await.is_err() {
            return Ok(None);
        }
        last = seq;
    }
    Err((last, "the consumer's messages ended".into()))
}

/// Asks the stream for its last sequence every [`HEAD_EVERY`], so that the lag is known when no
/// entry arrives (and grows when the log cannot be read).
async fn poll_head(log: Log, progress: Arc<Progress>) {
    loop {
        match tokio::time::timeout(Duration::from_secs(2), log.bounds()).await {
            Ok(Ok((_, last))) => progress.head_at(last, zonemesh_common::time::unix_ms()),
            Ok(Err(e)) => tracing::debug!(error = %e, "the log's head is not known"),
            Err(_) => tracing::debug!("the log's head did not answer in 2 s"),
        }
        tokio::time::sleep(HEAD_EVERY).await;
    }
}
