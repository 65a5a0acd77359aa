//! `Db`: the store. This file holds its shared state and `close`; each operation lives in its own
//! file: `open.rs` (open, read-only open and recovery), `write.rs` (writes and `sync_wal`),
//! `read.rs` (Get), `scan.rs` (`scan`, `iter`), `cursor.rs`, `flush.rs`, `compaction.rs`,
//! `background.rs` (the two worker threads), `checkpoint.rs`, `destroy.rs`, `property.rs`.

mod background;
mod checkpoint;
mod compaction;
mod compaction_stats;
mod cursor;
mod destroy;
mod explain;
pub(crate) mod filename;
mod flush;
mod key_range;
mod level_iter;
pub(crate) mod manifest;
mod multi_get;
mod open;
mod property;
mod read;
pub(crate) mod read_compaction;
mod scan;
mod snapshot;
mod table_cache;
mod table_filter;
pub(crate) mod version;
pub(crate) mod version_edit;
mod write;
mod write_burst;

pub(crate) use write::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{BackgroundError, Error, Result};
use crate::fs::FileSystem;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::{Statistics, Stats};
use crate::store_id::StoreId;
use crate::wal::writer::LogWriter;
use manifest::Manifest;
use table_cache::TableCache;
use version::Version;

pub use cursor::Cursor;
pub use key_range::KeyRange;
pub use scan::Scan;
pub use snapshot::Snapshot;

/// The memtables and tables a read sees, swapped as one whenever any of them changes, so a reader
/// takes one `Arc` under the lock and then reads without it.
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

/// State shared under `DbInner::state`.
pub(crate) struct State {
    pub(crate) sv: Arc<SuperVersion>,
    /// The first background failure; writes fail with it until reopen.
    pub(crate) bg_error: Option<BackgroundError>,
    pub(crate) shutting_down: bool,
}

/// The WAL and the writer-side state, owned by whichever writer holds the lock.
pub(crate) struct WalState {
    /// The current WAL; `None` in a store opened read-only.
    pub(crate) log: Option<LogWriter>,
    pub(crate) log_number: u64,
    /// Earlier WALs holding records not yet fsynced, whose memtables are not yet tables (oldest
    /// first). A synced write syncs them before its own WAL, so it makes every write before it
    /// durable, not only those in its own file.
    pub(crate) older: Vec<(u64, LogWriter)>,
}

pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    /// Every file the store creates, writes, syncs, renames or removes goes through it.
    pub(crate) fs: FileSystem,
    /// Written into every table; a table that does not carry it is refused.
    pub(crate) store_id: StoreId,
    pub(crate) options: Options,
    pub(crate) stats: Arc<Stats>,
    pub(crate) tables: Arc<TableCache>,
    pub(crate) wal: Mutex<WalState>,
    /// Writers waiting to commit; the one at the front commits a group for all (`write.rs`).
    pub(crate) writers: Mutex<write::WriteQueue>,
    /// Signalled when a group commit finishes.
    pub(crate) writers_done: Condvar,
    pub(crate) state: Mutex<State>,
    /// The same super-version as `state.sv`, for Gets: a Get holds this read lock for its
    /// duration instead of cloning the `Arc` under the state mutex (two locked instructions
    /// instead of four per Get). Installers write it while holding the state lock.
    pub(crate) current: RwLock<Arc<SuperVersion>>,
    /// Signalled on every change of `state`: new work, work done, an error, shutdown.
    pub(crate) changed: Condvar,
    pub(crate) manifest: Mutex<Manifest>,
    /// Held by whoever compacts: the background thread or a manual `compact`.
    pub(crate) compaction: Mutex<()>,
    pub(crate) last_sequence: AtomicU64,
    pub(crate) next_file: AtomicU64,
    /// Deletes a table file once no version uses it (see `FileMeta::mark_obsolete`).
    pub(crate) retire: version::Retire,
    /// The live snapshots, which flushes and compactions keep versions for.
    pub(crate) snapshots: Arc<snapshot::SnapshotList>,
    /// What flushes and compactions read and wrote per level, for `siftdb.stats`.
    pub(crate) compaction_stats: compaction_stats::CompactionStats,
    /// Opened with `Db::open_read_only`: writes nothing, runs no background work.
    pub(crate) read_only: bool,
    /// `LOCK`, locked exclusively (a writer) or shared (readers); released when the last
    /// reference goes (a `Scan` keeps the store's files, so it keeps the lock too). `None` only
    /// for a reader on a read-only file system.
    _lock: Option<File>,
}

