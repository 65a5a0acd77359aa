//! Range deletes side by side: one `delete_range` against per-key deletes of the same keys, on
//! siftdb and on RocksDB (its `DeleteRange`), and what reads cost before and after compaction.
//!
//! ```text
//! cargo run --release -p siftdb-compare --bin delete_range -- \
//!     [--keys 10000000] [--delete-fraction 0.1] [--reads 100000] [--rounds 3] \
//!     [--compression-ratio 0.5] [--stores siftdb,rocksdb]
//! ```
//!
//! Each store is filled once with `--keys` keys `0..N` (16-byte zero-padded decimals) in random
//! order, 100-byte values as db_bench makes them (random bytes that compress to
//! `--compression-ratio`, default 0.5; the same values for every store), WAL on, no fsync; then
//! flushed, and left until no compaction is pending. From that store a checkpoint is taken per
//! round and method (hard links: every trial starts from the same tables), and the store is
//! closed. Then `--rounds` rounds; in each, both methods run on each store, the order of the
//! methods and of the stores swapped every round. A trial opens a fresh checkpoint, waits until it
//! is settled, and deletes the contiguous `--delete-fraction` of the key space in the middle,
//! keys `lo..hi`:
//!
//! - `range`: one range delete of `lo..hi` (siftdb: `Db::delete_range`; RocksDB: a
//!   `WriteBatch::delete_range` written with `DB::write`, which is what `DB::DeleteRange` does).
//! - `per-key`: a delete of every key of `lo..hi`, in key order, 1000 per write batch.
//!
//! Measured: the time the deletes take to return, and the bytes they appended to the WAL
//! (siftdb: its `wal.bytes` ticker; RocksDB: its `rocksdb.wal.bytes` ticker, the bytes it wrote to
//! WAL files; both tickers' deltas over the deletes). Then reads in three states:
//!
//! - `written`: right after the deletes returned, nothing waited for (the range tombstone sits in
//!   the memtable; per-key deletes have filled several memtables, and the flushes and compactions
//!   they set off may still run during these reads).
//! - `settled`: after `flush` and waiting until no compaction is pending (the time this takes is
//!   reported as "settle s"): every delete is in a table, no compaction was asked for.
//! - `compacted`: after a manual compaction of the deleted range (siftdb: `Db::compact_range`;
//!   RocksDB: `compact_range(lo, hi)`); its time is reported, and the bytes of live tables before
//!   and after it.
//!
//! The reads of each state, every answer checked (a wrong one panics):
//! - `scan ms`: a scan bounded to `lo..hi`, which must be empty (siftdb: `scan(lo..hi)`;
//!   RocksDB: an iterator with `iterate_upper_bound = hi` seeked to `lo`); the median of 3.
//! - `seek ms`: an unbounded scan from `lo`, whose first key must be `hi`; the median of 3.
//! - `get del µs`: `--reads` Gets of random keys of `lo..hi`, all absent (RocksDB: `get_pinned`).
//! - `get live µs`: `--reads` Gets of random keys outside it, all present.
//!
//! Figures are the medians over the rounds. Settings as the side-by-side lookups (`compare`'s
//! main binary) with `--peer-shape siftdb`: full bloom filters of 10 bits/key on every level,
//! 4 KiB blocks, 64 MiB block cache, snappy; siftdb otherwise at its defaults (4 MiB memtable,
//! 2 MiB tables, L1 10 MiB, x10 per level); RocksDB with the same memtable, table and level sizes
//! (static level sizes), compactions split between 2 threads, statistics on. fjall 3.1 is not
//! measured: it has no range delete.

#[path = "../../../examples/common/value_generator.rs"]
mod value_generator;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use value_generator::ValueGenerator;

