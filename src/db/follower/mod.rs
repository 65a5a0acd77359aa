//! Followers: a store opened beside a live writer, reading its files without taking its `LOCK`,
//! and moved forward to the writer's latest state by [`Db::catch_up`] (RocksDB's secondary
//! instance). A follower is a read-only store (`DbInner::read_only`) whose tables are hard links
//! in a directory of its own (`tables.rs`), filled and refreshed by the catch-up
//! (`catch_up.rs`) from the position it keeps (`state.rs`).

mod catch_up;
pub(crate) mod state;
mod tables;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::open::{assemble, lock_exclusive, not_a_directory, Parts};
use super::version::manifest::{read_current, Manifest, ManifestCounters, TreeRecord, TreeRecords};
use super::{Db, WalState};
use crate::error::{Error, Result};
use crate::fs::io_at;
use crate::options::Options;
use crate::stats::Stats;
use crate::store_id::DEFAULT_KEYSPACE_ID;
use catch_up::{no_store, store_id_of};
use state::Follower;
use tables::remove_links;

impl Db {
    /// Opens a follower of the store in directory `primary`: a read-only store that opens beside
    /// the store's live writer (in this process or another), without its `LOCK`, and reads what
    /// the writer has written, moving forward each time [`catch_up`](Db::catch_up) is called.
    /// `dir` is the follower's own directory (created if missing, locked by the follower): it
    /// holds a hard link to each table the follower reads, so that a table the writer deletes
    /// stays readable until the follower lets go of it. It must be on the writer's file system.
    ///
    /// It opens at the writer's state as of now: every write the writer acknowledged before the
    /// call (its tables, then the WAL records after them, replayed into the follower's memory).
    /// Every read works on it (`get`, `multi_get`, scans, cursors, snapshots,
    /// [`keyspace`](Db::keyspace) for the writer's keyspaces, `statistics`, `property`), while
    /// every write (`put`, `delete`, `write`, transactions' commits, `flush`, `compact`,
    /// keyspace creation and drops, backups) fails with [`Error::Follower`]. It runs no
    /// background work. `options` are the store's as for [`open_read_only`](Db::open_read_only)
    /// (the default keyspace's; other keyspaces take theirs from the MANIFEST);
    /// `create_if_missing` does not apply.
    ///
    /// ```
    /// use siftdb::{Db, Error, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path().join("db"), Options::default())?;
    /// db.put(b"k", b"1")?;
    /// let follower = Db::open_follower(dir.path().join("db"), dir.path().join("f"), Options::default())?;
    /// assert_eq!(follower.get(b"k")?, Some(b"1".to_vec()));
    /// db.put(b"k", b"2")?;
    /// db.flush()?;
    /// assert_eq!(follower.get(b"k")?, Some(b"1".to_vec())); // until it catches up
    /// follower.catch_up()?;
    /// assert_eq!(follower.get(b"k")?, Some(b"2".to_vec()));
    /// assert!(matches!(follower.put(b"k", b"3"), Err(Error::Follower(_))));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// - `Error::InvalidArgument` if `options` cannot work together, if a path is empty or a
    ///   file, if both are one directory, if `primary` holds no store, or if `dir` is on another
    ///   file system than `primary`;
    /// - `Error::Locked` if another follower has `dir` open;
    /// - `Error::Corruption` naming the file if CURRENT, a MANIFEST record, a WAL record before
    ///   the writer's tail or a table is damaged;
    /// - `Error::Io` naming the file for operating-system failures.
    pub fn open_follower(
        primary: impl AsRef<Path>,
        dir: impl AsRef<Path>,
        options: Options,
    ) -> Result<Db> {
        options.validate()?;
        let (primary, own) = (primary.as_ref(), dir.as_ref());
        for path in [primary, own] {
            super::version::filename::check_store_path(path)?;
        }
        match std::fs::metadata(primary) {
            Ok(m) if !m.is_dir() => return Err(not_a_directory(primary)),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(no_store(primary)),
            Err(e) => return Err(io_at(primary)(e)),
        }
        if read_current(primary)?.is_none() {
            return Err(no_store(primary));
        }
        let fs = options.file_system();
        if std::fs::metadata(own).is_err() {
            fs.create_dir_all(own)?;
        } else if !std::fs::metadata(own).map_err(io_at(own))?.is_dir() {
            return Err(not_a_directory(own));
        }
        let canonical = |p: &Path| std::fs::canonicalize(p).map_err(io_at(p));
        if canonical(primary)? == canonical(own)? {
            return Err(Error::InvalidArgument(format!(
                "a follower needs a directory of its own, not the store's {}",
                primary.display()
            )));
        }
        let lock = lock_exclusive(own)?;
        remove_links(&fs, own)?;
        let store_id = store_id_of(primary)?;
        let mut trees = TreeRecords::new();
        trees.insert(DEFAULT_KEYSPACE_ID, TreeRecord::default_keyspace());
        let inner = assemble(Parts {
            dir: own,
            fs,
            keyspaces: BTreeMap::from([(DEFAULT_KEYSPACE_ID, (options.clone(), 0))]),
            options,
            stats: Arc::new(Stats::new()),
            store_id,
            manifest: Manifest::read_only(trees, BTreeMap::new(), ManifestCounters::default()),
            mems: BTreeMap::new(),
            wal: WalState {
                log: None,
                log_number: 0,
                targets: Vec::new(),
            },
            last_sequence: 0,
            next_file: 0,
            lock: Some(lock),
            read_only: true,
            follower: Some(Follower::new(primary.to_path_buf())),
        });
        let db = Db::start(inner, Vec::new());
        db.catch_up()?;
        Ok(db)
    }

    /// Moves a follower ([`open_follower`](Db::open_follower)) forward to the state of the
    /// store it follows as of now: the tables its writer flushed, compacted or deleted, the
    /// keyspaces it created or dropped, and the WAL records it has written since the last
    /// catch-up (every write acknowledged before the call, and perhaps some later ones). Reads
    /// running meanwhile keep the view they started with; those after it see the new state.
    /// Returns the sequence number the follower reads at now: the writer's
    /// [`Snapshot::sequence`](crate::Snapshot::sequence) less this is how far it lags.
    ///
    /// A catch-up that fails leaves the follower at the state it had, readable; the next may
    /// succeed (the writer's files changed under each of its reads, say).
    ///
    /// # Errors
    /// - `Error::InvalidArgument` on a store that is not a follower, or if the writer's
    ///   directory no longer holds a store;
    /// - `Error::Corruption` naming the file if a MANIFEST record, a WAL record before the
    ///   writer's tail, or a table is damaged, or if the directory now holds another store;
    /// - `Error::Closed` once the follower is closed; `Error::Io` for operating-system
    ///   failures.
    pub fn catch_up(&self) -> Result<u64> {
        self.inner.check_open()?;
        let Some(follower) = &self.inner.follower else {
            return Err(Error::InvalidArgument(format!(
                "the store in {} is not a follower: only a store opened with Db::open_follower \
                 catches up",
                self.inner.dir.display()
            )));
        };
        self.inner.catch_up(follower)
    }

    /// Whether this store was opened with [`open_follower`](Db::open_follower).
    pub fn is_follower(&self) -> bool {
        self.inner.follower.is_some()
    }

    /// The directory of the store a follower follows (`None` if this store is not a follower,
    /// whose own directory is [`path`](Db::path)).
    pub fn followed_path(&self) -> Option<&Path> {
        self.inner.follower.as_ref().map(|f| f.primary.as_path())
    }
}
