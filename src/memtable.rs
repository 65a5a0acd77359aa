//! The memtable: a concurrent skiplist of internal keys, filled by the writer and read by Gets,
//! scans and the flush.

use std::ops::Bound;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::Arc;

use crossbeam_skiplist::map::Entry;
use crossbeam_skiplist::SkipMap;
use parking_lot::RwLock;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, user_key, InternalKey, ValueKind, MAX_SEQUENCE, SEEK_KIND};
use crate::memtable_filter::{MemtableFilter, DEFAULT_WRITE_BUFFER_SIZE};
use crate::range_tombstones::{FragmentedRangeTombstones, RangeTombstone};

/// Bytes charged per entry on top of its key and value: the skiplist node and the tag.
const ENTRY_OVERHEAD: usize = 64;

/// The newest entry for a user key, as a memtable or table holds it; the value as `V` (a copy,
/// or a view into its block for `Db::get_pinned`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NewestEntry<V = Vec<u8>> {
    Value(V),
    /// A value that expires: the stored value, its expiry time at the end (`db/ttl.rs`).
    Expiring(V),
    /// A merge operand: the read resolves it, and the older versions beneath it, through the
    /// cursor (`merge_operator.rs`).
    Merge(V),
    Deleted,
    /// Deleted by a range tombstone (which may lie in a newer memtable or table than the key's
    /// own entries, or have none beneath it).
    RangeDeleted,
}

/// One memtable and the WAL file that holds its writes.
pub(crate) struct MemTable {
    map: SkipMap<InternalKey, Vec<u8>>,
    /// Its user keys, so that a Get of a key it does not hold skips the skiplist.
    filter: MemtableFilter,
    bytes: AtomicUsize,
    log_number: u64,
    /// The sequence of its last write, once frozen (`u64::MAX` until then).
    frozen_at: AtomicU64,
    /// Its range tombstones, beside the skiplist: a Get asks them only when `has_range_tombstones`
    /// says there are any, so a memtable without them costs one load.
    range_tombstones: RwLock<MemRangeTombstones>,
    has_range_tombstones: AtomicBool,
    /// Whether it holds a merge operand: its flush then walks it in a way that can combine them.
    has_merges: AtomicBool,
}

/// A memtable's range tombstones as written, and fragmented once a read asks (and again after
/// the next range deletion): fragmenting on every write would cost a run of range deletions
/// time quadratic in their number.
#[derive(Default)]
struct MemRangeTombstones {
    written: Vec<RangeTombstone>,
    fragmented: Option<Arc<FragmentedRangeTombstones>>,
}

impl MemTable {
    /// An empty memtable whose writes go to WAL file `log_number`, its filter sized for the
    /// default write buffer (a keyspace's memtables are made by `for_buffer`, at its size).
    pub(crate) fn new(log_number: u64) -> Self {
        Self::for_buffer(log_number, DEFAULT_WRITE_BUFFER_SIZE)
    }

