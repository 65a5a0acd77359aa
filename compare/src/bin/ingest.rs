//! Loading sorted keys side by side: tables built outside the store and ingested against a put
//! loop of the same keys, on siftdb (`TableWriter`, `Db::ingest`) and on RocksDB
//! (`SstFileWriter`, `IngestExternalFile`); then, with `--backup`, a full backup of the loaded
//! store and an incremental one after 10 % new writes, by each store's `BackupEngine`.
//!
//! ```text
//! cargo run --release -p siftdb-compare --bin ingest -- \
//!     [--keys 10000000] [--tables 8] [--compression-ratio 0.5] [--stores siftdb,rocksdb] \
//!     [--backup] [--dir /tmp/ingest]
//! ```
//!
//! Keys `0..N` as 16-byte zero-padded decimals, in increasing order; values 100 bytes as db_bench
//! makes them (random bytes that compress to `--compression-ratio`, the same for both stores).
//! For each store, in a fresh store each:
//!
//! - `puts`: every key put in order (WAL on, no fsync), then `flush`; its time ends there.
//!   Then the store is left until no flush or compaction is pending or running ("settle").
//!   Written: the WAL's bytes and the tables' bytes its flushes and compactions wrote (siftdb:
//!   the `wal.bytes` and `table.bytes.written` tickers; RocksDB: `rocksdb.wal.bytes`,
//!   `rocksdb.flush.write.bytes` plus `rocksdb.compact.write.bytes`), over the bytes of keys and
//!   values (116 per key).
//! - `ingest`: the keys written into `--tables` files of consecutive ranges (each file synced by
//!   its writer's finish), then all of them ingested in one call; its time covers both. siftdb's
//!   ingest reads each file whole first (checksums, key order) and flushes the memtables (empty
//!   here), then hard-links the files in; RocksDB's is given `move_files = true`, so it
//!   hard-links them too (its default copies), and does not read them through (its
//!   `verify_checksums_before_ingest` is off by default). Written: the files' bytes, plus
//!   whatever the store writes after (settle included).
//!
//! Each line gives the time, keys per second, bytes written over the data's, and the tables per
//! level once settled. A sample of keys is read back from each store (a wrong value panics).
//!
//! `--backup`, on the ingested store of each engine: a full backup into an empty directory, then
//! 10 % new keys (`N..1.1 N`, put in order, not flushed) and a second backup; each backup's time
//! and the bytes it added to the backup directory. siftdb: `BackupEngine::create_backup`, which
//! does not flush (it copies the WAL's prefix); RocksDB: `BackupEngine::create_new_backup_flush`
//! with `flush_before_backup = false` (it copies the live WAL files), `share_table_files` on
//! (its default), so both share unchanged tables between backups.
//!
//! Settings as the side-by-side lookups (`compare`'s main binary) with `--peer-shape siftdb`:
//! full bloom filters of 10 bits/key on every level, 4 KiB blocks, 64 MiB block cache, snappy;
//! siftdb otherwise at its defaults (4 MiB memtable, 2 MiB tables, L1 10 MiB, x10 per level);
//! RocksDB with the same memtable, table and level sizes (static level sizes), compactions split
//! between 2 threads, statistics on. The SstFileWriter takes the DB's options.

#[path = "../../../examples/common/value_generator.rs"]
mod value_generator;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
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
const SETTLE_LIMIT: Duration = Duration::from_secs(1200);
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

