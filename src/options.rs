//! Options for opening a store and for individual writes.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::compaction_filter::CompactionFilter;
use crate::error::{Error, Result};
use crate::filter::{Filter, FilterAllocation, RangeFilter};
use crate::fs::FileSystem;
pub use crate::levels::{CompactionStyle, NUM_LEVELS};
use crate::memtable_filter::DEFAULT_WRITE_BUFFER_SIZE;
use crate::merge_operator::MergeOperator;
use crate::prefix::PrefixExtractor;
use crate::rate_limiter::RateLimiter;
pub use crate::sst::compression::Compression;
use crate::sst::table_reader::block_cache::Cache;

/// Options for [`Db::open`](crate::Db::open). Start from `Options::default()` and change what you
/// need with the builder methods.
///
/// **Out-of-range values.** Where a value past a bound can only mean "as far as it goes", the
/// builder clamps it and says so: sizes below their minimum (4 KiB memtables, tables and L1
/// budget, 64-byte blocks), counts below 1, [`max_subcompactions`](Self::max_subcompactions)
/// above [`MAX_SUBCOMPACTIONS`], a built-in filter's bits per key outside what its policy
/// supports. Where it is more likely a mistake, [`Db::open`](crate::Db::open) refuses it with
/// `Error::InvalidArgument` naming the option: sizes above [`MAX_SIZE_OPTION`] or
/// [`MAX_BLOCK_SIZE`], L0 triggers out of order, a cache share outside 0 to 1, a filter's bits
/// per key that is not a finite number above zero.
#[derive(Clone)]
pub struct Options {
    pub(crate) create_if_missing: bool,
    pub(crate) write_buffer_size: usize,
    pub(crate) max_immutable_memtables: usize,
    pub(crate) block_size: usize,
    pub(crate) block_restart_interval: usize,
    pub(crate) block_cache_bytes: usize,
    pub(crate) block_cache_high_priority_share: f64,
    /// A cache shared with other stores, in place of one of `block_cache_bytes`.
    pub(crate) block_cache: Option<Cache>,
    /// Paces flushes' and compactions' table writes.
    pub(crate) rate_limiter: Option<RateLimiter>,
    pub(crate) cache_index_and_filter_blocks: bool,
    pub(crate) pin_l0_filter_and_index_blocks_in_cache: bool,
    pub(crate) pin_top_level_index_and_filter: bool,
    pub(crate) compression: Compression,
    pub(crate) compression_per_level: Vec<Compression>,
    pub(crate) bottommost_compression: Option<Compression>,
    pub(crate) filter: Filter,
    pub(crate) filter_allocation: FilterAllocation,
    pub(crate) range_filter: RangeFilter,
    pub(crate) no_filter_on_last_level: bool,
    pub(crate) prefix_extractor: Option<PrefixExtractor>,
    pub(crate) whole_key_filtering: bool,
    pub(crate) max_open_files: usize,
    pub(crate) target_file_size: u64,
    pub(crate) level0_compaction_trigger: usize,
    pub(crate) level0_compaction_trigger_during_writes: usize,
    pub(crate) level0_slowdown_trigger: usize,
    pub(crate) level0_stop_trigger: usize,
    pub(crate) max_bytes_for_level_base: u64,
    pub(crate) level_size_multiplier: u64,
    pub(crate) compaction_style: CompactionStyle,
    pub(crate) level_budget_during_writes: f64,
    pub(crate) max_subcompactions: usize,
    pub(crate) max_total_wal_size: u64,
    pub(crate) compact_l0_for_reads: bool,
    pub(crate) compact_l0_when_idle: bool,
    pub(crate) idle_compaction_after: Duration,
    pub(crate) read_compaction_tuning: ReadCompactionTuning,
    pub(crate) compaction_filter: Option<Arc<dyn CompactionFilter>>,
    pub(crate) registered_compaction_filters: Vec<Arc<dyn CompactionFilter>>,
    pub(crate) merge_operator: Option<Arc<dyn MergeOperator>>,
    pub(crate) registered_merge_operators: Vec<Arc<dyn MergeOperator>>,
    pub(crate) ttl: Option<Duration>,
    /// Whether the keyspace's plain values carry their write time (one created with a TTL by a
    /// store older than entries that carry their expiry time); set only from its record.
    pub(crate) write_times: bool,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) transaction_retries: usize,
    #[cfg(feature = "__fault-injection")]
    pub(crate) fault_injector: Option<crate::fs::fault_injection::FaultInjector>,
}

/// The most threads one compaction splits its key range between
/// ([`Options::max_subcompactions`]).
pub const MAX_SUBCOMPACTIONS: usize = 64;

/// The largest [`Options::write_buffer_size`], [`Options::target_file_size`] and
/// [`Options::max_bytes_for_level_base`] an open accepts: 1 TiB.
pub const MAX_SIZE_OPTION: u64 = 1 << 40;

/// The largest [`Options::block_size`] an open accepts: 1 GiB (a block's offsets are 32-bit).
pub const MAX_BLOCK_SIZE: usize = 1 << 30;

