//! Side-by-side point lookups and short scans: siftdb against RocksDB and fjall, one store after
//! another in one process.
//!
//! ```text
//! cargo run --release -p siftdb-compare -- \
//!     [--keys 1000000] [--reads 1000000] [--batch 32] [--compacted] \
//!     [--peer-shape siftdb|own] [--stores siftdb,rocksdb,fjall] [--json] [--print-stats] \
//!     [--compression-ratio 0.5] [--constant-value] [--overwrite] [--siftdb-monkey] [--siftdb-ribbon] \
//!     [--scan-widths 1,16,256,4096,65536 --stores siftdb-range,rocksdb-prefix,siftdb,rocksdb \
//!      --range-filter-bits 24 --rocksdb-prefix-len 12]
//! ```
//!
//! This crate (`compare/`, a workspace member that is never published and that a plain `cargo`
//! command at the root does not build) pulls in fjall 3.1 (with its `metrics` feature, for the
//! filter counters) and the `rocksdb` crate; the latter builds RocksDB's C++ sources (needs clang
//! and libclang-dev; 15-25 minutes on 2 cores). CI does not build it.
//!
//! Keys are 16-byte zero-padded decimals of even numbers, values 100 bytes as db_bench makes
//! them (random bytes that compress to `--compression-ratio`, default 0.5; 1.0 for
//! incompressible; from a fixed seed, the same for every store), inserted in random order; WAL on,
//! no fsync. `--constant-value` writes one repeated byte instead (which snappy shrinks about
//! tenfold), as earlier versions of this harness did. Phases: fillrandom, then flush and wait
//! until the store has no pending or running compaction (`--overwrite`: then every key put again
//! in a new random order, db_bench's overwrite, into a tree whose levels are all full, and settle
//! again; `--compacted`: then a full compaction, and wait again), then
//! readrandom (present keys), readmissing (odd numbers, all absent) and readmixed (half each),
//! one get at a time. With `--batch N` (default 32; 0 leaves them out) two more phases follow,
//! multiget-present and multiget-missing: `--reads` lookups each, handed to the store's batched
//! lookup N random keys at a time (present keys, resp. absent odd ones); their ops/s count keys,
//! not batches. Every answer is checked; a wrong one panics.
//!
//! Printed along the way: each store's files per level once settled, so a reader sees the
//! shapes that are read (with `--print-stats`, also its own report of levels and compactions:
//! `siftdb.stats`, `rocksdb.stats`). At the end:
//! - "writes": µs per put during the fill; write amplification, bytes of tables written by
//!   flushes and compactions over the bytes of keys and values put (116 per put), taken twice:
//!   at the end of the fill (what the store wrote while the puts ran; the last memtable is not
//!   flushed yet) and once settled after the flush (before `--compacted`'s full compaction);
//!   and the time writers were stalled during the fill, in seconds and as a share of the fill.
//!   With `--overwrite`, the same for that phase on its own (its table bytes over its bytes put).
//! - The bloom tickers of the readmissing phase and the false-positive rate they give,
//!   (full.positive - full.true.positive) / (useful + full.positive - full.true.positive),
//!   and the filter probes per get.
//! - The size of the filters of the live tables, against 10 bits/key.
//! - ops/s per phase and store, and siftdb's ratio to each (siftdb/x, above 1 means siftdb is
//!   faster). `--json` prints the same numbers as one JSON line after it.
//!
//! A figure a store does not expose is printed as n/a.
//!
//! Settings, alike where the stores let them be:
//! - siftdb: full filter 10 bits/key on every level, 4 KiB blocks, 64 MiB block cache, snappy
//!   (its default), otherwise defaults (4 MiB memtable, 2 MiB tables, L0 compaction at 4
//!   tables, at 8 while writes flow; L1 budget 10 MiB, x10 per level, static level sizes, each
//!   level holding up to twice its budget while writes flow;
//!   writers slowed at 20 L0 tables and stopped at 36 or at 2 memtables waiting for their
//!   flush; one compaction job at a time, split between 2 threads; L0 merged into L1 below its
//!   trigger a second after the writes pause, `compact_l0_when_idle`, or once the Gets' filter
//!   checks of it have paid for that, `compact_l0_for_reads`). With `--siftdb-monkey`, its
//!   filters' bits are spread over the levels as Monkey derives (`FilterAllocation::Monkey`):
//!   the same filter memory in all, more bits per key in the upper levels and fewer in the last;
//!   the filter size printed at the end shows it. With `--siftdb-ribbon`, its filters are Ribbon
//!   filters of the same 10 bits/key (`Filter::ribbon(10.0)`): the same memory, about a seventh
//!   of the bloom's false positives, a costlier build and probe.
//!   Batched lookups: `multi_get`. Settling: `flush()`, then poll `siftdb.compaction-pending` until
//!   `0` (which waits for that merge of L0 too).
//!   Counters: its statistics (bloom tickers, `table.bytes.written`, `user.bytes.written`,
//!   `write.stall.micros`); filter size: the filter bytes held in memory.
//! - RocksDB: block-based tables with a full (not block-based) bloom filter of 10 bits/key on
//!   every level, 4 KiB blocks, 64 MiB LRU block cache, snappy, statistics on, compactions
//!   split between 2 threads as siftdb's are (`max_subcompactions`; its default is 1, and its
//!   default of 2 background jobs gives one flush and one compaction at a time). Opened with its
//!   default column family named, so that batched lookups can be given its handle. Writes use
//!   the default `WriteOptions` (WAL, no sync); reads use `get_pinned`, batched lookups
//!   `batched_multi_get_cf` with `sorted_input = false` (its optimized MultiGet, which sorts the
//!   keys itself). Settling: `flush()`, then poll `rocksdb.compaction-pending` and
//!   `rocksdb.num-running-compactions` every 50 ms until both are `0`. Compaction:
//!   `compact_range(None, None)`. Counters: tickers `rocksdb.flush.write.bytes` plus
//!   `rocksdb.compact.write.bytes` for table bytes, `rocksdb.stall.micros` for stalls (its L0
//!   triggers are its defaults: slowdown at 20 files, stop at 36; siftdb's are 28 and 36); the
//!   bytes of keys and values are counted by the harness, as its `rocksdb.bytes.written`
//!   includes the write batch encoding.
//!   Filter size: "filter block size" of the aggregated table properties.
//! - fjall 3.1: one keyspace; `filter_policy` a bloom filter of 10 bits/key on every level
//!   (fjall's default sizes L0's filters for a 0.01% FP rate, ~19 bits/key, and gives 10
//!   bits/key below), 4 KiB data blocks, 64 MiB cache; otherwise its defaults: data blocks
//!   uncompressed in L0 and L1 and lz4 below (it has no snappy), filters pinned in memory for L0
//!   and read through the block cache below, index blocks pinned for L0 and L1, both partitioned
//!   from L3 on. Writes: `insert` (journal handed to the OS on every write, no fsync: its
//!   default). Batched lookups: fjall 3.1 has no multi-get, so they are a loop of `get`s.
//!   Settling: `persist(Buffer)` and `rotate_memtable_and_wait()` (which waits for the flush),
//!   then poll every 50 ms until no flush is queued (`outstanding_flushes`), no sealed memtable
//!   waits, no compaction runs (`active_compactions`) and the files per level stayed the same
//!   for 200 ms. fjall exposes no pending-compaction signal, and it compacts only when a flush
//!   asks it to (one compaction pick per worker thread per flush), so the shape it settles in
//!   can still be over its own level targets. Compaction: `major_compact()` (everything into L6).
//!   Counters: lsm-tree's metrics count the filter checks that ruled a table out
//!   (`io_skipped_by_filter`) and the checks after which the table did not hold the key
//!   (`filter_queries` minus those): useful and false positives. It does not count true
//!   positives, so full.true.positive is reported as 0, which is exact in readmissing where no
//!   key is present. Filter size: `filter_size()`, the filters of all live tables. Write
//!   amplification and stalls: n/a, fjall 3.1 counts neither the bytes its flushes and
//!   compactions write nor the time it holds writers back.
//!
//! `--peer-shape` sets the tree shape of RocksDB and fjall:
//! - `siftdb` (default): siftdb's, so that all three build trees of about the same shape.
//!   RocksDB: 4 MiB memtable, 2 MiB tables, L1 10 MiB, static level sizes
//!   (`level_compaction_dynamic_level_bytes = false`). fjall: 4 MiB memtable, leveled with 2 MiB
//!   tables, L0 compaction at 4 tables and x10 per level; its L1 budget is tables x L0 trigger =
//!   8 MiB (there is no separate setting), and it always fills levels from the last one up:
//!   the first non-empty level below L0 acts as its L1, much like RocksDB's dynamic level sizes
//!   (there is no option for static ones).
//! - `own`: each keeps its own defaults for memtable, table and level sizes. RocksDB: 64 MiB
//!   memtable, 64 MiB tables, L1 256 MiB, dynamic level sizes; fjall: 64 MiB memtable, 64 MiB
//!   tables, L1 256 MiB, x10.
//!
//! Filter, block size, cache and compression are the same under both.
//!
//! **Short scans** (`--scan-widths 1,16,256,4096,65536`): the same fill, but keys are a fixed
//! 8-byte head (`siftkey:`) and a big-endian 64-bit number (key `i`'s a bijective scramble of
//! `2i`, so keys spread over all numbers), as the workload runner's `--key-format binary` makes
//! them; then, instead of the lookups, for each width `w` two phases of `--reads` scans each of
//! `[a, a + w)` that hold no key: `empty-w` (`a` anywhere) and `empty-after-w` (`a` just after a
//! present key, where the prefix of the range is the key's own). Every scan is checked to return
//! nothing. Before them, one untimed pass of `--reads` scans of the first width opens every
//! store's tables. Reported per phase: ops/s, filter checks and tables they ruled out per scan,
//! and data blocks asked of the block cache per scan. Two more stores are meant for it:
//! - `siftdb-range`: `siftdb` with a Grafite range filter per table,
//!   `RangeFilter::grafite(--range-filter-bits, 2^16)` (24 bits/key by default); a scan is
//!   `Db::scan(a..a + w)`.
//! - `rocksdb-prefix`: `rocksdb` with a fixed-prefix extractor of `--rocksdb-prefix-len` bytes
//!   (12: the head and the number's top 32 bits, so a range of up to 2^16 numbers crosses into a
//!   second prefix once in 65,536 or less), a prefix bloom filter beside the whole-key one in the
//!   same 10 bits per entry. RocksDB has no range filter; a prefix bloom is what it offers for
//!   bounded short scans. A scan is an iterator with `iterate_upper_bound` at `a + w` and
//!   `prefix_same_as_start`, sought to `a`: the seek asks each table's prefix bloom for `a`'s
//!   prefix before reading its index. A range crossing a prefix boundary is scanned as one such
//!   iterator per prefix, as an application using prefix seeks must (the crate exposes no
//!   `auto_prefix_mode`). `rocksdb` itself scans with `iterate_upper_bound` alone (total order:
//!   the whole-key bloom is not asked by seeks).
//!
//! `siftdb/x` is then the ratio of `siftdb-range` (if run, else `siftdb`) to each store.

