//! Range scans: a merge of every memtable and table, read at the sequence of the call, newest
//! version of each key first, tombstones hiding what they delete; from either end of the range.
//!
//! The room also holds `cursor.rs` (`Cursor`, and the merge of memtables and tables under it)
//! and `level_iter.rs` (the iterator over one level ≥ 1); `point_merge.rs` resolves the merge
//! operands a point read finds, with a cursor over the key.

pub(crate) mod cursor;
pub(crate) mod level_iter;
mod point_merge;
mod sources;
mod tombstone_skipping;

use std::iter::FusedIterator;
use std::ops::Bound;
use std::sync::Arc;

use super::dir_lock::DirLock;
use super::tree::SuperVersion;
use super::tree::Tree;
use super::version::FileMeta;
use super::{Db, DbInner, Snapshot};
use crate::error::{Error, Result};
use crate::key::compare_bytes;
use crate::key_range::KeyRange;
use crate::prefix::prefix_successor;
use crate::stats::Ticker;
use cursor::Cursor;
use sources::Sources;

impl Db {
    /// Every live entry of the store, in key order, as of this call: an [`Iterator`] of
    /// `Result<(key, value)>`, the same [`Scan`] as [`scan(..)`](Db::scan) returns. Later writes
    /// are not seen, and `.rev()` walks from the last key backward.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("b", "2")?;
    /// db.put("a", "1")?;
    /// for kv in db.iter() {
    ///     let (key, value) = kv?;
    ///     println!("{key:?} = {value:?}");
    /// }
    /// let keys: Vec<Vec<u8>> = db.iter().map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
    /// let last = db.iter().next_back().transpose()?;
    /// assert_eq!(last, Some((b"b".to_vec(), b"2".to_vec())));
    /// # Ok(()) }
    /// ```
    ///
    /// Each item is `Err` if a table the walk reads is damaged (the walk ends after it), or
    /// [`Error::Closed`](crate::Error::Closed) once, if the store was closed before the call. For
    /// a cursor that seeks and steps both ways without copying each entry, see
    /// [`cursor`](Db::cursor).
    pub fn iter(&self) -> Scan {
        self.scan(..)
    }

    /// [`iter`](Db::iter) as of `snapshot`: every live entry when the snapshot was taken.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "1")?;
    /// let snapshot = db.snapshot();
    /// db.put("b", "2")?;
    /// db.delete("a")?;
    /// let then: Vec<_> = db.iter_at(&snapshot).collect::<Result<_, _>>()?;
    /// assert_eq!(then, [(b"a".to_vec(), b"1".to_vec())]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn iter_at(&self, snapshot: &Snapshot) -> Scan {
        self.scan_at(snapshot, ..)
    }

    /// The live entries whose keys fall in `range`, in key order, as of this call: later writes are
    /// not seen, and compactions that run meanwhile change nothing the scan returns. `range` is
    /// any range expression over keys (`..`, `"a".."m"`, `b"k".to_vec()..`, `..=&key[..]`, see
    /// [`KeyRange`]). The scan is a [`DoubleEndedIterator`]: `.rev()` walks from the range's end
    /// bound backward, and `next` and `next_back` may be mixed (they meet in the middle, each
    /// entry returned once).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// for k in ["a", "b", "c", "d"] { db.put(k, k)?; }
    /// let keys = |scan: siftdb::Scan| -> siftdb::Result<Vec<Vec<u8>>> {
    ///     scan.map(|kv| kv.map(|(k, _)| k)).collect()
    /// };
    /// assert_eq!(keys(db.scan(..))?.len(), 4);
    /// assert_eq!(keys(db.scan("b".."d"))?, [b"b".to_vec(), b"c".to_vec()]);
    /// assert_eq!(keys(db.scan(b"c".to_vec()..))?, [b"c".to_vec(), b"d".to_vec()]);
    /// let backward: Vec<_> = db.scan("a"..="c").rev().map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(backward, [b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]);
    /// # Ok(()) }
    /// ```
    ///
    /// Each item is `Err` if a table the scan reads is damaged (the scan ends after it), or
    /// [`Error::Closed`](crate::Error::Closed) once, if the store was closed before the call. For
    /// a cursor that seeks and turns around without copying each entry, see
    /// [`Db::cursor`].
    pub fn scan<R: KeyRange>(&self, range: R) -> Scan {
        let (sv, seq) = self.inner.read_view(&self.tree);
        self.scan_view(range, sv, seq)
    }

    /// [`scan`](Db::scan) as of `snapshot`: the live entries in `range` when the snapshot was
    /// taken.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// let snapshot = db.snapshot();
    /// db.delete("b")?;
    /// db.put("c", "3")?;
    /// let newest_first: Vec<_> = db.scan_at(&snapshot, "a"..).rev().collect::<Result<_, _>>()?;
    /// assert_eq!(newest_first, [(b"b".to_vec(), b"2".to_vec()), (b"a".to_vec(), b"1".to_vec())]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn scan_at<R: KeyRange>(&self, snapshot: &Snapshot, range: R) -> Scan {
        self.check_snapshot(snapshot);
        let sv = snapshot
            .view_of(self.tree.id)
            .unwrap_or_else(|| self.tree.super_version());
        self.scan_view(range, sv, snapshot.sequence())
    }

    /// [`scan_prefix`](Db::scan_prefix) as of `snapshot`.
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn scan_prefix_at(&self, snapshot: &Snapshot, prefix: impl AsRef<[u8]>) -> Scan {
        self.scan_at(snapshot, prefix_range(prefix.as_ref()))
    }

    fn scan_view<R: KeyRange>(&self, range: R, sv: Arc<SuperVersion>, seq: u64) -> Scan {
        let (start, end) = range.into_bounds();
        let prefix = self.shared_prefix(&start, &end);
        let (lock, refused) = match self.tree.check_live().and_then(|()| self.inner.hold_lock()) {
            Ok(lock) => (Some(lock), None),
            Err(e) => (None, Some(e)),
        };
        Scan {
            inner: Arc::clone(&self.inner),
            tree: Arc::clone(&self.tree),
            lock,
            refused,
            sv,
            seq,
            prefix,
            start,
            end,
            sources: None,
            front: None,
            back: None,
            done: false,
        }
    }
}

