//! Range filters: a store built with them scans exactly like one without, and like a `BTreeMap`.
//!
//! A seeded random mix of puts, deletes, range deletes, snapshots, flushes, compactions and
//! reopens goes to two stores at once, one with range filters and one without; after each step,
//! random bounded reads (`scan` of short and long ranges both ways, `scan_prefix`, `cursor_in`
//! with seeks, and each at a live snapshot) must return the same entries from both and the model.
//!
//! `SIFTDB_MODEL_OPS` sets the number of operations (default 6,000); `SIFTDB_MODEL_SEED` the seed.

use crate::common::scratch;
use std::collections::BTreeMap;
use std::ops::Bound;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::inspect::ScanDecision;
use siftdb::{Db, Options, RangeFilter, Snapshot, Ticker};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(range_filter: RangeFilter) -> Options {
    Options::default()
        .write_buffer_size(16 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .block_size(512)
        .range_filter(range_filter)
}

fn with_filter() -> RangeFilter {
    RangeFilter::grafite(10.0, 1 << 20)
}

/// Keys of three families, so that tables hold several: 16-byte keys of a fixed 8-byte head and
/// a sparse big-endian number; 12-byte keys of three tenants (4 bytes) and sparse ids; and
/// `user:<n>:<field>` strings of varying lengths. Short ranges between keys are empty; now and
/// then a key is cut short or extended, so tables' key lengths and prefixes vary.
fn key_of(n: u64, rng: &mut StdRng) -> Vec<u8> {
    let mut k = match n % 4 {
        0 | 1 => [b"sensor:7".as_slice(), &(n << 12).to_be_bytes()].concat(),
        2 => [
            (0x7e00_0000u32 + (n % 3) as u32).to_be_bytes().as_slice(),
            &(n << 12).to_be_bytes(),
        ]
        .concat(),
        _ => format!(
            "user:{n}:{}",
            ["name", "email", "last_login"][(n / 4 % 3) as usize]
        )
        .into_bytes(),
    };
    match rng.gen_range(0..50) {
        0 => k.truncate(rng.gen_range(0..k.len())),
        1 => k.push(rng.r#gen()),
        _ => {}
    }
    k
}

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    let n = rng.gen_range(0..3000);
    key_of(n, rng)
}

/// A bound near the keys: a key, a key plus a small offset, or a random short string.
fn random_bound(rng: &mut StdRng) -> Vec<u8> {
    let mut k = random_key(rng);
    match rng.gen_range(0..6) {
        0 => {
            if let Some(last) = k.last_mut() {
                *last = last.wrapping_add(rng.gen_range(1..8));
            }
        }
        1 => k.push(0),
        2 => k = vec![rng.gen_range(b'r'..b't')],
        _ => {}
    }
    k
}

fn collect(
    scan: impl Iterator<Item = siftdb::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan.collect::<siftdb::Result<_>>().expect("scan")
}

fn model_range(model: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let empty = match (lo, hi) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a > b
                || (a == b
                    && !(matches!(lo, Bound::Included(_)) && matches!(hi, Bound::Included(_))))
        }
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    model
        .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Walks a `cursor_in` cursor: a seek, then steps both ways, then seeks again.
fn cursor_walk(
    db: &Db,
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    seek: &[u8],
    steps: &[bool],
) -> Vec<Option<Vec<u8>>> {
    let mut c = db.cursor_in(range);
    c.seek(seek).expect("seek");
    let mut seen = vec![c.valid().then(|| c.key().to_vec())];
    for &forward in steps {
        if !c.valid() {
            break;
        }
        if forward {
            c.next().expect("next");
        } else {
            c.prev().expect("prev");
        }
        seen.push(c.valid().then(|| c.key().to_vec()));
    }
    c.seek_for_prev(seek).expect("seek_for_prev");
    seen.push(c.valid().then(|| c.key().to_vec()));
    c.seek(seek).expect("seek again");
    seen.push(c.valid().then(|| c.key().to_vec()));
    c.next().expect("next");
    seen.push(c.valid().then(|| c.key().to_vec()));
    c.seek(seek).expect("seek once more");
    c.prev().expect("prev");
    seen.push(c.valid().then(|| c.key().to_vec()));
    seen
}

struct Pair {
    dirs: [tempfile::TempDir; 2],
    dbs: [Db; 2],
    snapshots: Vec<([Snapshot; 2], Model)>,
    /// Range filter checks that said "no", in both stores, before their last reopen.
    useful_before: u64,
}

impl Pair {
    /// Range filter checks that said "no" in both stores since the pair was first opened.
    fn useful(&self) -> u64 {
        self.useful_before
            + self
                .dbs
                .iter()
                .map(|db| db.statistics().ticker(Ticker::RangeFilterUseful))
                .sum::<u64>()
    }
}

impl Pair {
    fn open(filters: [RangeFilter; 2], dirs: [tempfile::TempDir; 2]) -> Pair {
        let dbs = [
            Db::open(dirs[0].path(), options(filters[0])).expect("open"),
            Db::open(dirs[1].path(), options(filters[1])).expect("open"),
        ];
        Pair {
            dirs,
            dbs,
            snapshots: Vec::new(),
            useful_before: 0,
        }
    }

    fn reopen(self, filters: [RangeFilter; 2]) -> Pair {
        let useful = self.useful();
        let Pair { dirs, dbs, .. } = self;
        for db in dbs {
            db.close().expect("close");
        }
        let mut pair = Pair::open(filters, dirs);
        pair.useful_before = useful;
        pair
    }
}

fn check_reads(pair: &Pair, model: &Model, rng: &mut StdRng) {
    let lo = random_bound(rng);
    let width = if rng.gen_bool(0.8) {
        1u64 << rng.gen_range(0..16)
    } else {
        1 << 40
    };
    let mut hi = lo.clone();
    if hi.len() >= 16 {
        let tail: [u8; 8] = hi[8..16].try_into().expect("8 bytes");
        let end = u64::from_be_bytes(tail).saturating_add(width);
        hi[8..16].copy_from_slice(&end.to_be_bytes());
    } else if rng.gen_bool(0.5) {
        hi = random_bound(rng);
    } else {
        hi.push(0xff);
    }
    let ranges = [
        (Bound::Included(lo.clone()), Bound::Excluded(hi.clone())),
        (Bound::Excluded(lo.clone()), Bound::Included(hi.clone())),
        (Bound::Included(lo.clone()), Bound::Unbounded),
        (Bound::Unbounded, Bound::Included(hi.clone())),
    ];
    for range in &ranges {
        let expected = model_range(model, &range.0, &range.1);
        for db in &pair.dbs {
            assert_eq!(collect(db.scan(range.clone())), expected, "scan {range:?}");
            let mut back = collect(db.scan(range.clone()).rev());
            back.reverse();
            assert_eq!(back, expected, "scan {range:?} backward");
        }
    }
    let prefix = &lo[..lo.len().min(rng.gen_range(8..15))];
    let expected: Vec<_> = model
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for db in &pair.dbs {
        assert_eq!(
            collect(db.scan_prefix(prefix)),
            expected,
            "scan_prefix {prefix:?}"
        );
    }
    let seek = random_bound(rng);
    let steps: Vec<bool> = (0..6).map(|_| rng.gen_bool(0.6)).collect();
    // Bounded both ways, and above only (whose seeks ask the range filters from the seek on).
    for range in [ranges[0].clone(), ranges[3].clone()] {
        let walks: Vec<_> = pair
            .dbs
            .iter()
            .map(|db| cursor_walk(db, range.clone(), &seek, &steps))
            .collect();
        assert_eq!(walks[0], walks[1], "cursor_in {range:?} seek {seek:?}");
    }
    if let Some((snaps, then)) = pair.snapshots.last() {
        let range = ranges[0].clone();
        let expected = model_range(then, &range.0, &range.1);
        for (db, snap) in pair.dbs.iter().zip(snaps) {
            assert_eq!(
                collect(db.scan_at(snap, range.clone())),
                expected,
                "scan_at {range:?}"
            );
        }
    }
}

#[test]
fn a_store_with_range_filters_scans_like_one_without() {
    let ops: u64 = std::env::var("SIFTDB_MODEL_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6_000);
    let seed: u64 = std::env::var("SIFTDB_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let mut rng = StdRng::seed_from_u64(seed);
    let dirs = [scratch(), scratch()];
    let mut filters = [with_filter(), RangeFilter::none()];
    let mut pair = Pair::open(filters, dirs);
    let mut model = Model::new();
    for op in 0..ops {
        match rng.gen_range(0..1000) {
            0..=599 => {
                let k = random_key(&mut rng);
                let v = format!("v{op}").into_bytes();
                for db in &pair.dbs {
                    db.put(&k, &v).expect("put");
                }
                model.insert(k, v);
            }
            600..=799 => {
                let k = random_key(&mut rng);
                for db in &pair.dbs {
                    db.delete(&k).expect("delete");
                }
                model.remove(&k);
            }
            800..=804 => {
                let (a, b) = (random_key(&mut rng), random_key(&mut rng));
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                for db in &pair.dbs {
                    db.delete_range(a.clone()..b.clone()).expect("delete_range");
                }
                let doomed: Vec<_> = model.range(a..b).map(|(k, _)| k.clone()).collect();
                for k in doomed {
                    model.remove(&k);
                }
            }
            805..=814 => {
                for db in &pair.dbs {
                    db.flush().expect("flush");
                }
            }
            815..=817 => {
                for db in &pair.dbs {
                    db.compact().expect("compact");
                }
            }
            818..=821 => {
                let snaps = [pair.dbs[0].snapshot(), pair.dbs[1].snapshot()];
                pair.snapshots.push((snaps, model.clone()));
                if pair.snapshots.len() > 3 {
                    pair.snapshots.remove(0);
                }
            }
            822..=823 => {
                // Reopen, switching range filters between the stores now and then: tables built
                // with and without them mix, and each store reads both.
                if rng.gen_bool(0.3) {
                    filters.swap(0, 1);
                }
                pair = pair.reopen(filters);
            }
            _ => check_reads(&pair, &model, &mut rng),
        }
    }
    assert!(pair.useful() > 0, "no range filter ever ruled a table out");
}

/// A store of many tables over three levels and more, with 16-byte keys.
fn filled(dir: &std::path::Path, range_filter: RangeFilter) -> Db {
    let db = Db::open(
        dir,
        options(range_filter)
            .write_buffer_size(32 << 10)
            .level0_compaction_trigger(4),
    )
    .expect("open");
    let mut rng = StdRng::seed_from_u64(3);
    for n in 0..20_000u64 {
        let mut k = b"device42".to_vec();
        k.extend_from_slice(&((n * 7919 % 20_000) << 24).to_be_bytes());
        let v: Vec<u8> = (0..40).map(|_| rng.r#gen()).collect();
        db.put(&k, &v).expect("put");
    }
    db.flush().expect("flush");
    db
}

fn range_key(x: u64) -> Vec<u8> {
    let mut k = b"device42".to_vec();
    k.extend_from_slice(&x.to_be_bytes());
    k
}

#[test]
fn empty_short_scans_read_no_block_of_tables_the_filter_rules_out() {
    let dir = scratch();
    let db = filled(dir.path(), RangeFilter::grafite(16.0, 1 << 16));
    let before = db.statistics();
    let mut empty = 0;
    for i in 0..2000u64 {
        // Just after key i: a range of 256 integers holding nothing.
        let start = ((i * 13 % 20_000) << 24) + 1;
        let got = collect(db.scan(range_key(start)..range_key(start + 256)));
        assert!(got.is_empty());
        empty += 1;
    }
    let s = db.statistics().since(&before);
    let checked = s.ticker(Ticker::RangeFilterChecked);
    let useful = s.ticker(Ticker::RangeFilterUseful);
    let positive = s.ticker(Ticker::RangeFilterPositive);
    assert_eq!(checked, useful + positive);
    assert!(checked >= empty, "{checked} checks for {empty} scans");
    assert_eq!(s.ticker(Ticker::RangeFilterTruePositive), 0);
    // 256 / 2^14 theory: about 1.6 % "maybe"; allow 2× and noise.
    assert!(
        (positive as f64) < 0.032 * checked as f64 + 5.0,
        "{positive} of {checked}"
    );
    // Only the tables that said "maybe" were read at all.
    let block_reads = s.ticker(Ticker::BlockCacheHit) + s.ticker(Ticker::BlockCacheMiss);
    assert!(
        block_reads <= 2 * positive,
        "{block_reads} block reads for {positive} maybes"
    );
    let per_level: u64 = (0..siftdb::NUM_LEVELS)
        .map(|l| s.range_filter_counts(l).checks())
        .sum();
    assert_eq!(per_level, checked);
    let report = db.property("siftdb.stats").expect("stats");
    assert!(report.contains("range filter"), "{report}");
    // explain_scan agrees: some tables ruled out by their filter, none read that the filter
    // ruled out, and nothing counted.
    let before = db.statistics();
    let start = (13 << 24) + 1;
    let e = db
        .explain_scan(range_key(start)..range_key(start + 256))
        .expect("explain");
    assert!(e.range_filters_asked);
    assert!(e
        .tables
        .iter()
        .any(|t| matches!(t.decision, ScanDecision::RangeFilterNo { .. })));
    assert!(e.tables_read() < e.tables.len(), "{e}");
    assert_eq!(
        db.statistics()
            .since(&before)
            .ticker(Ticker::RangeFilterChecked),
        0
    );
    let at = 13u64 << 24;
    let e = db
        .explain_scan(range_key(at)..range_key(at + 256))
        .expect("explain");
    assert!(
        e.tables
            .iter()
            .any(|t| matches!(t.decision, ScanDecision::RangeFilterMaybe { .. })),
        "{e}"
    );

    // The same scans without range filters read blocks.
    let plain_dir = scratch();
    let plain = filled(plain_dir.path(), RangeFilter::none());
    let before = plain.statistics();
    for i in 0..200u64 {
        let start = ((i * 13 % 20_000) << 24) + 1;
        assert!(collect(plain.scan(range_key(start)..range_key(start + 256))).is_empty());
    }
    let s = plain.statistics().since(&before);
    assert_eq!(s.ticker(Ticker::RangeFilterChecked), 0);
    assert!(s.ticker(Ticker::BlockCacheHit) + s.ticker(Ticker::BlockCacheMiss) >= 200);
}

#[test]
fn a_cursor_bounded_above_asks_the_range_filters_from_each_seek() {
    let dir = scratch();
    let db = filled(dir.path(), RangeFilter::grafite(16.0, 1 << 16));
    let plain_dir = scratch();
    let plain = filled(plain_dir.path(), RangeFilter::none());
    // Settled: no compaction changes which tables a range meets while the seeks run.
    db.compact().expect("compact");
    let before = db.statistics();
    let mut positive = 0;
    let mut meeting_a_table = 0;
    for i in 0..500u64 {
        // Just after key i, up to 256 integers on: nothing there.
        let start = ((i * 13 % 20_000) << 24) + 1;
        let explained = db
            .explain_scan(range_key(start)..range_key(start + 256))
            .expect("explain");
        meeting_a_table += u64::from(
            explained
                .tables
                .iter()
                .any(|t| t.decision != ScanDecision::OutsideRange),
        );
        let mut c = db.cursor_in(..range_key(start + 256));
        c.seek(range_key(start)).expect("seek");
        assert!(!c.valid());
        c.status().expect("status");
    }
    let s = db.statistics().since(&before);
    let checked = s.ticker(Ticker::RangeFilterChecked);
    positive += s.ticker(Ticker::RangeFilterPositive);
    assert!(
        meeting_a_table > 400,
        "{meeting_a_table} seeks meet a table"
    );
    assert!(
        checked >= meeting_a_table,
        "{checked} checks for {meeting_a_table} seeks meeting a table"
    );
    let block_reads = s.ticker(Ticker::BlockCacheHit) + s.ticker(Ticker::BlockCacheMiss);
    assert!(
        block_reads <= 2 * positive,
        "{block_reads} block reads for {positive} maybes"
    );
    // Landing on a key, then walking both ways past the seek: every key is there, as in the
    // store without range filters.
    for i in 0..50u64 {
        let at = (i * 389 % 20_000) << 24;
        let walk = |db: &Db| {
            let mut c = db.cursor_in(..range_key(at + (1 << 26)));
            c.seek(range_key(at)).expect("seek");
            let mut seen = vec![c.key().to_vec()];
            for forward in [true, true, false, false, false, true] {
                if forward {
                    c.next().expect("next");
                } else {
                    c.prev().expect("prev");
                }
                seen.push(c.key().to_vec());
            }
            c.seek(range_key(at + 1)).expect("seek");
            seen.push(c.key().to_vec());
            c.prev().expect("prev");
            seen.push(c.key().to_vec());
            seen
        };
        let expected = walk(&plain);
        assert_eq!(expected[0], range_key(at));
        assert_eq!(walk(&db), expected, "from key {at:#x}");
    }
}

#[test]
fn a_range_holding_a_key_is_a_true_positive() {
    let dir = scratch();
    let db = filled(dir.path(), RangeFilter::grafite(16.0, 1 << 16));
    let before = db.statistics();
    for i in 0..500u64 {
        let at = (i * 13 % 20_000) << 24;
        let got = collect(db.scan(range_key(at.saturating_sub(100))..range_key(at + 100)));
        assert_eq!(got.len(), 1);
    }
    let s = db.statistics().since(&before);
    let tp = s.ticker(Ticker::RangeFilterTruePositive);
    assert!(
        tp >= 500,
        "{tp} true positives for 500 ranges holding a key"
    );
    assert!(tp <= s.ticker(Ticker::RangeFilterPositive));
}

#[test]
fn stores_turn_range_filters_on_and_off_across_reopens() {
    let dir = scratch();
    let keys: Vec<Vec<u8>> = (0..3000u64).map(|n| range_key(n << 20)).collect();
    let write = |db: &Db, from: usize, to: usize| {
        for k in &keys[from..to] {
            db.put(k, b"value").expect("put");
        }
        db.flush().expect("flush");
    };
    let check = |db: &Db, upto: usize| {
        for n in (0..3000u64).step_by(37) {
            let got = collect(db.scan(range_key(n << 20)..range_key((n << 20) + 1000)));
            assert_eq!(got.len(), usize::from((n as usize) < upto), "key {n}");
            let gap = collect(db.scan(range_key((n << 20) + 1)..range_key((n << 20) + 1000)));
            assert!(gap.is_empty());
        }
    };
    let db = Db::open(dir.path(), options(RangeFilter::none())).expect("open");
    write(&db, 0, 1000);
    check(&db, 1000);
    db.close().expect("close");
    let db = Db::open(dir.path(), options(RangeFilter::grafite(12.0, 1 << 16))).expect("open");
    check(&db, 1000);
    write(&db, 1000, 2000);
    check(&db, 2000);
    assert!(db.statistics().ticker(Ticker::RangeFilterUseful) > 0);
    db.close().expect("close");
    let db = Db::open(dir.path(), options(RangeFilter::none())).expect("open");
    check(&db, 2000);
    write(&db, 2000, 3000);
    check(&db, 3000);
    assert_eq!(db.statistics().ticker(Ticker::RangeFilterChecked), 0);
    db.compact().expect("compact");
    check(&db, 3000);
}

#[test]
fn bad_range_filter_options_are_refused() {
    let dir = scratch();
    for bad in [
        RangeFilter::grafite(f64::NAN, 16),
        RangeFilter::grafite(2.0, 16),
        RangeFilter::grafite(10.0, 0),
    ] {
        let err = Db::open(dir.path(), options(bad)).err().expect("refused");
        assert!(matches!(err, siftdb::Error::InvalidArgument(_)), "{err}");
    }
}

#[test]
fn a_keyspace_keeps_its_range_filter_across_reopens() {
    let dir = scratch();
    let keys: Vec<Vec<u8>> = (0..2000u64).map(|n| range_key(n << 20)).collect();
    {
        let db = Db::open(dir.path(), options(RangeFilter::none())).expect("open");
        let ks = db
            .keyspace_with("events", options(RangeFilter::grafite(14.0, 1 << 12)))
            .expect("keyspace");
        for k in &keys {
            ks.put(k, b"v").expect("put");
        }
        ks.flush().expect("flush");
        db.close().expect("close");
    }
    // Reopened without the option: the keyspace's own record brings its range filter back.
    let db = Db::open(dir.path(), options(RangeFilter::none())).expect("reopen");
    let ks = db.keyspace("events").expect("keyspace");
    for k in &keys {
        ks.put(k, b"w").expect("put");
    }
    ks.flush().expect("flush");
    for n in (0..2000u64).step_by(13) {
        let got = collect(ks.scan(range_key((n << 20) + 1)..range_key((n << 20) + 500)));
        assert!(got.is_empty());
    }
    let s = ks.statistics();
    assert!(s.ticker(Ticker::RangeFilterUseful) > 0, "{s}");
}

#[test]
fn a_stats_report_reads_no_range_filter_and_shows_those_scans_read() {
    let dir = scratch();
    drop(filled(dir.path(), RangeFilter::grafite(16.0, 1 << 16)));
    // Read-only: no compaction opens or drops tables while filter memory is compared.
    let db = Db::open_read_only(dir.path(), options(RangeFilter::grafite(16.0, 1 << 16)))
        .expect("open read-only");
    let row = |report: &str, level: &str| -> Vec<String> {
        let section = report
            .split("range filter (Grafite")
            .nth(1)
            .unwrap_or_else(|| panic!("no range filter section: {report}"));
        section
            .lines()
            .find(|l| l.split_whitespace().next() == Some(level))
            .unwrap_or_else(|| panic!("no {level} row: {report}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    // The first report opens every table (and reads its point filter); the second opens none.
    db.property("siftdb.stats").expect("stats");
    let before = db.statistics().filter_bytes_in_memory();
    let report = db.property("siftdb.stats").expect("stats");
    assert_eq!(db.statistics().filter_bytes_in_memory(), before, "{report}");
    let level = (0..siftdb::NUM_LEVELS)
        .map(|l| format!("L{l}"))
        .find(|l| report.contains(&format!("\n{l} ")) && row(&report, l)[1] != "0")
        .expect("a level with range filters");
    let unread = row(&report, &level);
    assert_eq!(unread[3], "0", "no range filter read yet: {report}");
    assert!(unread[2].parse::<u64>().expect("stored bytes") > 0);
    assert_eq!(unread[5], "-");

    // Short scans at every tenth key ask (and read) every table's range filter.
    for n in (0..20_000u64).step_by(10) {
        let at = n << 24;
        assert_eq!(
            collect(db.scan(range_key(at)..range_key(at + 256))).len(),
            1
        );
    }
    let report = db.property("siftdb.stats").expect("stats");
    let read = row(&report, &level);
    assert_eq!(read[3], read[1], "every table's filter read: {report}");
    let bits: f64 = read[5].parse().expect("bits per key");
    // 16 bits a key and each table's header: about a bit a key at these tables of 100–200 keys,
    // more when compactions that ran beside other work cut the tables smaller.
    assert!((16.0..18.0).contains(&bits), "{report}");
    assert!(db.statistics().filter_bytes_in_memory() > before);
}
