//! `Db`: the store. This file holds its shared state; each operation lives in its own file:
//! `open.rs` (open and recovery), `write.rs`, `read.rs` (Get), `scan.rs`, `flush.rs`,
//! `compaction.rs`, `background.rs` (the two worker threads), `property.rs`.

mod background;
mod compaction;
mod explain;
pub(crate) mod filename;
mod flush;
mod level_iter;
pub(crate) mod manifest;
mod open;
mod property;
mod read;
mod scan;
mod table_cache;
mod table_filter;
pub(crate) mod version;
pub(crate) mod version_edit;
mod write;

pub(crate) use write::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::memtable::MemTable;
use crate::options::{Options, NUM_LEVELS};
use crate::stats::{Statistics, Stats};
use crate::store_id::StoreId;
use crate::wal::writer::LogWriter;
use manifest::Manifest;
use table_cache::TableCache;
use version::Version;

pub use scan::Scan;

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
    pub(crate) bg_error: Option<String>,
    pub(crate) shutting_down: bool,
}

/// The WAL and the writer-side state, owned by whichever writer holds the lock.
pub(crate) struct WalState {
    pub(crate) log: LogWriter,
    pub(crate) log_number: u64,
    /// Earlier WALs holding records not yet fsynced, whose memtables are not yet tables (oldest
    /// first). A synced write syncs them before its own WAL, so it makes every write before it
    /// durable, not only those in its own file.
    pub(crate) older: Vec<(u64, LogWriter)>,
}

/// Where each level's next size-triggered compaction starts (round robin over the key space).
pub(crate) type CompactPointers = [Vec<u8>; NUM_LEVELS];

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
    pub(crate) compaction: Mutex<CompactPointers>,
    pub(crate) last_sequence: AtomicU64,
    pub(crate) next_file: AtomicU64,
    /// Deletes a table file once no version uses it (see `FileMeta::mark_obsolete`).
    pub(crate) retire: version::Retire,
    _lock: File,
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

    pub(crate) fn check_background_error(&self) -> Result<()> {
        match &self.state.lock().bg_error {
            Some(e) => Err(Error::Background(e.clone())),
            None => Ok(()),
        }
    }

    /// Records a background failure (the first one wins) and wakes everyone waiting.
    pub(crate) fn set_background_error(&self, e: &Error) {
        let mut st = self.state.lock();
        if st.bg_error.is_none() {
            st.bg_error = Some(e.to_string());
        }
        drop(st);
        self.changed.notify_all();
    }
}

/// An embedded LSM key-value store. `Send + Sync`: share one between threads with `Arc<Db>`.
///
/// Dropping a `Db` stops its background threads; it flushes nothing that the WAL does not already
/// hold, so reopening recovers every acknowledged write.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Vec<JoinHandle<()>>,
}

impl Db {
    /// The directory this store lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// A snapshot of every counter.
    pub fn statistics(&self) -> Statistics {
        self.inner.stats.snapshot()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.inner.state.lock().shutting_down = true;
        self.inner.changed.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Push the WAL's buffered bytes to the OS; a failure here cannot be reported, and every
        // write that returned Ok was already handed to the OS.
        let _ = self.inner.wal.lock().log.flush();
    }
}