/// The bytes of the files under `dir`, recursively.
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                tree_bytes(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

/// One store under test.
trait Store {
    fn put(&mut self, k: &[u8], v: &[u8]);
    fn get(&mut self, k: &[u8]) -> Option<Vec<u8>>;
    fn flush(&mut self);
    /// Polls until no flush or compaction is pending or running; false on timeout.
    fn settle(&mut self) -> bool;
    /// Bytes the store wrote so far: WAL, tables.
    fn written(&self) -> (u64, u64);
    /// Files per level, L0 first.
    fn levels(&self) -> Vec<u64>;
    /// Writes `keys` (in order, with their values) into the table file `path` and syncs it.
    fn write_table(&mut self, path: &Path, keys: std::ops::Range<u64>, values: &mut ValueGenerator);
    /// Ingests the table files `paths` in one call.
    fn ingest(&mut self, paths: &[PathBuf]);
    /// A backup into `dir` (opened anew each time); returns its time.
    fn backup(&mut self, dir: &Path) -> Duration;
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
    fn get(&mut self, k: &[u8]) -> Option<Vec<u8>> {
        self.0.get(k).unwrap()
    }
    fn flush(&mut self) {
        self.0.flush().unwrap();
    }
    fn settle(&mut self) -> bool {
        poll_until(|| self.0.property("siftdb.compaction-pending").as_deref() == Some("0"))
    }
    fn written(&self) -> (u64, u64) {
        let s = self.0.statistics();
        (
            s.ticker(siftdb::Ticker::WalBytes),
            s.ticker(siftdb::Ticker::TableBytesWritten),
        )
    }
    fn levels(&self) -> Vec<u64> {
        (0..siftdb::NUM_LEVELS)
            .map(|l| {
                let n = self.0.property(&format!("siftdb.num-files-at-level{l}"));
                n.unwrap().parse().unwrap()
            })
            .collect()
    }
    fn write_table(
        &mut self,
        path: &Path,
        keys: std::ops::Range<u64>,
        values: &mut ValueGenerator,
    ) {
        let mut w = self.0.table_writer(path).unwrap();
        for i in keys {
            w.put(key(i), values.next(VALUE_BYTES)).unwrap();
        }
        w.finish().unwrap();
    }
    fn ingest(&mut self, paths: &[PathBuf]) {
        self.0.ingest(paths).unwrap();
    }
    fn backup(&mut self, dir: &Path) -> Duration {
        let mut engine = siftdb::BackupEngine::open(dir).unwrap();
        let t = Instant::now();
        engine.create_backup(&self.0).unwrap();
        t.elapsed()
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

    fn ticker(&self, t: rocksdb::statistics::Ticker) -> u64 {
        self.opts.get_ticker_count(t)
    }
}

impl Store for Rocks {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.db.put(k, v).unwrap();
    }
    fn get(&mut self, k: &[u8]) -> Option<Vec<u8>> {
        self.db.get_pinned(k).unwrap().map(|v| v.to_vec())
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
    fn written(&self) -> (u64, u64) {
        use rocksdb::statistics::Ticker;
        (
            self.ticker(Ticker::WalFileBytes),
            self.ticker(Ticker::FlushWriteBytes) + self.ticker(Ticker::CompactWriteBytes),
        )
    }
    fn levels(&self) -> Vec<u64> {
        (0..7)
            .map(|l| {
                let name = rocksdb::properties::num_files_at_level(l);
                self.int_property(&name)
            })
            .collect()
    }
    fn write_table(
        &mut self,
        path: &Path,
        keys: std::ops::Range<u64>,
        values: &mut ValueGenerator,
    ) {
        let mut w = rocksdb::SstFileWriter::create(&self.opts);
        w.open(path).unwrap();
        for i in keys {
            w.put(key(i), values.next(VALUE_BYTES)).unwrap();
        }
        w.finish().unwrap();
    }
    fn ingest(&mut self, paths: &[PathBuf]) {
        let mut opts = rocksdb::IngestExternalFileOptions::default();
        opts.set_move_files(true);
        self.db
            .ingest_external_file_opts(&opts, paths.to_vec())
            .unwrap();
    }
    fn backup(&mut self, dir: &Path) -> Duration {
        let opts = rocksdb::backup::BackupEngineOptions::new(dir).unwrap();
        let env = rocksdb::Env::new().unwrap();
        let mut engine = rocksdb::backup::BackupEngine::open(&opts, &env).unwrap();
        let t = Instant::now();
        engine.create_new_backup_flush(&self.db, false).unwrap();
        t.elapsed()
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

#[derive(Parser)]
#[command(about = "Sorted keys ingested against a put loop, siftdb against RocksDB; then backups")]
struct Args {
    /// Keys loaded.
    #[arg(long, default_value_t = 10_000_000)]
    keys: u64,
    /// Files the ingest builds (consecutive key ranges).
    #[arg(long, default_value_t = 8)]
    tables: u64,
    /// What the values compress to (1.0: incompressible).
    #[arg(long, default_value_t = 0.5)]
    compression_ratio: f64,
    /// The stores, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["siftdb", "rocksdb"])]
    stores: Vec<StoreName>,
    /// Then a full and an incremental backup of each ingested store.
    #[arg(long)]
    backup: bool,
    /// Scratch directory (a temporary one if not given); emptied of what the run made.
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn shape(levels: &[u64]) -> String {
    let shown: Vec<String> = levels
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(l, n)| format!("L{l} {n}"))
        .collect();
    shown.join(", ")
}

/// Reads back every `n / 1000`-th key and checks it against `values` replayed.
fn check(db: &mut dyn Store, n: u64, ratio: f64) {
    let mut values = ValueGenerator::new(ratio, VALUE_BYTES, 7);
    let step = (n / 1000).max(1);
    for i in 0..n {
        let v = values.next(VALUE_BYTES).to_vec();
        if i % step == 0 {
            assert_eq!(db.get(&key(i)), Some(v), "key {i}");
        }
    }
}

fn main() {
    let args = Args::parse();
    if !(args.compression_ratio > 0.0 && args.compression_ratio <= 1.0) {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--compression-ratio must be above 0 and at most 1\n",
        )
        .exit();
    }
    if args.keys == 0 || args.tables == 0 || args.tables > args.keys {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--keys and --tables must be above 0, --tables at most --keys\n",
        )
        .exit();
    }
    println!(
        "command: {}",
        std::env::args().collect::<Vec<_>>().join(" ")
    );
    let n = args.keys;
    let data = n * (16 + VALUE_BYTES as u64);
    println!(
        "keys {n} (16 B) in increasing order, values 100 B of db_bench's kind compressing to \
         {:.2}: {:.1} MiB of keys and values; {} files for the ingest",
        args.compression_ratio,
        mib(data),
        args.tables
    );
    let tmp = tempfile::tempdir_in(args.dir.clone().unwrap_or_else(std::env::temp_dir)).unwrap();
    let ratio = args.compression_ratio;
    for &store in &args.stores {
        let root = tmp.path().join(store.name());
        std::fs::create_dir_all(&root).unwrap();

        // The put loop.
        let mut db = store.open(&root.join("puts"));
        let mut values = ValueGenerator::new(ratio, VALUE_BYTES, 7);
        let t = Instant::now();
        for i in 0..n {
            db.put(&key(i), values.next(VALUE_BYTES));
        }
        db.flush();
        let took = t.elapsed();
        assert!(db.settle(), "{}: never settled", store.name());
        let settled = t.elapsed();
        let (wal, tables) = db.written();
        println!(
            "{:<8} puts    {:>8.2} s  {:>9.0} keys/s  settled at {:>7.2} s  wrote {:>8.1} MiB \
             (WAL {:.1}, tables {:.1}) = {:.2} x the data; {}",
            store.name(),
            took.as_secs_f64(),
            n as f64 / took.as_secs_f64(),
            settled.as_secs_f64(),
            mib(wal + tables),
            mib(wal),
            mib(tables),
            (wal + tables) as f64 / data as f64,
            shape(&db.levels())
        );
        check(db.as_mut(), n, ratio);
        drop(db);
        std::fs::remove_dir_all(root.join("puts")).unwrap();

        // Tables written outside, then one ingest.
        let files = root.join("files");
        std::fs::create_dir_all(&files).unwrap();
        let mut db = store.open(&root.join("ingested"));
        let mut values = ValueGenerator::new(ratio, VALUE_BYTES, 7);
        let per = n.div_ceil(args.tables);
        let t = Instant::now();
        let mut paths = Vec::new();
        for (f, start) in (0..n).step_by(per as usize).enumerate() {
            let path = files.join(format!("part{f:04}.sst"));
            db.write_table(&path, start..(start + per).min(n), &mut values);
            paths.push(path);
        }
        let built = t.elapsed();
        let file_bytes = tree_bytes(&files);
        db.ingest(&paths);
        let took = t.elapsed();
        assert!(db.settle(), "{}: never settled", store.name());
        let settled = t.elapsed();
        let (wal, tables) = db.written();
        println!(
            "{:<8} ingest  {:>8.2} s  {:>9.0} keys/s  settled at {:>7.2} s  wrote {:>8.1} MiB \
             (files {:.1} in {:.2} s, ingest {:.2} s; then WAL {:.1}, tables {:.1}) = {:.2} x the \
             data; {}",
            store.name(),
            took.as_secs_f64(),
            n as f64 / took.as_secs_f64(),
            settled.as_secs_f64(),
            mib(file_bytes + wal + tables),
            mib(file_bytes),
            built.as_secs_f64(),
            (took - built).as_secs_f64(),
            mib(wal),
            mib(tables),
            (file_bytes + wal + tables) as f64 / data as f64,
            shape(&db.levels())
        );
        check(db.as_mut(), n, ratio);

        if args.backup {
            let backups = root.join("backups");
            let first = db.backup(&backups);
            let full = tree_bytes(&backups);
            let t = Instant::now();
            for i in n..n + n / 10 {
                db.put(&key(i), values.next(VALUE_BYTES));
            }
            let wrote = t.elapsed();
            let second = db.backup(&backups);
            let incremental = tree_bytes(&backups) - full;
            println!(
                "{:<8} backup  full {:>7.2} s, {:>8.1} MiB; after {} new keys (put in {:.2} s, \
                 not flushed): {:>7.2} s, {:>8.1} MiB more",
                store.name(),
                first.as_secs_f64(),
                mib(full),
                n / 10,
                wrote.as_secs_f64(),
                second.as_secs_f64(),
                mib(incremental)
            );
        }
        drop(db);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