#[path = "../../examples/common/value_generator.rs"]
mod value_generator;

use clap::{Parser, ValueEnum};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};
use value_generator::ValueGenerator;

/// `n` as a 16-byte zero-padded decimal, built on the stack: the harness's own cost per
/// operation is paid by every store alike, so it is kept small to not blur their ratios.
fn decimal_key(mut n: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    for d in k.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}
/// The head of the keys of the short-scan runs.
const BINARY_HEAD: &[u8; 8] = b"siftkey:";

/// Number `x` as a key of the short-scan runs: the head, then `x` big-endian.
fn binary_key(x: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(BINARY_HEAD);
    k[8..].copy_from_slice(&x.to_be_bytes());
    k
}

/// A bijection of the 64-bit numbers (splitmix64's finaliser), the workload runner's: key `i`
/// of the short-scan runs is `binary_key(scramble(2i))`.
fn scramble(n: u64) -> u64 {
    let mut z = n;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How long a store may take to settle before the run goes on with a warning.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(50);

/// Bloom tickers: useful (filter said absent), full.positive (said maybe),
/// full.true.positive (said maybe and the key was there).
type Bloom = (u64, u64, u64);

/// Cumulative counters of short scans: checks of the filters that can rule a table out of a
/// scan (siftdb's range filters, RocksDB's prefix blooms), the checks that did, and data blocks
/// asked of the block cache.
#[derive(Clone, Copy, Default)]
struct ScanCounters {
    checked: u64,
    ruled_out: u64,
    blocks: u64,
}

impl ScanCounters {
    fn since(self, earlier: ScanCounters) -> ScanCounters {
        ScanCounters {
            checked: self.checked - earlier.checked,
            ruled_out: self.ruled_out - earlier.ruled_out,
            blocks: self.blocks - earlier.blocks,
        }
    }
}

/// Cumulative write-path counters of a store.
#[derive(Clone, Copy)]
struct WriteStats {
    /// Bytes of tables written by flushes and compactions.
    table_bytes: u64,
    /// Bytes of keys and values put.
    user_bytes: u64,
    /// Time writers were held back to let flushes or compactions catch up.
    stall_micros: u64,
}

impl WriteStats {
    fn amplification(&self) -> f64 {
        self.table_bytes as f64 / self.user_bytes.max(1) as f64
    }

    /// What was counted between `earlier` and `self`.
    fn since(&self, earlier: &WriteStats) -> WriteStats {
        WriteStats {
            table_bytes: self.table_bytes.saturating_sub(earlier.table_bytes),
            user_bytes: self.user_bytes.saturating_sub(earlier.user_bytes),
            stall_micros: self.stall_micros.saturating_sub(earlier.stall_micros),
        }
    }
}

/// One store under test: one method per operation the harness times or inspects.
trait Store {
    fn put(&mut self, k: &[u8], v: &[u8]);
    fn get(&mut self, k: &[u8]) -> bool;
    /// Looks up all `keys` in one call to the store's batched lookup; `result[i]` tells
    /// whether `keys[i]` was found.
    fn multi_get(&mut self, keys: &[[u8; 16]]) -> Vec<bool>;
    /// Counts the entries of the keys `binary_key(from)` to `binary_key(to)`, `to` excluded.
    fn scan(&mut self, from: u64, to: u64) -> usize;
    fn scan_counters(&self) -> Option<ScanCounters> {
        None
    }
    /// Writes the memtable out as tables and waits for that (not for compactions).
    fn flush(&mut self);
    /// Compacts everything into one level; waits until done.
    fn compact(&mut self);
    /// Polls until background compaction has settled; returns false on timeout.
    fn settle(&mut self) -> bool;
    fn bloom(&self) -> Option<Bloom> {
        None
    }
    /// Files per level, L0 first.
    fn levels(&self) -> Option<Vec<usize>> {
        None
    }
    /// Bytes of filter held by the store's live tables.
    fn filter_bytes(&self) -> Option<u64> {
        None
    }
    fn write_stats(&self) -> Option<WriteStats> {
        None
    }
    /// The store's own report of its levels and compactions, for `--print-stats`.
    fn stats_report(&self) -> Option<String> {
        None
    }
}

/// Polls `done` every 50 ms until it is true or `SETTLE_LIMIT` passes.
fn poll_until(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > SETTLE_LIMIT {
            return false;
        }
        std::thread::sleep(POLL);
    }
    true
}

