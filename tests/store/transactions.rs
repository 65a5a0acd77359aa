//! Transactions: read-your-writes, rollback, the anomalies serializability excludes (lost update,
//! write skew, phantoms) refused every time, conflicts found after the competing write was
//! flushed and compacted away from the memtable, a bank whose total holds under concurrent
//! transfers through flushes, compactions and reopen, and a history checker that replays
//! committed random transactions in commit order on a model and compares every read.
//!
//! Short by default; `SIFTDB_LONG=1` runs the concurrent tests longer.

use crate::common;
use common::{long, scratch};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::{Db, Error, Keyspace, Options, Ticker, WriteOptions};

fn small_options() -> Options {
    Options::default()
        .write_buffer_size(4096)
        .target_file_size(4096)
        .max_bytes_for_level_base(16 << 10)
        .level_size_multiplier(4)
        .level0_compaction_trigger(2)
        .block_size(512)
}

fn num(v: Option<Vec<u8>>) -> i64 {
    v.map_or(0, |v| {
        i64::from_be_bytes(v.try_into().expect("8-byte balance"))
    })
}

fn conflicts(db: &Db) -> u64 {
    db.statistics().ticker(Ticker::TransactionConflicts)
}

#[test]
fn reads_see_the_snapshot_and_the_transactions_own_writes() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let ks = db.keyspace("other").unwrap();
    for k in ["a", "c", "e"] {
        db.put(k, format!("db-{k}")).unwrap();
        ks.put(k, format!("ks-{k}")).unwrap();
    }
    let mut tx = db.transaction();
    db.put("b", "after the snapshot").unwrap();
    assert_eq!(tx.get("b").unwrap(), None, "a later write is not seen");
    tx.put("d", "mine").unwrap();
    tx.delete("c").unwrap();
    tx.put("a", "mine too").unwrap();
    tx.put_in(&ks, "z", "in other").unwrap();
    assert_eq!(tx.get("d").unwrap(), Some(b"mine".to_vec()));
    assert_eq!(tx.get("c").unwrap(), None);
    assert_eq!(tx.get_in(&ks, "c").unwrap(), Some(b"ks-c".to_vec()));
    assert_eq!(tx.get_in(&ks, "z").unwrap(), Some(b"in other".to_vec()));
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = tx.scan(..).map(Result::unwrap).collect();
    let expect: Vec<(Vec<u8>, Vec<u8>)> = [("a", "mine too"), ("d", "mine"), ("e", "db-e")]
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(scanned, expect);
    let ranged: Vec<Vec<u8>> = tx.scan("b".."e").map(|r| r.unwrap().0).collect();
    assert_eq!(ranged, vec![b"d".to_vec()]);
    let in_ks: Vec<Vec<u8>> = tx.scan_in(&ks, "d"..).map(|r| r.unwrap().0).collect();
    assert_eq!(in_ks, vec![b"e".to_vec(), b"z".to_vec()]);
    // Nothing reached the store yet.
    assert_eq!(db.get("d").unwrap(), None);
    assert_eq!(ks.get("z").unwrap(), None);
    // "b" was written after the snapshot, but the transaction neither read it as a key nor
    // scanned a range holding it… except the full scans above did: a conflict.
    let e = tx.commit().unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(matches!(e, Error::Conflict(_)));
    assert_eq!(
        db.get("d").unwrap(),
        None,
        "a refused transaction applies nothing"
    );

    // The same without the scan over "b": it commits, all of it, in both keyspaces.
    let mut tx = db.transaction();
    tx.put("d", "mine").unwrap();
    tx.delete("c").unwrap();
    tx.put_in(&ks, "z", "in other").unwrap();
    let _ = tx.scan_in(&ks, "x"..).count();
    tx.commit().unwrap();
    assert_eq!(db.get("d").unwrap(), Some(b"mine".to_vec()));
    assert_eq!(db.get("c").unwrap(), None);
    assert_eq!(ks.get("z").unwrap(), Some(b"in other".to_vec()));
}

