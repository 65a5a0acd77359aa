//! The memtable: a concurrent skiplist of internal keys, filled by the writer and read by Gets,
//! scans and the flush.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, user_key, InternalKey, ValueKind};

/// Bytes charged per entry on top of its key and value: the skiplist node and the tag.
const ENTRY_OVERHEAD: usize = 64;

/// The newest entry for a user key, as a memtable or table holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NewestEntry {
    Value(Vec<u8>),
    Deleted,
}

/// One memtable and the WAL file that holds its writes.
pub(crate) struct MemTable {
    map: SkipMap<InternalKey, Vec<u8>>,
    bytes: AtomicUsize,
    log_number: u64,
    /// The sequence of its last write, once frozen (`u64::MAX` until then).
    frozen_at: AtomicU64,
}

impl MemTable {
    pub(crate) fn new(log_number: u64) -> Self {
        MemTable {
            map: SkipMap::new(),
            bytes: AtomicUsize::new(0),
            log_number,
            frozen_at: AtomicU64::new(u64::MAX),
        }
    }

    /// The WAL file whose records this memtable holds.
    pub(crate) fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Records that no more writes come: `last_sequence` is its last write's sequence, and the
    /// next memtable's WAL begins at the sequence after it.
    pub(crate) fn freeze(&self, last_sequence: u64) {
        self.frozen_at.store(last_sequence, Relaxed);
    }

    /// The sequence of its last write, if frozen.
    pub(crate) fn frozen_at(&self) -> Option<u64> {
        Some(self.frozen_at.load(Relaxed)).filter(|&s| s != u64::MAX)
    }

    pub(crate) fn add(&self, seq: u64, kind: ValueKind, key: &[u8], value: &[u8]) {
        self.bytes
            .fetch_add(key.len() + value.len() + ENTRY_OVERHEAD, Relaxed);
        self.map
            .insert(InternalKey::new(key, seq, kind), value.to_vec());
    }

    /// The newest entry for the user key of `lookup` (a [`lookup_key`](crate::key::lookup_key))
    /// with a sequence ≤ the lookup's. A Get builds one lookup key for every memtable and table.
    pub(crate) fn get(&self, lookup: &InternalKey) -> Option<NewestEntry> {
        // An empty memtable (just after a switch or flush) is answered without an epoch pin. Its
        // count is read after the Get's sequence, so it covers every entry that sequence admits.
        if self.map.is_empty() {
            return None;
        }
        let key = user_key(lookup.as_bytes());
        let entry = self.map.lower_bound(Bound::Included(lookup))?;
        let parsed = parse_internal_key(entry.key().as_bytes())?;
        if parsed.user_key != key {
            return None;
        }
        Some(match parsed.kind {
            ValueKind::Value => NewestEntry::Value(entry.value().clone()),
            ValueKind::Deletion => NewestEntry::Deleted,
        })
    }

    /// Approximate bytes held, for deciding when to freeze it.
    pub(crate) fn approximate_bytes(&self) -> usize {
        self.bytes.load(Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(crate) fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            mem: Arc::clone(self),
            current: None,
        }
    }
}

/// An iterator that owns its memtable. It copies the current entry and re-seeks past it on `next`,
/// which keeps it free of borrowed skiplist entries (and so of self-reference).
pub(crate) struct MemTableIter {
    mem: Arc<MemTable>,
    current: Option<(Vec<u8>, Vec<u8>)>,
}

impl MemTableIter {
    fn load(&mut self, bound: Bound<&InternalKey>) {
        self.current = self
            .mem
            .map
            .lower_bound(bound)
            .map(|e| (e.key().as_bytes().to_vec(), e.value().clone()));
    }
}

impl InternalIterator for MemTableIter {
    fn seek_to_first(&mut self) -> Result<()> {
        self.current = self
            .mem
            .map
            .front()
            .map(|e| (e.key().as_bytes().to_vec(), e.value().clone()));
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let t = InternalKey::from_bytes(target);
        self.load(Bound::Included(&t));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some((k, _)) = self.current.take() {
            let k = InternalKey::from_bytes(&k);
            self.load(Bound::Excluded(&k));
        }
        Ok(())
    }

    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        self.current
            .as_ref()
            .map(|(k, _)| k.as_slice())
            .unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.current
            .as_ref()
            .map(|(_, v)| v.as_slice())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_sees_the_newest_visible_version() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(2, ValueKind::Value, b"k", b"v2");
        m.add(3, ValueKind::Deletion, b"k", b"");
        m.add(4, ValueKind::Value, b"ka", b"other");
        assert_eq!(
            m.get(&InternalKey::new(b"k", 1, ValueKind::Value)),
            Some(NewestEntry::Value(b"v1".to_vec()))
        );
        assert_eq!(
            m.get(&InternalKey::new(b"k", 2, ValueKind::Value)),
            Some(NewestEntry::Value(b"v2".to_vec()))
        );
        assert_eq!(
            m.get(&InternalKey::new(b"k", 10, ValueKind::Value)),
            Some(NewestEntry::Deleted)
        );
        assert_eq!(m.get(&InternalKey::new(b"j", 10, ValueKind::Value)), None);
        assert_eq!(m.get(&InternalKey::new(b"ka", 3, ValueKind::Value)), None);
        assert_eq!(m.get(&InternalKey::new(b"", 10, ValueKind::Value)), None);
    }

    #[test]
    fn iterator_walks_in_internal_order() {
        let m = Arc::new(MemTable::new(1));
        for (i, k) in ["b", "a", "c", "a"].iter().enumerate() {
            m.add(i as u64 + 1, ValueKind::Value, k.as_bytes(), &[i as u8]);
        }
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((crate::key::user_key(it.key()).to_vec(), it.value()[0]));
            it.next().unwrap();
        }
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), 3),
                (b"a".to_vec(), 1),
                (b"b".to_vec(), 0),
                (b"c".to_vec(), 2)
            ]
        );
    }
}
