//! SIGKILL loops against batches across keyspaces, as `tests/sigkill/crash.rs` does for one keyspace.
//!
//! The child opens a store with three keyspaces ("default", and two made with their own
//! options: one without a filter, one with a partitioned filter), each with tiny memtables and
//! tables so that every keyspace flushes and compacts on its own schedule, and applies operation
//! after operation, printing `ack <i>` once operation `i` has returned `Ok`. Operation `i` is one
//! batch over two keyspaces: it puts `key(i)` into keyspaces `i % 3` and `(i + 1) % 3`, and every
//! fifth operation also deletes the key written two operations earlier from both of its
//! keyspaces. The parent kills the child with SIGKILL after a random delay, reopens the store
//! and checks:
//!
//! - every keyspace together holds exactly the state after a prefix `0..m` of the operations: no
//!   batch in one of its keyspaces and not in the other, no holes, nothing reordered;
//! - `m` covers every acknowledged operation (writes are unsynced, but handed to the OS before
//!   they are acknowledged, and SIGKILL keeps the page cache);
//! - a Get of every key found goes through the keyspace's filters: one true positive per key in
//!   the filtered keyspaces, no filter check in the unfiltered one.
//!
//! Short mode (plain `cargo test`): 30 kills. `SIFTDB_LONG=1`: 1,000;
//! `SIFTDB_KS_CRASH_KILLS=n`: any number.

use crate::common;
use common::child::{differences, key, kill_loop, parse_key, spawn_lock, test_name, value};
use common::keyspaces::contents;
use common::{env_number, long};
use std::path::Path;
use std::time::Instant;

use rand::{rngs::StdRng, SeedableRng};
use siftdb::{Db, Filter, Keyspace, Options, Ticker, WriteBatch};

const CHILD_ENV: &str = "SIFTDB_KS_CRASH_CHILD";

/// The keyspaces; the first is the default one.
const SPACES: [&str; 3] = ["default", "unfiltered", "partitioned"];

/// The keyspaces operation `i` writes `key(i)` to.
fn spaces_of(i: u64) -> [usize; 2] {
    [(i % 3) as usize, ((i + 1) % 3) as usize]
}

/// Operation `i` deletes `key(i - 2)` as well (from its two keyspaces) when `i % 5 == 4`.
fn deletes(i: u64) -> Option<u64> {
    (i % 5 == 4).then(|| i - 2)
}

/// Whether `key(j)` is live (in its two keyspaces) after operations `0..m`.
fn live_after(j: u64, m: u64) -> bool {
    j < m && !(j % 5 == 2 && j + 2 < m)
}