struct Sift(siftdb::Db);

impl Store for Sift {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.0.put(k, v).unwrap();
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.0.get(k).unwrap().is_some()
    }
    fn multi_get(&mut self, keys: &[[u8; 16]]) -> Vec<bool> {
        self.0
            .multi_get(keys)
            .into_iter()
            .map(|r| r.unwrap().is_some())
            .collect()
    }
    fn scan(&mut self, from: u64, to: u64) -> usize {
        let (lo, hi) = (binary_key(from), binary_key(to));
        let mut n = 0;
        for row in self.0.scan(lo.as_slice()..hi.as_slice()) {
            row.unwrap();
            n += 1;
        }
        n
    }
    fn scan_counters(&self) -> Option<ScanCounters> {
        use siftdb::Ticker;
        let s = self.0.statistics();
        let range = s.range_filter_totals();
        Some(ScanCounters {
            checked: range.checks(),
            ruled_out: range.useful,
            blocks: s.ticker(Ticker::BlockCacheHit) + s.ticker(Ticker::BlockCacheMiss),
        })
    }
    fn flush(&mut self) {
        self.0.flush().unwrap();
    }
    fn compact(&mut self) {
        self.0.compact().unwrap();
    }
    fn settle(&mut self) -> bool {
        poll_until(|| self.0.property("siftdb.compaction-pending").as_deref() == Some("0"))
    }
    fn stats_report(&self) -> Option<String> {
        self.0.property("siftdb.stats")
    }
    fn bloom(&self) -> Option<Bloom> {
        use siftdb::Ticker;
        let s = self.0.statistics();
        Some((
            s.ticker(Ticker::BloomFilterUseful),
            s.ticker(Ticker::BloomFilterFullPositive),
            s.ticker(Ticker::BloomFilterFullTruePositive),
        ))
    }
    fn levels(&self) -> Option<Vec<usize>> {
        (0..siftdb::NUM_LEVELS)
            .map(|l| {
                self.0
                    .property(&format!("siftdb.num-files-at-level{l}"))?
                    .parse()
                    .ok()
            })
            .collect()
    }
    fn filter_bytes(&self) -> Option<u64> {
        // Every table has been opened by the reads, so every filter is pinned and counted.
        Some(self.0.statistics().filter_bytes_in_memory())
    }
    fn write_stats(&self) -> Option<WriteStats> {
        use siftdb::Ticker;
        let s = self.0.statistics();
        Some(WriteStats {
            table_bytes: s.ticker(Ticker::TableBytesWritten),
            user_bytes: s.ticker(Ticker::UserBytesWritten),
            stall_micros: s.ticker(Ticker::WriteStallMicros),
        })
    }
}

/// RocksDB's default number of levels, set explicitly (siftdb has as many).
const ROCKS_LEVELS: usize = 7;

struct Rocks {
    // Dropped before `opts`, which holds the statistics the tickers are read from.
    db: rocksdb::DB,
    opts: rocksdb::Options,
    /// Bytes of keys and values put. RocksDB's own `rocksdb.bytes.written` counts the encoded
    /// write batches, headers included, so the harness counts what siftdb's ticker counts.
    user_bytes: u64,
    /// The length of the fixed prefix its prefix blooms hold, if it has them.
    prefix_len: Option<usize>,
}

impl Rocks {
    fn open(dir: &std::path::Path, shape: PeerShape, prefix_len: Option<usize>) -> Self {
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        table.set_block_size(4096);
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(64 << 20));
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_compression_type(rocksdb::DBCompressionType::Snappy);
        if let Some(len) = prefix_len {
            // Prefix blooms beside the whole-key ones (whole_key_filtering stays on).
            opts.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(len));
        }
        if shape == PeerShape::Siftdb {
            // siftdb's defaults, so that both build trees of the same shape.
            opts.set_write_buffer_size(4 << 20);
            opts.set_target_file_size_base(2 << 20);
            opts.set_max_bytes_for_level_base(10 << 20);
            opts.set_level_compaction_dynamic_level_bytes(false);
        }
        opts.set_num_levels(ROCKS_LEVELS as i32);
        // siftdb splits a compaction between 2 threads; RocksDB's default is 1.
        opts.set_max_subcompactions(2);
        opts.enable_statistics();
        // The default column family is named, with the same options, because only a named
        // family gets a handle, and `batched_multi_get_cf` needs one.
        let db = rocksdb::DB::open_cf_with_opts(
            &opts,
            dir,
            [(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, opts.clone())],
        )
        .unwrap();
        Rocks {
            db,
            opts,
            user_bytes: 0,
            prefix_len,
        }
    }

    /// Counts the entries from `binary_key(from)` to `binary_key(to)` (excluded) with one
    /// iterator bounded above at `to`; `in_prefix`: the range lies in one prefix, sought in
    /// prefix mode (the seek asks the prefix blooms).
    fn scan_piece(&self, from: u64, to: u64, in_prefix: bool) -> usize {
        let mut read = rocksdb::ReadOptions::default();
        read.set_iterate_upper_bound(binary_key(to).to_vec());
        if in_prefix {
            read.set_prefix_same_as_start(true);
        }
        let mut it = self.db.raw_iterator_opt(read);
        it.seek(binary_key(from));
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().unwrap();
        n
    }

    fn int_property(&self, name: impl rocksdb::CStrLike) -> u64 {
        self.db.property_int_value(name).unwrap().unwrap()
    }
}

