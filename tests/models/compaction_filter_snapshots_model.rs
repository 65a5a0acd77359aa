//! Model-based test: a keyspace with a compaction filter, read at snapshots and by transactions
//! while background compactions filter it, against a `BTreeMap`. Memtables, tables and levels are
//! tiny, so compactions run all the time beside a seeded random mix of puts, deletes, snapshots
//! taken and dropped, reads at them, transactions begun, read, committed and dropped, and reads of
//! the newest state.
//!
//! The filter removes values starting with `r` and upper-cases those starting with `c`; it may
//! have acted on a key or not yet, so the newest state of a key holding `v` reads as `v` or as the
//! filter's decision for it. A snapshot (or a transaction) reads one of those two for each key as
//! of when it began, and then always the same one: the first read of each key is remembered and
//! every later read must repeat it. A transaction's commit is refused exactly when the test wrote
//! a key it read or writes since it began.
//!
//! The store lives on tmpfs where there is one. Short mode (plain `cargo test`): 250,000
//! operations, about 1,800 compactions. `SIFTDB_LONG=1`: 10,000,000.
//! `SIFTDB_FILTER_MODEL_OPS=n`: any number; `SIFTDB_FILTER_MODEL_SEED=s`: another random sequence.

use crate::common;
use common::power_cuts::tiny_options;
use common::{env_number, long, scratch};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{CompactionDecision, CompactionFilter, Db, Snapshot, Ticker, Transaction};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Removes values starting with `r`, upper-cases those starting with `c` (which it then keeps).
struct RemoveOrShout;

impl CompactionFilter for RemoveOrShout {
    fn name(&self) -> &str {
        "test.RemoveOrShout"
    }

    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> CompactionDecision {
        decide(value)
    }
}

fn decide(value: &[u8]) -> CompactionDecision {
    match value.first() {
        Some(b'r') => CompactionDecision::Remove,
        Some(b'c') => CompactionDecision::ChangeValue(value.to_ascii_uppercase()),
        _ => CompactionDecision::Keep,
    }
}

/// Whether `read` is what a key holding `model` may read as: the value, or the filter's decision.
fn allowed(model: Option<&Vec<u8>>, read: Option<&Vec<u8>>) -> bool {
    let Some(v) = model else {
        return read.is_none();
    };
    if read == Some(v) {
        return true;
    }
    match decide(v) {
        CompactionDecision::Keep => false,
        CompactionDecision::Remove => read.is_none(),
        CompactionDecision::ChangeValue(c) => read == Some(&c),
    }
}

const KEYS: u32 = 160;

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:04}", rng.gen_range(0..KEYS)).into_bytes()
}

fn value(rng: &mut StdRng, op: u64) -> Vec<u8> {
    let kind = [b'r', b'c', b'k'][rng.gen_range(0..3)];
    let mut v = vec![kind];
    v.extend_from_slice(format!("{op:08}").as_bytes());
    v.resize(rng.gen_range(20..90), b'.');
    v
}

