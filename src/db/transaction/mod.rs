//! Transactions: optimistic, serializable read-modify-write across keyspaces. A transaction
//! reads at a snapshot plus its own buffered writes, remembers what it read, and commits its
//! writes as one batch through the group commit, whose leader first checks (`conflict.rs`) that
//! nothing it read or wrote (`read_set.rs`) changed since the snapshot. `helpers.rs` holds
//! `Db::update` and `Db::compare_and_swap`, which retry on conflict; `merges.rs` its merges.

mod conflict;
mod helpers;
mod merges;
mod read_set;
mod scan;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use read_set::{ConflictCheck, GroupWrites};
pub use scan::TransactionScan;

use super::{Db, Keyspace, Snapshot};
use crate::error::{Error, Result};
use crate::key_range::KeyRange;
use crate::options::WriteOptions;
use crate::stats::Ticker;
use crate::write_batch::check_sizes;
use crate::write_batch::{range_deletion_bounds, Target, WriteBatch};

/// An optimistic transaction: reads and writes across the store's keyspaces that commit all
/// together, or not at all if another write got in their way. Begin one with
/// [`Db::transaction`].
///
/// **Reads** ([`get`](Self::get), [`scan`](Self::scan) and their `_in` forms) see the store as
/// it was when the transaction began (a [`Snapshot`], held until the transaction ends) with the
/// transaction's own writes on top: a key it wrote reads as written, and its scans (both ways)
/// merge its writes into the snapshot's keys. **Writes** ([`put`](Self::put),
/// [`put_with_ttl`](Self::put_with_ttl), [`delete`](Self::delete),
/// [`delete_range`](Self::delete_range)) all return `Result<()>` (a key over 64 KiB, a keyspace
/// of another store) and are buffered in memory; nothing reaches the store before
/// [`commit`](Self::commit), which applies them as one [`WriteBatch`] (one WAL record: after a
/// crash all of them are there or none). [`rollback`](Self::rollback), or dropping the
/// transaction, discards them. [`Db::transaction_with`] runs one in a closure.
///
/// `get`, `put`, `delete` and the rest act on the keyspace of the handle the transaction began
/// from (the default keyspace for a `Db`, the keyspace's own for a [`Keyspace`]); their `_in`
/// forms on any keyspace of the store.
///
/// # Isolation: serializable
///
/// `commit` succeeds only if no key the transaction read or wrote, and no key in a range it
/// scanned or deleted, was written by anyone else after its snapshot; otherwise it returns
/// [`Error::Conflict`] and applies nothing. The check runs in the group-commit leader while it
/// holds the WAL, so no write can slip in between the check and the commit. Hence the
/// transactions that commit are **serializable**: each behaves as if it ran alone, at the moment
/// it committed, in commit order (a transaction that wrote nothing commits without a check and
/// behaves as if it ran at its snapshot). This excludes dirty reads, non-repeatable reads, read
/// skew, phantoms (within the ranges scanned), lost updates and write skew, the anomaly that
/// snapshot isolation alone lets through (two transactions each read what the other writes).
/// Every read, even of a transaction that later fails to commit, sees one consistent state.
///
/// # False conflicts
///
/// The check is exact per key (never a hash or a filter's guess: a filter false positive costs a
/// block read, not a conflict), but it asks whether a key *was written*, not whether what the
/// transaction saw *changed*. So a transaction is also refused when, after its snapshot,
/// another writer:
/// - rewrote a key it read with the same value, or deleted a key that was already absent;
/// - wrote a key it only wrote itself (a blind write: the first committer wins);
/// - wrote any key inside a range it scanned, even one beyond where it stopped reading the scan,
///   or one that would not have changed what it computed.
///
/// These arise only when transactions touch the same keys or ranges at the same time: an
/// uncontended transaction never sees a conflict, and under contention the conflicts are those
/// of the keys actually shared. Retry on [`Error::is_conflict`]; [`Db::update`] and
/// [`Db::compare_and_swap`] do.
///
/// # Costs
///
/// The commit check costs, per key read or written, a look into each memtable and, per table
/// whose key range holds the key, a filter probe (a block read only if the filter answers
/// "maybe"); per range scanned, a walk over the range's entries in the memtables and in every
/// table that overlaps it. A live transaction holds its snapshot, so flushes and compactions keep
/// the versions it may read: keep transactions short.
///
/// ```
/// use siftdb::{Db, Options};
///
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::default())?;
/// let accounts = db.keyspace("accounts")?;
/// accounts.put("alice", 100u64.to_be_bytes())?;
/// accounts.put("bob", 0u64.to_be_bytes())?;
///
/// // Move 30 from alice to bob; retried if another transfer touched either account meanwhile.
/// let balance =
///     |v: Option<Vec<u8>>| u64::from_be_bytes(v.unwrap_or_default().try_into().unwrap_or([0; 8]));
/// loop {
///     let mut tx = db.transaction();
///     let alice = balance(tx.get_in(&accounts, "alice")?);
///     let bob = balance(tx.get_in(&accounts, "bob")?);
///     tx.put_in(&accounts, "alice", (alice - 30).to_be_bytes())?;
///     tx.put_in(&accounts, "bob", (bob + 30).to_be_bytes())?;
///     match tx.commit() {
///         Err(e) if e.is_conflict() => continue,
///         other => break other?,
///     }
/// }
/// assert_eq!(accounts.get("bob")?, Some(30u64.to_be_bytes().to_vec()));
/// # Ok(()) }
/// ```
pub struct Transaction {
    /// The handle it began from: its keyspace is the one `get`, `put`, … act on.
    db: Db,
    snapshot: Snapshot,
    /// Buffered writes by keyspace id and key.
    writes: Writes,
    /// Buffered range deletions, in order. A buffered write they cover is dropped when they are
    /// made, so every write left in `writes` came after them.
    deleted: RangeDeletes,
    /// What the commit must find unchanged: the keys read and the ranges scanned or deleted (the
    /// keys written join them at commit).
    check: ConflictCheck,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("snapshot", &self.snapshot.sequence())
            .field("writes", &self.writes.len())
            .field("range_deletes", &self.deleted.len())
            .field("keys_read", &self.check.keys.len())
            .field("ranges_scanned", &self.check.ranges.len())
            .finish()
    }
}

