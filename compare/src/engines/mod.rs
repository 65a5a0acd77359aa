//! The stores under test: what the harness asks of each (`Store`), their names, and how each is
//! opened for a run.

mod fjall_store;
mod rocksdb_store;
mod siftdb_store;

use std::time::{Duration, Instant};

use clap::ValueEnum;

use self::fjall_store::Fjall;
pub(crate) use self::rocksdb_store::Prefix;
use self::rocksdb_store::{Rocks, RocksCompaction};
use self::siftdb_store::Sift;
use crate::run::Workload;

/// How long a store may take to settle before the run goes on with a warning.
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_secs(120);
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// Bloom tickers: useful (filter said absent), full.positive (said maybe),
/// full.true.positive (said maybe and the key was there).
pub(crate) type Bloom = (u64, u64, u64);

/// Cumulative counters of short scans: checks of the filters that can rule a table out of a
/// scan (siftdb's range filters, RocksDB's prefix blooms), the checks that did, and data blocks
/// asked of the block cache.
#[derive(Clone, Copy, Default)]
pub(crate) struct ScanCounters {
    pub(crate) checked: u64,
    pub(crate) ruled_out: u64,
    pub(crate) blocks: u64,
}

impl ScanCounters {
    pub(crate) fn since(self, earlier: ScanCounters) -> ScanCounters {
        ScanCounters {
            checked: self.checked - earlier.checked,
            ruled_out: self.ruled_out - earlier.ruled_out,
            blocks: self.blocks - earlier.blocks,
        }
    }
}

/// Cumulative write-path counters of a store.
#[derive(Clone, Copy)]
pub(crate) struct WriteStats {
    /// Bytes of tables written by flushes and compactions.
    pub(crate) table_bytes: u64,
    /// Bytes of keys and values put.
    pub(crate) user_bytes: u64,
    /// Time writers were held back to let flushes or compactions catch up.
    pub(crate) stall_micros: u64,
}

impl WriteStats {
    pub(crate) fn amplification(&self) -> f64 {
        self.table_bytes as f64 / self.user_bytes.max(1) as f64
    }

    /// What was counted between `earlier` and `self`.
    pub(crate) fn since(&self, earlier: &WriteStats) -> WriteStats {
        WriteStats {
            table_bytes: self.table_bytes.saturating_sub(earlier.table_bytes),
            user_bytes: self.user_bytes.saturating_sub(earlier.user_bytes),
            stall_micros: self.stall_micros.saturating_sub(earlier.stall_micros),
        }
    }
}

/// What threads sharing one store use in the read-while-writing phase.
pub(crate) trait Concurrent: Sync {
    fn put(&self, k: &[u8], v: &[u8]);
    fn get(&self, k: &[u8]) -> bool;
    /// Tables in L0 now.
    fn l0_tables(&self) -> Option<usize>;
}

/// One store under test: one method per operation the harness times or inspects.
pub(crate) trait Store {
    fn put(&mut self, k: &[u8], v: &[u8]);
    fn get(&mut self, k: &[u8]) -> bool;
    /// Looks up all `keys` in one call to the store's batched lookup; `result[i]` tells
    /// whether `keys[i]` was found.
    fn multi_get(&mut self, keys: &[[u8; 16]]) -> Vec<bool>;
    /// Counts the entries from `from` to `to`, `to` excluded.
    fn scan(&mut self, from: &[u8], to: &[u8]) -> usize;
    fn scan_counters(&self) -> Option<ScanCounters> {
        None
    }
    /// Writes the memtable out as tables and waits for that (not for compactions).
    fn flush(&mut self);
    /// Compacts everything into one level; waits until done.
    fn compact(&mut self);
    /// Polls until background compaction has settled; returns false on timeout.
    fn settle(&mut self) -> bool;
    fn bloom(&self) -> Option<Bloom> {
        None
    }
    /// Files per level, L0 first.
    fn levels(&self) -> Option<Vec<usize>> {
        None
    }
    /// Bytes of filter held by the store's live tables.
    fn filter_bytes(&self) -> Option<u64> {
        None
    }
    fn write_stats(&self) -> Option<WriteStats> {
        None
    }
    /// Bytes of the store's live tables.
    fn table_bytes(&self) -> Option<u64> {
        None
    }
    /// The store's own report of its levels and compactions, for `--print-stats`.
    fn stats_report(&self) -> Option<String> {
        None
    }
    /// The store for threads that share it.
    fn concurrent(&self) -> &dyn Concurrent;
}

