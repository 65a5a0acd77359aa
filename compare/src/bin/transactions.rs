//! Small read-modify-write transactions side by side: siftdb's optimistic transactions against
//! RocksDB's `OptimisticTransactionDB`, and each store's plain writes of the same keys.
//!
//! ```text
//! cargo run --release -p siftdb-compare --bin transactions -- \
//!     [--keys 200000] [--rounds 5] [--seconds 1] [--threads 1] [--accounts 0]
//! ```
//!
//! Both stores hold `--keys` keys (16-byte zero-padded decimals) with 100-byte values that
//! compress to half (db_bench's generator at its default `--compression_ratio 0.5`), filled in random order, flushed and compacted; WAL on, no fsync;
//! full bloom filters of 10 bits/key, 4 KiB blocks, a 64 MiB block cache, snappy, 4 MiB
//! memtables, on both. Then rounds of `--seconds` each, the stores alternating within a round and
//! the way of writing rotating:
//!
//! - `txn`: a transaction reads two random keys, writes both (new values), commits; a conflict is
//!   retried and counted. siftdb: `Db::transaction`, `get`, `put`, `commit`. RocksDB:
//!   `OptimisticTransactionDB::transaction`, `get_for_update` (which makes the key part of the
//!   commit's conflict check, as a siftdb transaction's reads are), `put`, `commit`.
//! - `gets+batch`: the same two gets and a write batch of the two puts, without a transaction.
//!
//! `--threads N` runs N threads on each store at once. `--accounts K` makes the transactions
//! transfers between K keys (K ≥ 2) instead of two of all keys, for contention. Printed: ops/s
//! per store and way (the median round), conflicts per committed transaction, and siftdb's ratio
//! to RocksDB (above 1: siftdb faster).

#[path = "../../../examples/common/value_generator.rs"]
mod value_generator;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use value_generator::ValueGenerator;

type RocksTxnDb = rocksdb::OptimisticTransactionDB<rocksdb::MultiThreaded>;

#[derive(Parser)]
struct Args {
    /// Keys each store holds.
    #[arg(long, default_value_t = 200_000)]
    keys: u64,
    /// Rounds; each runs every store and way once.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Seconds per store and way in a round.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Threads per store.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Transfers between this many keys (0: two random keys of all).
    #[arg(long, default_value_t = 0)]
    accounts: u64,
}

fn key(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

/// One store under test.
enum Store {
    Siftdb(siftdb::Db),
    Rocksdb(RocksTxnDb),
}

/// How a round writes.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Txn,
    GetsBatch,
}

impl Store {
    fn name(&self) -> &'static str {
        match self {
            Store::Siftdb(_) => "siftdb",
            Store::Rocksdb(_) => "rocksdb",
        }
    }

    /// One operation on keys `a` and `b`; `Ok(true)` if it committed, `Ok(false)` on a conflict.
    fn op(&self, way: Way, a: &[u8], b: &[u8], va: &[u8], vb: &[u8]) -> bool {
        match (self, way) {
            (Store::Siftdb(db), Way::Txn) => {
                let mut tx = db.transaction();
                let x = tx.get(a).unwrap();
                let y = tx.get(b).unwrap();
                assert!(x.is_some() && y.is_some(), "siftdb lost a key");
                tx.put(a, va).unwrap();
                tx.put(b, vb).unwrap();
                match tx.commit() {
                    Ok(()) => true,
                    Err(e) if e.is_conflict() => false,
                    Err(e) => panic!("siftdb commit: {e}"),
                }
            }
            (Store::Siftdb(db), Way::GetsBatch) => {
                assert!(db.get(a).unwrap().is_some() && db.get(b).unwrap().is_some());
                let mut batch = siftdb::WriteBatch::new();
                batch.put(a, va).put(b, vb);
                db.write(batch).unwrap();
                true
            }
            (Store::Rocksdb(db), Way::Txn) => {
                let tx = db.transaction();
                let x = tx.get_for_update(a, true).unwrap();
                let y = tx.get_for_update(b, true).unwrap();
                assert!(x.is_some() && y.is_some(), "rocksdb lost a key");
                tx.put(a, va).unwrap();
                tx.put(b, vb).unwrap();
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
            (Store::Rocksdb(db), Way::GetsBatch) => {
                assert!(db.get(a).unwrap().is_some() && db.get(b).unwrap().is_some());
                let mut batch = rocksdb::WriteBatchWithTransaction::<true>::default();
                batch.put(a, va);
                batch.put(b, vb);
                db.write(batch).unwrap();
                true
            }
        }
    }
}

fn open_siftdb(dir: &std::path::Path) -> Store {
    let options = siftdb::Options::default()
        .filter(siftdb::Filter::full(10.0))
        .block_cache_bytes(64 << 20);
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
    Store::Rocksdb(RocksTxnDb::open(&opts, dir).unwrap())
}

