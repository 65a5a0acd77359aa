//! Random power cuts against a model of acknowledged writes.
//!
//! A store with tiny memtables, tables and levels (so flushes, compactions, WAL switches and the
//! MANIFEST/CURRENT switch of every open happen all the time) runs random write batches over a
//! small key space, some synced, with the odd `flush`, `compact` and `sync_wal`, and compactions
//! for reads made cheap (a few dozen Gets that miss L0, such as the checks after every reopen, pay
//! for one) and, every other epoch, L0 merged into L1 after a millisecond without writes, so that
//! cuts land in those too; every 50 cuts a new store
//! with the next filter layout, and every other 100 with index and filter blocks read through a
//! 16 KiB block cache instead of kept with the tables. The fault-injection layer
//! (`siftdb::fault_injection`) stops the machine at a random operation: any operation, or one
//! aimed at table files (flushes and compactions), at the MANIFEST and CURRENT, at the flush or
//! compaction thread, or inside `Db::open` itself (recovery, then the new MANIFEST and CURRENT).
//! Sometimes an operation fails with `EIO` first instead. Then the power goes: each file keeps its
//! fsynced bytes and none, a prefix, or zeros of the rest; each directory entry changed since the
//! last directory fsync keeps one of its states. Sometimes only the process crashes instead (all
//! written bytes stay). Then the store is reopened (and that open may be cut again) and checked:
//!
//! - it opens;
//! - it holds exactly the state after a prefix `0..m` of the batches attempted (no holes, nothing
//!   reordered, batches whole);
//! - `m` covers every batch acknowledged before the last acknowledged synced write, `flush`,
//!   `compact` or `sync_wal` (each makes everything before it durable), and after a process crash every
//!   acknowledged batch;
//! - a Get of every key returns the model's value, through the table filters.
//!
//! Both compaction styles: leveled, and lazy leveling with two or three runs per level (and every
//! fourth epoch's store switching between the styles at each reopen).
//!
//! Short mode (plain `cargo test`): 300 cuts, 150 under lazy leveling. `SIFTDB_LONG=1`: 10,000;
//! `SIFTDB_POWER_CUTS=n`: any number; `SIFTDB_POWER_CUT_SEED=s`: another random sequence. Add
//! `-- --nocapture` to see where the cuts landed.

use crate::common;
use common::power_cuts::{
    aim, open_through_cuts, power_fails, tiny_options, upkeep, Epochs, Tally,
};
use common::{env_number, key, long};
use std::collections::BTreeMap;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::fault_injection::FaultInjector;
use siftdb::{CompactionStyle, Db, Filter, Options, Ticker, WriteBatch, WriteOptions};

/// One write batch: keys to set (`Some`) or delete (`None`).
type Batch = Vec<(Vec<u8>, Option<Vec<u8>>)>;

const KEYS: u32 = 120;

fn cuts(short: u64) -> usize {
    env_number("SIFTDB_POWER_CUTS", if long() { 10_000 } else { short }) as usize
}

/// Which compaction style a store of `epoch` runs under, on its `open`-th open.
type Styles = fn(epoch: usize, open: usize) -> CompactionStyle;

fn leveled(_: usize, _: usize) -> CompactionStyle {
    CompactionStyle::Leveled
}

fn lazy_leveled(epoch: usize, open: usize) -> CompactionStyle {
    let lazy = CompactionStyle::LazyLeveled {
        runs_per_level: 2 + epoch % 2,
    };
    match epoch % 4 == 3 && open % 2 == 1 {
        true => CompactionStyle::Leveled,
        false => lazy,
    }
}