/// Polls `done` every 50 ms until it is true or `SETTLE_LIMIT` passes.
pub(crate) fn poll_until(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > SETTLE_LIMIT {
            return false;
        }
        std::thread::sleep(POLL);
    }
    true
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StoreName {
    Siftdb,
    /// siftdb with Grafite range filters.
    SiftdbRange,
    /// siftdb with lazy leveling, `--runs-per-level` runs per tiered level.
    SiftdbLazy,
    Rocksdb,
    /// RocksDB with prefix blooms.
    RocksdbPrefix,
    /// RocksDB with universal compaction.
    RocksdbUniversal,
    Fjall,
}

impl StoreName {
    pub(crate) fn name(self) -> &'static str {
        match self {
            StoreName::Siftdb => "siftdb",
            StoreName::SiftdbRange => "siftdb-range",
            StoreName::SiftdbLazy => "siftdb-lazy",
            StoreName::Rocksdb => "rocksdb",
            StoreName::RocksdbPrefix => "rocksdb-prefix",
            StoreName::RocksdbUniversal => "rocksdb-universal",
            StoreName::Fjall => "fjall",
        }
    }
}

/// Whose memtable, table and level sizes RocksDB and fjall use.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PeerShape {
    /// Their own defaults.
    Own,
    /// siftdb's defaults.
    Siftdb,
}

impl PeerShape {
    pub(crate) fn name(self) -> &'static str {
        match self {
            PeerShape::Own => "own",
            PeerShape::Siftdb => "siftdb",
        }
    }
}

/// The widest range `siftdb-range`'s filters answer: the widest short scan of the runs.
pub(crate) const RANGE_FILTER_MAX_RANGE: u64 = 1 << 16;

pub(crate) fn open(name: StoreName, dir: &std::path::Path, w: &Workload) -> Box<dyn Store> {
    let shape = w.shape;
    match name {
        StoreName::Siftdb | StoreName::SiftdbRange | StoreName::SiftdbLazy => {
            let filter = if w.siftdb_ribbon {
                siftdb::Filter::ribbon(10.0)
            } else {
                siftdb::Filter::full(10.0)
            };
            let mut opts = siftdb::Options::default()
                .filter(filter)
                .block_cache_bytes(w.block_cache_bytes)
                .block_size(4096);
            if w.siftdb_monkey {
                opts = opts.filter_allocation(siftdb::FilterAllocation::Monkey);
            }
            if name == StoreName::SiftdbRange {
                opts = opts.range_filter(siftdb::RangeFilter::grafite(
                    w.range_filter_bits,
                    RANGE_FILTER_MAX_RANGE,
                ));
            }
            if name == StoreName::SiftdbLazy {
                opts = opts.compaction_style(siftdb::CompactionStyle::LazyLeveled {
                    runs_per_level: w.runs_per_level,
                });
            }
            Box::new(Sift(siftdb::Db::open(dir, opts).unwrap()))
        }
        StoreName::Rocksdb => Box::new(Rocks::open(
            dir,
            shape,
            w.block_cache_bytes,
            None,
            RocksCompaction::Leveled,
        )),
        StoreName::RocksdbPrefix => Box::new(Rocks::open(
            dir,
            shape,
            w.block_cache_bytes,
            Some(w.rocksdb_prefix),
            RocksCompaction::Leveled,
        )),
        StoreName::RocksdbUniversal => Box::new(Rocks::open(
            dir,
            shape,
            w.block_cache_bytes,
            None,
            RocksCompaction::Universal,
        )),
        StoreName::Fjall => Box::new(Fjall::open(dir, shape, w.block_cache_bytes)),
    }
}
