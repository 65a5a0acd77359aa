//! Merge operators through the public API: every read path resolves operands, deletes and range
//! deletes end a chain, snapshots keep what they saw across flushes and compactions, a keyspace
//! records its operator by name, and merges without an operator are refused.

use crate::common::scratch;
use std::sync::Arc;
use std::time::Duration;

use siftdb::{Append, Db, Error, MergeOperator, Options, U64Add, WriteBatch};

use crate::common::{check_across_flush_compaction_and_reopen, ManualClock};

fn le(n: u64) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

fn counters() -> Options {
    Options::default().merge_operator(Arc::new(U64Add))
}

/// Every read path's answer for `key`: get, get_pinned, multi_get, scan both ways, a cursor
/// both ways, explain_get; all must agree.
fn read_everywhere(db: &Db, key: &[u8]) -> Option<Vec<u8>> {
    let got = db.get(key).unwrap();
    assert_eq!(db.get_pinned(key).unwrap().map(|v| v.to_vec()), got);
    let many = db.multi_get(&[key, b"\xffnone"]);
    assert_eq!(many[0].as_ref().unwrap(), &got);
    let find = |it: &mut dyn Iterator<Item = siftdb::Result<(Vec<u8>, Vec<u8>)>>| {
        it.map(Result::unwrap)
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    };
    assert_eq!(find(&mut db.iter()), got, "forward scan");
    assert_eq!(find(&mut db.iter().rev()), got, "backward scan");
    let mut c = db.cursor();
    c.seek(key).unwrap();
    let forward = (c.valid() && c.key() == key).then(|| c.value().to_vec());
    assert_eq!(forward, got, "cursor forward");
    c.seek_for_prev(key).unwrap();
    let backward = (c.valid() && c.key() == key).then(|| c.value().to_vec());
    assert_eq!(backward, got, "cursor backward");
    got
}

#[test]
fn counters_add_up_on_every_read_path_across_flush_compaction_and_reopen() {
    let dir = scratch();
    let db = Db::open(dir.path(), counters()).unwrap();
    db.put("a", "x").unwrap();
    db.put("c", "z").unwrap();
    for i in 1..=10 {
        db.merge("b", le(i)).unwrap();
    }
    db.put("d", le(100)).unwrap();
    db.merge("d", le(1)).unwrap();
    let check = |db: &Db, when: &str| {
        assert_eq!(read_everywhere(db, b"b"), Some(le(55)), "{when}");
        assert_eq!(read_everywhere(db, b"d"), Some(le(101)), "{when}");
        assert_eq!(read_everywhere(db, b"a"), Some(b"x".to_vec()), "{when}");
        let keys: Vec<Vec<u8>> = db.iter().map(|kv| kv.unwrap().0).collect();
        assert_eq!(keys, [b"a", b"b", b"c", b"d"].map(|k| k.to_vec()), "{when}");
    };
    check(&db, "memtable");
    let db = check_across_flush_compaction_and_reopen(db, dir.path(), counters(), check);
    // Operands on a compacted value, then compacted again.
    db.merge("b", le(5)).unwrap();
    db.flush().unwrap();
    db.merge("b", le(5)).unwrap();
    assert_eq!(read_everywhere(&db, b"b"), Some(le(65)));
    db.compact().unwrap();
    assert_eq!(read_everywhere(&db, b"b"), Some(le(65)));
}

#[test]
fn deletes_range_deletes_and_expiry_end_a_chain() {
    let dir = scratch();
    let clock = ManualClock::at(1_000);
    let options = counters().clock(clock.clone());
    let db = Db::open(dir.path(), options.clone()).unwrap();
    db.merge("k", le(1)).unwrap();
    db.delete("k").unwrap();
    db.merge("k", le(2)).unwrap();
    db.merge("r", le(7)).unwrap();
    db.flush().unwrap();
    db.delete_range("q".."s").unwrap();
    db.merge("r", le(3)).unwrap();
    db.put_with_ttl("t", le(50), Duration::from_secs(10))
        .unwrap();
    db.merge("t", le(1)).unwrap();
    let check = |db: &Db, when: &str| {
        assert_eq!(read_everywhere(db, b"k"), Some(le(2)), "{when}");
        assert_eq!(read_everywhere(db, b"r"), Some(le(3)), "{when}");
    };
    check(&db, "written");
    assert_eq!(read_everywhere(&db, b"t"), Some(le(51)));
    clock.set(1_010);
    // The value beneath expired: the operand alone.
    assert_eq!(read_everywhere(&db, b"t"), Some(le(1)));
    let db = check_across_flush_compaction_and_reopen(db, dir.path(), options, check);
    assert_eq!(read_everywhere(&db, b"t"), Some(le(1)));
}