// Tuning of background work that only the crate's own tests change; its defaults live here
// with every other option's.

/// How long a keyspace's memtables and L0 must stay unchanged before its L0 is merged into L1
/// (what `Options` start with; only the crate's power-cut tests change it): flushes during a load
/// come tens of milliseconds apart, and the write path's own notion of writes flowing
/// (`db/compaction/write_burst.rs`) ends after a second without a flush.
pub(crate) const IDLE_AFTER: Duration = Duration::from_secs(1);

/// Compaction for reads (`db/compaction/read_triggered.rs`): what one L0 filter check that does not find
/// its key costs, in bytes of the compaction's input that cost as much. Measured at a million keys (docs/benchmarks.md, "Compaction for reads"): a
/// check in vain adds about 50 ns to its Get; compaction spends 2.3 ns of CPU per input byte on
/// values that do not compress and 16 ns on values that do (it costs per entry more than per
/// byte); and the L1 → L2 jobs an L0 → L1 job sets off, by pushing L1 over its budget, read about
/// twice its input again. A check is then worth 1–7 bytes of the job's input; 4 is within a factor
/// of two of both ends.
pub(crate) const BYTES_PER_CHECK: u64 = 4;

/// Fewer checks than this never pay for a compaction: 2^18 checks cost about a hundredth of a
/// second of Gets, less than a new L1's tables cost to open and cache.
pub(crate) const MIN_CHECKS: u64 = 1 << 18;

/// How often the compaction thread looks at the count of checks in vain while L0 holds tables, nothing else is to be
/// done, and reads come.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// The price of a compaction for reads and how often the thread looks at what was paid. Only the
/// crate's own tests change it (to cut the power inside such compactions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadCompactionTuning {
    /// At least this many checks ([`MIN_CHECKS`]) ...
    pub(crate) min_checks: u64,
    /// ... and one per this many input bytes ([`BYTES_PER_CHECK`]).
    pub(crate) bytes_per_check: u64,
    /// The shortest wait between looks ([`CHECK_INTERVAL`]).
    pub(crate) look_every: Duration,
}

/// What `Options` start with.
pub(crate) const READ_COMPACTION_TUNING: ReadCompactionTuning = ReadCompactionTuning {
    min_checks: MIN_CHECKS,
    bytes_per_check: BYTES_PER_CHECK,
    look_every: CHECK_INTERVAL,
};

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            write_buffer_size: DEFAULT_WRITE_BUFFER_SIZE,
            max_immutable_memtables: 2,
            block_size: 4096,
            block_restart_interval: 16,
            block_cache_bytes: 32 << 20,
            block_cache_high_priority_share: 0.5,
            block_cache: None,
            rate_limiter: None,
            cache_index_and_filter_blocks: false,
            pin_l0_filter_and_index_blocks_in_cache: false,
            pin_top_level_index_and_filter: true,
            compression: Compression::Snappy,
            compression_per_level: Vec::new(),
            bottommost_compression: None,
            filter: Filter::full(10.0),
            filter_allocation: FilterAllocation::Uniform,
            range_filter: RangeFilter::none(),
            no_filter_on_last_level: false,
            prefix_extractor: None,
            whole_key_filtering: true,
            max_open_files: 1000,
            target_file_size: 2 << 20,
            level0_compaction_trigger: 4,
            level0_compaction_trigger_during_writes: 19,
            level0_slowdown_trigger: 28,
            level0_stop_trigger: 36,
            max_bytes_for_level_base: 10 << 20,
            level_size_multiplier: 10,
            compaction_style: CompactionStyle::Leveled,
            level_budget_during_writes: 2.0,
            max_subcompactions: 2,
            max_total_wal_size: 0,
            compact_l0_for_reads: true,
            compact_l0_when_idle: true,
            idle_compaction_after: IDLE_AFTER,
            read_compaction_tuning: READ_COMPACTION_TUNING,
            compaction_filter: None,
            registered_compaction_filters: Vec::new(),
            merge_operator: None,
            registered_merge_operators: Vec::new(),
            ttl: None,
            write_times: false,
            clock: Arc::new(SystemClock),
            transaction_retries: 10,
            #[cfg(feature = "__fault-injection")]
            fault_injector: None,
        }
    }
}

impl Options {
    /// Create the store (and its directory) if there is none (default: true). With `false`,
    /// [`Db::open`](crate::Db::open) refuses a directory that holds no store.
    pub fn create_if_missing(mut self, yes: bool) -> Self {
        self.create_if_missing = yes;
        self
    }

    /// Bytes a memtable holds before it is frozen and flushed to an L0 table (default 4 MiB).
    pub fn write_buffer_size(mut self, bytes: usize) -> Self {
        self.write_buffer_size = bytes.max(4096);
        self
    }

    /// Bytes the live WALs may hold before the keyspaces whose unflushed writes keep the oldest
    /// WAL alive are flushed, so that a keyspace written rarely does not keep old WALs (and a
    /// long replay at open) forever (RocksDB's option of the same name). Store-wide. Default 0:
    /// four times the largest [`write_buffer_size`](Self::write_buffer_size) of the store's
    /// keyspaces, so that no keyspace is flushed before its memtable is full only because it is
    /// written alone.
    pub fn max_total_wal_size(mut self, bytes: u64) -> Self {
        self.max_total_wal_size = bytes;
        self
    }

