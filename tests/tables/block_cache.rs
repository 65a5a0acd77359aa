//! Index and filter blocks charged to the block cache (`Options::cache_index_and_filter_blocks`):
//! nothing of them is pinned with the tables, Gets and scans stay correct with a cache far smaller
//! than the filters (and with none at all), every filter layout reads its blocks back after
//! eviction, and the report shows what the cache holds.

use crate::common::scratch;
use siftdb::{Db, Filter, Options, RangeFilter, Ticker};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// A key between two written ones: absent, inside the tables' key ranges.
fn absent(i: u32) -> Vec<u8> {
    format!("key{i:08}x").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat((i % 50) as usize)).into_bytes()
}

const KEYS: u32 = 30_000;

fn options(filter: Filter, cache_bytes: usize) -> Options {
    Options::default()
        .write_buffer_size(256 << 10)
        .target_file_size(128 << 10)
        .block_cache_bytes(cache_bytes)
        .cache_index_and_filter_blocks(true)
        .filter(filter)
}

/// Every key reads back, every absent key is absent, and a scan sees all keys in order.
fn check(db: &Db, what: &str) {
    for i in (0..KEYS).step_by(7) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "{what}: key {i}");
        assert_eq!(db.get(absent(i)).unwrap(), None, "{what}: absent {i}");
    }
    let mut n = 0;
    for (i, item) in db.iter().enumerate() {
        let (k, v) = item.unwrap();
        assert_eq!(
            (k, v),
            (key(i as u32), value(i as u32)),
            "{what}: scan at {i}"
        );
        n += 1;
    }
    assert_eq!(n, KEYS, "{what}: scan");
}

