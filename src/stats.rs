//! Statistics: cheap sharded counters while the store runs, a [`Statistics`] snapshot to read them.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::filter::FilterLayout;
use crate::levels::NUM_LEVELS;

macro_rules! tickers {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// A monotonically increasing counter of the store.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Ticker {
            $( $(#[$doc])* $variant, )*
        }

        impl Ticker {
            /// Every ticker, in display order.
            pub const ALL: &'static [Ticker] = &[$(Ticker::$variant,)*];

            /// The ticker's stable name, for example `bloom.filter.useful`.
            pub fn name(self) -> &'static str {
                match self {
                    $( Ticker::$variant => $name, )*
                }
            }
        }
    };
}

tickers! {
    /// Filter checks that answered "no", so the table's data blocks were not read.
    BloomFilterUseful => "bloom.filter.useful",
    /// Filter checks that answered "maybe".
    BloomFilterFullPositive => "bloom.filter.full.positive",
    /// "Maybe" answers from tables that did hold an entry (value or tombstone) for the key.
    BloomFilterFullTruePositive => "bloom.filter.full.true.positive",
    /// Tables whose filter a prefix scan asked for its prefix.
    BloomFilterPrefixChecked => "bloom.filter.prefix.checked",
    /// Prefix checks that answered "no", so the scan skipped the table.
    BloomFilterPrefixUseful => "bloom.filter.prefix.useful",
    /// Point lookups (`Db::get`).
    NumberKeysRead => "number.keys.read",
    /// Point lookups that found a value.
    NumberKeysFound => "number.keys.found",
    /// Point lookups answered by a memtable.
    MemtableHit => "memtable.hit",
    /// Tables consulted by point lookups (after the key-range check, before the filter).
    TablesConsulted => "get.tables.consulted",
    /// Cache lines of filters kept in memory that point lookups' probes read (one per table for
    /// the cache-local bloom; as many as the policy says for others), counted as the filter
    /// tickers are; per level in [`Statistics::filter_lines_touched`].
    FilterLinesTouched => "filter.lines.touched",
    /// Data blocks a point lookup or scan read (from the cache or the disk).
    DataBlocksRead => "block.data.read",
    /// Filter partitions read by point lookups (from the cache or the disk).
    FilterPartitionsRead => "block.filter.partition.read",
    /// Block cache lookups that hit.
    BlockCacheHit => "block.cache.hit",
    /// Block cache lookups that missed (and read the disk).
    BlockCacheMiss => "block.cache.miss",
    /// Block cache lookups of filter blocks (partitions, and whole filters charged to the cache)
    /// that hit.
    BlockCacheFilterHit => "block.cache.filter.hit",
    /// Block cache lookups of filter blocks that missed.
    BlockCacheFilterMiss => "block.cache.filter.miss",
    /// Block cache lookups of index blocks charged to the cache that hit.
    BlockCacheIndexHit => "block.cache.index.hit",
    /// Block cache lookups of index blocks charged to the cache that missed.
    BlockCacheIndexMiss => "block.cache.index.miss",
    /// Keys written (puts and deletes).
    NumberKeysWritten => "number.keys.written",
    /// Bytes appended to the WAL.
    WalBytes => "wal.bytes",
    /// WAL fsyncs.
    WalSyncs => "wal.syncs",
    /// Memtables flushed to L0 tables.
    Flushes => "flush.count",
    /// Compactions run.
    Compactions => "compaction.count",
    /// Bytes of tables written by flushes and compactions.
    TableBytesWritten => "table.bytes.written",
    /// Bytes of tables read by compactions.
    CompactionBytesRead => "compaction.bytes.read",
    /// Microseconds writers waited for flushes or compactions to catch up, for any of the three
    /// causes below.
    WriteStallMicros => "write.stall.micros",
    /// Microseconds writers slept because L0 held `level0_slowdown_trigger` tables or more.
    WriteStallL0SlowdownMicros => "write.stall.l0.slowdown.micros",
    /// Microseconds writers waited because L0 held `level0_stop_trigger` tables or more.
    WriteStallL0StopMicros => "write.stall.l0.stop.micros",
    /// Microseconds writers waited because `max_immutable_memtables` frozen memtables were
    /// waiting for their flush.
    WriteStallMemtablesMicros => "write.stall.memtables.micros",
    /// Bytes of keys and values written (puts and deletes): the user data that write
    /// amplification (`table.bytes.written` ÷ this) is measured against.
    UserBytesWritten => "user.bytes.written",
    /// Tables moved one level down by a MANIFEST edit alone, without a rewrite: they overlapped
    /// nothing in the next level nor each other and held no tombstone. Not counted in
    /// `compaction.count`.
    TrivialMoves => "compaction.trivial.moves",
    /// Key ranges of compactions split between threads (`Options::max_subcompactions`): a job
    /// split in two adds 2. Jobs too small to split add nothing.
    Subcompactions => "compaction.subcompactions",
    /// L0 → L1 compactions started because reads had paid for them in L0 filter checks that did
    /// not find their key (`Options::compact_l0_for_reads`), below the L0 trigger. Also counted
    /// in `compaction.count` (or `compaction.trivial.moves`).
    ReadTriggeredCompactions => "compaction.read.triggered",
    /// L0 → L1 compactions started because the keyspace's writes paused with tables in L0
    /// (`Options::compact_l0_when_idle`), below the L0 trigger. Also counted in
    /// `compaction.count` (or `compaction.trivial.moves`).
    IdleL0Compactions => "compaction.idle.l0",
    /// Tables rewritten in place, once a keyspace's writes paused, because their filters' bits
    /// per key were far from their level's under `FilterAllocation::Monkey`. Also counted in
    /// `compaction.count`.
    FilterRefreshes => "compaction.filter.refresh",
    /// Transactions that wrote something and committed (a transaction that only read commits
    /// without a check, and is not counted).
    TransactionCommits => "txn.commits",
    /// Transactions refused at commit with `Error::Conflict`: a key they read or wrote, or a key
    /// in a range they scanned, was written after their snapshot.
    TransactionConflicts => "txn.conflicts",
    /// Point lookups (Gets, keys of `multi_get`) answered "deleted" by a range tombstone.
    RangeDeleteCovered => "range.delete.covered",
    /// Range deletions written (`Db::delete_range`, `WriteBatch::delete_range`).
    RangeDeletes => "range.deletes",
    /// Values compaction turned into tombstones: removed by the keyspace's
    /// [`CompactionFilter`](crate::CompactionFilter), or expired past the keyspace's
    /// [`ttl`](crate::Options::ttl).
    CompactionFilterRemoved => "compaction.filter.removed",
    /// Values compaction rewrote as the keyspace's [`CompactionFilter`](crate::CompactionFilter)
    /// changed them.
    CompactionFilterChanged => "compaction.filter.changed",
    /// Compactions that threw their output away and wrote it again without asking the keyspace's
    /// [`CompactionFilter`](crate::CompactionFilter): it had changed a value that a snapshot (or a
    /// transaction) taken while the compaction ran could read, and that snapshot was still live.
    CompactionFilterReruns => "compaction.filter.reruns",
    /// Tables whose range filter a bounded scan asked (ranges no wider than the filter answers).
    RangeFilterChecked => "range.filter.checked",
    /// Range filter checks that answered "no": the scan skipped the table without reading its
    /// index or a data block.
    RangeFilterUseful => "range.filter.useful",
    /// Range filter checks that answered "maybe".
    RangeFilterPositive => "range.filter.positive",
    /// "Maybe" answers from tables that held a key in the range.
    RangeFilterTruePositive => "range.filter.true.positive",
}