#[test]
fn rollback_and_drop_discard_the_writes() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let mut tx = db.transaction();
    tx.put("k", "v").unwrap();
    tx.rollback();
    let mut tx = db.transaction();
    tx.put("k", "v").unwrap();
    drop(tx);
    assert_eq!(db.get("k").unwrap(), None);
    assert_eq!(db.statistics().ticker(Ticker::TransactionCommits), 0);
    // A transaction that only reads commits at once, whatever was written meanwhile.
    let mut tx = db.transaction();
    assert_eq!(tx.get("k").unwrap(), None);
    db.put("k", "later").unwrap();
    assert_eq!(tx.commit_opt(&WriteOptions::default()).unwrap(), None);
}

#[test]
fn a_keyspace_of_another_store_is_refused() {
    let (d1, d2) = (scratch(), scratch());
    let db = Db::open(d1.path(), Options::default()).unwrap();
    let other = Db::open(d2.path(), Options::default()).unwrap();
    let foreign = other.keyspace("x").unwrap();
    let mut tx = db.transaction();
    assert!(matches!(
        tx.get_in(&foreign, "k"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(tx.put_in(&foreign, "k", "v").is_err());
    assert!(matches!(
        tx.scan_in(&foreign, ..).next(),
        Some(Err(Error::InvalidArgument(_)))
    ));
}

/// A transaction that touched a keyspace dropped before its commit is refused with
/// `InvalidArgument` (not a conflict: running it again cannot help), and applies nothing.
#[test]
fn a_keyspace_dropped_under_a_transaction_fails_its_commit() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for (reads, writes) in [(false, true), (true, false)] {
        let ks = db.keyspace("doomed").unwrap();
        ks.put("k", "v").unwrap();
        let mut tx = db.transaction();
        if reads {
            assert_eq!(tx.get_in(&ks, "k").unwrap(), Some(b"v".to_vec()));
        }
        if writes {
            tx.put_in(&ks, "k", "w").unwrap();
        }
        tx.put("elsewhere", "x").unwrap();
        db.drop_keyspace("doomed").unwrap();
        let e = tx.commit().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert_eq!(db.get("elsewhere").unwrap(), None);
    }
}

/// Two read-modify-writes of one counter, interleaved: the second to commit must be refused,
/// every time, or an increment is lost.
#[test]
fn a_lost_update_is_always_refused() {
    let dir = scratch();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let ks = db.keyspace("counters").unwrap();
    let rounds = if long() { 5000 } else { 500 };
    for round in 0..rounds {
        let (mut t1, mut t2) = (db.transaction(), db.transaction());
        let a = num(t1.get_in(&ks, "n").unwrap());
        let b = num(t2.get_in(&ks, "n").unwrap());
        t2.put_in(&ks, "n", (b + 1).to_be_bytes()).unwrap();
        t1.put_in(&ks, "n", (a + 1).to_be_bytes()).unwrap();
        // Commit in either order; flush or compact between now and then.
        let (first, second) = if round % 2 == 0 { (t1, t2) } else { (t2, t1) };
        first.commit().unwrap();
        match round % 3 {
            1 => ks.flush().unwrap(),
            2 if round % 30 == 2 => ks.compact().unwrap(),
            _ => {}
        }
        assert!(second.commit().unwrap_err().is_conflict(), "round {round}");
        assert_eq!(num(ks.get("n").unwrap()), round + 1);
    }
    assert_eq!(conflicts(&db), rounds as u64);
}

/// Two doctors on call: each may go off call if the other stays on. Snapshot isolation lets both
/// go (each read both, each wrote only its own row); serializability refuses the second.
#[test]
fn write_skew_is_always_refused() {
    let dir = scratch();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let (alice, bob) = (db.keyspace("alice").unwrap(), db.keyspace("bob").unwrap());
    let rounds = if long() { 5000 } else { 500 };
    for round in 0..rounds {
        alice.put("on_call", [1]).unwrap();
        bob.put("on_call", [1]).unwrap();
        let go_off = |me: &Keyspace, other: &Keyspace| {
            let mut tx = db.transaction();
            let mine = tx.get_in(me, "on_call").unwrap() == Some(vec![1]);
            let theirs = tx.get_in(other, "on_call").unwrap() == Some(vec![1]);
            assert!(mine && theirs);
            tx.put_in(me, "on_call", [0]).unwrap();
            tx
        };
        let (ta, tb) = (go_off(&alice, &bob), go_off(&bob, &alice));
        if round % 7 == 3 {
            db.keyspace("alice").unwrap().flush().unwrap();
        }
        ta.commit().unwrap();
        assert!(tb.commit().unwrap_err().is_conflict(), "round {round}");
        let on = [&alice, &bob]
            .iter()
            .filter(|k| k.get("on_call").unwrap() == Some(vec![1]))
            .count();
        assert_eq!(on, 1, "round {round}: somebody must stay on call");
    }
}

/// A transaction that scanned a range conflicts with an insert into it (a phantom), even one
/// flushed and compacted into the tables meanwhile; an insert beside the range does not.
#[test]
fn an_insert_into_a_scanned_range_is_a_conflict() {
    let dir = scratch();
    let db = Db::open(dir.path(), small_options()).unwrap();
    for i in 0..200u32 {
        db.put(format!("item{i:04}"), [0u8; 40]).unwrap();
    }
    for (place, flush) in [("item0100x", false), ("item0150x", true), ("zzz", true)] {
        let mut tx = db.transaction();
        let n = tx.scan("item0050".."item0180").count();
        assert!(n >= 130);
        tx.put("count", (n as i64).to_be_bytes()).unwrap();
        db.put(place, "phantom").unwrap();
        if flush {
            db.compact().unwrap();
        }
        let outcome = tx.commit();
        if place == "zzz" {
            outcome.unwrap();
        } else {
            assert!(outcome.unwrap_err().is_conflict(), "{place}");
        }
    }
    // Excluded and included bounds are honoured.
    let mut tx = db.transaction();
    let _ = tx
        .scan((
            std::ops::Bound::Excluded("item0010"),
            std::ops::Bound::Included("item0020"),
        ))
        .count();
    tx.put("count", "x").unwrap();
    db.put("item0010", "rewritten at the excluded start")
        .unwrap();
    db.put("item0021", "just past the end").unwrap();
    tx.commit().unwrap();
    let mut tx = db.transaction();
    let _ = tx.scan("item0010"..="item0020").count();
    tx.put("count", "y").unwrap();
    db.put("item0020", "at the included end").unwrap();
    db.compact().unwrap();
    assert!(tx.commit().unwrap_err().is_conflict());
}

/// The competing write is no longer in a memtable when the transaction commits: flushed into
/// L0, compacted to the bottom level (where sequences of versions every snapshot sees are
/// zeroed, and tombstones dropped). The transaction's snapshot keeps the version newer than it,
/// so the conflict is still found; an unrelated key compacted the same way conflicts with
/// nothing, and its check is answered by the filters.
#[test]
fn a_conflict_is_found_after_the_competing_write_is_flushed_and_compacted() {
    let dir = scratch();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    for i in 0..300u32 {
        ks.put(format!("k{i:04}"), [7u8; 30]).unwrap();
    }
    ks.compact().unwrap();
    for step in ["flush", "compact"] {
        for competing in ["overwrite", "delete", "unrelated"] {
            let mut tx = db.transaction();
            assert!(tx.get_in(&ks, "k0100").unwrap().is_some());
            assert_eq!(tx.get_in(&ks, "absent").unwrap(), None);
            tx.put_in(&ks, "k0200", "mine").unwrap();
            match competing {
                "overwrite" => ks.put("k0100", "theirs").unwrap(),
                "delete" => ks.delete("k0100").unwrap(),
                _ => ks.put("k0250x", "theirs").unwrap(),
            }
            // More writes, so compactions have other work too.
            for i in 0..100u32 {
                ks.put(format!("k{:04}", 300 + i), [1u8; 30]).unwrap();
            }
            match step {
                "flush" => ks.flush().unwrap(),
                _ => ks.compact().unwrap(),
            }
            let outcome = tx.commit();
            match competing {
                "unrelated" => outcome.unwrap(),
                _ => assert!(
                    outcome.unwrap_err().is_conflict(),
                    "{competing} then {step}"
                ),
            }
            // Restore for the next case.
            ks.put("k0100", [7u8; 30]).unwrap();
            ks.compact().unwrap();
        }
    }
    // A read of an absent key conflicts with its creation, flushed or not.
    let mut tx = db.transaction();
    assert_eq!(tx.get_in(&ks, "new").unwrap(), None);
    tx.put_in(&ks, "k0000", "x").unwrap();
    ks.put("new", "created").unwrap();
    ks.compact().unwrap();
    assert!(tx.commit().unwrap_err().is_conflict());

    // An L0 table whose key range holds a key it does not have: the commit's check of that key
    // is answered by the table's filter, without a block read.
    let fresh = db.keyspace("fresh").unwrap();
    fresh.put("a", "1").unwrap();
    fresh.put("z", "1").unwrap();
    fresh.flush().unwrap();
    let mut tx = db.transaction();
    assert_eq!(tx.get_in(&fresh, "m").unwrap(), None);
    tx.put_in(&fresh, "n", "x").unwrap();
    let useful = || fresh.statistics().ticker(Ticker::BloomFilterUseful);
    let before = useful();
    tx.commit().unwrap();
    assert!(useful() > before, "the check asked the filter");
}

#[test]
fn update_and_compare_and_swap_retry_until_they_apply() {
    let dir = scratch();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let ks = db.keyspace("counters").unwrap();
    let threads = 4;
    let per_thread = if long() { 2000 } else { 300 };
    std::thread::scope(|s| {
        for t in 0..threads {
            let (db, ks) = (db.clone(), ks.clone());
            s.spawn(move || {
                for i in 0..per_thread {
                    let add = |old: Option<&[u8]>| {
                        let n = old.map_or(0, |v| i64::from_be_bytes(v.try_into().unwrap()));
                        Some((n + 1).to_be_bytes().to_vec())
                    };
                    if (t + i) % 2 == 0 {
                        db.update("hits", add).unwrap();
                    } else {
                        ks.update("hits", add).unwrap();
                    }
                    // Compare-and-swap increments of a second counter.
                    loop {
                        let old = db.get("cas").unwrap();
                        let n = num(old.clone());
                        let new = (n + 1).to_be_bytes();
                        if db
                            .compare_and_swap("cas", old.as_deref(), Some(&new))
                            .unwrap()
                        {
                            break;
                        }
                    }
                }
            });
        }
    });
    let total = (threads * per_thread) as i64;
    assert_eq!(
        num(db.get("hits").unwrap()) + num(ks.get("hits").unwrap()),
        total
    );
    assert_eq!(num(db.get("cas").unwrap()), total);
    assert!(!db.compare_and_swap("cas", None, Some(b"x")).unwrap());
    assert!(db
        .compare_and_swap("cas", Some(&total.to_be_bytes()), None)
        .unwrap());
    assert_eq!(db.get("cas").unwrap(), None);
}

const ACCOUNTS: usize = 24;
const START_BALANCE: i64 = 1000;

fn account(i: usize) -> String {
    format!("acct{i:03}")
}

/// Accounts 0, 2, 4, … in keyspace `even`, the others in `odd`.
fn holder<'a>(even: &'a Keyspace, odd: &'a Keyspace, i: usize) -> &'a Keyspace {
    if i.is_multiple_of(2) {
        even
    } else {
        odd
    }
}

/// The bank's total, read in one transaction (serializable, so it must be exact).
fn total_in_transaction(db: &Db, even: &Keyspace, odd: &Keyspace) -> i64 {
    let mut tx = db.transaction();
    let mut total = 0;
    for i in 0..ACCOUNTS {
        total += num(tx.get_in(holder(even, odd, i), account(i)).unwrap());
    }
    total
}

fn total_by_scan(even: &Keyspace, odd: &Keyspace) -> i64 {
    let snapshot = even.snapshot();
    [even, odd]
        .iter()
        .flat_map(|k| k.scan_at(&snapshot, "acct".."acct~"))
        .map(|r| num(Some(r.unwrap().1)))
        .sum()
}

/// Threads move money between accounts held in two keyspaces, through tiny memtables (so
/// flushes and compactions run throughout), while others read the total in transactions (by
/// point reads and by scans): it always matches, and still does after reopen.
#[test]
fn a_bank_keeps_its_total_through_concurrent_transfers_flushes_and_reopen() {
    let dir = scratch();
    let options = small_options();
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let (even, odd) = (db.keyspace("even").unwrap(), db.keyspace("odd").unwrap());
    for i in 0..ACCOUNTS {
        holder(&even, &odd, i)
            .put(account(i), START_BALANCE.to_be_bytes())
            .unwrap();
    }
    let expected = START_BALANCE * ACCOUNTS as i64;
    let transfers = if long() { 20_000 } else { 1500 };
    let done = AtomicBool::new(false);
    let committed = AtomicU64::new(0);
    std::thread::scope(|s| {
        let movers: Vec<_> = (0..3u64)
            .map(|t| {
                let (db, even, odd, committed) =
                    (db.clone(), even.clone(), odd.clone(), &committed);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(t);
                    for _ in 0..transfers {
                        let from = rng.gen_range(0..ACCOUNTS);
                        let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                        let amount = rng.gen_range(1..50);
                        let mut tx = db.transaction();
                        let (kf, kt) = (holder(&even, &odd, from), holder(&even, &odd, to));
                        let a = num(tx.get_in(kf, account(from)).unwrap());
                        let b = num(tx.get_in(kt, account(to)).unwrap());
                        if a < amount {
                            continue; // no overdrafts
                        }
                        tx.put_in(kf, account(from), (a - amount).to_be_bytes())
                            .unwrap();
                        tx.put_in(kt, account(to), (b + amount).to_be_bytes())
                            .unwrap();
                        // Padding, so the tiny memtables fill and flush.
                        tx.put_in(kf, format!("log{t}-{}", rng.r#gen::<u32>()), [0u8; 64])
                            .unwrap();
                        match tx.commit() {
                            Ok(()) => {
                                committed.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => assert!(e.is_conflict(), "{e}"),
                        }
                    }
                })
            })
            .collect();
        let auditor = s.spawn(|| {
            let mut audits = 0;
            while !done.load(Ordering::Relaxed) {
                assert_eq!(total_in_transaction(&db, &even, &odd), expected);
                // A scan inside a transaction sees one snapshot of both keyspaces too.
                let mut tx = db.transaction();
                let scanned: i64 = [&even, &odd]
                    .iter()
                    .flat_map(|k| tx.scan_in(k, "acct".."acct~").collect::<Vec<_>>())
                    .map(|r| num(Some(r.unwrap().1)))
                    .sum();
                assert_eq!(scanned, expected);
                audits += 1;
            }
            audits
        });
        for m in movers {
            m.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        assert!(auditor.join().unwrap() > 0);
    });
    assert!(committed.load(Ordering::Relaxed) > 0);
    let stats = db.statistics();
    assert_eq!(
        stats.ticker(Ticker::TransactionCommits),
        committed.load(Ordering::Relaxed)
    );
    assert!(stats.ticker(Ticker::Flushes) > 0);
    assert_eq!(total_in_transaction(&db, &even, &odd), expected);
    drop((even, odd, db));
    let db = Db::open(dir.path(), options).unwrap();
    let (even, odd) = (db.keyspace("even").unwrap(), db.keyspace("odd").unwrap());
    assert_eq!(total_in_transaction(&db, &even, &odd), expected);
    assert_eq!(total_by_scan(&even, &odd), expected);
}

/// A scan a transaction made: keyspace, start, end (excluded), and what it returned.
type ScanRecord = (usize, Vec<u8>, Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

/// One committed transaction as the history checker saw it.
struct Committed {
    /// Where it serializes: its last write's sequence, or its snapshot's if it wrote nothing
    /// (then after every transaction whose last write is at or below it).
    order: (u64, bool),
    reads: Vec<(usize, Vec<u8>, Option<Vec<u8>>)>,
    scans: Vec<ScanRecord>,
    writes: Vec<(usize, Vec<u8>, Option<Vec<u8>>)>,
}

/// Random transactions (point reads, short scans, puts, deletes over a small key space in two
/// keyspaces) from several threads; each committed one is recorded with what it read. Replayed
/// one at a time in commit order on a model, every read of every committed transaction must
/// be what the model held at that point: the history is serializable in commit order.
#[test]
fn committed_random_transactions_replay_serially_in_commit_order() {
    let dir = scratch();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let spaces = [db.keyspace("a").unwrap(), db.keyspace("b").unwrap()];
    let history: Mutex<Vec<Committed>> = Mutex::new(Vec::new());
    let per_thread = if long() { 20_000 } else { 1500 };
    let threads = 4u64;
    let keys = 16;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (db, spaces, history) = (db.clone(), spaces.clone(), &history);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t);
                for n in 0..per_thread {
                    let mut tx = db.transaction();
                    let mut rec = Committed {
                        order: (0, false),
                        reads: Vec::new(),
                        scans: Vec::new(),
                        writes: Vec::new(),
                    };
                    let k =
                        |rng: &mut StdRng| format!("k{:02}", rng.gen_range(0..keys)).into_bytes();
                    for _ in 0..rng.gen_range(1..6) {
                        let ks = rng.gen_range(0..2);
                        // Reads of what the transaction wrote itself come from its buffer
                        // (checked elsewhere): the model checks the others.
                        let wrote = |rec: &Committed, lo: &[u8], hi: &[u8]| {
                            rec.writes.iter().any(|(w, k, _)| {
                                *w == ks && k.as_slice() >= lo && k.as_slice() <= hi
                            })
                        };
                        match rng.gen_range(0..10) {
                            0..=3 => {
                                let key = k(&mut rng);
                                let v = tx.get_in(&spaces[ks], &key).unwrap();
                                if !wrote(&rec, &key, &key) {
                                    rec.reads.push((ks, key, v));
                                }
                            }
                            4 => {
                                let (a, b) = (k(&mut rng), k(&mut rng));
                                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                                let got: Vec<_> = tx
                                    .scan_in(&spaces[ks], lo.clone()..hi.clone())
                                    .map(Result::unwrap)
                                    .collect();
                                if !wrote(&rec, &lo, &hi) {
                                    rec.scans.push((ks, lo, hi, got));
                                }
                            }
                            5 => {
                                let key = k(&mut rng);
                                tx.delete_in(&spaces[ks], &key).unwrap();
                                rec.writes.push((ks, key, None));
                            }
                            _ => {
                                let key = k(&mut rng);
                                let v = format!("t{t}n{n}").into_bytes();
                                tx.put_in(&spaces[ks], &key, &v).unwrap();
                                rec.writes.push((ks, key, Some(v)));
                            }
                        }
                    }
                    let snapshot = tx.snapshot().sequence();
                    match tx.commit_opt(&WriteOptions::default()) {
                        Ok(Some(last)) => rec.order = (last, false),
                        Ok(None) => rec.order = (snapshot, true),
                        Err(e) => {
                            assert!(e.is_conflict(), "{e}");
                            continue;
                        }
                    }
                    history.lock().unwrap().push(rec);
                    if n % 200 == 199 && t == 0 {
                        spaces[n / 200 % 2].flush().unwrap();
                    }
                }
            });
        }
    });
    let mut history = history.into_inner().unwrap();
    // Writers at their last sequence; a reader after every writer at or below its snapshot.
    history.sort_by_key(|c| c.order);
    let mut model: [BTreeMap<Vec<u8>, Vec<u8>>; 2] = Default::default();
    let mut writers = 0;
    for (i, c) in history.iter().enumerate() {
        for (ks, key, v) in &c.reads {
            assert_eq!(
                model[*ks].get(key),
                v.as_ref(),
                "transaction {i} (order {:?}) read {:?}",
                c.order,
                String::from_utf8_lossy(key)
            );
        }
        for (ks, lo, hi, got) in &c.scans {
            let expect: Vec<(Vec<u8>, Vec<u8>)> = model[*ks]
                .range(lo.clone()..hi.clone())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(&expect, got, "transaction {i}: scan");
        }
        for (ks, key, v) in &c.writes {
            match v {
                Some(v) => model[*ks].insert(key.clone(), v.clone()),
                None => model[*ks].remove(key),
            };
        }
        writers += usize::from(!c.writes.is_empty());
    }
    assert!(writers > 100, "{writers} writing transactions committed");
    for ks in 0..2 {
        let stored: BTreeMap<Vec<u8>, Vec<u8>> = spaces[ks].iter().map(Result::unwrap).collect();
        assert_eq!(stored, model[ks], "the store ends as the replay");
    }
    assert!(conflicts(&db) > 0, "the threads contended");
}

