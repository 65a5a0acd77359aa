//! `WriteBatch`: puts and deletes applied atomically, and the WAL record that carries them.
//!
//! Format: `docs/log_format.md`, *WAL records: write batches*.

use std::time::Duration;

use crate::coding::{fixed32_at, fixed64_at, put_length_prefixed, put_varint64, Decoder};
use crate::error::Error;
use crate::key::ValueKind;
use crate::key_range::KeyRange;
use crate::store_id::{StoreId, DEFAULT_KEYSPACE_ID};

const HEADER_LEN: usize = 12;

/// The largest key accepted.
pub(crate) const MAX_KEY_BYTES: usize = 64 << 10;
/// The largest value accepted.
pub(crate) const MAX_VALUE_BYTES: usize = 256 << 20;

/// `Ok` for a key and a value of these sizes (in bytes) a write accepts.
///
/// # Errors
/// `Error::InvalidArgument` for a key over [`MAX_KEY_BYTES`] or a value over
/// [`MAX_VALUE_BYTES`].
pub(crate) fn check_sizes(key: usize, value: usize) -> crate::error::Result<()> {
    if key > MAX_KEY_BYTES {
        return Err(Error::InvalidArgument(format!(
            "key of {key} bytes (at most {MAX_KEY_BYTES})"
        )));
    }
    if value > MAX_VALUE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "value of {value} bytes (at most {MAX_VALUE_BYTES})"
        )));
    }
    Ok(())
}

/// Set in an entry's kind byte when a keyspace id (a varint) follows it. An entry without it is
/// un-targeted: it goes to the keyspace of the handle that writes the batch, which is the
/// default keyspace by the time the batch is logged (as in every batch written before keyspaces
/// existed).
const IN_KEYSPACE: u8 = 0x80;

/// A group of puts and deletes that [`Db::write`](crate::Db::write) applies atomically: after a
/// crash either all of them are there or none.
///
/// [`put`](Self::put), [`delete`](Self::delete), [`delete_range`](Self::delete_range) and
/// [`put_with_ttl`](Self::put_with_ttl) name no keyspace: they go to the keyspace of the handle
/// that writes the batch (`users.write(batch)` writes them to `users`, `db.write(batch)` to the
/// default keyspace). Their `_in` forms go to the keyspace they name, whichever handle writes
/// the batch.
///
/// ```
/// # fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
/// let (users, log) = (db.keyspace("users")?, db.keyspace("log")?);
/// let mut batch = siftdb::WriteBatch::new();
/// batch.put(b"u1", b"Ada").delete(b"u0"); // to the keyspace that writes the batch
/// batch.put_in(&log, b"0001", b"u1 joined"); // to `log`, whoever writes the batch
/// assert_eq!(batch.len(), 3);
/// users.write(batch)?;
/// assert_eq!(users.get(b"u1")?, Some(b"Ada".to_vec()));
/// assert_eq!(db.get(b"u1")?, None); // not in the default keyspace
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    max_key: usize,
    max_value: usize,
    /// Whether it writes to the default keyspace (un-targeted entries, or entries naming it).
    default: bool,
    /// Whether it holds un-targeted entries.
    untargeted: bool,
    /// Whether it holds merge operands, whose keyspaces the write checks for a merge operator.
    merges: bool,
    /// Whether it holds what the group commit fills in before logging it: times to live still
    /// relative to the commit, range deletes without an end (`db/write/batch_settling.rs`).
    unsettled: bool,
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

/// Where an entry goes: the keyspace of the handle that writes the batch, or keyspace `id` of
/// store `store`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    Untargeted,
    In(u32, StoreId),
}