const NUM_TICKERS: usize = Ticker::ALL.len();
const NUM_LAYOUTS: usize = 3;
/// Counters per (level, layout): useful, positive, true positive.
const FILTER_SLOTS: usize = NUM_LEVELS * NUM_LAYOUTS * 3;
/// The first of the per-level counters of filter lines touched, after the filter slots.
const LINE_SLOTS: usize = NUM_TICKERS + FILTER_SLOTS;
/// The first of the per-level counters of absent Gets that met a table of the level.
const MEETS_SLOTS: usize = LINE_SLOTS + NUM_LEVELS;
/// The Gets that searched the tables and found nothing there.
const ABSENT_SLOT: usize = MEETS_SLOTS + NUM_LEVELS;
const SLOTS: usize = ABSENT_SLOT + 1;
/// Shards each owned by one thread at a time, which bumps its counters with a plain load and
/// store: no locked instruction on the Get path.
const OWNED_SHARDS: usize = 32;
/// Shards for threads beyond `OWNED_SHARDS`, bumped with `fetch_add`.
const SHARED_SHARDS: usize = 8;
const SHARDS: usize = OWNED_SHARDS + SHARED_SHARDS;

/// One shard of counters on its own cache lines, so threads on different cores do not fight.
#[repr(align(128))]
struct Shard([AtomicU64; SLOTS]);