impl Db {
    /// The live entries whose keys start with `prefix`, in key order (or, `.rev()`, in reverse),
    /// as of this call. With a prefix extractor whose prefix `prefix` is in the domain of, tables
    /// whose prefix filter says "no" are skipped (`bloom.filter.prefix.useful`).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use siftdb::{Db, Options, PrefixExtractor};
    /// let db = Db::open(dir.path(), Options::default().prefix_extractor(PrefixExtractor::fixed(4)))?;
    /// db.put("user1:name", "ann")?;
    /// db.put("user1:role", "admin")?;
    /// db.put("user2:name", "bob")?;
    /// db.flush()?;
    /// let rows: Vec<_> = db.scan_prefix("user1").collect::<Result<_, _>>()?;
    /// assert_eq!(rows, vec![
    ///     (b"user1:name".to_vec(), b"ann".to_vec()),
    ///     (b"user1:role".to_vec(), b"admin".to_vec()),
    /// ]);
    /// let last = db.scan_prefix("user1").next_back().transpose()?;
    /// assert_eq!(last, Some((b"user1:role".to_vec(), b"admin".to_vec())));
    /// # Ok(()) }
    /// ```
    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Scan {
        self.scan(prefix_range(prefix.as_ref()))
    }

    /// The extractor prefix every key in `[start, end]` shares, if both bounds are in the
    /// extractor's domain and have the same prefix (`scan_prefix` bounds do).
    fn shared_prefix(&self, start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> Option<Vec<u8>> {
        let options = self.tree.options();
        let extractor = options.prefix_extractor.as_ref()?;
        let (Bound::Included(s) | Bound::Excluded(s)) = start else {
            return None;
        };
        let prefix = extractor.prefix(s)?;
        let shares = match end {
            Bound::Included(e) => extractor.prefix(e) == Some(prefix),
            // An exclusive end at the prefix's successor closes exactly the prefix's keys.
            Bound::Excluded(e) => {
                extractor.prefix(e) == Some(prefix)
                    || prefix_successor(prefix).is_some_and(|succ| e.as_slice() <= succ.as_slice())
            }
            Bound::Unbounded => false,
        };
        shares.then(|| prefix.to_vec())
    }
}

/// The keys that start with `prefix`, as a range.
fn prefix_range(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let end = match prefix_successor(prefix) {
        Some(s) => Bound::Excluded(s),
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), end)
}

