//! Prefix filters through the store: prefix scans agree with a filtered full scan for every
//! layout across flush, compaction and reopen; skipped tables are counted exactly; another
//! extractor reads old tables correctly; point Gets with whole-key filtering off use prefixes.

use crate::common;
use common::check_across_flush_compaction_and_reopen;
use common::scratch;
use siftdb::{Db, Filter, Options, PrefixExtractor, Ticker};

fn key(prefix: u32, i: u32) -> Vec<u8> {
    format!("{prefix:05}:{i:04}").into_bytes()
}

fn layouts() -> Vec<Filter> {
    vec![
        Filter::block_based(10.0),
        Filter::full(10.0),
        // Tiny partitions: prefixes straddle many cuts.
        Filter::partitioned(10.0).partition_bytes(128),
    ]
}

fn options(filter: Filter) -> Options {
    Options::default()
        .filter(filter)
        .prefix_extractor(PrefixExtractor::fixed(5))
        .write_buffer_size(256 << 10)
        .target_file_size(64 << 10)
        .max_bytes_for_level_base(256 << 10)
}

fn full_scan_with_prefix(db: &Db, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter()
        .map(|r| r.unwrap())
        .filter(|(k, _)| k.starts_with(prefix))
        .collect()
}

#[test]
fn prefix_scans_match_filtered_full_scans_for_every_layout() {
    for filter in layouts() {
        let dir = scratch();
        let check = |db: &Db, stage: &str| {
            for p in (0..400).step_by(7) {
                let prefix = format!("{p:05}").into_bytes();
                let got: Vec<_> = db.scan_prefix(&prefix).map(|r| r.unwrap()).collect();
                assert_eq!(
                    got,
                    full_scan_with_prefix(db, &prefix),
                    "{filter:?} prefix {p} after {stage}"
                );
            }
            // A range inside one prefix is filtered too, and agrees.
            let got: Vec<_> = db
                .scan(key(22, 3)..key(22, 30))
                .map(|r| r.unwrap().0)
                .collect();
            let want: Vec<_> = (3..30)
                .filter(|i| (22 + i) % 3 != 0)
                .map(|i| key(22, i))
                .collect();
            assert_eq!(got, want, "{filter:?} range after {stage}");
        };
        let db = Db::open(dir.path(), options(filter.clone())).unwrap();
        // Only even prefixes exist; each with 40 keys, some deleted.
        for p in (0..400).step_by(2) {
            for i in 0..40 {
                db.put(key(p, i), format!("v{p}-{i}")).unwrap();
            }
        }
        for p in (0..400).step_by(2) {
            for i in (0..40).filter(|i| (p + i) % 3 == 0) {
                db.delete(key(p, i)).unwrap();
            }
        }
        check(&db, "writes");
        let db = check_across_flush_compaction_and_reopen(
            db,
            dir.path(),
            options(filter.clone()),
            check,
        );
        let before = db.statistics();
        for p in (1..400).step_by(2) {
            assert_eq!(db.scan_prefix(format!("{p:05}")).count(), 0);
        }
        let s = db.statistics().since(&before);
        let (checked, useful) = (
            s.ticker(Ticker::BloomFilterPrefixChecked),
            s.ticker(Ticker::BloomFilterPrefixUseful),
        );
        assert!(
            checked > 0 && useful as f64 >= checked as f64 * 0.95,
            "{filter:?}: checked {checked} useful {useful}"
        );
    }
}