/// Range filter width classes: class `c` holds ranges of `2^(c−1) < width ≤ 2^c` integers
/// (class 0, width 1), up to `2^(RANGE_WIDTH_CLASSES − 2)`; the last class holds every wider one.
pub const RANGE_WIDTH_CLASSES: usize = 18;

/// The width class of a range of `width` integers (see [`RANGE_WIDTH_CLASSES`]).
pub fn range_width_class(width: u64) -> usize {
    let class = match width {
        0 | 1 => 0,
        w => (w - 1).ilog2() as usize + 1,
    };
    class.min(RANGE_WIDTH_CLASSES - 1)
}

/// Range filter counters per level and per width class: scans are rarer than Gets, so plain
/// shared atomics, outside the sharded counters.
struct RangeFilterStats {
    levels: [[AtomicU64; 3]; NUM_LEVELS],
    widths: [[AtomicU64; 3]; RANGE_WIDTH_CLASSES],
}

/// The live counters of one store.
pub(crate) struct Stats {
    shards: Box<[Shard]>,
    filter_bytes_in_memory: AtomicUsize,
    range_filters: RangeFilterStats,
}

/// A thread's shard index (the same in every store); an owned index goes back to `FREE_OWNED`
/// when the thread exits. The mutex around the free list orders the old owner's last bump
/// before the new owner's first.
struct ShardLease {
    index: usize,
    owned: bool,
}

impl Drop for ShardLease {
    fn drop(&mut self) {
        if self.owned {
            FREE_OWNED.lock().push(self.index);
        }
    }
}

static FREE_OWNED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static NEXT_OWNED: AtomicUsize = AtomicUsize::new(0);
static NEXT_SHARED: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static LEASE: ShardLease = ShardLease::take();
}

impl ShardLease {
    fn take() -> ShardLease {
        let index = FREE_OWNED.lock().pop().or_else(|| {
            NEXT_OWNED
                .fetch_update(Relaxed, Relaxed, |n| (n < OWNED_SHARDS).then_some(n + 1))
                .ok()
        });
        match index {
            Some(index) => ShardLease { index, owned: true },
            None => ShardLease {
                index: OWNED_SHARDS + NEXT_SHARED.fetch_add(1, Relaxed) % SHARED_SHARDS,
                owned: false,
            },
        }
    }
}

/// This thread's shard and whether it owns it; `None` while the thread is being torn down.
#[inline]
fn my_shard() -> Option<(usize, bool)> {
    LEASE.try_with(|l| (l.index, l.owned)).ok()
}

/// The shard of a thread whose lease is already gone (a thread-local destructor counting).
const SHARED_FALLBACK: (usize, bool) = (OWNED_SHARDS, false);

/// Adds `n` to `counter`, which only this thread writes if `owned`.
#[inline]
fn bump(counter: &AtomicU64, n: u64, owned: bool) {
    if owned {
        counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
    } else {
        counter.fetch_add(n, Relaxed);
    }
}

/// What a filter said to one point lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FilterVerdict {
    /// "No": the table was skipped.
    Useful,
    /// "Maybe", and the table held no entry for the key.
    FalsePositive,
    /// "Maybe", and the table held an entry for the key.
    TruePositive,
}

impl FilterVerdict {
    /// The verdict of a filter that answered `maybe` for a table that `found` an entry or not.
    pub(crate) fn of(maybe: bool, found: bool) -> FilterVerdict {
        match (maybe, found) {
            (false, _) => FilterVerdict::Useful,
            (true, false) => FilterVerdict::FalsePositive,
            (true, true) => FilterVerdict::TruePositive,
        }
    }
}