    /// An empty memtable whose filter is sized for a write buffer of `write_buffer_size` bytes.
    pub(crate) fn for_buffer(log_number: u64, write_buffer_size: usize) -> Self {
        MemTable {
            map: SkipMap::new(),
            filter: MemtableFilter::new(write_buffer_size),
            bytes: AtomicUsize::new(0),
            log_number,
            frozen_at: AtomicU64::new(u64::MAX),
            range_tombstones: RwLock::default(),
            has_range_tombstones: AtomicBool::new(false),
            has_merges: AtomicBool::new(false),
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

    /// Adds an entry: a value or tombstone of `key`, or (`ValueKind::RangeDeletion`) a range
    /// tombstone from `key` up to `value`.
    pub(crate) fn add(&self, seq: u64, kind: ValueKind, key: &[u8], value: &[u8]) {
        self.bytes
            .fetch_add(key.len() + value.len() + ENTRY_OVERHEAD, Relaxed);
        if kind == ValueKind::RangeDeletion {
            let mut r = self.range_tombstones.write();
            r.written.push(RangeTombstone {
                start: key.to_vec(),
                end: value.to_vec(),
                seq,
            });
            r.fragmented = None;
            // Published before the write's sequence is: a read that sees the sequence sees this.
            self.has_range_tombstones.store(true, Release);
            return;
        }
        if kind == ValueKind::Merge {
            self.has_merges.store(true, Relaxed);
        }
        self.filter.add(key);
        self.map
            .insert(InternalKey::new(key, seq, kind), value.to_vec());
    }

    /// Whether it holds a merge operand (read once no write comes: by its flush).
    pub(crate) fn has_merges(&self) -> bool {
        self.has_merges.load(Relaxed)
    }

    /// Its range tombstones, fragmented; `None` if it has none.
    pub(crate) fn range_tombstones(&self) -> Option<Arc<FragmentedRangeTombstones>> {
        if !self.has_range_tombstones.load(Acquire) {
            return None;
        }
        if let Some(f) = &self.range_tombstones.read().fragmented {
            return Some(Arc::clone(f));
        }
        let mut r = self.range_tombstones.write();
        let r = &mut *r;
        let fragmented = r.fragmented.get_or_insert_with(|| {
            Arc::new(FragmentedRangeTombstones::new(r.written.iter().cloned()))
        });
        Some(Arc::clone(fragmented))
    }

    /// The newest entry for the user key of `lookup` (a [`lookup_key`](crate::key::lookup_key))
    /// with a sequence ≤ the lookup's, range tombstones included. A Get builds one lookup key
    /// for every memtable and table.
    #[inline]
    pub(crate) fn get(&self, lookup: &InternalKey) -> Option<NewestEntry> {
        let point = self.get_point(lookup);
        if !self.has_range_tombstones.load(Acquire) {
            return point.map(|(e, _)| e);
        }
        let tombstones = self.range_tombstones()?;
        let parsed = parse_internal_key(lookup.as_bytes())?;
        let covering = tombstones.covering_sequence(parsed.user_key, parsed.seq);
        match point {
            Some((_, seq)) if seq < covering => Some(NewestEntry::RangeDeleted),
            None if covering > 0 => Some(NewestEntry::RangeDeleted),
            point => point.map(|(e, _)| e),
        }
    }

    /// The newest value or point tombstone for the user key of `lookup`, and its sequence.
    #[inline]
    fn get_point(&self, lookup: &InternalKey) -> Option<(NewestEntry, u64)> {
        // An empty memtable (just after a switch or flush) is answered without an epoch pin. Its
        // count is read after the Get's sequence, so it covers every entry that sequence admits.
        if self.map.is_empty() {
            return None;
        }
        let key = user_key(lookup.as_bytes());
        if !self.filter.may_contain(key) {
            return None;
        }
        let entry = self.map.lower_bound(Bound::Included(lookup))?;
        let parsed = parse_internal_key(entry.key().as_bytes())?;
        if parsed.user_key != key {
            return None;
        }
        Some((
            match parsed.kind {
                ValueKind::Value => NewestEntry::Value(entry.value().clone()),
                ValueKind::ExpiringValue => NewestEntry::Expiring(entry.value().clone()),
                ValueKind::Merge => NewestEntry::Merge(entry.value().clone()),
                ValueKind::Deletion | ValueKind::RangeDeletion => NewestEntry::Deleted,
            },
            parsed.seq,
        ))
    }

    /// The sequence of the newest entry of user key `key` (value, tombstone or range tombstone
    /// over it), if it holds one.
    pub(crate) fn newest_sequence(&self, key: &[u8]) -> Option<u64> {
        let covering = self
            .range_tombstones()
            .map(|t| t.covering_sequence(key, MAX_SEQUENCE))
            .filter(|&s| s > 0);
        if self.map.is_empty() {
            return covering;
        }
        let lookup = InternalKey::new(key, MAX_SEQUENCE, SEEK_KIND);
        let point = self
            .map
            .lower_bound(Bound::Included(&lookup))
            .and_then(|entry| {
                let parsed = parse_internal_key(entry.key().as_bytes())?;
                (parsed.user_key == key).then_some(parsed.seq)
            });
        point.max(covering)
    }

    /// Whether it holds an entry of a user key within `(start, end)` with a sequence above
    /// `sequence`. Walks every entry in the range.
    pub(crate) fn has_newer_in_range(
        &self,
        (start, end): (Bound<&[u8]>, Bound<&[u8]>),
        sequence: u64,
    ) -> bool {
        if let Some(t) = self.range_tombstones()
            && t.newest_overlapping((start, end)) > Some(sequence)
        {
            return true;
        }
        if self.map.is_empty() {
            return false;
        }
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) => {
                Bound::Included(InternalKey::new(k, MAX_SEQUENCE, SEEK_KIND))
            }
            Bound::Unbounded => Bound::Unbounded,
        };
        for entry in self.map.range((first, Bound::Unbounded)) {
            let Some(parsed) = parse_internal_key(entry.key().as_bytes()) else {
                continue;
            };
            if matches!(start, Bound::Excluded(k) if parsed.user_key == k) {
                continue;
            }
            if !crate::key_range::below_end(parsed.user_key, end) {
                break;
            }
            if parsed.seq > sequence {
                return true;
            }
        }
        false
    }

