//! Followers (`Db::open_follower`, `Db::catch_up`): a store read beside its live writer. What a
//! follower sees before and after a catch-up, its refused writes, keyspaces the writer creates
//! and drops, and tables the writer deletes while the follower still reads them.

use crate::common::scratch;
use std::path::Path;

use crate::common::power_cuts::tiny_options as tiny;
use siftdb::{Db, Error, Options, WriteBatch};

fn tables_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

fn fill(db: &Db, round: u32, keys: u32) {
    for i in 0..keys {
        db.put(
            format!("key{i:05}"),
            format!("round{round}-{i}-{}", "x".repeat(40)),
        )
        .unwrap();
    }
}

#[test]
fn a_follower_reads_the_writers_state_as_of_each_catch_up() {
    let dir = scratch();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    let db = Db::open(&primary, tiny()).unwrap();
    fill(&db, 0, 300);
    let follower = Db::open_follower(&primary, &own, tiny()).unwrap();
    assert!(follower.is_follower() && follower.is_read_only());
    assert_eq!(follower.followed_path(), Some(primary.as_path()));
    assert_eq!(follower.path(), own.as_path());
    let value = |f: &Db, i: u32| f.get(format!("key{i:05}")).unwrap();
    assert!(value(&follower, 299).unwrap().starts_with(b"round0-299"));
    assert_eq!(follower.iter().count(), 300);

    fill(&db, 1, 300);
    db.delete("key00007").unwrap();
    assert!(
        value(&follower, 5).unwrap().starts_with(b"round0-5"),
        "not yet caught up"
    );
    let seq = follower.catch_up().unwrap();
    assert_eq!(seq, db.snapshot().sequence());
    assert!(value(&follower, 5).unwrap().starts_with(b"round1-5"));
    assert_eq!(value(&follower, 7), None);

    // Reads at a follower's snapshot, across a catch-up that brings compacted tables.
    let snapshot = follower.snapshot();
    fill(&db, 2, 300);
    db.compact().unwrap();
    follower.catch_up().unwrap();
    assert!(value(&follower, 5).unwrap().starts_with(b"round2-5"));
    let old = follower.get_at(&snapshot, "key00005").unwrap().unwrap();
    assert!(
        old.starts_with(b"round1-5"),
        "{}",
        String::from_utf8_lossy(&old)
    );
    assert_eq!(follower.iter_at(&snapshot).count(), 299);
    drop(snapshot);
    let multi = follower.multi_get(&["key00001", "key00007", "nothing"]);
    assert!(multi[0]
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap()
        .starts_with(b"round2-1"));
    assert!(multi[1]
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap()
        .starts_with(b"round2-7"));
    assert!(matches!(multi[2], Ok(None)));
    let at = follower.snapshot();
    fill(&db, 3, 10);
    follower.catch_up().unwrap();
    let multi = follower.multi_get_at(&at, &["key00001"]);
    assert!(multi[0]
        .as_ref()
        .unwrap()
        .as_ref()
        .unwrap()
        .starts_with(b"round2-1"));
    let mut cursor = follower.cursor_at(&at);
    cursor.seek("key00001").unwrap();
    assert!(cursor.value().starts_with(b"round2-1"));
    assert!(follower.property("siftdb.stats").is_some());
}

#[test]
fn writes_to_a_follower_fail_naming_the_store_it_follows() {
    let dir = scratch();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    let db = Db::open(&primary, Options::default()).unwrap();
    db.put("k", "v").unwrap();
    let follower = Db::open_follower(&primary, &own, Options::default()).unwrap();
    let refused = |r: siftdb::Result<()>| match r {
        Err(Error::Follower(p)) => {
            assert_eq!(p, primary);
            let e = Error::Follower(p);
            assert!(e.to_string().contains("follower"), "{e}");
        }
        other => panic!("expected Error::Follower, got {other:?}"),
    };
    refused(follower.put("k", "w"));
    refused(follower.delete("k"));
    refused(follower.delete_range(b"a".to_vec()..b"z".to_vec()));
    let mut batch = WriteBatch::new();
    batch.put("a", "b");
    refused(follower.write(batch));
    refused(follower.flush());
    refused(follower.compact());
    refused(follower.drop_keyspace("other"));
    refused(follower.keyspace("other").map(drop));
    let mut txn = follower.transaction();
    txn.put("a", "b").unwrap();
    refused(txn.commit());
    let mut backups = siftdb::BackupEngine::open(dir.path().join("backup")).unwrap();
    refused(backups.create_backup(&follower).map(drop));
    assert_eq!(follower.get("k").unwrap(), Some(b"v".to_vec()));
    // And the writer's own store does not catch up.
    assert!(matches!(db.catch_up(), Err(Error::InvalidArgument(_))));
}

