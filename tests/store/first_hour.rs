//! The program a user coming from fjall, redb or the `rocksdb` crate writes in the first hour,
//! which is README's Quickstart: the handle cloned into threads that each write, a batch, every
//! entry walked with `for kv in db.iter()`, a scan with `db.scan("a".."m")`, `close`, and
//! `Db::destroy`. It must compile as written and return what it obviously should.

use siftdb::{Db, Options, WriteBatch};

#[test]
fn the_quickstart_program_compiles_as_written_and_returns_what_it_wrote() -> siftdb::Result<()> {
    let tmp = tempfile::tempdir()?;
    let path = tmp
        .path()
        .join(format!("siftdb-quickstart-{}", std::process::id()));
    let db = Db::open(&path, Options::default())?;

    // A `Db` is a handle: clone it into each thread; every clone is the same store.
    let writers: Vec<_> = ["apple", "melon", "zucchini"]
        .into_iter()
        .map(|fruit| {
            let db = db.clone();
            std::thread::spawn(move || db.put(fruit, fruit.len().to_string()))
        })
        .collect();
    for w in writers {
        w.join().expect("a writer panicked")?;
    }

    let mut batch = WriteBatch::new(); // applied whole or, after a crash, not at all
    batch.put("banana", "6").delete("melon");
    db.write(batch)?;

    let mut walked = Vec::new();
    for kv in db.iter() {
        let (key, value) = kv?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
        walked.push((key, value));
    }
    let a_to_m: Vec<_> = db.scan("a".."m").collect::<siftdb::Result<_>>()?;
    assert_eq!(a_to_m.len(), 2); // apple and banana

    db.close()?; // waits for background work and reports any failure it met

    // What the walk saw: every thread's write and the batch, in key order.
    let expected: Vec<(Vec<u8>, Vec<u8>)> = [("apple", "5"), ("banana", "6"), ("zucchini", "8")]
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(walked, expected);
    assert_eq!(a_to_m, expected[..2]);
    // Closed means closed, and the writes are there for the next open.
    assert!(matches!(db.get("apple"), Err(siftdb::Error::Closed(_))));
    let again = Db::open(&path, Options::default())?;
    assert_eq!(again.iter().collect::<siftdb::Result<Vec<_>>>()?, expected);
    drop((again, db));
    // The program's last line removes the store: it runs again from nothing.
    Db::destroy(&path)?;
    assert!(!path.exists());
    Ok(())
}

/// The keys of a walk, as strings.
fn keys(walk: impl Iterator<Item = siftdb::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<String> {
    walk.map(|kv| String::from_utf8(kv.expect("a clean store").0).expect("ascii"))
        .collect()
}

/// Every range expression a user types compiles and selects what it says, in both directions.
#[test]
fn scans_take_ranges_of_str_bytes_and_vectors_and_run_both_ways() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    for k in ["a", "b", "c", "d", "e"] {
        db.put(k, k.to_uppercase())?;
    }
    assert_eq!(keys(db.scan(..)), ["a", "b", "c", "d", "e"]);
    assert_eq!(keys(db.scan("b".."d")), ["b", "c"]);
    assert_eq!(keys(db.scan("b"..="d")), ["b", "c", "d"]);
    assert_eq!(keys(db.scan(b"d".to_vec()..)), ["d", "e"]);
    assert_eq!(keys(db.scan(..b"b".to_vec())), ["a"]);
    assert_eq!(keys(db.scan(&b"b"[..]..&b"c"[..])), ["b"]);
    assert_eq!(keys(db.scan(..=String::from("b"))), ["a", "b"]);
    assert_eq!(keys(db.scan(b"c"..b"e")), ["c", "d"]);
    let owned = b"c".to_vec();
    assert_eq!(keys(db.scan(&owned..)), ["c", "d", "e"]);
    assert_eq!(keys(db.scan("b".."d").rev()), ["c", "b"]);
    assert_eq!(keys(db.iter().rev()), ["e", "d", "c", "b", "a"]);
    let snapshot = db.snapshot();
    db.delete("c")?;
    assert_eq!(keys(db.scan_at(&snapshot, "b"..)), ["b", "c", "d", "e"]);
    assert_eq!(keys(db.iter_at(&snapshot).rev()), ["e", "d", "c", "b", "a"]);
    assert_eq!(keys(db.iter()), ["a", "b", "d", "e"]);
    assert_eq!(keys(db.scan_prefix("d")), ["d"]);
    // The seekable cursor is still there, under its own name.
    let mut cursor = db.cursor();
    cursor.seek("c")?;
    assert_eq!(cursor.key(), b"d");
    let mut then = db.cursor_at(&snapshot);
    then.seek("c")?;
    assert_eq!(then.key(), b"c");
    Ok(())
}
