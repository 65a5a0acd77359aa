//! Power cuts and process crashes inside `Db::ingest`, through the fault-injection layer.
//!
//! Each life opens the tiny store of the other loops (flushes, compactions and WAL switches all
//! the time; the open itself may be cut, and cut again), checks it, writes a few synced batches
//! over 400 keys, builds one or two tables outside the store with a `TableWriter` (keys of a
//! random stretch, now and then deletes, values naming the life) and ingests them with a cut
//! armed: at any operation, at the table files (the hard link, its fsync), the MANIFEST or
//! CURRENT, or a directory fsync, or an injected I/O error instead; an ingest that returns `Ok` is
//! followed by a few synced writes, some over its keys, until the cut. Then the machine stops (a
//! power cut, now and then a process crash). After the reopen:
//!
//! - every synced write acknowledged is there, and the ingest is all there or none of it (every
//!   key of its tables at its ingested value, or every one at its value before), all there if
//!   `ingest` returned `Ok`;
//! - a Get of every key agrees with a scan, and a scan backward with one forward;
//! - the directory holds no table but those the levels list: no leftover of a cut ingest is
//!   taken for a table or left behind.
//!
//! Short mode (plain `cargo test`): 300 lives. `SIFTDB_LONG=1`: 5,000; `SIFTDB_POWER_CUTS=n`: any
//! number; `SIFTDB_POWER_CUT_SEED=s`: another random sequence.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::fault_injection::{FaultInjector, OpKind, OpSite};
use siftdb::{Db, Options, WriteBatch, WriteOptions};

use crate::common;
use common::power_cuts::{open_through_cuts, power_fails, tiny_options, Epochs, Tally};
use common::{env_number, files_with_ext, long, scratch, settle, tables_per_level};

const KEYS: u32 = 400;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// What an ingest writes, key by key (`None` for a delete).
type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn lives() -> usize {
    env_number("SIFTDB_POWER_CUTS", if long() { 5_000 } else { 300 }) as usize
}

fn options(faults: &FaultInjector) -> Options {
    tiny_options()
        // The loop counts the tables once compactions settle: none starts of its own after.
        .compact_l0_when_idle(false)
        .compact_l0_for_reads(false)
        .fault_injector(faults.clone())
}

fn contents(db: &Db, what: &str) -> State {
    db.iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{what}: scan failed: {e}")))
        .collect()
}

/// One or two tables of keys in a random stretch, disjoint, in `dir`: what they write, key by
/// key (`None` for a delete).
fn build_tables(db: &Db, rng: &mut StdRng, dir: &Path, life: usize) -> (Vec<PathBuf>, Writes) {
    let mut writes = BTreeMap::new();
    let mut paths = Vec::new();
    let tables = rng.gen_range(1..=2);
    let mut start = rng.gen_range(0..KEYS - 60);
    for t in 0..tables {
        let end = (start + rng.gen_range(5..60)).min(KEYS);
        let path = dir.join(format!("life{life}-{t}.sst"));
        let _ = std::fs::remove_file(&path);
        let mut w = db.table_writer(&path).unwrap();
        for i in start..end {
            if rng.gen_bool(0.3) {
                continue;
            }
            if rng.gen_bool(0.1) {
                w.delete(key(i)).unwrap();
                writes.insert(key(i), None);
            } else {
                let v = format!("ingested in life {life}").into_bytes();
                w.put(key(i), &v).unwrap();
                writes.insert(key(i), Some(v));
            }
        }
        if w.entries() == 0 {
            w.put(key(start), b"only").unwrap();
            writes.insert(key(start), Some(b"only".to_vec()));
        }
        paths.push(w.finish().unwrap().path);
        start = end + 1;
        if start >= KEYS {
            break;
        }
    }
    (paths, writes)
}

/// Panics with the keys where `seen` and `expected` differ, if they do.
fn assert_same(seen: &State, expected: &State, what: &str) {
    let show = |v: Option<&Vec<u8>>| v.map(|v| String::from_utf8_lossy(v).into_owned());
    let differ: Vec<String> = seen
        .keys()
        .chain(expected.keys())
        .filter(|k| seen.get(*k) != expected.get(*k))
        .take(8)
        .map(|k| {
            format!(
                "{}: {:?}, expected {:?}",
                String::from_utf8_lossy(k),
                show(seen.get(k)),
                show(expected.get(k))
            )
        })
        .collect();
    assert!(differ.is_empty(), "{what}: {differ:?}");
}

fn applied(state: &State, writes: &Writes) -> State {
    let mut s = state.clone();
    for (k, v) in writes {
        match v {
            Some(v) => s.insert(k.clone(), v.clone()),
            None => s.remove(k),
        };
    }
    s
}

/// Arms the cut of one life at the ingest's operations; returns what it aimed at.
fn aim(rng: &mut StdRng, faults: &FaultInjector) -> &'static str {
    let (what, n, filter): (&'static str, u64, siftdb::fault_injection::OpFilter) = match rng
        .gen_range(0..10)
    {
        0..=3 => ("any operation", rng.gen_range(0..40), Box::new(|_| true)),
        4 | 5 => (
            "table files",
            rng.gen_range(0..6),
            Box::new(|s: &OpSite| s.file.ends_with(".sst")),
        ),
        6 | 7 => (
            "MANIFEST or CURRENT",
            rng.gen_range(0..6),
            Box::new(|s: &OpSite| s.file.starts_with("MANIFEST") || s.file.starts_with("CURRENT")),
        ),
        8 => (
            "directory fsync",
            rng.gen_range(0..4),
            Box::new(|s: &OpSite| s.kind == OpKind::SyncDir),
        ),
        _ => {
            let kind =
                [OpKind::Create, OpKind::Sync, OpKind::SyncDir, OpKind::Write][rng.gen_range(0..4)];
            faults.fail_after(
                rng.gen_range(0..6),
                Box::new(move |s: &OpSite| s.kind == kind),
            );
            return "injected error";
        }
    };
    faults.cut_after(n, filter);
    what
}