    /// Approximate bytes held, for deciding when to freeze it.
    pub(crate) fn approximate_bytes(&self) -> usize {
        self.bytes.load(Relaxed)
    }

    /// How many entries it holds: every version of every key, tombstones included.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The largest user key it holds an entry of (value or tombstone, any version).
    pub(crate) fn largest_user_key(&self) -> Option<Vec<u8>> {
        self.map
            .back()
            .map(|e| user_key(e.key().as_bytes()).to_vec())
    }

    /// Whether it holds nothing: no entry and no range tombstone.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty() && !self.has_range_tombstones.load(Acquire)
    }

    /// Calls `f` with each entry's internal key and value, in order, without copying them: one
    /// step per entry where [`MemTableIter`] searches the skiplist again, for walks that need no
    /// cursor (a flush). Stops at the first error `f` returns.
    ///
    /// # Errors
    /// The first error `f` returns.
    pub(crate) fn for_each_entry(
        &self,
        mut f: impl FnMut(&[u8], &[u8]) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        for entry in self.map.iter() {
            f(entry.key().as_bytes(), entry.value())?;
        }
        Ok(())
    }

    pub(crate) fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            mem: Arc::clone(self),
            current: Current::default(),
        }
    }
}

/// An iterator that owns its memtable. It copies the current entry into buffers it reuses and
/// re-seeks from it on every step (`next` to the first entry after it, `prev` to the last before
/// it), which keeps it free of borrowed skiplist entries (and so of self-reference). A step is one
/// skiplist search and allocates nothing once the buffers have grown to the longest entry.
pub(crate) struct MemTableIter {
    mem: Arc<MemTable>,
    current: Current,
}

/// The entry a [`MemTableIter`] is on, copied out of the skiplist.
#[derive(Default)]
struct Current {
    /// The internal key; also the buffer a seek's target is copied into.
    key: Vec<u8>,
    value: Vec<u8>,
    valid: bool,
}

impl Current {
    /// Copies `entry` (or records the end).
    fn load<V: AsRef<[u8]>>(&mut self, entry: Option<Entry<'_, InternalKey, V>>) {
        self.key.clear();
        self.value.clear();
        self.valid = entry.is_some();
        if let Some(e) = entry {
            self.key.extend_from_slice(e.key().as_bytes());
            self.value.extend_from_slice(e.value().as_ref());
        }
    }

    /// The key buffer as a skiplist key, without copying it: `InternalKey` orders and compares by
    /// its bytes, whichever way they are stored. Give it back with [`Current::restore`].
    fn take_key(&mut self) -> InternalKey {
        InternalKey::Heap(std::mem::take(&mut self.key))
    }