impl Stats {
    pub(crate) fn new() -> Stats {
        Stats {
            shards: (0..SHARDS)
                .map(|_| Shard(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
            filter_bytes_in_memory: AtomicUsize::new(0),
            range_filters: RangeFilterStats {
                levels: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
                widths: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            },
        }
    }

    /// Records a range filter check of a table at `level` for a range of `width` integers that
    /// answered `maybe`.
    pub(crate) fn record_range_filter(&self, level: usize, width: u64, maybe: bool) {
        self.inc(Ticker::RangeFilterChecked);
        let slot = if maybe {
            self.inc(Ticker::RangeFilterPositive);
            1
        } else {
            self.inc(Ticker::RangeFilterUseful);
            0
        };
        let r = &self.range_filters;
        r.levels[level.min(NUM_LEVELS - 1)][slot].fetch_add(1, Relaxed);
        r.widths[range_width_class(width)][slot].fetch_add(1, Relaxed);
    }

    /// Records that a "maybe" of a table at `level` for a range of `width` integers was right: the
    /// table held a key in the range.
    pub(crate) fn record_range_filter_true_positive(&self, level: usize, width: u64) {
        self.inc(Ticker::RangeFilterTruePositive);
        let r = &self.range_filters;
        r.levels[level.min(NUM_LEVELS - 1)][2].fetch_add(1, Relaxed);
        r.widths[range_width_class(width)][2].fetch_add(1, Relaxed);
    }

    #[inline]
    pub(crate) fn add(&self, t: Ticker, n: u64) {
        let (i, owned) = my_shard().unwrap_or(SHARED_FALLBACK);
        bump(&self.shards[i].0[t as usize], n, owned);
    }

    #[inline]
    pub(crate) fn inc(&self, t: Ticker) {
        self.add(t, 1);
    }

    /// Records one filter check of a table at `level` with `layout`.
    pub(crate) fn record_filter(&self, level: usize, layout: FilterLayout, verdict: FilterVerdict) {
        self.record_filters(level, layout, verdict, 1);
    }

    /// Records `n` filter checks of tables at `level` with `layout` that gave one verdict.
    #[inline]
    pub(crate) fn record_filters(
        &self,
        level: usize,
        layout: FilterLayout,
        verdict: FilterVerdict,
        n: u64,
    ) {
        let (i, owned) = my_shard().unwrap_or(SHARED_FALLBACK);
        let shard = &self.shards[i].0;
        let base = NUM_TICKERS + (level.min(NUM_LEVELS - 1) * NUM_LAYOUTS + layout.index()) * 3;
        let bump = |slot: usize| bump(&shard[slot], n, owned);
        match verdict {
            FilterVerdict::Useful => {
                bump(Ticker::BloomFilterUseful as usize);
                bump(base);
            }
            FilterVerdict::FalsePositive => {
                bump(Ticker::BloomFilterFullPositive as usize);
                bump(base + 1);
            }
            FilterVerdict::TruePositive => {
                bump(Ticker::BloomFilterFullPositive as usize);
                bump(Ticker::BloomFilterFullTruePositive as usize);
                bump(base + 1);
                bump(base + 2);
            }
        }
    }

    /// Records `lines` filter cache lines read by a probe of a table at `level`.
    #[inline]
    pub(crate) fn record_filter_lines(&self, level: usize, lines: u64) {
        if lines == 0 {
            return;
        }
        let (i, owned) = my_shard().unwrap_or(SHARED_FALLBACK);
        let shard = &self.shards[i].0;
        let n = lines;
        bump(&shard[Ticker::FilterLinesTouched as usize], n, owned);
        bump(&shard[LINE_SLOTS + level.min(NUM_LEVELS - 1)], n, owned);
    }

    /// Records a point lookup that searched the tables and found nothing there, and the levels
    /// whose tables' key ranges held its key (bit `l` for level `l`).
    #[inline]
    pub(crate) fn record_absent_get(&self, levels_met: u8) {
        let (i, owned) = my_shard().unwrap_or(SHARED_FALLBACK);
        let shard = &self.shards[i].0;
        bump(&shard[ABSENT_SLOT], 1, owned);
        let mut met = levels_met;
        while met != 0 {
            let level = met.trailing_zeros() as usize;
            bump(&shard[MEETS_SLOTS + level.min(NUM_LEVELS - 1)], 1, owned);
            met &= met - 1;
        }
    }

    /// The absent Gets that searched the tables, and per level those whose key fell in a table of
    /// it: what [`Statistics::absent_get_coverage`] divides, summed over the shards without
    /// a whole snapshot (flushes and compactions ask for it each time they plan a filter).
    pub(crate) fn absent_gets(&self) -> (u64, [u64; NUM_LEVELS]) {
        let (mut absent, mut meets) = (0, [0u64; NUM_LEVELS]);
        for shard in self.shards.iter() {
            absent += shard.0[ABSENT_SLOT].load(Relaxed);
            for (sum, c) in meets.iter_mut().zip(&shard.0[MEETS_SLOTS..ABSENT_SLOT]) {
                *sum += c.load(Relaxed);
            }
        }
        (absent, meets)
    }

    pub(crate) fn filter_memory_added(&self, bytes: usize) {
        self.filter_bytes_in_memory.fetch_add(bytes, Relaxed);
    }

    pub(crate) fn filter_memory_released(&self, bytes: usize) {
        self.filter_bytes_in_memory.fetch_sub(bytes, Relaxed);
    }

    /// A snapshot of every counter. Counts taken while other threads run may be mid-update relative
    /// to each other by a few events; each counter on its own is exact.
    pub(crate) fn snapshot(&self) -> Statistics {
        let mut slots = [0u64; SLOTS];
        for shard in self.shards.iter() {
            for (sum, c) in slots.iter_mut().zip(shard.0.iter()) {
                *sum += c.load(Relaxed);
            }
        }
        let mut filters = [[FilterCounts::default(); NUM_LAYOUTS]; NUM_LEVELS];
        for (level, row) in filters.iter_mut().enumerate() {
            for (layout, cell) in row.iter_mut().enumerate() {
                let base = NUM_TICKERS + (level * NUM_LAYOUTS + layout) * 3;
                *cell = FilterCounts {
                    useful: slots[base],
                    positive: slots[base + 1],
                    true_positive: slots[base + 2],
                };
            }
        }
        let mut tickers = [0u64; NUM_TICKERS];
        tickers.copy_from_slice(&slots[..NUM_TICKERS]);
        let mut filter_lines = [0u64; NUM_LEVELS];
        filter_lines.copy_from_slice(&slots[LINE_SLOTS..MEETS_SLOTS]);
        let mut absent_meets = [0u64; NUM_LEVELS];
        absent_meets.copy_from_slice(&slots[MEETS_SLOTS..ABSENT_SLOT]);
        let counts = |c: &[AtomicU64; 3]| FilterCounts {
            useful: c[0].load(Relaxed),
            positive: c[1].load(Relaxed),
            true_positive: c[2].load(Relaxed),
        };
        Statistics {
            tickers,
            filters,
            range_filter_levels: std::array::from_fn(|l| counts(&self.range_filters.levels[l])),
            range_filter_widths: std::array::from_fn(|w| counts(&self.range_filters.widths[w])),
            filter_lines,
            absent_meets,
            absent_gets: slots[ABSENT_SLOT],
            filter_bytes_in_memory: self.filter_bytes_in_memory.load(Relaxed) as u64,
        }
    }
}

/// The three filter counters for one slice of the store (a level, a layout, or all of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilterCounts {
    /// Checks that answered "no".
    pub useful: u64,
    /// Checks that answered "maybe".
    pub positive: u64,
    /// "Maybe" answers from tables that held the key.
    pub true_positive: u64,
}

impl FilterCounts {
    /// Every filter check: useful + positive.
    pub fn checks(&self) -> u64 {
        self.useful + self.positive
    }

