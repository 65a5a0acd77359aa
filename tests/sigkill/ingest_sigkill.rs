//! SIGKILL loops against ingests, as `tests/sigkill/crash.rs` does for puts and deletes.
//!
//! The child opens a store with tiny memtables and tables and applies operation after operation,
//! printing `ack <i>` once operation `i` has returned `Ok`. Operation `i` puts `key(i)` (unsynced)
//! when `i` is a multiple of 3; otherwise it builds a table of `key(i)` and `key(i)~` outside the
//! store with a `TableWriter` and ingests it. The parent kills the child with SIGKILL after a random
//! delay (landing in ingests, their flushes, compactions and recovery), reopens the store and
//! checks:
//!
//! - it holds exactly the state after a prefix `0..m` of the operations: every ingest whole or
//!   absent, no hole, nothing reordered;
//! - `m` covers every acknowledged operation (SIGKILL keeps the page cache);
//! - a Get of every key written agrees, and the directory holds no table the levels do not list
//!   once the store settles.
//!
//! Short mode (plain `cargo test`): 12 kills. `SIFTDB_LONG=1`: 500; `SIFTDB_INGEST_KILLS=n`: any
//! number.

use crate::common;
use common::child::{differences, key, kill_loop, options, spawn_lock, test_name, value};
use common::{env_number, files_with_ext, long, settle, tables_per_level};
use std::path::Path;
use std::time::Instant;

use rand::{rngs::StdRng, SeedableRng};
use siftdb::Db;

const CHILD_ENV: &str = "SIFTDB_INGEST_CRASH_CHILD";

fn ingests(i: u64) -> bool {
    !i.is_multiple_of(3)
}

/// The second key of operation `i`'s table.
fn companion(i: u64) -> Vec<u8> {
    let mut k = key(i);
    k.push(b'~');
    k
}

/// Child side: never returns normally while the parent is alive; it is killed.
#[test]
fn ingest_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // Not a child: nothing to do in a normal test run.
    };
    let var = |name: &str| -> u64 { std::env::var(name).unwrap().parse().unwrap() };
    let start = var("SIFTDB_INGEST_CRASH_START");
    let epoch = var("SIFTDB_INGEST_CRASH_EPOCH");
    let db = Db::open(&dir, options(epoch)).unwrap();
    let tables = Path::new(&dir).with_extension("tables");
    std::fs::create_dir_all(&tables).unwrap();
    let mut out = std::io::stdout().lock();
    for i in start.. {
        if ingests(i) {
            let path = tables.join(format!("{i}.sst"));
            let _ = std::fs::remove_file(&path); // a kill may have left one
            let mut w = db.table_writer(&path).unwrap();
            w.put(key(i), value(i)).unwrap();
            w.put(companion(i), value(i)).unwrap();
            w.finish().unwrap();
            db.ingest(&[&path]).unwrap();
            std::fs::remove_file(&path).unwrap();
        } else {
            db.put(key(i), value(i)).unwrap();
        }
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
    // The operation that wrote a key (a companion's is its table's).
    let number = |k: &[u8]| -> u64 {
        let base = k.strip_suffix(b"~").unwrap_or(k);
        std::str::from_utf8(&base[3..]).unwrap().parse().unwrap()
    };
    let m = entries.last().map_or(0, |(k, _)| number(k) + 1);
    if let Some(a) = acked {
        assert!(
            m > a,
            "kill {kill}: acknowledged op {a} lost (recovered prefix 0..{m})"
        );
    }
    let mut expected = Vec::new();
    for j in 0..m {
        expected.push(key(j));
        if ingests(j) {
            expected.push(companion(j));
        }
    }
    let got: Vec<Vec<u8>> = entries.iter().map(|(k, _)| k.clone()).collect();
    if got != expected {
        let as_numbers = |keys: &[Vec<u8>]| -> Vec<u64> {
            keys.iter()
                .map(|k| number(k) * 2 + u64::from(k.ends_with(b"~")))
                .collect()
        };
        let (missing, extra) =
            differences(&as_numbers(&expected), &as_numbers(&got)).unwrap_or_default();
        panic!(
            "kill {kill}: the store is not the state after operations 0..{m} (2 × op, + 1 for a \
             companion): missing {missing:?}, extra {extra:?}"
        );
    }
    for (k, v) in &entries {
        assert_eq!(*v, value(number(k)), "kill {kill}: wrong value");
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "kill {kill}: get");
    }
    assert_eq!(
        db.get(key(m)).unwrap(),
        None,
        "kill {kill}: get past the prefix"
    );
    settle(&db);
    let listed: usize = tables_per_level(&db).iter().sum();
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while files_with_ext(dir, "sst").len() != listed {
        assert!(Instant::now() < deadline, "kill {kill}: stray tables");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    m
}

fn kills() -> usize {
    env_number("SIFTDB_INGEST_KILLS", if long() { 500 } else { 12 }) as usize
}

#[test]
fn sigkill_amid_ingests_keeps_every_acknowledged_ingest_whole_and_in_order() {
    let kills = kills();
    let mut rng = StdRng::seed_from_u64(0x16e5_7c11);
    let started = Instant::now();
    let root = common::scratch();
    let mut ingests_recovered = 0u64;
    let acked_total = kill_loop(
        kills,
        &mut rng,
        root.path(),
        10,
        &test_name(module_path!(), "ingest_crash_child"),
        CHILD_ENV,
        "SIFTDB_INGEST_CRASH",
        |dir, epoch, acked, kill, start| {
            let m = check(dir, epoch, acked, kill);
            ingests_recovered += (start..m).filter(|&i| ingests(i)).count() as u64;
            m
        },
    );
    assert!(ingests_recovered > 0, "no ingest was recovered");
    eprintln!(
        "ingest crash loop: {kills} SIGKILLs survived in {:.1?}, {acked_total} operations \
         acknowledged, {ingests_recovered} ingests among those recovered",
        started.elapsed()
    );
}