/// The iterator [`Db::iter`], [`Db::scan`] and [`Db::scan_prefix`] return: `Result<(key, value)>` items in key
/// order, or from the end of the range backward with `.rev()` ([`DoubleEndedIterator`]).
///
/// ```
/// # fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
/// for k in ["a", "b", "c", "d", "e"] { db.put(k, k)?; }
/// let mut scan = db.scan("b"..="d");
/// assert_eq!(scan.next().transpose()?.map(|(k, _)| k), Some(b"b".to_vec()));
/// assert_eq!(scan.next_back().transpose()?.map(|(k, _)| k), Some(b"d".to_vec()));
/// assert_eq!(scan.next().transpose()?.map(|(k, _)| k), Some(b"c".to_vec()));
/// assert!(scan.next_back().is_none()); // the two ends met
/// # Ok(()) }
/// ```
///
/// Each item is a copy of an entry. A scan reads nothing until its first `next` or `next_back`,
/// and the first call from each end builds a [`Cursor`] positioned at that end of the range.
///
/// **What it holds**, like a [`Cursor`]: the memtables and tables it reads (flushes and
/// compactions change nothing it returns; the files of replaced tables are deleted once it is
/// dropped), and the directory's `LOCK`. So it keeps working after its store is
/// [closed](Db::close) or its last handle dropped, but [`Db::open`] of that directory fails with
/// [`Error::Locked`](crate::Error::Locked) until the scan is dropped. A scan made after the store
/// closed holds nothing: its only item is [`Error::Closed`](crate::Error::Closed).
pub struct Scan {
    inner: Arc<DbInner>,
    tree: Arc<Tree>,
    /// The directory's `LOCK`, held while the scan reads the store's files; `None` if the store
    /// was closed (or the keyspace dropped) when the scan was made.
    lock: Option<Arc<DirLock>>,
    /// Why the scan cannot read (closed, dropped): its only item.
    refused: Option<Error>,
    sv: Arc<SuperVersion>,
    seq: u64,
    /// The extractor prefix all keys of the range share: tables whose filter rules it out are
    /// skipped.
    prefix: Option<Vec<u8>>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// The memtables and tables both ends read, chosen at the first call.
    sources: Option<Sources>,
    /// The cursor of `next`, on the entry it returned last.
    front: Option<Cursor>,
    /// The cursor of `next_back`, on the entry it returned last.
    back: Option<Cursor>,
    done: bool,
}

/// Which end of a [`Scan`] a call takes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Front,
    Back,
}

impl Scan {
    /// A new cursor over the scan's range, unpositioned. The first one chooses the tables.
    fn cursor(&mut self) -> Result<Cursor> {
        let sources = match &self.sources {
            Some(s) => s.clone(),
            None => {
                let s = Sources::for_range(
                    Arc::clone(&self.sv),
                    &self.tree,
                    &self.start,
                    &self.end,
                    |f| self.may_hold_prefix(f),
                )?;
                self.sources = Some(s.clone());
                s
            }
        };
        Ok(Cursor::new(&self.inner, sources, self.seq)
            .bounded(self.start.clone(), self.end.clone()))
    }

    /// Whether table `f` may hold keys of the scan's prefix: its key range must reach the prefix,
    /// and its prefix filter (if it has one) must not say "no".
    fn may_hold_prefix(&self, f: &FileMeta) -> Result<bool> {
        let Some(prefix) = &self.prefix else {
            return Ok(true);
        };
        let past = |k: &[u8]| !k.starts_with(prefix) && k > prefix.as_slice();
        if f.largest_user() < prefix.as_slice() || past(f.smallest_user()) {
            return Ok(false);
        }
        let stats = &self.tree.stats;
        match self.tree.tables.get(f)?.prefix_may_match(prefix)? {
            None => Ok(true),
            Some(maybe) => {
                stats.inc(Ticker::BloomFilterPrefixChecked);
                if !maybe {
                    stats.inc(Ticker::BloomFilterPrefixUseful);
                }
                Ok(maybe)
            }
        }
    }

    /// The next entry from `end`, unless the range is exhausted from that end or the two ends met.
    fn advance(&mut self, end: End) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let slot = match end {
            End::Front => &mut self.front,
            End::Back => &mut self.back,
        };
        match slot {
            Some(cursor) => match end {
                End::Front => cursor.next()?,
                End::Back => cursor.prev()?,
            },
            None => {
                let mut cursor = self.cursor()?;
                match end {
                    End::Front => cursor.seek_to_first()?,
                    End::Back => cursor.seek_to_last()?,
                }
                match end {
                    End::Front => self.front = Some(cursor),
                    End::Back => self.back = Some(cursor),
                }
            }
        }
        let (this, other) = match end {
            End::Front => (&self.front, &self.back),
            End::Back => (&self.back, &self.front),
        };
        let Some(this) = this.as_ref().filter(|c| c.valid()) else {
            return Ok(None);
        };
        if let Some(other) = other {
            // The other end has returned every entry from its own position on.
            let met = !other.valid()
                || match end {
                    End::Front => compare_bytes(this.key(), other.key()).is_ge(),
                    End::Back => compare_bytes(this.key(), other.key()).is_le(),
                };
            if met {
                return Ok(None);
            }
        }
        Ok(Some((this.key().to_vec(), this.value().to_vec())))
    }

    /// `advance`, turned into an iterator item: the scan ends at the range's end, when the ends
    /// meet, and after an error.
    fn item(&mut self, end: End) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return None;
        }
        if self.lock.is_none() {
            self.done = true;
            return Some(Err(self
                .refused
                .take()
                .unwrap_or_else(|| self.inner.closed_error())));
        }
        match self.advance(end) {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.item(End::Front)
    }
}

impl DoubleEndedIterator for Scan {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.item(End::Back)
    }
}

impl FusedIterator for Scan {}