impl Store for Rocks {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.db.put(k, v).unwrap();
        self.user_bytes += (k.len() + v.len()) as u64;
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.db.get_pinned(k).unwrap().is_some()
    }
    fn scan(&mut self, from: u64, to: u64) -> usize {
        let Some(len) = self.prefix_len else {
            return self.scan_piece(from, to, false);
        };
        // The number's bits below the prefix: one piece per prefix the range meets.
        let low_bits = 8 * (16 - len) as u32;
        let mut n = 0;
        let mut at = from;
        while at < to {
            let next_prefix = ((at >> low_bits) + 1).checked_mul(1 << low_bits);
            let end = next_prefix.map_or(to, |p| p.min(to));
            n += self.scan_piece(at, end, true);
            at = end;
        }
        n
    }
    fn scan_counters(&self) -> Option<ScanCounters> {
        use rocksdb::statistics::Ticker;
        let ticker = |t| self.opts.get_ticker_count(t);
        // A seek's prefix bloom checks are counted apart from a Get's, by level kind.
        let filtered =
            ticker(Ticker::LastLevelSeekFiltered) + ticker(Ticker::NonLastLevelSeekFiltered);
        let matched =
            ticker(Ticker::LastLevelSeekFilterMatch) + ticker(Ticker::NonLastLevelSeekFilterMatch);
        Some(ScanCounters {
            checked: filtered + matched,
            ruled_out: filtered,
            blocks: ticker(Ticker::BlockCacheDataHit) + ticker(Ticker::BlockCacheDataMiss),
        })
    }
    fn stats_report(&self) -> Option<String> {
        self.db
            .property_value(rocksdb::properties::STATS)
            .ok()
            .flatten()
    }
    fn multi_get(&mut self, keys: &[[u8; 16]]) -> Vec<bool> {
        let cf = self
            .db
            .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .unwrap();
        self.db
            .batched_multi_get_cf(cf, keys, false)
            .into_iter()
            .map(|r| r.unwrap().is_some())
            .collect()
    }
    fn flush(&mut self) {
        self.db.flush().unwrap();
    }
    fn compact(&mut self) {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
    }
    fn settle(&mut self) -> bool {
        use rocksdb::properties::{COMPACTION_PENDING, NUM_RUNNING_COMPACTIONS};
        poll_until(|| {
            self.int_property(COMPACTION_PENDING) == 0
                && self.int_property(NUM_RUNNING_COMPACTIONS) == 0
        })
    }
    fn bloom(&self) -> Option<Bloom> {
        use rocksdb::statistics::Ticker;
        Some((
            self.opts.get_ticker_count(Ticker::BloomFilterUseful),
            self.opts.get_ticker_count(Ticker::BloomFilterFullPositive),
            self.opts
                .get_ticker_count(Ticker::BloomFilterFullTruePositive),
        ))
    }
    fn levels(&self) -> Option<Vec<usize>> {
        (0..ROCKS_LEVELS)
            .map(|l| {
                self.db
                    .property_int_value(rocksdb::properties::num_files_at_level(l))
                    .ok()?
                    .map(|v| v as usize)
            })
            .collect()
    }
    fn filter_bytes(&self) -> Option<u64> {
        // "...; filter block size=N; ..." summed over the live tables.
        let props = self
            .db
            .property_value(rocksdb::properties::AGGREGATED_TABLE_PROPERTIES)
            .ok()??;
        let rest = &props[props.find("filter block size")?..];
        let digits: String = rest[rest.find('=')? + 1..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
    fn write_stats(&self) -> Option<WriteStats> {
        use rocksdb::statistics::Ticker;
        let ticker = |t| self.opts.get_ticker_count(t);
        Some(WriteStats {
            table_bytes: ticker(Ticker::FlushWriteBytes) + ticker(Ticker::CompactWriteBytes),
            user_bytes: self.user_bytes,
            stall_micros: ticker(Ticker::StallMicros),
        })
    }
}

struct Fjall {
    // Dropped before the database, as a keyspace handle is in fjall's own examples.
    ks: fjall::Keyspace,
    db: fjall::Database,
}

impl Fjall {
    fn open(dir: &std::path::Path, shape: PeerShape) -> Self {
        use fjall::config::{
            BlockSizePolicy, BloomConstructionPolicy, FilterPolicy, FilterPolicyEntry,
        };
        let db = fjall::Database::builder(dir)
            .cache_size(64 << 20)
            .open()
            .unwrap();
        let mut opts = fjall::KeyspaceCreateOptions::default()
            .data_block_size_policy(BlockSizePolicy::all(4096))
            .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(10.0),
            )));
        if shape == PeerShape::Siftdb {
            // siftdb's memtable, table size, L0 trigger and level ratio; fjall derives L1's
            // budget from the table size and the L0 trigger.
            let leveled = fjall::compaction::Leveled::default()
                .with_table_target_size(2 << 20)
                .with_l0_threshold(4)
                .with_level_ratio_policy(vec![10.0]);
            opts = opts
                .max_memtable_size(4 << 20)
                .compaction_strategy(Arc::new(leveled));
        }
        let ks = db.keyspace("default", || opts).unwrap();
        Fjall { ks, db }
    }

    /// No flush queued or waiting and no compaction running. A compaction a flush has asked
    /// for but no worker has picked up yet is not visible; `settle` covers it by also waiting
    /// for the files per level to stay the same.
    fn idle(&self) -> bool {
        self.db.outstanding_flushes() == 0
            && self.ks.sealed_memtable_count() == 0
            && self.db.active_compactions() == 0
    }
}

impl Store for Fjall {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.ks.insert(k, v).unwrap();
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.ks.get(k).unwrap().is_some()
    }
    fn scan(&mut self, from: u64, to: u64) -> usize {
        let (lo, hi) = (binary_key(from), binary_key(to));
        let mut n = 0;
        for entry in self.ks.range(lo..hi) {
            entry.key().unwrap();
            n += 1;
        }
        n
    }
    fn multi_get(&mut self, keys: &[[u8; 16]]) -> Vec<bool> {
        // fjall 3.1 has no batched lookup.
        keys.iter().map(|k| self.get(k)).collect()
    }
    fn flush(&mut self) {
        self.db.persist(fjall::PersistMode::Buffer).unwrap();
        self.ks.rotate_memtable_and_wait().unwrap();
    }
    fn compact(&mut self) {
        self.ks.major_compact().unwrap();
    }
    fn settle(&mut self) -> bool {
        let mut last = None;
        let mut stable = 0;
        poll_until(|| {
            let files = self.levels();
            if !self.idle() || last != files {
                stable = 0;
            } else {
                stable += 1;
            }
            last = files;
            stable >= 4
        })
    }
    fn bloom(&self) -> Option<Bloom> {
        // `filter_queries` counts the checks that ruled the table out and those after which
        // the table did not hold the key; a check followed by a hit is not counted at all.
        let m = self.ks.metrics();
        let checks = m.filter_queries() as u64;
        let useful = m.io_skipped_by_filter() as u64;
        Some((useful, checks - useful, 0))
    }
    fn levels(&self) -> Option<Vec<usize>> {
        use fjall::AbstractTree;
        Some(
            (0..)
                .map_while(|l| self.ks.tree.level_table_count(l))
                .collect(),
        )
    }
    fn filter_bytes(&self) -> Option<u64> {
        use fjall::AbstractTree;
        Some(self.ks.tree.filter_size())
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreName {
    Siftdb,
    /// siftdb with Grafite range filters.
    SiftdbRange,
    Rocksdb,
    /// RocksDB with prefix blooms.
    RocksdbPrefix,
    Fjall,
}

impl StoreName {
    fn name(self) -> &'static str {
        match self {
            StoreName::Siftdb => "siftdb",
            StoreName::SiftdbRange => "siftdb-range",
            StoreName::Rocksdb => "rocksdb",
            StoreName::RocksdbPrefix => "rocksdb-prefix",
            StoreName::Fjall => "fjall",
        }
    }
}

/// Whose memtable, table and level sizes RocksDB and fjall use.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PeerShape {
    /// Their own defaults.
    Own,
    /// siftdb's defaults.
    Siftdb,
}

