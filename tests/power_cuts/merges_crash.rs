//! Random power cuts against a model of acknowledged writes, with merges among them: merge
//! operands go through the same WAL as puts, and flushes and compactions (which combine them)
//! through the same table and MANIFEST steps, so after a cut the store holds a prefix of the
//! batches attempted, with every counter its prefix adds up to.
//!
//! The store is `tiny_options`' (flushes, compactions and WAL switches all the time), its default
//! keyspace with `U64Add`; batches mix increments of 40 counters with resets (a put of 0) and
//! deletes. Each life arms a cut (`aim`), writes until it lands, and the store is reopened
//! through more cuts (`open_through_cuts`) and checked: a full scan equals the state after a
//! prefix `0..m` of the batches attempted, `m` covering every batch acknowledged before the last
//! acknowledged synced write or upkeep (every acknowledged batch after a process crash); a Get of
//! every counter agrees.
//!
//! Short mode (plain `cargo test`): 400 cuts. `SIFTDB_LONG=1`: 10,000; `SIFTDB_POWER_CUTS=n`: any
//! number; `SIFTDB_POWER_CUT_SEED=s`: another random sequence.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Options, U64Add, WriteBatch, WriteOptions};

use crate::common::power_cuts::{
    aim, open_through_cuts, power_fails, tiny_options, upkeep, Epochs, Tally,
};
use crate::common::{env_number, long};

const COUNTERS: usize = 40;

/// One write of a batch to counter `k`.
#[derive(Debug, Clone, Copy)]
enum Op {
    Add(usize, u64),
    Reset(usize),
    Delete(usize),
}

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn counter(k: usize) -> Vec<u8> {
    format!("counter{k:02}").into_bytes()
}

fn apply(state: &mut State, batch: &[Op]) {
    for op in batch {
        match *op {
            Op::Add(k, n) => {
                let v = state
                    .entry(counter(k))
                    .or_insert_with(|| 0u64.to_le_bytes().to_vec());
                let sum = u64::from_le_bytes(v.as_slice().try_into().unwrap()) + n;
                *v = sum.to_le_bytes().to_vec();
            }
            Op::Reset(k) => {
                state.insert(counter(k), 0u64.to_le_bytes().to_vec());
            }
            Op::Delete(k) => {
                state.remove(&counter(k));
            }
        }
    }
}

fn random_batch(rng: &mut StdRng) -> Vec<Op> {
    (0..rng.gen_range(1..6))
        .map(|_| {
            let k = rng.gen_range(0..COUNTERS);
            match rng.gen_range(0..40) {
                0 => Op::Reset(k),
                1 => Op::Delete(k),
                _ => Op::Add(k, rng.gen_range(1..1000)),
            }
        })
        .collect()
}

fn options(faults: &siftdb::fault_injection::FaultInjector) -> Options {
    tiny_options()
        .merge_operator(Arc::new(U64Add))
        .fault_injector(faults.clone())
}

/// The `m` for which the store holds exactly the state after `history[..m]`, at least `floor`.
fn recovered_prefix(db: &Db, history: &[Vec<Op>], floor: usize, what: &str) -> (usize, State) {
    let got: State = db.iter().map(|kv| kv.unwrap()).collect();
    let mut state = State::new();
    for (m, batch) in std::iter::once(&Vec::new()).chain(history).enumerate() {
        apply(&mut state, batch);
        if m >= floor && state == got {
            for k in 0..COUNTERS {
                assert_eq!(
                    db.get(counter(k)).unwrap().as_ref(),
                    got.get(&counter(k)),
                    "{what}"
                );
            }
            return (m, state);
        }
    }
    panic!(
        "{what}: the store holds no prefix of at least {floor} of the {} batches attempted",
        history.len()
    );
}

#[test]
fn power_cuts_amid_merges_recover_a_prefix_holding_every_synced_write() {
    let cuts = env_number("SIFTDB_POWER_CUTS", if long() { 10_000 } else { 400 }) as usize;
    let seed = env_number("SIFTDB_POWER_CUT_SEED", 0x3e26_e001);
    let mut rng = StdRng::seed_from_u64(seed);
    let root = crate::common::scratch();
    let mut tally = Tally::default();
    let mut history: Vec<Vec<Op>> = Vec::new();
    let (mut durable, mut acked) = (0usize, 0usize);
    let mut epochs = Epochs::new(root.path(), 30);
    while tally.cuts < cuts {
        if epochs.advance(tally.cuts) {
            history.clear();
            (durable, acked) = (0, 0);
        }
        let (dir, faults) = (&epochs.dir, &epochs.faults);
        let what = format!("seed {seed}, cut {} (epoch {})", tally.cuts, epochs.number);
        let open = || Db::open(dir, options(faults));
        let (db, power_cut) = open_through_cuts(faults, &mut rng, &mut tally, &what, open);
        if power_cut {
            acked = 0;
        }
        let (m, mut model) = recovered_prefix(&db, &history, durable.max(acked), &what);
        tally.batches_lost += history.len() - m;
        history.truncate(m);
        durable = m;

        let injected_before = faults.injected().len();
        aim(&mut rng, faults);
        for _ in 0..rng.gen_range(1..400) {
            let batch = random_batch(&mut rng);
            let sync = rng.gen_bool(0.1);
            let result = match batch.as_slice() {
                [Op::Add(k, n)] if !sync => db.merge(counter(*k), n.to_le_bytes()),
                _ => {
                    let mut b = WriteBatch::new();
                    for op in &batch {
                        match *op {
                            Op::Add(k, n) => b.merge(counter(k), n.to_le_bytes()),
                            Op::Reset(k) => b.put(counter(k), 0u64.to_le_bytes()),
                            Op::Delete(k) => b.delete(counter(k)),
                        };
                    }
                    db.write_opt(b, &WriteOptions { sync })
                }
            };
            history.push(batch);
            if result.is_err() {
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
                None if pick < 20 => {
                    // A live read sees every acknowledged write.
                    let k = counter(rng.gen_range(0..COUNTERS));
                    match db.get(&k) {
                        Ok(v) => assert_eq!(v.as_ref(), model.get(&k), "{what}: live get"),
                        Err(_) => break, // a background failure may surface here
                    }
                }
                None => {}
            }
        }
        tally.machine_stops(faults, injected_before);
        drop(db);
        tally.cuts += 1;
        if power_fails(faults, &mut rng, &mut tally) {
            acked = 0;
        }
    }
    assert!(tally.batches_acked > cuts && tally.synced_acked > 0);
    eprintln!(
        "power cuts amid merges (seed {seed}): {} ({} inside open, {} process crashes instead); \
         {} batches acknowledged ({} synced), {} unsynced batches lost",
        tally.cuts,
        tally.in_open,
        tally.process_crashes,
        tally.batches_acked,
        tally.synced_acked,
        tally.batches_lost
    );
}
