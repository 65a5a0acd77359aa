//! Point lookups: memtable, frozen memtables, then each table that may hold the key, filter first.

use super::Db;
use crate::error::Result;
use crate::key::{lookup_key, InternalKey};
use crate::memtable::Lookup;
use crate::stats::Ticker;

impl Db {
    /// The value of `key`, or `None` if it is absent or deleted.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if a table it must read is damaged; `Error::Io` if a
    /// table cannot be read.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        let inner = &self.inner;
        inner.stats.inc(Ticker::NumberKeysRead);
        let (sv, seq) = inner.read_view();
        // One lookup key for every memtable and table: its allocation is the Get's only one on
        // the way to a filter's "no".
        let lookup = InternalKey(lookup_key(key, seq));
        let found = match sv
            .mem
            .get(&lookup)
            .or_else(|| sv.imm.iter().find_map(|m| m.get(&lookup)))
        {
            Some(hit) => {
                inner.stats.inc(Ticker::MemtableHit);
                Some(hit)
            }
            None => {
                let mut found = None;
                for (level, file) in sv.version.tables_for_key(key) {
                    inner.stats.inc(Ticker::TablesConsulted);
                    let table = inner.tables.get(file.number)?;
                    if let Some(hit) = table.get(&lookup.0, level)? {
                        found = Some(hit);
                        break;
                    }
                }
                found
            }
        };
        Ok(match found {
            Some(Lookup::Value(v)) => {
                inner.stats.inc(Ticker::NumberKeysFound);
                Some(v)
            }
            Some(Lookup::Deleted) | None => None,
        })
    }
}
