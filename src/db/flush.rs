//! Flush: a frozen memtable becomes an L0 table, and its WAL is retired.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::background::catch_panic;
use super::operand_chains::{collapse_operands, Chain, ChainRules};
use super::snapshot::VersionRetention;
use super::tree::Tree;
use super::version::edit::{NewFile, VersionEdit};
use super::version::filename::{log_path, table_path};
use super::{Db, DbInner};
use crate::error::{Error, Result};
use crate::filter::Filter;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{internal_key, parse_internal_key, ValueKind};
use crate::memtable::MemTable;
use crate::merge_operator::MergeOperator;
use crate::options::Options;
use crate::rate_limiter::{IoPriority, Pacer};
use crate::sst::table_builder::{TableBuilder, TableOptions};
use crate::stats::{Stats, Ticker};
use crate::store_id::StoreId;

/// The settings new tables of keyspace `keyspace` (its id and name) of store `store_id` are built
/// with, with `filter` as their filter and the codec of `level` (`bottommost` when they go into
/// the deepest level that holds data).
pub(crate) fn table_options(
    options: &Options,
    keyspace: (u32, &str),
    level: usize,
    bottommost: bool,
    filter: Filter,
    store_id: StoreId,
) -> TableOptions {
    TableOptions {
        store_id,
        keyspace_id: keyspace.0,
        keyspace: keyspace.1.to_string(),
        block_size: options.block_size,
        restart_interval: options.block_restart_interval,
        compression: options.compression_for_level(level, bottommost),
        filter,
        range_filter: options.range_filter,
        prefix: options.prefix_extractor.clone(),
        whole_key_filtering: options.whole_key_filtering,
        pacer: options.rate_limiter.clone().map(|limiter| Pacer {
            limiter,
            priority: IoPriority::of_level(level),
        }),
    }
}

/// Writes memtable `mem` as L0 table `number`, keeping of each key only the newest version and
/// the newest at or below each of `snapshots` (no other reader can see an older one: reads go to
/// the newest, and scans keep their own memtables), and every range tombstone. Merge operands
/// are combined by `operator` as far as the memtable reaches (`operand_chains.rs`).
/// Returns `None`, and leaves no file, if `mem` is empty; on error (or panic) no file is left
/// either.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_level0_table(
    fs: &FileSystem,
    dir: &Path,
    number: u64,
    options: TableOptions,
    stats: &Stats,
    snapshots: &[u64],
    mem: &Arc<MemTable>,
    operator: Option<&Arc<dyn MergeOperator>>,
) -> Result<Option<NewFile>> {
    let mut builder = TableBuilder::create(fs, &table_path(dir, number), number, options)?;
    let mut retention = VersionRetention::new(snapshots);
    if mem.has_merges() {
        write_operand_chains(dir, &mut builder, &mut retention, mem, operator)?;
    } else {
        write_entries(dir, &mut builder, &mut retention, mem)?;
    }
    if let Some(t) = mem.range_tombstones() {
        builder.add_range_tombstones(t.fragments().to_vec());
    }
    if builder.is_empty() {
        return Ok(None); // the builder removes its empty file
    }
    let summary = builder.finish()?;
    stats.add(Ticker::TableBytesWritten, summary.file_size);
    Ok(Some(NewFile {
        level: 0,
        number,
        size: summary.file_size,
        smallest: summary.smallest,
        largest: summary.largest,
        range_tombstones: summary.range_tombstones,
        global_sequence: None,
    }))
}

/// The entries of `mem`, which holds no merge operand, that `retention` keeps, added to `builder`.
fn write_entries(
    dir: &Path,
    builder: &mut TableBuilder,
    retention: &mut VersionRetention<'_>,
    mem: &MemTable,
) -> Result<()> {
    // The previous entry's user key, in a buffer reused from entry to entry.
    let mut last: Option<Vec<u8>> = None;
    mem.for_each_entry(|key, value| {
        let parsed = parse_internal_key(key)
            .ok_or_else(|| Error::corruption(dir, "a memtable held a malformed internal key"))?;
        if last.as_deref() != Some(parsed.user_key) {
            let buf = last.get_or_insert_with(Vec::new);
            buf.clear();
            buf.extend_from_slice(parsed.user_key);
            retention.next_key();
        }
        if retention.keep(parsed.seq) {
            builder.add(key, value)?;
        }
        Ok(())
    })
}

