//! Side-by-side point lookups and short scans: siftdb against RocksDB and fjall, one store after
//! another in one process.
//!
//! ```text
//! cargo run --release -p siftdb-compare -- \
//!     [--keys 1000000] [--reads 1000000] [--batch 32] [--compacted] \
//!     [--peer-shape siftdb|own] [--stores siftdb,rocksdb,fjall] [--json] [--print-stats] \
//!     [--compression-ratio 0.5] [--constant-value] [--overwrite] [--siftdb-monkey] [--siftdb-ribbon] \
//!     [--block-cache-mb 64] [--read-while-writing-secs 10 [--readers-while-writing 1]] \
//!     [--scan-widths 1,16,256,4096,65536 --stores siftdb-range,rocksdb-prefix,siftdb,rocksdb \
//!      --range-filter-bits 24 --key-format binary|tenants|strings --tenants 3 \
//!      --rocksdb-prefix-len 12]
//!     [--stores siftdb,siftdb-lazy,rocksdb,rocksdb-universal --runs-per-level 4]
//! ```
//!
//! This crate (`compare/`, a workspace member that is never published and that a plain `cargo`
//! command at the root does not build) pulls in fjall 3.1 (with its `metrics` feature, for the
//! filter counters) and the `rocksdb` crate; the latter builds RocksDB's C++ sources (needs clang
//! and libclang-dev; 15-25 minutes on 2 cores). CI does not build it. The stores are in
//! `engines/`, the timed phases in `phases.rs`, one store's run in `run.rs`, the printing in
//! `report.rs`.
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
//! **Reads while writing** (`--read-while-writing-secs S`, last): db_bench's `readwhilewriting`
//! on the settled store (`examples/common/read_while_writing.rs`, shared with the workload
//! runner): one writer overwrites random present keys at full speed (`put`, values of
//! `--compression-ratio` from their own seed) for S seconds while `--readers-while-writing` threads Get
//! present and absent keys in turn (every answer checked), and this thread counts L0's tables
//! every 10 ms. Reported: `readwhilewriting-present` and `readwhilewriting-missing`, the readers' Gets per second of each
//! kind (their Gets of that kind over their time in them, times the readers), and `readwhilewriting-puts`, the
//! writer's puts per second; beside them µs per Get and per put, L0's tables (mean, max), and
//! the µs a reader ran on a core per Get and the share of its time it did (not waiting for a
//! core; Linux only).
//! `--reads 0` leaves out the other read phases.
//!
//! Printed along the way: each store's files per level once settled, so a reader sees the
//! shapes that are read (with `--print-stats`, also its own report of levels and compactions:
//! `siftdb.stats`, `rocksdb.stats`). At the end:
//! - "writes": keys per second and µs per put during the fill; write amplification, bytes of tables written by
//!   flushes and compactions over the bytes of keys and values put (116 per put), taken twice:
//!   at the end of the fill (what the store wrote while the puts ran; the last memtable is not
//!   flushed yet) and once settled after the flush (before `--compacted`'s full compaction);
//!   and the time writers were stalled during the fill, in seconds and as a share of the fill.
//!   With `--overwrite`, the same for that phase on its own (its table bytes over its bytes put).
//! - "space once settled", after the fill (and after the overwrite): the bytes of every file in
//!   the store's directory (tables, WAL, manifest, logs), that over the bytes of keys and values
//!   the fill put, the bytes of the live tables as the store counts them (siftdb
//!   `siftdb.total-sst-bytes`, RocksDB `rocksdb.live-sst-files-size`, fjall `disk_space()`), and
//!   the sorted runs a Get meets: each L0 table and each non-empty level below (under universal
//!   compaction too, where each level below L0 holds one run), with L0's tables apart.
//!   The stores' directories are temporary ones, under `$TMPDIR`.
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
//! - siftdb: full filter 10 bits/key on every level, 4 KiB blocks, a block cache of
//!   `--block-cache-mb` (64 MiB), snappy (its default), otherwise defaults (4 MiB memtable, 2 MiB
//!   tables, L0 compaction at 4 tables, at 8 while writes flow; L1 budget 10 MiB, x10 per level,
//!   static level sizes, each level holding up to twice its budget while writes flow;
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
//! - siftdb-lazy: `siftdb` with lazy leveling,
//!   `CompactionStyle::LazyLeveled { runs_per_level: --runs-per-level }` (default 4): every
//!   level but the last tiered, holding up to that many sorted runs before they are merged into
//!   the next; the last level one run. Everything else as `siftdb`, `--siftdb-monkey` and
//!   `--siftdb-ribbon` included.
//! - RocksDB: block-based tables with a full (not block-based) bloom filter of 10 bits/key on
//!   every level, 4 KiB blocks, an LRU block cache of the same size, snappy, statistics on,
//!   compactions split between 2 threads as siftdb's are (`max_subcompactions`; its default is 1, and its
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
//! - rocksdb-universal: `rocksdb` with universal compaction
//!   (`set_compaction_style(DBCompactionStyle::Universal)`), RocksDB's tiered style, the
//!   counterpart of lazy leveling. Its universal options (`UniversalCompactOptions`, handed over
//!   with `set_universal_compaction_options`) are RocksDB's defaults: size ratio 1 %, merges of
//!   2 runs and more, size amplification up to 200 %, every output compressed, total-size stop
//!   style. What keeps the comparison fair is what it shares with `rocksdb`: the same memtable
//!   size (4 MiB under `--peer-shape siftdb`), filters, blocks, cache and codec, 2
//!   subcompactions, 7 levels (so that its older runs sit in levels below L0, one run a level,
//!   and the files per level show its runs), and its default
//!   `level0_file_num_compaction_trigger` of 4, which under universal compaction is the number
//!   of sorted runs that starts a compaction: siftdb's L0 trigger and `siftdb-lazy`'s default
//!   runs per level. Table and level sizes are not used by universal compaction. Settling:
//!   universal compaction reports a compaction pending whenever its runs reach that trigger,
//!   also when its picker finds no merge within its size ratios (it forces one only above the
//!   trigger), so it counts as settled once `rocksdb.compaction-pending` is `0`, or once no
//!   compaction runs and its files per level have stayed the same for a second.
//! - fjall 3.1: one keyspace; `filter_policy` a bloom filter of 10 bits/key on every level
//!   (fjall's default sizes L0's filters for a 0.01% FP rate, ~19 bits/key, and gives 10
//!   bits/key below), 4 KiB data blocks, the same cache; otherwise its defaults: data blocks
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
//! **Short scans** (`--scan-widths 1,16,256,4096,65536`): the same fill, but with the keys of
//! `--key-format`, as the workload runner makes them (`examples/common/key_formats.rs`):
//! `binary`, 16 bytes, a fixed 8-byte head (`siftkey:`) and a big-endian 64-bit number (key
//! `i`'s a bijective scramble of `2i`, so keys spread over all numbers); `tenants`, 12 bytes,
//! one of `--tenants` 4-byte tenant ids and an 8-byte id below 2^40; `strings`,
//! `user:<id>:<field>`. Then, instead of the lookups, for each width `w` two phases of `--reads`
//! scans each of `[a, a + w)` that hold no key, `a + w` being `a` with `w` added to its last 8
//! bytes (`w` numbers, ids, or values of a string's last bytes): `empty-w` (`a` anywhere) and
//! `empty-after-w` (`a` just after a present key, where the prefix of the range is the key's
//! own). Every scan is checked to return nothing. Before them, one untimed pass of `--reads`
//! scans of the first width opens every store's tables. Reported per phase: ops/s, filter checks
//! and tables they ruled out per scan, and data blocks asked of the block cache per scan. Two
//! more stores are meant for it:
//! - `siftdb-range`: `siftdb` with a Grafite range filter per table,
//!   `RangeFilter::grafite(--range-filter-bits, 2^16)` (24 bits/key by default); a scan is
//!   `Db::scan(a..a + w)`.
//! - `rocksdb-prefix`: `rocksdb` with a prefix extractor, a prefix bloom filter beside the
//!   whole-key one in the same 10 bits per entry: a fixed prefix of `--rocksdb-prefix-len` bytes
//!   (`binary`: 12, the head and the number's top 32 bits, so a range of up to 2^16 numbers
//!   crosses into a second prefix once in 65,536 or less; `tenants`: 9, the tenant and the id's
//!   bits above 2^24), or for `strings` the key up to its last `:` (`user:<id>:`, the prefix an
//!   application would give such keys). RocksDB has no range filter; a prefix bloom is what it
//!   offers for bounded short scans. A scan is an iterator with `iterate_upper_bound` at `a + w`
//!   and `prefix_same_as_start`, sought to `a`: the seek asks each table's prefix bloom for
//!   `a`'s prefix before reading its index. A range crossing a prefix boundary is scanned as one
//!   such iterator per prefix, as an application using prefix seeks must (the crate exposes no
//!   `auto_prefix_mode`). `rocksdb` itself scans with `iterate_upper_bound` alone (total order:
//!   the whole-key bloom is not asked by seeks).
//!
//! `siftdb/x` is then the ratio of `siftdb-range` (if run, else `siftdb`, else `siftdb-lazy`) to
//! each store.

