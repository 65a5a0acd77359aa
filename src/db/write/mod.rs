//! The write path: validate, queue for a group commit, and (as the group's leader) make room,
//! append the group to the WAL in one write (fsync if any writer asked), apply it to the
//! memtable, publish the sequences. And `sync_wal`, which fsyncs without writing.
//!
//! The room also holds `queue.rs` (the writers waiting for their group commit) and
//! `batch_settling.rs` (what the commit fills in: expiry times, open range ends); `merges.rs`
//! holds `merge` and the check that a keyspace merged into has a merge operator.

mod batch_settling;
mod merges;
pub(crate) mod queue;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::transaction::{ConflictCheck, GroupWrites};
use super::tree::Tree;
use super::version::filename::log_path;
use super::{Db, DbInner, State, WalInfo, WalState};
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::key_range::KeyRange;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::stats::Ticker;
use crate::store_id::DEFAULT_KEYSPACE_ID;
use crate::wal::writer::LogWriter;
use crate::write_batch::{check_sizes, BatchEntries, Target, WriteBatch};
use batch_settling::{needs_settling, settle_group};
use queue::{PendingWrite, WriteTarget};

impl Db {
    /// Sets `key` to `value`.
    ///
    /// # Errors
    /// `InvalidArgument` for a key over 64 KiB or a value over 256 MiB; `Io` if the WAL cannot be
    /// written; `Background` after an earlier flush or compaction failed; `ReadOnly` on a store
    /// opened with [`open_read_only`](Db::open_read_only); `Closed` once the store is
    /// [closed](Db::close) (the write was not applied).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        // A kind byte and two length varints (at most 5 bytes each) besides the bytes themselves.
        let mut b = WriteBatch::with_capacity(16 + key.len() + value.len());
        b.put_to(self.target(), key, value);
        self.write(b)
    }

    /// Sets `key` to `value` for `ttl`: from `ttl` after the write commits, every read sees the
    /// key absent (as if deleted: an older version does not show through), and compactions
    /// remove it. It expires then whatever the keyspace's own [`ttl`](crate::Options::ttl), in
    /// any keyspace: a session of thirty minutes beside a remember-me session of thirty days.
    /// Counted in whole seconds, rounded up, by the store's [`clock`](crate::Options::clock).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put_with_ttl("session:ada", "token", Duration::from_secs(30 * 60))?;
    /// db.put_with_ttl("remember:ada", "token", Duration::from_secs(30 * 86_400))?;
    /// assert_eq!(db.get("session:ada")?, Some(b"token".to_vec())); // for thirty minutes
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`put`](Db::put).
    pub fn put_with_ttl(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let mut b = WriteBatch::with_capacity(20 + key.len() + value.len());
        b.put_with_ttl_to(self.target(), key, value, ttl);
        self.write(b)
    }

    /// Removes `key`. Removing an absent key is not an error.
    ///
    /// # Errors
    /// As [`put`](Db::put).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_to(self.target(), key.as_ref());
        self.write(b)
    }

    /// Removes every key of `range`, any range [`scan`](Db::scan) takes (`a..b`, `a..=b`, `a..`,
    /// `..b`, `..=b`, `..`, a pair of [`Bound`](std::ops::Bound)s): one WAL record and one range
    /// tombstone, however many keys the range holds. Reads stop seeing the keys at once;
    /// compaction removes them and then the tombstone. Keys written afterwards are not removed,
    /// and [snapshots](Db::snapshot) taken before still see the old ones. A range that holds no
    /// key writes nothing.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// for day in 1..=9 {
    ///     db.put(format!("log/2026-11-0{day}"), "...")?;
    /// }
    /// db.delete_range("log/2026-11-01".."log/2026-11-08")?; // a week, in one write
    /// assert_eq!(db.get("log/2026-11-07")?, None);
    /// db.delete_range("log/2026-11-09"..)?; // the rest
    /// assert_eq!(db.scan("log/".."log0").count(), 1);
    /// db.delete_range(..)?; // everything
    /// assert_eq!(db.iter().count(), 0);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`put`](Db::put).
    pub fn delete_range<R: KeyRange>(&self, range: R) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range_to(self.target(), range);
        if b.is_empty() {
            return self.inner.check_background_error();
        }
        self.write(b)
    }

    /// Where this handle's own writes go: its keyspace.
    pub(crate) fn target(&self) -> Target {
        match self.tree.id {
            // Un-targeted is the default keyspace's, in fewer bytes.
            DEFAULT_KEYSPACE_ID => Target::Untargeted,
            id => Target::In(id, self.inner.store_id),
        }
    }

    /// Applies `batch` atomically, without waiting for an fsync. Its entries that name no
    /// keyspace ([`put`](WriteBatch::put), [`delete`](WriteBatch::delete), …) go to this handle's
    /// keyspace (`users.write(batch)` writes them to `users`); those that name one
    /// ([`put_in`](WriteBatch::put_in), …) go there.
    ///
    /// # Errors
    /// As [`put`](Db::put).
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies `batch` atomically; with `sync: true` it returns only after the WAL is fsynced, which
    /// makes this batch and every batch acknowledged before it durable. An empty batch with
    /// `sync: true` writes nothing and does what [`sync_wal`](Db::sync_wal) does.
    ///
    /// Concurrent writers commit in groups: one of them appends every waiting batch to the WAL
    /// with a single write (and a single fsync if any asked for one), so a synced write under
    /// contention costs a share of an fsync. Each batch keeps its own WAL record and sequences.
    ///
    /// # Errors
    /// As [`put`](Db::put).
    pub fn write_opt(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        self.write_checked(batch, options, None).map(drop)
    }

    /// [`write_opt`](Db::write_opt), refused with `Error::Conflict` if `check` (a
    /// transaction's) finds a key changed since its snapshot. Returns the sequence of the
    /// batch's last write (`None` for an empty batch, which writes nothing).
    pub(crate) fn write_checked(
        &self,
        batch: WriteBatch,
        options: &WriteOptions,
        check: Option<Box<ConflictCheck>>,
    ) -> Result<Option<u64>> {
        self.inner.check_open()?;
        if self.inner.read_only {
            return Err(self.inner.read_only_error());
        }
        let (max_key, max_value) = batch.largest_key_and_value();
        check_sizes(max_key, max_value)?;
        // Entries that name no keyspace go to this handle's.
        let batch = match self.tree.id {
            DEFAULT_KEYSPACE_ID => batch,
            _ if !batch.has_untargeted() => batch,
            id => batch
                .retargeted(id, self.inner.store_id)
                .ok_or_else(|| Error::InvalidArgument("malformed write batch".into()))?,
        };
        self.check_merge_operators(&batch)?;
        match batch.store() {
            Ok(None) => {}
            Ok(Some(store)) if store == self.inner.store_id => {}
            _ => {
                return Err(Error::InvalidArgument(
                    "the batch writes to a keyspace of another store".into(),
                ))
            }
        }
        if batch.is_empty() {
            return if options.sync {
                self.sync_wal().map(|()| None)
            } else {
                Ok(None)
            };
        }
        self.inner.commit(batch, options.sync, check).map(Some)
    }

    /// Makes every write acknowledged so far durable, without writing anything: fsyncs the
    /// current WAL and every older WAL that still holds unsynced records of a memtable not yet
    /// flushed to a table (a WAL whose memtable is a table needs no sync: the table and the
    /// MANIFEST edit naming it were fsynced). When it returns `Ok`, every write that returned
    /// `Ok` before the call survives a power cut, as if the last of them had been written with
    /// `sync: true`. A WAL with nothing unsynced is not synced again.
    ///
    /// Writes go on meanwhile, waiting only for the fsyncs; writes acknowledged during the call
    /// may or may not be covered. Use it to batch durability: many unsynced writes, then one
    /// `sync_wal`. On a store opened read-only there is nothing to sync: `Ok`.
    ///
    /// ```
    /// use siftdb::{Db, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// for i in 0..100u32 {
    ///     db.put(i.to_be_bytes(), b"value")?; // unsynced: survives a process crash only
    /// }
    /// db.sync_wal()?; // now all 100 survive a power cut too
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// `Error::Io` naming the WAL whose write or fsync failed. The WAL's tail is then unknown, so
    /// this becomes the store's background error: later writes fail with `Error::Background`
    /// until the store is reopened. `Error::Closed` once the store is closed.
    pub fn sync_wal(&self) -> Result<()> {
        let inner = &self.inner;
        let mut wal = inner.wal.lock();
        // Under the WAL lock: `close` takes it after marking the store closed.
        inner.check_open()?;
        let Some(log) = wal.log.as_mut() else {
            return Ok(()); // read-only: nothing was written
        };
        let mut older = inner.closed_wals.lock();
        let mut synced = false;
        let mut sync_all = || -> Result<()> {
            // Older WALs first, as a synced write does.
            for (_, older) in older.iter_mut() {
                older.sync()?;
                synced = true;
            }
            older.clear();
            if log.has_unsynced() {
                log.sync()?;
                synced = true;
            }
            Ok(())
        };
        let result = sync_all();
        if let Err(e) = &result {
            // The WAL's tail is now unknown: refuse writes until reopen rather than risk a hole.
            inner.set_background_error(e);
        }
        if synced {
            inner.stats.inc(Ticker::WalSyncs);
        }
        result
    }
}

