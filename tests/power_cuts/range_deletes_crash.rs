//! Random power cuts against a model of acknowledged writes, with range deletes among them.
//!
//! The loop of `tests/power_cuts/power_cut.rs` (the same tiny store, where flushes, compactions, WAL
//! switches and MANIFEST/CURRENT switches happen all the time; the same cuts, aimed at any
//! operation, table files, the MANIFEST and CURRENT, the flush or compaction thread, or inside
//! `Db::open`; the same power failures), whose batches mix puts, deletes and range deletes over
//! 600 keys. A range is mostly a few dozen keys, sometimes a few hundred; its bounds are keys or
//! fall between them. With 4 KiB memtables and tables and 16 KiB levels, a range covers keys held
//! in memtables and in tables of several levels, and its tombstone travels from the WAL into L0
//! tables (by a flush, or by recovery) and down the levels; some lives hold a snapshot, so that
//! compactions keep tombstones and what they cover down to L2. After each cut the store is
//! reopened (and that open may be cut again) and checked:
//!
//! - it opens;
//! - a full scan holds exactly the state after a prefix `0..m` of the batches attempted (no holes,
//!   nothing reordered, batches whole), `m` covering every batch acknowledged before the last
//!   acknowledged synced write, `flush`, `compact` or `sync_wal`, and after a process crash every
//!   acknowledged batch;
//! - a Get and a `multi_get` of every key, and scans of random ranges both ways, agree with it.
//!
//! While the store lives, Gets and scans (some at the snapshot) agree with the model. The run
//! must find, after reopens, tables holding range tombstones in L0 and in L2 or deeper, and
//! lookups they answered.
//!
//! Short mode (plain `cargo test`): 1,000 cuts. `SIFTDB_LONG=1`: 20,000; `SIFTDB_POWER_CUTS=n`: any
//! number; `SIFTDB_POWER_CUT_SEED=s`: another random sequence. Add `-- --nocapture` to see where
//! the cuts landed and how many lookups range tombstones answered after a reopen.

use crate::common;
use common::power_cuts::{
    aim, open_through_cuts, power_fails, tiny_options, upkeep, Epochs, Tally,
};
use common::{env_number, files_with_ext, key, long};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::fault_injection::FaultInjector;
use siftdb::inspect::TableInfo;
use siftdb::{Db, Filter, Options, Snapshot, Ticker, WriteBatch, WriteOptions};

/// One write of a batch.
#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// Every key in `[start, end)`.
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// One write batch, applied in order.
type Batch = Vec<Op>;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: usize = 600;

fn cuts() -> usize {
    env_number("SIFTDB_POWER_CUTS", if long() { 20_000 } else { 1_000 }) as usize
}

fn options(epoch: usize, faults: &FaultInjector) -> Options {
    let filter = match epoch % 3 {
        0 => Filter::full(10.0),
        1 => Filter::partitioned(10.0).partition_bytes(256),
        _ => Filter::block_based(10.0),
    };
    tiny_options()
        .level0_compaction_trigger_during_writes(if epoch % 2 == 1 { 4 } else { 2 })
        .filter(filter)
        // Compactions for reads after a few dozen Gets that miss L0, so that cuts land in them.
        .read_compaction_tuning(16, 1024, std::time::Duration::from_millis(1))
        .fault_injector(faults.clone())
}

/// A bound of a range: key `i`, or (now and then) a point just after it, between keys.
fn bound(rng: &mut StdRng, i: usize) -> Vec<u8> {
    let mut k = key(i);
    if rng.gen_bool(0.25) {
        k.push(b'-');
    }
    k
}

/// A range of keys: mostly a few dozen, sometimes a few hundred (past the last key), now and then
/// empty.
fn random_range(rng: &mut StdRng) -> (Vec<u8>, Vec<u8>) {
    let a = rng.gen_range(0..KEYS);
    let width = match rng.gen_range(0..20) {
        0 => 0,
        1 | 2 => rng.gen_range(60..300),
        _ => rng.gen_range(1..40),
    };
    (bound(rng, a), bound(rng, a + width))
}