    /// The measured false positive rate, `(positive − true positive) / (positive − true positive +
    /// useful)`, or `None` before any check of an absent key.
    pub fn fp_rate(&self) -> Option<f64> {
        let fp = self.positive.saturating_sub(self.true_positive);
        let negatives = fp + self.useful;
        (negatives > 0).then(|| fp as f64 / negatives as f64)
    }

    fn add(&mut self, o: &FilterCounts) {
        self.useful += o.useful;
        self.positive += o.positive;
        self.true_positive += o.true_positive;
    }
}

/// A snapshot of a store's counters, from [`Db::statistics`](crate::Db::statistics).
#[derive(Debug, Clone)]
pub struct Statistics {
    tickers: [u64; NUM_TICKERS],
    filters: [[FilterCounts; NUM_LAYOUTS]; NUM_LEVELS],
    range_filter_levels: [FilterCounts; NUM_LEVELS],
    range_filter_widths: [FilterCounts; RANGE_WIDTH_CLASSES],
    /// Per level, the filter cache lines point lookups read (`filter.lines.touched`).
    filter_lines: [u64; NUM_LEVELS],
    /// Per level, the absent Gets whose key fell in the key range of a table of the level.
    absent_meets: [u64; NUM_LEVELS],
    /// The Gets that searched the tables and found nothing there.
    absent_gets: u64,
    filter_bytes_in_memory: u64,
}

impl Statistics {
    /// The value of one ticker.
    pub fn ticker(&self, t: Ticker) -> u64 {
        self.tickers[t as usize]
    }

