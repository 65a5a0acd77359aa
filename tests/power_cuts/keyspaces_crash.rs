//! Power cuts against keyspaces, on the fault-injection layer (`siftdb::fault_injection`), as in
//! `tests/power_cuts/power_cut.rs`.
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
//! - `m` covers every batch acknowledged before the last acknowledged synced write, `sync_wal`, or
//!   flush or compaction of a keyspace (each makes every write before it durable), and after a
//!   process crash every acknowledged batch;
//! - a Get of every key of every keyspace agrees with its scan.
//!
//! Its smallest case on its own: a batch over two keyspaces, unsynced, then a background flush of
//! one of them, then a power cut that loses everything not fsynced: the batch is in both or in
//! neither.
//!
//! **A dropped keyspace stays dropped.** A keyspace with tables in two levels and entries in the
//! WAL is dropped while a cut is armed to land inside the drop, or just after it (sometimes the
//! name is then used again for a new keyspace, which gets a synced write). After the power cut:
//! if the drop returned `Ok`, none of the dropped keyspace's data is back (under its name, or in
//! the new keyspace of the same name, which holds what was written to it and nothing else, or is
//! empty if its creation was cut short); if the drop failed, the keyspace is there whole or not
//! at all. The keyspace beside it keeps all
//! of its data.
//!
//! Both run on tmpfs where there is one (the fault-injection layer keeps what a power cut would
//! keep either way). Short mode (plain `cargo test`): 1,000 cuts and 300 drops. `SIFTDB_LONG=1`:
//! 20,000 and 5,000;
//! `SIFTDB_KS_POWER_CUTS=n`, `SIFTDB_KS_DROP_CUTS=n`: any number; `SIFTDB_KS_POWER_CUT_SEED=s`:
//! another random sequence. Add `-- --nocapture` to see where the cuts landed.

use crate::common;
use common::keyspaces::contents;
use common::power_cuts::{
    aim, file_kind, open_through_cuts, power_fails, tiny_options, Epochs, Tally,
};
use common::{env_number, long, scratch};
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

fn seed() -> u64 {
    env_number("SIFTDB_KS_POWER_CUT_SEED", 0x6b73_c047)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The store's options (and the default keyspace's): the filter layout rotates per epoch.
fn store_options(epoch: usize, faults: &FaultInjector) -> Options {
    let filter = match epoch % 3 {
        0 => Filter::full(10.0),
        1 => Filter::block_based(10.0),
        _ => Filter::ribbon(10.0),
    };
    tiny_options()
        .filter(filter)
        .cache_index_and_filter_blocks(epoch % 2 == 1)
        .block_cache_bytes(if epoch % 2 == 1 { 16 << 10 } else { 32 << 20 })
        .fault_injector(faults.clone())
}

