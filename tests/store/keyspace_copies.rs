//! Keyspaces in the store's other views: a checkpoint, a read-only open, `explain_get` and the
//! tables' properties.

use crate::common::scratch;
use siftdb::inspect::TableInfo;
use siftdb::{Db, Error, Filter, Options, PrefixExtractor, WriteBatch};

/// A store with a default keyspace and two others, each with writes in tables and in the WAL.
fn three_keyspaces(dir: &std::path::Path) -> Db {
    let db = Db::open(dir, Options::default()).unwrap();
    let users = db
        .keyspace_with("users", Options::default().filter(Filter::ribbon(8.0)))
        .unwrap();
    let events = db
        .keyspace_with(
            "events",
            Options::default()
                .filter(Filter::none())
                .prefix_extractor(PrefixExtractor::fixed(3)),
        )
        .unwrap();
    for i in 0..100u32 {
        let mut batch = WriteBatch::new();
        batch
            .put(format!("d{i:03}"), "default")
            .put_in(&users, format!("u{i:03}"), "user")
            .put_in(&events, format!("e{i:03}"), "event");
        db.write(batch).unwrap();
        if i == 49 {
            db.flush().unwrap();
            users.flush().unwrap();
            events.flush().unwrap();
        }
    }
    db
}

fn check_three(db: &Db) {
    assert_eq!(db.keyspace_names(), ["default", "events", "users"]);
    let users = db.keyspace("users").unwrap();
    let events = db.keyspace("events").unwrap();
    for i in [0u32, 49, 50, 99] {
        assert_eq!(
            db.get(format!("d{i:03}")).unwrap(),
            Some(b"default".to_vec())
        );
        assert_eq!(
            users.get(format!("u{i:03}")).unwrap(),
            Some(b"user".to_vec())
        );
        assert_eq!(
            events.get(format!("e{i:03}")).unwrap(),
            Some(b"event".to_vec())
        );
        assert_eq!(users.get(format!("d{i:03}")).unwrap(), None);
    }
    assert_eq!(users.iter().count(), 100);
    assert_eq!(events.scan_prefix("e05").count(), 10);
}

#[test]
fn a_checkpoint_holds_every_keyspace() {
    let root = scratch();
    let db = three_keyspaces(&root.path().join("db"));
    let copy = root.path().join("copy");
    db.checkpoint(&copy).unwrap();
    // Later writes are not in the copy.
    db.keyspace("users").unwrap().put("late", "x").unwrap();
    let copied = Db::open(&copy, Options::default()).unwrap();
    check_three(&copied);
    assert_eq!(copied.keyspace("users").unwrap().get("late").unwrap(), None);
    // The copy has no WAL: everything is in its tables.
    let wals = std::fs::read_dir(&copy)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".log")
        })
        .count();
    assert!(wals <= 1, "{wals} WALs in the copy");
}

#[test]
fn a_read_only_open_reads_every_keyspace_and_creates_none() {
    let root = scratch();
    let dir = root.path().join("db");
    drop(three_keyspaces(&dir)); // half in tables, half in the WAL
    let reader = Db::open_read_only(&dir, Options::default()).unwrap();
    check_three(&reader);
    assert!(matches!(reader.keyspace("new"), Err(Error::ReadOnly(_))));
    assert!(matches!(
        reader.drop_keyspace("users"),
        Err(Error::ReadOnly(_))
    ));
    let users = reader.keyspace("users").unwrap();
    assert!(matches!(users.put("k", "v"), Err(Error::ReadOnly(_))));
    // A checkpoint of the reader turns the replayed WALs into a table per keyspace.
    let copy = root.path().join("copy");
    reader.checkpoint(&copy).unwrap();
    drop((users, reader));
    check_three(&Db::open(&copy, Options::default()).unwrap());
}

#[test]
fn tables_and_explanations_name_their_keyspace() {
    let root = scratch();
    let dir = root.path().join("db");
    let db = three_keyspaces(&dir);
    let users = db.keyspace("users").unwrap();
    let explained = users.explain_get("u001").unwrap();
    assert_eq!(explained.keyspace, "users");
    assert!(explained.to_string().contains("in keyspace users"));
    assert_eq!(db.explain_get("d001").unwrap().keyspace, "default");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .map(|p| TableInfo::open(&p).unwrap().keyspace)
        .collect();
    names.sort();
    assert_eq!(names, ["default", "events", "users"]);
}