impl PeerShape {
    fn name(self) -> &'static str {
        match self {
            PeerShape::Own => "own",
            PeerShape::Siftdb => "siftdb",
        }
    }
}

/// The widest range `siftdb-range`'s filters answer: the widest short scan of the runs.
const RANGE_FILTER_MAX_RANGE: u64 = 1 << 16;

fn open(name: StoreName, dir: &std::path::Path, w: &Workload) -> Box<dyn Store> {
    let shape = w.shape;
    match name {
        StoreName::Siftdb | StoreName::SiftdbRange => {
            let filter = if w.siftdb_ribbon {
                siftdb::Filter::ribbon(10.0)
            } else {
                siftdb::Filter::full(10.0)
            };
            let mut opts = siftdb::Options::default()
                .filter(filter)
                .block_cache_bytes(64 << 20)
                .block_size(4096);
            if w.siftdb_monkey {
                opts = opts.filter_allocation(siftdb::FilterAllocation::Monkey);
            }
            if name == StoreName::SiftdbRange {
                opts = opts.range_filter(siftdb::RangeFilter::grafite(
                    w.range_filter_bits,
                    RANGE_FILTER_MAX_RANGE,
                ));
            }
            Box::new(Sift(siftdb::Db::open(dir, opts).unwrap()))
        }
        StoreName::Rocksdb => Box::new(Rocks::open(dir, shape, None)),
        StoreName::RocksdbPrefix => Box::new(Rocks::open(dir, shape, Some(w.rocksdb_prefix_len))),
        StoreName::Fjall => Box::new(Fjall::open(dir, shape)),
    }
}

fn rate(n: usize, start: Instant) -> f64 {
    n as f64 / start.elapsed().as_secs_f64()
}

#[derive(Clone, Copy)]
enum Kind {
    Present,
    Missing,
    Mixed,
}

/// A random key of `kind` and whether it is present: `2i` are present, `2i + 1` absent.
fn draw(rng: &mut StdRng, keys: u64, kind: Kind) -> (u64, bool) {
    let i = rng.gen_range(0..keys);
    let present = match kind {
        Kind::Present => true,
        Kind::Missing => false,
        Kind::Mixed => rng.gen_bool(0.5),
    };
    (if present { 2 * i } else { 2 * i + 1 }, present)
}

/// `reads` random gets of one kind; checks every answer; returns ops/s.
fn reads_phase(
    name: &str,
    db: &mut dyn Store,
    rng: &mut StdRng,
    keys: u64,
    reads: usize,
    kind: Kind,
) -> f64 {
    let start = Instant::now();
    for _ in 0..reads {
        let (n, present) = draw(rng, keys, kind);
        if db.get(&decimal_key(n)) != present {
            panic!("{name}: wrong answer for key {n}");
        }
    }
    rate(reads, start)
}

/// `w.reads` random lookups of one kind, `w.batch` keys per batched lookup (the last batch may
/// be smaller); checks every answer; returns keys looked up per second.
fn multi_get_phase(
    name: &str,
    db: &mut dyn Store,
    rng: &mut StdRng,
    w: Workload,
    kind: Kind,
) -> f64 {
    let (keys, reads, batch) = (w.keys, w.reads, w.batch);
    let mut numbers = Vec::with_capacity(batch);
    let mut batch_keys = Vec::with_capacity(batch);
    let start = Instant::now();
    let mut done = 0;
    while done < reads {
        let len = batch.min(reads - done);
        numbers.clear();
        batch_keys.clear();
        for _ in 0..len {
            let (n, present) = draw(rng, keys, kind);
            numbers.push((n, present));
            batch_keys.push(decimal_key(n));
        }
        let found = db.multi_get(&batch_keys);
        assert_eq!(found.len(), len, "{name}: one answer per key");
        for (&(n, present), found) in numbers.iter().zip(found) {
            if found != present {
                panic!("{name}: wrong batched answer for key {n}");
            }
        }
        done += len;
    }
    rate(reads, start)
}

/// The short scans of a run: their widths, and every present key's number, sorted (to draw
/// ranges that hold none).
struct ScanPlan {
    widths: Vec<u64>,
    present: Vec<u64>,
}

impl ScanPlan {
    fn new(widths: Vec<u64>, keys: u64) -> ScanPlan {
        let mut present: Vec<u64> = (0..keys).map(|i| scramble(2 * i)).collect();
        present.sort_unstable();
        ScanPlan { widths, present }
    }

    /// The first number of a range of `width` numbers holding no key: anywhere, or
    /// (`after_key`) just after a present key.
    fn draw_empty(&self, rng: &mut StdRng, width: u64, after_key: bool) -> u64 {
        loop {
            let from = if after_key {
                let x = self.present[rng.gen_range(0..self.present.len())];
                match x.checked_add(1) {
                    Some(from) => from,
                    None => continue,
                }
            } else {
                rng.gen_range(0..=u64::MAX - width)
            };
            let Some(to) = from.checked_add(width) else {
                continue;
            };
            let next = self.present.partition_point(|&x| x < from);
            if self.present.get(next).is_none_or(|&x| x >= to) {
                return from;
            }
        }
    }

    /// The phase names, `empty-after-` for ranges just after a key.
    fn phase_names(&self) -> Vec<String> {
        self.widths
            .iter()
            .flat_map(|w| [format!("empty-w{w}"), format!("empty-after-w{w}")])
            .collect()
    }
}

/// `reads` scans of `width` numbers holding no key (anywhere, or `after_key`); checks each finds
/// nothing; returns scans per second.
fn empty_scans_phase(
    name: &str,
    db: &mut dyn Store,
    rng: &mut StdRng,
    plan: &ScanPlan,
    (reads, width, after_key): (usize, u64, bool),
) -> f64 {
    let ranges: Vec<u64> = (0..reads)
        .map(|_| plan.draw_empty(rng, width, after_key))
        .collect();
    let start = Instant::now();
    for &from in &ranges {
        let found = db.scan(from, from + width);
        if found != 0 {
            panic!("{name}: {found} entries in the empty range from {from:#x}, width {width}");
        }
    }
    rate(reads, start)
}

/// What one store measured.
struct Outcome {
    /// ops/s per phase, in the order of `phases`.
    ops: Vec<f64>,
    /// Seconds the fill took.
    fill_secs: f64,
    /// Write counters at the end of the fill and once settled after it.
    writes_fill_end: Option<WriteStats>,
    writes_settled: Option<WriteStats>,
    /// With `--overwrite`: seconds the overwrite took, and the write counters it added by its
    /// end and once settled after it.
    overwrite: Option<Overwrite>,
    /// Bloom ticker deltas over readmissing.
    bloom: Option<Bloom>,
    /// Filter bytes after the reads.
    filter_bytes: Option<u64>,
    /// The scan counters of each short-scan phase.
    scan_counters: Vec<Option<ScanCounters>>,
}

impl Outcome {
    /// False positives over filter probes of absent keys during readmissing.
    fn fp_rate(&self) -> Option<f64> {
        let (useful, positive, true_positive) = self.bloom?;
        let false_positive = positive.saturating_sub(true_positive);
        let probes = useful + false_positive;
        (probes > 0).then(|| false_positive as f64 / probes as f64)
    }