    fn restore(&mut self, probe: InternalKey) {
        if let InternalKey::Heap(buf) = probe {
            self.key = buf;
        }
    }
}

/// Where a [`MemTableIter`] positions itself relative to a key.
#[derive(Clone, Copy)]
enum Toward {
    /// The first entry ≥ the key.
    AtOrAfter,
    /// The first entry > the key.
    After,
    /// The last entry ≤ the key.
    AtOrBefore,
    /// The last entry < the key.
    Before,
}

impl MemTableIter {
    /// Positions relative to the key in the key buffer.
    fn position(&mut self, toward: Toward) {
        let probe = self.current.take_key();
        let map = &self.mem.map;
        let entry = match toward {
            Toward::AtOrAfter => map.lower_bound(Bound::Included(&probe)),
            Toward::After => map.lower_bound(Bound::Excluded(&probe)),
            Toward::AtOrBefore => map.upper_bound(Bound::Included(&probe)),
            Toward::Before => map.upper_bound(Bound::Excluded(&probe)),
        };
        self.current.restore(probe);
        self.current.load(entry);
    }

    /// Positions relative to `target`, copied into the key buffer (no allocation once it has
    /// grown).
    fn position_at(&mut self, target: &[u8], toward: Toward) {
        self.current.key.clear();
        self.current.key.extend_from_slice(target);
        self.position(toward);
    }
}

impl InternalIterator for MemTableIter {
    fn seek_to_first(&mut self) -> Result<()> {
        self.current.load(self.mem.map.front());
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.current.load(self.mem.map.back());
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.position_at(target, Toward::AtOrAfter);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.position_at(target, Toward::AtOrBefore);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if self.current.valid {
            self.position(Toward::After);
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if self.current.valid {
            self.position(Toward::Before);
        }
        Ok(())
    }

    fn valid(&self) -> bool {
        self.current.valid
    }

    fn key(&self) -> &[u8] {
        &self.current.key
    }

    fn value(&self) -> &[u8] {
        &self.current.value
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
    #[test]
    fn iterator_walks_both_ways_and_seeks_for_prev() {
        use crate::iter::check_against_model;
        use crate::key::{compare_internal, internal_key, lookup_key};
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};

        let mut rng = StdRng::seed_from_u64(5);
        let m = Arc::new(MemTable::new(1));
        let mut model = Vec::new();
        // Short keys (stored inline in the skiplist) and long ones (on the heap), several versions
        // each, values of every small size.
        for seq in 1..=1500u64 {
            let n = rng.gen_range(0..300);
            let user = if n % 3 == 0 {
                format!("{n:03}-a-key-long-enough-to-live-on-the-heap").into_bytes()
            } else {
                format!("{n:03}").into_bytes()
            };
            let kind = if rng.gen_bool(0.2) {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let value: Vec<u8> = (0..rng.gen_range(0..50)).map(|_| rng.r#gen()).collect();
            m.add(seq, kind, &user, &value);
            model.push((internal_key(&user, seq, kind), value));
        }
        model.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let mut probes: Vec<Vec<u8>> = model.iter().map(|e| e.0.clone()).collect();
        for n in 0..310 {
            let user = format!("{n:03}").into_bytes();
            probes.push(lookup_key(&user, rng.gen_range(0..1600)));
            probes.push(internal_key(&user, 0, ValueKind::Deletion));
        }
        probes.push(Vec::new());
        let mut it = m.iter();
        check_against_model(&mut it, &model, &probes, &mut rng, 4000);

        // An empty memtable is invalid both ways.
        let empty = Arc::new(MemTable::new(2));
        let mut it = empty.iter();
        it.seek_to_last().unwrap();
        assert!(!it.valid());
        it.seek_for_prev(&probes[0]).unwrap();
        assert!(!it.valid());
    }
}
