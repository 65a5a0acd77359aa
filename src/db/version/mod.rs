//! A version: the set of live tables, level by level. Versions are immutable; each flush or
//! compaction makes a new one from an edit, and readers keep the one they started with.
//!
//! The room holds the table set and what records and serves it: `edit.rs` (one MANIFEST record),
//! `manifest.rs` (the MANIFEST and CURRENT), `keyspace_options.rs` (a keyspace's options as the
//! MANIFEST records them), `level_filters.rs`, `table_cache.rs` (open table readers) and
//! `filename.rs` (the names of a store's files). It names nothing of the rest of the store.

pub(crate) mod edit;
pub(crate) mod filename;
pub(crate) mod keyspace_options;
pub(crate) mod lazy_shape;
mod level_filters;
pub(crate) mod manifest;
pub(crate) mod table_cache;

use std::fmt;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use crate::key::{compare_bytes, leading_bytes, user_key};
use crate::key_range::{above_start, below_end};
use crate::options::{Options, NUM_LEVELS};
use crate::sst::properties::TableProperties;
use crate::sst::table_reader::TableReader;
use edit::{NewFile, VersionEdit};
use level_filters::{kept_filter, level_filters, KeptFilter, LevelFilters};

/// A table's open reader, pinned in its `FileMeta` by the table cache; dropping it (when the table
/// leaves the last version) gives its pin back.
pub(crate) struct PinnedReader {
    reader: Arc<TableReader>,
    pinned: Arc<AtomicUsize>,
}

impl PinnedReader {
    /// `reader`, holding one of the pins counted by `pinned`.
    pub(crate) fn new(reader: Arc<TableReader>, pinned: Arc<AtomicUsize>) -> Self {
        PinnedReader { reader, pinned }
    }

    pub(crate) fn reader(&self) -> &Arc<TableReader> {
        &self.reader
    }
}

impl Drop for PinnedReader {
    fn drop(&mut self) {
        self.pinned.fetch_sub(1, Relaxed);
    }
}

/// What deletes a table file once no version uses it any more.
pub(crate) type Retire = Arc<dyn Fn(u64) + Send + Sync>;

/// A table file's lifetime, shared by every [`FileMeta`] listing it: the one it was written with
/// and those of the levels it was moved to without a rewrite. Whichever of them is marked
/// obsolete, the file goes when the last is dropped, so a version from before a move (a scan, a
/// backup's view) keeps the file as surely as one from after it.
struct TableLife {
    number: u64,
    retire: OnceLock<Retire>,
}

impl Drop for TableLife {
    fn drop(&mut self) {
        if let Some(retire) = self.retire.get() {
            retire(self.number);
        }
    }
}

/// A live table. When a compaction's edit removing it is durable, it is marked obsolete; the file
/// is deleted when the last version holding it (a Get, a scan, an old super-version) lets go.
pub(crate) struct FileMeta {
    pub(crate) number: u64,
    /// The level it is listed in. A table moved down without a rewrite gets a new `FileMeta`
    /// for its new level (see `DbInner::move_or_compact`).
    pub(crate) level: usize,
    pub(crate) size: u64,
    /// Smallest internal key.
    pub(crate) smallest: Vec<u8>,
    /// Largest internal key.
    pub(crate) largest: Vec<u8>,
    /// [`leading_bytes`] of the smallest and largest user keys: most comparisons with a key end
    /// on these integers, without reaching the bytes.
    smallest_lead: u128,
    largest_lead: u128,
    /// Whether it holds range tombstones.
    pub(crate) range_tombstones: bool,
    /// The sequence an ingested table's entries are read at (see `NewFile::global_sequence`).
    pub(crate) global_sequence: Option<u64>,
    /// The table's open reader, once the table cache pins it here.
    reader: OnceLock<PinnedReader>,
    /// What its filter spends, once Monkey allocation has read it from the properties: every flush
    /// and compaction reads every live table's (`compaction/table_filter.rs`).
    pub(crate) filter_spend: OnceLock<FilterSpend>,
    /// Set once a compaction starts merging it: Monkey allocation counts it in the level it is
    /// going to and leaves it out of the memory bound (`compaction/table_filter.rs`). A compaction that fails
    /// leaves it set, which only loosens that bound until the table is merged.
    pub(crate) merging: std::sync::atomic::AtomicBool,
    life: Arc<TableLife>,
}

