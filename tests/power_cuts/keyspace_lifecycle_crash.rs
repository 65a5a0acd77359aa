//! Power cuts while keyspaces come and go, on the fault-injection layer
//! (`siftdb::fault_injection`), as in `tests/power_cuts/keyspaces_crash.rs`.
//!
//! A store with tiny memtables, tables and levels (so that flushes and compactions run behind
//! every few writes) creates keyspaces from a pool of five names, drops them, creates them again
//! under the same names, writes to them with synced writes and flushes and compacts them. A cut
//! stops the machine at a random operation (any, or one aimed at tables, the MANIFEST and
//! CURRENT, the flush or compaction thread, inside `Db::open`, or an injected `EIO`); then the
//! power goes (or only the process crashes) and the store is reopened and checked against a
//! model of what was acknowledged:
//!
//! - it opens, every time: no crash leaves files the MANIFEST cannot account for (open refuses
//!   such a store rather than remove what it does not understand);
//! - every keyspace whose creation returned is there, and no keyspace whose drop returned;
//! - each holds exactly its acknowledged writes (every write is synced).
//!
//! The operation the cut interrupted may or may not have happened: a creation leaves the keyspace
//! empty or absent, a drop leaves it whole or absent, a write leaves its key old or new.
//!
//! Short mode (plain `cargo test`): 1,000 cuts. `SIFTDB_LONG=1`: 20,000;
//! `SIFTDB_LIFECYCLE_CUTS=n`: any number; `SIFTDB_LIFECYCLE_SEED=s`: another random sequence. Add
//! `-- --nocapture` to see where the cuts landed.

use crate::common;
use common::power_cuts::{aim, open_through_cuts, power_fails, tiny_options, Epochs, Tally};
use common::{env_number, long, scratch};
use std::collections::BTreeMap;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Filter, Keyspace, Options, WriteBatch, WriteOptions};

/// The names keyspaces are created under, again and again.
const NAMES: [&str; 5] = ["k0", "k1", "k2", "k3", "k4"];

/// Keys per keyspace.
const KEYS: u32 = 40;

/// One keyspace's contents.
type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

