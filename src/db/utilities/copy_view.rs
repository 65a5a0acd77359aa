//! A pinned view of a store for copying it whole while writes go on: every keyspace's version as
//! the MANIFEST holds it (held, so no table it names is deleted while the view lives) and, for a
//! copy that keeps the WALs, each WAL the MANIFEST still needs, open, with its length at that
//! moment. `Db::checkpoint` copies the tables of such a view after a flush; a backup
//! (`backup/`) copies the tables and the WAL prefixes without flushing.
//!
//! The WALs are taken under the WAL lock, so no commit group is half written, after handing the
//! WAL writer's buffered bytes to the OS: every write acknowledged before the view was taken is in
//! a table of the view or in a WAL prefix, and nothing later is. An open handle keeps a WAL's
//! bytes readable after the flush thread removes its name (Unix keeps an unlinked file while it is
//! open; Rust opens files on Windows with delete sharing), so the WALs need no other hold.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::db::dir_lock::DirLock;
use crate::db::version::filename::{log_path, parse_file_name, FileKind};
use crate::db::version::manifest::{
    snapshot_edits, DroppedKeyspaces, ManifestCounters, TreeRecords,
};
use crate::db::version::FileMeta;
use crate::db::{Db, DbInner};
use crate::error::Result;
use crate::fs::io_at;
use crate::store_id::StoreId;
use crate::wal::writer::encode_record;

/// The view (see the module docs). Holds the store's `LOCK`, so a close meanwhile lets no other
/// store in to remove the files it copies.
pub(crate) struct CopyView<'a> {
    inner: &'a DbInner,
    _lock: Arc<DirLock>,
    /// Every keyspace's record, its version pinned.
    pub(crate) trees: TreeRecords,
    /// The keyspaces dropped whose writes the view's WALs may hold (none without WALs).
    dropped: DroppedKeyspaces,
    /// The MANIFEST's counters when the view was taken.
    pub(crate) counters: ManifestCounters,
    /// The newest sequence committed when the view was taken: the copy holds exactly the writes
    /// up to it (with WALs), or at least those (tables alone, after a flush).
    pub(crate) last_sequence: u64,
    /// The WALs from the MANIFEST's log number on, oldest first; empty for a view of tables alone.
    pub(crate) wals: Vec<WalPrefix>,
}

/// A WAL of a [`CopyView`]: its first `len` bytes are its records when the view was taken.
pub(crate) struct WalPrefix {
    pub(crate) number: u64,
    pub(crate) len: u64,
    /// Open since the view was taken, so its bytes stay readable once the store removes it.
    pub(crate) file: File,
}

impl Db {
    /// The store's tables as the MANIFEST holds them now, pinned. With `wals`, also every WAL
    /// the MANIFEST still needs with its length, taken during a short pause of the writers (the
    /// WAL lock, then the MANIFEST lock, held while the versions are cloned and the WALs opened).
    ///
    /// # Errors
    /// `Error::Closed` if the store is closed; `Error::Io` naming the WAL that cannot be flushed
    /// to the OS (the store's background error then, as a failed WAL write is), opened or sized.
    pub(crate) fn copy_view(&self, wals: bool) -> Result<CopyView<'_>> {
        let inner = &*self.inner;
        let lock = inner.hold_lock()?;
        if !wals {
            let manifest = inner.manifest.lock();
            return Ok(CopyView {
                inner,
                _lock: lock,
                trees: manifest.trees().clone(),
                dropped: DroppedKeyspaces::new(),
                counters: manifest.counters,
                last_sequence: inner.last_sequence.load(Ordering::Acquire),
                wals: Vec::new(),
            });
        }
        if inner.follower.is_some() {
            // Its WAL records are in memory, not in files a copy could take: back up the store
            // it follows.
            return Err(inner.read_only_error());
        }
        let mut wal = inner.wal.lock();
        // Under the WAL lock: no commit group is half written, and `close` waits.
        inner.check_open()?;
        if let Some(log) = wal.log.as_mut() {
            // Acknowledged records still in the writer's buffer reach the OS, where a copy
            // reads them.
            if let Err(e) = log.flush() {
                inner.set_background_error(&e);
                return Err(e);
            }
        }
        // The flush thread removes a WAL only after an edit moved the log number past it, which
        // takes this lock: every WAL from this log number on stays while it is held.
        let manifest = inner.manifest.lock();
        let trees = manifest.trees().clone();
        let dropped = manifest.dropped().clone();
        let counters = manifest.counters;
        let last_sequence = inner.last_sequence.load(Ordering::Acquire);
        let numbers = if inner.read_only {
            // A reader tracks no WALs and writes none: the directory's are as it opened them.
            wal_numbers_in(&inner.dir, counters.log_number)?
        } else {
            let st = inner.state.lock();
            st.wals
                .range(counters.log_number..)
                .map(|(n, _)| *n)
                .collect()
        };
        let mut wals = Vec::with_capacity(numbers.len());
        for number in numbers {
            let path = log_path(&inner.dir, number);
            let file = File::open(&path).map_err(io_at(&path))?;
            let len = file.metadata().map_err(io_at(&path))?.len();
            wals.push(WalPrefix { number, len, file });
        }
        drop(manifest);
        drop(wal);
        Ok(CopyView {
            inner,
            _lock: lock,
            trees,
            dropped,
            counters,
            last_sequence,
            wals,
        })
    }
}

impl CopyView<'_> {
    /// The store's directory.
    pub(crate) fn store_dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The store's identity.
    pub(crate) fn store_id(&self) -> StoreId {
        self.inner.store_id
    }

    /// A number no file of the store has had (for a copy's MANIFEST: past every file it holds).
    ///
    /// # Errors
    /// As `DbInner::new_file_number`.
    pub(crate) fn new_file_number(&self) -> Result<u64> {
        self.inner.new_file_number()
    }

    /// Every table of the view, keyspace by keyspace, level by level.
    pub(crate) fn tables(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.trees
            .values()
            .flat_map(|t| t.version.levels.iter().flatten())
    }

    /// The bytes of a MANIFEST numbered `number` (past every file of the view) for a copy holding
    /// the view's tables and WAL prefixes: the store's MANIFEST as it stood, written afresh, so
    /// that opening the copy replays the WAL prefixes as recovery after a crash at that moment
    /// would.
    pub(crate) fn manifest_contents(&self, number: u64) -> Vec<u8> {
        let counters = ManifestCounters {
            next_file_number: self.counters.next_file_number.max(number + 1),
            ..self.counters
        };
        let mut out = Vec::new();
        for edit in snapshot_edits(&self.trees, &self.dropped, &counters, self.store_id()) {
            let at = out.len() as u64;
            encode_record(&mut out, at, &edit.encode());
        }
        out
    }
}

/// The numbers of the WALs in `dir` numbered `from` or later, oldest first.
fn wal_numbers_in(dir: &Path, from: u64) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_at(dir))? {
        let entry = entry.map_err(io_at(dir))?;
        if let Some(FileKind::Log(n)) = entry.file_name().to_str().and_then(parse_file_name)
            && n >= from
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}
