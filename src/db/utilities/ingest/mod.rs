//! Ingest: tables built outside the store by a [`TableWriter`] become part of a keyspace by one
//! MANIFEST edit, without going through the WAL, the memtable or a rewrite.
//!
//! The steps, each safe to cut short (`docs/reliability.md`, *Ingesting tables*):
//!
//! 1. Each file is checked whole (`checks.rs`); the files are sorted and must not overlap.
//! 2. Every keyspace's memtables are flushed: the ingest takes one sequence outside the WAL, and
//!    WAL replay requires its records' sequences to follow on, so the edit starts the log anew
//!    past that sequence, which needs every write before it in a table. (RocksDB flushes only a
//!    memtable that overlaps the files; it records nothing of the sequence in its WAL either.)
//! 3. Each file is hard-linked into the store under a new table number (copied and fsynced where
//!    linking fails: another file system), fsynced, then the directory. The caller's files are
//!    left as they were. Until the edit, such a table is in flight: open removes it.
//! 4. Under the compaction lock (so no compaction runs, and none can write an output overlapping
//!    an ingested table) and the WAL lock (so no write comes in), writes that came meanwhile are
//!    flushed too; each file's level is chosen: the deepest level such that neither it nor any
//!    level above holds a table overlapping the file, or L0 if L0 does (then, were any L0 table
//!    numbered above the file, the file takes a newer number, since L0 is read newest number
//!    first).
//! 5. One edit adds every file, each marked with the sequence its entries are read at (the store's
//!    last sequence plus one, `docs/log_format.md`, *MANIFEST records*), sets the last sequence
//!    to it and the log number to the current WAL, which starts after it. Then readers see the
//!    tables; a snapshot taken before does not.

mod checks;
mod table_writer;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::super::tree::Tree;
use super::super::version::edit::{NewFile, VersionEdit};
use super::super::version::filename::{log_path, table_path};
use super::super::version::Version;
use super::super::{Db, DbInner, WalState};
use crate::error::{Error, Result};
use crate::fs::io_at;
use crate::key::set_sequence;
use crate::options::NUM_LEVELS;
use checks::{check_table, sort_disjoint, CheckedTable};
pub use table_writer::{ExternalTable, TableWriter};

/// Where one ingested table went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestedTable {
    /// The caller's file (left as it was).
    pub path: PathBuf,
    /// The level it was placed in.
    pub level: usize,
    /// The sequence its entries are read at: newer than every write before the ingest.
    pub sequence: u64,
    /// Its entries.
    pub entries: u64,
}