impl Db {
    /// Begins a [`Transaction`] at a snapshot of the store as it is now. See [`Transaction`] for
    /// what it reads, when it commits and what it guarantees.
    pub fn transaction(&self) -> Transaction {
        let snapshot = self.snapshot();
        Transaction {
            db: self.clone(),
            check: ConflictCheck {
                snapshot: snapshot.sequence(),
                ..ConflictCheck::default()
            },
            snapshot,
            writes: BTreeMap::new(),
            deleted: Vec::new(),
        }
    }
}

impl Transaction {
    /// The snapshot its reads see (besides its own writes).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The value of `key` in the transaction's keyspace: its own write if it wrote the key,
    /// else the snapshot's. The key joins what the commit checks.
    ///
    /// # Errors
    /// As [`Db::get`].
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let Transaction {
            db,
            snapshot,
            writes,
            deleted,
            check,
        } = self;
        read(db, snapshot, writes, deleted, check, key.as_ref())
    }

    /// [`get`](Self::get) in `keyspace`.
    ///
    /// # Errors
    /// As [`Db::get`]; `Error::InvalidArgument` for a keyspace of another store.
    pub fn get_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.check_store(keyspace)?;
        read(
            keyspace,
            &self.snapshot,
            &self.writes,
            &self.deleted,
            &mut self.check,
            key.as_ref(),
        )
    }

    /// Sets `key` to `value` in the transaction's keyspace when it commits.
    ///
    /// # Errors
    /// `Error::InvalidArgument` for a key over 64 KiB or a value over 256 MiB (as
    /// [`Db::put`]), at once rather than at the commit.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let id = self.db.tree.id;
        self.buffer(id, key.as_ref(), Write::Put(value.as_ref().to_vec()))
    }

    /// [`put`](Self::put) in `keyspace`.
    ///
    /// # Errors
    /// As [`put`](Self::put); `Error::InvalidArgument` for a keyspace of another store.
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.check_store(keyspace)?;
        self.buffer(
            keyspace.id(),
            key.as_ref(),
            Write::Put(value.as_ref().to_vec()),
        )
    }

    /// Sets `key` to `value` in the transaction's keyspace when it commits, for `ttl` from the
    /// commit (see [`Db::put_with_ttl`]). Its own reads see the value.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    pub fn put_with_ttl(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        let id = self.db.tree.id;
        let write = Write::PutWithTtl(value.as_ref().to_vec(), ttl);
        self.buffer(id, key.as_ref(), write)
    }

    /// [`put_with_ttl`](Self::put_with_ttl) in `keyspace`.
    ///
    /// # Errors
    /// As [`put_in`](Self::put_in).
    pub fn put_with_ttl_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        self.check_store(keyspace)?;
        let write = Write::PutWithTtl(value.as_ref().to_vec(), ttl);
        self.buffer(keyspace.id(), key.as_ref(), write)
    }

    /// Removes `key` from the transaction's keyspace when it commits.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let id = self.db.tree.id;
        self.buffer(id, key.as_ref(), Write::Delete)
    }

    /// [`delete`](Self::delete) in `keyspace`.
    ///
    /// # Errors
    /// As [`put_in`](Self::put_in).
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        self.check_store(keyspace)?;
        self.buffer(keyspace.id(), key.as_ref(), Write::Delete)
    }

    /// Removes every key of `range` (any range [`Db::scan`] takes) from the transaction's
    /// keyspace when it commits, as [`Db::delete_range`] does. Its own reads see the keys gone
    /// at once, except those it writes afterwards. The range joins what the commit checks, as a
    /// scanned range does: the commit fails with [`Error::Conflict`] if anyone else wrote a key
    /// inside it after the snapshot.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("cart:1:apple", "2")?;
    /// db.put("cart:1:pear", "1")?;
    /// let mut tx = db.transaction();
    /// tx.delete_range("cart:1:".."cart:1;")?;
    /// tx.put("cart:1:plum", "3")?;
    /// assert_eq!(tx.scan("cart:1:".."cart:1;").count(), 1); // its own reads see it
    /// tx.commit()?;
    /// assert_eq!(db.get("cart:1:apple")?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `Error::InvalidArgument` for a bound over 64 KiB (as [`Db::put`]'s key).
    pub fn delete_range<R: KeyRange>(&mut self, range: R) -> Result<()> {
        let id = self.db.tree.id;
        self.delete_range_of(id, range)
    }

    /// [`delete_range`](Self::delete_range) in `keyspace`.
    ///
    /// # Errors
    /// As [`delete_range`](Self::delete_range); `Error::InvalidArgument` for a keyspace of
    /// another store.
    pub fn delete_range_in<R: KeyRange>(&mut self, keyspace: &Keyspace, range: R) -> Result<()> {
        self.check_store(keyspace)?;
        self.delete_range_of(keyspace.id(), range)
    }

    /// The keys of `range` in the transaction's keyspace and their values, in key order: the
    /// snapshot's, with the transaction's own writes merged in (a key it put appears with its
    /// value, a key it deleted does not). The whole range joins what the commit checks, however
    /// much of it is read.
    pub fn scan<R: KeyRange>(&mut self, range: R) -> TransactionScan {
        let Transaction {
            db,
            snapshot,
            writes,
            deleted,
            check,
        } = self;
        scan(db, snapshot, writes, deleted, check, range)
    }

    /// [`scan`](Self::scan) in `keyspace`. A keyspace of another store yields one
    /// `Error::InvalidArgument`.
    pub fn scan_in<R: KeyRange>(&mut self, keyspace: &Keyspace, range: R) -> TransactionScan {
        if let Err(e) = self.check_store(keyspace) {
            return TransactionScan::refused(e);
        }
        scan(
            keyspace,
            &self.snapshot,
            &self.writes,
            &self.deleted,
            &mut self.check,
            range,
        )
    }

    /// Applies the transaction's writes atomically, unless another write got in their way.
    /// A transaction that wrote nothing commits at once (its reads were of one snapshot).
    ///
    /// # Errors
    /// - [`Error::Conflict`] if a key it read or wrote, or a key in a range it scanned or
    ///   deleted, was written by someone else after its snapshot: nothing was applied; run it
    ///   again;
    /// - otherwise as [`Db::write`] (an oversized key or value, a dropped keyspace, I/O …).
    pub fn commit(self) -> Result<()> {
        self.commit_opt(&WriteOptions::default()).map(drop)
    }

    /// [`commit`](Self::commit) with `options` (`sync: true` returns once the WAL is fsynced).
    /// Returns the sequence number of the transaction's last write, `None` if it wrote nothing:
    /// committed transactions are serializable in the order of these numbers (one that wrote
    /// nothing, at its snapshot's [`sequence`](Snapshot::sequence)).
    ///
    /// # Errors
    /// As [`commit`](Self::commit).
    pub fn commit_opt(self, options: &WriteOptions) -> Result<Option<u64>> {
        let Transaction {
            db,
            snapshot,
            writes,
            deleted,
            mut check,
        } = self;
        if writes.is_empty() && deleted.is_empty() {
            db.inner.check_open()?;
            return Ok(None);
        }
        let store = db.inner.store_id;
        let mut batch = WriteBatch::new();
        // The range deletions first: the writes left came after them.
        for (id, start, end) in &deleted {
            batch.range_deletion(Target::In(*id, store), start, end.as_deref());
        }
        for ((id, key), write) in writes {
            write.add_to(&mut batch, Target::In(id, store), &key);
            check.keys.insert((id, key));
        }
        let committed = db.write_checked(batch, options, Some(Box::new(check)));
        // The snapshot is held until the check ran: compactions kept every version it needs.
        drop(snapshot);
        if committed.is_ok() {
            db.inner.stats.inc(Ticker::TransactionCommits);
        }
        committed
    }

    /// Discards the transaction's writes (as dropping it does).
    pub fn rollback(self) {}

    /// Buffers `write` of `key` in keyspace `id`, after checking the key's and value's sizes.
    fn buffer(&mut self, id: u32, key: &[u8], write: Write) -> Result<()> {
        let value = match &write {
            Write::Put(v) | Write::PutWithTtl(v, _) => v.len(),
            Write::Delete => 0,
            Write::Merge { operands, .. } => operands.last().map_or(0, Vec::len),
        };
        check_sizes(key.len(), value)?;
        self.writes.insert((id, key.to_vec()), write);
        Ok(())
    }

    /// Buffers the deletion of `range` in keyspace `id`, and checks the range at commit.
    fn delete_range_of<R: KeyRange>(&mut self, id: u32, range: R) -> Result<()> {
        let Some((start, end)) = range_deletion_bounds(range) else {
            return Ok(());
        };
        check_sizes(start.len().max(end.as_ref().map_or(0, Vec::len)), 0)?;
        // The buffered writes it covers are deleted by it: they need not be written.
        let covered: Vec<(u32, Vec<u8>)> = self
            .writes
            .range((id, start.clone())..)
            .take_while(|((ks, k), _)| *ks == id && end.as_ref().is_none_or(|e| k < e))
            .map(|(k, _)| k.clone())
            .collect();
        for k in covered {
            self.writes.remove(&k);
        }
        let upper = end.clone().map_or(Bound::Unbounded, Bound::Excluded);
        self.check
            .ranges
            .push((id, Bound::Included(start.clone()), upper));
        self.deleted.push((id, start, end));
        Ok(())
    }

    /// `Ok` if `keyspace` is of the transaction's store.
    fn check_store(&self, keyspace: &Keyspace) -> Result<()> {
        if !Arc::ptr_eq(&keyspace.inner, &self.db.inner) {
            return Err(Error::InvalidArgument(
                "the transaction uses a keyspace of another store".into(),
            ));
        }
        Ok(())
    }
}