mod engines;
#[path = "../../examples/common/key_formats.rs"]
mod key_formats;
mod phases;
// The workload runner's stop after a number of Gets is not used here.
#[allow(dead_code)]
#[path = "../../examples/common/read_while_writing.rs"]
mod read_while_writing;
mod report;
mod run;
#[path = "../../examples/common/sorted_runs.rs"]
mod sorted_runs;
#[path = "../../examples/common/value_generator.rs"]
mod value_generator;

use clap::{Parser, ValueEnum};

use engines::{PeerShape, Prefix, StoreName};
use key_formats::Keys;
use phases::ScanPlan;
use report::{
    print_bloom_tickers, print_filter_sizes, print_json, print_phases, print_read_while_writing,
    print_space, print_writes,
};
use run::{phases, run, Workload};

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
    /// the lookups, over keys of `--key-format`.
    #[arg(long, value_delimiter = ',')]
    scan_widths: Vec<u64>,
    /// The keys of the short-scan runs: a fixed head and a 64-bit number (16 bytes), tenants and
    /// ids (12 bytes), or `user:<id>:<field>` strings.
    #[arg(long, value_enum, default_value = "binary")]
    key_format: KeyFormatArg,
    /// Tenants of `--key-format tenants`.
    #[arg(long, default_value_t = 3)]
    tenants: u64,
    /// MiB of every store's block cache.
    #[arg(long, default_value_t = 64)]
    block_cache_mb: usize,
    /// Bits per key of `siftdb-range`'s range filters (24: a 2^16-wide empty scan is a "maybe" in
    /// about 1.6 % of the tables asked).
    #[arg(long, default_value_t = 24.0)]
    range_filter_bits: f64,
    /// The fixed prefix length of `rocksdb-prefix`'s prefix blooms, at least 1 and less than the
    /// key length (binary keys: 12 by default, the head and the number's top 32 bits; tenants:
    /// 9, the tenant and the id's bits above 2^24); `strings` keys take theirs up to the last
    /// `:` instead.
    #[arg(long)]
    rocksdb_prefix_len: Option<usize>,
    /// Spread siftdb's filter memory (10 bits per key in all) over the levels as Monkey derives
    /// instead of uniformly.
    #[arg(long)]
    siftdb_monkey: bool,
    /// Give siftdb Ribbon filters of the same 10 bits per key (the same memory, fewer false
    /// positives) instead of its cache-local blooms.
    #[arg(long)]
    siftdb_ribbon: bool,
    /// Sorted runs per tiered level of `siftdb-lazy`'s lazy leveling (at least 2).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..))]
    runs_per_level: u16,
    /// Seconds of the read-while-writing phase, run last (0: not run).
    #[arg(long, default_value_t = 0.0)]
    read_while_writing_secs: f64,
    /// Reader threads of the read-while-writing phase.
    #[arg(long, default_value_t = 1)]
    readers_while_writing: usize,
}