fn random_batch(rng: &mut StdRng, id: u64) -> Batch {
    (0..rng.gen_range(1..=4))
        .map(|_| match rng.gen_range(0..100) {
            0..=5 => {
                let (start, end) = random_range(rng);
                Op::DeleteRange(start, end)
            }
            6..=20 => Op::Delete(key(rng.gen_range(0..KEYS))),
            _ => {
                // Mostly small values, now and then one that spans WAL blocks.
                let len = if rng.gen_bool(0.01) {
                    rng.gen_range(30_000..70_000)
                } else {
                    rng.gen_range(0..200)
                };
                let mut v = format!("{id}:").into_bytes();
                v.resize(v.len() + len, b'a' + (id % 26) as u8);
                Op::Put(key(rng.gen_range(0..KEYS)), v)
            }
        })
        .collect()
}

fn apply(state: &mut State, batch: &Batch) {
    for op in batch {
        match op {
            Op::Put(k, v) => {
                state.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                state.remove(k);
            }
            Op::DeleteRange(start, end) => {
                if start < end {
                    let doomed: Vec<Vec<u8>> = state
                        .range::<[u8], _>((Bound::Included(&start[..]), Bound::Excluded(&end[..])))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in doomed {
                        state.remove(&k);
                    }
                }
            }
        }
    }
}

/// What the loop counts besides the cuts.
#[derive(Default)]
struct RangeTally {
    /// Range deletes acknowledged.
    acked: u64,
    /// Lookups of the checks after a reopen that a range tombstone answered.
    covered_after_reopen: u64,
    /// Tables holding range tombstones found at reopens, by level.
    tombstone_tables_by_level: BTreeMap<usize, usize>,
}

