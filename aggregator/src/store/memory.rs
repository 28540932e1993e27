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
        Contents::from_records(
            self.records
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice())),
            "memory",
        )
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        self.records.extend(codec::records(batch));
        Ok(())
    }

    fn replace_all(&mut self, records: &[super::Record]) -> Result<(), Error> {
        self.records = records.iter().cloned().collect();
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.records
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum()
    }
}
