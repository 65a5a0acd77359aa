//! Concurrent readers and a writer with background flushes and compactions, for a bounded time.
//!
//! The writer writes key `k{i}` with value `v{i}-{round}` in rounds; readers check that every value
//! they see is one the writer wrote for that key, and that a key, once seen, never disappears
//! (keys are never deleted here).

use crate::common;
use common::long;
use common::scratch;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use siftdb::{Db, Options};

const KEYS: u64 = 4000;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

#[test]
fn readers_see_only_written_values_while_a_writer_flushes_and_compacts() {
    let dir = scratch();
    let db = Arc::new(
        Db::open(
            dir.path(),
            Options::default()
                .write_buffer_size(64 << 10)
                .target_file_size(32 << 10)
                .max_bytes_for_level_base(128 << 10),
        )
        .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    // Highest round fully written: every key below KEYS has a value of at least this round.
    let round_done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(6);

    let writer = {
        let (db, stop, round_done) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&round_done));
        std::thread::spawn(move || {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..KEYS {
                    db.put(key(i), format!("v{i}-{round}")).unwrap();
                }
                round_done.store(round, Ordering::SeqCst);
                round += 1;
            }
            round
        })
    };
    let readers: Vec<_> = (0..4)
        .map(|r| {
            let (db, stop, round_done) =
                (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&round_done));
            std::thread::spawn(move || {
                let mut reads = 0u64;
                let mut i = r as u64;
                while !stop.load(Ordering::Relaxed) {
                    let floor = round_done.load(Ordering::SeqCst);
                    i = (i * 7919 + 13) % KEYS;
                    match db.get(key(i)).unwrap() {
                        Some(v) => {
                            let v = String::from_utf8(v).unwrap();
                            let (prefix, round) = v.rsplit_once('-').unwrap();
                            assert_eq!(prefix, format!("v{i}"), "value of another key");
                            let round: u64 = round.parse().unwrap();
                            assert!(
                                round >= floor,
                                "key {i}: round {round} older than completed round {floor}"
                            );
                        }
                        None => assert_eq!(floor, 0, "key {i} vanished after round {floor}"),
                    }
                    if reads.is_multiple_of(500) {
                        // A scan is a consistent view: one value per key, keys in order.
                        let keys: Vec<Vec<u8>> =
                            db.scan(key(100)..key(200)).map(|r| r.unwrap().0).collect();
                        assert!(keys.windows(2).all(|w| w[0] < w[1]));
                        if floor > 0 {
                            assert_eq!(keys.len(), 100);
                        }
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let stats = db.statistics();
    eprintln!("{rounds} rounds written, {reads} reads\n{stats}");
    assert!(rounds > 2 && reads > 1000);
    assert!(
        stats.ticker(siftdb::Ticker::Flushes) > 0 && stats.ticker(siftdb::Ticker::Compactions) > 0
    );
}

/// Whether round `r` deletes key `i` rather than writing it (a fixed pseudo-random quarter).
fn deleted_in(i: u64, r: u64) -> bool {
    (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ r.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)) >> 61 < 2
}

/// Whether `got` is a state key `i` had after some round in `floor..=ceil` (round 0 = never
/// written).
fn allowed(i: u64, got: Option<&[u8]>, floor: u64, ceil: u64) -> bool {
    match got {
        None => floor == 0 || (floor..=ceil).any(|r| r > 0 && deleted_in(i, r)),
        Some(v) => {
            let Some((prefix, round)) =
                std::str::from_utf8(v).ok().and_then(|s| s.rsplit_once('-'))
            else {
                return false;
            };
            let Ok(r) = round.parse::<u64>() else {
                return false;
            };
            prefix == format!("v{i}") && (floor.max(1)..=ceil).contains(&r) && !deleted_in(i, r)
        }
    }
}

/// Four readers (gets and scans), one writer (puts and deletes), one thread forcing flushes and
/// manual compactions, and the background flush and compaction workers (with compactions for
/// reads made cheap), for a bounded time. Every
/// read must return a state the key had in a round between the last round completed before the
/// read and the round under way after it. A watchdog fails the test if the threads do not all
/// finish by a deadline (a deadlock), instead of hanging CI.
#[test]
fn readers_writer_deletes_and_compactions_stay_consistent_and_finish() {
    let run_for = Duration::from_secs(if long() { 120 } else { 6 });
    let keys: u64 = 2000;
    let dir = scratch();
    let db = Arc::new(
        Db::open(
            dir.path(),
            Options::default()
                .write_buffer_size(32 << 10)
                .target_file_size(16 << 10)
                .max_bytes_for_level_base(64 << 10)
                .level0_compaction_trigger(2)
                .filter(siftdb::Filter::partitioned(10.0))
                // Compactions for reads after a few hundred Gets that miss L0, looked for every
                // millisecond: L0 is also compacted under the readers' feet.
                .read_compaction_tuning(256, 1024, Duration::from_millis(1)),
        )
        .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let round_done = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<(&'static str, u64)>();

    let mut handles = Vec::new();
    {
        let (db, stop, round_done, tx) = (
            Arc::clone(&db),
            Arc::clone(&stop),
            Arc::clone(&round_done),
            done_tx.clone(),
        );
        handles.push(std::thread::spawn(move || {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..keys {
                    if deleted_in(i, round) {
                        db.delete(key(i)).unwrap();
                    } else {
                        db.put(key(i), format!("v{i}-{round}")).unwrap();
                    }
                }
                round_done.store(round, Ordering::SeqCst);
                round += 1;
            }
            tx.send(("writer", round - 1)).unwrap();
        }));
    }
    for r in 0..4u64 {
        let (db, stop, round_done, tx) = (
            Arc::clone(&db),
            Arc::clone(&stop),
            Arc::clone(&round_done),
            done_tx.clone(),
        );
        handles.push(std::thread::spawn(move || {
            let mut reads = 0u64;
            let mut i = r;
            while !stop.load(Ordering::Relaxed) {
                i = (i * 7919 + 13) % keys;
                let floor = round_done.load(Ordering::SeqCst);
                let got = db.get(key(i)).unwrap();
                let ceil = round_done.load(Ordering::SeqCst) + 1;
                assert!(
                    allowed(i, got.as_deref(), floor, ceil),
                    "key {i}: {:?} is no state of rounds {floor}..={ceil}",
                    got.map(String::from_utf8)
                );
                if reads.is_multiple_of(300) {
                    let lo = (i * 31) % keys;
                    let floor = round_done.load(Ordering::SeqCst);
                    let entries: Vec<(Vec<u8>, Vec<u8>)> = db
                        .scan(key(lo)..key(lo + 150))
                        .map(|r| r.unwrap())
                        .collect();
                    let ceil = round_done.load(Ordering::SeqCst) + 1;
                    assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
                    let present: std::collections::HashSet<u64> = entries
                        .iter()
                        .map(|(k, _)| std::str::from_utf8(&k[1..]).unwrap().parse().unwrap())
                        .collect();
                    for (k, v) in &entries {
                        let j: u64 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
                        assert!(allowed(j, Some(v), floor, ceil), "scan: key {j}");
                    }
                    for j in (lo..lo + 150).filter(|j| *j < keys && !present.contains(j)) {
                        assert!(allowed(j, None, floor, ceil), "scan lost key {j}");
                    }
                }
                reads += 1;
            }
            tx.send(("reader", reads)).unwrap();
        }));
    }
    {
        let (db, stop, tx) = (Arc::clone(&db), Arc::clone(&stop), done_tx.clone());
        handles.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(300));
                if n % 3 == 2 {
                    db.compact().unwrap();
                } else {
                    db.flush().unwrap();
                }
                n += 1;
            }
            tx.send(("maintenance", n)).unwrap();
        }));
    }
    drop(done_tx);

    // At least `run_for`; on a busy machine, on until the writer finished two rounds and a flush,
    // a compaction and a read-triggered compaction all ran (at most a minute).
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let stats = db.statistics();
        let every_path = round_done.load(Ordering::SeqCst) >= 2
            && stats.ticker(siftdb::Ticker::Flushes) > 0
            && stats.ticker(siftdb::Ticker::Compactions) > 0
            && stats.ticker(siftdb::Ticker::ReadTriggeredCompactions) > 0;
        if (every_path && started.elapsed() >= run_for)
            || started.elapsed() > Duration::from_secs(60)
        {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    // Watchdog: every thread must report within the grace period after being told to stop.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut finished = Vec::new();
    while finished.len() < handles.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left) {
            Ok(report) => finished.push(report),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!(
                "deadlock: only {:?} finished within 30 s of the stop signal",
                finished
            ),
            // A thread panicked (its sender is gone): join reports its assertion.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    let stats = db.statistics();
    eprintln!("{finished:?}\n{stats}");
    let reads: u64 = finished
        .iter()
        .filter(|(who, _)| *who == "reader")
        .map(|(_, n)| n)
        .sum();
    let rounds = finished.iter().find(|(w, _)| *w == "writer").unwrap().1;
    assert!(
        rounds >= 2 && reads > 1000,
        "{rounds} rounds, {reads} reads"
    );
    assert!(stats.ticker(siftdb::Ticker::Flushes) > 0);
    assert!(stats.ticker(siftdb::Ticker::Compactions) > 0);
    assert!(stats.ticker(siftdb::Ticker::ReadTriggeredCompactions) > 0);
}