fn tiny() -> Options {
    Options::default()
        .write_buffer_size(16 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .level0_compaction_trigger(2)
        .level0_compaction_trigger_during_writes(4)
        .block_size(1024)
}

/// The store's options: the default keyspace's filter rotates per epoch.
fn store_options(epoch: u64) -> Options {
    tiny().filter(match epoch % 3 {
        0 => Filter::full(10.0),
        1 => Filter::block_based(10.0),
        _ => Filter::ribbon(10.0),
    })
}

fn keyspace_options(name: &str) -> Options {
    match name {
        "unfiltered" => tiny().filter(Filter::none()).write_buffer_size(8 << 10),
        _ => tiny()
            .filter(Filter::partitioned(10.0).partition_bytes(256))
            .write_buffer_size(24 << 10),
    }
}

/// The keyspaces' handles; `keyspace_with` creates them in a new store (and records the same
/// options again in an existing one, so kills land in that too).
fn keyspaces(db: &Db) -> Vec<Keyspace> {
    SPACES
        .iter()
        .map(|&name| {
            if name == "default" {
                db.default_keyspace()
            } else {
                db.keyspace_with(name, keyspace_options(name)).unwrap()
            }
        })
        .collect()
}

/// Child side: never returns normally while the parent is alive; it is killed.
#[test]
fn keyspaces_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // Not a child: nothing to do in a normal test run.
    };
    let var = |name: &str| -> u64 { std::env::var(name).unwrap().parse().unwrap() };
    let start = var("SIFTDB_KS_CRASH_START");
    let epoch = var("SIFTDB_KS_CRASH_EPOCH");
    let db = Db::open(&dir, store_options(epoch)).unwrap();
    let handles = keyspaces(&db);
    let mut out = std::io::stdout().lock();
    for i in start.. {
        let mut b = WriteBatch::new();
        for s in spaces_of(i) {
            b.put_in(&handles[s], key(i), value(i));
        }
        if let Some(d) = deletes(i) {
            for s in spaces_of(d) {
                b.delete_in(&handles[s], key(d));
            }
        }
        db.write(b).unwrap();
        use std::io::Write;
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

/// Reopens the store and checks it against the model; returns the recovered prefix length.
fn check(dir: &Path, epoch: u64, acked: Option<u64>, kill: usize) -> u64 {
    let _guard = spawn_lock();
    let db = Db::open(dir, store_options(epoch))
        .unwrap_or_else(|e| panic!("kill {kill}: open after SIGKILL failed: {e}"));
    let names = db.keyspace_names();
    // Before the first child got as far as creating them, a store has the default keyspace alone.
    if names.len() < SPACES.len() {
        assert!(acked.is_none(), "kill {kill}: keyspaces missing: {names:?}");
    }
    let handles = keyspaces(&db);
    let found: Vec<Vec<(Vec<u8>, Vec<u8>)>> = handles
        .iter()
        .map(|ks| contents(ks).into_iter().collect())
        .collect();
    // The newest operation always leaves its key live in its two keyspaces: the prefix ends
    // after the newest key found anywhere.
    let m = found
        .iter()
        .filter_map(|entries| entries.last().map(|(k, _)| parse_key(k) + 1))
        .max()
        .unwrap_or(0);
    if let Some(a) = acked {
        assert!(
            m > a,
            "kill {kill}: acknowledged op {a} lost (recovered prefix 0..{m})"
        );
    }
    for (s, entries) in found.iter().enumerate() {
        let expected: Vec<u64> = (0..m)
            .filter(|&j| spaces_of(j).contains(&s) && live_after(j, m))
            .collect();
        let got: Vec<u64> = entries.iter().map(|(k, _)| parse_key(k)).collect();
        if let Some((missing, extra)) = differences(&expected, &got) {
            panic!(
                "kill {kill}: keyspace {} is not the state after operations 0..{m} (the newest \
                 found in any keyspace): missing {missing:?}, extra {extra:?}",
                SPACES[s]
            );
        }
        for (k, v) in entries {
            assert_eq!(
                *v,
                value(parse_key(k)),
                "kill {kill}: wrong value in {}",
                SPACES[s]
            );
        }
    }
    // Point reads go through each keyspace's filters; none may deny a present key.
    for (s, (ks, entries)) in handles.iter().zip(&found).enumerate() {
        let before = ks.statistics();
        for (k, v) in entries {
            let got = ks.get(k).unwrap();
            assert_eq!(
                got.as_ref(),
                Some(v),
                "kill {kill}: get lost a key in {}",
                SPACES[s]
            );
        }
        let st = ks.statistics().since(&before);
        let counts = st.filter_totals();
        if SPACES[s] == "unfiltered" {
            assert_eq!(
                counts.checks(),
                0,
                "kill {kill}: a filter in the unfiltered keyspace"
            );
        } else {
            // A key found in a table passed its filter once; one found in a memtable asked none.
            assert_eq!(
                counts.true_positive + st.ticker(Ticker::MemtableHit),
                entries.len() as u64,
                "kill {kill}: one filter true positive per key found in a table of {}",
                SPACES[s]
            );
        }
    }
    m
}

fn kills() -> usize {
    env_number("SIFTDB_KS_CRASH_KILLS", if long() { 1000 } else { 30 }) as usize
}

#[test]
fn sigkill_keeps_batches_across_keyspaces_whole_and_in_order() {
    let kills = kills();
    let mut rng = StdRng::seed_from_u64(0x6b73_0009);
    let started = Instant::now();
    let root = tempfile::tempdir().unwrap();
    let mut recovered_extra = 0u64;
    // A fresh store every 25 kills bounds the data each check scans and rotates the filter.
    let acked_total = kill_loop(
        kills,
        &mut rng,
        root.path(),
        25,
        &test_name(module_path!(), "keyspaces_crash_child"),
        CHILD_ENV,
        "SIFTDB_KS_CRASH",
        |dir, epoch, acked, kill, _| {
            let m = check(dir, epoch, acked, kill);
            if let Some(a) = acked {
                recovered_extra += m - (a + 1);
            }
            m
        },
    );
    assert!(
        acked_total > 0,
        "no operation was acknowledged before a kill"
    );
    eprintln!(
        "keyspace crash loop: {kills} SIGKILLs survived in {:.1?}, {acked_total} batches over two \
         keyspaces acknowledged, {recovered_extra} unacknowledged ones also recovered",
        started.elapsed()
    );
}
