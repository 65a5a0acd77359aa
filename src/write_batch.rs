//! `WriteBatch`: puts and deletes applied atomically, and the WAL record that carries them.
//!
//! Format: `docs/log_format.md`, *WAL records: write batches*.

use crate::coding::{fixed32_at, fixed64_at, put_length_prefixed, put_varint64, Decoder};
use crate::db::Keyspace;
use crate::key::ValueKind;
use crate::store_id::StoreId;

const HEADER_LEN: usize = 12;

/// Set in an entry's kind byte when a keyspace id (a varint) follows it; entries without it are
/// the default keyspace's, as in every batch written before keyspaces existed.
const IN_KEYSPACE: u8 = 0x80;

/// A group of puts and deletes that [`Db::write`](crate::Db::write) applies atomically: after a
/// crash either all of them are there or none.
///
/// ```
/// let mut batch = siftdb::WriteBatch::new();
/// batch.put(b"a", b"1");
/// batch.delete(b"b");
/// assert_eq!(batch.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    max_key: usize,
    max_value: usize,
    /// Whether it writes to the default keyspace.
    default: bool,
    /// What `put_in` and `delete_in` named; out of line, so that a batch of the default keyspace
    /// alone (the usual one) stays as small to move around as before keyspaces existed.
    named: Option<Box<NamedKeyspaces>>,
}

