//! The in-memory store: the same records as on disk, kept in a map (for tests and for embedding
//! the engine where durability is not wanted).

use std::collections::BTreeMap;

use super::{Batch, Contents, Store, codec};
use crate::Error;

/// Keeps encoded records in memory.
#[derive(Debug, Default, Clone)]
pub struct MemStore {
    records: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Store for MemStore {
    fn load(&self) -> Result<Contents, Error> {
        let mut snapshot = Contents::default();
        for (key, value) in &self.records {
            codec::decode_into(&mut snapshot, key, value).map_err(|reason| Error::Corrupt {
                path: "memory".into(),
                key: String::from_utf8_lossy(key).into_owned(),
                reason,
            })?;
        }
        Ok(snapshot)
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        self.records
            .insert(codec::META_KEY.to_vec(), codec::FORMAT.to_vec());
        for node in &batch.nodes {
            self.records
                .insert(codec::node_key(&node.name), codec::encode_node(node));
        }
        for row in &batch.rows {
            self.records
                .insert(codec::row_key(&row.src), codec::encode_row(row));
        }
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.records
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum()
    }
}
