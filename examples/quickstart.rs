//! The smallest embedded use of siftdb: open, put, get, delete, a batch, a scan, a snapshot and
//! a reverse scan, statistics.
//! (The same code as the crate-level example in `src/lib.rs`.)
//!
//! cargo run --example quickstart

use siftdb::{Db, Filter, Options, Ticker, WriteBatch};

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().filter(Filter::full(10.0)))?;

    db.put(b"apple", b"red")?;
    db.put(b"banana", b"yellow")?;
    db.delete(b"apple")?;
    let mut batch = WriteBatch::new();
    batch.put(b"cherry", b"dark red").put(b"date", b"brown");
    db.write(batch)?; // atomic: both or neither

    assert_eq!(db.get(b"banana")?, Some(b"yellow".to_vec()));
    assert_eq!(db.get(b"apple")?, None);

    db.flush()?; // the memtable becomes an SSTable with a filter
    assert_eq!(db.get(b"cherry")?, Some(b"dark red".to_vec()));
    assert_eq!(db.get(b"blueberry")?, None); // the filter says "no": no data block is read

    println!("scan b..d:");
    for item in db.scan(b"b".to_vec()..b"d".to_vec()) {
        let (k, v) = item?;
        println!(
            "  {} = {}",
            String::from_utf8_lossy(&k),
            String::from_utf8_lossy(&v)
        );
    }

    let snapshot = db.snapshot(); // a consistent view: later writes are not seen through it
    db.put(b"banana", b"green")?;
    assert_eq!(db.get_at(&snapshot, b"banana")?, Some(b"yellow".to_vec()));
    // The last two keys, newest first: a scan runs backward too.
    let last_two: Vec<_> = db
        .scan_at(&snapshot, b"a".to_vec()..)
        .rev()
        .take(2)
        .collect::<siftdb::Result<_>>()?;
    assert_eq!(last_two[0].0, b"date");

    let stats = db.statistics();
    assert_eq!(stats.ticker(Ticker::BloomFilterUseful), 1);
    println!("\nstatistics:\n{stats}");
    Ok(())
}