    /// Frozen memtables waiting for flush before writers wait for the flush (default 2).
    pub fn max_immutable_memtables(mut self, n: usize) -> Self {
        self.max_immutable_memtables = n.max(1);
        self
    }

    /// Target uncompressed size of a data block (default 4 KiB).
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes.max(64);
        self
    }

    /// Entries between restart points in a block (default 16).
    pub fn block_restart_interval(mut self, n: usize) -> Self {
        self.block_restart_interval = n.max(1);
        self
    }

    /// Capacity of the block cache shared by all tables (default 32 MiB; 0 disables it): a cache
    /// of the store's own, unless [`block_cache`](Self::block_cache) gives one to share.
    pub fn block_cache_bytes(mut self, bytes: usize) -> Self {
        self.block_cache_bytes = bytes;
        self
    }

    /// Read every table through `cache`, which other stores given clones of it share (default:
    /// none, a cache of the store's own of [`block_cache_bytes`](Self::block_cache_bytes)). Its
    /// capacity and high-priority share are the cache's own; this store's blocks are keyed
    /// apart from every other store's and leave the cache when the store closes. Store-wide;
    /// options cloned from these share the cache too. As RocksDB's shared `Cache` object.
    pub fn block_cache(mut self, cache: Cache) -> Self {
        self.block_cache = Some(cache);
        self
    }

    /// Pace the tables flushes and compactions write to `bytes_per_second`, with a
    /// [`RateLimiter`] of the store's own (0, the default: no limit). Flushes go before
    /// compactions; the WAL and reads are not paced. A job in flight finishes at the rate, so a
    /// low one makes [`Db::close`](crate::Db::close) wait longer. Store-wide; options cloned from
    /// these share the limiter, and so share the rate.
    pub fn rate_limit(mut self, bytes_per_second: u64) -> Self {
        self.rate_limiter = (bytes_per_second > 0).then(|| RateLimiter::new(bytes_per_second));
        self
    }

    /// Pace flushes' and compactions' table writes with `limiter`, whose rate other stores given
    /// clones of it share (see [`rate_limit`](Self::rate_limit)). Store-wide.
    pub fn rate_limiter(mut self, limiter: RateLimiter) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }

    /// Put every table's index block and filter (the whole filter, or a partitioned filter's
    /// partitions, and its range filter, counted as a filter block) in the block cache, charged
    /// to it, instead of reading them when the table opens and keeping them as long as it is open
    /// (default false). Memory then stays within the block cache, whatever the data size; a Get
    /// whose table's filter was evicted reads it again. They go in with high priority (see
    /// [`block_cache_high_priority_share`](Self::block_cache_high_priority_share)), so data
    /// blocks are evicted first. As RocksDB's `cache_index_and_filter_blocks`.
    pub fn cache_index_and_filter_blocks(mut self, yes: bool) -> Self {
        self.cache_index_and_filter_blocks = yes;
        self
    }

    /// With [`cache_index_and_filter_blocks`](Self::cache_index_and_filter_blocks), keep the
    /// index and filter of L0 tables with the tables all the same (default false): every Get
    /// asks every L0 table, and there are few. Their memory is then outside the cache, reported as
    /// `filter.bytes.in.memory`. As RocksDB's `pin_l0_filter_and_index_blocks_in_cache`.
    pub fn pin_l0_filter_and_index_blocks_in_cache(mut self, yes: bool) -> Self {
        self.pin_l0_filter_and_index_blocks_in_cache = yes;
        self
    }

    /// With [`cache_index_and_filter_blocks`](Self::cache_index_and_filter_blocks), keep a
    /// partitioned filter's partition index with its table (default true): it is small, and the
    /// partitions it points to still go through the cache. As RocksDB's
    /// `pin_top_level_index_and_filter`.
    pub fn pin_top_level_index_and_filter(mut self, yes: bool) -> Self {
        self.pin_top_level_index_and_filter = yes;
        self
    }

    /// The share of the block cache (0 to 1, default 0.5) that index and filter blocks charged to
    /// it keep from eviction while data blocks remain: past it, they are evicted like data.
    pub fn block_cache_high_priority_share(mut self, share: f64) -> Self {
        self.block_cache_high_priority_share = share;
        self
    }

    /// The codec of new tables' data and index blocks at every level (default snappy), where
    /// [`compression_per_level`](Self::compression_per_level) and
    /// [`bottommost_compression`](Self::bottommost_compression) do not say otherwise.
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    /// The codec of each level's new tables, from L0 on; levels past the end of the list take its
    /// last entry, and an empty list (the default) leaves every level to
    /// [`compression`](Self::compression). Flushes write L0 tables with the first entry, and a
    /// compaction writes its outputs with the codec of the level they go to. A table moved to
    /// another level whole, without being rewritten, keeps its blocks as they are. As RocksDB's
    /// `compression_per_level`.
    ///
    /// ```
    /// use siftdb::{Compression, Options};
    /// // Fast codecs where data is rewritten soon, the best ratio where most of it ends up.
    /// let options = Options::default()
    ///     .compression_per_level([Compression::None, Compression::Lz4])
    ///     .bottommost_compression(Compression::Zstd(3));
    /// ```
    pub fn compression_per_level(mut self, codecs: impl IntoIterator<Item = Compression>) -> Self {
        self.compression_per_level = codecs.into_iter().collect();
        self
    }

    /// The codec of the tables a compaction writes into the bottommost level (the deepest one
    /// that holds data), whatever [`compression_per_level`](Self::compression_per_level) says
    /// for it (default: unset, the level's own codec). The bottommost level holds most of the
    /// data and is rewritten least often, so it pays for a slower codec with a better ratio. As
    /// RocksDB's `bottommost_compression`.
    pub fn bottommost_compression(mut self, c: Compression) -> Self {
        self.bottommost_compression = Some(c);
        self
    }

    /// The codec of new tables of `level`; `bottommost` when they go into the deepest level
    /// that holds data.
    pub(crate) fn compression_for_level(&self, level: usize, bottommost: bool) -> Compression {
        if bottommost && let Some(c) = self.bottommost_compression {
            return c;
        }
        match self.compression_per_level.as_slice() {
            [] => self.compression,
            list => list[level.min(list.len() - 1)],
        }
    }

    /// The filter new tables are built with (default: `Filter::full(10.0)`). Tables built earlier
    /// keep, and are read with, their own filter.
    pub fn filter(mut self, f: Filter) -> Self {
        self.filter = f;
        self
    }

    /// The range filter new tables are built with (default [`RangeFilter::none`]): a bounded
    /// scan ([`Db::scan`](crate::Db::scan) of a range, [`Db::scan_prefix`](crate::Db::scan_prefix),
    /// [`Db::cursor_in`](crate::Db::cursor_in)) skips, without reading its index or a data block,
    /// every table whose range filter says it holds no key in the range. Tables built earlier keep
    /// theirs, or have none; either way a store reads them.
    pub fn range_filter(mut self, range_filter: RangeFilter) -> Self {
        self.range_filter = range_filter;
        self
    }

    /// How filter memory is spread over the levels (default uniform: every table gets the policy's
    /// bits per key). With [`FilterAllocation::Monkey`] the total stays what uniform would spend,
    /// and each level's share follows Monkey's rule.
    pub fn filter_allocation(mut self, allocation: FilterAllocation) -> Self {
        self.filter_allocation = allocation;
        self
    }

    /// Build tables of the last level without a filter (RocksDB's `optimize_filters_for_hits`):
    /// the last level holds about 90 % of the keys, so this saves about 90 % of filter memory, and
    /// Gets for keys that exist, which end in the last level, lose nothing. Gets for missing keys
    /// then read one data block of the last level. Default false.
    pub fn no_filter_on_last_level(mut self, yes: bool) -> Self {
        self.no_filter_on_last_level = yes;
        self
    }

    /// Put the prefix of every in-domain key into each new table's filter too, so that
    /// [`Db::scan_prefix`](crate::Db::scan_prefix) (and any scan whose bounds share one prefix)
    /// skips tables that cannot hold the prefix. Default: none.
    pub fn prefix_extractor(mut self, extractor: PrefixExtractor) -> Self {
        self.prefix_extractor = Some(extractor);
        self
    }

    /// Put whole keys into new tables' filters (default true). With it off and a prefix extractor
    /// set, point Gets ask the filter for the key's prefix instead: smaller filters, weaker
    /// filtering of point lookups.
    pub fn whole_key_filtering(mut self, yes: bool) -> Self {
        self.whole_key_filtering = yes;
        self
    }

    /// Table readers kept open at once (default 1000).
    pub fn max_open_files(mut self, n: usize) -> Self {
        self.max_open_files = n.max(16);
        self
    }

    /// Size at which compaction cuts its output tables (default 2 MiB). Past half this size, an
    /// output table is also cut where a table of the level below its own ends, so that it later
    /// compacts into whole tables there.
    pub fn target_file_size(mut self, bytes: u64) -> Self {
        self.target_file_size = bytes.max(4096);
        self
    }

    /// Number of L0 tables that starts an L0 → L1 compaction once writes pause (default 4), and
    /// while they flow too: this sets [`level0_compaction_trigger_during_writes`] to `n` as well.
    /// The L0 table counts at which writers slow down and stop (28 and 36) are raised to at least
    /// `n + 1` and `n + 2`; [`Db::open`](crate::Db::open) refuses an `n` too large for that.
    ///
    /// [`level0_compaction_trigger_during_writes`]: Options::level0_compaction_trigger_during_writes
    pub fn level0_compaction_trigger(mut self, n: usize) -> Self {
        self.level0_compaction_trigger = n.max(1);
        self.level0_compaction_trigger_during_writes = n.max(1);
        self.level0_slowdown_trigger = self.level0_slowdown_trigger.max(n.saturating_add(1));
        self.level0_stop_trigger = self
            .level0_stop_trigger
            .max(self.level0_slowdown_trigger.saturating_add(1));
        self
    }

    /// Number of L0 tables that starts an L0 → L1 compaction while writes flow (default 19).
    ///
    /// Every L0 → L1 compaction rewrites the L1 tables its inputs overlap, and on random keys
    /// that is all of L1: the more L0 tables a job takes, the less L1 is rewritten for each
    /// byte flushed, and the fewer, bigger merges into L2 follow. With incompressible values at
    /// ten million keys, 19 in place of 8 writes a fifth fewer table bytes (`docs/benchmarks.md`,
    /// *Writes of incompressible values at ten million keys*). Reads pay for the extra L0 tables (a filter check each), so the batching
    /// lasts only while writes flow: a memtable holds writes and the newest L0 table is less
    /// than a second old. Once writes pause, or after [`Db::flush`], L0 compacts
    /// at [`level0_compaction_trigger`]. Call this after that method, which sets both; a value
    /// below it counts as it, and one at or above the slowdown trigger as one below that.
    ///
    /// [`Db::flush`]: crate::Db::flush
    /// [`level0_compaction_trigger`]: Options::level0_compaction_trigger
    pub fn level0_compaction_trigger_during_writes(mut self, n: usize) -> Self {
        self.level0_compaction_trigger_during_writes = n;
        self
    }

    /// The L0 table count that starts an L0 → L1 compaction while writes flow: the option as
    /// set, kept between the quiet trigger and the slowdown trigger.
    pub(crate) fn l0_trigger_during_writes(&self) -> usize {
        self.level0_compaction_trigger_during_writes
            .min(self.level0_slowdown_trigger.saturating_sub(1))
            .max(self.level0_compaction_trigger)
    }

    /// How many times its byte budget a level below L0 may hold while writes flow before it
    /// compacts into the next (default 2; 1 compacts it at its budget always).
    ///
    /// With one compaction thread, a level compacted the moment it passes its budget keeps that
    /// thread on its jobs while L0 fills and writers slow down; allowed to gather, a level takes
    /// fewer jobs while the writes flow and is brought back within its budget once they pause
    /// (a memtable holds writes and the newest L0 table is less than a second old, as for
    /// [`level0_compaction_trigger_during_writes`]). A point lookup checks one filter per level
    /// either way; the level's extra bytes hold the newer versions of keys deeper levels also
    /// hold, until they are merged. [`Db::open`](crate::Db::open) refuses a value below 1.
    ///
    /// [`level0_compaction_trigger_during_writes`]: Options::level0_compaction_trigger_during_writes
    pub fn level_budget_during_writes(mut self, factor: f64) -> Self {
        self.level_budget_during_writes = factor;
        self
    }

    /// Number of L0 tables at which each write first waits a millisecond, giving compaction
    /// time to catch up (default 28; RocksDB's is 20). It sits well above the trigger while
    /// writes flow (19), so that a compaction running late does not hold writers back at once.
    /// Higher holds writers back later and lets Gets meet more L0 tables (a filter check each)
    /// while compaction catches up.
    /// [`Db::open`](crate::Db::open) refuses a value not between the compaction and stop triggers.
    pub fn level0_slowdown_writes_trigger(mut self, n: usize) -> Self {
        self.level0_slowdown_trigger = n;
        self
    }

    /// Number of L0 tables at which writers wait for an L0 → L1 compaction before starting a new
    /// memtable (default 36, RocksDB's too). [`Db::open`](crate::Db::open) refuses a value not
    /// above the slowdown trigger.
    pub fn level0_stop_writes_trigger(mut self, n: usize) -> Self {
        self.level0_stop_trigger = n;
        self
    }

    /// Bytes allowed in L1 before it compacts into L2 (default 10 MiB); each deeper level holds
    /// `level_size_multiplier` times more.
    pub fn max_bytes_for_level_base(mut self, bytes: u64) -> Self {
        self.max_bytes_for_level_base = bytes.max(4096);
        self
    }

    /// Compact L0 into L1 once reads have paid for it, even below the L0 trigger (default on).
    ///
    /// Every point lookup checks the filter of each L0 table whose key range holds its key, and
    /// L0 keeps up to `level0_compaction_trigger - 1` tables for as long as no more writes come:
    /// after a bulk load, each Get pays for those checks until the next writes. With this on, the
    /// compaction thread counts the L0 filter checks that did not find their key and compacts L0
    /// once they have cost about what the compaction costs (the bytes of L0 and of the L1 tables
    /// it overlaps; see DESIGN.md, "Compaction for reads"). Counted from filter checks only:
    /// L0 tables without filters never trigger it. Off, L0 is compacted only at the trigger.
    pub fn compact_l0_for_reads(mut self, yes: bool) -> Self {
        self.compact_l0_for_reads = yes;
        self
    }

    /// Compact L0 into L1 once writes pause, even below the L0 trigger (default on).
    ///
    /// Every point lookup checks the filter of each L0 table whose key range holds its key. With
    /// this on, once neither a write nor a flush has come to the keyspace for a second, the
    /// compaction thread merges whatever L0 holds into L1 (`compaction.idle.l0`), so that a
    /// settled store has no L0 tables and a missing key meets one table per level.
    /// `siftdb.compaction-pending` counts that job as pending while L0 holds tables and no
    /// memtable holds writes. It costs an L0 → L1 compaction per pause of the writes that leaves
    /// tables in L0 (DESIGN.md, *Compaction when writes pause*). Off, L0 is compacted at its
    /// trigger, or once reads paid for it ([`compact_l0_for_reads`](Self::compact_l0_for_reads)).
    pub fn compact_l0_when_idle(mut self, yes: bool) -> Self {
        self.compact_l0_when_idle = yes;
        self
    }

    /// Growth factor between levels (default 10).
    pub fn level_size_multiplier(mut self, m: u64) -> Self {
        self.level_size_multiplier = m.max(2);
        self
    }

    /// How compactions shape the keyspace's tree (default [`CompactionStyle::Leveled`]).
    /// [`CompactionStyle::LazyLeveled`] writes each byte fewer times, at the price of more runs
    /// for a Get to ask; a keyspace may change style at any time.
    pub fn compaction_style(mut self, style: CompactionStyle) -> Self {
        self.compaction_style = style;
        self
    }

    /// Threads one compaction may split its key range between (default 2; 1 never splits; more
    /// than [`MAX_SUBCOMPACTIONS`] count as that many). A
    /// job of at least two output tables is cut at input table bounds into ranges of about equal
    /// bytes, each written by its own thread, so that a large L0 → L1 or L1 → L2 compaction
    /// finishes sooner and writers spend less time waiting on L0.
    pub fn max_subcompactions(mut self, n: usize) -> Self {
        self.max_subcompactions = n.clamp(1, MAX_SUBCOMPACTIONS);
        self
    }

    /// The keyspace's [`CompactionFilter`]: compaction asks it about each value it writes, to
    /// keep, remove or change it (see the trait for which entries it sees). Default: none. Given
    /// to [`Db::open`](crate::Db::open), it is the default keyspace's (and that of keyspaces
    /// created with [`Db::keyspace`](crate::Db::keyspace)); given to
    /// [`Db::keyspace_with`](crate::Db::keyspace_with), the new keyspace's. The store records it
    /// by [name](CompactionFilter::name) and finds it again on reopen in the options it is opened
    /// with: this option, or [`register_compaction_filter`](Self::register_compaction_filter).
    /// [`Db::compact`](crate::Db::compact) of a keyspace with a filter rewrites its last level
    /// too, so that the filter sees every entry.
    pub fn compaction_filter(mut self, filter: Arc<dyn CompactionFilter>) -> Self {
        self.compaction_filter = Some(filter);
        self
    }

    /// Makes `filter` known to the store opened with these options, without making it the
    /// default keyspace's: a keyspace created with it (through
    /// [`Db::keyspace_with`](crate::Db::keyspace_with) and
    /// [`compaction_filter`](Self::compaction_filter)) finds it here by name when the store is
    /// reopened. Store-wide; call it once per filter.
    pub fn register_compaction_filter(mut self, filter: Arc<dyn CompactionFilter>) -> Self {
        self.registered_compaction_filters.push(filter);
        self
    }

    /// The keyspace's [`MergeOperator`], which lets [`Db::merge`](crate::Db::merge) write
    /// operands that reads and compactions combine with the value beneath them (see the trait).
    /// Default: none, and merges are refused with `Error::InvalidArgument`. Given to
    /// [`Db::open`](crate::Db::open), it is the default keyspace's (and that of keyspaces created
    /// with [`Db::keyspace`](crate::Db::keyspace)); given to
    /// [`Db::keyspace_with`](crate::Db::keyspace_with), the new keyspace's. A keyspace records
    /// it by [name](MergeOperator::name), and a reopened store must find it in the options it
    /// is opened with (this option, or
    /// [`register_merge_operator`](Self::register_merge_operator)), or the open fails with
    /// `Error::InvalidArgument` naming it. Not with a [`ttl`](Self::ttl): operands do not expire.
    pub fn merge_operator(mut self, operator: Arc<dyn MergeOperator>) -> Self {
        self.merge_operator = Some(operator);
        self
    }

    /// Makes `operator` known to the store opened with these options, without making it the
    /// default keyspace's: a keyspace created with it (through
    /// [`Db::keyspace_with`](crate::Db::keyspace_with) and
    /// [`merge_operator`](Self::merge_operator)) finds it here by name when the store is
    /// reopened. Store-wide; call it once per operator.
    pub fn register_merge_operator(mut self, operator: Arc<dyn MergeOperator>) -> Self {
        self.registered_merge_operators.push(operator);
        self
    }

    /// Gives the keyspace's entries a time to live: a value put at time *t* (by the store's
    /// [`clock`](Self::clock)) without a time to live of its own is invisible to every read from
    /// *t* + `ttl` on, as if deleted (an older version of its key does not show through), and
    /// compactions remove it. Counted in whole seconds, rounded up. Default: none, entries live
    /// until deleted. [`Db::put_with_ttl`](crate::Db::put_with_ttl) gives one entry its own time
    /// to live instead, in any keyspace.
    ///
    /// A value that expires is stored with its expiry time (four more bytes, see
    /// `docs/table_format.md`), stamped when its batch is committed; reads return the value as
    /// written, without it. A [`CompactionFilter`] of the keyspace sees values without it too,
    /// and a value it changes keeps its expiry time. Expired entries leave the disk when a
    /// compaction rewrites the tables that hold them (a flush keeps them);
    /// [`Db::compact`](crate::Db::compact) of the keyspace rewrites every table.
    ///
    /// Any keyspace may have one, the default keyspace too (given to [`Db::open`](crate::Db::open)).
    /// The store records a keyspace's with its other options;
    /// [`Keyspace::set_options`](crate::Keyspace::set_options) changes it, for the puts that
    /// follow: an entry keeps the expiry time it was written with.
    ///
    /// ```
    /// use std::time::Duration;
    /// use siftdb::{Db, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let sessions =
    ///     db.keyspace_with("sessions", Options::default().ttl(Duration::from_secs(3600)))?;
    /// sessions.put("token-1", "ada")?; // an hour
    /// sessions.put_with_ttl("token-2", "bob", Duration::from_secs(30 * 86_400))?; // thirty days
    /// assert_eq!(sessions.get("token-1")?, Some(b"ada".to_vec())); // an hour from now: None
    /// # Ok(())
    /// # }
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The store's time source (default: [`SystemClock`](crate::SystemClock), the operating
    /// system's), which stamps the expiry times of entries with a time to live ([`ttl`](Self::ttl),
    /// [`Db::put_with_ttl`](crate::Db::put_with_ttl)) and judges them. Store-wide. Tests give a
    /// clock they move by hand.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How many times [`Db::transaction_with`](crate::Db::transaction_with) runs a transaction
    /// again after its commit met a conflict, before it returns the last `Error::Conflict`
    /// (default 10). Store-wide.
    pub fn transaction_retries(mut self, retries: usize) -> Self {
        self.transaction_retries = retries;
        self
    }

    /// The filter configured for new tables.
    pub fn filter_config(&self) -> &Filter {
        &self.filter
    }

    /// Runs the store's file operations through `injector` (the crate's own power-cut and I/O
    /// error tests). Not an API.
    #[cfg(feature = "__fault-injection")]
    #[doc(hidden)]
    pub fn fault_injector(mut self, injector: crate::fs::fault_injection::FaultInjector) -> Self {
        self.fault_injector = Some(injector);
        self
    }

    /// Merges L0 into L1 once the keyspace's writes have paused for `after` rather than a second
    /// (see [`compact_l0_when_idle`](Self::compact_l0_when_idle)), so that the crate's power-cut
    /// tests cut inside such merges too. Not an API.
    #[cfg(feature = "__fault-injection")]
    #[doc(hidden)]
    pub fn idle_compaction_after(mut self, after: Duration) -> Self {
        self.idle_compaction_after = after;
        self
    }

    /// Makes compactions for reads cheap (at least `min_checks`, one check per `bytes_per_check`
    /// input bytes) and looked for every `look_every`, so that the crate's power-cut tests cut
    /// inside them too. Not an API.
    #[cfg(feature = "__fault-injection")]
    #[doc(hidden)]
    pub fn read_compaction_tuning(
        mut self,
        min_checks: u64,
        bytes_per_check: u64,
        look_every: std::time::Duration,
    ) -> Self {
        self.read_compaction_tuning = ReadCompactionTuning {
            min_checks,
            bytes_per_check: bytes_per_check.max(1),
            look_every,
        };
        self
    }

    /// The file system the store writes through.
    pub(crate) fn file_system(&self) -> FileSystem {
        #[cfg(feature = "__fault-injection")]
        return FileSystem::with_faults(self.fault_injector.clone());
        #[cfg(not(feature = "__fault-injection"))]
        FileSystem::default()
    }

    /// Whether the options can work together.
    ///
    /// # Errors
    /// `Error::InvalidArgument` saying which option is out of range.
    pub(crate) fn validate(&self) -> Result<()> {
        let (compact, slow, stop) = (
            self.level0_compaction_trigger,
            self.level0_slowdown_trigger,
            self.level0_stop_trigger,
        );
        if !(0.0..=1.0).contains(&self.block_cache_high_priority_share) {
            return Err(Error::InvalidArgument(format!(
                "block_cache_high_priority_share {} is not between 0 and 1",
                self.block_cache_high_priority_share
            )));
        }
        let codecs = std::iter::once(&self.compression)
            .chain(&self.compression_per_level)
            .chain(&self.bottommost_compression);
        for codec in codecs {
            if let Compression::Zstd(level) = *codec {
                let known = zstd::compression_level_range();
                if !known.contains(&level) {
                    return Err(Error::InvalidArgument(format!(
                        "zstd level {level} is not between {} and {}",
                        known.start(),
                        known.end()
                    )));
                }
            }
        }
        if !(self.level_budget_during_writes >= 1.0 && self.level_budget_during_writes.is_finite())
        {
            return Err(Error::InvalidArgument(format!(
                "level_budget_during_writes {} must be a finite number of at least 1",
                self.level_budget_during_writes
            )));
        }
        if !(compact < slow && slow < stop) {
            return Err(Error::InvalidArgument(format!(
                "level0_compaction_trigger {compact} must be below the slowdown ({slow}) and stop \
                 ({stop}) triggers, and the slowdown below the stop"
            )));
        }
        for (name, bytes) in [
            ("write_buffer_size", self.write_buffer_size as u64),
            ("target_file_size", self.target_file_size),
            ("max_bytes_for_level_base", self.max_bytes_for_level_base),
        ] {
            if bytes > MAX_SIZE_OPTION {
                return Err(Error::InvalidArgument(format!(
                    "{name} {bytes} is above the largest accepted ({MAX_SIZE_OPTION} bytes, 1 TiB)"
                )));
            }
        }
        if self.ttl.is_some() && self.merge_operator.is_some() {
            return Err(Error::InvalidArgument(
                "a keyspace with a ttl takes no merge_operator: merge operands do not expire"
                    .into(),
            ));
        }
        if self.ttl.is_some_and(|t| t.is_zero()) {
            return Err(Error::InvalidArgument(
                "ttl must be above zero (whole seconds, rounded up)".into(),
            ));
        }
        if self.block_size > MAX_BLOCK_SIZE {
            return Err(Error::InvalidArgument(format!(
                "block_size {} is above the largest accepted ({MAX_BLOCK_SIZE} bytes, 1 GiB)",
                self.block_size
            )));
        }
        self.filter.validate()?;
        self.range_filter.validate()
    }

    /// The byte budget of a level (L0 is governed by table count instead).
    pub(crate) fn max_bytes_for_level(&self, level: usize) -> u64 {
        let mut bytes = self.max_bytes_for_level_base;
        for _ in 1..level {
            bytes = bytes.saturating_mul(self.level_size_multiplier);
        }
        bytes
    }
}

