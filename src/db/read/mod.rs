//! Point lookups: memtable, frozen memtables, then each table that may hold the key, filter first.
//!
//! The way to a filter's "no" allocates nothing: the lookup key is built inline (a long one in a
//! per-thread buffer), pinned table readers are borrowed from the version, and the key is hashed
//! once for all tables.
//!
//! The room also holds `multi_get.rs` (batched lookups), `explain.rs` (`explain_get`,
//! `explain_scan`) and `range_filtering.rs` (the tables a bounded read leaves out).

mod explain;
mod multi_get;
pub(crate) mod range_filtering;

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::tree::SuperVersion;
use super::tree::Tree;
use super::ttl::StoredValue;
use super::version::{FileMeta, Version};
use super::{Db, Snapshot};
use crate::error::Result;
use crate::filter::{FilterLayout, FilterProbe};
use crate::key::{
    append_internal_key, leading_bytes, user_key, InternalKey, INLINE_KEY_BYTES, SEEK_KIND, TAG_LEN,
};
use crate::memtable::NewestEntry;
use crate::options::NUM_LEVELS;
use crate::pinned_value::PinnedValue;
use crate::sst::filter_block::InMemoryFilter;
use crate::sst::table_reader::{CopyValue, PinValue, TableSearch, TakeValue};
use crate::stats::{FilterVerdict, Ticker};

/// A lookup buffer larger than this is not kept for the thread's next Get.
const KEPT_LOOKUP_BYTES: usize = 4096;

thread_local! {
    /// The buffer of Gets whose lookup key is too long to be stored inline.
    static LONG_LOOKUP_KEY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Calls `f` with the lookup key of `(key, seq)`: the newest entry of `key` visible at `seq`
/// (`SEEK_KIND` sorts before every kind at one sequence). A short key is built inline; a long one
/// in this thread's buffer, so neither allocates once the buffer has grown.
pub(crate) fn with_lookup_key<R>(key: &[u8], seq: u64, f: impl FnOnce(&InternalKey) -> R) -> R {
    if key.len() + TAG_LEN <= INLINE_KEY_BYTES {
        return f(&InternalKey::new(key, seq, SEEK_KIND));
    }
    // Taken out of the cell for the call: were it ever used re-entrantly, the inner use would
    // find it empty and allocate its own rather than clobber this one.
    let mut buf = LONG_LOOKUP_KEY.take();
    buf.clear();
    append_internal_key(&mut buf, key, seq, SEEK_KIND);
    let lookup = InternalKey::Heap(buf);
    let r = f(&lookup);
    if let InternalKey::Heap(buf) = lookup
        && buf.capacity() <= KEPT_LOOKUP_BYTES
    {
        LONG_LOOKUP_KEY.set(buf);
    }
    r
}

/// One table a point lookup considered.
pub(crate) enum TableVisit<'a, V = Vec<u8>> {
    /// An L0 table whose key range does not hold the key: passed over without a look.
    OutOfRange,
    /// A table that was searched, what the search did, and how many cache lines of a filter
    /// kept in memory its probe reads (0 when the filter is elsewhere or was not asked).
    Searched(&'a TableSearch<V>, u32),
}

/// The full filter `file`'s pinned reader keeps in memory, if it is open and has one that
/// holds whole keys.
#[inline(always)]
fn in_memory_filter(file: &FileMeta) -> Option<InMemoryFilter<'_>> {
    file.pinned_reader()?.reader().filter_in_memory()
}