/// The start and end of the range deletion of `range`: every key from `start` up to `end` (not
/// included; `None`: no end). `None` for a range that holds no key.
pub(crate) fn range_deletion_bounds<R: KeyRange>(range: R) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    use std::ops::Bound;
    // `key + 0x00` is the first key after `key`: nothing sorts between them.
    let after = |mut k: Vec<u8>| {
        k.push(0);
        k
    };
    let (start, end) = range.into_bounds();
    let start = match start {
        Bound::Included(k) => k,
        Bound::Excluded(k) => after(k),
        Bound::Unbounded => Vec::new(),
    };
    let end = match end {
        Bound::Included(k) => Some(after(k)),
        Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    };
    match &end {
        Some(e) if start >= *e => None,
        _ => Some((start, end)),
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
            untargeted: false,
            merges: false,
            unsettled: false,
            named: None,
        }
    }

    /// Sets `key` to `value` in the keyspace of the handle that writes the batch (the default
    /// keyspace through a `Db`).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.put_to(Target::Untargeted, key.as_ref(), value.as_ref())
    }

    /// Removes `key` from the keyspace of the handle that writes the batch (a tombstone;
    /// deleting an absent key is fine).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.delete_to(Target::Untargeted, key.as_ref())
    }

    /// Sets `key` to `value` in the keyspace of the handle that writes the batch, for `ttl` from
    /// the commit on: from then, every read sees it absent, whatever the keyspace's own
    /// [`ttl`](crate::Options::ttl) (see [`Db::put_with_ttl`](crate::Db::put_with_ttl)).
    pub fn put_with_ttl(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> &mut Self {
        self.put_with_ttl_to(Target::Untargeted, key.as_ref(), value.as_ref(), ttl)
    }

    /// Adds merge operand `operand` to `key` in the keyspace of the handle that writes the batch,
    /// for its [merge operator](crate::MergeOperator) to combine with what lies beneath (see
    /// [`Db::merge`](crate::Db::merge)). The write is refused with `Error::InvalidArgument` if
    /// that keyspace has no merge operator.
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> &mut Self {
        self.merge_to(Target::Untargeted, key.as_ref(), operand.as_ref())
    }

    /// Removes every key of `range` (any range [`Db::scan`](crate::Db::scan) takes: `a..b`,
    /// `a..=b`, `a..`, `..b`, `..`, a pair of bounds) from the keyspace of the handle that writes
    /// the batch: one entry, however many keys the range holds. Keys written after it, in this
    /// batch or later, are not removed. A range that holds no key adds nothing.
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
    pub fn delete_range<R: KeyRange>(&mut self, range: R) -> &mut Self {
        self.delete_range_to(Target::Untargeted, range)
    }

    // The `_in` forms, which take a `Keyspace`, are in `db/keyspace.rs`, beside the handle: the
    // batch names nothing of the store above it.

    /// Sets `key` to `value` in `to`.
    pub(crate) fn put_to(&mut self, to: Target, key: &[u8], value: &[u8]) -> &mut Self {
        self.entry(to, ValueKind::Value, key, Some(value));
        self.note(key.len(), value.len());
        self
    }

    /// Adds merge operand `operand` to `key` in `to`.
    pub(crate) fn merge_to(&mut self, to: Target, key: &[u8], operand: &[u8]) -> &mut Self {
        self.entry(to, ValueKind::Merge, key, Some(operand));
        self.note(key.len(), operand.len());
        self
    }

    /// Removes `key` from `to`.
    pub(crate) fn delete_to(&mut self, to: Target, key: &[u8]) -> &mut Self {
        self.entry(to, ValueKind::Deletion, key, None);
        self.note(key.len(), 0);
        self
    }

    /// Sets `key` to `value` in `to` for `ttl` from the commit. Until the commit stamps it, the
    /// value ends in the TTL in whole seconds (held at the largest four bytes hold).
    pub(crate) fn put_with_ttl_to(
        &mut self,
        to: Target,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
    ) -> &mut Self {
        let seconds = u32::try_from(crate::clock::ttl_seconds(ttl)).unwrap_or(u32::MAX);
        let mut stored = Vec::with_capacity(value.len() + 4);
        stored.extend_from_slice(value);
        stored.extend_from_slice(&seconds.to_le_bytes());
        self.entry(to, ValueKind::ExpiringValue, key, Some(&stored));
        self.unsettled = true;
        self.note(key.len(), value.len());
        self
    }

    /// Removes the keys of `range` from `to` (nothing if it holds none).
    pub(crate) fn delete_range_to<R: KeyRange>(&mut self, to: Target, range: R) -> &mut Self {
        if let Some((start, end)) = range_deletion_bounds(range) {
            self.range_deletion(to, &start, end.as_deref());
        }
        self
    }

    /// Adds a range deletion of `[start, end)` (`end` `None`: no end, which the commit fills in;
    /// `start < end`) to `to`.
    pub(crate) fn range_deletion(&mut self, to: Target, start: &[u8], end: Option<&[u8]>) {
        // Until the commit fills it in, a missing end is an empty one: no written range ends
        // there, since an empty range is never written.
        self.entry(
            to,
            ValueKind::RangeDeletion,
            start,
            Some(end.unwrap_or_default()),
        );
        self.unsettled |= end.is_none();
        let end_len = end.map_or(0, <[u8]>::len);
        self.note(start.len().max(end_len), 0);
    }

    /// Appends an entry of `kind` to `to`: its kind byte, keyspace, key and value.
    pub(crate) fn entry(&mut self, to: Target, kind: ValueKind, key: &[u8], value: Option<&[u8]>) {
        self.merges |= kind == ValueKind::Merge;
        match to {
            Target::Untargeted => {
                self.rep.push(kind as u8);
                self.untargeted = true;
                self.default = true;
            }
            Target::In(id, store) => {
                let named = self.named.get_or_insert_with(|| {
                    Box::new(NamedKeyspaces {
                        ids: Vec::new(),
                        store,
                        mixed: false,
                    })
                });
                named.mixed |= named.store != store;
                self.rep.push(kind as u8 | IN_KEYSPACE);
                put_varint64(&mut self.rep, u64::from(id));
                if id == DEFAULT_KEYSPACE_ID {
                    self.default = true;
                } else if !named.ids.contains(&id) {
                    named.ids.push(id);
                }
            }
        }
        put_length_prefixed(&mut self.rep, key);
        if let Some(value) = value {
            put_length_prefixed(&mut self.rep, value);
        }
        self.count += 1;
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    /// Takes `other`'s largest key and value (the user's, before the commit filled anything in),
    /// for a batch rebuilt from it.
    pub(crate) fn adopt_largest(&mut self, other: &WriteBatch) {
        (self.max_key, self.max_value) = (other.max_key, other.max_value);
    }

    /// Whether it holds entries that name no keyspace.
    pub(crate) fn has_untargeted(&self) -> bool {
        self.untargeted
    }

    /// Whether it holds merge operands.
    pub(crate) fn has_merges(&self) -> bool {
        self.merges
    }

    /// Whether the group commit has times to live or range ends to fill in.
    pub(crate) fn is_unsettled(&self) -> bool {
        self.unsettled
    }

    /// The same batch with its un-targeted entries sent to keyspace `id` of store `store` (the
    /// keyspace of the handle writing it); `None` if it does not decode.
    pub(crate) fn retargeted(&self, id: u32, store: StoreId) -> Option<WriteBatch> {
        let mut out = WriteBatch::with_capacity(self.rep.len() + self.count as usize);
        // Entries that name a keyspace keep the store they named (a batch naming another store's
        // keyspace is refused, as before).
        let named_store = self.named.as_ref().map_or(store, |n| n.store);
        for e in BatchEntries::new(&self.rep)? {
            let e = e?;
            let to = match e.targeted {
                true => Target::In(e.keyspace, named_store),
                false => Target::In(id, store),
            };
            out.copy_entry(to, &e);
        }
        out.unsettled = self.unsettled;
        out.adopt_largest(self);
        if let (Some(n), Some(o)) = (&self.named, out.named.as_mut()) {
            o.mixed |= n.mixed;
        }
        Some(out)
    }

    /// Appends a copy of entry `e` (of another batch) to `to`.
    fn copy_entry(&mut self, to: Target, e: &BatchEntry<'_>) {
        let value = (e.kind != ValueKind::Deletion).then_some(e.value);
        self.entry(to, e.kind, e.key, value);
    }

    /// Records the sizes of an entry's key and value, for the limits a write checks.
    fn note(&mut self, key: usize, value: usize) {
        self.max_key = self.max_key.max(key);
        self.max_value = self.max_value.max(value);
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
        let default = self.default.then_some(DEFAULT_KEYSPACE_ID);
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
    /// Whether it names its keyspace (else it is un-targeted: `keyspace` is the default one's).
    pub(crate) targeted: bool,
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
        let targeted = byte & IN_KEYSPACE != 0;
        let keyspace = if targeted {
            self.d.varint32()?
        } else {
            DEFAULT_KEYSPACE_ID
        };
        let kind = ValueKind::from_byte(byte & !IN_KEYSPACE)?;
        let key = self.d.length_prefixed()?;
        // A range deletion's "value" is its end key.
        let value = match kind {
            ValueKind::Value
            | ValueKind::ExpiringValue
            | ValueKind::RangeDeletion
            | ValueKind::Merge => self.d.length_prefixed()?,
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
            targeted,
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
        assert!(!b.has_merges());
        b.merge(b"n", b"+1");
        assert!(b.has_merges());
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
                (104, ValueKind::Merge, b"n".to_vec(), b"+1".to_vec()),
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
            .put_to(Target::In(7, ours), b"k", b"v")
            .delete_to(Target::In(300, ours), b"gone")
            .delete_range_to(Target::In(300, ours), &b"x"[..]..&b"y"[..]);
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
        b.put_to(Target::In(7, theirs), b"x", b"y");
        assert_eq!(b.store(), Err(()));
        // A plain batch names no keyspace and no store.
        let mut plain = WriteBatch::new();
        plain.put(b"a", b"1");
        assert!(!plain.names_keyspaces());
        assert_eq!(plain.store(), Ok(None));
    }

    /// Written through a keyspace's handle, a batch's un-targeted entries go to that keyspace;
    /// those naming a keyspace, the default one included, stay where they name, with their store.
    #[test]
    fn retargeting_sends_untargeted_entries_to_the_writing_keyspace() {
        let (ours, theirs) = ([1u8; 16], [2u8; 16]);
        let mut b = WriteBatch::new();
        b.put(b"a", b"1")
            .put_to(Target::In(0, ours), b"d", b"named default")
            .delete(b"b")
            .put_to(Target::In(9, ours), b"n", b"named")
            .delete_range(&b"m"[..]..);
        assert!(b.has_untargeted() && b.is_unsettled());
        let r = b.retargeted(5, ours).unwrap();
        assert!(!r.has_untargeted() && r.is_unsettled());
        assert_eq!(r.len(), b.len());
        assert_eq!(r.largest_key_and_value(), b.largest_key_and_value());
        assert_eq!(r.keyspaces().collect::<Vec<_>>(), [0, 5, 9]);
        assert_eq!(r.store(), Ok(Some(ours)));
        let got: Vec<_> = decode_batch(r.encoded())
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e.keyspace,
                    e.targeted,
                    e.kind,
                    e.key.to_vec(),
                    e.value.to_vec(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (5, true, ValueKind::Value, b"a".to_vec(), b"1".to_vec()),
                (
                    0,
                    true,
                    ValueKind::Value,
                    b"d".to_vec(),
                    b"named default".to_vec()
                ),
                (5, true, ValueKind::Deletion, b"b".to_vec(), vec![]),
                (9, true, ValueKind::Value, b"n".to_vec(), b"named".to_vec()),
                (5, true, ValueKind::RangeDeletion, b"m".to_vec(), vec![]),
            ]
        );
        // A keyspace of another store stays another store's: the write is refused.
        let mut other = WriteBatch::new();
        other
            .put(b"a", b"1")
            .put_to(Target::In(3, theirs), b"k", b"v");
        assert_eq!(other.retargeted(5, ours).unwrap().store(), Err(()));
    }

    /// Every shape of range a scan takes becomes the `[start, end)` a range deletion writes:
    /// `key + 0x00` for an excluded start or an included end, nothing for an empty range.
    #[test]
    fn every_range_shape_becomes_a_start_and_an_end() {
        use std::ops::Bound;
        let v = |s: &str| s.as_bytes().to_vec();
        let z = |s: &str| [s.as_bytes(), &[0]].concat();
        assert_eq!(
            range_deletion_bounds("a".."m"),
            Some((v("a"), Some(v("m"))))
        );
        assert_eq!(
            range_deletion_bounds("a"..="m"),
            Some((v("a"), Some(z("m"))))
        );
        assert_eq!(range_deletion_bounds("a"..), Some((v("a"), None)));
        assert_eq!(range_deletion_bounds(.."m"), Some((vec![], Some(v("m")))));
        assert_eq!(range_deletion_bounds(..="m"), Some((vec![], Some(z("m")))));
        assert_eq!(range_deletion_bounds(..), Some((vec![], None)));
        assert_eq!(
            range_deletion_bounds((Bound::Excluded("a"), Bound::Included("a"))),
            None
        );
        assert_eq!(
            range_deletion_bounds((Bound::Excluded("a"), Bound::Unbounded)),
            Some((z("a"), None))
        );
        assert_eq!(range_deletion_bounds("m".."a"), None);
        assert_eq!(range_deletion_bounds("a".."a"), None);
        assert_eq!(
            range_deletion_bounds("a"..="a"),
            Some((v("a"), Some(z("a"))))
        );
        assert_eq!(range_deletion_bounds(..""), None);
    }
}