/// An app's own error, which only takes siftdb's in: what `try_update` and `transaction_with`
/// hand back unchanged.
#[derive(Debug)]
enum AppError {
    NotANumber(String),
    Overdrawn { balance: i64 },
    Store(Error),
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Store(e)
    }
}

#[test]
fn an_update_whose_closure_fails_writes_nothing_and_returns_its_error() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let ks = db.keyspace("counters").unwrap();
    ks.put("hits", "forty-one").unwrap();
    let parse = |old: Option<&[u8]>| -> Result<Option<String>, AppError> {
        let text = String::from_utf8_lossy(old.unwrap_or(b"0")).into_owned();
        let n: u64 = text.parse().map_err(|_| AppError::NotANumber(text))?;
        Ok(Some((n + 1).to_string()))
    };
    match ks.try_update("hits", parse) {
        Err(AppError::NotANumber(text)) => assert_eq!(text, "forty-one"),
        other => panic!("expected the closure's error, got {other:?}"),
    }
    assert_eq!(
        ks.get("hits").unwrap(),
        Some(b"forty-one".to_vec()),
        "untouched"
    );
    assert_eq!(db.statistics().ticker(Ticker::TransactionCommits), 0);
    // Where `update` would have deleted the key on `None`, `try_update` wrote nothing.
    ks.put("hits", "41").unwrap();
    assert_eq!(ks.try_update("hits", parse).unwrap(), Some(b"42".to_vec()));
    assert_eq!(ks.try_update("absent", parse).unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get("hits").unwrap(), None, "its keyspace only");
    let delete = |_: Option<&[u8]>| Ok::<Option<Vec<u8>>, Error>(None);
    assert_eq!(ks.try_update("hits", delete).unwrap(), None);
    assert_eq!(ks.get("hits").unwrap(), None);
}

