//! siftdb: an embedded LSM key-value store whose showcase is the SSTable filter.
//!
//! Writes go to a write-ahead log and a skiplist memtable; full memtables are flushed to sorted
//! tables (SSTables) and leveled compaction keeps reads cheap. Every table carries a filter
//! (block-based, full or partitioned; a LevelDB bloom, a cache-local bloom, a binary fuse or a
//! Ribbon filter, or your own [`FilterPolicy`]), and every point lookup asks the filter before it
//! reads a data block. The store counts how useful its filters were: [`Ticker::BloomFilterUseful`],
//! [`Ticker::BloomFilterFullPositive`], [`Ticker::BloomFilterFullTruePositive`].
//!
//! ```
//! use siftdb::{Db, Filter, Options, Ticker, WriteBatch};
//!
//! # fn main() -> siftdb::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let db = Db::open(dir.path(), Options::default().filter(Filter::full(10.0)))?;
//!
//! db.put(b"apple", b"red")?;
//! db.put(b"banana", b"yellow")?;
//! db.delete(b"apple")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"cherry", b"dark red").put(b"date", b"brown");
//! db.write(batch)?;
//!
//! assert_eq!(db.get(b"banana")?, Some(b"yellow".to_vec()));
//! assert_eq!(db.get(b"apple")?, None);
//!
//! db.flush()?; // the memtable becomes an SSTable with a filter
//! assert_eq!(db.get(b"cherry")?, Some(b"dark red".to_vec()));
//! assert_eq!(db.get(b"blueberry")?, None); // the filter says "no": no data block is read
//!
//! let keys: Vec<Vec<u8>> = db.scan("b".."d").map(|r| r.map(|(k, _)| k)).collect::<Result<_, _>>()?;
//! assert_eq!(keys, vec![b"banana".to_vec(), b"cherry".to_vec()]);
//!
//! let snapshot = db.snapshot(); // a consistent view: later writes are not seen through it
//! db.put(b"banana", b"green")?;
//! assert_eq!(db.get_at(&snapshot, b"banana")?, Some(b"yellow".to_vec()));
//! // The last two keys, newest first: a scan runs backward too.
//! let last_two: Vec<_> = db.iter_at(&snapshot).rev().take(2).collect::<siftdb::Result<_>>()?;
//! assert_eq!(last_two[0].0, b"date");
//!
//! let stats = db.statistics();
//! assert_eq!(stats.ticker(Ticker::BloomFilterUseful), 1);
//! println!("{stats}");
//!
//! let handle = db.clone(); // the same store, for another thread
//! std::thread::spawn(move || handle.put(b"elderberry", b"black")).join().expect("no panic")?;
//! assert!(db.contains_key(b"elderberry")?);
//! db.close()?; // for every handle: reports any background failure
//! # Ok(())
//! # }
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used)]
// No unsafe code; a module that needs it (the prefetch, the Ribbon query's SSE2 parities, a SIMD
// probe) allows it itself, `// SAFETY:` per block.
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![warn(missing_docs)]

mod cache;
mod clock;
mod coding;
mod compaction_filter;
mod db;
mod error;
pub mod filter;
mod fs;
pub mod inspect;
mod iter;
mod key;
mod key_range;
mod levels;
mod memtable;
mod memtable_filter;
mod merge_operator;
mod options;
mod pinned_value;
mod prefetch;
mod prefix;
mod range_tombstones;
mod rate_limiter;
mod sst;
mod stats;
mod store_id;
mod wal;
mod write_batch;

// Decoder entry points for the fuzz targets in fuzz/; not an API.
#[cfg(feature = "__fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

// The fault-injection layer of the crate's own power-cut and I/O-error tests; not an API.
#[cfg(feature = "__fault-injection")]
#[doc(hidden)]
pub use fs::fault_injection;

// Wrappers over crate-private hot paths for benches/hot_paths.rs; not an API.
#[cfg(feature = "__bench-internals")]
#[doc(hidden)]
pub mod bench_internals;

pub use clock::{Clock, SystemClock};
pub use compaction_filter::{CompactionDecision, CompactionFilter};
pub use db::keyspace::MAX_KEYSPACE_NAME_BYTES;
pub use db::scan::{cursor::Cursor, Scan};
pub use db::transaction::{Transaction, TransactionScan};
pub use db::utilities::backup::{BackupEngine, BackupId, BackupInfo};
pub use db::utilities::ingest::{ExternalTable, IngestedTable, TableWriter};
pub use db::{Db, Keyspace, Snapshot};
/// The former name of [`Cursor`], which [`Db::cursor`] returns (before [`Db::iter`] became an
/// [`Iterator`], it returned this cursor).
pub type DbIterator = Cursor;
pub use error::{BackgroundError, Error, LockedDir, Result};
pub use filter::{
    BinaryFuse, CacheLocalBloom, Filter, FilterAllocation, FilterBitsBuilder, FilterLayout,
    FilterPolicy, LevelDbBloom, RangeFilter, Ribbon,
};
pub use inspect::{
    FilterCheck, GetAnswer, GetExplanation, GetSource, TableHeld, TableInfo, TableStep,
};
pub use key_range::KeyRange;
pub use merge_operator::{Append, MergeOperator, U64Add};
pub use options::{
    CompactionStyle, Compression, Options, WriteOptions, MAX_BLOCK_SIZE, MAX_SIZE_OPTION,
    MAX_SUBCOMPACTIONS, NUM_LEVELS,
};
pub use pinned_value::PinnedValue;
pub use prefix::{PrefixExtractor, SliceTransform};
pub use rate_limiter::{RateLimiter, RateLimiterStats};
pub use sst::table_reader::block_cache::Cache;
pub use stats::{range_width_class, FilterCounts, Statistics, Ticker, RANGE_WIDTH_CLASSES};
pub use store_id::DEFAULT_KEYSPACE;
pub use write_batch::WriteBatch;

/// The largest key siftdb accepts (64 KiB).
pub const MAX_KEY_BYTES: usize = write_batch::MAX_KEY_BYTES;
/// The largest value siftdb accepts (256 MiB).
pub const MAX_VALUE_BYTES: usize = write_batch::MAX_VALUE_BYTES;