/// A buffered write.
#[derive(Debug, Clone)]
enum Write {
    Put(Vec<u8>),
    PutWithTtl(Vec<u8>, Duration),
    Delete,
    /// Merge operands, oldest first, on the write beneath them (`None`: on the snapshot's
    /// value; never another merge), see `merges.rs`.
    Merge {
        under: Option<Box<Write>>,
        operands: Vec<Vec<u8>>,
    },
}

impl Write {
    /// Adds the write of `key` to `batch`, to `to`.
    fn add_to(&self, batch: &mut WriteBatch, to: Target, key: &[u8]) {
        match self {
            Write::Put(v) => batch.put_to(to, key, v),
            Write::PutWithTtl(v, ttl) => batch.put_with_ttl_to(to, key, v, *ttl),
            Write::Delete => batch.delete_to(to, key),
            Write::Merge { under, operands } => {
                if let Some(under) = under {
                    under.add_to(batch, to, key);
                }
                for op in operands {
                    batch.merge_to(to, key, op);
                }
                batch
            }
        };
    }
}

/// Buffered writes by keyspace id and key.
type Writes = BTreeMap<(u32, Vec<u8>), Write>;

/// Buffered range deletions: keyspace id, start, end (`None`: no end).
type RangeDeletes = Vec<(u32, Vec<u8>, Option<Vec<u8>>)>;