/// The keyspaces a batch names through `put_in` and `delete_in`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NamedKeyspaces {
    /// The keyspaces it writes to besides the default one, each once.
    ids: Vec<u32>,
    /// The store they belong to; `mixed` if they were of several stores (the write is refused).
    store: StoreId,
    mixed: bool,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::with_capacity(0)
    }

    /// An empty batch with room for about `bytes` of keys and values before it reallocates.
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        let mut rep = Vec::with_capacity(HEADER_LEN + bytes);
        rep.resize(HEADER_LEN, 0);
        WriteBatch {
            rep,
            count: 0,
            max_key: 0,
            max_value: 0,
            default: false,
            named: None,
        }
    }

    /// Sets `key` to `value` in the default keyspace.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.rep.push(ValueKind::Value as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
        self.default = true;
        self.note(key.len(), value.len());
        self
    }

    /// Removes `key` from the default keyspace (a tombstone; deleting an absent key is fine).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref();
        self.rep.push(ValueKind::Deletion as u8);
        put_length_prefixed(&mut self.rep, key);
        self.default = true;
        self.note(key.len(), 0);
        self
    }

    /// Removes every key from `range.start` up to (not including) `range.end` from the default
    /// keyspace: one entry, however many keys the range holds. Keys written after it, in this
    /// batch or later, are not removed. An empty range (`start >= end`) adds nothing.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("session:1", "a")?;
    /// db.put("session:2", "b")?;
    /// let mut batch = siftdb::WriteBatch::new();
    /// batch.delete_range("session:".."session;").put("session:3", "c");
    /// db.write(batch)?;
    /// let left: Vec<_> = db.iter().map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(left, [b"session:3".to_vec()]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_range<K: AsRef<[u8]>>(&mut self, range: std::ops::Range<K>) -> &mut Self {
        let (start, end) = (range.start.as_ref(), range.end.as_ref());
        if start >= end {
            return self;
        }
        self.rep.push(ValueKind::RangeDeletion as u8);
        put_length_prefixed(&mut self.rep, start);
        put_length_prefixed(&mut self.rep, end);
        self.default = true;
        self.note(start.len().max(end.len()), 0);
        self
    }

    /// Sets `key` to `value` in `keyspace`. One batch may write to any keyspaces of one store:
    /// [`Db::write`](crate::Db::write) applies all of it or, after a crash, none of it, in every
    /// keyspace.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// let (users, names) = (db.keyspace("users")?, db.keyspace("names")?);
    /// let mut batch = siftdb::WriteBatch::new();
    /// batch.put_in(&users, b"u1", b"Ada").put_in(&names, b"Ada", b"u1");
    /// db.write(batch)?;
    /// assert_eq!(names.get(b"Ada")?, Some(b"u1".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.put_to(
            keyspace.id(),
            keyspace.store_id(),
            key.as_ref(),
            value.as_ref(),
        )
    }

    /// Sets `key` to `value` in keyspace `id` of store `store`.
    pub(crate) fn put_to(
        &mut self,
        id: u32,
        store: StoreId,
        key: &[u8],
        value: &[u8],
    ) -> &mut Self {
        self.entry_in(id, store, ValueKind::Value);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
        self.note(key.len(), value.len());
        self
    }

    /// Removes `key` from `keyspace` (see [`put_in`](Self::put_in)).
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> &mut Self {
        self.delete_to(keyspace.id(), keyspace.store_id(), key.as_ref())
    }

    /// Removes `key` from keyspace `id` of store `store`.
    pub(crate) fn delete_to(&mut self, id: u32, store: StoreId, key: &[u8]) -> &mut Self {
        self.entry_in(id, store, ValueKind::Deletion);
        put_length_prefixed(&mut self.rep, key);
        self.note(key.len(), 0);
        self
    }

    /// [`delete_range`](Self::delete_range) in `keyspace` (see [`put_in`](Self::put_in)).
    pub fn delete_range_in<K: AsRef<[u8]>>(
        &mut self,
        keyspace: &Keyspace,
        range: std::ops::Range<K>,
    ) -> &mut Self {
        self.delete_range_to(
            keyspace.id(),
            keyspace.store_id(),
            range.start.as_ref(),
            range.end.as_ref(),
        )
    }

    /// Removes the keys in `[start, end)` from keyspace `id` of store `store` (nothing if the
    /// range is empty).
    pub(crate) fn delete_range_to(
        &mut self,
        id: u32,
        store: StoreId,
        start: &[u8],
        end: &[u8],
    ) -> &mut Self {
        if start >= end {
            return self;
        }
        self.entry_in(id, store, ValueKind::RangeDeletion);
        put_length_prefixed(&mut self.rep, start);
        put_length_prefixed(&mut self.rep, end);
        self.note(start.len().max(end.len()), 0);
        self
    }

    /// Starts an entry of `kind` in keyspace `id` of store `store`.
    fn entry_in(&mut self, id: u32, store: StoreId, kind: ValueKind) {
        let named = self.named.get_or_insert_with(|| {
            Box::new(NamedKeyspaces {
                ids: Vec::new(),
                store,
                mixed: false,
            })
        });
        named.mixed |= named.store != store;
        if id == crate::db::version_edit::DEFAULT_KEYSPACE_ID {
            self.rep.push(kind as u8);
            self.default = true;
            return;
        }
        self.rep.push(kind as u8 | IN_KEYSPACE);
        put_varint64(&mut self.rep, u64::from(id));
        if !named.ids.contains(&id) {
            named.ids.push(id);
        }
    }

    fn note(&mut self, key: usize, value: usize) {
        self.count += 1;
        self.max_key = self.max_key.max(key);
        self.max_value = self.max_value.max(value);
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    /// The number of puts and deletes.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        *self = WriteBatch::new();
    }

    /// Bytes of the encoded batch.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// The keyspaces it writes to: the default one (id 0) if it does, then the others.
    pub(crate) fn keyspaces(&self) -> impl Iterator<Item = u32> + '_ {
        let default = self
            .default
            .then_some(crate::db::version_edit::DEFAULT_KEYSPACE_ID);
        let named = self.named.iter().flat_map(|n| n.ids.iter().copied());
        default.into_iter().chain(named)
    }

    /// Whether it writes to a keyspace other than the default one (which is never dropped).
    pub(crate) fn names_keyspaces(&self) -> bool {
        self.named.as_ref().is_some_and(|n| !n.ids.is_empty())
    }

    /// The store its keyspaces belong to, or `Err(())` if they belong to several.
    pub(crate) fn store(&self) -> Result<Option<StoreId>, ()> {
        match &self.named {
            Some(n) if n.mixed => Err(()),
            Some(n) => Ok(Some(n.store)),
            None => Ok(None),
        }
    }

    pub(crate) fn largest_key_and_value(&self) -> (usize, usize) {
        (self.max_key, self.max_value)
    }

    pub(crate) fn set_sequence(&mut self, seq: u64) {
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The sequence of its last entry, once [`set_sequence`](Self::set_sequence) gave it its
    /// first.
    pub(crate) fn last_sequence(&self) -> u64 {
        let first = u64::from_le_bytes(self.rep[..8].try_into().unwrap_or_default());
        (first + u64::from(self.count)).saturating_sub(1)
    }

    pub(crate) fn encoded(&self) -> &[u8] {
        &self.rep
    }
}

/// One entry of a decoded batch.
pub(crate) struct BatchEntry<'a> {
    pub(crate) seq: u64,
    pub(crate) keyspace: u32,
    pub(crate) kind: ValueKind,
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
}

/// Decodes a WAL record into its entries, or `None` if it is malformed.
pub(crate) fn decode_batch(record: &[u8]) -> Option<Vec<BatchEntry<'_>>> {
    let entries = BatchEntries::new(record)?;
    let mut out = Vec::with_capacity(entries.count.min(1 << 16) as usize);
    for e in entries {
        out.push(e?);
    }
    Some(out)
}

