//! SIGKILL loops for followers (`Db::open_follower`), in both directions.
//!
//! - The follower dies: a child process follows a store the parent writes to, catching up in a
//!   loop, and is killed mid-catch-up. The parent then pauses its writer and opens a follower on
//!   the same directory: it must read exactly the writer's state, and hold links only to the
//!   tables its version lists (what the dead follower linked is gone).
//! - The writer dies: a child process writes (tiny memtables and levels: it flushes and
//!   compacts), printing `ack <i>` per acknowledged put, while the parent's follower catches up
//!   in a loop. After the kill, the follower still reads (its linked tables, torn WAL tails) and
//!   holds exactly the puts `0..m` for some `m` covering every acknowledged one; once the parent
//!   reopens the store (recovery writes a new MANIFEST and removes the old WALs), the follower
//!   catches up to exactly the recovered state.
//!
//! Short mode (plain `cargo test`): 12 kills each. `SIFTDB_LONG=1`: 200;
//! `SIFTDB_FOLLOWER_KILLS=n`: any number.

use crate::common;
use common::child::{key, options, parse_key, run_child, run_child_lines, spawn_lock, test_name};
use common::{env_number, long, tables_per_level};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::Db;

const FOLLOWER_CHILD: &str = "SIFTDB_FOLLOWER_CHILD";
const WRITER_CHILD: &str = "SIFTDB_FOLLOWER_WRITER_CHILD";

fn kills() -> usize {
    env_number("SIFTDB_FOLLOWER_KILLS", if long() { 200 } else { 12 }) as usize
}

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().map(|kv| kv.unwrap()).collect()
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 90) as usize)).into_bytes()
}

/// The child follower: catches up in a loop, reading a key each time, until killed.
#[test]
fn follower_child() {
    let Ok(dirs) = std::env::var(FOLLOWER_CHILD) else {
        return;
    };
    let (primary, own) = dirs.split_once('|').unwrap();
    let follower = Db::open_follower(primary, own, options(0)).unwrap();
    for round in 0u64.. {
        let seq = follower.catch_up().unwrap();
        follower.get(key(round % 100)).unwrap();
        println!("caught {seq}");
    }
}

#[test]
fn a_follower_killed_mid_catch_up_reopens_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    let db = {
        let _spawns = spawn_lock();
        Db::open(&primary, options(0)).unwrap()
    };
    let (paused, stop) = (
        Arc::new(parking_lot::Mutex::new(())),
        Arc::new(AtomicBool::new(false)),
    );
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (db, paused, stop, written) =
            (db.clone(), paused.clone(), stop.clone(), written.clone());
        std::thread::spawn(move || {
            for i in 0u64.. {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let _running = paused.lock();
                db.put(key(i % 3000), value(i)).unwrap();
                if i % 7 == 3 {
                    db.delete(key((i * 13) % 3000)).unwrap();
                }
                written.store(i + 1, Ordering::Release);
            }
        })
    };
    let mut rng = StdRng::seed_from_u64(11);
    let env = [(
        FOLLOWER_CHILD,
        format!("{}|{}", primary.display(), own.display()),
    )];
    let child = test_name(module_path!(), "follower_child");
    let mut caught = 0;
    for kill in 0..kills() {
        let delay = Duration::from_millis(rng.gen_range(20..200));
        let lines = run_child_lines(&child, &env, delay);
        caught += lines.iter().filter(|l| l.starts_with("caught ")).count();
        let _writes_wait = paused.lock();
        let follower = {
            let _spawns = spawn_lock();
            Db::open_follower(&primary, &own, options(0)).unwrap()
        };
        assert_eq!(contents(&follower), contents(&db), "after kill {kill}");
        let tables = |d: &Path| {
            let mut t: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".sst"))
                .collect();
            t.sort();
            t
        };
        // Links to the tables the follower's version lists, and no more: those the dead one
        // made are gone.
        let listed: usize = tables_per_level(&follower).iter().sum();
        assert_eq!(tables(&own).len(), listed, "after kill {kill}");
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    assert!(caught > 0, "the children caught up before they were killed");
    assert!(written.load(Ordering::Acquire) > 0);
}

/// The child writer: puts `key(i)` for `i` from `start` on, printing `ack <i>`.
#[test]
fn follower_writer_child() {
    let Ok(dir) = std::env::var(WRITER_CHILD) else {
        return;
    };
    let start: u64 = std::env::var("SIFTDB_FOLLOWER_WRITER_START")
        .unwrap()
        .parse()
        .unwrap();
    let db = Db::open(&dir, options(1)).unwrap();
    for i in start.. {
        db.put(key(i), value(i)).unwrap();
        println!("ack {i}");
    }
}

/// Checks that `db` holds exactly `key(j)` for `j` in `0..m` for an `m` past `acked`; returns
/// `m`.
fn prefix_of(db: &Db, acked: Option<u64>, what: &str) -> u64 {
    let got = contents(db);
    for (j, (k, v)) in got.iter().enumerate() {
        assert_eq!(parse_key(k), j as u64, "{what}: a hole before key {j}");
        assert_eq!(v, &value(j as u64), "{what}");
    }
    let m = got.len() as u64;
    assert!(
        acked.is_none_or(|a| a < m),
        "{what}: {m} puts, {acked:?} acknowledged"
    );
    m
}

#[test]
fn a_follower_outlives_its_writers_kill_and_follows_the_reopened_store() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    drop(Db::open(&primary, options(1)).unwrap());
    let follower = {
        let _spawns = spawn_lock();
        Db::open_follower(&primary, &own, options(1)).unwrap()
    };
    let mut rng = StdRng::seed_from_u64(12);
    let child = test_name(module_path!(), "follower_writer_child");
    let mut start = 0;
    for kill in 0..kills() {
        let env = [
            (WRITER_CHILD, primary.display().to_string()),
            ("SIFTDB_FOLLOWER_WRITER_START", start.to_string()),
        ];
        let delay = Duration::from_millis(rng.gen_range(30..250));
        // The follower catches up while the writer runs: in a thread, as the parent waits.
        let running = Arc::new(AtomicBool::new(true));
        let reader = {
            let (follower, running) = (follower.clone(), running.clone());
            std::thread::spawn(move || {
                let mut rounds = 0;
                while running.load(Ordering::Acquire) {
                    follower.catch_up().unwrap();
                    follower.get(key(0)).unwrap();
                    rounds += 1;
                }
                rounds
            })
        };
        let acked = run_child(&child, &env, delay).last_ack;
        running.store(false, Ordering::Release);
        assert!(reader.join().unwrap() > 0);
        // The writer is dead, mid-append perhaps: the follower reads on.
        follower.catch_up().unwrap();
        let m = prefix_of(&follower, acked, &format!("follower after kill {kill}"));
        let db = {
            let _spawns = spawn_lock();
            Db::open(&primary, options(1)).unwrap()
        };
        let recovered = prefix_of(&db, acked, &format!("store after kill {kill}"));
        assert_eq!(
            recovered, m,
            "after kill {kill}: the follower read what the store recovers"
        );
        follower.catch_up().unwrap();
        assert_eq!(
            contents(&follower),
            contents(&db),
            "after the reopen of kill {kill}"
        );
        db.close().unwrap();
        start = m;
    }
}