/// The ranges of `deleted` in keyspace `id`.
fn deleted_in(deleted: &RangeDeletes, id: u32) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    deleted
        .iter()
        .filter(|(ks, _, _)| *ks == id)
        .map(|(_, start, end)| (start.clone(), end.clone()))
        .collect()
}

/// A transaction's read of `key` in the keyspace of `db`: its own write, else nothing if its
/// range deletions cover it, else the snapshot's value (and the key joins `check`).
fn read(
    db: &Db,
    snapshot: &Snapshot,
    writes: &Writes,
    deleted: &RangeDeletes,
    check: &mut ConflictCheck,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    let id = db.tree.id;
    let entry = (id, key.to_vec());
    if let Some(written) = writes.get(&entry) {
        return merges::seen(db, key, written, || {
            let value = db.get_at(snapshot, key)?;
            check.keys.insert(entry.clone());
            Ok(value)
        });
    }
    let covered = deleted.iter().any(|(ks, start, end)| {
        *ks == id && key >= start.as_slice() && end.as_deref().is_none_or(|e| key < e)
    });
    if covered {
        // Its own deletion decides, and the commit checks the whole range.
        return Ok(None);
    }
    let value = db.get_at(snapshot, key)?;
    check.keys.insert(entry);
    Ok(value)
}

