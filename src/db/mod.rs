//! `Db`: the store. This file holds the handle and its shared state (`DbInner`, `State`). Beside
//! it: open and close (`open.rs` with `file_accounting.rs` and `dir_lock.rs`, `close.rs`), what
//! the rooms share (`tree.rs`: a keyspace's tree and super-version; `keyspace.rs`, `snapshot.rs`,
//! `ttl.rs`), the two worker threads (`background.rs`, `flush.rs`) and `property.rs`. Each
//! subsystem has a room of its own: `version/` (the tables, their MANIFEST and readers),
//! `write/`, `read/`, `scan/`, `compaction/`, `transaction/` and `utilities/` (checkpoints,
//! backups, destroy, conveniences).
//!
//! A room adds the methods of `Db` and `DbInner` for its subsystem, so it names this folder. What
//! the shared state holds of a room (the MANIFEST, the writer queue, a keyspace's compaction
//! figures) is in files of the room that name nothing above them: no import circle spans two
//! folders (`tests/source_layout.rs` checks).

mod background;
mod close;
pub(crate) mod compaction;
mod dir_lock;
mod file_accounting;
mod flush;
mod follower;
pub(crate) mod keyspace;
mod open;
mod operand_chains;
mod property;
pub(crate) mod read;
pub(crate) mod scan;
mod snapshot;
pub(crate) mod transaction;
pub(crate) mod tree;
mod ttl;
pub(crate) mod utilities;
pub(crate) mod version;
pub(crate) mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{BackgroundError, Error, Result};
use crate::fs::FileSystem;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::{Statistics, Stats};
use crate::store_id::StoreId;
use crate::wal::writer::LogWriter;
use tree::{SuperVersion, Tree, TreeState};
use version::manifest::Manifest;
use version::table_cache::TableCache;

pub(crate) use close::Lifecycle;
pub use keyspace::Keyspace;
pub use snapshot::Snapshot;

/// A live WAL as the store tracks it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WalInfo {
    /// The sequence just before its first record.
    pub(crate) start_sequence: u64,
    /// Bytes written to it (for `max_total_wal_size`).
    pub(crate) bytes: u64,
}

/// State shared under `DbInner::state`.
pub(crate) struct State {
    /// Every live keyspace's tree and super-version, by id.
    pub(crate) trees: BTreeMap<u32, TreeState>,
    /// The first background failure; writes fail with it until reopen.
    pub(crate) bg_error: Option<BackgroundError>,
    /// The WALs not yet removed, by number.
    pub(crate) wals: BTreeMap<u64, WalInfo>,
}

impl State {
    /// The super-version of keyspace `id`, if it is live.
    pub(crate) fn sv(&self, id: u32) -> Option<&Arc<SuperVersion>> {
        self.trees.get(&id).map(|t| &t.sv)
    }

    /// The oldest WAL that may hold a write in no table, given that `current` is the WAL writes
    /// go to (read before the state lock was taken, so a write it missed is in `current` or
    /// later), and leaving out `flushed`, a memtable whose table is being installed.
    ///
    /// A memtable that began in a WAL since removed (it was empty when its WAL went, so its writes
    /// are all in later WALs) counts as beginning in the oldest live WAL: the answer is always a
    /// live WAL, since WALs are removed oldest first.
    pub(crate) fn oldest_needed_wal(&self, current: u64, flushed: Option<&Arc<MemTable>>) -> u64 {
        let first_live = self.wals.keys().next().copied().unwrap_or(current);
        let mut oldest = current;
        for t in self.trees.values() {
            let imm =
                t.sv.imm
                    .iter()
                    .filter(|m| !flushed.is_some_and(|f| Arc::ptr_eq(f, m)))
                    .map(|m| m.log_number())
                    .min();
            let mem = (!t.sv.mem.is_empty()).then(|| t.sv.mem.log_number());
            for n in imm.into_iter().chain(mem) {
                oldest = oldest.min(n.max(first_live));
            }
        }
        oldest
    }
}

/// The WAL and the writer-side state, owned by whichever writer holds the lock.
pub(crate) struct WalState {
    /// The current WAL; `None` in a store opened read-only.
    pub(crate) log: Option<LogWriter>,
    pub(crate) log_number: u64,
    /// The keyspaces the group being committed writes to, kept between groups so that a
    /// commit allocates nothing for them.
    pub(crate) targets: Vec<write::queue::WriteTarget>,
}