/// What a snapshot or transaction saw: the model as it began, and its first read of each key.
struct View {
    model: Map,
    first_reads: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl View {
    fn new(model: &Map) -> View {
        View {
            model: model.clone(),
            first_reads: BTreeMap::new(),
        }
    }

    /// Checks `read` of `key`: the same as the first read of it, which the model allowed.
    fn check(&mut self, key: &[u8], read: Option<Vec<u8>>, what: &str) {
        match self.first_reads.get(key) {
            Some(first) => assert!(
                *first == read,
                "{what}: {} read {:?}, first {:?}",
                String::from_utf8_lossy(key),
                read.as_deref().map(String::from_utf8_lossy),
                first.as_deref().map(String::from_utf8_lossy),
            ),
            None => {
                assert!(
                    allowed(self.model.get(key), read.as_ref()),
                    "{what}: {} read {:?}, the model holds {:?}",
                    String::from_utf8_lossy(key),
                    read.as_deref().map(String::from_utf8_lossy),
                    self.model.get(key).map(|v| String::from_utf8_lossy(v)),
                );
                self.first_reads.insert(key.to_vec(), read);
            }
        }
    }
}

struct LiveTransaction {
    tx: Transaction,
    view: View,
    /// Keys the test wrote since it began.
    written_since: BTreeSet<Vec<u8>>,
}

#[test]
fn snapshots_and_transactions_never_see_a_read_change_under_a_compaction_filter() {
    let ops = env_number(
        "SIFTDB_FILTER_MODEL_OPS",
        if long() { 10_000_000 } else { 250_000 },
    );
    let seed = env_number("SIFTDB_FILTER_MODEL_SEED", 0x5f17_0001);
    let started = std::time::Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch();
    let options = tiny_options()
        .max_subcompactions(2)
        .compaction_filter(Arc::new(RemoveOrShout));
    let db = Db::open(dir.path(), options).unwrap();
    let mut model = Map::new();
    let mut snapshots: Vec<(Snapshot, View)> = Vec::new();
    let mut transactions: Vec<LiveTransaction> = Vec::new();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for op in 0..ops {
        let what = format!("seed {seed:#x}, op {op}");
        let k = key(&mut rng);
        let kind = match rng.gen_range(0..100) {
            0..=44 => {
                let v = value(&mut rng, op);
                db.put(&k, &v).unwrap();
                model.insert(k.clone(), v);
                for t in &mut transactions {
                    t.written_since.insert(k.clone());
                }
                "put"
            }
            45..=51 => {
                db.delete(&k).unwrap();
                model.remove(&k);
                for t in &mut transactions {
                    t.written_since.insert(k.clone());
                }
                "delete"
            }
            52..=56 => {
                let read = db.get(&k).unwrap();
                assert!(allowed(model.get(&k), read.as_ref()), "{what}: get");
                "get"
            }
            57..=60 if snapshots.len() < 4 => {
                snapshots.push((db.snapshot(), View::new(&model)));
                "snapshot"
            }
            61..=63 if !snapshots.is_empty() => {
                snapshots.swap_remove(rng.gen_range(0..snapshots.len()));
                "drop snapshot"
            }
            64..=79 if !snapshots.is_empty() => {
                let i = rng.gen_range(0..snapshots.len());
                let (snapshot, view) = &mut snapshots[i];
                if rng.gen_ratio(1, 8) {
                    // A short scan at the snapshot: each key in it as read before, or allowed.
                    let end = format!("{}~", String::from_utf8_lossy(&k[..6])).into_bytes();
                    let scanned: Map = db
                        .scan_at(snapshot, k.clone()..end.clone())
                        .map(|kv| kv.unwrap())
                        .collect();
                    let keys: BTreeSet<Vec<u8>> = view
                        .model
                        .range(k.clone()..end)
                        .map(|(k, _)| k)
                        .chain(scanned.keys())
                        .cloned()
                        .collect();
                    for sk in keys {
                        view.check(&sk, scanned.get(&sk).cloned(), &what);
                    }
                    "scan at snapshot"
                } else {
                    view.check(&k, db.get_at(snapshot, &k).unwrap(), &what);
                    "get at snapshot"
                }
            }
            80..=82 if transactions.len() < 2 => {
                transactions.push(LiveTransaction {
                    tx: db.transaction(),
                    view: View::new(&model),
                    written_since: BTreeSet::new(),
                });
                "begin"
            }
            83..=94 if !transactions.is_empty() => {
                let i = rng.gen_range(0..transactions.len());
                let t = &mut transactions[i];
                let read = t.tx.get(&k).unwrap();
                t.view.check(&k, read, &what);
                "transaction get"
            }
            95..=97 if !transactions.is_empty() => {
                let mut t = transactions.swap_remove(rng.gen_range(0..transactions.len()));
                let v = value(&mut rng, op);
                t.tx.put(&k, &v).unwrap();
                let touched = t.view.first_reads.keys().chain(std::iter::once(&k));
                let conflicting = touched.into_iter().any(|r| t.written_since.contains(r));
                match t.tx.commit() {
                    Ok(()) => {
                        assert!(!conflicting, "{what}: committed over a write it read");
                        model.insert(k.clone(), v);
                        for other in &mut transactions {
                            other.written_since.insert(k.clone());
                        }
                        "commit"
                    }
                    Err(e) if e.is_conflict() => {
                        assert!(conflicting, "{what}: refused with nothing written: {e}");
                        "conflict"
                    }
                    Err(e) => panic!("{what}: commit: {e}"),
                }
            }
            98..=99 if !transactions.is_empty() => {
                transactions.swap_remove(rng.gen_range(0..transactions.len()));
                "rollback"
            }
            _ => continue,
        };
        *counts.entry(kind).or_default() += 1;
    }
    drop((snapshots, transactions));
    let compactions = db.statistics().ticker(Ticker::Compactions);
    let stats = db.statistics();
    let decided = stats.ticker(Ticker::CompactionFilterRemoved)
        + stats.ticker(Ticker::CompactionFilterChanged);
    let reruns = stats.ticker(Ticker::CompactionFilterReruns);
    for kind in ["commit", "conflict", "scan at snapshot", "transaction get"] {
        assert!(counts.get(kind).copied().unwrap_or(0) > 0, "no {kind}");
    }
    assert!(compactions > 100, "only {compactions} compactions");
    assert!(decided > 0, "the filter decided nothing");
    eprintln!(
        "compaction filter model (seed {seed:#x}): {ops} ops, {compactions} compactions \
         ({reruns} run again), {decided} decisions in {:.1?}: {counts:?}",
        started.elapsed()
    );
}