fn options(epoch: usize, faults: &FaultInjector, style: CompactionStyle) -> Options {
    let filter = match epoch % 3 {
        0 => Filter::full(10.0),
        1 => Filter::partitioned(10.0),
        _ => Filter::block_based(10.0),
    };
    tiny_options()
        // Odd epochs gather L0 tables while writes flow, as the defaults do, and compact them
        // once the writes pause.
        .level0_compaction_trigger_during_writes(if epoch % 2 == 1 { 4 } else { 2 })
        .filter(filter)
        // Every other pair of epochs reads index and filter blocks through a small block cache.
        .cache_index_and_filter_blocks(epoch % 4 >= 2)
        .block_cache_bytes(if epoch % 4 >= 2 { 16 << 10 } else { 32 << 20 })
        // Compactions for reads after a few dozen Gets that miss L0 (the reads that check a
        // reopened store are enough), looked for every millisecond, so that cuts land inside
        // them too.
        .read_compaction_tuning(16, 1024, std::time::Duration::from_millis(1))
        // Even epochs merge L0 into L1 once the writes pause for a millisecond (a second by
        // default), so that cuts land inside those merges too.
        .idle_compaction_after(std::time::Duration::from_millis(
            if epoch.is_multiple_of(2) { 1 } else { 1000 },
        ))
        .fault_injector(faults.clone())
        .compaction_style(style)
}

fn random_batch(rng: &mut StdRng, id: u64) -> Batch {
    (0..rng.gen_range(1..=4))
        .map(|_| {
            let k = key(rng.gen_range(0..KEYS) as usize);
            if rng.gen_bool(0.2) {
                (k, None)
            } else {
                // Mostly small values, now and then one that spans WAL blocks.
                let len = if rng.gen_bool(0.01) {
                    rng.gen_range(30_000..70_000)
                } else {
                    rng.gen_range(0..200)
                };
                let mut v = format!("{id}:").into_bytes();
                v.resize(v.len() + len, b'a' + (id % 26) as u8);
                (k, Some(v))
            }
        })
        .collect()
}

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn apply(state: &mut State, batch: &Batch) {
    for (k, v) in batch {
        match v {
            Some(v) => state.insert(k.clone(), v.clone()),
            None => state.remove(k),
        };
    }
}

/// The store's contents, read with a scan.
fn contents(db: &Db, what: &str) -> State {
    db.iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{what}: scan failed: {e}")))
        .collect()
}

#[test]
fn random_power_cuts_recover_a_prefix_holding_every_synced_write() {
    power_cuts_recover_a_prefix(leveled, cuts(300), 0x5eed_0016);
}

#[test]
fn random_power_cuts_under_lazy_leveling_recover_a_prefix_holding_every_synced_write() {
    power_cuts_recover_a_prefix(lazy_leveled, cuts(150), 0x1a2e_0016);
}