impl Tree {
    /// The walk every point lookup takes through `version`: each L0 table newest first (searched
    /// if its key range holds the key), then the one table per deeper level whose range may hold
    /// it, until a table holds an entry for the key. `visit` sees every table considered, in
    /// order. `lookup` is the lookup key; `probe` its user key's, hashed at most once.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if a table is damaged; `Error::Io` if one cannot be read.
    // Inlined into each caller, as the loop it replaces was: a call per Get and per table shows
    // in a missing Get's instruction count.
    #[inline(always)]
    pub(crate) fn search_tables<'v, T: TakeValue>(
        &self,
        version: &'v Version,
        lookup: &InternalKey,
        probe: &FilterProbe<'_>,
        mut visit: impl FnMut(usize, &'v FileMeta, TableVisit<'_, T::Value>),
    ) -> Result<Option<NewestEntry<T::Value>>> {
        let lookup = lookup.as_bytes();
        let ukey = user_key(lookup);
        // Two plain loops rather than a chained iterator: this runs once per Get.
        for file in version.levels[0].iter().rev() {
            if !file.overlaps(ukey, ukey) {
                visit(0, file, TableVisit::OutOfRange);
                continue;
            }
            if let Some(found) = self.search_table::<T>(0, file, lookup, probe, &mut visit)? {
                return Ok(Some(found));
            }
        }
        for (level, file) in version.deeper_tables_for_key(ukey) {
            if let Some(found) = self.search_table::<T>(level, file, lookup, probe, &mut visit)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// One step of [`search_tables`](Self::search_tables): searches `file` and shows `visit`.
    #[inline(always)]
    fn search_table<'v, T: TakeValue>(
        &self,
        level: usize,
        file: &'v FileMeta,
        lookup: &[u8],
        probe: &FilterProbe<'_>,
        visit: &mut impl FnMut(usize, &'v FileMeta, TableVisit<'_, T::Value>),
    ) -> Result<Option<NewestEntry<T::Value>>> {
        let table = self.tables.get(file)?;
        let outcome = table.search::<T>(lookup, probe)?;
        let lines = match outcome.filter {
            Some(_) => table.filter().map_or(0, |f| f.lines_per_probe()),
            None => 0,
        };
        visit(level, file, TableVisit::Searched(&outcome, lines));
        if outcome.covered() {
            return Ok(Some(NewestEntry::RangeDeleted));
        }
        Ok(outcome.found)
    }

    /// Whether the filters alone rule `ukey` out of every table of `version` a lookup of it would
    /// search: `Some(tables)` if each of them, all open with a full filter kept in memory, says
    /// "no", counted as [`search_tables`](Self::search_tables)' walk would count them; `None`
    /// otherwise, and the walk decides (asking these filters again, their lines now cached).
    ///
    /// It finds every candidate's filter line and starts loading it before it tests any, so
    /// that a missing key waits for about one memory miss however many levels and L0 tables
    /// the tree has, where the walk, which stops at the first table holding the key, tests each
    /// filter before it looks for the next table.
    #[inline(always)]
    fn absent_by_filters(
        &self,
        version: &Version,
        ukey: &[u8],
        probe: &FilterProbe<'_>,
    ) -> Option<u64> {
        let l0 = &version.levels[0];
        let mut deeper = [None; NUM_LEVELS];
        let lead = leading_bytes(ukey);
        let mut met = 0u8;
        // First pass: every candidate's filter found and its line requested.
        for file in l0.iter() {
            if file.overlaps(ukey, ukey) {
                in_memory_filter(file)?.prefetch(probe);
                met = 1;
            }
        }
        for (level, slot) in deeper.iter_mut().enumerate().take(version.depth()).skip(1) {
            if let Some(i) = version.table_index_for_key(level, ukey, lead) {
                let filter = version.kept_filter(level, i)?;
                filter.prefetch(probe);
                *slot = Some(filter);
                met |= 1 << level;
            }
        }
        // Second pass: the lines tested, in the walk's order; one "maybe" hands the Get back.
        let (mut l0_ruled_out, mut l0_lines) = (0, 0);
        for file in l0.iter().rev().filter(|f| f.overlaps(ukey, ukey)) {
            let filter = in_memory_filter(file)?;
            if filter.may_match(probe) {
                return None;
            }
            l0_ruled_out += 1;
            l0_lines += u64::from(filter.lines());
        }
        let mut consulted = l0_ruled_out;
        for filter in deeper.iter().flatten() {
            if filter.may_match(probe) {
                return None;
            }
            consulted += 1;
        }
        // Counted as the walk counts a filter's "no" (see `get_in`).
        self.count_ruled_out(0, l0_ruled_out, l0_lines);
        for (level, filter) in deeper.iter().enumerate() {
            if let Some(filter) = filter {
                self.count_ruled_out(level, 1, u64::from(filter.lines()));
            }
        }
        self.stats.record_absent_get(met);
        Some(consulted)
    }

    /// Counts `tables` filters' "no" at `level`, whose probes read `lines` cache lines in all,
    /// as [`get_in`](Self::get_in) counts them.
    #[inline(always)]
    fn count_ruled_out(&self, level: usize, tables: u64, lines: u64) {
        if tables == 0 {
            return;
        }
        self.stats
            .record_filters(level, FilterLayout::Full, FilterVerdict::Useful, tables);
        self.stats.record_filter_lines(level, lines);
    }

    /// The newest entry of `key` visible at `seq` in `sv` (one of this tree's super-versions):
    /// the memtables, then the tables, filters first. Values from tables as `T` takes them,
    /// values from memtables through `from_memtable`. Counts what it did, as a Get.
    ///
    /// # Errors
    /// As [`search_tables`](Self::search_tables).
    #[inline(always)]
    pub(crate) fn get_in<T: TakeValue>(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        seq: u64,
        from_memtable: impl FnOnce(Vec<u8>) -> T::Value,
    ) -> Result<Option<NewestEntry<T::Value>>> {
        let tree = self;
        let found = with_lookup_key(
            key,
            seq,
            |lookup| -> Result<Option<NewestEntry<T::Value>>> {
                if let Some(hit) = sv
                    .mem
                    .get(lookup)
                    .or_else(|| sv.imm.iter().find_map(|m| m.get(lookup)))
                {
                    tree.stats.inc(Ticker::MemtableHit);
                    return Ok(Some(match hit {
                        NewestEntry::Value(v) => NewestEntry::Value(from_memtable(v)),
                        NewestEntry::Expiring(v) => NewestEntry::Expiring(from_memtable(v)),
                        NewestEntry::Merge(v) => NewestEntry::Merge(from_memtable(v)),
                        NewestEntry::Deleted => NewestEntry::Deleted,
                        NewestEntry::RangeDeleted => NewestEntry::RangeDeleted,
                    }));
                }
                let probe = FilterProbe::new(key);
                if let Some(consulted) = tree.absent_by_filters(&sv.version, key, &probe) {
                    tree.stats.add(Ticker::TablesConsulted, consulted);
                    return Ok(None);
                }
                let (mut consulted, mut met) = (0, 0u8);
                let found =
                    tree.search_tables::<T>(&sv.version, lookup, &probe, |level, _, visit| {
                        let TableVisit::Searched(search, lines) = visit else {
                            return;
                        };
                        consulted += 1;
                        met |= 1 << level;
                        // The statistics count what each table's filter answered, by level and layout.
                        if let Some((layout, maybe)) = search.filter {
                            let verdict = FilterVerdict::of(maybe, search.found.is_some());
                            tree.stats.record_filter(level, layout, verdict);
                            tree.stats.record_filter_lines(level, u64::from(lines));
                        }
                    })?;
                tree.stats.add(Ticker::TablesConsulted, consulted);
                if found.is_none() {
                    tree.stats.record_absent_get(met);
                }
                Ok(found)
            },
        )?;
        if matches!(found, Some(NewestEntry::RangeDeleted)) {
            tree.stats.inc(Ticker::RangeDeleteCovered);
        }
        Ok(found)
    }
}