impl fmt::Debug for FileMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "table {} ({} bytes)", self.number, self.size)
    }
}

impl Drop for FileMeta {
    fn drop(&mut self) {
        // Close the file before it is deleted (when `life` goes, after this).
        drop(self.reader.take());
    }
}

impl FileMeta {
    /// Deletes the file through `retire` once the last version using it is gone (listing it in
    /// any level: see [`TableLife`]).
    pub(crate) fn mark_obsolete(&self, retire: Retire) {
        let _ = self.life.retire.set(retire);
    }

    /// The reader the table cache pinned here, if any.
    pub(crate) fn pinned_reader(&self) -> Option<&PinnedReader> {
        self.reader.get()
    }

    /// Pins `reader` here unless one already is (then `reader` is dropped).
    pub(crate) fn pin_reader(&self, reader: PinnedReader) {
        let _ = self.reader.set(reader);
    }

    #[inline]
    pub(crate) fn smallest_user(&self) -> &[u8] {
        user_key(&self.smallest)
    }

    #[inline]
    pub(crate) fn largest_user(&self) -> &[u8] {
        user_key(&self.largest)
    }

    /// Whether the table's user-key range meets `[lo, hi]`.
    #[inline]
    pub(crate) fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        compare_bytes(self.largest_user(), lo).is_ge()
            && compare_bytes(self.smallest_user(), hi).is_le()
    }

    /// Whether the table's user-key range meets the range `(start, end)`.
    pub(crate) fn meets(&self, (start, end): (Bound<&[u8]>, Bound<&[u8]>)) -> bool {
        above_start(self.largest_user(), start) && below_end(self.smallest_user(), end)
    }

    /// Whether the table's largest user key sorts before `ukey`, whose [`leading_bytes`] are
    /// `lead`.
    #[inline]
    pub(crate) fn ends_before(&self, ukey: &[u8], lead: u128) -> bool {
        self.largest_lead < lead
            || (self.largest_lead == lead && compare_bytes(self.largest_user(), ukey).is_lt())
    }

    /// Whether the table's smallest user key sorts after `ukey`, whose [`leading_bytes`] are
    /// `lead`.
    #[inline]
    pub(crate) fn starts_after(&self, ukey: &[u8], lead: u128) -> bool {
        self.smallest_lead > lead
            || (self.smallest_lead == lead && compare_bytes(self.smallest_user(), ukey).is_gt())
    }

    /// The MANIFEST's record of this table, as it is, at `level` (its own, or one it moves to).
    pub(crate) fn record_at(&self, level: usize) -> NewFile {
        NewFile {
            level,
            number: self.number,
            size: self.size,
            smallest: self.smallest.clone(),
            largest: self.largest.clone(),
            range_tombstones: self.range_tombstones,
            global_sequence: self.global_sequence,
        }
    }

    pub(crate) fn from_new_file(f: &NewFile) -> FileMeta {
        let life = Arc::new(TableLife {
            number: f.number,
            retire: OnceLock::new(),
        });
        FileMeta::with_life(f, life)
    }

    /// The table `f`, whose file lives as long as `life` does.
    fn with_life(f: &NewFile, life: Arc<TableLife>) -> FileMeta {
        FileMeta {
            number: f.number,
            level: f.level,
            size: f.size,
            smallest: f.smallest.clone(),
            largest: f.largest.clone(),
            smallest_lead: leading_bytes(user_key(&f.smallest)),
            largest_lead: leading_bytes(user_key(&f.largest)),
            range_tombstones: f.range_tombstones,
            global_sequence: f.global_sequence,
            reader: OnceLock::new(),
            filter_spend: OnceLock::new(),
            merging: std::sync::atomic::AtomicBool::new(false),
            life,
        }
    }
}

