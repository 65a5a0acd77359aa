//! The two programs of README's Quickstart, in temporary directories: a handle cloned into
//! threads that each write, a walk over every entry, scans, `close`; then the filter at work, a
//! batch, a snapshot and a reverse walk, and the statistics.
//! (`tests/first_hour.rs` runs the first one as a test.)
//!
//! cargo run --example quickstart

use std::path::Path;

use siftdb::{Db, Filter, Options, Ticker, WriteBatch};

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    shared_handle(&dir.path().join("my-db"))?;
    filters(&dir.path().join("my-filtered-db"))
}

fn shared_handle(path: &Path) -> siftdb::Result<()> {
    let db = Db::open(path, Options::default())?;

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

    for kv in db.iter() {
        let (key, value) = kv?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    assert_eq!(db.scan(..).count(), 3);
    let a_to_m: Vec<_> = db.scan("a".."m").collect::<siftdb::Result<_>>()?;
    assert_eq!(a_to_m, [(b"apple".to_vec(), b"5".to_vec())]);

    db.close()?; // waits for background work and reports any failure it met
    Ok(())
}

fn filters(path: &Path) -> siftdb::Result<()> {
    let db = Db::open(path, Options::default().filter(Filter::full(10.0)))?;

    db.put(b"apple", b"red")?;
    db.put(b"banana", b"yellow")?;
    db.delete(b"apple")?;
    let mut batch = WriteBatch::new();
    batch.put(b"cherry", b"dark red").put(b"date", b"brown");
    db.write(batch)?; // atomic: both or neither

    db.flush()?; // the memtable becomes an SSTable with a filter
    assert_eq!(db.get(b"cherry")?, Some(b"dark red".to_vec()));
    assert_eq!(db.get(b"blueberry")?, None); // the filter says "no": no data block is read

    let snapshot = db.snapshot(); // a consistent view: later writes are not seen through it
    db.put(b"banana", b"green")?;
    assert_eq!(db.get_at(&snapshot, b"banana")?, Some(b"yellow".to_vec()));
    let last_two: Vec<_> = db
        .iter_at(&snapshot)
        .rev()
        .take(2)
        .collect::<siftdb::Result<_>>()?;
    assert_eq!(last_two[0].0, b"date"); // newest first: a scan runs backward too

    let stats = db.statistics();
    assert_eq!(stats.ticker(Ticker::BloomFilterUseful), 1);
    println!("\nstatistics:\n{stats}");
    Ok(())
}