/// [`write_entries`] for a memtable holding merge operands: a walk that can gather a chain of
/// them. Tables may hold older versions of any key, so a chain resolves only on a value or
/// tombstone of the memtable.
fn write_operand_chains(
    dir: &Path,
    builder: &mut TableBuilder,
    retention: &mut VersionRetention<'_>,
    mem: &Arc<MemTable>,
    operator: Option<&Arc<dyn MergeOperator>>,
) -> Result<()> {
    let tombstones = mem.range_tombstones();
    let mut it = mem.iter();
    it.seek_to_first()?;
    let mut last: Vec<u8> = Vec::new();
    let mut first = true;
    while it.valid() {
        let parsed = parse_internal_key(it.key())
            .ok_or_else(|| Error::corruption(dir, "a memtable held a malformed internal key"))?;
        if first || last != parsed.user_key {
            first = false;
            last.clear();
            last.extend_from_slice(parsed.user_key);
            retention.next_key();
        }
        if !retention.keep(parsed.seq) {
            it.next()?;
            continue;
        }
        if parsed.kind != ValueKind::Merge {
            builder.add(it.key(), it.value())?;
            it.next()?;
            continue;
        }
        let seq = parsed.seq;
        let rules = ChainRules {
            operator,
            retention,
            range_tombstones: tombstones.as_deref(),
            dir,
        };
        match collapse_operands(&mut it, &rules, |_| false)? {
            Chain::Resolved(v) => builder.add(&internal_key(&last, seq, ValueKind::Value), &v)?,
            Chain::Partial(v) => {
                builder.add(&internal_key(&last, seq, ValueKind::Merge), &v)?;
                retention.keep_next();
            }
            Chain::AsWritten(operands) => {
                for (k, v) in &operands {
                    builder.add(k, v)?;
                }
                retention.keep_next();
            }
        }
    }
    Ok(())
}

impl DbInner {
    /// Flushes the oldest frozen memtable of `tree`, if there is one, then removes the WALs no
    /// keyspace needs any more.
    pub(crate) fn flush_oldest_memtable(&self, tree: &Tree) -> Result<()> {
        let started = std::time::Instant::now();
        let (mem, newer_log, version) = {
            let st = self.state.lock();
            let Some(sv) = st.sv(tree.id) else {
                return Ok(()); // dropped
            };
            let Some(mem) = sv.imm.last() else {
                return Ok(());
            };
            // The next memtable's WAL is the oldest one that may hold this keyspace's writes once
            // this one is a table.
            let newer = sv.imm.len().checked_sub(2).map_or(&sv.mem, |i| &sv.imm[i]);
            (Arc::clone(mem), newer.log_number(), Arc::clone(&sv.version))
        };
        // Outside the lock: choosing the filter may open tables.
        let filter = tree.filter_for_flush(&version, &mem);
        drop(version);
        let number = self.new_table_number()?;
        let keyspace = (tree.id, tree.name.as_str());
        let options = table_options(&tree.options(), keyspace, 0, false, filter, self.store_id);
        // A panic in user code (a filter policy, a prefix extractor) fails the flush like an
        // error: the memtable and its WAL stay, and the error reaches every waiter.
        let file = catch_panic("flush", || {
            write_level0_table(
                &self.fs,
                &self.dir,
                number,
                options,
                &tree.stats,
                &self.snapshots.sequences(),
                &mem,
                tree.options().merge_operator.as_ref(),
            )
        })?;
        if file.is_none() {
            self.tables_in_flight.finish(number); // nothing was written
        }
        self.fs.sync_dir(&self.dir)?;
        let written = file.as_ref().map_or(0, |f| f.size);
        if self.state.lock().trees.len() > 1 {
            // A batch may have written to this keyspace and to others. Once this table counts,
            // its part here survives a power cut; its parts in other keyspaces are only in the
            // WALs the memtable's writes went to, which must then survive too.
            self.sync_closed_wals(newer_log)?;
        }
        let mut manifest = self.manifest.lock();
        if tree.is_dropped() {
            // Dropped meanwhile (under the MANIFEST lock): the table is garbage.
            drop(manifest);
            // Should the file stay, it stays in flight: the next open may remove it.
            if file.is_some() && self.fs.remove_file(&table_path(&self.dir, number)).is_ok() {
                self.tables_in_flight.finish(number);
            }
            return Ok(());
        }
        // Read before the state: a write this misses went to this WAL or a later one.
        let current_log = self.current_log.load(Ordering::Acquire);
        let (oldest, start_sequence) = {
            let st = self.state.lock();
            let oldest = st.oldest_needed_wal(current_log, Some(&mem));
            let start = st.wals.get(&oldest).map(|w| w.start_sequence);
            (oldest, start)
        };
        let start_sequence = start_sequence
            .ok_or_else(|| Error::corruption(&self.dir, "the oldest WAL needed is not tracked"))?;
        // The tables now hold every write of this keyspace up to the memtable's last.
        let edit = VersionEdit {
            keyspace: tree.id,
            keyspace_log_number: Some(newer_log),
            log_number: Some(oldest),
            log_start_sequence: Some(start_sequence),
            last_sequence: mem.frozen_at(),
            added: file.into_iter().collect(),
            ..Default::default()
        };
        let version = manifest.log_and_apply(edit, self.next_file.load(Ordering::SeqCst))?;
        // Counted before the install wakes whoever waits for this flush.
        tree.stats.inc(Ticker::Flushes);
        tree.compaction_stats
            .record(0, 0, 0, written, started.elapsed());
        let removable: Vec<u64> = {
            let mut st = self.state.lock();
            self.install_super_version(&mut st, tree, |sv| {
                sv.imm.retain(|m| !Arc::ptr_eq(m, &mem));
                sv.version = version;
            });
            let removable: Vec<u64> = st.wals.range(..oldest).map(|(n, _)| *n).collect();
            for n in &removable {
                st.wals.remove(n);
            }
            removable
        };
        drop(manifest);
        self.changed.notify_all();
        // The edit that makes these WALs unnecessary is durable; a failed delete leaves garbage
        // that the next open removes.
        for n in removable {
            let _ = self.fs.remove_file(&log_path(&self.dir, n));
        }
        Ok(())
    }
}

