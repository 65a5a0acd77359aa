//! [`Cursor`]: a cursor over the store's live entries that seeks and moves both ways, over the
//! merge of memtables and tables (`sources.rs`) that [`Scan`](super::Scan) shares, hiding what
//! their range tombstones cover (`tombstone_skipping.rs`).
//!
//! The logic is LevelDB's `DBIter`. Going forward, the merge is on the entry the cursor shows
//! (the newest visible version of its user key), and `key`/`value` borrow from it. Going backward,
//! the merge is on the last entry *before* every version of the current user key: walking back, the
//! versions of a user key come oldest first, so the newest visible one is only known once the walk
//! has passed it; its key and value are then copied into buffers the cursor reuses.
//!
//! A key whose newest visible version is a merge operand is resolved as RocksDB's `DBIter` does
//! (`cursor/operands.rs`): its operands are gathered down to the first version that is not one,
//! the keyspace's merge operator combines them, and the result is copied into the buffers in
//! both directions.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use super::sources::Sources;
use super::tombstone_skipping::{under_range_tombstones, SourceTombstones};
use crate::db::dir_lock::DirLock;
use crate::db::read::range_filtering::in_bounds;
use crate::db::tree::Tree;
use crate::db::ttl::judge;
use crate::db::{Db, DbInner, Snapshot};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{
    append_internal_key, compare_bytes, internal_key, lookup_key, parse_internal_key, user_key,
    ValueKind, MAX_SEQUENCE, SEEK_KIND,
};
use crate::key_range::KeyRange;

/// The error for an entry whose internal key does not parse.
fn malformed(dir: &Path) -> Error {
    Error::corruption(dir, "iterator met a malformed internal key")
}

