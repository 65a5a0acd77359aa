//! One block cache shared by several stores (`Options::block_cache`): it stays within its budget,
//! each store reads only its own blocks (even where file numbers and block offsets are the same in
//! both), index and filter blocks still outlive data blocks whichever store reads them, and a
//! store's blocks leave the cache when it closes.

use crate::common::scratch;
use siftdb::{Cache, Compression, Db, Options, Ticker};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Store `store`'s value of key `i`: as long in every store, different in each.
fn value(store: u8, i: u32) -> Vec<u8> {
    let mut v = format!("store-{store}-value-{i:08}-").into_bytes();
    v.resize(100, b'a' + store);
    v
}

/// Options that make two stores given the same writes lay out the same tables: one flush, no
/// compaction, no codec (so blocks end at the same offsets whatever the values hold).
fn same_layout(cache: &Cache) -> Options {
    Options::default()
        .block_cache(cache.clone())
        .compression(Compression::None)
        .compact_l0_when_idle(false)
        .compact_l0_for_reads(false)
        .cache_index_and_filter_blocks(true)
}

/// The store's table files, by name.
fn tables(db: &Db) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(db.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

/// This store's bytes in the cache (data, filter and index blocks), from its `siftdb.stats`.
fn own_cached_bytes(db: &Db) -> u64 {
    let report = db.property("siftdb.stats").unwrap();
    let line = report
        .lines()
        .find(|l| l.starts_with("block cache:"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains("shared with other stores"), "{line}");
    ["data ", "filter ", "index "]
        .iter()
        .map(|kind| {
            let after = line.split(kind).nth(1).unwrap_or_else(|| panic!("{line}"));
            after
                .split(',')
                .next()
                .unwrap()
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .sum()
}

const KEYS: u32 = 5_000;

#[test]
fn two_stores_sharing_a_small_cache_stay_within_it_and_read_only_their_own_blocks() {
    // 256 KiB for two stores of about 600 KB of blocks each: blocks are evicted all along.
    let cache = Cache::new(256 << 10);
    let (dir_a, dir_b) = (scratch(), scratch());
    let a = Db::open(dir_a.path(), same_layout(&cache)).unwrap();
    let b = Db::open(dir_b.path(), same_layout(&cache)).unwrap();
    for (n, db) in [(0, &a), (1, &b)] {
        for i in 0..KEYS {
            db.put(key(i), value(n, i)).unwrap();
        }
        db.flush().unwrap();
    }
    // The two stores' tables have the same numbers and sizes, so the same blocks at the same
    // offsets: a cache keyed by (file number, offset) alone would answer one store's lookup with
    // the other's block.
    assert_eq!(tables(&a), tables(&b));
    assert!(!tables(&a).is_empty());
    for name in tables(&a) {
        let size = |db: &Db| std::fs::metadata(db.path().join(&name)).unwrap().len();
        assert_eq!(size(&a), size(&b), "{name}");
    }
    for pass in 0..2 {
        for i in 0..KEYS {
            // Interleaved: the block the other store just read is in the cache.
            assert_eq!(
                a.get(key(i)).unwrap(),
                Some(value(0, i)),
                "pass {pass} key {i}"
            );
            assert_eq!(
                b.get(key(i)).unwrap(),
                Some(value(1, i)),
                "pass {pass} key {i}"
            );
            if i % 500 == 0 {
                assert!(cache.usage() <= cache.capacity(), "{}", cache.usage());
            }
        }
    }
    for (n, db) in [(0, &a), (1, &b)] {
        let got: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
        assert_eq!(got.len(), KEYS as usize);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, (_, v))| *v == value(n, i as u32)));
    }
    assert!(cache.usage() <= cache.capacity());
    assert!(cache.usage() > cache.capacity() / 2, "{}", cache.usage());
    // Each store counts its own lookups; the cache counts them all.
    let (sa, sb) = (a.statistics(), b.statistics());
    for s in [&sa, &sb] {
        assert!(s.ticker(Ticker::BlockCacheMiss) > 0);
        assert!(s.ticker(Ticker::BlockCacheHit) > 0);
    }
    let sum = |t: Ticker| sa.ticker(t) + sb.ticker(t);
    assert_eq!(cache.hits(), sum(Ticker::BlockCacheHit));
    assert_eq!(cache.misses(), sum(Ticker::BlockCacheMiss));
    // Each store's report shows its share; together they are the cache's use.
    let (own_a, own_b) = (own_cached_bytes(&a), own_cached_bytes(&b));
    assert!(own_a > 0 && own_b > 0);
    assert_eq!((own_a + own_b) as usize, cache.usage());
    // Closed, a store gives its blocks back; the other keeps reading its own.
    a.close().unwrap();
    drop(a);
    assert_eq!(cache.usage(), own_b as usize);
    assert_eq!(b.get(key(7)).unwrap(), Some(value(1, 7)));
    // Reopened, the store takes a new place in the cache: nothing it had is found stale.
    let a = Db::open(dir_a.path(), same_layout(&cache)).unwrap();
    for i in (0..KEYS).step_by(13) {
        assert_eq!(a.get(key(i)).unwrap(), Some(value(0, i)));
    }
}

#[test]
fn index_and_filter_blocks_outlive_another_stores_data_blocks() {
    let cache = Cache::new(1 << 20);
    let (dir_a, dir_b) = (scratch(), scratch());
    // A: one small table whose index and filter are charged to the cache.
    let a = Db::open(dir_a.path(), same_layout(&cache)).unwrap();
    for i in 0..2_000 {
        a.put(key(2 * i), value(0, i)).unwrap();
    }
    a.flush().unwrap();
    // B: data blocks enough to fill the cache three times over.
    let b = Db::open(
        dir_b.path(),
        Options::default()
            .block_cache(cache.clone())
            .compression(Compression::None),
    )
    .unwrap();
    for i in 0..30_000 {
        b.put(key(i), value(1, i)).unwrap();
    }
    b.flush().unwrap();
    // A's Gets of absent keys read its index and filter blocks into the cache.
    let absent_gets = |db: &Db| {
        for i in 0..2_000 {
            assert_eq!(db.get(key(2 * i + 1)).unwrap(), None);
        }
    };
    absent_gets(&a);
    let misses = |db: &Db| {
        let s = db.statistics();
        (
            s.ticker(Ticker::BlockCacheFilterMiss),
            s.ticker(Ticker::BlockCacheIndexMiss),
        )
    };
    let before = misses(&a);
    assert!(before.0 > 0);
    for _ in 0..2 {
        for i in 0..30_000 {
            assert_eq!(b.get(key(i)).unwrap(), Some(value(1, i)));
        }
    }
    assert!(b.statistics().ticker(Ticker::BlockCacheMiss) > 30_000 / 40);
    assert!(cache.usage() <= cache.capacity());
    // B's data blocks evicted one another, never A's filter or index.
    absent_gets(&a);
    assert_eq!(misses(&a), before);
}

#[test]
fn every_keyspace_of_a_store_reads_through_the_shared_cache() {
    let cache = Cache::new(4 << 20);
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default().block_cache(cache.clone())).unwrap();
    let other = db.keyspace("other").unwrap();
    for i in 0..1_000 {
        db.put(key(i), value(0, i)).unwrap();
        other.put(key(i), value(1, i)).unwrap();
    }
    db.flush().unwrap();
    other.flush().unwrap();
    assert_eq!(cache.usage(), 0);
    assert_eq!(other.get(key(3)).unwrap(), Some(value(1, 3)));
    let after_one = cache.usage();
    assert!(after_one > 0);
    assert_eq!(db.get(key(3)).unwrap(), Some(value(0, 3)));
    assert!(cache.usage() > after_one);
}