/// What a live table's filter spends, read from its properties.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FilterSpend {
    /// The keys its filter holds; a table without a filter counts its entries, which uniform
    /// allocation would have filtered.
    pub(crate) keys: u64,
    /// The bits it spends: its bits per key times its keys, leaving out the few bytes of rounding
    /// and trailer that every table pays whatever its bits (uniform's tables pay them too).
    pub(crate) bits: f64,
    /// Those few bytes, in bits: its filter's size less `bits`.
    pub(crate) overhead: f64,
}

impl FilterSpend {
    pub(crate) fn of(p: &TableProperties) -> FilterSpend {
        if p.filter_layout.is_empty() || p.filter_keys == 0 {
            return FilterSpend {
                keys: p.num_entries,
                bits: 0.0,
                overhead: 0.0,
            };
        }
        let size = p.filter_bytes as f64 * 8.0;
        // A policy without a bits-per-key notion records NaN; its bytes say what it spends.
        let bits = if p.filter_bits_per_key.is_finite() {
            p.filter_bits_per_key * p.filter_keys as f64
        } else {
            size
        };
        FilterSpend {
            keys: p.filter_keys,
            bits,
            overhead: (size - bits).max(0.0),
        }
    }
}

/// What starts a compaction of a keyspace now: the L0 table count, and the multiple of its byte
/// budget a deeper level may hold (the quiet ones, or those while writes flow:
/// `db/compaction/write_burst.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Triggers {
    pub(crate) l0_tables: usize,
    pub(crate) level_budget: f64,
}

impl Triggers {
    /// The triggers once writes pause: L0 at `level0_compaction_trigger`, every deeper level at
    /// its budget.
    pub(crate) fn quiet(options: &Options) -> Triggers {
        Triggers {
            l0_tables: options.level0_compaction_trigger,
            level_budget: 1.0,
        }
    }

    /// The triggers while writes flow.
    pub(crate) fn during_writes(options: &Options) -> Triggers {
        Triggers {
            l0_tables: options.l0_trigger_during_writes(),
            level_budget: options.level_budget_during_writes,
        }
    }
}

/// The tables of every level. L0 is ordered oldest to newest (its tables overlap); deeper levels
/// by key (their tables do not overlap).
#[derive(Debug, Clone, Default)]
pub(crate) struct Version {
    pub(crate) levels: [Vec<Arc<FileMeta>>; NUM_LEVELS],
    /// Per level, the [`leading_bytes`] of each table's largest user key, in the level's order:
    /// finding a key's table in a deeper level searches these without reaching into the tables.
    largest_leads: [Vec<u128>; NUM_LEVELS],
    /// The same of each table's smallest user key.
    smallest_leads: [Vec<u128>; NUM_LEVELS],
    /// Per level below L0, each table's filter, reached without its `FileMeta` (see
    /// `level_filters.rs`); empty for L0.
    filters: [LevelFilters; NUM_LEVELS],
    /// One past the deepest level that holds a table: a lookup walks no level below.
    depth: usize,
    /// Whether any table holds range tombstones.
    pub(crate) range_tombstones: bool,
}