impl DbInner {
    pub(crate) fn new_file_number(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::SeqCst)
    }

    pub(crate) fn super_version(&self) -> Arc<SuperVersion> {
        Arc::clone(&self.state.lock().sv)
    }

    /// Makes the current super-version, changed by `change`, the one readers see. The one place a
    /// super-version is replaced (writes freeze memtables, flushes and compactions install
    /// versions). Called with the state lock held (`st`).
    pub(crate) fn install_super_version(
        &self,
        st: &mut State,
        change: impl FnOnce(&mut SuperVersion),
    ) {
        let mut sv = SuperVersion::clone(&st.sv);
        change(&mut sv);
        let sv = Arc::new(sv);
        let old_current = std::mem::replace(&mut *self.current.write(), Arc::clone(&sv));
        st.sv = sv;
        // The last reference to the old one may close and delete table files: not under the
        // readers' lock.
        drop(old_current);
    }

    /// What a read sees: the super-version, then the sequence to read at, in that order. Every
    /// table entry was written before its table was installed, so it is older than a sequence read
    /// afterwards; flushes and compactions keep only the newest version of each key, which is
    /// therefore always visible. (The other order lets a read miss a key whose only surviving
    /// version is newer than its sequence.)
    pub(crate) fn read_view(&self) -> (Arc<SuperVersion>, u64) {
        let sv = self.super_version();
        (sv, self.last_sequence.load(Ordering::Acquire))
    }

    /// Whether work that changes the store may go ahead: `Error::ReadOnly` in a store opened
    /// read-only, the background error after a failure, else `Ok`.
    pub(crate) fn check_background_error(&self) -> Result<()> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        match &self.state.lock().bg_error {
            Some(e) => Err(Error::Background(e.clone())),
            None => Ok(()),
        }
    }

    /// The error every write to a store opened read-only returns.
    pub(crate) fn read_only_error(&self) -> Error {
        Error::ReadOnly(self.dir.clone())
    }

    /// Records a background failure (the first one wins) and wakes everyone waiting. The error is
    /// kept as a copy (an I/O error keeps its kind and message); [`record_background_error`]
    /// keeps the error itself.
    ///
    /// [`record_background_error`]: DbInner::record_background_error
    pub(crate) fn set_background_error(&self, e: &Error) {
        self.record_background_error(e.duplicate());
    }

    /// Records `e` as a background failure (the first one wins; later ones are only logged),
    /// reports it through the `log` facade, and wakes everyone waiting.
    pub(crate) fn record_background_error(&self, e: Error) {
        let e = BackgroundError::from(e);
        let mut st = self.state.lock();
        let first = st.bg_error.is_none();
        if first {
            st.bg_error = Some(e.clone());
        }
        drop(st);
        self.changed.notify_all();
        if first {
            log::error!(
                "siftdb {}: background work failed, writes stop until the store is reopened: {e}",
                self.dir.display()
            );
        } else {
            log::error!(
                "siftdb {}: background work failed again (writes already stopped): {e}",
                self.dir.display()
            );
        }
    }
}

/// An embedded LSM key-value store. `Send + Sync`: share one between threads with `Arc<Db>`.
///
/// Dropping a `Db` does what [`close`](Db::close) does and ignores its errors: background work in
/// flight finishes, nothing is flushed that the WAL does not already hold, so reopening recovers
/// every acknowledged write.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Vec<JoinHandle<()>>,
    /// `close` ran (`Drop` then has nothing left to do).
    closed: bool,
}

impl Db {
    /// The directory this store lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Whether this store was opened with [`open_read_only`](Db::open_read_only) (then every
    /// write fails with [`Error::ReadOnly`]).
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// assert!(!db.is_read_only());
    /// db.close()?;
    /// let reader = siftdb::Db::open_read_only(dir.path(), siftdb::Options::default())?;
    /// assert!(reader.is_read_only());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// Closes the store and says whether all went well, which dropping it cannot.
    ///
    /// It stops the background threads once their work in flight is done (a flush being written
    /// finishes and is installed; a compaction running finishes too; frozen memtables not yet
    /// being flushed stay in their WALs, which the next open replays), hands the WAL's buffered
    /// bytes to the OS, and returns the first failure: the background error if a flush,
    /// compaction, WAL write or WAL sync failed at any time in the store's life (even if a write
    /// already reported it), else a failure of the final WAL flush. Either way the store is closed
    /// and its `LOCK` released (once no [`Scan`] of it remains).
    ///
    /// `close` does **not** fsync the WAL, as RocksDB's `Close` does not: every acknowledged
    /// write has already been handed to the OS, so it survives a process crash after `close` as
    /// before it, and a power cut keeps what was synced. For writes to survive a power cut too,
    /// call [`sync_wal`](Db::sync_wal) (or [`flush`](Db::flush)) before `close`.
    ///
    /// ```
    /// use siftdb::{Db, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put(b"k", b"v")?;
    /// db.sync_wal()?; // durable through a power cut
    /// db.close()?; // and nothing went wrong in the background
    /// let db = Db::open(dir.path(), Options::default())?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// - `Error::Background` holding the first background failure (see
    ///   [`BackgroundError::cause`]), or a background thread that panicked;
    /// - `Error::Io` naming the WAL if its buffered bytes could not be written.
    pub fn close(mut self) -> Result<()> {
        self.shut_down()
    }

    /// Stops the background threads, flushes the WAL's buffer, and returns the first failure (see
    /// [`close`](Db::close)). Runs once; later calls return `Ok`.
    fn shut_down(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.inner.state.lock().shutting_down = true;
        self.inner.changed.notify_all();
        let mut panicked = None;
        for t in self.threads.drain(..) {
            let name = t.thread().name().unwrap_or("background").to_string();
            if t.join().is_err() {
                panicked.get_or_insert(name);
            }
        }
        // Push the WAL's buffered bytes to the OS. Every write that returned Ok was already
        // handed to the OS, so this normally has nothing to do.
        let flushed = match self.inner.wal.lock().log.as_mut() {
            Some(log) => log.flush(),
            None => Ok(()),
        };
        if let Some(e) = self.inner.state.lock().bg_error.clone() {
            return Err(Error::Background(e));
        }
        if let Some(name) = panicked {
            let e = BackgroundError::from(format!("the {name} thread panicked"));
            log::error!("siftdb {}: {e}", self.inner.dir.display());
            return Err(Error::Background(e));
        }
        if let Err(e) = &flushed {
            log::error!(
                "siftdb {}: closing, the WAL's last bytes could not be written: {e}",
                self.inner.dir.display()
            );
        }
        flushed
    }

    /// A snapshot of every counter.
    pub fn statistics(&self) -> Statistics {
        self.inner.stats.snapshot()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // What `close` does; a failure cannot be reported here (it was logged), and every write
        // that returned Ok was already handed to the OS.
        let _ = self.shut_down();
    }
}
