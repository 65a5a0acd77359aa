//! [`CompactionFilter`]: user code that decides, as compaction rewrites a keyspace's entries,
//! which to keep, remove or change.

/// What a [`CompactionFilter`] decides for one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionDecision {
    /// The entry is written as it is.
    Keep,
    /// The key is deleted: the entry becomes a tombstone at its own sequence, so that no older
    /// version of the key, in a deeper level, shows through. Where nothing below holds the key,
    /// compaction then drops the tombstone too.
    Remove,
    /// The entry is written with this value instead (same key, same sequence). In a keyspace
    /// with a time to live, it keeps the entry's write time.
    ChangeValue(Vec<u8>),
}

/// User code that compaction asks about each value it writes, to keep, remove or change it:
/// expiring entries by a rule of your own, dropping a whole kind of key, rewriting old values.
/// Set one per keyspace with [`Options::compaction_filter`](crate::Options::compaction_filter).
///
/// **What it sees.** Compaction calls [`filter`](Self::filter) for the values it writes (never
/// for tombstones), and only for the newest version of each key among the tables it merges, and
/// only if that version is newer than every live [`Snapshot`](crate::Snapshot): what a snapshot
/// can read is left as it is, so snapshots keep seeing what they saw (as RocksDB does). That
/// holds for a snapshot, or a [`Transaction`](crate::Transaction), that begins while the
/// compaction runs too: the compaction asks no more once it sees one, and if it had already
/// removed or changed a value and such a snapshot is live then or as it finishes, it writes its
/// output again without your decisions (counted in
/// [`CompactionFilterReruns`](crate::Ticker::CompactionFilterReruns)). Flushes do not call it,
/// nor tables moved to the next level without a rewrite. So it is not called for every entry, nor
/// at a given time: it is a way to reclaim space, and reads see its decisions only once a
/// compaction made them (a store always read at snapshots or in transactions sees few of them
/// until its reads pause). In a keyspace with a [`ttl`](crate::Options::ttl), it sees the values
/// as you wrote them, without their write time, and expired entries not at all. Merge operands
/// ([`Db::merge`](crate::Db::merge)) it does not see, nor the values a compaction merges them
/// into: those it sees as the newest version of their key in a later compaction.
///
/// **Threads and panics.** It is called from the compaction threads, several at once when a
/// compaction is split ([`Options::max_subcompactions`](crate::Options::max_subcompactions)). A
/// panic in it fails the compaction like an I/O error: the compaction's inputs stay, and the
/// store refuses writes with [`Error::Background`](crate::Error::Background) until it is
/// reopened.
///
/// **Reopening.** The store records the filter's [`name`](Self::name) with the keyspace's options.
/// On reopen, a keyspace finds its filter by that name among the options the store is opened
/// with: their [`compaction_filter`](crate::Options::compaction_filter) (the default keyspace's),
/// and the filters [`register_compaction_filter`](crate::Options::register_compaction_filter)
/// names. A filter not found there is left out, with a warning in the log: the keyspace's
/// compactions then keep every entry.
///
/// ```
/// use std::sync::Arc;
/// use siftdb::{CompactionDecision, CompactionFilter, Db, Options};
///
/// /// Removes every key that starts with `tmp:`.
/// struct DropTemporary;
///
/// impl CompactionFilter for DropTemporary {
///     fn name(&self) -> &str {
///         "example.DropTemporary"
///     }
///
///     fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> CompactionDecision {
///         if key.starts_with(b"tmp:") {
///             CompactionDecision::Remove
///         } else {
///             CompactionDecision::Keep
///         }
///     }
/// }
///
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default().compaction_filter(Arc::new(DropTemporary)))?;
/// db.put("tmp:upload", "half")?;
/// db.put("user:ada", "Ada")?;
/// db.compact()?;
/// assert_eq!(db.get("tmp:upload")?, None);
/// assert_eq!(db.get("user:ada")?, Some(b"Ada".to_vec()));
/// # Ok(())
/// # }
/// ```
pub trait CompactionFilter: Send + Sync {
    /// The filter's name, recorded with the keyspace's options so that a reopened store finds
    /// the filter again. Give each filter whose decisions differ a name of its own.
    fn name(&self) -> &str;

    /// The decision for the entry `key` = `value` that compaction is writing into `level` (1 and
    /// deeper: compaction writes below L0).
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> CompactionDecision;
}