/// Options for one write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// When true, the write returns only after the WAL has been fsynced (and every older WAL still
    /// needed), so it, and every write acknowledged before it, survives a crash of the machine.
    /// Without it a write survives a crash of the process, and a crash of the machine may lose the
    /// newest unsynced writes, never some writes without those before them.
    pub sync: bool,
}

impl WriteOptions {
    /// The default options (no sync), the same as `WriteOptions::default()`. Build from here with
    /// the methods below: `WriteOptions::new().sync(true)` keeps compiling when fields are added,
    /// a struct literal does not.
    ///
    /// ```
    /// let opts = siftdb::WriteOptions::new().sync(true);
    /// assert!(opts.sync);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the `sync` field: whether the write returns only after the WAL has been fsynced.
    pub fn sync(mut self, yes: bool) -> Self {
        self.sync = yes;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_takes_its_codec_and_the_bottommost_its_own() {
        let default = Options::default();
        for level in 0..NUM_LEVELS {
            for bottommost in [false, true] {
                let c = default.compression_for_level(level, bottommost);
                assert_eq!(c, Compression::Snappy);
            }
        }
        let all_lz4 = Options::default().compression(Compression::Lz4);
        assert_eq!(all_lz4.compression_for_level(3, true), Compression::Lz4);
        let o = Options::default()
            .compression(Compression::Lz4)
            .compression_per_level([Compression::None, Compression::Snappy, Compression::Lz4]);
        let per_level: Vec<_> = (0..NUM_LEVELS)
            .map(|l| o.compression_for_level(l, false))
            .collect();
        assert_eq!(
            per_level[..3],
            [Compression::None, Compression::Snappy, Compression::Lz4]
        );
        assert!(per_level[3..].iter().all(|&c| c == Compression::Lz4));
        // Unset, the bottommost level keeps its level's codec; set, it wins at any level.
        assert_eq!(o.compression_for_level(0, true), Compression::None);
        let o = o.bottommost_compression(Compression::Zstd(3));
        assert_eq!(o.compression_for_level(0, true), Compression::Zstd(3));
        assert_eq!(o.compression_for_level(6, true), Compression::Zstd(3));
        assert_eq!(o.compression_for_level(6, false), Compression::Lz4);
    }

    #[test]
    fn a_zstd_level_zstd_does_not_know_is_refused() {
        let levels = zstd::compression_level_range();
        for level in [*levels.start(), -1, 0, 3, *levels.end()] {
            let o = Options::default().compression(Compression::Zstd(level));
            assert!(o.validate().is_ok(), "{level}");
        }
        let bad = levels.end() + 1;
        let refused = [
            Options::default().compression(Compression::Zstd(bad)),
            Options::default().compression_per_level([Compression::None, Compression::Zstd(bad)]),
            Options::default().bottommost_compression(Compression::Zstd(bad)),
            Options::default().compression(Compression::Zstd(levels.start() - 1)),
        ];
        for o in refused {
            let e = o.validate().unwrap_err();
            assert!(e.to_string().contains("zstd level"), "{e}");
        }
    }
}
