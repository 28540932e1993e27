//! A replica's whole state as one object of the snapshots' bucket (`snapshot-<replica>`), with
//! the last entry it holds in the object's metadata. Every replica writes its own every few
//! minutes; a new replica, or one that the stream's retention passed by, starts from the newest
//! (the highest entry) and reads the log from the next entry on.

use std::collections::HashMap;

use prost::Message;
use tokio::io::AsyncReadExt;

use super::Log;
use crate::Error;
use crate::store::{Batch, Record, codec};

/// The metadata key holding the last entry a snapshot holds.
const APPLIED: &str = "applied-seq";

#[derive(Clone, PartialEq, Message)]
struct RecordBytes {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
struct SnapshotRecord {
    #[prost(message, repeated, tag = "1")]
    records: Vec<RecordBytes>,
}

/// A state as the stores write it (every record of a full [`Batch`], its cluster place set).
pub fn encode(batch: &Batch) -> Vec<u8> {
    SnapshotRecord {
        records: codec::records(batch)
            .into_iter()
            .map(|(key, value)| RecordBytes { key, value })
            .collect(),
    }
    .encode_to_vec()
}

/// The records of a snapshot.
pub fn decode(bytes: &[u8]) -> Result<Vec<Record>, Error> {
    let record = SnapshotRecord::decode(bytes).map_err(|e| Error::Corrupt {
        path: super::SNAPSHOTS.into(),
        key: "snapshot".into(),
        reason: codec::CodecError::Decode(e),
    })?;
    Ok(record
        .records
        .into_iter()
        .map(|r| (r.key, r.value))
        .collect())
}

/// The object name of `replica`'s snapshot.
fn object_name(replica: &str) -> String {
    format!("snapshot-{replica}")
}

/// Writes `blob` (holding the log up to `applied`) as this replica's snapshot.
pub async fn write(log: &Log, applied: u64, blob: Vec<u8>) -> Result<(), Error> {
    let bucket = log.snapshots().await?;
    let meta = async_nats::jetstream::object_store::ObjectMetadata {
        name: object_name(&log.config().replica),
        description: Some(format!("zonemesh replica {}", log.config().replica)),
        metadata: HashMap::from([(APPLIED.to_owned(), applied.to_string())]),
        ..Default::default()
    };
    bucket
        .put(meta, &mut blob.as_slice())
        .await
        .map_err(|e| Error::Cluster(format!("writing the snapshot: {e}")))?;
    Ok(())
}

/// The newest snapshot in the bucket (the highest entry held; of equals, the largest), with that
/// entry, if any holds at least `at_least`.
pub async fn newest(log: &Log, at_least: u64) -> Result<Option<(u64, Vec<u8>)>, Error> {
    use tokio_stream::StreamExt;
    let bucket = log.snapshots().await?;
    let mut list = bucket
        .list()
        .await
        .map_err(|e| Error::Cluster(format!("listing the snapshots: {e}")))?;
    let mut best: Option<((u64, usize), String)> = None;
    while let Some(info) = list.next().await {
        let info = info.map_err(|e| Error::Cluster(format!("listing the snapshots: {e}")))?;
        let Some(applied) = info
            .metadata
            .get(APPLIED)
            .and_then(|a| a.parse::<u64>().ok())
        else {
            continue;
        };
        let rank = (applied, info.size);
        if applied >= at_least && best.as_ref().is_none_or(|(b, _)| rank > *b) {
            best = Some((rank, info.name));
        }
    }
    let Some(((applied, _), name)) = best else {
        return Ok(None);
    };
    let mut object = bucket
        .get(&name)
        .await
        .map_err(|e| Error::Cluster(format!("reading snapshot {name}: {e}")))?;
    let mut blob = Vec::new();
    object
        .read_to_end(&mut blob)
        .await
        .map_err(|e| Error::Cluster(format!("reading snapshot {name}: {e}")))?;
    Ok(Some((applied, blob)))
}