/// A transaction's scan of `range` in the keyspace of `db`: the snapshot's entries with the
/// transaction's writes and range deletions in the range merged in (and the range joins
/// `check`).
fn scan<R: KeyRange>(
    db: &Db,
    snapshot: &Snapshot,
    writes: &Writes,
    deleted: &RangeDeletes,
    check: &mut ConflictCheck,
    range: R,
) -> TransactionScan {
    let id = db.tree.id;
    let (start, end) = range.into_bounds();
    let lo = match &start {
        Bound::Included(k) => Bound::Included((id, k.clone())),
        Bound::Excluded(k) => Bound::Excluded((id, k.clone())),
        Bound::Unbounded => Bound::Included((id, Vec::new())),
    };
    let own = writes
        .range((lo, Bound::Unbounded))
        .take_while(|((ks, k), _)| *ks == id && crate::key_range::below_end(k, as_ref(&end)))
        .map(|((_, k), w)| (k, w));
    let own = match merges::own_in_range(db, snapshot, own) {
        Ok(own) => own,
        Err(e) => return TransactionScan::refused(e),
    };
    let base = db.scan_at(snapshot, (start.clone(), end.clone()));
    check.ranges.push((id, start, end));
    TransactionScan::new(base, own, deleted_in(deleted, id))
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}