    /// Seconds writers were stalled during the fill, and that as a percentage of the fill.
    fn stall(&self) -> Option<(f64, f64)> {
        let secs = self.writes_fill_end?.stall_micros as f64 / 1e6;
        Some((secs, secs / self.fill_secs * 100.0))
    }
}

/// What the overwrite phase measured: its seconds, and the write counters it added by its end
/// and once the store settled after it.
#[derive(Clone, Copy)]
struct Overwrite {
    secs: f64,
    end: Option<WriteStats>,
    settled: Option<WriteStats>,
}

impl Overwrite {
    /// Seconds writers were stalled during the overwrite, and that as a percentage of it.
    fn stall(&self) -> Option<(f64, f64)> {
        let secs = self.end?.stall_micros as f64 / 1e6;
        Some((secs, secs / self.secs * 100.0))
    }
}

/// Names of the phases run, in order.
fn phases(batch: usize, overwrite: bool, scans: Option<&ScanPlan>) -> Vec<String> {
    let mut phases = vec!["fillrandom"];
    if overwrite {
        phases.push("overwrite");
    }
    if let Some(plan) = scans {
        let mut phases: Vec<String> = phases.into_iter().map(String::from).collect();
        phases.extend(plan.phase_names());
        return phases;
    }
    phases.extend(["readrandom", "readmissing", "readmixed"]);
    if batch > 0 {
        phases.extend(["multiget-present", "multiget-missing"]);
    }
    phases.into_iter().map(String::from).collect()
}

fn settle(name: &str, db: &mut dyn Store) {
    let start = Instant::now();
    if !db.settle() {
        println!("{name}: WARNING compaction still pending after {SETTLE_LIMIT:?}; reading anyway");
    }
    let shape = match db.levels() {
        Some(files) => files
            .iter()
            .enumerate()
            .map(|(l, n)| format!("L{l} {n}"))
            .collect::<Vec<_>>()
            .join("  "),
        None => "n/a".to_string(),
    };
    println!(
        "{name:<14} settled in {:>6.2}s; files per level: {shape}",
        start.elapsed().as_secs_f64()
    );
}

/// The workload's sizes.
#[derive(Clone, Copy)]
struct Workload {
    keys: u64,
    reads: usize,
    batch: usize,
    compacted: bool,
    shape: PeerShape,
    print_stats: bool,
    /// The values' compression ratio, or `None` for the constant value.
    compression_ratio: Option<f64>,
    /// Put every key again, in a new random order, after the fill has settled.
    overwrite: bool,
    /// Bits per key of `siftdb-range`'s range filters.
    range_filter_bits: f64,
    /// The fixed prefix length of `rocksdb-prefix`'s prefix blooms.
    rocksdb_prefix_len: usize,
    /// siftdb's filter bits spread over the levels as Monkey derives, at the same memory.
    siftdb_monkey: bool,
    /// siftdb's filters are Ribbon filters of the same bits per key instead of blooms.
    siftdb_ribbon: bool,
}

/// Runs every phase on one store: the lookups, or with `scans` the short scans.
fn run(name: StoreName, w: Workload, scans: Option<&ScanPlan>) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(name, dir.path(), &w);
    let name = name.name();
    let mut rng = StdRng::seed_from_u64(42);
    let constant = [b'v'; 100];
    let mut values = w
        .compression_ratio
        .map(|ratio| ValueGenerator::new(ratio, constant.len(), 301));

    let mut order: Vec<u64> = (0..w.keys).collect();
    order.shuffle(&mut rng);
    let mut put_all = |db: &mut dyn Store, order: &[u64]| {
        let start = Instant::now();
        for &i in order {
            let value = match values.as_mut() {
                Some(g) => g.next(constant.len()),
                None => &constant,
            };
            let k = match scans {
                Some(_) => binary_key(scramble(2 * i)),
                None => decimal_key(2 * i),
            };
            db.put(&k, value);
        }
        start.elapsed().as_secs_f64()
    };
    let fill_secs = put_all(db.as_mut(), &order);
    let writes_fill_end = db.write_stats();
    db.flush();
    settle(name, db.as_mut());
    let writes_settled = db.write_stats();
    if w.print_stats {
        let report = db.stats_report().unwrap_or_else(|| "n/a".to_string());
        println!("{name} stats once settled after the fill:\n{report}");
    }
    // db_bench's overwrite: the same keys again, in another random order, into a tree that
    // already holds them all, so that every level below L0 is full and compactions merge into
    // the last level as they do in a store long in use.
    let overwrite = w.overwrite.then(|| {
        order.shuffle(&mut rng);
        let secs = put_all(db.as_mut(), &order);
        let end = db.write_stats();
        db.flush();
        settle(name, db.as_mut());
        let since = |s: Option<WriteStats>| Some(s?.since(&writes_settled?));
        let settled = since(db.write_stats());
        if w.print_stats {
            let report = db.stats_report().unwrap_or_else(|| "n/a".to_string());
            println!("{name} stats once settled after the overwrite:\n{report}");
        }
        Overwrite {
            secs,
            end: since(end),
            settled,
        }
    });
    if w.compacted {
        db.compact();
        settle(name, db.as_mut());
    }

    let (keys, reads) = (w.keys, w.reads);
    let fill = order.len() as f64 / fill_secs;
    if let Some(plan) = scans {
        // One untimed pass opens every table (and loads its filters).
        let warm = (reads, plan.widths[0], false);
        empty_scans_phase(name, db.as_mut(), &mut rng, plan, warm);
        let mut ops = vec![fill];
        ops.extend(overwrite.map(|o| order.len() as f64 / o.secs));
        let mut scan_counters = Vec::new();
        for &width in &plan.widths {
            for after_key in [false, true] {
                let before = db.scan_counters();
                let phase = (reads, width, after_key);
                ops.push(empty_scans_phase(name, db.as_mut(), &mut rng, plan, phase));
                let after = db.scan_counters();
                scan_counters.push(before.zip(after).map(|(b, a)| a.since(b)));
            }
        }
        return Outcome {
            ops,
            fill_secs,
            writes_fill_end,
            writes_settled,
            overwrite,
            bloom: None,
            filter_bytes: db.filter_bytes(),
            scan_counters,
        };
    }
    let present = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Present);
    let before = db.bloom();
    let missing = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Missing);
    let after = db.bloom();
    let mixed = reads_phase(name, db.as_mut(), &mut rng, keys, reads, Kind::Mixed);
    let mut ops = vec![fill];
    ops.extend(overwrite.map(|o| order.len() as f64 / o.secs));
    ops.extend([present, missing, mixed]);
    if w.batch > 0 {
        for kind in [Kind::Present, Kind::Missing] {
            ops.push(multi_get_phase(name, db.as_mut(), &mut rng, w, kind));
        }
    }
    let bloom = before
        .zip(after)
        .map(|(b, a)| (a.0 - b.0, a.1 - b.1, a.2 - b.2));
    Outcome {
        ops,
        fill_secs,
        writes_fill_end,
        writes_settled,
        overwrite,
        bloom,
        filter_bytes: db.filter_bytes(),
        scan_counters: Vec::new(),
    }
}

