//! Concurrent readers and a writer with background flushes and compactions, for a bounded time.
//!
//! The writer writes key `k{i}` with value `v{i}-{round}` in rounds; readers check that every value
//! they see is one the writer wrote for that key, and that a key, once seen, never disappears
//! (keys are never deleted here).

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
    let dir = tempfile::tempdir().unwrap();
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
