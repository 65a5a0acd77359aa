//! Four short programs, each in a temporary directory, that README's Quickstart points to:
//!
//! 1. `filters`: the filter at work, with a batch, a snapshot, a reverse walk and the counters;
//! 2. `keyspaces`: several maps in one store, each with its own filter, written by one batch;
//! 3. `transactions`: read-modify-write across keyspaces, with the app's own error type;
//! 4. `aging`: data that ages: range deletes, times to live, a compaction filter.
//!
//! cargo run -p siftdb-examples --example tour

use std::sync::Arc;
use std::time::Duration;

use siftdb::{
    CompactionDecision, CompactionFilter, Db, Filter, Options, PrefixExtractor, Ticker, WriteBatch,
};

fn main() -> Result<(), ShopError> {
    let dir = tempfile::tempdir().map_err(siftdb::Error::from)?;
    filters(&dir.path().join("filters"))?;
    keyspaces(&dir.path().join("keyspaces"))?;
    transactions(&dir.path().join("transactions"))?;
    aging(&dir.path().join("aging"))?;
    Ok(())
}

/// The filter at work, with batches and snapshots.
fn filters(path: &std::path::Path) -> siftdb::Result<()> {
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
    // `siftdb.stats` reports, per level and filter, the measured false positive rate beside
    // theory (and much else); its first lines are the tables and their filters.
    println!("filters: one Get ruled out by a filter; siftdb.stats begins:");
    let report = db.property("siftdb.stats").unwrap_or_default();
    for line in report
        .lines()
        .take_while(|l| !l.starts_with("filter lines"))
    {
        println!("  {line}");
    }
    Ok(())
}

/// Several maps in one store, each with its own filter, written atomically together.
fn keyspaces(path: &std::path::Path) -> siftdb::Result<()> {
    let db = Db::open(path, Options::default())?;
    let users = db.keyspace_with("users", Options::default().filter(Filter::full(12.0)))?;
    let messages = db.keyspace_with(
        "messages",
        Options::default().prefix_extractor(PrefixExtractor::fixed(8)), // conversation id
    )?;

    let mut batch = WriteBatch::new();
    batch.put(b"ada", b"Ada Lovelace"); // names no keyspace: the one that writes the batch
    batch.put_in(&messages, b"conv0001:0001", b"hello");
    users.write(batch)?; // both keyspaces or, after any crash, neither

    assert_eq!(users.get(b"ada")?, Some(b"Ada Lovelace".to_vec()));
    assert_eq!(messages.scan_prefix(b"conv0001").count(), 1);
    println!("keyspaces: {:?}", db.keyspace_names()); // ["default", "messages", "users"]
    Ok(())
}

/// What can go wrong in a transfer, the app's way: siftdb's errors are one case.
#[derive(Debug)]
enum ShopError {
    OutOfStock(String),
    Store(siftdb::Error),
}

impl From<siftdb::Error> for ShopError {
    fn from(e: siftdb::Error) -> Self {
        ShopError::Store(e)
    }
}

impl std::fmt::Display for ShopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShopError::OutOfStock(item) => write!(f, "{item} is out of stock"),
            ShopError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ShopError {}

/// Read-modify-write across keyspaces, serializable, in optimistic transactions.
fn transactions(path: &std::path::Path) -> Result<(), ShopError> {
    let db = Db::open(path, Options::default())?;
    let (items, orders) = (db.keyspace("items")?, db.keyspace("orders")?);
    items.put(b"widget", 1u32.to_be_bytes())?;
    let count =
        |v: Option<Vec<u8>>| v.map_or(0, |v| u32::from_be_bytes(v.try_into().unwrap_or([0; 4])));
    let order = |id: &str| {
        // Run again on a conflict; the closure's own error rolls it back and comes back as is.
        db.transaction_with(|tx| {
            let stock = count(tx.get_in(&items, b"widget")?);
            if stock == 0 {
                return Err(ShopError::OutOfStock("widget".into()));
            }
            tx.put_in(&items, b"widget", (stock - 1).to_be_bytes())?;
            tx.put_in(&orders, id, b"widget")?;
            Ok(stock - 1)
        })
    };
    assert_eq!(order("order-17")?, 0);
    match order("order-18") {
        Err(ShopError::OutOfStock(item)) => println!("transactions: order-18 refused, {item} out"),
        other => panic!("expected out of stock, got {other:?}"),
    }
    assert_eq!(orders.get("order-18")?, None); // nothing of it was written
    db.compare_and_swap(b"leader", None, Some(b"node-1"))?; // retried on conflict
    Ok(())
}

/// Removes every `draft:` key as compaction meets it.
struct DropDrafts;

impl CompactionFilter for DropDrafts {
    fn name(&self) -> &str {
        "example.DropDrafts"
    }
    fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> CompactionDecision {
        match key.starts_with(b"draft:") {
            true => CompactionDecision::Remove,
            false => CompactionDecision::Keep,
        }
    }
}

/// Data that ages: whole ranges deleted in one write, entries that expire, and your own rules
/// applied as compaction rewrites the tables.
fn aging(path: &std::path::Path) -> siftdb::Result<()> {
    let options = Options::default().register_compaction_filter(Arc::new(DropDrafts));
    let db = Db::open(path, options)?;
    db.put("log/2026-10-31", "…")?;
    db.put("log/2026-11-01", "…")?;
    db.delete_range("log/2026-10".."log/2026-11")?; // a month of logs: one record, one tombstone
    db.delete_range(.."log/2026-01")?; // and everything before the year
    assert_eq!(db.scan("log/"..).count(), 1);
    let sessions = db.keyspace_with(
        "sessions",
        Options::default().ttl(Duration::from_secs(1800)),
    )?;
    sessions.put("s:42", "token")?; // gone half an hour after this write
    sessions.put_with_ttl("remember:42", "token", Duration::from_secs(30 * 86_400))?; // a month
    let posts = db.keyspace_with(
        "posts",
        Options::default().compaction_filter(Arc::new(DropDrafts)),
    )?;
    posts.put("draft:7", "…")?;
    posts.put("post:7", "…")?;
    posts.compact()?;
    assert_eq!(posts.get("draft:7")?, None);
    println!(
        "aging: {} posts, {} sessions",
        posts.iter().count(),
        sessions.iter().count()
    );
    Ok(())
}