impl DbInner {
    /// fsyncs the closed WALs numbered below `below` that hold unsynced records.
    ///
    /// # Errors
    /// `Error::Io` naming the WAL whose fsync failed.
    fn sync_closed_wals(&self, below: u64) -> Result<()> {
        let mut closed = self.closed_wals.lock();
        for (n, log) in closed.iter_mut() {
            if *n < below && log.has_unsynced() {
                log.sync()?;
            }
        }
        closed.retain(|(n, log)| *n >= below || log.has_unsynced());
        Ok(())
    }
}

impl Db {
    /// Freezes the memtable and waits until every frozen memtable is an L0 table. When it returns
    /// `Ok`, every write acknowledged before the call is durable (in fsynced tables named by an
    /// fsynced MANIFEST edit). It flushes the default keyspace; on a
    /// [`Keyspace`](crate::Keyspace), that keyspace. In a store with several keyspaces it also
    /// syncs the WALs, which hold the other keyspaces' writes, so that every write acknowledged
    /// before the call is durable there too.
    ///
    /// # Errors
    /// The background error, if a flush failed; `Error::Closed` if the store is closed before
    /// the flush is done (what it had not flushed stays in the WALs, as before the call);
    /// `Error::InvalidArgument` if the keyspace was dropped.
    pub fn flush(&self) -> Result<()> {
        let others_hold_writes = self.inner.flush_tree(&self.tree)?;
        if others_hold_writes {
            // Writes to other keyspaces acknowledged before the call are in WALs, not tables.
            self.sync_wal()?;
        }
        Ok(())
    }
}

impl DbInner {
    /// Freezes `tree`'s memtable and waits until every frozen memtable of it is an L0 table.
    /// Returns whether the store has other keyspaces (whose writes this leaves in the WALs).
    ///
    /// # Errors
    /// As [`Db::flush`].
    pub(crate) fn flush_tree(&self, tree: &Tree) -> Result<bool> {
        let inner = self;
        let target = {
            let mut wal = inner.wal.lock();
            inner.check_background_error()?;
            tree.check_live()?;
            if !tree.super_version().mem.is_empty() {
                inner.switch_memtable(&mut wal, &[tree.id])?;
            }
            wal.log_number
        };
        let mut st = inner.state.lock();
        while st
            .sv(tree.id)
            .is_some_and(|sv| sv.imm.iter().any(|m| m.log_number() < target))
        {
            // Closing stops the flush thread: nothing more will be flushed.
            inner.check_open()?;
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            inner.changed.wait(&mut st);
        }
        let others = st.trees.len() > 1;
        drop(st);
        tree.check_live()?;
        Ok(others)
    }
}