impl Version {
    /// The version `edit` makes of this one.
    pub(crate) fn apply(&self, edit: &VersionEdit) -> Version {
        let mut v = self.clone();
        // A table the edit deletes and adds again is moved: one file, one lifetime.
        let mut moved = Vec::new();
        for &(level, number) in &edit.deleted {
            v.levels[level].retain(|f| {
                if f.number == number && edit.added.iter().any(|a| a.number == number) {
                    moved.push(Arc::clone(&f.life));
                }
                f.number != number
            });
        }
        for f in &edit.added {
            let meta = match moved.iter().find(|life| life.number == f.number) {
                Some(life) => FileMeta::with_life(f, Arc::clone(life)),
                None => FileMeta::from_new_file(f),
            };
            v.levels[f.level].push(Arc::new(meta));
        }
        v.levels[0].sort_by_key(|f| f.number);
        for level in v.levels.iter_mut().skip(1) {
            level.sort_by(|a, b| a.smallest_user().cmp(b.smallest_user()));
        }
        for (leads, files) in v.largest_leads.iter_mut().zip(&v.levels) {
            leads.clear();
            leads.extend(files.iter().map(|f| f.largest_lead));
        }
        for (leads, files) in v.smallest_leads.iter_mut().zip(&v.levels) {
            leads.clear();
            leads.extend(files.iter().map(|f| f.smallest_lead));
        }
        for (filters, files) in v.filters.iter_mut().zip(&v.levels).skip(1) {
            *filters = level_filters(files);
        }
        v.depth = v
            .levels
            .iter()
            .rposition(|files| !files.is_empty())
            .map_or(0, |l| l + 1);
        v.range_tombstones = v.levels.iter().flatten().any(|f| f.range_tombstones);
        v
    }

