//! Micro-benchmarks of the hot pieces of the read and write paths, so that a regression in one of
//! them shows on its own. Keys are 16-byte zero-padded decimals, values 100 bytes; present keys are
//! even numbers and absent keys odd ones, so an absent key sorts between two present ones.
//!
//! - `block_seek/{present,absent}`: one seek in a data block of about 4 KiB (internal keys, the
//!   table builder's default block size and restart interval), as a table Get does after the
//!   index sent it there, per seek. Uses `siftdb::bench_internals` (crate-private block code).
//! - `block_step/{next,prev}`: one step of a block iterator through the same block, wrapping
//!   around at its ends. `prev` goes back to the restart point before the entry and decodes
//!   forward, as LevelDB's does. Uses `siftdb::bench_internals`.
//! - `filter_probe/{present,absent}`: one probe of a full filter (cache-local bloom, 10 bits/key,
//!   100k keys), per probe. `benches/filters.rs` compares policies and sizes; this is the one
//!   filter the default options build.
//! - `memtable_insert/10000`: 10k inserts into a fresh memtable, shuffled key order (divide by
//!   10k, or read the throughput line). Uses `siftdb::bench_internals`.
//! - `get_warm/{present,absent,memtable}`: `Db::get` on a store of 100k keys flushed and
//!   compacted into one level (`Filter::full(10.0)`), every block in the cache: a key in a table,
//!   an absent key (the filter answers), and a key whose newest version is in the memtable, per
//!   Get.
//! - `multi_get/{present,absent}/{batch,single}`: the keys of `get_warm` (present ones not in the
//!   memtable, and absent ones) 32 to a batch: one `Db::multi_get` per batch, or 32 `Db::get`s,
//!   reported per key.
//! - `get_value/{get,get_pinned}/{100,16384}`: a warm Get of a present key that returns its value
//!   copied (`Db::get`) or as a view of the cached block (`Db::get_pinned`), for 100-byte and
//!   16 KiB values: 20k keys (2k for 16 KiB values) in one level, every block in the cache.
//! - `iter_step/{next,prev}`: one `Cursor::next` or `prev` on a store of 100k keys flushed and
//!   compacted into one level, every block in the cache, wrapping around at the ends (a seek per
//!   100k steps); `scan_step/{next,next_back}`: one item of a full `Db::scan` forward or reversed
//!   (a copy of the key and value per item), on the same store. Public API only.
//! - `compaction/{1,2}`: `Db::compact` of a store holding 100k keys in L1 and 100k more (half of
//!   them new, half overwrites) in 8 L0 tables, 200 KiB output tables, with `max_subcompactions`
//!   1 and 2; building the store is not timed. Per key merged.
//! - `put/10000`: 10k `Db::put`s (WAL on, no sync) on a fresh store, shuffled key order; opening
//!   and dropping the store are not timed.
//!
//! Run with `cargo bench -p siftdb-benches --features __bench-internals --bench hot_paths` (append e.g.
//! `-- --warm-up-time 1 --measurement-time 2` for a quicker run, or a group name to run one).

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BatchSize, Bencher, Criterion, SamplingMode, Throughput,
};
use siftdb::bench_internals::{self, DataBlock, Memtable};
use siftdb::filter::CacheLocalBloom;
use siftdb::{Db, Filter, FilterPolicy, Options, NUM_LEVELS};

/// A 16-byte user key, stored inline so key arrays are read sequentially, not chased.
type Key = [u8; 16];
const VALUE_LEN: usize = 100;
/// Keys in the filter and in the store.
const STORE_KEYS: u64 = 100_000;
/// Keys per `multi_get` batch.
const MULTI_GET_BATCH: usize = 32;
/// Inserts per timed iteration of `memtable_insert` and `put`.
const BATCH: u64 = 10_000;

/// The present key `2 i` (`absent` false) or the absent key `2 i + 1`, zero-padded to 16 digits.
fn key(i: u64, absent: bool) -> Key {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{:016}", 2 * i + u64::from(absent)).as_bytes());
    k
}

