//! Counter increments side by side: merge operands against read-modify-write transactions, in
//! siftdb (`U64Add`) and in RocksDB (an associative u64-add merge operator through
//! `set_merge_operator_associative`, and `OptimisticTransactionDB`).
//!
//! ```text
//! cargo run --release -p siftdb-compare --bin merge_counters -- \
//!     [--keys 1000000] [--increments 1000000] [--threads 1]
//! ```
//!
//! Both stores hold `--keys` counters (16-byte zero-padded decimal keys, 8-byte little-endian
//! values, which do not compress), each written 0 in random order, then flushed and compacted;
//! WAL on, no fsync; full bloom filters of 10 bits/key, 4 KiB blocks, a 64 MiB block cache,
//! snappy, 4 MiB memtables, on both. Then each store, one after the other, runs each way on
//! `--increments` random counters over `--threads` threads:
//!
//! - `merge`: one merge of the operand 1 (siftdb: `Db::merge`; RocksDB: `DB::merge`);
//! - `txn`: a transaction reads the counter, writes it plus one, commits, retried on a conflict
//!   (siftdb: `transaction`, `get`, `put`, `commit`; RocksDB: `transaction`, `get_for_update`,
//!   `put`, `commit`);
//!
//! and after each way a full scan sums the counters (after the merges, the scan resolves the
//! operands not compacted yet). Printed: increments/s per store and way, the scans' seconds, and
//! siftdb's ratio to RocksDB (above 1: siftdb faster). The sums are checked: every increment
//! counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Parser;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

type RocksTxnDb = rocksdb::OptimisticTransactionDB<rocksdb::MultiThreaded>;

#[derive(Parser)]
struct Args {
    /// Counters each store holds.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Increments per store and way.
    #[arg(long, default_value_t = 1_000_000)]
    increments: u64,
    /// Threads incrementing at once.
    #[arg(long, default_value_t = 1)]
    threads: u64,
}

fn key(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

fn counter(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().expect("a counter is 8 bytes"))
}

/// One store under test.
enum Store {
    Siftdb(siftdb::Db),
    Rocksdb(RocksTxnDb),
}

/// How an increment is written.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Merge,
    Txn,
}

impl Store {
    fn name(&self) -> &'static str {
        match self {
            Store::Siftdb(_) => "siftdb",
            Store::Rocksdb(_) => "rocksdb",
        }
    }

    /// Adds 1 to counter `k`; returns the conflicts retried.
    fn increment(&self, way: Way, k: &[u8]) -> u64 {
        let one = 1u64.to_le_bytes();
        let mut conflicts = 0;
        loop {
            let committed = match (self, way) {
                (Store::Siftdb(db), Way::Merge) => {
                    db.merge(k, one).unwrap();
                    true
                }
                (Store::Rocksdb(db), Way::Merge) => {
                    db.merge(k, one).unwrap();
                    true
                }
                (Store::Siftdb(db), Way::Txn) => {
                    let mut tx = db.transaction();
                    let n = counter(&tx.get(k).unwrap().expect("siftdb lost a counter"));
                    tx.put(k, (n + 1).to_le_bytes()).unwrap();
                    match tx.commit() {
                        Ok(()) => true,
                        Err(e) if e.is_conflict() => false,
                        Err(e) => panic!("siftdb commit: {e}"),
                    }
                }
                (Store::Rocksdb(db), Way::Txn) => {
                    let tx = db.transaction();
                    let v = tx.get_for_update(k, true).unwrap();
                    let n = counter(&v.expect("rocksdb lost a counter"));
                    tx.put(k, (n + 1).to_le_bytes()).unwrap();
                    match tx.commit() {
                        Ok(()) => true,
                        Err(e)
                            if matches!(
                                e.kind(),
                                rocksdb::ErrorKind::Busy | rocksdb::ErrorKind::TryAgain
                            ) =>
                        {
                            false
                        }
                        Err(e) => panic!("rocksdb commit: {e}"),
                    }
                }
            };
            if committed {
                return conflicts;
            }
            conflicts += 1;
        }
    }

    fn put(&self, k: &[u8], v: &[u8]) {
        match self {
            Store::Siftdb(db) => db.put(k, v).unwrap(),
            Store::Rocksdb(db) => db.put(k, v).unwrap(),
        }
    }

    fn compact(&self) {
        match self {
            Store::Siftdb(db) => db.compact().unwrap(),
            Store::Rocksdb(db) => {
                db.flush().unwrap();
                db.compact_range::<&[u8], &[u8]>(None, None);
            }
        }
    }

    /// The sum of every counter, by a full scan, and its seconds.
    fn scan_sum(&self) -> (u64, f64) {
        let started = Instant::now();
        let sum = match self {
            Store::Siftdb(db) => db.iter().map(|kv| counter(&kv.unwrap().1)).sum(),
            Store::Rocksdb(db) => db
                .iterator(rocksdb::IteratorMode::Start)
                .map(|kv| counter(&kv.unwrap().1))
                .sum(),
        };
        (sum, started.elapsed().as_secs_f64())
    }
}

