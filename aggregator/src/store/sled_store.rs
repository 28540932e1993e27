//! The on-disk store: one sled tree, one atomic batch per commit, flushed before it returns.
//!
//! A failed write (a full disk, an I/O error) closes the database: sled keeps a failed flush as
//! an error of the whole instance, so the next commit opens it again — recovery replays sled's
//! log up to the last flushed batch, which holds everything acknowledged — and writes the whole
//! batch once more.

use std::path::{Path, PathBuf};

use super::{Batch, Contents, Store, codec};
use crate::Error;

/// A sled database in a data directory.
#[derive(Debug)]
pub struct SledStore {
    /// `None` after a failed write, until the next commit opens it again.
    db: Option<sled::Db>,
    path: PathBuf,
    cache_bytes: u64,
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
        Ok(Self {
            db: Some(open_db(dir, cache_bytes)?),
            path: dir.to_owned(),
            cache_bytes,
        })
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    fn db(&self) -> Result<&sled::Db, Error> {
        self.db.as_ref().ok_or_else(|| Error::Store {
            path: self.shown(),
            action: "read",
            source: std::io::Error::other("closed after a failed write"),
        })
    }

    fn write(&mut self, batch: &Batch) -> Result<(), Error> {
        if self.db.is_none() {
            self.db = Some(open_db(&self.path, self.cache_bytes)?);
            tracing::info!(path = %self.shown(), "store opened again after a failed write");
        }
        let db = self.db()?;
        let mut b = sled::Batch::default();
        // The meta record is written when the database is opened.
        for (key, value) in codec::records(batch).into_iter().skip(1) {
            b.insert(key, value);
        }
        db.apply_batch(b).map_err(|e| Error::Store {
            path: self.shown(),
            action: "write",
            source: io(e),
        })?;
        db.flush().map_err(|e| Error::Store {
            path: self.shown(),
            action: "flush",
            source: io(e),
        })?;
        Ok(())
    }
}

/// Opens the database in `dir` and checks (or writes) its format marker.
fn open_db(dir: &Path, cache_bytes: u64) -> Result<sled::Db, Error> {
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
    match db.get(codec::META_KEY) {
        Ok(Some(format)) if format.as_ref() != codec::FORMAT => {
            return Err(Error::Corrupt {
                path: shown,
                key: String::from_utf8_lossy(codec::META_KEY).into_owned(),
                reason: codec::CodecError::format(&format),
            });
        }
        Ok(Some(_)) => {}
        Ok(None) => {
            if !db.is_empty() {
                return Err(Error::Corrupt {
                    path: shown,
                    key: String::from_utf8_lossy(codec::META_KEY).into_owned(),
                    reason: codec::CodecError::NoFormat,
                });
            }
            db.insert(codec::META_KEY, codec::FORMAT)
                .and_then(|_| db.flush())
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
    Ok(db)
}

impl Store for SledStore {
    fn load(&self) -> Result<Contents, Error> {
        let mut snapshot = Contents::default();
        for item in self.db()?.iter() {
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
        let result = self.write(batch);
        if result.is_err() {
            // Dropping the database releases its lock, so that the next commit can open it.
            self.db = None;
        }
        result
    }

    fn size_bytes(&self) -> u64 {
        self.db
            .as_ref()
            .map_or(0, |db| db.size_on_disk().unwrap_or(0))
    }

    fn replace_all(&mut self, records: &[super::Record]) -> Result<(), Error> {
        let failed = |action, e: sled::Error| Error::Store {
            path: self.shown(),
            action,
            source: io(e),
        };
        let db = self.db()?;
        let mut b = sled::Batch::default();
        for item in db.iter().keys() {
            let key = item.map_err(|e| failed("read", e))?;
            if key != codec::META_KEY {
                b.remove(key);
            }
        }
        for (key, value) in records {
            if key != codec::META_KEY {
                b.insert(key.as_slice(), value.as_slice());
            }
        }
        db.apply_batch(b).map_err(|e| failed("write", e))?;
        db.flush().map_err(|e| failed("flush", e))?;
        Ok(())
    }
}