#[test]
fn a_transaction_closure_returning_an_app_error_rolls_back() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let accounts = db.keyspace("accounts").unwrap();
    accounts.put("alice", 50i64.to_be_bytes()).unwrap();
    let transfer = |amount: i64| {
        db.transaction_with(|tx| {
            let from = num(tx.get_in(&accounts, "alice")?);
            let to = num(tx.get_in(&accounts, "bob")?);
            // Written before the check fails: rolled back with the rest.
            tx.put_in(&accounts, "bob", (to + amount).to_be_bytes())?;
            tx.put("audit", "transfer attempted")?;
            if from < amount {
                return Err(AppError::Overdrawn { balance: from });
            }
            tx.put_in(&accounts, "alice", (from - amount).to_be_bytes())?;
            Ok(to + amount)
        })
    };
    assert_eq!(transfer(30).unwrap(), 30);
    match transfer(30) {
        Err(AppError::Overdrawn { balance }) => assert_eq!(balance, 20),
        other => panic!("expected the closure's error, got {other:?}"),
    }
    assert_eq!(
        num(accounts.get("bob").unwrap()),
        30,
        "the failed transfer wrote nothing"
    );
    assert_eq!(num(accounts.get("alice").unwrap()), 20);
    db.delete("audit").unwrap();
    // A siftdb error inside the closure comes back as the app's own variant.
    let closed = Db::open(scratch().path(), Options::default()).unwrap();
    let other = closed.keyspace("x").unwrap();
    let refused: Result<(), AppError> = db.transaction_with(|tx| {
        tx.put_in(&other, "k", "v")?;
        Ok(())
    });
    assert!(matches!(
        refused,
        Err(AppError::Store(Error::InvalidArgument(_)))
    ));
}