impl Db {
    /// Ingests the tables at `paths`, built by [`TableWriter`]s of this keyspace (the default
    /// one; on a [`Keyspace`](crate::Keyspace), that one): all of them or, on any error or a
    /// crash, none. Their entries become newer than every write before the call (a
    /// [`Snapshot`](crate::Snapshot) taken before does not see them; a transaction that read
    /// one of their keys fails to commit), each table is placed in the deepest level where it
    /// overlaps no table of its level or any above (else L0), hard-linked into the store's
    /// directory where it can be (else copied), and the caller's files are left as they were.
    ///
    /// The tables must not overlap each other. Every keyspace's memtables are flushed first, and
    /// writes wait while the tables are placed; a running compaction is waited for.
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if one is damaged, cut short or not a table;
    /// `Error::InvalidArgument` naming it if it is not a `TableWriter`'s table of this store's
    /// keyspace, or naming two that overlap; in both cases nothing changed. `Error::Io` if a
    /// file cannot be read, linked or copied (nothing changed), or if the MANIFEST edit fails
    /// (then also the store's background error: the next open tells whether it landed). The
    /// errors of [`flush`](Db::flush), and `Error::InvalidArgument` if the keyspace was dropped.
    pub fn ingest<P: AsRef<Path>>(&self, paths: &[P]) -> Result<Vec<IngestedTable>> {
        let inner = &self.inner;
        inner.check_background_error()?;
        self.tree.check_live()?;
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut tables = paths
            .iter()
            .map(|p| check_table(p.as_ref(), &self.tree, &inner.store_id))
            .collect::<Result<Vec<_>>>()?;
        sort_disjoint(&mut tables)?;
        // Most writes are flushed before the locks, so that writers wait less.
        for tree in inner.trees() {
            if tree.id == self.tree.id || !is_empty(inner, &tree) {
                inner.flush_tree(&tree)?;
            }
        }
        let mut copies = Copies {
            inner,
            numbers: Vec::new(),
            kept: false,
        };
        for t in &tables {
            let number = inner.new_table_number()?;
            copies.numbers.push(number);
            link_or_copy(inner, &t.path, &table_path(&inner.dir, number))?;
        }
        inner.fs.sync_dir(&inner.dir)?;
        let _compaction = inner.compaction.lock();
        let mut wal = inner.wal.lock();
        inner.check_background_error()?;
        self.tree.check_live()?;
        inner.flush_every_keyspace(&mut wal)?;
        let mut manifest = inner.manifest.lock();
        let version = manifest.version(self.tree.id);
        let levels: Vec<usize> = tables.iter().map(|t| target_level(&version, t)).collect();
        renumber_past_level0(inner, &version, &levels, &mut copies)?;
        let sequence = inner.last_sequence.load(Ordering::Acquire) + 1;
        let log = wal.log_number;
        let added = tables
            .iter()
            .zip(&levels)
            .zip(&copies.numbers)
            .map(|((t, &level), &number)| {
                let (mut smallest, mut largest) = (t.smallest.clone(), t.largest.clone());
                set_sequence(&mut smallest, sequence);
                set_sequence(&mut largest, sequence);
                NewFile {
                    level,
                    number,
                    size: t.size,
                    smallest,
                    largest,
                    range_tombstones: false,
                    global_sequence: Some(sequence),
                }
            })
            .collect();
        let edit = VersionEdit {
            keyspace: self.tree.id,
            keyspace_log_number: Some(log),
            log_number: Some(log),
            log_start_sequence: Some(sequence),
            last_sequence: Some(sequence),
            added,
            ..Default::default()
        };
        // From here the files are the MANIFEST's to account for, whatever becomes of the edit.
        copies.kept = true;
        let version = match manifest.log_and_apply(edit, inner.next_file.load(Ordering::SeqCst)) {
            Ok(v) => v,
            Err(e) => {
                inner.set_background_error(&e);
                return Err(e);
            }
        };
        let removable: Vec<u64> = {
            let mut st = inner.state.lock();
            inner.install_super_version(&mut st, &self.tree, |sv| sv.version = version);
            inner.last_sequence.store(sequence, Ordering::Release);
            if let Some(w) = st.wals.get_mut(&log) {
                w.start_sequence = sequence;
            }
            let removable: Vec<u64> = st.wals.range(..log).map(|(n, _)| *n).collect();
            for n in &removable {
                st.wals.remove(n);
            }
            removable
        };
        inner.closed_wals.lock().retain(|(n, _)| *n >= log);
        drop(manifest);
        drop(wal);
        inner.changed.notify_all();
        for n in removable {
            // The edit that makes it unnecessary is durable; a leftover goes at the next open.
            let _ = inner.fs.remove_file(&log_path(&inner.dir, n));
        }
        Ok(tables
            .into_iter()
            .zip(levels)
            .map(|(t, level)| IngestedTable {
                path: t.path,
                level,
                sequence,
                entries: t.entries,
            })
            .collect())
    }
}

/// Whether `tree`'s memtables hold nothing.
fn is_empty(inner: &DbInner, tree: &Tree) -> bool {
    let st = inner.state.lock();
    st.sv(tree.id)
        .is_none_or(|sv| sv.mem.is_empty() && sv.imm.is_empty())
}