/// How many times a writer waiting for its group yields the processor before it sleeps.
const WAIT_YIELDS: u32 = 32;

/// A group stops growing at this many bytes of batches, so one huge group cannot hold back the
/// writers behind it for long.
const MAX_GROUP_BYTES: usize = 1 << 20;

impl DbInner {
    /// Group commit: the writer at the front of the queue becomes the leader, takes every batch
    /// queued behind it (up to `MAX_GROUP_BYTES`), appends them to the WAL with one write (and one
    /// fsync if any of them asked for it), applies them to the memtable and publishes their
    /// sequences; the others wait and return the group's outcome. A lone writer is a group of one.
    /// A transaction's batch (`check`) is checked for conflicts by the leader, in group order.
    /// Returns the batch's last sequence.
    fn commit(
        &self,
        batch: WriteBatch,
        sync: bool,
        check: Option<Box<ConflictCheck>>,
    ) -> Result<u64> {
        let mut q = self.writers.lock();
        let id = q.next_id;
        q.next_id += 1;
        q.waiting.push_back(PendingWrite {
            id,
            batch,
            sync,
            check,
        });
        let mut yields = 0;
        loop {
            // Most writers lead their own group: nothing to hash for them.
            if !q.finished.is_empty()
                && let Some(result) = q.finished.remove(&id)
            {
                return result;
            }
            if !q.leader_busy && q.waiting.front().is_some_and(|w| w.id == id) {
                break;
            }
            if yields < WAIT_YIELDS {
                // A group commits in a few microseconds: let the leader run rather than sleep
                // and pay a wake-up.
                yields += 1;
                drop(q);
                std::thread::yield_now();
                q = self.writers.lock();
                continue;
            }
            self.writers_done.wait(&mut q);
        }
        q.leader_busy = true;
        let mut group = Vec::new();
        let mut bytes = 0;
        while let Some(w) = q.waiting.front() {
            if !group.is_empty() && bytes + w.batch.encoded().len() > MAX_GROUP_BYTES {
                break;
            }
            bytes += w.batch.encoded().len();
            group.extend(q.waiting.pop_front());
        }
        drop(q);
        // Others may queue up behind the group meanwhile: they are the next group.
        let (result, rejected) = self.commit_group(&mut group);
        let mut q = self.writers.lock();
        let mut own = None;
        for w in group.iter() {
            let outcome = match &result {
                Ok(()) => Ok(w.batch.last_sequence()),
                Err(e) => Err(e.duplicate()),
            };
            if w.id == id {
                own = Some(outcome);
            } else {
                q.finished.insert(w.id, outcome);
            }
        }
        // The leader's own write is in the group, or among the rejected ones below.
        let mut result = own
            .unwrap_or_else(|| Err(Error::InvalidArgument("the batch was not committed".into())));
        for (w, e) in rejected {
            if w == id {
                result = Err(e);
            } else {
                q.finished.insert(w, Err(e));
            }
        }
        q.leader_busy = false;
        drop(q);
        self.writers_done.notify_all();
        result
    }