/// Which way a [`Cursor`] last moved, which says where its merge is (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over the store's live entries as of the moment it was created, in key order, that
/// seeks and moves both ways. [`Db::cursor`] and [`Db::cursor_at`] return one. (It was called
/// `DbIterator`, a name kept as an alias; [`Db::iter`] is now an [`Iterator`].)
///
/// It starts nowhere: position it with [`seek_to_first`](Self::seek_to_first),
/// [`seek_to_last`](Self::seek_to_last), [`seek`](Self::seek) or
/// [`seek_for_prev`](Self::seek_for_prev), then step with [`next`](Self::next) and
/// [`prev`](Self::prev), turning around whenever you like. While [`valid`](Self::valid),
/// [`key`](Self::key) and [`value`](Self::value) borrow the current entry. It sees the newest
/// version of each key written before it was created, hides deleted keys, and sees no later
/// write.
///
/// ```
/// # fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
/// for k in ["a", "b", "c", "d"] {
///     db.put(k, k.to_uppercase())?;
/// }
/// db.delete("c")?;
/// let mut it = db.cursor();
/// it.seek("b")?;
/// assert_eq!((it.key(), it.value()), (&b"b"[..], &b"B"[..]));
/// it.next()?; // "c" is deleted
/// assert_eq!(it.key(), b"d");
/// it.prev()?;
/// assert_eq!(it.key(), b"b");
/// it.seek_for_prev("c")?; // the last key ≤ "c"
/// assert_eq!(it.key(), b"b");
/// it.seek_to_last()?;
/// let mut backward = Vec::new();
/// while it.valid() {
///     backward.push(it.key().to_vec());
///     it.prev()?;
/// }
/// assert_eq!(backward, [b"d".to_vec(), b"b".to_vec(), b"a".to_vec()]);
/// # Ok(()) }
/// ```
///
/// **What it holds.** A cursor keeps the memtables and tables it reads: flushes and compactions
/// that run meanwhile change nothing it returns, and the files of tables they replace are deleted
/// only once it is dropped. It stays usable after its store is [closed](Db::close) or its last
/// [`Db`] handle dropped (the background threads have stopped then, and it reads only what it
/// already held); but it keeps the directory's `LOCK` too, so [`Db::open`] of the same directory
/// fails with [`Error::Locked`] until every cursor and [`Scan`](crate::Scan) made before the
/// close is dropped. Hold cursors only as long as needed. A cursor made after the store closed
/// holds nothing, and every seek returns [`Error::Closed`].
///
/// **Costs.** A step forward borrows the entry from its data block or memtable copy and allocates
/// nothing; a step backward copies the entry into buffers the cursor reuses. Each step visits
/// every version of the keys it passes, so a run of deleted or overwritten keys costs a step per
/// version. Turning around re-seeks each memtable, L0 table and level once.
pub struct Cursor {
    inner: Arc<DbInner>,
    /// The directory's `LOCK`, held while the cursor reads the store's files; `None` for a cursor
    /// made by a scan (which holds it) or after the store closed (`closed`).
    _lock: Option<Arc<DirLock>>,
    /// Why every seek fails: made after the store closed (`Error::Closed`) or its keyspace was
    /// dropped.
    refused: Option<Error>,
    sources: Sources,
    /// For a cursor bounded above only, in a keyspace with range filters: its tree, so that a
    /// seek to `k` reads only the tables whose range filters allow `[k, upper)`.
    narrowing: Option<Arc<Tree>>,
    /// The sources chosen when the cursor was made, while `sources` holds those a seek narrowed
    /// them to (which serve forward walks from the seek only).
    wide: Option<Sources>,
    /// Entries newer than this are invisible.
    sequence: u64,
    /// The range this cursor stops at (a [`Scan`](super::Scan)'s): forward walks end at the
    /// first key past `upper`, backward walks at the first key before `lower`.
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    /// The merge, built at the first positioning call (opening the L0 tables may fail).
    merged: Option<MergingIterator>,
    /// The range tombstones of every memtable and table that may hold a key in the cursor's
    /// range, gathered with the merge: an entry one of them covers is hidden as a tombstone
    /// would hide it.
    range_tombstones: Vec<SourceTombstones>,
    /// The age of each child of the merge (see `Sources::age_of_table`).
    child_ages: Vec<usize>,
    direction: Direction,
    valid: bool,
    /// Forward: scratch (the seek target; the user key whose older versions are skipped).
    /// Reverse: the current user key.
    saved_key: Vec<u8>,
    /// Reverse: the current value.
    saved_value: Vec<u8>,
    /// Bytes of stamp (expiry or write time) at the end of the current value, cut from it.
    stamp: usize,
    /// Forward: the current entry is a merge's result, in `saved_key` and `saved_value`, and the
    /// merge is already past its operands.
    resolved: bool,
    /// The operands of the key being resolved (`cursor/operands.rs`).
    operands: operands::Operands,
    /// The error the last move met, until the next seek.
    error: Option<Error>,
}

impl Db {
    /// A [`Cursor`] over the store as it is now: it sees every write acknowledged before this
    /// call and none after. It seeks ([`seek`](Cursor::seek),
    /// [`seek_for_prev`](Cursor::seek_for_prev), [`seek_to_first`](Cursor::seek_to_first),
    /// [`seek_to_last`](Cursor::seek_to_last)), steps both ways and borrows each entry; for an
    /// [`Iterator`] of owned entries, see [`iter`](Db::iter) and [`scan`](Db::scan).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("apple", "1")?;
    /// db.put("cherry", "2")?;
    /// let mut cursor = db.cursor();
    /// db.put("date", "3")?; // after the cursor: not seen
    /// cursor.seek("banana")?; // the first key ≥ "banana"
    /// assert_eq!((cursor.key(), cursor.value()), (&b"cherry"[..], &b"2"[..]));
    /// cursor.prev()?;
    /// assert_eq!(cursor.key(), b"apple");
    /// cursor.seek_to_last()?;
    /// assert_eq!(cursor.key(), b"cherry");
    /// cursor.next()?;
    /// assert!(!cursor.valid());
    /// # Ok(()) }
    /// ```
    ///
    /// On a closed store the cursor's seeks return [`Error::Closed`].
    pub fn cursor(&self) -> Cursor {
        let (sv, sequence) = self.inner.read_view(&self.tree);
        Cursor::new(&self.inner, Sources::all_of(sv, &self.tree), sequence).holding_lock(&self.tree)
    }