/// `n` as a 16-byte zero-padded decimal.
fn key(mut n: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    for d in k.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

const VALUE_BYTES: usize = 100;
/// Keys per write batch of the per-key deletes.
const DELETE_BATCH: u64 = 1000;
/// Scans per state; their median is reported.
const SCANS: usize = 3;
/// How long a store may take to settle before the run goes on with a warning.
const SETTLE_LIMIT: Duration = Duration::from_secs(600);
const POLL: Duration = Duration::from_millis(50);

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

/// One store under test: the operations the harness times or inspects.
trait Store {
    fn put(&mut self, k: &[u8], v: &[u8]);
    /// Deletes `lo..hi` with one range delete.
    fn delete_range(&mut self, lo: &[u8], hi: &[u8]);
    /// Deletes `keys` in one write batch.
    fn delete_batch(&mut self, keys: &[[u8; 16]]);
    fn get(&mut self, k: &[u8]) -> bool;
    /// Whether no key lies in `lo..hi`, by a scan bounded to it.
    fn range_is_empty(&mut self, lo: &[u8], hi: &[u8]) -> bool;
    /// The first key at or after `lo`, by an unbounded scan.
    fn first_from(&mut self, lo: &[u8]) -> Option<Vec<u8>>;
    /// Bytes appended to the WAL so far.
    fn wal_bytes(&self) -> u64;
    /// Bytes of the live tables.
    fn table_bytes(&self) -> u64;
    /// Writes the memtable out as tables and waits for that.
    fn flush(&mut self);
    /// Polls until no compaction is pending or running; returns false on timeout.
    fn settle(&mut self) -> bool;
    /// The manual compaction after a delete of `lo..hi`; waits until done.
    fn compact(&mut self, lo: &[u8], hi: &[u8]);
    /// Writes an openable copy of the store into `dir` (which must not exist).
    fn checkpoint(&self, dir: &Path);
}

struct Sift(siftdb::Db);

impl Sift {
    fn open(dir: &Path) -> Self {
        let opts = siftdb::Options::default()
            .filter(siftdb::Filter::full(10.0))
            .block_cache_bytes(64 << 20)
            .block_size(4096);
        Sift(siftdb::Db::open(dir, opts).unwrap())
    }
}

impl Store for Sift {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.0.put(k, v).unwrap();
    }
    fn delete_range(&mut self, lo: &[u8], hi: &[u8]) {
        self.0.delete_range(lo..hi).unwrap();
    }
    fn delete_batch(&mut self, keys: &[[u8; 16]]) {
        let mut batch = siftdb::WriteBatch::with_capacity(keys.len() * 24);
        for k in keys {
            batch.delete(k);
        }
        self.0.write(batch).unwrap();
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.0.get(k).unwrap().is_some()
    }
    fn range_is_empty(&mut self, lo: &[u8], hi: &[u8]) -> bool {
        self.0.scan(lo..hi).next().transpose().unwrap().is_none()
    }
    fn first_from(&mut self, lo: &[u8]) -> Option<Vec<u8>> {
        let first = self.0.scan(lo..).next().transpose().unwrap();
        first.map(|(k, _)| k)
    }
    fn wal_bytes(&self) -> u64 {
        self.0.statistics().ticker(siftdb::Ticker::WalBytes)
    }
    fn table_bytes(&self) -> u64 {
        let bytes = self.0.property("siftdb.total-sst-bytes").unwrap();
        bytes.parse().unwrap()
    }
    fn flush(&mut self) {
        self.0.flush().unwrap();
    }
    fn settle(&mut self) -> bool {
        poll_until(|| self.0.property("siftdb.compaction-pending").as_deref() == Some("0"))
    }
    fn compact(&mut self, lo: &[u8], hi: &[u8]) {
        self.0.compact_range(lo..hi).unwrap();
    }
    fn checkpoint(&self, dir: &Path) {
        self.0.checkpoint(dir).unwrap();
    }
}

struct Rocks {
    // Dropped before `opts`, which holds the statistics the tickers are read from.
    db: rocksdb::DB,
    opts: rocksdb::Options,
}