    /// Logs and applies `group` as consecutive sequences. A write to a keyspace dropped since
    /// it was queued is taken out of the group and returned with its error.
    fn commit_group(&self, group: &mut Vec<PendingWrite>) -> (Result<()>, Vec<(u64, Error)>) {
        let mut wal = self.wal.lock();
        // Under the WAL lock (which `drop_keyspace` takes too): a keyspace live now stays live
        // until the group is applied.
        let mut rejected = Vec::new();
        // Only keyspaces other than the default one can be dropped.
        if group.iter().any(|w| w.batch.names_keyspaces()) {
            let st = self.state.lock();
            group.retain(|w| {
                let Some(gone) = w.batch.keyspaces().find(|id| !st.trees.contains_key(id)) else {
                    return true;
                };
                let name = self.dropped_names.lock().get(&gone).cloned();
                let name = name.unwrap_or_else(|| format!("with id {gone}"));
                rejected.push((
                    w.id,
                    Error::InvalidArgument(format!(
                        "the batch writes to keyspace {name}, which was dropped"
                    )),
                ));
                false
            });
        }
        if group.iter().any(|w| w.check.is_some()) {
            self.check_transactions(group, &mut rejected);
        }
        if group.is_empty() {
            return (Ok(()), rejected);
        }
        (self.log_and_apply_group(&mut wal, group), rejected)
    }