/// Many writers at once: every acknowledged write is there after a reopen, each writer's own
/// writes apply in its order, and concurrent synced writes share fsyncs (group commit).
#[test]
fn concurrent_writers_commit_in_groups_and_lose_nothing() {
    const WRITERS: u64 = 8;
    const EACH: u64 = 200;
    // On the disk, not tmpfs: a real fsync takes long enough for writers to queue into groups.
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options::default().write_buffer_size(256 << 10);
    let db = Arc::new(Db::open(dir.path(), opts()).unwrap());
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..EACH {
                    let mut batch = siftdb::WriteBatch::new();
                    batch.put(format!("w{w}-{i:04}"), format!("v{i}"));
                    // Each writer's last-written marker must end at its last write.
                    batch.put(format!("last-{w}"), format!("{i}"));
                    db.write_opt(batch, &siftdb::WriteOptions { sync: true })
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let syncs = db.statistics().ticker(siftdb::Ticker::WalSyncs);
    assert!(
        syncs < WRITERS * EACH,
        "{syncs} fsyncs for {} synced writes: no write shared a group",
        WRITERS * EACH
    );
    drop(db);
    let db = Db::open(dir.path(), opts()).unwrap();
    for w in 0..WRITERS {
        for i in 0..EACH {
            let got = db.get(format!("w{w}-{i:04}")).unwrap();
            assert_eq!(
                got,
                Some(format!("v{i}").into_bytes()),
                "writer {w} write {i}"
            );
        }
        let last = db.get(format!("last-{w}")).unwrap();
        assert_eq!(last, Some(format!("{}", EACH - 1).into_bytes()));
    }
}
