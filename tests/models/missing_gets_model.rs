//! Gets against a `BTreeMap` model while the tree changes shape (L0 tables, several levels,
//! flushes, compactions, a reopen, a crash image), each Get also against `explain_get`, which
//! walks the tables one by one: a Get the filters alone answer (every candidate's filter line
//! loaded before any is tested) gives the walk's answer and counts what the walk would count.

use crate::common;
use common::scratch;
use common::{copy_dir, settle};
use std::collections::BTreeMap;

use siftdb::inspect::{GetExplanation, TableHeld};
use siftdb::{Db, Options, Statistics, Ticker, NUM_LEVELS};

/// 100 bytes that snappy cannot shrink much, so that the keys fill several levels.
fn value(round: u32, i: u32) -> Vec<u8> {
    common::noise(u64::from(round) << 32 | u64::from(i), 100)
}

fn key(i: u32) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

/// Small tables and levels, so that a few thousand keys make L0 tables and three levels below.
fn options() -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .target_file_size(32 << 10)
        .max_bytes_for_level_base(128 << 10)
        .level0_compaction_trigger(4)
        // L0 keeps its tables between compactions, so Gets meet L0 and deeper levels at once.
        .compact_l0_when_idle(false)
        .compact_l0_for_reads(false)
}

/// What the walk `e` counts, as a Get counts it: per level (useful, positive, true positive),
/// and the tables consulted.
fn walk_counts(e: &GetExplanation) -> ([(u64, u64, u64); NUM_LEVELS], u64) {
    let mut levels = [(0, 0, 0); NUM_LEVELS];
    let mut consulted = 0;
    for step in e.tables.iter().filter(|s| s.key_in_range) {
        consulted += 1;
        let Some(check) = step.filter else { continue };
        let l = &mut levels[step.level];
        if check.may_match {
            l.1 += 1;
            if matches!(step.held, TableHeld::Value(_) | TableHeld::Tombstone) {
                l.2 += 1;
            }
        } else {
            l.0 += 1;
        }
    }
    (levels, consulted)
}

/// A key never written, sorting between `key(i)` and `key(i + 1)`.
fn absent(i: u32) -> Vec<u8> {
    format!("user{i:08}x").into_bytes()
}

/// Every key of `0..span`, and a never-written key after each, through `db.get`, against
/// `model` and against the walk; returns how many Gets every filter asked said "no" to. Waits
/// first for compactions to settle, so that the Get and the walk read the same tables.
fn check(db: &Db, model: &BTreeMap<u32, Vec<u8>>, span: u32, stage: &str) -> u64 {
    settle(db);
    let mut ruled_out = 0;
    let keys = (0..span).flat_map(|i| [(key(i), model.get(&i)), (absent(i), None)]);
    for (k, want) in keys {
        let i = String::from_utf8_lossy(&k).into_owned();
        let walk = db.explain_get(&k).unwrap();
        let before: Statistics = db.statistics();
        let got = db.get(&k).unwrap();
        let s = db.statistics().since(&before);
        assert_eq!(got.as_ref(), want, "{stage}: key {i}");
        let (levels, consulted) = walk_counts(&walk);
        assert_eq!(
            s.ticker(Ticker::TablesConsulted),
            consulted,
            "{stage}: key {i}"
        );
        for (level, &(useful, positive, true_positive)) in levels.iter().enumerate() {
            let c = s.level_filter_counts(level);
            assert_eq!(
                (c.useful, c.positive, c.true_positive),
                (useful, positive, true_positive),
                "{stage}: key {i}, level {level}"
            );
            // A cache-local bloom kept in memory reads one line per probe.
            assert_eq!(
                s.filter_lines_touched(level),
                useful + positive,
                "{stage}: key {i}, level {level}"
            );
        }
        if consulted > 0 && s.ticker(Ticker::BloomFilterUseful) == consulted {
            ruled_out += 1;
            assert_eq!(s.ticker(Ticker::DataBlocksRead), 0, "{stage}: key {i}");
        }
    }
    ruled_out
}

#[test]
fn missing_gets_answer_and_count_as_the_walk_through_flushes_compactions_reopen_and_crash() {
    let dir = scratch();
    let span = 12_000u32;
    let mut model = BTreeMap::new();
    let mut db = Db::open(dir.path(), options()).unwrap();
    // A scrambled order; two keys of three written, one written key of seven deleted later.
    let mut ruled_out = 0;
    // The deepest level of a tree read while L0 also held tables.
    let mut deepest_with_l0 = 0;
    for round in 0..3u32 {
        for j in 0..span {
            let i = (j * 7919 + round * 13) % span;
            if i % 3 != round % 3 {
                let v = value(round, i);
                db.put(key(i), &v).unwrap();
                model.insert(i, v);
            }
            if j % 7 == round {
                db.delete(key(i)).unwrap();
                model.remove(&i);
            }
        }
        db.flush().unwrap();
        settle(&db);
        // Two small L0 tables on top, below the trigger.
        for j in 0..2 {
            for i in (j..span).step_by(40) {
                let v = value(round + 10, i);
                db.put(key(i), &v).unwrap();
                model.insert(i, v);
            }
            db.flush().unwrap();
        }
        ruled_out += check(&db, &model, span, &format!("round {round}"));
        let shape = common::tables_per_level(&db);
        deepest_with_l0 = deepest_with_l0.max(if shape[0] > 0 {
            shape.iter().rposition(|&n| n > 0).unwrap_or(0)
        } else {
            0
        });
    }
    assert!(
        deepest_with_l0 >= 2,
        "no Gets met L0 tables and two levels below at once"
    );
    db.compact().unwrap();
    ruled_out += check(&db, &model, span, "compacted");

    // More writes on top of the compacted tree, then a reopen.
    for i in (0..span).step_by(5) {
        let v = format!("late-{i}").into_bytes();
        db.put(key(i), &v).unwrap();
        model.insert(i, v);
    }
    db.flush().unwrap();
    drop(db);
    db = Db::open(dir.path(), options()).unwrap();
    ruled_out += check(&db, &model, span, "reopened");

    // A crash image: the files as they are while the store runs, with unflushed writes in the WAL.
    // The store settles first, and the deletes fill less than a memtable, so no flush or
    // compaction deletes a file while it is copied.
    settle(&db);
    for i in (1..span).step_by(29) {
        db.delete(key(i)).unwrap();
        model.remove(&i);
    }
    let image = scratch();
    copy_dir(dir.path(), image.path());
    drop(db);
    let db = Db::open(image.path(), options()).unwrap();
    ruled_out += check(&db, &model, span, "crash image");
    db.flush().unwrap();
    ruled_out += check(&db, &model, span, "crash image flushed");
    assert!(
        ruled_out > 6 * u64::from(span),
        "only {ruled_out} Gets were answered by the filters alone"
    );
}