fn power_cuts_recover_a_prefix(styles: Styles, cuts: usize, seed: u64) {
    let started = Instant::now();
    let seed = env_number("SIFTDB_POWER_CUT_SEED", seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let root = tempfile::tempdir().unwrap();
    let mut tally = Tally::default();
    let per_epoch = 50;
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
        let what = format!("cut {} (epoch {epoch})", tally.cuts);
        // Each open of a store switching styles switches, also inside recovery's cuts.
        let (cut, opens) = (tally.cuts, std::cell::Cell::new(0));
        let open = || {
            opens.set(opens.get() + 1);
            Db::open(
                dir,
                options(epoch, faults, styles(epoch, cut + opens.get())),
            )
        };
        let (db, power_cut) = open_through_cuts(faults, &mut rng, &mut tally, &what, open);
        if power_cut {
            acked = 0;
        }
        // The store holds a prefix covering every batch that must survive (all acknowledged ones
        // after a process crash); what it holds is durable now (recovery flushed it).
        let (m, recovered) = check(&db, &history, durable.max(acked), &what);
        tally.batches_lost += history.len() - m;
        history.truncate(m);
        durable = m;

        // One life: batches until the cut stops the store.
        let injected_before = faults.injected().len();
        let aimed = aim(&mut rng, faults);
        *tally.by_aim.entry(format!("{aimed:?}")).or_default() += 1;
        let mut model = recovered;
        for _ in 0..rng.gen_range(1..600) {
            let batch = random_batch(&mut rng, next_id);
            next_id += 1;
            let sync = rng.gen_bool(0.1);
            let mut b = WriteBatch::new();
            for (k, v) in &batch {
                match v {
                    Some(v) => b.put(k, v),
                    None => b.delete(k),
                };
            }
            history.push(batch);
            if db.write_opt(b, &WriteOptions { sync }).is_err() {
                break;
            }
            apply(&mut model, history.last().unwrap());
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
            if (13..=14).contains(&pick) {
                // The writes pause for longer than even epochs wait before L0's idle merge, so
                // that cuts land inside those merges however the background thread was busy.
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            if (4..=9).contains(&pick) {
                // A live read sees every acknowledged write.
                let k = key(rng.gen_range(0..KEYS) as usize);
                match db.get(&k) {
                    Ok(v) => assert_eq!(v.as_ref(), model.get(&k), "{what}: live read"),
                    Err(_) => break, // a background failure may surface here
                }
            }
        }
        // The cut may not have come yet (or was an injected error): the machine stops now.
        tally.machine_stops(faults, injected_before);
        tally.read_compactions += db.statistics().ticker(Ticker::ReadTriggeredCompactions);
        tally.idle_merges += db.statistics().ticker(Ticker::IdleL0Compactions);
        drop(db);
        tally.cuts += 1;
        if power_fails(faults, &mut rng, &mut tally) {
            acked = 0; // a power cut may lose what was acknowledged but not synced
        }
    }
    eprintln!(
        "power cuts (seed {seed}): {} in {:.1?} ({} inside open, {} process crashes instead, {} after an \
         injected I/O error); {} batches acknowledged ({} synced), {} unsynced batches lost, {} \
         unsynced bytes lost, {} directory entries reverted, {} compactions for reads, {} L0 merges \
         once writes paused; aimed at \
         {:?}; cut in threads {:?}; cut on files {:?}",
        tally.cuts,
        started.elapsed(),
        tally.in_open,
        tally.process_crashes,
        tally.injected,
        tally.batches_acked,
        tally.synced_acked,
        tally.batches_lost,
        tally.bytes_lost,
        tally.names_reverted,
        tally.read_compactions,
        tally.idle_merges,
        tally.by_aim,
        tally.by_thread,
        tally.by_file,
    );
    assert!(tally.in_open > 0, "no cut landed inside open");
    assert!(
        tally.by_file.contains_key("table"),
        "no cut landed on a table"
    );
    assert!(tally.read_compactions > 0, "no compaction for reads ran");
    assert!(tally.idle_merges > 0, "no L0 merge once writes paused ran");
}

/// The length `m >= durable` of a prefix of `history` whose state is `recovered` (the shortest,
/// where batches that change nothing make several fit).
fn prefix_length(history: &[Batch], durable: usize, recovered: &State, what: &str) -> usize {
    let mut state = State::new();
    for b in &history[..durable.min(history.len())] {
        apply(&mut state, b);
    }
    for m in durable..=history.len() {
        if m > durable {
            apply(&mut state, &history[m - 1]);
        }
        if &state == recovered {
            return m;
        }
    }
    let mut expected = State::new();
    for b in &history[..durable.min(history.len())] {
        apply(&mut expected, b);
    }
    let missing: Vec<_> = expected
        .iter()
        .filter(|(k, v)| recovered.get(*k) != Some(v))
        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
        .take(8)
        .collect();
    panic!(
        "{what}: the store holds no prefix of the {} batches that starts with the {durable} \
         that must survive; keys differing from their state: {missing:?}",
        history.len()
    );
}

/// Checks the reopened store against the model: its contents are the state after a prefix of
/// `history` no shorter than `durable`, and a Get of every key (through the filters) agrees.
/// Returns the prefix's length and the contents.
fn check(db: &Db, history: &[Batch], durable: usize, what: &str) -> (usize, State) {
    let seen = contents(db, what);
    let m = prefix_length(history, durable, &seen, what);
    for i in 0..KEYS {
        let k = key(i as usize);
        let got = db
            .get(&k)
            .unwrap_or_else(|e| panic!("{what}: get failed: {e}"));
        assert_eq!(got.as_ref(), seen.get(&k), "{what}: get of key {i}");
    }
    (m, seen)
}
