//! Transactions: optimistic, serializable read-modify-write across keyspaces. A transaction
//! reads at a snapshot plus its own buffered writes, remembers what it read, and commits its
//! writes as one batch through the group commit, whose leader first checks (`conflict.rs`) that
//! nothing it read or wrote changed since the snapshot. `helpers.rs` holds `Db::update` and
//! `Db::compare_and_swap`, which retry on conflict.

mod conflict;
mod helpers;
mod scan;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

pub(crate) use conflict::{ConflictCheck, GroupWrites};
pub use scan::TransactionScan;

use super::{Db, KeyRange, Keyspace, Snapshot};
use crate::error::{Error, Result};
use crate::options::WriteOptions;
use crate::stats::Ticker;
use crate::write_batch::WriteBatch;

/// An optimistic transaction: reads and writes across the store's keyspaces that commit all
/// together, or not at all if another write got in their way. Begin one with
/// [`Db::transaction`].
///
/// **Reads** ([`get`](Self::get), [`scan`](Self::scan) and their `_in` forms) see the store as
/// it was when the transaction began (a [`Snapshot`], held until the transaction ends) with the
/// transaction's own writes on top: a key it wrote reads as written, and its scans merge its
/// writes into the snapshot's keys. **Writes** ([`put`](Self::put), [`delete`](Self::delete))
/// are buffered in memory; nothing reaches the store before [`commit`](Self::commit), which
/// applies them as one [`WriteBatch`] (one WAL record: after a crash all of them are there or
/// none). [`rollback`](Self::rollback), or dropping the transaction, discards them.
///
/// `get`, `put`, `delete` and `scan` act on the keyspace of the handle the transaction began
/// from (the default keyspace for a `Db`, the keyspace's own for a [`Keyspace`]); `get_in`,
/// `put_in`, `delete_in` and `scan_in` on any keyspace of the store.
///
/// # Isolation: serializable
///
/// `commit` succeeds only if no key the transaction read or wrote, and no key in a range it
/// scanned, was written by anyone else after its snapshot; otherwise it returns
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
    /// Buffered writes by keyspace id and key: a value, or `None` for a delete.
    writes: Writes,
    /// What the commit must find unchanged: the keys read and the ranges scanned (the keys
    /// written join them at commit).
    check: ConflictCheck,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("snapshot", &self.snapshot.sequence())
            .field("writes", &self.writes.len())
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
            check,
        } = self;
        read(db, snapshot, writes, check, key.as_ref())
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
            &mut self.check,
            key.as_ref(),
        )
    }

    /// Sets `key` to `value` in the transaction's keyspace when it commits.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let id = self.db.tree.id;
        self.writes
            .insert((id, key.as_ref().to_vec()), Some(value.as_ref().to_vec()));
    }

    /// [`put`](Self::put) in `keyspace`.
    ///
    /// # Errors
    /// `Error::InvalidArgument` for a keyspace of another store.
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.check_store(keyspace)?;
        self.writes.insert(
            (keyspace.id(), key.as_ref().to_vec()),
            Some(value.as_ref().to_vec()),
        );
        Ok(())
    }

    /// Removes `key` from the transaction's keyspace when it commits.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        let id = self.db.tree.id;
        self.writes.insert((id, key.as_ref().to_vec()), None);
    }

    /// [`delete`](Self::delete) in `keyspace`.
    ///
    /// # Errors
    /// `Error::InvalidArgument` for a keyspace of another store.
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        self.check_store(keyspace)?;
        self.writes
            .insert((keyspace.id(), key.as_ref().to_vec()), None);
        Ok(())
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
            check,
        } = self;
        scan(db, snapshot, writes, check, range)
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
            &mut self.check,
            range,
        )
    }

    /// Applies the transaction's writes atomically, unless another write got in their way.
    /// A transaction that wrote nothing commits at once (its reads were of one snapshot).
    ///
    /// # Errors
    /// - [`Error::Conflict`] if a key it read or wrote, or a key in a range it scanned, was
    ///   written by someone else after its snapshot: nothing was applied; run it again;
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
            mut check,
        } = self;
        if writes.is_empty() {
            db.inner.check_open()?;
            return Ok(None);
        }
        let store = db.inner.store_id;
        let mut batch = WriteBatch::new();
        for ((id, key), value) in writes {
            match &value {
                Some(v) => batch.put_to(id, store, &key, v),
                None => batch.delete_to(id, store, &key),
            };
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

/// Buffered writes by keyspace id and key: a value, or `None` for a delete.
type Writes = BTreeMap<(u32, Vec<u8>), Option<Vec<u8>>>;

/// A transaction's read of `key` in the keyspace of `db`: its own write, else the snapshot's
/// value (and the key joins `check`).
fn read(
    db: &Db,
    snapshot: &Snapshot,
    writes: &Writes,
    check: &mut ConflictCheck,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    let entry = (db.tree.id, key.to_vec());
    if let Some(written) = writes.get(&entry) {
        return Ok(written.clone());
    }
    let value = db.get_at(snapshot, key)?;
    check.keys.insert(entry);
    Ok(value)
}

/// A transaction's scan of `range` in the keyspace of `db`: the snapshot's entries with the
/// transaction's writes in the range merged in (and the range joins `check`).
fn scan<R: KeyRange>(
    db: &Db,
    snapshot: &Snapshot,
    writes: &Writes,
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
    let own: Vec<(Vec<u8>, Option<Vec<u8>>)> = writes
        .range((lo, Bound::Unbounded))
        .take_while(|((ks, k), _)| *ks == id && crate::db::key_range::below_end(k, as_ref(&end)))
        .map(|((_, k), v)| (k.clone(), v.clone()))
        .collect();
    let base = db.scan_at(snapshot, (start.clone(), end.clone()));
    check.ranges.push((id, start, end));
    TransactionScan::new(base, own)
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}