    /// The first pair of tables in one level ≥ 1 whose key ranges overlap, if any (a damaged
    /// MANIFEST).
    pub(crate) fn find_overlap(&self) -> Option<(usize, u64, u64)> {
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            for pair in files.windows(2) {
                if pair[0].largest_user() >= pair[1].smallest_user() {
                    return Some((level, pair[0].number, pair[1].number));
                }
            }
        }
        None
    }

    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.size).sum()
    }

    /// One past the deepest level that holds a table (0 for an empty version).
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// The tables below L0 a point lookup of `ukey` consults, in order: at most one per level,
    /// the one whose key range may hold it.
    pub(crate) fn deeper_tables_for_key<'v, 'k>(
        &'v self,
        ukey: &'k [u8],
    ) -> DeeperTablesForKey<'v, 'k> {
        DeeperTablesForKey {
            version: self,
            ukey,
            lead: leading_bytes(ukey),
            level: 1,
        }
    }

    /// The one table of `level` (below L0) whose key range holds `ukey`, if any; `lead` is
    /// `ukey`'s [`leading_bytes`].
    #[inline(always)]
    pub(crate) fn table_for_key(
        &self,
        level: usize,
        ukey: &[u8],
        lead: u128,
    ) -> Option<&Arc<FileMeta>> {
        let i = self.table_index_for_key(level, ukey, lead)?;
        self.levels[level].get(i)
    }

    /// [`table_for_key`](Self::table_for_key) as its place in the level, found from the
    /// level's arrays of leading bytes (reaching into a table only on a tie).
    #[inline(always)]
    pub(crate) fn table_index_for_key(
        &self,
        level: usize,
        ukey: &[u8],
        lead: u128,
    ) -> Option<usize> {
        let files = &self.levels[level];
        let leads = &self.largest_leads[level];
        // The first table whose largest key is ≥ ukey is the only one that may hold it: found
        // by the leading bytes, then on a tie by the bytes themselves.
        let mut i = leads.partition_point(|&l| l < lead);
        while i < files.len() && leads[i] == lead && files[i].ends_before(ukey, lead) {
            i += 1;
        }
        let smallest = *self.smallest_leads[level].get(i)?;
        let starts_after =
            smallest > lead || (smallest == lead && files[i].starts_after(ukey, lead));
        (!starts_after).then_some(i)
    }

    /// The filter of the table at `index` in `level` (below L0), reached from the level's
    /// array, if its reader keeps a full filter in memory (see `level_filters.rs`).
    #[inline(always)]
    pub(crate) fn kept_filter(&self, level: usize, index: usize) -> Option<&KeptFilter> {
        kept_filter(
            self.filters[level].get(index)?,
            self.levels[level].get(index)?,
        )
    }

    /// The tables of `level` whose ranges meet `[lo, hi]` (user keys).
    pub(crate) fn overlapping(&self, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<FileMeta>> {
        self.levels[level]
            .iter()
            .filter(|f| f.overlaps(lo, hi))
            .cloned()
            .collect()
    }

    /// Whether no level below `level` can hold a key in `[start, end)`, so a range tombstone over
    /// it may be dropped.
    pub(crate) fn is_base_level_for_range(&self, level: usize, start: &[u8], end: &[u8]) -> bool {
        self.levels
            .iter()
            .skip(level + 1)
            .all(|files| !files.iter().any(|f| f.overlaps(start, end)))
    }

    /// Whether no level below `level` can hold `ukey`, so a tombstone for it may be dropped.
    pub(crate) fn is_base_level_for_key(&self, level: usize, ukey: &[u8]) -> bool {
        self.levels
            .iter()
            .skip(level + 1)
            .all(|files| !files.iter().any(|f| f.overlaps(ukey, ukey)))
    }

    /// A version with the given tables: (level, number, smallest, largest, size); their keys
    /// with sequence 1.
    #[cfg(test)]
    pub(crate) fn for_tests(tables: &[(usize, u64, &str, &str, u64)]) -> Version {
        use crate::key::{internal_key, ValueKind};
        use edit::{NewFile, VersionEdit};
        let edit = VersionEdit {
            added: tables
                .iter()
                .map(|&(level, number, lo, hi, size)| NewFile {
                    level,
                    number,
                    size,
                    smallest: internal_key(lo.as_bytes(), 1, ValueKind::Value),
                    largest: internal_key(hi.as_bytes(), 1, ValueKind::Value),
                    range_tombstones: false,
                    global_sequence: None,
                })
                .collect(),
            ..Default::default()
        };
        Version::default().apply(&edit)
    }

    /// The level most in need of compaction and its score, if any score is ≥ 1. L0 scores by table
    /// count against `triggers.l0_tables`, deeper levels by bytes against their budget times
    /// `triggers.level_budget`.
    pub(crate) fn compaction_level(
        &self,
        options: &Options,
        triggers: Triggers,
    ) -> Option<(usize, f64)> {
        let mut best: Option<(usize, f64)> = None;
        let deepest = self.deepest_nonempty_level();
        for level in 0..NUM_LEVELS - 1 {
            let score = if level == 0 {
                self.levels[0].len() as f64 / triggers.l0_tables.max(1) as f64
            } else if self.grows_into_next(level) {
                // Its move costs no rewrite, so it waits for no slack.
                self.level_bytes(level) as f64 / options.max_bytes_for_level(level + 1) as f64
            } else {
                self.level_bytes(level) as f64
                    / (self.level_budget(options, level, deepest) * triggers.level_budget)
            };
            if score >= 1.0 && best.is_none_or(|(_, s)| score > s) {
                best = Some((level, score));
            }
        }
        best
    }

    /// How pressing the compaction this version most needs under `options`' style is, if
    /// `triggers` start one (≥ 1).
    pub(crate) fn compaction_score(&self, options: &Options, triggers: Triggers) -> Option<f64> {
        match options.compaction_style.runs_per_level() {
            None => self.compaction_level(options, triggers).map(|(_, s)| s),
            Some(t) => lazy_shape::next_step(self, options, triggers, t).map(|d| d.score),
        }
    }

    /// Whether `level` grows into the empty level below it rather than merging into it: it is
    /// the deepest level that holds tables, it is not L1 (which every L0 merge rewrites whole),
    /// and a level lies below it. Such a level holds up to the next level's budget and then moves
    /// there whole, without a rewrite: keys reach the level below by one move instead of by
    /// merges that rewrite what it already holds.
    pub(crate) fn grows_into_next(&self, level: usize) -> bool {
        level >= 2 && level + 1 < NUM_LEVELS && level == self.deepest_nonempty_level()
    }

    /// The bytes `level` (≥ 1, above `deepest`, the deepest level holding tables) may hold once
    /// writes pause: `max_bytes_for_level(level)`, or the deepest level's bytes divided by the
    /// level multiplier once per level between them, whichever is more. A level that merges
    /// into a deeper one bigger than its budget assumes keeps the ratio between them, so that
    /// each byte merged down rewrites no more below than the multiplier says.
    pub(crate) fn level_budget(&self, options: &Options, level: usize, deepest: usize) -> f64 {
        let own = options.max_bytes_for_level(level) as f64;
        if level >= deepest {
            return own;
        }
        let steps = i32::try_from(deepest - level).unwrap_or(i32::MAX);
        let scaled =
            self.level_bytes(deepest) as f64 / (options.level_size_multiplier as f64).powi(steps);
        own.max(scaled)
    }

    /// The largest user key its tables' bounds reach (`None` if it has no table): the last one
    /// of each level's (of every table in L0).
    pub(crate) fn largest_user_key(&self) -> Option<&[u8]> {
        let last_of_each = self.levels[1..].iter().filter_map(|l| l.last());
        self.levels[0]
            .iter()
            .chain(last_of_each)
            .map(|f| crate::key::user_key(&f.largest))
            .max()
    }

    /// The deepest level that holds a table (0 if none does).
    pub(crate) fn deepest_nonempty_level(&self) -> usize {
        (0..NUM_LEVELS)
            .rev()
            .find(|&l| !self.levels[l].is_empty())
            .unwrap_or(0)
    }
}