impl Db {
    /// The value of `key`, or `None` if it is absent or deleted.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if a table it must read is damaged; `Error::Io` if a
    /// table cannot be read; `Error::Closed` once the store is [closed](Db::close).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_at_sequence::<CopyValue>(key.as_ref(), None, |v| v)
    }

    /// The value `key` had when `snapshot` was taken, or `None` if it was absent or deleted then.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// let empty = db.snapshot();
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.get_at(&empty, b"k")?, None);
    /// assert_eq!(db.get_at(&db.snapshot(), b"k")?, Some(b"v".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`get`](Db::get).
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn get_at(&self, snapshot: &Snapshot, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.check_snapshot(snapshot);
        self.get_at_sequence::<CopyValue>(key.as_ref(), Some(snapshot), |v| v)
    }

    /// The value of `key` as a view into the cached block that holds it, without copying it (a
    /// value still in a memtable is copied once): for large values, where [`get`](Db::get)'s copy
    /// shows. The view keeps its block in memory while it lives. See [`PinnedValue`].
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("photo", vec![0xAB; 64 << 10])?;
    /// db.flush()?;
    /// let photo = db.get_pinned("photo")?.expect("written");
    /// assert_eq!(photo.len(), 64 << 10); // no copy was made: `photo` borrows the cached block
    /// assert_eq!(*photo, *db.get("photo")?.expect("written"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get`](Db::get).
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<PinnedValue>> {
        self.get_at_sequence::<PinValue>(key.as_ref(), None, PinnedValue::owned)
    }

    /// [`get_pinned`](Db::get_pinned) at `snapshot`.
    ///
    /// # Errors
    /// As [`get`](Db::get).
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn get_pinned_at(
        &self,
        snapshot: &Snapshot,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<PinnedValue>> {
        self.check_snapshot(snapshot);
        self.get_at_sequence::<PinValue>(key.as_ref(), Some(snapshot), PinnedValue::owned)
    }

    /// A Get at `snapshot`, or at the latest write if `None`; values from tables as `T` takes
    /// them, values from memtables through `from_memtable`.
    #[inline(always)]
    fn get_at_sequence<T: TakeValue>(
        &self,
        key: &[u8],
        snapshot: Option<&Snapshot>,
        from_memtable: impl Fn(Vec<u8>) -> T::Value + Copy,
    ) -> Result<Option<T::Value>>
    where
        T::Value: StoredValue,
    {
        let inner = &self.inner;
        let tree = &*self.tree;
        inner.check_open()?;
        tree.check_live()?;
        tree.stats.inc(Ticker::NumberKeysRead);
        // As `read_view`: the super-version first, then the sequence. The read lock is held for
        // the whole Get; installers wait for it, briefly. A snapshot's sequence is older than
        // every version the super-version could have dropped for it (flushes and compactions
        // keep the newest version at or below every live snapshot).
        // A follower's snapshot pins super-versions of its own.
        let pinned = snapshot.and_then(|s| s.view_of(tree.id));
        let current;
        let sv: &Arc<SuperVersion> = match &pinned {
            Some(sv) => sv,
            None => {
                current = tree.current.read();
                &current
            }
        };
        let seq = snapshot.map_or_else(
            || inner.last_sequence.load(Ordering::Acquire),
            |s| s.sequence(),
        );
        let found = tree.get_in::<T>(sv, key, seq, from_memtable)?;
        let found = tree.expire_found(&inner.dir, found)?;
        Ok(match found {
            Some(NewestEntry::Value(v)) => {
                tree.stats.inc(Ticker::NumberKeysFound);
                Some(v)
            }
            Some(NewestEntry::Merge(_)) => {
                let merged = self.read_merged(sv, key, seq)?;
                if merged.is_some() {
                    tree.stats.inc(Ticker::NumberKeysFound);
                }
                merged.map(from_memtable)
            }
            // `expire_found` made an expiring value a value or a tombstone.
            Some(NewestEntry::Deleted | NewestEntry::RangeDeleted | NewestEntry::Expiring(_))
            | None => None,
        })
    }
}