#[test]
fn power_cuts_amid_range_deletes_recover_a_prefix_holding_every_synced_write() {
    let cuts = cuts();
    let started = Instant::now();
    let seed = env_number("SIFTDB_POWER_CUT_SEED", 0x5eed_0d31);
    let mut rng = StdRng::seed_from_u64(seed);
    let root = common::scratch();
    let mut tally = Tally::default();
    let mut ranges = RangeTally::default();
    let per_epoch = 40;
    let mut next_id = 0u64;
    // Per epoch: the batches attempted so far (their prefix the store must hold), and how many of
    // them must survive.
    let mut history: Vec<Batch> = Vec::new();
    let mut durable = 0usize;
    let mut acked = 0usize;
    let mut epochs = Epochs::new(root.path(), per_epoch);
    while tally.cuts < cuts {
        if epochs.advance(tally.cuts) {
            history.clear();
            durable = 0;
            acked = 0;
        }
        let (epoch, dir, faults) = (epochs.number, &epochs.dir, &epochs.faults);
        let what = format!("seed {seed}, cut {} (epoch {epoch})", tally.cuts);
        let open = || Db::open(dir, options(epoch, faults));
        let (db, power_cut) = open_through_cuts(faults, &mut rng, &mut tally, &what, open);
        if power_cut {
            acked = 0;
        }
        let (m, recovered) = check(&db, dir, &history, durable.max(acked), &mut rng, &what);
        count_tombstone_tables(&db, dir, &mut ranges);
        ranges.covered_after_reopen += db.statistics().ticker(Ticker::RangeDeleteCovered);
        tally.batches_lost += history.len() - m;
        history.truncate(m);
        durable = m;

        // One life: batches until the cut stops the store.
        let injected_before = faults.injected().len();
        let aimed = aim(&mut rng, faults);
        *tally.by_aim.entry(format!("{aimed:?}")).or_default() += 1;
        // Some lives hold a snapshot of the recovered state: compactions then keep the range
        // tombstones above it, with the entries they cover, down the levels.
        let snapshot = rng
            .gen_bool(0.3)
            .then(|| (db.snapshot(), recovered.clone()));
        let mut model = recovered;
        for _ in 0..rng.gen_range(1..600) {
            let batch = random_batch(&mut rng, next_id);
            next_id += 1;
            let sync = rng.gen_bool(0.1);
            let result = match batch.as_slice() {
                // A lone unsynced range delete goes through `Db::delete_range`.
                [Op::DeleteRange(start, end)] if !sync => db.delete_range(start..end),
                _ => {
                    let mut b = WriteBatch::new();
                    for op in &batch {
                        match op {
                            Op::Put(k, v) => b.put(k, v),
                            Op::Delete(k) => b.delete(k),
                            Op::DeleteRange(start, end) => b.delete_range(start..end),
                        };
                    }
                    db.write_opt(b, &WriteOptions { sync })
                }
            };
            history.push(batch);
            if result.is_err() {
                break;
            }
            let batch = history.last().unwrap();
            ranges.acked += batch
                .iter()
                .filter(|op| matches!(op, Op::DeleteRange(..)))
                .count() as u64;
            apply(&mut model, batch);
            acked = history.len();
            tally.batches_acked += 1;
            if sync {
                durable = history.len();
                tally.synced_acked += 1;
            }
            let pick = rng.gen_range(0..200);
            match upkeep(&db, pick) {
                Some(Ok(())) => durable = history.len(),
                Some(Err(())) => break,
                None => {}
            }
            match pick {
                4..=6 => {
                    // A live read sees every acknowledged write; one at the snapshot sees none
                    // made after it.
                    let k = key(rng.gen_range(0..KEYS));
                    let (got, want) = match &snapshot {
                        Some((s, at)) if rng.gen_bool(0.5) => (db.get_at(s, &k), at.get(&k)),
                        _ => (db.get(&k), model.get(&k)),
                    };
                    match got {
                        Ok(v) => assert_eq!(v.as_ref(), want, "{what}: live get"),
                        Err(_) => break, // a background failure may surface here
                    }
                }
                7..=9 => {
                    // So does a scan, which gathers the range tombstones over its range.
                    let (start, end) = random_range(&mut rng);
                    let reverse = rng.gen_bool(0.5);
                    let (got, want) = match &snapshot {
                        Some((s, at)) if rng.gen_bool(0.5) => {
                            (scan_at(&db, Some(s), &start, &end, reverse), at)
                        }
                        _ => (scan_at(&db, None, &start, &end, reverse), &model),
                    };
                    match got {
                        Ok(got) => assert_eq!(
                            got,
                            expected(want, &start, &end, reverse),
                            "{what}: live scan of {:?}..{:?}",
                            String::from_utf8_lossy(&start),
                            String::from_utf8_lossy(&end)
                        ),
                        Err(_) => break,
                    }
                }
                _ => {}
            }
        }
        // The cut may not have come yet (or was an injected error): the machine stops now.
        tally.machine_stops(faults, injected_before);
        tally.read_compactions += db.statistics().ticker(Ticker::ReadTriggeredCompactions);
        drop(snapshot);
        drop(db);
        tally.cuts += 1;
        if power_fails(faults, &mut rng, &mut tally) {
            acked = 0; // a power cut may lose what was acknowledged but not synced
        }
    }
    eprintln!(
        "power cuts amid range deletes (seed {seed}): {} in {:.1?} ({} inside open, {} process \
         crashes instead, {} after an injected I/O error); {} batches acknowledged ({} synced, {} \
         range deletes), {} unsynced batches lost, {} unsynced bytes lost; after reopens, {} \
         lookups answered by a range tombstone and tables with range tombstones by level {:?}; \
         aimed at {:?}; cut in threads {:?}; cut on files {:?}",
        tally.cuts,
        started.elapsed(),
        tally.in_open,
        tally.process_crashes,
        tally.injected,
        tally.batches_acked,
        tally.synced_acked,
        ranges.acked,
        tally.batches_lost,
        tally.bytes_lost,
        ranges.covered_after_reopen,
        ranges.tombstone_tables_by_level,
        tally.by_aim,
        tally.by_thread,
        tally.by_file,
    );
    assert!(tally.in_open > 0, "no cut landed inside open");
    assert!(
        tally.by_file.contains_key("table"),
        "no cut landed on a table"
    );
    assert!(
        ranges.covered_after_reopen > 0,
        "no lookup after a reopen met a range tombstone"
    );
    assert!(
        ranges.tombstone_tables_by_level.contains_key(&0)
            && ranges.tombstone_tables_by_level.keys().any(|&l| l >= 2),
        "range tombstones never reached L0 and L2 or deeper: {:?}",
        ranges.tombstone_tables_by_level
    );
}

/// The entries of `[start, end)` in `db` (none if the range is empty), in key order or reversed;
/// at `snapshot`, if given.
fn scan_at(
    db: &Db,
    snapshot: Option<&Snapshot>,
    start: &[u8],
    end: &[u8],
    reverse: bool,
) -> siftdb::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if start >= end {
        return Ok(Vec::new());
    }
    let range = start.to_vec()..end.to_vec();
    let s = match snapshot {
        Some(snapshot) => db.scan_at(snapshot, range),
        None => db.scan(range),
    };
    if reverse {
        s.rev().collect()
    } else {
        s.collect()
    }
}