/// Point lookups on siftdb, RocksDB and fjall; see the module documentation.
#[derive(Parser)]
struct Args {
    /// Keys to insert.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Gets per read phase, and keys per batched-lookup phase.
    #[arg(long, default_value_t = 1_000_000)]
    reads: usize,
    /// Keys per batched lookup in the multiget phases; 0 leaves those phases out.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Fully compact each store before the reads.
    #[arg(long)]
    compacted: bool,
    /// Memtable, table and level sizes of RocksDB and fjall: siftdb's, or their own defaults.
    #[arg(long, value_enum, default_value = "siftdb")]
    peer_shape: PeerShape,
    /// Stores to run, in this order, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "siftdb,rocksdb,fjall"
    )]
    stores: Vec<StoreName>,
    /// Also print the results as one JSON line.
    #[arg(long)]
    json: bool,
    /// Print each store's own statistics report (siftdb.stats, rocksdb.stats) once it has
    /// settled after the fill.
    #[arg(long)]
    print_stats: bool,
    /// The share of each value that is random, as db_bench's `--compression_ratio`: values
    /// compress to about this ratio (1.0: not at all).
    #[arg(long, default_value_t = 0.5)]
    compression_ratio: f64,
    /// Write one repeated byte as every value instead (compresses about tenfold).
    #[arg(long)]
    constant_value: bool,
    /// After the fill has settled, put every key again in a new random order (db_bench's
    /// overwrite) and report that phase's writes on their own.
    #[arg(long)]
    overwrite: bool,
    /// Run short scans that find nothing, of these widths (comma-separated numbers), instead of
    /// the lookups; keys are then a fixed head and a 64-bit number.
    #[arg(long, value_delimiter = ',')]
    scan_widths: Vec<u64>,
    /// Bits per key of `siftdb-range`'s range filters (24: a 2^16-wide empty scan is a "maybe" in
    /// about 1.6 % of the tables asked).
    #[arg(long, default_value_t = 24.0)]
    range_filter_bits: f64,
    /// The fixed prefix length of `rocksdb-prefix`'s prefix blooms: 9 to 15 bytes of the 16-byte
    /// keys (in the short-scan runs, 12 is the head and the number's top 32 bits).
    #[arg(long, default_value_t = 12)]
    rocksdb_prefix_len: usize,
    /// Spread siftdb's filter memory (10 bits per key in all) over the levels as Monkey derives
    /// instead of uniformly.
    #[arg(long)]
    siftdb_monkey: bool,
    /// Give siftdb Ribbon filters of the same 10 bits per key (the same memory, fewer false
    /// positives) instead of its cache-local blooms.
    #[arg(long)]
    siftdb_ribbon: bool,
}

/// "n/a" for a figure a store does not expose, else the figure in `format`'s way.
fn or_na<T>(v: Option<T>, format: impl FnOnce(T) -> String) -> String {
    v.map_or("n/a".to_string(), format)
}

fn main() {
    let args = Args::parse();
    if args.keys == 0 {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--keys must be at least 1\n",
        )
        .exit();
    }
    let w = Workload {
        keys: args.keys,
        reads: args.reads,
        batch: args.batch,
        compacted: args.compacted,
        shape: args.peer_shape,
        print_stats: args.print_stats,
        compression_ratio: (!args.constant_value).then_some(args.compression_ratio),
        overwrite: args.overwrite,
        range_filter_bits: args.range_filter_bits,
        rocksdb_prefix_len: args.rocksdb_prefix_len,
        siftdb_monkey: args.siftdb_monkey,
        siftdb_ribbon: args.siftdb_ribbon,
    };
    if !(9..=15).contains(&args.rocksdb_prefix_len) {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--rocksdb-prefix-len must be from 9 to 15\n",
        )
        .exit();
    }
    if !(args.range_filter_bits.is_finite() && (3.0..=60.0).contains(&args.range_filter_bits)) {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--range-filter-bits must be from 3 to 60\n",
        )
        .exit();
    }
    // A scan meets at most two of rocksdb-prefix's prefixes, and is answered by siftdb-range's
    // filters.
    let widest = 1u64 << (8 * (16 - args.rocksdb_prefix_len)).min(16);
    if args.scan_widths.iter().any(|&x| x == 0 || x > widest) {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            format!("--scan-widths must be from 1 to {widest}\n"),
        )
        .exit();
    }
    let scans =
        (!args.scan_widths.is_empty()).then(|| ScanPlan::new(args.scan_widths.clone(), args.keys));
    if !(args.compression_ratio > 0.0 && args.compression_ratio <= 1.0) {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--compression-ratio must be above 0 and at most 1\n",
        )
        .exit();
    }
    let (keys, reads) = (w.keys, w.reads);
    let value_kind = match w.compression_ratio {
        Some(r) => format!("random values compressing to {r:.2}"),
        None => "a constant value".to_string(),
    };
    println!(
        "keys {keys} reads {reads} batch {} compacted {} peer-shape {} values: 100 B, {value_kind}",
        w.batch,
        w.compacted,
        w.shape.name()
    );
    if w.siftdb_monkey {
        println!("siftdb's filter memory spread over the levels as Monkey derives");
    }
    if w.siftdb_ribbon {
        println!("siftdb's filters: Ribbon, 10 bits/key");
    }
    if let Some(plan) = &scans {
        println!(
            "short scans of widths {:?} finding nothing; siftdb-range: {} bits/key; rocksdb-prefix: {}-byte prefix",
            plan.widths, w.range_filter_bits, w.rocksdb_prefix_len
        );
    }
    let mut results = Vec::new();
    for &name in &args.stores {
        results.push((name.name(), run(name, w, scans.as_ref())));
    }

    println!("\nwrites (w-amp: bytes of tables written by flushes and compactions / bytes put):");
    println!(
        "{:<14} {:>12} {:>14} {:>14} {:>9} {:>9}",
        "store", "fill µs/op", "w-amp fill end", "w-amp settled", "stall s", "stall %"
    );
    for (name, r) in &results {
        let us_per_op = r.fill_secs * 1e6 / keys as f64;
        let amp = |s: Option<WriteStats>| or_na(s, |s| format!("{:.2}", s.amplification()));
        let (stall_s, stall_pct) = match r.stall() {
            Some((s, pct)) => (format!("{s:.2}"), format!("{pct:.1}")),
            None => ("n/a".to_string(), "n/a".to_string()),
        };
        println!(
            "{name:<14} {us_per_op:>12.2} {:>14} {:>14} {stall_s:>9} {stall_pct:>9}",
            amp(r.writes_fill_end),
            amp(r.writes_settled)
        );
    }

    if w.overwrite {
        println!("\noverwrite (its own table bytes over its own bytes put, and its stalls):");
        println!(
            "{:<14} {:>12} {:>14} {:>14} {:>9} {:>9}",
            "store", "µs/op", "w-amp end", "w-amp settled", "stall s", "stall %"
        );
        for (name, r) in &results {
            let Some(o) = r.overwrite else { continue };
            let amp = |s: Option<WriteStats>| or_na(s, |s| format!("{:.2}", s.amplification()));
            let (stall_s, stall_pct) = match o.stall() {
                Some((s, pct)) => (format!("{s:.2}"), format!("{pct:.1}")),
                None => ("n/a".to_string(), "n/a".to_string()),
            };
            println!(
                "{name:<14} {:>12.2} {:>14} {:>14} {stall_s:>9} {stall_pct:>9}",
                o.secs * 1e6 / keys as f64,
                amp(o.end),
                amp(o.settled)
            );
        }
    }

    if scans.is_none() {
        print_bloom_tickers(&results, reads);
    }
    print_filter_sizes(&results, keys);
    let phases = phases(w.batch, w.overwrite, scans.as_ref());
    print_phases(&results, &phases, reads);

    if args.json {
        print_json(&results, &phases, w, scans.as_ref());
    }
}

