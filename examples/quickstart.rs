//! The smallest embedded use of siftdb: open, put, get, delete, a batch, a scan, statistics.
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

    let stats = db.statistics();
    assert_eq!(stats.ticker(Ticker::BloomFilterUseful), 1);
    println!("\nstatistics:\n{stats}");
    Ok(())
}