    /// The filter counters of tables at `level` built with `layout`.
    pub fn filter_counts(&self, level: usize, layout: FilterLayout) -> FilterCounts {
        self.filters
            .get(level)
            .map(|row| row[layout.index()])
            .unwrap_or_default()
    }

    /// The filter counters of every layout at `level`.
    pub fn level_filter_counts(&self, level: usize) -> FilterCounts {
        let mut sum = FilterCounts::default();
        for layout in FilterLayout::ALL {
            sum.add(&self.filter_counts(level, layout));
        }
        sum
    }

    /// The cache lines of filters kept in memory that point lookups' probes of tables at `level`
    /// read (the level's share of [`Ticker::FilterLinesTouched`]). Over `number.keys.read`, the
    /// lines a Get touches at that level; the prefetch of every candidate table's line before
    /// any is probed overlaps their misses (DESIGN.md, *Read path*).
    pub fn filter_lines_touched(&self, level: usize) -> u64 {
        self.filter_lines.get(level).copied().unwrap_or(0)
    }

    /// The filter counters of every level for `layout`.
    pub fn layout_filter_counts(&self, layout: FilterLayout) -> FilterCounts {
        let mut sum = FilterCounts::default();
        for level in 0..NUM_LEVELS {
            sum.add(&self.filter_counts(level, layout));
        }
        sum
    }

    /// The range filter counters of tables at `level` (checks by bounded scans).
    pub fn range_filter_counts(&self, level: usize) -> FilterCounts {
        self.range_filter_levels
            .get(level)
            .copied()
            .unwrap_or_default()
    }

    /// The range filter counters of ranges in width class `class` (see [`range_width_class`]).
    pub fn range_filter_width_counts(&self, class: usize) -> FilterCounts {
        self.range_filter_widths
            .get(class)
            .copied()
            .unwrap_or_default()
    }

    /// The store-wide range filter tickers as [`FilterCounts`].
    pub fn range_filter_totals(&self) -> FilterCounts {
        FilterCounts {
            useful: self.ticker(Ticker::RangeFilterUseful),
            positive: self.ticker(Ticker::RangeFilterPositive),
            true_positive: self.ticker(Ticker::RangeFilterTruePositive),
        }
    }

    /// The three store-wide filter tickers as [`FilterCounts`].
    pub fn filter_totals(&self) -> FilterCounts {
        FilterCounts {
            useful: self.ticker(Ticker::BloomFilterUseful),
            positive: self.ticker(Ticker::BloomFilterFullPositive),
            true_positive: self.ticker(Ticker::BloomFilterFullTruePositive),
        }
    }

    /// Bytes of filters (full filters, block-based filter blocks, partition indexes) held in memory
    /// by open tables now.
    pub fn filter_bytes_in_memory(&self) -> u64 {
        self.filter_bytes_in_memory
    }

    /// The Gets that searched the tables and found nothing there: the absent keys the memtables
    /// did not answer (`get` and its kin; the batched walk of `multi_get` does not count them).
    pub fn absent_gets_in_tables(&self) -> u64 {
        self.absent_gets
    }

    /// The share of [`absent_gets_in_tables`](Self::absent_gets_in_tables) whose key fell in the
    /// key range of a table at `level` (at L0: of any of its tables), so that its filter was
    /// asked; `None` before the first. Monkey's allocation weighs each level's run by it.
    pub fn absent_get_coverage(&self, level: usize) -> Option<f64> {
        let meets = *self.absent_meets.get(level)?;
        (self.absent_gets > 0).then(|| meets as f64 / self.absent_gets as f64)
    }

