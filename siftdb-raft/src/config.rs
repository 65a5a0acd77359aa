//! Which keyspaces form the state machine, and the options of the store and of the log.

use siftdb::{Filter, Options, RangeFilter};

/// How [`open`](crate::open) lays out a node's store.
///
/// **The log keyspace has no filter** (neither a point filter nor a range filter) unless
/// [`log_options`](Self::log_options) gives it one. Raft reads its log by index ranges
/// (replication, a restart's replay), never by point lookups, so a point filter would be
/// built and never asked; and the log's keys are dense (every index from the last purged one to
/// the last entry is present), so a range of indexes that overlaps a table always holds keys in
/// it, and a range filter could never rule a table out. Both would cost bits per key for nothing.
#[derive(Clone)]
pub struct StoreConfig {
    pub(crate) db_options: Options,
    pub(crate) log_options: Options,
    pub(crate) keyspaces: Vec<(String, Options)>,
    pub(crate) sync: bool,
    pub(crate) snapshot_chunk_bytes: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig::new()
    }
}

impl StoreConfig {
    /// A state machine of no keyspaces (add them with [`keyspace`](Self::keyspace)), the store
    /// opened with `Options::default()`, the log without filters, appends and votes synced.
    pub fn new() -> StoreConfig {
        StoreConfig {
            db_options: Options::default(),
            log_options: Options::default()
                .filter(Filter::none())
                .range_filter(RangeFilter::none()),
            keyspaces: Vec::new(),
            sync: true,
            snapshot_chunk_bytes: 256 << 10,
        }
    }

    /// Adds the keyspace `name` to the state machine, created with `options` (its filter, prefix
    /// extractor, blocks, codecs; see [`Db::keyspace_with`](siftdb::Db::keyspace_with)). Every
    /// node of a cluster must name the same keyspaces: a snapshot naming one this node lacks is
    /// refused. A name already added is replaced.
    pub fn keyspace(mut self, name: &str, options: Options) -> StoreConfig {
        self.keyspaces.retain(|(n, _)| n != name);
        self.keyspaces.push((name.to_string(), options));
        self.keyspaces.sort_by(|a, b| a.0.cmp(&b.0));
        self
    }

    /// The options the store is opened with (its block cache, open files, and the options of
    /// its small `raft.meta` keyspace).
    pub fn db_options(mut self, options: Options) -> StoreConfig {
        self.db_options = options;
        self
    }

    /// The options of the `raft.log` keyspace; see above for why it goes without filters by
    /// default.
    pub fn log_options(mut self, options: Options) -> StoreConfig {
        self.log_options = options;
        self
    }

    /// Whether an append is acknowledged only once fsynced, and a vote written with `sync`
    /// (default true: what Raft needs for a node to survive a power cut without forgetting a
    /// vote or an acknowledged entry). With `false`, both survive a crash of the process only:
    /// the durability of `openraft-rocksstore`, for comparisons.
    pub fn sync(mut self, yes: bool) -> StoreConfig {
        self.sync = yes;
        self
    }

    /// About how many bytes of keys and values one record of a snapshot file holds (default
    /// 256 KiB): what a snapshot's build and install hold in memory at once.
    pub fn snapshot_chunk_bytes(mut self, bytes: usize) -> StoreConfig {
        self.snapshot_chunk_bytes = bytes.max(1);
        self
    }

    /// The names of the state machine's keyspaces, in name order.
    pub fn keyspace_names(&self) -> impl Iterator<Item = &str> {
        self.keyspaces.iter().map(|(n, _)| n.as_str())
    }
}
