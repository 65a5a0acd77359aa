//! Power cuts against keyspaces, on the fault-injection layer (`siftdb::fault_injection`), as in
//! `tests/power_cut.rs`.
//!
//! **Batches across keyspaces.** A store with three keyspaces ("default", and two created with
//! their own options: one without a filter and with a prefix extractor, one with a partitioned
//! filter), tiny memtables, tables and levels, runs random batches that each write to one, two or
//! three keyspaces, some synced, with the odd flush or compaction of one keyspace and `sync_wal`.
//! A cut stops the machine at a random operation (any, or one aimed at tables, the MANIFEST and
//! CURRENT, the flush or compaction thread, inside `Db::open`, or an injected `EIO`), then the
//! power goes (or only the process crashes) and the store is reopened and checked:
//!
//! - it opens and finds its keyspaces (their creation returned before any cut);
//! - the contents of all keyspaces together are the state after a prefix `0..m` of the batches
//!   attempted: each batch is there in every keyspace it wrote to or in none, and none is there
//!   without every batch before it; so each keyspace alone holds a prefix of its own writes;
//! - `m` covers every batch acknowledged before the last acknowledged synced write or `sync_wal`,
//!   and after a process crash every acknowledged batch;
//! - a Get of every key of every keyspace agrees with its scan.
//!
//! **A dropped keyspace stays dropped.** A keyspace with tables in two levels and entries in the
//! WAL is dropped while a cut is armed to land inside the drop, or just after it (sometimes the
//! name is then used again for a new keyspace, which gets a synced write). After the power cut:
//! if the drop returned `Ok`, none of the dropped keyspace's data is back (under its name, or in
//! the new keyspace of the same name, which holds what was written to it and nothing else); if
//! the drop failed, the keyspace is there whole or not at all. The keyspace beside it keeps all
//! of its data.
//!
//! Short mode (plain `cargo test`): 200 cuts and 60 drops. `SIFTDB_LONG=1`: 10,000 and 2,000;
//! `SIFTDB_KS_POWER_CUTS=n`, `SIFTDB_KS_DROP_CUTS=n`: any number; `SIFTDB_KS_POWER_CUT_SEED=s`:
//! another random sequence. Add `-- --nocapture` to see where the cuts landed.

mod common;
use common::keyspaces::contents;
use common::long;
use common::power_cuts::{aim, file_kind, open_through_cuts, power_fails, Tally};
use std::collections::BTreeMap;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::fault_injection::{FaultInjector, OpSite};
use siftdb::{Db, Filter, Keyspace, Options, PrefixExtractor, WriteBatch, WriteOptions};

/// The keyspaces of the batch loop; the first is the default one.
const SPACES: [&str; 3] = ["default", "plain_log", "partitioned"];

/// Keys per keyspace.
const KEYS: u32 = 60;

/// One write batch: (keyspace index, key, value to set or `None` to delete).
type Batch = Vec<(usize, Vec<u8>, Option<Vec<u8>>)>;

/// The contents of every keyspace: (keyspace index, key) to value.
type State = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} is a number")))
}