impl DbInner {
    /// Freezes every keyspace's memtable that holds writes and waits until no keyspace has a
    /// frozen memtable left, holding the WAL lock (`wal`) throughout, so no write comes in: then
    /// every write is in a table and no WAL before the current one is needed. The current WAL
    /// then holds no record: one that holds writes no memtable does (to a keyspace dropped
    /// since) is replaced by a new one too, so that replay, which starts past the ingest's
    /// sequence, never meets an older record.
    ///
    /// # Errors
    /// The background error if a flush fails; `Error::Closed` if the store closes meanwhile.
    fn flush_every_keyspace(&self, wal: &mut WalState) -> Result<()> {
        let (ids, written): (Vec<u32>, bool) = {
            let st = self.state.lock();
            let ids = st
                .trees
                .iter()
                .filter(|(_, t)| !t.sv.mem.is_empty())
                .map(|(id, _)| *id)
                .collect();
            (
                ids,
                st.wals.get(&wal.log_number).is_some_and(|w| w.bytes > 0),
            )
        };
        if !ids.is_empty() || written {
            self.switch_memtable(wal, &ids)?;
        }
        let mut st = self.state.lock();
        while st.trees.values().any(|t| !t.sv.imm.is_empty()) {
            self.check_open()?;
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            self.changed.wait(&mut st);
        }
        Ok(())
    }
}

/// The level for `table` in `version`: the deepest level such that neither it nor any level above
/// holds a table overlapping it; L0 if L0 does.
fn target_level(version: &Version, table: &CheckedTable) -> usize {
    let (lo, hi) = (table.smallest_user(), table.largest_user());
    let mut level = 0;
    for l in 0..NUM_LEVELS {
        if version.levels[l].iter().any(|f| f.overlaps(lo, hi)) {
            break;
        }
        level = l;
    }
    level
}

/// Gives the files bound for L0 new numbers if an L0 table is numbered above any of them (a flush
/// since they were numbered): L0 is read newest number first, and the ingested tables are the
/// newest.
fn renumber_past_level0(
    inner: &DbInner,
    version: &Version,
    levels: &[usize],
    copies: &mut Copies<'_>,
) -> Result<()> {
    let newest_l0 = version.levels[0].iter().map(|f| f.number).max();
    let stale = |n: u64| newest_l0.is_some_and(|newest| newest > n);
    let mut renamed = Vec::new();
    for (i, &level) in levels.iter().enumerate() {
        let old = copies.numbers[i];
        if level != 0 || !stale(old) {
            continue;
        }
        let new = inner.new_table_number()?;
        inner
            .fs
            .rename(&table_path(&inner.dir, old), &table_path(&inner.dir, new))?;
        copies.numbers[i] = new;
        renamed.push(old);
    }
    if !renamed.is_empty() {
        inner.fs.sync_dir(&inner.dir)?;
        for old in renamed {
            inner.tables_in_flight.finish(old);
        }
    }
    Ok(())
}

/// The tables an ingest made in the store's directory: removed if it fails before its edit.
struct Copies<'a> {
    inner: &'a DbInner,
    numbers: Vec<u64>,
    /// Set once the edit is being written: the files are then the MANIFEST's.
    kept: bool,
}

impl Drop for Copies<'_> {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        for &n in &self.numbers {
            let path = table_path(&self.inner.dir, n);
            // One not removed stays in flight: the next open removes it.
            match self.inner.fs.remove_file(&path) {
                Ok(()) => self.inner.tables_in_flight.finish(n),
                Err(Error::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                    self.inner.tables_in_flight.finish(n)
                }
                Err(_) => {}
            }
        }
    }
}

/// Makes `to` the caller's table `from`: a hard link where the file system allows (the same
/// inode, so nothing is copied; the store never writes to a table), else a copy; either way
/// fsynced.
fn link_or_copy(inner: &DbInner, from: &Path, to: &Path) -> Result<()> {
    match inner.fs.hard_link(from, to) {
        Ok(()) => return inner.fs.sync_file(to),
        Err(Error::Io(e)) if e.kind() == io::ErrorKind::AlreadyExists => return Err(Error::Io(e)),
        Err(e) => log::debug!(
            "ingest: cannot hard-link {} ({e}); copying it",
            from.display()
        ),
    }
    let mut source = File::open(from).map_err(io_at(from))?;
    let mut copy = inner.fs.create(to)?;
    io::copy(&mut source, &mut copy).map_err(io_at(from))?;
    copy.sync()
}