    /// A [`Cursor`] over the store as it was when `snapshot` was taken: it sees the writes
    /// the snapshot sees, however much is written, flushed or compacted meanwhile.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "1")?;
    /// let snapshot = db.snapshot();
    /// db.put("b", "2")?;
    /// db.delete("a")?;
    /// let mut it = db.cursor_at(&snapshot);
    /// it.seek_to_last()?;
    /// assert_eq!((it.key(), it.value()), (&b"a"[..], &b"1"[..]));
    /// it.prev()?;
    /// assert!(!it.valid());
    /// # Ok(()) }
    /// ```
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn cursor_at(&self, snapshot: &Snapshot) -> Cursor {
        self.check_snapshot(snapshot);
        let sv = snapshot
            .view_of(self.tree.id)
            .unwrap_or_else(|| self.tree.super_version());
        Cursor::new(
            &self.inner,
            Sources::all_of(sv, &self.tree),
            snapshot.sequence(),
        )
        .holding_lock(&self.tree)
    }

    /// A [`Cursor`] over the keys in `range` alone, as of this call (RocksDB's iterator with
    /// `iterate_lower_bound` and `iterate_upper_bound`): walks stop at the range's ends without
    /// reading past them, a seek below the range lands on its first key and one above it on its
    /// last, and with [`Options::range_filter`](crate::Options::range_filter) the tables whose
    /// range filter rules the range out are never read. A range bounded above only (`..end`,
    /// RocksDB's `iterate_upper_bound` alone) asks them at each [`seek`](Cursor::seek) to `k`,
    /// about `[k, end)`: the seek and the [`next`](Cursor::next) steps after it read only the
    /// tables that may hold a key there; a step back below `k`, or another kind of seek, goes
    /// back to every table meeting the range (positioning again at the current key first).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, k)?;
    /// }
    /// let mut cursor = db.cursor_in("b".."d");
    /// cursor.seek("a")?; // below the range: its first key
    /// assert_eq!(cursor.key(), b"b");
    /// cursor.next()?;
    /// assert_eq!(cursor.key(), b"c");
    /// cursor.next()?; // "d" is past the range
    /// assert!(!cursor.valid());
    /// cursor.seek_for_prev("z")?;
    /// assert_eq!(cursor.key(), b"c");
    /// # Ok(()) }
    /// ```
    ///
    /// Choosing the tables opens those that meet the range; if one cannot be opened, every seek
    /// returns that error.
    pub fn cursor_in<R: KeyRange>(&self, range: R) -> Cursor {
        let (lower, upper) = range.into_bounds();
        let (sv, sequence) = self.inner.read_view(&self.tree);
        let chosen = self.tree.check_live().and_then(|()| {
            Sources::for_range(Arc::clone(&sv), &self.tree, &lower, &upper, |_| Ok(true))
        });
        let (sources, refused) = match chosen {
            Ok(sources) => (sources, None),
            Err(e) => (Sources::all_of(sv, &self.tree), Some(e)),
        };
        let narrowing = (matches!(lower, Bound::Unbounded)
            && !matches!(upper, Bound::Unbounded)
            && self.tree.options().range_filter.is_some())
        .then(|| Arc::clone(&self.tree));
        let mut cursor = Cursor::new(&self.inner, sources, sequence)
            .bounded(lower, upper)
            .holding_lock(&self.tree);
        cursor.narrowing = narrowing;
        if cursor.refused.is_none() {
            cursor.refused = refused;
        }
        cursor
    }

    /// A [`Cursor`] that sees the entries with sequence ≤ `sequence`, over the current
    /// super-version. The caller keeps the versions that sequence sees from being dropped (a
    /// registered snapshot does).
    #[cfg(test)]
    pub(crate) fn cursor_at_sequence(&self, sequence: u64) -> Cursor {
        let sv = self.tree.super_version();
        Cursor::new(&self.inner, Sources::all_of(sv, &self.tree), sequence).holding_lock(&self.tree)
    }
}