fn fill(db: &Db) {
    for i in 0..KEYS {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
}

#[test]
fn gets_and_scans_stay_correct_with_filters_evicted_from_a_tiny_cache() {
    for filter in [
        Filter::full(10.0),
        Filter::partitioned(10.0).partition_bytes(1024),
        Filter::block_based(10.0),
    ] {
        let what = format!("{filter:?}");
        let dir = scratch();
        // 16 KiB: a few of the tables' filter and index blocks at a time, far below their total.
        let opts = || options(filter.clone(), 16 << 10);
        let db = Db::open(dir.path(), opts()).unwrap();
        fill(&db);
        db.compact().unwrap();
        let before = db.statistics();
        check(&db, &what);
        let s = db.statistics().since(&before);
        // Filters were read back after eviction, and still said "no" to absent keys.
        assert!(s.ticker(Ticker::BlockCacheFilterMiss) > 0, "{what}");
        assert!(s.ticker(Ticker::BloomFilterUseful) > 0, "{what}");
        if what.contains("partitioned") {
            // The partition index stays with the table; the partitions are charged.
            assert!(db.statistics().filter_bytes_in_memory() > 0, "{what}");
        } else {
            assert_eq!(db.statistics().filter_bytes_in_memory(), 0, "{what}");
            assert!(s.ticker(Ticker::BlockCacheIndexMiss) > 0, "{what}");
        }
        let report = db.property("siftdb.stats").unwrap();
        assert!(report.contains("charged to the block cache"), "{report}");
        drop(db);
        let db = Db::open(dir.path(), opts()).unwrap();
        check(&db, &format!("{what}, reopened"));
    }
}

#[test]
fn no_block_cache_at_all_reads_every_block_from_the_table() {
    let dir = scratch();
    let db = Db::open(dir.path(), options(Filter::full(10.0), 0)).unwrap();
    fill(&db);
    check(&db, "no cache");
    assert_eq!(db.statistics().filter_bytes_in_memory(), 0);
}

#[test]
fn pinned_l0_tables_keep_their_filters_while_deeper_ones_are_charged() {
    let dir = scratch();
    let opts = options(Filter::full(10.0), 1 << 20)
        .pin_l0_filter_and_index_blocks_in_cache(true)
        .level0_compaction_trigger(8);
    let db = Db::open(dir.path(), opts).unwrap();
    fill(&db);
    assert_ne!(db.property("siftdb.num-files-at-level0").unwrap(), "0");
    check(&db, "L0 pinned");
    assert!(db.statistics().filter_bytes_in_memory() > 0);
    db.compact().unwrap();
    check(&db, "compacted");
    // Nothing left in L0: no filter is pinned any more.
    assert_eq!(db.statistics().filter_bytes_in_memory(), 0);
}

#[test]
fn a_cache_large_enough_keeps_every_filter_and_index_after_the_first_read() {
    let dir = scratch();
    let db = Db::open(dir.path(), options(Filter::full(10.0), 64 << 20)).unwrap();
    fill(&db);
    db.compact().unwrap();
    check(&db, "first pass");
    let before = db.statistics();
    for i in (0..KEYS).step_by(3) {
        assert_eq!(db.get(absent(i)).unwrap(), None);
    }
    let s = db.statistics().since(&before);
    assert_eq!(s.ticker(Ticker::BlockCacheFilterMiss), 0);
    assert_eq!(s.ticker(Ticker::BlockCacheIndexMiss), 0);
    assert!(s.ticker(Ticker::BlockCacheFilterHit) > 0);
}

/// A fixed head and the big-endian number `x`, as in the range filter tests.
fn device_key(x: u64) -> Vec<u8> {
    let mut k = b"device42".to_vec();
    k.extend_from_slice(&x.to_be_bytes());
    k
}

/// Keys far apart: a scan just after one key holds nothing.
fn sparse_key(n: u64) -> Vec<u8> {
    device_key(n << 24)
}

const SPARSE_KEYS: u64 = 30_000;

fn range_filter_options(charged: bool, cache_bytes: usize) -> Options {
    Options::default()
        .write_buffer_size(256 << 10)
        .target_file_size(128 << 10)
        .block_cache_bytes(cache_bytes)
        .cache_index_and_filter_blocks(charged)
        .filter(Filter::none())
        .range_filter(RangeFilter::grafite(16.0, 1 << 16))
}

/// Short empty scans just after keys, and scans of three keys: every one returns what was
/// written (the same as a store without range filters returns).
fn check_scans(db: &Db, what: &str) {
    for n in (0..SPARSE_KEYS).step_by(29) {
        let start = (n << 24) + 1;
        let got: Vec<_> = db
            .scan(device_key(start)..device_key(start + 256))
            .collect::<siftdb::Result<_>>()
            .unwrap();
        assert!(got.is_empty(), "{what}: empty scan after {n}");
        let got: Vec<_> = db
            .scan(sparse_key(n)..sparse_key(n + 3))
            .collect::<siftdb::Result<_>>()
            .unwrap();
        let expected: Vec<_> = (n..(n + 3).min(SPARSE_KEYS))
            .map(|i| (sparse_key(i), value(i as u32)))
            .collect();
        assert_eq!(got, expected, "{what}: scan from {n}");
    }
}

/// The block cache's filter usage, from the `siftdb.stats` report.
fn cached_filter_bytes(db: &Db) -> u64 {
    let report = db.property("siftdb.stats").unwrap();
    let line = report
        .lines()
        .find(|l| l.starts_with("block cache:"))
        .unwrap_or_else(|| panic!("{report}"));
    let after = line
        .split("filter ")
        .nth(1)
        .unwrap_or_else(|| panic!("{line}"));
    after.split(',').next().unwrap().trim().parse().unwrap()
}

#[test]
fn range_filters_are_charged_to_the_cache_evicted_and_read_again() {
    let dir = scratch();
    // Kept with the tables: the range filters' bytes, once every table's filter was asked.
    let db = Db::open(dir.path(), range_filter_options(false, 64 << 20)).unwrap();
    for n in 0..SPARSE_KEYS {
        db.put(sparse_key(n), value(n as u32)).unwrap();
    }
    db.compact().unwrap();
    check_scans(&db, "kept");
    let kept = db.statistics().filter_bytes_in_memory();
    assert!(kept > 0);
    assert_eq!(cached_filter_bytes(&db), 0);
    drop(db);

    // Charged, in a cache that holds them all: the same bytes, in the cache as filter blocks,
    // and a second pass finds every one there.
    let db = Db::open(dir.path(), range_filter_options(true, 64 << 20)).unwrap();
    let before = db.statistics();
    check_scans(&db, "charged");
    let s = db.statistics().since(&before);
    assert!(s.ticker(Ticker::BlockCacheFilterMiss) > 0);
    assert!(s.ticker(Ticker::RangeFilterUseful) > 0);
    assert_eq!(db.statistics().filter_bytes_in_memory(), 0);
    assert_eq!(cached_filter_bytes(&db), kept);
    let before = db.statistics();
    check_scans(&db, "charged, second pass");
    let s = db.statistics().since(&before);
    assert_eq!(s.ticker(Ticker::BlockCacheFilterMiss), 0);
    assert!(s.ticker(Ticker::BlockCacheFilterHit) > 0);
    drop(db);

    // Charged, in a cache far smaller than the range filters: they are evicted and read again,
    // and the scans still return what was written, the filters still ruling tables out.
    let cache = 16 << 10;
    assert!(kept > 2 * cache as u64, "{kept} bytes of range filters");
    let db = Db::open(dir.path(), range_filter_options(true, cache)).unwrap();
    check_scans(&db, "tiny cache");
    let before = db.statistics();
    check_scans(&db, "tiny cache, second pass");
    let s = db.statistics().since(&before);
    assert!(s.ticker(Ticker::BlockCacheFilterMiss) > 0);
    assert!(s.ticker(Ticker::RangeFilterUseful) > 0);
    assert!(cached_filter_bytes(&db) <= cache as u64);
    assert_eq!(db.statistics().filter_bytes_in_memory(), 0);
}