impl Rocks {
    /// The options of `compare`'s main binary with `--peer-shape siftdb`.
    fn open(dir: &Path) -> Self {
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        table.set_block_size(4096);
        table.set_block_cache(&rocksdb::Cache::new_lru_cache(64 << 20));
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        opts.set_compression_type(rocksdb::DBCompressionType::Snappy);
        opts.set_write_buffer_size(4 << 20);
        opts.set_target_file_size_base(2 << 20);
        opts.set_max_bytes_for_level_base(10 << 20);
        opts.set_level_compaction_dynamic_level_bytes(false);
        opts.set_num_levels(7);
        opts.set_max_subcompactions(2);
        opts.enable_statistics();
        let db = rocksdb::DB::open(&opts, dir).unwrap();
        Rocks { db, opts }
    }

    fn int_property(&self, name: &rocksdb::properties::PropName) -> u64 {
        self.db.property_int_value(name).unwrap().unwrap()
    }
}

impl Store for Rocks {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.db.put(k, v).unwrap();
    }
    fn delete_range(&mut self, lo: &[u8], hi: &[u8]) {
        let mut batch = rocksdb::WriteBatch::default();
        batch.delete_range(lo, hi);
        self.db.write(batch).unwrap();
    }
    fn delete_batch(&mut self, keys: &[[u8; 16]]) {
        let mut batch = rocksdb::WriteBatch::default();
        for k in keys {
            batch.delete(k);
        }
        self.db.write(batch).unwrap();
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.db.get_pinned(k).unwrap().is_some()
    }
    fn range_is_empty(&mut self, lo: &[u8], hi: &[u8]) -> bool {
        let mut read = rocksdb::ReadOptions::default();
        read.set_iterate_upper_bound(hi);
        let mut it = self.db.raw_iterator_opt(read);
        it.seek(lo);
        let empty = !it.valid();
        it.status().unwrap();
        empty
    }
    fn first_from(&mut self, lo: &[u8]) -> Option<Vec<u8>> {
        let mut it = self.db.raw_iterator();
        it.seek(lo);
        it.status().unwrap();
        it.key().map(<[u8]>::to_vec)
    }
    fn wal_bytes(&self) -> u64 {
        self.opts
            .get_ticker_count(rocksdb::statistics::Ticker::WalFileBytes)
    }
    fn table_bytes(&self) -> u64 {
        self.int_property(rocksdb::properties::LIVE_SST_FILES_SIZE)
    }
    fn flush(&mut self) {
        self.db.flush().unwrap();
    }
    fn settle(&mut self) -> bool {
        use rocksdb::properties::{
            COMPACTION_PENDING, MEM_TABLE_FLUSH_PENDING, NUM_RUNNING_COMPACTIONS,
            NUM_RUNNING_FLUSHES,
        };
        poll_until(|| {
            [
                MEM_TABLE_FLUSH_PENDING,
                NUM_RUNNING_FLUSHES,
                COMPACTION_PENDING,
                NUM_RUNNING_COMPACTIONS,
            ]
            .iter()
            .all(|p| self.int_property(p) == 0)
        })
    }
    fn compact(&mut self, lo: &[u8], hi: &[u8]) {
        self.db.compact_range(Some(lo), Some(hi));
    }
    fn checkpoint(&self, dir: &Path) {
        rocksdb::checkpoint::Checkpoint::new(&self.db)
            .unwrap()
            .create_checkpoint(dir)
            .unwrap();
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreName {
    Siftdb,
    Rocksdb,
}

impl StoreName {
    fn name(self) -> &'static str {
        match self {
            StoreName::Siftdb => "siftdb",
            StoreName::Rocksdb => "rocksdb",
        }
    }

    fn open(self, dir: &Path) -> Box<dyn Store> {
        match self {
            StoreName::Siftdb => Box::new(Sift::open(dir)),
            StoreName::Rocksdb => Box::new(Rocks::open(dir)),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Range,
    PerKey,
}

impl Method {
    const ALL: [Method; 2] = [Method::Range, Method::PerKey];

    fn name(self) -> &'static str {
        match self {
            Method::Range => "range",
            Method::PerKey => "per-key",
        }
    }
}

const STATES: [&str; 3] = ["written", "settled", "compacted"];

/// The reads of one state.
#[derive(Clone, Copy, Default)]
struct Reads {
    scan_ms: f64,
    seek_ms: f64,
    get_deleted_us: f64,
    get_live_us: f64,
}

/// What one trial (a store, a method, a round) measured.
#[derive(Clone, Copy, Default)]
struct Trial {
    write_secs: f64,
    wal_bytes: u64,
    settle_secs: f64,
    compact_secs: f64,
    tables_before: u64,
    tables_after: u64,
    reads: [Reads; 3],
}

/// The key space and the deleted part of it.
#[derive(Clone, Copy)]
struct Layout {
    keys: u64,
    lo: u64,
    hi: u64,
    reads: usize,
}

impl Layout {
    fn deleted(&self) -> u64 {
        self.hi - self.lo
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn millis(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// The scans and Gets of one state; checks every answer.
fn reads(name: &str, db: &mut dyn Store, l: Layout, rng: &mut StdRng) -> Reads {
    let (lo, hi) = (key(l.lo), key(l.hi));
    let mut scans = Vec::with_capacity(SCANS);
    let mut seeks = Vec::with_capacity(SCANS);
    for _ in 0..SCANS {
        let start = Instant::now();
        let empty = db.range_is_empty(&lo, &hi);
        scans.push(millis(start));
        assert!(empty, "{name}: a key left in the deleted range");
        let start = Instant::now();
        let first = db.first_from(&lo);
        seeks.push(millis(start));
        let expected = (l.hi < l.keys).then(|| hi.to_vec());
        assert_eq!(first, expected, "{name}: wrong first key after the range");
    }
    let start = Instant::now();
    for _ in 0..l.reads {
        let n = rng.gen_range(l.lo..l.hi);
        if db.get(&key(n)) {
            panic!("{name}: deleted key {n} found");
        }
    }
    let get_deleted_us = millis(start) * 1e3 / l.reads as f64;
    let live = l.keys - l.deleted();
    let start = Instant::now();
    for _ in 0..l.reads {
        let mut n = rng.gen_range(0..live);
        if n >= l.lo {
            n += l.deleted();
        }
        if !db.get(&key(n)) {
            panic!("{name}: live key {n} missing");
        }
    }
    let get_live_us = millis(start) * 1e3 / l.reads as f64;
    Reads {
        scan_ms: median(scans),
        seek_ms: median(seeks),
        get_deleted_us,
        get_live_us,
    }
}

/// Opens the checkpoint in `dir`, deletes `lo..hi` with `method`, and reads in each state.
fn trial(store: StoreName, method: Method, dir: &Path, l: Layout, seed: u64) -> Trial {
    let name = format!("{} {}", store.name(), method.name());
    let mut db = store.open(dir);
    if !db.settle() {
        println!("{name}: WARNING compaction still pending after {SETTLE_LIMIT:?}");
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = Trial::default();

    let wal_before = db.wal_bytes();
    let start = Instant::now();
    match method {
        Method::Range => db.delete_range(&key(l.lo), &key(l.hi)),
        Method::PerKey => {
            let mut batch = Vec::with_capacity(DELETE_BATCH as usize);
            let mut n = l.lo;
            while n < l.hi {
                batch.clear();
                batch.extend((n..l.hi.min(n + DELETE_BATCH)).map(key));
                db.delete_batch(&batch);
                n += DELETE_BATCH;
            }
        }
    }
    t.write_secs = start.elapsed().as_secs_f64();
    t.wal_bytes = db.wal_bytes() - wal_before;
    t.reads[0] = reads(&name, db.as_mut(), l, &mut rng);

    let start = Instant::now();
    db.flush();
    if !db.settle() {
        println!("{name}: WARNING compaction still pending after {SETTLE_LIMIT:?}");
    }
    t.settle_secs = start.elapsed().as_secs_f64();
    t.reads[1] = reads(&name, db.as_mut(), l, &mut rng);

    t.tables_before = db.table_bytes();
    let start = Instant::now();
    db.compact(&key(l.lo), &key(l.hi));
    t.compact_secs = start.elapsed().as_secs_f64();
    if !db.settle() {
        println!("{name}: WARNING compaction still pending after {SETTLE_LIMIT:?}");
    }
    t.tables_after = db.table_bytes();
    t.reads[2] = reads(&name, db.as_mut(), l, &mut rng);
    t
}

/// Fills a store with keys `0..keys` in random order, flushes it, waits for it to settle, and
/// takes `copies` checkpoints of it; returns their directories.
fn prepare(store: StoreName, root: &Path, keys: u64, ratio: f64, copies: usize) -> Vec<PathBuf> {
    let origin = root.join("origin");
    let mut db = store.open(&origin);
    let mut order: Vec<u64> = (0..keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(42));
    let mut values = ValueGenerator::new(ratio, VALUE_BYTES, 301);
    let start = Instant::now();
    for &n in &order {
        db.put(&key(n), values.next(VALUE_BYTES));
    }
    let fill_secs = start.elapsed().as_secs_f64();
    db.flush();
    if !db.settle() {
        println!(
            "{}: WARNING compaction still pending after {SETTLE_LIMIT:?}",
            store.name()
        );
    }
    println!(
        "{:<8} filled in {fill_secs:.1} s, settled after {:.1} s, {:.1} MiB of tables",
        store.name(),
        start.elapsed().as_secs_f64() - fill_secs,
        db.table_bytes() as f64 / (1 << 20) as f64
    );
    let dirs: Vec<PathBuf> = (0..copies)
        .map(|i| root.join(format!("copy-{i}")))
        .collect();
    for dir in &dirs {
        db.checkpoint(dir);
    }
    drop(db);
    std::fs::remove_dir_all(&origin).unwrap();
    dirs
}

/// Range deletes against per-key deletes, siftdb against RocksDB; see the module documentation.
#[derive(Parser)]
struct Args {
    /// Keys each store holds before the deletes.
    #[arg(long, default_value_t = 10_000_000)]
    keys: u64,
    /// The share of the key space deleted, one contiguous range in the middle.
    #[arg(long, default_value_t = 0.1)]
    delete_fraction: f64,
    /// Gets of deleted keys, and of live keys, per state.
    #[arg(long, default_value_t = 100_000)]
    reads: usize,
    /// Rounds; each runs both methods on every store.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The share of each value that is random, as db_bench's `--compression_ratio`: values
    /// compress to about this ratio (1.0: not at all).
    #[arg(long, default_value_t = 0.5)]
    compression_ratio: f64,
    /// Stores to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "siftdb,rocksdb"
    )]
    stores: Vec<StoreName>,
}

fn invalid(message: &str) -> ! {
    clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{message}\n")).exit()
}

fn main() {
    let args = Args::parse();
    if !(args.compression_ratio > 0.0 && args.compression_ratio <= 1.0) {
        invalid("--compression-ratio must be above 0 and at most 1");
    }
    if !(args.delete_fraction > 0.0 && args.delete_fraction < 1.0) {
        invalid("--delete-fraction must be above 0 and below 1");
    }
    if args.rounds == 0 || args.reads == 0 || args.stores.is_empty() {
        invalid("--rounds, --reads and --stores must not be 0 or empty");
    }
    let deleted = (args.keys as f64 * args.delete_fraction).round() as u64;
    if deleted == 0 || deleted >= args.keys {
        invalid("--keys x --delete-fraction must leave some keys deleted and some live");
    }
    let lo = (args.keys - deleted) / 2;
    let l = Layout {
        keys: args.keys,
        lo,
        hi: lo + deleted,
        reads: args.reads,
    };
    println!(
        "command: {}",
        std::env::args().collect::<Vec<_>>().join(" ")
    );
    println!(
        "keys {} (16 B), values 100 B of db_bench's kind compressing to {:.2}; deleted keys {}..{} \
         ({deleted}); rounds {}; {} Gets per kind and state",
        l.keys, args.compression_ratio, l.lo, l.hi, args.rounds, l.reads
    );

    let root = tempfile::tempdir().unwrap();
    let copies = args.rounds * Method::ALL.len();
    let dirs: Vec<Vec<PathBuf>> = args
        .stores
        .iter()
        .map(|&s| {
            let dir = root.path().join(s.name());
            prepare(s, &dir, l.keys, args.compression_ratio, copies)
        })
        .collect();

    // results[store][method]: one trial per round.
    let mut results = vec![vec![Vec::new(); Method::ALL.len()]; args.stores.len()];
    for round in 0..args.rounds {
        let mut methods: Vec<usize> = (0..Method::ALL.len()).collect();
        let mut stores: Vec<usize> = (0..args.stores.len()).collect();
        if round % 2 == 1 {
            methods.reverse();
            stores.reverse();
        }
        for &m in &methods {
            for &s in &stores {
                let (store, method) = (args.stores[s], Method::ALL[m]);
                let dir = &dirs[s][round * Method::ALL.len() + m];
                let t = trial(store, method, dir, l, 1000 * round as u64 + m as u64);
                std::fs::remove_dir_all(dir).unwrap();
                println!(
                    "round {} {:<8} {:<8} write {:>9.3} ms, WAL {:>10} B, settle {:>6.2} s, \
                     compact {:>6.2} s",
                    round + 1,
                    store.name(),
                    method.name(),
                    t.write_secs * 1e3,
                    t.wal_bytes,
                    t.settle_secs,
                    t.compact_secs
                );
                results[s][m].push(t);
            }
        }
    }

    println!(
        "\nwrites and compaction (medians of {} rounds; both compact the deleted range):",
        args.rounds
    );
    println!(
        "{:<8} {:<8} {:>11} {:>12} {:>9} {:>10} {:>14} {:>14}",
        "store",
        "method",
        "write ms",
        "WAL bytes",
        "settle s",
        "compact s",
        "MiB before",
        "MiB after"
    );
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    for (s, store) in args.stores.iter().enumerate() {
        for (m, method) in Method::ALL.iter().enumerate() {
            let trials = &results[s][m];
            let med = |f: &dyn Fn(&Trial) -> f64| median(trials.iter().map(f).collect());
            println!(
                "{:<8} {:<8} {:>11.3} {:>12.0} {:>9.2} {:>10.2} {:>14.1} {:>14.1}",
                store.name(),
                method.name(),
                med(&|t| t.write_secs * 1e3),
                med(&|t| t.wal_bytes as f64),
                med(&|t| t.settle_secs),
                med(&|t| t.compact_secs),
                med(&|t| mib(t.tables_before)),
                med(&|t| mib(t.tables_after)),
            );
        }
    }

    println!(
        "\nreads (medians of {} rounds; scan: bounded to the deleted range, found empty; seek: \
         unbounded from its start, to the first key after it; Gets: {} each):",
        args.rounds, l.reads
    );
    println!(
        "{:<8} {:<8} {:<10} {:>10} {:>10} {:>12} {:>12}",
        "store", "method", "state", "scan ms", "seek ms", "get del µs", "get live µs"
    );
    for (s, store) in args.stores.iter().enumerate() {
        for (m, method) in Method::ALL.iter().enumerate() {
            let trials = &results[s][m];
            for (i, state) in STATES.iter().enumerate() {
                let med = |f: &dyn Fn(&Reads) -> f64| {
                    median(trials.iter().map(|t| f(&t.reads[i])).collect())
                };
                println!(
                    "{:<8} {:<8} {:<10} {:>10.3} {:>10.3} {:>12.3} {:>12.3}",
                    store.name(),
                    method.name(),
                    state,
                    med(&|r| r.scan_ms),
                    med(&|r| r.seek_ms),
                    med(&|r| r.get_deleted_us),
                    med(&|r| r.get_live_us),
                );
            }
        }
    }
}