/// The options each created keyspace is made with.
fn keyspace_options(name: &str) -> Options {
    match name {
        "plain_log" => tiny_options()
            .filter(Filter::none())
            .prefix_extractor(PrefixExtractor::fixed(5)),
        _ => tiny_options()
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

fn apply(state: &mut State, batch: &Batch, only: usize) {
    for (space, k, v) in batch {
        if *space != only {
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

/// The batches attempted in an epoch, and how many of them must survive.
#[derive(Default)]
struct History {
    batches: Vec<Batch>,
    /// How many survive any crash.
    durable: usize,
    /// How many were acknowledged (they survive a process crash).
    acked: usize,
}

impl History {
    /// Every `m` no shorter than what must survive such that keyspace `s` holds (in `recovered`)
    /// the state after batches `0..m`, shortest first.
    fn prefix_lengths(&self, s: usize, recovered: &State) -> Vec<usize> {
        let recovered: State = recovered
            .iter()
            .filter(|((space, _), _)| *space == s)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let lower = self.durable.max(self.acked).min(self.batches.len());
        let mut state = State::new();
        for b in &self.batches[..lower] {
            apply(&mut state, b, s);
        }
        let mut lengths = Vec::new();
        for m in lower..=self.batches.len() {
            if m > lower {
                apply(&mut state, &self.batches[m - 1], s);
            }
            if state == recovered {
                lengths.push(m);
            }
        }
        lengths
    }
}

/// `lengths` (ascending) as ranges: `[3..=5, 9..=9]`.
fn ranges(lengths: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lengths.len() {
        let mut j = i;
        while j + 1 < lengths.len() && lengths[j + 1] == lengths[j] + 1 {
            j += 1;
        }
        out.push(format!("{}..={}", lengths[i], lengths[j]));
        i = j + 1;
    }
    format!("[{}]", out.join(", "))
}

/// Checks the reopened store: all keyspaces together hold the state after one prefix `0..m` of
/// the batches, no shorter than what must survive (each batch whole in every keyspace it wrote
/// to or in none, and none without every batch before it), and gets agree with the scans. Cuts
/// the history at `m`, which is durable now (recovery made it so), and returns the contents.
fn check(handles: &[Keyspace], h: &mut History, what: &str) -> State {
    let seen = read_state(handles);
    // The state of all keyspaces is the state after `m` if each keyspace's is.
    let alone: Vec<Vec<usize>> = (0..SPACES.len())
        .map(|s| h.prefix_lengths(s, &seen))
        .collect();
    let Some(&m) = alone[0]
        .iter()
        .find(|m| alone.iter().all(|l| l.contains(m)))
    else {
        let shown: Vec<String> = alone
            .iter()
            .enumerate()
            .map(|(s, l)| format!("{}: {}", SPACES[s], ranges(l)))
            .collect();
        // The batches past one keyspace's longest prefix and before another's shortest.
        let hi = alone.iter().filter_map(|l| l.first()).max().copied();
        let lo = alone.iter().filter_map(|l| l.last()).min().copied();
        let between: Vec<String> = match (lo, hi) {
            (Some(lo), Some(hi)) if lo < hi => (lo..hi)
                .map(|i| {
                    let spaces: Vec<&str> =
                        h.batches[i].iter().map(|(s, _, _)| SPACES[*s]).collect();
                    format!("batch {i} writes to {spaces:?}")
                })
                .collect(),
            _ => Vec::new(),
        };
        panic!(
            "{what}: the keyspaces hold no prefix of the {} batches that starts with the {} that \
             must survive; the prefix lengths each keyspace alone matches: {shown:?} (empty: \
             none); the batches between one keyspace's longest and another's shortest: \
             {between:?}",
            h.batches.len(),
            h.durable.max(h.acked),
        );
    };
    h.batches.truncate(m);
    h.durable = m;
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
    seen
}

#[test]
fn power_cuts_keep_batches_across_keyspaces_whole_and_in_order() {
    let cuts = env_number("SIFTDB_KS_POWER_CUTS", if long() { 20_000 } else { 1_000 }) as usize;
    let seed = seed();
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let root = scratch();
    let mut tally = Tally::default();
    let per_epoch = 40;
    let mut next_id = 0u64;
    let mut h = History::default();
    let mut fresh = true;
    let mut epochs = Epochs::new(root.path(), per_epoch);
    let mut multi_keyspace_batches = 0u64;
    let mut last_life = String::from("none");
    while tally.cuts < cuts {
        if epochs.advance(tally.cuts) {
            h = History::default();
            fresh = true;
        }
        let (epoch, dir, faults) = (epochs.number, &epochs.dir, &epochs.faults);
        let what = format!(
            "cut {} (epoch {epoch}, seed {seed:#x}; before it: {last_life})",
            tally.cuts
        );
        let open = || Db::open(dir, store_options(epoch, faults));
        let (db, power_cut) = open_through_cuts(faults, &mut rng, &mut tally, &what, open);
        if power_cut {
            h.acked = 0;
        }
        let handles = keyspaces(&db, fresh, &what);
        fresh = false;
        let before = h.batches.len();
        let mut model = check(&handles, &mut h, &what);
        tally.batches_lost += before - h.batches.len();

        let injected_before = faults.injected().len();
        let aimed = aim(&mut rng, faults);
        *tally.by_aim.entry(format!("{aimed:?}")).or_default() += 1;
        for _ in 0..rng.gen_range(1..500) {
            let batch = random_batch(&mut rng, next_id);
            next_id += 1;
            let sync = rng.gen_bool(0.1);
            let mut b = WriteBatch::new();
            for (space, k, v) in &batch {
                // The default keyspace through `put`/`delete` half the time.
                let plain = *space == 0 && next_id.is_multiple_of(2);
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
            h.batches.push(batch);
            if db.write_opt(b, &WriteOptions { sync }).is_err() {
                break;
            }
            for s in 0..SPACES.len() {
                apply(&mut model, h.batches.last().unwrap(), s);
            }
            h.acked = h.batches.len();
            tally.batches_acked += 1;
            multi_keyspace_batches += u64::from(spans > 1);
            if sync {
                h.durable = h.batches.len();
                tally.synced_acked += 1;
            }
            let s = rng.gen_range(0..handles.len());
            let ks = &handles[s];
            // A keyspace's flush or compaction makes every write before it durable, as
            // `sync_wal` does.
            match rng.gen_range(0..200) {
                0..=3 => {
                    if ks.flush().is_err() {
                        break;
                    }
                    h.durable = h.batches.len();
                }
                4 => {
                    if ks.compact().is_err() {
                        break;
                    }
                    h.durable = h.batches.len();
                }
                5..=7 => {
                    if db.sync_wal().is_err() {
                        break;
                    }
                    h.durable = h.batches.len();
                }
                8..=13 => {
                    // A live read sees every acknowledged write.
                    let k = key(rng.gen_range(0..KEYS));
                    match ks.get(&k) {
                        Ok(v) => assert_eq!(v.as_ref(), model.get(&(s, k)), "{what}: live read"),
                        Err(_) => break,
                    }
                }
                _ => {}
            }
        }
        // The cut may not have come yet (or was an injected error): the machine stops now.
        tally.machine_stops(faults, injected_before);
        let site = faults.cut_site().map_or("none".into(), |s| s.to_string());
        let (acked, durable) = (h.acked, h.durable);
        drop(handles);
        drop(db);
        tally.cuts += 1;
        let power_cut = power_fails(faults, &mut rng, &mut tally);
        if power_cut {
            h.acked = 0;
        }
        last_life =
            format!(
            "{acked} batches acknowledged, {durable} durable; a cut aimed at {aimed:?} landed on \
             {site}, then {}",
            if power_cut { "a power cut" } else { "a process crash" }
        );
    }
    eprintln!(
        "keyspace power cuts (seed {seed:#x}): {} in {:.1?} ({} inside open, {} \
         process crashes instead, {} after an injected I/O error); {} batches acknowledged ({} \
         over several keyspaces, {} synced), {} unsynced batches lost, {} unsynced bytes lost, \
         {} directory entries reverted; aimed at {:?}; cut in threads {:?}; cut on files {:?}",
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

/// The smallest case of the loop's property: a batch writes to keyspaces `a` (whose memtable it
/// fills) and `b`, unsynced; the next write to `a` freezes `a`'s memtable, which a background
/// flush makes a table; then the power goes, losing everything not fsynced.
#[test]
fn a_background_flush_keeps_a_batch_across_keyspaces_whole_through_a_power_cut() {
    let root = scratch();
    let dir = root.path().join("db");
    let faults = FaultInjector::new(&dir).unwrap();
    let db = Db::open(&dir, Options::default().fault_injector(faults.clone())).unwrap();
    let a = db
        .keyspace_with("a", Options::default().write_buffer_size(4096))
        .unwrap();
    let b = db.keyspace("b").unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&a, "k", [b'a'; 5000]).put_in(&b, "k", "in b");
    db.write(batch).unwrap();
    a.put("next", "write").unwrap(); // freezes a's full memtable: a background flush
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while common::keyspaces::tables_per_level(&a)[0] == 0 {
        assert!(Instant::now() < deadline, "a's memtable was never flushed");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    faults.kill();
    drop((a, b, db));
    faults
        .power_cut(siftdb::fault_injection::PowerCut::strict())
        .unwrap();
    let db = Db::open(&dir, Options::default()).unwrap();
    let in_a = db.keyspace("a").unwrap().get("k").unwrap().is_some();
    let in_b = db.keyspace("b").unwrap().get("k").unwrap().is_some();
    assert_eq!(
        in_a, in_b,
        "after the power cut the batch is in a: {in_a}, in b: {in_b}"
    );
}

/// The value `incarnation` of the dropped keyspace holds under key `i`.
fn doomed_value(incarnation: u32, i: u32) -> Vec<u8> {
    format!("doomed-{incarnation}-{i}-{}", "d".repeat((i % 50) as usize)).into_bytes()
}

/// Whether the drop loop used the dropped keyspace's name again, and what it wrote there.
enum Reborn {
    NotTried,
    /// `keyspace_with` failed (the cut came first).
    Failed,
    /// Made; the synced writes to it.
    Made(BTreeMap<Vec<u8>, Vec<u8>>),
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
    let rounds = env_number("SIFTDB_KS_DROP_CUTS", if long() { 5_000 } else { 300 }) as usize;
    let seed = seed();
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xd7_0b);
    let root = scratch();
    let mut tally = DropTally::default();
    let mut cut_tally = Tally::default();
    for round in 0..rounds {
        let what = format!("drop round {round} (seed {seed:#x})");
        let dir = root.path().join(format!("round{round}"));
        let faults = FaultInjector::new(&dir).unwrap();
        let options = || tiny_options().fault_injector(faults.clone());
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
        let mut reborn = Reborn::NotTried;
        if dropped && rng.gen_bool(0.5) {
            reborn = Reborn::Failed;
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
                reborn = Reborn::Made(if synced { acked } else { BTreeMap::new() });
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

        let db = Db::open(&dir, tiny_options().fault_injector(faults.clone()))
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
            let found = if present {
                contents(&db.keyspace("doomed").unwrap())
            } else {
                BTreeMap::new()
            };
            // Whatever holds the name now holds nothing of the dropped keyspace.
            for (k, v) in &found {
                assert!(
                    v.starts_with(b"reborn-"),
                    "{what}: the dropped keyspace's {:?} is back",
                    String::from_utf8_lossy(k)
                );
            }
            match &reborn {
                Reborn::NotTried => assert!(
                    !present,
                    "{what}: the drop returned Ok, yet the keyspace is back ({} entries)",
                    found.len()
                ),
                // A creation cut short may have reached the MANIFEST: an empty keyspace, or none.
                Reborn::Failed => assert!(found.is_empty(), "{what}"),
                // The new keyspace holds what it was given (all of it, if synced).
                Reborn::Made(acked) => {
                    for (k, v) in acked {
                        assert_eq!(
                            found.get(k),
                            Some(v),
                            "{what}: a synced write to the new keyspace of the dropped one's name"
                        );
                    }
                }
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