#[test]
fn an_ingest_cut_anywhere_is_all_there_or_none_of_it_after_reopen() {
    let seed = env_number("SIFTDB_POWER_CUT_SEED", 0x16e57);
    let mut rng = StdRng::seed_from_u64(seed);
    let root = scratch();
    let outside = root.path().join("tables");
    std::fs::create_dir_all(&outside).unwrap();
    let mut epochs = Epochs::new(&root.path().join("stores"), 50);
    let mut tally = Tally::default();
    let mut model = State::new();
    // The ingest of the last life, if it did not return `Ok`: it may or may not have landed.
    let mut pending: Option<Writes> = None;
    // A write after the ingest that failed when the cut came: it may have landed.
    let mut uncertain: Option<(Vec<u8>, Vec<u8>)> = None;
    let (mut landed, mut lost, mut acked, mut after_ingest) = (0, 0, 0, 0);
    let mut aims: BTreeMap<&str, usize> = BTreeMap::new();
    for life in 0..lives() {
        if epochs.advance(life) {
            model.clear();
            pending = None;
            uncertain = None;
        }
        let faults = &epochs.faults;
        let what = format!("seed {seed}, life {life}");
        let dir = epochs.dir.clone();
        let (db, _) = open_through_cuts(faults, &mut rng, &mut tally, &what, || {
            Db::open(&dir, options(faults))
        });
        let seen = contents(&db, &what);
        if let Some((k, v)) = uncertain.take()
            && seen.get(&k) == Some(&v)
        {
            model.insert(k, v);
        }
        if let Some(writes) = pending.take() {
            let after = applied(&model, &writes);
            if seen == after {
                model = after;
                landed += 1;
            } else {
                assert_same(
                    &seen,
                    &model,
                    &format!("{what}: the cut ingest is neither all there nor gone"),
                );
                lost += 1;
            }
        }
        assert_same(
            &seen,
            &model,
            &format!("{what}: the store is not what was acknowledged"),
        );
        for i in 0..KEYS {
            assert_eq!(
                db.get(key(i)).unwrap().as_ref(),
                seen.get(&key(i)),
                "{what}"
            );
        }
        let back: Vec<Vec<u8>> = db.iter().rev().map(|r| r.unwrap().0).collect();
        assert!(back.iter().rev().eq(seen.keys()), "{what}: backward scan");
        // No table but those the levels list, once the inputs of a compaction that open's
        // background work may have run are let go (their last version may outlive the job by a
        // moment).
        settle(&db);
        let listed: usize = tables_per_level(&db).iter().sum();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while files_with_ext(&dir, "sst").len() != listed {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: stray tables: {:?}, levels {:?}",
                common::names_with_ext(&dir, "sst"),
                tables_per_level(&db)
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }

        // A few synced batches, then the ingest with the cut armed.
        for _ in 0..rng.gen_range(0..20) {
            let mut b = WriteBatch::new();
            let k = key(rng.gen_range(0..KEYS));
            let v = format!("put in life {life}").into_bytes();
            b.put(&k, &v);
            db.write_opt(b, &WriteOptions { sync: true }).unwrap();
            model.insert(k, v);
        }
        let (paths, writes) = build_tables(&db, &mut rng, &outside, life);
        let injected_before = faults.injected().len();
        *aims.entry(aim(&mut rng, faults)).or_default() += 1;
        match db.ingest(&paths) {
            Ok(_) => {
                model = applied(&model, &writes);
                acked += 1;
                // Synced writes after it: replay of the WAL, which starts past the ingest's
                // sequence, must bring them back over the ingested keys.
                for _ in 0..rng.gen_range(0..8) {
                    let k = writes
                        .keys()
                        .nth(rng.gen_range(0..writes.len()))
                        .cloned()
                        .unwrap_or_else(|| key(0));
                    let v = format!("put after the ingest of life {life}").into_bytes();
                    let mut b = WriteBatch::new();
                    b.put(&k, &v);
                    if db.write_opt(b, &WriteOptions { sync: true }).is_err() {
                        // The armed cut came: the write may or may not have reached the disk.
                        uncertain = Some((k, v));
                        break;
                    }
                    model.insert(k, v);
                    after_ingest += 1;
                }
            }
            Err(_) => pending = Some(writes),
        }
        // The caller's files are left whole.
        for p in &paths {
            assert!(p.exists(), "{what}: {p:?} gone");
        }
        tally.machine_stops(faults, injected_before);
        drop(db);
        tally.cuts += 1;
        power_fails(faults, &mut rng, &mut tally);
        for p in paths {
            let _ = std::fs::remove_file(p);
        }
    }
    eprintln!(
        "ingest power cuts (seed {seed}): {} lives, {} cuts inside open, {} process crashes; \
         {acked} ingests acknowledged ({after_ingest} synced writes after them), of the others \
         {landed} landed and {lost} did not; aimed at \
         {aims:?}; cut in threads {:?}; cut on files {:?}; {} injected errors",
        lives(),
        tally.in_open,
        tally.process_crashes,
        tally.by_thread,
        tally.by_file,
        tally.injected,
    );
    assert!(
        landed > 0 && lost > 0,
        "cuts never split an ingest both ways"
    );
    assert!(after_ingest > 0, "no write followed an ingest");
    assert!(tally.in_open > 0, "no cut landed inside open");
}