/// The key formats of the short-scan runs.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum KeyFormatArg {
    Binary,
    Tenants,
    Strings,
}

impl KeyFormatArg {
    pub(crate) fn name(self) -> &'static str {
        match self {
            KeyFormatArg::Binary => "binary",
            KeyFormatArg::Tenants => "tenants",
            KeyFormatArg::Strings => "strings",
        }
    }
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
    // The keys of the short-scan runs, their length (for fixed ones), and rocksdb-prefix's
    // prefixes.
    let (scan_keys, key_len, default_prefix) = match args.key_format {
        KeyFormatArg::Binary => (Keys::binary(16), Some(16), 12),
        KeyFormatArg::Tenants => (Keys::tenants(12, args.tenants), Some(12), 9),
        KeyFormatArg::Strings => (Keys::strings(), None, 0),
    };
    let rocksdb_prefix = match key_len {
        Some(len) => {
            let prefix_len = args.rocksdb_prefix_len.unwrap_or(default_prefix);
            if prefix_len == 0 || prefix_len >= len {
                clap::Error::raw(
                    clap::error::ErrorKind::InvalidValue,
                    format!("--rocksdb-prefix-len must be from 1 to {}\n", len - 1),
                )
                .exit();
            }
            Prefix::Fixed(prefix_len)
        }
        None => Prefix::UpToLastColon,
    };
    let w = Workload {
        keys: args.keys,
        reads: args.reads,
        batch: args.batch,
        compacted: args.compacted,
        shape: args.peer_shape,
        print_stats: args.print_stats,
        compression_ratio: (!args.constant_value).then_some(args.compression_ratio),
        overwrite: args.overwrite,
        block_cache_bytes: args.block_cache_mb << 20,
        range_filter_bits: args.range_filter_bits,
        rocksdb_prefix,
        siftdb_monkey: args.siftdb_monkey,
        siftdb_ribbon: args.siftdb_ribbon,
        runs_per_level: usize::from(args.runs_per_level),
        read_while_writing_secs: args.read_while_writing_secs,
        readers_while_writing: args.readers_while_writing,
    };
    let read_while_writing_ok = args.read_while_writing_secs == 0.0
        || (args.read_while_writing_secs.is_finite()
            && args.read_while_writing_secs > 0.0
            && args.readers_while_writing > 0
            && !args.constant_value
            && args.scan_widths.is_empty());
    if !read_while_writing_ok {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--read-while-writing-secs takes seconds above 0, --readers-while-writing at least 1, \
             random values and no --scan-widths\n",
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
    // A scan meets at most two of rocksdb-prefix's fixed prefixes, and is answered by
    // siftdb-range's filters.
    let widest = match (key_len, rocksdb_prefix) {
        (Some(len), Prefix::Fixed(p)) => 1u64 << (8 * (len - p)).min(16),
        _ => 1 << 16,
    };
    if args.scan_widths.iter().any(|&x| x == 0 || x > widest) {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            format!("--scan-widths must be from 1 to {widest}\n"),
        )
        .exit();
    }
    let scans = (!args.scan_widths.is_empty())
        .then(|| ScanPlan::new(args.scan_widths.clone(), scan_keys, args.keys));
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
    if args.stores.contains(&StoreName::SiftdbLazy) {
        println!(
            "siftdb-lazy: lazy leveling, {} sorted runs per tiered level",
            w.runs_per_level
        );
    }
    if let Some(plan) = &scans {
        println!(
            "short scans of widths {:?} finding nothing, {} keys; siftdb-range: {} bits/key; rocksdb-prefix: {}",
            plan.widths,
            args.key_format.name(),
            w.range_filter_bits,
            w.rocksdb_prefix.describe()
        );
    }
    let mut results = Vec::new();
    for &name in &args.stores {
        results.push((name.name(), run(name, w, scans.as_ref())));
    }

    print_writes(&results, keys, w.overwrite);
    print_space(&results);

    if scans.is_none() && reads > 0 {
        print_bloom_tickers(&results, reads);
    }
    print_filter_sizes(&results, keys);
    if w.read_while_writing_secs > 0.0 {
        print_read_while_writing(&results, w);
    }
    let phases = phases(&w, scans.as_ref());
    print_phases(&results, &phases, reads);

    if args.json {
        print_json(&results, &phases, w, scans.as_ref(), args.key_format);
    }
}