impl Cursor {
    /// An unpositioned cursor over `sources` at `sequence`, holding no `LOCK` (a scan's, which
    /// holds it).
    pub(crate) fn new(inner: &Arc<DbInner>, sources: Sources, sequence: u64) -> Cursor {
        Cursor {
            inner: Arc::clone(inner),
            _lock: None,
            refused: None,
            sources,
            narrowing: None,
            wide: None,
            sequence,
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            merged: None,
            range_tombstones: Vec::new(),
            child_ages: Vec::new(),
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            stamp: 0,
            resolved: false,
            operands: operands::Operands::default(),
            error: None,
        }
    }

    /// Holds the directory's `LOCK` while it lives, or, if the store is closed (or `tree`'s
    /// keyspace dropped), refuses every seek with `Error::Closed` (or the drop's error).
    fn holding_lock(mut self, tree: &Tree) -> Cursor {
        if let Err(e) = tree.check_live() {
            self.refused = Some(e);
            return self;
        }
        match self.inner.hold_lock() {
            Ok(lock) => self._lock = Some(lock),
            Err(e) => self.refused = Some(e),
        }
        self
    }

    /// Stops forward walks at the first key past `upper` and backward walks at the first key
    /// before `lower`, without reading further (a scan's range).
    pub(crate) fn bounded(mut self, lower: Bound<Vec<u8>>, upper: Bound<Vec<u8>>) -> Cursor {
        self.lower = lower;
        self.upper = upper;
        self
    }