/// U64 addition for RocksDB, full and partial merges alike (associative).
fn rocksdb_add(
    _: &[u8],
    existing: Option<&[u8]>,
    operands: &rocksdb::MergeOperands,
) -> Option<Vec<u8>> {
    let mut sum = existing.map_or(0, counter);
    for op in operands {
        sum = sum.wrapping_add(u64::from_le_bytes(op.try_into().ok()?));
    }
    Some(sum.to_le_bytes().to_vec())
}

fn open_siftdb(dir: &std::path::Path) -> Store {
    let options = siftdb::Options::default()
        .filter(siftdb::Filter::full(10.0))
        .block_cache_bytes(64 << 20)
        .merge_operator(std::sync::Arc::new(siftdb::U64Add));
    Store::Siftdb(siftdb::Db::open(dir, options).unwrap())
}

fn open_rocksdb(dir: &std::path::Path) -> Store {
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_block_size(4096);
    table.set_block_cache(&rocksdb::Cache::new_lru_cache(64 << 20));
    let mut opts = rocksdb::Options::default();
    opts.create_if_missing(true);
    opts.set_block_based_table_factory(&table);
    opts.set_compression_type(rocksdb::DBCompressionType::Snappy);
    opts.set_write_buffer_size(4 << 20);
    opts.set_merge_operator_associative("u64add", rocksdb_add);
    Store::Rocksdb(RocksTxnDb::open(&opts, dir).unwrap())
}

/// Runs `way` on `store` for `args.increments` random counters over `args.threads` threads;
/// returns increments per second and the conflicts retried.
fn run(store: &Store, way: Way, args: &Args, seed: u64) -> (f64, u64) {
    let conflicts = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..args.threads {
            let share =
                args.increments / args.threads + u64::from(t < args.increments % args.threads);
            let conflicts = &conflicts;
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed * 1000 + t);
                let mut c = 0;
                for _ in 0..share {
                    c += store.increment(way, &key(rng.gen_range(0..args.keys)));
                }
                conflicts.fetch_add(c, Ordering::Relaxed);
            });
        }
    });
    let rate = args.increments as f64 / started.elapsed().as_secs_f64();
    (rate, conflicts.into_inner())
}

fn main() {
    let args = Args::parse();
    if args.keys == 0 || args.increments == 0 || args.threads == 0 {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--keys, --increments and --threads must be at least 1\n",
        )
        .exit();
    }
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let stores = [open_siftdb(dirs.0.path()), open_rocksdb(dirs.1.path())];
    let mut order: Vec<u64> = (0..args.keys).collect();
    order.shuffle(&mut StdRng::seed_from_u64(7));
    for s in &stores {
        let t = Instant::now();
        for &i in &order {
            s.put(&key(i), &0u64.to_le_bytes());
        }
        s.compact();
        println!(
            "{} filled and compacted in {:.1} s",
            s.name(),
            t.elapsed().as_secs_f64()
        );
    }
    println!(
        "keys {} increments {} threads {}",
        args.keys, args.increments, args.threads
    );
    let ways = [(Way::Merge, "merge"), (Way::Txn, "txn")];
    // (increments/s, conflicts, scan seconds) per store and way.
    let mut results = vec![vec![(0.0, 0, 0.0); ways.len()]; stores.len()];
    for (s, store) in stores.iter().enumerate() {
        for (w, &(way, name)) in ways.iter().enumerate() {
            let (rate, conflicts) = run(store, way, &args, w as u64 + 1);
            let (sum, scan) = store.scan_sum();
            let want = args.increments * (w as u64 + 1);
            assert_eq!(
                sum,
                want,
                "{} {name}: the counters lost increments",
                store.name()
            );
            println!(
                "{} {name}: {rate:.0} increments/s, scan {scan:.3} s",
                store.name()
            );
            results[s][w] = (rate, conflicts, scan);
        }
    }
    println!(
        "\n{:<8} {:<6} {:>14} {:>10} {:>10} {:>10}",
        "store", "way", "increments/s", "conflicts", "scan s", "siftdb/x"
    );
    for (s, store) in stores.iter().enumerate() {
        for (w, (_, name)) in ways.iter().enumerate() {
            let (rate, conflicts, scan) = results[s][w];
            println!(
                "{:<8} {name:<6} {rate:>14.0} {conflicts:>10} {scan:>10.3} {:>10.2}",
                store.name(),
                results[0][w].0 / rate
            );
        }
    }
}