#[test]
fn prefix_counters_count_every_checked_and_skipped_table() {
    for filter in layouts() {
        let dir = scratch();
        let tables = 5u32;
        // Keep every table in L0, each holding the prefixes p with p % 5 == t, so every table's
        // key range covers every prefix and exactly one table holds any given prefix.
        let db = Db::open(
            dir.path(),
            options(filter.clone()).level0_compaction_trigger(10),
        )
        .unwrap();
        for t in 0..tables {
            for p in (0..500).filter(|p| p % tables == t) {
                for i in 0..5 {
                    db.put(key(p, i), b"v").unwrap();
                }
            }
            db.flush().unwrap();
        }
        assert_eq!(
            db.property("siftdb.num-files-at-level0").unwrap(),
            tables.to_string()
        );
        let before = db.statistics();
        let scans = 300u32;
        for p in 100..100 + scans {
            assert_eq!(db.scan_prefix(format!("{p:05}")).count(), 5);
        }
        let s = db.statistics().since(&before);
        let checked = s.ticker(Ticker::BloomFilterPrefixChecked);
        let useful = s.ticker(Ticker::BloomFilterPrefixUseful);
        // Every table's range reaches every prefix, so every table is checked once per scan; the one
        // holding the prefix is never skipped; nearly all others are.
        assert_eq!(checked, u64::from(tables * scans), "{filter:?}");
        assert!(
            useful <= u64::from((tables - 1) * scans),
            "{filter:?}: a holding table was skipped"
        );
        assert!(
            useful as f64 >= f64::from((tables - 1) * scans) * 0.95,
            "{filter:?}: useful {useful}"
        );
        // checked = useful + tables scanned.
        let scanned = checked - useful;
        assert!(scanned >= u64::from(scans), "{filter:?}");
    }
}

#[test]
fn another_extractor_reads_old_tables_correctly_without_their_prefix_filter() {
    let dir = scratch();
    {
        let db = Db::open(dir.path(), options(Filter::full(10.0))).unwrap();
        for p in 0..100 {
            db.put(key(p, 1), b"v").unwrap();
        }
        db.flush().unwrap();
    }
    let other = Options::default()
        .filter(Filter::full(10.0))
        .prefix_extractor(PrefixExtractor::fixed(3));
    let db = Db::open(dir.path(), other).unwrap();
    let before = db.statistics();
    let got: Vec<_> = db.scan_prefix("000").map(|r| r.unwrap().0).collect();
    assert_eq!(got.len(), 100);
    assert_eq!(db.scan_prefix("00042").count(), 1);
    let s = db.statistics().since(&before);
    assert_eq!(
        s.ticker(Ticker::BloomFilterPrefixChecked),
        0,
        "the old table's prefixes are of another extractor"
    );
    // Whole keys still filter point Gets.
    assert_eq!(db.get(key(42, 1)).unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.get(key(42, 2)).unwrap(), None);
    drop(db);
    // And a store with no extractor at all reads it too.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.scan_prefix("00042").count(), 1);
}

#[test]
fn without_whole_key_filtering_point_gets_ask_the_prefix() {
    for filter in layouts() {
        let dir = scratch();
        let db = Db::open(
            dir.path(),
            options(filter.clone()).whole_key_filtering(false),
        )
        .unwrap();
        for p in (0..2000).step_by(2) {
            db.put(key(p, 0), b"v").unwrap();
        }
        db.flush().unwrap();
        let before = db.statistics();
        for p in (0..2000).step_by(2) {
            assert_eq!(db.get(key(p, 0)).unwrap(), Some(b"v".to_vec()));
        }
        let hits = db.statistics().since(&before).filter_totals();
        assert_eq!(hits.true_positive, 1000, "{filter:?}");
        let before = db.statistics();
        for p in (1..2000).step_by(2) {
            assert_eq!(db.get(key(p, 0)).unwrap(), None); // prefix absent: filtered
        }
        let absent_prefix = db.statistics().since(&before).filter_totals();
        assert!(absent_prefix.useful >= 950, "{filter:?}: {absent_prefix:?}");
        let before = db.statistics();
        for p in (0..2000).step_by(2) {
            assert_eq!(db.get(key(p, 1)).unwrap(), None); // prefix present, key absent
        }
        let present = db.statistics().since(&before);
        let present_prefix = present.filter_totals();
        // The prefix cannot rule these out, except where the block-based layout asks the filter of
        // a neighbouring block (the one the index picks for the absent key) that lacks the prefix.
        // (The last key sorts past the table and consults nothing.)
        assert_eq!(
            present_prefix.checks(),
            present.ticker(Ticker::TablesConsulted),
            "{filter:?}"
        );
        assert!(
            present_prefix.positive >= 950,
            "{filter:?}: {present_prefix:?}"
        );
        assert_eq!(present_prefix.true_positive, 0, "{filter:?}");
    }
}