/// The entries of a WAL record, decoded one at a time without allocating; an item is `None`
/// where the record turns out malformed (a short entry, an unknown kind, bytes left over).
pub(crate) struct BatchEntries<'a> {
    d: Decoder<'a>,
    first: u64,
    next: u64,
    count: u64,
}

impl<'a> BatchEntries<'a> {
    /// The entries of `record`, or `None` if its header is short or it holds bytes but no entries.
    pub(crate) fn new(record: &'a [u8]) -> Option<BatchEntries<'a>> {
        let entries = BatchEntries {
            first: fixed64_at(record, 0)?,
            count: u64::from(fixed32_at(record, 8)?),
            d: Decoder::new(record.get(HEADER_LEN..)?),
            next: 0,
        };
        // No entries, but bytes after the header: malformed.
        (entries.count > 0 || entries.d.is_empty()).then_some(entries)
    }

    fn entry(&mut self) -> Option<BatchEntry<'a>> {
        let byte = self.d.u8()?;
        let keyspace = if byte & IN_KEYSPACE != 0 {
            self.d.varint32()?
        } else {
            crate::db::version_edit::DEFAULT_KEYSPACE_ID
        };
        let kind = ValueKind::from_byte(byte & !IN_KEYSPACE)?;
        let key = self.d.length_prefixed()?;
        // A range deletion's "value" is its end key.
        let value = match kind {
            ValueKind::Value | ValueKind::RangeDeletion => self.d.length_prefixed()?,
            ValueKind::Deletion => &[],
        };
        let seq = self.first.checked_add(self.next)?;
        self.next += 1;
        if self.next == self.count && !self.d.is_empty() {
            return None;
        }
        Some(BatchEntry {
            seq,
            keyspace,
            kind,
            key,
            value,
        })
    }
}

impl<'a> Iterator for BatchEntries<'a> {
    type Item = Option<BatchEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.count {
            return None;
        }
        let e = self.entry();
        if e.is_none() {
            // Malformed: report it once, then stop.
            self.next = self.count;
        }
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_round_trips_through_its_encoding() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1").delete(b"k2").put(b"", b"");
        b.delete_range(&b"a"[..]..&b"c"[..])
            .delete_range(&b"c"[..]..&b"c"[..]);
        b.set_sequence(100);
        let entries = decode_batch(b.encoded()).unwrap();
        let got: Vec<_> = entries
            .iter()
            .map(|e| (e.seq, e.kind, e.key.to_vec(), e.value.to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                (100, ValueKind::Value, b"k1".to_vec(), b"v1".to_vec()),
                (101, ValueKind::Deletion, b"k2".to_vec(), vec![]),
                (102, ValueKind::Value, vec![], vec![]),
                (103, ValueKind::RangeDeletion, b"a".to_vec(), b"c".to_vec()),
            ]
        );
        let enc = b.encoded();
        for cut in 0..enc.len() {
            assert!(decode_batch(&enc[..cut]).is_none(), "cut at {cut}");
        }
    }

    #[test]
    fn entries_of_other_keyspaces_carry_their_id_and_one_store() {
        let (ours, theirs) = ([1u8; 16], [2u8; 16]);
        let mut b = WriteBatch::new();
        b.put(b"d", b"0")
            .put_to(7, ours, b"k", b"v")
            .delete_to(300, ours, b"gone")
            .delete_range_to(300, ours, b"x", b"y");
        assert_eq!(b.keyspaces().collect::<Vec<_>>(), [0, 7, 300]);
        assert!(b.names_keyspaces());
        assert_eq!(b.store(), Ok(Some(ours)));
        b.set_sequence(5);
        let got: Vec<_> = decode_batch(b.encoded())
            .unwrap()
            .iter()
            .map(|e| (e.seq, e.keyspace, e.kind, e.key.to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                (5, 0, ValueKind::Value, b"d".to_vec()),
                (6, 7, ValueKind::Value, b"k".to_vec()),
                (7, 300, ValueKind::Deletion, b"gone".to_vec()),
                (8, 300, ValueKind::RangeDeletion, b"x".to_vec()),
            ]
        );
        assert_eq!(b.last_sequence(), 8);
        b.put_to(7, theirs, b"x", b"y");
        assert_eq!(b.store(), Err(()));
        // A plain batch names no keyspace and no store.
        let mut plain = WriteBatch::new();
        plain.put(b"a", b"1");
        assert!(!plain.names_keyspaces());
        assert_eq!(plain.store(), Ok(None));
    }
}