fn seed() -> u64 {
    std::env::var("SIFTDB_KS_POWER_CUT_SEED")
        .map(|s| s.parse().expect("SIFTDB_KS_POWER_CUT_SEED is a number"))
        .unwrap_or(0x6b73_c047)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Tiny sizes, so flushes, compactions and WAL switches happen all the time.
fn tiny() -> Options {
    Options::default()
        .write_buffer_size(4096)
        .max_immutable_memtables(2)
        .target_file_size(4096)
        .max_bytes_for_level_base(16 << 10)
        .level_size_multiplier(4)
        .level0_compaction_trigger(2)
        .block_size(512)
}

/// The store's options (and the default keyspace's): the filter layout rotates per epoch.
fn store_options(epoch: usize, faults: &FaultInjector) -> Options {
    let filter = match epoch % 3 {
        0 => Filter::full(10.0),
        1 => Filter::block_based(10.0),
        _ => Filter::ribbon(10.0),
    };
    tiny()
        .filter(filter)
        .cache_index_and_filter_blocks(epoch % 2 == 1)
        .block_cache_bytes(if epoch % 2 == 1 { 16 << 10 } else { 32 << 20 })
        .fault_injector(faults.clone())
}

/// The options each created keyspace is made with.
fn keyspace_options(name: &str) -> Options {
    match name {
        "plain_log" => tiny()
            .filter(Filter::none())
            .prefix_extractor(PrefixExtractor::fixed(5)),
        _ => tiny()
            .filter(Filter::partitioned(10.0).partition_bytes(256))
            .level0_compaction_trigger(3),
    }
}

/// The handles of the loop's keyspaces, creating the ones a fresh store lacks.
fn keyspaces(db: &Db, fresh: bool, what: &str) -> Vec<Keyspace> {
    if !fresh {
        // "default" first, then the others in name order.
        let mut want: Vec<&str> = SPACES.to_vec();
        want[1..].sort_unstable();
        assert_eq!(
            db.keyspace_names(),
            want,
            "{what}: the store lost a keyspace it had created"
        );
    }
    SPACES
        .iter()
        .map(|&name| {
            if name == "default" {
                db.default_keyspace()
            } else if fresh {
                db.keyspace_with(name, keyspace_options(name)).unwrap()
            } else {
                db.keyspace(name).unwrap()
            }
        })
        .collect()
}

fn random_batch(rng: &mut StdRng, id: u64) -> Batch {
    // Mostly batches over several keyspaces.
    (0..rng.gen_range(1..=5))
        .map(|_| {
            let space = rng.gen_range(0..SPACES.len());
            let k = key(rng.gen_range(0..KEYS));
            if rng.gen_bool(0.2) {
                (space, k, None)
            } else {
                let len = if rng.gen_bool(0.01) {
                    rng.gen_range(30_000..70_000)
                } else {
                    rng.gen_range(0..200)
                };
                let mut v = format!("{id}:").into_bytes();
                v.resize(v.len() + len, b'a' + (id % 26) as u8);
                (space, k, Some(v))
            }
        })
        .collect()
}

fn apply(state: &mut State, batch: &Batch, only: Option<usize>) {
    for (space, k, v) in batch {
        if only.is_some_and(|o| o != *space) {
            continue;
        }
        let k = (*space, k.clone());
        match v {
            Some(v) => state.insert(k, v.clone()),
            None => state.remove(&k),
        };
    }
}

/// Every keyspace's contents, read with scans.
fn read_state(handles: &[Keyspace]) -> State {
    let mut state = State::new();
    for (i, ks) in handles.iter().enumerate() {
        for (k, v) in contents(ks) {
            state.insert((i, k), v);
        }
    }
    state
}

/// The shortest `m >= durable` such that `recovered` (restricted to keyspace `only`, if given) is
/// the state after batches `0..m`.
fn prefix_length(
    history: &[Batch],
    durable: usize,
    recovered: &State,
    only: Option<usize>,
) -> Option<usize> {
    let recovered: State = recovered
        .iter()
        .filter(|((space, _), _)| only.is_none_or(|o| o == *space))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut state = State::new();
    for b in &history[..durable.min(history.len())] {
        apply(&mut state, b, only);
    }
    for m in durable..=history.len() {
        if m > durable {
            apply(&mut state, &history[m - 1], only);
        }
        if state == recovered {
            return Some(m);
        }
    }
    None
}

/// Checks the reopened store: its keyspaces together hold the state after a prefix of `history`
/// no shorter than `durable`, and gets agree with the scans. Returns the prefix's length and the
/// contents.
fn check(handles: &[Keyspace], history: &[Batch], durable: usize, what: &str) -> (usize, State) {
    let seen = read_state(handles);
    let Some(m) = prefix_length(history, durable, &seen, None) else {
        // Which property broke: a keyspace alone holding no prefix of its own writes, or batches
        // split between keyspaces that each hold a prefix of their own.
        let alone: Vec<String> = (0..SPACES.len())
            .map(|s| {
                let m = prefix_length(history, durable, &seen, Some(s));
                format!("{}: {m:?}", SPACES[s])
            })
            .collect();
        panic!(
            "{what}: the keyspaces hold no prefix of the {} batches that starts with the \
             {durable} that must survive; each keyspace alone matches the prefix of length \
             (None: no prefix) {alone:?}",
            history.len()
        );
    };
    for (s, ks) in handles.iter().enumerate() {
        for i in 0..KEYS {
            let got = ks
                .get(key(i))
                .unwrap_or_else(|e| panic!("{what}: get in {} failed: {e}", SPACES[s]));
            assert_eq!(
                got.as_ref(),
                seen.get(&(s, key(i))),
                "{what}: get of key {i} in {}",
                SPACES[s]
            );
        }
    }
    (m, seen)
}

#[test]
fn power_cuts_keep_batches_across_keyspaces_whole_and_in_order() {
    let cuts = env_usize("SIFTDB_KS_POWER_CUTS").unwrap_or(if long() { 10_000 } else { 200 });
    let seed = seed();
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let root = tempfile::tempdir().unwrap();
    let mut tally = Tally::default();
    let per_epoch = 40;
    let mut next_id = 0u64;
    let mut epoch = 0;
    let mut history: Vec<Batch> = Vec::new();
    let (mut durable, mut acked) = (0usize, 0usize);
    let mut fresh = true;
    let mut dir = root.path().join("epoch0");
    let mut faults = FaultInjector::new(&dir).unwrap();
    let mut multi_keyspace_batches = 0u64;
    while tally.cuts < cuts {
        if tally.cuts / per_epoch != epoch {
            epoch = tally.cuts / per_epoch;
            dir = root.path().join(format!("epoch{epoch}"));
            faults = FaultInjector::new(&dir).unwrap();
            history.clear();
            (durable, acked) = (0, 0);
            fresh = true;
        }
        let what = format!("cut {} (epoch {epoch}, seed {seed:#x})", tally.cuts);
        let open = || Db::open(&dir, store_options(epoch, &faults));
        let (db, power_cut) = open_through_cuts(&faults, &mut rng, &mut tally, &what, open);
        if power_cut {
            acked = 0;
        }
        let handles = keyspaces(&db, fresh, &what);
        fresh = false;
        let (m, recovered) = check(&handles, &history, durable.max(acked), &what);
        tally.batches_lost += history.len() - m;
        history.truncate(m);
        durable = m;

        let injected_before = faults.injected().len();
        let aimed = aim(&mut rng, &faults);
        *tally.by_aim.entry(format!("{aimed:?}")).or_default() += 1;
        let mut model = recovered;
        for _ in 0..rng.gen_range(1..500) {
            let batch = random_batch(&mut rng, next_id);
            next_id += 1;
            let sync = rng.gen_bool(0.1);
            let mut b = WriteBatch::new();
            for (space, k, v) in &batch {
                // The default keyspace through `put`/`delete` half the time.
                let plain = *space == 0 && next_id % 2 == 0;
                match (v, plain) {
                    (Some(v), true) => b.put(k, v),
                    (Some(v), false) => b.put_in(&handles[*space], k, v),
                    (None, true) => b.delete(k),
                    (None, false) => b.delete_in(&handles[*space], k),
                };
            }
            let spans = batch
                .iter()
                .map(|(s, _, _)| *s)
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            history.push(batch);
            if db.write_opt(b, &WriteOptions { sync }).is_err() {
                break;
            }
            apply(&mut model, history.last().unwrap(), None);
            acked = history.len();
            tally.batches_acked += 1;
            if spans > 1 {
                multi_keyspace_batches += 1;
            }
            if sync {
                durable = history.len();
                tally.synced_acked += 1;
            }
            let ks = &handles[rng.gen_range(0..handles.len())];
            match rng.gen_range(0..200) {
                0..=3 => {
                    if ks.flush().is_err() {
                        break;
                    }
                }
                4 => {
                    if ks.compact().is_err() {
                        break;
                    }
                }
                5..=7 => {
                    if db.sync_wal().is_err() {
                        break;
                    }
                    durable = history.len();
                }
                8..=13 => {
                    // A live read sees every acknowledged write.
                    let s = handles.iter().position(|h| h.name() == ks.name()).unwrap();
                    let k = key(rng.gen_range(0..KEYS));
                    match ks.get(&k) {
                        Ok(v) => assert_eq!(v.as_ref(), model.get(&(s, k)), "{what}: live read"),
                        Err(_) => break,
                    }
                }
                _ => {}
            }
        }
        faults.kill();
        if let Some(site) = faults.cut_site() {
            *tally.by_thread.entry(site.thread.clone()).or_default() += 1;
            *tally
                .by_file
                .entry(file_kind(&site.file).into())
                .or_default() += 1;
        }
        tally.injected += faults.injected().len() - injected_before;
        drop(handles);
        drop(db);
        tally.cuts += 1;
        if power_fails(&faults, &mut rng, &mut tally) {
            acked = 0;
        }
    }
    eprintln!(
        "keyspace power cuts (seed {seed:#x}): {} in {:.1?} ({} inside open, {} process crashes \
         instead, {} after an injected I/O error); {} batches acknowledged ({} over several \
         keyspaces, {} synced), {} unsynced batches lost, {} unsynced bytes lost, {} directory \
         entries reverted; aimed at {:?}; cut in threads {:?}; cut on files {:?}",
        tally.cuts,
        started.elapsed(),
        tally.in_open,
        tally.process_crashes,
        tally.injected,
        tally.batches_acked,
        multi_keyspace_batches,
        tally.synced_acked,
        tally.batches_lost,
        tally.bytes_lost,
        tally.names_reverted,
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
        tally.batches_lost > 0,
        "no power cut lost an unsynced batch"
    );
}

/// The value `incarnation` of the dropped keyspace holds under key `i`.
fn doomed_value(incarnation: u32, i: u32) -> Vec<u8> {
    format!("doomed-{incarnation}-{i}-{}", "d".repeat((i % 50) as usize)).into_bytes()
}

/// How the cuts of the drop loop went.
#[derive(Default, Debug)]
struct DropTally {
    /// Drops that returned `Ok` before the cut.
    completed: usize,
    /// Drops the cut interrupted (they returned an error).
    interrupted: usize,
    /// Of those, the keyspace was there after the reopen (whole).
    interrupted_and_kept: usize,
    /// Drops followed by a new keyspace of the same name.
    reborn: usize,
    /// The cut landed on a table, the MANIFEST, or a WAL.
    by_file: BTreeMap<String, usize>,
}

#[test]
fn a_dropped_keyspace_never_comes_back_after_a_power_cut() {
    let rounds = env_usize("SIFTDB_KS_DROP_CUTS").unwrap_or(if long() { 2_000 } else { 60 });
    let seed = seed();
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xd7_0b);
    let root = tempfile::tempdir().unwrap();
    let mut tally = DropTally::default();
    let mut cut_tally = Tally::default();
    for round in 0..rounds {
        let what = format!("drop round {round} (seed {seed:#x})");
        let dir = root.path().join(format!("round{round}"));
        let faults = FaultInjector::new(&dir).unwrap();
        let options = || tiny().fault_injector(faults.clone());
        let db = Db::open(&dir, options()).unwrap();
        let kept = db
            .keyspace_with("kept", keyspace_options("partitioned"))
            .unwrap();
        // Sometimes a name already dropped once: its old data must not come back either.
        let mut incarnation = 0;
        if rng.gen_bool(0.3) {
            let old = db.keyspace("doomed").unwrap();
            for i in 0..100 {
                old.put(key(i), doomed_value(0, i)).unwrap();
            }
            old.flush().unwrap();
            db.drop_keyspace("doomed").unwrap();
            incarnation = 1;
        }
        let doomed = db
            .keyspace_with("doomed", keyspace_options("plain_log"))
            .unwrap();
        let mut doomed_model = BTreeMap::new();
        let mut kept_model = BTreeMap::new();
        for i in 0..300 {
            doomed.put(key(i), doomed_value(incarnation, i)).unwrap();
            doomed_model.insert(key(i), doomed_value(incarnation, i));
            kept.put(key(i), format!("kept-{i}")).unwrap();
            kept_model.insert(key(i), format!("kept-{i}").into_bytes());
        }
        doomed.compact().unwrap();
        for i in 0..rng.gen_range(0..200) {
            doomed.put(key(i), b"overwritten").unwrap();
            doomed_model.insert(key(i), b"overwritten".to_vec());
        }
        if rng.gen_bool(0.5) {
            doomed.flush().unwrap();
        }
        // The last writes, over both keyspaces, synced: everything so far must survive.
        let mut batch = WriteBatch::new();
        batch
            .put_in(&doomed, "last", "doomed")
            .put_in(&kept, "last", "kept");
        db.write_opt(batch, &WriteOptions { sync: true }).unwrap();
        doomed_model.insert(b"last".to_vec(), b"doomed".to_vec());
        kept_model.insert(b"last".to_vec(), b"kept".to_vec());

        // The cut: usually within the drop's first steps, sometimes on the MANIFEST alone.
        if rng.gen_bool(0.7) {
            faults.cut_after(rng.gen_range(0..25), Box::new(|_| true));
        } else {
            faults.cut_after(
                rng.gen_range(0..4),
                Box::new(|s: &OpSite| {
                    s.file.starts_with("MANIFEST") || s.file.starts_with("CURRENT")
                }),
            );
        }
        let dropped = db.drop_keyspace("doomed").is_ok();
        // After a drop that returned, the name is sometimes used again, with a synced write.
        let mut reborn: Option<BTreeMap<Vec<u8>, Vec<u8>>> = None;
        if dropped && rng.gen_bool(0.5) {
            if let Ok(new) = db.keyspace_with("doomed", keyspace_options("partitioned")) {
                tally.reborn += 1;
                let mut acked = BTreeMap::new();
                for i in (0..300).step_by(50) {
                    let (k, v) = (key(i), format!("reborn-{i}").into_bytes());
                    if new.put(&k, &v).is_err() {
                        break;
                    }
                    acked.insert(k, v);
                }
                // Synced (the acknowledged puts with it) only if this returns.
                let synced = db.sync_wal().is_ok();
                reborn = Some(if synced { acked } else { BTreeMap::new() });
            }
        }
        faults.kill();
        if let Some(site) = faults.cut_site() {
            *tally
                .by_file
                .entry(file_kind(&site.file).into())
                .or_default() += 1;
        }
        drop((doomed, kept, db));
        power_fails(&faults, &mut rng, &mut cut_tally);

        let db = Db::open(&dir, tiny().fault_injector(faults.clone()))
            .unwrap_or_else(|e| panic!("{what}: open after the cut failed: {e}"));
        let names = db.keyspace_names();
        assert!(names.iter().any(|n| n == "kept"), "{what}: kept is gone");
        let kept = db.keyspace("kept").unwrap();
        assert!(
            contents(&kept) == kept_model,
            "{what}: the keyspace beside the dropped one changed"
        );
        let present = names.iter().any(|n| n == "doomed");
        if dropped {
            tally.completed += 1;
            if present {
                let found = contents(&db.keyspace("doomed").unwrap());
                let acked = reborn.as_ref().unwrap_or_else(|| {
                    panic!(
                        "{what}: the drop returned Ok, yet the keyspace is back: {} entries",
                        found.len()
                    )
                });
                // The new keyspace of that name: what it was given (all of it, if synced), and
                // nothing of the old one.
                for (k, v) in &found {
                    assert!(
                        v.starts_with(b"reborn-"),
                        "{what}: the dropped keyspace's {:?} is in the new keyspace of its name",
                        String::from_utf8_lossy(k)
                    );
                }
                for (k, v) in acked {
                    assert_eq!(
                        found.get(k),
                        Some(v),
                        "{what}: a synced write to the new keyspace"
                    );
                }
            } else {
                assert!(
                    reborn.as_ref().is_none_or(|acked| acked.is_empty()),
                    "{what}: the new keyspace of the dropped one's name, given synced writes, is gone"
                );
            }
        } else {
            tally.interrupted += 1;
            if present {
                tally.interrupted_and_kept += 1;
                let found = contents(&db.keyspace("doomed").unwrap());
                assert!(
                    found == doomed_model,
                    "{what}: an interrupted drop left the keyspace in part: {} of {} entries",
                    found.len(),
                    doomed_model.len()
                );
            }
        }
    }
    eprintln!(
        "keyspace drops cut (seed {seed:#x}): {rounds} in {:.1?}: {tally:?}",
        started.elapsed()
    );
    assert!(tally.completed > 0 && tally.interrupted > 0, "{tally:?}");
}