fn print_bloom_tickers(results: &[(&str, Outcome)], reads: usize) {
    println!("\nbloom tickers during readmissing ({reads} gets of absent keys):");
    println!(
        "{:<14} {:>12} {:>14} {:>19} {:>10} {:>11}",
        "store", "useful", "full.positive", "full.true.positive", "fp-rate", "probes/get"
    );
    for (name, r) in results {
        match r.bloom {
            Some((u, p, tp)) => {
                let fp = or_na(r.fp_rate(), |f| format!("{:.3}%", f * 100.0));
                let probes = (u + p) as f64 / reads.max(1) as f64;
                println!("{name:<14} {u:>12} {p:>14} {tp:>19} {fp:>10} {probes:>11.2}");
            }
            None => println!(
                "{name:<14} {:>12} {:>14} {:>19} {:>10} {:>11}",
                "n/a", "n/a", "n/a", "n/a", "n/a"
            ),
        }
    }
}

fn print_filter_sizes(results: &[(&str, Outcome)], keys: u64) {
    println!("\nfilter size after the reads (target: 10 bits/key x {keys} keys):");
    for (name, r) in results {
        match r.filter_bytes {
            Some(b) => println!(
                "{name:<14} {b:>12} bytes {:>8.3} bits/key {:>+7.2}% vs target",
                b as f64 * 8.0 / keys as f64,
                (b as f64 * 8.0 / (10.0 * keys as f64) - 1.0) * 100.0
            ),
            None => println!("{name:<14} {:>12}", "n/a"),
        }
    }
}

/// The ops/s of `siftdb-range`, if run, else of `siftdb`: what the ratios compare to.
fn reference<'a>(results: &'a [(&str, Outcome)]) -> Option<&'a [f64]> {
    ["siftdb-range", "siftdb"]
        .iter()
        .find_map(|want| results.iter().find(|(n, _)| n == want))
        .map(|r| r.1.ops.as_slice())
}

/// ops/s per phase and store, the reference's ratio to each; for short scans also the filter
/// checks and the tables they ruled out per scan, and data blocks asked per scan.
fn print_phases(results: &[(&str, Outcome)], phases: &[String], reads: usize) {
    let sift = reference(results);
    println!(
        "\n{:<18} {:>14} {:>14} {:>10} {:>13} {:>15} {:>12}",
        "phase", "store", "ops/s", "siftdb/x", "checks/scan", "ruled out/scan", "blocks/scan"
    );
    for (p, phase) in phases.iter().enumerate() {
        for (name, r) in results {
            let ratio = sift
                .map(|s| format!("{:.2}", s[p] / r.ops[p]))
                .unwrap_or_default();
            let per_scan = |x: u64| format!("{:.3}", x as f64 / reads.max(1) as f64);
            let (checks, ruled_out, blocks) = match p.checked_sub(1).map(|i| r.scan_counters.get(i))
            {
                Some(Some(Some(c))) => (
                    per_scan(c.checked),
                    per_scan(c.ruled_out),
                    per_scan(c.blocks),
                ),
                Some(Some(None)) => ("n/a".to_string(), "n/a".to_string(), "n/a".to_string()),
                _ => Default::default(),
            };
            println!(
                "{phase:<18} {name:>14} {:>14.0} {ratio:>10} {checks:>13} {ruled_out:>15} {blocks:>12}",
                r.ops[p]
            );
        }
    }
}

/// The results as one JSON line.
fn print_json(
    results: &[(&str, Outcome)],
    phases: &[String],
    w: Workload,
    scans: Option<&ScanPlan>,
) {
    let (keys, reads) = (w.keys, w.reads);
    let stores: Vec<String> = results
            .iter()
            .map(|(name, r)| {
                let mut fields: Vec<String> = phases
                    .iter()
                    .zip(&r.ops)
                    .map(|(p, v)| format!("\"{p}\":{v:.0}"))
                    .collect();
                fields.push(format!(
                    "\"fill_us_per_op\":{:.3}",
                    r.fill_secs * 1e6 / keys as f64
                ));
                if let Some(s) = r.writes_fill_end {
                    fields.push(format!("\"wamp_fill_end\":{:.4}", s.amplification()));
                }
                if let Some(s) = r.writes_settled {
                    fields.push(format!("\"wamp_settled\":{:.4}", s.amplification()));
                }
                if let Some((secs, pct)) = r.stall() {
                    fields.push(format!("\"stall_s\":{secs:.3},\"stall_pct\":{pct:.2}"));
                }
                if let Some(o) = r.overwrite {
                    fields.push(format!(
                        "\"overwrite_us_per_op\":{:.3}",
                        o.secs * 1e6 / keys as f64
                    ));
                    if let Some(s) = o.end {
                        fields.push(format!("\"overwrite_wamp_end\":{:.4}", s.amplification()));
                    }
                    if let Some(s) = o.settled {
                        fields.push(format!(
                            "\"overwrite_wamp_settled\":{:.4}",
                            s.amplification()
                        ));
                    }
                    if let Some((secs, pct)) = o.stall() {
                        fields.push(format!(
                            "\"overwrite_stall_s\":{secs:.3},\"overwrite_stall_pct\":{pct:.2}"
                        ));
                    }
                }
                if let Some((u, p, tp)) = r.bloom {
                    fields.push(format!(
                        "\"bloom_useful\":{u},\"bloom_full_positive\":{p},\"bloom_full_true_positive\":{tp}"
                    ));
                }
                if let Some(fp) = r.fp_rate() {
                    fields.push(format!("\"fp_rate\":{fp}"));
                }
                if let Some(b) = r.filter_bytes {
                    fields.push(format!("\"filter_bytes\":{b}"));
                }
                for (phase, c) in phases.iter().skip(1).zip(&r.scan_counters) {
                    if let Some(c) = c {
                        fields.push(format!(
                            "\"{phase}_counters\":{{\"checked\":{},\"ruled_out\":{},\"blocks\":{}}}",
                            c.checked, c.ruled_out, c.blocks
                        ));
                    }
                }
                format!("\"{name}\":{{{}}}", fields.join(","))
            })
            .collect();
    let scan_fields = match scans {
        Some(plan) => format!(
            "\"scan_widths\":{:?},\"range_filter_bits\":{},\"rocksdb_prefix_len\":{},",
            plan.widths, w.range_filter_bits, w.rocksdb_prefix_len
        ),
        None => String::new(),
    };
    println!(
            "{{\"keys\":{keys},\"reads\":{reads},\"batch\":{},\"compacted\":{},\"peer_shape\":\"{}\",\"compression_ratio\":{},\"siftdb_monkey\":{},\"siftdb_ribbon\":{},{scan_fields}\"stores\":{{{}}}}}",
            w.batch,
            w.compacted,
            w.shape.name(),
            w.compression_ratio.map_or("null".to_string(), |r| r.to_string()),
            w.siftdb_monkey,
            w.siftdb_ribbon,
            stores.join(",")
        );
}
