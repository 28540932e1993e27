//! The on-disk store: one sled tree, one atomic batch per commit, flushed before it returns.

use std::path::{Path, PathBuf};

use super::{Batch, Snapshot, Store, codec};
use crate::Error;

/// A sled database in a data directory.
#[derive(Debug)]
pub struct SledStore {
    db: sled::Db,
    path: PathBuf,
}

fn io(e: sled::Error) -> std::io::Error {
    match e {
        sled::Error::Io(e) => e,
        other => std::io::Error::other(other.to_string()),
    }
}

/// sled's page cache unless told otherwise: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

impl SledStore {
    /// Opens (or creates) the store in `dir`. A directory that sled cannot read, or whose records
    /// are not this aggregator's, is an error here, never an empty store.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        Self::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// [`open`](Self::open) with sled's page cache limited to `cache_bytes`. The engine holds
    /// every figure in memory and reads the store only at start, so the cache serves writes only;
    /// sled's own default (1 GiB) costs memory for nothing.
    pub fn open_with_cache(dir: &Path, cache_bytes: u64) -> Result<Self, Error> {
        let shown = dir.display().to_string();
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            .mode(sled::Mode::HighThroughput)
            .open()
            .map_err(|e| Error::Store {
                path: shown.clone(),
                action: "open",
                source: io(e),
            })?;
        let store = Self {
            db,
            path: dir.to_owned(),
        };
        match store.db.get(codec::META_KEY) {
            Ok(Some(format)) if format.as_ref() != codec::FORMAT => {
                return Err(Error::Corrupt {
                    path: shown,
                    key: String::from_utf8_lossy(codec::META_KEY).into_owned(),
                    reason: format!(
                        "format {:?} is not {:?}",
                        String::from_utf8_lossy(&format),
                        String::from_utf8_lossy(codec::FORMAT)
                    ),
                });
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                if !store.db.is_empty() {
                    return Err(Error::Corrupt {
                        path: shown,
                        key: String::from_utf8_lossy(codec::META_KEY).into_owned(),
                        reason: "records without a format marker: not a zonemesh store".into(),
                    });
                }
                store
                    .db
                    .insert(codec::META_KEY, codec::FORMAT)
                    .and_then(|_| store.db.flush())
                    .map_err(|e| Error::Store {
                        path: shown,
                        action: "initialise",
                        source: io(e),
                    })?;
            }
            Err(e) => {
                return Err(Error::Store {
                    path: shown,
                    action: "read the format marker",
                    source: io(e),
                });
            }
        }
        Ok(store)
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }
}

impl Store for SledStore {
    fn load(&self) -> Result<Snapshot, Error> {
        let mut snapshot = Snapshot::default();
        for item in self.db.iter() {
            let (key, value) = item.map_err(|e| Error::Store {
                path: self.shown(),
                action: "read",
                source: io(e),
            })?;
            codec::decode_into(&mut snapshot, &key, &value).map_err(|reason| Error::Corrupt {
                path: self.shown(),
                key: String::from_utf8_lossy(&key).into_owned(),
                reason,
            })?;
        }
        Ok(snapshot)
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        let mut b = sled::Batch::default();
        for node in &batch.nodes {
            b.insert(codec::node_key(&node.name), codec::encode_node(node));
        }
        for row in &batch.rows {
            b.insert(codec::row_key(&row.src), codec::encode_row(row));
        }
        self.db.apply_batch(b).map_err(|e| Error::Store {
            path: self.shown(),
            action: "write",
            source: io(e),
        })?;
        self.db.flush().map_err(|e| Error::Store {
            path: self.shown(),
            action: "flush",
            source: io(e),
        })?;
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }
}