/// The entries of `[start, end)` in `state`, as [`scan_at`] gives them.
fn expected(state: &State, start: &[u8], end: &[u8], reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    if start >= end {
        return Vec::new();
    }
    let range = state
        .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
        .map(|(k, v)| (k.clone(), v.clone()));
    if reverse {
        range.rev().collect()
    } else {
        range.collect()
    }
}

/// The length `m >= durable` of a prefix of `history` whose state is `recovered` (the shortest,
/// where batches that change nothing make several fit).
fn prefix_length(history: &[Batch], durable: usize, recovered: &State, what: &str) -> usize {
    let mut state = State::new();
    for b in &history[..durable.min(history.len())] {
        apply(&mut state, b);
    }
    let expected = state.clone();
    for m in durable..=history.len() {
        if m > durable {
            apply(&mut state, &history[m - 1]);
        }
        if &state == recovered {
            return m;
        }
    }
    let differing: BTreeSet<String> = expected
        .iter()
        .filter(|(k, v)| recovered.get(*k) != Some(v))
        .chain(recovered.iter().filter(|(k, _)| !expected.contains_key(*k)))
        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
        .take(8)
        .collect();
    panic!(
        "{what}: the store holds no prefix of the {} batches that starts with the {durable} \
         that must survive; keys differing from their state: {differing:?}",
        history.len()
    );
}

/// Checks the reopened store against the model: its contents (by a full scan) are the state after
/// a prefix of `history` no shorter than `durable`; a Get and a `multi_get` of every key, and
/// scans of random ranges both ways, agree. Returns the prefix's length and the contents.
fn check(
    db: &Db,
    dir: &Path,
    history: &[Batch],
    durable: usize,
    rng: &mut StdRng,
    what: &str,
) -> (usize, State) {
    let seen: State = db
        .iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{what}: scan of {} failed: {e}", dir.display())))
        .collect();
    let m = prefix_length(history, durable, &seen, what);
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    for k in &keys {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get failed: {e}"));
        assert_eq!(
            got.as_ref(),
            seen.get(k),
            "{what}: get of {}",
            String::from_utf8_lossy(k)
        );
    }
    for (k, got) in keys.iter().zip(db.multi_get(&keys)) {
        let got = got.unwrap_or_else(|e| panic!("{what}: multi_get failed: {e}"));
        assert_eq!(
            got.as_ref(),
            seen.get(k),
            "{what}: multi_get of {}",
            String::from_utf8_lossy(k)
        );
    }
    for _ in 0..4 {
        let (start, end) = random_range(rng);
        let reverse = rng.gen_bool(0.5);
        let got = scan_at(db, None, &start, &end, reverse)
            .unwrap_or_else(|e| panic!("{what}: scan of a range failed: {e}"));
        assert_eq!(
            got,
            expected(&seen, &start, &end, reverse),
            "{what}: scan of {:?}..{:?} (reverse: {reverse})",
            String::from_utf8_lossy(&start),
            String::from_utf8_lossy(&end)
        );
    }
    (m, seen)
}

/// Counts the live tables of the reopened store that hold range tombstones, by level (found with
/// `explain_get`, which names the level of each table a lookup considers).
fn count_tombstone_tables(db: &Db, dir: &Path, ranges: &mut RangeTally) {
    let mut level_of: BTreeMap<u64, usize> = BTreeMap::new();
    for i in (0..KEYS).step_by(4) {
        if let Ok(e) = db.explain_get(key(i)) {
            for step in e.tables {
                level_of.insert(step.file_number, step.level);
            }
        }
    }
    for path in files_with_ext(dir, "sst") {
        let number = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u64>().ok());
        let Some(&level) = number.and_then(|n| level_of.get(&n)) else {
            continue;
        };
        // A compaction for reads may have replaced it meanwhile.
        if let Ok(info) = TableInfo::open(&path)
            && info.num_range_deletions > 0
        {
            *ranges.tombstone_tables_by_level.entry(level).or_default() += 1;
        }
    }
}
