//! Closing: `Db` is a handle, counted here; the store closes when any handle calls `close` or the
//! last one is dropped. Closing marks the store closed (every later call on any handle returns
//! `Error::Closed`), lets the work in flight finish (a commit group, a flush, a compaction, a
//! manual compaction's current job), joins the background threads, hands the WAL's buffered bytes
//! to the OS, closes the WAL, and gives up the store's hold on `LOCK`.
//!
//! `LOCK` is shared by the store and by the scans and cursors made before it closed, which keep
//! reading its files: it is released when the last of them lets go.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::dir_lock::{DirLock, LockedFile};
use super::{Db, DbInner};
use crate::error::{BackgroundError, Error, Result};

/// Whether the store is closed, and what closing it takes.
pub(crate) struct Lifecycle {
    /// Set once, under the state lock (so background threads waiting on `DbInner::changed` see
    /// it when woken). Every call checks it.
    closed: AtomicBool,
    /// The live `Db` handles.
    pub(crate) handles: AtomicUsize,
    /// The background threads while the store is open; `None` once closed. Held for the whole
    /// of a close, so a second `close` waits for the first to finish.
    threads: Mutex<Option<Vec<JoinHandle<()>>>>,
    /// The store's hold on `LOCK`; `None` once closed.
    lock: Mutex<Option<Arc<DirLock>>>,
}

impl Lifecycle {
    /// The state of a store being opened in `dir`, holding its `LOCK` (`lock`). Closing it does
    /// nothing until [`Db::start`] gives it its threads and first handle.
    pub(crate) fn new(lock: Option<LockedFile>, dir: &Path) -> Lifecycle {
        Lifecycle {
            closed: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
            threads: Mutex::new(None),
            lock: Mutex::new(Some(DirLock::new(lock, dir))),
        }
    }
}

impl DbInner {
    /// Whether the store is closed.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.lifecycle.closed.load(Ordering::Acquire)
    }

    /// `Error::Closed` if the store is closed.
    #[inline]
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        Ok(())
    }

    /// The error every call on a closed store returns.
    #[cold]
    pub(crate) fn closed_error(&self) -> Error {
        Error::Closed(self.dir.clone())
    }

    /// A hold on `LOCK` for a reader that may outlive the store's handles (a scan, a cursor): the
    /// directory stays locked, so no other store removes the files it reads, until it drops it.
    ///
    /// # Errors
    /// `Error::Closed` if the store is closed.
    pub(crate) fn hold_lock(&self) -> Result<Arc<DirLock>> {
        match &*self.lifecycle.lock.lock() {
            Some(lock) => Ok(Arc::clone(lock)),
            None => Err(self.closed_error()),
        }
    }

    /// Closes the store (see the module docs) and returns the first failure; `Ok` if it was
    /// already closed (after waiting for a close in progress to finish).
    fn shut_down(&self) -> Result<()> {
        let mut threads = self.lifecycle.threads.lock();
        let Some(threads) = threads.take() else {
            return Ok(());
        };
        {
            let _st = self.state.lock();
            self.lifecycle.closed.store(true, Ordering::Release);
        }
        // Wakes the background threads (they stop once their work in flight is done), a `flush`
        // waiting for them, and writers stalled in `make_room_for_write` (they return `Closed`).
        self.changed.notify_all();
        // A commit group in flight holds the WAL lock: it finishes and is acknowledged. The next
        // group checks `closed` under that lock and returns `Closed`.
        drop(self.wal.lock());
        let mut panicked = None;
        for t in threads {
            let name = t.thread().name().unwrap_or("background").to_string();
            if t.join().is_err() {
                panicked.get_or_insert(name);
            }
        }
        // A manual compaction's job in flight finishes; it starts no other.
        drop(self.compaction.lock());
        // Push the WAL's buffered bytes to the OS (every write that returned Ok was already
        // handed to the OS, so this normally has nothing to do), then close the WALs.
        let flushed = {
            let mut wal = self.wal.lock();
            let flushed = match wal.log.as_mut() {
                Some(log) => log.flush(),
                None => Ok(()),
            };
            wal.log = None;
            self.closed_wals.lock().clear();
            flushed
        };
        // The store lets go of `LOCK`; scans and cursors made before keep it while they live.
        if let Some(lock) = self.lifecycle.lock.lock().take() {
            lock.store_closed();
        }
        if let Some(e) = self.state.lock().bg_error.clone() {
            return Err(Error::Background(e));
        }
        if let Some(name) = panicked {
            let e = BackgroundError::from(format!("the {name} thread panicked"));
            log::error!("siftdb {}: {e}", self.dir.display());
            return Err(Error::Background(e));
        }
        if let Err(e) = &flushed {
            log::error!(
                "siftdb {}: closing, the WAL's last bytes could not be written: {e}",
                self.dir.display()
            );
        }
        flushed
    }
}