    /// Whether the cursor is on an entry. It is not before the first positioning call, after
    /// stepping past either end, or after an error (see [`status`](Self::status)).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("k", "v")?;
    /// let mut it = db.cursor();
    /// assert!(!it.valid()); // not positioned yet
    /// it.seek_to_first()?;
    /// assert!(it.valid());
    /// it.prev()?;
    /// assert!(!it.valid()); // before the first key
    /// # Ok(()) }
    /// ```
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key; empty when not [`valid`](Self::valid).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("k", "v")?;
    /// let mut it = db.cursor();
    /// it.seek("a")?;
    /// assert_eq!(it.key(), b"k");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match (self.direction, &self.merged) {
            (Direction::Forward, Some(it)) if !self.resolved => user_key(it.key()),
            _ => &self.saved_key,
        }
    }

    /// The current value; empty when not [`valid`](Self::valid).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("k", "v")?;
    /// let mut it = db.cursor();
    /// it.seek_to_last()?;
    /// assert_eq!(it.value(), b"v");
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        let stored = match (self.direction, &self.merged) {
            (Direction::Forward, Some(it)) if !self.resolved => it.value(),
            _ => &self.saved_value,
        };
        &stored[..stored.len().saturating_sub(self.stamp)]
    }

    /// Positions on the first key of the store (invalid if there is none).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("b", "2")?;
    /// db.put("a", "1")?;
    /// let mut it = db.cursor();
    /// it.seek_to_first()?;
    /// assert_eq!(it.key(), b"a");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if a table it reads is damaged; `Error::Io` if one
    /// cannot be read; `Error::Closed` for a cursor made after the store closed. The cursor is
    /// then invalid, and [`status`](Self::status) returns the error until the next seek.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.widen();
        self.run(true, Self::try_seek_to_first)
    }

    /// Positions on the last key of the store (invalid if there is none).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("b", "2")?;
    /// db.put("a", "1")?;
    /// let mut it = db.cursor();
    /// it.seek_to_last()?;
    /// assert_eq!(it.key(), b"b");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`seek_to_first`](Self::seek_to_first).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.widen();
        self.run(true, Self::try_seek_to_last)
    }

    /// Positions on the first key ≥ `key` (invalid if there is none).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("apple", "1")?;
    /// db.put("cherry", "2")?;
    /// let mut it = db.cursor();
    /// it.seek("banana")?;
    /// assert_eq!(it.key(), b"cherry");
    /// it.seek("cherry")?;
    /// assert_eq!(it.key(), b"cherry");
    /// it.seek("date")?;
    /// assert!(!it.valid());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`seek_to_first`](Self::seek_to_first).
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        if !self.above_lower(key) {
            return self.seek_to_first();
        }
        if self.refused.is_none()
            && let Err(e) = self.narrow_to(key)
        {
            return self.fail(e);
        }
        self.run(true, |it| it.try_seek(key))
    }

    /// For a cursor bounded above only, with range filters: reads, from now on, only the tables
    /// whose range filters allow `[key, upper)` (keeping the merge if those are the tables it
    /// reads already).
    ///
    /// # Errors
    /// `Error::Corruption` or `Error::Io` if a table whose range filter is asked cannot be opened.
    fn narrow_to(&mut self, key: &[u8]) -> Result<()> {
        let Some(tree) = &self.narrowing else {
            return Ok(());
        };
        if tree.check_live().is_err() {
            // Closed (or dropped): read only what the cursor already holds.
            return Ok(());
        }
        let wide = self.wide.as_ref().unwrap_or(&self.sources);
        let lower = Bound::Included(key.to_vec());
        let mut narrowed =
            Sources::for_range(Arc::clone(&wide.sv), tree, &lower, &self.upper, |_| {
                Ok(true)
            })?;
        // Values expire as of the cursor's creation, whatever its sources.
        narrowed.expiry = wide.expiry;
        if self.merged.is_some() && narrowed.same_tables(&self.sources) {
            self.sources.range_verdicts = narrowed.range_verdicts;
            return Ok(());
        }
        let chosen = std::mem::replace(&mut self.sources, narrowed);
        if self.wide.is_none() {
            self.wide = Some(chosen);
        }
        self.merged = None;
        Ok(())
    }

    /// Goes back to the sources chosen when the cursor was made, if a seek narrowed them; the
    /// merge is built again at the next positioning.
    fn widen(&mut self) {
        if let Some(wide) = self.wide.take() {
            self.sources = wide;
            self.merged = None;
        }
    }

    /// Positions on the last key ≤ `key` (invalid if there is none).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("apple", "1")?;
    /// db.put("cherry", "2")?;
    /// let mut it = db.cursor();
    /// it.seek_for_prev("banana")?;
    /// assert_eq!(it.key(), b"apple");
    /// it.seek_for_prev("cherry")?;
    /// assert_eq!(it.key(), b"cherry");
    /// it.seek_for_prev("aardvark")?;
    /// assert!(!it.valid());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`seek_to_first`](Self::seek_to_first).
    pub fn seek_for_prev(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        self.widen();
        if !self.below_upper(key) {
            return self.run(true, Self::try_seek_to_last);
        }
        self.run(true, |it| it.try_seek_for_prev(key))
    }

    /// Whether `key` is above the cursor's lower bound (a [`Db::cursor_in`] range).
    fn above_lower(&self, key: &[u8]) -> bool {
        in_bounds(key, &self.lower, &Bound::Unbounded)
    }

    /// Whether `key` is below the cursor's upper bound.
    fn below_upper(&self, key: &[u8]) -> bool {
        in_bounds(key, &Bound::Unbounded, &self.upper)
    }

    /// Moves to the next key (invalid past the last). Does nothing on an invalid cursor.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// let mut it = db.cursor();
    /// it.seek_to_first()?;
    /// it.next()?;
    /// assert_eq!(it.key(), b"b");
    /// it.next()?;
    /// assert!(!it.valid());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`seek_to_first`](Self::seek_to_first); on a cursor already invalid after an error,
    /// that error again.
    // A cursor, not a `std::iter::Iterator`: keys and values borrow from it. (`Scan`, from
    // `Db::iter` and `Db::scan`, is the `Iterator`.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        self.run(false, Self::try_next)
    }

    /// Moves to the previous key (invalid before the first). Does nothing on an invalid cursor.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// let mut it = db.cursor();
    /// it.seek_to_last()?;
    /// it.prev()?;
    /// assert_eq!(it.key(), b"a");
    /// it.prev()?;
    /// assert!(!it.valid());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`next`](Self::next).
    pub fn prev(&mut self) -> Result<()> {
        if self.wide.is_some() && self.valid {
            // A narrowed merge may lack keys below the seek: position the wide one here first.
            let here = self.key().to_vec();
            self.widen();
            self.run(true, |it| it.try_seek(&here))?;
        }
        self.run(false, Self::try_prev)
    }

    /// The error the last seek or step met, if any: `Ok` while the cursor is positioned or has
    /// simply run off an end.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// let mut it = db.cursor();
    /// it.seek_to_first()?;
    /// assert!(!it.valid()); // an empty store
    /// it.status()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A copy of the error the last move returned (`Error::Corruption` naming a damaged table,
    /// `Error::Io`), until the next seek.
    pub fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    /// Runs a move: a seek (`seek` true) starts afresh, a step on an invalid cursor does nothing
    /// (and repeats the last error). An error leaves the cursor invalid and is kept for
    /// `status`.
    fn run(&mut self, seek: bool, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        if seek {
            self.error = None;
            if let Some(e) = &self.refused {
                return self.fail(e.duplicate());
            }
            if self.merged.is_none() {
                let merged = self.sources.merge().and_then(|m| {
                    let tombstones = self.sources.range_tombstones(&self.lower, &self.upper)?;
                    Ok((m, tombstones))
                });
                match merged {
                    Ok(((m, ages), tombstones)) => {
                        self.merged = Some(m);
                        self.child_ages = ages;
                        self.range_tombstones = tombstones;
                    }
                    Err(e) => return self.fail(e),
                }
            }
        } else if !self.valid {
            return self.status();
        }
        match f(self) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: Error) -> Result<()> {
        self.valid = false;
        self.resolved = false;
        self.saved_key.clear();
        self.saved_value.clear();
        self.error = Some(e.duplicate());
        Err(e)
    }

    fn try_seek_to_first(&mut self) -> Result<()> {
        self.direction = Direction::Forward;
        self.saved_value.clear();
        if let Some(it) = self.merged.as_mut() {
            match &self.lower {
                Bound::Included(k) | Bound::Excluded(k) => {
                    self.saved_key.clear();
                    append_internal_key(&mut self.saved_key, k, self.sequence, SEEK_KIND);
                    it.seek(&self.saved_key)?;
                }
                Bound::Unbounded => it.seek_to_first()?,
            }
            self.sources.settle_range_verdicts(it);
        }
        self.find_next_user_entry(false)?;
        self.skip_excluded_lower()
    }

    fn try_seek_to_last(&mut self) -> Result<()> {
        self.direction = Direction::Reverse;
        if let Some(it) = self.merged.as_mut() {
            match &self.upper {
                Bound::Included(k) | Bound::Excluded(k) => {
                    self.saved_key.clear();
                    append_internal_key(&mut self.saved_key, k, 0, ValueKind::Deletion);
                    it.seek_for_prev(&self.saved_key)?;
                }
                Bound::Unbounded => it.seek_to_last()?,
            }
            self.sources.settle_range_verdicts(it);
        }
        self.find_prev_user_entry()?;
        self.skip_excluded_upper()
    }

    fn try_seek(&mut self, key: &[u8]) -> Result<()> {
        self.direction = Direction::Forward;
        self.saved_value.clear();
        self.saved_key.clear();
        // The newest version of `key` visible at the cursor's sequence sorts first.
        append_internal_key(&mut self.saved_key, key, self.sequence, SEEK_KIND);
        if let Some(it) = self.merged.as_mut() {
            it.seek(&self.saved_key)?;
            self.sources.settle_range_verdicts(it);
        }
        self.find_next_user_entry(false)
    }

    fn try_seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.direction = Direction::Reverse;
        self.saved_key.clear();
        // Sequence 0 and the tombstone tag make the largest internal key of `key`: every version
        // of it is at or before this one.
        append_internal_key(&mut self.saved_key, key, 0, ValueKind::Deletion);
        if let Some(it) = self.merged.as_mut() {
            it.seek_for_prev(&self.saved_key)?;
        }
        self.find_prev_user_entry()
    }

    /// A scan whose start bound is exclusive does not return the bound itself.
    fn skip_excluded_lower(&mut self) -> Result<()> {
        if let Bound::Excluded(k) = &self.lower
            && self.valid
            && self.key() == k.as_slice()
        {
            return self.try_next();
        }
        Ok(())
    }

    /// A scan whose end bound is exclusive does not return the bound itself.
    fn skip_excluded_upper(&mut self) -> Result<()> {
        if let Bound::Excluded(k) = &self.upper
            && self.valid
            && self.key() == k.as_slice()
        {
            return self.try_prev();
        }
        Ok(())
    }

    fn try_next(&mut self) -> Result<()> {
        let Some(it) = self.merged.as_mut() else {
            self.valid = false;
            return Ok(());
        };
        if self.direction == Direction::Reverse {
            // The merge is just before every version of the current key (or past the beginning):
            // step into them; `saved_key` holds the key, whose versions are skipped below.
            self.direction = Direction::Forward;
            self.saved_value.clear();
            if it.valid() {
                it.next()?;
            } else {
                it.seek_to_first()?;
            }
        } else if self.resolved {
            // `saved_key` holds the merged key and the merge is past its operands already.
            self.resolved = false;
        } else {
            self.saved_key.clear();
            self.saved_key.extend_from_slice(user_key(it.key()));
            it.next()?;
        }
        self.find_next_user_entry(true)
    }

    fn try_prev(&mut self) -> Result<()> {
        let Some(it) = self.merged.as_mut() else {
            self.valid = false;
            return Ok(());
        };
        if self.direction == Direction::Forward && self.resolved {
            // The merge is past the merged key's operands (`saved_key`): back before its versions.
            self.resolved = false;
            if !it.valid() {
                it.seek_to_last()?;
            }
            while it.valid() && compare_bytes(user_key(it.key()), &self.saved_key).is_ge() {
                it.prev()?;
            }
            if !it.valid() {
                self.valid = false;
                self.saved_key.clear();
                return Ok(());
            }
            self.direction = Direction::Reverse;
        }
        if self.direction == Direction::Forward {
            // The merge is on the current entry: move it before every version of the current key.
            self.saved_key.clear();
            self.saved_key.extend_from_slice(user_key(it.key()));
            loop {
                it.prev()?;
                if !it.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    return Ok(());
                }
                if compare_bytes(user_key(it.key()), &self.saved_key).is_lt() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry()
    }

    /// Forward from the merge's position to the newest visible version of the next user key that
    /// is not deleted, skipping (if `skipping`) every version of `saved_key` and of keys before it.
    fn find_next_user_entry(&mut self, mut skipping: bool) -> Result<()> {
        self.valid = false;
        self.resolved = false;
        let Some(it) = self.merged.as_mut() else {
            return Ok(());
        };
        while it.valid() {
            let Some(p) = parse_internal_key(it.key()) else {
                return Err(malformed(&self.inner.dir));
            };
            let past_end = match &self.upper {
                Bound::Included(e) => compare_bytes(p.user_key, e).is_gt(),
                Bound::Excluded(e) => compare_bytes(p.user_key, e).is_ge(),
                Bound::Unbounded => false,
            };
            if past_end {
                break;
            }
            if p.seq <= self.sequence {
                let (kind, stamp) =
                    judge(self.sources.expiry, p.kind, it.value(), &self.inner.dir)?;
                let age = || it.current_child().map_or(0, |c| self.child_ages[c]);
                let (kind, piece) =
                    under_range_tombstones(&self.range_tombstones, &p, kind, self.sequence, age);
                match kind {
                    // `judge` makes an expiring value a value or a tombstone.
                    ValueKind::RangeDeletion | ValueKind::ExpiringValue => {
                        return Err(malformed(&self.inner.dir))
                    }
                    ValueKind::Deletion => {
                        // Every older version of this key is hidden. (A key at or before the one
                        // hidden already leaves it: after a backward walk jumped a source back
                        // past a range tombstone's start, a step forward meets that source's
                        // covered entries before the current key's versions.)
                        if !(skipping && compare_bytes(p.user_key, &self.saved_key).is_le()) {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                        }
                        skipping = true;
                        if let Some(piece) = piece {
                            // Nothing of this source before the piece's end is visible.
                            it.skip_current_to(&lookup_key(&piece.end, MAX_SEQUENCE))?;
                            continue;
                        }
                    }
                    ValueKind::Value => {
                        let hidden = skipping && compare_bytes(p.user_key, &self.saved_key).is_le();
                        if !hidden {
                            self.valid = true;
                            self.stamp = stamp;
                            return Ok(());
                        }
                    }
                    ValueKind::Merge => {
                        let hidden = skipping && compare_bytes(p.user_key, &self.saved_key).is_le();
                        if !hidden {
                            return self.resolve_forward();
                        }
                    }
                }
            }
            it.next()?;
        }
        self.saved_key.clear();
        Ok(())
    }

    /// Backward from the merge's position to the previous user key whose newest visible version is
    /// a value: walking back, a key's versions come oldest first, so the walk goes on until it
    /// reaches an older key, keeping the newest visible version it passed. The merge ends on the
    /// entry before that key's versions; the key and value are copied.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        self.valid = false;
        self.resolved = false;
        let mut found = false;
        // Whether `saved_value` holds the value beneath the operands gathered (if any).
        let mut base = false;
        self.operands.clear();
        if let Some(it) = self.merged.as_mut() {
            while it.valid() {
                let Some(p) = parse_internal_key(it.key()) else {
                    return Err(malformed(&self.inner.dir));
                };
                let before_start = match &self.lower {
                    Bound::Included(s) => compare_bytes(p.user_key, s).is_lt(),
                    Bound::Excluded(s) => compare_bytes(p.user_key, s).is_le(),
                    Bound::Unbounded => false,
                };
                if before_start {
                    break;
                }
                if p.seq <= self.sequence {
                    if found && compare_bytes(p.user_key, &self.saved_key).is_lt() {
                        // A visible entry of an older key: the key after it is the answer.
                        break;
                    }
                    let (kind, stamp) =
                        judge(self.sources.expiry, p.kind, it.value(), &self.inner.dir)?;
                    let age = || it.current_child().map_or(0, |c| self.child_ages[c]);
                    let (kind, piece) = under_range_tombstones(
                        &self.range_tombstones,
                        &p,
                        kind,
                        self.sequence,
                        age,
                    );
                    match kind {
                        // `judge` makes an expiring value a value or a tombstone.
                        ValueKind::RangeDeletion | ValueKind::ExpiringValue => {
                            return Err(malformed(&self.inner.dir))
                        }
                        ValueKind::Deletion => {
                            found = false;
                            base = false;
                            self.operands.clear();
                            self.saved_key.clear();
                            self.saved_value.clear();
                            if let Some(piece) = piece {
                                // Nothing of this source from the piece's start on is visible:
                                // to the last entry before it (every entry of the start key sorts
                                // after this target).
                                let before = internal_key(
                                    &piece.start,
                                    MAX_SEQUENCE,
                                    ValueKind::RangeDeletion,
                                );
                                it.skip_current_to(&before)?;
                                continue;
                            }
                        }
                        ValueKind::Value => {
                            found = true;
                            base = true;
                            self.operands.clear();
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                            self.saved_value.clear();
                            self.saved_value.extend_from_slice(it.value());
                            self.stamp = stamp;
                        }
                        ValueKind::Merge => {
                            // Walking back, a key's versions come oldest first: an operand
                            // after a value or another operand of its key builds on them.
                            if !found {
                                found = true;
                                base = false;
                                self.saved_key.clear();
                                self.saved_key.extend_from_slice(p.user_key);
                                self.saved_value.clear();
                            }
                            self.operands.push(it.value());
                        }
                    }
                }
                it.prev()?;
            }
        }
        if found && !self.operands.is_empty() {
            self.resolve_backward(base)?;
        }
        if found {
            self.valid = true;
        } else {
            self.saved_key.clear();
            self.saved_value.clear();
        }
        Ok(())
    }
}

mod operands;
#[cfg(test)]
mod tests;
