//! Pacing of flushes and compactions (`Options::rate_limit`, `Options::rate_limiter`): every byte
//! of every table they write goes through the limiter, under the priority of the job that wrote
//! it, and nothing else does (not the WAL). How close to the rate the writes run is measured by
//! `examples/rate_limit.rs`, not here: timing belongs in examples.

use crate::common::scratch;
use siftdb::{Compression, Db, Options, RateLimiter, Ticker};

fn key(i: u32) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

/// Small memtables and levels, so that a few thousand keys make several flushes and compactions;
/// no compaction until asked.
fn options(limiter: &RateLimiter) -> Options {
    Options::default()
        .rate_limiter(limiter.clone())
        .write_buffer_size(64 << 10)
        .level0_compaction_trigger(20)
        .compact_l0_when_idle(false)
        .compact_l0_for_reads(false)
        .max_bytes_for_level_base(128 << 10)
        .target_file_size(64 << 10)
}

fn fill(db: &Db, keys: u32) {
    for i in 0..keys {
        db.put(key(i), vec![b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
}

fn table_bytes(dbs: &[&Db]) -> u64 {
    dbs.iter()
        .map(|db| db.statistics().ticker(Ticker::TableBytesWritten))
        .sum()
}

#[test]
fn every_table_byte_of_flushes_and_compactions_goes_through_a_shared_limiter() {
    // Fast enough that the test does not wait on it.
    let limiter = RateLimiter::new(1 << 30);
    let (dir_a, dir_b) = (scratch(), scratch());
    let a = Db::open(dir_a.path(), options(&limiter)).unwrap();
    let b = Db::open(dir_b.path(), options(&limiter)).unwrap();
    fill(&a, 3_000);
    fill(&b, 2_000);
    // Flushes only so far: the limiter saw each flushed byte, under the flushes' priority, and
    // none of the WAL's.
    let flushed = table_bytes(&[&a, &b]);
    assert!(flushed > 0);
    assert!(a.statistics().ticker(Ticker::WalBytes) > 0);
    let s = limiter.stats();
    assert_eq!((s.flush_bytes, s.compaction_bytes), (flushed, 0));
    assert!(s.requests >= a.statistics().ticker(Ticker::Flushes));
    // Compactions: under theirs.
    a.compact().unwrap();
    b.compact().unwrap();
    assert!(a.statistics().ticker(Ticker::Compactions) > 0);
    let s = limiter.stats();
    assert_eq!(s.flush_bytes, flushed);
    assert_eq!(s.compaction_bytes, table_bytes(&[&a, &b]) - flushed);
    assert!(s.compaction_bytes > 0);
    for i in (0..3_000).step_by(7) {
        assert_eq!(a.get(key(i)).unwrap(), Some(vec![b'v'; 100]));
    }
    // The store reports the limiter it writes through.
    let report = a.property("siftdb.stats").unwrap();
    let line = report
        .lines()
        .find(|l| l.starts_with("rate limit:"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        line.starts_with(&format!("rate limit: {} bytes/s", 1u64 << 30)),
        "{line}"
    );
    assert!(
        line.contains(&format!("{} of compactions", s.compaction_bytes)),
        "{line}"
    );
}

#[test]
fn table_writes_faster_than_a_low_rate_wait_for_it() {
    // 4 MiB/s: requests of 10 ms of it (about 40 KiB), and a bucket that holds one. A flush of
    // about 350 KB (no codec) asks for nine requests or more, back to back, far above the rate:
    // all but the first wait (about 80 ms in all).
    let limiter = RateLimiter::new(4 << 20);
    let dir = scratch();
    let options = options(&limiter)
        .write_buffer_size(1 << 20)
        .compression(Compression::None);
    let db = Db::open(dir.path(), options).unwrap();
    for i in 0..3_000 {
        db.put(key(i), vec![b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    let s = limiter.stats();
    let flushed = table_bytes(&[&db]);
    assert_eq!(s.flush_bytes, flushed);
    assert!(s.requests >= flushed / ((4 << 20) / 100), "{s:?}");
    assert!(s.waits > 0 && s.wait_micros > 0, "{s:?}");
}

#[test]
fn a_rate_of_its_own_paces_a_store_and_zero_turns_pacing_off() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default().rate_limit(1 << 30)).unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    let report = db.property("siftdb.stats").unwrap();
    let line = report.lines().find(|l| l.starts_with("rate limit:"));
    let line = line.unwrap_or_else(|| panic!("{report}"));
    let flushed = db.statistics().ticker(Ticker::TableBytesWritten);
    assert!(
        line.contains(&format!("paced {flushed} bytes of flushes")),
        "{line}"
    );
    drop(db);
    let other = scratch();
    let off = Options::default().rate_limit(1 << 30).rate_limit(0);
    let db = Db::open(other.path(), off).unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    let report = db.property("siftdb.stats").unwrap();
    assert!(!report.contains("rate limit:"), "{report}");
}

#[test]
fn a_rate_changed_while_the_store_writes_applies_to_the_next_tables() {
    let limiter = RateLimiter::new(1 << 30);
    let dir = scratch();
    let db = Db::open(dir.path(), options(&limiter)).unwrap();
    fill(&db, 1_000);
    // Unlimited, it goes on counting.
    limiter.set_bytes_per_second(0);
    assert_eq!(limiter.bytes_per_second(), 0);
    fill(&db, 2_000);
    limiter.set_bytes_per_second(1 << 30);
    db.compact().unwrap();
    let s = limiter.stats();
    let written = db.statistics().ticker(Ticker::TableBytesWritten);
    assert_eq!(s.flush_bytes + s.compaction_bytes, written);
}