#[test]
fn transaction_with_retries_a_conflict_as_often_as_configured_then_returns_it() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default().transaction_retries(3)).unwrap();
    db.put("n", 0i64.to_be_bytes()).unwrap();
    // Each run reads `n`, then a write from outside lands before its commit: a conflict every
    // time, until the fourth run (the first plus three retries) gives up.
    let mut runs = 0;
    let outcome: Result<(), Error> = db.transaction_with(|tx| {
        runs += 1;
        let n = num(tx.get("n")?);
        db.put("n", (n + 100).to_be_bytes())?;
        tx.put("n", (n + 1).to_be_bytes())?;
        Ok(())
    });
    assert!(matches!(outcome, Err(Error::Conflict(_))), "{outcome:?}");
    assert_eq!(runs, 4);
    assert_eq!(num(db.get("n").unwrap()), 400);
    // A run that meets no conflict commits, after as many as it took.
    let mut runs = 0;
    let n = db
        .transaction_with(|tx| {
            runs += 1;
            let n = num(tx.get("n")?);
            if runs == 1 {
                db.put("n", (n + 100).to_be_bytes())?;
            }
            tx.put("n", (n + 1).to_be_bytes())?;
            Ok::<_, Error>(n + 1)
        })
        .unwrap();
    assert_eq!((runs, n), (2, 501));
    assert_eq!(num(db.get("n").unwrap()), 501);
}