/// Fills `store` with keys `0..n` in random order, then flushes and compacts it.
fn fill(store: &Store, n: u64) {
    let mut rng = StdRng::seed_from_u64(7);
    let mut values = ValueGenerator::new(0.5, 100, 7);
    let mut order: Vec<u64> = (0..n).collect();
    order.shuffle(&mut rng);
    for i in order {
        let v = values.next(100);
        match store {
            Store::Siftdb(db) => db.put(key(i), v).unwrap(),
            Store::Rocksdb(db) => db.put(key(i), v).unwrap(),
        }
    }
    match store {
        Store::Siftdb(db) => db.compact().unwrap(),
        Store::Rocksdb(db) => {
            db.flush().unwrap();
            db.compact_range::<&[u8], &[u8]>(None, None);
        }
    }
}

/// Runs `way` on `store` for `seconds` with `threads` threads; returns (committed ops, conflicts).
fn run(store: &Store, way: Way, args: &Args, seed: u64) -> (u64, u64) {
    let done = AtomicBool::new(false);
    let (ops, conflicts) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..args.threads {
            let (done, ops, conflicts) = (&done, &ops, &conflicts);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed * 1000 + t as u64);
                let mut values = ValueGenerator::new(0.5, 100, seed * 1000 + t as u64);
                let (mut n, mut c) = (0, 0);
                while !done.load(Ordering::Relaxed) {
                    let range = if args.accounts >= 2 {
                        args.accounts
                    } else {
                        args.keys
                    };
                    let i = rng.gen_range(0..range);
                    let j = (i + rng.gen_range(1..range)) % range;
                    let (a, b) = (key(i), key(j));
                    let va = values.next(100).to_vec();
                    let vb = values.next(100).to_vec();
                    loop {
                        if store.op(way, &a, &b, &va, &vb) {
                            n += 1;
                            break;
                        }
                        c += 1;
                    }
                }
                ops.fetch_add(n, Ordering::Relaxed);
                conflicts.fetch_add(c, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(args.seconds));
        done.store(true, Ordering::Relaxed);
    });
    (ops.into_inner(), conflicts.into_inner())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args = Args::parse();
    if args.keys < 2 || args.rounds == 0 || args.threads == 0 {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--keys must be at least 2, --rounds and --threads at least 1\n",
        )
        .exit();
    }
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let stores = [open_siftdb(dirs.0.path()), open_rocksdb(dirs.1.path())];
    for s in &stores {
        let t = Instant::now();
        fill(s, args.keys);
        println!(
            "{} filled and compacted in {:.1} s",
            s.name(),
            t.elapsed().as_secs_f64()
        );
    }
    println!(
        "keys {} rounds {} seconds {} threads {} accounts {}",
        args.keys, args.rounds, args.seconds, args.threads, args.accounts
    );
    let ways = [(Way::Txn, "txn"), (Way::GetsBatch, "gets+batch")];
    // ops/s and conflict shares per (store, way), one entry per round.
    let mut rates = vec![vec![Vec::new(); ways.len()]; stores.len()];
    let mut conflict_shares = vec![vec![Vec::new(); ways.len()]; stores.len()];
    for round in 0..args.rounds {
        // Rotate which store goes first, so neither always runs on a warmer or quieter machine.
        let order: Vec<usize> = if round % 2 == 0 {
            vec![0, 1]
        } else {
            vec![1, 0]
        };
        for (w, &(way, _)) in ways.iter().enumerate() {
            for &s in &order {
                let (ops, conflicts) = run(&stores[s], way, &args, round as u64);
                rates[s][w].push(ops as f64 / args.seconds);
                conflict_shares[s][w].push(conflicts as f64 / ops.max(1) as f64);
            }
        }
        let line: Vec<String> = stores
            .iter()
            .enumerate()
            .flat_map(|(s, store)| {
                let rates = &rates;
                ways.iter().enumerate().map(move |(w, (_, name))| {
                    format!("{} {name} {:.0}", store.name(), rates[s][w][round])
                })
            })
            .collect();
        println!("round {}: {}", round + 1, line.join(", "));
    }
    println!(
        "\n{:<8} {:<11} {:>12} {:>10} {:>10}",
        "store", "way", "ops/s", "conflicts", "siftdb/x"
    );
    let sift: Vec<f64> = (0..ways.len())
        .map(|w| median(&mut rates[0][w].clone()))
        .collect();
    for (s, store) in stores.iter().enumerate() {
        for (w, (_, name)) in ways.iter().enumerate() {
            let ops = median(&mut rates[s][w].clone());
            let conflicts = median(&mut conflict_shares[s][w].clone());
            println!(
                "{:<8} {name:<11} {ops:>12.0} {:>9.2}% {:>10.2}",
                store.name(),
                conflicts * 100.0,
                sift[w] / ops
            );
        }
    }
}