#[test]
fn snapshots_keep_what_they_saw_while_compactions_merge() {
    let dir = scratch();
    let db = Db::open(
        dir.path(),
        Options::default().merge_operator(Arc::new(Append::new(","))),
    )
    .unwrap();
    db.put("k", "a").unwrap();
    db.merge("k", "b").unwrap();
    let s1 = db.snapshot();
    db.merge("k", "c").unwrap();
    db.flush().unwrap();
    let s2 = db.snapshot();
    db.delete("k").unwrap();
    db.merge("k", "d").unwrap();
    for _ in 0..2 {
        assert_eq!(db.get_at(&s1, "k").unwrap(), Some(b"a,b".to_vec()));
        assert_eq!(db.get_at(&s2, "k").unwrap(), Some(b"a,b,c".to_vec()));
        let scanned: Vec<_> = db.scan_at(&s2, ..).map(|kv| kv.unwrap().1).collect();
        assert_eq!(scanned, [b"a,b,c".to_vec()]);
        assert_eq!(read_everywhere(&db, b"k"), Some(b"d".to_vec()));
        db.compact().unwrap();
    }
    drop((s1, s2));
    db.compact().unwrap();
    assert_eq!(read_everywhere(&db, b"k"), Some(b"d".to_vec()));
}

#[test]
fn batches_keyspaces_and_transactions_merge() {
    let dir = scratch();
    let db = Db::open(dir.path(), counters()).unwrap();
    let tags = db
        .keyspace_with(
            "tags",
            Options::default().merge_operator(Arc::new(Append::new(" "))),
        )
        .unwrap();
    let mut batch = WriteBatch::new();
    batch.merge("n", le(2)).merge_in(&tags, "t", "red");
    db.write(batch).unwrap();
    tags.merge("t", "blue").unwrap();
    assert_eq!(tags.get("t").unwrap(), Some(b"red blue".to_vec()));
    let mut txn = db.transaction();
    txn.merge("n", le(3)).unwrap();
    txn.merge_in(&tags, "t", "green").unwrap();
    assert_eq!(txn.get("n").unwrap(), Some(le(5)));
    assert_eq!(
        txn.get_in(&tags, "t").unwrap(),
        Some(b"red blue green".to_vec())
    );
    let scanned: Vec<_> = txn.scan(..).map(|kv| kv.unwrap()).collect();
    assert_eq!(scanned, [(b"n".to_vec(), le(5))]);
    txn.delete("m").unwrap();
    txn.put("p", le(1)).unwrap();
    txn.merge("p", le(1)).unwrap();
    assert_eq!(txn.get("p").unwrap(), Some(le(2)));
    txn.commit().unwrap();
    assert_eq!(db.get("n").unwrap(), Some(le(5)));
    assert_eq!(db.get("p").unwrap(), Some(le(2)));
    assert_eq!(tags.get("t").unwrap(), Some(b"red blue green".to_vec()));
    // A merge reads nothing, but it is a write: two transactions merging into one key conflict,
    // as two putting it do.
    let mut a = db.transaction();
    let mut b = db.transaction();
    a.merge("n", le(1)).unwrap();
    b.merge("n", le(1)).unwrap();
    a.commit().unwrap();
    assert!(matches!(b.commit(), Err(Error::Conflict(_))));
    assert_eq!(db.get("n").unwrap(), Some(le(6)));
}

#[test]
fn a_keyspace_records_its_operator_and_merges_need_one() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let refused = db.merge("k", le(1));
    assert!(matches!(refused, Err(Error::InvalidArgument(ref m)) if m.contains("merge operator")));
    let mut txn = db.transaction();
    assert!(matches!(
        txn.merge("k", le(1)),
        Err(Error::InvalidArgument(_))
    ));
    let counts = db.keyspace_with("counts", counters()).unwrap();
    counts.merge("k", le(4)).unwrap();
    let mut batch = WriteBatch::new();
    batch.merge_in(&counts, "k", le(1)).merge("k", le(1));
    assert!(
        matches!(db.write(batch), Err(Error::InvalidArgument(_))),
        "the default has none"
    );
    drop((counts, txn, db));
    // Reopened without the operator: refused, naming it.
    match Db::open(dir.path(), Options::default()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("siftdb.U64Add"), "{m}"),
        other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
    }
    let db = Db::open(
        dir.path(),
        Options::default().register_merge_operator(Arc::new(U64Add)),
    )
    .unwrap();
    assert_eq!(
        db.keyspace("counts").unwrap().get("k").unwrap(),
        Some(le(4))
    );
    // Nor with a time to live: operands do not expire.
    let ttl = counters().ttl(Duration::from_secs(5));
    assert!(matches!(
        db.keyspace_with("t", ttl),
        Err(Error::InvalidArgument(_))
    ));
}

/// Refuses every operand that is not "ok".
struct Picky;

impl MergeOperator for Picky {
    fn name(&self) -> &str {
        "test.Picky"
    }
    fn full_merge(&self, _: &[u8], _: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        operands
            .iter()
            .all(|o| *o == b"ok")
            .then(|| b"fine".to_vec())
    }
}

#[test]
fn refused_operands_are_corruption_on_read_and_kept_by_compaction() {
    let dir = scratch();
    let db = Db::open(
        dir.path(),
        Options::default().merge_operator(Arc::new(Picky)),
    )
    .unwrap();
    db.merge("good", "ok").unwrap();
    db.merge("bad", "no").unwrap();
    for _ in 0..2 {
        assert_eq!(db.get("good").unwrap(), Some(b"fine".to_vec()));
        assert!(matches!(db.get("bad"), Err(Error::Corruption { .. })));
        assert!(db.iter().any(|kv| kv.is_err()));
        db.compact().unwrap();
    }
    // The default keyspace takes the options it is opened with: without an operator, a read of
    // operands is refused.
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(matches!(db.get("bad"), Err(Error::InvalidArgument(_))));
}