/// A transaction's scan, forward, backward and from both ends at once, against a model of its
/// snapshot with its own puts, deletes and range deletes applied, over random stores.
#[test]
fn a_reverse_transaction_scan_merges_the_transactions_own_writes() {
    use std::ops::Bound;
    let mut rng = StdRng::seed_from_u64(0x5ca9);
    let rounds = if long() { 400 } else { 60 };
    for round in 0..rounds {
        let dir = scratch();
        let db = Db::open(dir.path(), small_options()).unwrap();
        let key = |i: u32| format!("k{i:03}").into_bytes();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for _ in 0..rng.gen_range(0..120) {
            let k = key(rng.gen_range(0..100));
            if rng.gen_bool(0.8) {
                let v = format!("db{}", rng.r#gen::<u16>()).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            } else {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
        }
        if rng.gen_bool(0.5) {
            db.flush().unwrap();
        }
        let mut tx = db.transaction();
        for _ in 0..rng.gen_range(0..30) {
            let k = key(rng.gen_range(0..100));
            match rng.gen_range(0..10) {
                0..=5 => {
                    let v = format!("tx{}", rng.r#gen::<u16>()).into_bytes();
                    tx.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                6..=8 => {
                    tx.delete(&k).unwrap();
                    model.remove(&k);
                }
                _ => {
                    let end = key(rng.gen_range(0..100));
                    tx.delete_range(k.clone()..end.clone()).unwrap();
                    model.retain(|m, _| !(*m >= k && *m < end));
                }
            }
        }
        // Writes after the snapshot are not seen.
        db.put(key(rng.gen_range(0..100)), "later").unwrap();
        let (a, b) = (rng.gen_range(0..100), rng.gen_range(0..100));
        let (lo, hi) = (key(a.min(b)), key(a.max(b)));
        let bounds = (Bound::Included(lo.clone()), Bound::Excluded(hi.clone()));
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .range(bounds.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let forward: Vec<_> = tx.scan(bounds.clone()).map(Result::unwrap).collect();
        assert_eq!(forward, want, "round {round}: forward");
        let backward: Vec<_> = tx.scan(bounds.clone()).rev().map(Result::unwrap).collect();
        let mut reversed = want.clone();
        reversed.reverse();
        assert_eq!(backward, reversed, "round {round}: backward");
        // From both ends at random, meeting once.
        let mut scan = tx.scan(bounds.clone());
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let item = if rng.gen_bool(0.5) {
                scan.next().map(|kv| front.push(kv.unwrap()))
            } else {
                scan.next_back().map(|kv| back.push(kv.unwrap()))
            };
            if item.is_none() {
                break;
            }
        }
        assert!(
            scan.next().is_none() && scan.next_back().is_none(),
            "round {round}: fused"
        );
        back.reverse();
        front.extend(back);
        assert_eq!(front, want, "round {round}: both ends");
        let all: Vec<_> = tx.scan(..).rev().map(Result::unwrap).collect();
        assert_eq!(all.len(), model.len(), "round {round}: everything");
    }
}
