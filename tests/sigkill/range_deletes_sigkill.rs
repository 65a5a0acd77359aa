//! SIGKILL loops against range deletes, as `tests/sigkill/crash.rs` does for puts and deletes.
//!
//! The child opens a store with tiny memtables and tables and applies operation after operation,
//! every fourth synced, printing `ack <i>` once operation `i` has returned `Ok`. Operation `i` is
//! one batch: it puts `key(i)`; every seventh also deletes the range of the ten keys written 20
//! to 11 operations earlier, and every 101st the range of the keys written 400 to 151 operations
//! earlier (by then in tables of several levels). The parent kills the child with SIGKILL after a
//! random delay (landing in recovery, flushes of memtables holding range tombstones, and
//! compactions dropping what they cover), reopens the store and checks:
//!
//! - it holds exactly the state after a prefix `0..m` of the operations: no key a recovered range
//!   deletion covers comes back, no batch is half applied, no hole, nothing reordered;
//! - `m` covers every acknowledged operation, synced or not (SIGKILL keeps the page cache);
//! - a Get of every key written agrees, present or deleted.
//!
//! Short mode (plain `cargo test`): 30 kills. `SIFTDB_LONG=1`: 1,000;
//! `SIFTDB_RANGE_KILLS=n`: any number.

use crate::common;
use common::child::{
    differences, key, kill_loop, options, parse_key, spawn_lock, test_name, value,
};
use common::{env_number, long};
use std::path::Path;
use std::time::Instant;

use rand::{rngs::StdRng, SeedableRng};
use siftdb::{Db, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "SIFTDB_RANGE_CRASH_CHILD";

/// The range operation `i` deletes besides putting `key(i)`, if any: `[key(lo), key(hi))`.
fn deletes_range(i: u64) -> Option<(u64, u64)> {
    if i % 101 == 100 && i >= 400 {
        Some((i - 400, i - 150))
    } else if i % 7 == 6 && i >= 20 {
        Some((i - 20, i - 10))
    } else {
        None
    }
}

/// Which of the keys `0..m` are live after operations `0..m`.
fn live_after(m: u64) -> Vec<bool> {
    let mut live = vec![true; m as usize];
    for r in 0..m {
        if let Some((lo, hi)) = deletes_range(r) {
            live[lo as usize..hi as usize].fill(false);
        }
    }
    live
}

/// Child side: never returns normally while the parent is alive; it is killed.
#[test]
fn range_deletes_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // Not a child: nothing to do in a normal test run.
    };
    let var = |name: &str| -> u64 { std::env::var(name).unwrap().parse().unwrap() };
    let start = var("SIFTDB_RANGE_CRASH_START");
    let epoch = var("SIFTDB_RANGE_CRASH_EPOCH");
    let db = Db::open(&dir, options(epoch)).unwrap();
    let mut out = std::io::stdout().lock();
    for i in start.. {
        let mut b = WriteBatch::new();
        if let Some((lo, hi)) = deletes_range(i) {
            b.delete_range(key(lo)..key(hi));
        }
        b.put(key(i), value(i));
        db.write_opt(b, &WriteOptions { sync: i % 4 == 3 }).unwrap();
        use std::io::Write;
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

/// Reopens the store and checks it against the model; returns the recovered prefix length.
fn check(dir: &Path, epoch: u64, acked: Option<u64>, kill: usize) -> u64 {
    let _guard = spawn_lock();
    let db = Db::open(dir, options(epoch))
        .unwrap_or_else(|e| panic!("kill {kill}: open after SIGKILL failed: {e}"));
    let entries: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .map(|r| r.unwrap_or_else(|e| panic!("kill {kill}: scan failed: {e}")))
        .collect();
    // The newest operation always leaves its own key live (ranges delete only older keys): the
    // prefix ends after the newest key found.
    let m = entries.last().map_or(0, |(k, _)| parse_key(k) + 1);
    if let Some(a) = acked {
        assert!(
            m > a,
            "kill {kill}: acknowledged op {a} lost (recovered prefix 0..{m})"
        );
    }
    let live = live_after(m);
    let expected: Vec<u64> = (0..m).filter(|&j| live[j as usize]).collect();
    let got: Vec<u64> = entries.iter().map(|(k, _)| parse_key(k)).collect();
    if let Some((missing, extra)) = differences(&expected, &got) {
        panic!(
            "kill {kill}: the store is not the state after operations 0..{m}: missing \
             {missing:?}, extra {extra:?}"
        );
    }
    for (k, v) in &entries {
        assert_eq!(*v, value(parse_key(k)), "kill {kill}: wrong value");
    }
    // Every key written, present or deleted, read back by a Get (a few past the prefix too).
    for j in 0..m + 5 {
        let got = db
            .get(key(j))
            .unwrap_or_else(|e| panic!("kill {kill}: get failed: {e}"));
        let want = live.get(j as usize).is_some_and(|&l| l).then(|| value(j));
        assert_eq!(
            got, want,
            "kill {kill}: get of key {j} after operations 0..{m}"
        );
    }
    m
}

fn kills() -> usize {
    env_number("SIFTDB_RANGE_KILLS", if long() { 1000 } else { 30 }) as usize
}

#[test]
fn sigkill_amid_range_deletes_keeps_every_acknowledged_batch_whole_and_in_order() {
    let kills = kills();
    let mut rng = StdRng::seed_from_u64(0x7a9e_0011);
    let started = Instant::now();
    let root = common::scratch();
    let mut ranges_recovered = 0u64;
    // A fresh store every 10 kills bounds the data each check reads and rotates the filter.
    let acked_total = kill_loop(
        kills,
        &mut rng,
        root.path(),
        10,
        &test_name(module_path!(), "range_deletes_crash_child"),
        CHILD_ENV,
        "SIFTDB_RANGE_CRASH",
        |dir, epoch, acked, kill, start| {
            let m = check(dir, epoch, acked, kill);
            ranges_recovered += (start..m).filter(|&i| deletes_range(i).is_some()).count() as u64;
            m
        },
    );
    assert!(
        acked_total > 0,
        "no operation was acknowledged before a kill"
    );
    assert!(ranges_recovered > 0, "no range deletion was recovered");
    eprintln!(
        "range delete crash loop: {kills} SIGKILLs survived in {:.1?}, {acked_total} batches \
         acknowledged, {ranges_recovered} range deletions among those recovered",
        started.elapsed()
    );
}