impl Db {
    /// The first handle of a store just opened, whose background threads are `threads`.
    pub(crate) fn start(inner: Arc<DbInner>, threads: Vec<JoinHandle<()>>) -> Db {
        *inner.lifecycle.threads.lock() = Some(threads);
        inner.lifecycle.handles.store(1, Ordering::Release);
        let tree = Arc::clone(&inner.default_tree);
        Db { inner, tree }
    }

    /// Closes the store, for every handle, and says whether all went well, which dropping the
    /// last handle cannot.
    ///
    /// It marks the store closed: from then on every call on any of its handles (reads, writes,
    /// `flush`, `compact`, `checkpoint`, scans and cursors made later …) returns
    /// [`Error::Closed`]. A write in flight on another thread either completes and is
    /// acknowledged as usual or returns `Closed` without being applied; none is lost silently.
    /// Then it stops the background threads once their work in flight is done (a flush being
    /// written finishes and is installed; a compaction running finishes too, as does the job of a
    /// manual [`compact`](Db::compact) in progress; frozen memtables not yet being flushed stay in
    /// their WALs, which the next open replays), hands the WAL's buffered bytes to the OS, closes
    /// the WAL, and returns the first failure: the background error if a flush, compaction, WAL
    /// write or WAL sync failed at any time in the store's life (even if a write already reported
    /// it), else a failure of the final WAL flush. Either way the store is closed.
    ///
    /// A second `close` (from any handle) returns `Ok`, after waiting for a close in progress to
    /// finish: the first one reports the failures.
    ///
    /// **What stays.** Scans and cursors made before `close` keep working over the memtables and
    /// tables they hold, and keep the directory's `LOCK` until they are dropped; once none is
    /// left, `close` releases it, so [`Db::open`] of the directory may follow at once, even while
    /// other handles of the closed store live (they only return `Closed`). A closed store's
    /// memory (memtables, open tables) is freed when its last handle is dropped.
    ///
    /// `close` does **not** fsync the WAL, as RocksDB's `Close` does not: every acknowledged
    /// write has already been handed to the OS, so it survives a process crash after `close` as
    /// before it, and a power cut keeps what was synced. For writes to survive a power cut too,
    /// call [`sync_wal`](Db::sync_wal) (or [`flush`](Db::flush)) before `close`.
    ///
    /// ```
    /// use siftdb::{Db, Error, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let other = db.clone();
    /// db.put(b"k", b"v")?;
    /// db.sync_wal()?; // durable through a power cut
    /// db.close()?; // and nothing went wrong in the background
    /// assert!(matches!(other.get(b"k"), Err(Error::Closed(_)))); // every handle is closed
    /// db.close()?; // a second close: Ok
    ///
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
    pub fn close(&self) -> Result<()> {
        self.inner.shut_down()
    }
}

impl Clone for Db {
    /// Another handle to the same store.
    fn clone(&self) -> Db {
        self.inner.lifecycle.handles.fetch_add(1, Ordering::Relaxed);
        Db {
            inner: Arc::clone(&self.inner),
            tree: Arc::clone(&self.tree),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // The last handle closes the store. A failure cannot be reported here (it was logged), and
        // every write that returned Ok was already handed to the OS.
        if self.inner.lifecycle.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.inner.shut_down();
        }
    }
}
