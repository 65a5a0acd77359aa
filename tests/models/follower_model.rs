//! Model-based test: a follower against the writer's acknowledged prefix. A writer thread puts
//! and deletes keys (tiny memtables and levels, so it flushes and compacts all the time, and
//! calls `compact` now and then) while the test's thread, a follower, catches up in a loop. Each
//! value names the write that made it. After each catch-up, every key must read back (by Get, by
//! a scan, and now and then by a scan made before the catch-up and read after it, over tables the
//! writer may have deleted meanwhile) at the value of the last write the writer acknowledged
//! before the catch-up began, or of a later write; a deleted key may read back only where a
//! delete allows it; nothing never written appears. No read may fail. At the end, one more
//! catch-up reads the writer's final state exactly.
//!
//! Short mode (plain `cargo test`): 12,000 writes. `SIFTDB_LONG=1`: 400,000.
//! `SIFTDB_FOLLOWER_MODEL_WRITES=n`: any number; `SIFTDB_FOLLOWER_MODEL_SEED=s`: another
//! sequence.

use crate::common;
use common::power_cuts::tiny_options as tiny;
use common::{env_number, long, scratch};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::Db;

const KEYS: u32 = 500;

fn key(k: u32) -> Vec<u8> {
    format!("key{k:04}").into_bytes()
}

/// The value write `index` puts: it names the write.
fn value(index: usize) -> Vec<u8> {
    format!("w{index:09}-{}", "v".repeat(40)).into_bytes()
}

fn index_of(value: &[u8]) -> Option<usize> {
    std::str::from_utf8(value.get(1..10)?).ok()?.parse().ok()
}

/// The writer's writes in order (`Some` a put of the value its index names, `None` a delete),
/// each recorded before it is made, and how many of them were acknowledged.
#[derive(Default)]
struct History {
    writes: Mutex<Vec<(u32, bool)>>,
    acknowledged: AtomicUsize,
}

impl History {
    /// Checks what a read after a catch-up begun with `prefix` writes acknowledged found for
    /// key `k`: the last write to it in the prefix, or a later one.
    fn check(&self, prefix: usize, k: u32, found: Option<&[u8]>, how: &str) {
        let writes = self.writes.lock().unwrap();
        let last = writes[..prefix].iter().rposition(|&(w, _)| w == k);
        let allowed = |i: usize| writes[i].0 == k && last.is_none_or(|l| i >= l);
        match found {
            Some(v) => {
                let i =
                    index_of(v).unwrap_or_else(|| panic!("{how}: key {k}: a value never written"));
                assert!(i < writes.len() && allowed(i) && writes[i].1, "{how}: key {k} reads write {i}, older than write {last:?} acknowledged before the catch-up (or not a put of it)");
                assert_eq!(v, value(i), "{how}: key {k}");
            }
            None => {
                let deleted_since = match last {
                    None => true,
                    Some(l) => (l..writes.len()).any(|i| writes[i] == (k, false)),
                };
                assert!(deleted_since, "{how}: key {k} is missing, though write {last:?}, acknowledged before the catch-up, put it and no delete followed");
            }
        }
    }
}

#[test]
fn a_follower_reads_at_least_the_writers_acknowledged_prefix() {
    let writes = env_number(
        "SIFTDB_FOLLOWER_MODEL_WRITES",
        if long() { 400_000 } else { 12_000 },
    ) as usize;
    let seed = env_number("SIFTDB_FOLLOWER_MODEL_SEED", 7);
    let dir = scratch();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    let db = Db::open(&primary, tiny()).unwrap();
    let history = Arc::new(History::default());
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, history, done) = (db.clone(), Arc::clone(&history), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(seed);
            for index in 0..writes {
                let k = rng.gen_range(0..KEYS);
                let put = rng.gen_bool(0.85);
                history.writes.lock().unwrap().push((k, put));
                if put {
                    db.put(key(k), value(index)).unwrap();
                } else {
                    db.delete(key(k)).unwrap();
                }
                history.acknowledged.store(index + 1, Ordering::Release);
                if rng.gen_ratio(1, 3000) {
                    db.compact().unwrap();
                }
            }
            done.store(true, Ordering::Release);
        })
    };
    let follower = Db::open_follower(&primary, &own, tiny()).unwrap();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xF011);
    let mut rounds = 0u64;
    let mut held: Option<(siftdb::Scan, usize)> = None;
    loop {
        let finished = done.load(Ordering::Acquire);
        let prefix = history.acknowledged.load(Ordering::Acquire);
        let before = held.take();
        follower.catch_up().unwrap();
        rounds += 1;
        for _ in 0..50 {
            let k = rng.gen_range(0..KEYS);
            let found = follower.get(key(k)).unwrap();
            history.check(prefix, k, found.as_deref(), "get");
        }
        if rounds.is_multiple_of(8) {
            let scanned: BTreeMap<Vec<u8>, Vec<u8>> =
                follower.iter().map(|kv| kv.unwrap()).collect();
            for k in 0..KEYS {
                history.check(prefix, k, scanned.get(&key(k)).map(|v| &v[..]), "scan");
            }
        }
        // A scan made before the last catch-ups, read to the end now: its tables stay readable.
        if let Some((scan, then)) = before {
            let scanned: BTreeMap<Vec<u8>, Vec<u8>> = scan.map(|kv| kv.unwrap()).collect();
            for k in 0..KEYS {
                let found = scanned.get(&key(k)).map(|v| &v[..]);
                history.check(then, k, found, "scan made before the catch-up");
            }
        }
        if rounds.is_multiple_of(5) {
            held = Some((follower.iter(), prefix));
        }
        if finished {
            break;
        }
    }
    writer.join().unwrap();
    follower.catch_up().unwrap();
    let theirs: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    let ours: Vec<_> = follower.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(ours, theirs, "after {rounds} catch-ups");
    assert!(rounds > 1);
    let compactions = db.statistics().ticker(siftdb::Ticker::Compactions);
    assert!(
        compactions > 0,
        "the writer compacted while the follower read"
    );
    println!("{writes} writes, {rounds} catch-ups, {compactions} compactions");
}