    /// Adds `other`'s counters to these (a store's totals over its keyspaces).
    pub(crate) fn merge(&mut self, other: &Statistics) {
        for (a, b) in self.tickers.iter_mut().zip(other.tickers.iter()) {
            *a += *b;
        }
        for (row, orow) in self.filters.iter_mut().zip(other.filters.iter()) {
            for (c, o) in row.iter_mut().zip(orow.iter()) {
                c.add(o);
            }
        }
        let range = self
            .range_filter_levels
            .iter_mut()
            .zip(&other.range_filter_levels);
        let widths = self
            .range_filter_widths
            .iter_mut()
            .zip(&other.range_filter_widths);
        for (c, o) in range.chain(widths) {
            c.add(o);
        }
        for (a, b) in self.filter_lines.iter_mut().zip(other.filter_lines.iter()) {
            *a += *b;
        }
        for (a, b) in self.absent_meets.iter_mut().zip(other.absent_meets.iter()) {
            *a += *b;
        }
        self.absent_gets += other.absent_gets;
        self.filter_bytes_in_memory += other.filter_bytes_in_memory;
    }

    /// Sets the filter memory gauge to zero (the counters of a keyspace whose tables are gone).
    pub(crate) fn forget_filter_memory(&mut self) {
        self.filter_bytes_in_memory = 0;
    }

