//! Background compaction as it schedules its work: jobs split between threads by key range
//! (`max_subcompactions`), tables moved down a level without a rewrite, L0 gathering more tables
//! while writes flow (`level0_compaction_trigger_during_writes`) and deeper levels more bytes
//! (`level_budget_during_writes`), the deepest level growing into an empty one below and
//! moving there whole, L0 compacted for reads
//! (`compact_l0_for_reads`) and once writes pause (`compact_l0_when_idle`).

use crate::common;
use common::scratch;
use common::{settle, tables_per_level};
use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Options, Ticker};

fn small_options(subcompactions: usize) -> Options {
    // Small memtables and tables, so a few thousand keys make jobs of many tables.
    Options::default()
        .write_buffer_size(32 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(64 << 10)
        .block_cache_bytes(1 << 20)
        .max_subcompactions(subcompactions)
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(|kv| kv.unwrap()).collect()
}

fn ticker(db: &Db, t: Ticker) -> u64 {
    db.statistics().ticker(t)
}

/// Random puts, overwrites and deletes, with snapshots held across compactions, into a store
/// whose compactions split between four threads and one whose compactions never split: both
/// must read as the model (and each snapshot as the model of its moment) through background
/// compaction, a full compaction and a reopen.
#[test]
fn split_compactions_read_as_a_btreemap_and_as_unsplit_ones() {
    let split_dir = scratch();
    let whole_dir = scratch();
    let split = Db::open(split_dir.path(), small_options(4)).unwrap();
    let whole = Db::open(whole_dir.path(), small_options(1)).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(7);
    let mut snapshots = Vec::new();
    for round in 0..6 {
        for _ in 0..4000 {
            let k = format!("key{:06}", rng.gen_range(0..3000)).into_bytes();
            if rng.gen_bool(0.15) {
                split.delete(&k).unwrap();
                whole.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("v{round}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes();
                split.put(&k, &v).unwrap();
                whole.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        if round % 2 == 0 {
            snapshots.push((split.snapshot(), model.clone()));
        }
        settle(&split);
        settle(&whole);
        assert_eq!(contents(&split), model, "split store after round {round}");
        assert_eq!(contents(&whole), model, "unsplit store after round {round}");
        for (snapshot, then) in &snapshots {
            let seen: BTreeMap<_, _> = split.iter_at(snapshot).map(|kv| kv.unwrap()).collect();
            assert_eq!(&seen, then, "a snapshot of the split store");
        }
    }
    assert!(
        ticker(&split, Ticker::Subcompactions) > 0,
        "no compaction was split: the test did not test splitting"
    );
    assert_eq!(ticker(&whole, Ticker::Subcompactions), 0);
    drop(snapshots);
    split.compact().unwrap();
    assert_eq!(contents(&split), model);
    drop(split);
    // A reopen replays the MANIFEST, which refuses overlapping tables within a level ≥ 1.
    let split = Db::open(split_dir.path(), small_options(4)).unwrap();
    assert_eq!(contents(&split), model);
    for (k, v) in &model {
        assert_eq!(split.get(k).unwrap().as_ref(), Some(v));
    }
}

/// Keys written in ascending order make tables that overlap nothing below them: they move down
/// by a MANIFEST edit, so every key is written to a table about once (by its flush), and every
/// key reads back before and after a reopen.
#[test]
fn tables_of_ascending_keys_move_down_without_a_rewrite() {
    let dir = scratch();
    let n = 30_000u32;
    let value = |i: u32| format!("value-{i}-{}", "y".repeat((i % 40) as usize)).into_bytes();
    {
        let db = Db::open(dir.path(), small_options(2)).unwrap();
        for i in 0..n {
            db.put(format!("key{i:08}"), value(i)).unwrap();
        }
        db.flush().unwrap();
        settle(&db);
        let moved = ticker(&db, Ticker::TrivialMoves);
        let written = ticker(&db, Ticker::TableBytesWritten) as f64;
        let user = ticker(&db, Ticker::UserBytesWritten) as f64;
        assert!(moved > 0, "no table moved");
        let deeper: usize = tables_per_level(&db)[2..].iter().sum();
        assert!(deeper > 0, "no table reached L2");
        // Every table is written once, by its flush (with an index, a filter and a block
        // trailer per 4 KiB): well under twice the user bytes, where rewriting each table once
        // more on its way down would pass it.
        assert!(
            written < 1.6 * user,
            "{written} table bytes for {user} user bytes, {moved} tables moved"
        );
        for i in (0..n).step_by(7) {
            assert_eq!(db.get(format!("key{i:08}")).unwrap(), Some(value(i)));
        }
    }
    let db = Db::open(dir.path(), small_options(2)).unwrap();
    let got = contents(&db);
    assert_eq!(got.len(), n as usize);
    for (i, (k, v)) in got.iter().enumerate() {
        let i = i as u32;
        assert_eq!(k, format!("key{i:08}").as_bytes());
        assert_eq!(v, &value(i));
    }
}

/// Tables that hold a tombstone are rewritten, not moved, even when they overlap nothing below:
/// only a rewrite drops a tombstone, and a moved one could come to rest in the last level.
#[test]
fn tables_holding_tombstones_are_rewritten_not_moved() {
    let dir = scratch();
    let db = Db::open(dir.path(), small_options(2)).unwrap();
    let snapshot = db.snapshot();
    let mut between = Vec::new();
    for i in 0..10_000u32 {
        db.put(format!("key{i:08}"), format!("value-{i}")).unwrap();
        // After every key, a key between it and the next, written, seen by a snapshot (one in
        // ten; the others by the snapshot of a later one), then deleted: compactions keep both
        // versions (a tombstone with nothing below it could be dropped), so every table of more
        // than one entry holds tombstones, yet tables do not overlap each other.
        let gone = format!("key{i:08}-gone");
        db.put(&gone, "soon gone").unwrap();
        if i % 10 == 9 {
            between.push(db.snapshot());
        }
        db.delete(&gone).unwrap();
    }
    // And one past the last key, so that the table holding the last keys has one too.
    db.delete("key99999999-gone").unwrap();
    db.flush().unwrap();
    settle(&db);
    assert!(ticker(&db, Ticker::Compactions) > 0);
    assert_eq!(ticker(&db, Ticker::TrivialMoves), 0);
    assert_eq!(db.get_at(&snapshot, "key00000000").unwrap(), None);
    assert_eq!(
        db.get_at(&between[0], "key00000009-gone")
            .unwrap()
            .as_deref(),
        Some(&b"soon gone"[..])
    );
    assert_eq!(db.get("key00000009-gone").unwrap(), None);
    for i in (0..10_000u32).step_by(11) {
        assert_eq!(
            db.get(format!("key{i:08}")).unwrap(),
            Some(format!("value-{i}").into_bytes())
        );
    }
}

/// Three L0 tables, below the trigger of 4, that every Get of an absent key in their range checks
/// in vain. With `compact_l0_for_reads` on (the default), once those checks have paid for it the
/// compaction thread compacts L0 into L1, and every key reads as written; off, L0 stays however
/// many such Gets come (twice the price here).
#[test]
fn reads_compact_l0_once_their_filter_checks_have_paid_for_it() {
    // At least 2^18 checks in vain, three per Get.
    const PRICE_IN_GETS: u32 = (1 << 18) / 3 + 1;
    for on in [true, false] {
        let dir = scratch();
        // Not merged for the writes' pause either: this test waits for the reads' price.
        let options = Options::default()
            .compact_l0_for_reads(on)
            .compact_l0_when_idle(false);
        let db = Db::open(dir.path(), options).unwrap();
        for table in 0..3u32 {
            for i in 0..1000u32 {
                let n = 3 * i + table;
                db.put(format!("key{n:08}"), format!("value-{n}")).unwrap();
            }
            db.flush().unwrap();
        }
        settle(&db);
        assert_eq!(tables_per_level(&db)[0], 3);
        let absent = |j: u32| format!("key{:08}-absent", j % 3000);
        let mut gets = 0u32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while gets < 2 * PRICE_IN_GETS
            || (on && tables_per_level(&db)[0] > 0 && std::time::Instant::now() < deadline)
        {
            for j in gets..gets + 1000 {
                assert_eq!(db.get(absent(j)).unwrap(), None);
            }
            gets += 1000;
        }
        let l0_checks = db.statistics().level_filter_counts(0).checks();
        if on {
            // L0 went only once the price was paid.
            assert!(l0_checks >= 1 << 18, "{l0_checks}");
            settle(&db);
            assert_eq!(tables_per_level(&db)[0], 0, "after {gets} Gets");
            assert_eq!(ticker(&db, Ticker::ReadTriggeredCompactions), 1);
        } else {
            // Every Get checked the three tables, and the thread would have looked many times
            // over by now.
            assert!(l0_checks >= 3 * u64::from(2 * PRICE_IN_GETS), "{l0_checks}");
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert_eq!(tables_per_level(&db)[0], 3);
            assert_eq!(ticker(&db, Ticker::ReadTriggeredCompactions), 0);
        }
        for n in 0..3000u32 {
            assert_eq!(
                db.get(format!("key{n:08}")).unwrap(),
                Some(format!("value-{n}").into_bytes())
            );
        }
    }
}

#[test]
fn l0_gathers_more_tables_while_writes_flow_and_compacts_once_they_pause() {
    // On the disk, not tmpfs: flushes that wait for a real fsync are what keeps writes flowing.
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default()
        .write_buffer_size(32 << 10)
        .level0_compaction_trigger(2)
        .level0_compaction_trigger_during_writes(8);
    let db = Db::open(dir.path(), options).unwrap();
    let value = vec![b'v'; 100];
    let mut most_in_l0 = 0;
    // About fifteen memtables' worth, written without a pause: flushes come milliseconds apart.
    for n in 0..5000u32 {
        db.put(format!("key{:08}", n.wrapping_mul(2_654_435_761)), &value)
            .unwrap();
        if n % 50 == 0 {
            most_in_l0 = most_in_l0.max(tables_per_level(&db)[0]);
        }
    }
    // L0 stays at 6 and at 7 tables for a memtable's worth of puts each on its way to 8; at the
    // quiet trigger of 2 it would take the compaction falling four flushes behind.
    assert!(most_in_l0 >= 6, "L0 held at most {most_in_l0} tables");
    // The writes pause with the last memtable unflushed: within about a second L0 is compacted
    // at the quiet trigger, with no flush and no read to prompt it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while tables_per_level(&db)[0] >= 2 {
        assert!(std::time::Instant::now() < deadline, "L0 never compacted");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(ticker(&db, Ticker::ReadTriggeredCompactions), 0);
    for n in 0..5000u32 {
        let key = format!("key{:08}", n.wrapping_mul(2_654_435_761));
        assert_eq!(db.get(&key).unwrap().as_deref(), Some(&value[..]), "{key}");
    }
}

/// While writes flow, a level below L0 gathers past its byte budget (up to
/// `level_budget_during_writes` times it) before compacting into the next; the held-back work
/// counts as pending, and once the writes pause every level is brought within its budget with no
/// flush or read to prompt it. Every key reads as written.
#[test]
fn levels_gather_past_their_budget_while_writes_flow_and_return_within_it_once_they_pause() {
    // On the disk, not tmpfs: flushes that wait for a real fsync are what keeps writes flowing.
    let dir = tempfile::tempdir().unwrap();
    // L1's budget is 16 KiB, two to four tables; a budget a thousand times that is never reached.
    // L0 compacts at two tables while writes flow too, and the keys come in order, so that each
    // flush reaches L1 at once, moved down without a rewrite (a compaction thread slowed by a
    // loaded machine would otherwise leave much of the data in L0).
    let options = Options::default()
        .write_buffer_size(32 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(16 << 10)
        .level0_compaction_trigger(2)
        .level0_compaction_trigger_during_writes(2)
        .level_budget_during_writes(1000.0);
    let db = Db::open(dir.path(), options).unwrap();
    let value = vec![b'v'; 100];
    let key = |n: u32| format!("key{n:08}");
    // About seventeen memtables' worth, written without a pause: flushes come milliseconds apart.
    for n in 0..5000u32 {
        db.put(key(n), &value).unwrap();
        if n % 50 == 0 {
            assert_eq!(
                tables_per_level(&db)[2],
                0,
                "L1 compacted down after {n} puts"
            );
        }
    }
    let l1_tables = tables_per_level(&db)[1];
    assert!(l1_tables > 8, "L1 holds {l1_tables} tables");
    assert_eq!(db.property("siftdb.compaction-pending").unwrap(), "1");
    // The writes pause with the last memtable unflushed: within about a second the compaction
    // thread starts bringing L1 back within its budget.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while tables_per_level(&db)[2] == 0 {
        assert!(std::time::Instant::now() < deadline, "L1 never compacted");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    settle(&db);
    assert_eq!(db.property("siftdb.compaction-pending").unwrap(), "0");
    assert!(
        tables_per_level(&db)[1] < l1_tables,
        "{:?}",
        tables_per_level(&db)
    );
    for n in 0..5000u32 {
        assert_eq!(
            db.get(key(n)).unwrap().as_deref(),
            Some(&value[..]),
            "{}",
            key(n)
        );
    }
}

/// The deepest level, L2 here, is not merged into the empty L3 below it: it grows past its own
/// budget (and its slack while writes flow) up to L3's, L1 growing to a tenth of it, and then
/// moves into L3 whole, without a rewrite. Every key reads as written, before and after a reopen.
#[test]
fn the_deepest_level_grows_into_the_empty_level_below_and_moves_there_whole() {
    // On the disk, not tmpfs: flushes that wait for a real fsync are what keeps writes flowing.
    let dir = tempfile::tempdir().unwrap();
    // Budgets: L1 64 KiB, L2 640 KiB, L3 6.4 MiB; tables of about 8 KiB.
    let options = small_options(2);
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = BTreeMap::new();
    let (mut most_in_l1, mut most_in_l2, mut moves_before) = (0usize, 0usize, 0u64);
    let mut l3_at_first = None;
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        // Keys and incompressible values in random order until L3 receives tables: about 8 MiB
        // if compactions keep up, more if they run late on a loaded machine.
        for n in 0..600_000u32 {
            let key = format!("key{:08}", rng.gen_range(0..1_000_000u32)).into_bytes();
            let value: Vec<u8> = (0..100).map(|_| rng.r#gen()).collect();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
            if n % 200 == 0 {
                let tables = tables_per_level(&db);
                let moves = ticker(&db, Ticker::TrivialMoves);
                if tables[3] > 0 {
                    l3_at_first = Some((tables[3], moves - moves_before));
                    break;
                } else {
                    most_in_l1 = most_in_l1.max(tables[1]);
                    most_in_l2 = most_in_l2.max(tables[2]);
                    moves_before = moves;
                }
            }
        }
        db.flush().unwrap();
        settle(&db);
        let (l3_tables, moved) = l3_at_first
            .unwrap_or_else(|| panic!("L3 never received a table: {:?}", tables_per_level(&db)));
        // Twice L2's budget is about 160 tables, where a level merges into the next one.
        assert!(most_in_l2 > 300, "L2 held at most {most_in_l2} tables");
        // Twice L1's own budget is about 16 tables.
        assert!(most_in_l1 > 24, "L1 held at most {most_in_l1} tables");
        // L3's first tables came by moves, as many at least as L3 then held.
        assert!(
            moved >= l3_tables as u64,
            "{l3_tables} tables in L3, {moved} moved"
        );
        assert_eq!(contents(&db), model);
    }
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(contents(&db), model);
    for (k, v) in model.iter().step_by(13) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
}

/// Three L0 tables, below the trigger of 4, and no more writes: with `compact_l0_when_idle` on
/// (the default) the compaction thread merges them into L1 about a second after the last flush,
/// without a read to prompt it, and `siftdb.compaction-pending` counts that merge as pending until
/// it is done. Every key reads as written and every absent key as absent (no filter lost a key)
/// before, after and across a reopen, and a missing key then asks one filter line per level.
#[test]
fn l0_merges_into_l1_once_writes_pause_and_every_key_still_reads() {
    let dir = scratch();
    let check = |db: &Db, what: &str| {
        for n in 0..3000u32 {
            let got = db.get(format!("key{n:08}")).unwrap();
            assert_eq!(got, Some(format!("value-{n}").into_bytes()), "{what}: {n}");
            assert_eq!(db.get(format!("key{n:08}-absent")).unwrap(), None, "{what}");
        }
    };
    {
        let db = Db::open(dir.path(), Options::default().compact_l0_for_reads(false)).unwrap();
        // Below L0's trigger: an L1 under the L0 tables, then three L0 tables over it.
        for n in (0..3000u32).step_by(2) {
            db.put(format!("key{n:08}"), format!("value-{n}")).unwrap();
        }
        db.compact().unwrap();
        for table in 0..3u32 {
            for i in 0..500u32 {
                let n = 6 * i + 2 * table + 1;
                db.put(format!("key{n:08}"), format!("value-{n}")).unwrap();
            }
            db.flush().unwrap();
        }
        assert_eq!(tables_per_level(&db)[0], 3);
        assert_eq!(db.property("siftdb.compaction-pending").unwrap(), "1");
        check(&db, "in L0");
        settle(&db);
        assert_eq!(tables_per_level(&db)[0], 0);
        assert_eq!(ticker(&db, Ticker::IdleL0Compactions), 1);
        assert_eq!(ticker(&db, Ticker::ReadTriggeredCompactions), 0);
        let before = db.statistics();
        check(&db, "merged");
        let s = db.statistics().since(&before);
        // One table (L1) per Get: one cache-local bloom line, none in L0.
        let checks = s.filter_totals().checks();
        assert_eq!(checks, s.ticker(Ticker::TablesConsulted));
        assert_eq!(s.ticker(Ticker::FilterLinesTouched), checks);
        assert_eq!(s.filter_lines_touched(0), 0);
        assert_eq!(s.filter_lines_touched(1), checks);
        // Every key but the last absent one, which sorts after every table.
        assert_eq!(checks, 5999);
        // The report's figure is over every Get so far: those that met L0 too.
        let total = db.statistics();
        let per_get = |level| total.filter_lines_touched(level) as f64 / 12000.0;
        let report = db.property("siftdb.stats").unwrap();
        let line = format!(
            "filter lines touched per Get (12000 Gets): L0 {:.2}  L1 {:.2}\n",
            per_get(0),
            per_get(1)
        );
        assert!(report.contains(&line), "{line} in {report}");
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    check(&db, "reopened");
    // Off, L0 stays below its trigger and nothing is pending.
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default().compact_l0_when_idle(false)).unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    assert_eq!(db.property("siftdb.compaction-pending").unwrap(), "0");
    assert_eq!(tables_per_level(&db)[0], 1);
}
