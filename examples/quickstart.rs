//! README's Quickstart, as it is written there: a store in a temporary directory, a handle
//! cloned into threads that each write, a batch, a walk over every entry, a scan, `close`, and
//! the store removed. It runs as often as you like. (`tests/store/first_hour.rs` runs it as a test.)
//!
//! cargo run -p siftdb-examples --example quickstart

use siftdb::{Db, Options, WriteBatch};

fn main() -> siftdb::Result<()> {
    let path = std::env::temp_dir().join(format!("siftdb-quickstart-{}", std::process::id()));
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

    for kv in db.iter() {
        let (key, value) = kv?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    let a_to_m: Vec<_> = db.scan("a".."m").collect::<siftdb::Result<_>>()?;
    assert_eq!(a_to_m.len(), 2); // apple and banana

    db.close()?; // waits for background work and reports any failure it met
    Db::destroy(&path) // removes the store: the program runs again from nothing
}