/// 100 pseudo-random bytes (xorshift seeded by `i`), so values do not compress to nothing.
fn value(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..VALUE_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `0..n` in a fixed scrambled order (a stride coprime to `n`), so that
/// consecutive operations touch unrelated keys.
fn scrambled(n: u64) -> impl Iterator<Item = u64> {
    const STRIDE: u64 = 7919;
    // STRIDE is prime, so it is coprime to `n` unless it divides it.
    assert!(!n.is_multiple_of(STRIDE));
    (0..n).map(move |i| (i * STRIDE) % n)
}

/// Times one operation per iteration, cycling through `items`.
fn cycle<T, R, F: FnMut(&T) -> R>(b: &mut Bencher<'_>, items: &[T], mut f: F) {
    let mut i = 0;
    b.iter(|| {
        let item = &items[i];
        i += 1;
        if i == items.len() {
            i = 0;
        }
        black_box(f(black_box(item)))
    });
}

fn bench_block_seek(c: &mut Criterion) {
    let interval = bench_internals::default_restart_interval();
    let block_size = bench_internals::default_block_size();
    // Entries as a flush writes them, one version per key, until the block reaches the size at
    // which the table builder cuts it.
    let mut entries = Vec::new();
    let mut block = loop {
        let n = entries.len() as u64;
        entries.push((bench_internals::value_key(&key(n, false), n + 1), value(n)));
        let block = DataBlock::build(&entries, interval).expect("builder output is a block");
        if block.size() >= block_size {
            break block;
        }
    };
    let n = entries.len() as u64;
    // Absent keys stop one short: the last would sort past the block, where the index would not
    // have sent the lookup.
    let present: Vec<Vec<u8>> = (0..n)
        .map(|i| bench_internals::lookup(&key(i, false)))
        .collect();
    let absent: Vec<Vec<u8>> = (0..n - 1)
        .map(|i| bench_internals::lookup(&key(i, true)))
        .collect();
    for (i, l) in present.iter().enumerate() {
        assert_eq!(block.get(l), Some(&entries[i].1[..]));
    }
    for l in &absent {
        assert_eq!(block.get(l), None);
    }
    eprintln!(
        "block_seek: {n} entries, {} bytes, restart interval {interval}",
        block.size()
    );

    let mut g = c.benchmark_group("block_seek");
    g.bench_function("present", |b| {
        cycle(b, &present, |l| block.get(l).map(<[u8]>::len))
    });
    g.bench_function("absent", |b| {
        cycle(b, &absent, |l| block.get(l).map(<[u8]>::len))
    });
    g.finish();

    let mut g = c.benchmark_group("block_step");
    g.bench_function("next", |b| b.iter(|| black_box(block.next_wrapping())));
    g.bench_function("prev", |b| b.iter(|| black_box(block.prev_wrapping())));
    g.finish();
}

fn bench_filter_probe(c: &mut Criterion) {
    let policy = CacheLocalBloom::new(10.0);
    let present: Vec<Key> = scrambled(STORE_KEYS).map(|i| key(i, false)).collect();
    let absent: Vec<Key> = scrambled(STORE_KEYS).map(|i| key(i, true)).collect();
    let mut builder = policy.builder();
    for k in &present {
        builder.add_key(k);
    }
    let filter = builder.finish();
    assert!(present.iter().all(|k| policy.may_match(&filter, k)));
    let fp = absent
        .iter()
        .filter(|k| policy.may_match(&filter, &k[..]))
        .count();
    eprintln!(
        "filter_probe: {STORE_KEYS} keys, {} bytes, FP rate {:.3} %",
        filter.len(),
        100.0 * fp as f64 / absent.len() as f64
    );

    let mut g = c.benchmark_group("filter_probe");
    g.bench_function("present", |b| {
        cycle(b, &present, |k| policy.may_match(&filter, k))
    });
    g.bench_function("absent", |b| {
        cycle(b, &absent, |k| policy.may_match(&filter, k))
    });
    g.finish();
}

/// `BATCH` keys in scrambled order with their values.
fn batch() -> Vec<(Key, Vec<u8>)> {
    scrambled(BATCH)
        .map(|i| (key(i, false), value(i)))
        .collect()
}

fn bench_memtable_insert(c: &mut Criterion) {
    let entries = batch();
    let mut g = c.benchmark_group("memtable_insert");
    g.throughput(Throughput::Elements(BATCH));
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function(BATCH.to_string(), |b| {
        b.iter_batched(
            Memtable::new,
            |mem| {
                for (seq, (k, v)) in (1..).zip(&entries) {
                    mem.put(seq, k, v);
                }
                // Returned, so that dropping it is not timed.
                mem
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    let mem = Memtable::new();
    for (seq, (k, v)) in (1..).zip(&entries) {
        mem.put(seq, k, v);
    }
    eprintln!(
        "memtable_insert: {BATCH} entries hold about {} bytes",
        mem.approximate_bytes()
    );
}

fn bench_get_warm(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    // A level budget above the store's ~12 MB: compact() leaves every table in L1, and no
    // background compaction moves a table (and leaves its blocks cold) while Gets are timed.
    let options = Options::default()
        .filter(Filter::full(10.0))
        .max_bytes_for_level_base(64 << 20);
    let db = Db::open(dir.path(), options).expect("open");
    for i in 0..STORE_KEYS {
        db.put(key(i, false), value(i)).expect("put");
    }
    db.flush().expect("flush");
    db.compact().expect("compact");
    // Every key read once: every data block, index and filter is in the cache.
    for i in 0..STORE_KEYS {
        assert_eq!(db.get(key(i, false)).expect("get"), Some(value(i)));
    }
    // Every 100th key gets a newer version, which stays in the memtable.
    let in_memtable = |i: u64| i.is_multiple_of(100);
    for i in (0..STORE_KEYS).filter(|&i| in_memtable(i)) {
        db.put(key(i, false), value(i + STORE_KEYS)).expect("put");
    }
    let present: Vec<Key> = scrambled(STORE_KEYS)
        .filter(|&i| !in_memtable(i))
        .map(|i| key(i, false))
        .collect();
    let absent: Vec<Key> = scrambled(STORE_KEYS).map(|i| key(i, true)).collect();
    let memtable: Vec<Key> = scrambled(STORE_KEYS)
        .filter(|&i| in_memtable(i))
        .map(|i| key(i, false))
        .collect();
    assert_eq!(
        db.get(key(100, false)).expect("get"),
        Some(value(100 + STORE_KEYS))
    );
    assert_eq!(db.get(key(101, true)).expect("get"), None);
    let files: Vec<String> = (0..NUM_LEVELS)
        .map(|l| {
            db.property(&format!("siftdb.num-files-at-level{l}"))
                .unwrap_or_else(|| "?".into())
        })
        .collect();
    eprintln!(
        "get_warm: {STORE_KEYS} keys, {} in the memtable; tables per level: {}",
        memtable.len(),
        files.join(",")
    );

    let mut g = c.benchmark_group("get_warm");
    for (name, keys) in [
        ("present", &present),
        ("absent", &absent),
        ("memtable", &memtable),
    ] {
        g.bench_function(name, |b| {
            cycle(b, keys, |k| db.get(k).expect("get").map(|v| v.len()))
        });
    }
    g.finish();

    // The same keys, 32 to a `multi_get` (timed per batch, reported per key), beside 32 single
    // Gets of the same batches.
    let mut g = c.benchmark_group("multi_get");
    g.throughput(Throughput::Elements(MULTI_GET_BATCH as u64));
    for (name, keys) in [("present", &present), ("absent", &absent)] {
        let batches: Vec<&[Key]> = keys.chunks_exact(MULTI_GET_BATCH).collect();
        g.bench_function(format!("{name}/batch"), |b| {
            cycle(b, &batches, |batch| {
                db.multi_get(batch)
                    .into_iter()
                    .filter(|v| matches!(v, Ok(Some(_))))
                    .count()
            })
        });
        g.bench_function(format!("{name}/single"), |b| {
            cycle(b, &batches, |batch| {
                batch
                    .iter()
                    .filter(|k| matches!(db.get(k), Ok(Some(_))))
                    .count()
            })
        });
    }
    g.finish();
    drop(db);
    drop(dir);
}

fn bench_get_value(c: &mut Criterion) {
    let mut g = c.benchmark_group("get_value");
    for (len, keys) in [(100usize, 20_000u64), (16 << 10, 2_000)] {
        let dir = tempfile::tempdir().expect("temporary directory");
        let options = Options::default()
            .filter(Filter::full(10.0))
            .block_cache_bytes(128 << 20)
            .max_bytes_for_level_base(256 << 20);
        let db = Db::open(dir.path(), options).expect("open");
        let long_value = |i: u64| -> Vec<u8> { value(i).into_iter().cycle().take(len).collect() };
        for i in 0..keys {
            db.put(key(i, false), long_value(i)).expect("put");
        }
        db.flush().expect("flush");
        db.compact().expect("compact");
        for i in 0..keys {
            let pinned = db.get_pinned(key(i, false)).expect("get").expect("present");
            assert_eq!(*pinned, *long_value(i));
        }
        let present: Vec<Key> = scrambled(keys).map(|i| key(i, false)).collect();
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("get/{len}"), |b| {
            cycle(b, &present, |k| db.get(k).expect("get").map(|v| v.len()))
        });
        g.bench_function(format!("get_pinned/{len}"), |b| {
            cycle(b, &present, |k| {
                db.get_pinned(k).expect("get").map(|v| v.len())
            })
        });
        drop(db);
        drop(dir);
    }
    g.finish();
}

fn bench_iter_step(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    // As `get_warm`'s store, without the memtable versions: one level, no background compaction.
    let options = Options::default()
        .filter(Filter::full(10.0))
        .max_bytes_for_level_base(64 << 20);
    let db = Db::open(dir.path(), options).expect("open");
    for i in 0..STORE_KEYS {
        db.put(key(i, false), value(i)).expect("put");
    }
    db.flush().expect("flush");
    db.compact().expect("compact");
    // A full scan each way: every data block is in the cache, and both directions see every key.
    let forward: Vec<Vec<u8>> = db.iter().map(|r| r.expect("scan").0).collect();
    assert_eq!(forward.len() as u64, STORE_KEYS);
    assert!(db
        .iter()
        .rev()
        .map(|r| r.expect("scan").0)
        .eq(forward.into_iter().rev()));

    let mut g = c.benchmark_group("iter_step");
    let mut it = db.cursor();
    it.seek_to_first().expect("seek");
    g.bench_function("next", |b| {
        b.iter(|| {
            it.next().expect("next");
            if !it.valid() {
                it.seek_to_first().expect("seek");
            }
            black_box(it.value().len())
        })
    });
    it.seek_to_last().expect("seek");
    g.bench_function("prev", |b| {
        b.iter(|| {
            it.prev().expect("prev");
            if !it.valid() {
                it.seek_to_last().expect("seek");
            }
            black_box(it.value().len())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("scan_step");
    let mut scan = db.iter();
    g.bench_function("next", |b| {
        b.iter(|| {
            let item = match scan.next() {
                Some(item) => item,
                None => {
                    scan = db.iter();
                    scan.next().expect("a key")
                }
            };
            black_box(item.expect("scan").1.len())
        })
    });
    let mut scan = db.iter();
    g.bench_function("next_back", |b| {
        b.iter(|| {
            let item = match scan.next_back() {
                Some(item) => item,
                None => {
                    scan = db.iter();
                    scan.next_back().expect("a key")
                }
            };
            black_box(item.expect("scan").1.len())
        })
    });
    g.finish();
    drop((it, scan, db));
    drop(dir);
}

fn bench_put(c: &mut Criterion) {
    let entries = batch();
    let mut g = c.benchmark_group("put");
    g.throughput(Throughput::Elements(BATCH));
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function(BATCH.to_string(), |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().expect("temporary directory");
                let db = Db::open(dir.path(), Options::default()).expect("open");
                (db, dir)
            },
            |(db, dir)| {
                for (k, v) in &entries {
                    db.put(k, v).expect("put");
                }
                // Returned, so that closing the store and removing its files are not timed.
                (db, dir)
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// Keys merged by one timed `compaction` iteration: two rounds of `STORE_KEYS`.
const COMPACTION_KEYS: u64 = 2 * STORE_KEYS;

fn bench_compaction(c: &mut Criterion) {
    let mut g = c.benchmark_group("compaction");
    g.throughput(Throughput::Elements(COMPACTION_KEYS));
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    for threads in [1, 2] {
        g.bench_function(threads.to_string(), |b| {
            b.iter_batched(
                || {
                    let dir = tempfile::tempdir().expect("temporary directory");
                    // No background job: the timed `compact` does all the merging.
                    let options = Options::default()
                        .level0_compaction_trigger(1000)
                        .compact_l0_when_idle(false)
                        .max_bytes_for_level_base(1 << 40)
                        .target_file_size(200 << 10)
                        .max_subcompactions(threads);
                    let db = Db::open(dir.path(), options).expect("open");
                    for i in scrambled(STORE_KEYS) {
                        db.put(key(i, false), value(i)).expect("put");
                    }
                    db.compact().expect("compact");
                    // Half overwrites, half new keys, in 8 overlapping L0 tables.
                    for (n, i) in scrambled(STORE_KEYS).enumerate() {
                        let k = if i % 2 == 0 { i } else { STORE_KEYS + i };
                        db.put(key(k, false), value(k + 1)).expect("put");
                        if (n as u64).is_multiple_of(STORE_KEYS / 8) {
                            db.flush().expect("flush");
                        }
                    }
                    db.flush().expect("flush");
                    (db, dir)
                },
                |(db, dir)| {
                    db.compact().expect("compact");
                    (db, dir)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn config() -> Criterion {
    // Modest times: the whole run takes a couple of minutes on two cores.
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_block_seek, bench_filter_probe, bench_memtable_insert, bench_get_warm,
        bench_get_value, bench_iter_step, bench_put, bench_compaction
}
criterion_main!(benches);