    /// Takes out of `group` (into `rejected`, with `Error::Conflict`) every transaction that
    /// finds a key changed since its snapshot: in the memtables and tables, or written by a batch
    /// ahead of it in the group (which commits first but is in no memtable yet). Called under the
    /// WAL lock, so nothing else commits between the check and the group's own commit.
    fn check_transactions(&self, group: &mut Vec<PendingWrite>, rejected: &mut Vec<(u64, Error)>) {
        let trees: BTreeMap<u32, Arc<Tree>> = {
            let st = self.state.lock();
            st.trees
                .iter()
                .map(|(id, t)| (*id, Arc::clone(&t.tree)))
                .collect()
        };
        // The keys of batches ahead, kept only as far as the last transaction of the group.
        let last_checked = group.iter().rposition(|w| w.check.is_some()).unwrap_or(0);
        let mut earlier = GroupWrites::default();
        let mut kept = Vec::with_capacity(group.len());
        for (i, w) in group.drain(..).enumerate() {
            if let Some(check) = &w.check {
                match self.find_conflict(check, &trees, &earlier) {
                    Ok(None) => {}
                    Ok(Some(what)) => {
                        self.stats.inc(Ticker::TransactionConflicts);
                        rejected.push((w.id, Error::Conflict(what)));
                        continue;
                    }
                    Err(e) => {
                        rejected.push((w.id, e));
                        continue;
                    }
                }
            }
            if i < last_checked {
                // `WriteBatch` encoded these records itself, so they decode whole.
                for e in BatchEntries::new(w.batch.encoded())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    earlier.add(&e);
                }
            }
            kept.push(w);
        }
        *group = kept;
    }

    /// Logs and applies `group` (every keyspace it writes to is live) under the WAL lock.
    fn log_and_apply_group(&self, wal: &mut WalState, group: &mut [PendingWrite]) -> Result<()> {
        // Under the WAL lock: `close` marks the store closed, then waits for this lock, so a group
        // either commits before `close` goes on or sees `closed` and writes nothing.
        self.check_open()?;
        let mut named: Vec<u32> = Vec::new();
        let ids: &[u32] = if group.iter().any(|w| w.batch.names_keyspaces()) {
            for w in group.iter() {
                for id in w.batch.keyspaces() {
                    if !named.contains(&id) {
                        named.push(id);
                    }
                }
            }
            &named
        } else {
            // The usual group, of the default keyspace alone: no list to build.
            &[DEFAULT_KEYSPACE_ID]
        };
        let bytes: usize = group.iter().map(|w| w.batch.encoded().len()).sum();
        let mut targets = std::mem::take(&mut wal.targets);
        let made = self.make_room_for_write(wal, ids, bytes as u64, &mut targets);
        let applied = made.and_then(|()| {
            let mut added = 0;
            let mut trees = targets.iter().map(|t| &*t.tree);
            if needs_settling(group.iter().map(|w| &w.batch), &mut trees) {
                let trees: Vec<&Tree> = targets.iter().map(|t| &*t.tree).collect();
                let mut batches: Vec<&mut WriteBatch> =
                    group.iter_mut().map(|w| &mut w.batch).collect();
                added = settle_group(&mut batches, &trees, self.store_id);
            }
            self.log_and_apply_to(wal, group, &mut targets, bytes + added as usize)
        });
        // Kept for the next group, empty: the memtables and trees are let go of now.
        targets.clear();
        wal.targets = targets;
        applied
    }

    /// Logs `group` (`bytes` in all) to the current WAL and applies it to the memtables of
    /// `targets`.
    fn log_and_apply_to(
        &self,
        wal: &mut WalState,
        group: &mut [PendingWrite],
        targets: &mut [WriteTarget],
        bytes: usize,
    ) -> Result<()> {
        let Some(log) = wal.log.as_mut() else {
            return Err(self.read_only_error());
        };
        let first = self.last_sequence.load(Ordering::Acquire) + 1;
        let mut next = first;
        let sync = group.iter().any(|w| w.sync);
        let mut logged = Ok(());
        for w in group.iter_mut() {
            w.batch.set_sequence(next);
            next += w.batch.len() as u64;
            logged = log.add_record(w.batch.encoded());
            if logged.is_err() {
                break;
            }
        }
        let logged = logged.and_then(|()| {
            if sync {
                // Every earlier write too: older WALs first, then this one.
                let mut older = self.closed_wals.lock();
                for (_, older) in older.iter_mut() {
                    older.sync()?;
                }
                older.clear();
                log.sync()
            } else {
                log.flush()
            }
        });
        if let Err(e) = logged {
            // The WAL's tail is now unknown: refuse writes until reopen rather than risk a hole.
            self.set_background_error(&e);
            return Err(e);
        }
        self.stats.add(Ticker::WalBytes, bytes as u64);
        if sync {
            self.stats.inc(Ticker::WalSyncs);
        }
        for w in group.iter() {
            // `WriteBatch` encoded these records itself, so they decode whole.
            let entries = BatchEntries::new(w.batch.encoded())
                .ok_or_else(|| Error::InvalidArgument("malformed write batch".into()))?;
            for e in entries {
                let e = e.ok_or_else(|| Error::InvalidArgument("malformed write batch".into()))?;
                // Every keyspace of the group has its memtable here (a handful at most).
                if let Some(t) = targets.iter_mut().find(|t| t.tree.id == e.keyspace) {
                    if e.kind == ValueKind::RangeDeletion {
                        t.tree.stats.inc(Ticker::RangeDeletes);
                    }
                    t.mem.add(e.seq, e.kind, e.key, e.value);
                    t.entries += 1;
                    t.bytes += (e.key.len() + e.value.len()) as u64;
                }
            }
        }
        // Counted per keyspace, for its write amplification; the store's totals add them up.
        for t in targets.iter() {
            t.tree.stats.add(Ticker::NumberKeysWritten, t.entries);
            t.tree.stats.add(Ticker::UserBytesWritten, t.bytes);
        }
        // Readers take their snapshot from here: the group becomes visible all at once.
        self.last_sequence.store(next - 1, Ordering::Release);
        Ok(())
    }

    /// Puts in `targets` the memtable to write into of each keyspace of `ids` (all live),
    /// freezing full ones and waiting while the flushes or L0 compactions of those keyspaces lag
    /// too far behind, and freezing the memtables that keep the oldest WAL alive once the WALs
    /// hold more than `max_total_wal_size`. Counts `bytes` about to be logged to the current WAL
    /// (for that limit, which a lone keyspace does not need). Called with the WAL lock held.
    pub(crate) fn make_room_for_write(
        &self,
        wal: &mut WalState,
        ids: &[u32],
        bytes: u64,
        targets: &mut Vec<WriteTarget>,
    ) -> Result<()> {
        let mut slowed = false;
        let mut st = self.state.lock();
        loop {
            // A writer stalled here when the store closes gives up: no flush will make room.
            self.check_open()?;
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(e.clone()));
            }
            let mut slow = false;
            let mut stall = None;
            let mut freeze = Vec::new();
            for id in ids {
                let Some(ts) = st.trees.get(id) else {
                    continue;
                };
                let o = &*ts.tree.options();
                let l0 = ts.sv.version.levels[0].len();
                slow |= l0 >= o.level0_slowdown_trigger;
                if ts.sv.mem.approximate_bytes() < o.write_buffer_size {
                    continue;
                }
                if l0 >= o.level0_stop_trigger {
                    stall = Some(Ticker::WriteStallL0StopMicros);
                } else if ts.sv.imm.len() >= o.max_immutable_memtables {
                    stall = stall.or(Some(Ticker::WriteStallMemtablesMicros));
                } else {
                    freeze.push(*id);
                }
            }
            if !slowed && slow {
                // Give compaction a millisecond per write instead of stopping writers outright.
                drop(st);
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                self.count_stall(Ticker::WriteStallL0SlowdownMicros, t);
                slowed = true;
                st = self.state.lock();
                continue;
            }
            if let Some(cause) = stall {
                let t = Instant::now();
                self.changed.wait_for(&mut st, Duration::from_millis(100));
                self.count_stall(cause, t);
                continue;
            }
            if freeze.is_empty() {
                freeze = self.memtables_pinning_old_wals(&st);
            }
            if freeze.is_empty() {
                if st.trees.len() > 1
                    && let Some(w) = st.wals.get_mut(&wal.log_number)
                {
                    w.bytes += bytes;
                }
                targets.extend(ids.iter().filter_map(|id| {
                    let t = st.trees.get(id)?;
                    Some(WriteTarget {
                        tree: Arc::clone(&t.tree),
                        mem: Arc::clone(&t.sv.mem),
                        entries: 0,
                        bytes: 0,
                    })
                }));
                return Ok(());
            }
            drop(st);
            self.switch_memtable(wal, &freeze)?;
            st = self.state.lock();
        }
    }

    /// The keyspaces whose memtable (not yet frozen) holds writes in the oldest live WAL, once
    /// the live WALs hold more than `max_total_wal_size`: freezing and flushing them lets that
    /// WAL go, so a quiet keyspace does not keep old WALs forever.
    fn memtables_pinning_old_wals(&self, st: &State) -> Vec<u32> {
        // A lone keyspace's memtables fill and flush in WAL order: none pins a WAL for long.
        if st.trees.len() < 2 {
            return Vec::new();
        }
        let total: u64 = st.wals.values().map(|w| w.bytes).sum();
        let limit = match self.options.max_total_wal_size {
            0 => {
                let largest = st
                    .trees
                    .values()
                    .map(|t| t.tree.options().write_buffer_size);
                4 * largest.max().unwrap_or(0) as u64
            }
            n => n,
        };
        if total <= limit {
            return Vec::new();
        }
        let Some(&oldest) = st.wals.keys().next() else {
            return Vec::new();
        };
        st.trees
            .iter()
            .filter(|(_, t)| !t.sv.mem.is_empty() && t.sv.mem.log_number() <= oldest)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Counts the time since `since` as a write stall for `cause`.
    fn count_stall(&self, cause: Ticker, since: Instant) {
        let micros = since.elapsed().as_micros() as u64;
        self.stats.add(Ticker::WriteStallMicros, micros);
        self.stats.add(cause, micros);
    }

    /// Starts a new WAL, and a new memtable for each keyspace of `ids` whose memtable holds
    /// writes (the old one joins its flush queue); the other keyspaces keep theirs. The old WAL
    /// keeps its file open while it holds unsynced records, so the next synced write can sync it.
    pub(crate) fn switch_memtable(&self, wal: &mut WalState, ids: &[u32]) -> Result<()> {
        let Some(current) = wal.log.as_mut() else {
            return Err(self.read_only_error());
        };
        let number = self.new_file_number()?;
        let log = LogWriter::create(&self.fs, &log_path(&self.dir, number))?;
        // The new log's directory entry must be durable before a synced write relies on it.
        self.fs.sync_dir(&self.dir)?;
        current.flush()?;
        let old = std::mem::replace(current, log);
        let old_number = std::mem::replace(&mut wal.log_number, number);
        if old.has_unsynced() {
            self.closed_wals.lock().push((old_number, old));
        }
        let mut st = self.state.lock();
        // Under the WAL lock every committed group is in the old memtables.
        let last_sequence = self.last_sequence.load(Ordering::Acquire);
        st.wals.insert(
            number,
            WalInfo {
                start_sequence: last_sequence,
                bytes: 0,
            },
        );
        self.current_log.store(number, Ordering::Release);
        // A WAL already removed (its writes are all in tables) needs no sync.
        self.closed_wals
            .lock()
            .retain(|(n, _)| st.wals.contains_key(n));
        for id in ids {
            let Some(ts) = st.trees.get(id) else {
                continue;
            };
            if ts.sv.mem.is_empty() {
                continue;
            }
            ts.sv.mem.freeze(last_sequence);
            let tree = Arc::clone(&ts.tree);
            self.install_super_version(&mut st, &tree, |sv| {
                let buffer = tree.options().write_buffer_size;
                let mem = Arc::new(MemTable::for_buffer(number, buffer));
                let frozen = std::mem::replace(&mut sv.mem, mem);
                sv.imm.insert(0, frozen);
            });
        }
        drop(st);
        self.changed.notify_all();
        Ok(())
    }
}