#[test]
fn a_follower_of_a_directory_without_a_store_is_refused() {
    let dir = scratch();
    let own = dir.path().join("follower");
    for missing in [dir.path().join("nothing"), dir.path().to_path_buf()] {
        match Db::open_follower(&missing, &own, Options::default()) {
            Err(Error::InvalidArgument(what)) => assert!(what.contains("no store"), "{what}"),
            other => panic!("expected InvalidArgument, got {:?}", other.err()),
        }
    }
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    let same = Db::open_follower(db.path(), db.path(), Options::default());
    assert!(
        matches!(same, Err(Error::InvalidArgument(_))),
        "{:?}",
        same.err()
    );
    let _f = Db::open_follower(db.path(), &own, Options::default()).unwrap();
    let second = Db::open_follower(db.path(), &own, Options::default());
    assert!(
        matches!(second, Err(Error::Locked(_))),
        "{:?}",
        second.err()
    );
}

#[test]
fn keyspaces_the_writer_creates_and_drops_appear_and_go_at_a_catch_up() {
    let dir = scratch();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    let db = Db::open(&primary, tiny()).unwrap();
    let follower = Db::open_follower(&primary, &own, tiny()).unwrap();
    let users = db.keyspace_with("users", tiny()).unwrap();
    users.put("alice", "1").unwrap();
    users.flush().unwrap();
    users.put("bob", "2").unwrap();
    assert!(follower.keyspace("users").is_err(), "not yet caught up");
    follower.catch_up().unwrap();
    assert_eq!(follower.keyspace_names(), ["default", "users"]);
    let their_users = follower.keyspace("users").unwrap();
    assert_eq!(their_users.get("alice").unwrap(), Some(b"1".to_vec()));
    assert_eq!(their_users.get("bob").unwrap(), Some(b"2".to_vec()));
    db.drop_keyspace("users").unwrap();
    follower.catch_up().unwrap();
    assert_eq!(follower.keyspace_names(), ["default"]);
    assert!(
        their_users.get("alice").is_err(),
        "a dropped keyspace's handle fails"
    );
    assert!(tables_in(&own).is_empty(), "{:?}", tables_in(&own));
}

#[test]
fn a_table_the_writer_deletes_stays_readable_until_the_follower_lets_go() {
    let dir = scratch();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    let db = Db::open(&primary, tiny()).unwrap();
    fill(&db, 0, 400);
    db.flush().unwrap();
    let follower = Db::open_follower(&primary, &own, tiny()).unwrap();
    let before = tables_in(&own);
    assert!(!before.is_empty());
    let mut scan = follower.iter();
    let first = scan.next().unwrap().unwrap();
    fill(&db, 1, 400);
    db.compact().unwrap();
    follower.catch_up().unwrap();
    assert!(
        before.iter().all(|t| !primary.join(t).exists()),
        "the writer deleted the tables the scan reads"
    );
    assert!(first.1.starts_with(b"round0"));
    let rest: Vec<_> = scan.map(|r| r.unwrap()).collect();
    assert_eq!(
        rest.len(),
        399,
        "the scan read the deleted tables to the end"
    );
    assert!(rest.iter().all(|(_, v)| v.starts_with(b"round0")));
    // Let go: only the links of the tables the follower's version lists are left.
    let now = tables_in(&own);
    assert!(
        before.iter().all(|t| !now.contains(t)),
        "{before:?} {now:?}"
    );
    assert_eq!(now, tables_in(&primary));
    assert!(follower
        .get("key00003")
        .unwrap()
        .unwrap()
        .starts_with(b"round1"));
}

/// An ingest takes a sequence outside the WAL; a follower catches up across it, then on with the
/// writes after it, and reads merge operands as the writer does.
#[test]
fn a_follower_catches_up_across_an_ingest_and_resolves_merges() {
    let dir = scratch();
    let (primary, own) = (dir.path().join("db"), dir.path().join("follower"));
    let options = || tiny().merge_operator(std::sync::Arc::new(siftdb::U64Add));
    let db = Db::open(&primary, options()).unwrap();
    fill(&db, 0, 100);
    let follower = Db::open_follower(&primary, &own, options()).unwrap();

    let table = dir.path().join("outside.sst");
    let mut w = db.table_writer(&table).unwrap();
    for i in 50..150u32 {
        w.put(format!("key{i:05}"), format!("ingested-{i}"))
            .unwrap();
    }
    w.finish().unwrap();
    db.ingest(&[&table]).unwrap();
    db.put("key00060", "after").unwrap();
    db.merge("counter", 5u64.to_le_bytes()).unwrap();
    db.merge("counter", 7u64.to_le_bytes()).unwrap();

    let seq = follower.catch_up().unwrap();
    assert_eq!(seq, db.snapshot().sequence());
    for f in [&db, &follower] {
        let get = |k: &str| f.get(k).unwrap();
        assert!(get("key00010").unwrap().starts_with(b"round0-10"));
        assert_eq!(get("key00055"), Some(b"ingested-55".to_vec()));
        assert_eq!(get("key00149"), Some(b"ingested-149".to_vec()));
        assert_eq!(get("key00060"), Some(b"after".to_vec()));
        assert_eq!(get("counter"), Some(12u64.to_le_bytes().to_vec()));
        assert_eq!(f.iter().count(), 151);
    }
}