/// Earlier WALs holding records not yet fsynced, not yet removed (oldest first). A synced write
/// syncs them before its own WAL, so it makes every write before it durable, not only those in
/// its own file; and with several keyspaces a flush syncs them before its table counts, so that
/// a batch's part in the flushed keyspace never outlives its part in another (`flush.rs`).
/// Locked after the WAL lock, or alone (the flush thread).
pub(crate) type ClosedWals = Vec<(u64, LogWriter)>;

pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    /// Every file the store creates, writes, syncs, renames or removes goes through it.
    pub(crate) fs: FileSystem,
    /// Written into every table; a table that does not carry it is refused.
    pub(crate) store_id: StoreId,
    /// The options the store was opened with: the store-wide ones, and the default keyspace's.
    pub(crate) options: Options,
    /// The store-wide counters (the WAL, writes, stalls); each keyspace counts its reads, filters
    /// and compactions in its own (`Tree::stats`), and [`Db::statistics`] adds them up.
    pub(crate) stats: Arc<Stats>,
    /// The counters of keyspaces dropped since open, kept in the store's totals.
    pub(crate) dropped_stats: Mutex<Option<Statistics>>,
    /// The names of keyspaces dropped since open, by id, for the errors of writes to them.
    pub(crate) dropped_names: Mutex<BTreeMap<u32, String>>,
    /// The table cache each keyspace's own is made from (the open-file budget, the block cache).
    pub(crate) tables: Arc<TableCache>,
    /// The default keyspace's tree: `Db`'s own reads and writes go to it without a lookup.
    pub(crate) default_tree: Arc<Tree>,
    /// The number of the WAL writes go to, readable without the WAL lock (see
    /// [`State::oldest_needed_wal`]).
    pub(crate) current_log: AtomicU64,
    pub(crate) wal: Mutex<WalState>,
    pub(crate) closed_wals: Mutex<ClosedWals>,
    /// Writers waiting to commit; the one at the front commits a group for all (`write/`).
    pub(crate) writers: Mutex<write::queue::WriteQueue>,
    /// Signalled when a group commit finishes.
    pub(crate) writers_done: Condvar,
    pub(crate) state: Mutex<State>,
    /// Signalled on every change of `state`: new work, work done, an error, closing.
    pub(crate) changed: Condvar,
    pub(crate) manifest: Mutex<Manifest>,
    /// The MANIFEST's record of the tables being written (`Manifest::tables_in_flight`).
    pub(crate) tables_in_flight: Arc<version::manifest::TablesInFlight>,
    /// Held by whoever compacts: the background thread or a manual `compact`.
    pub(crate) compaction: Mutex<()>,
    pub(crate) last_sequence: AtomicU64,
    pub(crate) next_file: AtomicU64,
    /// Deletes a table file once no version uses it (see `FileMeta::mark_obsolete`).
    pub(crate) retire: version::Retire,
    /// The live snapshots, which flushes and compactions keep versions for.
    pub(crate) snapshots: Arc<snapshot::SnapshotList>,
    /// Opened with `Db::open_read_only` or `Db::open_follower`: writes nothing, runs no
    /// background work.
    pub(crate) read_only: bool,
    /// A follower's own state (`follower/`), locked by `catch_up`; `None` in any other store.
    pub(crate) follower: Option<follower::state::Follower>,
    /// Whether the store is closed, its handles, background threads and `LOCK` (`close.rs`).
    pub(crate) lifecycle: Lifecycle,
}

impl DbInner {
    /// A number no file of the store has had.
    ///
    /// # Errors
    /// `Error::InvalidArgument` once the store has used every number below
    /// [`MAX_FILE_NUMBER`](version::filename::MAX_FILE_NUMBER) (open refuses files numbered past it, so
    /// the counter never wraps).
    pub(crate) fn new_file_number(&self) -> Result<u64> {
        let n = self.next_file.fetch_add(1, Ordering::SeqCst);
        if n >= version::filename::MAX_FILE_NUMBER {
            self.next_file
                .store(version::filename::MAX_FILE_NUMBER, Ordering::SeqCst);
            return Err(version::filename::numbers_used_up(&self.dir));
        }
        Ok(n)
    }