/// The tables below L0 a point lookup consults (see [`Version::deeper_tables_for_key`]): a plain
/// loop rather than an iterator chain, since it runs once per Get.
pub(crate) struct DeeperTablesForKey<'v, 'k> {
    version: &'v Version,
    ukey: &'k [u8],
    lead: u128,
    /// The next level to look in.
    level: usize,
}

impl<'v> Iterator for DeeperTablesForKey<'v, '_> {
    type Item = (usize, &'v Arc<FileMeta>);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let ukey = self.ukey;
        while self.level < self.version.depth {
            let level = self.level;
            self.level += 1;
            if let Some(f) = self.version.table_for_key(level, ukey, self.lead) {
                return Some((level, f));
            }
        }
        None
    }
}

/// The user-key range `[lo, hi]` covered by `files`.
pub(crate) fn key_range(files: &[Arc<FileMeta>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| f.smallest_user()).min()?;
    let hi = files.iter().map(|f| f.largest_user()).max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};

    fn nf(level: usize, number: u64, lo: &str, hi: &str) -> NewFile {
        NewFile {
            level,
            number,
            size: 100,
            smallest: internal_key(lo.as_bytes(), 1, ValueKind::Value),
            largest: internal_key(hi.as_bytes(), 1, ValueKind::Value),
            range_tombstones: false,
            global_sequence: None,
        }
    }

    #[test]
    fn a_moved_table_is_removed_once_no_version_from_before_or_after_the_move_holds_it() {
        let retired = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let retire: Retire = {
            let retired = Arc::clone(&retired);
            Arc::new(move |n| retired.lock().push(n))
        };
        let written = Version::default().apply(&VersionEdit {
            added: vec![nf(1, 7, "a", "c"), nf(1, 8, "d", "f")],
            ..Default::default()
        });
        // Table 7 moves down a level, then is compacted away.
        let moved = written.apply(&VersionEdit {
            deleted: vec![(1, 7)],
            added: vec![nf(2, 7, "a", "c")],
            ..Default::default()
        });
        let compacted = moved.apply(&VersionEdit {
            deleted: vec![(2, 7)],
            ..Default::default()
        });
        moved.levels[2][0].mark_obsolete(Arc::clone(&retire));
        drop((moved, compacted));
        assert!(
            retired.lock().is_empty(),
            "removed while a version from before the move lists it"
        );
        drop(written);
        assert_eq!(*retired.lock(), [7]);
        // A table deleted and never added again keeps its own lifetime.
        let v = Version::default().apply(&VersionEdit {
            added: vec![nf(1, 9, "a", "c")],
            ..Default::default()
        });
        let gone = v.apply(&VersionEdit {
            deleted: vec![(1, 9)],
            added: vec![nf(1, 10, "a", "c")],
            ..Default::default()
        });
        v.levels[1][0].mark_obsolete(retire);
        drop(v);
        assert_eq!(*retired.lock(), [7, 9]);
        drop(gone);
    }

    #[test]
    fn lookups_visit_one_table_per_deeper_level() {
        let edit = VersionEdit {
            added: vec![
                nf(0, 5, "a", "z"),
                nf(0, 9, "m", "p"),
                nf(1, 3, "a", "f"),
                nf(1, 4, "g", "q"),
                nf(2, 1, "a", "z"),
            ],
            ..Default::default()
        };
        let v = Version::default().apply(&edit);
        let deeper = |k: &[u8]| -> Vec<(usize, u64)> {
            v.deeper_tables_for_key(k)
                .map(|(l, f)| (l, f.number))
                .collect()
        };
        assert_eq!(deeper(b"n"), vec![(1, 4), (2, 1)]);
        assert_eq!(deeper(b"fz"), vec![(2, 1)]);
        let l0: Vec<u64> = v.levels[0].iter().map(|f| f.number).collect();
        assert_eq!(l0, vec![5, 9], "L0 is kept oldest first");
        assert!(!v.is_base_level_for_key(1, b"b"));
        assert!(v.is_base_level_for_key(2, b"b"));
        assert_eq!(v.find_overlap(), None);
        let v2 = v.apply(&VersionEdit {
            deleted: vec![(1, 3)],
            added: vec![nf(1, 7, "c", "h")],
            ..Default::default()
        });
        assert_eq!(v2.find_overlap(), Some((1, 7, 4)));
    }

    /// A Get's walk below L0 reaches the deepest level that holds a table, and no further once
    /// that level empties.
    #[test]
    fn a_lookup_walks_down_to_the_deepest_level_with_tables() {
        let v = Version::for_tests(&[
            (1, 1, "a", "c", 10),
            (3, 2, "a", "z", 10),
            (6, 3, "m", "n", 10),
        ]);
        assert_eq!(v.depth(), NUM_LEVELS);
        let walk = |v: &Version, key: &str| -> Vec<(usize, u64)> {
            v.deeper_tables_for_key(key.as_bytes())
                .map(|(level, f)| (level, f.number))
                .collect()
        };
        assert_eq!(walk(&v, "b"), [(1, 1), (3, 2)]);
        assert_eq!(walk(&v, "m"), [(3, 2), (6, 3)]);
        let v = v.apply(&VersionEdit {
            deleted: vec![(6, 3)],
            ..Default::default()
        });
        assert_eq!(v.depth(), 4);
        assert_eq!(walk(&v, "m"), [(3, 2)]);
        let v = v.apply(&VersionEdit {
            deleted: vec![(1, 1), (3, 2)],
            ..Default::default()
        });
        assert_eq!(v.depth(), 0);
        assert_eq!(walk(&v, "b"), []);
    }

    /// Finding a key's table on its first 16 bytes as an integer, the bytes compared only on a
    /// tie, finds the table comparing the bytes finds: keys sharing 16-byte prefixes with the
    /// tables' bounds, shorter keys padded with zeros, keys between and beyond the tables.
    #[test]
    fn table_for_key_finds_the_table_the_bytes_do() {
        let p = "0123456789abcdef"; // 16 bytes: every bound below ties on its integer
        let bounds = [
            (p.to_string(), format!("{p}\0")),
            (format!("{p}\0\0"), format!("{p}b")),
            (format!("{p}c"), format!("{p}c\0")),
            (format!("{p}x"), format!("{p}y")),
            ("1".to_string(), "1\0\0".to_string()),
            ("2".to_string(), "3".to_string()),
        ];
        let edit = VersionEdit {
            added: bounds
                .iter()
                .zip(1..)
                .map(|((lo, hi), n)| nf(1, n, lo, hi))
                .collect(),
            ..Default::default()
        };
        let v = Version::default().apply(&edit);
        let mut keys: Vec<String> = vec![String::new(), "0".into(), "1\0".into(), "25".into()];
        for tail in [
            "", "\0", "\0\0", "\0\0\0", "a", "b", "b\0", "c", "c\0", "c\0\0", "x", "xx", "z",
        ] {
            keys.push(format!("{p}{tail}"));
            keys.push(format!("{}{tail}", &p[..15]));
        }
        for key in &keys {
            let key = key.as_bytes();
            let by_bytes = v.levels[1]
                .iter()
                .find(|f| f.smallest_user() <= key && key <= f.largest_user())
                .map(|f| f.number);
            let found = v
                .table_for_key(1, key, leading_bytes(key))
                .map(|f| f.number);
            assert_eq!(found, by_bytes, "key {key:?}");
        }
    }

    #[test]
    fn the_deepest_level_below_l1_holds_up_to_the_next_budget_and_the_levels_above_scale_to_it() {
        // Budgets: L1 4096 bytes, L2 40960, L3 409600.
        let options = Options::default().max_bytes_for_level_base(4096);
        let quiet = Triggers::quiet(&options);
        // L2 is the deepest level and holds 5 times its budget: it is not due, and L1, holding
        // 1.5 times its own budget, has a tenth of L2's bytes as budget.
        let mut tables = vec![(1, 1, "a", "z", 6144), (2, 2, "a", "m", 102400)];
        tables.push((2, 3, "n", "z", 102400));
        let v = Version::for_tests(&tables);
        assert!(v.grows_into_next(2) && !v.grows_into_next(1));
        assert_eq!(v.level_budget(&options, 1, 2), 20480.0);
        assert_eq!(v.compaction_level(&options, quiet), None);
        // At L3's budget L2 is due, scored against it.
        tables.push((2, 4, "zz", "zz", 204800));
        let v = Version::for_tests(&tables);
        assert_eq!(v.compaction_level(&options, quiet), Some((2, 1.0)));
        // With a table in L3, L2 merges into it at its own budget (or a tenth of L3, if more).
        tables.push((3, 5, "a", "z", 100));
        let v = Version::for_tests(&tables);
        assert!(!v.grows_into_next(2) && v.grows_into_next(3));
        assert_eq!(v.level_budget(&options, 2, 3), 40960.0);
        assert_eq!(v.compaction_level(&options, quiet), Some((2, 10.0)));
        // L1 alone is never a growing level: every L0 merge rewrites all of it.
        let v = Version::for_tests(&[(1, 1, "a", "z", 8192)]);
        assert!(!v.grows_into_next(1));
        assert_eq!(v.compaction_level(&options, quiet), Some((1, 2.0)));
    }

    #[test]
    fn a_level_over_its_budget_waits_for_the_quiet_triggers_within_its_slack() {
        // L1 has a budget of 4096 bytes and holds 6144; L0 holds 5 tables.
        let options = Options::default().max_bytes_for_level_base(4096);
        let mut tables = vec![(1, 1, "a", "m", 3000), (1, 2, "n", "z", 3144)];
        tables.extend((10..15).map(|n| (0, n, "a", "z", 10)));
        let v = Version::for_tests(&tables);
        let quiet = Triggers::quiet(&options);
        assert_eq!(quiet.l0_tables, 4);
        let during = Triggers {
            l0_tables: 8,
            level_budget: 2.0,
        };
        // At the quiet triggers L1 (1.5 × its budget) outranks L0 (5 of 4 tables).
        assert_eq!(v.compaction_level(&options, quiet), Some((1, 1.5)));
        // While writes flow neither is due: L1 holds 0.75 of twice its budget, L0 5 of 8 tables.
        assert_eq!(v.compaction_level(&options, during), None);
        // At twice its budget L1 is due while writes flow too, scored against the doubled budget.
        tables.push((1, 3, "zz", "zz", 2048));
        let v = Version::for_tests(&tables);
        assert_eq!(v.compaction_level(&options, during), Some((1, 1.0)));
    }
}