    /// The counters accrued between `earlier` and this snapshot.
    pub fn since(&self, earlier: &Statistics) -> Statistics {
        let mut out = self.clone();
        for (a, b) in out.tickers.iter_mut().zip(earlier.tickers.iter()) {
            *a = a.saturating_sub(*b);
        }
        let minus = |c: &mut FilterCounts, e: &FilterCounts| {
            c.useful = c.useful.saturating_sub(e.useful);
            c.positive = c.positive.saturating_sub(e.positive);
            c.true_positive = c.true_positive.saturating_sub(e.true_positive);
        };
        for (row, erow) in out.filters.iter_mut().zip(earlier.filters.iter()) {
            for (c, e) in row.iter_mut().zip(erow.iter()) {
                minus(c, e);
            }
        }
        let range = out
            .range_filter_levels
            .iter_mut()
            .zip(&earlier.range_filter_levels);
        let widths = out
            .range_filter_widths
            .iter_mut()
            .zip(&earlier.range_filter_widths);
        for (c, e) in range.chain(widths) {
            minus(c, e);
        }
        for (a, b) in out.filter_lines.iter_mut().zip(earlier.filter_lines.iter()) {
            *a = a.saturating_sub(*b);
        }
        for (a, b) in out.absent_meets.iter_mut().zip(earlier.absent_meets.iter()) {
            *a = a.saturating_sub(*b);
        }
        out.absent_gets = out.absent_gets.saturating_sub(earlier.absent_gets);
        out
    }
}

impl fmt::Display for Statistics {
    /// Every ticker, one `name: value` a line, then the filter gauge and the per-level breakdown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &t in Ticker::ALL {
            writeln!(f, "{}: {}", t.name(), self.ticker(t))?;
        }
        writeln!(f, "filter.bytes.in.memory: {}", self.filter_bytes_in_memory)?;
        if let Some(rate) = self.filter_totals().fp_rate() {
            writeln!(f, "bloom.filter.measured.fp.rate: {:.4}%", rate * 100.0)?;
        }
        for level in 0..NUM_LEVELS {
            for layout in FilterLayout::ALL {
                let c = self.filter_counts(level, layout);
                if c.checks() > 0 {
                    writeln!(
                        f,
                        "bloom.filter.L{level}.{layout}: useful {} positive {} true.positive {}",
                        c.useful, c.positive, c.true_positive
                    )?;
                }
            }
        }
        for level in 0..NUM_LEVELS {
            let c = self.range_filter_counts(level);
            if c.checks() > 0 {
                writeln!(
                    f,
                    "range.filter.L{level}: useful {} positive {} true.positive {}",
                    c.useful, c.positive, c.true_positive
                )?;
            }
        }
        for (level, &lines) in self.filter_lines.iter().enumerate() {
            if lines > 0 {
                writeln!(f, "filter.lines.touched.L{level}: {lines}")?;
            }
        }
        if self.absent_gets > 0 {
            writeln!(f, "absent.gets.in.tables: {}", self.absent_gets)?;
        }
        for (level, &meets) in self.absent_meets.iter().enumerate() {
            if meets > 0 {
                writeln!(f, "absent.gets.meeting.L{level}: {meets}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_sum_exactly() {
        let stats = std::sync::Arc::new(Stats::new());
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let s = std::sync::Arc::clone(&stats);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        s.inc(Ticker::NumberKeysRead);
                        s.record_filter(i % 2, FilterLayout::Full, FilterVerdict::Useful);
                        s.record_filter(3, FilterLayout::Partitioned, FilterVerdict::TruePositive);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let snap = stats.snapshot();
        assert_eq!(snap.ticker(Ticker::NumberKeysRead), 40_000);
        assert_eq!(snap.ticker(Ticker::BloomFilterUseful), 40_000);
        assert_eq!(snap.filter_counts(0, FilterLayout::Full).useful, 20_000);
        assert_eq!(snap.level_filter_counts(3).true_positive, 40_000);
        assert_eq!(snap.ticker(Ticker::BloomFilterFullPositive), 40_000);
        assert_eq!(snap.filter_totals().fp_rate(), Some(0.0));
        let text = snap.to_string();
        assert!(text.contains("bloom.filter.useful: 40000\n"));
        assert!(!text.contains("filter.lines.touched.L"));
        assert!(text.contains("bloom.filter.full.true.positive: 40000\n"));
    }

    #[test]
    fn filter_lines_count_per_level_and_in_total() {
        let stats = Stats::new();
        stats.record_filter_lines(0, 1);
        stats.record_filter_lines(0, 1);
        stats.record_filter_lines(2, 3);
        stats.record_filter_lines(5, 0);
        let earlier = stats.snapshot();
        stats.record_filter_lines(2, 1);
        let snap = stats.snapshot();
        assert_eq!(snap.ticker(Ticker::FilterLinesTouched), 6);
        assert_eq!(snap.filter_lines_touched(0), 2);
        assert_eq!(snap.filter_lines_touched(2), 4);
        assert_eq!(snap.filter_lines_touched(5), 0);
        assert_eq!(snap.filter_lines_touched(NUM_LEVELS), 0);
        assert_eq!(snap.since(&earlier).filter_lines_touched(2), 1);
        let mut both = snap.clone();
        both.merge(&snap);
        assert_eq!(both.filter_lines_touched(0), 4);
        let text = snap.to_string();
        assert!(text.contains("filter.lines.touched: 6\n"));
        assert!(text.contains("filter.lines.touched.L2: 4\n"));
        assert!(!text.contains("filter.lines.touched.L5"));
    }

    #[test]
    fn absent_gets_count_the_levels_they_meet() {
        let stats = Stats::new();
        stats.record_absent_get(0b100_0010);
        let earlier = stats.snapshot();
        stats.record_absent_get(0b100_0000);
        stats.record_absent_get(0);
        let snap = stats.snapshot();
        assert_eq!(snap.absent_gets_in_tables(), 3);
        assert_eq!(snap.absent_get_coverage(1), Some(1.0 / 3.0));
        assert_eq!(snap.absent_get_coverage(6), Some(2.0 / 3.0));
        assert_eq!(snap.absent_get_coverage(2), Some(0.0));
        assert_eq!(snap.absent_get_coverage(NUM_LEVELS), None);
        assert_eq!(snap.since(&earlier).absent_get_coverage(1), Some(0.0));
        assert_eq!(Stats::new().snapshot().absent_get_coverage(1), None);
        assert_eq!(stats.absent_gets(), (3, [0, 1, 0, 0, 0, 0, 2]));
        let mut both = snap.clone();
        both.merge(&snap);
        assert_eq!(both.absent_gets_in_tables(), 6);
        assert!(format!("{snap}").contains("absent.gets.meeting.L6: 2"));
    }

    #[test]
    fn fp_rate_follows_the_formula() {
        let c = FilterCounts {
            useful: 990,
            positive: 110,
            true_positive: 100,
        };
        assert_eq!(c.fp_rate(), Some(0.01));
        assert_eq!(FilterCounts::default().fp_rate(), None);
    }
}