    /// A number for a table a flush or compaction writes, in flight until an edit names it (see
    /// [`TablesInFlight`](version::manifest::TablesInFlight)).
    ///
    /// # Errors
    /// As [`new_file_number`](DbInner::new_file_number).
    pub(crate) fn new_table_number(&self) -> Result<u64> {
        self.tables_in_flight.start(|| self.new_file_number())
    }

    /// Makes keyspace `tree`'s current super-version, changed by `change`, the one readers see.
    /// The one place a super-version is replaced (writes freeze memtables, flushes and
    /// compactions install versions). Called with the state lock held (`st`); a dropped
    /// keyspace's is left alone.
    pub(crate) fn install_super_version(
        &self,
        st: &mut State,
        tree: &Tree,
        change: impl FnOnce(&mut SuperVersion),
    ) {
        let Some(ts) = st.trees.get_mut(&tree.id) else {
            return;
        };
        let mut sv = SuperVersion::clone(&ts.sv);
        change(&mut sv);
        let sv = Arc::new(sv);
        let old_current = std::mem::replace(&mut *ts.tree.current.write(), Arc::clone(&sv));
        ts.sv = sv;
        // The last reference to the old one may close and delete table files: not under the
        // readers' lock.
        drop(old_current);
    }

    /// What a read of `tree` sees: the super-version, then the sequence to read at, in that
    /// order. Every table entry was written before its table was installed, so it is older than a
    /// sequence read afterwards; flushes and compactions keep only the newest version of each
    /// key, which is therefore always visible. (The other order lets a read miss a key whose
    /// only surviving version is newer than its sequence.)
    pub(crate) fn read_view(&self, tree: &Tree) -> (Arc<SuperVersion>, u64) {
        let sv = tree.super_version();
        (sv, self.last_sequence.load(Ordering::Acquire))
    }

    /// Every live keyspace's tree, by id.
    pub(crate) fn trees(&self) -> Vec<Arc<Tree>> {
        let st = self.state.lock();
        st.trees.values().map(|t| Arc::clone(&t.tree)).collect()
    }

    /// Whether work that changes the store may go ahead: `Error::Closed` in a closed store,
    /// `Error::ReadOnly` in a store opened read-only, the background error after a failure, else
    /// `Ok`.
    pub(crate) fn check_background_error(&self) -> Result<()> {
        self.check_open()?;
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
        match &self.follower {
            Some(f) => Error::Follower(f.primary.clone()),
            None => Error::ReadOnly(self.dir.clone()),
        }
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

/// An embedded LSM key-value store: a handle to it.
///
/// `Db` is a cheap handle: [`Clone`] it to share the store, and every clone is the same store
/// (`Send + Sync`, so a clone moves into each thread; no `Arc<Db>` is needed). The store closes
/// when its last handle is dropped or when any handle calls [`close`](Db::close); after that,
/// every handle's calls return [`Error::Closed`].
///
/// ```
/// use siftdb::{Db, Options};
///
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// let writers: Vec<_> = (0..2)
///     .map(|t| {
///         let db = db.clone(); // the same store
///         std::thread::spawn(move || db.put(format!("key{t}"), "v"))
///     })
///     .collect();
/// for w in writers {
///     w.join().expect("the writer panicked")?;
/// }
/// assert_eq!(db.iter().count(), 2);
/// db.close()?;
/// # Ok(())
/// # }
/// ```
///
/// Dropping the last handle does what [`close`](Db::close) does and ignores its errors:
/// background work in flight finishes, nothing is flushed that the WAL does not already hold, so
/// reopening recovers every acknowledged write.
pub struct Db {
    inner: Arc<DbInner>,
    /// The keyspace this handle's reads and writes act on: the default one for a `Db`, the
    /// keyspace's own inside a [`Keyspace`].
    tree: Arc<Tree>,
}

impl Db {
    /// The directory this store lives in.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// assert_eq!(db.path(), dir.path());
    /// # Ok(())
    /// # }
    /// ```
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

    /// A snapshot of every counter: the store's totals over every keyspace (those dropped since
    /// open included). [`Keyspace::statistics`] has one keyspace's.
    pub fn statistics(&self) -> Statistics {
        let mut total = self.inner.stats.snapshot();
        for tree in self.inner.trees() {
            total.merge(&tree.stats.snapshot());
        }
        if let Some(dropped) = &*self.inner.dropped_stats.lock() {
            total.merge(dropped);
        }
        total
    }
}