/// The operation a cut interrupted: it may or may not have happened.
#[derive(Debug, Clone)]
enum Unsure {
    Create(&'static str),
    Drop(&'static str),
    /// A put (`Some`) or delete of one key.
    Write(&'static str, Vec<u8>, Option<Vec<u8>>),
}

/// How the lives went, beyond the cuts' tally.
#[derive(Default, Debug)]
struct Counts {
    created: usize,
    dropped: usize,
    flushed: usize,
    compacted: usize,
    writes: usize,
    /// Interrupted operations, by kind, and whether they turned out to have happened.
    interrupted: BTreeMap<String, usize>,
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// The options keyspaces are created with: a different filter per name.
fn keyspace_options(name: &str) -> Options {
    let filter = match name {
        "k0" | "k3" => Filter::full(10.0),
        "k1" => Filter::partitioned(10.0).partition_bytes(256),
        _ => Filter::none(),
    };
    tiny_options().filter(filter)
}

/// Checks the reopened store against `model` (the acknowledged keyspaces and their contents) and
/// the interrupted operation, then makes `model` what the store holds.
fn check(
    db: &Db,
    model: &mut BTreeMap<&'static str, Contents>,
    unsure: Option<&Unsure>,
    what: &str,
) -> Vec<String> {
    let names = db.keyspace_names();
    let mut outcomes = Vec::new();
    for name in NAMES {
        let present = names.iter().any(|n| n == name);
        let found: Contents = if present {
            let ks = db.keyspace(name).unwrap();
            let found: Contents = ks
                .iter()
                .collect::<siftdb::Result<_>>()
                .unwrap_or_else(|e| panic!("{what}: scan of {name}: {e}"));
            for i in (0..KEYS).step_by(7) {
                let got = ks
                    .get(key(i))
                    .unwrap_or_else(|e| panic!("{what}: get in {name}: {e}"));
                assert_eq!(got.as_ref(), found.get(&key(i)), "{what}: get in {name}");
            }
            found
        } else {
            Contents::new()
        };
        let acked = model.get(name);
        match unsure {
            Some(Unsure::Create(n)) if *n == name => {
                assert!(acked.is_none(), "{what}: created {name} twice");
                assert!(
                    found.is_empty(),
                    "{what}: the interrupted creation of {name} holds data"
                );
                outcomes.push(format!(
                    "create {}",
                    if present { "landed" } else { "lost" }
                ));
            }
            Some(Unsure::Drop(n)) if *n == name => {
                let acked = acked.unwrap_or_else(|| panic!("{what}: dropped {name} twice"));
                assert!(
                    !present || found == *acked,
                    "{what}: an interrupted drop left {name} with {} of its {} entries",
                    found.len(),
                    acked.len()
                );
                outcomes.push(format!("drop {}", if present { "lost" } else { "landed" }));
            }
            Some(Unsure::Write(n, k, v)) if *n == name => {
                let acked = acked.unwrap_or_else(|| panic!("{what}: wrote to {name}, absent"));
                assert!(present, "{what}: keyspace {name} is gone");
                let mut written = acked.clone();
                match v {
                    Some(v) => written.insert(k.clone(), v.clone()),
                    None => written.remove(k),
                };
                assert!(
                    found == *acked || found == written,
                    "{what}: {name} holds {} entries, neither its {} acknowledged ones nor \
                     those and the interrupted write",
                    found.len(),
                    acked.len()
                );
                outcomes.push(format!(
                    "write {}",
                    if found == *acked { "lost" } else { "landed" }
                ));
            }
            _ => match acked {
                Some(acked) => {
                    assert!(
                        present,
                        "{what}: keyspace {name}, created, is gone ({names:?})"
                    );
                    assert!(
                        found == *acked,
                        "{what}: {name} holds {} entries, {} acknowledged",
                        found.len(),
                        acked.len()
                    );
                }
                None => assert!(!present, "{what}: keyspace {name}, dropped, is back"),
            },
        }
        if present {
            model.insert(name, found);
        } else {
            model.remove(name);
        }
    }
    outcomes
}

/// One life's operations until `count` are done or one fails (the cut came); returns the one
/// that failed, if it changes what the store may hold.
fn run_life(
    db: &Db,
    rng: &mut StdRng,
    model: &mut BTreeMap<&'static str, Contents>,
    counts: &mut Counts,
    count: usize,
    next_value: &mut u64,
) -> Option<Option<Unsure>> {
    let synced = WriteOptions::new().sync(true);
    let mut handles: BTreeMap<&'static str, Keyspace> = BTreeMap::new();
    for _ in 0..count {
        let name = NAMES[rng.gen_range(0..NAMES.len())];
        let Some(contents) = model.get_mut(name) else {
            if rng.gen_bool(0.3) {
                let made = if name == "k4" {
                    db.keyspace(name) // the store's own options
                } else {
                    db.keyspace_with(name, keyspace_options(name))
                };
                match made {
                    Ok(ks) => {
                        handles.insert(name, ks);
                        model.insert(name, Contents::new());
                        counts.created += 1;
                    }
                    Err(_) => return Some(Some(Unsure::Create(name))),
                }
            }
            continue;
        };
        let ks = match handles.get(name) {
            Some(ks) => ks.clone(),
            None => match db.keyspace(name) {
                Ok(ks) => {
                    handles.insert(name, ks.clone());
                    ks
                }
                Err(_) => return Some(None),
            },
        };
        match rng.gen_range(0..100) {
            0..=3 => {
                handles.remove(name);
                drop(ks);
                if db.drop_keyspace(name).is_err() {
                    return Some(Some(Unsure::Drop(name)));
                }
                model.remove(name);
                counts.dropped += 1;
            }
            4..=8 => {
                if ks.flush().is_err() {
                    return Some(None);
                }
                counts.flushed += 1;
            }
            9 => {
                if ks.compact().is_err() {
                    return Some(None);
                }
                counts.compacted += 1;
            }
            _ => {
                let k = key(rng.gen_range(0..KEYS));
                *next_value += 1;
                let v = rng.gen_bool(0.85).then(|| {
                    let mut v = format!("{next_value}:").into_bytes();
                    v.resize(v.len() + rng.gen_range(0..300), b'v');
                    v
                });
                let mut batch = WriteBatch::new();
                match &v {
                    Some(v) => batch.put_in(&ks, &k, v),
                    None => batch.delete_in(&ks, &k),
                };
                if db.write_opt(batch, &synced).is_err() {
                    return Some(Some(Unsure::Write(name, k, v)));
                }
                match v {
                    Some(v) => contents.insert(k, v),
                    None => contents.remove(&k),
                };
                counts.writes += 1;
            }
        }
    }
    None
}

#[test]
fn keyspaces_created_dropped_and_flushed_through_power_cuts_open_with_every_synced_write() {
    let cuts = env_number("SIFTDB_LIFECYCLE_CUTS", if long() { 20_000 } else { 1_000 }) as usize;
    let seed = env_number("SIFTDB_LIFECYCLE_SEED", 0x6c69_6665);
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let root = scratch();
    let mut tally = Tally::default();
    let mut counts = Counts::default();
    let mut epochs = Epochs::new(root.path(), 30);
    let mut model: BTreeMap<&'static str, Contents> = BTreeMap::new();
    let mut unsure: Option<Unsure> = None;
    let mut next_value = 0;
    let mut last_life = String::from("none");
    while tally.cuts < cuts {
        if epochs.advance(tally.cuts) {
            model.clear();
            unsure = None;
        }
        let (dir, faults) = (&epochs.dir, &epochs.faults);
        let what = format!(
            "cut {} (epoch {}, seed {seed:#x}; before it: {last_life})",
            tally.cuts, epochs.number
        );
        let open = || Db::open(dir, tiny_options().fault_injector(faults.clone()));
        let (db, _) = open_through_cuts(faults, &mut rng, &mut tally, &what, open);
        for outcome in check(&db, &mut model, unsure.as_ref(), &what) {
            *counts.interrupted.entry(outcome).or_default() += 1;
        }

        let injected_before = faults.injected().len();
        let aimed = aim(&mut rng, faults);
        *tally.by_aim.entry(format!("{aimed:?}")).or_default() += 1;
        let ops = rng.gen_range(1..300);
        let failed = run_life(&db, &mut rng, &mut model, &mut counts, ops, &mut next_value);
        unsure = failed.flatten();
        tally.machine_stops(faults, injected_before);
        let site = faults.cut_site().map_or("none".into(), |s| s.to_string());
        drop(db);
        tally.cuts += 1;
        let power_cut = power_fails(faults, &mut rng, &mut tally);
        last_life =
            format!(
            "keyspaces {:?}, interrupted {unsure:?}; a cut aimed at {aimed:?} landed on {site}, \
             then {}",
            model.keys().collect::<Vec<_>>(),
            if power_cut { "a power cut" } else { "a process crash" }
        );
    }
    eprintln!(
        "keyspace lifecycle power cuts (seed {seed:#x}): {} in {:.1?} ({} inside open, {} process \
         crashes instead, {} after an injected I/O error); {counts:?}; cut in threads {:?}; cut \
         on files {:?}",
        tally.cuts,
        started.elapsed(),
        tally.in_open,
        tally.process_crashes,
        tally.injected,
        tally.by_thread,
        tally.by_file,
    );
    assert!(counts.created > 0 && counts.dropped > 0 && counts.flushed > 0);
    assert!(tally.in_open > 0, "no cut landed inside open");
}

/// A drop whose MANIFEST sync a crash cut short may still be in the page cache, where the next
/// open reads it and finds the keyspace's tables obsolete. If that open removed them before the
/// drop was durable, a power cut could bring back a MANIFEST that names them, gone. Here the
/// open is cut once its new MANIFEST is synced (the removals durable with it), then the power
/// goes, losing everything not fsynced: the store must open, the keyspace dropped or whole.
#[test]
fn tables_removed_for_a_drop_read_from_the_page_cache_are_never_named_after_a_power_cut() {
    use siftdb::fault_injection::{FaultInjector, OpKind, OpSite, PowerCut};
    let root = scratch();
    let dir = root.path().join("db");
    let faults = FaultInjector::new(&dir).unwrap();
    let options = || Options::default().fault_injector(faults.clone());
    let db = Db::open(&dir, options()).unwrap();
    let mut models = BTreeMap::new();
    for name in ["gone", "kept"] {
        let ks = db.keyspace(name).unwrap();
        let mut model = Contents::new();
        for i in 0..KEYS {
            let v = format!("{name} {i}").into_bytes();
            ks.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        ks.flush().unwrap();
        models.insert(name, model);
    }
    // The drop's edit is written, its sync cut; the process dies (the page cache keeps it).
    faults.cut_after(
        0,
        Box::new(|s: &OpSite| s.kind == OpKind::Sync && s.file.starts_with("MANIFEST")),
    );
    assert!(db.drop_keyspace("gone").is_err());
    drop(db);
    faults.revive();
    // The next open reads the drop; it is cut as it switches CURRENT to its new MANIFEST.
    faults.cut_after(
        0,
        Box::new(|s: &OpSite| s.kind == OpKind::Create && s.file.starts_with("CURRENT")),
    );
    assert!(Db::open(&dir, options()).is_err());
    faults.power_cut(PowerCut::strict()).unwrap();
    let db = Db::open(&dir, options())
        .unwrap_or_else(|e| panic!("the store does not open after the power cut: {e}"));
    let mut model: BTreeMap<&'static str, Contents> = models.clone();
    check(
        &db,
        &mut model,
        Some(&Unsure::Drop("gone")),
        "after the power cut",
    );
    assert!(model.contains_key("kept"));
}
