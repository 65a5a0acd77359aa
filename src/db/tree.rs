//! A keyspace's LSM tree: its options, memtables, levels and counters. Every keyspace has one;
//! the store shares the WAL, the sequence counter, the block cache and the open-file budget
//! between them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::compaction::refreshed_tables::RefreshedTables;
use super::compaction::stats::CompactionStats;
use super::version::table_cache::TableCache;
use super::version::Version;
use crate::clock::{ttl_seconds, Clock};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::Stats;

/// The memtables and tables of one keyspace a read sees, swapped as one whenever any of them
/// changes, so a reader takes one `Arc` under the lock and then reads without it.
#[derive(Clone)]
pub(crate) struct SuperVersion {
    pub(crate) mem: Arc<MemTable>,
    /// Frozen memtables waiting for flush, newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
}

impl SuperVersion {
    /// The super-version of a store just opened: an empty memtable over `version`.
    pub(crate) fn first(mem: Arc<MemTable>, version: Arc<Version>) -> SuperVersion {
        SuperVersion {
            mem,
            imm: Vec::new(),
            version,
        }
    }
}

/// One keyspace's tree. Its super-version (memtables and version) is kept in `State` under the
/// store's state lock; `current` is the copy Gets read.
pub(crate) struct Tree {
    /// Never reused in a store, so a WAL record of a dropped keyspace never reaches a new one.
    pub(crate) id: u32,
    pub(crate) name: String,
    /// Its keyspace fields (filter, blocks, codecs, sizes, TTL), with the store-wide fields of
    /// the options the store was opened with; [`options`](Self::options) reads them, and
    /// `Keyspace::set_options` replaces them whole (work under way keeps the ones it began with).
    options: RwLock<Arc<Options>>,
    /// Whether its plain values carry their write time (`db/ttl.rs`): fixed for its life, since
    /// the layout of its values depends on it.
    pub(crate) write_times: bool,
    /// Its TTL in whole seconds (0: none), for the group commit to read without a lock.
    ttl_seconds: AtomicU64,
    /// The store's clock, which judges expiry.
    pub(crate) clock: Arc<dyn Clock>,
    /// Its counters: reads, filters, flushes and compactions of this keyspace.
    pub(crate) stats: Arc<Stats>,
    /// Its tables' readers (the store's budget and block cache, its own filter policies).
    pub(crate) tables: Arc<TableCache>,
    /// The same super-version as its `TreeState::sv`, for Gets: a Get holds this read lock for its
    /// duration instead of cloning the `Arc` under the state mutex. Installers write it while
    /// holding the state lock.
    pub(crate) current: RwLock<Arc<SuperVersion>>,
    /// What its flushes and compactions read and wrote per level, for `siftdb.stats`.
    pub(crate) compaction_stats: CompactionStats,
    /// Set (under the MANIFEST lock) once the edit dropping the keyspace is durable.
    dropped: AtomicBool,
    /// The tables a filter refresh wrote since another compaction last changed the tree
    /// (`compaction/filter_refresh.rs`).
    pub(crate) refreshed: RefreshedTables,
    /// Whether a snapshot taken while its last compaction ran was still live as it installed: its
    /// next compaction then does not ask the compaction filter (`compaction/filtering.rs`).
    pub(crate) snapshot_outlived_last_compaction: AtomicBool,
}

impl Tree {
    pub(crate) fn new(
        id: u32,
        name: String,
        options: Options,
        stats: Arc<Stats>,
        tables: Arc<TableCache>,
        sv: Arc<SuperVersion>,
    ) -> Tree {
        Tree {
            id,
            name,
            write_times: options.write_times,
            ttl_seconds: AtomicU64::new(options.ttl.map_or(0, ttl_seconds)),
            clock: Arc::clone(&options.clock),
            options: RwLock::new(Arc::new(options)),
            stats,
            tables,
            current: RwLock::new(sv),
            compaction_stats: CompactionStats::default(),
            dropped: AtomicBool::new(false),
            refreshed: RefreshedTables::default(),
            snapshot_outlived_last_compaction: AtomicBool::new(false),
        }
    }

    /// Its options as they are now.
    pub(crate) fn options(&self) -> Arc<Options> {
        Arc::clone(&self.options.read())
    }

    /// Makes `options` its options from now on (their `write_times` is ignored: it never
    /// changes).
    pub(crate) fn replace_options(&self, mut options: Options) {
        options.write_times = self.write_times;
        self.ttl_seconds
            .store(options.ttl.map_or(0, ttl_seconds), Ordering::Release);
        *self.options.write() = Arc::new(options);
    }

    /// Its TTL in whole seconds, 0 if it has none.
    #[inline]
    pub(crate) fn ttl_seconds(&self) -> u64 {
        self.ttl_seconds.load(Ordering::Acquire)
    }

    /// Whether the keyspace was dropped.
    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    pub(crate) fn mark_dropped(&self) {
        self.dropped.store(true, Ordering::Release);
    }

    /// `Ok` unless the keyspace was dropped.
    ///
    /// # Errors
    /// `Error::InvalidArgument` naming the keyspace once it is dropped.
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.is_dropped() {
            return Err(Error::InvalidArgument(format!(
                "keyspace {} was dropped",
                self.name
            )));
        }
        Ok(())
    }

    /// The super-version Gets read now.
    pub(crate) fn super_version(&self) -> Arc<SuperVersion> {
        Arc::clone(&self.current.read())
    }
}

/// A keyspace's tree and its super-version, kept in `State` by id.
pub(crate) struct TreeState {
    pub(crate) tree: Arc<Tree>,
    pub(crate) sv: Arc<SuperVersion>,
}
