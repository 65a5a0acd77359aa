//! Point lookups: memtable, frozen memtables, then each table that may hold the key, filter first.
//!
//! The way to a filter's "no" allocates nothing: the lookup key is built inline (a long one in a
//! per-thread buffer), pinned table readers are borrowed from the version, and the key is hashed
//! once for all tables.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use super::Db;
use crate::error::Result;
use crate::filter::FilterProbe;
use crate::key::{append_internal_key, InternalKey, ValueKind, INLINE_KEY_BYTES, TAG_LEN};
use crate::memtable::Lookup;
use crate::stats::Ticker;

/// A lookup buffer larger than this is not kept for the thread's next Get.
const KEPT_LOOKUP_BYTES: usize = 4096;

thread_local! {
    /// The buffer of Gets whose lookup key is too long to be stored inline.
    static LONG_LOOKUP_KEY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Calls `f` with the lookup key of `(key, seq)`: the newest entry of `key` visible at `seq`
/// (Value sorts before Deletion at one sequence). A short key is built inline; a long one in this
/// thread's buffer, so neither allocates once the buffer has grown.
fn with_lookup_key<R>(key: &[u8], seq: u64, f: impl FnOnce(&InternalKey) -> R) -> R {
    if key.len() + TAG_LEN <= INLINE_KEY_BYTES {
        return f(&InternalKey::new(key, seq, ValueKind::Value));
    }
    // Taken out of the cell for the call: were it ever used re-entrantly, the inner use would
    // find it empty and allocate its own rather than clobber this one.
    let mut buf = LONG_LOOKUP_KEY.take();
    buf.clear();
    append_internal_key(&mut buf, key, seq, ValueKind::Value);
    let lookup = InternalKey::Heap(buf);
    let r = f(&lookup);
    if let InternalKey::Heap(buf) = lookup {
        if buf.capacity() <= KEPT_LOOKUP_BYTES {
            LONG_LOOKUP_KEY.set(buf);
        }
    }
    r
}

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
        // As `read_view`: the super-version first, then the sequence. The read lock is held for
        // the whole Get; installers wait for it, briefly.
        let sv = inner.current.read();
        let seq = inner.last_sequence.load(Ordering::Acquire);
        let found = with_lookup_key(key, seq, |lookup| -> Result<Option<Lookup>> {
            if let Some(hit) = sv
                .mem
                .get(lookup)
                .or_else(|| sv.imm.iter().find_map(|m| m.get(lookup)))
            {
                inner.stats.inc(Ticker::MemtableHit);
                return Ok(Some(hit));
            }
            let probe = FilterProbe::new(key);
            let mut consulted = 0;
            let mut found = None;
            for (level, file) in sv.version.tables_for_key(key) {
                consulted += 1;
                let table = inner.tables.get(file)?;
                if let Some(hit) = table.get(lookup.as_bytes(), &probe, level)? {
                    found = Some(hit);
                    break;
                }
            }
            inner.stats.add(Ticker::TablesConsulted, consulted);
            Ok(found)
        })?;
        Ok(match found {
            Some(Lookup::Value(v)) => {
                inner.stats.inc(Ticker::NumberKeysFound);
                Some(v)
            }
            Some(Lookup::Deleted) | None => None,
        })
    }
}
